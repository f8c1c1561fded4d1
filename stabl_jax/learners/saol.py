"""SAOL, the Strongly Adaptive Online Learner (Algorithm 1 of Daniely, Gonen and Shalev-Shwartz,
"Strongly adaptive online learning", ICML 2015), on StABL's geometric intervals.

SAOL runs one base learner per history length ``L_k`` (restarted every ``L_k`` rounds) and
mixes them with the restarted multiplicative update that StABL copies (Algorithm 1 of Lu et al.,
ICLR 2024, line 13): a (re)started expert gets weight ``w(k) = eta_k`` and afterwards
``w_{t+1}(k) = w_t(k) (1 + eta_k r_t(k))`` with ``r_t(k)`` expert ``k``'s instantaneous regret
against the mixture. Both learners here use :func:`stabl_jax.intervals.resolve_history_lengths`
and :func:`stabl_jax.intervals.restart_mask` (same lengths, blocks and ``round_offset`` as
:class:`~stabl_jax.learners.stabl.StABL`) and :func:`stabl_jax.estimators.meta_log_update`.

Two base learners, two feedback models:

- :class:`SAOLHedge` (``"saol_hedge"``): Hedge experts, full information (``n`` queries per
  round, as :class:`~stabl_jax.learners.hedge.Hedge`); the meta-learner gets the exact
  ``r_t(k) = <mix_t, l_t> - <v(t,k), l_t>``.
- :class:`SAOL` (``"saol"``): EXP3 experts, bandit feedback, the query-hungry SAOL-style
  learner of Table 1 of Lu et al. (``O(log T)`` queries): every expert draws its own arm
  ``y_k ~ v(t,k)`` and observes ``l_t(y_k)``; ``1 + B`` queries per round.

Step sizes (``L_k`` the history length, ``n`` arms, ``B`` experts):

==============================  =================================================================
quantity                        choice
==============================  =================================================================
meta ``eta_k`` (both)           SAOL's ``min(1/2, 1/sqrt(L_k))`` (Daniely et al., Algorithm 1,
                                ``eta_I = min{1/2, |I|^{-1/2}}``). Lu et al.'s
                                ``min(1/(2 sqrt n), 1/sqrt(n L_k))`` carries ``sqrt n`` because
                                their importance-weighted ``r~`` has second moment ``O(n log T)``;
                                here ``|r| <= 1``, so the ``n`` drops out and
                                ``1 + eta_k r >= 1/2 > 0``: no muting at scale 1.
Hedge expert rate               ``sqrt(8 ln n / L_k)``, Hedge tuned for ``L_k`` rounds
                                (:mod:`stabl_jax.learners.hedge`).
EXP3 expert rate                the Lemma's ``sqrt(ln n / (L_k n C))`` with ``C = 1``: expert
                                ``k`` samples from its own ``v(t,k)`` (``z = v`` in the Lemma).
==============================  =================================================================

Bandit SAOL's meta regret. ``r~_t(k) = sum_j p(t)_j l_t(y_j) - l_t(y_k)``: unbiased for
``<mix_t, l_t> - <v(t,k), l_t>`` because ``E l_t(y_j) = <v(t,j), l_t>``, bounded by 1 in absolute
value, no importance weights. The played arm's loss is suffered but, as in StABL, not used for
learning. With ``feedback="reward"`` only the experts change (EXP3 with gains); ``r~`` is the
same for gains (``sum_j p_j = 1``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, estimators, intervals, sampling
from stabl_jax.learners.base import BanditLearner, BanditQuery
from stabl_jax.learners.hedge import full_information_query, loss_vector


@chex.dataclass(frozen=True)
class SAOLParams:
    """Sweepable numbers of :class:`SAOL` and :class:`SAOLHedge`.

    Attributes:
      expert_lr_scale: ``()`` multiplies every expert's learning rate.
      meta_lr_scale: ``()`` multiplies every meta step size ``eta_k`` (also the restart
        weight ``w(k) = eta_k``).
    """

    expert_lr_scale: jax.Array
    meta_lr_scale: jax.Array


@chex.dataclass(frozen=True)
class SAOLState:
    t: jax.Array  # () int32, rounds played so far
    expert_log_probs: jax.Array  # (B, num_arms) float, log v(t, k), each row normalised
    meta_log_weights: jax.Array  # (B,) float, log w_t(k), unnormalised; -inf = muted
    num_muted: jax.Array  # () int32, meta updates with 1 + eta_k r <= 0 (needs a scale >= 2)
    params: SAOLParams


@dataclasses.dataclass(frozen=True)
class _SAOLBase(BanditLearner):
    """Geometric experts, SAOL's meta step sizes and the restarted multiplicative update."""

    history_lengths: tuple[int, ...] | None = None
    round_offset: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        lengths = intervals.resolve_history_lengths(self.history_lengths, self.horizon)
        object.__setattr__(self, "history_lengths", lengths)
        checks.check_choice("round_offset", self.round_offset, (0, 1))

    @property
    def num_experts(self) -> int:
        """``B``, the number of history lengths."""
        return len(self.history_lengths)  # type: ignore[arg-type]

    def _lengths(self) -> np.ndarray:
        return np.asarray(self.history_lengths, dtype=np.float64)

    def base_meta_step_sizes(self) -> np.ndarray:
        """``(B,)`` SAOL's ``eta_k = min(1/2, 1/sqrt(L_k))``, before scaling."""
        return np.minimum(0.5, 1.0 / np.sqrt(self._lengths()))

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B,)`` expert learning rates before scaling (subclasses)."""
        raise NotImplementedError

    @property
    def default_params(self) -> SAOLParams:
        f = self.float_dtype
        return SAOLParams(expert_lr_scale=jnp.asarray(1.0, f), meta_lr_scale=jnp.asarray(1.0, f))

    def _meta_step_sizes(self, params: SAOLParams) -> jax.Array:
        return params.meta_lr_scale * jnp.asarray(self.base_meta_step_sizes(), self.float_dtype)

    def _expert_rates(self, params: SAOLParams) -> jax.Array:
        base = jnp.asarray(self.base_expert_learning_rates(), self.float_dtype)
        return params.expert_lr_scale * base

    def init(self, key: jax.Array, params: SAOLParams | None = None) -> SAOLState:
        del key
        params = self._resolve_params(params)
        b, n = self.num_experts, self.num_arms
        return SAOLState(
            t=jnp.zeros((), jnp.int32),
            expert_log_probs=jnp.full((b, n), -math.log(n), self.float_dtype),
            meta_log_weights=jnp.log(self._meta_step_sizes(params)),
            num_muted=jnp.zeros((), jnp.int32),
            params=params,
        )

    def distributions(self, state: SAOLState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(v, p, mix)``: experts ``(B, n)``, meta ``p(t) = w_t / W_t`` ``(B,)`` and the play
        distribution ``mix = sum_k p(t)_k v(t,k)`` ``(n,)``."""
        v = jnp.exp(state.expert_log_probs)
        meta = jax.nn.softmax(state.meta_log_weights)
        return v, meta, meta @ v

    def _finish(self, state: SAOLState, regret_gain: jax.Array, experts: jax.Array) -> SAOLState:
        """Meta update ``w(k) *= 1 + eta_k r(k)``, then restarts for round ``t + 1``."""
        eta = self._meta_step_sizes(state.params)
        meta, muted = estimators.meta_log_update(state.meta_log_weights, eta, regret_gain)
        t_next = state.t + 1
        restart = intervals.restart_mask(t_next, self.history_lengths, self.round_offset)
        experts = jnp.where(restart[:, None], -math.log(self.num_arms), experts)
        meta = jnp.where(restart, jnp.log(eta), meta)
        return state.replace(
            t=t_next,
            expert_log_probs=experts.astype(self.float_dtype),
            meta_log_weights=meta.astype(self.float_dtype),
            num_muted=state.num_muted + muted,
        )


@dataclasses.dataclass(frozen=True)
class SAOLHedge(_SAOLBase):
    """SAOL over Hedge experts with full information (``n`` queries per round).

    Round ``t``: ``p(t) = w_t / W_t``; play ``x_t ~ mix = sum_k p(t)_k v(t,k)``; observe all
    of ``l_t`` (queries ``(x_t + arange(n)) % n``); ``r_t(k) = <mix, l_t> - <v(t,k), l_t>``;
    ``w_{t+1}(k) = w_t(k) (1 + eta_k r_t(k))``, ``eta_k = min(1/2, 1/sqrt(L_k))``; every expert
    ``v(t+1,k) ∝ v(t,k) exp(-eta'_k l_t)``, ``eta'_k = sqrt(8 ln n / L_k)``; restarts as StABL.

    Attributes:
      history_lengths: ``L_1 < ... < L_B``; ``None``: StABL's geometric default.
      round_offset: 0 (default) or 1, as :class:`~stabl_jax.learners.stabl.StABL`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = SAOLHedge(num_arms=3, horizon=64)
      >>> learner.history_lengths, learner.num_queries
      ((32, 64), 3)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = learner.step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> int(state.t)
      1
    """

    name: ClassVar[str] = "saol_hedge"

    @property
    def num_queries(self) -> int:  # type: ignore[override]
        """``n``: every arm is observed every round."""
        return self.num_arms

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B,)`` Hedge's ``sqrt(8 ln n / L_k)`` (Cesa-Bianchi & Lugosi, Thm 2.2)."""
        return np.sqrt(8.0 * math.log(self.num_arms) / self._lengths())

    def ask(self, state: SAOLState, key: jax.Array) -> BanditQuery:
        _, _, mix = self.distributions(state)
        u = sampling.uniforms(key, 1, self.float_dtype)
        return full_information_query(mix, sampling.sample_index(mix, u[0]))

    def tell(self, state: SAOLState, query: BanditQuery, observed: jax.Array) -> SAOLState:
        loss = loss_vector(query, self._observed(observed))
        v = jnp.exp(state.expert_log_probs)
        # r_t(k) = <mix, l> - <v(t,k), l>: the exact instantaneous regret (full information).
        regret_gain = jnp.dot(query.play_probs, loss) - v @ loss
        rates = self._expert_rates(state.params)
        bumped = state.expert_log_probs - rates[:, None] * loss[None, :]
        experts = bumped - jax.scipy.special.logsumexp(bumped, axis=-1, keepdims=True)
        return self._finish(state, regret_gain, experts)


@dataclasses.dataclass(frozen=True)
class SAOL(_SAOLBase):
    """Bandit SAOL: geometric EXP3 experts, each observing its own arm (``1 + B`` queries).

    Round ``t``:

    - ``p(t) = w_t / W_t``; play ``x_t ~ mix = sum_k p(t)_k v(t,k)`` (``arms[0]``).
    - every expert draws ``y_k ~ v(t,k)`` (``arms[1 + k]``) and observes ``l_t(y_k)``.
    - expert ``k``: EXP3 with its own estimate ``l_hat_k = 1[i = y_k] l_t(y_k) / v(t,k)_{y_k}``,
      ``v(t+1,k) ∝ v(t,k) exp(-eta'_k l_hat_k)``, ``eta'_k = sqrt(ln n / (L_k n))`` (``C = 1``).
    - meta: ``r~_t(k) = sum_j p(t)_j l_t(y_j) - l_t(y_k)``,
      ``w_{t+1}(k) = w_t(k) (1 + eta_k r~_t(k))``, ``eta_k = min(1/2, 1/sqrt(L_k))``.
    - restarts as StABL: fresh uniform expert, ``w(k) = eta_k``.

    Attributes:
      history_lengths: ``L_1 < ... < L_B``; ``None``: StABL's geometric default.
      round_offset: 0 (default) or 1, as :class:`~stabl_jax.learners.stabl.StABL`.
      feedback: ``"loss"`` or ``"reward"`` (EXP3 with gains in the experts).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = SAOL(num_arms=3, horizon=64)
      >>> learner.num_queries
      3
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = learner.step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> info.arms.shape
      (3,)
    """

    feedback: str = "loss"

    name: ClassVar[str] = "saol"

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_choice("feedback", self.feedback, estimators.FEEDBACKS)

    @property
    def num_queries(self) -> int:  # type: ignore[override]
        """``1 + B``: the played arm and one arm per expert."""
        return 1 + self.num_experts

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B,)`` the Lemma's ``sqrt(ln n / (L_k n C))`` with ``C = 1``."""
        return np.sqrt(math.log(self.num_arms) / (self._lengths() * self.num_arms))

    def ask(self, state: SAOLState, key: jax.Array) -> BanditQuery:
        v, _, mix = self.distributions(state)
        u = sampling.uniforms(key, self.num_queries, self.float_dtype)
        played = sampling.sample_index(mix, u[0])
        own = jax.vmap(sampling.sample_index)(v, u[1:])  # (B,) y_k ~ v(t,k)
        own_probs = jnp.take_along_axis(v, own[:, None], axis=1)[:, 0]
        return BanditQuery(
            arms=jnp.concatenate([played[None], own]),
            play_probs=mix,
            query_probs=jnp.concatenate([mix[played][None], own_probs]),
        )

    def tell(self, state: SAOLState, query: BanditQuery, observed: jax.Array) -> SAOLState:
        """Learns from ``observed[1:]`` (the experts' own arms); ``observed[0]`` is suffered."""
        observed = self._observed(observed)
        own_loss = observed[1:]  # (B,) l_t(y_k)
        meta = jax.nn.softmax(state.meta_log_weights)
        regret_gain = jnp.dot(meta, own_loss) - own_loss  # r~_t(k)
        value = estimators.signed_estimate(own_loss, query.query_probs[1:], self.feedback)
        rates = self._expert_rates(state.params)
        rows = jnp.arange(self.num_experts)
        bumped = state.expert_log_probs.at[rows, query.arms[1:]].add(rates * value)
        experts = bumped - jax.scipy.special.logsumexp(bumped, axis=-1, keepdims=True)
        return self._finish(state, regret_gain, experts)
