"""The non-stationary learners: AdSwitch's and MASTER's detection of a change of best arm and
their tests at the boundary; the change detectors' first detection, GLR-klUCB's exact test,
M-UCB's forced exploration and the restart trace (their step-by-step references are rows of
``test_reference.py``)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import CUSUMUCB, EXP3, MASTER, MUCB, AdSwitch, GLRklUCB, Rexp3, simulate
from stabl_jax.envs import PiecewiseBernoulliTable
from tests.conftest import HORIZON, NUM_ARMS
from tests.learners import reference_nonstationary

T, N = 150, 6
RUNS = 200


def _regret_after_swap(learner, params) -> np.ndarray:
    """``(runs,)`` regret after the best arm (mean loss 0.1, the others 0.9) moves from arm 0
    to arm 5 at round ``T / 2``, against the new best arm."""
    means = ((0.1,) + (0.9,) * (N - 1), (0.9,) * (N - 1) + (0.1,))
    env = PiecewiseBernoulliTable(num_arms=N, horizon=T, means=means, change_points=(T // 2,))
    result = simulate(learner, env, jax.random.key(0), num_runs=RUNS, horizon=T, params=params)
    after = np.asarray(result.expected_loss)[:, T // 2 :]
    return after.sum(axis=1) - 0.1 * after.shape[1]


@pytest.mark.optimized
def test_adswitch_detects_a_swap_of_best_arm():
    """After the best arm moves, AdSwitch's tests start an episode that finds the new one;
    with its tests off (a huge ``c2``) it stays with the old one."""
    learner = AdSwitch(num_arms=N, horizon=T)
    tuned = learner.default_params.replace(c1=jnp.float32(0.1), c2=jnp.float32(0.1))
    never = _regret_after_swap(learner, tuned.replace(c2=jnp.float32(1e6)))
    diff = never - _regret_after_swap(learner, tuned)
    se = diff.std(ddof=1) / np.sqrt(RUNS)
    assert diff.mean() > 5.0 * se, (diff.mean(), se)


def test_adswitch_checks_every_level_down_to_a_sixteenth_of_the_gap():
    """Step 2 at check probability 1: a bad arm with ``Delta~ = 0.6`` gets the obligations of
    levels ``i <= 4`` (``2^-4 >= 0.6 / 16 > 2^-5``), so it is due ``n_4`` more samples."""
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
    """``(RUNS, T)`` bool, a test of MASTER failed at round ``t``, on Bernoulli losses whose
    best arm (mean 0.05, the others 0.95) moves from arm 0 to arm ``N - 1`` at ``change``."""
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
    """With ``rho-hat`` scaled down to act within ``T = 150``, a test fails within 20 rounds
    after the best arm's move in far more runs than in the 20 before (false alarms)."""
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
    # block n = 3 from round 8, its order-3 and order-0 instances alive
    block = dict(t=jnp.int32(10), order=jnp.int32(3), block_start=jnp.int32(7))
    alive = state.alive.at[0].set(True).at[3].set(True)
    starts = state.inst_start.at[0].set(10).at[3].set(7)
    low = jnp.float32(1.0 - margin * rho_hat_1)
    state = state.replace(**block, low=low, alive=alive, inst_start=starts)
    state, _ = _step(learner, state, jnp.zeros(NUM_ARMS), jax.random.key(1))
    assert (int(state.order) == 0) is fails


def test_glr_klucb_exact_test_keeps_every_split_or_refuses():
    """``subsample=1`` keeps ``T`` splits by default and refuses fewer, naming the remedy."""
    assert GLRklUCB(num_arms=4, horizon=300, subsample=1).max_splits == 300
    assert GLRklUCB(num_arms=4, horizon=5000).max_splits == 500
    with pytest.raises(
        ValueError, match=f"max_splits=1024 is below the horizon T={2 * 1024}.*set max_splits=2048"
    ):
        GLRklUCB(num_arms=4, horizon=2048, subsample=1, max_splits=1024)


@pytest.mark.parametrize("count", ["segments", "breakpoints"])
def test_m_ucb_default_gamma_counts_segments_or_breakpoints(count):
    """Remark 1's ``gamma`` with ``M = Upsilon_T + 1`` (Cao et al.) or ``max(1, Upsilon_T)``
    (Besson et al.'s code): a forced period of 7 or 8 rounds on their Problem 1."""
    learner = MUCB(num_arms=3, horizon=5000, num_changes=4, window=150, gamma_count=count)
    gamma = reference_nonstationary.m_ucb_gamma(3, 5000, 4, 150, count)
    assert learner.gamma == pytest.approx(gamma, rel=1e-12)
    assert int(3 // learner.gamma) == (7 if count == "segments" else 8)


DETECTORS = [
    (CUSUMUCB, {}),
    (MUCB, {"window": 100}),  # Remark 1's window for delta = 0.1 exceeds the horizon
    (GLRklUCB, {}),
]


@pytest.mark.parametrize(("cls", "options"), DETECTORS, ids=lambda x: getattr(x, "__name__", x))
def test_a_bernoulli_change_is_detected_within_50_rounds(cls, options):
    """Arm 0's loss mean moves from 0.1 to 0.9 at round 1000 of 2000: with its defaults for
    one change, each detector first restarts within 50 rounds after it, never before."""
    horizon, change = 2000, 1000
    rng = np.random.default_rng(0)
    means = np.where(np.arange(horizon)[:, None] < change, [0.1, 0.5], [0.9, 0.5])
    losses = jnp.asarray((rng.uniform(size=(horizon, 2)) < means).astype(np.float32))
    keys = jax.random.split(jax.random.key(0), horizon)
    learner = cls(num_arms=2, horizon=horizon, num_changes=1, **options)

    def body(state, xs):
        new_state, _ = learner.step(state, *xs)
        return new_state, jnp.any(new_state.counts < state.counts)

    run = jax.jit(lambda state: jax.lax.scan(body, state, (losses, keys))[1])
    restarts = np.flatnonzero(np.asarray(run(learner.init(jax.random.key(1)))))
    assert restarts.size and change <= restarts[0] < change + 50, restarts[:5]


def test_simulate_records_the_restart_trace_of_restarting_learners_only():
    """``traces=("restart",)`` gives ``(R, T)`` bool, ``learner.restarted`` round by round
    (Rexp3's scheduled restarts); a learner without restarts refuses the name."""
    env = PiecewiseBernoulliTable(
        num_arms=2, horizon=64, change_points=(32,), means=((0.1, 0.5), (0.9, 0.5))
    )
    learner = Rexp3(num_arms=2, horizon=64, batch=10)
    result = simulate(learner, env, jax.random.key(0), 2, traces=("restart",))
    assert result.restart.dtype == bool and result.restart.shape == (2, 64)
    np.testing.assert_array_equal(np.flatnonzero(result.restart[0]), [9, 19, 29, 39, 49, 59])
    with pytest.raises(ValueError, match="restart"):
        simulate(EXP3(num_arms=2, horizon=64), env, jax.random.key(0), 2, traces=("restart",))
