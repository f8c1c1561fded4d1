"""The learner contract of DESIGN.md, for every registry entry: jit, vmap, scan, no retrace,
stable state dtypes/shapes, and query honesty."""

from __future__ import annotations

import dataclasses
from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from stabl_jax import LEARNERS
from stabl_jax.learners.base import BanditLearner
from tests.conftest import HORIZON, NUM_ARMS, assert_params_bounded, small_learner


def _loss(t: int) -> jax.Array:
    return jax.random.uniform(jax.random.key(1000 + t), (NUM_ARMS,))


def _dtypes_shapes(tree):
    return jax.tree.map(lambda x: (jnp.asarray(x).dtype, jnp.shape(x)), tree)


def test_learner_is_frozen_and_hashed_by_value(learner_name, learner):
    twin = small_learner(learner_name)
    assert twin is not learner
    assert hash(learner) == hash(twin) and learner == twin
    with pytest.raises(dataclasses.FrozenInstanceError):
        learner.num_arms = 7


def test_step_under_jit_keeps_dtypes_and_shapes(learner):
    state = learner.init(jax.random.key(0))
    step = jax.jit(learner.step)
    new_state, info = step(state, _loss(0), jax.random.key(1))
    assert _dtypes_shapes(new_state) == _dtypes_shapes(state)
    assert info.arms.shape == (learner.num_queries,) and info.arms.dtype == jnp.int32
    assert info.observed.shape == (learner.num_queries,)
    assert info.play_probs.shape == (NUM_ARMS,)
    np.testing.assert_allclose(float(info.play_probs.sum()), 1.0, rtol=1e-5)
    assert int(new_state.t) == 1


def test_no_retrace_on_second_call(learner_name, learner):
    """Repeated calls, and an equal learner built anew, reuse one trace (static by value)."""
    chex.clear_trace_counter()  # the counter is keyed by code location, shared by params

    @partial(jax.jit, static_argnums=0)
    @chex.assert_max_traces(n=1)
    def step(lrn, state, loss, key):
        return lrn.step(state, loss, key)

    state = learner.init(jax.random.key(0))
    for t in range(3):
        state, _ = step(learner, state, _loss(t), jax.random.key(t))
    state, _ = step(small_learner(learner_name), state, _loss(3), jax.random.key(3))


def test_scan_matches_python_loop(learner):
    state0 = learner.init(jax.random.key(0))
    losses = jax.random.uniform(jax.random.key(5), (HORIZON, NUM_ARMS))
    keys = jax.random.split(jax.random.key(6), HORIZON)

    def body(state, xs):
        loss, key = xs
        state, info = learner.step(state, loss, key)
        return state, info.arms

    final, arms = jax.lax.scan(body, state0, (losses, keys))
    state = state0
    step = jax.jit(learner.step)
    loop_arms = []
    for t in range(HORIZON):
        state, info = step(state, losses[t], keys[t])
        loop_arms.append(info.arms)
    np.testing.assert_array_equal(np.asarray(arms), np.stack(loop_arms))
    chex.assert_trees_all_close(final, state, rtol=1e-5, atol=1e-6)


def test_vmap_row_equals_single_run(learner):
    keys = jax.random.split(jax.random.key(3), 4)
    states = jax.vmap(learner.init)(keys)
    losses = jax.random.uniform(jax.random.key(4), (4, NUM_ARMS))
    step_keys = jax.random.split(jax.random.key(9), 4)
    batched, infos = jax.jit(jax.vmap(learner.step))(states, losses, step_keys)
    step = jax.jit(learner.step)
    for i in range(4):
        single, info = step(learner.init(keys[i]), losses[i], step_keys[i])
        chex.assert_trees_all_close(jax.tree.map(lambda x, i=i: x[i], batched), single, rtol=1e-6)
        assert np.array_equal(infos.arms[i], info.arms)


def test_every_params_field_has_a_range_and_values_outside_it_are_named(learner):
    """No sweepable number goes unchecked: a value outside its range (a zero or negative
    ``meta_lr_scale``, a negative learning-rate scale) is refused before any round runs
    instead of playing a NaN distribution."""
    if not jax.tree.leaves(learner.default_params):
        pytest.skip(f"{type(learner).__name__} has no sweepable params")
    assert_params_bounded(learner)


def test_params_sweep_is_one_vmap(learner):
    """A grid of params runs as one vmapped program; each row equals the run with that
    params alone."""
    if not jax.tree.leaves(learner.default_params):
        pytest.skip(f"{type(learner).__name__} has no sweepable params")
    grid = jax.tree.map(lambda x: jnp.stack([x, x * 0.5, x * 0.25]), learner.default_params)
    states = jax.vmap(learner.init, in_axes=(None, 0))(jax.random.key(0), grid)
    loss, key = _loss(0), jax.random.key(2)
    batched_step = jax.jit(jax.vmap(learner.step, in_axes=(0, None, None)))
    for _ in range(5):
        states, _ = batched_step(states, loss, key)
    step = jax.jit(learner.step)
    for i in range(3):
        params_i = jax.tree.map(lambda x, i=i: x[i], grid)
        single = learner.init(jax.random.key(0), params_i)
        for _ in range(5):
            single, _ = step(single, loss, key)
        chex.assert_trees_all_close(jax.tree.map(lambda x, i=i: x[i], states), single, rtol=1e-6)


def test_play_is_step_with_only_the_queried_losses_revealed(learner):
    """``play(state, reveal, key)`` runs the round ``step`` runs, bit for bit, and ``reveal``
    is called once per trace with the queried arms ``(num_queries,)`` only."""
    asked = []

    def play(state, loss, key):
        def reveal(arms):
            asked.append(arms.shape)
            return loss[arms]

        return learner.play(state, reveal, key)

    play, step = jax.jit(play), jax.jit(learner.step)
    state = learner.init(jax.random.key(0))
    for t in range(3):
        loss, key = _loss(t), jax.random.key(10 + t)
        played, query, observed = play(state, loss, key)
        stepped, info = step(state, loss, key)
        chex.assert_trees_all_equal(played, stepped)
        np.testing.assert_array_equal(query.arms, info.arms)
        np.testing.assert_array_equal(observed, info.observed)
        state = stepped
    assert asked == [(learner.num_queries,)]


@pytest.mark.parametrize("name", ["exp3", "stabl"])
def test_play_with_validate_checks_the_revealed_losses(name):
    """With ``validate=True`` a revealed loss outside [0, 1] fails inside the program, naming
    the round and the value; valid losses give the same bits as without the checks."""
    learner = small_learner(name)
    checked = small_learner(name, validate=True)
    state = learner.init(jax.random.key(0))
    loss, key = _loss(0), jax.random.key(1)

    def program(lrn, shift):
        def play(state, loss, key):
            return lrn.play(state, lambda arms: loss[arms] + shift, key)

        return jax.jit(checkify.checkify(play, errors=checkify.user_checks))

    err, out = program(checked, 0.0)(state, loss, key)
    err.throw()
    _, plain = program(learner, 0.0)(state, loss, key)
    chex.assert_trees_all_equal(out, plain)
    err, _ = program(checked, 1.5)(state, loss, key)
    with pytest.raises(
        checkify.JaxRuntimeError,
        match=r"observed loss at round 0 must be finite and in \[0, 1\]; found [12]\.",
    ):
        err.throw()
    err, _ = program(learner, 1.5)(state, loss, key)
    err.throw()  # without validate nothing is checked (and nothing is clipped)


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_query_honesty(name):
    """Changing the loss of any arm that was not queried leaves the next state unchanged."""
    learner = small_learner(name)
    step = jax.jit(learner.step)
    state = learner.init(jax.random.key(0))
    rng = np.random.default_rng(0)
    for t in range(25):
        key = jax.random.key(100 + t)
        loss = jnp.asarray(rng.uniform(size=NUM_ARMS), jnp.float32)
        new_state, info = step(state, loss, key)
        queried = set(np.asarray(info.arms).tolist())
        for arm in range(NUM_ARMS):
            if arm in queried:
                continue
            other, other_info = step(state, loss.at[arm].set(1.0 - loss[arm]), key)
            chex.assert_trees_all_equal(other, new_state)
            assert np.array_equal(other_info.arms, info.arms)
        state = new_state


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_ask_does_not_depend_on_losses(name):
    """``ask`` takes no loss at all: every queried arm is fixed before the loss is revealed."""
    learner = small_learner(name)
    state = jax.jit(learner.init)(jax.random.key(0))
    q = jax.jit(learner.ask)(state, jax.random.key(1))
    assert q.arms.shape == (learner.num_queries,)
    assert bool(jnp.all((q.arms >= 0) & (q.arms < NUM_ARMS)))
    assert bool(jnp.all(q.query_probs > 0))


def test_a_learner_without_params_says_what_to_declare():
    @dataclasses.dataclass(frozen=True)
    class Bare(BanditLearner):
        name = "bare"

    with pytest.raises(NotImplementedError, match="declares no Params"):
        Bare(num_arms=NUM_ARMS, horizon=HORIZON).init(jax.random.key(0))
