"""StABL, the Strongly Adaptive Bandit Learner (Algorithm 1 of Lu, Zhang, Chen, Zhang, Woodruff
and Hazan, "Adaptive Regret for Bandits Made Possible: Two Queries Suffice", ICLR 2024).

Algorithm 1, line by line (0-based rounds ``t``; ``B`` experts, EXP3 = Algorithm 2):

- lines 2-3, ``k`` from ``2 + log log T`` to ``log T``: ``history_lengths``, by default
  ``L_k = 2^k`` for ``k = ceil(2 + log2 log2 T) .. floor(log2 T)``; ``B`` is their count
  (:func:`stabl_jax.intervals.geometric_history_lengths`).
- line 5, restart when ``2^k | tau``: :meth:`Ensemble.restarts`, ``(t + round_offset) % L_k
  == 0`` (``round_offset=1`` is the paper's 1-based rule).
- line 6, ``eta_k = min{1/(2 sqrt n), 1/sqrt(n L_k)}``: :meth:`StABL.base_meta_step_sizes`;
  expert rates from the Lemma, ``sqrt(ln n / (L_k n C))`` with ``C = 2B`` (``P(t) >=
  v(t,k) / (2B)``) or ``C = 2 log2 T`` (``expert_c``): ``base_expert_learning_rates``.
- lines 8-9, ``p(t)``, ``mix`` and ``P(t)``: :meth:`StABL.distributions`
  (``observation="uniform"`` is the paper's "StABL Naive", ``P(t) = 1/n``).
- line 10, ``x_t ~ mix`` played and ``x'_t ~ P(t)`` observed: ``_ask``.
- lines 11-13: ``_tell`` from ``l_t(x'_t)`` only; line 13's ``1 + eta_k r~_t(k) <= 0`` mutes
  the expert until its restart (``state.num_muted`` counts it).

``feedback="reward"`` learns from ``g = 1 - l``: ``g_hat = 1[i = x'_t] g / P(t)_{x'_t}``,
experts ``v ∝ v exp(+eta'_k g_hat)`` and ``r~_t(k) = g_hat^T v(t,k) - g_hat^T mix``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, estimators
from stabl_jax.learners.base import BanditLearner, BanditQuery, sample_query
from stabl_jax.learners.ensemble import Ensemble, EnsembleParams, EnsembleState

OBSERVATIONS: tuple[str, ...] = ("importance", "uniform")
EXPERT_CS: tuple[str, ...] = ("2B", "2logT")


@chex.dataclass(frozen=True)
class StABLParams(EnsembleParams):
    """Sweepable numbers of :class:`StABL`: the scales of ``eta'_k`` and ``eta_k`` (line 6)."""


#: ``t``, ``expert_log_probs`` ``(B, n)`` ``log v(t, k)``, ``meta_log_weights`` ``(B,)``
#: ``log w_t(k)`` (``-inf`` = muted), ``num_muted`` and ``params``.
StABLState = EnsembleState


@dataclasses.dataclass(frozen=True)
class StABL(Ensemble, BanditLearner):
    """Strongly Adaptive Bandit Learner (Algorithm 1), two queries per round.

    Round ``t`` (lines of Algorithm 1):

    - (8) ``p(t) = w_t / W_t``; the play distribution is ``mix = sum_k p(t)_k v(t,k)``.
    - (9) ``P(t)_i = max_k v(t,k)_i^2 / (2 sum_j max_k v(t,k)_j^2) + sum_k v(t,k)_i / (2B)``.
    - (10) ``x_t ~ mix`` is played, ``x'_t ~ P(t)`` is observed.
    - (11) ``l_hat_t = 1[i = x'_t] l_t(x'_t) / P(t)_{x'_t}``.
    - (12) every expert: ``v(t+1,k) ∝ v(t,k) exp(-eta'_k l_hat_t)`` (Algorithm 2).
    - (13) ``r~_t(k) = l_hat_t^T mix - l_hat_t^T v(t,k)``;
      ``w_{t+1}(k) = eta_k`` if expert ``k`` restarts at ``t + 1``, else
      ``w_t(k) (1 + eta_k r~_t(k))``; a restarting expert also resets ``v`` to uniform.

    Attributes:
      history_lengths: ``L_1 < ... < L_B``; ``None`` gives the paper's ``2^k``.
      observation: ``"importance"`` (``P(t)``, line 9) or ``"uniform"`` (StABL Naive).
      feedback: ``"loss"`` (Algorithm 1) or ``"reward"`` (the paper's experiments).
      expert_c: constant ``C`` in the experts' learning rate, ``"2B"`` or ``"2logT"``.
      round_offset: 0 (default) or 1 (the paper's 1-based restart rule).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = StABL(num_arms=5, horizon=64)
      >>> learner.history_lengths, learner.num_queries
      ((32, 64), 2)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = learner.step(state, jnp.linspace(0, 1, 5), jax.random.key(1))
      >>> info.arms.shape
      (2,)
    """

    observation: str = "importance"
    feedback: estimators.Feedback = "loss"
    expert_c: str = "2B"
    round_offset: int = 0

    num_queries: ClassVar[int] = 2
    name: ClassVar[str] = "stabl"
    Params: ClassVar[type] = StABLParams
    #: allowed ``observation`` values, and which query feeds learning (subclasses change them).
    observations: ClassVar[tuple[str, ...]] = OBSERVATIONS
    learning_query: ClassVar[int] = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_choice("observation", self.observation, self.observations)
        checks.check_choice("feedback", self.feedback, estimators.FEEDBACKS)
        checks.check_choice("expert_c", self.expert_c, EXPERT_CS)

    def base_meta_step_sizes(self) -> np.ndarray:
        """``(B,)`` ``eta_k = min(1/(2 sqrt n), 1/sqrt(n L_k))`` (line 6), before scaling."""
        n = self.num_arms
        return np.minimum(1.0 / (2.0 * math.sqrt(n)), 1.0 / np.sqrt(n * self._lengths()))

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B,)`` ``eta'_k = sqrt(ln n / (L_k n C))`` (the Lemma), before scaling."""
        n = self.num_arms
        c = 2.0 * self.num_experts if self.expert_c == "2B" else 2.0 * math.log2(self.horizon)
        return np.sqrt(math.log(n) / (self._lengths() * n * c))

    def distributions(self, state: StABLState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The round's distributions, lines 8-9."""
        v = estimators.probabilities(state.expert_log_probs)
        meta = jax.nn.softmax(state.meta_log_weights)
        # Sums and max over the static B experts, written out in the order k = 0..B-1.
        mix, top, total = meta[0] * v[0], v[0], v[0]
        for k in range(1, self.num_experts):
            mix = mix + meta[k] * v[k]
            top = jnp.maximum(top, v[k])
            total = total + v[k]
        if self.observation == "importance":
            top_sq = top * top
            obs = 0.5 * top_sq / jnp.sum(top_sq) + total / (2.0 * self.num_experts)
        else:
            obs = jnp.full((self.num_arms,), 1.0 / self.num_arms, self.float_dtype)
        return v, mix, obs

    def _ask(self, state: StABLState, key: jax.Array) -> BanditQuery:
        _, mix, obs = self.distributions(state)
        return sample_query(key, mix, obs)

    def _tell(self, state: StABLState, query: BanditQuery, observed: jax.Array) -> StABLState:
        """Lines 11-13 from ``observed[learning_query]`` only (``observed[0]`` is suffered)."""
        j = self.learning_query
        arm = query.arms[j]
        value = estimators.signed_estimate(observed[j], query.query_probs[j], self.feedback)
        # Line 13: r~_t(k) = s * (v(t,k)_{x'} - mix_{x'}), s the signed (gain) estimate.
        v_at_arm = estimators.probabilities(state.expert_log_probs)[:, arm]
        regret_gain = value * (v_at_arm - query.play_probs[arm])
        # Line 12: each expert is EXP3 (Algorithm 2) fed the same one-sparse estimate.
        eta = self.expert_learning_rates(state.params)
        experts = estimators.exp3_log_update(state.expert_log_probs, arm, value, eta)
        return self._advance(state, experts, regret_gain)
