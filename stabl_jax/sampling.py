"""Sampling an index from a probability vector by inverse CDF.

Every draw in stabl_jax goes through :func:`sample_index`, one uniform per draw, so a NumPy
reference fed the same uniforms makes the same choices (Gumbel-max would need ``n``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from stabl_jax import prng


def uniforms(key: jax.Array, num: int, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """``(num,)`` independent U[0, 1) draws (``jax.random.uniform``'s bits): a bandit
    learner's randomness in one round (draw ``j`` decides query ``j``)."""
    return prng.uniform(key, num, dtype)


def sample_index(probs: jax.Array, u: jax.Array) -> jax.Array:
    """Inverse-CDF draw ``min(#{i : cdf_i <= u * cdf_{n-1}}, n - 1)`` (:func:`blocked_cumsum`);
    a zero-probability arm is never drawn.

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
    n = probs.shape[-1]
    cdf = blocked_cumsum(probs)
    below = jnp.where(cdf <= u * cdf[-1], 1.0, 0.0)  # a float count: exact below 2^24 arms,
    count = jnp.sum(below, dtype=jnp.float32).astype(jnp.int32)  # and vectorised (int isn't)
    return jnp.minimum(count, n - 1)


def blocked_cumsum(values: jax.Array) -> jax.Array:
    """``(n,)`` inclusive cumulative sum of ``(n,)`` non-negative ``values``: block offsets
    plus in-block sums over ``ceil(sqrt(n))``-blocks, non-decreasing."""
    n = values.shape[-1]
    m = math.isqrt(n - 1) + 1 if n > 1 else 1
    nb = -(-n // m)
    blocks = jnp.pad(values, (0, nb * m - n)).reshape(nb, m)
    columns = [blocks[:, 0]]
    for j in range(1, m):
        columns.append(columns[-1] + blocks[:, j])
    offsets = [jnp.zeros((), values.dtype)]
    for b in range(1, nb):
        offsets.append(offsets[-1] + columns[-1][b - 1])
    cdf = jnp.stack(offsets)[:, None] + jnp.stack(columns, axis=1)
    return cdf.reshape(nb * m)[:n]
