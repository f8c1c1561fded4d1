"""SAOL, the Strongly Adaptive Online Learner (Algorithm 1 of Daniely, Gonen and Shalev-Shwartz,
"Strongly adaptive online learning", ICML 2015), on a chosen set of geometric intervals.

One base learner per history length ``L_k`` (restarted as
:class:`~stabl_jax.learners.stabl.StABL`), mixed by ``w_{t+1}(k) = w_t(k) (1 + eta_k r_t(k))``
with ``w(k) = eta_k`` at a restart: :class:`SAOLHedge` (full information) and :class:`SAOL`
(bandit, ``1 + B`` queries; Table 1 of Lu et al.). With ``|r| <= 1`` and
``eta_k = min(1/2, 1/sqrt(L_k))``, ``1 + eta_k r >= 1/2``: nothing is muted at scale 1.

The lengths (static option ``scales``; ``history_lengths`` overrides ``"stabl"``'s):

- ``"stabl"`` (default, the one the tables use): StABL's truncated scales ``2^k``,
  ``k = ceil(2 + log2 log2 T) .. floor(log2 T)`` (7 experts at ``T = 4096``).
- ``"all"``: Daniely et al.'s geometric covering intervals, every dyadic scale ``2^k`` from
  ``k = 0`` (13 experts at ``T = 4096``).
- ``"eflh"``: EFLH's doubly exponential lengths ``2^{ceil((1 + eps)^k)}`` capped at ``T``
  (9 experts at ``T = 4096``, ``eps = 0.25``): the interval-adaptive meta of ``eflh_saol``
  (:mod:`stabl_jax.learners.eflh`).

Memory per run: ``B (n + 1) + 2`` numbers (the experts' rows, the meta weights, ``t`` and the
muted count).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, estimators, intervals, sampling
from stabl_jax.learners.base import BanditLearner, BanditQuery
from stabl_jax.learners.ensemble import Ensemble, EnsembleParams, EnsembleState
from stabl_jax.learners.hedge import full_information_query, hedge_log_update, loss_vector


@chex.dataclass(frozen=True)
class SAOLParams(EnsembleParams):
    """Sweepable numbers of :class:`SAOL` and :class:`SAOLHedge` (:class:`EnsembleParams`)."""


#: As StABL's.
SAOLState = EnsembleState


#: ``scales``' history lengths for ``(horizon, epsilon)``.
SCALES: Mapping[str, Callable[[int, float], tuple[int, ...]]] = {
    "stabl": lambda horizon, _: intervals.geometric_history_lengths(horizon),
    "all": lambda horizon, _: intervals.dyadic_history_lengths(horizon),
    "eflh": intervals.eflh_history_lengths,
}


@dataclasses.dataclass(frozen=True)
class _SAOLBase(Ensemble, BanditLearner):
    """Geometric experts, SAOL's meta step sizes and the restarted multiplicative update."""

    round_offset: int = 0
    scales: str = "stabl"
    epsilon: float | None = None

    Params: ClassVar[type] = SAOLParams

    def __post_init__(self) -> None:
        """Checks ``scales`` and ``epsilon`` (``scales="eflh"`` only; default 0.25), and that
        ``history_lengths`` is unset or equal to the lengths ``"all"``/``"eflh"`` give."""
        checks.check_choice("scales", self.scales, tuple(SCALES))
        if self.scales == "eflh":
            epsilon = intervals.EFLH_EPSILON if self.epsilon is None else self.epsilon
            object.__setattr__(self, "epsilon", checks.check_positive("epsilon", epsilon))
        elif self.epsilon is not None:
            raise ValueError(
                f"epsilon={self.epsilon!r} sets EFLH's lengths: it needs scales='eflh' "
                f"(got scales={self.scales!r}); drop epsilon or set scales='eflh'"
            )
        given = self.history_lengths
        super().__post_init__()
        if given is not None and self.scales != "stabl":
            derived = self.default_history_lengths()
            if self.history_lengths != derived:
                raise ValueError(
                    f"history_lengths={given!r} contradicts scales={self.scales!r}, which sets "
                    f"them to {derived}; leave history_lengths unset, or use scales='stabl' "
                    "with your history_lengths"
                )

    def default_history_lengths(self) -> tuple[int, ...]:
        """The lengths of :attr:`scales` (module docstring)."""
        return SCALES[self.scales](self.horizon, self.epsilon or intervals.EFLH_EPSILON)

    def base_meta_step_sizes(self) -> np.ndarray:
        """``(B,)`` SAOL's ``eta_k = min(1/2, 1/sqrt(L_k))``, before scaling."""
        return np.minimum(0.5, 1.0 / np.sqrt(self._lengths()))

    def distributions(self, state: SAOLState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(v, p, mix)``: experts ``(B, n)``, meta ``p(t) = w_t / W_t`` ``(B,)`` and the play
        distribution ``mix = sum_k p(t)_k v(t,k)`` ``(n,)``."""
        v = jnp.exp(state.expert_log_probs)
        meta = jax.nn.softmax(state.meta_log_weights)
        return v, meta, meta @ v


@dataclasses.dataclass(frozen=True)
class SAOLHedge(_SAOLBase):
    """SAOL over Hedge experts with full information (``n`` queries per round).

    Round ``t``: ``p(t) = w_t / W_t``; play ``x_t ~ mix = sum_k p(t)_k v(t,k)``; observe all
    of ``l_t`` (queries ``(x_t + arange(n)) % n``); ``r_t(k) = <mix, l_t> - <v(t,k), l_t>``;
    ``w_{t+1}(k) = w_t(k) (1 + eta_k r_t(k))``, ``eta_k = min(1/2, 1/sqrt(L_k))``; every expert
    ``v(t+1,k) ∝ v(t,k) exp(-eta'_k l_t)``, ``eta'_k = sqrt(8 ln n / L_k)``; restarts as StABL.

    Attributes:
      history_lengths: ``L_1 < ... < L_B``; ``None``: those of ``scales``.
      round_offset: 0 (default) or 1, as StABL's.
      scales: ``"stabl"`` (default), ``"all"`` or ``"eflh"`` (module docstring).
      epsilon: EFLH's growth ``eps`` for ``scales="eflh"`` (default 0.25), else ``None``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = SAOLHedge(num_arms=3, horizon=64)
      >>> learner.history_lengths, learner.num_queries
      ((32, 64), 3)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
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

    def _ask(self, state: SAOLState, key: jax.Array) -> BanditQuery:
        _, _, mix = self.distributions(state)
        u = sampling.uniforms(key, 1, self.float_dtype)
        return full_information_query(mix, sampling.sample_index(mix, u[0]))

    def _tell(self, state: SAOLState, query: BanditQuery, observed: jax.Array) -> SAOLState:
        loss = loss_vector(query, observed)
        v = jnp.exp(state.expert_log_probs)
        # r_t(k) = <mix, l> - <v(t,k), l>: the exact instantaneous regret (full information).
        regret_gain = jnp.dot(query.play_probs, loss) - v @ loss
        rates = self.expert_learning_rates(state.params)
        experts = hedge_log_update(state.expert_log_probs, loss[None, :], rates[:, None])
        return self._advance(state, experts, regret_gain)


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
      history_lengths: ``L_1 < ... < L_B``; ``None``: those of ``scales``.
      round_offset: 0 (default) or 1, as StABL's.
      scales: ``"stabl"`` (default), ``"all"`` or ``"eflh"`` (module docstring).
      epsilon: EFLH's growth ``eps`` for ``scales="eflh"`` (default 0.25), else ``None``.
      feedback: ``"loss"`` or ``"reward"`` (EXP3 with gains in the experts).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = SAOL(num_arms=3, horizon=64)
      >>> learner.num_queries
      3
      >>> SAOL(num_arms=3, horizon=64, scales="all").history_lengths
      (1, 2, 4, 8, 16, 32, 64)
      >>> SAOL(num_arms=3, horizon=4096, scales="eflh").num_queries
      10
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> info.arms.shape
      (3,)
    """

    feedback: estimators.Feedback = "loss"

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

    def _ask(self, state: SAOLState, key: jax.Array) -> BanditQuery:
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

    def _tell(self, state: SAOLState, query: BanditQuery, observed: jax.Array) -> SAOLState:
        """Learns from ``observed[1:]`` (the experts' own arms); ``observed[0]`` is suffered."""
        own_loss = observed[1:]  # (B,) l_t(y_k)
        meta = jax.nn.softmax(state.meta_log_weights)
        regret_gain = jnp.dot(meta, own_loss) - own_loss  # r~_t(k)
        value = estimators.signed_estimate(own_loss, query.query_probs[1:], self.feedback)
        rates = self.expert_learning_rates(state.params)
        rows = jnp.arange(self.num_experts)
        bumped = state.expert_log_probs.at[rows, query.arms[1:]].add(rates * value)
        experts = bumped - jax.scipy.special.logsumexp(bumped, axis=-1, keepdims=True)
        return self._advance(state, experts, regret_gain)
