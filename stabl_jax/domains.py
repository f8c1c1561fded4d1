"""Convex domains ``K`` for bandit convex optimisation (Section 5 and Appendix A of Lu et al.,
ICLR 2024), with ``r B ⊂ K ⊂ D B`` (origin-centred balls) and ``kappa = D / r``.
Algorithm 4 projects onto ``K_hat = (1 - alpha) K`` so that every query ``x + delta u`` stays
in ``K`` (:func:`paper_shrinkage`); projections are :mod:`optax.projections`' onto the scaled
set, every method taking one point ``x`` ``(dim,)``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import optax
from jax.typing import DTypeLike

from stabl_jax import checks


def paper_shrinkage(delta: jax.Array, r: float, kappa: float) -> jax.Array:
    """``alpha = min(1, max(kappa delta, delta / r))``: Algorithm 4's ``kappa delta`` (line 5),
    floored at ``delta / r`` so ``x + delta u ∈ K`` also when ``D < 1``."""
    delta = jnp.asarray(delta)
    return jnp.minimum(1.0, jnp.maximum(kappa * delta, delta / r))


@dataclasses.dataclass(frozen=True)
class Domain:
    """Base class of a convex body ``K`` with ``r B ⊂ K ⊂ D B`` (frozen, hashed by value).

    Attributes:
      dim: ``d``, the dimension (>= 1).
    """

    dim: int

    name: ClassVar[str] = "domain"
    #: The field holding ``K``'s size, a finite float > 0 (the radius, the half-width).
    size_field: ClassVar[str] = ""

    def __post_init__(self) -> None:
        checks.check_int("dim", self.dim, minimum=1)
        field = self.size_field
        if field:
            size = checks.check_positive(field, getattr(self, field))
            object.__setattr__(self, field, size)

    # --- geometry ---------------------------------------------------------------------------
    @property
    def r(self) -> float:
        """Radius of the largest origin-centred ball inside ``K`` (default: the size field,
        a ball's radius or a cube's half-width)."""
        if not self.size_field:
            raise NotImplementedError
        return getattr(self, self.size_field)

    @property
    def D(self) -> float:
        """Radius of the smallest origin-centred ball containing ``K``."""
        raise NotImplementedError

    @property
    def kappa(self) -> float:
        """``kappa = D / r`` (Assumption 1)."""
        return self.D / self.r

    @property
    def diameter(self) -> float:
        """An upper bound on ``max_{x,y ∈ K} ||x - y||`` (``2 D``)."""
        return 2.0 * self.D

    def center(self, dtype: DTypeLike = jnp.float32) -> jax.Array:
        """``(dim,)`` the origin, the centre of ``r B`` (every learner's ``x_1``)."""
        return jnp.zeros((self.dim,), dtype)

    # --- projections ------------------------------------------------------------------------
    def project_scaled(self, x: jax.Array, scale: jax.Array) -> jax.Array:
        """Euclidean projection of ``x`` ``(dim,)`` onto ``scale * K`` (``scale`` in [0, 1])."""
        x = jnp.asarray(x)
        return self._project(x, jnp.asarray(scale, x.dtype) * getattr(self, self.size_field))

    def _project(self, x: jax.Array, size: jax.Array) -> jax.Array:
        """Projection of ``x`` onto ``K`` with its size field set to ``size``."""
        raise NotImplementedError

    def project(self, x: jax.Array) -> jax.Array:
        """``(dim,)`` Euclidean projection ``Π_K(x)``."""
        return self.project_scaled(x, jnp.ones((), jnp.asarray(x).dtype))

    def project_shrunk(self, x: jax.Array, alpha: jax.Array) -> jax.Array:
        """``(dim,)`` projection onto ``K_hat = (1 - alpha) K`` (Algorithm 4, line 5)."""
        return self.project_scaled(x, 1.0 - jnp.asarray(alpha, jnp.asarray(x).dtype))

    def shrunk(self, alpha: float) -> Domain:
        """The domain ``(1 - alpha) K``, ``alpha`` in [0, 1) (host-side)."""
        alpha = checks.check_probability("alpha", alpha, open_right=True)
        if not self.size_field:
            raise NotImplementedError(
                f"{type(self).__name__} names no size_field: set it (e.g. 'radius') or "
                "override shrunk"
            )
        size = (1.0 - alpha) * getattr(self, self.size_field)
        return dataclasses.replace(self, **{self.size_field: size})

    # --- membership, support, sampling --------------------------------------------------------
    def contains(self, x: jax.Array, atol: float = 1e-5) -> jax.Array:
        """``()`` bool: ``x ∈ K`` up to ``atol`` (on the gauge, i.e. relative to ``K``'s size)."""
        raise NotImplementedError

    def support(self, v: jax.Array) -> jax.Array:
        """``()`` support function ``max_{y ∈ K} v^T y`` (Frank-Wolfe gap certificates)."""
        raise NotImplementedError

    def sample_interior(self, key: jax.Array, dtype: DTypeLike = jnp.float32) -> jax.Array:
        """``(dim,)`` a point drawn uniformly from ``K``."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Ball(Domain):
    """Euclidean ball ``{x : ||x||_2 <= R}``: ``r = D = R``, ``kappa = 1``.

    Example:
      >>> import jax.numpy as jnp
      >>> ball = Ball(dim=2, radius=2.0)
      >>> ball.project(jnp.array([3.0, 4.0])).tolist()
      [1.2000000476837158, 1.600000023841858]
      >>> ball.r, ball.D, ball.kappa
      (2.0, 2.0, 1.0)
    """

    radius: float = 1.0

    name: ClassVar[str] = "ball"
    size_field: ClassVar[str] = "radius"

    D = Domain.r

    def _project(self, x: jax.Array, rad: jax.Array) -> jax.Array:
        proj = optax.projections.projection_l2_ball(x, rad)
        return jnp.where(rad > 0, proj, jnp.zeros_like(x))  # scale 0: K_hat = {0}

    def contains(self, x: jax.Array, atol: float = 1e-5) -> jax.Array:
        return jnp.linalg.norm(x) <= self.radius * (1.0 + atol)

    def support(self, v: jax.Array) -> jax.Array:
        return self.radius * jnp.linalg.norm(v)

    def sample_interior(self, key: jax.Array, dtype: DTypeLike = jnp.float32) -> jax.Array:
        k_dir, k_rad = jax.random.split(key)
        g = jax.random.normal(k_dir, (self.dim,), dtype)
        u = g / jnp.maximum(jnp.linalg.norm(g), jnp.finfo(dtype).tiny)
        rad = jax.random.uniform(k_rad, (), dtype) ** (1.0 / self.dim)
        return self.radius * rad * u


@dataclasses.dataclass(frozen=True)
class Box(Domain):
    """Cube ``[-a, a]^d``: ``r = a``, ``D = a sqrt(d)``, ``kappa = sqrt(d)``.

    Example:
      >>> import jax.numpy as jnp
      >>> Box(dim=2, half_width=1.0).project(jnp.array([3.0, -0.5])).tolist()
      [1.0, -0.5]
    """

    half_width: float = 1.0

    name: ClassVar[str] = "box"
    size_field: ClassVar[str] = "half_width"

    @property
    def D(self) -> float:
        return self.half_width * math.sqrt(self.dim)

    def _project(self, x: jax.Array, a: jax.Array) -> jax.Array:
        return optax.projections.projection_box(x, -a, a)

    def contains(self, x: jax.Array, atol: float = 1e-5) -> jax.Array:
        return jnp.max(jnp.abs(x)) <= self.half_width * (1.0 + atol)

    def support(self, v: jax.Array) -> jax.Array:
        return self.half_width * jnp.sum(jnp.abs(v))

    def sample_interior(self, key: jax.Array, dtype: DTypeLike = jnp.float32) -> jax.Array:
        a = self.half_width
        return jax.random.uniform(key, (self.dim,), dtype, minval=-a, maxval=a)


@dataclasses.dataclass(frozen=True)
class L1Ball(Domain):
    """Cross-polytope ``{x : ||x||_1 <= a}``: ``r = a / sqrt(d)``, ``D = a``, ``kappa = sqrt(d)``.

    Example:
      >>> import jax.numpy as jnp
      >>> L1Ball(dim=2, radius=1.0).project(jnp.array([2.0, 0.0])).tolist()
      [1.0, 0.0]
    """

    radius: float = 1.0

    name: ClassVar[str] = "l1_ball"
    size_field: ClassVar[str] = "radius"

    @property
    def r(self) -> float:
        return self.radius / math.sqrt(self.dim)

    @property
    def D(self) -> float:
        return self.radius

    def _project(self, x: jax.Array, a: jax.Array) -> jax.Array:
        safe = jnp.maximum(a, jnp.finfo(x.dtype).tiny)
        proj = optax.projections.projection_l1_ball(x, safe)
        return jnp.where(a > 0, proj, jnp.zeros_like(x))

    def contains(self, x: jax.Array, atol: float = 1e-5) -> jax.Array:
        return jnp.sum(jnp.abs(x)) <= self.radius * (1.0 + atol)

    def support(self, v: jax.Array) -> jax.Array:
        return self.radius * jnp.max(jnp.abs(v))

    def sample_interior(self, key: jax.Array, dtype: DTypeLike = jnp.float32) -> jax.Array:
        # Uniform on the cross-polytope: Dirichlet(1, ..., 1) weights (last: slack), signs.
        k_exp, k_sign = jax.random.split(key)
        e = jax.random.exponential(k_exp, (self.dim + 1,), dtype)
        w = e[: self.dim] / jnp.sum(e)
        signs = jnp.where(jax.random.bernoulli(k_sign, 0.5, (self.dim,)), 1.0, -1.0)
        return (self.radius * w * signs).astype(dtype)


DOMAINS: dict[str, type[Domain]] = {"ball": Ball, "box": Box, "l1_ball": L1Ball}


def make_domain(name: str, dim: int, size: float = 1.0) -> Domain:
    """Construct a domain by name; ``size`` is the radius (ball, l1 ball) or half-width (box).

    Example:
      >>> make_domain("box", dim=3, size=0.5).D
      0.8660254037844386
    """
    if name not in DOMAINS:
        raise ValueError(f"unknown domain {name!r}; choose one of {sorted(DOMAINS)}")
    cls = DOMAINS[name]
    return cls(dim=dim, **{cls.size_field: size})
