"""The learner contract of DESIGN.md, for every registry entry: jit, vmap, scan, no retrace,
stable state dtypes/shapes, and query honesty.

Each learner's programs are compiled once and shared by the tests: the jitted functions below
take the learner as a static argument (hashed by value), so one round (step and play) and one
vmapped scan per learner.
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


def _step(learner, state, loss, key):
    return _round(learner, state, loss, key)[0]


@partial(jax.jit, static_argnums=0)
def _runs(learner, params, init_keys, losses, keys):
    """``init`` and ``step`` under one ``lax.scan``, vmapped over runs that differ in params
    ``(R,)``, init keys ``(R,)``, losses ``(R, T, n)`` and step keys ``(R, T)``: the state after
    every round and the queried arms ``(R, T, num_queries)``. One program per learner (params
    traced), shared by every test of this file that scans."""

    def run(params, init_key, losses, keys):
        def body(state, xs):
            state, info = learner.step(state, *xs)
            return state, (state, info.arms)

        return jax.lax.scan(body, learner.init(init_key, params), (losses, keys))[1]

    return jax.vmap(run)(params, init_keys, losses, keys)


def _batch(learner):
    """Three runs: the default params with :data:`LOSSES` and :data:`KEYS` from ``key(0)``
    (run 0), then a sweep grid's params (halved, quartered) with their own keys and losses."""
    grid = jax.tree.map(lambda x: jnp.stack([x, x * 0.5, x * 0.25]), learner.default_params)
    init_keys = jnp.stack([jax.random.key(0), *jax.random.split(jax.random.key(3), 2)])
    others = jax.random.uniform(jax.random.key(4), (2, HORIZON, NUM_ARMS))
    losses = jnp.concatenate([LOSSES[None], others])
    keys = jnp.concatenate([KEYS[None], jax.random.split(jax.random.key(9), (2, HORIZON))])
    return grid, init_keys, losses, keys


def _loss(t: int) -> jax.Array:
    return jax.random.uniform(jax.random.key(1000 + t), (NUM_ARMS,))


def _dtypes_shapes(tree):
    return jax.tree.map(lambda x: (jnp.asarray(x).dtype, jnp.shape(x)), tree)


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


def test_step_under_jit_keeps_dtypes_and_shapes(learner):
    state = learner.init(jax.random.key(0))
    new_state, info = _step(learner, state, _loss(0), jax.random.key(1))
    assert _dtypes_shapes(new_state) == _dtypes_shapes(state)
    assert info.arms.shape == (learner.num_queries,) and info.arms.dtype == jnp.int32
    assert info.observed.shape == (learner.num_queries,)
    assert info.play_probs.shape == (NUM_ARMS,)
    np.testing.assert_allclose(float(info.play_probs.sum()), 1.0, rtol=1e-5)
    assert int(new_state.t) == 1


def test_no_retrace_on_second_call(learner_name, learner):
    """Repeated calls, and an equal learner built anew, reuse one trace (static by value);
    every test of this file steps through the one trace."""
    state = learner.init(jax.random.key(0))
    for t in range(3):
        state, _ = _step(learner, state, _loss(t), jax.random.key(t))
    state, _ = _step(small_learner(learner_name), state, _loss(3), jax.random.key(3))
    assert TRACES[learner] == 1


def test_scan_and_vmap_match_python_loops(learner):
    """Runs that differ in init key, params (a sweep grid), losses and step keys run as one
    vmapped, jitted scan; each run gives the arms and states of a Python loop of jitted steps
    with its own inputs alone (run 0 over the whole horizon, the others over 5 rounds)."""
    grid, init_keys, losses, keys = _batch(learner)
    states, arms = _runs(learner, grid, init_keys, losses, keys)
    for i in range(3):
        rounds, tol = (HORIZON, {"rtol": 1e-5, "atol": 1e-6}) if i == 0 else (5, {"rtol": 1e-6})
        state = learner.init(init_keys[i], _row(grid, i))
        for t in range(rounds):
            state, info = _step(learner, state, losses[i, t], keys[i, t])
            np.testing.assert_array_equal(arms[i, t], info.arms)
        chex.assert_trees_all_close(_row(_row(states, i), rounds - 1), state, **tol)


def test_query_honesty(learner):
    """Changing the loss of every arm that was not queried leaves the queried arms and the
    state after every round unchanged, bitwise, in every run."""
    grid, init_keys, losses, keys = _batch(learner)
    states, arms = _runs(learner, grid, init_keys, losses, keys)
    queried = np.zeros(losses.shape, bool)
    np.put_along_axis(queried, np.asarray(arms), True, axis=2)
    others = _runs(learner, grid, init_keys, jnp.where(queried, losses, 1.0 - losses), keys)
    np.testing.assert_array_equal(np.asarray(others[1]), np.asarray(arms))
    chex.assert_trees_all_equal(others[0], states)


def test_every_params_field_has_a_range_and_values_outside_it_are_named(learner):
    """No sweepable number goes unchecked: a value outside its range (a zero or negative
    ``meta_lr_scale``, a negative learning-rate scale) is refused before any round runs
    instead of playing a NaN distribution."""
    if not jax.tree.leaves(learner.default_params):
        pytest.skip(f"{type(learner).__name__} has no sweepable params")
    assert_params_bounded(learner)


def test_play_is_step_with_only_the_queried_losses_revealed(learner):
    """``play(state, reveal, key)`` runs the round ``step`` runs, bit for bit; ``reveal`` is
    called once per trace with the queried arms ``(num_queries,)`` only, which the query
    (asked before any loss is revealed) draws in range with positive probabilities."""
    state = learner.init(jax.random.key(0))
    for t in range(3):
        loss, key = _loss(t), jax.random.key(10 + t)
        (stepped, info), (played, query, observed) = _round(learner, state, loss, key)
        chex.assert_trees_all_equal(played, stepped)
        np.testing.assert_array_equal(query.arms, info.arms)
        np.testing.assert_array_equal(observed, info.observed)
        assert bool(jnp.all((query.arms >= 0) & (query.arms < NUM_ARMS)))
        assert bool(jnp.all(query.query_probs > 0))
        state = stepped
    assert REVEALED[learner] == [(learner.num_queries,)]


@pytest.mark.parametrize("name", ["exp3", "stabl"])
def test_play_with_validate_checks_the_revealed_losses(name):
    """With ``validate=True`` a revealed loss outside [0, 1] fails inside the program, naming
    the round and the value; valid losses give the same bits as without the checks."""
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
