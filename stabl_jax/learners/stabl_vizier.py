"""StABL as the paper's authors implemented it: ``AdaptiveEnsembleDesign`` of OSS Vizier
(``vizier/_src/algorithms/ensemble/ensemble_design.py``, google-vizier 0.1.24; Apache-2.0).

Unlike Algorithm 1 (:class:`~stabl_jax.StABL`): one trial per round, alternately from the play
mixture and from ``P``; anytime EXP3 experts with uniform mixing; exponential meta weights
updated in order against the partly updated mixture; gains ``g = 1 - l``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, estimators, intervals
from stabl_jax.learners.base import BanditLearner, BanditQuery
from stabl_jax.learners.ensemble import HistoryExperts
from stabl_jax.learners.exp3_vizier import anytime_gamma, draw_query, mix_with_uniform


@chex.dataclass(frozen=True)
class StABLVizierParams:
    """Sweepable numbers of :class:`StABLVizier` (Vizier's names and defaults, both 1).

    Attributes:
      base_stepsize: ``()`` multiplies every expert's rate ``1/sqrt(1 + h_k)``.
      meta_stepsize: ``()`` multiplies every meta rate ``1/sqrt(L_k)``.
    """

    base_stepsize: jax.Array
    meta_stepsize: jax.Array


@chex.dataclass(frozen=True)
class StABLVizierState:
    t: jax.Array  # () int32, trials so far (even: a play trial is next; odd: an observation one)
    expert_log_probs: jax.Array  # (B, num_arms) float, log softmax(w_k), each row normalised
    meta_log_weights: jax.Array  # (B,) float, log w_k, unnormalised (restarts set absolute values)
    params: StABLVizierParams


@dataclasses.dataclass(frozen=True)
class StABLVizier(HistoryExperts, BanditLearner):
    """Vizier's ``AdaptiveEnsembleDesign``: one trial per round.

    Trial ``t`` (``h_k = t mod L_k``, ``gamma_k = 1/sqrt(1 + h_k)``):

    - experts ``v_k = (1 - gamma_k) softmax(w_k) + gamma_k / n``; play mixture
      ``play = sum_k softmax(log w)_k v_k``; ``P_i = max_k v_k(i)^2 / (2 sum_j max_k v_k(j)^2)
      + sum_k v_k(i) / (2 sum_j sum_k v_k(j))`` (uniform with ``naive_sampling``);
    - draw ``x_t`` from ``z_t = play`` (even ``t``) or ``z_t = P`` (odd ``t``); suffer and
      observe ``l_t(x_t)``; ``g_hat = (1 - l_t(x_t)) / z_t(x_t)`` (``-l_t(x_t) / z_t(x_t)`` with
      loss feedback);
    - for ``k = 1..B`` in order: if ``(t + 1) % L_k == 0``, restart (``w_k = 0``,
      ``log w_k = -log(L_k n)/2``); else ``log w_k += meta_stepsize / sqrt(L_k) g_hat
      (v_k(x_t) - play'(x_t))`` with ``play'`` the mixture after experts ``1..k-1`` were
      updated, and ``w_k(x_t) += base_stepsize gamma_k g_hat``.

    Attributes:
      history_lengths: Vizier's ``max_lengths``, strictly increasing; ``None``: StABL's
        geometric default for ``horizon``.
      naive_sampling: draw observation trials uniformly (Vizier's option; "StABL Naive").
      feedback: ``"reward"`` (default, Vizier's gains) or ``"loss"``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = StABLVizier(num_arms=5, horizon=64, history_lengths=(4, 16))
      >>> learner.num_queries, learner.num_experts
      (1, 2)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.linspace(0, 1, 5), jax.random.key(1))
      >>> int(state.t), bool(learner.is_observation_trial(state.t))
      (1, True)
    """

    history_lengths: tuple[int, ...] | None = None
    naive_sampling: bool = False
    feedback: estimators.Feedback = "reward"

    name: ClassVar[str] = "stabl_vizier"
    Params: ClassVar[type] = StABLVizierParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "base_stepsize": checks.Interval(0.0, low_open=True),  # Vizier: gt(0)
        "meta_stepsize": checks.Interval(0.0, low_open=True),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        self._resolve_history_lengths()
        checks.check_bool("naive_sampling", self.naive_sampling)
        checks.check_choice("feedback", self.feedback, estimators.FEEDBACKS)

    def is_observation_trial(self, t: jax.Array) -> jax.Array:
        """``()`` bool: trial ``t`` is drawn from ``P`` (odd ``t``), not the play mixture."""
        return t % 2 == 1

    def _restart_log_weights(self) -> jax.Array:
        """``(B,)`` ``log w_k = -log(L_k n) / 2`` at (re)start (Vizier lines 201-203, 255-257)."""
        lengths = np.asarray(self.history_lengths, np.float64)
        return jnp.asarray(-0.5 * np.log(lengths * self.num_arms), self.float_dtype)

    def _expert_gammas(self, t: jax.Array) -> jax.Array:
        """``(B,)`` ``gamma_k = 1/sqrt(1 + h_k)``, ``h_k = t mod L_k``."""
        return anytime_gamma(t % jnp.asarray(self.history_lengths, jnp.int32), self.float_dtype)

    def _init(self, key: jax.Array, params: StABLVizierParams) -> StABLVizierState:
        del key
        return StABLVizierState(
            t=jnp.zeros((), jnp.int32),
            expert_log_probs=self.uniform_log_probs(self.num_experts),
            meta_log_weights=self._restart_log_weights(),
            params=params,
        )

    def distributions(self, state: StABLVizierState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The trial's candidate distributions (Vizier lines 214-243)."""
        gamma = self._expert_gammas(state.t)[:, None]
        v = mix_with_uniform(state.expert_log_probs, gamma, self.num_arms)
        play = _mixture(jax.nn.softmax(state.meta_log_weights), v)
        if self.naive_sampling:
            obs = jnp.full((self.num_arms,), 1.0 / self.num_arms, self.float_dtype)
        else:
            top = jnp.max(v * v, axis=0)
            total = jnp.sum(v, axis=0)
            obs = top / (2.0 * jnp.sum(top)) + total / (2.0 * jnp.sum(total))
        return v, play, obs

    def trial_distribution(self, state: StABLVizierState) -> jax.Array:
        """``(num_arms,)`` ``z_t``: the play mixture on even trials, ``P`` on odd ones."""
        _, play, obs = self.distributions(state)
        return jnp.where(self.is_observation_trial(state.t), obs, play)

    def _ask(self, state: StABLVizierState, key: jax.Array) -> BanditQuery:
        return draw_query(self.trial_distribution(state), key)

    def _tell(
        self, state: StABLVizierState, query: BanditQuery, observed: jax.Array
    ) -> StABLVizierState:
        """Vizier's ``update`` (lines 245-280) from the trial's own loss."""
        arm = query.arms[0]
        value = estimators.signed_estimate(observed[0], query.query_probs[0], self.feedback)
        params = state.params
        t, t_next = state.t, state.t + 1
        restart = intervals.restart_mask(t_next, self._history_lengths)  # h_k + 1 == L_k

        # Experts (line 278, EXP3UniformEnsembleDesign.update with the estimate as reward).
        gamma = self._expert_gammas(t)
        experts = estimators.exp3_log_update(
            state.expert_log_probs, arm, value, params.base_stepsize * gamma
        )
        experts = jnp.where(restart[:, None], -math.log(self.num_arms), experts)

        # Meta weights (lines 267-275), swept in order against the partly updated mixture.
        n = self.num_arms
        at_arm_old = mix_with_uniform(state.expert_log_probs[:, arm], gamma, n)
        at_arm_new = mix_with_uniform(experts[:, arm], self._expert_gammas(t_next), n)
        meta_rate = params.meta_stepsize * jnp.asarray(
            1.0 / np.sqrt(np.asarray(self.history_lengths, np.float64)), self.float_dtype
        )
        meta = _sequential_meta_update(
            state.meta_log_weights,
            at_arm_old,
            at_arm_new,
            meta_rate * value,
            restart,
            self._restart_log_weights(),
        )
        return dataclasses.replace(
            state,
            t=t_next,
            expert_log_probs=experts.astype(self.float_dtype),
            meta_log_weights=meta.astype(self.float_dtype),
        )


def _mixture(weights: jax.Array, v: jax.Array) -> jax.Array:
    """``sum_k weights_k v_k`` summed in the order ``k = 0..B-1`` (Vizier line 220)."""
    out = weights[0] * v[0]
    for k in range(1, v.shape[0]):
        out = out + weights[k] * v[k]
    return out


def _sequential_meta_update(
    log_w: jax.Array,
    at_arm_old: jax.Array,
    at_arm_new: jax.Array,
    step: jax.Array,
    restart: jax.Array,
    restart_log_w: jax.Array,
) -> jax.Array:
    """Vizier's meta loop (lines 251-275): expert ``k``'s gain over the mixture is measured
    against the mixture in which experts ``0..k-1`` already hold their new state.

    Args:
      log_w: ``(B,)`` meta log-weights before the trial.
      at_arm_old: ``(B,)`` ``v_k(x_t)`` before the trial.
      at_arm_new: ``(B,)`` ``v_k(x_t)`` after it (restarted experts: ``1/n``).
      step: ``(B,)`` ``meta_stepsize / sqrt(L_k) * g_hat``.
      restart: ``(B,)`` bool, experts restarted on this trial (no update).
      restart_log_w: ``(B,)`` their new log-weights.

    Returns:
      ``(B,)`` the new meta log-weights.
    """
    b = log_w.shape[0]
    index = jnp.arange(b)
    for k in range(b):
        at_arm = jnp.where(index < k, at_arm_new, at_arm_old)
        play_at_arm = _mixture(jax.nn.softmax(log_w), at_arm[:, None])[0]
        moved = log_w[k] + step[k] * (at_arm_old[k] - play_at_arm)
        log_w = log_w.at[k].set(jnp.where(restart[k], restart_log_w[k], moved))
    return log_w
