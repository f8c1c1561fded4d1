"""An environment's numbers are traced: two environments that differ only in numbers (change
points, means, a convex family's radius or ``G``, algorithm selection's reward ``lambda`` and
noise, ...) are equal, share one compiled program, and give a fresh compilation's bits."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import env_params_grid, simulate
from stabl_jax.bco import TwoPointOGD
from stabl_jax.bco.simulate import paired_bco_adaptive_regret
from stabl_jax.envs import ExpertAdvice, PiecewiseBernoulli, PiecewiseBernoulliTable
from stabl_jax.envs.bbob import BBOBFunction, BBOBSuite
from stabl_jax.envs.convex import AbsoluteLinear, CustomConvex, HuberTarget, MovingTarget
from stabl_jax.envs.hpo import HPOEnv
from stabl_jax.experiment.sweep import compile_count
from stabl_jax.hpo_metrics import make_hpo_learner, simulate_selection
from stabl_jax.simulate import SimOptions, regenerate_losses, run_keys, sample_env_params
from tests.conftest import HORIZON, NUM_ARMS, recompiled, small_learner

RUNS = 2
TRACES = ("played", "loss", "expected_loss", "prob_best")
FIRST = ((0.2, 0.5, 0.5, 0.5, 0.5), (0.5, 0.2, 0.5, 0.5, 0.5), (0.5, 0.5, 0.2, 0.5, 0.5))
SECOND = ((0.9, 0.1, 0.6, 0.7, 0.8), (0.3, 0.6, 0.0, 0.7, 1.0), (0.4, 0.4, 0.4, 0.05, 0.4))
PAIRS = {
    "expert_advice": (
        ExpertAdvice(NUM_ARMS, HORIZON, change_points=(17, 30)),
        ExpertAdvice(NUM_ARMS, HORIZON, change_points=(20, 41), baseline_high=0.6, bonus=0.3),
    ),
    "bernoulli": (
        PiecewiseBernoulli(NUM_ARMS, HORIZON, change_points=(17, 30)),
        PiecewiseBernoulli(NUM_ARMS, HORIZON, change_points=(20, 41), mean=0.7, gap=0.4),
    ),
    "bernoulli_table": (
        PiecewiseBernoulliTable(NUM_ARMS, HORIZON, change_points=(17, 30), means=FIRST),
        PiecewiseBernoulliTable(NUM_ARMS, HORIZON, change_points=(20, 41), means=SECOND),
    ),
}
# the kernel draws the losses inside, from the traced numbers
CASES = [(name, "xla") for name in PAIRS] + [("expert_advice", "pallas"), ("bernoulli", "pallas")]
#: Algorithm selection on d = 2 Sphere: the first's numbers, then every number changed.
BBOB: dict[str, Any] = dict(dim=2, normalize=True, rotate=True)
HPO_PAIR = (
    HPOEnv(BBOBFunction(1, shift_radius=1.0, noise_std=0.01, **BBOB)),
    HPOEnv(BBOBFunction(1, shift_radius=0.3, noise_std=0.2, **BBOB), reward_lambda=0.1),
)
EVALUATIONS = 16
_draw = jax.jit(lambda env, key, defaults: env.sample_params(key, defaults), static_argnums=0)


def _one_program(run, first, second):
    """``run`` of ``first``, of the equal ``second`` (nothing compiled) and of a fresh
    compilation of ``second`` (compiled): the shared program gives the fresh one's bits."""
    assert first == second and hash(first) == hash(second)
    ran_first = run(first)
    with compile_count() as compiled:
        shared = run(second)
    assert compiled == [], f"{len(compiled)} programs compiled for new numbers alone"
    with compile_count() as compiled:
        fresh = run(recompiled(second))
    assert compiled, "the fresh run reused a program"
    assert shared.keys() == fresh.keys()
    for trace, value in fresh.items():
        np.testing.assert_array_equal(shared[trace], value, err_msg=trace)
    return ran_first, shared, fresh


def _run(env, kernel, env_params=None):
    options, key = SimOptions(kernel=kernel), jax.random.key(3)
    result = simulate(
        small_learner("exp3"), env, key, RUNS, traces=TRACES, env_params=env_params, options=options
    )
    losses = regenerate_losses(env, result.carry, 0, HORIZON)
    return {**result.traces(), "all_losses": np.asarray(losses)}


@pytest.mark.parametrize(("name", "kernel"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_numbers_share_one_program_and_are_never_stale(name, kernel):
    """No compilation, a fresh compilation's bits, not the first's; mixed ``env_params`` too."""
    first, second = PAIRS[name]
    ran_first, shared, fresh = _one_program(lambda env: _run(env, kernel), first, second)
    both = jax.tree.map(lambda a, b: np.stack([a, b]), first.default_params, second.default_params)
    mixed = _run(first, kernel, env_params=both)
    for trace in fresh:
        for run, alone in enumerate((ran_first, fresh)):
            np.testing.assert_array_equal(mixed[trace][run], alone[trace][run], err_msg=trace)
    assert not np.array_equal(ran_first["all_losses"], shared["all_losses"])


@pytest.mark.parametrize("name", list(PAIRS))
def test_sample_params_reads_its_numbers_from_the_defaults_it_is_given(name):
    """``sample_params(key, defaults)`` with the environment static: the traced numbers given."""
    first, second = PAIRS[name]
    key = jax.random.key(0)
    _draw(first, key, first.default_params)
    got = _draw(second, key, second.default_params)
    jax.tree.map(np.testing.assert_array_equal, got, second.sample_params(key))
    jax.tree.map(np.testing.assert_array_equal, got, second.default_params)


@pytest.mark.parametrize("name", list(PAIRS))
def test_a_sweep_of_a_number_is_one_program_on_common_draws(name):
    """Each grid point's runs are its environment's, bit for bit; other values compile nothing."""
    first, second = PAIRS[name]
    if name != "bernoulli_table":  # the table sets its best arms
        first = dataclasses.replace(first, best_arm_order="random")
    learner, key = small_learner("exp3"), jax.random.key(7)
    options = SimOptions(runs_per_point=RUNS)

    def sweep(values):
        grid = env_params_grid(first, key, RUNS, "change_points", values)
        result = simulate(
            learner, first, key, 2 * RUNS, traces=TRACES, env_params=grid, options=options
        )
        return [{t: getattr(result, t)[i * RUNS : (i + 1) * RUNS] for t in TRACES} for i in (0, 1)]

    values = (first.change_points, second.change_points)
    for point, change_points in zip(sweep(values), values, strict=True):
        env = dataclasses.replace(first, change_points=change_points)
        alone = simulate(learner, env, key, RUNS, traces=TRACES)
        for trace in TRACES:
            np.testing.assert_array_equal(point[trace], getattr(alone, trace), err_msg=trace)
    with compile_count() as compiled:
        sweep(((5, 50), (40, 60)))
    assert compiled == [], f"{len(compiled)} programs compiled for other values alone"


def test_a_sweep_of_a_static_field_is_refused_naming_the_traced_ones():
    env = PAIRS["expert_advice"][0]
    traced = r"\(its traced numbers: \['change_points', 'baseline_high', 'bonus'\]\)"
    with pytest.raises(
        ValueError, match=r"field='num_arms' is not a traced number of \w+ " + traced
    ):
        env_params_grid(env, jax.random.key(0), RUNS, "num_arms", (3, 4))


def test_hpo_numbers_share_one_program_and_are_never_stale():
    """Algorithm selection: no compilation, a fresh compilation's bits, ``env_params`` too."""
    first, second = HPO_PAIR
    learner, key = make_hpo_learner("exp3", first.num_arms, EVALUATIONS), jax.random.key(5)

    def run(env, env_params=None):
        res = simulate_selection(learner, env, key, RUNS, EVALUATIONS, env_params=env_params)
        return {name: np.asarray(value) for name, value in res.arrays.items()}

    ran_first, shared, fresh = _one_program(run, first, second)
    with compile_count() as compiled:
        mixed = run(first, sample_env_params(second, run_keys(key, RUNS)))
    assert compiled == [], f"{len(compiled)} programs compiled for mixed numbers"
    assert mixed.keys() == fresh.keys()
    for trace, value in fresh.items():
        np.testing.assert_array_equal(mixed[trace], value, err_msg=trace)
    for trace in ("observed", "reward"):
        assert not np.array_equal(ran_first[trace], shared[trace]), trace


def test_bbob_numbers_are_no_part_of_the_identity_but_their_code_paths_are():
    """A suite's numbers are traced; a zero number or a scale from the origin is another program."""
    suites = [HPOEnv(BBOBSuite((1, 8), noise_std=s, norm_scale=s, **BBOB)) for s in (0.1, 2.0)]
    for env in suites:
        got = _draw(env, jax.random.key(0), env.default_params)
    want = suites[1].sample_params(jax.random.key(0))
    for name in ("function", "reward_lambda", "reward_width"):  # and a Halton key
        jax.tree.map(np.testing.assert_array_equal, got[name], want[name])
    assert float(got.function.noise_std) == float(got.function.norm_scale) == np.float32(2.0)
    fn = BBOBFunction(1, 2, normalize=True, norm_scale=2.0, noise_std=0.1, shift_radius=1.0)
    assert fn == dataclasses.replace(fn, norm_scale=3.0, noise_std=0.5, shift_radius=0.2)
    for paths in ({"norm_scale": None}, {"noise_std": 0.0}, {"shift_radius": 0.0}):
        assert fn != dataclasses.replace(fn, **paths), paths


def _l1(theta, x):
    return jnp.sum(jnp.abs(x - theta))


DIM = 2
#: Per convex family: two environments that differ in every number, and the one a grid sweeps.
CONVEX = {
    "moving_target": (
        MovingTarget(DIM, HORIZON, change_points=(17, 30)),
        MovingTarget(DIM, HORIZON, change_points=(20, 41), target_radius=0.5),
        "target_radius",
    ),
    "abs_linear_drift": (
        AbsoluteLinear(DIM, HORIZON, schedule="drift"),
        AbsoluteLinear(DIM, HORIZON, schedule="drift", period=20, target_radius=0.6, a_scale=2.0),
        "a_scale",
    ),
    "huber_alternate": (
        HuberTarget(DIM, HORIZON, schedule="alternate"),
        HuberTarget(DIM, HORIZON, schedule="alternate", period=5, target_radius=0.3, huber_mu=0.2),
        "huber_mu",
    ),
    "custom": (
        CustomConvex(DIM, HORIZON, loss=_l1, lipschitz_bound=2.0),
        CustomConvex(DIM, HORIZON, change_points=(5, 20, 50), loss=_l1, lipschitz_bound=3.0),
        "lipschitz_bound",
    ),
}


def _convex_run(env, env_params=None):
    """Traces and SA(16) of a BCO simulation (with ``env_params``: two points of ``RUNS`` runs),
    blocks of ``RUNS`` runs so that a point runs the program of a run alone."""
    runs, options = RUNS, SimOptions(runs_per_block=RUNS)
    if env_params is not None:
        runs, options = 2 * RUNS, dataclasses.replace(options, runs_per_point=RUNS)
    learner, key = TwoPointOGD(dim=DIM, horizon=HORIZON), jax.random.key(3)
    traces = ("loss", "best_loss")
    result = simulate(
        learner, env, key, runs, traces=traces, env_params=env_params, options=options
    )
    losses = {"learner": result.loss}
    sa = paired_bco_adaptive_regret(
        env, result.carry, losses, [16], num_steps=50, runs_per_block=RUNS
    )
    return {**result.traces(), "sa": sa["sa"]["learner"], "gap": sa["comparator_gap"]}


@pytest.mark.parametrize("name", list(CONVEX))
def test_convex_numbers_share_one_program_and_are_never_stale(name):
    """No compilation (simulation, SA(L)), a fresh compilation's bits; grid points alone."""
    first, second, field = CONVEX[name]
    ran_first, shared, _ = _one_program(_convex_run, first, second)
    assert not np.array_equal(ran_first["loss"], shared["loss"])
    values = (getattr(first, field), getattr(second, field))
    swept = _convex_run(first, env_params_grid(first, jax.random.key(3), RUNS, field, values))
    alone = (ran_first, _convex_run(dataclasses.replace(first, **{field: values[1]})))
    for point, runs in enumerate(alone):
        for trace, value in runs.items():
            got = swept[trace][point * RUNS : (point + 1) * RUNS]
            np.testing.assert_array_equal(got, value, err_msg=f"{trace} of point {point}")
