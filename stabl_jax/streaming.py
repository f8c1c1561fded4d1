"""Large studies without ``(R, T)`` traces: :func:`simulate_summaries` simulates and scores
``b = runs_per_batch`` runs at a time and keeps per-run summaries only.

Host memory is ``O(b T + T n)`` whatever ``R``, and the SA(L) numbers
(:func:`~stabl_jax.metrics.paired_adaptive_regret`) are the traces path's to the last bit;
with ``on_device=True`` a batch is summarised on the device in float32, within the rounding
bounds of :mod:`stabl_jax.summaries`.
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

from stabl_jax import checks, metrics, summaries
from stabl_jax.simulate import SimOptions, check_run_params, progress_bar, simulate

_TRACES = ("loss", "expected_loss", "prob_best")


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
    progress: bool | Callable[[int, int], None] | None = False,
    options: SimOptions | None = None,
    on_device: bool = False,
) -> RunSummaries:
    """Simulate ``R = num_runs`` runs in batches and keep per-run summaries.

    Args:
      learner, env, key, horizon: as for :func:`~stabl_jax.simulate.simulate`; ``env`` an
        oblivious piecewise bandit environment (``loss``, ``num_arms``, ``num_segments``).
      num_runs: ``R`` (>= 1).
      window_lengths: the ``L`` of SA(L), each in ``[1, T]``.
      params: learner params, shared scalars or per-run leaves of leading size ``R``.
      runs_per_batch: runs simulated and scored together (memory is linear in it).
      progress: ``True`` for a tqdm bar of runs, or a callback ``(runs done, R)`` per batch.
      options: each batch's :class:`~stabl_jax.simulate.SimOptions` (``None``: the defaults);
        the batches set ``first_run``.
      on_device: summarise each batch on the device, in float32.

    Returns:
      :class:`RunSummaries` of the ``R`` runs of ``simulate(..., key, R)``.

    Example:
      >>> import jax
      >>> from stabl_jax import ExpertAdvice, StABL
      >>> env = ExpertAdvice(num_arms=5, horizon=64)
      >>> s = simulate_summaries(StABL(num_arms=5, horizon=64), env, jax.random.key(0), 6,
      ...                        (16, 64), runs_per_batch=4)
      >>> s.sa_sampled.shape, s.segment_loss.shape
      ((6, 2), (6, 4))
    """
    options = _check_call(env, SimOptions() if options is None else options)
    if checks.check_bool("on_device", on_device):
        options = dataclasses.replace(options, traces_on_device=True)
    num_runs = checks.check_int("num_runs", num_runs, minimum=1)
    batch = checks.check_int("runs_per_batch", runs_per_batch, minimum=1)
    horizon = env.horizon if horizon is None else checks.check_horizon(horizon)
    windows = metrics.check_windows(window_lengths, horizon)
    params = learner.default_params if params is None else params
    check_run_params(params, num_runs)
    if not callable(progress):  # None, the default before False, is no progress too
        progress = progress is not None and checks.check_bool("progress", progress)
    update = progress_bar(progress, num_runs, unit="run")
    run = partial(simulate, learner, env, key, horizon=horizon, traces=_TRACES)
    parts: list[dict[str, np.ndarray]] = []
    sim_s = metric_s = 0.0
    for start in range(0, num_runs, batch):
        stop = min(num_runs, start + batch)
        start_time = time.perf_counter()
        part = jax.tree.map(lambda x, a=start, b=stop: x if jnp.ndim(x) == 0 else x[a:b], params)
        res = run(stop - start, params=part, options=dataclasses.replace(options, first_run=start))
        sim_s += time.perf_counter() - start_time
        start_time = time.perf_counter()
        parts.append(_summarise(env, res, windows, on_device))
        del res
        metric_s += time.perf_counter() - start_time
        update(stop)
    merged = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    muted = merged.pop("num_muted", None)
    return RunSummaries(
        windows, num_muted=muted, simulate_seconds=sim_s, metrics_seconds=metric_s, **merged
    )


def _check_call(env: Any, options: SimOptions) -> SimOptions:
    """``TypeError`` unless ``env`` is an oblivious piecewise bandit environment (whose
    traces and segments the summaries need), ``ValueError`` for options the batches set."""
    if not (getattr(env, "piecewise", False) and hasattr(env, "loss") and hasattr(env, "num_arms")):
        raise TypeError(
            "simulate_summaries scores oblivious piecewise bandit environments (loss, "
            f"num_arms, num_segments: ExpertAdvice, PiecewiseBernoulli), got {type(env).__name__}"
            ": simulate others with simulate and score them with their own metrics "
            "(bco.simulate.bco_adaptive_regret, hpo_metrics)"
        )
    given = ("chunk_size", "runs_per_block", "host_threads", "kernel")
    if options != SimOptions(**{name: getattr(options, name) for name in given}):
        raise ValueError(
            f"simulate_summaries sets each batch's first_run and reports progress per batch "
            f"(its progress=): give options only chunk_size, runs_per_block, host_threads and "
            f"kernel, got {options}"
        )
    return options


def _summarise(
    env: Any, res: Any, windows: tuple[int, ...], on_device: bool
) -> dict[str, np.ndarray]:
    """One batch's summaries (:class:`RunSummaries`' arrays) from its result ``res``; with
    ``on_device``, reduced on the device (float32) and only then copied: ``(b, ...)`` arrays,
    never ``(b, T)``."""
    traces = {"sampled": res.loss, "expected": res.expected_loss}
    if on_device:
        points = res.carry.env_params.change_points
        out: dict[str, Any] = {
            "segment_loss": summaries.segment_means(res.loss, points, env.num_segments),
            "mean_loss": jnp.mean(res.loss, axis=1),
            "mean_expected_loss": jnp.mean(res.expected_loss, axis=1),
            "mean_prob_best": jnp.mean(res.prob_best, axis=1),
        }
        sa: dict[str, Any] = summaries.adaptive_regret(env, res.carry, traces, windows)
    else:
        segments = metrics.segment_ids(res.carry, res.horizon)
        loss = res.loss.astype(np.float64)
        out = {
            "segment_loss": metrics.per_segment_mean(loss, segments, env.num_segments),
            "mean_loss": loss.mean(axis=1),
            "mean_expected_loss": res.expected_loss.astype(np.float64).mean(axis=1),
            "mean_prob_best": res.prob_best.astype(np.float64).mean(axis=1),
        }
        sa = metrics.paired_adaptive_regret(env, res.carry, traces, windows)
    out["sa_sampled"], out["sa_expected"] = sa["sampled"], sa["expected"]
    muted = getattr(res.carry.state, "num_muted", None)
    if muted is not None:
        out["num_muted"] = muted
    host = jax.device_get(out)
    return {k: np.asarray(v, np.int64 if k == "num_muted" else np.float64) for k, v in host.items()}
