"""Exp3-IX as the paper's authors implemented it in OSS Vizier (``EXP3IXEnsembleDesign`` of
``vizier/_src/algorithms/ensemble/ensemble_design.py``, google-vizier 0.1.24, lines 66-99;
Apache-2.0).

How it differs from Neu's Exp3-IX with Theorem 1's tuning (:class:`~stabl_jax.Exp3IX`):

- the learning rate is a constant ``stepsize`` (default 1.0, no horizon: Vizier line 97);
- the implicit exploration is anytime, ``gamma_t = 1/sqrt(1 + t)`` after ``t`` updates
  (line 91), not ``eta / 2``;
- Vizier feeds gains ``r`` capped at ``max_reward = 1`` and estimates the loss
  ``max_reward - r`` (lines 90-94). With ``r = 1 - l`` that is the loss ``l`` itself, so this
  learner reads losses and has no ``feedback`` option (both would give the same estimate).

One query per round; the play distribution is ``softmax(w_t)`` (line 86), no uniform mixing.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, estimators, sampling
from stabl_jax.learners.base import BanditLearner, BanditQuery
from stabl_jax.learners.exp3_vizier import anytime_gamma


@chex.dataclass(frozen=True)
class EXP3IXVizierParams:
    """Sweepable numbers of :class:`EXP3IXVizier`.

    Attributes:
      stepsize: ``()`` Vizier's constant learning rate (> 0).
    """

    stepsize: jax.Array


@chex.dataclass(frozen=True)
class EXP3IXVizierState:
    t: jax.Array  # () int32, updates so far
    log_probs: jax.Array  # (num_arms,) float, normalised log softmax(w_t)
    params: EXP3IXVizierParams


@dataclasses.dataclass(frozen=True)
class EXP3IXVizier(BanditLearner):
    """Vizier's ``EXP3IXEnsembleDesign`` at its defaults (module docstring), one query.

    Round ``t`` (``gamma_t = 1/sqrt(1 + t)``):

    - play ``x_t ~ p_t = softmax(w_t)``, observe ``l_t(x_t)``;
    - ``w_{t+1}(x_t) = w_t(x_t) - stepsize l_t(x_t) / (p_t(x_t) + gamma_t)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = EXP3IXVizier(num_arms=3, horizon=100)
      >>> state, info = learner.step(learner.init(jax.random.key(0)),
      ...                            jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> int(state.t)
      1

    References:
      OSS Vizier, ``ensemble_design.py``, ``EXP3IXEnsembleDesign`` (google-vizier 0.1.24);
      Neu, "Explore no more", NeurIPS 2015.
    """

    num_queries: ClassVar[int] = 1
    name: ClassVar[str] = "exp3_ix_vizier"
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "stepsize": checks.Interval(0.0, low_open=True),  # Vizier: gt(0)
    }

    @property
    def default_params(self) -> EXP3IXVizierParams:
        return EXP3IXVizierParams(stepsize=jnp.asarray(1.0, self.float_dtype))

    def init(self, key: jax.Array, params: EXP3IXVizierParams | None = None) -> EXP3IXVizierState:
        del key
        n = self.num_arms
        return EXP3IXVizierState(
            t=jnp.zeros((), jnp.int32),
            log_probs=jnp.full((n,), -math.log(n), self.float_dtype),
            params=self._resolve_params(params),
        )

    def ask(self, state: EXP3IXVizierState, key: jax.Array) -> BanditQuery:
        checks.check_state(self, state)
        p = estimators.probabilities(state.log_probs)
        arm = sampling.sample_index(p, sampling.uniforms(key, 1, self.float_dtype)[0])
        return BanditQuery(arms=arm[None], play_probs=p, query_probs=p[arm][None])

    def tell(
        self, state: EXP3IXVizierState, query: BanditQuery, observed: jax.Array
    ) -> EXP3IXVizierState:
        observed = self._observed(observed, state, query)
        gamma = anytime_gamma(state.t, self.float_dtype)
        loss_estimate = observed[0] / (query.query_probs[0] + gamma)
        log_probs = estimators.exp3_log_update(
            state.log_probs, query.arms[0], -loss_estimate, state.params.stepsize
        )
        return state.replace(t=state.t + 1, log_probs=log_probs.astype(self.float_dtype))
