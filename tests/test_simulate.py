"""``simulate``: vmapped rows equal single runs, runs are paired (chunking and resuming
change nothing: tests/test_reliability.py)."""

from __future__ import annotations

import dataclasses
import gc
import importlib
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stabl_jax
from stabl_jax import (
    ENVS,
    EXP3,
    LEARNERS,
    Environment,
    ExpertAdvice,
    PiecewiseBernoulli,
    StABL,
    make,
    make_env,
    sharding,
    simulate,
)
from stabl_jax.envs.base import as_environment
from stabl_jax.experiment.checkpoints import ChunkCheckpoint
from stabl_jax.simulate import TRACE_FIELDS, SimOptions, overrides_step, regenerate_losses
from tests.conftest import HORIZON, NUM_ARMS, env_options

N, T = NUM_ARMS, HORIZON
sim = importlib.import_module("stabl_jax.simulate")  # the module, not the function


@pytest.fixture(scope="module")
def env():
    return ExpertAdvice(num_arms=N, horizon=T, change_points=(17, 30))


def test_rows_equal_single_runs_from_the_documented_keys(env):
    """Row i is run i alone, from run_key = fold_in(key, i): init from fold_in(run_key, 3),
    env params from fold_in(run_key, 0), round t's losses from fold_in(fold_in(run_key, 1), t)
    and learner draws from fold_in(fold_in(run_key, 2), t)."""
    learner = StABL(num_arms=N, horizon=T)
    key = jax.random.key(11)
    result = simulate(learner, env, key, num_runs=3)

    @jax.jit
    def run(run_key):  # the run alone, from the documented keys, round by round
        env_key, learner_key = jax.random.fold_in(run_key, 1), jax.random.fold_in(run_key, 2)
        params = env.sample_params(jax.random.fold_in(run_key, 0))

        def step(state, t):
            loss = env.loss(params, t, jax.random.fold_in(env_key, t))
            state, info = learner.step(state, loss, jax.random.fold_in(learner_key, t))
            return state, (info.arms, info.loss)

        state = learner.init(jax.random.fold_in(run_key, 3))
        return jax.lax.scan(step, state, jnp.arange(T, dtype=jnp.int32))[1]

    for i in range(3):
        arms, loss = run(jax.random.fold_in(key, i))
        np.testing.assert_array_equal(result.arms[i], np.asarray(arms))
        np.testing.assert_allclose(result.loss[i], np.asarray(loss), rtol=1e-6)


def test_prefix_of_runs_is_stable(env):
    learner = EXP3(num_arms=N, horizon=T)
    small = simulate(learner, env, jax.random.key(1), num_runs=3)
    large = simulate(learner, env, jax.random.key(1), num_runs=5)
    for name, trace in small.traces().items():
        np.testing.assert_array_equal(trace, large.traces()[name][:3], err_msg=name)


def test_learners_are_paired_on_the_same_losses(env):
    """Two learners simulated with one key face identical losses in every run."""
    a = simulate(StABL(num_arms=N, horizon=T), env, jax.random.key(3), num_runs=3)
    b = simulate(EXP3(num_arms=N, horizon=T), env, jax.random.key(3), num_runs=3)
    la, lb = (np.asarray(regenerate_losses(env, run.carry, 0, T)) for run in (a, b))
    np.testing.assert_array_equal(la, lb)
    rows = np.arange(3)[:, None]
    np.testing.assert_array_equal(la[rows, np.arange(T)[None], b.played], b.loss)


def test_per_run_params_sweep(env):
    learner = StABL(num_arms=N, horizon=T)
    params = learner.default_params.replace(meta_lr_scale=jnp.array([0.5, 1.0, 4.0]))
    swept = simulate(learner, env, jax.random.key(4), num_runs=3, params=params)
    for i, s in enumerate([0.5, 1.0, 4.0]):
        one = learner.default_params.replace(meta_lr_scale=jnp.float32(s))
        alone = simulate(learner, env, jax.random.key(4), num_runs=3, params=one)
        np.testing.assert_array_equal(swept.played[i], alone.played[i])


def test_random_change_points_differ_across_runs():
    env = PiecewiseBernoulli(num_arms=N, horizon=T, num_segments=5, random_change_points=True)
    result = simulate(EXP3(num_arms=N, horizon=T), env, jax.random.key(5), num_runs=4)
    points = np.asarray(result.carry.env_params.change_points)
    assert points.shape == (4, 4) and len({tuple(p) for p in points}) > 1


@dataclasses.dataclass(frozen=True)
class _StepEXP3(EXP3):
    """EXP3 overriding ``step`` (with the inherited one): the rollout drives it through
    ``step`` with ``env.loss_fn`` instead of ``ask``/``tell``."""

    def step(self, state, loss, key):
        return super().step(state, loss, key)


@pytest.mark.parametrize("traces", [None, TRACE_FIELDS], ids=["default", "every trace"])
def test_a_learner_with_its_own_step_is_driven_through_step(env, traces):
    """The full-information path of the rollout (a bandit learner that overrides ``step``)
    gives the bits of the ask/tell path when its step is ask + tell."""
    learner = _StepEXP3(num_arms=N, horizon=T)
    assert overrides_step(learner) and not overrides_step(EXP3(num_arms=N, horizon=T))
    full = simulate(learner, env, jax.random.key(0), 3, traces=traces)
    plain = simulate(EXP3(num_arms=N, horizon=T), env, jax.random.key(0), 3, traces=traces)
    assert full.traces().keys() == plain.traces().keys()
    for name, trace in plain.traces().items():
        np.testing.assert_array_equal(full.traces()[name], trace, err_msg=name)


@dataclasses.dataclass(frozen=True)
class _Reactive(Environment):
    """A reactive environment (``evaluate`` only): no round has a whole loss vector."""

    num_arms: int = N
    horizon: int = T

    def sample_params(self, key):
        return jnp.zeros(())

    def evaluate(self, params, state, t, query, key):
        return state, jnp.full(query.arms.shape, 0.5, jnp.float32), {}


def test_what_a_rollout_cannot_run_is_refused_before_it_starts(env):
    """A learner reading the whole loss on an environment without ``loss_fn``; runs not a
    whole number of sweep points; ``env_params`` with another number of runs."""
    exp3, key = EXP3(num_arms=N, horizon=T), jax.random.key(0)
    with pytest.raises(TypeError, match=r"_StepEXP3 overrides step .* _Reactive has none"):
        simulate(_StepEXP3(num_arms=N, horizon=T), _Reactive(), key, 2)
    assert simulate(exp3, _Reactive(), key, 2).loss.shape
    with pytest.raises(ValueError, match=r"num_runs=5 is not a multiple of runs_per_point=2"):
        simulate(exp3, env, key, 5, options=SimOptions(runs_per_point=2))
    env_params = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(1), 3))
    with pytest.raises(ValueError, match=r"leading axis num_runs=2, got shape \(3,"):
        simulate(exp3, env, key, 2, env_params=env_params)


def test_progress_callback_sees_every_chunk(env):
    seen = []
    options = SimOptions(chunk_size=20, progress=lambda done, total: seen.append((done, total)))
    simulate(EXP3(num_arms=N, horizon=T), env, jax.random.key(0), num_runs=1, options=options)
    assert seen == [(20, T), (40, T), (60, T), (64, T)]


_TRACED: list[int] = []


class _CountingEXP3(EXP3):
    """EXP3 that records every time its round is traced (a Python-level call of ``_ask``)."""

    def _ask(self, state, key):
        _TRACED.append(1)
        return super()._ask(state, key)


def test_a_second_simulate_of_the_same_program_traces_nothing(env):
    """Automatic chunks are sized by tracing one round once per learner, environment, traces
    and shapes: a second call with the same ones traces nothing; other traces trace again."""
    learner = _CountingEXP3(num_arms=env.num_arms, horizon=env.horizon)
    first = simulate(learner, env, jax.random.key(0), 3)
    assert _TRACED
    _TRACED.clear()
    again = simulate(learner, env, jax.random.key(0), 3)
    assert not _TRACED
    np.testing.assert_array_equal(first.played, again.played)
    simulate(learner, env, jax.random.key(0), 3, traces=("played", "loss"))
    assert _TRACED


def _loops_in_a_chunk(learner, env, fields):
    """``while`` loops in the lowered program of one chunk of 8 rounds for 4 runs."""
    rollout = as_environment(env, reveal_all="expected_loss" in fields)
    carry = jax.eval_shape(  # shapes suffice to lower: nothing is computed
        lambda keys: sim.init_runs(learner, rollout, keys, learner.default_params),
        sim.run_keys(jax.random.key(0), 4),
    )
    plan = sharding.plan_runs(4, host_threads=1)
    lowered = sim.run_chunk.lower(learner, rollout, carry, jnp.int32(0), 8, plan, fields)
    return lowered.as_text().count("stablehlo.while")


QUERIED = ("played", "arms", "loss", "prob_best")  # only the queried arms' losses are drawn


@pytest.mark.parametrize(
    ("learner", "env"),
    [(name, "expert_advice") for name in sorted(LEARNERS)]
    + [("exp3", name) for name in sorted(ENVS) if name != "expert_advice"],
)
def test_a_bandit_round_has_no_loop_inside(learner, env):
    """The chunk's program is one loop over the rounds and nothing loops inside a round (a
    loop launches its kernels once per iteration, every round), whether every arm's loss is
    drawn or only the queried arms' (for one query, EXP3, or two, StABL; the other learners'
    rounds are the same in both programs)."""
    built = make(learner, num_arms=N, horizon=T)
    env = make_env(env, num_arms=N, horizon=T, **env_options(env, N, 4))
    expected = 1 + (_beta_sampler_loops(N) if learner in BETA_SAMPLERS else 0)
    for fields in (TRACE_FIELDS, QUERIED) if learner in ("exp3", "stabl") else (TRACE_FIELDS,):
        assert _loops_in_a_chunk(built, env, fields) == expected, fields


# The Thompson samplers draw their posteriors with jax.random.beta, whose gamma sampler is a
# rejection loop: the only loops a round of theirs may hold.
BETA_SAMPLERS = {"thompson", "discounted_thompson", "sw_thompson"}


def _beta_sampler_loops(n: int) -> int:
    """``while`` loops in ``jax.random.beta`` of ``n`` posteriors."""
    a = jax.ShapeDtypeStruct((n,), jnp.float32)
    lowered = jax.jit(jax.random.beta).lower(jax.random.key(0), a, a)
    return lowered.as_text().count("stablehlo.while")


_EXP3 = EXP3(num_arms=N, horizon=T)


@dataclasses.dataclass(frozen=True)
class _RegistryMethodsOnly:
    """A learner with the registry's methods and no base class (``_EXP3`` underneath)."""

    num_arms: int = N
    horizon: int = T
    num_queries = 1

    def __getattr__(self, name):
        if name in ("default_params", "init", "ask", "tell", "step"):
            return getattr(_EXP3, name)
        raise AttributeError(name)


def test_a_learner_without_a_base_class_is_validated_as_one_row():
    """``simulate(validate=True)`` checks its play distribution with one row's tolerance (it
    has no ``num_mixed``) and gives the runs of the learner it wraps."""
    env = ExpertAdvice(num_arms=N, horizon=T)
    got = simulate(_RegistryMethodsOnly(), env, jax.random.key(0), 2, validate=True)
    want = simulate(_EXP3, env, jax.random.key(0), 2)
    np.testing.assert_array_equal(got.played, want.played)
    np.testing.assert_array_equal(got.prob_best, want.prob_best)


def _live_bytes() -> int:
    """Bytes of the device buffers JAX holds (two arrays on one buffer counted once)."""
    buffers = {}
    for array in jax.live_arrays():
        for shard in array.addressable_shards:
            buffers[shard.data.unsafe_buffer_pointer()] = shard.data.nbytes
    return sum(buffers.values())


@pytest.mark.parametrize("resumed", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_runs_loop_state_is_held_once_between_chunks(threads, resumed, tmp_path):
    """After every chunk ``simulate`` holds the runs' loop state once: the first (or the
    restored) state is handed to the chunk driver, not kept beside it, the threads' groups
    of runs are not joined between chunks, and each chunk program takes over its input."""
    num_arms, runs = 2048, 512
    env = ExpertAdvice(num_arms=num_arms, horizon=64)
    learner = EXP3(num_arms=num_arms, horizon=64)
    opts = SimOptions(chunk_size=16, runs_per_block=128, host_threads=threads)

    def run(**options):
        options = dataclasses.replace(opts, **options)
        return simulate(learner, env, jax.random.key(0), runs, traces=("played",), options=options)

    checkpoint = None
    if resumed:  # stopped after two of the four chunks, then resumed from its checkpoint

        def stop(done, total):
            if done == 32:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run(checkpoint=ChunkCheckpoint(tmp_path / "ckpt", {"runs": runs}), progress=stop)
        checkpoint = ChunkCheckpoint(tmp_path / "ckpt", {"runs": runs})
    gc.collect()
    before = _live_bytes()
    held = []
    progress = lambda done, total: held.append(_live_bytes() - before)  # noqa: E731
    result = run(progress=progress, checkpoint=checkpoint)
    state = sum(x.nbytes for x in jax.tree.leaves(result.carry))
    assert state > 4 * 2**20 and len(held) == (3 if resumed else 4)
    assert max(held) < 1.25 * state, [h / state for h in held]


@pytest.mark.parametrize("checkpointed", [False, True])
def test_the_next_chunk_is_dispatched_before_a_chunks_outputs_are_fetched(
    checkpointed, monkeypatch
):
    """Without a checkpoint, chunk k + 1 is dispatched before chunk k's outputs are copied to
    the host; with one, each chunk is fetched (the checkpoint needs its carry) before the next
    is dispatched. The outputs are the same."""
    events: list[str] = []

    def lower(carry, t0, length):  # a chunk's program: counts its calls, returns its rounds
        def program(carry, t0):
            events.append(f"dispatch {int(t0)}")
            return carry + 1, {"x": jnp.broadcast_to(t0 + jnp.arange(length), (3, length))}

        return SimpleNamespace(compile=lambda: program)

    saver = SimpleNamespace(
        restore=lambda carry, horizon, names: None,
        save=lambda carry, out, start, stop: events.append(f"save {start}"),
    )
    real_get = jax.device_get

    def device_get(tree):
        events.append(f"fetch {int(jax.tree.leaves(tree)[0][0, 0])}")
        return real_get(tree)

    monkeypatch.setattr(sim.jax, "device_get", device_get)
    checkpoint = saver if checkpointed else None
    carry, arrays, _, _ = sim.run_chunks(lower, jnp.zeros(3), 10, 4, checkpoint=checkpoint)
    np.testing.assert_array_equal(arrays["x"], np.broadcast_to(np.arange(10), (3, 10)))
    np.testing.assert_array_equal(carry, np.full(3, 3.0))
    if checkpointed:
        expected = [f"{e} {t}" for t in (0, 4, 8) for e in ("dispatch", "fetch", "save")]
    else:
        expected = ["dispatch 0", "dispatch 4", "fetch 0", "dispatch 8", "fetch 4", "fetch 8"]
    assert events == expected


def test_a_callers_arrays_are_never_donated():
    """The chunk programs delete (donate) their carry: a caller's per-run params and
    environment parameters outlive ``simulate`` (``simulate._owned`` copies them)."""
    learner, env, runs = StABL(num_arms=N, horizon=T), ExpertAdvice(num_arms=N, horizon=T), 4
    env_params = sim.sample_env_params(env, sim.run_keys(jax.random.key(1), runs))
    params = jax.tree.map(lambda x: jnp.full((runs,), x), learner.default_params)
    for threads in (1, 2):
        options = SimOptions(chunk_size=16, host_threads=threads, runs_per_block=2)
        key = jax.random.key(0)
        simulate(learner, env, key, runs, params=params, env_params=env_params, options=options)
        given = jax.tree.leaves((params, env_params))
        assert given and not any(x.is_deleted() for x in given)
    mine, other = jnp.arange(3.0), jnp.ones(2)
    carry = sim._owned({"a": mine, "b": other}, given=(mine,))
    assert carry["a"] is not mine and carry["b"] is other
    np.testing.assert_array_equal(carry["a"], mine)


def test_sim_options_are_a_frozen_hashable_value_that_names_a_bad_field():
    """``SimOptions`` is exported at the top level, equal options hash equal, a field cannot
    be set afterwards, and a bad value is named with its remedy when it is built."""
    assert stabl_jax.SimOptions is SimOptions
    assert hash(SimOptions(chunk_size=8)) == hash(SimOptions(chunk_size=np.int64(8)))
    assert {SimOptions(), SimOptions(kernel="xla")} == {SimOptions(), SimOptions(kernel="xla")}
    with pytest.raises(dataclasses.FrozenInstanceError):
        SimOptions().chunk_size = 4
    with pytest.raises(TypeError, match=r"runs_per_block must be an int, got 2.5"):
        SimOptions(runs_per_block=2.5)
    with pytest.raises(ValueError, match=r"kernel must be one of \('auto', 'xla', 'pallas'\)"):
        SimOptions(kernel="triton")
    with pytest.raises(TypeError, match=r"options must be a SimOptions, got \{'chunk_size': 8\}"):
        simulate(EXP3(N, T), ExpertAdvice(N, T), jax.random.key(0), 2, options={"chunk_size": 8})
