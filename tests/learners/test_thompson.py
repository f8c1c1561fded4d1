"""Thompson sampling's play probabilities against adaptive quadrature, its draws, its trials
and its options (its step-by-step reference is a row of ``test_reference.py``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import DiscountedThompson, SWThompson, Thompson
from stabl_jax.learners.thompson import argmax_probabilities
from tests.conftest import HORIZON, NUM_ARMS
from tests.learners import reference_thompson as ref

PROB_TOL = 1e-4  # the accuracy argmax_probabilities promises


# (alpha, beta) posterior states: the prior, densities unbounded at 0 or 1 (alpha or beta < 1),
# moderately and highly concentrated posteriors, near-ties, and an arm far behind.
STATES = [
    ([1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]),
    ([0.5, 2.0, 1.0, 3.0, 0.3], [0.5, 1.0, 4.0, 2.0, 0.7]),
    ([0.3, 0.3, 1.3, 0.3, 0.3], [0.3, 3.3, 0.3, 0.3, 0.3]),
    ([31.0, 30.0, 5.0, 2.0, 60.0], [33.0, 30.0, 9.0, 1.0, 2.0]),
    ([500.0, 480.0, 100.0, 3.0, 510.0], [500.0, 520.0, 110.0, 1.0, 490.0]),
    ([1.0, 1.0, 1.0, 1.0, 2.0], [500.0, 400.0, 300.0, 1000.0, 2.0]),
    ([5000.5, 5001.0, 4990.0, 100.0, 1.0], [5000.0, 5001.5, 5010.0, 100.0, 1.0]),
]


@pytest.mark.parametrize("state", STATES, ids=lambda s: f"a={s[0]}")
def test_argmax_probabilities_match_adaptive_quadrature(state):
    """In float64 and float32, against one quadrature of the state."""
    alpha, beta = (np.asarray(v) for v in state)
    expected = ref.argmax_probabilities_reference(alpha, beta)
    assert abs(expected.sum() - 1.0) < PROB_TOL / 10  # the reference is itself accurate
    for dtype in ("float64", "float32"):
        with jax.enable_x64(True):
            args = (jnp.asarray(alpha, dtype), jnp.asarray(beta, dtype))
            got = jax.jit(argmax_probabilities)(*args)
            assert got.dtype == jnp.dtype(dtype)
        np.testing.assert_allclose(np.asarray(got, np.float64), expected, atol=PROB_TOL, rtol=0)


def test_played_arms_follow_the_computed_probabilities():
    """Over 20,000 round keys at one posterior state, the played arm's empirical frequencies
    match ``play_probs`` within 4.5 standard errors (``sqrt(p (1 - p) / n)``) per arm."""
    learner = Thompson(num_arms=NUM_ARMS, horizon=HORIZON)
    state = learner.init(jax.random.key(0))
    state = state.replace(
        successes=jnp.array([3.0, 5.0, 0.0, 8.0, 2.0]),
        failures=jnp.array([2.0, 6.0, 0.0, 9.0, 3.0]),
    )
    n = 20_000
    keys = jax.random.split(jax.random.key(7), n)

    def ask(keys):  # the arms of every key, and the play distribution, in one program
        arms = jax.vmap(lambda k: learner.ask(state, k).arms[0])(keys)
        return arms, learner.ask(state, keys[0]).play_probs

    arms, probs = jax.jit(ask)(keys)
    probs = np.asarray(probs, np.float64)
    freq = np.bincount(np.asarray(arms), minlength=NUM_ARMS) / n
    se = np.sqrt(probs * (1.0 - probs) / n)
    assert probs.min() > 0.05  # every arm is tested where its frequency is informative
    np.testing.assert_array_less(np.abs(freq - probs), 4.5 * se)


def test_a_bernoulli_trial_succeeds_with_the_reward():
    """A loss of 0 is always a success, a loss of 1 always a failure."""
    learner = Thompson(num_arms=NUM_ARMS, horizon=HORIZON)
    step = jax.jit(learner.step)
    state = learner.init(jax.random.key(0))
    for t in range(10):
        state, _ = step(state, jnp.zeros(NUM_ARMS).at[0].set(1.0), jax.random.key(t))
    np.testing.assert_array_equal(state.successes[1:] + state.failures[1:], state.successes[1:])
    assert float(state.successes[0]) == 0.0


@pytest.mark.parametrize(
    ("cls", "options", "message"),
    [
        (DiscountedThompson, {"discount": 0.0}, r"discount must be in \(0, 1\]"),
        (DiscountedThompson, {"discount": 1.5}, r"discount must be in \(0, 1\]"),
        (SWThompson, {"window": 0}, "window must be >= 1, got 0"),
        (SWThompson, {"window": HORIZON + 1}, rf"window must be in \[1, horizon={HORIZON}\]"),
    ],
)
def test_bad_options_are_named(cls, options, message):
    with pytest.raises(ValueError, match=message):
        cls(num_arms=NUM_ARMS, horizon=HORIZON, **options)
