"""EXP3 with a general loss estimator (Algorithm 2 of Lu et al., ICLR 2024), optionally mixed
with uniform exploration (the paper's baseline; Auer et al., 2002). One query per round.
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
from stabl_jax.learners.exp3_vizier import mix_with_uniform


@chex.dataclass(frozen=True)
class EXP3Params:
    """Sweepable numbers of :class:`EXP3`.

    Attributes:
      lr_scale: ``()`` multiplies the Lemma's learning rate.
      gamma: ``()`` uniform-exploration mix in [0, 1]; 0 is Algorithm 2 exactly.
    """

    lr_scale: jax.Array
    gamma: jax.Array


def auer_gamma(num_arms: int, horizon: int) -> float:
    """Exp3's exploration rate ``min(1, sqrt(n ln n / ((e-1) T)))`` (Auer et al., Cor. 3.2)."""
    num_arms = checks.check_int("num_arms", num_arms, minimum=2)
    horizon = checks.check_horizon(horizon, minimum=1)
    return min(1.0, math.sqrt(num_arms * math.log(num_arms) / ((math.e - 1.0) * horizon)))


@dataclasses.dataclass(frozen=True)
class EXP3(WeightsLearner):
    """EXP3 (Algorithm 2) with the Lemma's learning rate and optional uniform exploration.

    Round ``t``: play ``x_t ~ q_t = (1 - gamma) w_t + gamma / n``, observe ``l_t(x_t)``, form
    the one-sparse estimate ``l_hat = 1[i = x_t] l_t(x_t) / q_t(x_t)`` and update
    ``w_{t+1} ∝ w_t exp(-eta l_hat)`` (Algorithm 2, line 5).

    The Lemma gives ``eta = sqrt(log n / (T n C))`` when ``w <= C z``; here ``z = q`` and
    ``C = 1/(1 - gamma)``, so ``eta = lr_scale sqrt(ln(n) (1 - gamma) / (T n))``.
    ``feedback="reward"`` is Auer et al.'s EXP3 with gains: ``g_hat = 1[i = x_t] (1 - l) /
    q_t(x_t)`` and ``w_{t+1} ∝ w_t exp(+eta g_hat)``.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``gamma``. Static: ``feedback`` (a code
    path).

    Attributes:
      gamma: default exploration mix (a ``Params`` entry, so it can be swept).
      feedback: ``"loss"`` (the paper's algorithms) or ``"reward"`` (its experiments).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = EXP3(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> int(state.t)
      1
    """

    gamma: float = dataclasses.field(default=0.0, compare=False)
    feedback: estimators.Feedback = "loss"

    name: ClassVar[str] = "exp3"
    Params: ClassVar[type] = EXP3Params
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "lr_scale": checks.Interval(0.0),
        "gamma": checks.Interval(0.0, 1.0),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_probability("gamma", self.gamma)
        checks.check_choice("feedback", self.feedback, estimators.FEEDBACKS)

    def learning_rate(self, params: EXP3Params) -> jax.Array:
        """``eta = lr_scale sqrt(ln(n) (1 - gamma) / (T n))``: Lemma, ``C = 1/(1-gamma)``."""
        base = math.log(self.num_arms) / (self.horizon * self.num_arms)
        return params.lr_scale * jnp.sqrt(base * (1.0 - params.gamma))

    def play_distribution(self, state: WeightsState) -> jax.Array:
        """``(num_arms,)`` ``q_t = (1 - gamma) w_t + gamma / n``."""
        return mix_with_uniform(state.log_weights, state.params.gamma, self.num_arms)

    def _ask(self, state: WeightsState, key: jax.Array) -> BanditQuery:
        return sample_query(key, self.play_distribution(state))

    def _tell(self, state: WeightsState, query: BanditQuery, observed: jax.Array) -> WeightsState:
        value = estimators.signed_estimate(observed[0], query.query_probs[0], self.feedback)
        eta = self.learning_rate(state.params)
        log_w = estimators.exp3_log_update(state.log_weights, query.arms[0], value, eta)
        return dataclasses.replace(state, t=state.t + 1, log_weights=log_w)
