"""The benchmark's NumPy learners, fed JAX's own draws (float64), play JAX's arms and losses."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stabl_jax import EXP3, ExpertAdvice, StABL, metrics, sampling, simulate
from stabl_jax.experiment import numpy_baselines

N, T, R = 6, 64, 3


@pytest.mark.parametrize("name", ["exp3", "stabl"])
def test_loop_and_vectorised_match_jax(name):
    spec = numpy_baselines.ExpertAdviceSpec(num_arms=N, horizon=T)
    env = ExpertAdvice(num_arms=N, horizon=T)
    assert tuple(spec.change_points) == env.change_points
    loop = getattr(numpy_baselines, f"{name}_loop")
    vectorised = getattr(numpy_baselines, f"{name}_vectorised")
    with jax.enable_x64(True):
        learner = (EXP3 if name == "exp3" else StABL)(num_arms=N, horizon=T, dtype="float64")
        if name == "stabl":
            assert tuple(numpy_baselines.stabl_lengths(T)) == learner.history_lengths
        # simulated in float64: every arm's losses (R, T, n) and the learner's uniforms
        # (R, T, q), recomputed from the documented keys
        key = jax.random.key(7)
        result = simulate(learner, env, key, R)
        losses = np.asarray(metrics.regenerate_losses(env, result.carry, 0, T), np.float64)
        us = np.empty((R, T, learner.num_queries))
        for i, t in np.ndindex(R, T):
            key_t = jax.random.fold_in(jax.random.fold_in(jax.random.fold_in(key, i), 2), t)
            us[i, t] = np.asarray(sampling.uniforms(key_t, learner.num_queries, "float64"))
    for i in range(R):
        source = numpy_baselines.ArraySource(losses[i], us[i])
        out = loop(spec, source, T, dtype=np.float64)
        np.testing.assert_array_equal(out["arms"], result.arms[i])
        np.testing.assert_allclose(out["expected_loss"], result.expected_loss[i], rtol=1e-6)
        np.testing.assert_allclose(out["prob_best"], result.prob_best[i], rtol=1e-5)
    source = numpy_baselines.ArraySource(losses.transpose(1, 0, 2), us.transpose(1, 0, 2))
    out = vectorised(spec, source, T, R, dtype=np.float64)
    np.testing.assert_array_equal(out["arms"], result.arms)
    np.testing.assert_allclose(out["expected_loss"], result.expected_loss, rtol=1e-6)


def test_random_source_losses_follow_the_environment():
    """U[0, 0.5) rewards plus 0.5 on the best arm: losses in (0, 1], best arm's below 0.5."""
    spec = numpy_baselines.ExpertAdviceSpec(num_arms=N, horizon=T)
    source = numpy_baselines.RandomSource(spec, np.random.default_rng(0), num_runs=4)
    losses = source.losses(0, best=2)
    assert losses.shape == (4, N) and losses.dtype == np.float32
    assert np.all(losses[:, 2] <= 0.5) and np.all(np.delete(losses, 2, axis=1) > 0.5)
