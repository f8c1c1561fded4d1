"""n = 10^4 arms over T = 2^14 rounds in float32, and float32 against float64.

Many arms: StABL (B = 9 experts) and EXP3, one run each (``tests/long_runs.py``): finite, and
every round's distributions non-negative and summing to 1 within
:func:`stabl_jax.checks.distribution_tolerance`. float32 against float64: 32 paired StABL runs
on the same environment draws; the float64 learner draws its own uniforms (the pairs part ways
at round 0 or 1), so the mean paired difference of the per-run mean loss and probability of the
best arm must lie within ``Z = 5`` standard errors of 0."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stabl_jax import ExpertAdvice, SimOptions, StABL, make, simulate
from stabl_jax.checks import distribution_tolerance
from tests.long_runs import assert_state_finite, long_run

pytestmark = [pytest.mark.slow, pytest.mark.optimized]

Z = 5.0


@pytest.mark.parametrize("name", ["stabl", "exp3"])
def test_ten_thousand_arms_in_float32(name):
    n, horizon = 10_000, 2**14
    learner = make(name, num_arms=n, horizon=horizon)
    env = ExpertAdvice(num_arms=n, horizon=horizon)
    res = long_run(learner, env, jax.random.key(1), num_runs=1, horizon=horizon, chunk=2**12)
    tol = distribution_tolerance(n, np.float32)
    assert not res.nonfinite and res.min_prob >= 0.0
    assert res.play_dev <= tol and res.obs_dev <= tol, (res.play_dev, res.obs_dev, tol)
    assert_state_finite(res.state)
    assert 0.25 <= res.expected_loss <= 0.75  # between the best and the worst arm's mean


def test_float32_matches_float64():
    n, horizon, runs = 30, 2**14, 32
    env = ExpertAdvice(num_arms=n, horizon=horizon)
    key = jax.random.key(2)
    options = SimOptions(chunk_size=4096)
    single = simulate(StABL(num_arms=n, horizon=horizon), env, key, runs, options=options)
    with jax.enable_x64(True):
        learner = StABL(num_arms=n, horizon=horizon, dtype="float64")
        double = simulate(learner, env, key, runs, options=options)
        assert double.carry.state.expert_log_probs.dtype == np.float64
    for result in (single, double):
        for name, trace in result.traces().items():
            assert np.isfinite(trace).all(), name
        assert_state_finite(result.carry.state)
    for field in ("loss", "prob_best"):
        a = getattr(single, field).astype(np.float64).mean(axis=1)
        b = getattr(double, field).astype(np.float64).mean(axis=1)
        diff = a - b
        se = diff.std(ddof=1) / np.sqrt(runs)
        assert abs(diff.mean()) <= Z * se, (field, diff.mean(), se, a.mean(), b.mean())
