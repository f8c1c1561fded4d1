"""Exp3-IX as the paper's authors implemented it in OSS Vizier (``EXP3IXEnsembleDesign`` of
``vizier/_src/algorithms/ensemble/ensemble_design.py``, google-vizier 0.1.24; Apache-2.0).

Unlike :class:`~stabl_jax.Exp3IX`: a constant ``stepsize`` and the anytime implicit exploration
``gamma_t = 1/sqrt(1 + t)``; Vizier's estimate ``max_reward - r`` is ``l``, so there is no
``feedback`` option.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax

from stabl_jax import estimators
from stabl_jax.learners.base import BanditQuery
from stabl_jax.learners.exp3_vizier import EXP3VizierState, VizierEXP3Base, anytime_gamma


@dataclasses.dataclass(frozen=True)
class EXP3IXVizier(VizierEXP3Base):
    """Vizier's ``EXP3IXEnsembleDesign`` at its defaults, one query.

    Round ``t`` (``gamma_t = 1/sqrt(1 + t)``):

    - play ``x_t ~ p_t = softmax(w_t)``, observe ``l_t(x_t)``;
    - ``w_{t+1}(x_t) = w_t(x_t) - stepsize l_t(x_t) / (p_t(x_t) + gamma_t)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = EXP3IXVizier(num_arms=3, horizon=100)
      >>> state, info = jax.jit(learner.step)(learner.init(jax.random.key(0)),
      ...                            jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> int(state.t)
      1
    """

    name: ClassVar[str] = "exp3_ix_vizier"

    def play_distribution(self, state: EXP3VizierState) -> jax.Array:
        """``(num_arms,)`` ``p_t = softmax(w_t)``."""
        return estimators.probabilities(state.log_probs)

    def _tell(
        self, state: EXP3VizierState, query: BanditQuery, observed: jax.Array
    ) -> EXP3VizierState:
        gamma = anytime_gamma(state.t, self.float_dtype)
        loss_estimate = observed[0] / (query.query_probs[0] + gamma)
        return self._updated(state, query.arms[0], -loss_estimate, state.params.stepsize)
