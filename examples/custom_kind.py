"""A kind of experiment of your own: how a learner's average loss falls with the horizon.

    PYTHONPATH=examples stabl-jax run examples/horizon_study.toml

``stabl-jax run`` runs any config whose ``kind`` names a
:class:`~stabl_jax.experiment.kinds.base.Kind`,
a shipped one (``"bandit"``, ``"bco"``, ``"hpo"``) or one of yours: ``examples/horizon_study.toml``
names this module's :data:`KIND` by import path (``kind = "custom_kind:KIND"``), so the command
above needs the module's folder on ``PYTHONPATH``; ``stabl_jax.experiment.register_kind(KIND)``
would let a config say ``kind = "horizon_study"`` instead. The kind checks its own keys,
simulates every learner at every horizon on the paper's expert-advice environment (each
simulation checkpointed, so an interrupted run resumes), and writes a results folder like a
shipped kind's: ``summary.json`` (which ``stabl_jax.load_results`` reads as a table),
``traces.npz``, ``results.csv`` and a plot. Config keys: ``learners`` and ``horizons``
(required), ``num_arms`` (default 10), and ``name``, ``description``, ``seed``, ``runs`` as in
every kind.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from stabl_jax import ExpertAdvice, SimOptions, make, simulate
from stabl_jax.experiment import plots as io_plots
from stabl_jax.experiment.configs import Checker
from stabl_jax.experiment.kinds import base
from stabl_jax.experiment.provenance import environment_info
from stabl_jax.experiment.tables import clean, plus_minus, stat, text_table
from stabl_jax.metrics import mean_ci
from stabl_jax.registry import LEARNERS

NAME = "horizon_study"
KEYS = ("kind", "name", "description", "seed", "runs", "learners", "horizons", "num_arms")


@dataclasses.dataclass(frozen=True)
class HorizonConfig:
    """A checked ``horizon_study`` config (its ``kind``, identity keys and its own)."""

    name: str
    description: str
    seed: int
    runs: int
    learners: tuple[str, ...]
    horizons: tuple[int, ...]
    num_arms: int
    kind: str = NAME

    def to_dict(self) -> dict[str, Any]:
        return clean(dataclasses.asdict(self))


@dataclasses.dataclass(frozen=True)
class HorizonResult:
    """``loss[name][T]``: ``(R,)`` each run's average loss over its ``T`` rounds."""

    config: HorizonConfig
    loss: Mapping[str, Mapping[int, np.ndarray]]


def validate(
    raw: Mapping[str, Any], check: Checker, *, source: str, default_name: str, overrides: Any
) -> HorizonConfig:
    """Every problem is reported through ``check`` (it names the key and the file)."""
    base.check_keys(check, raw, KEYS, ("learners", "horizons"), what="horizon-study")
    check.done()
    horizons = base.check_ints(check, "horizons", raw["horizons"], 2, None)
    if len(set(horizons)) != len(horizons):
        check.fail("horizons", f"lists a horizon twice: {horizons}")
    return HorizonConfig(
        **base.check_identity(check, raw, default_name),
        learners=base.check_learners(check, raw["learners"], LEARNERS),
        horizons=tuple(horizons),
        num_arms=check.integer("num_arms", raw.get("num_arms", 10), 2),
    )


def header(config: HorizonConfig, out: Path, needs: Any) -> str:
    return (
        f"{config.name}: {', '.join(config.learners)} at horizons {list(config.horizons)}, "
        f"{config.runs} runs, {config.num_arms} arms -> {out}"
    )


def run(
    config: HorizonConfig, *, checkpoints: Any, resumed: Any, progress: bool, log: Any
) -> HorizonResult:
    """Every learner at every horizon, paired: the same key, so the same environment draws."""
    loss: dict[str, dict[int, np.ndarray]] = {}
    for name in config.learners:
        loss[name] = {}
        for horizon in config.horizons:
            result = simulate(
                make(name, num_arms=config.num_arms, horizon=horizon),
                ExpertAdvice(num_arms=config.num_arms, horizon=horizon),
                jax.random.key(config.seed),
                config.runs,
                traces=("loss",),
                validate=True,
                options=SimOptions(
                    progress=progress, checkpoint=checkpoints.for_learner(f"{name}-T{horizon}")
                ),
            )
            loss[name][horizon] = result.loss.mean(axis=1)
            log(f"  {name} T={horizon}: {loss[name][horizon].mean():.4f}")
    return HorizonResult(config, loss)


def summary(result: HorizonResult, *, started: str | None) -> dict[str, Any]:
    """Identity, config, versions and device, and
    ``learners: {name: {"average_loss": {"T<T>": {"mean", "ci95"}}}}``."""
    return {
        **base.identity_dict(result.config),
        "started": started,
        "config": result.config.to_dict(),
        **environment_info(),
        "learners": {
            name: {"average_loss": {f"T{t}": stat(v) for t, v in by_t.items()}}
            for name, by_t in result.loss.items()
        },
    }


def traces(result: HorizonResult) -> dict[str, np.ndarray]:
    return {f"{n}/T{t}/average_loss": v for n, by_t in result.loss.items() for t, v in by_t.items()}


def plots(result: HorizonResult, folder: Path) -> list[Path]:
    plt = io_plots.pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, by_t in result.loss.items():
        horizons = sorted(by_t)
        ax.plot(horizons, [by_t[t].mean() for t in horizons], marker="o", label=name)
    ax.set(xscale="log", xlabel="horizon T", ylabel="average loss per round")
    ax.legend()
    try:  # atomic, and tagged as the library's own figure
        return [io_plots.save_figure(fig, Path(folder) / "average_loss.png")]
    finally:
        plt.close(fig)


def _mean_ci_text(values: np.ndarray) -> str:
    mean, half = mean_ci(values)
    return plus_minus(float(mean), float(half), 4)


def table(result: HorizonResult) -> str:
    horizons = result.config.horizons
    rows = [["learner", *(f"T={t}" for t in horizons)]]
    for name, by_t in result.loss.items():
        rows.append([name, *(_mean_ci_text(by_t[t]) for t in horizons)])
    return text_table(rows, "average loss per round, mean ± 95% interval over runs")


#: The kind: name it in a config by ``kind = "custom_kind:KIND"`` (module on ``PYTHONPATH``).
KIND = base.Kind(
    name=NAME,
    description="average loss against the horizon on expert advice (examples/custom_kind.py)",
    validate=validate,
    header=header,
    run=run,
    summary=summary,
    traces=traces,
    plots=plots,
    table=table,
)
