"""Projected online gradient descent: Algorithm 4 of Lu et al. (ICLR 2024) and three baselines.

- :class:`ProjectedOGD`: ``x_{t+1} = Π_{K_hat}[x_t - eta g_t]`` on ``K_hat = (1 - alpha) K``,
  with a swappable optax base optimiser.
- :class:`FKM`: one-point bandit gradient descent (Flaxman, Kalai and McMahan, SODA 2005).
- :class:`TwoPointOGD`: two-point feedback (Agarwal, Dekel and Xiao, COLT 2010).
- :class:`FullInfoOGD`: exact gradients (Zinkevich, 2003), a reference, not a bandit learner.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp
import optax

from stabl_jax import checks, gradients
from stabl_jax.bco.base import PARAM_BOUNDS, BCOLearner, BCOQuery, BCOStepInfo, evaluate
from stabl_jax.domains import Domain


@chex.dataclass(frozen=True)
class OGDState:
    """State of one projected-OGD instance (stacked on a leading axis in an ensemble).

    Attributes:
      point: ``(dim,)`` float, the current prediction ``x_t ∈ K_hat``.
      opt_state: the base optimiser's optax state (a pytree).
    """

    point: jax.Array
    opt_state: Any


@dataclasses.dataclass(frozen=True)
class ProjectedOGD:
    """Algorithm 4: ``x_{t+1} = Π_{K_hat}[x_t + eta T(g_t)]``, ``T`` an optax transformation
    (``optax.sgd(1.0)``: ``T(g) = -g``, line 5 exactly).

    Attributes:
      domain: ``K``.
      optimizer: an ``optax.GradientTransformation`` or ``None`` (``optax.sgd(1.0)``).

    Example:
      >>> import jax.numpy as jnp
      >>> from stabl_jax.domains import Ball
      >>> ogd = ProjectedOGD(Ball(dim=2))
      >>> s = ogd.init(jnp.zeros(2))
      >>> ogd.update(s, jnp.array([-4.0, 0.0]), 1.0, 0.5).point.tolist()  # onto 0.5 B
      [0.5, 0.0]
    """

    domain: Domain
    optimizer: optax.GradientTransformation | None = None

    @property
    def transformation(self) -> optax.GradientTransformation:
        return optax.sgd(1.0) if self.optimizer is None else self.optimizer

    def init(self, point: jax.Array) -> OGDState:
        """Start at ``point`` ``(dim,)`` (it must lie in ``K_hat``; the learners use 0)."""
        return OGDState(point=point, opt_state=self.transformation.init(point))

    def update(
        self, state: OGDState, grad: jax.Array, learning_rate: jax.Array, alpha: jax.Array
    ) -> OGDState:
        """One step of Algorithm 4, line 5."""
        dtype = state.point.dtype
        direction, opt_state = self.transformation.update(
            grad.astype(dtype), state.opt_state, state.point
        )
        moved = state.point + jnp.asarray(learning_rate, dtype) * direction
        point = self.domain.project_shrunk(moved, alpha).astype(dtype)
        return OGDState(point=point, opt_state=opt_state)


@chex.dataclass(frozen=True)
class FullInfoOGDParams:
    """Sweepable numbers of :class:`FullInfoOGD`.

    Attributes:
      lr_scale: ``()`` multiplies the step size ``eta``.
      lipschitz: ``()`` ``G``, the Lipschitz constant the step size assumes.
    """

    lr_scale: jax.Array
    lipschitz: jax.Array


@chex.dataclass(frozen=True)
class BanditOGDParams(FullInfoOGDParams):
    """Sweepable numbers of :class:`TwoPointOGD`: :class:`FullInfoOGDParams`' and
    ``delta_scale``, ``()``, which multiplies the perturbation radius ``delta``."""

    delta_scale: jax.Array


@chex.dataclass(frozen=True)
class FKMParams(BanditOGDParams):
    """Sweepable numbers of :class:`FKM`: :class:`BanditOGDParams`' and ``loss_bound``,
    ``()``, FKM's bound ``C`` on the losses."""

    loss_bound: jax.Array


@chex.dataclass(frozen=True)
class SingleOGDState:
    t: jax.Array  # () int32, rounds played so far
    ogd: OGDState  # point (dim,) float in K_hat, and the optax state
    params: Any  # the learner's params


@dataclasses.dataclass(frozen=True)
class _SingleOGD(BCOLearner):
    """A single projected-OGD instance (FKM, two-point OGD, full information)."""

    def base_learner(self) -> ProjectedOGD:
        return ProjectedOGD(self.domain, self.optimizer)  # type: ignore[arg-type]

    def _init(self, key: jax.Array, params: Any) -> SingleOGDState:
        del key
        return SingleOGDState(
            t=jnp.zeros((), jnp.int32),
            ogd=self.base_learner().init(self._domain.center(self.float_dtype)),
            params=params,
        )

    def learning_rate(self, params: Any) -> jax.Array:
        raise NotImplementedError

    def _update(self, state: SingleOGDState, grad: jax.Array) -> SingleOGDState:
        params = state.params
        ogd = self.base_learner().update(
            state.ogd, grad, self.learning_rate(params), self.shrinkage(params)
        )
        return dataclasses.replace(state, t=state.t + 1, ogd=ogd)


@dataclasses.dataclass(frozen=True)
class FKM(_SingleOGD):
    """One-point bandit gradient descent (Flaxman, Kalai and McMahan, 2005, "BGD").

    Round ``t``: draw ``u``, play and observe ``x_t = y_t + delta u`` (1 query), estimate
    ``g = (d/delta) l_t(x_t) u`` and update ``y_{t+1} = Π_{(1-alpha)K}[y_t - eta g]``.

    Theorem 3.3's constants: ``delta = T^{-1/4} sqrt(D d C r / (3 (G r + C)))`` clipped to
    ``r``, ``alpha = delta / r``, ``eta = D delta / (C d sqrt T)``.

    Attributes:
      loss_bound: ``C``; ``None`` is ``2 G D`` (non-negative losses vanishing in ``K``).
        Traced, as ``lipschitz``: the default of ``params.loss_bound``, from which the
        program computes ``delta`` and ``eta``.

    Example:
      >>> learner = FKM(dim=2, horizon=100)
      >>> round(float(learner.delta(learner.default_params)), 4)  # = alpha on the unit ball
      0.2108
    """

    loss_bound: float | None = dataclasses.field(default=None, compare=False)

    name: ClassVar[str] = "fkm"
    Params: ClassVar[type] = FKMParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = PARAM_BOUNDS

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.fill(
            self, "loss_bound", 2.0 * self.lipschitz * self._domain.D, checks.check_positive
        )

    def delta(self, params: FKMParams) -> jax.Array:
        """FKM's ``delta = delta_scale T^{-1/4} sqrt(D d C r / (3 (G r + C)))``, at most ``r``."""
        k, c, g = self._domain, params.loss_bound, params.lipschitz
        base = self.horizon**-0.25 * jnp.sqrt(k.D * self.dim * c * k.r / (3.0 * (g * k.r + c)))
        return jnp.minimum(params.delta_scale * base, k.r)

    def shrinkage(self, params: FKMParams) -> jax.Array:
        """FKM's ``alpha = delta / r``."""
        return self.delta(params) / self._domain.r

    def learning_rate(self, params: FKMParams) -> jax.Array:
        """``eta = lr_scale * nu * delta / d`` with ``nu = D / (C sqrt T)``."""
        nu = self._domain.D / (params.loss_bound * math.sqrt(self.horizon))
        return params.lr_scale * nu * self.delta(params) / self.dim

    def _ask(self, state: SingleOGDState, key: jax.Array) -> BCOQuery:
        u = self.draws(key).direction
        delta = self.delta(state.params)
        return self._query((state.ogd.point + delta * u)[None], u, delta)

    def _tell(self, state: SingleOGDState, query: BCOQuery, observed: jax.Array) -> SingleOGDState:
        grad = gradients.one_point_estimate(observed[0], query.direction, query.delta)
        return self._update(state, grad)


@dataclasses.dataclass(frozen=True)
class TwoPointOGD(_SingleOGD):
    """Two-point bandit OGD (Agarwal, Dekel and Xiao, 2010), loss suffered at the played point.

    Round ``t``: play ``y_t`` and observe ``y_t + delta u`` (2 queries), estimate
    ``g = (d/delta)(l_t(y_t + delta u) - l_t(y_t)) u`` and update
    ``y_{t+1} = Π_{K_hat}[y_t - eta g]``. Constants of Appendix C: ``delta = delta_scale /
    (kappa T)``, :func:`stabl_jax.domains.paper_shrinkage`, ``eta = lr_scale D / (d G sqrt T)``.
    """

    num_queries: ClassVar[int] = 2
    name: ClassVar[str] = "two_point_ogd"
    Params: ClassVar[type] = BanditOGDParams

    def learning_rate(self, params: BanditOGDParams) -> jax.Array:
        """``eta = lr_scale D / (d G sqrt T)``."""
        base = self._domain.D / (self.dim * math.sqrt(self.horizon))
        return params.lr_scale * (base / params.lipschitz)

    def _ask(self, state: SingleOGDState, key: jax.Array) -> BCOQuery:
        return self._two_point_query(state.ogd.point, state.params, key)

    def _tell(self, state: SingleOGDState, query: BCOQuery, observed: jax.Array) -> SingleOGDState:
        grad = gradients.two_point_estimate(observed[1], observed[0], query.direction, query.delta)
        return self._update(state, grad)


@dataclasses.dataclass(frozen=True)
class FullInfoOGD(_SingleOGD):
    """Projected OGD with exact gradients (Zinkevich, 2003): a full-information reference line.

    ``step`` reads ``jax.grad(loss_fn)(x_t)`` (not a bandit learner), then
    ``x_{t+1} = Π_K[x_t - eta grad]``, ``eta = lr_scale D / (G sqrt T)``; ``tell`` needs the
    gradient.
    """

    name: ClassVar[str] = "ogd_full_info"
    Params: ClassVar[type] = FullInfoOGDParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        k: PARAM_BOUNDS[k] for k in ("lr_scale", "lipschitz")
    }

    def shrinkage(self, params: FullInfoOGDParams) -> jax.Array:
        return self._scalar(0.0)  # projects onto K itself

    def learning_rate(self, params: FullInfoOGDParams) -> jax.Array:
        return params.lr_scale * self._domain.D / (params.lipschitz * math.sqrt(self.horizon))

    def _ask(self, state: SingleOGDState, key: jax.Array) -> BCOQuery:
        del key
        zeros = jnp.zeros((self.dim,), self.float_dtype)
        return self._query(state.ogd.point[None], zeros, self._scalar(0.0))

    def tell(
        self,
        state: SingleOGDState,
        query: BCOQuery,
        observed: jax.Array,
        gradient: jax.Array | None = None,
    ) -> SingleOGDState:
        """Update with ``gradient`` ``(dim,)``, the exact gradient of the loss at
        ``query.points[0]`` (required; ``observed`` is only validated)."""
        checks.check_state(self, state)
        self._checked_observed(observed, query)
        if gradient is None:
            return self._tell(state, query, observed)
        return self._update(state, jnp.asarray(gradient, self.float_dtype))

    def _tell(self, state: SingleOGDState, query: BCOQuery, observed: jax.Array) -> SingleOGDState:
        raise ValueError(
            "FullInfoOGD needs the exact gradient at the played point, which the observed "
            "losses do not give: call tell(state, query, observed, gradient=...) with "
            "gradient = grad(loss)(query.points[0]), or step(state, loss_fn, key), which "
            "computes it (play(state, reveal, key) cannot)"
        )

    def step(
        self, state: SingleOGDState, loss_fn: Callable[[jax.Array], jax.Array], key: jax.Array
    ) -> tuple[SingleOGDState, BCOStepInfo]:
        query = self.ask(state, key)
        observed = evaluate(loss_fn, query.points, self.float_dtype)
        gradient = jax.grad(loss_fn)(query.points[0])
        return self.tell(state, query, observed, gradient), self._info(query, observed)
