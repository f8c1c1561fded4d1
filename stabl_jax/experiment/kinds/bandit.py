"""The bandit experiment (``kind = "bandit"``, the default): learners paired on one environment."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, cast

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import metrics, registry
from stabl_jax.envs.base import as_environment
from stabl_jax.estimators import FEEDBACKS
from stabl_jax.experiment import plots, tables
from stabl_jax.experiment.configs import Checker, type_name
from stabl_jax.experiment.identity import ExperimentCheckpoints
from stabl_jax.experiment.kinds import paired
from stabl_jax.experiment.kinds.base import Kind, check_distinct
from stabl_jax.experiment.tables import stat
from stabl_jax.learners.base import BanditQuery
from stabl_jax.simulate import RESTART_TRACE, RunCarry, SimResult

#: The ``(R, T)`` per-learner traces a bandit experiment can keep in ``traces.npz``.
SAVABLE_TRACES: tuple[str, ...] = ("loss", "expected_loss", "played", "prob_best")
#: Kept unless ``save_traces`` says otherwise: the played arms.
DEFAULT_SAVE_TRACES: tuple[str, ...] = ("played",)
PLOT_FILES: dict[str, str] = {
    plot: f"{plot}.png"
    for plot in ("reward", "adaptive_regret", "prob_best", "cumulative_regret", "paired_segments")
}
#: What the ``info`` of an environment's own ``evaluate`` must hold, and what reads it.
INFO: dict[str, str] = {
    "best_arm": "best_arm (the prob_best trace)",
    "expected_loss": "expected_loss = <p_t, l_t> (SA(L) of the expected loss)",
}


def arm_dtype(num_arms: int) -> np.dtype:
    """The smallest unsigned dtype holding arms ``0 .. num_arms - 1`` (``uint8`` up to 256 arms)."""
    return np.min_scalar_type(max(num_arms - 1, 0))


def saved_dtype(trace: str, num_arms: int) -> np.dtype:
    """The dtype ``trace`` is saved with: :func:`arm_dtype` for ``played``, else float32."""
    return arm_dtype(num_arms) if trace == "played" else np.dtype(np.float32)


@dataclasses.dataclass(frozen=True)
class BanditConfig(paired.ExperimentConfig):
    """A validated bandit config (:class:`~stabl_jax.experiment.kinds.paired.ExperimentConfig`)."""

    kind: ClassVar[str] = "bandit"
    LEARNERS: ClassVar[registry.Registry] = registry.LEARNERS
    ENVS: ClassVar[registry.Registry] = registry.ENVS
    SIZE: ClassVar[tuple[str, int]] = ("num_arms", 2)
    RESERVED: ClassVar[Mapping[str, str]] = {
        "num_arms": "it is `env.num_arms`",
        **paired.LEARNER_RESERVED,
    }

    #: What the summary, the plots and ``save_traces`` read (not the queried arms).
    RECORDED: ClassVar[tuple[str, ...]] = SAVABLE_TRACES

    @classmethod
    def check_own(cls, check: Checker, raw: Mapping[str, Any], horizon: int) -> dict[str, Any]:
        """``feedback`` and ``save_traces``."""
        return {
            "feedback": check.string("feedback", raw.get("feedback", "loss"), FEEDBACKS),
            "save_traces": _check_save_traces(check, raw),
        }

    @classmethod
    def env_problem(cls, env: Any) -> str:
        """Also: an environment with its own ``evaluate`` gives the ``info`` of :data:`INFO`."""
        problem = super().env_problem(env)
        if problem or as_environment(env) is not env:  # the adapter's evaluate gives both
            return problem
        n = int(env.num_arms)
        query = BanditQuery(
            arms=jnp.zeros(1, jnp.int32),
            play_probs=jnp.full(n, 1.0 / n, jnp.float32),
            query_probs=jnp.ones(1, jnp.float32),
        )

        def first_round(key: jax.Array) -> Any:
            params = env.sample_params(key)
            return env.evaluate(params, env.init(params), jnp.int32(0), query, key)[2]

        info, failed = paired.traced(first_round, "evaluate (one round of a uniform query)")
        if failed:
            return f"{failed} (see {cls.ENVS.guide})"
        missing = [k for k in INFO if k not in info]
        if missing:
            needed = ", ".join(INFO.values())
            return (
                f"defines evaluate, and its info lacks {missing}: {needed} (see {cls.ENVS.guide})"
            )
        return ""

    def learner_sizes(self) -> dict[str, Any]:
        return {"num_arms": self.env.num_arms}

    def header_details(self) -> tuple[str, str]:
        return f"N={self.env.num_arms} arms", f"feedback={self.feedback}"

    def learner_kwargs(self, name: str) -> dict[str, Any]:
        """Learner ``name``'s options; ``feedback`` where the learner takes one."""
        kwargs = super().learner_kwargs(name)
        if "feedback" in self.LEARNERS.entry(name).hints:
            kwargs.setdefault("feedback", self.feedback)
        return kwargs

    def recorded(self, learner: Any) -> tuple[str, ...]:
        """:attr:`RECORDED`, and the ``restart`` trace of a learner that records restarts."""
        restarts = (RESTART_TRACE,) if getattr(learner, "records_restarts", False) else ()
        return (*self.RECORDED, *restarts)

    def trace_bytes(self, learner: Any, width: int) -> tuple[int, int]:
        """16 bytes in memory (17 with restarts); those of ``save_traces`` kept (4 a float,
        1 an arm to 256 arms)."""
        saved = sum(saved_dtype(t, width).itemsize for t in self.save_traces)
        return 4 * len(self.RECORDED) + len(self.recorded(learner)) - len(self.RECORDED), saved


def _check_save_traces(check: Checker, raw: Mapping[str, Any]) -> tuple[str, ...]:
    """``"all"``, ``"none"`` or an array of :data:`SAVABLE_TRACES` names, in that order."""
    value = raw.get("save_traces", list(DEFAULT_SAVE_TRACES))
    if value in ("all", "none"):
        return SAVABLE_TRACES if value == "all" else ()
    allowed = f'"all", "none" or an array of names from {list(SAVABLE_TRACES)}'
    if not isinstance(value, list):
        check.fail("save_traces", f"must be {allowed}, got {value!r} ({type_name(value)})")
    for name in value:
        if name not in SAVABLE_TRACES:
            hint = registry.did_you_mean(name, SAVABLE_TRACES) if isinstance(name, str) else ""
            check.fail("save_traces", f"unknown trace {name!r}{hint}; must be {allowed}")
    check_distinct(check, "save_traces", value)
    return tuple(name for name in SAVABLE_TRACES if name in value)


@dataclasses.dataclass
class LearnerOutcome(paired.Outcome):
    """One learner's simulation and its metrics.

    Attributes:
      segment_reward: ``(R, S)`` mean reward ``1 - l_t(x_t)`` per segment of every run.
      prob_best_segment: ``(R, S)`` mean play probability of the current best arm per segment.
      sa_sampled: ``(R, len(L))`` SA(L) from the suffered loss ``l_t(x_t)``.
      sa_expected: ``(R, len(L))`` SA(L) from the expected loss ``<p_t, l_t>``.
      cumulative_regret: ``(T,)`` mean and 95% half-width over runs and ``(R,)`` final values
        of the cumulative regret to each round's best arm; ``None`` without ``best_arm``.
      detection_delay: ``(R, J)`` :func:`~stabl_jax.metrics.detection_delays` of a learner
        that records restarts (NaN: missed), else ``None``.
      false_alarms: ``(R,)`` :func:`~stabl_jax.metrics.false_alarms`, else ``None``.
      num_restarts: ``(R,)`` restarts of each run, else ``None``.
    """

    segment_reward: np.ndarray
    prob_best_segment: np.ndarray
    sa_sampled: np.ndarray
    sa_expected: np.ndarray
    cumulative_regret: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    detection_delay: np.ndarray | None = None
    false_alarms: np.ndarray | None = None
    num_restarts: np.ndarray | None = None


@dataclasses.dataclass
class ExperimentResult(paired.Result):
    """Everything one bandit experiment produced.

    Attributes:
      segments: ``(R, T)`` segment index of every round of every run.
    """

    segments: np.ndarray


def _reward(loss: np.ndarray) -> np.ndarray:
    """The reward ``1 - l_t(x_t)`` of a float64 block of suffered losses."""
    return 1.0 - loss


def run_experiment(
    config: BanditConfig,
    *,
    progress: paired.ProgressFactory | None = None,
    on_learner_done: Callable[[LearnerOutcome], None] | None = None,
    checkpoints: ExperimentCheckpoints | None = None,
    validate: bool = True,
) -> ExperimentResult:
    """Simulate every learner of ``config`` and compute its metrics.

    Args:
      config: a validated bandit config.
      progress: called with a learner's name before it runs; returns ``simulate``'s
        ``progress``. ``None``: no progress display.
      on_learner_done: called with each learner's outcome once simulated (``sa_*`` still empty).
      checkpoints: where each learner checkpoints and resumes from; ``None``: none.
      validate: check every round inside the compiled program; results unchanged.
    """
    segments: list[np.ndarray] = []  # (R, T), from the first learner's draws (every learner's)

    def per_segment(env: Any, result: SimResult) -> dict[str, Any]:
        if not segments:
            segments.append(metrics.segment_ids(result.final_carry("the segments"), config.horizon))
        ids, num_segments = segments[0], paired.num_segments(env)
        return {
            "segment_reward": metrics.per_segment_mean(result.loss, ids, num_segments, _reward),
            "prob_best_segment": metrics.per_segment_mean(result.prob_best, ids, num_segments),
            "sa_sampled": np.empty((config.runs, 0)),
            "sa_expected": np.empty((config.runs, 0)),
            **detection(result),
        }

    def adaptive_regret(env: Any, carry: RunCarry, outcomes: dict[str, Any]) -> dict[str, Any]:
        traces = {}
        for name, o in outcomes.items():
            traces[(name, "sampled")] = o.result.loss
            traces[(name, "expected")] = o.result.expected_loss
        expected = {name: o.result.expected_loss for name, o in outcomes.items()}
        cumulative = metrics.CumulativeRegret(env, expected) if metrics.has_best_arm(env) else None
        on_block = None if cumulative is None else cumulative.add  # the same regenerated losses
        regrets = metrics.paired_adaptive_regret(
            env, carry, traces, config.sa_windows, on_block=on_block
        )
        curves = None if cumulative is None else cumulative.result()
        for name, outcome in outcomes.items():
            outcome.sa_sampled = regrets[(name, "sampled")]
            outcome.sa_expected = regrets[(name, "expected")]
            outcome.cumulative_regret = None if curves is None else curves[name]
        return {"segments": segments[0]}

    return paired.run_learners(
        config,
        LearnerOutcome,
        per_segment,
        adaptive_regret,
        ExperimentResult,
        on_learner_done,
        progress=progress,
        checkpoints=checkpoints,
        validate=validate,
    )


def detection(result: SimResult) -> dict[str, np.ndarray]:
    """``detection_delay``, ``false_alarms`` and ``num_restarts`` of a result with a
    ``restart`` trace (the runs' own change points); ``{}`` without one. An environment
    without change points has nothing to detect: ``num_restarts`` alone."""
    restarts = result.arrays.get(RESTART_TRACE)
    if restarts is None:
        return {}
    counts = {"num_restarts": np.asarray(np.sum(restarts, axis=1), np.int64)}
    params = result.final_carry("the detection delays").env_params
    if getattr(params, "change_points", None) is None:
        return counts
    points = np.asarray(params.change_points).reshape(restarts.shape[0], -1)
    return {
        "detection_delay": metrics.detection_delays(restarts, points),
        "false_alarms": metrics.false_alarms(restarts, points),
        **counts,
    }


def detection_summary(outcome: LearnerOutcome) -> dict[str, Any]:
    """Per breakpoint the fraction of runs that restart in its segment and their mean delay
    (with Student-t 95% half-widths over those runs); false alarms and restarts per run."""
    restarts = {"restarts": stat(cast(np.ndarray, outcome.num_restarts).astype(np.float64))}
    if outcome.detection_delay is None:
        return {"change_points": "none: no detection delay or false alarm", **restarts}
    delays = outcome.detection_delay
    found = np.isfinite(delays)
    means, halves = np.full(delays.shape[1], np.nan), np.full(delays.shape[1], np.nan)
    for j in range(delays.shape[1]):
        hit = delays[found[:, j], j]
        if hit.size > 1:
            means[j], halves[j] = metrics.mean_ci(hit)
        elif hit.size:
            means[j] = hit[0]
    return {
        "detected": stat(found.astype(np.float64)),
        "delay": {"mean": means, "ci95": halves},
        "false_alarms": stat(cast(np.ndarray, outcome.false_alarms).astype(np.float64)),
        **restarts,
    }


def learner_summary(outcome: LearnerOutcome, window_lengths: tuple[int, ...]) -> dict[str, Any]:
    """Metrics of one learner (means and 95% half-widths over runs)."""
    result = outcome.result
    summary = {
        **paired.learner_header(outcome),
        "mean_reward": stat(metrics.row_means(result.loss, _reward)),
        "segment_reward": stat(outcome.segment_reward),
        "adaptive_regret": {
            "window_lengths": list(window_lengths),
            "sampled": stat(outcome.sa_sampled),
            "expected": stat(outcome.sa_expected),
        },
        "prob_best": {
            "overall": stat(metrics.row_means(result.prob_best)),
            "per_segment": stat(outcome.prob_best_segment),
        },
        "num_muted": outcome.num_muted,
    }
    if outcome.cumulative_regret is not None:
        summary["cumulative_regret"] = stat(outcome.cumulative_regret[2])
    if outcome.num_restarts is not None:
        summary["detection"] = detection_summary(outcome)
    return summary


def per_run(outcome: LearnerOutcome, window_lengths: tuple[int, ...]) -> dict[str, Any]:
    """The per-run metrics the paired differences subtract: mean and per-segment reward, SA(L)
    and (where the environment names its best arm) the final cumulative regret."""
    values = {
        "mean_reward": metrics.row_means(outcome.result.loss, _reward),
        "segment_reward": outcome.segment_reward,
        "adaptive_regret": {
            "window_lengths": list(window_lengths),
            "sampled": outcome.sa_sampled,
            "expected": outcome.sa_expected,
        },
    }
    if outcome.cumulative_regret is not None:
        values["cumulative_regret"] = outcome.cumulative_regret[2]
    return values


def build_summary(result: ExperimentResult, *, started: str | None = None) -> dict[str, Any]:
    """The ``summary.json`` document of an experiment."""
    notes = {
        "segment_reward": "per run, mean of 1 - l_t(x_t) over each segment",
        "adaptive_regret": "SA(L) = max over windows of length L of (learner's loss - "
        "best arm's loss); 'sampled' uses l_t(x_t), 'expected' uses <p_t, l_t>",
        "prob_best": "play probability of the arm with the smallest mean loss at round t",
        "num_muted": "StABL meta-weight updates with 1 + eta_k r~ <= 0, summed over runs",
        "detection": "learners that restart: per breakpoint b_j, 'detected' is the fraction of "
        "runs with a restart in [b_j, b_{j+1}) and 'delay' the mean over those runs of the "
        "rounds from b_j to that first restart (1: the first round after the change, Student-t "
        "ci95); 'false_alarms' counts restarts before the first breakpoint, 'restarts' all "
        "restarts of a run (Rexp3's are scheduled, not detections); without change points, "
        "'restarts' alone",
        "cumulative_regret": "per run, sum over t < T of <p_t, l_t> - l_t(i*_t), i*_t the "
        "best arm of round t (the environment's best_arm): the regret of the play "
        "distribution to the best arm of each segment",
    }
    files = dict(PLOT_FILES)
    if any(o.cumulative_regret is None for o in result.outcomes.values()):
        del files["cumulative_regret"]
    if not has_paired_segments(result):
        del files["paired_segments"]
    return paired.build_summary(result, started, notes, learner_summary, files, per_run)


def trace_arrays(result: ExperimentResult) -> dict[str, np.ndarray]:
    """Arrays of ``traces.npz``: per learner SA(L), ``segment_reward`` and ``save_traces``.

    SA(L) is ``(R, len(L))`` and ``segment_reward`` ``(R, S)``, float64; traces are ``(R, T)``
    float32 (``played``: :func:`arm_dtype`); also those of :func:`.paired.trace_arrays`.
    """
    saved = {t: saved_dtype(t, result.env.num_arms) for t in result.config.save_traces}
    return paired.trace_arrays(result, saved, ("segment_reward", "sa_sampled", "sa_expected"))


def has_paired_segments(result: ExperimentResult) -> bool:
    """Whether ``paired_segments.png`` is drawn: two segments or more, two learners or more."""
    return result.num_segments >= 2 and len(result.outcomes) >= 2


def segment_differences(result: ExperimentResult) -> list[plots.Band]:
    """Per learner but the reference, its per-segment reward minus the reference's, paired by
    run: the bars of ``paired_segments.png``."""
    reference = result.config.reference_learner
    base = result.outcomes[reference].segment_reward
    diffs = []
    for name, outcome in result.outcomes.items():
        if name != reference:
            mean, half = metrics.mean_ci(outcome.segment_reward - base)
            segments = np.arange(1, mean.shape[0] + 1)
            diffs.append(plots.Band(name, plots.label(name), segments, mean, half))
    return diffs


def plot_paired_segments(
    result: ExperimentResult, diffs: list[plots.Band], path: Path, head: str, setting: str
) -> Path:
    """``paired_segments.png``: per segment, each learner's reward minus the reference's."""
    reference = plots.label(result.config.reference_learner)
    title = (
        f"{head}\nper-segment reward minus {reference}'s, paired by run, mean "
        f"with 95% t interval\n({setting})"
    )
    return plots.plot_paired_segments(diffs, path, title=title, reference=reference)


def render_plots(result: ExperimentResult, folder: str | Path) -> list[Path]:
    """Draw an experiment's PNGs into ``folder``, and their curves into ``curves.npz``
    (:func:`~stabl_jax.experiment.plots.save_curves`); returns the PNGs' paths."""
    config = result.config
    env = result.env
    window = config.window
    reward, regret, prob = [], [], []
    for name, outcome in result.outcomes.items():
        reward.append(paired.moving_band(name, outcome.result.loss, window, _reward))
        prob.append(paired.moving_band(name, outcome.result.prob_best, window))
        regret.append(paired.regret_band(outcome, outcome.sa_sampled, config.sa_windows))
    change_points = paired.fixed_change_points(env) or ()
    setting = (
        f"{config.env.name}, N={env.num_arms}, T={config.horizon}, {config.runs} runs, "
        f"feedback={config.feedback}"
    )
    head = plots.heading(config.name, config.description, sets_params=bool(config.params))
    titles = {
        "reward": f"{head}\nreward, mean over runs with 95% band ({setting})",
        "adaptive_regret": f"{head}\nstrongly adaptive regret SA(L) of the sampled loss, "
        f"mean with 95% band ({setting})",
        "prob_best": f"{head}\nprobability on the current best arm ({setting})",
    }
    written = plots.write_plots(
        folder,
        reward=reward,
        adaptive_regret=regret,
        prob_best=prob,
        titles=titles,
        window=window,
        change_points=change_points,
        filenames=PLOT_FILES,
    )
    drawn = {"reward": reward, "adaptive_regret": regret, "prob_best": prob}
    curves = {name: o.cumulative_regret for name, o in result.outcomes.items()}
    if all(curve is not None for curve in curves.values()):
        bands = [
            plots.Band(name, plots.label(name), np.arange(1, config.horizon + 1), mean, half)
            for name, (mean, half, _) in curves.items()
        ]
        title = (
            f"{head}\ncumulative regret of the play distribution to the best arm of each "
            f"round ({setting}; mean with 95% band)"
        )
        path = Path(folder) / PLOT_FILES["cumulative_regret"]
        written.append(
            plots.plot_cumulative_regret(bands, path, title=title, change_points=change_points)
        )
        drawn["cumulative_regret"] = bands
    if has_paired_segments(result):
        path = Path(folder) / PLOT_FILES["paired_segments"]
        drawn["paired_segments"] = diffs = segment_differences(result)
        written.append(plot_paired_segments(result, diffs, path, head, setting))
    plots.save_curves(folder, drawn)
    return written


def format_table(result: Any) -> str:
    """The printed summary: per learner, queries, segment reward, SA(L) and ``prob_best``."""
    config = result.config
    shown = paired.pick_windows(config.sa_windows)
    segments = [f"seg{s + 1} reward" for s in range(result.num_segments)]
    rows = [["learner", "q", *segments, *(f"SA({L})" for L in shown), "P(best arm)"]]
    for name, outcome in result.outcomes.items():
        seg_mean, seg_half = metrics.mean_ci(outcome.segment_reward)
        sa_mean, sa_half = metrics.mean_ci(outcome.sa_sampled)
        pb_mean, pb_half = metrics.mean_ci(metrics.row_means(outcome.result.prob_best))
        row = [name, str(outcome.learner.num_queries)]
        row += [tables.plus_minus(m, h, 3) for m, h in zip(seg_mean, seg_half, strict=True)]
        row += [tables.plus_minus(sa_mean[c], sa_half[c], 1) for c in shown.values()]
        row += [tables.plus_minus(pb_mean, pb_half, 3)]
        rows.append(row)
    table = tables.text_table(
        rows,
        f"{paired.over(config.runs)}; reward = 1 - loss of the played arm; SA(L) = worst "
        "regret over any L consecutive rounds (sampled loss); q = queries/round",
    )
    if len(result.outcomes) < 2:
        return table

    def cells(outcome: LearnerOutcome) -> list[tuple[np.ndarray, int]]:
        reward = metrics.row_means(outcome.result.loss, _reward)
        segment = [(outcome.segment_reward[:, s], 3) for s in range(result.num_segments)]
        windows = [(outcome.sa_sampled[:, c], 1) for c in shown.values()]
        return [(reward, 3), *segment, *windows]

    header = ["reward", *segments, *(f"SA({L})" for L in shown)]
    return f"{table}\n\n{paired.difference_table(result, cells, header)}"


def run(config: BanditConfig, **kwargs: Any) -> ExperimentResult:
    """:func:`run_experiment` as ``stabl-jax run`` shows it."""
    return paired.run(run_experiment, config, metrics_label="SA(L), per segment", **kwargs)


KIND = Kind(
    name="bandit",
    description="learners compared on one bandit environment (the default)",
    validate=BanditConfig.validate,
    header=paired.header,
    run=run,
    summary=build_summary,
    traces=trace_arrays,
    plots=render_plots,
    table=format_table,
    estimate=paired.estimate,
    resumed_line=paired.resumed_rounds,
)
