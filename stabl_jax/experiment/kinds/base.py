"""What an experiment kind is (:class:`Kind`), and the config checks and estimates kinds share."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from stabl_jax import registry
from stabl_jax.estimators import FEEDBACKS as FEEDBACKS  # the kinds' feedback choices
from stabl_jax.experiment.configs import Checker
from stabl_jax.experiment.tables import byte_size

DEFAULT_RUNS = 100


class RunFailed(Exception):
    """A run stopped by a check of its numbers: one line naming the learner, what was wrong
    and the remedy; ``stabl-jax`` prints it and exits 1 (no traceback)."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of experiment: how its config is checked, run, summarised, drawn and printed.

    Attributes:
      name: the config's ``kind`` value.
      description: one line for ``stabl-jax list``.
      validate: ``(raw, check, *, source, default_name, overrides) -> config``, raising
        through ``check``; the config has ``kind``, ``name``, ``seed``, ``runs``,
        ``learners`` and ``to_dict()``.
      header: ``(config, out, needs) -> str``: what ``stabl-jax run`` prints first.
      run: ``(config, *, checkpoints, resumed, progress, log) -> result``.
      summary: ``(result, *, started) -> dict``: the JSON-ready ``summary.json``.
      traces: ``result -> {key: array}``: the arrays of ``traces.npz``.
      plots: ``(result, folder) -> [path]``: draw the PNGs into ``folder``.
      table: ``result -> str``: the summary table ``stabl-jax run`` prints.
      estimate: ``config -> Resources``, checked before a run; ``None``: nothing is checked.
      resumed_line: ``(config, {program: rounds done}) -> str``; ``None``: the rounds by name.
    """

    name: str
    description: str
    validate: Callable[..., Any]
    header: Callable[[Any, Path, Any], str]
    run: Callable[..., Any]
    summary: Callable[..., dict[str, Any]]
    traces: Callable[[Any], Mapping[str, np.ndarray]]
    plots: Callable[[Any, Path], list[Path]]
    table: Callable[[Any], str]
    estimate: Callable[[Any], Resources] | None = None
    resumed_line: Callable[[Any, Mapping[str, int]], str] | None = None

    def describe_resumed(self, config: Any, progress: Mapping[str, int]) -> str:
        """:attr:`resumed_line` of ``config`` and ``progress``, or the rounds by name."""
        if self.resumed_line is not None:
            return self.resumed_line(config, progress)
        return ", ".join(f"{name} at round {rounds}" for name, rounds in progress.items())


#: Disk taken by the plots and the summary of one experiment (generous).
PLOTS_BYTES = 2**20


@dataclasses.dataclass(frozen=True)
class Resources:
    """The memory and disk an experiment needs; ``stabl-jax run`` refuses a run that does not fit.

    Attributes:
      memory_bytes: peak host memory of the arrays.
      disk_bytes: peak disk under the output folder.
      size: what the numbers are for (``"500 runs x 4096 rounds x 6 learners"``).
      remedy: how to make the run smaller (``"lower runs or horizon (--runs, ...)"``).
    """

    memory_bytes: int
    disk_bytes: int
    size: str
    remedy: str


@dataclasses.dataclass(frozen=True)
class Program:
    """One compiled simulation of an experiment, by the bytes of its arrays.

    Attributes:
      state, chunk: the loop state and one chunk's outputs of all its runs.
      working: what else it holds while it runs.
      kept, written: what it leaves in memory until the end, and on disk.
    """

    state: int
    chunk: int
    working: int
    kept: int
    written: int


@dataclasses.dataclass(frozen=True)
class Plan:
    """The programs an experiment runs one after the other, and how it holds them.

    Attributes:
      programs: every program, in run order.
      size, remedy: as :class:`Resources`.
      state_copies: copies of its loop state a program holds at its peak.
      end_bytes: what the end adds to memory.
      keeps_states: every program's state stays on disk to the end (else the running one's).
    """

    programs: tuple[Program, ...]
    size: str
    remedy: str
    state_copies: int
    end_bytes: int
    keeps_states: bool


def estimate_resources(plan: Plan) -> Resources:
    """The :class:`Resources` of ``plan``, from the sizes of its arrays."""
    programs = plan.programs
    memory = sum(p.kept for p in programs) + plan.end_bytes
    memory += max(plan.state_copies * p.state + 2 * p.chunk + p.working for p in programs)
    states = [p.state for p in programs]
    disk = sum(p.written for p in programs) + 2 * (
        sum(states) if plan.keeps_states else max(states)
    )
    return Resources(memory, disk + PLOTS_BYTES, plan.size, plan.remedy)


def header(
    config: Any,
    out: Path,
    needs: Resources | None,
    setting: Sequence[str],
    notes: Sequence[str] = (),
) -> str:
    """What ``stabl-jax run`` prints first: config, overrides, setting, learners, needs, output."""
    lines = [f"stabl-jax run {config.name}  ({config.source})"]
    if config.overrides:
        lines.append(f"  overrides: {' '.join(config.overrides)}")
    lines += [*setting, f"  learners: {', '.join(config.learners)}", *notes]
    if needs is not None:
        lines.append(
            f"  needs about {byte_size(needs.memory_bytes)} of memory, "
            f"{byte_size(needs.disk_bytes)} of disk (traces and checkpoints)"
        )
    lines.append(f"  output: {out}")
    return "\n".join(lines)


def resumed_line(
    totals: Mapping[str, int], progress: Mapping[str, int], tally: bool = False
) -> str:
    """What a resumed run takes over: ``"exp3 64/256, uniform 256/256"``, or with ``tally`` a count.

    With ``tally``: ``"1 of 10 learner programs complete, f01_d8_n300-exp3 at 150/300 rounds"``.
    """
    if not tally:
        return ", ".join(f"{k} {v}/{totals[k]}" for k, v in progress.items()) or "nothing done yet"
    complete = sum(progress.get(key) == total for key, total in totals.items())
    partly = [
        f"{key} at {progress[key]}/{total} rounds"
        for key, total in totals.items()
        if 0 < progress.get(key, 0) < total
    ]
    return ", ".join([f"{complete} of {len(totals)} learner programs complete", *partly])


def tree_bytes(tree: Any) -> int:
    """Bytes of every leaf of ``tree`` (arrays or :func:`jax.eval_shape`'s shapes)."""
    return sum(math.prod(x.shape) * x.dtype.itemsize for x in jax.tree.leaves(tree))


#: The largest seed: without x64, ``jax.random.key`` keeps only the low 32 bits of a seed.
MAX_SEED = 2**32 - 1


def check_identity(check: Checker, raw: Mapping[str, Any], default_name: str) -> dict[str, Any]:
    """The keys every kind has: ``name`` (default ``default_name``), ``description``, seed, runs.

    ``seed`` is in ``[0, MAX_SEED]`` and ``runs`` >= 1.
    """
    return {
        "name": check.folder_name("name", raw.get("name", default_name)),
        "description": check.string("description", raw.get("description", "")),
        "seed": check.integer("seed", raw.get("seed", 0), minimum=0, maximum=MAX_SEED),
        "runs": check.integer("runs", raw.get("runs", DEFAULT_RUNS), minimum=1),
    }


def identity_dict(config: Any) -> dict[str, Any]:
    """The first keys of every resolved config: ``kind``, ``name``, ``description``, seed, runs."""
    keys = ("kind", "name", "description", "seed", "runs")
    return {key: getattr(config, key) for key in keys}


def check_keys(
    check: Checker,
    table: Mapping[str, Any],
    allowed: Sequence[str],
    required: Sequence[str],
    prefix: str = "",
    what: str = "",
) -> None:
    """Every key of ``table`` in ``allowed`` and every ``required`` one present (collected)."""
    for key in table:
        if key not in allowed:
            with check.collect():
                check.unknown(prefix + key, allowed, what)
    for key in required:
        if key not in table:
            with check.collect():
                check.fail(prefix + key, "is required")


def entry(check: Checker, key: str, known: registry.Registry, name: Any) -> registry.Entry:
    """``known.entry(name)`` (a registered name or an import path), else a config error."""
    try:
        return known.entry(name)
    except ValueError as exc:
        check.fail(key, str(exc))


def check_learners(check: Checker, value: Any, known: registry.Registry) -> tuple[str, ...]:
    """``learners``: a non-empty array of distinct names of ``known`` (or import paths)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        check.fail(
            "learners",
            f"must be a non-empty array of learner names from {sorted(known)}, got {value!r}",
        )
    for item in value:
        entry(check, "learners", known, item)
    return tuple(check_distinct(check, "learners", value, "learner"))


def check_ints(
    check: Checker, key: str, value: Any, minimum: int, maximum: int | None, alternative: str = ""
) -> list[int]:
    """``key``: an int or non-empty array of ints in ``[minimum, maximum]``, as a list.

    ``maximum=None``: no upper bound; ``alternative`` names what else the value may be.
    """
    bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        extra = f" or {alternative}" if alternative else ""
        check.fail(key, f"must be a non-empty array of ints {bounds}{extra}, got {value!r}")
    return [check.integer(key, v, minimum, maximum) for v in value]


def check_distinct(check: Checker, key: str, values: list[Any], what: str = "value") -> list[Any]:
    """``values`` of array ``key`` when none repeats, else a config error naming the repeat."""
    if len(set(values)) != len(values):
        check.fail(key, f"lists a {what} twice: {values!r}")
    return values
