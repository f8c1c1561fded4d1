"""Long float32 runs, and float32 against float64.

T = 2^20 rounds with n = 30 arms: StABL (B = 14 experts, L_k = 2^6 .. 2^20) and EXP3 on four
2^18-round segments of expert advice; n = 10^4 arms over T = 2^14 rounds: StABL (B = 9 experts)
and EXP3, one run each. Every round the play distribution and StABL's P(t) are finite,
non-negative and sum to 1 within ``4 n eps`` (:func:`stabl_jax.checks.distribution_tolerance`);
every state leaf ends finite. float32 against float64: 32 paired StABL runs on the same
environment draws; the float64 learner draws its own uniforms (the pairs part ways at round 0
or 1), so the mean paired difference of the per-run mean loss and probability of the best arm
must lie within ``Z = 5`` standard errors of 0.

:func:`long_run` plays with the round randomness of ``simulate`` (the keys of
:func:`stabl_jax.simulate._round`) and keeps nothing per round: the scan carries, over rounds and
runs, the largest ``|sum - 1|`` of the play distribution (``play_dev``) and of StABL's
observation distribution ``P(t)`` (``obs_dev``; the play distribution for other learners), the
smallest entry of either, whether any entry was not finite, and the sums of ``l_t(x_t)`` and
``<p_t, l_t>`` (reported as means)."""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import ExpertAdvice, SimOptions, StABL, make, simulate
from stabl_jax.checks import distribution_tolerance
from stabl_jax.simulate import init_runs, run_keys

pytestmark = [pytest.mark.slow, pytest.mark.optimized]

Z = 5.0


@dataclasses.dataclass
class LongRun:
    play_dev: float
    obs_dev: float
    min_prob: float
    nonfinite: bool
    loss: float
    expected_loss: float
    state: Any  # final learner states, runs-leading
    seconds: float


def _round(learner: Any, env: Any, carry: tuple, t: jax.Array) -> tuple[tuple, None]:
    run, stats = carry
    loss = env.loss(run.env_params, t, jax.random.fold_in(run.env_key, t))
    state, info = learner.step(run.state, loss, jax.random.fold_in(run.learner_key, t))
    play = info.play_probs
    obs = learner.distributions(run.state)[2] if hasattr(learner, "distributions") else play
    both = jnp.concatenate([play, obs])
    stats = dict(
        play_dev=jnp.maximum(stats["play_dev"], jnp.abs(jnp.sum(play) - 1.0)),
        obs_dev=jnp.maximum(stats["obs_dev"], jnp.abs(jnp.sum(obs) - 1.0)),
        min_prob=jnp.minimum(stats["min_prob"], jnp.min(both)),
        nonfinite=stats["nonfinite"] | ~jnp.all(jnp.isfinite(both)),
        loss=stats["loss"] + info.loss.astype(jnp.float32),
        expected_loss=stats["expected_loss"] + info.expected_loss,
    )
    return (run.replace(state=state), stats), None


@partial(jax.jit, static_argnames=("learner", "env", "length"))
def _chunk(learner: Any, env: Any, carry: tuple, t0: jax.Array, length: int) -> tuple:
    ts = t0 + jnp.arange(length, dtype=jnp.int32)

    def one(c: tuple) -> tuple:
        return jax.lax.scan(partial(_round, learner, env), c, ts)[0]

    return jax.vmap(one)(carry)


def long_run(
    learner: Any, env: Any, key: jax.Array, num_runs: int, horizon: int, chunk: int
) -> LongRun:
    """Play ``num_runs`` runs of ``horizon`` rounds in chunks of ``chunk`` rounds (the loss
    sums are kept per chunk in float32 and added up in float64 on the host)."""
    start = time.perf_counter()
    run = init_runs(learner, env, run_keys(key, num_runs), learner.default_params)
    dtype = learner.float_dtype
    zeros = jnp.zeros((num_runs,), dtype)
    loss_total = expected_total = 0.0
    maxima: dict[str, Any] = dict(play_dev=0.0, obs_dev=0.0, min_prob=np.inf, nonfinite=False)
    for t0 in range(0, horizon, chunk):
        stats = dict(play_dev=zeros, obs_dev=zeros, min_prob=jnp.ones((num_runs,), dtype))
        stats.update(nonfinite=jnp.zeros((num_runs,), bool), expected_loss=zeros)
        stats["loss"] = jnp.zeros((num_runs,), jnp.float32)
        length = min(chunk, horizon - t0)
        run, stats = _chunk(learner, env, (run, stats), jnp.asarray(t0, jnp.int32), length)
        stats = jax.device_get(stats)
        maxima["play_dev"] = max(maxima["play_dev"], float(np.max(stats["play_dev"])))
        maxima["obs_dev"] = max(maxima["obs_dev"], float(np.max(stats["obs_dev"])))
        maxima["min_prob"] = min(maxima["min_prob"], float(np.min(stats["min_prob"])))
        maxima["nonfinite"] |= bool(np.any(stats["nonfinite"]))
        loss_total += float(np.sum(stats["loss"], dtype=np.float64))
        expected_total += float(np.sum(stats["expected_loss"], dtype=np.float64))
    rounds = num_runs * horizon
    return LongRun(
        **maxima,
        loss=loss_total / rounds,
        expected_loss=expected_total / rounds,
        state=jax.device_get(run.state),
        seconds=time.perf_counter() - start,
    )


def assert_state_finite(state: Any) -> None:
    """Every leaf finite, except StABL's meta log-weights, which may be -inf (a muted expert,
    weight 0) but never NaN or +inf, and never all -inf in a run."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        name = jax.tree_util.keystr(path)
        values = np.asarray(leaf)
        if not np.issubdtype(values.dtype, np.floating):
            continue
        if name.endswith("meta_log_weights"):
            assert not np.isnan(values).any() and not (values == np.inf).any(), name
            assert np.isfinite(values).any(axis=-1).all(), f"{name}: every expert muted"
        else:
            assert np.isfinite(values).all(), name


# A learner that never learns plays uniformly: expected loss (n - 1)/n * 0.75 + 0.25/n, 0.733 at
# n = 30. Over 2^20 rounds, learning only the first segment gives (0.25 + 3 * 0.733) / 4 = 0.61:
# below 0.65, which broken numerics (NaN weights, a frozen distribution) would not reach.
LONG = (30, 2**20, 2**16, 0, 0.65)
MANY = (10_000, 2**14, 2**12, 1, 0.75)  # below the worst arm's mean


@pytest.mark.parametrize("name", ["stabl", "exp3"])
@pytest.mark.parametrize(("n", "horizon", "chunk", "seed", "most"), [LONG, MANY], ids=["T", "n"])
def test_long_runs_in_float32(name, n, horizon, chunk, seed, most):
    learner = make(name, num_arms=n, horizon=horizon)
    env = ExpertAdvice(num_arms=n, horizon=horizon)
    assert learner.dtype == "float32"
    res = long_run(learner, env, jax.random.key(seed), num_runs=1, horizon=horizon, chunk=chunk)
    tol = distribution_tolerance(n, np.float32)
    assert not res.nonfinite and res.min_prob >= 0.0
    assert res.play_dev <= tol and res.obs_dev <= tol, (res.play_dev, res.obs_dev, tol)
    assert_state_finite(res.state)
    assert int(np.asarray(res.state.t)[0]) == horizon  # no int32 overflow of the round counter
    assert 0.25 <= res.expected_loss < most  # the best arm's mean at least


def test_float32_matches_float64():
    n, horizon, runs = 30, 2**14, 32
    env = ExpertAdvice(num_arms=n, horizon=horizon)
    key = jax.random.key(2)
    options = SimOptions(chunk_size=4096)
    single = simulate(StABL(num_arms=n, horizon=horizon), env, key, runs, options=options)
    with jax.enable_x64(True):
        learner = StABL(num_arms=n, horizon=horizon, dtype="float64")
        double = simulate(learner, env, key, runs, options=options)
        assert double.carry.state.expert_log_probs.dtype == np.float64
    for result in (single, double):
        for name, trace in result.traces().items():
            assert np.isfinite(trace).all(), name
        assert_state_finite(result.carry.state)
    for field in ("loss", "prob_best"):
        a = getattr(single, field).astype(np.float64).mean(axis=1)
        b = getattr(double, field).astype(np.float64).mean(axis=1)
        diff = a - b
        se = diff.std(ddof=1) / np.sqrt(runs)
        assert abs(diff.mean()) <= Z * se, (field, diff.mean(), se, a.mean(), b.mean())
