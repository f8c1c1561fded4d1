"""Anytime EXP3 with uniform mixing as the paper's authors implemented it in OSS Vizier
(``EXP3UniformEnsembleDesign`` of ``vizier/_src/algorithms/ensemble/ensemble_design.py``,
google-vizier 0.1.24; Apache-2.0): the authors' EXP3 baseline and the expert of their StABL.

Unlike :class:`~stabl_jax.EXP3`: mixing and learning rate ``gamma_t = 1/sqrt(1 + t)``; gains
``g = 1 - l`` by default (``feedback="loss"`` is Vizier's ``use_loss_formulation=True``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from stabl_jax import checks, estimators, sampling
from stabl_jax.learners.base import BanditLearner, BanditQuery


def anytime_gamma(count: jax.Array, dtype: DTypeLike) -> jax.Array:
    """``1 / sqrt(1 + count)``, Vizier's mix and rate after ``count`` updates (its shape)."""
    return jax.lax.rsqrt(1.0 + count.astype(dtype))


def mix_with_uniform(log_probs: jax.Array, gamma: jax.Array, num_arms: int) -> jax.Array:
    """``(1 - gamma) exp(log_probs) + gamma / n``, elementwise.

    Args:
      log_probs: normalised log-probabilities ``log softmax(w)`` (all ``n`` arms, or some).
      gamma: mixing weights in [0, 1], broadcastable against ``log_probs``.
      num_arms: ``n``.

    Returns:
      the mixed probabilities, shape of ``log_probs``.
    """
    return (1.0 - gamma) * estimators.probabilities(log_probs) + gamma / num_arms


def draw_query(probs: jax.Array, key: jax.Array) -> BanditQuery:
    """One arm drawn from ``probs`` ``(n,)`` by inverse CDF, played and observed."""
    arm = sampling.sample_index(probs, sampling.uniforms(key, 1, probs.dtype)[0])
    return BanditQuery(arms=arm[None], play_probs=probs, query_probs=probs[arm][None])


@chex.dataclass(frozen=True)
class EXP3VizierParams:
    """Sweepable numbers of :class:`EXP3Vizier` and of ``EXP3IXVizier``.

    Attributes:
      stepsize: ``()`` Vizier's ``stepsize`` (> 0).
    """

    stepsize: jax.Array


@chex.dataclass(frozen=True)
class EXP3VizierState:
    t: jax.Array  # () int32, updates so far
    log_probs: jax.Array  # (num_arms,) float, normalised log softmax(w_t)
    params: EXP3VizierParams


@dataclasses.dataclass(frozen=True)
class VizierEXP3Base(BanditLearner):
    """Vizier's one-query EXP3 designs: ``log softmax(w_t)``, an update count ``t``, one
    ``stepsize``; subclasses define :meth:`play_distribution` and ``_tell``."""

    Params: ClassVar[type] = EXP3VizierParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "stepsize": checks.Interval(0.0, low_open=True),  # Vizier: gt(0)
    }

    def _init(self, key: jax.Array, params: EXP3VizierParams) -> EXP3VizierState:
        del key
        return EXP3VizierState(
            t=jnp.zeros((), jnp.int32), log_probs=self.uniform_log_probs(), params=params
        )

    def play_distribution(self, state: EXP3VizierState) -> jax.Array:
        raise NotImplementedError

    def _ask(self, state: EXP3VizierState, key: jax.Array) -> BanditQuery:
        return draw_query(self.play_distribution(state), key)

    def _updated(
        self, state: EXP3VizierState, arm: jax.Array, value: jax.Array, rate: jax.Array
    ) -> EXP3VizierState:
        """``state`` after ``w(arm) += rate * value`` (renormalised), one more update."""
        log_probs = estimators.exp3_log_update(state.log_probs, arm, value, rate)
        return dataclasses.replace(
            state, t=state.t + 1, log_probs=log_probs.astype(self.float_dtype)
        )


@dataclasses.dataclass(frozen=True)
class EXP3Vizier(VizierEXP3Base):
    """Vizier's ``EXP3UniformEnsembleDesign`` at its defaults, one query.

    Round ``t`` (``gamma_t = 1/sqrt(1 + t)``):

    - play ``x_t ~ q_t = (1 - gamma_t) softmax(w_t) + gamma_t / n``, observe ``l_t(x_t)``;
    - ``w_{t+1}(x_t) = w_t(x_t) + stepsize gamma_t s_t`` with the signed estimate
      ``s_t = (1 - l_t(x_t)) / q_t(x_t)`` (gains, the default) or ``-l_t(x_t) / q_t(x_t)``.

    Attributes:
      feedback: ``"reward"`` (default, Vizier's gains) or ``"loss"`` (its loss formulation).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = EXP3Vizier(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> [round(float(p), 4) for p in learner.play_distribution(state)]
      [0.3333, 0.3333, 0.3333]
      >>> state, info = jax.jit(learner.step)(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> int(state.t)
      1
    """

    feedback: estimators.Feedback = "reward"

    name: ClassVar[str] = "exp3_vizier"

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_choice("feedback", self.feedback, estimators.FEEDBACKS)

    def play_distribution(self, state: EXP3VizierState) -> jax.Array:
        """``(num_arms,)`` ``q_t = (1 - gamma_t) softmax(w_t) + gamma_t / n``."""
        gamma = anytime_gamma(state.t, self.float_dtype)
        return mix_with_uniform(state.log_probs, gamma, self.num_arms)

    def _tell(
        self, state: EXP3VizierState, query: BanditQuery, observed: jax.Array
    ) -> EXP3VizierState:
        value = estimators.signed_estimate(observed[0], query.query_probs[0], self.feedback)
        rate = state.params.stepsize * anytime_gamma(state.t, self.float_dtype)
        return self._updated(state, query.arms[0], value, rate)
