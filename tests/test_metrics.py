"""Metrics against brute force on small cases."""

from __future__ import annotations

import dataclasses
import gc
import itertools
import tracemalloc
from types import SimpleNamespace

import jax
import numpy as np
import pytest
from scipy import stats

from stabl_jax import ExpertAdvice, StABL, Uniform, metrics, simulate
from stabl_jax.experiment.kinds import KINDS, bandit, load_config, write_results
from stabl_jax.experiment.results import ResultsFolder
from stabl_jax.simulate import regenerate_losses
from tests.conftest import HORIZON, NUM_ARMS


def brute_force_sa(played: np.ndarray, arms: np.ndarray, length: int) -> float:
    """SA(L) by a loop over windows, summed in float64."""
    played, arms = np.asarray(played, np.float64), np.asarray(arms, np.float64)
    best = -np.inf
    for j in range(len(played) - length + 1):
        mine = sum(played[j : j + length])
        theirs = min(sum(arms[j : j + length, i]) for i in range(arms.shape[1]))
        best = max(best, mine - theirs)
    return best


def test_adaptive_regret_matches_brute_force():
    rng = np.random.default_rng(0)
    played, arms = rng.uniform(size=25), rng.uniform(size=(25, 4))
    lengths = [1, 2, 5, 13, 25]
    got = metrics.adaptive_regret_from_losses(played, arms, lengths)
    np.testing.assert_allclose(got, [brute_force_sa(played, arms, L) for L in lengths], rtol=1e-12)
    # In blocks, and of several traces at once.
    rng = np.random.default_rng(3)
    arms = rng.uniform(size=(50, 3))
    prefix = metrics.prefix_sums(arms)
    direct = np.array([arms[j : j + 9].sum(0).min() for j in range(42)])
    np.testing.assert_allclose(metrics.best_window_sums(prefix, 9, block=5), direct)
    traces = rng.uniform(size=(2, 50))
    both = metrics.adaptive_regret_from_losses(traces, arms, [3, 9])
    for trace, sa in zip(traces, both, strict=True):
        np.testing.assert_allclose(sa, [brute_force_sa(trace, arms, L) for L in (3, 9)], rtol=1e-12)


def test_adaptive_regret_of_a_simulation_uses_the_losses_the_learner_saw():
    env, learner = ExpertAdvice(NUM_ARMS, HORIZON), StABL(NUM_ARMS, HORIZON)
    result = simulate(learner, env, jax.random.key(0), num_runs=3)
    lengths = [4, 16, HORIZON]
    sa = metrics.adaptive_regret(result, env, lengths, memory_bytes=2 * HORIZON * NUM_ARMS * 12)
    losses = np.asarray(regenerate_losses(env, result.carry, 0, HORIZON))  # (R, T, n)
    for r, arms in enumerate(losses):
        np.testing.assert_allclose(arms[np.arange(HORIZON), result.played[r]], result.loss[r])
        for (j, L), (name, trace) in itertools.product(
            enumerate(lengths), (("sampled", result.loss), ("expected", result.expected_loss))
        ):
            np.testing.assert_allclose(sa[name][r, j], brute_force_sa(trace[r], arms, L), rtol=1e-6)
    # Only ``loss`` recorded: SA(L) of the sampled loss; neither loss trace: an error.
    loss_only = dataclasses.replace(result, arrays={"loss": result.loss})
    out, want = (metrics.adaptive_regret(r, env, [16, 64]) for r in (loss_only, result))
    assert set(out) == {"sampled"}
    np.testing.assert_array_equal(out["sampled"], want["sampled"])
    played = dataclasses.replace(result, arrays={"played": result.played})
    with pytest.raises(ValueError, match="needs the loss or expected_loss trace"):
        metrics.adaptive_regret(played, env, [16])


def test_moving_average_matches_naive():
    x = np.random.default_rng(1).uniform(size=(2, 30))
    got = metrics.moving_average(x, 7)
    for t in range(30):
        np.testing.assert_allclose(got[:, t], x[:, max(0, t - 6) : t + 1].mean(-1))


def test_small_inputs_and_bad_windows():
    """SA(L) and ``moving_average`` refuse a window below 1, too long or not an int (never
    rounded or read as a number); one run has a mean and no interval (NaN), no run is refused;
    cumulative regret needs an environment's best arm."""
    refusals = [(30, ValueError, "30"), (0, ValueError, "must be >= 1, got 0")]
    refusals += [(bad, TypeError, f"must be an int, got {bad!r}") for bad in (2.5, "4", True)]
    for bad, error, message in refusals:
        with pytest.raises(error, match=f"window length {message}"):
            metrics.adaptive_regret_from_losses(np.zeros(10), np.zeros((10, 2)), [bad])
    with pytest.raises(ValueError, match="window must be >= 1, got 0"):
        metrics.moving_average(np.ones((2, 5)), 0)
    mean, half = metrics.mean_ci(np.array([[0.25, 0.5]]))
    np.testing.assert_array_equal(mean, [0.25, 0.5])
    assert np.isnan(half).all() and half.shape == (2,)
    with pytest.raises(TypeError, match=r"window must be an int, got 3.5 \(float\)"):
        metrics.moving_average(np.ones((2, 5)), 3.5)
    with pytest.raises(ValueError, match=r"needs at least one value along axis 0, got shape"):
        metrics.mean_ci(np.zeros((0, 3)))
    for bad in (16, "16"):  # one window length, not in a list
        with pytest.raises(TypeError, match="window_lengths must be a sequence of ints"):
            metrics.check_windows(bad, 32)

    class NoBestArm:
        pass

    with pytest.raises(TypeError, match="NoBestArm has no best_arm: no cumulative regret"):
        metrics.CumulativeRegret(NoBestArm(), {"x": np.zeros((1, 4))})


def test_per_segment_mean_and_ci():
    values = np.array([[1.0, 1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0, 1.0]])
    segments = np.array([[0, 0, 1, 1, 1], [0, 0, 1, 1, 1]])
    np.testing.assert_allclose(
        metrics.per_segment_mean(values, segments, 3),
        [[1.0, 0.0, np.nan], [0.5, 1.0, np.nan]],
    )


def test_mean_ci_is_scipys_student_t_interval():
    """The 95% interval of the summaries, tables and plots is scipy's Student-t interval of the
    mean, on 2 to 500 values, over either axis; the quantile's table values; none for one."""
    rng = np.random.default_rng(0)
    for runs in (2, 3, 4, 5, 11, 500):
        values = rng.normal(size=(runs, 3))
        for axis, data in ((0, values), (1, values.T)):
            mean, half = metrics.mean_ci(data, axis=axis)
            lower, upper = stats.t.interval(
                0.95, runs - 1, loc=data.mean(axis=axis), scale=stats.sem(data, axis=axis)
            )
            np.testing.assert_array_equal(mean, data.mean(axis=axis))  # the means unchanged
            np.testing.assert_allclose(half, (upper - lower) / 2, rtol=1e-12)
    mean, half = metrics.mean_ci(np.array([1.0, 2.0, 3.0, 4.0]))
    assert (mean, round(float(half), 4)) == (2.5, 2.0543)  # t_{0.975, 3} = 3.1824
    tables = {1: 12.7062, 3: 3.1824, 4: 2.7764, 19: 2.0930, 499: 1.9647}
    assert {dof: round(metrics.t_quantile(dof), 4) for dof in tables} == tables
    assert np.isnan(metrics.t_quantile(0))  # one run: no interval
    with pytest.raises(ValueError, match="dof >= 0"):
        metrics.t_quantile(-1)


def _reward(loss):
    return 1.0 - loss


def _peak(*calls) -> int:
    """The largest allocation peak of ``calls``, each traced alone (the garbage of the earlier
    tests collected beforehand, not inside the measurement)."""
    peaks = []
    for call in calls:
        gc.collect()
        tracemalloc.start()
        try:
            call()
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    return max(peaks)


@pytest.mark.parametrize("rows_per_block", [1, 7, 37])
def test_the_means_in_blocks_of_runs_are_those_of_the_whole_array(rows_per_block):
    """``row_means`` and ``per_segment_mean`` give the whole-array numbers bit for bit in any
    blocks of runs; ``moving_mean_ci`` those of ``mean_ci(moving_average(...))`` bit for bit
    in one block and to float64 rounding in several (the sums over runs are per block)."""
    rng = np.random.default_rng(3)
    values = rng.uniform(size=(37, 50)).astype(np.float32)
    segments = rng.integers(0, 4, size=(37, 50)).astype(np.int8)
    whole = 1.0 - values.astype(np.float64)
    block = rows_per_block * 50 * 8
    np.testing.assert_array_equal(
        metrics.row_means(values, _reward, memory_bytes=block), whole.mean(axis=1)
    )
    np.testing.assert_array_equal(
        metrics.per_segment_mean(values, segments, 5, _reward, memory_bytes=block),
        metrics.per_segment_mean(whole, segments.astype(np.int64), 5, memory_bytes=2**30),
    )
    mean, half = metrics.moving_mean_ci(values, 6, _reward, memory_bytes=block)
    want_mean, want_half = metrics.mean_ci(metrics.moving_average(whole, 6), axis=0)
    if rows_per_block == 37:
        np.testing.assert_array_equal(mean, want_mean)
        np.testing.assert_array_equal(half, want_half)
    # 37 runs: each sum is within a few units of float64 rounding of the exact one
    np.testing.assert_allclose(mean, want_mean, rtol=1e-14, atol=0)
    np.testing.assert_allclose(half, want_half, rtol=1e-12, atol=0)
    one_mean, one_half = metrics.moving_mean_ci(values[:1], 6)
    np.testing.assert_array_equal(one_mean, metrics.moving_average(values[:1], 6)[0])
    assert np.isnan(one_half).all()
    with pytest.raises(ValueError, match=r"needs at least one run, got shape \(0, 50\)"):
        metrics.moving_mean_ci(values[:0], 6)


def test_the_means_over_the_rounds_hold_blocks_not_float64_copies_of_the_traces():
    """On ``(128, 16384)`` float32 traces (8 MiB), with blocks of 1 MiB the peak of
    ``row_means``, ``per_segment_mean`` and ``moving_mean_ci`` stays under 10 MiB, less than
    one float64 copy of the traces; in one block (the whole-array computation) above 48 MiB."""
    rng = np.random.default_rng(4)
    values = rng.uniform(size=(128, 16384)).astype(np.float32)
    segments = rng.integers(0, 12, size=(128, 16384)).astype(np.int8)

    def peak(mb):
        return _peak(
            lambda: metrics.row_means(values, _reward, memory_bytes=mb),
            lambda: metrics.per_segment_mean(values, segments, 12, _reward, memory_bytes=mb),
            lambda: metrics.moving_mean_ci(values, 64, _reward, memory_bytes=mb),
        )

    assert peak(2**20) < 10 * 2**20
    assert peak(2**30) > 48 * 2**20


def test_the_results_of_a_run_are_written_without_float64_copies_of_its_traces(
    tmp_path, monkeypatch
):
    """``stabl-jax run``'s summary, traces, plots and table of a bandit run (64 runs x 16384
    rounds: each trace 4 MiB) with blocks of 256 KiB peak under 6 MiB of allocations; in one
    block (the whole-array computation) above 24 MiB. A first, unmeasured write at each block
    size imports matplotlib and compiles that size's programs."""
    sets = ['learners=["uniform"]', "horizon=16384", "sa_windows=[64]", 'save_traces="none"']
    config = load_config("figure1", sets, runs=64, seed=0)
    kind = KINDS[config.kind]
    result = bandit.run_experiment(config)

    def peak(block_bytes):
        monkeypatch.setattr(metrics, "BLOCK_BYTES", block_bytes)
        write_results(result, ResultsFolder.prepare(tmp_path / f"warm{block_bytes}"))
        folder = ResultsFolder.prepare(tmp_path / f"out{block_bytes}")
        return _peak(lambda: (write_results(result, folder), kind.table(result)))

    assert peak(256 * 2**10) < 6 * 2**20
    assert peak(2**30) > 24 * 2**20


def test_cumulative_regret_against_brute_force_and_its_expectation():
    """Brute force per run from the regenerated losses; and Uniform's expected value: each
    round ``<p, l> - l(i*)`` has mean ``bonus (n - 1) / n``, so ``R(T) = 0.5 (n - 1) T / n``
    within 4 standard errors (fixed key)."""
    n, horizon, runs = 4, 128, 400
    env = ExpertAdvice(num_arms=n, horizon=horizon, change_points=(50, 90))
    res = simulate(Uniform(num_arms=n, horizon=horizon), env, jax.random.key(3), runs)
    curves = metrics.paired_cumulative_regret(env, res.carry, {"u": res.expected_loss})
    mean, half, final = curves["u"]
    assert mean.shape == half.shape == (horizon,) and final.shape == (runs,)
    losses = np.asarray(regenerate_losses(env, res.carry, 0, horizon), np.float64)
    best = np.asarray(res.carry.env_params.best_arms)[:, metrics.segment_ids(res.carry, horizon)]
    best = best[np.arange(runs), np.arange(runs)]  # (R, T): the best arm of every round
    brute = np.cumsum(
        res.expected_loss - np.take_along_axis(losses, best[..., None], -1)[..., 0], axis=1
    )
    np.testing.assert_allclose(final, brute[:, -1], rtol=1e-10)
    np.testing.assert_allclose(mean, brute.mean(axis=0), rtol=1e-10, atol=1e-9)
    expected_half = stats.t.ppf(0.975, runs - 1) * brute.std(axis=0, ddof=1) / np.sqrt(runs)
    np.testing.assert_allclose(half, expected_half, rtol=1e-6)
    standard_error = final.std(ddof=1) / np.sqrt(runs)
    assert abs(final.mean() - 0.5 * (n - 1) / n * horizon) < 4 * standard_error
    assert metrics.paired_cumulative_regret(object(), res.carry, {"u": res.loss}) is None
    # Riding on the SA(L) pass's regenerated losses (small blocks) gives the same numbers.
    shared = metrics.CumulativeRegret(env, {"u": res.expected_loss})
    metrics.paired_adaptive_regret(
        env, res.carry, {"u": res.loss}, [16], memory_bytes=1, on_block=shared.add
    )
    for got, want in zip(shared.result()["u"], curves["u"], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9)


def test_segment_ids_are_held_in_the_smallest_signed_type():
    """One byte a round up to 128 segments; signed, so that ``ids - 1`` is -1 in the first
    segment, not 255."""

    def carry(points):
        return SimpleNamespace(env_params=SimpleNamespace(change_points=np.asarray(points)))

    ids = metrics.segment_ids(carry([[2, 5], [1, 3]]), 6)
    assert ids.dtype == np.int8
    np.testing.assert_array_equal(ids, [[0, 0, 1, 1, 1, 2], [0, 1, 1, 2, 2, 2]])
    assert (ids - 1).min() == -1
    assert metrics.segment_ids(carry(np.arange(1, 128)), 200).dtype == np.int8
    assert metrics.segment_ids(carry(np.arange(1, 129)), 200).dtype == np.int16


def test_detection_delays_and_false_alarms_on_hand_made_restarts():
    """Run 0 restarts at rounds 1 (a false alarm), 12 and 13 (breakpoint 10: delay 3), none in
    [20, 30) (missed); run 1 restarts at round 20 (delay 1 at breakpoint 20) and 29, with its
    own breakpoints 5, 20 (delay at 5: none before 20, so NaN)."""
    r = np.zeros((2, 30), bool)
    r[0, [1, 12, 13]] = True
    r[1, [20, 29]] = True
    delays = metrics.detection_delays(r, [[10, 20], [5, 20]])
    np.testing.assert_array_equal(delays, [[3.0, np.nan], [np.nan, 1.0]])
    np.testing.assert_array_equal(metrics.false_alarms(r, [[10, 20], [5, 20]]), [1, 0])
    # Shared breakpoints (J,), and none at all: every restart is a false alarm.
    np.testing.assert_array_equal(metrics.detection_delays(r, [10]), [[3.0], [11.0]])
    np.testing.assert_array_equal(metrics.false_alarms(r, np.zeros(0, int)), [3, 2])
    # A breakpoint past the rounds is never detected.
    assert np.isnan(metrics.detection_delays(r, [30, 40])).all()
    with pytest.raises(ValueError, match="increasing rounds"):
        metrics.detection_delays(r, [20, 10])


def test_the_bandit_summary_reports_detection_per_breakpoint():
    """``detected`` is the fraction of runs restarting in a breakpoint's segment, ``delay`` the
    mean (Student-t half-width) over those runs only; one run gives no half-width."""
    delays = np.array([[3.0, np.nan], [5.0, np.nan], [np.nan, 2.0]])
    outcome = SimpleNamespace(
        detection_delay=delays, false_alarms=np.array([1, 0, 0]), num_restarts=np.array([3, 2, 1])
    )
    got = bandit.detection_summary(outcome)
    np.testing.assert_allclose(got["detected"]["mean"], [2 / 3, 1 / 3])
    np.testing.assert_allclose(got["delay"]["mean"], [4.0, 2.0])
    half = metrics.t_quantile(1) * np.std([3.0, 5.0], ddof=1) / np.sqrt(2)
    np.testing.assert_allclose(got["delay"]["ci95"], [half, np.nan])
    assert got["false_alarms"]["mean"] == pytest.approx(1 / 3)
    assert got["restarts"]["mean"] == pytest.approx(2.0)
