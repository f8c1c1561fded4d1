"""Drifting Bernoulli arms: a NumPy reference of means, best arms and losses on the same key
draws, ``loss_at`` lazy, and runs through ``simulate``, metrics and the command line."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import DriftingBernoulli, metrics, simulate
from stabl_jax.envs.base import reveals_lazily
from stabl_jax.experiment import cli
from stabl_jax.experiment.tables import read_summary
from tests.conftest import HORIZON, NUM_ARMS, small_learner

# float32 mu_i(t) from an angle below 6 pi: a few roundings of <= 6 pi 2^-24 ~ 1.1e-6 each
ATOL = 4e-6
ROUNDS = np.arange(HORIZON)


def reference_means(u: float, base=0.5, amplitude=0.3) -> np.ndarray:
    """``(T, n)`` float64 ``b + A sin(2 pi t / P + 2 pi i / n + u)``, ``P = T / 2``."""
    phases = 2 * np.pi * np.arange(NUM_ARMS) / NUM_ARMS + u
    return base + amplitude * np.sin(2 * np.pi * ROUNDS[:, None] / (HORIZON / 2) + phases)


def reference_uniforms(env_key: jax.Array, ts: np.ndarray, num_arms: int) -> np.ndarray:
    """``(len(ts), n)`` the round keys' uniforms ``U_t = uniform(fold_in(env_key, t), (n,))``."""
    return np.asarray(_uniforms(env_key, jnp.asarray(ts), num_arms), np.float64)


@functools.partial(jax.jit, static_argnums=2)
def _uniforms(env_key: jax.Array, ts: jax.Array, num_arms: int) -> jax.Array:
    return jax.vmap(lambda t: jax.random.uniform(jax.random.fold_in(env_key, t), (num_arms,)))(ts)


def reference_best(means: np.ndarray) -> np.ndarray:
    """``argmin_i mu_i(t)`` per round, checked to be clear of float32 ties (margin > ATOL)."""
    ordered = np.sort(means, axis=-1)
    assert np.all(ordered[..., 1] - ordered[..., 0] > ATOL), "a near tie: pick another key"
    return np.argmin(means, axis=-1)


def test_means_best_arms_and_losses_match_the_numpy_reference():
    """T = 64 (two periods): means within ATOL, best arm and losses ``1[U_i < mu_i(t)]`` exact."""
    env = DriftingBernoulli(num_arms=NUM_ARMS, horizon=HORIZON)
    key, env_key = jax.random.key(7), jax.random.key(8)
    params = env.sample_params(key)
    # u ~ U[0, 2 pi) drawn from fold_in(key, 0), sample_params(key)'s draw
    u = jax.random.uniform(jax.random.fold_in(key, 0), (), jnp.float32, 0.0, 2 * math.pi)
    means = reference_means(float(u))
    uniforms = reference_uniforms(env_key, ROUNDS, NUM_ARMS)
    assert np.all(np.abs(uniforms - means) > ATOL)  # no draw within rounding of its mean

    def round_of(t):
        mean = env.mean_loss(params, t)
        return mean, env.best_arm(params, t), env.loss(params, t, jax.random.fold_in(env_key, t))

    mean, best, loss = jax.jit(jax.vmap(round_of))(jnp.asarray(ROUNDS, jnp.int32))
    np.testing.assert_allclose(np.asarray(mean), means, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(np.asarray(best), reference_best(means))
    np.testing.assert_array_equal(np.asarray(loss), (uniforms < means).astype(np.float32))
    assert len(set(np.asarray(best).tolist())) == NUM_ARMS  # the best arm visits every arm


def test_loss_at_evaluates_only_the_queried_arms():
    """``loss_at`` is ``loss(...)[arms]`` bit for bit, lazy, computing only the asked means."""
    env = DriftingBernoulli(num_arms=NUM_ARMS, horizon=HORIZON)
    params = env.sample_params(jax.random.key(1))
    arms = jnp.array([4, 0, 4], jnp.int32)
    keys = jax.random.split(jax.random.key(2), HORIZON)
    ts = jnp.arange(HORIZON, dtype=jnp.int32)
    full = jax.jit(jax.vmap(lambda t, k: env.loss(params, t, k)[arms]))(ts, keys)
    lazy = jax.jit(jax.vmap(lambda t, k: env.loss_at(params, t, k, arms)))(ts, keys)
    np.testing.assert_array_equal(np.asarray(lazy), np.asarray(full))
    assert reveals_lazily(env)
    jaxpr = jax.make_jaxpr(lambda k: env.loss_at(params, jnp.int32(3), k, arms[:2]))(keys[0])
    sines = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "sin"]
    assert sines and all(e.outvars[0].aval.shape == (2,) for e in sines)


def test_no_segment_options():
    """No change points to give; two envs of one shape are equal."""
    with pytest.raises(TypeError, match="change_points"):
        DriftingBernoulli(num_arms=NUM_ARMS, horizon=HORIZON, change_points=(10,))
    assert DriftingBernoulli(5, 64) == DriftingBernoulli(5, 64)
    assert not hasattr(DriftingBernoulli(5, 64), "num_segments")


def test_simulate_and_metrics_match_the_reference():
    """Regret ``sum_t <p_t, l_t> - l_t(i*_t)`` and SA(T) from the reference; one segment."""
    env = DriftingBernoulli(num_arms=NUM_ARMS, horizon=HORIZON)
    runs = 4
    result = simulate(small_learner("exp3"), env, jax.random.key(3), runs)
    carry = result.carry
    expected = np.asarray(result.expected_loss, np.float64)
    offsets = np.asarray(carry.env_params.phases)[:, 0]  # phi_0 = u of each run
    regret, sa = np.empty(runs), np.empty(runs)
    for r in range(runs):
        means = reference_means(float(offsets[r]))
        env_key = jax.tree.map(lambda k, r=r: k[r], carry.env_key)
        losses = (reference_uniforms(env_key, ROUNDS, NUM_ARMS) < means).astype(np.float64)
        best_loss = losses[ROUNDS, reference_best(means)]
        regret[r] = np.sum(expected[r] - best_loss)
        sa[r] = expected[r].sum() - losses.sum(axis=0).min()
    cumulative = metrics.paired_cumulative_regret(env, carry, {"exp3": result.expected_loss})
    np.testing.assert_allclose(cumulative["exp3"][2], regret, rtol=1e-9)
    windows = metrics.adaptive_regret(result, env, [HORIZON])["expected"][:, 0]
    np.testing.assert_allclose(windows, sa, rtol=1e-9)
    assert np.all(metrics.segment_ids(carry, HORIZON) == 0)


def test_the_command_line_runs_it_as_one_segment(tmp_path, capsys, monkeypatch):
    """The shipped config, tiny: one segment, cumulative regret, no change points detected."""
    monkeypatch.chdir(cli.__file__.rsplit("/stabl_jax/", 1)[0])
    out = tmp_path / "out"
    sets = ["runs=4", f"horizon={HORIZON}", "window=8", 'learners=["uniform", "glr_klucb"]']
    argv = ["run", "drifting_bernoulli", "--no-progress", "--out", str(out)]
    assert cli.main(argv + [a for s in sets for a in ("--set", s)]) == 0
    assert "one segment (no change points)" in capsys.readouterr().out
    summary = read_summary(out)
    assert summary["env"]["change_points"] == []
    glr = summary["learners"]["glr_klucb"]
    assert len(glr["segment_reward"]["mean"]) == 1 and np.isfinite(glr["cumulative_regret"]["mean"])
    assert glr["detection"]["change_points"].startswith("none")
    assert "delay" not in glr["detection"] and "false_alarms" not in glr["detection"]
