"""Threefry-2x32 on raw ``uint32`` key words, in integer ops a Pallas kernel lowers.

Bit for bit ``jax.random`` for ``threefry2x32`` keys with ``jax_threefry_partitionable``,
from the two words of ``jax.random.key_data(key)``: ``fold_in(key, d)`` is
``threefry(key, (0, d))``; draw ``i`` of ``jax.random.bits`` is the xor of the words of
``threefry(key, (0, i))``; ``uniform`` keeps its top 23 bits as a mantissa in ``[1, 2)``,
minus 1, scaled to ``[minval, maxval)``. The hash is :func:`stabl_jax.prng.threefry2x32`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax.prng import threefry2x32

Words = tuple[jax.Array, jax.Array]


def fold_in_words(k1: jax.Array, k2: jax.Array, data: jax.Array | int) -> Words:
    """``jax.random.fold_in`` on key words: the words of ``fold_in(key, data)``.

    Args:
      k1, k2: the key's two ``uint32`` words (any broadcastable shapes).
      data: integer counter(s), cast to ``uint32`` as ``fold_in`` does.

    Returns:
      The folded key's two ``uint32`` words.
    """
    count = jnp.asarray(data).astype(jnp.uint32)
    return threefry2x32(k1, k2, jnp.zeros_like(count), count)


def bits_words(k1: jax.Array, k2: jax.Array, index: jax.Array) -> jax.Array:
    """Entry ``index`` (flat, below ``2**32``) of ``jax.random.bits(key, shape, uint32)``."""
    count = jnp.asarray(index).astype(jnp.uint32)
    y1, y2 = threefry2x32(k1, k2, jnp.zeros_like(count), count)
    return y1 ^ y2


def uniform_words(
    k1: jax.Array,
    k2: jax.Array,
    index: jax.Array,
    minval: float | jax.Array = 0.0,
    maxval: float | jax.Array = 1.0,
) -> jax.Array:
    """Entry ``index`` (flat) of ``jax.random.uniform(key, shape, float32, minval, maxval)``.

    Args:
      k1, k2: the key's two ``uint32`` words.
      index: integer flat index (or array of them) into the draw's shape.
      minval, maxval: the draw's bounds (``()`` float32 or broadcastable with ``index``).

    Returns:
      float32 array of the broadcast shape of the arguments.
    """
    bits = bits_words(k1, k2, index)
    one = np.array(1.0, np.float32).view(np.uint32)
    floats = jax.lax.bitcast_convert_type((bits >> np.uint32(9)) | one, jnp.float32) - 1.0
    low = jnp.asarray(minval, jnp.float32)
    return jnp.maximum(low, floats * (jnp.asarray(maxval, jnp.float32) - low) + low)


def fold_in(key: jax.Array, data: jax.Array | int) -> jax.Array:
    """``jax.random.key_data(jax.random.fold_in(k, data))`` for ``key`` the ``uint32[2]``
    data of a scalar key ``k``."""
    return jnp.stack(fold_in_words(key[0], key[1], data))


def _flat_index(shape: tuple[int, ...]) -> jax.Array:
    size = int(np.prod(shape, dtype=np.int64))
    if size >= 2**32:
        raise ValueError(f"shape {shape} has {size} entries; at most 2**32 - 1 are supported")
    return jax.lax.iota(jnp.uint32, size).reshape(shape)


def bits(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """``jax.random.bits(k, shape, uint32)`` for ``key`` the ``uint32[2]`` data of ``k``."""
    return bits_words(key[0], key[1], _flat_index(shape))


def uniform(
    key: jax.Array, shape: tuple[int, ...], minval: float = 0.0, maxval: float = 1.0
) -> jax.Array:
    """``jax.random.uniform(k, shape, float32, minval, maxval)`` for ``key`` the ``uint32[2]``
    data of a scalar key ``k``."""
    return uniform_words(key[0], key[1], _flat_index(shape), minval, maxval)
