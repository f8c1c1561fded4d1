"""Exp3-IX: Exp3 with implicit exploration (Algorithm 1 of Neu, "Explore no more: improved
high-probability regret bounds for non-stochastic bandits", NeurIPS 2015). One query per round,
loss feedback; the estimate divides by ``p + gamma`` instead of ``p`` (no uniform mixing).
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
class Exp3IXParams:
    """Sweepable numbers of :class:`Exp3IX`.

    Attributes:
      lr_scale: ``()`` multiplies Theorem 1's ``eta = sqrt(2 ln K / (K T))``.
      ix_scale: ``()`` multiplies the implicit exploration ``gamma = eta / 2`` (of the scaled
        ``eta``); 0 gives Exp3.
    """

    lr_scale: jax.Array
    ix_scale: jax.Array


@dataclasses.dataclass(frozen=True)
class Exp3IX(WeightsLearner):
    """Exp3-IX (Neu 2015, Algorithm 1), one query per round, in the log domain.

    Round ``t`` (``K = num_arms``):

    - ``p_{t,i} = w_{t,i} / W_t``; play ``I_t ~ p_t``, observe ``l_{t,I_t}``;
    - ``l~_{t,i} = l_{t,i} 1{I_t = i} / (p_{t,i} + gamma)``;
    - ``w_{t+1,i} = w_{t,i} exp(-eta l~_{t,i})``.

    Theorem 1's tuning (the default): ``eta = 2 gamma = sqrt(2 ln K / (K T))``. Here
    ``eta = lr_scale sqrt(2 ln K / (K T))`` and ``gamma = ix_scale eta / 2``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = Exp3IX(num_arms=3, horizon=100)
      >>> eta, gamma = learner.rates(learner.default_params)
      >>> round(float(eta), 4), round(float(gamma), 4)
      (0.0856, 0.0428)
      >>> state, info = learner.step(learner.init(jax.random.key(0)),
      ...                            jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> int(state.t)
      1
    """

    name: ClassVar[str] = "exp3_ix"
    Params: ClassVar[type] = Exp3IXParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "lr_scale": checks.Interval(0.0),
        "ix_scale": checks.Interval(0.0),
    }

    def rates(self, params: Exp3IXParams) -> tuple[jax.Array, jax.Array]:
        """``(eta, gamma)``: ``eta = lr_scale sqrt(2 ln K / (K T))``, ``gamma = ix_scale eta/2``."""
        k = self.num_arms
        eta = params.lr_scale * math.sqrt(2.0 * math.log(k) / (k * self.horizon))
        return eta, params.ix_scale * eta / 2.0

    def _ask(self, state: WeightsState, key: jax.Array) -> BanditQuery:
        return sample_query(key, jnp.exp(state.log_weights))

    def _tell(self, state: WeightsState, query: BanditQuery, observed: jax.Array) -> WeightsState:
        eta, gamma = self.rates(state.params)
        l_tilde = observed[0] / (query.query_probs[0] + gamma)
        log_w = estimators.exp3_log_update(state.log_weights, query.arms[0], -l_tilde, eta)
        return dataclasses.replace(state, t=state.t + 1, log_weights=log_w.astype(self.float_dtype))
