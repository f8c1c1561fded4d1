"""Statistical truths with fixed keys: a mean of ``M`` draws is within ``Z = 5`` standard errors
of the truth (two-sided tail 6e-7 per coordinate, below 1e-4 per test), with the exact variance
where it is known in closed form."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import StABL, sampling
from stabl_jax.learners.stabl_vizier import StABLVizier

Z = 5.0
N = 6


def _trained_state(learner, rounds: int = 200, seed: int = 0):
    """A state with unequal expert distributions, reached by playing random losses."""
    step = jax.jit(learner.step)
    state = learner.init(jax.random.key(seed))
    means = jnp.linspace(0.1, 0.9, learner.num_arms)
    for t in range(rounds):
        noise = jax.random.normal(jax.random.key(10_000 + t), means.shape)
        loss = jnp.clip(means + 0.1 * noise, 0, 1)
        state, _ = step(state, loss, jax.random.key(seed * 7919 + t))
    return state


M = 100_000


@pytest.fixture(scope="module")
def stabl_state():
    """StABL, a trained state, and ``M`` draws of its ``ask`` there."""
    learner = StABL(num_arms=N, horizon=256, history_lengths=(8, 32, 256))
    state = _trained_state(learner)
    keys = jax.random.split(jax.random.key(42), M)
    return learner, state, jax.jit(jax.vmap(learner.ask, in_axes=(None, 0)))(state, keys)


def test_sample_index_frequencies():
    probs = jnp.array([0.05, 0.0, 0.3, 0.15, 0.5])
    m = 200_000
    us = jax.random.uniform(jax.random.key(0), (m,))
    draws = np.asarray(jax.vmap(sampling.sample_index, in_axes=(None, 0))(probs, us))
    freq = np.bincount(draws, minlength=5) / m
    se = np.sqrt(np.asarray(probs) * (1 - np.asarray(probs)) / m)
    assert freq[1] == 0.0  # a zero-probability arm is never drawn
    np.testing.assert_array_less(np.abs(freq - np.asarray(probs)), Z * se + 1e-12)


def test_observation_distribution_is_a_distribution_with_the_papers_floor(stabl_state):
    """P(t) sums to one and P(t)_i >= v(t,k)_i / (2B) for every k (Algorithm 1, line 9)."""
    learner, state, _ = stabl_state
    v, mix, obs = learner.distributions(state)
    b = learner.num_experts
    np.testing.assert_allclose(float(obs.sum()), 1.0, rtol=1e-6)
    np.testing.assert_allclose(float(mix.sum()), 1.0, rtol=1e-6)
    assert bool(jnp.all(obs[None, :] >= v / (2 * b) * (1 - 1e-6)))
    assert float(jnp.std(v[0] - v[-1])) > 1e-3, "experts should differ for this test to bite"


def test_one_sparse_estimator_is_unbiased(stabl_state):
    """E[l_hat_t] = l_t for the observed-arm estimator of line 11, through the real ``ask``."""
    learner, state, queries = stabl_state
    loss = jnp.linspace(0.2, 0.9, N)
    arm = np.asarray(queries.arms[:, 1])
    prob = np.asarray(queries.query_probs[:, 1], np.float64)
    estimates = np.zeros((M, N))
    estimates[np.arange(M), arm] = np.asarray(loss)[arm] / prob
    obs = np.asarray(learner.distributions(state)[2], np.float64)
    se = np.sqrt(np.asarray(loss, np.float64) ** 2 * (1.0 / obs - 1.0) / M)  # the exact variance
    np.testing.assert_array_less(np.abs(estimates.mean(0) - np.asarray(loss)), Z * se)


def test_meta_regret_estimate_is_unbiased_and_weight_balanced(stabl_state):
    """E[r~_t(k)] = l^T mix - l^T v(t,k), and sum_k w_t(k) r~_t(k) = 0 for every draw
    (the identity behind the paper's bound on the pseudo-weights)."""
    learner, state, queries = stabl_state
    loss = jnp.linspace(0.9, 0.1, N)
    v, mix, obs = (np.asarray(x, np.float64) for x in learner.distributions(state))
    arm = np.asarray(queries.arms[:, 1])
    c = np.asarray(loss, np.float64)[arm] / obs[arm]
    r = c[:, None] * (mix[arm][:, None] - v[:, arm].T)  # (M, B), loss-feedback r~
    truth = v @ np.asarray(loss) * -1 + mix @ np.asarray(loss)
    se = r.std(0, ddof=1) / np.sqrt(M)
    np.testing.assert_array_less(np.abs(r.mean(0) - truth), Z * se)
    w = np.exp(np.asarray(state.meta_log_weights, np.float64))
    # mix and v are float32 softmaxes: the identity holds to float32 rounding of the terms.
    np.testing.assert_allclose(r @ w / w.sum(), 0.0, atol=1e-6 * np.abs(r).max())


@pytest.mark.parametrize("trial", ["play", "observation"])
def test_vizier_meta_gain_estimate_is_unbiased_on_both_kinds_of_trial(trial):
    """stabl_vizier learns from every trial: whichever distribution ``z`` (play mixture or ``P``)
    the arm ``x`` comes from, ``g(x)/z(x) (v_k(x) - play(x))`` has mean ``g^T v_k - g^T play``."""
    learner = StABLVizier(num_arms=N, horizon=256, history_lengths=(8, 32, 256))
    state = _trained_state(learner)  # 200 trials: t even, a play trial is next
    state = state.replace(t=state.t + (trial == "observation"))
    gain = 1.0 - np.linspace(0.9, 0.1, N)
    v, play, _ = (np.asarray(x, np.float64) for x in learner.distributions(state))
    keys = jax.random.split(jax.random.key(8), M)
    queries = jax.vmap(learner.ask, in_axes=(None, 0))(state, keys)
    arm = np.asarray(queries.arms[:, 0])
    z = np.asarray(learner.trial_distribution(state), np.float64)
    np.testing.assert_array_equal(np.asarray(queries.play_probs[0]), z.astype(np.float32))
    r = (gain[arm] / z[arm])[:, None] * (v[:, arm].T - play[arm][:, None])  # (M, B)
    truth = v @ gain - play @ gain
    se = r.std(0, ddof=1) / np.sqrt(M)
    np.testing.assert_array_less(np.abs(r.mean(0) - truth), Z * se)
    assert np.abs(truth).max() > 10 * se.max(), "experts should differ for this test to bite"


@pytest.mark.parametrize("observation", ["importance", "uniform"])
@pytest.mark.parametrize("meta_lr_scale", [1.0, 30.0])
def test_meta_weights_stay_non_negative_and_finite(observation, meta_lr_scale):
    """Meta probabilities stay valid over a run, even with step sizes large enough to mute."""
    learner = StABL(num_arms=3, horizon=512, observation=observation)
    params = learner.default_params.replace(meta_lr_scale=jnp.float32(meta_lr_scale))
    state = learner.init(jax.random.key(0), params)

    def body(state, t):
        # a best arm that moves every 100 rounds, so experts disagree and r~ can be large
        noise = jax.random.uniform(jax.random.fold_in(jax.random.key(1), t), (3,))
        best = (t // 100) % 3
        loss = jnp.where(jnp.arange(3) == best, 0.2 * noise, 0.8 + 0.2 * noise)
        state, _ = learner.step(state, loss, jax.random.fold_in(jax.random.key(2), t))
        meta = jax.nn.softmax(state.meta_log_weights)
        return state, (meta, jnp.exp(state.meta_log_weights))

    state, (meta, weights) = jax.lax.scan(body, state, jnp.arange(512))
    assert bool(jnp.all(weights >= 0)) and bool(jnp.all(jnp.isfinite(meta)))
    np.testing.assert_allclose(np.asarray(meta.sum(-1)), 1.0, rtol=1e-5)
    if meta_lr_scale > 10:
        assert int(state.num_muted) > 0
