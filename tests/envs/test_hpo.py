"""Algorithm selection on BBOB (:mod:`stabl_jax.envs.hpo`, :mod:`stabl_jax.hpo_metrics`): the
reward-to-loss map, query honesty (only queried arms' suggestions evaluated, every evaluation
counted and shared), the budget, and tiny runs of every compared learner and shipped config."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import hpo_metrics
from stabl_jax.envs import eagle
from stabl_jax.envs.bbob import BBOBFunction, BBOBSuite
from stabl_jax.envs.hpo import (
    HPOEnv,
    loss_to_regularized_reward,
    regularized_reward_to_loss,
    to_domain,
)
from stabl_jax.experiment.configs import shipped_configs
from stabl_jax.experiment.kinds import load_config
from stabl_jax.experiment.kinds.selection import HPOConfig, make_learner, problem_env
from stabl_jax.hpo_metrics import num_rounds, simulate_selection
from stabl_jax.simulate import SimOptions, run_keys, sample_env_params

DIM = 4
BUDGET = 256
RUNS = 2
LAM = 0.01
BBOB: dict[str, Any] = dict(dim=DIM, normalize=True, shift_radius=1.0, rotate=True, noise_std=0.01)
ENV = HPOEnv(BBOBFunction(function_id=1, **BBOB))
HPO_CONFIGS = [n for n in sorted(shipped_configs()) if isinstance(load_config(n), HPOConfig)]
#: One program: the queried arms' suggestions, and the evaluation of the same query.
SUGGEST_AND_EVALUATE = jax.jit(
    lambda p, s, t, a, k: (ENV.suggest(s, a, k), ENV.evaluate(p, s, t, a, k))
)


@functools.cache
def selection(learner, env, seed: int = 0):
    """:data:`RUNS` runs of :data:`BUDGET` evaluations from ``key(seed)``, once in this file."""
    return simulate_selection(learner, env, jax.random.key(seed), RUNS, BUDGET)


@pytest.fixture(scope="module")
def results():
    """Every compared learner, noisy Sphere d=4, 256 evaluations, 2 runs, the same key."""
    out = {}
    for name in hpo_metrics.HPO_LEARNERS:
        learner = hpo_metrics.make_hpo_learner(name, ENV.num_arms, BUDGET)
        out[name] = (learner, selection(learner, ENV))
    return out


def test_reward_to_loss_maps_the_reward_range_onto_unit_interval():
    r = jnp.array([-LAM, 0.0, 0.5, 1.0])
    loss = regularized_reward_to_loss(r, LAM)
    np.testing.assert_allclose(loss, [1.0, 1.0 / (1 + LAM), 0.5 / (1 + LAM), 0.0], rtol=1e-6)
    np.testing.assert_allclose(loss_to_regularized_reward(loss, LAM), r, atol=1e-6)
    assert bool(jnp.all(jnp.diff(loss) < 0))  # decreasing


def test_env_validation():
    with pytest.raises(ValueError, match="normalize"):
        HPOEnv(BBOBFunction(function_id=1, dim=DIM))
    with pytest.raises(ValueError, match="dim"):
        HPOEnv(BBOBFunction(function_id=1, dim=DIM, normalize=True), eagle.EagleEnsemble(3))
    with pytest.raises(ValueError, match="reward_lambda"):
        HPOEnv(BBOBFunction(function_id=1, dim=DIM, normalize=True), reward_lambda=1.5)


def test_evaluate_only_the_queried_arms_and_share_the_evaluations():
    # Run 0's function, drawn by the same compiled program as the fixture's runs.
    all_params = sample_env_params(ENV, run_keys(jax.random.key(0), RUNS))
    params = jax.tree.map(lambda a: a[0], all_params)
    state = jax.jit(ENV.init)(params)
    points = []
    for t, arms in enumerate(([3, 3], [5, 11])):
        arms = jnp.array(arms, jnp.int32)
        key = jax.random.key(10 + t)
        expected, (new, loss, info) = SUGGEST_AND_EVALUATE(params, state, t, arms, key)
        # the evaluated points are the queried arms' suggestions, in query order
        np.testing.assert_allclose(info.x, to_domain(expected.x), rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(info.parents, expected.parent)
        if t == 0:  # the same arm queried twice: two independent suggestions
            assert not np.allclose(info.x[0], info.x[1])
        # rewards against the best before the round; losses their affine image
        clipped = jnp.clip(info.observed, 0.0, 1.0)
        reward = jnp.maximum(state.best_observed - clipped, 0.0) - LAM * clipped
        np.testing.assert_allclose(info.reward, reward, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(loss, regularized_reward_to_loss(reward, LAM), rtol=1e-6)
        assert bool(jnp.all((loss >= 0) & (loss <= 1)))
        value = jax.jit(ENV.function.value)(params.function, info.x)
        np.testing.assert_allclose(info.value, value, rtol=1e-5)
        points.extend(np.asarray(expected.x))
        state = new

    counts = np.zeros(ENV.num_arms, np.int32)
    np.add.at(counts, [3, 3, 5, 11], 1)
    np.testing.assert_array_equal(state.evaluations_per_arm, counts)
    assert int(state.num_evaluations) == 4
    # Every arm ingested all four evaluations; below capacity each became a fly.
    np.testing.assert_array_equal(state.arms.num_seen, 4)
    for a in range(ENV.num_arms):
        alive = np.asarray(state.arms.alive[a])
        assert alive.sum() == 4
        np.testing.assert_allclose(state.arms.positions[a][alive], np.stack(points), rtol=1e-6)
    assert float(state.best_gap) == pytest.approx(float(jnp.min(info.best_gap)))


def test_learners_are_built_for_the_evaluation_budget():
    for name in hpo_metrics.HPO_LEARNERS:
        learner = hpo_metrics.make_hpo_learner(name, 24, 1000)
        assert learner.horizon == num_rounds(1000, learner.num_queries)
        if name != "uniform":
            assert learner.feedback == "reward"
        if name.startswith("stabl"):
            assert learner.history_lengths == hpo_metrics.PAPER_HISTORY_LENGTHS
    assert hpo_metrics.make_hpo_learner("stabl_naive", 24, 1000).observation == "uniform"
    assert num_rounds(41, 2) == 21


@pytest.mark.parametrize("name", hpo_metrics.HPO_LEARNERS)
def test_end_to_end_traces_budget_and_query_honesty(results, name):
    learner, res = results[name]
    q = learner.num_queries
    rounds = BUDGET // q
    assert res.best_gap.shape == res.best_value.shape == (RUNS, BUDGET)
    assert res.arms.shape == res.observed.shape == (RUNS, rounds, q)
    assert np.all(np.isfinite(res.best_gap)) and np.all(res.best_gap >= 0)
    assert np.all(np.diff(res.best_gap, axis=1) <= 0)  # best so far never gets worse
    assert np.all((res.best_value >= 0) & (res.best_value <= 1))
    assert np.all((res.observed >= 0) & (res.observed <= 1))
    env_state = res.carry.env_state
    # budget: every query is one evaluation; honesty: each arm evaluated as often as queried
    np.testing.assert_array_equal(env_state.num_evaluations, BUDGET)
    for r in range(RUNS):
        queried = np.bincount(res.arms[r].ravel(), minlength=ENV.num_arms)
        np.testing.assert_array_equal(env_state.evaluations_per_arm[r], queried)
    np.testing.assert_array_equal(env_state.arms.num_seen, BUDGET)
    np.testing.assert_allclose(res.best_gap[:, -1], env_state.best_gap, rtol=1e-6)


def test_runs_are_paired_across_learners_and_differ_between_runs(results):
    x_star = [np.asarray(res.carry.env_params.function.x_star) for _, res in results.values()]
    for other in x_star[1:]:
        np.testing.assert_array_equal(other, x_star[0])  # the same functions for all
    assert not np.allclose(x_star[0][0], x_star[0][1])  # runs are independent draws
    # uniform and EXP3 both draw their first arm uniformly: their traces start equal
    first = [results[name][1].best_gap[:, 0] for name in ("uniform", "exp3")]
    np.testing.assert_array_equal(*first)


def test_profiles_and_scores(results):
    gaps = {name: res.best_gap for name, (_, res) in results.items()}
    curve = hpo_metrics.score_vs_baseline_curve(gaps["stabl"], gaps["uniform"])
    assert curve.shape == (BUDGET,) and np.all(np.abs(curve) <= 1)
    uniform = hpo_metrics.score_vs_baseline_curve(gaps["uniform"], gaps["uniform"])
    np.testing.assert_array_equal(uniform, 0.0)
    log = hpo_metrics.log_curve(gaps["stabl"])
    assert np.all(log["lo"] <= log["mean"]) and np.all(log["mean"] <= log["hi"])

    costs = np.array([[1.0, 2.0, 1e-15], [2.0, 1.0, 1e-13], [4.0, 4.0, 1.0]])
    ratios = hpo_metrics.performance_ratios(costs)
    np.testing.assert_allclose(ratios.min(axis=0), 1.0)
    np.testing.assert_allclose(ratios[:, 2], [1.0, 1.0, 1e12])  # floored at 1e-12: solved
    taus = np.array([1.0, 2.0, 4.0, 1e13])
    profile = hpo_metrics.performance_profile(costs, taus)
    np.testing.assert_allclose(profile[:, -1], 1.0)
    assert np.all(np.diff(profile, axis=1) >= 0)
    np.testing.assert_allclose(profile[:, 0], [2 / 3, 2 / 3, 0.0])
    scores = hpo_metrics.profile_scores(costs, tau_max=4.0)
    np.testing.assert_allclose(scores, [(1 + 0.5 + 1) / 3, (0.5 + 1 + 1) / 3, 0.0])

    fake = {"learners": {n: {"best_gap": g} for n, g in gaps.items()}}
    across = hpo_metrics.profiles_across([fake, fake])
    assert across["profile"].shape == (len(gaps), 50)
    assert across["score_vs_baseline"]["uniform"] == 0.0


def test_suite_in_one_program_equals_the_per_function_programs(results):
    """Functions 1, 8, 21 (padded peaks) as data of one program give each function's own runs
    (StABL): the same arms, values within a few float32 ulps (XLA fuses them otherwise)."""
    ids = (1, 8, 21)
    suite_env = HPOEnv(BBOBSuite(ids, **BBOB))
    learner, first = results["stabl"]
    key = jax.random.key(0)
    together = hpo_metrics.simulate_suite(learner, suite_env, key, RUNS, BUDGET)
    for i, f in enumerate(ids):
        env = HPOEnv(BBOBFunction(function_id=f, **BBOB))
        options = SimOptions(first_run=i * RUNS)
        alone = simulate_selection(learner, env, key, RUNS, BUDGET, options=options) if i else first
        np.testing.assert_array_equal(together[i].arms, alone.arms)
        ulps = 16 * np.finfo(np.float32).eps
        np.testing.assert_allclose(together[i].best_gap, alone.best_gap, rtol=ulps)
        np.testing.assert_allclose(together[i].reward, alone.reward, rtol=ulps, atol=1e-7)
        assert together[i].env is suite_env and together[i].num_runs == RUNS
    with pytest.raises(TypeError, match="simulate_suite runs an HPOEnv of a BBOBSuite"):
        hpo_metrics.simulate_suite(learner, ENV, key, RUNS, BUDGET)


@pytest.mark.slow
@pytest.mark.parametrize("config_name", HPO_CONFIGS)
def test_shipped_config_learners_stay_finite(config_name):
    """A shipped config's learners on its first function at :data:`DIM` and :data:`BUDGET`."""
    sizes = [f"runs={RUNS}", f"bbob.dims=[{DIM}]", f"bbob.evaluations=[{BUDGET}]"]
    config = load_config(config_name, sizes)
    env = problem_env(config, config.problems[:1])  # its first function
    for name in config.learners:
        res = selection(make_learner(config, name, BUDGET), env, config.seed)
        assert np.all(np.isfinite(res.best_gap)), (config_name, name)
