"""Environments: values in range, means right (Monte Carlo within Z standard errors), segments."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import ENVS, ExpertAdvice, PiecewiseBernoulli, make_env
from stabl_jax.envs import equal_change_points, geometric_segment_lengths
from stabl_jax.envs.base import COMPARE_ALL_MAX, segment_of
from tests.conftest import env_options

Z = 5.0  # see tests/test_statistics.py for the choice


@pytest.mark.parametrize("name", sorted(ENVS))
def test_losses_in_unit_interval_and_means_match(name):
    options = env_options(name, num_arms=4, num_segments=3)
    if "change_points" in ENVS[name].arguments:  # one without change points has none to set
        options["change_points"] = (30, 60)
    env = make_env(name, num_arms=4, horizon=100, **options)
    params = env.default_params
    m = 20_000
    draw = jax.jit(jax.vmap(env.loss, in_axes=(None, None, 0)))
    for t in (0, 45, 99):
        keys = jax.random.split(jax.random.key(t), m)
        draws = np.asarray(draw(params, t, keys), np.float64)
        assert draws.shape == (m, 4)
        assert np.all((draws >= 0) & (draws <= 1)) and np.all(np.isfinite(draws))
        mean = np.asarray(env.mean_loss(params, t))
        se = draws.std(0, ddof=1) / np.sqrt(m)
        np.testing.assert_array_less(np.abs(draws.mean(0) - mean), Z * se)
        assert int(env.best_arm(params, t)) == int(np.argmin(mean))


def test_expert_advice_is_the_papers_setting():
    env = ExpertAdvice(num_arms=30, horizon=4096)
    assert env.change_points == (1024, 2048, 3072)
    params = env.default_params
    assert [int(env.best_arm(params, t)) for t in (0, 1023, 1024, 2048, 4095)] == [0, 0, 1, 2, 3]
    mean = np.asarray(env.mean_loss(params, 1500))
    np.testing.assert_allclose(mean[1], 0.25)
    np.testing.assert_allclose(np.delete(mean, 1), 0.75)


def test_random_change_points_are_sorted_distinct_and_in_range():
    shuffled = dict(random_change_points=True, best_arm_order="random")
    env = PiecewiseBernoulli(num_arms=3, horizon=50, num_segments=8, **shuffled)
    drawn = _sample_seeds(env, 20)
    for points, best in zip(drawn.change_points, drawn.best_arms, strict=True):
        assert np.all(np.diff(points) > 0) and points.min() >= 1 and points.max() <= 49
        assert np.all(best[1:] != best[:-1]) and best.min() >= 0 and best.max() < 3


def test_equal_change_points():
    assert equal_change_points(10, 3) == (3, 7)
    assert equal_change_points(4096, 1) == ()


@pytest.mark.parametrize(
    ("horizon", "min_length", "expected"),
    [
        (256, 32, (32, 32, 64, 128)),
        (16384, 32, (32, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)),
        (100, 10, (10, 10, 20, 60)),  # remainder 20 goes to the longest segment
        (2, 1, (1, 1)),
    ],
)
def test_geometric_segment_lengths_fill_the_horizon(horizon, min_length, expected):
    lengths = geometric_segment_lengths(horizon, min_length)
    assert lengths == expected and sum(lengths) == horizon


def test_geometric_segments_are_shuffled_per_run_and_keep_every_scale():
    shuffled = dict(random_change_points=True, best_arm_order="random")
    env = ExpertAdvice(num_arms=5, horizon=1024, geometric_min_length=16, **shuffled)
    expected = sorted(geometric_segment_lengths(1024, 16))
    assert env.num_segments == len(expected) == 7
    # deterministic default: increasing lengths
    assert env.change_points == tuple(int(c) for c in np.cumsum(expected)[:-1])
    orders = set()
    drawn = _sample_seeds(env, 20)
    for points, best in zip(drawn.change_points, drawn.best_arms, strict=True):
        lengths = np.diff(np.r_[0, points, 1024])
        assert sorted(lengths.tolist()) == expected
        orders.add(tuple(lengths.tolist()))
        assert np.all(best[1:] != best[:-1])
    # 7!/2 = 2520 distinct orders: 20 draws all alike would mean no shuffling
    assert len(orders) > 10


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"geometric_min_length": 0}, "geometric_min_length must be >= 1"),
        ({"geometric_min_length": 51}, "geometric_min_length=51 is too long"),
        ({"geometric_min_length": 10, "change_points": (5,)}, "give only one"),
    ],
)
def test_bad_geometric_segments_name_the_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ExpertAdvice(num_arms=3, horizon=100, **kwargs)


def test_segment_of_is_searchsorted():
    """The loop-free segment count is ``jnp.searchsorted(..., side="right")``, the same int."""
    points = jnp.asarray([1, 5, 6, 40, 63], jnp.int32)
    many = jnp.arange(1, 2 * COMPARE_ALL_MAX + 3, 2, dtype=jnp.int32)  # the binary search
    assert many.shape[0] > COMPARE_ALL_MAX
    for pts, ts in ((points, jnp.arange(70)), (many, jnp.arange(0, 2 * COMPARE_ALL_MAX + 5, 7))):
        ts = ts.astype(jnp.int32)
        ours = jax.jit(jax.vmap(lambda t, pts=pts: segment_of(pts, t)))(ts)
        theirs = jnp.searchsorted(pts, ts, side="right").astype(jnp.int32)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
        assert ours.dtype == jnp.int32
    assert int(segment_of(jnp.zeros((0,), jnp.int32), jnp.int32(5))) == 0  # one segment

    def loops(points):
        return jax.jit(segment_of).lower(points, jnp.int32(0)).as_text().count("stablehlo.while")

    assert loops(points) == 0 and loops(many) == 1


def test_bernoulli_losses_are_jax_random_bernoulli_bit_for_bit():
    """Drawn through ``prng`` (no loop), the losses are ``jax.random.bernoulli(key, mu_t)``."""
    env = PiecewiseBernoulli(num_arms=30, horizon=200, random_change_points=True)
    params = env.sample_params(jax.random.key(2))
    keys = jax.random.split(jax.random.key(3), 200)
    ts = jnp.arange(200, dtype=jnp.int32)
    ours = jax.jit(jax.vmap(lambda t, k: env.loss(params, t, k)))(ts, keys)

    def bernoulli(t, k):
        return jax.random.bernoulli(k, env.mean_loss(params, t)).astype(jnp.float32)

    theirs = jax.jit(jax.vmap(bernoulli))(ts, keys)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def _sample_seeds(env, seeds: int):
    """``env.sample_params(key(seed))`` for ``seed < seeds``, stacked, in one program."""
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds))
    return jax.device_get(jax.jit(jax.vmap(env.sample_params))(keys))
