"""Sampling an index from a probability vector by inverse CDF.

Every draw in stabl_jax goes through :func:`sample_index`, so a NumPy reference that is fed
the same uniforms makes the same choices (``tests/reference.py``). Inverse-CDF sampling uses
one uniform per draw, which is what makes that comparison possible; ``jax.random.categorical``
(Gumbel-max) would need ``n`` uniforms and cannot be replayed from one number.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def uniforms(key: jax.Array, num: int, dtype: jnp.dtype = jnp.float32) -> jax.Array:
    """``num`` independent U[0, 1) draws, shape ``(num,)``: the only randomness a bandit
    learner consumes in one round (draw ``j`` decides query ``j``)."""
    return jax.random.uniform(key, (num,), dtype=dtype)


def sample_index(probs: jax.Array, u: jax.Array) -> jax.Array:
    """Inverse-CDF draw: the smallest ``i`` with ``cdf_i > u * cdf_{n-1}``.

    Computed as ``min(#{i : cdf_i <= u * cdf_{n-1}}, n - 1)``. Scaling ``u`` by the total
    makes the draw exact for vectors that sum to one only up to rounding, and an arm with
    zero probability is never drawn (for ``u`` in [0, 1)).

    Args:
      probs: ``(n,)`` non-negative weights (need not be normalised).
      u: ``()`` a uniform in [0, 1).

    Returns:
      ``()`` int32 index in ``[0, n)``.

    Example:
      >>> import jax.numpy as jnp
      >>> int(sample_index(jnp.array([0.2, 0.0, 0.8]), jnp.float32(0.5)))
      2
    """
    cdf = jnp.cumsum(probs)
    count = jnp.sum(cdf <= u * cdf[-1], dtype=jnp.int32)
    return jnp.minimum(count, probs.shape[-1] - 1)
