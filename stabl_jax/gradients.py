"""Zeroth-order gradient estimators for bandit convex optimisation (Section 5 and Algorithms 3-4
of Lu et al., ICLR 2024; Flaxman, Kalai and McMahan, SODA 2005; Agarwal, Dekel and Xiao, COLT
2010).

With ``u`` uniform on ``S^{d-1}``, one point (FKM) ``g = (d / delta) l(x + delta u) u`` and two
points ``g = (d / delta) (l(x + delta u) - l(x)) u`` (Algorithm 3, line 11) are unbiased for
the gradient of ``l_hat(x) = E_{v ~ U(B)} l(x + delta v)``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike


def sphere_uniform(key: jax.Array, dim: int, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """``(dim,)`` a normal vector over its norm: uniform on ``S^{dim-1}`` (zeros map to ``e_1``).

    Example:
      >>> import jax
      >>> u = sphere_uniform(jax.random.key(0), 3)
      >>> round(float(jax.numpy.linalg.norm(u)), 5)
      1.0
    """
    g = jax.random.normal(key, (dim,), dtype)
    norm = jnp.linalg.norm(g)
    e1 = jnp.zeros((dim,), dtype).at[0].set(1.0)
    return jnp.where(norm > 0, g / jnp.where(norm > 0, norm, 1.0), e1)


def ball_uniform(key: jax.Array, dim: int, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """``(dim,)`` a point uniform in the unit ball (``u * U^{1/d}``): the smoothing law."""
    k_dir, k_rad = jax.random.split(key)
    rad = jax.random.uniform(k_rad, (), dtype) ** (1.0 / dim)
    return rad * sphere_uniform(k_dir, dim, dtype)


def one_point_estimate(value: jax.Array, u: jax.Array, delta: jax.Array | float) -> jax.Array:
    """``(d,)`` FKM's ``g = (d / delta) l(x + delta u) u`` from ``value = l(x + delta u)``."""
    d = u.shape[-1]
    return (d * value / delta) * u


def two_point_estimate(
    value_perturbed: jax.Array, value_center: jax.Array, u: jax.Array, delta: jax.Array | float
) -> jax.Array:
    """``(d,)`` ``g = (d / delta) (l(x + delta u) - l(x)) u`` (Algorithm 3, line 11)."""
    d = u.shape[-1]
    return (d * (value_perturbed - value_center) / delta) * u


def one_point_gradient(
    loss: Callable[[jax.Array], jax.Array], x: jax.Array, key: jax.Array, delta: jax.Array | float
) -> jax.Array:
    """Draw ``u`` and return :func:`one_point_estimate` at ``x`` ``(d,)`` (1 evaluation)."""
    u = sphere_uniform(key, x.shape[-1], x.dtype)
    return one_point_estimate(loss(x + delta * u), u, delta)


def two_point_gradient(
    loss: Callable[[jax.Array], jax.Array], x: jax.Array, key: jax.Array, delta: jax.Array | float
) -> jax.Array:
    """Draw ``u`` and return :func:`two_point_estimate` at ``x`` ``(d,)`` (2 evaluations).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> g = two_point_gradient(lambda x: jnp.sum(x), jnp.zeros(3), jax.random.key(0), 0.1)
      >>> g.shape
      (3,)
    """
    u = sphere_uniform(key, x.shape[-1], x.dtype)
    return two_point_estimate(loss(x + delta * u), loss(x), u, delta)
