"""Run an experiment config: simulate every learner on the same environment draws and measure.

Every learner is simulated with the same key ``jax.random.key(config.seed)``; since the
simulator derives run ``i``'s environment parameters and losses from ``fold_in(key, i)`` only,
all learners face identical losses in every run (a paired comparison), and the arm losses
needed for SA(L) are regenerated once per block of runs and shared by all learners.

A BCO config (``kind = "bco"``) runs through :func:`run_bco_experiment` the same way: every
learner simulated by :func:`~stabl_jax.simulate.simulate` with the same key, and SA(L)
computed by :func:`~stabl_jax.bco.simulate.paired_bco_adaptive_regret` (the
:func:`~stabl_jax.bco.simulate.bco_adaptive_regret` metric with the window comparators, which
do not depend on the learner, solved once for all learners).

This module belongs to the face of the library (it times things and talks to a progress
callback) but does no file I/O and does not import matplotlib.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from stabl_jax import metrics
from stabl_jax.bco.simulate import comparator_solver, paired_bco_adaptive_regret
from stabl_jax.checkpoint import ExperimentCheckpoints
from stabl_jax.config import ExperimentConfig, saved_dtype
from stabl_jax.simulate import RunCarry, SimResult, auto_chunk_size, simulate

#: With ``chunk_size`` absent, at least this many chunks per run (so a progress bar moves),
#: within :func:`stabl_jax.simulate.auto_chunk_size`'s memory budget.
AUTO_MIN_CHUNKS = 16

ProgressFactory = Callable[[str], Callable[[int, int], None] | bool]


@dataclasses.dataclass
class LearnerOutcome:
    """One learner's simulation and the metrics computed from it.

    Attributes:
      name: registry name.
      learner: the learner object.
      params: the learner params it ran with (shared by all runs).
      result: its :class:`~stabl_jax.simulate.SimResult` (``(R, T)`` traces).
      segment_reward: ``(R, S)`` mean reward ``1 - l_t(x_t)`` per segment of every run.
      prob_best_segment: ``(R, S)`` mean play probability of the current best arm per segment.
      sa_sampled: ``(R, len(L))`` SA(L) from the suffered loss ``l_t(x_t)``.
      sa_expected: ``(R, len(L))`` SA(L) from the expected loss ``<p_t, l_t>``.
      num_muted: total meta-weight muting events over runs (StABL variants), else ``None``.
      wall_seconds: simulation wall time (compile + run + transfers).
    """

    name: str
    learner: Any
    params: Any
    result: SimResult
    segment_reward: np.ndarray
    prob_best_segment: np.ndarray
    sa_sampled: np.ndarray
    sa_expected: np.ndarray
    num_muted: int | None
    wall_seconds: float


@dataclasses.dataclass
class ExperimentResult:
    """Everything one experiment produced, in memory.

    Attributes:
      config: the validated config.
      env: the environment object.
      outcomes: per learner, in config order.
      segments: ``(R, T)`` segment index of every round of every run.
      change_points: ``(R, S - 1)`` change points of every run.
      chunk_size: rounds per compiled chunk actually used.
      wall_seconds: total wall time of :func:`run_experiment`.
      metrics_seconds: time spent computing SA(L) and the per-segment metrics.
    """

    config: ExperimentConfig
    env: Any
    outcomes: dict[str, LearnerOutcome]
    segments: np.ndarray
    change_points: np.ndarray
    chunk_size: int
    wall_seconds: float
    metrics_seconds: float

    @property
    def num_segments(self) -> int:
        return int(self.env.num_segments)


def resolve_chunk_size(config: ExperimentConfig) -> int:
    """``config.chunk_size``, or: the memory-budget chunk of :func:`auto_chunk_size`, capped
    so that a run has at least :data:`AUTO_MIN_CHUNKS` chunks (rounded up to a divisor-friendly
    size; results do not depend on it)."""
    if config.chunk_size is not None:
        return min(config.chunk_size, config.horizon)
    budget = auto_chunk_size(config.runs, config.horizon)
    return max(1, min(budget, math.ceil(config.horizon / AUTO_MIN_CHUNKS)))


#: The rough simulation speed :func:`estimate_resources` assumes: arm (or coordinate) updates
#: per second, about StABL's with n = 30 arms on a 2-core CPU (README, "Speed").
ESTIMATE_UPDATES_PER_SECOND = 3e7
#: Disk taken by the plots and the summary of one experiment (generous).
PLOTS_BYTES = 2**20
#: Memory of a JAX process before it holds any data.
BASE_MEMORY_BYTES = 512 * 2**20


@dataclasses.dataclass(frozen=True)
class Resources:
    """What an experiment needs, estimated from its config before it runs.

    Attributes:
      memory_bytes: peak host memory: every learner's ``(R, T)`` traces and a copy of them
        while ``traces.npz`` is written, the loop state of every run (device, host and
        checkpoint copies), one block of the SA(L) pass and the JAX process itself.
      disk_bytes: peak disk: every learner's chunk checkpoints (its traces and loop state)
        plus ``traces.npz``, which exist together until the folder is committed, and the
        plots.
      seconds: simulation time at :data:`ESTIMATE_UPDATES_PER_SECOND` (a rough guide, not a
        limit).
    """

    memory_bytes: int
    disk_bytes: int
    seconds: float


def _tree_bytes(tree: Any) -> int:
    return sum(int(math.prod(x.shape)) * x.dtype.itemsize for x in jax.tree.leaves(tree))


def estimate_resources(config: ExperimentConfig) -> Resources:
    """Estimate an experiment's memory, disk and time from its config alone (nothing is
    allocated: the loop state's size comes from :func:`jax.eval_shape`).

    Per run and round a bandit learner records ``16 + 4 q`` bytes (``q`` queries) and
    ``traces.npz`` keeps those of ``save_traces`` (4 a float, 1 the arm up to 256 arms); a BCO
    learner 16 and 8.
    """
    runs, horizon = int(config.runs), int(config.horizon)
    env = config.make_env()
    key = jax.random.key(0)
    width = int(getattr(env, "num_arms", 0) or getattr(env, "dim", 1))
    env_bytes = _tree_bytes(jax.eval_shape(env.sample_params, key))
    traces = kept = state = 0
    for name in config.learners:
        learner = config.make_learner(name)
        state = max(state, _tree_bytes(jax.eval_shape(learner.init, key)) + env_bytes)
        recorded = 16 if config.kind == "bco" else 16 + 4 * int(learner.num_queries)
        traces += runs * horizon * recorded
        saved = (saved_dtype(t, width).itemsize for t in getattr(config, "save_traces", ()))
        kept += runs * horizon * (8 if config.kind == "bco" else sum(saved))
    learners = len(config.learners)
    states = runs * state
    sa_block = max(256 * 2**20, horizon * width * 12)  # metrics.paired_adaptive_regret
    return Resources(
        memory_bytes=BASE_MEMORY_BYTES + traces + 2 * kept + 3 * states + sa_block,
        disk_bytes=traces + kept + 2 * learners * states + PLOTS_BYTES,
        seconds=learners * runs * horizon * width / ESTIMATE_UPDATES_PER_SECOND,
    )


def run_experiment(
    config: ExperimentConfig,
    *,
    progress: ProgressFactory | None = None,
    on_learner_done: Callable[[Any], None] | None = None,
    checkpoints: ExperimentCheckpoints | None = None,
    validate: bool = True,
) -> ExperimentResult | BCOExperimentResult:
    """Simulate every learner of ``config`` and compute its metrics.

    Args:
      config: a validated experiment config.
      progress: called with a learner's name before it runs; returns what
        :func:`~stabl_jax.simulate.simulate` takes as ``progress`` (``bool`` or a
        ``(done, total)`` callback). ``None``: no progress display.
      on_learner_done: called with each learner's outcome as soon as it is simulated (before
        the shared SA(L) pass, so its ``sa_*`` arrays are still empty then).
      checkpoints: where each learner's simulation checkpoints every chunk and resumes from
        (:class:`~stabl_jax.checkpoint.ExperimentCheckpoints`); ``None``: no checkpoints.
      validate: check every round's losses (and a bandit learner's play distribution) inside
        the compiled program (``simulate(validate=True)``). Results are unchanged.

    Returns:
      An :class:`ExperimentResult`, or a :class:`BCOExperimentResult` for a BCO config
      (:func:`run_bco_experiment`).
    """
    if config.kind == "bco":
        return run_bco_experiment(
            config,
            progress=progress,
            on_learner_done=on_learner_done,
            checkpoints=checkpoints,
            validate=validate,
        )
    start = time.perf_counter()
    env = config.make_env()
    key = jax.random.key(config.seed)
    chunk = resolve_chunk_size(config)
    num_segments = int(env.num_segments)
    outcomes: dict[str, LearnerOutcome] = {}
    segments: np.ndarray | None = None
    change_points: np.ndarray | None = None
    metrics_s = 0.0
    for name in config.learners:
        learner = config.make_learner(name)
        params = config.learner_params(learner, name)
        sim_start = time.perf_counter()
        result = simulate(
            learner,
            env,
            key,
            config.runs,
            horizon=config.horizon,
            params=params,
            chunk_size=chunk,
            progress=progress(name) if progress is not None else False,
            validate=validate,
            checkpoint=checkpoints.for_learner(name) if checkpoints is not None else None,
        )
        sim_s = time.perf_counter() - sim_start
        metric_start = time.perf_counter()
        if segments is None:
            segments = metrics.segment_ids(result.carry, config.horizon)
            points = np.asarray(result.carry.env_params.change_points)
            change_points = points.reshape(config.runs, num_segments - 1).astype(np.int32)
        reward = 1.0 - result.loss.astype(np.float64)
        outcome = LearnerOutcome(
            name=name,
            learner=learner,
            params=params,
            result=result,
            segment_reward=metrics.per_segment_mean(reward, segments, num_segments),
            prob_best_segment=metrics.per_segment_mean(
                result.prob_best.astype(np.float64), segments, num_segments
            ),
            sa_sampled=np.empty((config.runs, 0)),
            sa_expected=np.empty((config.runs, 0)),
            num_muted=_num_muted(result.carry),
            wall_seconds=sim_s,
        )
        metrics_s += time.perf_counter() - metric_start
        outcomes[name] = outcome
        if on_learner_done is not None:
            on_learner_done(outcome)

    metric_start = time.perf_counter()
    first = next(iter(outcomes.values()))
    traces = {}
    for name, o in outcomes.items():
        traces[(name, "sampled")] = o.result.loss
        traces[(name, "expected")] = o.result.expected_loss
    regrets = metrics.paired_adaptive_regret(env, first.result.carry, traces, config.sa_windows)
    for name, outcome in outcomes.items():
        outcome.sa_sampled = regrets[(name, "sampled")]
        outcome.sa_expected = regrets[(name, "expected")]
    metrics_s += time.perf_counter() - metric_start
    assert segments is not None and change_points is not None
    return ExperimentResult(
        config=config,
        env=env,
        outcomes=outcomes,
        segments=segments,
        change_points=change_points,
        chunk_size=chunk,
        wall_seconds=time.perf_counter() - start,
        metrics_seconds=metrics_s,
    )


def _num_muted(carry: RunCarry) -> int | None:
    muted = getattr(carry.state, "num_muted", None)
    if muted is None:
        return None
    return int(np.asarray(muted, dtype=np.int64).sum())


# --------------------------------------------------------------------------------------------
# Bandit convex optimisation
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class BCOLearnerOutcome:
    """One BCO learner's simulation and its metrics.

    Attributes:
      name: :data:`stabl_jax.registry.BCO_LEARNERS` name.
      learner: the learner object.
      params: the learner params it ran with (shared by all runs).
      result: its :class:`~stabl_jax.simulate.SimResult` (``(R, T)`` traces ``loss`` and
        ``best_loss``).
      sa: ``(R, len(L))`` SA(L) from the suffered loss ``l_t(x_t)`` (empty until the shared
        SA(L) pass has run).
      num_muted: total meta-weight muting events over runs (Algorithm 3 and Appendix D), else
        ``None``.
      wall_seconds: simulation wall time (compile + run + transfers).
    """

    name: str
    learner: Any
    params: Any
    result: SimResult
    sa: np.ndarray
    num_muted: int | None
    wall_seconds: float


@dataclasses.dataclass
class BCOExperimentResult:
    """Everything one BCO experiment produced, in memory.

    Attributes:
      config: the validated config (``kind = "bco"``).
      env: the convex environment.
      outcomes: per learner, in config order.
      comparator_gap: ``(R, len(L))`` the largest Frank-Wolfe certificate of the window
        comparators (shared by all learners: the exact SA(L) on the window grid lies in
        ``[sa, sa + gap]``).
      change_points: ``(R, S - 1)`` change points of every run.
      chunk_size: rounds per compiled chunk actually used.
      wall_seconds: total wall time of :func:`run_bco_experiment`.
      metrics_seconds: time spent computing SA(L).
    """

    config: ExperimentConfig
    env: Any
    outcomes: dict[str, BCOLearnerOutcome]
    comparator_gap: np.ndarray
    change_points: np.ndarray
    chunk_size: int
    wall_seconds: float
    metrics_seconds: float

    @property
    def num_segments(self) -> int:
        return int(self.env.num_segments)

    @property
    def sa_method(self) -> dict[str, str]:
        """How SA(L) was computed: the window grid and the comparator solver."""
        stride = self.config.sa_stride
        return {
            "metric": "stabl_jax.bco.simulate.bco_adaptive_regret (comparators shared by all "
            "learners: paired_bco_adaptive_regret)",
            "stride": "max(1, L // 4)" if stride is None else str(stride),
            "window_starts": "{0, s, 2s, ...} ∪ {T - L} with s the stride",
            "solver": comparator_solver(self.env),
        }


def run_bco_experiment(
    config: ExperimentConfig,
    *,
    progress: ProgressFactory | None = None,
    on_learner_done: Callable[[BCOLearnerOutcome], None] | None = None,
    checkpoints: ExperimentCheckpoints | None = None,
    validate: bool = False,
) -> BCOExperimentResult:
    """Simulate every BCO learner of ``config`` on the same environment draws and measure SA(L).

    Args:
      config: a validated config with ``kind = "bco"``.
      progress: as in :func:`run_experiment`.
      on_learner_done: called with each learner's outcome as soon as it is simulated (its
        ``sa`` is still empty then).
      checkpoints, validate: as in :func:`run_experiment`.

    Returns:
      A :class:`BCOExperimentResult`.
    """
    start = time.perf_counter()
    env = config.make_env()
    key = jax.random.key(config.seed)
    chunk = resolve_chunk_size(config)
    outcomes: dict[str, BCOLearnerOutcome] = {}
    for name in config.learners:
        learner = config.make_learner(name)
        params = config.learner_params(learner, name)
        sim_start = time.perf_counter()
        result = simulate(
            learner,
            env,
            key,
            config.runs,
            horizon=config.horizon,
            params=params,
            chunk_size=chunk,
            progress=progress(name) if progress is not None else False,
            validate=validate,
            checkpoint=checkpoints.for_learner(name) if checkpoints is not None else None,
        )
        outcome = BCOLearnerOutcome(
            name=name,
            learner=learner,
            params=params,
            result=result,
            sa=np.empty((config.runs, 0)),
            num_muted=_num_muted(result.carry),
            wall_seconds=time.perf_counter() - sim_start,
        )
        outcomes[name] = outcome
        if on_learner_done is not None:
            on_learner_done(outcome)

    metric_start = time.perf_counter()
    first = next(iter(outcomes.values()))
    regrets = paired_bco_adaptive_regret(
        env,
        first.result.carry,
        {name: o.result.loss for name, o in outcomes.items()},
        config.sa_windows,
        stride=config.sa_stride,
    )
    for name, outcome in outcomes.items():
        outcome.sa = regrets["sa"][name]
    metrics_s = time.perf_counter() - metric_start
    points = np.asarray(first.result.carry.env_params.change_points)
    return BCOExperimentResult(
        config=config,
        env=env,
        outcomes=outcomes,
        comparator_gap=regrets["comparator_gap"],
        change_points=points.reshape(config.runs, env.num_segments - 1).astype(np.int32),
        chunk_size=chunk,
        wall_seconds=time.perf_counter() - start,
        metrics_seconds=metrics_s,
    )
