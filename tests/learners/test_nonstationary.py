"""AdSwitch and MASTER: their detection of a change of best arm and their tests at the
boundary (their step-by-step references are rows of ``test_reference.py``)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import MASTER, AdSwitch, simulate
from stabl_jax.envs import PiecewiseBernoulliTable
from tests.conftest import HORIZON, NUM_ARMS

T, N = 150, 6
RUNS = 200


def _regret_after_swap(learner, params) -> np.ndarray:
    """``(runs,)`` regret over the rounds after the best arm (mean loss 0.1, the others 0.9)
    moves from arm 0 to arm 5 at round ``T / 2``, against the new best arm."""
    means = ((0.1,) + (0.9,) * (N - 1), (0.9,) * (N - 1) + (0.1,))
    env = PiecewiseBernoulliTable(num_arms=N, horizon=T, means=means, change_points=(T // 2,))
    result = simulate(learner, env, jax.random.key(0), num_runs=RUNS, horizon=T, params=params)
    after = np.asarray(result.expected_loss)[:, T // 2 :]
    return after.sum(axis=1) - 0.1 * after.shape[1]


@pytest.mark.optimized
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


@partial(jax.jit, static_argnums=0)
def _step(learner, state, loss, key):  # one program for both margins
    return learner.step(state, loss, key)


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
    state, _ = _step(learner, state, jnp.zeros(NUM_ARMS), jax.random.key(1))
    assert (int(state.order) == 0) is fails
