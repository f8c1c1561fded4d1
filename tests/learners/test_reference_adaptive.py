"""``stabl_adaptive`` against the independent NumPy loop of ``reference_adaptive.py``, step
by step (the pattern of ``test_reference_stabl_family.py``: the learner's per-round
uniforms recomputed from the same keys, float64 on both sides, arms exact, every distribution
and rate to 1e-9 relative), and its limits.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import sampling
from stabl_jax.learners import StABLAdaptive
from tests.learners import reference_adaptive as ref_adaptive

T, N = 150, 6
SCALES = ("meta_lr_scale", "expert_lr_scale")


def _ids(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items()) or "default"


def _close(actual, desired, what: str) -> None:
    np.testing.assert_allclose(np.asarray(actual), desired, rtol=1e-9, atol=1e-300, err_msg=what)


def _run(options: dict, seed: int = 0):
    """Learner trajectory (one jitted scan) and reference output for the same uniforms."""
    options = dict(options)
    scales = {k: options.pop(k) for k in SCALES if k in options}
    learner = StABLAdaptive(num_arms=N, horizon=T, dtype="float64", **options)
    params = learner.default_params.replace(**{k: np.float64(v) for k, v in scales.items()})
    state = learner.init(jax.random.key(seed), params)
    keys = jax.random.split(jax.random.key(seed + 1), T)
    us = np.stack([np.asarray(sampling.uniforms(k, 2, "float64")) for k in keys])
    losses = np.random.default_rng(seed + 2).uniform(size=(T, N))
    assert learner.history_lengths is not None  # the constructor fills it in
    ref = ref_adaptive.stabl_adaptive_reference(
        losses, us, learner.history_lengths, feedback=options.get("feedback", "loss"), **scales
    )

    def body(state, xs):
        loss, key = xs
        v, meta, mix, obs = learner.distributions(state)
        expert_rate, meta_rate = learner.rates(state)
        rec = {
            "v": v,
            "p": meta,
            "mix": mix,
            "obs": obs,
            "expert_rate": expert_rate,
            "meta_rate": meta_rate,
            "active": learner.active(state.t).sum(),
        }
        state, info = learner.step(state, loss, key)
        return state, (rec, info.arms)

    final, (rec, arms) = jax.jit(lambda s: jax.lax.scan(body, s, (losses, keys)))(state)
    return jax.tree.map(np.asarray, rec), np.asarray(arms), final, ref


@pytest.mark.parametrize(
    "options",
    [
        {},  # lengths (32, 64, 128): B_t goes 1 -> 2 -> 3 at t = 32, 64
        {"feedback": "reward", "history_lengths": (4, 16, 64), "expert_lr_scale": 3.0},
        # muting: a meta scale above 1 lets 1 + eta r~ reach 0
        {"history_lengths": (2, 5, 11, 30), "meta_lr_scale": 50.0, "expert_lr_scale": 3.0},
    ],
    ids=_ids,
)
def test_stabl_adaptive_matches_reference(options):
    with jax.enable_x64(True):
        rec, arms, final, ref = _run(options)
    np.testing.assert_array_equal(rec["active"], ref["num_active"])
    np.testing.assert_array_equal(arms[:, 0], ref["played"])
    np.testing.assert_array_equal(arms[:, 1], ref["observed"])
    _close(rec["expert_rate"], ref["expert_rates"], "eta'")
    _close(rec["meta_rate"], ref["meta_rates"], "eta")
    _close(rec["v"], ref["expert_probs"], "v")
    _close(rec["p"], ref["meta_probs"], "p")
    _close(rec["mix"], ref["play_probs"], "mix")
    _close(rec["obs"], ref["obs_probs"], "P")
    assert int(final.num_muted) == ref["muted"]
    if options.get("meta_lr_scale", 1.0) > 1:
        assert ref["muted"] > 0, "this case is meant to exercise muting"
    else:
        assert ref["muted"] == 0, "the cap eta <= 1/(2 E_t) rules muting out at scale 1"


def test_rates_are_data_dependent_and_non_increasing():
    """V and R grow by the observed second moments, so both rates fall within a block and jump
    back at the restart; the meta cap 1/(2 E_t) binds at the start."""
    with jax.enable_x64(True):
        rec, _, final, _ = _run({"history_lengths": (50, 150)})
    expert, meta = rec["expert_rate"], rec["meta_rate"]
    _close(expert[0], np.full(2, math.sqrt(math.log(N))), "eta'(0)")
    _close(meta[0], np.full(2, 1.0 / 4.0), "eta(0) = 1/(2 E_0), B_0 = 1")
    block = slice(0, 50)
    assert np.all(np.diff(expert[block], axis=0) <= 0.0)
    assert np.all(np.diff(meta[block], axis=0) <= 0.0)
    assert expert[49, 0] < 0.5 * expert[0, 0], "the losses must have moved V"
    _close(expert[50, 0], math.sqrt(math.log(N)), "restart of expert 0")
    assert np.all(np.isfinite(np.asarray(final.meta_log_pseudo)))


def test_one_expert_is_self_confident_exp3():
    """One history length covering the horizon: the meta-learner is trivial (p = 1), P(t) =
    (v^2/|v|^2 + v)/2 and the experts are exponential weights on the importance-weighted
    estimates with eta' = sqrt(ln n / (1 + V)): a direct loop over the same draws."""
    with jax.enable_x64(True):
        rec, arms, _, _ = _run({"history_lengths": (T,)})
        losses = np.random.default_rng(2).uniform(size=(T, N))
    cum, V = np.zeros(N), 0.0
    for t in range(T):
        eta = math.sqrt(math.log(N) / (1.0 + V))
        z = np.exp(-eta * (cum - cum.min()))
        v = z / z.sum()
        P = 0.5 * v**2 / np.sum(v**2) + 0.5 * v
        _close(rec["v"][t, 0], v, f"v at t={t}")
        _close(rec["obs"][t], P, f"P at t={t}")
        assert rec["p"][t, 0] == 1.0
        xo = arms[t, 1]
        c = losses[t, xo] / P[xo]
        cum[xo] += c
        V += v[xo] * c * c


def test_stays_finite_on_adversarial_tiny_probabilities():
    """float32, losses that drive the observed arm's probability towards 0: every rate and
    weight stays finite and no muting happens at scale 1."""
    learner = StABLAdaptive(num_arms=4, horizon=256, history_lengths=(16, 256))
    state = learner.init(jax.random.key(0))
    loss = jnp.asarray([0.0, 1.0, 1.0, 1.0], jnp.float32)

    def body(state, key):
        state, _ = learner.step(state, loss, key)
        return state, None

    state, _ = jax.lax.scan(body, state, jax.random.split(jax.random.key(1), 256))
    for leaf in jax.tree.leaves(state):
        assert np.all(np.isfinite(np.asarray(leaf, dtype=np.float64)))
    assert int(state.num_muted) == 0


@pytest.mark.parametrize("history_lengths", [(32, 64, 128), (2, 5, 11, 30)], ids=str)
def test_meta_rates_stay_above_the_bound_the_underflow_check_uses(history_lengths):
    """``smallest_base_meta_step_size()`` (``min(1/(2E), 1/(E sqrt m))``, ``E = 2B``) is at
    most every active expert's meta rate of every round, on 0/1 losses (the largest regrets):
    the underflow check that uses it refuses only scales that could underflow. Anytime
    StABL's bound, ``min(1/(2 sqrt n), 1/sqrt(n m))``, would not be one (0.0745 against a
    realised 0.0625 for the second lengths)."""
    learner = StABLAdaptive(num_arms=N, horizon=T, history_lengths=history_lengths)
    losses = jnp.asarray(np.random.default_rng(0).uniform(size=(T, N)) < 0.5, jnp.float32)

    def body(state, xs):
        loss, key = xs
        rate = jnp.where(learner.active(state.t), learner.rates(state)[1], jnp.inf)
        state, _ = learner.step(state, loss, key)
        return state, rate.min()

    keys = jax.random.split(jax.random.key(1), T)
    run = jax.jit(lambda s: jax.lax.scan(body, s, (losses, keys))[1])
    realised = np.asarray(run(learner.init(jax.random.key(0))))
    bound = learner.smallest_base_meta_step_size()
    e, m = 2 * len(history_lengths), min(max(history_lengths), T)
    assert bound == min(0.5 / e, 1 / (e * math.sqrt(m)))
    assert realised.min() >= bound, (realised.min(), bound)
