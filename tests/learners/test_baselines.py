"""Exp3.S, Exp3-IX, D-UCB and SW-UCB: deterministic limits, a long float32 run, bad inputs and
configs that name them. (Their step-by-step NumPy comparisons are rows of
``test_reference.py``; the contract tests cover them through the registry.)"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import DUCB, SWUCB, Exp3IX, Exp3S, make
from stabl_jax.experiment.configs import ConfigError
from stabl_jax.experiment.kinds import load_config

N, T = 5, 128
BASELINES = ("exp3s", "exp3_ix", "sw_ucb", "d_ucb")


def test_exp3s_sharing_keeps_every_arm_alive():
    """Step 4 with W = 1: every normalised weight stays >= (e alpha / K) / (max total), the
    floor that lets Exp3.S switch; checked after the best arm was fixed for the whole run."""
    learner = Exp3S(num_arms=N, horizon=T, alpha=0.05)
    params = learner.default_params.replace(lr_scale=jnp.float32(20.0))
    state = learner.init(jax.random.key(0), params)
    loss = jnp.array([0.0, 1.0, 1.0, 1.0, 1.0])
    step = jax.jit(learner.step)
    for t in range(T):
        state, _ = step(state, loss, jax.random.key(t))
    w = np.exp(np.asarray(state.log_weights, np.float64))
    # Total after step 4 is at most e^{lr_scale} + e alpha (one arm bumped by <= lr_scale).
    floor = (math.e * 0.05 / N) / (math.exp(20.0) + math.e * 0.05)
    assert w[0] > 0.99 and np.all(w[1:] >= floor * (1 - 1e-5))


def test_sw_ucb_forgets_an_arm_outside_the_window():
    """An arm absent from the last tau rounds has count 0 and index +inf: it is played next."""
    learner = SWUCB(num_arms=3, horizon=T, window=4, xi=0.6)
    params = learner.default_params.replace(explore_scale=jnp.float32(0.0))  # pure greedy
    state = learner.init(jax.random.key(0), params)
    loss = jnp.array([0.0, 0.5, 1.0])
    step = jax.jit(learner.step)
    arms = []
    for t in range(12):
        state, info = step(state, loss, jax.random.key(t))
        arms.append(int(info.arms[0]))
    # 0, 1, 2 once each, then greedy on arm 0 until arm 1 (played at t=1) leaves the window
    # at t=6 and is played again; arm 2 (t=2) follows at t=7; and so on with period 6.
    assert arms == [0, 1, 2, 0, 0, 0, 1, 2, 0, 0, 0, 1]


@pytest.mark.parametrize("name", BASELINES)
def test_long_float32_run_stays_finite_and_normalised(name):
    """T = 2^16, n = 30, one run at the default tuning, float32: every state leaf stays finite,
    and the play distribution sums to 1 (to float32 rounding, 30 terms) in every round."""
    n, horizon = 30, 2**16
    learner = make(name, num_arms=n, horizon=horizon)
    key = jax.random.key(11)

    def body(carry, t):
        state, worst, finite = carry
        noise = jax.random.uniform(jax.random.fold_in(key, t), (n,))
        best = (t // 2**14) * 7 % n  # four segments, a different best arm in each
        loss = jnp.where(jnp.arange(n) == best, 0.5 * noise, 0.5 + 0.5 * noise)
        state, info = learner.step(state, loss, jax.random.fold_in(key, t + horizon))
        worst = jnp.maximum(worst, jnp.abs(jnp.sum(info.play_probs) - 1.0))
        finite &= jnp.all(jnp.isfinite(info.play_probs))
        return (state, worst, finite), None

    state0 = learner.init(jax.random.key(0))
    carry0 = (state0, jnp.float32(0.0), jnp.bool_(True))
    run = jax.jit(lambda c: jax.lax.scan(body, c, jnp.arange(horizon))[0])
    state, worst, finite = run(carry0)
    assert int(state.t) == horizon
    assert bool(finite)
    assert float(worst) < 1e-5, float(worst)
    for leaf in jax.tree.leaves(state):
        assert bool(jnp.all(jnp.isfinite(leaf))), name


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (Exp3S, {"num_switches": -1}, "num_switches must be >= 0, got -1"),
        (Exp3S, {"num_switches": 2.5}, "num_switches must be an int"),
        (Exp3S, {"gamma": 1.5}, r"gamma must be in \[0, 1\], got 1.5"),
        (Exp3S, {"alpha": -0.1}, "alpha must be a finite number >= 0, got -0.1"),
        (Exp3S, {"alpha": math.nan}, "alpha must be a finite number >= 0"),
        (Exp3S, {"alpha": "0.5"}, "alpha must be a real number, got '0.5'"),  # float() read it
        (Exp3S, {"alpha": True}, "alpha must be a real number, got True"),
        (DUCB, {"discount": 0.0}, r"discount must be in \(0, 1\]"),
        (DUCB, {"discount": 1.2}, r"discount must be in \(0, 1\].*1.2"),
        (DUCB, {"discount": "0.5"}, "discount must be a real number, got '0.5'"),  # was read
        (DUCB, {"num_changes": -2}, "num_changes must be >= 0, got -2"),
        (DUCB, {"xi": 0.0}, "xi must be a finite number > 0, got 0.0"),
        (SWUCB, {"window": 0}, "window must be >= 1, got 0"),
        (SWUCB, {"window": T + 1}, rf"window must be in \[1, horizon={T}\], got {T + 1}"),
        (SWUCB, {"window": 8.0}, "window must be an int"),
        (SWUCB, {"xi": -1.0}, "xi must be a finite number > 0, got -1.0"),
        (Exp3IX, {"num_arms": 1}, "num_arms must be >= 2, got 1"),
    ],
)
def test_bad_options_are_named(cls, kwargs, match):
    kwargs = {"num_arms": N, "horizon": T, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        cls(**kwargs)


def test_a_nan_param_is_named():
    """Outside a range, every params field is named by the contract tests; NaN too."""
    learner = make("exp3_ix", num_arms=N, horizon=T)
    params = learner.default_params.replace(ix_scale=jnp.float32(math.nan))
    with pytest.raises(ValueError, match=r"params.ix_scale must be finite.*got nan"):
        learner.init(jax.random.key(0), params)


def test_configs_name_the_baselines_with_options_and_params():
    cfg = load_config(
        "expert_advice_equal",
        [
            f"learners={list(BASELINES)!r}".replace("'", '"'),
            "learner_options.exp3s.num_switches=5",
            "learner_options.sw_ucb.window=100",
            "learner_options.d_ucb.num_changes=1",
            "params.exp3_ix.lr_scale=4",
            "params.d_ucb.explore_scale=0.5",
        ],
    )
    assert cfg.learners == BASELINES
    exp3s = cfg.make_learner("exp3s")
    assert exp3s.num_switches == 5 and exp3s.gamma == pytest.approx(
        math.sqrt(30 * (6 * math.log(30 * 4096) + math.e) / ((math.e - 1) * 4096))
    )
    assert cfg.make_learner("sw_ucb").window == 100
    d_ucb = cfg.make_learner("d_ucb")
    assert d_ucb.discount == pytest.approx(1 - 0.25 * math.sqrt(1 / 4096))
    assert float(cfg.learner_params(d_ucb, "d_ucb").explore_scale) == 0.5
    ix = cfg.make_learner("exp3_ix")
    assert float(cfg.learner_params(ix, "exp3_ix").lr_scale) == 4.0


def test_config_rejects_a_bad_baseline_option():
    with pytest.raises(ConfigError, match=r"learner_options\.sw_ucb"):
        load_config(
            "expert_advice_equal", ['learners=["sw_ucb"]', "learner_options.sw_ucb.window=0"]
        )
    with pytest.raises(ConfigError, match=r"params\.d_ucb\.lr_scale"):
        load_config("expert_advice_equal", ['learners=["d_ucb"]', "params.d_ucb.lr_scale=2"])
