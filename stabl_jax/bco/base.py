"""The contract every bandit convex optimisation (BCO) learner obeys (Section 5 and Appendix A of
Lu et al., ICLR 2024; ``docs/design.md``, ``docs/learners.md``).

::

    learner = SomeBCOLearner(dim=3, horizon=4096)     # frozen dataclass: static under jit
    state = learner.init(key, params)                 # params default to learner.default_params
    query = learner.ask(state, key)                   # every queried point, before any loss
    state = learner.tell(state, query, observed)      # observed = loss at query.points only
    state, info = learner.step(state, loss_fn, key)   # ask + evaluate + tell, pure
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from stabl_jax import checks, gradients
from stabl_jax.domains import Ball, Domain, paper_shrinkage
from stabl_jax.learners.base import Learner


@chex.dataclass(frozen=True)
class BCOQuery:
    """What a BCO learner asks for in one round, chosen before any loss is revealed.

    Attributes:
      points: ``(num_queries, dim)`` float. ``points[0]`` is played; the rest are observed.
      direction: ``(dim,)`` float, the unit direction ``u`` of this round (zeros if unused).
      delta: ``()`` float, the perturbation radius ``delta`` used (0 if unused).
      expert: ``()`` int32, the sampled expert ``k_t`` (0 for single-learner methods).
    """

    points: jax.Array
    direction: jax.Array
    delta: jax.Array
    expert: jax.Array


@chex.dataclass(frozen=True)
class BCODraws:
    """The randomness one round consumes (replayable by a reference implementation).

    Attributes:
      expert: ``()`` int32 ``k_t``, uniform on ``{0, ..., num_sampled_experts - 1}``
        (Algorithm 3, line 9); always 0 for learners that do not sample an expert.
      direction: ``(dim,)`` float ``u``, uniform on the unit sphere.
    """

    expert: jax.Array
    direction: jax.Array


@chex.dataclass(frozen=True)
class BCOStepInfo:
    """Per-round record returned by :meth:`BCOLearner.step` (all small).

    Attributes:
      played: ``(dim,)`` the played point ``x_t``.
      loss: ``()`` the suffered loss ``l_t(x_t)``.
      observed: ``(num_queries,)`` the losses at ``points``.
      points: ``(num_queries, dim)`` every queried point (``points[0] == played``).
    """

    played: jax.Array
    loss: jax.Array
    observed: jax.Array
    points: jax.Array


def evaluate(
    loss_fn: Callable[[jax.Array], jax.Array], points: jax.Array, dtype: Any = None
) -> jax.Array:
    """``(num_queries,)`` ``loss_fn`` at each row of ``points`` ``(num_queries, dim)``: the only
    place a learner's ``step`` touches the loss."""
    values = jax.vmap(loss_fn)(points)
    return values if dtype is None else values.astype(dtype)


def safe_softmax(log_weights: jax.Array) -> jax.Array:
    """``softmax(log_weights)``, or uniform if every entry is ``-inf`` (a guard: the meta
    updates of Algorithm 3 and Appendix D keep one expert alive)."""
    finite = jnp.isfinite(jnp.max(log_weights))
    n = log_weights.shape[-1]
    return jnp.where(finite, jax.nn.softmax(log_weights), jnp.full_like(log_weights, 1.0 / n))


#: Ranges of the BCO learners' params: ``lr_scale >= 0``, ``delta_scale > 0``.
PARAM_BOUNDS: Mapping[str, checks.Interval] = {
    "lr_scale": checks.Interval(0.0),
    "delta_scale": checks.Interval(0.0, low_open=True),
    "lipschitz": checks.Interval(0.0, low_open=True),
    "loss_bound": checks.Interval(0.0, low_open=True),
}


@dataclasses.dataclass(frozen=True)
class BCOLearner(Learner[BCOQuery]):
    """Base class of the BCO learners: a :class:`BCOQuery` of points in ``R^d``.

    Attributes:
      dim: ``d``, the dimension of the decision set.
      horizon: ``T``, the number of rounds step sizes are tuned for (>= 2).
      domain: the convex set ``K`` (:mod:`stabl_jax.domains`, ``dim`` equal); ``None`` is the
        unit ball.
      lipschitz: ``G``, the Lipschitz constant the step sizes assume (> 0). Traced: the
        default of ``params.lipschitz``, which the step sizes read (not part of the
        learner's identity: learners that differ only in it share one program).
      optimizer: Algorithm 4's base optimiser, an ``optax.GradientTransformation`` at unit
        learning rate scaled by ``eta`` (compared by identity); ``None`` is ``optax.sgd(1.0)``.
      dtype: float dtype of the state, ``"float32"`` (default) or ``"float64"`` (needs
        ``jax_enable_x64``).
    """

    dim: int
    horizon: int
    domain: Domain | None = None
    lipschitz: float = dataclasses.field(default=1.0, compare=False)
    optimizer: optax.GradientTransformation | None = None
    dtype: str = "float32"

    name: ClassVar[str] = "bco_base"
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        k: PARAM_BOUNDS[k] for k in ("lr_scale", "delta_scale", "lipschitz")
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("dim", self.dim, minimum=1)
        checks.check_horizon(self.horizon, minimum=2)
        checks.check_choice("dtype", self.dtype, ("float32", "float64"))
        if self.domain is None:
            object.__setattr__(self, "domain", Ball(dim=self.dim, radius=1.0))
        if not isinstance(self.domain, Domain):
            raise TypeError(f"domain must be a stabl_jax.domains.Domain, got {self.domain!r}")
        if self.domain.dim != self.dim:
            raise ValueError(f"domain.dim={self.domain.dim} does not match dim={self.dim}")
        object.__setattr__(self, "lipschitz", checks.check_positive("lipschitz", self.lipschitz))
        if self.optimizer is not None and not isinstance(
            self.optimizer, optax.GradientTransformation
        ):
            raise TypeError(
                f"optimizer must be an optax.GradientTransformation, got {self.optimizer!r}"
            )

    @property
    def _domain(self) -> Domain:
        """:attr:`domain` as the constructor resolved it (never ``None``)."""
        return cast(Domain, self.domain)

    @property
    def num_sampled_experts(self) -> int:
        """Number of experts ``k_t`` is drawn from (1: ``k_t = 0``)."""
        return 1

    def draws(self, key: jax.Array) -> BCODraws:
        """The round's randomness: ``k_t = randint(fold_in(key, 0), 0, num_sampled_experts)``,
        ``u = sphere_uniform(fold_in(key, 1), dim)``. ``ask`` uses exactly these."""
        expert = jax.random.randint(
            jax.random.fold_in(key, 0), (), 0, self.num_sampled_experts, dtype=jnp.int32
        )
        direction = gradients.sphere_uniform(jax.random.fold_in(key, 1), self.dim, self.float_dtype)
        return BCODraws(expert=expert, direction=direction)

    def delta(self, params: Any) -> jax.Array:
        """``()`` ``delta = min(delta_scale / (kappa T), r)`` (Section 5's theorem)."""
        k = self._domain
        return jnp.minimum(params.delta_scale / (k.kappa * self.horizon), k.r)

    def shrinkage(self, params: Any) -> jax.Array:
        """``()`` ``alpha`` with ``K_hat = (1 - alpha) K``
        (:func:`stabl_jax.domains.paper_shrinkage`)."""
        return paper_shrinkage(self.delta(params), self._domain.r, self._domain.kappa)

    def step(
        self, state: Any, loss_fn: Callable[[jax.Array], jax.Array], key: jax.Array
    ) -> tuple[Any, BCOStepInfo]:
        """One round: ask, evaluate ``loss_fn`` at the queried points only, tell.

        Args:
          state: the learner's state.
          loss_fn: the round's loss ``x (dim,) -> ()``, a callable pytree such as
            ``jax.tree_util.Partial(family, theta_t)``.
          key: a PRNG key for this round (``jax.random.fold_in(run_key, t)``).

        Returns:
          ``(new_state, info)``.
        """
        new_state, query, observed = self._round(
            state, lambda points: evaluate(loss_fn, points, self.float_dtype), key
        )
        return new_state, self._info(query, observed)

    def _query(self, points: jax.Array, direction: jax.Array, delta: jax.Array) -> BCOQuery:
        """A query that samples no expert (``expert = 0``)."""
        return BCOQuery(
            points=points, direction=direction, delta=delta, expert=jnp.zeros((), jnp.int32)
        )

    def _two_point_query(self, point: jax.Array, params: Any, key: jax.Array) -> BCOQuery:
        """Play ``point`` ``(dim,)`` and observe ``point + delta u``."""
        u = self.draws(key).direction
        delta = self.delta(params)
        return self._query(jnp.stack([point, point + delta * u]), u, delta)

    def _info(self, query: BCOQuery, observed: jax.Array) -> BCOStepInfo:
        return BCOStepInfo(
            played=query.points[0], loss=observed[0], observed=observed, points=query.points
        )

    def _queried(self, query: BCOQuery) -> jax.Array:
        return query.points

    def _checked_observed(self, observed: jax.Array, query: BCOQuery) -> jax.Array:
        """Check the shape (and finiteness when concrete); cast to the state's dtype."""
        shape = (self.num_queries,)
        if tuple(np.shape(observed)) != shape:
            raise ValueError(f"observed must have shape {shape}, got {tuple(np.shape(observed))}")
        if checks.is_concrete(observed) and not np.all(np.isfinite(np.asarray(observed))):
            raise ValueError(f"observed losses must be finite, got {np.asarray(observed)!r}")
        return jnp.asarray(observed).astype(self.float_dtype)

    def _scalar(self, value: float) -> jax.Array:
        return jnp.asarray(value, self.float_dtype)
