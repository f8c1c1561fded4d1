"""Deterministic limits: exploration 1 plays uniformly; one StABL expert is Algorithm 2 with
the general estimator of the Lemma; the meta weight of a lone expert never moves."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import EXP3, StABL, Uniform

N, T = 5, 128


def _losses(t: int) -> jax.Array:
    return jax.random.uniform(jax.random.key(500 + t), (N,))


def test_exp3_with_full_exploration_plays_uniformly():
    learner = EXP3(num_arms=N, horizon=T, gamma=1.0)
    state = learner.init(jax.random.key(0))
    step = jax.jit(learner.step)
    for t in range(50):
        state, info = step(state, _losses(t), jax.random.key(t))
        np.testing.assert_allclose(np.asarray(info.play_probs), 1.0 / N, rtol=1e-6)
    np.testing.assert_allclose(np.exp(np.asarray(state.log_weights)), 1.0 / N, rtol=1e-6)


def test_uniform_learner_plays_uniformly():
    learner = Uniform(num_arms=N, horizon=T)
    _, info = learner.step(learner.init(jax.random.key(0)), _losses(0), jax.random.key(1))
    np.testing.assert_allclose(np.asarray(info.play_probs), 1.0 / N)


def test_single_expert_stabl_is_exp3_with_a_general_estimator():
    """StABL with one history length covering the horizon: the meta-learner has one expert
    (weight never changes: r~ = 0), it plays that expert's distribution, and the expert is
    EXP3 fed the estimator of the observed arm. Checked against EXP3.tell handed StABL's
    observation, with lr_scale making EXP3's eta equal to the expert's sqrt(ln n/(T n 2B))."""
    stabl = StABL(num_arms=N, horizon=T, history_lengths=(T,))
    exp3 = EXP3(num_arms=N, horizon=T)
    exp3_params = exp3.default_params.replace(lr_scale=jnp.float32(1.0 / math.sqrt(2.0)))
    s_state = stabl.init(jax.random.key(0))
    e_state = exp3.init(jax.random.key(0), exp3_params)
    w0 = float(s_state.meta_log_weights[0])
    for t in range(T - 1):
        query = stabl.ask(s_state, jax.random.key(t))
        np.testing.assert_allclose(
            np.asarray(query.play_probs), np.exp(np.asarray(e_state.log_weights)), rtol=1e-5
        )
        observed = _losses(t)[query.arms]
        s_state = stabl.tell(s_state, query, observed)
        e_query = query.replace(arms=query.arms[1:], query_probs=query.query_probs[1:])
        e_state = exp3.tell(e_state, e_query, observed[1:])
        np.testing.assert_allclose(
            np.asarray(s_state.expert_log_probs[0]), np.asarray(e_state.log_weights), atol=1e-5
        )
        assert float(s_state.meta_log_weights[0]) == w0
