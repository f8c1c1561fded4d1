"""Reductions whose order of additions is fixed by the code, not by the compiler.

XLA chooses how to split a reduction (``jnp.sum``, ``jnp.dot``) by the shapes around it: the
number of runs stepped together, the device count, the backend. A float32 sum evaluated in
another order differs in the last bit, so a metric computed with ``jnp.dot`` under ``vmap``
can change with the batch size even though every learner decision is the same. The sums
here are written as a fixed tree of elementwise additions, which XLA never reorders, so the
same inputs give the same bits on any batch size, device count or backend.
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

    GPUs multiply float32 matrices in TF32 by default (inputs rounded to a 10-bit mantissa):
    a BBOB rotation applied that way is off by ~3e-4 relative (measured on an NVIDIA H100
    against the COCO reference values), where the CPU is exact to float32 rounding. The
    matrices here are small (at most the problem dimension squared), so full precision
    costs nothing measurable; on a CPU the result is the same bits as ``a @ b``.

    Args:
      a: ``(..., m, k)`` or ``(k,)``.
      b: ``(..., k, n)`` or ``(k,)``.

    Returns:
      ``jnp.matmul(a, b)`` computed with ``precision=HIGHEST``.
    """
    return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
