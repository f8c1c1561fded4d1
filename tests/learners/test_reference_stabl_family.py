"""Hedge, SAOL (full information and bandit), one-query StABL and anytime StABL against the
independent NumPy loops of ``reference_stabl_family.py``, step by step.

As in ``test_reference.py``: the learner's per-round uniforms are recomputed with
``stabl_jax.sampling.uniforms`` from the same key (with the count the learner draws) and handed
to the reference; float64 on both sides, so arms must match exactly and every distribution to
1e-9 (relative).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import sampling
from stabl_jax.learners import SAOL, Hedge, SAOLHedge, StABLAnytime, StABLOneQuery
from tests.learners import reference_stabl_family as ref_family

T, N = 150, 6
SCALES = ("meta_lr_scale", "expert_lr_scale", "lr_scale")


def _ids(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items()) or "default"


def _setup(cls, options: dict, num_uniforms=None, seed: int = 0):
    """Learner (float64), initial state, keys, the uniforms and the losses."""
    options = dict(options)
    scales = {k: options.pop(k) for k in SCALES if k in options}
    learner = cls(num_arms=N, horizon=T, dtype="float64", **options)
    params = learner.default_params.replace(**{k: np.float64(v) for k, v in scales.items()})
    state = learner.init(jax.random.key(seed), params)
    keys = jax.random.split(jax.random.key(seed + 1), T)
    count = learner.num_queries if num_uniforms is None else num_uniforms
    us = np.stack([np.asarray(sampling.uniforms(k, count, "float64")) for k in keys])
    losses = np.random.default_rng(seed + 2).uniform(size=(T, N))
    return learner, state, keys, us, losses, options, scales


def _trajectory(learner, state, losses, keys, record):
    """One ``lax.scan`` over the rounds (one compile; the contract tests check that scan equals
    the Python loop). Returns ``record(state)`` before every round stacked ``(T, ...)``, the
    queried arms ``(T, num_queries)`` and the final state."""

    def body(state, xs):
        loss, key = xs
        before = record(state)
        state, info = learner.step(state, loss, key)
        return state, (before, info.arms)

    final, (records, arms) = jax.jit(lambda s: jax.lax.scan(body, s, (losses, keys)))(state)
    return jax.tree.map(np.asarray, records), np.asarray(arms), final


def _close(actual, desired, what: str) -> None:
    np.testing.assert_allclose(np.asarray(actual), desired, rtol=1e-9, atol=1e-300, err_msg=what)


@pytest.mark.parametrize("options", [{"lr_scale": 3.0}], ids=_ids)
def test_hedge_matches_reference(options):
    with jax.enable_x64(True):
        learner, state, keys, us, losses, _, scales = _setup(Hedge, options, 1)
        ref = ref_family.hedge_reference(losses, us, **scales)
        w, arms, final = _trajectory(learner, state, losses, keys, lambda s: jnp.exp(s.log_weights))
        np.testing.assert_array_equal(arms, ref["arms"])
        _close(w, ref["weights"][:T], "weights")
        _close(np.exp(final.log_weights), ref["weights"][T], "final weights")


def _saol_record(learner):
    def record(state):
        v, _, mix = learner.distributions(state)
        return {"v": v, "mix": mix, "w": jnp.exp(state.meta_log_weights)}

    return record


@pytest.mark.parametrize(
    "options",
    [
        {},
        # round_offset 1, and muting (eta = 8 on L = 2: 1 + eta r <= 0 once r <= -1/8)
        {
            "history_lengths": (2, 5, 16),
            "round_offset": 1,
            "meta_lr_scale": 16.0,
            "expert_lr_scale": 10.0,
        },
    ],
    ids=_ids,
)
def test_saol_hedge_matches_reference(options):
    with jax.enable_x64(True):
        learner, state, keys, us, losses, opts, scales = _setup(SAOLHedge, options, 1)
        ref = ref_family.saol_hedge_reference(
            losses, us, learner.history_lengths, round_offset=opts.get("round_offset", 0), **scales
        )
        rec, arms, final = _trajectory(learner, state, losses, keys, _saol_record(learner))
        np.testing.assert_array_equal(arms[:, 0], ref["played"])
        np.testing.assert_array_equal(arms, (ref["played"][:, None] + np.arange(N)) % N)
        _close(rec["v"], ref["expert_probs"], "v")
        _close(rec["mix"], ref["play_probs"], "mix")
        _close(rec["w"], ref["meta_weights"][:T], "w")
        _close(np.exp(final.meta_log_weights), ref["meta_weights"][T], "final w")
        assert int(final.num_muted) == ref["muted"]
        if scales.get("meta_lr_scale", 1.0) >= 2.0:
            assert ref["muted"] > 0, "this case is meant to exercise muting"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {
            "feedback": "reward",
            "history_lengths": (3, 7, 20),
            "round_offset": 1,
            "expert_lr_scale": 4.0,
        },
        {"history_lengths": (2, 4, 16), "meta_lr_scale": 4.0},  # eta = 2 on L <= 4: muting
    ],
    ids=_ids,
)
def test_saol_matches_reference(options):
    with jax.enable_x64(True):
        learner, state, keys, us, losses, opts, scales = _setup(SAOL, options)
        assert learner.num_queries == 1 + learner.num_experts
        ref = ref_family.saol_reference(
            losses,
            us,
            learner.history_lengths,
            round_offset=opts.get("round_offset", 0),
            feedback=opts.get("feedback", "loss"),
            **scales,
        )
        rec, arms, final = _trajectory(learner, state, losses, keys, _saol_record(learner))
        np.testing.assert_array_equal(arms, ref["arms"])
        _close(rec["v"], ref["expert_probs"], "v")
        _close(rec["mix"], ref["play_probs"], "mix")
        _close(rec["w"], ref["meta_weights"][:T], "w")
        _close(np.exp(final.meta_log_weights), ref["meta_weights"][T], "final w")
        assert int(final.num_muted) == ref["muted"]
        if scales.get("meta_lr_scale", 1.0) >= 2.0:
            assert ref["muted"] > 0, "this case is meant to exercise muting"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {
            "feedback": "reward",
            "expert_lr_scale": 5.0,
            "history_lengths": (3, 7, 20),
            "round_offset": 1,
        },
        # muting: v_k(x)/mix(x) > 1 + 1/(eta_k l(x)) once experts disagree
        {"history_lengths": (2, 4, 8, 16), "meta_lr_scale": 20.0, "expert_lr_scale": 10.0},
    ],
    ids=_ids,
)
def test_stabl_one_query_matches_reference(options):
    with jax.enable_x64(True):
        learner, state, keys, us, losses, opts, scales = _setup(StABLOneQuery, options)
        assert learner.num_queries == 1
        ref = ref_family.stabl_one_query_reference(
            losses,
            us,
            learner.history_lengths,
            round_offset=opts.get("round_offset", 0),
            feedback=opts.get("feedback", "loss"),
            **scales,
        )

        def record(state):
            v, mix, obs = learner.distributions(state)
            return {"v": v, "mix": mix, "obs": obs, "w": jnp.exp(state.meta_log_weights)}

        rec, arms, final = _trajectory(learner, state, losses, keys, record)
        np.testing.assert_array_equal(arms[:, 0], ref["played"])
        np.testing.assert_array_equal(rec["obs"], rec["mix"])
        _close(rec["v"], ref["expert_probs"], "v")
        _close(rec["mix"], ref["play_probs"], "mix")
        _close(rec["w"], ref["meta_weights"][:T], "w")
        _close(np.exp(final.meta_log_weights), ref["meta_weights"][T], "final w")
        assert int(final.num_muted) == ref["muted"]
        if scales.get("meta_lr_scale", 1.0) > 10:
            assert ref["muted"] > 0, "this case is meant to exercise muting"


@pytest.mark.parametrize(
    "options",
    [
        {},  # lengths (32, 64, 128): B_t goes 1 -> 2 -> 3 at t = 32, 64
        {
            "feedback": "reward",
            "history_lengths": (4, 16, 64),
            "expert_lr_scale": 8.0,
            "meta_lr_scale": 0.5,
        },
        # muting: 2 B_t eta > 1 right after restarts
        {"history_lengths": (2, 5, 11, 30), "meta_lr_scale": 10.0, "expert_lr_scale": 10.0},
    ],
    ids=_ids,
)
def test_stabl_anytime_matches_reference(options):
    with jax.enable_x64(True):
        learner, state, keys, us, losses, opts, scales = _setup(StABLAnytime, options)
        ref = ref_family.stabl_anytime_reference(
            losses, us, learner.history_lengths, feedback=opts.get("feedback", "loss"), **scales
        )

        def record(state):
            v, meta, mix, obs = learner.distributions(state)
            active = learner.active(state.t).sum()
            return {"v": v, "p": meta, "mix": mix, "obs": obs, "active": active}

        rec, arms, final = _trajectory(learner, state, losses, keys, record)
        np.testing.assert_array_equal(rec["active"], ref["num_active"])
        np.testing.assert_array_equal(arms[:, 0], ref["played"])
        np.testing.assert_array_equal(arms[:, 1], ref["observed"])
        _close(rec["v"], ref["expert_probs"], "v")
        _close(rec["p"], ref["meta_probs"], "p")
        _close(rec["mix"], ref["play_probs"], "mix")
        _close(rec["obs"], ref["obs_probs"], "P")
        assert int(final.num_muted) == ref["muted"]
        if scales.get("meta_lr_scale", 1.0) > 5:
            assert ref["muted"] > 0, "this case is meant to exercise muting"
