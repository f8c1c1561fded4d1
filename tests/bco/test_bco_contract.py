"""The BCO learner contract (DESIGN.md, "One contract for every learner"), for every entry of
``stabl_jax.registry.BCO_LEARNERS``: frozen and hashed by value, jit / vmap / scan, no retrace,
stable state dtypes and shapes, query honesty and feasibility of every queried point."""

from __future__ import annotations

import dataclasses
from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.tree_util import Partial

from stabl_jax.bco.base import evaluate
from stabl_jax.domains import Box
from stabl_jax.envs.convex import MovingTarget, distance_loss
from stabl_jax.experiment.sweep import compile_count
from stabl_jax.registry import BCO_LEARNERS
from tests.conftest import assert_params_bounded, recompiled

DIM = 2
HORIZON = 32
DOMAIN = Box(dim=DIM, half_width=0.5)  # D = 0.71 < 1: the delta / r floor of the shrinkage
ENV = MovingTarget(dim=DIM, horizon=HORIZON, domain=DOMAIN, change_points=(10, 20))
ROUNDS = jnp.arange(HORIZON, dtype=jnp.int32)
THETAS = jax.jit(jax.vmap(lambda t: ENV.target(ENV.default_params, t)))(ROUNDS)  # (T, DIM)
NUM_QUERIES = dict(stabl_bco=3, stabl_bco_log_t=3, stabl_bco_two_query=2, fkm=1, two_point_ogd=2)
NUM_QUERIES["ogd_full_info"] = 1


def small_bco(name: str, **kwargs):
    """Registry entry ``name`` at a tiny size (experts on lengths 4, 8, 16)."""
    if name.startswith("stabl"):
        kwargs.setdefault("history_lengths", (4, 8, 16))
    return BCO_LEARNERS.make(name, dim=DIM, horizon=HORIZON, domain=DOMAIN, **kwargs)


def stressed_params(learner):
    """Default params with a 4x larger perturbation (so feasibility is not trivially met)."""
    params = learner.default_params
    if hasattr(params, "delta_scale"):
        params = params.replace(delta_scale=params.delta_scale * 4.0)
    return params


def honest_family(aux, x):
    """``||x - c||`` within 1e-6 of an anchor, ``+ amplitude (1 + x_0^2)`` elsewhere: with the
    queried points as anchors, only a dishonest learner sees the change."""
    theta, anchors, amplitude = aux
    base = distance_loss(theta, x)
    near = jnp.min(jnp.sum((anchors - x[None, :]) ** 2, axis=1)) < 1e-12
    return jnp.where(near, base, base + amplitude * (1.0 + x[0] ** 2))


def loss_at(t, anchors=None, amplitude=0.0, num_queries=1):
    theta = THETAS[t]
    if anchors is None:
        anchors = jnp.zeros((num_queries, DIM), jnp.float32)
    return Partial(honest_family, (theta, anchors, jnp.float32(amplitude)))


@partial(jax.jit, static_argnums=0)
@chex.assert_max_traces(n=1)
def _step(learner, state, loss_fn, key):
    return learner.step(state, loss_fn, key)


def _dtypes_shapes(tree):
    return jax.tree.map(lambda x: (jnp.asarray(x).dtype, jnp.shape(x)), tree)


@pytest.fixture(params=sorted(BCO_LEARNERS))
def name(request) -> str:
    return request.param


def test_frozen_hashed_by_value_num_queries_and_params_bounded(name):
    learner, twin = small_bco(name), small_bco(name)
    assert learner is not twin and learner == twin and hash(learner) == hash(twin)
    with pytest.raises(dataclasses.FrozenInstanceError):
        learner.dim = 3
    assert learner.num_queries == NUM_QUERIES[name]
    assert_params_bounded(learner)  # out-of-range params refused by init, named


def test_step_jit_no_retrace_stable_dtypes_and_query_honesty(name):
    """Steps trace once (an equal learner too), dtypes and shapes stay, only queries are read."""
    chex.clear_trace_counter()
    learner = small_bco(name)
    q = learner.num_queries
    state = learner.init(jax.random.key(0), stressed_params(learner))
    for t in range(8):
        lrn = learner if t % 2 else small_bco(name)
        key = jax.random.key(100 + t)
        new_state, info = _step(lrn, state, loss_at(t, num_queries=q), key)
        assert _dtypes_shapes(new_state) == _dtypes_shapes(state)
        assert info.points.shape == (q, DIM) and info.observed.shape == (q,)
        np.testing.assert_array_equal(info.played, info.points[0])
        assert float(info.loss) == float(info.observed[0])
        changed = loss_at(t, anchors=info.points, amplitude=5.0)
        other, other_info = _step(lrn, state, changed, key)
        chex.assert_trees_all_equal(other, new_state)
        chex.assert_trees_all_equal(other_info, info)
        # ... and the change is real: away from the queried points the loss differs.
        far = jnp.full((DIM,), 0.37, jnp.float32)
        assert float(changed(far)) > float(loss_at(t, num_queries=q)(far)) + 1.0
        state = new_state
    assert int(state.t) == 8


def test_play_is_step_with_only_the_queried_points_revealed(name):
    """``play`` is ``step`` bit for bit given only the queried points (not for full information)."""
    learner = small_bco(name)
    state = learner.init(jax.random.key(0), stressed_params(learner))
    asked = []

    def play(state, loss_fn, key):
        def reveal(points):
            asked.append(points.shape)
            return evaluate(loss_fn, points, learner.float_dtype)

        return learner.play(state, reveal, key)

    if name == "ogd_full_info":
        with pytest.raises(ValueError, match=r"needs the exact gradient.*step"):
            jax.jit(play)(state, loss_at(0), jax.random.key(1))
        return
    play, step = jax.jit(play), jax.jit(learner.step)
    for t in range(3):
        key = jax.random.key(100 + t)
        played, query, observed = play(state, loss_at(t), key)
        stepped, info = step(state, loss_at(t), key)
        chex.assert_trees_all_equal(played, stepped)
        np.testing.assert_array_equal(query.points, info.points)
        np.testing.assert_array_equal(observed, info.observed)
        state = stepped
    assert asked == [(learner.num_queries, DIM)]


INIT_KEYS = jax.random.split(jax.random.key(3), 3)
RUN_KEYS = jax.random.split(jax.random.key(6), 3)


@partial(jax.jit, static_argnums=0)
def _scanned(learner, params, init_keys, run_keys):
    """Final states and ``(3, T, q, DIM)`` queried points of a scanned run per row of params."""

    def one(p, init_key, run_key):
        def body(s, t):
            key = jax.random.fold_in(run_key, t)
            s, info = learner.step(s, loss_at(t, num_queries=learner.num_queries), key)
            return s, info.points

        return jax.lax.scan(body, learner.init(init_key, p), ROUNDS)

    return jax.vmap(one)(params, init_keys, run_keys)


@pytest.mark.parametrize("name", sorted(set(BCO_LEARNERS) - {"stabl_bco_log_t"}))
def test_vmapped_scan_matches_single_loops_and_every_query_is_feasible(name):
    """Vmapped scanned runs equal stepped ones; every queried point is in K (log_t: one program)."""
    chex.clear_trace_counter()  # _step counts traces over all learners; this one may be new
    learner = small_bco(name)
    q = learner.num_queries
    base = stressed_params(learner)
    grid = jax.tree.map(lambda x: jnp.stack([x, x * 0.5, x * 2.0]), base)
    finals, points = _scanned(learner, grid, INIT_KEYS, RUN_KEYS)  # points: (3, T, q, DIM)
    for i in range(3):
        state = learner.init(INIT_KEYS[i], jax.tree.map(lambda x, i=i: x[i], grid))
        state0 = state
        for t in range(HORIZON):
            key = jax.random.fold_in(RUN_KEYS[i], t)
            state, info = _step(learner, state, loss_at(t, num_queries=q), key)
            np.testing.assert_allclose(points[i, t], info.points, rtol=1e-5, atol=1e-6)
        final_i = jax.tree.map(lambda x, i=i: x[i], finals)
        chex.assert_trees_all_close(final_i, state, rtol=1e-5, atol=1e-6)
        assert _dtypes_shapes(final_i) == _dtypes_shapes(state0)
    inside = np.asarray(jax.vmap(DOMAIN.contains)(points.reshape(-1, DIM)))
    assert inside.all(), np.asarray(points).reshape(-1, DIM)[~inside]
    if name in ("stabl_bco_two_query", "two_point_ogd"):
        # The played point is the centre of the perturbation: it must lie in K_hat.
        for i in range(3):
            alpha = learner.shrinkage(jax.tree.map(lambda x, i=i: x[i], grid))
            hat = DOMAIN.shrunk(float(alpha))
            assert bool(jnp.all(jax.vmap(hat.contains)(points[i, :, 0])))


def test_tell_checks_the_observed_shape():
    learner = small_bco("stabl_bco")
    state = learner.init(jax.random.key(0))
    query = jax.jit(learner.ask)(state, jax.random.key(1))
    with pytest.raises(ValueError, match="observed must have shape"):
        learner.tell(state, query, jnp.zeros(2))
    with pytest.raises(ValueError, match="finite"):
        learner.tell(state, query, jnp.array([0.1, jnp.nan, 0.2]))


#: Per BCO learner, a value of each traced option (``compare=False``: a ``Params`` default).
TRACED = {name: {"lipschitz": 2.0} for name in NUM_QUERIES} | {
    "fkm": {"lipschitz": 2.0, "loss_bound": 3.0}
}


def test_every_traced_option_is_checked():
    """The traced options of every BCO learner are those of :data:`TRACED`."""
    for name in BCO_LEARNERS:
        cls = BCO_LEARNERS[name].cls
        traced = {f.name for f in dataclasses.fields(cls) if f.init and not f.compare}
        assert traced == set(TRACED[name]), name


@pytest.mark.parametrize("name", sorted(set(TRACED) - {"stabl_bco_log_t"}))
def test_traced_options_share_one_program_and_are_never_stale(name):
    """Traced options: equal learners, one program, a fresh compilation's bits, params read."""
    first, second = small_bco(name), small_bco(name, **TRACED[name])
    assert first == second and hash(first) == hash(second)
    # rows 0 and 2: the default's params; every row on the same keys (the vmapped test's program)
    stack = partial(jax.tree.map, lambda a, b: jnp.stack([a, b, a]))
    both = stack(first.default_params, second.default_params)
    keys = (jnp.stack([INIT_KEYS[0]] * 3), jnp.stack([RUN_KEYS[0]] * 3))
    ran = np.asarray(_scanned(first, both, *keys)[1])
    with compile_count() as compiled:
        shared = np.asarray(_scanned(second, both, *keys)[1])
    assert compiled == [], f"{len(compiled)} programs compiled for new options alone"
    with compile_count() as compiled:
        fresh = np.asarray(_scanned(recompiled(second), both, *keys)[1])
    assert compiled, "the fresh run reused a program"
    np.testing.assert_array_equal(fresh, shared)
    np.testing.assert_array_equal(shared, ran)
    assert not np.array_equal(ran[0], ran[1])
