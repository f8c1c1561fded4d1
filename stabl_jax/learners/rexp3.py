"""Rexp3 (Besbes, Gur and Zeevi, "Stochastic multi-armed-bandit problem with non-stationary
rewards", NeurIPS 2014): Exp3 restarted every ``Delta_T`` rounds.

One query per round; rewards ``x = 1 - l``. Memory: ``4 K`` bytes per run (float32).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, estimators
from stabl_jax.learners.base import BanditQuery, WeightsLearner, WeightsState
from stabl_jax.learners.exp3s import Exp3S


@chex.dataclass(frozen=True)
class Rexp3Params:
    """Sweepable numbers of :class:`Rexp3`.

    Attributes:
      gamma: ``()`` Exp3's exploration mix ``gamma`` in [0, 1] (also its rate, ``gamma / K``).
      batch: ``()`` ``Delta_T >= 1``, rounds between restarts (its floor is used).
    """

    gamma: jax.Array
    batch: jax.Array


def default_batch_gamma(num_arms: int, horizon: int, variation: float) -> tuple[int, float]:
    """``Delta_T = ceil((K log K)^{1/3} (T / V_T)^{2/3})`` (at most ``T``; ``T`` when
    ``V_T = 0``) and ``gamma = min(1, sqrt(K log K / ((e - 1) Delta_T)))`` (Besbes et al.,
    Theorem 2)."""
    k, t = num_arms, horizon
    if variation <= 0:
        batch = t
    else:
        batch = min(t, math.ceil((k * math.log(k)) ** (1 / 3) * (t / variation) ** (2 / 3)))
    return batch, min(1.0, math.sqrt(k * math.log(k) / ((math.e - 1.0) * batch)))


@dataclasses.dataclass(frozen=True)
class Rexp3(WeightsLearner):
    """Rexp3 (Besbes, Gur and Zeevi 2014, Section 4), one query per round, in the log domain.

    For each batch ``j = 1, 2, ...`` of ``Delta_T`` rounds: set ``w_k = 1``; then each round
    ``t`` of the batch (Exp3, ``K = num_arms``, ``x = 1 - l``):

    1. ``p_k(t) = (1 - gamma) w_k / sum_l w_l + gamma / K``;
    2. play ``k_t ~ p(t)``, observe ``x_{k_t}(t)``;
    3. ``x^_k = x_k(t) / p_k(t)`` for ``k = k_t``, else 0; ``w_k <- w_k exp(gamma x^_k / K)``.

    The state keeps the normalised ``log(w / sum w)``. Defaults: Theorem 2's ``Delta_T`` and
    ``gamma`` for the variation budget ``V_T`` (:func:`default_batch_gamma`).

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes``, ``variation``, ``batch``,
    ``gamma``.

    Attributes:
      num_changes: breakpoints; the default ``V_T``.
      variation: ``V_T >= 0``; ``None`` gives ``num_changes``.
      batch, gamma: defaults of the Params; ``None`` gives Theorem 2's values.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = Rexp3(num_arms=3, horizon=1000, num_changes=1)
      >>> learner.batch, round(learner.gamma, 3)
      (149, 0.113)
    """

    num_changes: int = dataclasses.field(default=3, compare=False)
    variation: float | None = dataclasses.field(default=None, compare=False)
    batch: int | None = dataclasses.field(default=None, compare=False)
    gamma: float | None = dataclasses.field(default=None, compare=False)

    name: ClassVar[str] = "rexp3"
    Params: ClassVar[type] = Rexp3Params
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "gamma": checks.Interval(0.0, 1.0),
        "batch": checks.Interval(1.0),
    }
    records_restarts: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_changes", self.num_changes, minimum=0)
        v = checks.fill(self, "variation", self.num_changes, checks.check_nonnegative)
        batch, gamma = default_batch_gamma(self.num_arms, self.horizon, v)
        checks.fill(self, "batch", batch, checks.check_int, minimum=1)
        checks.fill(self, "gamma", gamma, checks.check_probability)

    # Step 1 is Exp3.S's: p(t) = (1 - gamma) w(t) / W_t + gamma / K, sampled once.
    play_distribution = Exp3S.play_distribution
    _ask = Exp3S._ask

    def _tell(self, state: WeightsState, query: BanditQuery, observed: jax.Array) -> WeightsState:
        """Step 3, then the restart at the end of a batch."""
        params, arm = state.params, query.arms[0]
        x_hat = estimators.loss_to_reward(observed[0]) / query.query_probs[0]
        bumped = state.log_weights.at[arm].add(params.gamma / self.num_arms * x_hat)
        log_w = bumped - jax.scipy.special.logsumexp(bumped)
        restart = self.restarted(state, dataclasses.replace(state, t=state.t + 1))
        log_w = jnp.where(restart, self.uniform_log_probs(), log_w)
        return dataclasses.replace(state, t=state.t + 1, log_weights=log_w.astype(self.float_dtype))

    def restarted(self, state: WeightsState, new_state: WeightsState) -> jax.Array:
        """``()`` bool: the round from ``state`` to ``new_state`` ended a batch. Rexp3's
        restarts are scheduled every ``Delta_T`` rounds, not detections."""
        del state
        return new_state.t % jnp.floor(new_state.params.batch).astype(jnp.int32) == 0
