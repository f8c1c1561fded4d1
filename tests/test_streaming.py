"""Streaming summaries equal the traces path; ``first_run`` and ``traces`` of ``simulate``."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stabl_jax import EXP3, ExpertAdvice, SimOptions, StABL, metrics, simulate, summaries
from stabl_jax.registry import BCO_LEARNERS, CONVEX_ENVS
from stabl_jax.streaming import simulate_summaries
from tests.test_summaries import fetched_shapes

N, T = 6, 128
WINDOWS = (1, 16, 100, T)
LEARNER = StABL(num_arms=N, horizon=T, history_lengths=(4, 16))
PARAMS = LEARNER.default_params.replace(meta_lr_scale=np.float32(40.0))  # forces muting
ONE = SimOptions(runs_per_block=1)  # the same per-run program on every path: bitwise equal


@pytest.fixture(scope="module")
def env():
    return ExpertAdvice(num_arms=N, horizon=T, change_points=(40, 90))


@pytest.fixture(scope="module")
def both(env):
    key = jax.random.key(5)
    full = simulate(LEARNER, env, key, 8, params=PARAMS, options=ONE)
    return full, simulate_summaries(
        LEARNER, env, key, 8, WINDOWS, params=PARAMS, runs_per_batch=4, options=ONE
    )


def test_summaries_equal_the_traces_metrics_bitwise(env, both):
    """SA has NumPy's prefix-sum order (sequential, float64): equal to the last bit, as are the
    other reductions of the traces."""
    full, summaries = both
    reference = metrics.adaptive_regret(full, env, WINDOWS)
    np.testing.assert_array_equal(summaries.sa_sampled, reference["sampled"])
    np.testing.assert_array_equal(summaries.sa_expected, reference["expected"])
    segments = metrics.segment_ids(full.carry, T)
    loss = full.loss.astype(np.float64)
    segment_loss = metrics.per_segment_mean(loss, segments, env.num_segments)
    np.testing.assert_array_equal(summaries.segment_loss, segment_loss)
    np.testing.assert_array_equal(summaries.mean_loss, loss.mean(axis=1))
    mean_prob_best = full.prob_best.astype(np.float64).mean(axis=1)
    np.testing.assert_array_equal(summaries.mean_prob_best, mean_prob_best)
    np.testing.assert_array_equal(summaries.num_muted, np.asarray(full.carry.state.num_muted))
    assert summaries.num_muted.sum() > 0  # meta scale 40 mutes: the counter is exercised
    assert summaries.num_runs == 8 and summaries.window_lengths == WINDOWS


def test_first_run_continues_the_same_runs(env, both):
    full, _ = both
    options, traces = SimOptions(runs_per_block=1, first_run=3), ("loss", "played")
    tail = simulate(
        LEARNER, env, jax.random.key(5), 2, params=PARAMS, traces=traces, options=options
    )
    assert tail.arms is None and set(tail.traces()) == {"loss", "played"}
    assert tail.num_runs == 2 and tail.horizon == T
    for name, trace in tail.traces().items():
        np.testing.assert_array_equal(trace, full.traces()[name][3:5], err_msg=name)


def test_bad_windows_params_and_options(env):
    """Each batch sets its ``first_run`` and its progress: options that say otherwise are named,
    not silently overridden."""
    learner = StABL(num_arms=N, horizon=T)
    params = learner.default_params.replace(meta_lr_scale=np.ones(3, np.float32))
    for windows, kwargs, error, message in [
        ((T + 1,), {}, ValueError, "window length"),
        ((2.5,), {}, TypeError, r"window length must be an int, got 2\.5"),  # was run as L = 2
        ((4,), dict(runs_per_batch=0), ValueError, "runs_per_batch"),
        ((4,), dict(params=params), ValueError, "num_runs=2"),
        ((4,), dict(progress="yes"), TypeError, "progress must be True or False, got 'yes'"),
        ((4,), dict(options=SimOptions(first_run=2)), ValueError, "sets each batch's first_run"),
        ((4,), dict(options=SimOptions(progress=True)), ValueError, "sets each batch's first_run"),
    ]:
        with pytest.raises(error, match=message):
            simulate_summaries(learner, env, jax.random.key(0), 2, windows, **kwargs)


def test_progress_is_a_bar_or_a_callback(env) -> None:
    """A callback sees each batch; ``True`` (a bar) and ``None`` give the same runs."""
    learner, key = EXP3(num_arms=N, horizon=T), jax.random.key(1)
    calls: list[tuple[int, int]] = []
    summaries = simulate_summaries(
        learner, env, key, 3, (4,), runs_per_batch=2, progress=lambda *a: calls.append(a)
    )
    assert calls == [(2, 3), (3, 3)]
    barred = simulate_summaries(learner, env, key, 3, (4,), runs_per_batch=2, progress=True)
    np.testing.assert_array_equal(barred.sa_sampled, summaries.sa_sampled)
    quiet = simulate_summaries(learner, env, key, 3, (4,), runs_per_batch=2, progress=None)
    np.testing.assert_array_equal(quiet.sa_sampled, summaries.sa_sampled)  # the old default


def test_runs_per_point_pairs_the_points_of_a_sweep(env):
    """Every group of ``runs_per_point`` runs gets the keys of runs ``0 .. P - 1`` (each equals
    an unpaired simulation of P runs); without it the groups differ."""

    def grid(runs, **options):
        params = LEARNER.default_params.replace(meta_lr_scale=np.full(runs, 2.0, np.float32))
        options = SimOptions(runs_per_block=1, **options)
        return simulate(LEARNER, env, jax.random.key(9), runs, params=params, options=options)

    paired, alone, unpaired = grid(6, runs_per_point=3), grid(3), grid(6)
    for name, trace in paired.traces().items():
        np.testing.assert_array_equal(trace[:3], alone.traces()[name], err_msg=name)
        np.testing.assert_array_equal(trace[3:], alone.traces()[name], err_msg=name)
        np.testing.assert_array_equal(unpaired.traces()[name][:3], trace[:3], err_msg=name)
    assert not np.array_equal(unpaired.played[3:], paired.played[3:])


def test_an_environment_it_cannot_summarise_is_named():
    """A convex or algorithm-selection environment is named, not failed on a missing trace."""
    env = CONVEX_ENVS.make("moving_target", dim=2, horizon=32)
    learner = BCO_LEARNERS.make("fkm", dim=2, horizon=32)
    message = r"oblivious piecewise bandit environments .* got MovingTarget: simulate others with"
    with pytest.raises(TypeError, match=message):
        simulate_summaries(learner, env, jax.random.key(0), 2, (8,))


def test_on_device_summaries_are_the_host_ones_within_float32_rounding(env, both):
    """``on_device=True``: the same runs summarised on the device (float32), within the bounds
    of :mod:`stabl_jax.summaries`; no ``(b, T)`` array is read on the host."""
    _, host = both
    args = (LEARNER, env, jax.random.key(5), 8, WINDOWS)
    kwargs = dict(params=PARAMS, runs_per_batch=4, options=ONE)
    simulate_summaries(*args, **kwargs, on_device=True)  # compiled beforehand
    with fetched_shapes() as shapes:
        device = simulate_summaries(*args, **kwargs, on_device=True)
    assert not [s for s in shapes if len(s) >= 2 and s[1:2] == (T,)], shapes
    atol = dict.fromkeys(["sa_sampled", "sa_expected"], summaries.sa_bound(T))
    names = ("segment_loss", "mean_loss", "mean_expected_loss", "mean_prob_best")
    for name, bound in {**atol, **dict.fromkeys(names, T * summaries.EPS32)}.items():
        np.testing.assert_allclose(getattr(device, name), getattr(host, name), rtol=0, atol=bound)
    np.testing.assert_array_equal(device.num_muted, host.num_muted)
