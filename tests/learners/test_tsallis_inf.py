"""Tsallis-INF's Newton normalisation against the NumPy one of ``reference_tsallis.py``
(its step-by-step reference is a row of ``test_reference.py``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax.learners.tsallis_inf import tsallis_weights
from tests.learners import reference_tsallis as ref


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
