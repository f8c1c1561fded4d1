"""``stabl_jax.threefry`` reproduces ``jax.random``'s bits, in jnp and in Pallas, and
``stabl_jax.prng`` computes exactly ``jax.random``'s bits (unrolled Threefry)."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

from stabl_jax import prng, threefry
from stabl_jax.envs import ExpertAdvice, PiecewiseBernoulli
from tests.conftest import HORIZON, NUM_ARMS

RNG = np.random.default_rng(2024)
EDGES = np.array([[0, 0], [2**32 - 1, 2**32 - 1], [0, 2**32 - 1], [2**32 - 1, 0]], np.uint32)
KEY_WORDS = np.concatenate([RNG.integers(0, 2**32, size=(30, 2), dtype=np.uint32), EDGES])
EDGE_COUNTERS = np.array([0, 1, 2, 2**31, 2**32 - 1], np.uint32)
COUNTERS = np.concatenate([EDGE_COUNTERS, RNG.integers(0, 2**32, 20, np.uint32)])
SHAPES = [(1,), (7,), (3, 5), (2, 3, 4), (129,)]


def _key(words: np.ndarray) -> jax.Array:
    return jax.random.wrap_key_data(jnp.asarray(words), impl="threefry2x32")


def test_threefry_fold_in_matches_jax_bitwise():
    words, data = np.broadcast_arrays(KEY_WORDS[:, None], COUNTERS[None, :, None])
    words, data = jnp.asarray(words.reshape(-1, 2)), jnp.asarray(data.reshape(-1, 2)[:, 0])
    theirs = jax.vmap(lambda w, d: jax.random.key_data(jax.random.fold_in(_key(w), d)))
    np.testing.assert_array_equal(jax.vmap(threefry.fold_in)(words, data), theirs(words, data))


@pytest.mark.parametrize("shape", SHAPES)
def test_threefry_bits_and_uniform_match_jax_bitwise(shape):
    @jax.jit
    def draws(words):
        keys = jax.vmap(_key)(words)
        ours = [jax.vmap(lambda w: threefry.bits(w, shape))(words)]
        theirs = [jax.vmap(lambda k: jax.random.bits(k, shape, jnp.uint32))(keys)]
        for lo, hi in ((0.0, 1.0), (-1.0, 3.0), (0.0, 0.3)):
            ours.append(jax.vmap(lambda w, lo=lo, hi=hi: threefry.uniform(w, shape, lo, hi))(words))
            draw = functools.partial(jax.random.uniform, shape=shape, minval=lo, maxval=hi)
            theirs.append(jax.vmap(draw)(keys))
        return ours, theirs

    for ours, theirs in zip(*draws(jnp.asarray(KEY_WORDS)), strict=True):
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


@functools.partial(jax.jit, static_argnums=2)
def _pallas_draws(keys: jax.Array, data: jax.Array, num: int) -> tuple[jax.Array, ...]:
    """Per key row, in one interpreted ``pallas_call``: fold ``data`` in, ``num`` bits, uniforms."""
    rows = keys.shape[0]

    def kernel(k_ref, d_ref, fold_ref, bits_ref, u_ref):
        k1, k2 = k_ref[:, 0:1], k_ref[:, 1:2]
        f1, f2 = threefry.fold_in_words(k1, k2, d_ref[...])
        fold_ref[:, 0:1], fold_ref[:, 1:2] = f1, f2
        index = jax.lax.broadcasted_iota(jnp.uint32, (rows, num), 1)
        bits_ref[...] = threefry.bits_words(f1, f2, index)
        u_ref[...] = threefry.uniform_words(f1, f2, index, -1.0, 3.0)

    shapes = [((rows, 2), jnp.uint32), ((rows, num), jnp.uint32), ((rows, num), jnp.float32)]
    out_shape = tuple(jax.ShapeDtypeStruct(*a) for a in shapes)
    return pl.pallas_call(kernel, out_shape=out_shape, interpret=True)(keys, data)


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


RANDOM: dict[str, Any] = {"num_segments": 4, "mean": 0.7, "gap": 0.45, "best_arm_order": "random"}
ENVS = (
    PiecewiseBernoulli(NUM_ARMS, HORIZON, change_points=(20, 41)),
    PiecewiseBernoulli(NUM_ARMS, HORIZON, random_change_points=True, **RANDOM),
    ExpertAdvice(NUM_ARMS, HORIZON, change_points=(32,)),
)


@pytest.mark.parametrize("env", ENVS, ids=["bernoulli", "random", "expert_advice"])
def test_threefry_loss_at_words_matches_loss_bitwise(env):
    ts = jnp.asarray(RNG.integers(0, env.horizon, 60), jnp.int32)
    keys = jax.vmap(_key)(jnp.asarray(RNG.integers(0, 2**32, (60, 2), np.uint32)))
    arms = jnp.asarray(RNG.integers(0, env.num_arms, (60, 3)), jnp.int32)

    def both(t, k, a):
        p, words = env.sample_params(k), jax.random.key_data(k)
        ours = env.loss_at_words(p, t, (words[0], words[1]), a)
        passed = env.loss_at_words(p, t, (words[0], words[1]), a, env.best_arm(p, t))
        return ours, passed, env.loss(p, t, k)[a]

    ours, passed, theirs = jax.jit(jax.vmap(both))(ts, keys, arms)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    np.testing.assert_array_equal(np.asarray(passed), np.asarray(theirs))
    assert np.unique(np.asarray(theirs)).size > 1  # the draws are not constant


KEYS = jax.vmap(lambda i: jax.random.fold_in(jax.random.key(42), i))(jnp.arange(40))


def test_prng_fold_in_matches_jax_bitwise():
    ts = jnp.arange(40, dtype=jnp.int32) * 977 + 3
    ours = jax.jit(jax.vmap(prng.fold_in))(KEYS, ts)
    theirs = jax.jit(jax.vmap(jax.random.fold_in))(KEYS, ts)
    np.testing.assert_array_equal(jax.random.key_data(ours), jax.random.key_data(theirs))
    eager = prng.fold_in(jax.random.key(7), 2**30 + 5)
    want = jax.random.fold_in(jax.random.key(7), 2**30 + 5)
    np.testing.assert_array_equal(jax.random.key_data(eager), jax.random.key_data(want))


@pytest.mark.parametrize("num", [1, 301])
@pytest.mark.parametrize("bounds", [(0.0, 0.5), (-1.0, 3.0)])
def test_prng_uniform_matches_jax_bitwise(num, bounds):
    lo, hi = bounds
    ours = jax.jit(jax.vmap(lambda k: prng.uniform(k, num, jnp.float32, lo, hi)))(KEYS)
    theirs = jax.jit(jax.vmap(lambda k: jax.random.uniform(k, (num,), jnp.float32, lo, hi)))(KEYS)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_prng_other_configurations_fall_back_to_jax():
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
def test_prng_uniform_at_is_the_full_draw_indexed(num):
    """Only the asked-for counters are hashed, and they give the full draw's bits."""
    indices = jnp.asarray([[0, num - 1], [num // 2, 1], [1, 1]], jnp.int32)
    at = jax.jit(jax.vmap(lambda k: prng.uniform_at(k, num, indices, jnp.float32, 0.0, 0.5)))
    ours = at(KEYS)
    full = jax.vmap(lambda k: jax.random.uniform(k, (num,), jnp.float32, 0.0, 0.5))(KEYS)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(full)[:, indices])
    rbg = jax.random.key(3, impl="rbg")  # other key implementations: the full draw, indexed
    np.testing.assert_array_equal(
        prng.uniform_at(rbg, num, indices[0]), jax.random.uniform(rbg, (num,))[indices[0]]
    )
