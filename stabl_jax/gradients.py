"""Zeroth-order gradient estimators for bandit convex optimisation (Section 5 and Algorithms 3-4
of Lu et al., ICLR 2024; Flaxman, Kalai and McMahan, SODA 2005; Agarwal, Dekel and Xiao, COLT
2010).

With ``u`` uniform on the unit sphere ``S^{d-1}`` and the ``delta``-smoothed loss
``l_hat(x) = E_{v ~ U(B)} l(x + delta v)`` (``B`` the unit ball),

- one point (FKM):  ``g = (d / delta) l(x + delta u) u``,
- two points:       ``g = (d / delta) (l(x + delta u) - l(x)) u``  (Algorithm 3, line 11 without
  its expert-sampling factor; Appendix D's ``g_hat_t``),

are both unbiased for ``grad l_hat(x)`` (Stokes: ``grad l_hat(x) = (d/delta) E[l(x + delta u) u]``
and ``E[u] = 0``). If ``l`` is ``G``-Lipschitz the two-point estimate is bounded,
``||g|| <= d G``; the one-point one only by ``d max|l| / delta``. ``|l - l_hat| <= delta G``.

The estimators take the *observed values*, so a learner can form them from the losses it was
told; :func:`one_point_gradient` and :func:`two_point_gradient` are conveniences that draw
``u`` and evaluate a loss themselves.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike


def sphere_uniform(key: jax.Array, dim: int, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """``(dim,)`` a direction ``u`` uniform on the unit sphere ``S^{dim-1}``.

    A standard normal vector divided by its norm (rotation invariance). In one dimension the
    sphere is ``{-1, +1}``. The (probability-zero) all-zeros draw maps to ``e_1``.

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
    """FKM's one-point estimate ``g = (d / delta) l(x + delta u) u``.

    Args:
      value: ``()`` the observed ``l(x + delta u)``.
      u: ``(d,)`` the unit direction that was queried.
      delta: ``()`` the perturbation radius (> 0).

    Returns:
      ``(d,)`` an unbiased estimate of ``grad l_hat(x)``.
    """
    d = u.shape[-1]
    return (d * value / delta) * u


def two_point_estimate(
    value_perturbed: jax.Array, value_center: jax.Array, u: jax.Array, delta: jax.Array | float
) -> jax.Array:
    """Two-point estimate ``g = (d / delta) (l(x + delta u) - l(x)) u`` (Algorithm 3, line 11).

    Args:
      value_perturbed: ``()`` the observed ``l(x + delta u)``.
      value_center: ``()`` the observed ``l(x)``.
      u: ``(d,)`` the unit direction that was queried.
      delta: ``()`` the perturbation radius (> 0).

    Returns:
      ``(d,)`` an unbiased estimate of ``grad l_hat(x)`` with ``||g|| <= d G``.
    """
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
