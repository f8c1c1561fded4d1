"""JAX learners against the independent NumPy reference (``reference.py``), step by step.

Both are fed the same random draws: the learner's per-round uniforms are recomputed with
``stabl_jax.sampling.uniforms`` from the same key and handed to the reference. Float64 on both
sides (inverse-CDF boundaries then agree), so arms must match exactly and every distribution
to 1e-10.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from stabl_jax import EXP3, StABL, sampling
from stabl_jax.learners import StABLRateGrid
from tests.learners import reference

T, N = 150, 6


def _run_jax(learner, losses: np.ndarray, seed: int):
    """Step the learner; return its per-round infos/states and the uniforms it used."""
    step = jax.jit(learner.step)
    state = learner.init(jax.random.key(seed))
    keys = jax.random.split(jax.random.key(seed + 1), losses.shape[0])
    records = []
    us = []
    for t in range(losses.shape[0]):
        us.append(np.asarray(sampling.uniforms(keys[t], learner.num_queries, "float64")))
        before = state
        state, info = step(state, losses[t], keys[t])
        records.append((before, info))
    return records, state, np.stack(us)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"gamma": 0.3},
        {"gamma": 1.0},
        {"feedback": "reward", "gamma": 0.1},
    ],
)
def test_exp3_matches_reference(options):
    rng = np.random.default_rng(1)
    losses = rng.uniform(size=(T, N))
    with jax.enable_x64(True):
        learner = EXP3(num_arms=N, horizon=T, dtype="float64", **options)
        records, final, us = _run_jax(learner, losses, seed=3)
        ref = reference.exp3_reference(losses, us, **options)
        for t, (before, info) in enumerate(records):
            assert int(info.arms[0]) == ref["played"][t], t
            np.testing.assert_allclose(info.play_probs, ref["play_probs"][t], rtol=1e-10)
            np.testing.assert_allclose(np.exp(before.log_weights), ref["weights"][t], rtol=1e-10)
        np.testing.assert_allclose(np.exp(final.log_weights), ref["weights"][T], rtol=1e-10)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"observation": "uniform"},
        {"feedback": "reward"},
        {"round_offset": 1},
        {"expert_c": "2logT"},
        {"history_lengths": (3, 7, 20)},
        {"history_lengths": (5,), "meta_lr_scale": 1.0},
        {"history_lengths": (2, 4, 8, 16), "meta_lr_scale": 40.0},  # forces muting
        {"expert_lr_scale": 5.0, "feedback": "reward", "history_lengths": (4, 16, 64)},
        {"rate_grid": (1.0, 16.0, 256.0), "history_lengths": (4, 16, 64)},
        {"rate_grid": (0.5, 30.0), "feedback": "reward", "meta_lr_scale": 20.0},
        {"rate_grid": (1.0, 8.0), "scale_meta": False, "history_lengths": (4, 16)},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default",
)
def test_stabl_matches_reference(options):
    """StABL, and the rate-grid variant as StABL over every (length, scale) pair."""
    options = dict(options)
    scales = {k: options.pop(k) for k in ("meta_lr_scale", "expert_lr_scale") if k in options}
    rng = np.random.default_rng(2)
    losses = rng.uniform(size=(T, N))
    with jax.enable_x64(True):
        cls = StABLRateGrid if "rate_grid" in options else StABL
        learner = cls(num_arms=N, horizon=T, dtype="float64", **options)
        params = learner.default_params.replace(**{k: np.float64(v) for k, v in scales.items()})
        step = jax.jit(learner.step)
        state = learner.init(jax.random.key(5), params)
        keys = jax.random.split(jax.random.key(6), T)
        us = np.stack([np.asarray(sampling.uniforms(k, 2, "float64")) for k in keys])
        grid_options = ("history_lengths", "rate_grid", "scale_meta")
        ref_options = {k: v for k, v in options.items() if k not in grid_options}
        lengths = learner.history_lengths
        if "rate_grid" in options:  # every (length, scale) pair is an expert, index k S + j
            grid = options["rate_grid"]
            lengths = [L for L in learner.history_lengths for _ in grid]
            ref_options["rate_scales"] = list(grid) * len(learner.history_lengths)
            if options.get("scale_meta", True):  # expert (k, j)'s meta step s_j eta_k
                ref_options["meta_scales"] = ref_options["rate_scales"]
        ref = reference.stabl_reference(losses, us, lengths, horizon=T, **ref_options, **scales)
        for t in range(T):
            v, mix, obs = learner.distributions(state)
            np.testing.assert_allclose(v, ref["expert_probs"][t], rtol=1e-9, atol=1e-300)
            np.testing.assert_allclose(mix, ref["play_probs"][t], rtol=1e-9)
            np.testing.assert_allclose(obs, ref["obs_probs"][t], rtol=1e-9)
            np.testing.assert_allclose(
                np.exp(state.meta_log_weights), ref["meta_weights"][t], rtol=1e-9
            )
            state, info = step(state, losses[t], keys[t])
            assert int(info.arms[0]) == ref["played"][t], t
            assert int(info.arms[1]) == ref["observed"][t], t
            np.testing.assert_allclose(float(info.loss), ref["suffered"][t], rtol=1e-12)
            np.testing.assert_allclose(float(info.expected_loss), ref["expected"][t], rtol=1e-9)
        np.testing.assert_allclose(
            np.exp(state.meta_log_weights), ref["meta_weights"][T], rtol=1e-9
        )
        assert int(state.num_muted) == ref["muted"]
        if scales.get("meta_lr_scale", 1.0) > 10:
            assert ref["muted"] > 0, "this case is meant to exercise muting"
