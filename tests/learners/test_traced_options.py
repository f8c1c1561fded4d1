"""A learner's traced options (``field(compare=False)``, its ``Params``' defaults) are not
part of its identity: learners differing only in them are equal, share one compiled program,
and each gives the bits of a fresh compilation (the step reads ``state.params``)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import pytest

from stabl_jax import LEARNERS, simulate
from stabl_jax.envs import ExpertAdvice
from stabl_jax.experiment import sweep
from stabl_jax.experiment.kinds import load_config
from stabl_jax.experiment.sweep import Grid, compile_count
from tests.conftest import HORIZON, NUM_ARMS, small_learner

#: Per learner class with traced options, a registry name and a value of each (a window, a
#: shape, is pinned to the default learner's).
VARIANTS = {
    "exp3": {"gamma": 0.3},
    "exp3s": {"num_switches": 0, "gamma": 0.5, "alpha": 0.2},
    "rexp3": {"num_changes": 1, "variation": 6.0, "batch": 7, "gamma": 0.5},
    "klucb": {"c": 3.0},
    "sw_ucb": {"num_changes": 1, "xi": 4.0},
    "sw_klucb": {"num_changes": 1},
    "sw_thompson": {"num_changes": 1},
    "d_ucb": {"num_changes": 1, "discount": 0.5, "xi": 4.0},
    "d_klucb": {"num_changes": 1, "discount": 0.5},
    "discounted_thompson": {"discount": 0.5},
    "cusum_ucb": {
        "num_changes": 1, "threshold": 0.5, "drift": 0.0, "alpha": 0.3, "warmup": 3, "xi": 4.0,
    },
    "m_ucb": {
        "num_changes": 1, "min_change": 0.9, "threshold": 0.5, "gamma": 0.5,
        "gamma_count": "breakpoints",
    },
    "glr_klucb": {
        "num_changes": 1, "delta": 0.4, "alpha": 0.3, "alpha_scale": 1.0, "log_scale": 1.0,
        "loglog_scale": 3.0, "threshold_scale": 0.01,
    },
    "adswitch": {"c1": 0.1, "c2": 0.5},
    "master": {"delta": 0.9},
}  # fmt: skip
TRACES = ("played", "loss", "expected_loss")
RUNS = 2
ENV = ExpertAdvice(NUM_ARMS, HORIZON, change_points=(20, 41))
SWEPT = f"""\
name = "tiny"
seed = 3
runs = {RUNS}
horizon = {HORIZON}
learners = ["d_ucb"]

[env]
name = "expert_advice"
num_arms = {NUM_ARMS}
change_points = [20, 41]
"""
LOSSES = jax.random.uniform(jax.random.key(5), (HORIZON, NUM_ARMS))
KEYS = jax.random.split(jax.random.key(6), HORIZON)


def traced_options(cls: type) -> set[str]:
    """The options of ``cls`` left out of its hash and equality."""
    return {f.name for f in dataclasses.fields(cls) if f.init and not f.compare}


def test_every_learner_with_traced_options_is_checked():
    """Every registry learner class with traced options has a variant setting each of them."""
    classes = {LEARNERS[name].cls for name in LEARNERS}
    assert {LEARNERS[name].cls for name in VARIANTS} == {c for c in classes if traced_options(c)}
    for name, options in VARIANTS.items():
        assert traced_options(LEARNERS[name].cls) == set(options), name


def _rounds(learner, params):
    """Every round's state, info and restart flag over :data:`LOSSES`, per row of ``params``."""

    def run(p):
        def body(state, xs):
            new, info = learner.step(state, *xs)
            restart = learner.restarted(state, new) if learner.records_restarts else None
            return new, (new, info, restart)

        return jax.lax.scan(body, learner.init(jax.random.key(0), p), (LOSSES, KEYS))[1]

    return jax.vmap(run)(params)


def fresh_program(learner, params) -> str:
    """The program of :func:`_rounds` for ``learner``, traced and lowered afresh."""
    return jax.jit(lambda p: _rounds(learner, p)).lower(params).as_text()


def _simulate(learner, params):
    result = simulate(learner, ENV, jax.random.key(3), RUNS, params=params, traces=TRACES)
    return {trace: np.asarray(getattr(result, trace)) for trace in TRACES}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_traced_options_share_one_program_and_are_never_stale(name):
    """The variant's simulation (runs with the default's and its params) compiles nothing after
    the default's and gives its bits; a fresh trace is the default's; the runs differ."""
    first = small_learner(name)
    shape = {"window": first.window} if hasattr(first, "window") else {}
    second = small_learner(name, **VARIANTS[name], **shape)
    assert first == second and hash(first) == hash(second)
    both = jax.tree.map(lambda a, b: np.stack([a, b]), first.default_params, second.default_params)
    ran = _simulate(first, both)
    with compile_count() as compiled:
        shared = _simulate(second, both)
    assert compiled == [], f"{len(compiled)} programs compiled for new options alone"
    for trace in TRACES:
        np.testing.assert_array_equal(shared[trace], ran[trace], err_msg=trace)
    assert fresh_program(second, both) == fresh_program(first, both)
    assert not np.array_equal(ran["played"][0], ran["played"][1])


def test_a_sweep_of_traced_options_is_one_program(tmp_path):
    """A grid over ``d_ucb.xi`` (a param) and ``d_ucb.num_changes`` (a traced option): four
    points compile what one does, each point's runs those of its own ``d_ucb`` alone."""
    path = tmp_path / "tiny.toml"
    path.write_text(SWEPT)
    config = load_config(path, runs=RUNS)
    values = {"xi": (0.25, 4.0), "num_changes": (1.0, 40.0)}
    (grid,) = sweep.check_grids(config, {"d_ucb": values})

    def swept(grid):
        jax.clear_caches()
        return sweep.sweep_rewards(config, grid, RUNS, 3, False)

    reward, compiled = swept(grid)
    assert compiled == swept(Grid("d_ucb", grid.fields, ((0.25,), (1.0,))))[1]
    for row, (xi, changes) in zip(reward, grid.points, strict=True):
        learner = small_learner("d_ucb", num_changes=int(changes), xi=xi)
        alone = simulate(learner, config.make_env(), jax.random.key(3), RUNS, traces=("loss",))
        np.testing.assert_array_equal(row, 1.0 - np.asarray(alone.loss, np.float64).mean(1))
