"""The algorithm-selection experiment (``kind = "hpo"``): learners choosing Eagle arms on BBOB."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from stabl_jax import hpo_metrics, registry
from stabl_jax.envs.bbob import FUNCTION_NAMES, BBOBFunction, BBOBSuite
from stabl_jax.envs.bbob_instances import NUM_FUNCTIONS
from stabl_jax.envs.eagle import FILLS, GRIDS, EagleEnsemble, named_grid
from stabl_jax.envs.hpo import REWARD_LAMBDA, REWARDS, HPOEnv, check_reward_lambda
from stabl_jax.experiment import plots
from stabl_jax.experiment.configs import Checker, jsonable
from stabl_jax.experiment.identity import ExperimentCheckpoints
from stabl_jax.experiment.kinds import base
from stabl_jax.experiment.provenance import environment_info
from stabl_jax.experiment.results import Resumed
from stabl_jax.experiment.tables import FORMAT, plus_minus, read_summary, read_traces, text_table
from stabl_jax.simulate import SimOptions, auto_chunk_size, init_runs, run_keys

#: Keys of an HPO config's top level and of its ``[bbob]`` table.
HPO_TOP_LEVEL_KEYS: tuple[str, ...] = (
    "kind",
    "name",
    "description",
    "seed",
    "runs",
    "learners",
    "feedback",
    "bbob",
)
BBOB_KEYS: tuple[str, ...] = (
    "functions",
    "dims",
    "evaluations",
    "instance",
    "shift_radius",
    "rotate",
    "noise_std",
    "reward_lambda",
    "reward",
    "eagle_grid",
    "eagle_fill",
    "history_lengths",
    "tau_max",
)
MAX_DIM = 640  # COCO's largest tabulated dimension is 640 (its instance generator's limit)
#: The per-round traces a run records: the queried arms and the best gap, 8 bytes a query.
RECORDED_TRACES: tuple[str, ...] = ("arms", "best_gap")


@dataclasses.dataclass(frozen=True)
class HPOProblem:
    """One BBOB problem: ``function_id`` in ``dim`` dimensions, ``evaluations`` per repeat."""

    function_id: int
    dim: int
    evaluations: int

    @property
    def key(self) -> str:
        """``"f01_d32_n1000"``: the problem's name in files and tables."""
        return f"f{self.function_id:02d}_d{self.dim}_n{self.evaluations}"

    @property
    def title(self) -> str:
        return f"f{self.function_id} {FUNCTION_NAMES[self.function_id]}, d={self.dim}"


@dataclasses.dataclass(frozen=True)
class HPOConfig:
    """A validated ``kind = "hpo"`` config.

    Attributes:
      name, description, seed, runs, learners, feedback: as in a bandit config (``runs``: the
        repeats of every problem).
      problems: every ``(function, dim, evaluations)`` combination, functions slowest.
      instance, shift_radius, rotate, noise_std, reward_lambda, history_lengths, tau_max,
        reward, eagle_grid, eagle_fill: the ``[bbob]`` table's values.
      source, overrides: where it came from.
    """

    name: str
    description: str
    seed: int
    runs: int
    learners: tuple[str, ...]
    feedback: str
    problems: tuple[HPOProblem, ...]
    instance: int
    shift_radius: float
    rotate: bool
    noise_std: float
    reward_lambda: float
    history_lengths: tuple[int, ...]
    tau_max: float
    source: str
    overrides: tuple[str, ...] = ()
    kind: str = "hpo"
    reward: str = "paper"
    eagle_grid: str = "default"
    eagle_fill: str = "uniform"

    def ensemble(self, dim: int) -> Any:
        """The arms in ``dim`` dimensions (:class:`~stabl_jax.envs.eagle.EagleEnsemble`)."""
        return EagleEnsemble(dim, named_grid(self.eagle_grid), fill=self.eagle_fill)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the resolved config."""
        return {
            **base.identity_dict(self),
            "learners": list(self.learners),
            "feedback": self.feedback,
            "bbob": {
                "functions": sorted({p.function_id for p in self.problems}),
                "dims": sorted({p.dim for p in self.problems}),
                "evaluations": sorted({p.evaluations for p in self.problems}),
                **{k: jsonable(getattr(self, k)) for k in BBOB_KEYS[3:]},  # instance .. tau_max
            },
            "problems": [p.key for p in self.problems],
            "source": self.source,
            "overrides": list(self.overrides),
        }


def validate_hpo(
    raw: Mapping[str, Any],
    check: Checker,
    *,
    source: str,
    default_name: str,
    overrides: tuple[str, ...],
) -> HPOConfig:
    """Validate an HPO config document; every problem is raised through ``check``."""
    base.check_keys(check, raw, HPO_TOP_LEVEL_KEYS, ("learners", "bbob"), what="HPO-config")
    table: dict[str, Any] = {}
    if "bbob" in raw:
        with check.collect():
            table = check.table("bbob", raw["bbob"])
        base.check_keys(check, table, BBOB_KEYS, ("functions", "dims", "evaluations"), "bbob.")
    got: dict[str, Any] = {}

    keep = functools.partial(check.keep, got)
    keep("identity", base.check_identity, check, raw, default_name)
    if "learners" in raw:
        keep("learners", base.check_learners, check, raw["learners"], registry.LEARNERS)
    keep("feedback", check.string, "feedback", raw.get("feedback", "reward"), base.FEEDBACKS)
    if "functions" in table:
        keep("functions", _functions, check, table["functions"])
    if "dims" in table:
        keep("dims", _int_list, check, "bbob.dims", table["dims"], 2, MAX_DIM)
    if "evaluations" in table:
        keep("evaluations", _int_list, check, "bbob.evaluations", table["evaluations"], 2, None)
    keep("instance", check.integer, "bbob.instance", table.get("instance", 1), 1)
    keep("shift_radius", check.number, "bbob.shift_radius", table.get("shift_radius", 1.0), 0.0)
    keep("rotate", check.boolean, "bbob.rotate", table.get("rotate", True))
    keep("noise_std", check.number, "bbob.noise_std", table.get("noise_std", 0.01), 0.0)
    keep("reward_lambda", _reward_lambda, check, table)
    keep("reward", check.string, "bbob.reward", table.get("reward", "paper"), REWARDS)
    keep("eagle_grid", check.string, "bbob.eagle_grid", table.get("eagle_grid", "default"), GRIDS)
    keep("eagle_fill", check.string, "bbob.eagle_fill", table.get("eagle_fill", "uniform"), FILLS)
    keep("history_lengths", _history_lengths, check, table)
    tau_max = table.get("tau_max", 10.0)
    keep("tau_max", _passes, check, "bbob.tau_max", hpo_metrics.check_tau_max, tau_max)
    check.done()
    grid = itertools.product(got["functions"], got["dims"], got["evaluations"])
    problems = tuple(HPOProblem(f, d, n) for f, d, n in grid)
    config = HPOConfig(
        **got.pop("identity"),
        **{k: v for k, v in got.items() if k not in ("functions", "dims", "evaluations")},
        problems=problems,
        source=source,
        overrides=overrides,
    )
    # the learners' own checks (e.g. history lengths vs budget)
    for name, n in itertools.product(got["learners"], got["evaluations"]):
        with check.collect():
            try:
                make_learner(config, name, n)
            except (TypeError, ValueError) as exc:
                check.fail("learners", f"learner {name!r} rejects a budget of {n}: {exc}")
    check.done()
    return config


def _functions(check: Checker, value: Any) -> tuple[int, ...]:
    """``bbob.functions``: ids in ``[1, 24]``, or ``"all"``."""
    if value == "all":
        return tuple(range(1, NUM_FUNCTIONS + 1))
    return _int_list(check, "bbob.functions", value, 1, NUM_FUNCTIONS, '"all"')


def _reward_lambda(check: Checker, table: Mapping[str, Any]) -> float:
    value = check.number("bbob.reward_lambda", table.get("reward_lambda", REWARD_LAMBDA), 0.0)
    return _passes(check, "bbob.reward_lambda", check_reward_lambda, value)


def _history_lengths(check: Checker, table: Mapping[str, Any]) -> tuple[int, ...]:
    key = "bbob.history_lengths"
    value = table.get("history_lengths", list(hpo_metrics.PAPER_HISTORY_LENGTHS))
    lengths = tuple(base.check_distinct(check, key, base.check_ints(check, key, value, 1, None)))
    if any(b <= a for a, b in itertools.pairwise(lengths)):
        check.fail(key, f"must be strictly increasing, got {list(lengths)}")
    return lengths


def _passes(check: Checker, key: str, validate: Callable[[Any], Any], value: Any) -> Any:
    """``validate(value)``, its ``TypeError`` or ``ValueError`` a config error of ``key``."""
    try:
        return validate(value)
    except (TypeError, ValueError) as exc:
        check.fail(key, str(exc))


def _int_list(
    check: Checker, key: str, value: Any, minimum: int, maximum: int | None, alternative: str = ""
) -> tuple[int, ...]:
    """``key``: distinct ints in ``[minimum, maximum]``, sorted."""
    ints = base.check_ints(check, key, value, minimum, maximum, alternative)
    return tuple(sorted(base.check_distinct(check, key, ints)))


def make_learner(config: HPOConfig, name: str, evaluations: int) -> Any:
    """Learner ``name`` for a budget of ``evaluations`` (horizon = its number of rounds)."""
    return hpo_metrics.make_hpo_learner(
        name,
        len(named_grid(config.eagle_grid)),
        evaluations,
        history_lengths=config.history_lengths,
        feedback=config.feedback,
    )


@dataclasses.dataclass
class ProblemOutcome:
    """Every learner's traces on ``problem``.

    Attributes:
      best_gap: per learner, ``(R, N)`` best gap ``f - f_opt`` after each evaluation.
      arm_counts: per learner, ``(A,)`` mean evaluations of each arm per repeat.
      seconds: per learner, ``{"compile": ..., "run": ...}``.
    """

    problem: HPOProblem
    best_gap: dict[str, np.ndarray]
    arm_counts: dict[str, np.ndarray]
    seconds: dict[str, dict[str, float]]


@dataclasses.dataclass
class HPOExperimentResult:
    """Everything an HPO experiment produced, in memory.

    Attributes:
      config, wall_seconds: the validated config and the total wall time.
      arms: the Eagle grid (one dict per arm).
      problems: per problem key, its :class:`ProblemOutcome`, in config order.
    """

    config: HPOConfig
    arms: list[dict[str, float]]
    problems: dict[str, ProblemOutcome]
    wall_seconds: float


def run_problems(
    config: HPOConfig,
    problems: tuple[HPOProblem, ...],
    *,
    checkpoints: Any = None,
    validate: bool = False,
    on_learner_done: Callable[[str, HPOProblem, dict[str, float]], None] | None = None,
) -> list[ProblemOutcome]:
    """Run every learner on ``problems`` (same dimension and budget), one program per learner.

    A finished program's loop state is dropped from its checkpoints; its traces are kept.
    """
    first = problems[0]
    env = problem_env(config, problems)
    key = jax.random.key(config.seed)
    outs = [ProblemOutcome(p, {}, {}, {}) for p in problems]
    for name in config.learners:
        learner = make_learner(config, name, first.evaluations)
        tag = program_name(problems, name)
        checkpoint = None if checkpoints is None else checkpoints.for_learner(tag)
        args = (learner, env, key, config.runs, first.evaluations)
        options = SimOptions(checkpoint=checkpoint)
        kwargs: dict[str, Any] = dict(options=options, validate=validate, traces=RECORDED_TRACES)
        if len(problems) == 1:
            results = [hpo_metrics.simulate_selection(*args, **kwargs)]
        else:
            results = hpo_metrics.simulate_suite(*args, **kwargs)
        for out, res in zip(outs, results, strict=True):
            out.best_gap[name] = res.best_gap
            out.arm_counts[name] = hpo_metrics.arm_counts(res, env.num_arms)
            out.seconds[name] = {"compile": res.compile_seconds, "run": res.run_seconds}
            if on_learner_done is not None:
                on_learner_done(name, out.problem, out.seconds[name])
        del results, res  # the next learner's program does not run beside this one's state
        if checkpoint is not None:  # its traces are what a resumed run reads of it
            checkpoint.drop_state()
    return outs


def problem_env(config: HPOConfig, problems: tuple[HPOProblem, ...]) -> HPOEnv:
    """The environment of ``problems``: a ``BBOBFunction`` for one, a ``BBOBSuite`` for several."""
    first = problems[0]
    if any((p.dim, p.evaluations) != (first.dim, first.evaluations) for p in problems):
        raise ValueError("problems run together must share their dimension and budget")
    options: dict[str, Any] = dict(
        dim=first.dim,
        instance=config.instance,
        shift_radius=config.shift_radius,
        rotate=config.rotate,
        noise_std=config.noise_std,
        normalize=True,
    )
    ids = tuple(p.function_id for p in problems)
    function = BBOBFunction(ids[0], **options) if len(ids) == 1 else BBOBSuite(ids, **options)
    return HPOEnv(
        function,
        config.ensemble(first.dim),
        reward_lambda=config.reward_lambda,
        reward=config.reward,
    )


def program_name(problems: tuple[HPOProblem, ...], learner: str) -> str:
    """``<problem>-<learner>``, or ``<first>-<last>-<learner>``: a program's checkpoint folder."""
    first, last = problems[0].key, problems[-1].key
    return f"{first}-{learner}" if len(problems) == 1 else f"{first}-{last}-{learner}"


def resumed_programs(config: HPOConfig, progress: Mapping[str, int]) -> str:
    """What a resumed experiment took over (:func:`.base.resumed_line` with a tally)."""
    rounds = {
        program_name(group, name): make_learner(config, name, group[0].evaluations).horizon
        for group in problem_groups(config)
        for name in config.learners
    }
    return base.resumed_line(rounds, progress, tally=True)


def problem_groups(config: HPOConfig) -> list[tuple[HPOProblem, ...]]:
    """``config``'s problems by (dimension, budget), in order: one program per learner each."""
    groups: dict[tuple[int, int], list[HPOProblem]] = {}
    for problem in config.problems:
        groups.setdefault((problem.dim, problem.evaluations), []).append(problem)
    return [tuple(group) for group in groups.values()]


def run_hpo_experiment(
    config: HPOConfig,
    *,
    checkpoints: Any = None,
    validate: bool = False,
    on_learner_done: Callable[[str, HPOProblem, dict[str, float]], None] | None = None,
) -> HPOExperimentResult:
    """Run every problem of ``config``.

    Args:
      config: a validated HPO config.
      checkpoints: where every program checkpoints and resumes from; ``None``: none.
      validate: check every round inside the compiled programs; results unchanged.
      on_learner_done: called after each learner of each problem with its timings.
    """
    start = time.perf_counter()
    kwargs = dict(checkpoints=checkpoints, validate=validate, on_learner_done=on_learner_done)
    outcomes = {
        outcome.problem.key: outcome
        for group in problem_groups(config)
        for outcome in run_problems(config, group, **kwargs)
    }
    return HPOExperimentResult(
        config=config,
        arms=config.ensemble(config.problems[0].dim).describe(),
        problems={p.key: outcomes[p.key] for p in config.problems},
        wall_seconds=time.perf_counter() - start,
    )


#: Bytes one query records per round: the arm (int32) and the best gap (float32).
TRACE_BYTES_PER_QUERY = 8
#: Copies of every run's loop state a program holds at its peak.
STATE_COPIES = 4


def run_state_bytes(learner: Any, env: HPOEnv) -> int:
    """Bytes of one run's loop state (``RunCarry``), from :func:`jax.eval_shape`."""
    keys = run_keys(jax.random.key(0), 1)
    return base.tree_bytes(jax.eval_shape(lambda k: init_runs(learner, env, k, None), keys))


def plan(config: HPOConfig) -> base.Plan:
    """An algorithm-selection experiment's memory and disk from its config alone."""
    programs = []
    for group in problem_groups(config):
        env = problem_env(config, group)
        runs, budget = len(group) * config.runs, group[0].evaluations
        for name in config.learners:
            learner = make_learner(config, name, budget)
            per_round = int(learner.num_queries) * TRACE_BYTES_PER_QUERY
            rounds = hpo_metrics.num_rounds(budget, int(learner.num_queries))
            traces = runs * rounds * per_round
            chunk = runs * auto_chunk_size(runs, rounds, bytes_per_round=per_round) * per_round
            gaps = runs * budget * 8
            state = runs * run_state_bytes(learner, env)
            programs.append(base.Program(state, chunk, traces, gaps, traces + gaps))
    return base.Plan(
        tuple(programs),
        size=f"{len(config.problems)} problems x {config.runs} repeats x "
        f"{len(config.learners)} learners",
        remedy="lower runs or the problems' dimensions and budgets (--runs, --set bbob.dims=...)",
        state_copies=STATE_COPIES,
        end_bytes=sum(p.kept for p in programs),
        keeps_states=False,
    )


def read_hpo_result(folder: str | Path) -> HPOExperimentResult:
    """An :class:`HPOExperimentResult` rebuilt from a results folder, to redraw or recompute."""
    summary = read_summary(folder)
    if summary.get("kind") != "hpo":
        raise ValueError(f"{folder} is not the results folder of an HPO experiment")
    raw = {k: v for k, v in summary["config"].items() if k in HPO_TOP_LEVEL_KEYS}
    source = str(summary["config"].get("source", folder))
    config = validate_hpo(
        raw,
        Checker(source, ()),
        source=source,
        default_name=raw.get("name", "hpo"),
        overrides=tuple(summary["config"].get("overrides", ())),
    )
    traces = read_traces(folder)
    problems = {}
    for problem in config.problems:
        out = ProblemOutcome(problem, {}, {}, summary["timings"].get(problem.key, {}))
        for name in config.learners:
            out.best_gap[name] = traces[f"{problem.key}/{name}/best_gap"]
            out.arm_counts[name] = traces[f"{problem.key}/{name}/arm_counts"]
        problems[problem.key] = out
    return HPOExperimentResult(config, summary["arms"], problems, summary["wall_seconds"])


def profiles(result: HPOExperimentResult, at_fraction: float = 1.0) -> dict[str, Any]:
    """Dolan-More profiles over every (problem, repeat), each at ``at_fraction`` of its budget."""
    pieces = []
    for outcome in result.problems.values():
        at = max(1, round(at_fraction * outcome.problem.evaluations))
        pieces.append(
            {"learners": {n: {"best_gap": g[:, :at]} for n, g in outcome.best_gap.items()}}
        )
    return hpo_metrics.profiles_across(pieces, tau_max=result.config.tau_max)


def problem_metrics(result: HPOExperimentResult) -> dict[str, dict[str, Any]]:
    """Per problem and learner: final log10 gap, and the score against Uniform over each half."""
    tau_max = result.config.tau_max
    out: dict[str, dict[str, Any]] = {}
    for key, outcome in result.problems.items():
        rows: dict[str, Any] = {}
        base = outcome.best_gap.get(hpo_metrics.BASELINE)
        n = outcome.problem.evaluations
        for name, gap in outcome.best_gap.items():
            curve = hpo_metrics.log_curve(gap)
            half = float(curve["hi"][-1] - curve["mean"][-1])
            row: dict[str, Any] = {
                "final_log10_gap": float(curve["mean"][-1]),
                "final_log10_gap_ci": half if math.isfinite(half) else None,
                "final_median_log10_gap": float(curve["median"][-1]),
            }
            if base is not None:
                score = hpo_metrics.score_vs_baseline_curve(gap, base, tau_max=tau_max)
                row["score_vs_uniform_final"] = float(score[-1])
                row["score_vs_uniform_first_half"] = float(score[: n // 2].mean())
                row["score_vs_uniform_second_half"] = float(score[n // 2 :].mean())
            rows[name] = row
        out[key] = rows
    return out


def build_hpo_summary(result: HPOExperimentResult, *, started: str | None = None) -> dict:
    """The JSON summary: config, environment, arms, per-problem metrics and profiles."""
    final = profiles(result)
    half = profiles(result, at_fraction=0.5)
    return {
        "format": FORMAT,
        "kind": "hpo",
        "started": started,
        "config": result.config.to_dict(),
        "environment": environment_info(),
        "arms": result.arms,
        "wall_seconds": result.wall_seconds,
        "timings": {k: o.seconds for k, o in result.problems.items()},
        "problems": problem_metrics(result),
        "profile_scores": final["scores"],
        "score_vs_uniform": final["score_vs_baseline"],
        "profile_scores_half_budget": half["scores"],
        "score_vs_uniform_half_budget": half["score_vs_baseline"],
        "notes": (
            "gap = best true f - f_opt so far (no noise); log10 floored at 1e-12; problems of the "
            "profiles = every (function, dim, budget, repeat); scores in [0, 1] (vs Uniform: "
            "[-1, 1], > 0 better than Uniform), tau_max = "
            f"{result.config.tau_max}"
        ),
    }


def hpo_trace_arrays(result: HPOExperimentResult) -> dict[str, np.ndarray]:
    """``"<problem>/<learner>/best_gap"`` ``(R, N)`` and ``.../arm_counts`` ``(A,)`` arrays."""
    arrays: dict[str, np.ndarray] = {}
    for key, outcome in result.problems.items():
        for name in result.config.learners:
            arrays[f"{key}/{name}/best_gap"] = outcome.best_gap[name]
            arrays[f"{key}/{name}/arm_counts"] = outcome.arm_counts[name]
    return arrays


HPO_PLOT_FILES: dict[str, str] = {
    name: f"{name}.png" for name in ("best_objective", "score_vs_uniform", "profile")
}


def _problem_panels(result: HPOExperimentResult) -> tuple[list[Any], list[Any]]:
    """Per problem, the panel of log best-gap bands and that of scores against Uniform."""
    tau_max = result.config.tau_max
    gap_panels, score_panels = [], []
    for outcome in result.problems.values():
        x = np.arange(1, outcome.problem.evaluations + 1)
        title = f"{outcome.problem.title}, N={outcome.problem.evaluations}"
        bands = []
        for name, gap in outcome.best_gap.items():
            c = hpo_metrics.log_curve(gap)
            bands.append(plots.Band(name, plots.label(name), x, c["mean"], c["hi"] - c["mean"]))
        gap_panels.append((title, bands))
        base = outcome.best_gap.get(hpo_metrics.BASELINE)
        if base is not None:
            scores = [
                _line(name, x, hpo_metrics.score_vs_baseline_curve(gap, base, tau_max))
                for name, gap in outcome.best_gap.items()
                if name != hpo_metrics.BASELINE
            ]
            score_panels.append((title, scores))
    return gap_panels, score_panels


def _line(name: str, x: np.ndarray, y: np.ndarray, suffix: str = "") -> plots.Band:
    """Learner ``name``'s curve without a band, ``suffix`` after its label."""
    return plots.Band(name, plots.label(name) + suffix, x, y, np.full(x.shape, np.nan))


def render_hpo_plots(result: HPOExperimentResult, folder: str | Path) -> list[Path]:
    """Best-gap curves and scores against Uniform per problem, and the performance profiles;
    their curves into ``curves.npz`` (:func:`~stabl_jax.experiment.plots.save_curves`, a
    panel's plot named ``{plot}/{problem}``)."""
    folder = Path(folder)
    cfg = result.config
    gap_panels, score_panels = _problem_panels(result)
    head = plots.heading(cfg.name, cfg.description, sets_params=False)
    ncols = 2 if len(gap_panels) <= 4 else 6
    paths = [
        plots.plot_panels(
            gap_panels,
            folder / HPO_PLOT_FILES["best_objective"],
            ncols=ncols,
            title=f"{head}\nbest objective gap ({cfg.runs} repeats, mean with 95% band)",
            xlabel="function evaluations",
            ylabel="log10(best f - f_opt)",
        )
    ]
    if score_panels:
        paths.append(
            plots.plot_panels(
                score_panels,
                folder / HPO_PLOT_FILES["score_vs_uniform"],
                ncols=ncols,
                title=(
                    f"{head}\nperformance profile score against Uniform over the "
                    f"{cfg.runs} repeats (higher is better, tau_max={cfg.tau_max:g})"
                ),
                xlabel="function evaluations",
                ylabel="score vs Uniform",
                ylim=(-1.02, 1.02),
                hline=0.0,
                names=cfg.learners,
            )
        )
    prof = profiles(result)
    bands = [
        _line(name, prof["taus"], profile, f" (score {prof['scores'][name]:.3f})")
        for name, profile in zip(prof["learners"], prof["profile"], strict=True)
    ]
    count = len(result.problems) * cfg.runs
    curves = {"profile": bands}
    for plot, panels in (("best_objective", gap_panels), ("score_vs_uniform", score_panels)):
        keys = list(result.problems)[: len(panels)]  # no score panels without Uniform
        curves.update({f"{plot}/{key}": p for key, (_, p) in zip(keys, panels, strict=True)})
    plots.save_curves(folder, curves)
    paths.append(
        plots.plot_profile(
            bands,
            folder / HPO_PLOT_FILES["profile"],
            title=(
                f"{head}\nDolan-More performance profiles at the full budget "
                f"({len(result.problems)} problems x {cfg.runs} repeats = {count})"
            ),
        )
    )
    return paths


def format_hpo_table(result: HPOExperimentResult, max_rows: int = 8) -> str:
    """The printed summary: profile scores, score vs Uniform, final log10 gaps (``max_rows``)."""
    prof = profiles(result)
    per_problem = problem_metrics(result)
    keys = list(result.problems)[:max_rows]
    rows = [["learner", "q", "profile score", "vs Uniform", *keys]]
    for name in result.config.learners:
        learner = make_learner(result.config, name, result.config.problems[0].evaluations)
        row = [name, str(learner.num_queries), f"{prof['scores'][name]:.3f}"]
        vs = prof["score_vs_baseline"].get(name)
        row.append("-" if vs is None else f"{vs:+.3f}")
        for key in keys:
            cell = per_problem[key][name]
            row.append(plus_minus(cell["final_log10_gap"], cell["final_log10_gap_ci"] or np.nan, 2))
        rows.append(row)
    more = len(result.problems) - len(keys)
    footer = (
        f"{len(result.problems)} problems x {result.config.runs} repeats; per problem: final "
        "mean log10(best f - f_opt) ± 95% CI"
        + (f" (first {len(keys)} problems shown, {more} more in summary.json)" if more else "")
        + "; profile score in [0, 1] and vs Uniform in [-1, 1], higher is better"
    )
    return text_table(rows, footer)


def run_header(config: HPOConfig, out: Path, needs: base.Resources | None = None) -> str:
    """What ``stabl-jax run`` prints before an algorithm-selection experiment."""
    setting = (
        f"  {len(config.problems)} BBOB problems (function, dim, evaluations), {config.runs} "
        f"repeats each, seed {config.seed}, feedback={config.feedback}, "
        f"noise {config.noise_std:g}; same key for every learner (paired)"
    )
    return base.header(config, out, needs, [setting])


def run(
    config: HPOConfig,
    *,
    checkpoints: ExperimentCheckpoints,
    resumed: Resumed | None,
    progress: bool,
    log: Callable[[str], None],
) -> HPOExperimentResult:
    """:func:`run_hpo_experiment` as ``stabl-jax run`` shows it: a line per learner and problem."""
    if resumed is not None:
        log(f"  resuming {resumed.source.name}: {resumed_programs(config, resumed.progress)}")

    def learner_done(name: str, problem: HPOProblem, seconds: dict[str, float]) -> None:
        log(
            f"  {problem.key:<16} {name:<20} compile {seconds['compile']:5.1f} s  "
            f"run {seconds['run']:6.1f} s"
        )

    return run_hpo_experiment(
        config, checkpoints=checkpoints, validate=True, on_learner_done=learner_done
    )


KIND = base.Kind(
    name="hpo",
    description="algorithm selection on BBOB problems with Eagle arms (the paper's Section 6)",
    validate=validate_hpo,
    header=run_header,
    run=run,
    summary=build_hpo_summary,
    traces=hpo_trace_arrays,
    plots=render_hpo_plots,
    table=format_hpo_table,
    estimate=lambda config: base.estimate_resources(plan(config)),
    resumed_line=resumed_programs,
)
