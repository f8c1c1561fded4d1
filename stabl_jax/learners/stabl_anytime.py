"""Anytime StABL: Algorithm 1 of Lu et al. (ICLR 2024) with every step size set from the rounds
``tau_k = t mod L_k`` since expert ``k``'s restart; two queries per round, no tuned constant.

Changes from :class:`~stabl_jax.learners.stabl.StABL`:

- expert rate ``eta'_k(t) = sqrt(ln n / ((tau_k + 1) n 2 B_t))``: anytime EXP3 (Bubeck &
  Cesa-Bianchi 2012, Thm 3.1).
- meta rate ``eta_k(t) = min(1/(2 sqrt n), 1/sqrt(n (tau_k + 1)))``; ML-Prod meta update
  (Gaillard, Stoltz & van Erven, COLT 2014), which keeps ``sum_k p(t)_k r~_t(k) = 0`` (Step 3
  of the paper's proof). An expert with ``1 + eta r~ <= 0`` is muted until its restart.
- only the active experts ``A_t`` (those not exact copies of another) enter ``mix``, ``P(t)``
  and ``B_t``.

Reward feedback follows StABL's convention (``v ∝ exp(+eta' G_hat)``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, estimators
from stabl_jax.learners.base import BanditLearner, BanditQuery, sample_query
from stabl_jax.learners.ensemble import Ensemble, EnsembleParams, tree_select


@chex.dataclass(frozen=True)
class StABLAnytimeParams(EnsembleParams):
    """Sweepable numbers of :class:`StABLAnytime`: the scales of ``eta'_k(t)`` and ``eta_k(t)``."""


@chex.dataclass(frozen=True)
class StABLAnytimeState:
    t: jax.Array  # () int32, rounds played so far
    expert_log_probs: jax.Array  # (B, num_arms) float, log v(t, k), each row normalised
    meta_log_pseudo: jax.Array  # (B,) float, log w~_t(k) (ML-Prod pseudo-weight); -inf = muted
    num_muted: jax.Array  # () int32, active experts' updates with 1 + eta r~ <= 0 so far
    params: StABLAnytimeParams


@dataclasses.dataclass(frozen=True)
class StABLAnytime(Ensemble, BanditLearner):
    """StABL with anytime step sizes (module docstring): two queries per round.

    Per round ``t`` (lines of Algorithm 1), with ``tau_k = t mod L_k``:

    - active experts ``A_t = {1} ∪ {k >= 2 : t >= L_{k-1}}``, ``B_t = |A_t|``;
    - (8) ``p(t)_k ∝ eta_k(t) w~_t(k)`` on ``A_t``; ``mix = sum_k p(t)_k v(t,k)``;
    - (9) ``P(t)_i = max_{k∈A_t} v(t,k)_i^2 / (2 sum_j max_{k∈A_t} v(t,k)_j^2)
      + sum_{k∈A_t} v(t,k)_i / (2 B_t)``;
    - (10-11) ``x_t ~ mix`` played, ``x'_t ~ P(t)`` observed, ``l_hat`` as StABL;
    - (12) every expert: ``log v <- a'_k (log v - eta'_k(t) l_hat)`` normalised, with
      ``a'_k = eta'_k(t+1) / eta'_k(t)``;
    - (13) ``r~_t(k) = l_hat^T mix - l_hat^T v(t,k)``;
      ``log w~ <- a_k (log w~ + log(1 + eta_k(t) r~_t(k)))``, ``a_k = eta_k(t+1) / eta_k(t)``
      (``-inf`` when ``1 + eta_k(t) r~ <= 0``);
    - restarts at ``(t + 1) % L_k == 0``: ``v = 1/n``, ``w~ = 1``.

    Attributes:
      history_lengths: ``L_1 < ... < L_B``; ``None``: StABL's geometric default for
        ``horizon`` (the only use of the horizon).
      feedback: ``"loss"`` or ``"reward"``, as StABL's.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = StABLAnytime(num_arms=5, horizon=64)
      >>> learner.history_lengths, learner.num_queries
      ((32, 64), 2)
      >>> state = learner.init(jax.random.key(0))
      >>> int(learner.active(state.t).sum())
      1
      >>> state, info = jax.jit(learner.step)(state, jnp.linspace(0, 1, 5), jax.random.key(1))
      >>> info.arms.shape
      (2,)
    """

    feedback: estimators.Feedback = "loss"

    num_queries: ClassVar[int] = 2
    name: ClassVar[str] = "stabl_anytime"
    Params: ClassVar[type] = StABLAnytimeParams
    round_offset: ClassVar[int] = 0  # blocks [s L_k, (s+1) L_k - 1], as StABL's default

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_choice("feedback", self.feedback, estimators.FEEDBACKS)

    def smallest_base_meta_step_size(self) -> float:
        """``min(1/(2 sqrt n), 1/sqrt(n min(L_B, T)))``: the smallest meta rate of any round."""
        n = self.num_arms
        return min(1.0 / (2.0 * math.sqrt(n)), 1.0 / math.sqrt(n * self._longest_block()))

    def _longest_block(self) -> int:
        """``min(L_B, T)``: the most rounds an expert plays between restarts."""
        return min(max(self._history_lengths), self.horizon)

    def active(self, t: jax.Array) -> jax.Array:
        """``(B,)`` bool ``A_t``: the first expert and every ``k >= 1`` with ``t >= L_{k-1}``."""
        previous = jnp.asarray((0, *self.history_lengths[:-1]), jnp.int32)  # type: ignore[index]
        return t >= previous

    def rounds_since_restart(self, t: jax.Array) -> jax.Array:
        """``(B,)`` int32 ``tau_k = t mod L_k``."""
        return t % jnp.asarray(self.history_lengths, jnp.int32)

    def _meta_rate(self, tau: jax.Array) -> jax.Array:
        """``(B,)`` ``min(1/(2 sqrt n), 1/sqrt(n (tau + 1)))``, before scaling."""
        n = self.num_arms
        steps = (tau + 1).astype(self.float_dtype)
        return jnp.minimum(1.0 / (2.0 * math.sqrt(n)), jax.lax.rsqrt(n * steps))

    def _expert_rate(self, tau: jax.Array, num_active: jax.Array) -> jax.Array:
        """``(B,)`` ``sqrt(ln n / ((tau + 1) n 2 B_t))``, before scaling."""
        n = self.num_arms
        steps = (tau + 1).astype(self.float_dtype) * num_active.astype(self.float_dtype)
        return jnp.sqrt(math.log(n) / (2.0 * n)) * jax.lax.rsqrt(steps)

    def _init(self, key: jax.Array, params: StABLAnytimeParams) -> Any:
        del key
        return StABLAnytimeState(
            t=jnp.zeros((), jnp.int32),
            expert_log_probs=self.fresh_experts(),
            meta_log_pseudo=jnp.zeros((self.num_experts,), self.float_dtype),
            num_muted=jnp.zeros((), jnp.int32),
            params=params,
        )

    def meta_rates(self, state: Any) -> jax.Array:
        """``(B,)`` the meta rates ``eta_k`` of this round (subclasses set them otherwise)."""
        return state.params.meta_lr_scale * self._meta_rate(self.rounds_since_restart(state.t))

    def distributions(
        self, state: StABLAnytimeState
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """The round's distributions (lines 8-9 on the active experts)."""
        active = self.active(state.t)
        eta = self.meta_rates(state)
        logits = jnp.where(active, jnp.log(eta) + state.meta_log_pseudo, -jnp.inf)
        meta = jax.nn.softmax(logits)
        v = jnp.exp(state.expert_log_probs)
        mix = meta @ v
        v_active = jnp.where(active[:, None], v, 0.0)
        top = jnp.max(v_active, axis=0)
        top_sq = top * top
        num_active = jnp.sum(active).astype(self.float_dtype)
        obs = 0.5 * top_sq / jnp.sum(top_sq) + jnp.sum(v_active, axis=0) / (2.0 * num_active)
        return v, meta, mix, obs

    def _ask(self, state: StABLAnytimeState, key: jax.Array) -> BanditQuery:
        _, _, mix, obs = self.distributions(state)
        return sample_query(key, mix, obs)

    def _round_rates(
        self, state: Any, v_at_arm: jax.Array, value: jax.Array, regret_gain: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        """This round's rates, each ``(B,)``, from ``v(t,k)_{x'}``, the signed estimate and
        ``r~_t(k)``.

        Returns:
          ``(eta'(t), a', eta(t), a, sums)``: the scaled expert and meta rates, the powers
          ``a'_k = eta'_k(t+1) / eta'_k(t)`` and ``a_k = eta_k(t+1) / eta_k(t)`` (restarting
          experts are reset anyway) and the running sums after the round by field name.
        """
        params = state.params
        tau = self.rounds_since_restart(state.t)
        eta = params.meta_lr_scale * self._meta_rate(tau)
        meta_power = self._meta_rate(tau + 1) / self._meta_rate(tau)
        rate = self._expert_rate(tau, jnp.sum(self.active(state.t)))
        expert_power = self._expert_rate(tau + 1, jnp.sum(self.active(state.t + 1))) / rate
        return params.expert_lr_scale * rate, expert_power, eta, meta_power, {}

    def _tell(self, state: Any, query: BanditQuery, observed: jax.Array) -> Any:
        """Lines 11-13 from the observed arm's loss only (``observed[1]``), with the rates of
        :meth:`_round_rates`."""
        arm = query.arms[1]
        value = estimators.signed_estimate(observed[1], query.query_probs[1], self.feedback)
        t_next = state.t + 1
        v_at_arm = jnp.exp(state.expert_log_probs[:, arm])
        regret_gain = value * (v_at_arm - query.play_probs[arm])
        expert_rate, expert_power, eta, meta_power, sums = self._round_rates(
            state, v_at_arm, value, regret_gain
        )

        # Line 13 with ML-Prod: log w~ <- (eta(t+1)/eta(t)) (log w~ + log(1 + eta(t) r~)).
        meta, _ = estimators.meta_log_update(state.meta_log_pseudo, eta, regret_gain)
        meta = meta_power * meta
        # Muting events of the active experts only (the inactive ones are their copies).
        active = self.active(state.t)
        muted = jnp.sum((1.0 + eta * regret_gain <= 0.0) & active, dtype=jnp.int32)

        # Line 12, anytime EXP3: Algorithm 2's step at eta'(t), then the power eta'(t+1)/eta'(t).
        experts = estimators.exp3_log_update(state.expert_log_probs, arm, value, expert_rate)
        experts = expert_power[:, None] * experts
        experts = experts - jax.scipy.special.logsumexp(experts, axis=-1, keepdims=True)

        # Restarts at t + 1: v = 1/n, w~ = 1 and every running sum 0.
        restart = self.restarts(t_next)
        experts = tree_select(restart, self.fresh_experts(), experts)
        meta = jnp.where(restart, 0.0, meta)
        f = self.float_dtype
        return dataclasses.replace(
            state,
            t=t_next,
            expert_log_probs=experts.astype(f),
            meta_log_pseudo=meta.astype(f),
            **{name: jnp.where(restart, 0.0, x).astype(f) for name, x in sums.items()},
            num_muted=state.num_muted + muted,
        )
