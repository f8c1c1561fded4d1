"""Deterministic limits: the uniform learner plays uniformly; one StABL or SAOL expert is
Algorithm 2 with the general estimator of the Lemma, and the meta weight of a lone expert never
moves; SAOL over one Hedge expert is Hedge; anytime StABL ignores the horizon."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import EXP3, Uniform, make
from tests.conftest import HORIZON
from tests.learners.test_reference import _trajectory, drifting_losses

N, T = 5, 128


def _losses(t: int) -> jax.Array:
    return jax.random.uniform(jax.random.key(500 + t), (N,))


def test_uniform_learner_plays_uniformly():
    learner = Uniform(num_arms=N, horizon=T)
    _, info = learner.step(learner.init(jax.random.key(0)), _losses(0), jax.random.key(1))
    np.testing.assert_allclose(np.asarray(info.play_probs), 1.0 / N)


@pytest.mark.parametrize(("name", "lr_scale"), [("stabl", 1.0 / math.sqrt(2.0)), ("saol", 1.0)])
def test_one_expert_is_exp3_fed_the_observed_arm(name, lr_scale):
    """StABL or bandit SAOL with one history length covering the horizon: the meta-learner has
    one expert, whose weight never moves (r~ = 0); it plays that expert's distribution, and the
    expert is EXP3 (gamma = 0) fed the arm of the second query with the general estimator of
    the Lemma. Checked against EXP3.tell handed that observation, ``lr_scale`` making EXP3's
    eta the expert's: StABL's sqrt(ln n/(T n 2B)), SAOL's sqrt(ln n/(T n))."""
    learner = make(name, num_arms=N, horizon=HORIZON, history_lengths=(HORIZON,))
    exp3 = EXP3(num_arms=N, horizon=HORIZON)
    e_params = exp3.default_params.replace(lr_scale=jnp.float32(lr_scale))
    state, e_state = learner.init(jax.random.key(0)), exp3.init(jax.random.key(0), e_params)
    w0 = float(state.meta_log_weights[0])
    ask, tell, e_tell = jax.jit(learner.ask), jax.jit(learner.tell), jax.jit(exp3.tell)
    for t in range(HORIZON - 1):
        query = ask(state, jax.random.key(t))
        e_probs = np.exp(np.asarray(e_state.log_weights))
        np.testing.assert_allclose(np.asarray(query.play_probs), e_probs, rtol=1e-5)
        observed = _losses(t)[query.arms]
        state = tell(state, query, observed)
        e_query = query.replace(arms=query.arms[1:], query_probs=query.query_probs[1:])
        e_state = e_tell(e_state, e_query, observed[1:])
        np.testing.assert_allclose(
            np.asarray(state.expert_log_probs[0]), np.asarray(e_state.log_weights), atol=1e-5
        )
        assert float(state.meta_log_weights[0]) == w0


def _view(learner, state, key, step):
    """What twins compare: ``w``, Hedge's log-weights or the first expert's (SAOL-Hedge, with
    its meta weight and every expert)."""
    if hasattr(state, "log_weights"):
        return {"w": state.log_weights}
    experts = state.expert_log_probs
    meta = getattr(state, "meta_log_weights", getattr(state, "meta_log_pseudo", None))
    return {"w": experts[0], "experts": experts, "meta": meta[0]}


def _run(name: str, options: dict) -> dict:
    """One jitted scan (``test_reference.py``'s) of registry learner ``name`` on fixed draws."""
    learner = make(name, num_arms=N, **{"horizon": T, **options})
    losses = jnp.asarray(drifting_losses(T, N, 9), learner.float_dtype)
    state = learner.init(jax.random.key(0))
    rounds, _ = _trajectory(learner, _view, 0, state, losses, jax.random.split(_KEY, T))
    return {k: np.asarray(v) for k, v in rounds.items()}


_KEY = jax.random.key(1)
TWINS = [  # (learner, twin, compared with (rtol, atol)); the index policies' and EXP3's
    # twins are test_reference.py's (test_a_limit_is_its_twin)
    # SAOL over one Hedge expert of length T: r = <mix - v, l> = 0, Hedge's rate sqrt(8 ln n / T)
    (("saol_hedge", {"history_lengths": (T,)}), ("hedge", {}), {"w": (0, 1e-5)}),
    # anytime StABL: given the lengths, the horizon plays no part (StABL's rates would differ)
    (("stabl_anytime", {"history_lengths": (4, 8, 16, 32)}),
     ("stabl_anytime", {"history_lengths": (4, 8, 16, 32), "horizon": 4096}),
     {"experts": (0, 0)}),
]  # fmt: skip


@pytest.mark.parametrize("twins", TWINS, ids=lambda t: f"{t[0][0]}={t[1][0]}")
def test_a_limit_is_its_twin_bit_for_bit_or_to_rounding(twins):
    """The same arms every round, and the compared records to the row's tolerance (0: bit
    for bit), on the same losses and keys."""
    (name, options), (twin, twin_options), compared = twins
    got, want = _run(name, options), _run(twin, twin_options)
    np.testing.assert_array_equal(got["arms"], want["arms"])
    for key, (rtol, atol) in compared.items():
        np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=atol, err_msg=key)
    assert len(set(got["arms"][N:, 0].tolist())) > 1
    if name == "saol_hedge":  # the lone expert's meta weight never moves
        assert np.all(got["meta"] == got["meta"][0])
