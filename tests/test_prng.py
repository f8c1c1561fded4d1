"""``stabl_jax.prng`` computes exactly ``jax.random``'s bits (unrolled Threefry)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import prng

KEYS = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(42), i))(jnp.arange(40))


def test_fold_in_matches_jax_bitwise():
    ts = jnp.arange(40, dtype=jnp.int32) * 977 + 3
    ours = jax.jit(jax.vmap(prng.fold_in))(KEYS, ts)
    theirs = jax.jit(jax.vmap(jax.random.fold_in))(KEYS, ts)
    np.testing.assert_array_equal(jax.random.key_data(ours), jax.random.key_data(theirs))
    eager = prng.fold_in(jax.random.key(7), 2**30 + 5)
    np.testing.assert_array_equal(
        jax.random.key_data(eager),
        jax.random.key_data(jax.random.fold_in(jax.random.key(7), 2**30 + 5)),
    )


@pytest.mark.parametrize("num", [1, 301])
@pytest.mark.parametrize("bounds", [(0.0, 0.5), (-1.0, 3.0)])
def test_uniform_matches_jax_bitwise(num, bounds):
    lo, hi = bounds
    ours = jax.jit(jax.vmap(lambda k: prng.uniform(k, num, jnp.float32, lo, hi)))(KEYS)
    theirs = jax.jit(jax.vmap(lambda k: jax.random.uniform(k, (num,), jnp.float32, lo, hi)))(KEYS)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_other_configurations_fall_back_to_jax():
    with jax.enable_x64(True):
        key = jax.random.key(3)
        np.testing.assert_array_equal(
            prng.uniform(key, 5, jnp.float64), jax.random.uniform(key, (5,), jnp.float64)
        )
    rbg = jax.random.key(3, impl="rbg")
    np.testing.assert_array_equal(prng.uniform(rbg, 4), jax.random.uniform(rbg, (4,)))
    np.testing.assert_array_equal(
        jax.random.key_data(prng.fold_in(rbg, 9)), jax.random.key_data(jax.random.fold_in(rbg, 9))
    )


@pytest.mark.parametrize("num", [2, 300])
def test_uniform_at_is_the_full_draw_indexed(num):
    """Only the asked-for counters are hashed, and they give the full draw's bits."""
    indices = jnp.asarray([[0, num - 1], [num // 2, 1], [1, 1]], jnp.int32)
    ours = jax.jit(jax.vmap(lambda k: prng.uniform_at(k, num, indices, jnp.float32, 0.0, 0.5)))(
        KEYS
    )
    full = jax.vmap(lambda k: jax.random.uniform(k, (num,), jnp.float32, 0.0, 0.5))(KEYS)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(full)[:, indices])
    rbg = jax.random.key(3, impl="rbg")  # other key implementations: the full draw, indexed
    np.testing.assert_array_equal(
        prng.uniform_at(rbg, num, indices[0]), jax.random.uniform(rbg, (num,))[indices[0]]
    )
