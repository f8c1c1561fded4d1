"""Summaries of simulation traces on the device, so no ``(R, T)`` array reaches the host.

The quantities of :mod:`stabl_jax.metrics`, in float32 within the rounding bound each
function states (``eps`` is float32's machine epsilon).

Example:
  >>> import jax
  >>> from stabl_jax import SimOptions, StABL, ExpertAdvice, simulate, summaries
  >>> env = ExpertAdvice(num_arms=5, horizon=64)
  >>> res = simulate(StABL(num_arms=5, horizon=64), env, jax.random.key(0), num_runs=3,
  ...                options=SimOptions(traces_on_device=True))
  >>> sa = summaries.adaptive_regret(env, res.carry, {"loss": res.loss}, (8, 32))
  >>> sa["loss"].shape
  (3, 2)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from stabl_jax import metrics, prng
from stabl_jax.simulate import RunCarry, arm_losses

#: float32's machine epsilon, the unit of the rounding bounds below.
EPS32 = float(jnp.finfo(jnp.float32).eps)


def prefix_bound(horizon: int) -> float:
    """``(ceil(log2 T) + 1) eps T``: a bound on the rounding error of a float32 ``jnp.cumsum`` of
    ``T`` values in ``[-1, 1]``."""
    return (math.ceil(math.log2(max(horizon, 2))) + 1) * EPS32 * horizon


def sa_bound(horizon: int) -> float:
    """The bound on :func:`adaptive_regret`'s error: ``4`` prefix errors (two prefix sums of
    the learner's and two of the comparator's window), ``4 prefix_bound(T)``."""
    return 4.0 * prefix_bound(horizon)


def _prefix(values: jax.Array) -> jax.Array:
    """``(T + 1, ...)`` float32 prefix sums along axis 0, starting at 0."""
    zero = jnp.zeros((1, *values.shape[1:]), jnp.float32)
    return jnp.concatenate([zero, jnp.cumsum(values.astype(jnp.float32), axis=0)])


@partial(jax.jit, static_argnames=("env", "lengths", "runs_per_batch"))
def _sa(
    env: Any, carry: RunCarry, played: jax.Array, lengths: tuple[int, ...], runs_per_batch: int
) -> jax.Array:
    horizon = played.shape[-1]

    def one_run(args: tuple[Any, jax.Array, jax.Array]) -> jax.Array:
        params, key, run_played = args  # run_played: (P, T)
        ts = jnp.arange(horizon, dtype=jnp.int32)
        arm_prefix = _prefix(arm_losses(env, params, key, ts))  # (T + 1, n)
        own_prefix = _prefix(run_played.T)  # (T + 1, P)
        out = []
        for length in lengths:
            best = jnp.min(arm_prefix[length:] - arm_prefix[:-length], axis=1)  # (T - L + 1,)
            own = own_prefix[length:] - own_prefix[:-length]  # (T - L + 1, P)
            out.append(jnp.max(own - best[:, None], axis=0))
        return jnp.stack(out, axis=-1)  # (P, len(L))

    xs = (carry.env_params, carry.env_key, jnp.moveaxis(played, 0, 1))  # played: (P, R, T)
    return jax.lax.map(one_run, xs, batch_size=runs_per_batch)  # (R, P, len(L))


def adaptive_regret(
    env: Any,
    carry: RunCarry,
    traces: Mapping[str, jax.Array],
    window_lengths: Sequence[int],
    *,
    runs_per_batch: int = 64,
) -> dict[str, jax.Array]:
    """SA(L), the largest regret against the best fixed arm over any ``L``-round window, of paired
    ``(R, T)`` traces on the device; arm losses regenerated ``runs_per_batch`` runs at a time.

    Args:
      env: the environment simulated (oblivious: a pure ``loss``).
      carry: the simulation's final carry (``result.carry``).
      traces: ``{name: (R, T) losses}`` (e.g. ``loss``, ``expected_loss``).
      window_lengths: the ``L`` values, each in ``[1, T]``.
      runs_per_batch: runs regenerated together (memory ``4 runs_per_batch T n`` bytes).

    Returns:
      ``{name: (R, len(L))}`` float32, each within :func:`sa_bound` of
      :func:`stabl_jax.metrics.paired_adaptive_regret`.
    """
    names = list(traces)
    num_runs, horizon = metrics.check_traces(traces, carry, finite=False)
    lengths = metrics.check_windows(window_lengths, horizon)
    played = jnp.stack([jnp.asarray(traces[name]) for name in names])  # (P, R, T)
    batch = max(1, min(int(runs_per_batch), num_runs))
    out = _sa(env, carry, played, lengths, batch)
    return {name: out[:, i] for i, name in enumerate(names)}


@partial(jax.jit, static_argnames=("env", "horizon"))
def best_arm_losses(env: Any, carry: RunCarry, horizon: int) -> jax.Array:
    """``(R, T)`` the loss of each round's best arm ``l_t(i*_t)``, ``i*_t = env.best_arm``."""
    ts = jnp.arange(horizon, dtype=jnp.int32)

    def one_run(params: Any, key: jax.Array) -> jax.Array:
        def at(t: jax.Array) -> jax.Array:
            return env.loss(params, t, prng.fold_in(key, t))[env.best_arm(params, t)]

        return jax.vmap(at)(ts)

    return jax.vmap(one_run)(carry.env_params, carry.env_key)


def cumulative_regret(
    env: Any, carry: RunCarry, traces: Mapping[str, jax.Array]
) -> dict[str, jax.Array]:
    """``R(t) = sum_{s <= t} (trace_s - l_s(i*_s))`` of paired ``(R, T)`` traces, on the device:
    ``{name: (R, T)}`` float32, within :func:`prefix_bound` of
    :func:`stabl_jax.metrics.paired_cumulative_regret`."""
    if not metrics.has_best_arm(env):
        raise TypeError(f"{type(env).__name__} has no best_arm: no cumulative regret")
    _, horizon = metrics.check_traces(traces, carry, finite=False)
    best = best_arm_losses(env, carry, horizon)
    return {
        name: jnp.cumsum(jnp.asarray(t, jnp.float32) - best, axis=1) for name, t in traces.items()
    }


@partial(jax.jit, static_argnames=("num_segments",))
def segment_means(values: jax.Array, change_points: jax.Array, num_segments: int) -> jax.Array:
    """``(R, S)`` mean of ``values`` ``(R, T)`` over each run's segments, split at
    ``change_points`` ``(R, S - 1)`` or ``(S - 1,)``; NaN for an empty segment. Within
    ``T eps`` of :func:`stabl_jax.metrics.per_segment_mean` for values in ``[0, 1]``."""
    points = jnp.broadcast_to(change_points, (values.shape[0], *jnp.shape(change_points)[-1:]))
    ts = jnp.arange(values.shape[1])
    ids = jax.vmap(lambda p: jnp.searchsorted(p, ts, side="right"))(points)  # (R, T)
    mask = ids[:, None, :] == jnp.arange(num_segments)[None, :, None]  # (R, S, T)
    counts = mask.sum(axis=2)
    sums = jnp.where(mask, values[:, None, :].astype(jnp.float32), 0.0).sum(axis=2)
    return jnp.where(counts > 0, sums / jnp.maximum(counts, 1), jnp.nan)
