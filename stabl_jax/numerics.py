"""Reductions whose order of additions is fixed by the code, not by the compiler, so the same
inputs give the same bits on any batch or device count (XLA splits ``jnp.sum`` by shape)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def fixed_order_sum(x: jax.Array) -> jax.Array:
    """Sum over the last axis as a fixed pairwise tree: entry ``i`` of the first half plus
    entry ``i`` of the second, level by level (an odd entry out carried unchanged).

    Args:
      x: ``(..., n)`` array, ``n >= 1``.

    Returns:
      ``(...)`` the sums, in ``x``'s dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> float(fixed_order_sum(jnp.arange(5.0)))
      10.0
    """
    while x.shape[-1] > 1:
        n = x.shape[-1]
        half = n // 2
        paired = x[..., :half] + x[..., half : 2 * half]
        x = paired if n % 2 == 0 else jnp.concatenate([paired, x[..., 2 * half :]], axis=-1)
    return x[..., 0]


def fixed_order_dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """``(...)`` ``<a, b>`` of ``(..., n)`` arrays, summed by :func:`fixed_order_sum`."""
    return fixed_order_sum(a * b)


def matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` with ``precision=HIGHEST``: never TF32 on a GPU (too coarse for BBOB)."""
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
