"""Reductions whose order of additions is fixed by the code, not by the compiler.

XLA splits a reduction (``jnp.sum``, ``jnp.dot``) by the shapes around it (batch, devices,
backend), which moves the last bit of a float32 sum. The sums here are a fixed tree of
elementwise additions, so the same inputs give the same bits on any batch or device count.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def fixed_order_sum(x: jax.Array) -> jax.Array:
    """Sum over the last axis as a fixed pairwise tree.

    Level by level, entry ``i`` of the first half is added to entry ``i`` of the second half
    (an odd entry out is carried to the next level unchanged), so ``n`` entries take
    ``ceil(log2 n)`` elementwise additions whose order no compiler may change.

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
    """``<a, b>`` over the last axis, summed by :func:`fixed_order_sum`.

    Args:
      a: ``(..., n)``.
      b: ``(..., n)``, same shape and dtype as ``a``.

    Returns:
      ``(...)`` the inner products.
    """
    return fixed_order_sum(a * b)


def matmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a @ b`` at full float32 precision on every backend.

    GPUs may multiply float32 matrices in TF32 (inputs rounded to a 10-bit mantissa), too
    coarse for BBOB's rotations; on a CPU the result is the same bits as ``a @ b``.

    Args:
      a: ``(..., m, k)`` or ``(k,)``.
      b: ``(..., k, n)`` or ``(k,)``.

    Returns:
      ``jnp.matmul(a, b)`` computed with ``precision=HIGHEST``.
    """
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
