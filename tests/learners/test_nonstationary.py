"""AdSwitch and MASTER against the plain-NumPy loops of ``reference_nonstationary.py``
(written from the papers), step by step, and their detection of a change of best arm.

The references get the same per-round uniforms (recomputed from the learner's keys with
``stabl_jax.sampling.uniforms``). AdSwitch: played arms, episodes, GOOD and the pending
obligations match exactly, ``mu~`` and ``Delta~`` to 1e-9 relative; MASTER: played arms and
blocks exactly, ``g~_t`` to 1e-9 relative; over 150 rounds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import MASTER, AdSwitch, sampling, simulate
from stabl_jax.envs import PiecewiseBernoulliTable
from tests.conftest import HORIZON, NUM_ARMS
from tests.learners import reference_nonstationary as ref

T, N = 150, 6
RTOL = 1e-9


def _losses(seed: int) -> np.ndarray:
    """Losses with a best arm that changes twice, plus uniform noise, in [0, 1]."""
    rng = np.random.default_rng(seed)
    losses = rng.uniform(0.2, 1.0, size=(T, N))
    for start, best in ((0, 1), (50, 4), (100, 0)):
        losses[start : start + 50, best] = rng.uniform(0.0, 0.4, size=50)
    return losses


ADSWITCH_CASES = [
    ({}, {}),  # the defaults: Delta_s = ceil(150 / 32) = 5, H = 32; nothing fires at T = 150
    ({"checkpoint_every": 1, "max_checkpoints": T}, {"c1": 0.1, "c2": 0.02, "check_scale": 30}),
    ({"checkpoint_every": 4, "max_checkpoints": 6}, {"c1": 0.1, "c2": 0.02, "check_scale": 30}),
    ({"checkpoint_every": 3, "max_checkpoints": 8}, {"c1": 0.3, "c2": 0.05, "check_scale": 60}),
    # frequent checks at every level, up to obligations never met within the horizon
    ({"checkpoint_every": 2, "max_checkpoints": 10}, {"c1": 0.1, "c2": 0.05, "check_scale": 500}),
]


@pytest.mark.parametrize(("options", "values"), ADSWITCH_CASES, ids=str)
def test_adswitch_matches_reference(options, values):
    losses = _losses(7)
    with jax.enable_x64(True):
        learner = AdSwitch(num_arms=N, horizon=T, dtype="float64", **options)
        params = learner.default_params.replace(**{k: np.float64(v) for k, v in values.items()})
        levels = learner.num_levels
        keys = jax.random.split(jax.random.key(11), T)
        u = np.asarray(jax.vmap(lambda k: sampling.uniforms(k, N * levels, "float64"))(keys))
        expected = ref.adswitch_reference(
            losses,
            u,
            **{k: float(getattr(params, k)) for k in ("c1", "c2", "check_scale")},
            every=learner.checkpoint_every,
            keep=learner.max_checkpoints,
            levels=levels,
        )
        step = jax.jit(learner.step)
        state = learner.init(jax.random.key(0), params)
        for t in range(T):
            state, info = step(state, losses[t], keys[t])
            assert int(info.arms[0]) == expected["played"][t], t
            assert int(state.episode) == expected["episode"][t], t
            np.testing.assert_array_equal(state.good, expected["good"][t], err_msg=str(t))
            pending = np.asarray(state.counts < state.due)
            np.testing.assert_array_equal(pending, expected["pending"][t], err_msg=str(t))
            bad = ~expected["good"][t]
            for got, name in ((state.mean_bad, "mean_bad"), (state.gap_bad, "gap_bad")):
                np.testing.assert_allclose(np.asarray(got)[bad], expected[name][t][bad], rtol=RTOL)
    if values:  # the case exercises every step: evictions, checks of bad arms, new episodes
        assert expected["episode"][-1] > 1
        assert (~expected["good"]).any() and expected["pending"].any()


RUNS = 200


def _regret_after_swap(learner, params) -> np.ndarray:
    """``(runs,)`` regret over the rounds after the best arm (mean loss 0.1, the others 0.9)
    moves from arm 0 to arm 5 at round ``T / 2``, against the new best arm."""
    means = ((0.1,) + (0.9,) * (N - 1), (0.9,) * (N - 1) + (0.1,))
    env = PiecewiseBernoulliTable(num_arms=N, horizon=T, means=means, change_points=(T // 2,))
    result = simulate(learner, env, jax.random.key(0), num_runs=RUNS, horizon=T, params=params)
    after = np.asarray(result.expected_loss)[:, T // 2 :]
    return after.sum(axis=1) - 0.1 * after.shape[1]


def test_adswitch_detects_a_swap_of_best_arm():
    """After the best arm moves, AdSwitch's tests start a new episode that finds the new best
    arm; the same AdSwitch with its change tests switched off (a huge ``c2``: it never
    restarts) stays with the old one. Constants small enough to act within ``T = 150``."""
    learner = AdSwitch(num_arms=N, horizon=T)
    tuned = learner.default_params.replace(c1=jnp.float32(0.1), c2=jnp.float32(0.1))
    never = _regret_after_swap(learner, tuned.replace(c2=jnp.float32(1e6)))
    diff = never - _regret_after_swap(learner, tuned)
    se = diff.std(ddof=1) / np.sqrt(RUNS)
    assert diff.mean() > 5.0 * se, (diff.mean(), se)


def test_adswitch_checks_every_level_down_to_a_sixteenth_of_the_gap():
    """Step 2 at check probability 1: a bad arm with ``Delta~ = 0.6`` gets the obligations of
    levels ``i <= 4`` (``2^-4 >= 0.6 / 16 > 2^-5``), so it is due ``n_4`` more samples; the
    long horizon keeps ``n_i = floor(2^(2i+1) log T)`` below its cap ``T + 1``."""
    horizon = 2**20
    learner = AdSwitch(num_arms=NUM_ARMS, horizon=horizon)
    params = learner.default_params.replace(check_scale=jnp.float32(1e9))
    state = learner.init(jax.random.key(0), params)
    state = state.replace(
        good=state.good.at[0].set(False),
        gap_bad=state.gap_bad.at[0].set(0.6),
        counts=state.counts.at[0].set(3),
    )
    query = learner.ask(state, jax.random.key(1))
    need = np.floor(2.0 ** (2 * np.arange(1, 6) + 1) * np.log(horizon)).astype(int)
    assert query.due.tolist() == [3 + need[3], 0, 0, 0, 0]
    assert int(query.arms[0]) == 0  # the bad arm with an obligation, never played, goes first


MASTER_CASES = [
    {},  # the paper's rho-hat: no test fails within 150 rounds, MALG alone
    {"test_scale": 2e-4},  # Test 2 fails
    {"test_scale": 1e-4, "explore_scale": 0.5, "delta": 0.1},
]


@pytest.mark.parametrize("values", MASTER_CASES, ids=str)
def test_master_matches_reference(values):
    losses = _losses(8)
    with jax.enable_x64(True):
        learner = MASTER(num_arms=N, horizon=T, dtype="float64")
        assert learner.num_orders == 8  # orders 0..7: blocks 0..6 take 127 rounds
        params = learner.default_params.replace(**{k: np.float64(v) for k, v in values.items()})
        keys = jax.random.split(jax.random.key(12), T)
        u = np.asarray(jax.vmap(lambda k: sampling.uniforms(k, 8, "float64"))(keys))
        expected = ref.master_reference(
            losses,
            u,
            **{k: float(getattr(params, k)) for k in ("delta", "test_scale", "explore_scale")},
        )
        step = jax.jit(learner.step)
        ask = jax.jit(learner.ask)
        state = learner.init(jax.random.key(0), params)
        for t in range(T):
            np.testing.assert_allclose(
                ask(state, keys[t]).optimistic, expected["optimistic"][t], rtol=RTOL
            )
            state, info = step(state, losses[t], keys[t])
            assert int(info.arms[0]) == expected["played"][t], t
            assert int(state.order) == expected["order"][t], t
            assert (int(state.block_start) == t + 1) >= expected["restart"][t], t
    if values:  # the case exercises the tests
        assert expected["restart"].any()

    assert len(set(expected["played"].tolist())) > 1


def _master_failures(learner, params, change: int) -> np.ndarray:
    """``(RUNS, T)`` bool, a test of MASTER failed at round ``t`` (the next block is ``n = 0``),
    on Bernoulli losses whose best arm (mean 0.05, the others 0.95) moves from arm 0 to arm
    ``N - 1`` at round ``change``."""
    means = jnp.asarray([[0.05] + [0.95] * (N - 1), [0.95] * (N - 1) + [0.05]], jnp.float32)

    def run(key):
        def body(state, t):
            k = jax.random.fold_in(key, t)
            draw = jax.random.uniform(jax.random.fold_in(k, 1), (N,))
            loss = (draw < means[(t >= change).astype(jnp.int32)]).astype(jnp.float32)
            state, _ = learner.step(state, loss, k)
            return state, state.order == 0

        return jax.lax.scan(body, learner.init(key, params), jnp.arange(T))[1]

    return np.asarray(jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(3), RUNS)))


def test_master_detects_a_swap_of_best_arm():
    """With ``rho-hat`` scaled down so that its tests act within ``T = 150`` rounds, a test
    fails within 20 rounds of the best arm's move in far more runs than in the 20 rounds
    before it (false alarms); the gap is many standard errors wide."""
    learner = MASTER(num_arms=N, horizon=T)
    failed = _master_failures(learner, learner.default_params.replace(test_scale=5e-4), 90)
    after, before = failed[:, 90:110].any(axis=1), failed[:, 70:90].any(axis=1)
    se = np.sqrt((after.var(ddof=1) + before.var(ddof=1)) / RUNS)
    assert after.mean() - before.mean() > 5.0 * se, (after.mean(), before.mean(), se)


@pytest.mark.parametrize(("margin", "fails"), [(9.5, True), (8.5, False)])
def test_master_test1_fails_when_an_instance_beats_the_blocks_optimism(margin, fails):
    """Test 1 at the end of an order-0 instance whose reward 1 exceeds ``U_t`` by ``margin
    rho-hat(1)``: it fails (a new epoch, ``n = 0``) exactly when ``margin >= 9``."""
    learner = MASTER(num_arms=NUM_ARMS, horizon=HORIZON)
    params = learner.default_params.replace(test_scale=1e-6)
    k, scale = NUM_ARMS, 1e-6 * 6.0 * (np.log2(HORIZON) + 1.0) * np.log(HORIZON**2)
    rho_hat_1 = scale * (np.sqrt(k) + k)
    state = learner.init(jax.random.key(0), params)
    state = state.replace(  # block n = 3 from round 8, its order-3 and order-0 instances alive
        t=jnp.int32(10),
        order=jnp.int32(3),
        block_start=jnp.int32(7),
        low=jnp.float32(1.0 - margin * rho_hat_1),
        alive=state.alive.at[0].set(True).at[3].set(True),
        inst_start=state.inst_start.at[0].set(10).at[3].set(7),
    )
    state, _ = learner.step(state, jnp.zeros(NUM_ARMS), jax.random.key(1))
    assert (int(state.order) == 0) is fails
