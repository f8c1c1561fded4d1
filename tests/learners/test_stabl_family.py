"""Deterministic limits, invariants and input errors of Hedge, SAOL, one-query StABL and anytime
StABL (their step-by-step NumPy references are in ``test_reference_stabl_family.py``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import EXP3, StABL
from stabl_jax.learners import SAOL, Hedge, SAOLHedge, StABLAnytime, StABLOneQuery

N, T = 5, 64


def _losses(t: int) -> jax.Array:
    return jax.random.uniform(jax.random.key(700 + t), (N,))


def test_one_expert_saol_hedge_is_hedge():
    """One history length covering the horizon: r = <mix - v, l> = 0, the meta weight never
    moves, and the expert is Hedge with Hedge's rate sqrt(8 ln n / T) (same draws)."""
    saol = SAOLHedge(num_arms=N, horizon=T, history_lengths=(T,))
    hedge = Hedge(num_arms=N, horizon=T)
    s_state, h_state = saol.init(jax.random.key(0)), hedge.init(jax.random.key(0))
    s_step, h_step = jax.jit(saol.step), jax.jit(hedge.step)
    w0 = float(s_state.meta_log_weights[0])
    for t in range(T - 1):
        s_state, s_info = s_step(s_state, _losses(t), jax.random.key(t))
        h_state, h_info = h_step(h_state, _losses(t), jax.random.key(t))
        np.testing.assert_array_equal(np.asarray(s_info.arms), np.asarray(h_info.arms))
        np.testing.assert_allclose(
            np.asarray(s_state.expert_log_probs[0]), np.asarray(h_state.log_weights), atol=1e-5
        )
        assert float(s_state.meta_log_weights[0]) == w0


def test_one_expert_saol_is_exp3_on_its_own_arm():
    """Bandit SAOL with one history length T: its expert is EXP3 (gamma = 0, the Lemma's rate
    with C = 1, i.e. EXP3's default) fed the arm the expert drew itself (``arms[1]``)."""
    saol = SAOL(num_arms=N, horizon=T, history_lengths=(T,))
    exp3 = EXP3(num_arms=N, horizon=T)
    s_state, e_state = saol.init(jax.random.key(0)), exp3.init(jax.random.key(0))
    ask, s_tell, e_tell = jax.jit(saol.ask), jax.jit(saol.tell), jax.jit(exp3.tell)
    for t in range(T - 1):
        query = ask(s_state, jax.random.key(t))
        observed = _losses(t)[query.arms]
        s_state = s_tell(s_state, query, observed)
        e_query = query.replace(arms=query.arms[1:], query_probs=query.query_probs[1:])
        e_state = e_tell(e_state, e_query, observed[1:])
        np.testing.assert_allclose(
            np.asarray(s_state.expert_log_probs[0]), np.asarray(e_state.log_weights), atol=1e-5
        )


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


def test_anytime_does_not_depend_on_the_horizon():
    """Given the history lengths, the horizon plays no part: equal trajectories for T = 64 and
    T = 4096 (where StABL's rates would differ through B, L_k and C)."""
    lengths = (4, 8, 16, 32)
    short = StABLAnytime(num_arms=N, horizon=T, history_lengths=lengths)
    long = StABLAnytime(num_arms=N, horizon=4096, history_lengths=lengths)
    s_state, l_state = short.init(jax.random.key(0)), long.init(jax.random.key(0))
    s_step, l_step = jax.jit(short.step), jax.jit(long.step)
    for t in range(40):
        s_state, s_info = s_step(s_state, _losses(t), jax.random.key(t))
        l_state, l_info = l_step(l_state, _losses(t), jax.random.key(t))
        np.testing.assert_array_equal(np.asarray(s_info.arms), np.asarray(l_info.arms))
    np.testing.assert_array_equal(
        np.asarray(s_state.expert_log_probs), np.asarray(l_state.expert_log_probs)
    )


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
        (Hedge, {"num_arms": 1}, ValueError, "num_arms must be >= 2, got 1"),
        (Hedge, {"horizon": 0}, ValueError, "horizon must be >= 1, got 0"),
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


@pytest.mark.parametrize("cls", [Hedge, SAOLHedge, SAOL, StABLOneQuery, StABLAnytime])
def test_tell_rejects_the_wrong_number_of_observations(cls):
    learner = cls(num_arms=N, horizon=T)
    state = learner.init(jax.random.key(0))
    query = learner.ask(state, jax.random.key(1))
    with pytest.raises(ValueError, match=rf"observed must have shape \({learner.num_queries},\)"):
        learner.tell(state, query, jnp.zeros((learner.num_queries + 1,)))
