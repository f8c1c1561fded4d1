"""The Strongly Adaptive BCO Learner (Algorithm 3 of Lu, Zhang, Chen, Zhang, Woodruff and Hazan,
"Adaptive Regret for Bandits Made Possible: Two Queries Suffice", ICLR 2024), with Algorithm 4
(projected OGD on ``K_hat``) as its ``B`` experts, expert ``k`` restarted every ``L_k`` rounds.

Algorithm 3, line by line (0-based ``t``; ``c`` the estimate scale, below):

- lines 2-3: ``history_lengths`` as :class:`stabl_jax.StABL`'s; ``B`` is their count.
- line 5: ``eta_k = min{1/2, sqrt(log2 T / L_k)} / (G D)``, also the restart weight
  (:meth:`ExpertEnsembleBCO.base_meta_step_sizes`); expert step Appendix C's ``D / (d G c
  sqrt(L_k))``; ``delta = delta_scale / (kappa T)`` clipped to ``r`` and ``alpha = min(1,
  max(kappa delta, delta / r))`` (:func:`stabl_jax.domains.paper_shrinkage`).
- line 7: ``p(t) = w_t / W_t`` (:meth:`ExpertEnsembleBCO.meta_probs`).
- lines 9-10: ``k_t ~ U[B]``, ``u`` on the sphere; play ``x_t = sum_k p(t)_k A_k(t)``, observe
  ``l_t(A_{k_t}(t) + delta u)`` and ``l_t(A_{k_t}(t))`` (``_ask``).
- line 11: ``g~_k = c d u (l_t(A_{k_t} + delta u) - l_t(A_{k_t})) / delta 1[k = k_t]``; every
  expert runs Algorithm 4, the others on ``g = 0``.
- line 12: ``l~_t(A_k) = c l_t(A_{k_t}) 1[k = k_t]``, ``l~_t(x_t) = sum_k p(t)_k l~_t(A_k)``.
- line 13: ``r~_t(k) = l~_t(x_t) - l~_t(A_k)``, ``w_{t+1}(k) = w_t(k) (1 + eta_k r~_t(k))``,
  muted at ``<= 0`` until the restart (``state.num_muted``; the last live expert has ``r~ = 0``),
  or ``eta_k`` on a restart, which also restarts ``A_k`` at the origin.

``c`` (printed ``log T`` in lines 11-12) is ``B`` by default, the unbiased factor for a uniform
``k_t``; ``scale_factor="log_T"`` uses ``log2 T``.
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

from stabl_jax import checks, gradients
from stabl_jax.bco.base import PARAM_BOUNDS, BCOLearner, BCOQuery, safe_softmax
from stabl_jax.bco.ogd import OGDState, ProjectedOGD
from stabl_jax.learners.ensemble import SCALE_BOUNDS, Ensemble, EnsembleParams, check_meta_step

SCALE_FACTORS: tuple[str, ...] = ("B", "log_T")


@chex.dataclass(frozen=True)
class StABLBCOParams(EnsembleParams):
    """Sweepable numbers of :class:`StABLBCO` and :class:`~stabl_jax.bco.StABLBCOTwoQuery`:
    :class:`~stabl_jax.learners.ensemble.EnsembleParams`' scales, ``delta_scale``, ``()``,
    which multiplies the perturbation radius ``delta = 1 / (kappa T)``, and ``lipschitz``,
    ``()``, the ``G`` that divides every step size."""

    delta_scale: jax.Array
    lipschitz: jax.Array


@chex.dataclass(frozen=True)
class StABLBCOState:
    t: jax.Array  # () int32, rounds played so far
    experts: OGDState  # point (B, dim) float A_k(t) ∈ K_hat; opt_state stacked on (B, ...)
    meta_log_weights: jax.Array  # (B,) float, log w_t(k), unnormalised; -inf = muted
    num_muted: jax.Array  # () int32, meta updates that hit 1 + eta_k r~ <= 0 so far
    params: StABLBCOParams


@dataclasses.dataclass(frozen=True)
class ExpertEnsembleBCO(Ensemble, BCOLearner):
    """Algorithm 3 and Appendix D's common part: ``B`` projected-OGD experts under the
    restarted multiplicative weights of :class:`~stabl_jax.learners.ensemble.Ensemble`.

    Attributes:
      history_lengths: ``L_1 < ... < L_B``; ``None`` gives the paper's ``2^k`` (needs
        ``horizon >= 16``).
      round_offset: 0 (default) or 1 (the paper's 1-based restart rule).
    """

    round_offset: int = 0

    Params: ClassVar[type] = StABLBCOParams
    State: ClassVar[type] = StABLBCOState
    experts_field: ClassVar[str] = "experts"
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        **SCALE_BOUNDS,
        **{k: PARAM_BOUNDS[k] for k in ("delta_scale", "lipschitz")},
    }

    @property
    def log_t(self) -> float:
        """``log T`` (base 2, like the interval set)."""
        return math.log2(self.horizon)

    def base_meta_step_sizes(self) -> np.ndarray:
        """``(B,)`` ``G eta_k = min{1/2, sqrt(log T / L_k)} / D`` (line 5): before scaling and
        before :meth:`meta_step_sizes` divides by ``params.lipschitz``."""
        scale = np.minimum(0.5, np.sqrt(self.log_t / self._lengths()))
        return scale / self._domain.D

    def meta_step_sizes(self, params: StABLBCOParams) -> jax.Array:
        """``(B,)`` ``meta_lr_scale * eta_k``."""
        return super().meta_step_sizes(params) / params.lipschitz

    def expert_learning_rates(self, params: StABLBCOParams) -> jax.Array:
        """``(B,)`` ``expert_lr_scale`` times :meth:`base_expert_learning_rates`, over ``G``."""
        return super().expert_learning_rates(params) / params.lipschitz

    def check_params(self, params: StABLBCOParams, batch: int | None = None) -> None:
        """The ensemble's checks, and the smallest ``eta_k`` a normal number at the largest
        ``params.lipschitz``."""
        super().check_params(params, batch)
        scale, g = params.meta_lr_scale, params.lipschitz
        if not (checks.is_concrete(scale) and checks.is_concrete(g)):
            return
        g_max = float(np.max(np.asarray(g, np.float64)))
        eta = float(np.min(np.asarray(scale, np.float64))) * float(
            np.min(self.base_meta_step_sizes())
        )
        check_meta_step(
            eta / g_max, self.dtype, f"params.lipschitz={g_max:.3g}",
            lambda tiny: f"lipschitz <= {eta / tiny:.3g}",
        )  # fmt: skip

    def base_learner(self) -> ProjectedOGD:
        """Algorithm 4 on this learner's domain and optimiser."""
        return ProjectedOGD(self.domain, self.optimizer)  # type: ignore[arg-type]

    def fresh_experts(self) -> OGDState:
        """``B`` Algorithm-4 instances at the origin."""
        centers = jnp.zeros((self.num_experts, self.dim), self.float_dtype)
        return jax.vmap(self.base_learner().init)(centers)

    def meta_probs(self, state: StABLBCOState) -> jax.Array:
        """``(B,)`` ``p(t) = w_t / W_t`` (line 7)."""
        return safe_softmax(state.meta_log_weights)

    def played_point(self, state: StABLBCOState) -> jax.Array:
        """``(dim,)`` ``x_t = sum_k p(t)_k A_k(t) ∈ K_hat`` (line 10)."""
        return self.meta_probs(state) @ state.experts.point

    def _step_experts(
        self, state: StABLBCOState, grads: jax.Array, regret_gain: jax.Array
    ) -> StABLBCOState:
        """Experts' Algorithm-4 step with ``grads`` ``(B, dim)``, then the meta update of line
        13 with ``r~_t`` ``(B,)`` and the restarts for round ``t + 1``."""
        params = state.params
        experts = jax.vmap(self.base_learner().update, in_axes=(0, 0, 0, None))(
            state.experts, grads, self.expert_learning_rates(params), self.shrinkage(params)
        )
        return self._advance(state, experts, regret_gain)


@dataclasses.dataclass(frozen=True)
class StABLBCO(ExpertEnsembleBCO):
    """Strongly Adaptive BCO Learner (Algorithm 3), three queries per round.

    ``query.points = [x_t, A_{k_t}(t) + delta u, A_{k_t}(t)]``; ``x_t`` is played.

    Attributes:
      scale_factor: ``"B"`` (default, unbiased) or ``"log_T"`` (``log2 T``, as printed in
        lines 11-12).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jax.tree_util import Partial
      >>> learner = StABLBCO(dim=2, horizon=64)
      >>> learner.history_lengths, learner.num_queries
      ((32, 64), 3)
      >>> state = learner.init(jax.random.key(0))
      >>> loss = Partial(lambda c, x: jnp.linalg.norm(x - c), jnp.array([0.5, 0.0]))
      >>> state, info = jax.jit(learner.step)(state, loss, jax.random.key(1))
      >>> info.points.shape
      (3, 2)
    """

    scale_factor: str = "B"

    num_queries: ClassVar[int] = 3
    name: ClassVar[str] = "stabl_bco"

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_choice("scale_factor", self.scale_factor, SCALE_FACTORS)

    @property
    def num_sampled_experts(self) -> int:
        return self.num_experts

    @property
    def estimate_scale(self) -> float:
        """``c``: ``B`` (``scale_factor="B"``) or ``log2 T`` (``"log_T"``), lines 11-12."""
        return float(self.num_experts) if self.scale_factor == "B" else self.log_t

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B,)`` ``G eta = D / (d c sqrt(L_k))`` (Appendix C's ``eta``, ``log T`` -> ``c``)."""
        d, c = self.dim, self.estimate_scale
        return self._domain.D / (d * c * np.sqrt(self._lengths()))

    def _ask(self, state: StABLBCOState, key: jax.Array) -> BCOQuery:
        """Lines 7-10: ``points = [x_t, A_{k_t}(t) + delta u, A_{k_t}(t)]``."""
        draws = self.draws(key)
        delta = self.delta(state.params)
        anchor = state.experts.point[draws.expert]
        points = jnp.stack([self.played_point(state), anchor + delta * draws.direction, anchor])
        return BCOQuery(points=points, direction=draws.direction, delta=delta, expert=draws.expert)

    def _tell(self, state: StABLBCOState, query: BCOQuery, observed: jax.Array) -> StABLBCOState:
        """Lines 11-13 from ``observed[1:]`` (``observed[0] = l_t(x_t)`` is suffered, unused)."""
        c = self.estimate_scale
        chosen = jnp.arange(self.num_experts) == query.expert  # (B,) 1[k = k_t]

        # Line 11: c d u (l(A + delta u) - l(A)) / delta for k = k_t, zero for the others.
        g = c * gradients.two_point_estimate(observed[1], observed[2], query.direction, query.delta)
        grads = jnp.where(chosen[:, None], g[None, :], jnp.zeros_like(g)[None, :])

        # Line 12: l~(A_k) = c l(A_{k_t}) 1[k = k_t]; l~(x_t) = sum_k p_k l~(A_k).
        loss_est = jnp.where(chosen, c * observed[2], 0.0)
        mixed = jnp.dot(self.meta_probs(state), loss_est)
        # Line 13: r~_t(k) = l~(x_t) - l~(A_k).
        return self._step_experts(state, grads, mixed - loss_est)
