"""Tsallis-INF against the NumPy loop of ``reference_tsallis.py`` (written from the
paper), step by step in float64 with the same per-round uniforms: weights and estimates to
1e-9 relative, arms exactly; and the Newton normalisation to 1e-12."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import TsallisINF, sampling
from stabl_jax.learners.tsallis_inf import reduced_variance_estimate, tsallis_weights
from tests.conftest import HORIZON, NUM_ARMS
from tests.learners import reference_tsallis as ref
from tests.learners.test_thompson import _losses

RTOL = 1e-9


@pytest.mark.parametrize("lr_scale", [1.0, 2.0, 0.3])
def test_matches_reference(lr_scale):
    losses = _losses(2)
    with jax.enable_x64(True):
        learner = TsallisINF(num_arms=NUM_ARMS, horizon=HORIZON, dtype="float64")
        params = learner.default_params.replace(lr_scale=jnp.float64(lr_scale))
        step, rate = jax.jit(learner.step), jax.jit(learner.learning_rate)
        estimate = jax.jit(reduced_variance_estimate)
        state = learner.init(jax.random.key(5), params)
        keys = jax.random.split(jax.random.key(6), HORIZON)
        u = np.asarray(jax.vmap(lambda k: sampling.uniforms(k, 1, jnp.float64))(keys))
        expected = ref.tsallis_inf_reference(losses, u, lr_scale=lr_scale)
        for t in range(HORIZON):
            eta = rate(state)
            np.testing.assert_allclose(eta, lr_scale * 2.0 / np.sqrt(t + 1), rtol=1e-15)
            state, info = step(state, losses[t], keys[t])
            arm = int(info.arms[0])
            assert arm == expected["played"][t], t
            np.testing.assert_allclose(info.play_probs, expected["weights"][t], rtol=RTOL)
            got = estimate(info.play_probs, info.arms[0], info.observed[0], eta)
            np.testing.assert_allclose(got, expected["estimates"][t], rtol=RTOL)
            cum = expected["cum_loss"][t + 1]
            np.testing.assert_allclose(state.loss_estimates, cum - cum.min(), rtol=RTOL, atol=1e-9)
    assert len(set(expected["played"].tolist())) > 1
    assert expected["estimates"].min() < 0.0 < expected["estimates"].max()  # B_t at work


@pytest.mark.parametrize("num_arms", [2, 5, 64, 1000])
def test_newton_normalises_to_rounding(num_arms):
    """From equal estimates (the farthest start) to spreads of 1e4, at small and large eta."""
    rng = np.random.default_rng(num_arms)
    with jax.enable_x64(True):
        weights = jax.jit(tsallis_weights)
        for spread in (0.0, 1.0, 100.0, 1e4):
            for eta in (2.0, 2.0 / np.sqrt(1e6)):
                losses = rng.uniform(0.0, spread, num_arms) if spread else np.zeros(num_arms)
                w = np.asarray(weights(jnp.asarray(losses), jnp.float64(eta)))
                assert abs(w.sum() - 1.0) < 1e-12, (spread, eta, w.sum())
                np.testing.assert_allclose(w, ref.tsallis_weights_reference(losses, eta), rtol=1e-9)
