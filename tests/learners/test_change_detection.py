"""Change detectors: GLR-klUCB's exact test, M-UCB's forced-exploration rate, the first
detection of a Bernoulli change, and the restart trace (their step-by-step references are rows
of ``test_reference.py``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import CUSUMUCB, MUCB, GLRklUCB, Rexp3
from tests.learners import reference_change_detection as ref

T, K = 300, 4


def test_glr_klucb_exact_test_keeps_every_split_or_refuses():
    """``subsample=1`` keeps ``T`` splits by default and refuses fewer, naming the remedy."""
    assert GLRklUCB(num_arms=K, horizon=T, subsample=1).max_splits == T
    assert GLRklUCB(num_arms=K, horizon=5000).max_splits == 500
    with pytest.raises(
        ValueError, match=f"max_splits=1024 is below the horizon T={2 * 1024}.*set max_splits=2048"
    ):
        GLRklUCB(num_arms=K, horizon=2048, subsample=1, max_splits=1024)


@pytest.mark.parametrize("count", ["segments", "breakpoints"])
def test_m_ucb_default_gamma_counts_segments_or_breakpoints(count):
    """Remark 1's ``gamma`` with ``M = Upsilon_T + 1`` (Cao et al.) or ``max(1, Upsilon_T)``
    (Besson et al.'s code), against the reference's formula. On Besson et al.'s Problem 1
    (K = 3, T = 5000, Upsilon_T = 4) with their experiments' window ``w = K ceil(T / 100)``
    the forced period ``floor(K / gamma)`` is 7 or 8 rounds."""
    learner = MUCB(num_arms=3, horizon=5000, num_changes=4, window=150, gamma_count=count)
    gamma = ref.m_ucb_gamma(3, 5000, 4, 150, count)
    assert learner.gamma == pytest.approx(gamma, rel=1e-12)
    assert int(3 // learner.gamma) == (7 if count == "segments" else 8)


DETECTORS = [
    (CUSUMUCB, {}),
    (MUCB, {"window": 100}),  # Remark 1's window for delta = 0.1 exceeds the horizon
    (GLRklUCB, {}),
]


@pytest.mark.parametrize(("cls", "options"), DETECTORS, ids=lambda x: getattr(x, "__name__", x))
def test_a_bernoulli_change_is_detected_within_50_rounds(cls, options):
    """Arm 0's loss mean moves from 0.1 to 0.9 at round 1000 of 2000 (arm 1 stays at 0.5):
    with its defaults for one change, each detector restarts for the first time within 50
    rounds after it, and never before it (fixed draws)."""
    horizon, change = 2000, 1000
    rng = np.random.default_rng(0)
    means = np.where(np.arange(horizon)[:, None] < change, [0.1, 0.5], [0.9, 0.5])
    losses = jnp.asarray((rng.uniform(size=(horizon, 2)) < means).astype(np.float32))
    keys = jax.random.split(jax.random.key(0), horizon)
    learner = cls(num_arms=2, horizon=horizon, num_changes=1, **options)

    def body(state, xs):
        new_state, _ = learner.step(state, *xs)
        return new_state, jnp.any(new_state.counts < state.counts)

    run = jax.jit(lambda state: jax.lax.scan(body, state, (losses, keys))[1])
    restarts = np.flatnonzero(np.asarray(run(learner.init(jax.random.key(1)))))
    assert restarts.size and change <= restarts[0] < change + 50, restarts[:5]


def test_simulate_records_the_restart_trace_of_restarting_learners_only():
    """``traces=("restart",)`` gives ``(R, T)`` bool equal to ``learner.restarted`` round by
    round (here Rexp3's scheduled restarts, every ``Delta_T`` rounds); a learner without
    restarts refuses the name."""
    from stabl_jax import EXP3, simulate
    from stabl_jax.envs.piecewise_table import PiecewiseBernoulliTable

    env = PiecewiseBernoulliTable(
        num_arms=2, horizon=64, change_points=(32,), means=((0.1, 0.5), (0.9, 0.5))
    )
    learner = Rexp3(num_arms=2, horizon=64, batch=10)
    result = simulate(learner, env, jax.random.key(0), 2, traces=("restart",))
    assert result.restart.dtype == bool and result.restart.shape == (2, 64)
    np.testing.assert_array_equal(np.flatnonzero(result.restart[0]), [9, 19, 29, 39, 49, 59])
    with pytest.raises(ValueError, match="restart"):
        simulate(EXP3(num_arms=2, horizon=64), env, jax.random.key(0), 2, traces=("restart",))
