"""A long float32 run with the round randomness of ``simulate`` (the keys of
:func:`stabl_jax.simulate._round`), for ``tests/test_long_horizon.py`` and
``tests/test_many_arms.py``. Nothing per round is kept: the scan carries, over rounds and runs,
the largest ``|sum - 1|`` of the play distribution (``play_dev``) and of StABL's observation
distribution ``P(t)`` (``obs_dev``; the play distribution for other learners), the smallest
entry of either, whether any entry was not finite, and the sums of ``l_t(x_t)`` and
``<p_t, l_t>`` (reported as means)."""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax.simulate import init_runs, run_keys


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
