"""Invariants of the uniform learner and StABL's variants (one query, anytime, adaptive), and
the EXP3 log-domain update (Algorithm 2, line 5) against float64 at every scale (their
step-by-step NumPy references, one-expert limits included, are rows of ``test_reference.py``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import StABL, Uniform, estimators, make
from stabl_jax.learners import StABLAdaptive, StABLAnytime, StABLOneQuery
from tests.learners.test_reference import FAMILIES, _trajectory, drifting_losses, run_row

N, T = 5, 64
T_LIMITS = 128  # the limits' horizon


def _losses(t: int, seed: int = 700) -> jax.Array:
    return jax.random.uniform(jax.random.key(seed + t), (N,))


def test_stabl_one_query_estimate_is_unbounded_and_mutes():
    """With ``x'_t = x_t ~ mix`` the meta estimate ``l (1 - v_k(x)/mix(x))`` reaches ``-l /
    p(t)_k`` and mutes a low-weight expert betting on an avoided arm; StABL's ``P(t) >= v_k /
    (2B)`` bounds it by ``-2B l`` and keeps it (here ``eta r~ ~ -2.4``)."""
    lengths = (16, 64)
    one = StABLOneQuery(num_arms=N, horizon=T, history_lengths=lengths)
    two = StABL(num_arms=N, horizon=T, history_lengths=lengths)
    v = np.array([[0.01, 0.2475, 0.2475, 0.2475, 0.2475], [0.96, 0.01, 0.01, 0.01, 0.01]])
    p = jnp.asarray([0.999, 0.001], jnp.float32)
    state = one.init(jax.random.key(0)).replace(
        expert_log_probs=jnp.log(jnp.asarray(v, jnp.float32)), meta_log_weights=jnp.log(p)
    )
    _, mix, _ = one.distributions(state)
    arm = jnp.asarray(0, jnp.int32)
    observed = jnp.asarray([0.5], jnp.float32)
    query = one.ask(state, jax.random.key(0)).replace(arms=arm[None], query_probs=mix[arm][None])
    after = one.tell(state, query, observed)
    assert int(after.num_muted) == 1 and float(after.meta_log_weights[1]) == -np.inf

    _, mix2, obs = two.distributions(state)
    pair = dict(arms=jnp.stack([arm, arm]), query_probs=jnp.stack([mix2[arm], obs[arm]]))
    query2 = two.ask(state, jax.random.key(0)).replace(**pair)
    after2 = two.tell(state, query2, jnp.concatenate([observed, observed]))
    assert int(after2.num_muted) == 0 and np.isfinite(float(after2.meta_log_weights[1]))


def test_anytime_inactive_experts_are_copies_of_the_last_active_one():
    """The activation rule relies on this: an expert that has not restarted yet is stepped
    exactly like the last active expert (same data since round 0, same rates)."""
    learner = StABLAnytime(num_arms=N, horizon=T, history_lengths=(4, 8, 16, 32))
    state = learner.init(jax.random.key(0))
    step = jax.jit(learner.step)
    seen = set()
    for t in range(T):
        active = np.asarray(learner.active(state.t))
        last = int(np.flatnonzero(active)[-1])
        for k in range(last + 1, learner.num_experts):
            np.testing.assert_array_equal(state.expert_log_probs[k], state.expert_log_probs[last])
            assert float(state.meta_log_pseudo[k]) == float(state.meta_log_pseudo[last])
        seen.add(int(active.sum()))
        state, _ = step(state, _losses(t), jax.random.key(t))
    assert seen == {1, 2, 3, 4}


AN, AT = 6, 150  # stabl_adaptive's rows in test_reference.py


def _close(actual, desired, what: str) -> None:
    np.testing.assert_allclose(np.asarray(actual), desired, rtol=1e-9, atol=1e-300, err_msg=what)


def test_rates_are_data_dependent_and_non_increasing():
    """V and R grow by the observed second moments, so both rates fall within a block and jump
    back at the restart; the meta cap 1/(2 E_t) binds at the start."""
    case, _ = run_row(FAMILIES["stabl_adaptive"], {"history_lengths": (50, 150)}, {})
    expert, meta = case.got["eta'"], case.got["eta"]
    _close(expert[0], np.full(2, math.sqrt(math.log(AN))), "eta'(0)")
    _close(meta[0], np.full(2, 1.0 / 4.0), "eta(0) = 1/(2 E_0), B_0 = 1")
    block = slice(0, 50)
    assert np.all(np.diff(expert[block], axis=0) <= 0.0)
    assert np.all(np.diff(meta[block], axis=0) <= 0.0)
    assert expert[49, 0] < 0.5 * expert[0, 0], "the losses must have moved V"
    _close(expert[50, 0], math.sqrt(math.log(AN)), "restart of expert 0")
    assert np.all(np.isfinite(case.got["meta_log_pseudo"][-1]))


def test_stays_finite_on_adversarial_tiny_probabilities():
    """float32, losses that drive the observed arm's probability towards 0: every rate and
    weight stays finite and no muting happens at scale 1."""
    learner = StABLAdaptive(num_arms=4, horizon=256, history_lengths=(16, 256))
    state = learner.init(jax.random.key(0))
    loss = jnp.asarray([0.0, 1.0, 1.0, 1.0], jnp.float32)

    def body(state, key):
        state, _ = learner.step(state, loss, key)
        return state, None

    state, _ = jax.lax.scan(body, state, jax.random.split(jax.random.key(1), 256))
    assert all(np.isfinite(np.asarray(leaf, np.float64)).all() for leaf in jax.tree.leaves(state))
    assert int(state.num_muted) == 0


@pytest.mark.parametrize("history_lengths", [(32, 64, 128), (2, 5, 11, 30)], ids=str)
def test_meta_rates_stay_above_the_bound_the_underflow_check_uses(history_lengths):
    """``smallest_base_meta_step_size()`` (``min(1/(2E), 1/(E sqrt m))``, ``E = 2B``) bounds
    every active expert's meta rate on 0/1 losses (anytime StABL's bound would not)."""
    learner = StABLAdaptive(num_arms=AN, horizon=AT, history_lengths=history_lengths)
    losses = jnp.asarray(np.random.default_rng(0).uniform(size=(AT, AN)) < 0.5, jnp.float32)

    def body(state, xs):
        loss, key = xs
        rate = jnp.where(learner.active(state.t), learner.rates(state)[1], jnp.inf)
        state, _ = learner.step(state, loss, key)
        return state, rate.min()

    keys = jax.random.split(jax.random.key(1), AT)
    run = jax.jit(lambda s: jax.lax.scan(body, s, (losses, keys))[1])
    realised = np.asarray(run(learner.init(jax.random.key(0))))
    bound = learner.smallest_base_meta_step_size()
    e, m = 2 * len(history_lengths), min(max(history_lengths), AT)
    assert bound == min(0.5 / e, 1 / (e * math.sqrt(m)))
    assert realised.min() >= bound, (realised.min(), bound)


def test_uniform_learner_plays_uniformly():
    learner = Uniform(num_arms=N, horizon=T_LIMITS)
    _, info = learner.step(learner.init(jax.random.key(0)), _losses(0, 500), jax.random.key(1))
    np.testing.assert_allclose(np.asarray(info.play_probs), 1.0 / N)


def test_anytime_rates_ignore_the_horizon_given_the_lengths():
    """Anytime StABL at two horizons (StABL's rates would differ), on the same losses and keys
    (``test_reference.py``'s scan): the same arms and experts every round, bit for bit."""
    lengths, runs = (4, 8, 16, 32), []
    for horizon in (T_LIMITS, 4096):
        learner = make("stabl_anytime", num_arms=N, horizon=horizon, history_lengths=lengths)
        losses = jnp.asarray(drifting_losses(T_LIMITS, N, 9), learner.float_dtype)
        keys, state = jax.random.split(jax.random.key(1), T_LIMITS), learner.init(jax.random.key(0))
        runs.append(_trajectory(learner, _experts, 0, state, losses, keys)[0])
    np.testing.assert_array_equal(runs[0]["arms"], runs[1]["arms"])
    np.testing.assert_array_equal(runs[0]["experts"], runs[1]["experts"])
    assert len(set(np.asarray(runs[0]["arms"])[N:, 0].tolist())) > 1


def _experts(learner, state, key, step):
    return {"experts": state.expert_log_probs}


def reference_update(log_probs: np.ndarray, arm: int, step: float) -> np.ndarray:
    """``w(arm) *= exp(step)``, renormalised, in float64 with a max shift."""
    bumped = np.asarray(log_probs, np.float64).copy()
    bumped[arm] += step
    top = bumped.max()
    return bumped - (top + np.log(np.exp(bumped - top).sum()))


LOG_ROWS = {
    # one arm holds almost all the mass; the others' exp underflows to 0 in float32
    "dominant": np.array([0.0, -200.0, -200.0, -150.0, -300.0], np.float32),
    "uniform": np.full(5, -np.log(5.0), np.float32),
    "two_heavy": np.array([-0.7, -0.7, -90.0, -95.0, -120.0], np.float32),
}


@pytest.mark.parametrize("row", sorted(LOG_ROWS))
@pytest.mark.parametrize("arm", [0, 3])
@pytest.mark.parametrize("step", [-1e4, -50.0, -1.0, 0.0, 1.0, 50.0, 1e4])
def test_exp3_log_update_matches_float64_at_every_scale(row, arm, step):
    log_probs = LOG_ROWS[row]
    got = np.asarray(estimators.exp3_log_update(jnp.asarray(log_probs), arm, step, 1.0))
    want = reference_update(log_probs, arm, step)
    assert np.all(np.isfinite(got) | (want < -1e30))
    assert np.max(got) <= 1e-6, got  # log-probabilities never above 0
    np.testing.assert_allclose(np.exp(got.astype(np.float64)).sum(), 1.0, rtol=1e-5)
    # entries that matter (probability above float32's tiny) agree with the reference
    keep = want > -80.0
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-5, atol=2e-5 * (1 + abs(step)))


def test_exp3_log_update_many_experts_at_once():
    rows = np.stack([LOG_ROWS["dominant"], LOG_ROWS["uniform"]])
    eta = np.array([1.0, 0.5], np.float32)
    got = np.asarray(estimators.exp3_log_update(jnp.asarray(rows), 0, -1e3, jnp.asarray(eta)))
    for k in range(2):
        want = reference_update(rows[k], 0, -1e3 * eta[k])
        np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-3)
