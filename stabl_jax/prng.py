"""``jax.random.fold_in`` and ``jax.random.uniform``, bit for bit, with Threefry unrolled.

Straight-line, the hash fuses with its neighbours. With ``threefry2x32`` keys and
``jax_threefry_partitionable``, ``fold_in(key, t)`` is ``threefry(key, (0, t))`` and draw ``i``
the xor of ``threefry(key, (0, i))``'s words; otherwise these functions call ``jax.random``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotate_left(x: jax.Array, d: int) -> jax.Array:
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(
    k1: jax.Array, k2: jax.Array, x1: jax.Array, x2: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32 with 20 rounds (Salmon et al., 2011), as JAX computes it, unrolled.

    Args:
      k1, k2: the key's two uint32 words (broadcastable against the counts).
      x1, x2: the counter's two uint32 words.

    Returns:
      The two uint32 output words.
    """
    ks = (k1, k2, k1 ^ k2 ^ np.uint32(0x1BD11BDA))
    x = [x1 + ks[0], x2 + ks[1]]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x[0] = x[0] + x[1]
            x[1] = _rotate_left(x[1], r) ^ x[0]
        x[0] = x[0] + ks[(i + 1) % 3]
        x[1] = x[1] + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x[0], x[1]


def unrolled(key: jax.Array) -> bool:
    """Whether this module hashes ``key`` with the unrolled :func:`threefry2x32` rather than
    calling ``jax.random``: a default ``threefry2x32`` key under ``jax_threefry_partitionable``."""
    return (
        bool(jax.config.jax_threefry_partitionable)  # type: ignore[attr-defined]
        and jax.random.key_impl(key) == jax.random.key_impl(jax.random.key(0))
        and str(jax.random.key_impl(key)).endswith("threefry2x32")
    )


def fold_in(key: jax.Array, data: jax.Array | int) -> jax.Array:
    """``jax.random.fold_in(key, data)`` for a scalar typed key and a scalar ``data``."""
    if not unrolled(key):
        return jax.random.fold_in(key, data)
    y1, y2 = _hash(key, jnp.asarray(data).astype(jnp.uint32))
    return jax.random.wrap_key_data(jnp.stack([y1, y2]), impl=jax.random.key_impl(key))


def _hash(key: jax.Array, count: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:func:`threefry2x32` of ``key``'s words and the counters ``(0, count)``."""
    words = jax.random.key_data(key)
    return threefry2x32(words[0], words[1], jnp.zeros_like(count), count)


def uniform(
    key: jax.Array,
    num: int,
    dtype: DTypeLike = jnp.float32,
    minval: float | jax.Array = 0.0,
    maxval: float | jax.Array = 1.0,
) -> jax.Array:
    """``jax.random.uniform(key, (num,), dtype, minval, maxval)`` for a scalar typed key."""
    dtype = jnp.dtype(dtype)
    if dtype != jnp.float32 or not unrolled(key):
        return jax.random.uniform(key, (num,), dtype, minval, maxval)
    return _uniform_from_counts(key, jnp.arange(num, dtype=jnp.uint32), minval, maxval)


def uniform_at(
    key: jax.Array,
    num: int,
    indices: jax.Array,
    dtype: DTypeLike = jnp.float32,
    minval: float | jax.Array = 0.0,
    maxval: float | jax.Array = 1.0,
) -> jax.Array:
    """``uniform(key, num, dtype, minval, maxval)[indices]``, bit for bit, hashing only the
    counters ``indices`` (any shape, in ``[0, num)``): the queried arms' losses alone."""
    dtype = jnp.dtype(dtype)
    if dtype != jnp.float32 or not unrolled(key):
        return jax.random.uniform(key, (num,), dtype, minval, maxval)[indices]
    return _uniform_from_counts(key, jnp.asarray(indices).astype(jnp.uint32), minval, maxval)


def _uniform_from_counts(
    key: jax.Array, count: jax.Array, minval: float | jax.Array, maxval: float | jax.Array
) -> jax.Array:
    """float32 uniforms of the counters ``count`` (JAX's map: 23 bits of ``y1 ^ y2`` in
    [1, 2), minus 1, scaled)."""
    y1, y2 = _hash(key, count)
    bits = y1 ^ y2
    one = np.array(1.0, np.float32).view(np.uint32)
    floats = jax.lax.bitcast_convert_type((bits >> np.uint32(9)) | one, jnp.float32) - 1.0
    low = jnp.asarray(minval, jnp.float32)
    return jnp.maximum(low, floats * (jnp.asarray(maxval, jnp.float32) - low) + low)
