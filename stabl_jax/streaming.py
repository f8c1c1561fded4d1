"""Large studies without ``(R, T)`` traces: simulate and score one batch of runs at a time,
keep per-run summaries only.

:func:`stabl_jax.simulate.simulate` returns ``(R, T)`` traces (1 GiB per float trace at
``R = 4096``, ``T = 65536``) and :func:`stabl_jax.metrics.paired_adaptive_regret` scores them.
:func:`simulate_summaries` gives the same numbers for studies too big for that: it simulates
``runs_per_batch`` runs (runs ``first_run .. first_run + b - 1`` of the same key, so the runs
are the very runs ``simulate`` would give), computes their SA(L) from arm losses regenerated
one run at a time, reduces the traces to per-run summaries and drops them before the next
batch. Host memory is then ``O(batch x T + T x n)``, whatever ``R``:

- the batch's traces, ``b x T x 12`` bytes (``b = 64``, ``T = 65536``: 50 MB);
- one run's arm losses and their float64 prefix sums, ``T x n x 12`` bytes (``n = 300``:
  236 MB), inside the SA(L) program;
- the summaries, ``R x (2 |L| + S + 4)`` numbers.

SA(L) here is :func:`stabl_jax.metrics.adaptive_regret_from_losses`'s definition, computed
in JAX in float64 (``jax.enable_x64`` for that program only); on a CPU with sequential prefix
sums, the order NumPy uses, so the two agree to the last bit (``tests/test_streaming.py``);
on a GPU with a parallel prefix sum, equal up to rounding. Only the traces ``loss``,
``expected_loss`` and ``prob_best`` are recorded (12 bytes per run and round).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, metrics, prng
from stabl_jax.simulate import simulate


@dataclasses.dataclass
class RunSummaries:
    """Per-run summaries of a study (host arrays, float64).

    Attributes:
      window_lengths: the ``L`` of the SA(L) columns.
      sa_sampled: ``(R, len(L))`` SA(L) of the suffered loss ``l_t(x_t)``.
      sa_expected: ``(R, len(L))`` SA(L) of the expected loss ``<p_t, l_t>``.
      segment_loss: ``(R, S)`` mean suffered loss per segment (NaN for an empty segment).
      mean_loss: ``(R,)`` mean suffered loss.
      mean_expected_loss: ``(R,)`` mean expected loss.
      mean_prob_best: ``(R,)`` mean play probability of the best arm.
      num_muted: ``(R,)`` muting events (learners with ``state.num_muted``), else ``None``.
      simulate_seconds: time in :func:`~stabl_jax.simulate.simulate` (compilation included).
      metrics_seconds: time computing SA(L) and summaries.
    """

    window_lengths: tuple[int, ...]
    sa_sampled: np.ndarray
    sa_expected: np.ndarray
    segment_loss: np.ndarray
    mean_loss: np.ndarray
    mean_expected_loss: np.ndarray
    mean_prob_best: np.ndarray
    num_muted: np.ndarray | None
    simulate_seconds: float
    metrics_seconds: float

    @property
    def num_runs(self) -> int:
        return int(self.mean_loss.shape[0])


def simulate_summaries(
    learner: Any,
    env: Any,
    key: jax.Array,
    num_runs: int,
    window_lengths: Sequence[int],
    *,
    horizon: int | None = None,
    params: Any = None,
    runs_per_batch: int = 64,
    chunk_size: int | None = None,
    runs_per_block: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunSummaries:
    """Simulate ``num_runs`` runs in batches and keep per-run summaries (module docstring).

    Args:
      learner, env, key, horizon, chunk_size, runs_per_block: as for
        :func:`~stabl_jax.simulate.simulate`.
      num_runs: ``R`` (>= 1).
      window_lengths: the ``L`` of SA(L), each in ``[1, T]``.
      params: learner params, shared scalars or per-run leaves of leading size ``R``.
      runs_per_batch: runs simulated and scored together (memory is linear in it).
      progress: called with ``(runs done, R)`` after each batch.

    Returns:
      :class:`RunSummaries` of the ``R`` runs, the runs of ``simulate(..., key, R)``.

    Example:
      >>> import jax
      >>> from stabl_jax import ExpertAdvice, StABL
      >>> env = ExpertAdvice(num_arms=5, horizon=64)
      >>> s = simulate_summaries(StABL(num_arms=5, horizon=64), env, jax.random.key(0), 6,
      ...                        (16, 64), runs_per_batch=4)
      >>> s.sa_sampled.shape, s.segment_loss.shape
      ((6, 2), (6, 4))
    """
    num_runs = checks.check_int("num_runs", num_runs, minimum=1)
    batch = checks.check_int("runs_per_batch", runs_per_batch, minimum=1)
    horizon = env.horizon if horizon is None else checks.check_int("horizon", horizon)
    windows = tuple(int(w) for w in window_lengths)
    metrics._check_windows(windows, horizon)
    params = learner.default_params if params is None else params
    parts: list[dict[str, np.ndarray]] = []
    sim_s = metric_s = 0.0
    for start in range(0, num_runs, batch):
        size = min(batch, num_runs - start)
        start_time = time.perf_counter()
        res = simulate(
            learner,
            env,
            key,
            size,
            horizon=horizon,
            params=_slice_params(params, num_runs, start, start + size),
            chunk_size=chunk_size,
            runs_per_block=runs_per_block,
            first_run=start,
            traces=("loss", "expected_loss", "prob_best"),
        )
        sim_s += time.perf_counter() - start_time
        start_time = time.perf_counter()
        parts.append(_summarise(env, res, windows))
        del res
        metric_s += time.perf_counter() - start_time
        if progress is not None:
            progress(start + size, num_runs)
    merged = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    muted = merged.pop("num_muted", None)
    return RunSummaries(
        window_lengths=windows,
        num_muted=muted,
        simulate_seconds=sim_s,
        metrics_seconds=metric_s,
        **merged,
    )


def _slice_params(params: Any, num_runs: int, start: int, stop: int) -> Any:
    def take(x: Any) -> Any:
        if jnp.ndim(x) == 0:
            return x
        if jnp.shape(x)[0] != num_runs:
            raise ValueError(
                f"per-run params must have leading axis num_runs={num_runs}, got shape "
                f"{jnp.shape(x)}"
            )
        return x[start:stop]

    return jax.tree.map(take, params)


def _summarise(env: Any, res: Any, windows: tuple[int, ...]) -> dict[str, np.ndarray]:
    horizon = res.horizon
    segments = metrics.segment_ids(res.carry, horizon)
    loss = res.loss.astype(np.float64)
    out = {
        "segment_loss": metrics.per_segment_mean(loss, segments, env.num_segments),
        "mean_loss": loss.mean(axis=1),
        "mean_expected_loss": res.expected_loss.astype(np.float64).mean(axis=1),
        "mean_prob_best": res.prob_best.astype(np.float64).mean(axis=1),
    }
    muted = getattr(res.carry.state, "num_muted", None)
    if muted is not None:
        out["num_muted"] = np.asarray(muted, np.int64)
    played = np.stack([res.loss, res.expected_loss], axis=1)  # (b, 2, T) float32
    sa = adaptive_regret(env, res.carry.env_params, res.carry.env_key, played, windows)
    out["sa_sampled"], out["sa_expected"] = sa[:, 0], sa[:, 1]
    return out


def adaptive_regret(
    env: Any,
    env_params: Any,
    env_keys: jax.Array,
    played: np.ndarray,
    window_lengths: Sequence[int],
) -> np.ndarray:
    """SA(L) of traces that faced ``env``'s losses, one run at a time, in JAX (float64).

    ``SA(L) = max_j [sum_{t=j}^{j+L-1} played_t - min_i sum_{t=j}^{j+L-1} l_{t,i}]`` over
    every window start ``j`` (Section 2 of the paper), with every arm's losses ``l_{t,i}``
    regenerated from the pure environment inside the program, and prefix sums accumulated
    in float64, round by round.

    Args:
      env: the environment the traces were simulated on.
      env_params: ``(b, ...)`` per-run environment parameters (``carry.env_params``).
      env_keys: ``(b,)`` environment keys (``carry.env_key``).
      played: ``(b, P, T)`` per-round losses of ``P`` traces per run.
      window_lengths: the ``L`` values, each in ``[1, T]``.

    Returns:
      ``(b, P, len(L))`` float64.
    """
    windows = tuple(int(w) for w in window_lengths)
    played = np.asarray(played, np.float32)
    metrics._check_windows(windows, played.shape[-1])
    with jax.enable_x64(True):
        out = _sa_program(env, windows, played.shape[-1])(env_params, env_keys, played)
        return np.asarray(out, np.float64)


#: Rounds of arm losses regenerated at a time inside the SA(L) program (memory: this many
#: rows of every arm's losses and their random bits exist at once, besides the prefix sums).
REGENERATE_ROUNDS = 1024


@partial(jax.jit, static_argnames=("env", "windows", "horizon"))
def _sa_jit(env: Any, windows: tuple[int, ...], horizon: int, env_params, env_keys, played):
    block = min(horizon, REGENERATE_ROUNDS)
    num_blocks = -(-horizon // block)

    def one_run(args: tuple) -> jax.Array:
        params, key, traces = args

        def prefix_block(total: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
            ts = b * block + jnp.arange(block, dtype=jnp.int32)
            losses = jax.vmap(lambda t: env.loss(params, t, prng.fold_in(key, t)))(ts)
            rows = _prefix_sums(losses, total)
            return rows[-1], rows

        zero = jnp.zeros((env.num_arms,), jnp.float64)
        _, rows = jax.lax.scan(prefix_block, zero, jnp.arange(num_blocks, dtype=jnp.int32))
        # (T, n): A_t = sum_{s <= t} l_s (rounds past T, generated to fill the last block,
        # are dropped).
        arm_prefix = rows.reshape(num_blocks * block, env.num_arms)[:horizon]
        own = _prefix_sums(traces.T, jnp.zeros((traces.shape[0],), jnp.float64))  # (T, P)
        columns = [_window_regret(arm_prefix, own, length) for length in windows]
        return jnp.stack(columns, axis=-1)  # (P, W)

    return jax.lax.map(one_run, (env_params, env_keys, played))


#: Window starts scored at a time (memory: twice this many rows of prefix sums).
WINDOW_STARTS = 1024


def _window_regret(arm_prefix: jax.Array, own: jax.Array, length: int) -> jax.Array:
    """``(P,)`` SA(L) from prefix sums ``A`` ``(T, n)`` and ``O`` ``(T, P)``: the max over
    window starts ``j`` of ``O_{j+L-1} - O_{j-1} - min_i (A_{j+L-1,i} - A_{j-1,i})`` (with
    ``A_{-1} = O_{-1} = 0``), :data:`WINDOW_STARTS` starts at a time so that no ``(T, n)``
    difference array is built."""
    horizon = arm_prefix.shape[0]
    first = own[length - 1] - jnp.min(arm_prefix[length - 1])  # j = 0
    count = horizon - length  # starts j = 1 .. T - L, as s = j - 1 = 0 .. count - 1
    if count == 0:
        return first
    step = min(WINDOW_STARTS, count)

    def body(best: jax.Array, k: jax.Array) -> tuple[jax.Array, None]:
        s = k * step + jnp.arange(step)
        valid = s < count
        s = jnp.minimum(s, count - 1)
        arm = jnp.min(arm_prefix[s + length] - arm_prefix[s], axis=1)  # (step,)
        regret = own[s + length] - own[s] - arm[:, None]  # (step, P)
        regret = jnp.where(valid[:, None], regret, -jnp.inf)
        return jnp.maximum(best, jnp.max(regret, axis=0)), None

    blocks = jnp.arange(-(-count // step), dtype=jnp.int32)
    return jax.lax.scan(body, first, blocks)[0]


def _prefix_sums(values: jax.Array, start: jax.Array, sequential: bool | None = None) -> jax.Array:
    """``(T, k)`` float64 running sums ``start + sum_{s <= t} values_s`` along axis 0.

    ``sequential=None`` picks by backend: on a CPU a sequential scan (the order of
    ``np.cumsum``; ``jnp.cumsum`` lowers to an ``O(T^2)`` window there); elsewhere
    ``jnp.cumsum`` (a parallel scan, equal up to rounding). Both are tested on the CPU."""
    values = values.astype(jnp.float64)
    if sequential is None:
        sequential = jax.default_backend() == "cpu"
    if not sequential:
        return start[None, :] + jnp.cumsum(values, axis=0)

    def accumulate(total: jax.Array, row: jax.Array) -> tuple[jax.Array, jax.Array]:
        total = total + row
        return total, total

    return jax.lax.scan(accumulate, start, values, unroll=8)[1]


def _sa_program(env: Any, windows: tuple[int, ...], horizon: int) -> Callable[..., jax.Array]:
    return partial(_sa_jit, env, windows, horizon)
