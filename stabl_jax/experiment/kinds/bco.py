"""The BCO experiment (``kind = "bco"``): BCO learners paired on one convex environment."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from stabl_jax import metrics, registry
from stabl_jax.bco.simulate import comparator_solver, paired_bco_adaptive_regret, sa_memory_bytes
from stabl_jax.domains import DOMAINS, make_domain
from stabl_jax.experiment import plots, tables
from stabl_jax.experiment.configs import Checker, type_name
from stabl_jax.experiment.identity import ExperimentCheckpoints
from stabl_jax.experiment.kinds import paired
from stabl_jax.experiment.kinds.base import Kind
from stabl_jax.experiment.tables import stat
from stabl_jax.simulate import RunCarry

BCO_PLOT_FILES: dict[str, str] = {plot: f"{plot}.png" for plot in ("loss", "adaptive_regret")}


@dataclasses.dataclass(frozen=True)
class BCOConfig(paired.ExperimentConfig):
    """A validated BCO config (:class:`~stabl_jax.experiment.kinds.paired.ExperimentConfig`)."""

    kind: ClassVar[str] = "bco"
    LEARNERS: ClassVar[registry.Registry] = registry.BCO_LEARNERS
    ENVS: ClassVar[registry.Registry] = registry.CONVEX_ENVS
    SIZE: ClassVar[tuple[str, int]] = ("dim", 1)
    RESERVED: ClassVar[Mapping[str, str]] = {
        "dim": "it is `env.dim`",
        "domain": "it is `env.domain`",
        **paired.LEARNER_RESERVED,
        "optimizer": "an optax transformation cannot be written in TOML",
    }

    @classmethod
    def check_own(cls, check: Checker, raw: Mapping[str, Any], horizon: int) -> dict[str, Any]:
        """``sa_stride``."""
        stride = raw.get("sa_stride")
        if stride is not None:
            stride = check.integer("sa_stride", stride, 1, horizon)
        return {"sa_stride": stride}

    @classmethod
    def check_env_value(cls, check: Checker, key: str, value: Any, hint: Any) -> Any:
        """``domain`` as a spec ``{"name": ..., "size": ...}``; the rest by type."""
        if key == "domain":
            return _domain_spec(check, value)
        return super().check_env_value(check, key, value, hint)

    @classmethod
    def build_env(cls, name: str, horizon: int, kwargs: Mapping[str, Any]) -> Any:
        """The environment, its ``domain`` spec made a :class:`~stabl_jax.domains.Domain`."""
        kwargs = dict(kwargs)
        spec = kwargs.pop("domain", None)
        if spec is not None:
            kwargs["domain"] = make_domain(spec["name"], int(kwargs["dim"]), spec["size"])
        return super().build_env(name, horizon, kwargs)

    def learner_sizes(self) -> dict[str, Any]:
        env = self.make_env()
        return {"dim": env.dim, "domain": env.domain}

    def header_details(self) -> tuple[str, str]:
        env = self.make_env()
        size = f"d={env.dim}, {type(env.domain).__name__.lower()} K"
        return size, f"SA(L) stride {self.sa_stride or 'max(1, L // 4)'}"

    def learner_kwargs(self, name: str) -> dict[str, Any]:
        """Learner ``name``'s options; ``lipschitz`` defaults to the environment's ``G``."""
        kwargs = super().learner_kwargs(name)
        kwargs.setdefault("lipschitz", float(self.make_env().lipschitz))
        return kwargs

    def trace_bytes(self, learner: Any, width: int) -> tuple[int, int]:
        """16 bytes in memory, 8 kept (``loss`` and ``best_loss``)."""
        return 16, 8

    def metrics_bytes(self, env: Any, width: int) -> int:
        """The larger of post-processing blocks and SA(L)'s comparator blocks."""
        windows = sa_memory_bytes(env, int(self.runs), self.sa_windows, stride=self.sa_stride)
        return max(super().metrics_bytes(env, width), windows)


def _domain_spec(check: Checker, value: Any) -> dict[str, Any]:
    """``"ball"`` or ``{name = "box", size = 0.5}`` -> ``{"name": ..., "size": ...}``."""
    allowed = sorted(DOMAINS)
    spec = {"name": value} if isinstance(value, str) else value
    if not isinstance(spec, dict):
        check.fail(
            "env.domain",
            f"must be a domain name from {allowed} or a table {{name = ..., size = ...}}, "
            f"got {value!r} ({type_name(value)})",
        )
    for key in spec:
        if key not in ("name", "size"):
            check.unknown(f"env.domain.{key}", ["name", "size"])
    name = check.string("env.domain.name", spec.get("name"), allowed)
    return {"name": name, "size": check.number("env.domain.size", spec.get("size", 1.0), 0, True)}


@dataclasses.dataclass
class BCOLearnerOutcome(paired.Outcome):
    """One BCO learner's simulation (``(R, T)`` ``loss`` and ``best_loss``) and its metrics.

    Attributes:
      sa: ``(R, len(L))`` SA(L) from the suffered loss (empty until the SA(L) pass).
    """

    sa: np.ndarray


@dataclasses.dataclass
class BCOExperimentResult(paired.Result):
    """Everything one BCO experiment produced.

    Attributes:
      comparator_gap: ``(R, len(L))`` largest Frank-Wolfe certificate of the comparators (the
        exact SA(L) lies in ``[sa, sa + gap]``).
    """

    comparator_gap: np.ndarray


def run_bco_experiment(
    config: BCOConfig,
    *,
    progress: paired.ProgressFactory | None = None,
    on_learner_done: Callable[[BCOLearnerOutcome], None] | None = None,
    checkpoints: ExperimentCheckpoints | None = None,
    validate: bool = False,
) -> BCOExperimentResult:
    """Simulate every BCO learner of ``config`` on the same environment draws and measure SA(L).

    The arguments are those of :func:`.bandit.run_experiment`; ``on_learner_done`` sees ``sa``
    still empty.
    """

    def adaptive_regret(env: Any, carry: RunCarry, outcomes: dict[str, Any]) -> dict[str, Any]:
        losses = {name: o.result.loss for name, o in outcomes.items()}
        regrets = paired_bco_adaptive_regret(
            env, carry, losses, config.sa_windows, stride=config.sa_stride
        )
        for name, outcome in outcomes.items():
            outcome.sa = regrets["sa"][name]
        return {"comparator_gap": regrets["comparator_gap"]}

    return paired.run_learners(
        config,
        BCOLearnerOutcome,
        lambda env, result: {"sa": np.empty((config.runs, 0))},
        adaptive_regret,
        BCOExperimentResult,
        on_learner_done,
        progress=progress,
        checkpoints=checkpoints,
        validate=validate,
    )


def bco_learner_summary(outcome: Any, window_lengths: tuple[int, ...]) -> dict[str, Any]:
    """Metrics of one BCO learner (means and 95% half-widths over runs)."""
    return {
        **paired.learner_header(outcome),
        "mean_loss": stat(metrics.row_means(outcome.result.loss)),
        "adaptive_regret": {"window_lengths": list(window_lengths), "sa": stat(outcome.sa)},
        "num_muted": outcome.num_muted,
    }


def bco_per_run(outcome: Any, window_lengths: tuple[int, ...]) -> dict[str, Any]:
    """The per-run metrics the paired differences subtract: mean loss and SA(L)."""
    return {
        "mean_loss": metrics.row_means(outcome.result.loss),
        "adaptive_regret": {"window_lengths": list(window_lengths), "sa": outcome.sa},
    }


def build_bco_summary(result: BCOExperimentResult, *, started: str | None = None) -> dict[str, Any]:
    """The ``summary.json`` document of a BCO experiment."""
    notes = {
        "mean_loss": "per run, mean of the suffered loss l_t(x_t) over the T rounds (every "
        "round's minimum over K is 0 for the moving target)",
        "adaptive_regret": "SA(L) = max over the windows [j, j + L) of the grid of (sum of "
        "l_t(x_t) - min over x in K of sum of l_t(x)), from the suffered loss",
        "comparator_gap": "largest Frank-Wolfe certificate g^T x - min_K g^T y of a window "
        "comparator, per L (max and mean over runs; shared by all learners): the exact "
        "SA(L) on the grid lies in [SA, SA + gap]",
        "num_muted": "meta-weight updates with 1 + eta_k r~ <= 0 (Algorithm 3 and "
        "Appendix D), summed over runs",
    }
    gap = result.comparator_gap
    regret = {  # the window grid and the comparator solver SA(L) was computed with
        "window_lengths": list(result.config.sa_windows),
        "metric": "stabl_jax.bco.simulate.bco_adaptive_regret (comparators shared by all "
        "learners: paired_bco_adaptive_regret)",
        "stride": str(result.config.sa_stride or "max(1, L // 4)"),
        "window_starts": "{0, s, 2s, ...} ∪ {T - L} with s the stride",
        "solver": comparator_solver(result.env),
        "comparator_gap": {"max": gap.max(axis=0), "mean": gap.mean(axis=0)},
    }
    return paired.build_summary(
        result,
        started,
        notes,
        bco_learner_summary,
        BCO_PLOT_FILES,
        bco_per_run,
        adaptive_regret=regret,
    )


def bco_trace_arrays(result: BCOExperimentResult) -> dict[str, np.ndarray]:
    """Arrays of a BCO ``traces.npz``: per learner ``loss``, ``best_loss`` and ``sa``.

    ``(R, T)`` float32 traces, ``(R, len(L))`` float64 SA(L); also ``comparator_gap``
    and those of :func:`.paired.trace_arrays`.
    """
    traces = {"loss": np.dtype(np.float32), "best_loss": np.dtype(np.float32)}
    gap = result.comparator_gap.astype(np.float64)
    return paired.trace_arrays(result, traces, ("sa",), comparator_gap=gap)


def render_bco_plots(result: BCOExperimentResult, folder: str | Path) -> list[Path]:
    """Draw the two PNGs of a BCO experiment into ``folder``, and their curves into
    ``curves.npz`` (:func:`~stabl_jax.experiment.plots.save_curves`)."""
    config = result.config
    env = result.env
    loss, regret = [], []
    for name, outcome in result.outcomes.items():
        loss.append(paired.moving_band(name, outcome.result.loss, config.window))
        regret.append(paired.regret_band(outcome, outcome.sa, config.sa_windows))
    setting = (
        f"{config.env.name}, d={env.dim}, {type(env.domain).__name__.lower()}, "
        f"T={config.horizon}, {config.runs} runs"
    )
    head = plots.heading(config.name, config.description, sets_params=bool(config.params))
    folder = Path(folder)
    plots.save_curves(folder, {"loss": loss, "adaptive_regret": regret})
    return [
        plots.plot_moving_average(
            loss,
            folder / BCO_PLOT_FILES["loss"],
            title=f"{head}\nloss l_t(x_t), mean over runs with 95% band ({setting})",
            window=config.window,
            quantity="loss l_t(x_t)",
            change_points=paired.fixed_change_points(env) or (),
        ),
        plots.plot_adaptive_regret(
            regret,
            folder / BCO_PLOT_FILES["adaptive_regret"],
            title=f"{head}\nstrongly adaptive regret SA(L) ({setting}; mean with 95% band)",
        ),
    ]


def format_bco_table(result: Any) -> str:
    """The printed summary: per learner queries, mean loss, SA(L), muting; then certificates."""
    config = result.config
    shown = paired.pick_windows(config.sa_windows)
    columns = shown.values()
    rows = [["learner", "q", "mean loss", *(f"SA({L})" for L in shown), "muted"]]
    for name, outcome in result.outcomes.items():
        loss_mean, loss_half = metrics.mean_ci(metrics.row_means(outcome.result.loss))
        sa_mean, sa_half = metrics.mean_ci(outcome.sa)
        row = [name, str(outcome.learner.num_queries), tables.plus_minus(loss_mean, loss_half, 4)]
        row += [tables.plus_minus(sa_mean[c], sa_half[c], 1) for c in columns]
        row += ["-" if outcome.num_muted is None else str(outcome.num_muted)]
        rows.append(row)
    gap = result.comparator_gap.max(axis=0)
    rows.append(["comparator gap (max)", "", "", *(f"{gap[c]:.2g}" for c in columns), ""])
    stride = config.sa_stride or "max(1, L // 4)"
    table = tables.text_table(
        rows,
        f"{paired.over(config.runs)}; loss = l_t(x_t) at the played point; SA(L) = worst "
        f"regret over windows of L rounds starting every {stride} rounds; q = queries/round",
    )
    if len(result.outcomes) < 2:
        return table

    def cells(outcome: Any) -> list[tuple[np.ndarray, int]]:
        loss = metrics.row_means(outcome.result.loss)
        return [(loss, 4), *((outcome.sa[:, c], 1) for c in columns)]

    header = ["mean loss", *(f"SA({L})" for L in shown)]
    return f"{table}\n\n{paired.difference_table(result, cells, header)}"


def run(config: BCOConfig, **kwargs: Any) -> BCOExperimentResult:
    """:func:`run_bco_experiment` as ``stabl-jax run`` shows it."""
    return paired.run(run_bco_experiment, config, metrics_label="SA(L)", **kwargs)


KIND = Kind(
    name="bco",
    description="BCO learners compared on one convex environment",
    validate=BCOConfig.validate,
    header=paired.header,
    run=run,
    summary=build_bco_summary,
    traces=bco_trace_arrays,
    plots=render_bco_plots,
    table=format_bco_table,
    estimate=paired.estimate,
    resumed_line=paired.resumed_rounds,
)
