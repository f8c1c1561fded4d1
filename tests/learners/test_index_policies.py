"""UCB1, kl-UCB, SW-klUCB and D-klUCB against the plain-NumPy loops of
``reference_index_policies.py`` (written from the source papers), step by step, and
their deterministic limits.

Float64 on both sides: arms must match exactly, counts and indices to 1e-9 relative, over
150 rounds (the losses and harness of ``test_reference_baselines.py``).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stabl_jax import DUCB, KLUCB, UCB1, DklUCB, SWklUCB
from tests.learners import reference_baselines as ref_baselines
from tests.learners import reference_index_policies as ref
from tests.learners.test_reference_baselines import N, T, _check_ucb, _losses, _params


@pytest.mark.parametrize("values", [{}, {"explore_scale": 0.3}, {"explore_scale": 2.0}], ids=str)
def test_ucb1_matches_reference(values):
    losses = _losses(5)
    with jax.enable_x64(True):
        learner = UCB1(num_arms=N, horizon=T, dtype="float64")
        params = _params(learner, **values)
        expected = ref.ucb1_reference(losses, explore_scale=float(params.explore_scale))
        _check_ucb(learner, params, losses, expected)
    assert len(set(expected["played"][N:].tolist())) > 1


@pytest.mark.parametrize("values", [{}, {"c": 3.0}, {"c": 1.0}], ids=str)
def test_klucb_matches_reference(values):
    losses = _losses(6)
    with jax.enable_x64(True):
        learner = KLUCB(num_arms=N, horizon=T, dtype="float64")
        assert learner.c == 0.0  # the papers' simulations
        params = _params(learner, **values)
        expected = ref.klucb_reference(losses, c=float(params.c))
        _check_ucb(learner, params, losses, expected)
    assert len(set(expected["played"][N:].tolist())) > 1


@pytest.mark.parametrize(
    ("options", "values"),
    [
        ({}, {}),  # SW-UCB's tau = floor(2 sqrt(T log T / 3)) = 31
        ({"window": 7}, {"explore_scale": 0.5}),
        ({"window": 40}, {"explore_scale": 2.0}),
        ({"window": T}, {}),
    ],
    ids=str,
)
def test_sw_klucb_matches_reference(options, values):
    losses = _losses(7)
    with jax.enable_x64(True):
        learner = SWklUCB(num_arms=N, horizon=T, dtype="float64", **options)
        if "window" not in options:
            assert learner.window == ref_baselines.default_window(T, 3) == 31
        params = _params(learner, **values)
        expected = ref.sw_klucb_reference(
            losses, window=learner.window, explore_scale=float(params.explore_scale)
        )
        _check_ucb(learner, params, losses, expected)
    assert len(set(expected["played"][N:].tolist())) > 1


@pytest.mark.parametrize(
    "values",
    [{}, {"discount": 0.8, "explore_scale": 0.4}, {"discount": 1.0, "explore_scale": 1.5}],
    ids=str,
)
def test_d_klucb_matches_reference(values):
    losses = _losses(8)
    with jax.enable_x64(True):
        learner = DklUCB(num_arms=N, horizon=T, dtype="float64")
        assert learner.discount == pytest.approx(ref_baselines.default_discount(T, 3), rel=1e-15)
        params = _params(learner, **values)
        expected = ref.d_klucb_reference(
            losses,
            discount=float(params.discount),
            explore_scale=float(params.explore_scale),
        )
        _check_ucb(learner, params, losses, expected)
    assert len(set(expected["played"][N:].tolist())) > 1


def _trajectory(learner, params, losses):
    """``(arms (T,), indices (T, N), states)`` of ``learner`` run on ``losses``."""
    step, index = jax.jit(learner.step), jax.jit(learner.index)
    state = learner.init(jax.random.key(0), params)
    arms, indices, states = [], [], []
    for t in range(T):
        states.append(state)
        indices.append(np.asarray(index(state)))
        state, info = step(state, losses[t], jax.random.key(t))
        arms.append(int(info.arms[0]))
    return np.array(arms), np.array(indices), states


def test_deterministic_limits():
    """SW-klUCB with window T and D-klUCB with gamma = 1 are kl-UCB at c = 0, bit for bit;
    D-UCB with gamma = 1, xi = 1/2 is UCB1; kl-UCB's index is at most UCB1's at
    explore_scale = 1/2 (Pinsker: kl(p, q) >= 2 (q - p)^2)."""
    losses = _losses(9)
    with jax.enable_x64(True):
        klucb = KLUCB(num_arms=N, horizon=T, dtype="float64")
        arms, indices, states = _trajectory(klucb, _params(klucb), losses)
        for learner in (
            SWklUCB(num_arms=N, horizon=T, dtype="float64", window=T),
            DklUCB(num_arms=N, horizon=T, dtype="float64", discount=1.0),
        ):
            other_arms, other_indices, _ = _trajectory(learner, _params(learner), losses)
            np.testing.assert_array_equal(other_arms, arms)
            np.testing.assert_array_equal(other_indices, indices)

        ucb1 = UCB1(num_arms=N, horizon=T, dtype="float64")
        ucb_arms, ucb_indices, _ = _trajectory(ucb1, _params(ucb1), losses)
        d_ucb = DUCB(num_arms=N, horizon=T, dtype="float64", discount=1.0, xi=0.5)
        d_arms, d_indices, _ = _trajectory(d_ucb, _params(d_ucb), losses)
        np.testing.assert_array_equal(d_arms, ucb_arms)
        np.testing.assert_allclose(d_indices, ucb_indices, rtol=1e-15)

        half = _params(ucb1, explore_scale=0.5)
        pinsker = jax.jit(lambda state: ucb1.index(state.replace(params=half)))
        bounds = np.array([pinsker(state) for state in states])
        assert np.all(indices <= bounds + 1e-12)
        assert np.mean(indices < bounds - 1e-3) > 0.5  # and it is tighter
    assert len(set(arms[N:].tolist())) > 1
