"""Bernoulli arms with a table of means (``bernoulli_table``): draws, ``loss_at``, bad tables
named, runs in ``simulate``, and the shipped configs' published problems."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import make, make_env, simulate
from stabl_jax.envs import PiecewiseBernoulliTable
from stabl_jax.experiment.kinds import load_config

Z = 5.0  # see tests/test_statistics.py for the choice
MEANS = ((0.1, 0.5, 0.9, 0.0), (0.7, 0.2, 1.0, 0.4), (0.35, 0.65, 0.5, 0.05))


def _env(**kwargs) -> PiecewiseBernoulliTable:
    options = {"num_arms": 4, "horizon": 90, "change_points": (30, 60), "means": MEANS}
    return PiecewiseBernoulliTable(**{**options, **kwargs})


def test_losses_match_the_table_per_segment():
    """20,000 draws within Z se of the row, at the first and last round of every segment."""
    env = _env()
    params = env.default_params
    m = 20_000
    keys = jax.random.split(jax.random.key(0), m)
    draw = jax.jit(jax.vmap(env.loss, in_axes=(None, None, 0)))
    for segment, rounds in enumerate([(0, 29), (30, 59), (60, 89)]):
        mu = np.asarray(MEANS[segment])
        for t in rounds:
            draws = np.asarray(draw(params, t, keys), np.float64)
            assert set(np.unique(draws)) <= {0.0, 1.0}
            se = np.sqrt(mu * (1.0 - mu) / m)
            assert np.all(np.abs(draws.mean(0) - mu) <= Z * se), (t, draws.mean(0), mu)
            np.testing.assert_array_equal(np.asarray(env.mean_loss(params, t)), mu.astype("f4"))
            assert int(env.best_arm(params, t)) == int(np.argmin(mu))


def test_loss_at_is_the_loss_vector_indexed_bitwise():
    """Under jit and vmap, on given and on per-run random change points."""
    arms = jnp.asarray([3, 0, 2, 0, 1], jnp.int32)
    ts = jnp.arange(90, dtype=jnp.int32)
    keys = jax.random.split(jax.random.key(1), 90)
    for env in (_env(), _env(change_points=None, random_change_points=True)):
        params = env.sample_params(jax.random.key(2))
        at = jax.jit(jax.vmap(lambda t, k, e=env, p=params: e.loss_at(p, t, k, arms)))(ts, keys)
        full = jax.jit(jax.vmap(lambda t, k, e=env, p=params: e.loss(p, t, k)))(ts, keys)
        np.testing.assert_array_equal(np.asarray(at), np.asarray(full)[:, arms])


def test_segments_and_best_arms_come_from_the_table():
    equal = _env(change_points=None)  # three rows: three equal segments
    assert equal.change_points == (30, 60) and equal.num_segments == 3
    np.testing.assert_array_equal(np.asarray(equal.default_params.best_arms), [3, 1, 3])
    drawn = _env(change_points=None, random_change_points=True)
    for seed in range(5):
        params = drawn.sample_params(jax.random.key(seed))
        points = np.asarray(params.change_points)
        assert points.shape == (2,) and np.all(np.diff(points) > 0)
        assert points.min() >= 1 and points.max() <= 89
        np.testing.assert_array_equal(np.asarray(params.best_arms), [3, 1, 3])


def test_tables_are_stored_as_hashable_tuples():
    from_lists = _env(means=[list(row) for row in MEANS])
    from_array = _env(means=np.asarray(MEANS))
    assert from_lists == from_array == _env() and hash(from_lists) == hash(_env())
    assert from_lists.means == MEANS and isinstance(from_lists.means[0], tuple)
    made = make_env("bernoulli_table", num_arms=4, horizon=90, means=MEANS)
    assert made == _env(change_points=None)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"means": ()}, ValueError, r"non-empty \(segments x arms\) table"),
        ({"means": "0.5"}, ValueError, "non-empty"),
        ({"means": (0.5, 0.5, 0.5)}, ValueError, r"means\[0\] must be a row"),
        ({"means": ((0.1, 0.2, 0.3, 0.4), (0.1, 0.2))}, ValueError, "rows of one length"),
        ({"means": ((0.1, 0.2, 1.5, 0.4),) * 3}, ValueError, r"means\[0\]\[2\] = 1.5 .*1 - r"),
        ({"means": ((0.1, -0.2, 0.5, 0.4),) * 3}, ValueError, r"means\[0\]\[1\] = -0.2"),
        ({"means": ((0.1, 0.2, float("nan"), 0.4),) * 3}, ValueError, r"means\[0\]\[2\] = nan"),
        ({"means": ((0.1, True, 0.5, 0.4),) * 3}, TypeError, r"means\[0\]\[1\] must be a real"),
        ({"means": ((0.1, "a", 0.5, 0.4),) * 3}, TypeError, "must be a real number"),
        ({"num_arms": 3}, ValueError, "means has 4 columns but num_arms=3"),
        ({"change_points": (45,)}, ValueError, "means has 3 rows but the change points"),
        ({"change_points": (45,)}, ValueError, "give len\\(means\\) - 1 = 2 change points"),
        ({"change_points": (60, 30)}, ValueError, "strictly increasing"),
        ({"change_points": (0, 30)}, ValueError, "out of range"),
        ({"change_points": (30, 90)}, ValueError, "out of range"),
        ({"change_points": None, "num_segments": 2}, ValueError, "means has 3 rows"),
        ({"num_segments": -1}, ValueError, "num_segments must be >= 0"),
        ({"best_arm_order": "random"}, ValueError, "leave best_arm_order at 'sequential'"),
    ],
)
def test_bad_tables_name_the_value_and_the_remedy(kwargs, error, match):
    with pytest.raises(error, match=match):
        _env(**kwargs)


def test_runs_in_simulate_with_exp3_under_jit_and_vmap():
    """EXP3's probability of the best arm rises in each segment; expected loss below uniform's."""
    means = ((0.9, 0.1, 0.9), (0.1, 0.9, 0.9))
    env = PiecewiseBernoulliTable(num_arms=3, horizon=400, change_points=(200,), means=means)
    learner = make("exp3", num_arms=3, horizon=400)
    result = simulate(learner, env, jax.random.key(0), 8)
    loss, prob_best = np.asarray(result.loss), np.asarray(result.prob_best)
    assert loss.shape == prob_best.shape == (8, 400)
    assert set(np.unique(loss)) <= {0.0, 1.0}
    assert np.all((prob_best >= 0) & (prob_best <= 1))
    for start in (0, 200):
        late, early = prob_best[:, start + 150 : start + 200], prob_best[:, start : start + 20]
        assert late.mean() > early.mean()
    assert float(np.asarray(result.expected_loss).mean()) < np.mean(means)
    again = simulate(learner, env, jax.random.key(0), 8)
    np.testing.assert_array_equal(np.asarray(again.loss), loss)


#: Reward means of Besson, Kaufmann, Maillard & Seznec (JMLR 2022), as SMPyBandits ships them
#: (configuration_nonstationary.py, problems 1, 2 and 5): horizon, change points, rewards.
QUARTERS = (1000, 2000, 3000, 4000)
NINTHS = tuple(int(c) for c in np.linspace(0, 20000, num=9, endpoint=False, dtype=int)[1:])
PAPER = {
    "piecewise_problem1": (5000, QUARTERS, [[0.3, 0.5, 0.9], [0.3, 0.2, 0.9], [0.3, 0.2, 0.1],
                                            [0.7, 0.2, 0.1], [0.7, 0.5, 0.1]]),
    "piecewise_problem2": (5000, QUARTERS, [[0.4, 0.5, 0.9], [0.5, 0.4, 0.7], [0.6, 0.3, 0.5],
                                            [0.7, 0.2, 0.3], [0.8, 0.1, 0.1]]),
    "piecewise_problem3": (20000, NINTHS, [
        [0.071, 0.041, 0.032, 0.030, 0.020, 0.011],
        [0.055, 0.053, 0.032, 0.030, 0.008, 0.011],
        [0.040, 0.063, 0.032, 0.030, 0.008, 0.011],
        [0.040, 0.042, 0.043, 0.030, 0.008, 0.011],
        [0.030, 0.032, 0.055, 0.030, 0.008, 0.011],
        [0.030, 0.032, 0.020, 0.030, 0.008, 0.021],
        [0.020, 0.022, 0.020, 0.045, 0.008, 0.021],
        [0.020, 0.022, 0.020, 0.057, 0.008, 0.011],
        [0.020, 0.022, 0.034, 0.057, 0.022, 0.011],
    ]),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PAPER))
def test_shipped_configs_are_the_papers_problems(name):
    """The config's mean losses are 1 - the published reward means; best arm = max reward."""
    horizon, points, rewards = PAPER[name]
    config = load_config(name, ["runs=1"])
    env = config.make_env()
    assert config.horizon == env.horizon == horizon and config.feedback == "reward"
    assert env.change_points == points
    np.testing.assert_allclose(np.asarray(env.means), 1.0 - np.asarray(rewards), atol=1e-12)
    best = np.asarray(env.default_params.best_arms)
    np.testing.assert_array_equal(best, np.argmax(rewards, axis=1))
