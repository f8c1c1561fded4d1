"""Deterministic limits, invariants and input errors of Hedge, SAOL, one-query, anytime and
adaptive StABL (their step-by-step NumPy references are rows of ``test_reference.py``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import StABL
from stabl_jax.learners import (
    SAOL,
    SAOLHedge,
    StABLAdaptive,
    StABLAnytime,
    StABLOneQuery,
)
from tests.learners.test_reference import FAMILIES, run_row

N, T = 5, 64


def _losses(t: int) -> jax.Array:
    return jax.random.uniform(jax.random.key(700 + t), (N,))


def test_stabl_one_query_is_stabl_observing_the_played_arm():
    """Handing StABL's ``tell`` a two-query query whose observed arm is the played arm (drawn
    from ``mix``) gives exactly the one-query learner's next state."""
    one = StABLOneQuery(num_arms=N, horizon=T, history_lengths=(4, 16, 64))
    two = StABL(num_arms=N, horizon=T, history_lengths=(4, 16, 64))
    state = one.init(jax.random.key(0))
    ask, one_tell, two_tell = jax.jit(one.ask), jax.jit(one.tell), jax.jit(two.tell)
    for t in range(40):
        query = ask(state, jax.random.key(t))
        observed = _losses(t)[query.arms]
        doubled = query.replace(
            arms=jnp.concatenate([query.arms, query.arms]),
            query_probs=jnp.concatenate([query.query_probs, query.query_probs]),
        )
        expected = two_tell(state, doubled, jnp.concatenate([observed, observed]))
        state = one_tell(state, query, observed)
        np.testing.assert_array_equal(
            np.asarray(state.meta_log_weights), np.asarray(expected.meta_log_weights)
        )
        np.testing.assert_array_equal(
            np.asarray(state.expert_log_probs), np.asarray(expected.expert_log_probs)
        )


def test_stabl_one_query_estimate_is_unbounded_and_mutes():
    """With ``x'_t = x_t ~ mix`` the meta estimate ``l (1 - v_k(x)/mix(x))`` reaches
    ``-l / p(t)_k``: an expert with little meta weight that bets on an arm the mixture avoids
    is muted when that arm is played. StABL's ``P(t) >= v_k / (2B)`` bounds the same estimate
    by ``-2B l``, so StABL keeps the expert. (Deterministic state: expert 1 puts 0.96 on arm 0,
    p(t)_1 = 0.001, mix(0) ~ 0.011, eta_1 = 1/sqrt(5 * 64) ~ 0.056: ``eta r~ ~ -2.4``.)"""
    lengths = (16, 64)
    one = StABLOneQuery(num_arms=N, horizon=T, history_lengths=lengths)
    two = StABL(num_arms=N, horizon=T, history_lengths=lengths)
    v = np.array([[0.01, 0.2475, 0.2475, 0.2475, 0.2475], [0.96, 0.01, 0.01, 0.01, 0.01]])
    state = one.init(jax.random.key(0)).replace(
        expert_log_probs=jnp.log(jnp.asarray(v, jnp.float32)),
        meta_log_weights=jnp.log(jnp.asarray([0.999, 0.001], jnp.float32)),
    )
    _, mix, _ = one.distributions(state)
    arm = jnp.asarray(0, jnp.int32)
    observed = jnp.asarray([0.5], jnp.float32)
    query = one.ask(state, jax.random.key(0)).replace(arms=arm[None], query_probs=mix[arm][None])
    after = one.tell(state, query, observed)
    assert int(after.num_muted) == 1 and float(after.meta_log_weights[1]) == -np.inf

    _, mix2, obs = two.distributions(state)
    query2 = two.ask(state, jax.random.key(0)).replace(
        arms=jnp.stack([arm, arm]), query_probs=jnp.stack([mix2[arm], obs[arm]])
    )
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
            np.testing.assert_array_equal(
                np.asarray(state.expert_log_probs[k]), np.asarray(state.expert_log_probs[last])
            )
            assert float(state.meta_log_pseudo[k]) == float(state.meta_log_pseudo[last])
        seen.add(int(active.sum()))
        state, _ = step(state, _losses(t), jax.random.key(t))
    assert seen == {1, 2, 3, 4}


def test_anytime_rates_follow_tau():
    """``eta'_k(t) = sqrt(ln n / ((tau + 1) n 2 B_t))`` and
    ``eta_k(t) = min(1/(2 sqrt n), 1/sqrt(n (tau + 1)))`` with ``tau = t mod L_k``."""
    learner = StABLAnytime(num_arms=N, horizon=T, history_lengths=(4, 16))
    t = jnp.asarray(21, jnp.int32)
    tau = learner.rounds_since_restart(t)
    np.testing.assert_array_equal(np.asarray(tau), [1, 5])
    b_t = learner.active(t).sum()
    assert int(b_t) == 2
    expected_expert = [math.sqrt(math.log(N) / ((k + 1) * N * 2 * 2)) for k in (1, 5)]
    np.testing.assert_allclose(np.asarray(learner._expert_rate(tau, b_t)), expected_expert, 1e-6)
    expected_meta = [min(1 / (2 * math.sqrt(N)), 1 / math.sqrt(N * (k + 1))) for k in (1, 5)]
    np.testing.assert_allclose(np.asarray(learner._meta_rate(tau)), expected_meta, rtol=1e-6)


@pytest.mark.parametrize(
    ("cls", "kwargs", "error", "match"),
    [
        (SAOL, {"history_lengths": (8, 4)}, ValueError, "strictly increasing"),
        (SAOL, {"round_offset": 2}, ValueError, "round_offset must be one of"),
        (SAOL, {"feedback": "regret"}, ValueError, "feedback must be one of"),
        (SAOLHedge, {"horizon": 8}, ValueError, "horizon=8 is too small"),
        (SAOLHedge, {"round_offset": -1}, ValueError, "round_offset must be one of"),
        (StABLOneQuery, {"observation": "importance"}, ValueError, "observation must be one of"),
        (StABLOneQuery, {"feedback": "regret"}, ValueError, "feedback must be one of"),
        (StABLAnytime, {"feedback": "regret"}, ValueError, "feedback must be one of"),
        (StABLAnytime, {"history_lengths": (0, 4)}, ValueError, "positive ints"),
        (StABLAnytime, {"dtype": "float16"}, ValueError, "dtype must be one of"),
    ],
)
def test_bad_config_names_the_argument(cls, kwargs, error, match):
    with pytest.raises(error, match=match):
        cls(**{"num_arms": N, "horizon": T, **kwargs})


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


def test_one_expert_is_self_confident_exp3():
    """One history length covering the horizon: the meta-learner is trivial (p = 1), P(t) =
    (v^2/|v|^2 + v)/2 and the experts are exponential weights on the importance-weighted
    estimates with eta' = sqrt(ln n / (1 + V)): a direct loop over the same draws."""
    case, _ = run_row(FAMILIES["stabl_adaptive"], {"history_lengths": (AT,)}, {})
    rec, arms, losses = case.got, case.got["arms"], case.losses
    cum, V = np.zeros(AN), 0.0
    for t in range(AT):
        eta = math.sqrt(math.log(AN) / (1.0 + V))
        z = np.exp(-eta * (cum - cum.min()))
        v = z / z.sum()
        P = 0.5 * v**2 / np.sum(v**2) + 0.5 * v
        _close(rec["v"][t, 0], v, f"v at t={t}")
        _close(rec["obs"][t], P, f"P at t={t}")
        assert rec["p"][t, 0] == 1.0
        xo = arms[t, 1]
        c = losses[t, xo] / P[xo]
        cum[xo] += c
        V += v[xo] * c * c


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
    for leaf in jax.tree.leaves(state):
        assert np.all(np.isfinite(np.asarray(leaf, dtype=np.float64)))
    assert int(state.num_muted) == 0


@pytest.mark.parametrize("history_lengths", [(32, 64, 128), (2, 5, 11, 30)], ids=str)
def test_meta_rates_stay_above_the_bound_the_underflow_check_uses(history_lengths):
    """``smallest_base_meta_step_size()`` (``min(1/(2E), 1/(E sqrt m))``, ``E = 2B``) is at
    most every active expert's meta rate of every round, on 0/1 losses (the largest regrets):
    the underflow check that uses it refuses only scales that could underflow. Anytime
    StABL's bound, ``min(1/(2 sqrt n), 1/sqrt(n m))``, would not be one (0.0745 against a
    realised 0.0625 for the second lengths)."""
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
