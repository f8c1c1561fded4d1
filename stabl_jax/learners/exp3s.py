"""Exp3.S: Exp3 with weight sharing for a switching best arm (Section 8 of Auer, Cesa-Bianchi,
Freund and Schapire, "The nonstochastic multiarmed bandit problem", SIAM J. Comput. 2002).

One query per round, rewards ``x = 1 - l``. The option ``num_switches`` sets the hardness bound
``S = num_switches + 1`` (segments of the compared sequence) of the corollary to Theorem 8.1;
``alpha = 0`` (plain Exp3 with gains) is allowed.
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
from stabl_jax.learners.base import BanditQuery, WeightsLearner, WeightsState, sample_query


@chex.dataclass(frozen=True)
class Exp3SParams:
    """Sweepable numbers of :class:`Exp3S`.

    Attributes:
      gamma: ``()`` uniform-exploration mix ``gamma`` in [0, 1] (Section 8, step 1).
      alpha: ``()`` weight-sharing fraction ``alpha >= 0`` (step 4).
      lr_scale: ``()`` multiplies the exponent's rate ``gamma / K`` (step 4); 1 is the paper.
    """

    gamma: jax.Array
    alpha: jax.Array
    lr_scale: jax.Array


def exp3s_gamma(num_arms: int, horizon: int, hardness: int) -> float:
    """``gamma = min(1, sqrt(K (S ln(K T) + e) / ((e - 1) T)))`` (corollary to Theorem 8.1)."""
    k, t, s = num_arms, horizon, hardness
    return min(1.0, math.sqrt(k * (s * math.log(k * t) + math.e) / ((math.e - 1.0) * t)))


@dataclasses.dataclass(frozen=True)
class Exp3S(WeightsLearner):
    """Exp3.S (Auer et al. 2002, Section 8), one query per round, in the log domain.

    Round ``t`` (the paper's steps, ``K = num_arms``, ``x = 1 - l``):

    1. ``p_i(t) = (1 - gamma) w_i(t) / W_t + gamma / K``;
    2. play ``i_t ~ p(t)``, observe ``x_{i_t}(t)``;
    3. ``x^_j(t) = x_j(t) / p_j(t)`` if ``j = i_t``, else 0;
    4. ``w_j(t+1) = w_j(t) exp(gamma x^_j(t) / K) + (e alpha / K) W_t``.

    Step 4 is homogeneous in ``w``, so the state keeps ``log(w / W)``. Defaults:
    ``alpha = 1/T``, :func:`exp3s_gamma` with ``S = num_switches + 1``.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_switches``, ``gamma``, ``alpha``.

    Attributes:
      num_switches: switches of the best arm the default ``gamma`` is tuned for.
      gamma: default exploration mix in [0, 1]; ``None`` gives :func:`exp3s_gamma`.
      alpha: default sharing fraction ``>= 0``; ``None`` gives ``1/T``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = Exp3S(num_arms=3, horizon=100, num_switches=1)
      >>> round(learner.gamma, 4), learner.alpha
      (0.4966, 0.01)
      >>> state, info = jax.jit(learner.step)(learner.init(jax.random.key(0)),
      ...                            jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> int(state.t), info.arms.shape
      (1, (1,))
    """

    num_switches: int = dataclasses.field(default=3, compare=False)
    gamma: float | None = dataclasses.field(default=None, compare=False)
    alpha: float | None = dataclasses.field(default=None, compare=False)

    name: ClassVar[str] = "exp3s"
    Params: ClassVar[type] = Exp3SParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "gamma": checks.Interval(0.0, 1.0),
        "alpha": checks.Interval(0.0),
        "lr_scale": checks.Interval(0.0),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_switches", self.num_switches, minimum=0)
        gamma = exp3s_gamma(self.num_arms, self.horizon, self.num_switches + 1)
        checks.fill(self, "gamma", gamma, checks.check_probability)
        checks.fill(self, "alpha", 1.0 / self.horizon, checks.check_nonnegative)

    def play_distribution(self, state: WeightsState) -> jax.Array:
        """``(num_arms,)`` step 1: ``p(t) = (1 - gamma) w(t) / W_t + gamma / K``."""
        gamma = state.params.gamma
        return (1.0 - gamma) * jnp.exp(state.log_weights) + gamma / self.num_arms

    def _ask(self, state: WeightsState, key: jax.Array) -> BanditQuery:
        return sample_query(key, self.play_distribution(state))

    def _tell(self, state: WeightsState, query: BanditQuery, observed: jax.Array) -> WeightsState:
        """Steps 3-4 from the played arm's reward ``x = 1 - l`` only."""
        params = state.params
        arm = query.arms[0]
        x_hat = estimators.loss_to_reward(observed[0]) / query.query_probs[0]  # step 3
        eta = params.lr_scale * params.gamma / self.num_arms
        bumped = state.log_weights.at[arm].add(eta * x_hat)
        # Step 4 with W_t = 1: w' = w exp(eta x^) + e alpha / K (log(0) = -inf for alpha = 0).
        share = 1.0 + jnp.log(params.alpha) - math.log(self.num_arms)
        shared = jnp.logaddexp(bumped, share)
        log_w = shared - jax.scipy.special.logsumexp(shared)
        return dataclasses.replace(state, t=state.t + 1, log_weights=log_w.astype(self.float_dtype))
