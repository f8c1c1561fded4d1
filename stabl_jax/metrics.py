"""Metrics on simulation traces: strongly adaptive regret (:func:`window_regret`), cumulative
regret, per-segment means, detection delays and false alarms of restarting learners, moving
averages and confidence intervals.

Host-side NumPy in float64; arm losses are regenerated from the pure environment in blocks of
runs, so ``runs x T x arms`` never exists at once.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks
from stabl_jax.simulate import RunCarry, SimResult, regenerate_losses

#: The memory a block of SA(L) work (regenerated losses, window comparators) is sized to.
SA_BLOCK_BYTES = 256 * 2**20

_Name = TypeVar("_Name", bound=Hashable)  # a key of paired_adaptive_regret's traces


def prefix_sums(values: np.ndarray) -> np.ndarray:
    """``(T + 1, ...)`` float64 prefix sums along axis 0, starting at 0."""
    values = np.asarray(values, np.float64)
    out = np.zeros((values.shape[0] + 1, *values.shape[1:]))
    np.cumsum(values, axis=0, out=out[1:])
    return out


def best_window_sums(arm_prefix: np.ndarray, length: int, block: int = 1024) -> np.ndarray:
    """``(T - L + 1,)`` ``min_i sum_{t=j}^{j+L-1} l_{t,i}`` for every window start ``j``,
    from ``arm_prefix`` ``(T + 1, n)`` (:func:`prefix_sums`), ``block`` starts at a time."""
    count = arm_prefix.shape[0] - length
    best = np.empty(count)
    for lo in range(0, count, block):
        hi = min(count, lo + block)
        best[lo:hi] = (arm_prefix[lo + length : hi + length] - arm_prefix[lo:hi]).min(axis=1)
    return best


def check_windows(window_lengths: Sequence[int], horizon: int) -> tuple[int, ...]:
    """The window lengths as ints in ``[1, horizon]``, else ``TypeError``/``ValueError``."""
    if isinstance(window_lengths, str) or not isinstance(window_lengths, Iterable):
        raise TypeError(
            f"window_lengths must be a sequence of ints, got {window_lengths!r} (one length L "
            "is written [L])"
        )
    lengths = tuple(checks.check_int("window length", length) for length in window_lengths)
    for length in lengths:
        if length > horizon:
            raise ValueError(f"window length {length} must be in [1, T={horizon}]")
    return lengths


def window_regret(
    played_prefix: np.ndarray, comparator: np.ndarray, starts: np.ndarray, length: int
) -> np.ndarray:
    """``SA(L) = max_j [ sum_{t=j}^{j+L-1} played_t - C_j ]`` (Section 2) over ``j`` in
    ``starts``, ``C_j`` the comparator's loss on window ``j`` (:func:`best_window_sums`).

    Args:
      played_prefix: ``(..., T + 1)`` prefix sums ``P`` of the learner's losses, ``P_0 = 0``.
      comparator: ``(W,)`` or ``(..., W)`` the window losses ``C_j``.
      starts: ``(W,)`` int window starts ``j``.
      length: ``L``.

    Returns:
      ``(...)`` float64.
    """
    starts = np.asarray(starts)
    sums = played_prefix[..., starts + length] - played_prefix[..., starts]
    return np.max(sums - comparator, axis=-1)


def adaptive_regret_from_losses(
    played: np.ndarray | Sequence[np.ndarray], arm_losses: np.ndarray, window_lengths: Sequence[int]
) -> np.ndarray:
    """Strongly adaptive regret of one run: :func:`window_regret` over every start ``0..T-L``.

    Args:
      played: ``(T,)`` the learner's per-round loss (sampled or expected), or ``(P, T)``
        several traces that faced the same arm losses.
      arm_losses: ``(T, n)`` every arm's loss.
      window_lengths: window lengths ``L``, each in ``1..T``.

    Returns:
      ``(len(window_lengths),)`` float64, or ``(P, len(window_lengths))`` for ``(P, T)`` input.
    """
    played = checks.check_finite("played", np.asarray(played, np.float64))
    if played.ndim not in (1, 2):
        raise ValueError(f"played must be (T,) or (P, T), got shape {played.shape}")
    horizon = played.shape[-1]
    arm_losses = checks.check_finite("arm_losses", np.asarray(arm_losses, np.float64))
    if arm_losses.ndim != 2 or arm_losses.shape[0] != horizon:
        raise ValueError(
            f"arm_losses must be (T, n) with T={horizon}, the rounds of played, got shape "
            f"{arm_losses.shape}"
        )
    out = _sa(np.atleast_2d(played), arm_losses, check_windows(window_lengths, horizon))
    return out[0] if played.ndim == 1 else out


def _sa(played: np.ndarray, arm_losses: np.ndarray, lengths: tuple[int, ...]) -> np.ndarray:
    """:func:`adaptive_regret_from_losses` of checked ``(P, T)`` traces: ``(P, len(lengths))``."""
    horizon = played.shape[1]
    p_prefix = prefix_sums(played.T).T  # (P, T + 1)
    a_prefix = prefix_sums(arm_losses)
    out = np.empty((played.shape[0], len(lengths)))
    for j, length in enumerate(lengths):
        best = best_window_sums(a_prefix, length)
        out[:, j] = window_regret(p_prefix, best, np.arange(horizon - length + 1), length)
    return out


def paired_adaptive_regret(
    env: Any,
    carry: RunCarry,
    traces: Mapping[_Name, np.ndarray],
    window_lengths: Sequence[int],
    *,
    memory_bytes: int = SA_BLOCK_BYTES,
    on_block: Callable[[int, RunCarry, np.ndarray], None] | None = None,
) -> dict[_Name, np.ndarray]:
    """SA(L) of paired ``(R, T)`` loss traces; arm losses regenerated per ``memory_bytes`` block.

    Args:
      env: the environment the traces were simulated on.
      carry: the final carry of any of the simulations (same env params and keys).
      traces: ``{name: (R, T) losses}``.
      window_lengths: the ``L`` values, each in ``[1, T]``.
      on_block: called with ``(first run, block carry, (b, T, n) losses)`` for every block,
        so another metric reuses them (:meth:`CumulativeRegret.add`).

    Returns:
      ``{name: (R, len(window_lengths))}`` float64.
    """
    names = list(traces)
    num_runs, horizon = check_traces(traces, carry)
    lengths = check_windows(window_lengths, horizon)
    out = {name: np.empty((num_runs, len(lengths))) for name in names}
    for start, block, losses in _loss_blocks(env, carry, num_runs, horizon, memory_bytes):
        if on_block is not None:
            on_block(start, block, losses)
        for r in range(losses.shape[0]):
            run = start + r
            stacked = np.stack([np.asarray(traces[name][run], np.float64) for name in names])
            values = _sa(stacked, np.asarray(losses[r], np.float64), lengths)
            for i, name in enumerate(names):
                out[name][run] = values[i]
    return out


def check_traces(
    traces: Mapping[Any, Any],
    carry: RunCarry | None,
    what: str = "traces",
    finite: bool = True,
) -> tuple[int, int]:
    """``(R, T)`` of paired loss traces: at least one, each ``(R, T)`` and (``finite``)
    finite, ``R`` the runs of ``carry`` when given; else ``ValueError`` naming
    ``what[name]``. Without ``finite`` only shapes are read (device traces stay there)."""
    names = list(traces)
    if not names:
        raise ValueError(f"{what} must hold at least one (R, T) loss trace, got none")
    shape = np.shape(traces[names[0]])
    runs = None if carry is None else int(np.shape(carry.env_key)[0])
    for name in names:
        got = np.shape(traces[name])
        if len(got) != 2 or (runs is not None and got[0] != runs):
            want = "(R, T)" if runs is None else f"(R, T) with R={runs}, the runs of carry"
            raise ValueError(f"{what}[{name!r}] must be {want}, got shape {got}")
        if got != shape:
            raise ValueError(
                f"{what}[{name!r}] has shape {got}, {what}[{names[0]!r}] {shape}: paired "
                "traces are of the same runs and rounds"
            )
        if finite:
            checks.check_finite(f"{what}[{name!r}]", traces[name])
    return shape[0], shape[1]


def _loss_blocks(env: Any, carry: RunCarry, num_runs: int, horizon: int, memory_bytes: int) -> Any:
    """Yield ``(start, block_carry, losses)`` per block of runs: ``losses`` ``(b, T, n)``
    float32 every arm's loss, regenerated, the block sized to ``memory_bytes``."""
    per_run = horizon * env.num_arms * (4 + 8)
    runs_per_block = max(1, min(num_runs, memory_bytes // per_run))
    for start in range(0, num_runs, runs_per_block):
        stop = min(num_runs, start + runs_per_block)
        block = jax.tree.map(lambda x, a=start, b=stop: x[a:b], carry)
        yield start, block, np.asarray(regenerate_losses(env, block, 0, horizon))


class CumulativeRegret:
    """``R(t) = sum_{s <= t} (trace_s - l_s(i*_s))``, ``i*_s = env.best_arm(params, s)``, of
    paired ``(R, T)`` traces, accumulated by :meth:`add` over loss blocks, read by :meth:`result`.

    Args:
      env: the environment; it must have ``best_arm(params, t)``.
      traces: ``{name: (R, T) losses}`` (:func:`check_traces`).
      carry: the runs' carry, when known: ``R`` must be its number of runs.
    """

    def __init__(
        self, env: Any, traces: Mapping[Any, np.ndarray], carry: RunCarry | None = None
    ) -> None:
        if not has_best_arm(env):
            raise TypeError(f"{type(env).__name__} has no best_arm: no cumulative regret")
        self.traces = traces
        self.num_runs, self.horizon = check_traces(traces, carry)
        ts = jnp.arange(self.horizon, dtype=jnp.int32)
        self._best_arms = jax.jit(jax.vmap(lambda p: jax.vmap(lambda t: env.best_arm(p, t))(ts)))
        self._sums = {name: np.zeros((2, self.horizon)) for name in traces}
        self._finals = {name: np.empty(self.num_runs) for name in traces}

    def add(self, start: int, block: RunCarry, losses: np.ndarray) -> None:
        """Runs ``start .. start + b - 1``: their carry and ``(b, T, n)`` every arm's loss."""
        best = np.asarray(self._best_arms(block.env_params))  # (b, T)
        best_loss = np.take_along_axis(losses, best[..., None], axis=-1)[..., 0]
        stop = start + losses.shape[0]
        for name, trace in self.traces.items():
            regret = np.cumsum(np.asarray(trace[start:stop], np.float64) - best_loss, axis=1)
            self._sums[name] += (regret.sum(axis=0), np.square(regret).sum(axis=0))
            self._finals[name][start:stop] = regret[:, -1]

    def result(self) -> dict[Any, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``{name: (mean, half, final)}``: ``(T,)`` mean of ``R(t)`` over runs and its 95%
        half-width (NaN for one run), and ``(R,)`` every run's ``R(T)``."""
        runs = self.num_runs
        out = {}
        for name, (total, squares) in self._sums.items():
            mean = total / runs
            var = np.maximum(squares - runs * mean**2, 0.0) / max(runs - 1, 1)
            half = t_quantile(runs - 1) * np.sqrt(var / runs)
            out[name] = (mean, half, self._finals[name])
        return out


def has_best_arm(env: Any) -> bool:
    """Whether ``env`` declares :attr:`~stabl_jax.envs.base.Environment.has_best_arm`
    (``best_arm(params, t)`` names the best arm of every round)."""
    return bool(getattr(env, "has_best_arm", False))


def paired_cumulative_regret(
    env: Any,
    carry: RunCarry,
    traces: Mapping[Any, np.ndarray],
    *,
    memory_bytes: int = SA_BLOCK_BYTES,
) -> dict[Any, tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
    """:class:`CumulativeRegret` of ``traces`` on its own pass over the regenerated losses;
    ``None`` when ``env`` has no ``best_arm``."""
    if not has_best_arm(env):
        return None
    accumulator = CumulativeRegret(env, traces, carry)  # checks the traces once
    blocks = _loss_blocks(env, carry, accumulator.num_runs, accumulator.horizon, memory_bytes)
    for block in blocks:
        accumulator.add(*block)
    return accumulator.result()


def adaptive_regret(
    result: SimResult,
    env: Any,
    window_lengths: Sequence[int],
    *,
    memory_bytes: int = SA_BLOCK_BYTES,
) -> dict[str, np.ndarray]:
    """SA(L) for every run of one simulation, from the sampled and the expected loss.

    Returns:
      ``{"sampled": (R, len(L)), "expected": (R, len(L))}`` float64, for the traces recorded
      (``loss``, ``expected_loss``).

    Raises:
      ValueError: neither trace was recorded, or ``result`` was simulated on another ``env``.
    """
    result.check_env(env, "adaptive_regret")
    recorded = {"sampled": result.loss, "expected": result.expected_loss}
    traces = {name: trace for name, trace in recorded.items() if trace is not None}
    if not traces:
        raise ValueError(
            "adaptive_regret needs the loss or expected_loss trace; simulate with "
            "traces=(..., 'loss') or (..., 'expected_loss')"
        )
    return paired_adaptive_regret(
        env,
        result.final_carry("adaptive_regret"),
        traces,
        window_lengths,
        memory_bytes=memory_bytes,
    )


def segment_ids(carry: RunCarry, horizon: int) -> np.ndarray:
    """``(R, T)`` segment index of every round of every run, in the smallest signed int type.

    An environment whose params have no ``change_points`` is one segment: every index is 0.
    """
    points = getattr(carry.env_params, "change_points", None)
    if points is None:
        runs = int(np.prod(np.shape(carry.env_key)[:1]))  # a single run's key is ()
        return np.zeros((runs, horizon), np.int8)
    points = np.asarray(points)
    if points.ndim == 1:
        points = points[None]
    ts = np.arange(horizon)
    last = points.shape[-1]
    dtype = next(t for t in (np.int8, np.int16, np.int32) if np.iinfo(t).max >= last)
    ids = np.empty((points.shape[0], horizon), dtype)
    for run, run_points in enumerate(points):
        ids[run] = np.searchsorted(run_points, ts, side="right")
    return ids


#: Bytes of the float64 blocks of rows of :func:`row_means` and its kin.
BLOCK_BYTES = 32 * 2**20

Transform = Callable[[np.ndarray], np.ndarray]


def _float_blocks(
    values: np.ndarray, of: Transform | None, memory_bytes: int | None
) -> Iterable[tuple[slice, np.ndarray]]:
    """Yield ``(rows, of(values[rows] as float64))`` over blocks of about ``memory_bytes``."""
    num_rows, width = values.shape[0], max(1, int(np.prod(values.shape[1:])))
    step = max(1, (BLOCK_BYTES if memory_bytes is None else memory_bytes) // (8 * width))
    for start in range(0, num_rows, step):
        rows = slice(start, min(start + step, num_rows))
        block = np.asarray(values[rows], np.float64)
        yield rows, block if of is None else of(block)


def row_means(
    values: np.ndarray, of: Transform | None = None, *, memory_bytes: int | None = None
) -> np.ndarray:
    """``(R,)`` ``of(values.astype(np.float64)).mean(axis=1)`` of ``(R, T)`` values, in blocks
    of rows of about ``memory_bytes`` (``of`` elementwise, e.g. ``lambda loss: 1 - loss``)."""
    out = np.empty(values.shape[0])
    for rows, block in _float_blocks(values, of, memory_bytes):
        out[rows] = block.mean(axis=1)
    return out


def per_segment_mean(
    values: np.ndarray,
    segments: np.ndarray,
    num_segments: int,
    of: Transform | None = None,
    *,
    memory_bytes: int | None = None,
) -> np.ndarray:
    """``(R, S)`` mean of ``of(values)`` ``(R, T)`` over each run's segments (``segments``
    ``(R, T)``, :func:`segment_ids`); NaN where a run has no round of a segment."""
    out = np.full((values.shape[0], num_segments), np.nan)
    for rows, block in _float_blocks(values, of, memory_bytes):
        ids = segments[rows]
        for s in range(num_segments):
            mask = ids == s
            counts = mask.sum(axis=1)
            sums = np.where(mask, block, 0.0).sum(axis=1)
            out[rows, s] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return out


def _breakpoints(change_points: np.ndarray, num_runs: int) -> np.ndarray:
    """``(R, J)`` int64 breakpoints from ``(J,)`` or ``(R, J)``, checked increasing."""
    points = np.asarray(change_points, np.int64)
    points = np.broadcast_to(points, (num_runs, points.shape[-1])) if points.ndim < 2 else points
    if points.shape[0] != num_runs or np.any(np.diff(points, axis=1) <= 0) or np.any(points < 0):
        raise ValueError(
            f"change_points must be (J,) or ({num_runs}, J) increasing rounds >= 0, got "
            f"{np.asarray(change_points).tolist()}; pass the environment's change points"
        )
    return points


def detection_delays(restarts: np.ndarray, change_points: np.ndarray) -> np.ndarray:
    """``(R, J)`` detection delay of each breakpoint: the rounds from it to the first restart
    in its segment.

    With breakpoints ``b_1 < ... < b_J`` (0-based: ``b_j`` is the first round of segment
    ``j + 1``), ``b_{J+1} = T`` and ``r_t`` whether round ``t`` ended in a restart,

    ``d_j = min {t in [b_j, b_{j+1}) : r_t} + 1 - b_j``,

    the rounds played since the change when the learner restarts (``1``: the first round after
    the change); NaN where no restart falls in ``[b_j, b_{j+1})`` (a missed change, or
    ``b_j >= T``).

    Args:
      restarts: ``(R, T)`` bool, the ``restart`` trace
        (:data:`~stabl_jax.simulate.RESTART_TRACE`).
      change_points: ``(J,)`` or ``(R, J)`` increasing breakpoints.

    Returns:
      ``(R, J)`` float64.

    Example:
      >>> import numpy as np
      >>> r = np.zeros((1, 10), bool); r[0, [2, 5, 6]] = True
      >>> detection_delays(r, [4, 8]).tolist()
      [[2.0, nan]]
    """
    restarts = np.asarray(restarts, bool)
    runs, horizon = restarts.shape
    points = _breakpoints(change_points, runs)
    ends = np.concatenate([points[:, 1:], np.full((runs, 1), horizon)], axis=1)
    t = np.arange(horizon)
    out = np.full(points.shape, np.nan)
    for j in range(points.shape[1]):
        inside = restarts & (t >= points[:, j : j + 1]) & (t < ends[:, j : j + 1])
        found = inside.any(axis=1)
        first = np.argmax(inside, axis=1)
        out[:, j] = np.where(found, first + 1 - points[:, j], np.nan)
    return out


def false_alarms(restarts: np.ndarray, change_points: np.ndarray) -> np.ndarray:
    """``(R,)`` restarts before the first breakpoint ``b_1`` (every restart without one):
    ``#{t < b_1 : r_t}``, the false alarms of a detector on a stationary first segment.

    Args:
      restarts: ``(R, T)`` bool, the ``restart`` trace.
      change_points: ``(J,)`` or ``(R, J)`` increasing breakpoints.

    Returns:
      ``(R,)`` int64.

    Example:
      >>> import numpy as np
      >>> r = np.zeros((2, 10), bool); r[0, [2, 5]] = True; r[1, 7] = True
      >>> false_alarms(r, [4, 8]).tolist()
      [1, 0]
    """
    restarts = np.asarray(restarts, bool)
    runs, horizon = restarts.shape
    points = _breakpoints(change_points, runs)
    first = points[:, :1] if points.shape[1] else np.full((runs, 1), horizon)
    return np.asarray(np.sum(restarts & (np.arange(horizon) < first), axis=1), np.int64)


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average along the last axis; the first ``window - 1`` entries average
    what is available. Same shape as ``values``."""
    window = checks.check_int("window", window, minimum=1)
    x = np.asarray(values, np.float64)
    prefix = np.concatenate([np.zeros((*x.shape[:-1], 1)), np.cumsum(x, axis=-1)], axis=-1)
    idx = np.arange(1, x.shape[-1] + 1)
    lo = np.maximum(idx - window, 0)
    return (prefix[..., idx] - prefix[..., lo]) / (idx - lo)


def moving_mean_ci(
    values: np.ndarray, window: int, of: Transform | None = None, *, memory_bytes: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(T,)`` :func:`mean_ci` over runs of the :func:`moving_average` of ``of(values)``, in
    two passes over blocks of rows of about ``memory_bytes``.

    Raises:
      ValueError: ``values`` has no row (a mean of nothing).
    """
    window = checks.check_int("window", window, minimum=1)
    num_runs = values.shape[0]
    if num_runs == 0:
        raise ValueError(f"moving_mean_ci needs at least one run, got shape {values.shape}")

    def moving_blocks() -> Iterable[np.ndarray]:
        for _, block in _float_blocks(values, of, memory_bytes):
            yield moving_average(block, window)

    mean = sum(block.sum(axis=0) for block in moving_blocks()) / num_runs
    if num_runs < 2:
        return mean, np.full_like(mean, np.nan)
    squares = sum(((block - mean) ** 2).sum(axis=0) for block in moving_blocks())
    return mean, t_quantile(num_runs - 1) * np.sqrt(squares / (num_runs - 1)) / np.sqrt(num_runs)


def mean_ci(values: np.ndarray, axis: int = 0) -> tuple[Any, Any]:
    """Mean over ``axis`` and the half-width of its Student-t 95% interval.

    The one interval of stabl_jax's summaries, tables, plots and sweeps: with ``R`` values
    ``x_r`` along ``axis``,

      mean +- t_{0.975, R-1} * s / sqrt(R),   s^2 = sum_r (x_r - mean)^2 / (R - 1),

    ``t_{0.975, R-1}`` the quantile of :func:`t_quantile`. A paired difference is the interval of
    the per-run differences ``mean_ci(a - b)`` (the runs share their keys).

    Args:
      values: ``(..., R, ...)`` values, ``R`` along ``axis``.
      axis: the axis of the runs.

    Returns:
      ``(mean, half)``, each ``values`` without ``axis``; ``half`` is NaN for one value.

    Raises:
      ValueError: no values along ``axis`` (a mean of nothing).

    Example:
      >>> mean, half = mean_ci(np.array([1.0, 2.0, 3.0, 4.0]))
      >>> float(mean), round(float(half), 4)
      (2.5, 2.0543)
    """
    x = np.asarray(values, np.float64)
    n = x.shape[axis]
    if n == 0:
        raise ValueError(f"mean_ci needs at least one value along axis {axis}, got shape {x.shape}")
    mean = x.mean(axis=axis)
    if n < 2:
        return mean, np.full_like(mean, np.nan)
    return mean, t_quantile(n - 1) * x.std(axis=axis, ddof=1) / np.sqrt(n)


def t_quantile(dof: int) -> float:
    """Two-sided 95% Student-t quantile ``t_{0.975, dof}`` (``scipy.stats.t.ppf``); NaN for
    ``dof = 0`` (one value: no interval).

    Raises:
      ValueError: ``dof < 0``.

    Example:
      >>> round(t_quantile(3), 4), round(t_quantile(1000), 4)
      (3.1824, 1.9623)
    """
    if dof < 0:
        raise ValueError(f"t_quantile needs dof >= 0 (1 or more values), got {dof}")
    if dof == 0:
        return float("nan")
    from scipy import stats  # on first use: importing scipy.stats takes most of a second

    return float(stats.t.ppf(0.975, dof))
