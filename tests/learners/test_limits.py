"""Deterministic limits: exploration 1 plays uniformly; one StABL expert is Algorithm 2 with
the general estimator of the Lemma; the meta weight of a lone expert never moves; the index
policies without forgetting are their stationary selves."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import EXP3, StABL, Uniform, make
from tests.learners.test_reference import _trajectory, drifting_losses

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


def _view(learner, state, key, step):
    """What twins compare: ``w``, the log-weights (EXP3's kin), the first expert's (SAOL,
    StABL; with its meta weight and every expert) or the index (UCB policies, with the counts,
    the reward sums and UCB1's index at ``explore_scale = 1/2`` on the same counts)."""
    if hasattr(learner, "index"):
        ucb1 = make("ucb1", num_arms=learner.num_arms, horizon=T, dtype=learner.dtype)
        half = ucb1.default_params.replace(explore_scale=jnp.asarray(0.5, learner.float_dtype))
        pinsker = ucb1.index(state.replace(params=half))
        out = {"w": learner.index(state), "counts": state.counts, "sums": state.sums}
        return out | {"pinsker": pinsker}
    if hasattr(state, "log_weights"):
        return {"w": state.log_weights}
    experts = state.expert_log_probs
    meta = getattr(state, "meta_log_weights", getattr(state, "meta_log_pseudo", None))
    return {"w": experts[0], "experts": experts, "meta": meta[0]}


def _run(name: str, options: dict, values: dict, n: int, horizon: int, x64: bool) -> dict:
    """One jitted scan (``test_reference.py``'s) of registry learner ``name`` on fixed draws."""
    with jax.enable_x64(x64):
        kwargs = {"num_arms": n, "horizon": horizon, **options}
        learner = make(name, **kwargs, **({"dtype": "float64"} if x64 else {}))
        numbers = {k: jnp.asarray(v, learner.float_dtype) for k, v in values.items()}
        state = learner.init(jax.random.key(0), learner.default_params.replace(**numbers))
        losses = jnp.asarray(drifting_losses(T, n, 9), learner.float_dtype)
        rounds, _ = _trajectory(learner, _view, 0, state, losses, jax.random.split(_KEY, T))
    return {k: np.asarray(v) for k, v in rounds.items()}


_KEY = jax.random.key(1)
TWINS = [  # (learner, twin, compared with (rtol, atol), x64, num_arms)
    # gamma = 0: l~ = l / p, EXP3 at its rate times sqrt(2) (sqrt(2 ln n / (n T)))
    (("exp3_ix", {}, {"ix_scale": 0.0}), ("exp3", {}, {"lr_scale": math.sqrt(2)}),
     {"w": (1e-12, 0.0)}, True, N),
    # alpha = 0 drops step 4's sharing term: Exp3 with gains, exploration gamma, rate gamma / K
    (("exp3s", {"alpha": 0.0}, {}), ("exp3", {"gamma": "exp3s", "feedback": "reward"}, {}),
     {"w": (1e-12, 0.0), "play_probs": (1e-12, 0.0)}, True, N),
    # D-UCB without forgetting and SW-UCB over the whole horizon: paddings 2 sqrt(xi_D log t /
    # N) and sqrt(xi_S log t / N) agree for xi_S = 4 xi_D
    (("d_ucb", {"discount": 1.0, "xi": 0.5}, {}), ("sw_ucb", {"window": T, "xi": 2.0}, {}),
     {"w": (1e-5, 0.0), "counts": (0, 0)}, False, N),
    # kl-UCB at c = 0, bit for bit; D-UCB with gamma = 1, xi = 1/2 is UCB1
    (("sw_klucb", {"window": T}, {}), ("klucb", {}, {}), {"w": (0, 0)}, True, 6),
    (("d_klucb", {"discount": 1.0}, {}), ("klucb", {}, {}), {"w": (0, 0)}, True, 6),
    (("d_ucb", {"discount": 1.0, "xi": 0.5}, {}), ("ucb1", {}, {}), {"w": (1e-15, 0.0)}, True, 6),
    # SAOL over one Hedge expert of length T: r = <mix - v, l> = 0, Hedge's rate sqrt(8 ln n / T)
    (("saol_hedge", {"history_lengths": (T,)}, {}), ("hedge", {}, {}), {"w": (0, 1e-5)}, False, N),
    # anytime StABL: given the lengths, the horizon plays no part (StABL's rates would differ)
    (("stabl_anytime", {"history_lengths": (4, 8, 16, 32)}, {}),
     ("stabl_anytime", {"history_lengths": (4, 8, 16, 32), "horizon": 4096}, {}),
     {"experts": (0, 0)}, False, N),
]  # fmt: skip


@pytest.mark.parametrize("twins", TWINS, ids=lambda t: f"{t[0][0]}={t[1][0]}")
def test_a_limit_is_its_twin_bit_for_bit_or_to_rounding(twins):
    """The same arms every round, and the compared records to the row's tolerance (0: bit
    for bit), on the same losses and keys."""
    (name, options, values), (twin, twin_options, twin_values), compared, x64, n = twins
    if twin_options.get("gamma") == "exp3s":  # Exp3.S's gamma, and the rate gamma / K
        gamma = make("exp3s", num_arms=n, horizon=T, alpha=0.0).gamma
        twin_options = {**twin_options, "gamma": gamma}
        twin_values = {"lr_scale": (gamma / n) / math.sqrt(math.log(n) * (1 - gamma) / (T * n))}
    got = _run(name, options, values, n, T, x64)
    want = _run(twin, {"horizon": T, **twin_options}, twin_values, n, T, x64)
    np.testing.assert_array_equal(got["arms"], want["arms"])
    for key, (rtol, atol) in compared.items():
        np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=atol, err_msg=key)
    assert len(set(got["arms"][n:, 0].tolist())) > 1
    if name == "exp3_ix":
        assert np.ptp(got["w"][-1]) > 0.1
    if name == "saol_hedge":  # the lone expert's meta weight never moves
        assert np.all(got["meta"] == got["meta"][0])
    if twin == "sw_ucb":  # plain counts and reward sums, and the index from them alone
        played, t = got["arms"][:, 0], T - 1
        counts = np.bincount(played[:t], minlength=n)
        sums = np.bincount(played[:t], weights=1.0 - got["loss"][:t], minlength=n)
        np.testing.assert_array_equal(got["counts"][t], counts)
        np.testing.assert_allclose(got["sums"][t], sums, rtol=1e-5)
        ucb = sums / counts + 2.0 * np.sqrt(0.5 * math.log(t) / counts)
        np.testing.assert_allclose(got["w"][t], ucb, rtol=1e-5)
    if twin == "klucb":  # Pinsker: kl(p, q) >= 2 (q - p)^2
        assert np.all(want["w"] <= want["pinsker"] + 1e-12)
        assert np.mean(want["w"] < want["pinsker"] - 1e-3) > 0.5  # and it is tighter
