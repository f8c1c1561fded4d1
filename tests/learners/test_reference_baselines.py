"""Exp3.S, Exp3-IX, D-UCB and SW-UCB against the plain-NumPy loops of
``reference_baselines.py`` (written from the source papers), step by step.

Float64 on both sides; the randomised learners get the same per-round uniforms (recomputed
from the learner's keys with ``stabl_jax.sampling.uniforms``), so arms must match exactly,
distributions and UCB indices to 1e-9 relative, over 150 rounds.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stabl_jax import DUCB, SWUCB, Exp3IX, Exp3S, sampling
from tests.learners import reference_baselines as ref

T, N = 150, 6
RTOL = 1e-9


def _losses(seed: int) -> np.ndarray:
    """Losses with a best arm that changes twice, plus uniform noise, in [0, 1]."""
    rng = np.random.default_rng(seed)
    losses = rng.uniform(0.2, 1.0, size=(T, N))
    for start, best in ((0, 1), (50, 4), (100, 0)):
        losses[start : start + 50, best] = rng.uniform(0.0, 0.4, size=50)
    return losses


def _uniforms(keys) -> np.ndarray:
    """``(T, 1)`` the uniforms the learner draws from each round's key."""
    return np.asarray(jax.vmap(lambda k: sampling.uniforms(k, 1, "float64"))(keys))


def _params(learner, **values):
    return learner.default_params.replace(**{k: np.float64(v) for k, v in values.items()})


EXP3S_CASES = [
    ({}, {}),  # Section 8's tuning: alpha = 1/T, gamma from S = num_switches + 1 = 4
    ({"num_switches": 0}, {}),
    ({}, {"gamma": 0.3, "alpha": 0.02}),
    ({}, {"lr_scale": 4.0, "alpha": 0.05}),
    ({}, {"alpha": 0.0, "gamma": 0.1}),  # no sharing: Exp3 with gains
]


@pytest.mark.parametrize(("options", "values"), EXP3S_CASES, ids=str)
def test_exp3s_matches_reference(options, values):
    losses = _losses(1)
    with jax.enable_x64(True):
        learner = Exp3S(num_arms=N, horizon=T, dtype="float64", **options)
        assert learner.alpha == pytest.approx(1.0 / T)
        assert learner.gamma == pytest.approx(
            ref.exp3s_gamma(N, T, learner.num_switches + 1), rel=1e-15
        )
        params = _params(learner, **values)
        step = jax.jit(learner.step)
        state = learner.init(jax.random.key(3), params)
        keys = jax.random.split(jax.random.key(4), T)
        expected = ref.exp3s_reference(
            losses,
            _uniforms(keys),
            gamma=float(params.gamma),
            alpha=float(params.alpha),
            lr_scale=float(params.lr_scale),
        )
        for t in range(T):
            np.testing.assert_allclose(np.exp(state.log_weights), expected["weights"][t], rtol=RTOL)
            state, info = step(state, losses[t], keys[t])
            assert int(info.arms[0]) == expected["played"][t], t
            np.testing.assert_allclose(info.play_probs, expected["play_probs"][t], rtol=RTOL)
        np.testing.assert_allclose(np.exp(state.log_weights), expected["weights"][T], rtol=RTOL)
    assert len(set(expected["played"].tolist())) > 1


@pytest.mark.parametrize(
    "values", [{}, {"lr_scale": 6.0, "ix_scale": 0.5}, {"lr_scale": 3.0, "ix_scale": 0.0}], ids=str
)
def test_exp3_ix_matches_reference(values):
    losses = _losses(2)
    with jax.enable_x64(True):
        learner = Exp3IX(num_arms=N, horizon=T, dtype="float64")
        params = _params(learner, **values)
        eta0, gamma0 = ref.exp3_ix_rates(N, T)
        eta = eta0 * values.get("lr_scale", 1.0)
        gamma = values.get("ix_scale", 1.0) * eta / 2.0
        got_eta, got_gamma = learner.rates(params)
        np.testing.assert_allclose([float(got_eta), float(got_gamma)], [eta, gamma], rtol=1e-14)
        if not values:
            assert gamma == pytest.approx(gamma0, rel=1e-15)
        step = jax.jit(learner.step)
        state = learner.init(jax.random.key(5), params)
        keys = jax.random.split(jax.random.key(6), T)
        expected = ref.exp3_ix_reference(losses, _uniforms(keys), eta=eta, gamma=gamma)
        for t in range(T):
            state, info = step(state, losses[t], keys[t])
            assert int(info.arms[0]) == expected["played"][t], t
            np.testing.assert_allclose(info.play_probs, expected["play_probs"][t], rtol=RTOL)
        np.testing.assert_allclose(np.exp(state.log_weights), expected["weights"][T], rtol=RTOL)


def _check_ucb(learner, params, losses, expected):
    step = jax.jit(learner.step)
    index = jax.jit(learner.index)
    state = learner.init(jax.random.key(0), params)
    for t in range(T):
        np.testing.assert_allclose(
            np.asarray(state.counts, np.float64), expected["counts"][t], rtol=RTOL, atol=1e-300
        )
        np.testing.assert_allclose(index(state), expected["index"][t], rtol=RTOL)
        state, info = step(state, losses[t], jax.random.key(t))
        assert int(info.arms[0]) == expected["played"][t], t
        np.testing.assert_array_equal(info.play_probs, np.eye(N)[expected["played"][t]])
    np.testing.assert_allclose(
        np.asarray(state.counts, np.float64), expected["counts"][T], rtol=RTOL, atol=1e-300
    )
    # The first N rounds play every arm once, in index order (the papers' initialisation).
    np.testing.assert_array_equal(expected["played"][:N], np.arange(N))
    return state


@pytest.mark.parametrize(
    ("options", "values"),
    [
        ({}, {}),  # gamma = 1 - sqrt(3/T)/4, xi = 1/2
        ({"xi": 0.3}, {"discount": 0.8, "explore_scale": 0.4}),
        ({}, {"discount": 1.0}),
    ],
    ids=str,
)
def test_d_ucb_matches_reference(options, values):
    losses = _losses(3)
    with jax.enable_x64(True):
        learner = DUCB(num_arms=N, horizon=T, dtype="float64", **options)
        assert learner.discount == pytest.approx(ref.default_discount(T, 3), rel=1e-15)
        params = _params(learner, **values)
        expected = ref.d_ucb_reference(
            losses,
            discount=float(params.discount),
            xi=learner.xi,
            explore_scale=float(params.explore_scale),
        )
        _check_ucb(learner, params, losses, expected)
    assert len(set(expected["played"][N:].tolist())) > 1


@pytest.mark.parametrize(
    ("options", "values"),
    [
        ({}, {}),  # tau = floor(2 sqrt(T log T / 3)) = 31, xi = 0.6
        ({"window": 7}, {"explore_scale": 0.3}),
        ({"window": 40, "xi": 2.0}, {"explore_scale": 0.5}),
        ({"window": T}, {}),
    ],
    ids=str,
)
def test_sw_ucb_matches_reference(options, values):
    losses = _losses(4)
    with jax.enable_x64(True):
        learner = SWUCB(num_arms=N, horizon=T, dtype="float64", **options)
        if "window" not in options:
            assert learner.window == ref.default_window(T, 3) == 31
        params = _params(learner, **values)
        expected = ref.sw_ucb_reference(
            losses,
            window=learner.window,
            xi=learner.xi,
            explore_scale=float(params.explore_scale),
        )
        state = _check_ucb(learner, params, losses, expected)
        # The ring buffer holds exactly the last tau rounds' arms.
        tail = expected["played"][-learner.window :]
        np.testing.assert_array_equal(np.sort(np.asarray(state.window_arms)), np.sort(tail))
    assert len(set(expected["played"][N:].tolist())) > 1
