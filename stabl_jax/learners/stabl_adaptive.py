"""Adaptive StABL: Algorithm 1 of Lu et al. (ICLR 2024) with data-dependent step sizes, two
queries per round, no tuned constant.

:class:`~stabl_jax.learners.stabl_anytime.StABLAnytime` with rates from the second moments
``V_k``, ``R_k`` since the restart: self-confident expert rates (Auer, Cesa-Bianchi & Gentile
2002, Lemma 3.5; a heuristic for unbounded importance weights) and ML-Prod's adaptive meta rates
(Gaillard, Stoltz & van Erven, COLT 2014, eq. (7)). ``|r~| <= E_t = 2 B_t`` and
``eta <= 1/(2 E_t)`` give ``1 + eta r~ >= 1/2``: at ``meta_lr_scale <= 1`` nothing is muted.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax.learners.stabl_anytime import StABLAnytime, StABLAnytimeParams

#: Sweepable numbers (1 by default: nothing is tuned), as anytime StABL's.
StABLAdaptiveParams = StABLAnytimeParams


@chex.dataclass(frozen=True)
class StABLAdaptiveState:
    t: jax.Array  # () int32, rounds played so far
    expert_log_probs: jax.Array  # (B, num_arms) float, log v(t, k), each row normalised
    meta_log_pseudo: jax.Array  # (B,) float, log w~_t(k) (ML-Prod pseudo-weight); -inf = muted
    expert_second_moment: jax.Array  # (B,) float, V_k(t) since the restart
    meta_second_moment: jax.Array  # (B,) float, R_k(t) = sum r~^2 since the restart
    num_muted: jax.Array  # () int32, active experts' updates with 1 + eta r~ <= 0 so far
    params: StABLAnytimeParams


@dataclasses.dataclass(frozen=True)
class StABLAdaptive(StABLAnytime):
    """StABL with data-dependent step sizes, two queries per round.

    Round ``t``, with ``A_t``, ``B_t`` and ``P(t)`` as in
    :class:`~stabl_jax.learners.stabl_anytime.StABLAnytime` and ``E_t = 2 B_t``:

    - rates ``eta'_k(t) = sqrt(ln n / (1 + V_k))``, ``eta_k(t) = min(1/(2 E_t),
      1/sqrt(E_t^2 + R_k))`` (each times its scale);
    - (8-11) ``p(t)_k ∝ eta_k(t) w~_t(k)`` on ``A_t``, ``x_t ~ mix`` played, ``x'_t ~ P(t)``
      observed, ``l_hat`` as StABL;
    - (12) ``log v <- a'_k (log v - eta'_k(t) l_hat)`` normalised, ``a'_k = eta'_k(t+1) /
      eta'_k(t)``, after ``V_k += v(t,k)_{x'} l_hat(x')^2``;
    - (13) ``r~_t(k) = l_hat^T mix - l_hat^T v(t,k)``; ``log w~ <- a_k (log w~ + log(1 +
      eta_k(t) r~))``, ``a_k = eta_k(t+1) / eta_k(t)`` after ``R_k += r~^2``;
    - restarts at ``(t + 1) % L_k == 0``: ``v = 1/n``, ``w~ = 1``, ``V = R = 0``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = StABLAdaptive(num_arms=5, horizon=64)
      >>> state = learner.init(jax.random.key(0))
      >>> [round(float(x), 4) for x in learner.rates(state)[0]]  # sqrt(ln 5), V = 0
      [1.2686, 1.2686]
      >>> state, info = jax.jit(learner.step)(state, jnp.linspace(0, 1, 5), jax.random.key(1))
      >>> info.arms.shape, int(state.num_muted)
      ((2,), 0)
    """

    name: ClassVar[str] = "stabl_adaptive"

    def smallest_base_meta_step_size(self) -> float:
        """``min(1/(2 E), 1/(E sqrt m))``, ``E = 2 B``, ``m = min(L_B, T)``: a lower bound of
        every meta rate (``|r~| <= E`` and ``R_k`` sums at most ``m - 1`` of them)."""
        e = 2.0 * self.num_experts
        return min(0.5 / e, 1.0 / (e * math.sqrt(self._longest_block())))

    def _expert_rate_from(self, second_moment: jax.Array) -> jax.Array:
        """``(B,)`` ``sqrt(ln n / (1 + V))``, before scaling."""
        return math.sqrt(math.log(self.num_arms)) * jax.lax.rsqrt(1.0 + second_moment)

    def _meta_rate_from(self, second_moment: jax.Array, t: jax.Array) -> jax.Array:
        """``(B,)`` ``min(1/(2 E_t), 1/sqrt(E_t^2 + R))``, ``E_t = 2 B_t``, before scaling."""
        e = 2.0 * jnp.sum(self.active(t)).astype(self.float_dtype)
        return jnp.minimum(0.5 / e, jax.lax.rsqrt(e * e + second_moment))

    def rates(self, state: StABLAdaptiveState) -> tuple[jax.Array, jax.Array]:
        """``(eta', eta)``, each ``(B,)``: the scaled expert and meta rates of round ``state.t``."""
        p = state.params
        expert = p.expert_lr_scale * self._expert_rate_from(state.expert_second_moment)
        meta = p.meta_lr_scale * self._meta_rate_from(state.meta_second_moment, state.t)
        return expert, meta

    def _init(self, key: jax.Array, params: StABLAnytimeParams) -> StABLAdaptiveState:
        zeros = jnp.zeros((self.num_experts,), self.float_dtype)
        return StABLAdaptiveState(
            **super()._init(key, params),
            expert_second_moment=zeros,
            meta_second_moment=zeros,
        )

    def meta_rates(self, state: StABLAdaptiveState) -> jax.Array:
        """``(B,)`` the meta rates of :meth:`rates`."""
        return self.rates(state)[1]

    def _round_rates(
        self, state: Any, v_at_arm: jax.Array, value: jax.Array, regret_gain: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        """The rates at the sums before the round; the powers from the sums after it,
        ``V_k += v(t,k)_{x'} l_hat(x')^2`` and ``R_k += r~_t(k)^2`` (returned as the sums)."""
        t, t_next = state.t, state.t + 1
        expert_rate, eta = self.rates(state)
        meta_moment = state.meta_second_moment + regret_gain * regret_gain
        base = self._meta_rate_from(state.meta_second_moment, t)
        meta_power = self._meta_rate_from(meta_moment, t_next) / base
        old = state.expert_second_moment
        expert_moment = old + v_at_arm * value * value
        expert_power = self._expert_rate_from(expert_moment) / self._expert_rate_from(old)
        sums = {"expert_second_moment": expert_moment, "meta_second_moment": meta_moment}
        return expert_rate, expert_power, eta, meta_power, sums
