"""T = 2^20 rounds with n = 30 arms in float32: StABL (B = 14 experts, L_k = 2^6 .. 2^20) and
EXP3 on four 2^18-round segments of expert advice (``tests/long_runs.py``). Every round the play
distribution and StABL's P(t) are finite, non-negative and sum to 1 within ``4 n eps``
(:func:`stabl_jax.checks.distribution_tolerance`); every state leaf ends finite."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stabl_jax import ExpertAdvice, make
from stabl_jax.checks import distribution_tolerance
from tests.long_runs import assert_state_finite, long_run

pytestmark = [pytest.mark.slow, pytest.mark.optimized]

N, T = 30, 2**20
# A learner that never learns plays uniformly: expected loss (n - 1)/n * 0.75 + 0.25/n.
UNIFORM_LOSS = ((N - 1) * 0.75 + 0.25) / N


@pytest.mark.parametrize("name", ["stabl", "exp3"])
def test_two_to_the_twenty_rounds_in_float32(name):
    learner = make(name, num_arms=N, horizon=T)
    env = ExpertAdvice(num_arms=N, horizon=T)
    assert learner.dtype == "float32"
    res = long_run(learner, env, jax.random.key(0), num_runs=1, horizon=T, chunk=2**16)
    tol = distribution_tolerance(N, np.float32)
    assert not res.nonfinite and res.min_prob >= 0.0
    assert res.play_dev <= tol, (res.play_dev, tol)
    assert res.obs_dev <= tol, (res.obs_dev, tol)
    assert_state_finite(res.state)
    assert int(np.asarray(res.state.t)[0]) == T  # no int32 overflow of the round counter
    # Deterministic bound: learning only the first segment gives (0.25 + 3 * 0.733) / 4 = 0.61;
    # broken numerics (NaN weights, a frozen distribution) would leave the uniform 0.733.
    assert res.expected_loss < 0.65 < UNIFORM_LOSS
