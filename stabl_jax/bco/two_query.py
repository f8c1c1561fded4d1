"""Strongly adaptive BCO with two queries: Appendix D of Lu et al. (ICLR 2024), Algorithm 3's
geometric experts with the linear surrogate of Zhao et al. (2021).

Appendix D's changes to Algorithm 3: (line 9) no expert ``k_t`` is sampled; (line 10) the only
extra query is ``x_t + delta u`` around the played ``x_t ∈ K_hat``; (line 11) ``g_hat_t = d u
(l_t(x_t + delta u) - l_t(x_t)) / delta`` feeds every expert's Algorithm 4; (line 12)
``r~_t(k) = g_hat_t^T (x_t - A_k(t))``. Everything else is :mod:`stabl_jax.bco.stabl_bco`'s;
the expert step size is ``D / (d G sqrt(L_k))`` (``||g_hat_t|| <= d G``).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import gradients
from stabl_jax.bco.base import BCOQuery
from stabl_jax.bco.stabl_bco import ExpertEnsembleBCO, StABLBCOState


@dataclasses.dataclass(frozen=True)
class StABLBCOTwoQuery(ExpertEnsembleBCO):
    """Strongly adaptive BCO with two queries per round (Appendix D).

    ``query.points = [x_t, x_t + delta u]``, ``x_t = sum_k p(t)_k A_k(t)`` played; params and
    state are :class:`~stabl_jax.bco.StABLBCOParams` / :class:`~stabl_jax.bco.StABLBCOState`.

    Example:
      >>> learner = StABLBCOTwoQuery(dim=2, horizon=64)
      >>> learner.history_lengths, learner.num_queries
      ((32, 64), 2)
    """

    num_queries: ClassVar[int] = 2
    name: ClassVar[str] = "stabl_bco_two_query"

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B,)`` ``G eta = D / (d sqrt(L_k))`` (divided by ``params.lipschitz``)."""
        return self._domain.D / (self.dim * np.sqrt(self._lengths()))

    def _ask(self, state: StABLBCOState, key: jax.Array) -> BCOQuery:
        """``points = [x_t, x_t + delta u]`` (line 10)."""
        return self._two_point_query(self.played_point(state), state.params, key)

    def _tell(self, state: StABLBCOState, query: BCOQuery, observed: jax.Array) -> StABLBCOState:
        """Lines 11-12: one ``g_hat_t`` for every expert, ``r~(k) = g_hat^T (x_t - A_k)``."""
        g_hat = gradients.two_point_estimate(observed[1], observed[0], query.direction, query.delta)
        points = state.experts.point  # (B, dim)
        grads = jnp.broadcast_to(g_hat[None, :], points.shape)
        regret_gain = jnp.dot(query.points[0], g_hat) - points @ g_hat
        return self._step_experts(state, grads, regret_gain)
