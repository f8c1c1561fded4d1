"""The EXP3 log-domain update (Algorithm 2, line 5) against a float64 reference at every
scale, including the underflow regime a tuned learning rate reaches in float32."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import estimators


def reference_update(log_probs: np.ndarray, arm: int, step: float) -> np.ndarray:
    """``w(arm) *= exp(step)``, renormalised, in float64 with a max shift."""
    bumped = np.asarray(log_probs, np.float64).copy()
    bumped[arm] += step
    top = bumped.max()
    return bumped - (top + np.log(np.exp(bumped - top).sum()))


ROWS = {
    # one arm holds almost all the mass; the others' exp underflows to 0 in float32
    "dominant": np.array([0.0, -200.0, -200.0, -150.0, -300.0], np.float32),
    "uniform": np.full(5, -np.log(5.0), np.float32),
    "two_heavy": np.array([-0.7, -0.7, -90.0, -95.0, -120.0], np.float32),
}


@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("arm", [0, 3])
@pytest.mark.parametrize("step", [-1e4, -50.0, -1.0, 0.0, 1.0, 50.0, 1e4])
def test_exp3_log_update_matches_float64_at_every_scale(row, arm, step):
    log_probs = ROWS[row]
    got = np.asarray(estimators.exp3_log_update(jnp.asarray(log_probs), arm, step, 1.0))
    want = reference_update(log_probs, arm, step)
    assert np.all(np.isfinite(got) | (want < -1e30))
    assert np.max(got) <= 1e-6, got  # log-probabilities never above 0
    # normalised: probabilities sum to 1
    np.testing.assert_allclose(np.exp(got.astype(np.float64)).sum(), 1.0, rtol=1e-5)
    # entries that matter (probability above float32's tiny) agree with the reference
    keep = want > -80.0
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-5, atol=2e-5 * (1 + abs(step)))


def test_exp3_log_update_many_experts_at_once():
    rows = np.stack([ROWS["dominant"], ROWS["uniform"]])
    eta = np.array([1.0, 0.5], np.float32)
    got = np.asarray(estimators.exp3_log_update(jnp.asarray(rows), 0, -1e3, jnp.asarray(eta)))
    for k in range(2):
        want = reference_update(rows[k], 0, -1e3 * eta[k])
        np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-3)
