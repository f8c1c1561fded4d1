"""The baselines: Exp3.S's sharing, long float32 runs of Exp3.S, Exp3-IX, D-UCB and SW-UCB,
Tsallis-INF's normalisation, Thompson sampling's probabilities and draws, FLH's and
EFLH's schedules against the papers' set rules, configs that name them; and every learner's
refused options (the step-by-step references are rows of ``test_reference.py``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import DUCB, SWUCB, Exp3IX, Exp3S, Thompson, make
from stabl_jax.experiment.configs import ConfigError
from stabl_jax.experiment.kinds import load_config
from stabl_jax.learners import SAOL, SAOLHedge, StABLAnytime, StABLOneQuery
from stabl_jax.learners.discounted_thompson import DiscountedThompson
from stabl_jax.learners.eflh import EFLH, eflh_capacity
from stabl_jax.learners.flh import flh_capacity
from stabl_jax.learners.sw_thompson import SWThompson
from stabl_jax.learners.thompson import argmax_probabilities
from stabl_jax.learners.tsallis_inf import tsallis_weights
from tests.conftest import HORIZON, NUM_ARMS
from tests.learners import reference_baselines
from tests.learners import reference_stabl_family as ref_family

N, T = 5, 128
T_FLH = 80  # FLH's lengths
PROB_TOL = 1e-4  # the accuracy argmax_probabilities promises
BASELINES = ("exp3s", "exp3_ix", "sw_ucb", "d_ucb")


def test_exp3s_sharing_keeps_every_arm_alive():
    """Step 4: every normalised weight stays >= (e alpha / K) / (max total), the floor that
    lets Exp3.S switch, after a whole run with a fixed best arm."""
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


@pytest.mark.parametrize("name", BASELINES)
def test_long_float32_run_stays_finite_and_normalised(name):
    """T = 2^16, n = 30, default tuning, float32: the state stays finite and the play
    distribution sums to 1 (to float32 rounding) every round."""
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

    carry0 = (learner.init(jax.random.key(0)), jnp.float32(0.0), jnp.bool_(True))
    run = jax.jit(lambda c: jax.lax.scan(body, c, jnp.arange(horizon))[0])
    state, worst, finite = run(carry0)
    assert int(state.t) == horizon
    assert bool(finite)
    assert float(worst) < 1e-5, float(worst)
    assert all(bool(jnp.all(jnp.isfinite(leaf))) for leaf in jax.tree.leaves(state)), name


@pytest.mark.parametrize(
    ("cls", "kwargs", "error", "match"),
    [
        (Exp3S, {"num_switches": -1}, ValueError, "num_switches must be >= 0, got -1"),
        (Exp3S, {"num_switches": 2.5}, TypeError, "num_switches must be an int"),
        (Exp3S, {"gamma": 1.5}, ValueError, r"gamma must be in \[0, 1\], got 1.5"),
        (Exp3S, {"alpha": -0.1}, ValueError, "alpha must be a finite number >= 0, got -0.1"),
        (Exp3S, {"alpha": math.nan}, ValueError, "alpha must be a finite number >= 0"),
        (Exp3S, {"alpha": "0.5"}, TypeError, "alpha must be a real number, got '0.5'"),
        (Exp3S, {"alpha": True}, TypeError, "alpha must be a real number, got True"),
        (DUCB, {"discount": 0.0}, ValueError, r"discount must be in \(0, 1\]"),
        (DUCB, {"discount": 1.2}, ValueError, r"discount must be in \(0, 1\].*1.2"),
        (DUCB, {"discount": "0.5"}, TypeError, "discount must be a real number, got '0.5'"),
        (DUCB, {"num_changes": -2}, ValueError, "num_changes must be >= 0, got -2"),
        (DUCB, {"xi": 0.0}, ValueError, "xi must be a finite number > 0, got 0.0"),
        (SWUCB, {"window": 0}, ValueError, "window must be >= 1, got 0"),
        (SWUCB, {"window": 129}, ValueError, r"window must be in \[1, horizon=128\], got 129"),
        (SWUCB, {"window": 8.0}, TypeError, "window must be an int"),
        (SWUCB, {"xi": -1.0}, ValueError, "xi must be a finite number > 0, got -1.0"),
        (Exp3IX, {"num_arms": 1}, ValueError, "num_arms must be >= 2, got 1"),
        (DiscountedThompson, {"discount": 0.0}, ValueError, r"discount must be in \(0, 1\]"),
        (DiscountedThompson, {"discount": 1.5}, ValueError, r"discount must be in \(0, 1\]"),
        (SWThompson, {"window": 0}, ValueError, "window must be >= 1, got 0"),
        (SWThompson, {"window": T + 1}, ValueError, rf"window must be in \[1, horizon={T}\]"),
        (SAOL, {"history_lengths": (8, 4)}, ValueError, "strictly increasing"),
        (SAOL, {"round_offset": 2}, ValueError, "round_offset must be one of"),
        (SAOL, {"feedback": "regret"}, ValueError, "feedback must be one of"),
        (SAOLHedge, {"horizon": 8}, ValueError, "horizon=8 is too small"),
        (SAOLHedge, {"round_offset": -1}, ValueError, "round_offset must be one of"),
        (StABLOneQuery, {"observation": "importance"}, ValueError, "observation must be one of"),
        (StABLOneQuery, {"feedback": "regret"}, ValueError, "feedback must be one of"),
        (StABLAnytime, {"feedback": "regret"}, ValueError, "feedback must be one of"),
        (StABLAnytime, {"history_lengths": (0, 4)}, ValueError, "positive ints"),
        (StABLAnytime, {"dtype": "float16"}, ValueError, "dtype must be one of"),
        (EFLH, {"epsilon": 0.0}, ValueError, "epsilon"),
    ],
)
def test_bad_options_are_named(cls, kwargs, error, match):
    with pytest.raises(error, match=match):
        cls(**{"num_arms": N, "horizon": T, **kwargs})


def test_configs_name_the_baselines_with_options_and_params():
    learners = f"learners={list(BASELINES)!r}".replace("'", '"')
    options = ("exp3s.num_switches=5", "sw_ucb.window=100", "d_ucb.num_changes=1")
    params = ("exp3_ix.lr_scale=4", "d_ucb.explore_scale=0.5")
    overrides = [learners, *(f"learner_options.{o}" for o in options)]
    cfg = load_config("expert_advice_equal", [*overrides, *(f"params.{p}" for p in params)])
    assert cfg.learners == BASELINES
    exp3s = cfg.make_learner("exp3s")
    assert exp3s.num_switches == 5  # S = 6 on K = 30 arms, T = 4096
    assert exp3s.gamma == pytest.approx(reference_baselines.exp3s_gamma(30, 4096, 6))
    assert cfg.make_learner("sw_ucb").window == 100
    d_ucb = cfg.make_learner("d_ucb")
    assert d_ucb.discount == pytest.approx(reference_baselines.default_discount(4096, 1))
    assert float(cfg.learner_params(d_ucb, "d_ucb").explore_scale) == 0.5
    ix = cfg.make_learner("exp3_ix")
    assert float(cfg.learner_params(ix, "exp3_ix").lr_scale) == 4.0


def test_config_rejects_a_bad_baseline_option():
    bad = ['learners=["sw_ucb"]', "learner_options.sw_ucb.window=0"]
    with pytest.raises(ConfigError, match=r"learner_options\.sw_ucb"):
        load_config("expert_advice_equal", bad)
    with pytest.raises(ConfigError, match=r"params\.d_ucb\.lr_scale"):
        load_config("expert_advice_equal", ['learners=["d_ucb"]', "params.d_ucb.lr_scale=2"])


@pytest.mark.parametrize("num_arms", [2, 5, 64, 1000])
def test_tsallis_newton_normalises_to_rounding(num_arms):
    """Tsallis-INF's Newton normaliser against Brent's of the reference, from equal estimates
    (the farthest start) to spreads of 1e4, at small and large eta."""
    rng = np.random.default_rng(num_arms)
    with jax.enable_x64(True):
        weights = jax.jit(tsallis_weights)
        for spread in (0.0, 1.0, 100.0, 1e4):
            for eta in (2.0, 2.0 / np.sqrt(1e6)):
                losses = rng.uniform(0.0, spread, num_arms) if spread else np.zeros(num_arms)
                w = np.asarray(weights(jnp.asarray(losses), jnp.float64(eta)))
                assert abs(w.sum() - 1.0) < 1e-12, (spread, eta, w.sum())
                want = reference_baselines.tsallis_weights_reference(losses, eta)
                np.testing.assert_allclose(w, want, rtol=1e-9)


# (alpha, beta) posterior states: the prior, densities unbounded at 0 or 1 (alpha or beta < 1),
# moderately and highly concentrated posteriors, near-ties, and an arm far behind.
STATES = [
    ([1.0, 1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]),
    ([0.5, 2.0, 1.0, 3.0, 0.3], [0.5, 1.0, 4.0, 2.0, 0.7]),
    ([0.3, 0.3, 1.3, 0.3, 0.3], [0.3, 3.3, 0.3, 0.3, 0.3]),
    ([31.0, 30.0, 5.0, 2.0, 60.0], [33.0, 30.0, 9.0, 1.0, 2.0]),
    ([500.0, 480.0, 100.0, 3.0, 510.0], [500.0, 520.0, 110.0, 1.0, 490.0]),
    ([1.0, 1.0, 1.0, 1.0, 2.0], [500.0, 400.0, 300.0, 1000.0, 2.0]),
    ([5000.5, 5001.0, 4990.0, 100.0, 1.0], [5000.0, 5001.5, 5010.0, 100.0, 1.0]),
]


@pytest.mark.parametrize("state", STATES, ids=lambda s: f"a={s[0]}")
def test_argmax_probabilities_match_adaptive_quadrature(state):
    """In float64 and float32, against one quadrature of the state."""
    alpha, beta = (np.asarray(v) for v in state)
    expected = reference_baselines.argmax_probabilities_reference(alpha, beta)
    assert abs(expected.sum() - 1.0) < PROB_TOL / 10  # the reference is itself accurate
    for dtype in ("float64", "float32"):
        with jax.enable_x64(True):
            args = (jnp.asarray(alpha, dtype), jnp.asarray(beta, dtype))
            got = jax.jit(argmax_probabilities)(*args)
            assert got.dtype == jnp.dtype(dtype)
        np.testing.assert_allclose(np.asarray(got, np.float64), expected, atol=PROB_TOL, rtol=0)


def test_played_arms_follow_the_computed_probabilities():
    """At one posterior, 20,000 keys' played arms match ``play_probs`` within 4.5 standard
    errors per arm."""
    learner = Thompson(num_arms=NUM_ARMS, horizon=HORIZON)
    state = learner.init(jax.random.key(0))
    wins, fails = jnp.array([3.0, 5.0, 0.0, 8.0, 2.0]), jnp.array([2.0, 6.0, 0.0, 9.0, 3.0])
    state = state.replace(successes=wins, failures=fails)
    n = 20_000
    keys = jax.random.split(jax.random.key(7), n)

    def ask(keys):  # the arms of every key, and the play distribution, in one program
        arms = jax.vmap(lambda k: learner.ask(state, k).arms[0])(keys)
        return arms, learner.ask(state, keys[0]).play_probs

    arms, probs = jax.jit(ask)(keys)
    probs = np.asarray(probs, np.float64)
    freq = np.bincount(np.asarray(arms), minlength=NUM_ARMS) / n
    se = np.sqrt(probs * (1.0 - probs) / n)
    assert probs.min() > 0.05  # every arm is tested where its frequency is informative
    np.testing.assert_array_less(np.abs(freq - probs), 4.5 * se)


@pytest.mark.parametrize("horizon", [1, 2, 3, 7, 64, 100, 1000])
def test_flh_capacity_is_the_largest_working_set(horizon):
    """``num_queries`` is the largest ``|S_tau|``, ``tau <= T + 1``, of the papers' rules:
    O(log T) for FLH, O(log log T / eps) for EFLH."""
    sets, sizes = {1}, [1]
    for tau in range(2, horizon + 2):
        sets = ref_family.flh_working_set(sets, tau)
        sizes.append(len(sets))
    assert flh_capacity(horizon) == max(sizes) <= 3 * math.log2(horizon + 1) + 2
    for epsilon in (1.0, 0.5, 0.25):
        lookback = ref_family.eflh_working_set(ref_family.eflh_lengths(horizon, epsilon))
        most = max(len(lookback(set(), tau)) for tau in range(1, horizon + 2))
        assert eflh_capacity(horizon, epsilon) == most
        assert most <= math.log(math.log2(horizon + 2) + 1, 1 + epsilon) + 2


def test_flh_keeps_an_expert_in_every_first_half():
    """The pruning lemma: for every ``s <= tau``, ``S_tau`` holds an expert started in
    ``[s, (s + tau) / 2]``."""
    sets = {1}
    for tau in range(2, 300):
        sets = ref_family.flh_working_set(sets, tau)
        for s in range(1, tau + 1):
            assert any(s <= i <= (s + tau) / 2 for i in sets), (tau, s)


@pytest.mark.parametrize(("horizon", "epsilon", "counts"), [(T_FLH, 1.0, None),
                                                         (4096, 0.25, (9, 10)),
                                                         (65536, 0.25, (11, 12))])  # fmt: skip
def test_eflh_lengths_and_query_counts_follow_the_papers_rules(horizon, epsilon, counts):
    """EFLH's lengths, and SAOL's on EFLH's, against the reference's rules; ``eflh`` queries
    the largest ``|S_tau|`` of the lookback rule, ``eflh_saol`` ``1 +`` its number of lengths
    (at the default ``eps = 0.25``, inside ``(0, 1/2)``: ``counts``); SAOL's ``scales="all"``
    every dyadic scale."""
    eflh = make("eflh", num_arms=4, horizon=horizon, epsilon=epsilon)
    assert list(eflh.lengths) == ref_family.eflh_lengths(horizon, epsilon)
    lookback = ref_family.eflh_working_set(list(eflh.lengths))
    most = max(len(lookback(set(), tau)) for tau in range(1, horizon + 2))
    adaptive = make("eflh_saol", num_arms=4, horizon=horizon, epsilon=epsilon)
    assert list(adaptive.history_lengths) == ref_family.eflh_saol_lengths(horizon, epsilon)
    queries = (eflh.num_queries, adaptive.num_queries)
    assert queries == (most, 1 + len(adaptive.history_lengths))
    if counts is not None:
        assert make("eflh", num_arms=4, horizon=horizon).epsilon == epsilon and queries == counts
    dyadic = make("saol", num_arms=4, horizon=T_FLH, scales="all")
    assert list(dyadic.history_lengths) == ref_family.dyadic_lengths(T_FLH)
