"""``stabl_jax.threefry`` reproduces ``jax.random``'s bits, in jnp and in Pallas."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from stabl_jax import threefry

RNG = np.random.default_rng(2024)
KEY_WORDS = np.concatenate(
    [
        RNG.integers(0, 2**32, size=(30, 2), dtype=np.uint32),
        np.array([[0, 0], [2**32 - 1, 2**32 - 1], [0, 2**32 - 1], [2**32 - 1, 0]], np.uint32),
    ]
)
COUNTERS = np.concatenate(
    [np.array([0, 1, 2, 2**31, 2**32 - 1], np.uint32), RNG.integers(0, 2**32, 20, np.uint32)]
)
SHAPES = [(1,), (7,), (3, 5), (2, 3, 4), (129,)]


def _key(words: np.ndarray) -> jax.Array:
    return jax.random.wrap_key_data(jnp.asarray(words), impl="threefry2x32")


def test_threefry_fold_in_matches_jax_bitwise():
    words, data = (
        jnp.asarray(a) for a in np.broadcast_arrays(KEY_WORDS[:, None], COUNTERS[None, :, None])
    )
    words, data = words.reshape(-1, 2), data.reshape(-1, 2)[:, 0]
    theirs = jax.vmap(lambda w, d: jax.random.key_data(jax.random.fold_in(_key(w), d)))
    np.testing.assert_array_equal(jax.vmap(threefry.fold_in)(words, data), theirs(words, data))


@pytest.mark.parametrize("shape", SHAPES)
def test_threefry_bits_and_uniform_match_jax_bitwise(shape):
    words = jnp.asarray(KEY_WORDS)
    keys = jax.vmap(_key)(words)
    np.testing.assert_array_equal(
        jax.vmap(lambda w: threefry.bits(w, shape))(words),
        jax.vmap(lambda k: jax.random.bits(k, shape, jnp.uint32))(keys),
    )
    for lo, hi in ((0.0, 1.0), (-1.0, 3.0), (0.0, 0.3)):
        ours = jax.vmap(lambda w, lo=lo, hi=hi: threefry.uniform(w, shape, lo, hi))(words)
        theirs = jax.vmap(
            lambda k, lo=lo, hi=hi: jax.random.uniform(k, shape, jnp.float32, lo, hi)
        )(keys)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def _pallas_draws(keys: jax.Array, data: jax.Array, num: int) -> tuple[jax.Array, ...]:
    """Per key row: fold ``data`` in, then the folded key's ``num`` bits and uniforms,
    all computed inside one interpreted ``pallas_call`` from the key words."""
    rows = keys.shape[0]

    def kernel(k_ref, d_ref, fold_ref, bits_ref, u_ref):
        k1, k2 = k_ref[:, 0:1], k_ref[:, 1:2]
        f1, f2 = threefry.fold_in_words(k1, k2, d_ref[...])
        fold_ref[:, 0:1], fold_ref[:, 1:2] = f1, f2
        index = jax.lax.broadcasted_iota(jnp.uint32, (rows, num), 1)
        bits_ref[...] = threefry.bits_words(f1, f2, index)
        u_ref[...] = threefry.uniform_words(f1, f2, index, -1.0, 3.0)

    return pl.pallas_call(
        kernel,
        out_shape=(
            jax.ShapeDtypeStruct((rows, 2), jnp.uint32),
            jax.ShapeDtypeStruct((rows, num), jnp.uint32),
            jax.ShapeDtypeStruct((rows, num), jnp.float32),
        ),
        interpret=True,
    )(keys, data)


@pytest.mark.parametrize("num", [1, 16, 33])
def test_threefry_inside_pallas_matches_jax_bitwise(num):
    data = jnp.asarray(RNG.integers(0, 2**32, (len(KEY_WORDS), 1), np.uint32))
    fold, bits, u = _pallas_draws(jnp.asarray(KEY_WORDS), data, num)
    keys = jax.vmap(_key)(jnp.asarray(KEY_WORDS))
    folded = jax.vmap(jax.random.fold_in)(keys, data[:, 0])
    np.testing.assert_array_equal(fold, jax.random.key_data(folded))
    np.testing.assert_array_equal(bits, jax.vmap(lambda k: jax.random.bits(k, (num,)))(folded))
    theirs = jax.vmap(lambda k: jax.random.uniform(k, (num,), jnp.float32, -1.0, 3.0))(folded)
    np.testing.assert_array_equal(np.asarray(u), np.asarray(theirs))


def test_threefry_rejects_too_large_shapes():
    with pytest.raises(ValueError, match="2\\*\\*32"):
        threefry.bits(jnp.zeros(2, jnp.uint32), (2**16, 2**16))


def _envs() -> list:
    from stabl_jax.envs import ExpertAdvice, PiecewiseBernoulli

    return [
        PiecewiseBernoulli(num_arms=7, horizon=200, change_points=(50, 120)),
        PiecewiseBernoulli(
            num_arms=5,
            horizon=200,
            num_segments=4,
            mean=0.7,
            gap=0.45,
            random_change_points=True,
            best_arm_order="random",
        ),
        ExpertAdvice(num_arms=6, horizon=200, change_points=(80,)),
    ]


@pytest.mark.parametrize("env_index", [0, 1, 2])
def test_threefry_loss_at_words_matches_loss_bitwise(env_index):
    env = _envs()[env_index]
    ts = jnp.asarray(RNG.integers(0, env.horizon, 60), jnp.int32)
    keys = jax.vmap(_key)(jnp.asarray(RNG.integers(0, 2**32, (60, 2), np.uint32)))
    arms = jnp.asarray(RNG.integers(0, env.num_arms, (60, 3)), jnp.int32)
    params = jax.vmap(env.sample_params)(keys)

    def both(p, t, k, a):
        words = jax.random.key_data(k)
        ours = env.loss_at_words(p, t, (words[0], words[1]), a)
        passed = env.loss_at_words(p, t, (words[0], words[1]), a, env.best_arm(p, t))
        return ours, passed, env.loss(p, t, k)[a]

    ours, passed, theirs = jax.vmap(both)(params, ts, keys, arms)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    np.testing.assert_array_equal(np.asarray(passed), np.asarray(theirs))
    assert np.unique(np.asarray(theirs)).size > 1  # the draws are not constant
