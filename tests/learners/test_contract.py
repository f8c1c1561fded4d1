"""The learner contract of DESIGN.md, for every registry entry: jit, vmap, scan, no retrace,
stable state dtypes/shapes, and query honesty. Two programs per learner, shared by the tests
(the learner a static argument, hashed by value): one round (step and play), one vmapped scan.
"""

from __future__ import annotations

import collections
import dataclasses
from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from stabl_jax.learners.base import BanditLearner
from tests.conftest import HORIZON, NUM_ARMS, assert_params_bounded, small_learner

#: Traces of :func:`_round` per learner (equal learners are one key).
TRACES: collections.Counter = collections.Counter()
#: Per learner, the shapes :func:`_round`'s ``play`` revealed losses at (once per trace).
REVEALED: collections.defaultdict = collections.defaultdict(list)


@partial(jax.jit, static_argnums=0)
def _round(learner, state, loss, key):
    """One round as ``step`` and as ``play`` revealing ``loss``: one program per learner (two
    programs cost nearly twice one)."""
    TRACES[learner] += 1

    def reveal(arms):
        REVEALED[learner].append(arms.shape)
        return loss[arms]

    return learner.step(state, loss, key), learner.play(state, reveal, key)


@partial(jax.jit, static_argnums=0)
def _runs(learner, params, init_keys, losses, keys):
    """``init`` and ``step`` under one ``lax.scan``, vmapped over runs that differ in params
    ``(R,)``, init keys ``(R,)``, losses ``(R, T, n)`` and step keys ``(R, T)``: the state after
    every round and the queried arms ``(R, T, num_queries)``."""

    def run(params, init_key, losses, keys):
        def body(state, xs):
            state, info = learner.step(state, *xs)
            return state, (state, info.arms)

        return jax.lax.scan(body, learner.init(init_key, params), (losses, keys))[1]

    return jax.vmap(run)(params, init_keys, losses, keys)


def _batch(learner):
    """Three runs: the default params on :data:`LOSSES`, :data:`KEYS` from ``key(0)``, then the
    params halved and quartered with their own keys and losses."""
    grid = jax.tree.map(lambda x: jnp.stack([x, x * 0.5, x * 0.25]), learner.default_params)
    init_keys = jnp.stack([jax.random.key(0), *jax.random.split(jax.random.key(3), 2)])
    others = jax.random.uniform(jax.random.key(4), (2, HORIZON, NUM_ARMS))
    losses = jnp.concatenate([LOSSES[None], others])
    keys = jnp.concatenate([KEYS[None], jax.random.split(jax.random.key(9), (2, HORIZON))])
    return grid, init_keys, losses, keys


def _loss(t: int) -> jax.Array:
    return jax.random.uniform(jax.random.key(1000 + t), (NUM_ARMS,))


def _row(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


LOSSES = jax.random.uniform(jax.random.key(5), (HORIZON, NUM_ARMS))
KEYS = jax.random.split(jax.random.key(6), HORIZON)


def test_learner_is_frozen_and_hashed_by_value(learner_name, learner):
    twin = small_learner(learner_name)
    assert twin is not learner
    assert hash(learner) == hash(twin) and learner == twin
    with pytest.raises(dataclasses.FrozenInstanceError):
        learner.num_arms = 7


def test_rounds_under_jit_keep_shapes_play_is_step_and_trace_once(learner_name, learner):
    """Three rounds of :func:`_round`: the state keeps its dtypes and shapes, the info holds
    ``(num_queries,)`` int32 arms and a distribution; ``play(state, reveal, key)`` is ``step``,
    bit for bit, ``reveal`` getting only the queried arms (in range, positive probabilities);
    one trace for them all and for an equal learner built anew (static by value)."""
    state = learner.init(jax.random.key(0))
    for t in range(3):
        loss, key = _loss(t), jax.random.key(10 + t)
        (stepped, info), (played, query, observed) = _round(learner, state, loss, key)
        chex.assert_trees_all_equal_shapes_and_dtypes(stepped, state)
        assert info.arms.shape == (learner.num_queries,) and info.arms.dtype == jnp.int32
        assert info.observed.shape == (learner.num_queries,)
        assert info.play_probs.shape == (NUM_ARMS,)
        np.testing.assert_allclose(float(info.play_probs.sum()), 1.0, rtol=1e-5)
        chex.assert_trees_all_equal(played, stepped)
        np.testing.assert_array_equal(query.arms, info.arms)
        np.testing.assert_array_equal(observed, info.observed)
        assert bool(jnp.all((query.arms >= 0) & (query.arms < NUM_ARMS)))
        assert bool(jnp.all(query.query_probs > 0))
        state = stepped
        assert int(state.t) == t + 1
    _round(small_learner(learner_name), state, _loss(3), jax.random.key(3))
    assert TRACES[learner] == 1
    assert REVEALED[learner] == [(learner.num_queries,)]


def test_scan_and_vmap_match_python_loops(learner):
    """Runs differing in init key, params, losses and step keys, as one vmapped scan, give the
    arms and states of a Python loop of jitted steps (run 0 over the horizon, others 5 rounds)."""
    grid, init_keys, losses, keys = _batch(learner)
    states, arms = _runs(learner, grid, init_keys, losses, keys)
    for i in range(3):
        rounds, tol = (HORIZON, {"rtol": 1e-5, "atol": 1e-6}) if i == 0 else (5, {"rtol": 1e-6})
        state = learner.init(init_keys[i], _row(grid, i))
        for t in range(rounds):
            state, info = _round(learner, state, losses[i, t], keys[i, t])[0]
            np.testing.assert_array_equal(arms[i, t], info.arms)
        chex.assert_trees_all_close(_row(_row(states, i), rounds - 1), state, **tol)


def test_query_honesty(learner):
    """Changing every unqueried loss leaves the queried arms and states unchanged, bitwise."""
    grid, init_keys, losses, keys = _batch(learner)
    states, arms = _runs(learner, grid, init_keys, losses, keys)
    queried = np.zeros(losses.shape, bool)
    np.put_along_axis(queried, np.asarray(arms), True, axis=2)
    others = _runs(learner, grid, init_keys, jnp.where(queried, losses, 1.0 - losses), keys)
    np.testing.assert_array_equal(np.asarray(others[1]), np.asarray(arms))
    chex.assert_trees_all_equal(others[0], states)


def test_every_params_field_has_a_range_and_values_outside_it_are_named(learner):
    """A sweepable number outside its range is refused before any round runs, not played as a
    NaN distribution."""
    if not jax.tree.leaves(learner.default_params):
        pytest.skip(f"{type(learner).__name__} has no sweepable params")
    assert_params_bounded(learner)


@pytest.mark.parametrize("name", ["exp3", "stabl"])
def test_play_with_validate_checks_the_revealed_losses(name):
    """``validate=True``: a revealed loss outside [0, 1] fails in the program, naming round and
    value; valid losses give the bits of no checks."""
    learner = small_learner(name)
    checked = small_learner(name, validate=True)
    state = learner.init(jax.random.key(0))
    loss, key = _loss(0), jax.random.key(1)

    def program(lrn):
        def play(state, loss, key, shift):
            return lrn.play(state, lambda arms: loss[arms] + shift, key)

        return partial(jax.jit(checkify.checkify(play, errors=checkify.user_checks)), state, loss)

    checked_play, plain_play = program(checked), program(learner)
    err, out = checked_play(key, 0.0)
    err.throw()
    _, plain = plain_play(key, 0.0)
    chex.assert_trees_all_equal(out, plain)
    err, _ = checked_play(key, 1.5)
    with pytest.raises(
        checkify.JaxRuntimeError,
        match=r"observed loss at round 0 must be finite and in \[0, 1\]; found [12]\.",
    ):
        err.throw()
    err, _ = plain_play(key, 1.5)
    err.throw()  # without validate nothing is checked (and nothing is clipped)


def test_a_learner_without_params_says_what_to_declare():
    @dataclasses.dataclass(frozen=True)
    class Bare(BanditLearner):
        name = "bare"

    with pytest.raises(NotImplementedError, match="declares no Params"):
        Bare(num_arms=NUM_ARMS, horizon=HORIZON).init(jax.random.key(0))
