"""The bandit experiment (``kind = "bandit"``, the default): learners compared on one bandit
environment, paired; SA(L), per-segment reward and probability on the best arm.

A config names an environment, the learners to compare on it (all simulated with the same key,
so every learner faces the same environment draws: a paired comparison), and the sizes of the
Monte Carlo study. Example (``configs/expert_advice_equal.toml``)::

    name = "expert_advice_equal"
    description = "Fig. 1 (left): N=30, T=4096, four equal segments"
    seed = 0
    runs = 500
    horizon = 4096
    learners = ["uniform", "exp3_uniform", "stabl", "stabl_naive", "stabl_single_scale"]
    window = 50                      # moving-average window of the reward plot
    feedback = "loss"                # or "reward"; for learners that accept it
    # sa_windows = [16, 32, ...]     # SA(L) window lengths; default 2^4 .. horizon
    # chunk_size = 256               # rounds per compiled chunk; absent = auto
    # save_traces = ["played"]       # (R, T) traces kept in traces.npz; "all" or "none"

    [env]
    name = "expert_advice"           # a name in stabl_jax.registry.ENVS, or "package.module:Class"
    num_arms = 30                    # ... and that environment's constructor arguments
    num_segments = 4

    [learner_options.stabl_single_scale]   # extra constructor arguments of one learner
    history_lengths = [1024]

    [params.stabl]                   # values of that learner's Params fields
    meta_lr_scale = 1.0

A BCO experiment (``kind = "bco"``, :mod:`stabl_jax.experiment.kinds.bco`) has the same keys.

Learner and environment names are registry names (:mod:`stabl_jax.registry`) or import paths
of your own classes, ``"package.module:Class"`` (the module importable, e.g. on ``PYTHONPATH``);
their tables are then quoted keys (``[params."mypkg.mod:MyLearner"]``). Environment and
learner keyword arguments are checked against the constructor's dataclass fields and type
hints, then by constructing the object (its own checks); every problem raises
:class:`~stabl_jax.experiment.configs.ConfigError` naming the key, the file and what is allowed.

The arm losses SA(L) needs are regenerated once per block of runs and shared by all learners
(:func:`stabl_jax.metrics.paired_adaptive_regret`). The results folder
(:mod:`stabl_jax.experiment.results`) holds ``reward.png`` (moving-average reward, the paper's
Figure 1), ``adaptive_regret.png`` (SA(L) against L), ``prob_best.png`` (play probability
of the current best arm), ``cumulative_regret.png`` (the regret of the play distribution
to the best arm of each round, against t) and, with change points, ``paired_segments.png``
(per segment, each learner's reward minus tuned or printed StABL's, paired by run);
``traces.npz`` keeps the ``(R, T)`` traces of ``save_traces`` (default ``["played"]``, the
arms as ``uint8`` up to 256 arms) and always the per-run SA(L) and segment rewards. The
metrics and plots are computed from every trace in memory before anything is written, so
``summary.json`` and the PNGs do not depend on ``save_traces``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from stabl_jax import metrics, registry
from stabl_jax.experiment import plots, tables
from stabl_jax.experiment.checkpoints import ExperimentCheckpoints
from stabl_jax.experiment.configs import Checker, type_name
from stabl_jax.experiment.kinds import paired
from stabl_jax.experiment.kinds.base import FEEDBACKS, Kind, Resources, check_distinct
from stabl_jax.experiment.results import stat
from stabl_jax.simulate import RunCarry, SimResult

#: The ``(R, T)`` per-learner traces a bandit experiment can keep in ``traces.npz``.
SAVABLE_TRACES: tuple[str, ...] = ("loss", "expected_loss", "played", "prob_best")
#: The metrics pass's cost (:meth:`BanditConfig.metrics_seconds`) a run and round, a run,
#: round and window length, and a run, round, window length and arm, fitted to the
#: ``timings.metrics_seconds`` of ``stabl-jax --compile-cache off run expert_advice_random``
#: with one learner (2-core AMD EPYC, 2026-11-29): 2.995 s at R = 400, n = 10, nine
#: lengths (2.9 s by the fit), 1.246 s with one length (1.1 s), 5.52 s at n = 100 (5.5 s),
#: 5.23 s at R = 100, n = 300 (2.9 s); ``expert_advice_large`` (R = 100, n = 300,
#: T = 65536, 13 lengths) took 56.6 s (64.6 s), ``figure1`` 6.4 s (4.3 s).
ESTIMATE_SA_ROUND_SECONDS = 5e-7
ESTIMATE_SA_WINDOW_SECONDS = 1.2e-7
ESTIMATE_SA_ARM_SECONDS = 2e-9
#: Kept unless ``save_traces`` says otherwise: the played arms as ``uint8`` (for up to 256
#: arms) cost one byte per run and round, 10 MB for the default job; ``loss`` would add 41 MB.
DEFAULT_SAVE_TRACES: tuple[str, ...] = ("played",)
PLOT_FILES: dict[str, str] = {
    "reward": "reward.png",
    "adaptive_regret": "adaptive_regret.png",
    "prob_best": "prob_best.png",
    "cumulative_regret": "cumulative_regret.png",
    "paired_segments": "paired_segments.png",
}
#: The reference of ``paired_segments.png``: the first of these a config runs (else its
#: first learner).
PAIRED_REFERENCES: tuple[str, ...] = ("stabl_tuned", "stabl")


def arm_dtype(num_arms: int) -> np.dtype:
    """The smallest unsigned integer dtype holding the arms ``0 .. num_arms - 1``: ``uint8``
    up to 256 arms, ``uint16`` up to 65536."""
    return np.min_scalar_type(max(num_arms - 1, 0))


def saved_dtype(trace: str, num_arms: int) -> np.dtype:
    """The dtype trace ``trace`` of :data:`SAVABLE_TRACES` is saved with: :func:`arm_dtype`
    for ``played``, float32 (the simulated values, exactly) for the losses and ``prob_best``."""
    return arm_dtype(num_arms) if trace == "played" else np.dtype(np.float32)


@dataclasses.dataclass(frozen=True)
class BanditConfig(paired.ExperimentConfig):
    """A validated bandit config (:class:`~stabl_jax.experiment.kinds.paired.ExperimentConfig`; see
    the
    module docstring for the file format)."""

    kind: ClassVar[str] = "bandit"
    LEARNERS: ClassVar[registry.Registry] = registry.LEARNERS
    ENVS: ClassVar[registry.Registry] = registry.ENVS
    SIZE: ClassVar[tuple[str, int]] = ("num_arms", 2)
    RESERVED: ClassVar[Mapping[str, str]] = {
        "num_arms": "it is `env.num_arms`",
        **paired.LEARNER_RESERVED,
    }

    #: What the summary, the plots and ``save_traces`` read; not the queried arms ``(R, T, q)``,
    #: which a full-information learner at n = 300 would fill at 1.2 KB per run and round.
    RECORDED: ClassVar[tuple[str, ...]] = SAVABLE_TRACES

    @classmethod
    def check_own(cls, check: Checker, raw: Mapping[str, Any], horizon: int) -> dict[str, Any]:
        """``feedback`` and ``save_traces``."""
        return {
            "feedback": check.string("feedback", raw.get("feedback", "loss"), FEEDBACKS),
            "save_traces": _check_save_traces(
                check, raw.get("save_traces", list(DEFAULT_SAVE_TRACES))
            ),
        }

    def learner_sizes(self) -> dict[str, Any]:
        return {"num_arms": self.env.num_arms}

    def learner_kwargs(self, name: str) -> dict[str, Any]:
        """Learner ``name``'s options; ``feedback`` where the learner takes one."""
        kwargs = super().learner_kwargs(name)
        if "feedback" in self.LEARNERS.entry(name).hints:
            kwargs.setdefault("feedback", self.feedback)
        return kwargs

    def trace_bytes(self, learner: Any, width: int) -> tuple[int, int]:
        """16 bytes in memory (the four :attr:`RECORDED` traces, whatever the number of
        queries); those of ``save_traces`` kept (4 a float, 1 the arm up to 256 arms)."""
        saved = sum(saved_dtype(t, width).itemsize for t in self.save_traces)
        return 4 * len(self.RECORDED), saved

    def metrics_seconds(self, env: Any) -> float:
        """The metrics pass's rough seconds on a CPU, compiles aside: every run and round
        regenerates the arm losses and adds to the per-segment sums
        (:data:`ESTIMATE_SA_ROUND_SECONDS`), and every window length takes the best arm's
        window sums over the ``n`` arms (:data:`ESTIMATE_SA_WINDOW_SECONDS`,
        :data:`ESTIMATE_SA_ARM_SECONDS`):
        ``R T (a + |L| (b + c n))``; the learners' count hardly enters (the arm losses are
        regenerated once for all of them)."""
        arms = int(self.env.num_arms)
        per_window = ESTIMATE_SA_WINDOW_SECONDS + ESTIMATE_SA_ARM_SECONDS * arms
        per_round = ESTIMATE_SA_ROUND_SECONDS + len(self.sa_windows) * per_window
        return int(self.runs) * int(self.horizon) * per_round


def _check_save_traces(check: Checker, value: Any) -> tuple[str, ...]:
    """``"all"``, ``"none"`` or an array of :data:`SAVABLE_TRACES` names, in that order."""
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


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class LearnerOutcome(paired.Outcome):
    """One learner's simulation (:class:`~stabl_jax.experiment.kinds.paired.Outcome`) and its
    metrics.

    Attributes:
      segment_reward: ``(R, S)`` mean reward ``1 - l_t(x_t)`` per segment of every run.
      prob_best_segment: ``(R, S)`` mean play probability of the current best arm per segment.
      sa_sampled: ``(R, len(L))`` SA(L) from the suffered loss ``l_t(x_t)``.
      sa_expected: ``(R, len(L))`` SA(L) from the expected loss ``<p_t, l_t>``.
      cumulative_regret: ``(mean, half, final)``: ``(T,)`` mean over runs and 95%
        half-width of the cumulative regret of the expected loss to the best arm of each
        round, and ``(R,)`` every run's value at ``T``
        (:func:`stabl_jax.metrics.paired_cumulative_regret`); ``None`` when the environment
        has no ``best_arm``.
    """

    segment_reward: np.ndarray
    prob_best_segment: np.ndarray
    sa_sampled: np.ndarray
    sa_expected: np.ndarray
    cumulative_regret: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


@dataclasses.dataclass
class ExperimentResult(paired.Result):
    """Everything one bandit experiment produced
    (:class:`~stabl_jax.experiment.kinds.paired.Result`).

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
      progress: called with a learner's name before it runs; returns what
        :func:`~stabl_jax.simulate.simulate` takes as ``progress`` (``bool`` or a
        ``(done, total)`` callback). ``None``: no progress display.
      on_learner_done: called with each learner's outcome as soon as it is simulated (before
        the shared SA(L) pass, so its ``sa_*`` arrays are still empty then).
      checkpoints: where each learner's simulation checkpoints every chunk and resumes from
        (:class:`~stabl_jax.experiment.checkpoints.ExperimentCheckpoints`); ``None``: no
        checkpoints.
      validate: check every round's losses and the learner's play distribution inside the
        compiled program (``simulate(validate=True)``). Results are unchanged.

    Returns:
      An :class:`ExperimentResult`.
    """
    segments: list[np.ndarray] = []  # (R, T), from the first learner's draws (every learner's)

    def per_segment(env: Any, result: SimResult) -> dict[str, Any]:
        if not segments:
            segments.append(metrics.segment_ids(result.final_carry("the segments"), config.horizon))
        num_segments = int(env.num_segments)
        return {
            "segment_reward": metrics.per_segment_mean(
                result.loss, segments[0], num_segments, _reward
            ),
            "prob_best_segment": metrics.per_segment_mean(
                result.prob_best, segments[0], num_segments
            ),
            "sa_sampled": np.empty((config.runs, 0)),
            "sa_expected": np.empty((config.runs, 0)),
        }

    def adaptive_regret(env: Any, carry: RunCarry, outcomes: dict[str, Any]) -> dict[str, Any]:
        traces = {}
        for name, o in outcomes.items():
            traces[(name, "sampled")] = o.result.loss
            traces[(name, "expected")] = o.result.expected_loss
        expected = {name: o.result.expected_loss for name, o in outcomes.items()}
        cumulative = metrics.CumulativeRegret(env, expected) if metrics.has_best_arm(env) else None
        regrets = metrics.paired_adaptive_regret(
            env,
            carry,
            traces,
            config.sa_windows,
            on_block=None if cumulative is None else cumulative.add,  # the same regenerated losses
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


# --------------------------------------------------------------------------------------------
# Summary, traces, plots, table
# --------------------------------------------------------------------------------------------


def learner_summary(outcome: LearnerOutcome, window_lengths: tuple[int, ...]) -> dict[str, Any]:
    """Metrics of one learner (means and 95% half-widths over runs)."""
    result = outcome.result
    return {
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
        **(
            {}
            if outcome.cumulative_regret is None
            else {"cumulative_regret": stat(outcome.cumulative_regret[2])}
        ),
    }


def build_summary(result: ExperimentResult, *, started: str | None = None) -> dict[str, Any]:
    """The ``summary.json`` document of an experiment."""
    notes = {
        "segment_reward": "per run, mean of 1 - l_t(x_t) over each segment",
        "adaptive_regret": "SA(L) = max over windows of length L of (learner's loss - "
        "best arm's loss); 'sampled' uses l_t(x_t), 'expected' uses <p_t, l_t>",
        "prob_best": "play probability of the arm with the smallest mean loss at round t",
        "num_muted": "StABL meta-weight updates with 1 + eta_k r~ <= 0, summed over runs",
        "cumulative_regret": "per run, sum over t < T of <p_t, l_t> - l_t(i*_t), i*_t the "
        "best arm of round t (the environment's best_arm): the regret of the play "
        "distribution to the best arm of each segment",
    }
    files = dict(PLOT_FILES)
    if any(o.cumulative_regret is None for o in result.outcomes.values()):
        del files["cumulative_regret"]
    if paired_reference(result) is None:
        del files["paired_segments"]
    return paired.build_summary(result, started, notes, learner_summary, files)


def trace_arrays(result: ExperimentResult) -> dict[str, np.ndarray]:
    """Arrays of ``traces.npz``. Always: per learner the per-run SA(L) (``sa_sampled``,
    ``sa_expected``, ``(R, len(L))`` float64) and ``segment_reward`` (``(R, S)`` float64,
    the mean of ``1 - l_t(x_t)`` over each segment), ``env/change_points`` ``(R, S - 1)``
    int32 and ``sa_window_lengths``. Then the ``(R, T)`` traces named by the config's
    ``save_traces``: ``loss``, ``expected_loss`` and ``prob_best`` as float32 (exactly the
    simulated values), ``played`` as :func:`arm_dtype` (``uint8`` up to 256
    arms)."""
    arrays: dict[str, np.ndarray] = {
        "env/change_points": result.change_points.astype(np.int32),
        "sa_window_lengths": np.asarray(result.config.sa_windows, np.int64),
    }
    for name, outcome in result.outcomes.items():
        res = outcome.result
        for field in result.config.save_traces:
            dtype = saved_dtype(field, result.env.num_arms)
            arrays[f"{name}/{field}"] = getattr(res, field).astype(dtype)
        arrays[f"{name}/segment_reward"] = outcome.segment_reward.astype(np.float64)
        arrays[f"{name}/sa_sampled"] = outcome.sa_sampled.astype(np.float64)
        arrays[f"{name}/sa_expected"] = outcome.sa_expected.astype(np.float64)
    return arrays


def paired_reference(result: ExperimentResult) -> str | None:
    """The learner ``paired_segments.png`` subtracts (:data:`PAIRED_REFERENCES`), or ``None``
    when there is no such plot: one segment (no change point) or one learner."""
    names = list(result.outcomes)
    if result.num_segments < 2 or len(names) < 2:
        return None
    return next((n for n in PAIRED_REFERENCES if n in names), names[0])


def plot_paired_segments(result: ExperimentResult, path: Path, head: str, setting: str) -> Path:
    """``paired_segments.png``: per segment, every learner's mean reward minus the
    :func:`paired_reference`'s, run by run, with Student's t 95% intervals."""
    reference = paired_reference(result)
    assert reference is not None
    base = result.outcomes[reference].segment_reward
    diffs = []
    for name, outcome in result.outcomes.items():
        if name != reference:
            mean, half = plots.mean_t95(outcome.segment_reward - base)
            segments = np.arange(1, mean.shape[0] + 1)
            diffs.append(plots.Band(name, plots.label(name), segments, mean, half))
    title = (
        f"{head}\nper-segment reward minus {plots.label(reference)}'s, paired by run, mean "
        f"with 95% t interval\n({setting})"
    )
    return plots.plot_paired_segments(diffs, path, title=title, reference=plots.label(reference))


def render_plots(result: ExperimentResult, folder: str | Path) -> list[Path]:
    """Draw the PNGs of an experiment into ``folder``: reward, SA(L), probability on the
    best arm, (when the environment has ``best_arm``) the cumulative regret and (with change
    points) the per-segment paired differences (:func:`plot_paired_segments`)."""
    config = result.config
    env = result.env
    window = config.window
    reward, regret, prob = [], [], []
    for name, outcome in result.outcomes.items():
        res = outcome.result
        text = plots.label(name)
        reward.append(paired.moving_band(name, res.loss, window, text, _reward))
        prob.append(paired.moving_band(name, res.prob_best, window, text))
        regret.append(
            paired.regret_band(
                name, outcome.sa_sampled, config.sa_windows, outcome.learner.num_queries
            )
        )
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
        written.append(
            plots.plot_cumulative_regret(
                bands,
                Path(folder) / PLOT_FILES["cumulative_regret"],
                title=title,
                change_points=change_points,
            )
        )
    if paired_reference(result) is not None:
        path = Path(folder) / PLOT_FILES["paired_segments"]
        written.append(plot_paired_segments(result, path, head, setting))
    return written


def format_table(result: Any) -> str:
    """The printed summary: per learner, queries, per-segment reward, SA(L) at up to three
    ``L``, and probability on the best arm (means +- 95% half-widths over runs).
    """
    config = result.config
    shown = paired.pick_windows(config.sa_windows)
    columns = [config.sa_windows.index(L) for L in shown]
    num_segments = result.num_segments
    header = ["learner", "q"]
    header += [f"seg{s + 1} reward" for s in range(num_segments)]
    header += [f"SA({L})" for L in shown]
    header += ["P(best arm)"]
    rows = [header]
    for name, outcome in result.outcomes.items():
        seg_mean, seg_half = metrics.mean_ci(outcome.segment_reward)
        sa_mean, sa_half = metrics.mean_ci(outcome.sa_sampled)
        pb_mean, pb_half = metrics.mean_ci(metrics.row_means(outcome.result.prob_best))
        row = [name, str(outcome.learner.num_queries)]
        row += [tables.plus_minus(m, h, 3) for m, h in zip(seg_mean, seg_half, strict=True)]
        row += [tables.plus_minus(sa_mean[c], sa_half[c], 1) for c in columns]
        row += [tables.plus_minus(pb_mean, pb_half, 3)]
        rows.append(row)
    return tables.text_table(
        rows,
        f"{paired.over(config.runs)}; reward = 1 - loss of the played arm; SA(L) = worst "
        "regret over any L consecutive rounds (sampled loss); q = queries/round",
    )


def run(config: BanditConfig, **kwargs: Any) -> ExperimentResult:
    """:func:`run_experiment` as ``stabl-jax run`` shows it
    (:func:`stabl_jax.experiment.kinds.paired.run`)."""
    return paired.run(run_experiment, config, metrics_label="SA(L), per segment", **kwargs)


def run_header(config: BanditConfig, out: Path, needs: Resources | None) -> str:
    """What ``stabl-jax run`` prints before a bandit experiment."""
    size = f"N={config.env.num_arms} arms"
    return paired.header(config, out, needs, size, f"feedback={config.feedback}")


KIND = Kind(
    name="bandit",
    description="learners compared on one bandit environment (the default)",
    validate=BanditConfig.validate,
    header=run_header,
    run=run,
    summary=build_summary,
    traces=trace_arrays,
    plots=render_plots,
    table=format_table,
    estimate=paired.estimate_resources,
    resumed_line=paired.resumed_line,
)
