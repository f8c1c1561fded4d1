"""StABL: the Strongly Adaptive Bandit Learner (Algorithm 1 of Lu, Zhang, Chen, Zhang, Woodruff
and Hazan, "Adaptive Regret for Bandits Made Possible: Two Queries Suffice", ICLR 2024).

A multiplicative-weights meta-learner over ``B`` EXP3 experts (Algorithm 2), expert ``k``
restarted every ``L_k`` rounds. Two queries per round: the played arm ``x_t`` and an observed
arm ``x'_t`` drawn from the importance distribution ``P(t)``; only ``x'_t`` feeds learning.

Choices where the paper is ambiguous (each documented where it is made):

==============================  =================================================================
paper                           stabl_jax
==============================  =================================================================
rounds ``tau = 1..T``           0-based ``t = 0..T-1``; expert ``k`` restarts when
                                ``(t + round_offset) % L_k == 0``. ``round_offset=0`` (default):
                                every expert is active from ``t = 0`` on full blocks
                                ``[s L_k, (s+1) L_k - 1]``, ``s >= 0``. ``round_offset=1`` is the
                                literal ``2^k | tau + 1`` with ``tau = t + 1``; the first block
                                of each expert is then one round short (the paper leaves experts
                                undefined before their first interval ``[2^k, 2^{k+1} - 1]``).
``k`` from ``2 + log log T``    ``k = ceil(2 + log2 log2 T) .. floor(log2 T)`` (base 2);
to ``log T``                    ``B`` = the number of such ``k`` (line 3's formula is not an
                                integer; only this ``B`` makes ``P(t)`` a distribution).
``eta_k = min{1/2 sqrt n,       ``eta_k = min(1/(2 sqrt n), 1/sqrt(n L_k))`` (read as
1/sqrt(n 2^k)}`` (line 6)       ``1/(2 sqrt n)``: ``(1/2) sqrt n`` would never be the minimum).
expert learning rate            the Lemma's ``sqrt(ln n / (L_k n C))`` with ``C = 2B`` (from
(not stated)                    ``P(t) >= v(t,k)/(2B)``, Step 2 of the proof); the proof sketch's
                                ``C = 2 log T`` (``log2``) is ``expert_c="2logT"``.
weights non-negative            needs ``eta_k * 2B <= 1`` (importance) or ``eta_k * n <= 1``
                                (uniform observation); the paper's ``eta_k`` guarantees it only
                                for ``n >~ log T``. When ``1 + eta_k r~_t(k) <= 0`` the weight is
                                set to 0 (log weight ``-inf``): the expert is muted until its
                                next restart; ``state.num_muted`` counts such events.
"StABL Naive" (uniform x'_t)    ``observation="uniform"``: only line 9's distribution changes
                                (``P(t) = 1/n``); every step size stays as above.
"rewards instead of losses"     ``feedback="reward"``: see below.
==============================  =================================================================

Reward feedback. The environment still emits losses ``l`` in [0, 1]; the learner uses the gain
``g = 1 - l``. With ``g_hat = 1[i = x'_t] g(x'_t) / P(t)_{x'_t}`` the experts update
``v(t+1,k) ∝ v(t,k) exp(+eta'_k g_hat)`` and the meta-learner uses the gain of expert ``k`` over
the mixture, ``r~_t(k) = g_hat^T v(t,k) - g_hat^T sum_j p(t)_j v(t,j)``, in the same update
``w_{t+1}(k) = w_t(k) (1 + eta_k r~_t(k))``. In expectation this is the loss algorithm
(``E[g_hat] = 1 - l``); only the variance of the estimates differs.
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

    Per round ``t`` (line numbers of Algorithm 1):

    - (8) ``p(t) = w_t / W_t``; the play distribution is ``mix = sum_k p(t)_k v(t,k)``.
    - (9) ``P(t)_i = max_k v(t,k)_i^2 / (2 sum_j max_k v(t,k)_j^2) + sum_k v(t,k)_i / (2B)``.
    - (10) ``x_t ~ mix`` is played, ``x'_t ~ P(t)`` is observed.
    - (11) ``l_hat_t = 1[i = x'_t] l_t(x'_t) / P(t)_{x'_t}``.
    - (12) every expert: ``v(t+1,k) ∝ v(t,k) exp(-eta'_k l_hat_t)`` (Algorithm 2).
    - (13) ``r~_t(k) = l_hat_t^T mix - l_hat_t^T v(t,k)``;
      ``w_{t+1}(k) = eta_k`` if expert ``k`` restarts at ``t + 1``, else
      ``w_t(k) (1 + eta_k r~_t(k))``; a restarting expert also resets ``v`` to uniform.

    Weights are kept in the log domain: expert rows are renormalised every round, meta
    weights are not (their absolute size matters against the restart value ``eta_k``; the
    paper's pseudo-weights ``w/eta`` sum to at most ``t (log t + 1)``, so they stay small).

    Attributes:
      history_lengths: ``L_1 < ... < L_B``; ``None`` gives the paper's ``2^k``
        (:class:`~stabl_jax.learners.ensemble.Ensemble`).
      observation: ``"importance"`` (``P(t)``, line 9) or ``"uniform"`` (StABL Naive).
      feedback: ``"loss"`` (Algorithm 1) or ``"reward"`` (the paper's experiments; see the
        module docstring).
      expert_c: constant ``C`` in the experts' learning rate, ``"2B"`` or ``"2logT"``.
      round_offset: 0 (default) or 1 (the paper's 1-based restart rule); module docstring.

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
        """The round's distributions, lines 8-9.

        Returns:
          ``(v, mix, P)``: expert probabilities ``(B, n)``, play distribution
          ``mix = sum_k p(t)_k v(t,k)`` ``(n,)`` and observation distribution ``P(t)`` ``(n,)``.
        """
        v = estimators.probabilities(state.expert_log_probs)
        meta = jax.nn.softmax(state.meta_log_weights)
        # The sums and the max over the B experts are written out (B <= 20 is static): under
        # vmap they become one fused pass over v instead of a matrix-vector product and two
        # reductions (measured faster on CPU; same sums, in the order k = 0..B-1).
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
        """Lines 11-13 from the observed arm's loss only (``observed[1]``; ``observed[0]``,
        the played arm's loss, is suffered but never used for learning). Subclasses that
        learn from another query set ``learning_query``
        (:class:`~stabl_jax.learners.stabl_one_query.StABLOneQuery`: 0)."""
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
