"""Strongly adaptive BCO with two queries: the variant of Algorithm 3 in Appendix D ("An
Alternative Proof Strategy for BCO") of Lu et al., ICLR 2024, which combines the geometric
experts of Algorithm 3 with the linear surrogate loss of Zhao et al. (2021).

Differences from Algorithm 3 (Appendix D's list):

1. line 9: no expert ``k_t`` is sampled;
2. line 10: the only extra observation is ``l_t(x_t + delta u)`` around the *played* point
   (``x_t ∈ K_hat`` as a convex combination of experts in ``K_hat``, so the query is in ``K``);
3. line 11: ``g_hat_t = d u (l_t(x_t + delta u) - l_t(x_t)) / delta`` and every expert runs
   Algorithm 4 on the same linear surrogate ``h_t(x) = g_hat_t^T x`` (gradient ``g_hat_t``);
4. line 12: ``l~_t(A_k(t)) = g_hat_t^T A_k(t)``, ``l~_t(x_t) = g_hat_t^T x_t``, so
   ``r~_t(k) = g_hat_t^T (x_t - A_k(t))``.

Everything else — intervals, restarts, ``eta_k``, ``delta``, ``K_hat``, muting — is as in
:mod:`stabl_jax.bco.stabl_bco`. Choices:

- expert step size ``D / (d G sqrt(L_k))``: Appendix C's ``eta`` with the gradient bound
  ``||g_hat_t|| <= d G`` of Appendix D (no expert-sampling factor), times ``expert_lr_scale``;
- the meta step ``eta_k = min{1/2, sqrt(log T / L_k)} / (G D)`` is kept as in Algorithm 3
  ("the same argument on the tracking regret"); here ``|r~_t(k)| <= 2 d G D``, so weights
  can be muted as in Algorithm 3 (counted in ``state.num_muted``). ``sum_k p_k r~_t(k) = 0``,
  so some live expert has ``r~ >= 0`` and survives.
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

    ``query.points = [x_t, x_t + delta u]``; ``x_t = sum_k p(t)_k A_k(t)`` is played.
    Params and state are :class:`~stabl_jax.bco.StABLBCOParams` /
    :class:`~stabl_jax.bco.StABLBCOState`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jax.tree_util import Partial
      >>> learner = StABLBCOTwoQuery(dim=2, horizon=64)
      >>> state = learner.init(jax.random.key(0))
      >>> loss = Partial(lambda c, x: jnp.linalg.norm(x - c), jnp.array([0.5, 0.0]))
      >>> state, info = learner.step(state, loss, jax.random.key(1))
      >>> info.points.shape
      (2, 2)
    """

    num_queries: ClassVar[int] = 2
    name: ClassVar[str] = "stabl_bco_two_query"

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B,)`` ``D / (d G sqrt(L_k))``."""
        return self._domain.D / (self.dim * self.lipschitz * np.sqrt(self._lengths()))

    def _ask(self, state: StABLBCOState, key: jax.Array) -> BCOQuery:
        """``points = [x_t, x_t + delta u]`` (Appendix D, item 2)."""
        return self._two_point_query(self.played_point(state), state.params, key)

    def _tell(self, state: StABLBCOState, query: BCOQuery, observed: jax.Array) -> StABLBCOState:
        """Items 3-4: one estimate ``g_hat_t`` for every expert; ``r~(k) = g_hat^T (x_t - A_k)``."""
        g_hat = gradients.two_point_estimate(observed[1], observed[0], query.direction, query.delta)
        points = state.experts.point  # (B, dim)
        grads = jnp.broadcast_to(g_hat[None, :], points.shape)
        regret_gain = jnp.dot(query.points[0], g_hat) - points @ g_hat
        return self._step_experts(state, grads, regret_gain)
