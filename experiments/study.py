"""The scaling study: SA(L) against L and n on adversaries that change on many time scales.

    python experiments/study.py [--out results/study] [--runs 1000] [--seed 0] [--jobs 1]
        [--adversaries geometric random] [--arms 10 30 100 300] [--groups base baselines]
        [--learners a,b,...] [--merge-groups] [--config-suffix _tuned] [--set key=value ...]
        [--analyse-only | --dry-run] [--force] [--bundle PREFIX] [--from-bundle PREFIX]
        [--fit-windows L ...]
        [--table-windows 256 1024 4096] [--bootstrap 1000] [--figures docs/figures]

Each point ``(adversary, n)`` is one ``stabl-jax run`` per learner group of
``configs/study_<adversary><suffix>.toml`` with ``--set env.num_arms=n --set learners=[...]``
(the group's learners, :data:`PLAN`; or ``--learners`` for all points; a ``--set`` of a key
the study sets, :data:`POINT_KEYS`, is refused, naming the flag to use), written to
``<out>/<adversary>-n<n>-<group>/`` (a normal results folder; its ``traces.npz`` holds every
run's SA(L) as ``<learner>/sa_expected``, ``(R, len(L))``). The groups of a point share the
config and seed, hence the environment draws: they are merged for the analysis (checked). A
complete folder is not run again (``--force``: every folder is), so an interrupted study
resumes where it stopped; a complete folder run with other settings (``--runs``, ``--seed``,
``--set``, ``--config-suffix``; the environment and learners compared as built, so a default
written out is no other setting) is refused before any point runs; with ``--jobs k``, up to
``k`` folders run at once as ``python -m stabl_jax`` processes, as many as fit beside each
other in the memory available at the start (each point's estimate is the one ``stabl-jax
run`` checks; a point that would not fit waits for the running ones). A point that fails
stops the study once the running ones finish: ``error: point <folder> failed with exit
status N (...)``, exit 1, or 130 and 143 when it was interrupted (Ctrl-C, SIGTERM); the
complete points and the interrupted one's checkpoints are kept, and the same command
resumes. Ctrl-C or SIGTERM reaching the study itself (the points of ``--jobs k`` run in
sessions of their own, so a terminal's Ctrl-C reaches the study alone) is passed on once to
every running point, which keeps its checkpoints and stops; no point starts after it, and
the study exits 130 or 143 once they have stopped. ``--analyse-only`` runs no point and
analyses the complete ones as they are; given with it, ``--runs``, ``--seed``, ``--set`` or
``--config-suffix`` name the settings the points must have run with, and a point run with
other ones is refused (exit 2) instead of being analysed under the wrong name; ``--force``
and ``--jobs``, which only choose how points run, are refused with it. ``--dry-run`` makes
the checks a run makes before its first point and lists every point, complete or to run with
what ``stabl-jax run`` estimates it needs, and the total time of their simulations and SA(L)
passes; it writes nothing.

Then the analysis, from the folders alone:

* exponent in ``L``: least squares ``log SA(L) = a + b log L`` over ``L <= T / 4``
  (``--fit-windows``), with ``SA(L)`` the mean over runs of the per-run SA(L) of the
  expected loss ``<p_t, l_t>`` (the quantity the paper bounds);
* exponent in ``n``: ``log SA(L) = a + c log n`` at fixed ``L`` over the ``n`` a learner ran at;
* 95% bootstrap intervals: resample the runs with replacement (independently per point, the
  points being independent experiments), refit, take the 2.5% and 97.5% quantiles of the
  refitted exponents (:data:`BOOTSTRAP_RESAMPLES` resamples, ``numpy.random.default_rng``
  seeded by ``--bootstrap-seed``).

It writes ``<out>/study.json`` (every fit), ``<out>/study.md`` (the empirical Table 1 per
adversary and n, and the exponent tables) and, with ``--figures``, the plots
``<prefix>_<adversary>_sa_vs_L.png`` and ``<prefix>_<adversary>_sa_vs_n.png``. ``--bundle``
packs the per-run SA(L) of every folder into two small files (``PREFIX_sa.npz``,
``PREFIX_summaries.json``) that ``--from-bundle`` turns back into folders elsewhere (never
over existing ones, whose full traces it would replace): the full ``traces.npz`` are
hundreds of MB per point.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere: import this tree's stabl_jax
    sys.path.insert(0, str(ROOT))

ADVERSARIES: dict[str, str] = {
    "geometric": "study_geometric",
    "random": "study_random",
}
ARMS: tuple[int, ...] = (10, 30, 100, 300)
TABLE_WINDOWS: tuple[int, ...] = (256, 1024, 4096)
#: Runs of every point without ``--runs``.
DEFAULT_RUNS = 1000
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20240506
SA_FIELD = "sa_expected"  # per-run SA(L) of the expected loss <p_t, l_t>

#: The default plan: ``(adversary, n, group, learners)``: every learner at every ``n`` on both
#: adversaries. A group is one ``stabl-jax run`` (one results folder); groups of the same
#: ``(adversary, n)`` use the same config, seed and number of runs, hence the same
#: environment draws (checked on load): their learners are paired exactly as if run
#: together. Learners missing from the registry are skipped (a group with none left is not
#: run). Sizing (EXPERIMENTS.md): on the 2-core machine one StABL run at n = 300 (1,000 runs,
#: T = 2^14) costs ~9 minutes and its SA(L) pass ~5 more; the whole plan was run on a GPU
#: machine with 16 cores (``--jobs 16``); ``--arms``, ``--adversaries`` and ``--groups``
#: select a part of it.
_BASE = ("stabl", "exp3_uniform", "uniform", "stabl_naive", "stabl_single_scale")
_BASELINES = ("saol", "stabl_one_query", "saol_hedge", "exp3s")
PLAN: tuple[tuple[str, int, str, tuple[str, ...]], ...] = tuple(
    (adversary, n, group, names)
    for n in sorted(ARMS, reverse=True)  # the longest points first
    for adversary in ADVERSARIES
    for group, names in (("base", _BASE), ("baselines", _BASELINES))
)

#: Table 1 of the paper (adaptive-regret bound, queries per round), by registry name, plus the
#: rows the study adds. ``I`` is the interval length (our ``L``).
PAPER_ROWS: dict[str, tuple[str, str, str]] = {
    # name: (algorithm, bound, queries per round as the paper states it)
    "flh": ("FLH (Hazan & Seshadhri 2009)", "√(nT)", "O(log T)"),
    "saol": ("SAOL (Daniely et al. 2015), bandit", "√(nI log T)", "O(log T)"),
    "eflh": ("EFLH (Lu & Hazan 2022)", "I^(1/2+ε)·√(n log T)", "O(log log T / ε)"),
    "stabl": ("StABL (this paper, Thm. 1)", "√(nI log n)·log^1.5 T", "2"),
    "stabl_one_query": (
        "StABL, one query",
        "Ω(I^(1−ε)) for any 1-query learner (Daniely et al. 2015)",
        "1",
    ),
}
OTHER_BOUNDS: dict[str, str] = {
    "saol_hedge": "full information; not in Table 1",
    "exp3s": "switching regret; not in Table 1",
    "hedge": "full information, static regret only",
    "exp3": "static regret √(nT log n) only",
    "exp3_uniform": "static regret √(nT log n) only",
    "uniform": "none (never learns): linear in L",
    "stabl_naive": "none (the paper's ablation)",
    "stabl_single_scale": "none (the paper's ablation)",
    "stabl_anytime": "as StABL (doubling)",
}
NOT_IMPLEMENTED: tuple[str, ...] = ("flh", "eflh")


# --------------------------------------------------------------------------------------------
# Fitting and the bootstrap (pure NumPy; tested on synthetic data)
# --------------------------------------------------------------------------------------------


def fit_power_law(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares fit ``log y = a + b log x`` along the last axis.

    Args:
      x: ``(K,)`` positive abscissae (``K >= 2`` distinct values).
      y: ``(..., K)`` positive ordinates; leading axes are independent fits.

    Returns:
      ``(a, b)``, each of shape ``y.shape[:-1]``.

    Example:
      >>> a, b = fit_power_law(np.array([1.0, 4.0, 16.0]), np.array([3.0, 6.0, 12.0]))
      >>> round(float(b), 6), round(float(np.exp(a)), 6)
      (0.5, 3.0)
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    if x.ndim != 1 or x.shape[0] < 2 or np.unique(x).size < 2:
        raise ValueError(f"x must hold at least 2 distinct values, got {x!r}")
    if y.shape[-1] != x.shape[0]:
        raise ValueError(f"y's last axis must have length len(x)={x.shape[0]}, got {y.shape}")
    if np.any(x <= 0):
        raise ValueError(f"x must be positive for a log-log fit, got {x!r}")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError(
            f"y must be finite and positive for a log-log fit, got min {np.nanmin(y)!r}"
        )
    lx = np.log(x)
    ly = np.log(y)
    cx = lx - lx.mean()
    b = (ly - ly.mean(axis=-1, keepdims=True)) @ cx / (cx @ cx)
    a = ly.mean(axis=-1) - b * lx.mean()
    return a, b


def bootstrap_means(
    samples: np.ndarray, resamples: int, rng: np.random.Generator, block: int = 100
) -> np.ndarray:
    """Means over runs of ``resamples`` bootstrap resamples of the runs.

    Args:
      samples: ``(R, K)`` one row per run.
      resamples: ``B``, the number of resamples.
      rng: the generator drawing the run indices (``B x R`` integers in ``[0, R)``).
      block: resamples drawn at a time (memory ``block x R x K``).

    Returns:
      ``(B, K)`` the column means of each resample.
    """
    samples = np.asarray(samples, np.float64)
    runs = samples.shape[0]
    out = np.empty((resamples, samples.shape[1]))
    for lo in range(0, resamples, block):
        hi = min(resamples, lo + block)
        idx = rng.integers(0, runs, size=(hi - lo, runs))
        out[lo:hi] = samples[idx].mean(axis=1)
    return out


def exponent_with_interval(
    x: Sequence[float] | np.ndarray,
    columns: Sequence[np.ndarray] | np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> dict[str, Any]:
    """Exponent ``b`` of ``mean(y) ~ e^a x^b`` with a percentile bootstrap interval.

    Args:
      x: ``(K,)`` abscissae (window lengths ``L`` or arm counts ``n``).
      columns: ``K`` arrays of per-run values, one per abscissa: either ``K`` arrays of
        shape ``(R_k,)`` from independent experiments (resampled independently), or one
        ``(R, K)`` array whose rows are runs (resampled as rows, keeping each run's values
        at every ``x`` together).
      resamples: bootstrap resamples ``B``.
      seed: seed of ``numpy.random.default_rng``.
      level: coverage of the interval.

    Returns:
      ``{"a", "b", "lo", "hi", "se", "note"}``: the fit on the full data, the interval's
      bounds and the bootstrap standard deviation of ``b``. A mean ``<= 0`` has no logarithm:
      then ``b`` is NaN (the data follow no power law there), and if only some resamples
      have one the interval is NaN; ``note`` says which (else it is ``""``).
    """
    rng = np.random.default_rng(seed)
    xs = np.asarray(x, np.float64)
    if isinstance(columns, np.ndarray) and columns.ndim == 2:
        full = columns.mean(axis=0)
        boot = bootstrap_means(columns, resamples, rng)
    else:
        if len(columns) != xs.shape[0]:
            raise ValueError(f"need one column per x value: {len(columns)} vs {xs.shape[0]}")
        full = np.array([np.mean(c) for c in columns])
        boot = np.stack(
            [bootstrap_means(np.asarray(c)[:, None], resamples, rng)[:, 0] for c in columns],
            axis=1,
        )
    nan = float("nan")
    if np.any(full <= 0):
        note = f"mean <= 0 at x = {xs[full <= 0].tolist()}: no power-law fit"
        return {"a": nan, "b": nan, "lo": nan, "hi": nan, "se": nan, "note": note}
    a, b = fit_power_law(xs, full)
    bad = np.any(boot <= 0, axis=1)
    if bad.any():
        note = f"{int(bad.sum())} of {resamples} resamples have a mean <= 0: no interval"
        return {"a": float(a), "b": float(b), "lo": nan, "hi": nan, "se": nan, "note": note}
    _, boot_b = fit_power_law(xs, boot)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(boot_b, [tail, 1.0 - tail])
    return {
        "a": float(a),
        "b": float(b),
        "lo": float(lo),
        "hi": float(hi),
        "se": float(boot_b.std(ddof=1)),
        "note": "",
    }


# --------------------------------------------------------------------------------------------
# Running the points
# --------------------------------------------------------------------------------------------


Plan = dict[tuple[str, int, str], tuple[str, ...]]


def default_plan(
    adversaries: Sequence[str],
    arms: Sequence[int],
    learners: Sequence[str] | None = None,
    groups: Sequence[str] | None = None,
    *,
    merge: bool = False,
) -> Plan:
    """``{(adversary, n, group): learners}``: :data:`PLAN` restricted to ``adversaries``,
    ``arms`` and ``groups`` (``None``: all), or, with ``learners`` given, those learners at
    every ``(adversary, n)`` in one group ``"custom"`` (then ``groups`` and ``merge``, which
    it would ignore, raise ``ValueError``). With ``merge``, the groups of a point become one
    group ``"all"`` (one run, one SA(L) pass)."""
    from stabl_jax.registry import LEARNERS

    for adversary in adversaries:
        if adversary not in ADVERSARIES:
            raise ValueError(f"adversary must be one of {sorted(ADVERSARIES)}, got {adversary!r}")
    if learners is not None:
        if groups is not None or merge:
            raise ValueError(
                "--groups and --merge-groups choose among the study's planned groups, and "
                "--learners runs one group of its own at every point: give one or the other"
            )
        missing = [name for name in learners if name not in LEARNERS]
        if missing:
            raise ValueError(f"unknown learners {missing}; choose from {sorted(LEARNERS)}")
        return {(a, n, "custom"): tuple(learners) for a in adversaries for n in arms}
    unplanned = [n for n in arms if n not in ARMS]
    if unplanned:
        raise ValueError(
            f"--arms {' '.join(map(str, unplanned))}: the study has points at n in {list(ARMS)}; "
            "choose among them, or run learners of your choice at any n with --learners"
        )
    planned_groups = sorted({group for _, _, group, _ in PLAN})
    unknown = [group for group in groups or () if group not in planned_groups]
    if unknown:
        raise ValueError(f"--groups: unknown {unknown}; choose from {planned_groups}")
    plan: Plan = {}
    for adversary, n, group, names in PLAN:
        if adversary not in adversaries or n not in arms:
            continue
        if groups is not None and group not in groups:
            continue
        chosen = tuple(name for name in names if name in LEARNERS)
        skipped = [name for name in names if name not in LEARNERS]
        if skipped:
            print(f"[study] {adversary}-n{n}-{group}: {skipped} not registered, skipped")
        if not chosen:
            continue
        if merge:  # one folder per point: the SA(L) pass (the costly part) runs once
            key = (adversary, n, "all")
            plan[key] = plan.get(key, ()) + tuple(c for c in chosen if c not in plan.get(key, ()))
        else:
            plan[(adversary, n, group)] = chosen
    return plan


def point_folder(out: Path, adversary: str, n: int, group: str) -> Path:
    return out / f"{adversary}-n{n}-{group}"


def point_overrides(n: int, learners: Sequence[str], sets: Sequence[str]) -> list[str]:
    """The ``--set`` values of one point: its number of arms, its learners, then ``sets``."""
    names = ",".join(f'"{name}"' for name in learners)
    return [f"env.num_arms={n}", f"learners=[{names}]", *sets]


#: The keys the study sets for each point, and the flag that sets them: a ``--set`` of one of
#: them (or of the ``env`` table, which holds ``num_arms``) is refused.
POINT_KEYS: dict[tuple[str, ...], str] = {
    ("env",): "--arms (a point's env.num_arms)",
    ("env", "num_arms"): "--arms",
    ("learners",): "--learners or --groups",
    ("runs",): "--runs",
    ("seed",): "--seed",
}


def check_sets(sets: Sequence[str]) -> None:
    """Raise ``ValueError`` for a ``--set`` of a key the study sets for each point
    (:data:`POINT_KEYS`), naming the flag to use instead, or a malformed one."""
    from stabl_jax.experiment.configs import parse_override

    for text in sets:
        keys = parse_override(text)[0]
        if keys in POINT_KEYS:
            raise ValueError(
                f"--set {text}: the study sets {'.'.join(keys)} for each point; use "
                f"{POINT_KEYS[keys]}"
            )


def point_config_path(adversary: str, config_suffix: str = "") -> Path:
    """``configs/study_<adversary><suffix>.toml`` (``_tuned``: the scales of
    ``experiments/tune.py``)."""
    return ROOT / "configs" / f"{ADVERSARIES[adversary]}{config_suffix}.toml"


def cli_args(
    adversary: str,
    n: int,
    learners: Sequence[str],
    folder: Path,
    runs: int,
    seed: int,
    sets: Sequence[str],
    config_suffix: str = "",
) -> list[str]:
    """The ``stabl-jax`` arguments of one point."""
    args = [
        "run",
        str(point_config_path(adversary, config_suffix)),
        "--runs",
        str(runs),
        "--seed",
        str(seed),
        "--out",
        str(folder),
        "--no-progress",
    ]
    for item in point_overrides(n, learners, sets):
        args += ["--set", item]
    return args


def point_memory_bytes(
    adversary: str,
    n: int,
    learners: Sequence[str],
    runs: int,
    seed: int,
    sets: Sequence[str],
    config_suffix: str = "",
) -> int:
    """The peak host memory ``stabl-jax run`` estimates for one point
    (:func:`stabl_jax.experiment.kinds.base.estimate_resources`, the estimate it checks at its
    start)."""
    from stabl_jax.experiment.kinds import base, load_config, paired

    config = load_config(
        point_config_path(adversary, config_suffix),
        point_overrides(n, learners, sets),
        runs=runs,
        seed=seed,
    )
    return base.estimate_resources(paired.plan(config)).memory_bytes


T = TypeVar("T")


class PointFailed(RuntimeError):
    """A point's ``stabl-jax run`` ended with a non-zero exit status ``code`` (its message is
    on stderr, or in ``log`` for ``--jobs`` > 1), or, as a process (``code`` ``-N``), was
    killed by signal ``N``."""

    def __init__(self, name: str, code: int, log: Path | None) -> None:
        where = "its message is above" if log is None else f"its output is in {log}"
        if code < 0:
            killed = signal.Signals(-code).name if -code in signal.valid_signals() else -code
            status = f"was killed by signal {killed}"
            if -code == signal.SIGKILL:
                status += " (kill -9, or the kernel when memory runs out: lower --jobs or --runs)"
        else:
            status = f"failed with exit status {code}"
        super().__init__(f"point {name} {status} ({where})")
        self.code = code


def run_within_memory(
    items: Sequence[tuple[str, int, T]],
    run_one: Callable[[T], float],
    *,
    jobs: int,
    budget_bytes: int,
    say: Callable[[str], None] = print,
    stop: Callable[[KeyboardInterrupt], None] | None = None,
) -> dict[str, float]:
    """Run ``items`` (``(name, estimated bytes, argument)``, in order) with ``run_one``, at most
    ``jobs`` at once and never more than ``budget_bytes`` of estimates at once: an item waits
    until the running ones leave room for it (items behind it that fit may start first).
    Raises ``ValueError`` before running anything when an item alone exceeds the budget; the
    first exception of ``run_one`` is raised once the running items have finished. A
    ``KeyboardInterrupt`` while items run (Ctrl-C; SIGTERM under
    :func:`stabl_jax.experiment.cli.sigterm_interrupts`) starts nothing more, calls ``stop`` with
    it (to
    end the running items early) and is raised once they have returned.
    Returns ``{name: run_one's result}``."""
    too_large = [(name, need) for name, need, _ in items if need > budget_bytes]
    if too_large:
        from stabl_jax.experiment import tables

        names = ", ".join(f"{name} (about {tables.byte_size(need)})" for name, need in too_large)
        raise ValueError(
            f"even alone, {names} would not fit in the {tables.byte_size(budget_bytes)} of "
            "memory available; lower --runs or leave those arms out (--arms)"
        )
    pending = list(items)
    results: dict[str, float] = {}
    waiting: set[str] = set()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        running: dict[concurrent.futures.Future, tuple[str, int]] = {}
        try:
            while pending or running:
                used = sum(need for _, need in running.values())
                for item in list(pending):
                    name, need, argument = item
                    if len(running) >= jobs:
                        break
                    if used + need <= budget_bytes:
                        pending.remove(item)
                        running[pool.submit(run_one, argument)] = (name, need)
                        used += need
                if pending and len(running) < jobs and pending[0][0] not in waiting:
                    waiting.add(pending[0][0])
                    say(f"[study] {pending[0][0]}: waits for memory ({len(running)} running)")
                done, _ = concurrent.futures.wait(
                    running, return_when=concurrent.futures.FIRST_COMPLETED
                )
                for future in done:
                    name, _ = running.pop(future)
                    error = future.exception()
                    if error is not None:
                        pending.clear()  # start nothing more; let the running ones finish
                        concurrent.futures.wait(running)
                        raise error
                    results[name] = future.result()
        except KeyboardInterrupt as interrupt:
            if stop is not None:
                stop(interrupt)
            raise  # leaving the pool waits for the running items
    return results


def run_points(
    plan: Mapping[tuple[str, int, str], Sequence[str]],
    out: Path,
    *,
    runs: int,
    seed: int,
    sets: Sequence[str] = (),
    jobs: int = 1,
    config_suffix: str = "",
    budget_bytes: int | None = None,
    force: bool = False,
) -> dict[str, float]:
    """Run every point whose folder is not complete (``force``: every point, each with
    ``stabl-jax run --force``, which replaces only folders it wrote); returns ``{point: wall
    seconds}``.

    ``jobs == 1`` calls the command line in this process; ``jobs > 1`` runs up to that many
    ``python -m stabl_jax`` processes at a time (logs in ``<out>/<point>.log``) whose
    estimated host memory (:func:`point_memory_bytes`) together stays within ``budget_bytes``
    (default: the host memory available when the study starts), so that points which would
    not fit beside each other run one after the other (:func:`run_within_memory`). The
    estimates use JAX in this process (:func:`main` keeps it on the CPU)."""
    from stabl_jax.experiment import cli
    from stabl_jax.experiment.results import is_complete

    out.mkdir(parents=True, exist_ok=True)
    todo = []
    for (adversary, n, group), learners in plan.items():
        folder = point_folder(out, adversary, n, group)
        if is_complete(folder) and not force:
            print(f"[study] {folder.name}: complete, not run again", flush=True)
            continue
        args = cli_args(adversary, n, learners, folder, runs, seed, sets, config_suffix)
        args += ["--force"] if force else []
        todo.append((folder, args, (adversary, n, learners)))

    # With jobs > 1, the points' processes running now and the signal that stopped the study.
    # Each runs in a session of its own, so that a terminal's Ctrl-C reaches the study alone,
    # which passes it (or a SIGTERM it received) on once to every running point: each keeps
    # its checkpoints and exits 130 or 143, and no point starts after it.
    processes: dict[str, subprocess.Popen[bytes]] = {}
    stopped_by: list[signal.Signals] = []
    lock = threading.Lock()

    def one(folder_args: tuple[Path, list[str]]) -> float:
        folder, args = folder_args
        start = time.perf_counter()
        print(f"[study] {folder.name}: stabl-jax {' '.join(args)}", flush=True)
        log_file = None
        if jobs == 1:
            code = cli.main(args)
        else:
            log_file = out / f"{folder.name}.log"
            with lock:
                if stopped_by:  # the study was interrupted as this point was about to start
                    raise PointFailed(folder.name, 128 + stopped_by[0], None)
                with open(log_file, "w", encoding="utf-8") as log:
                    processes[folder.name] = subprocess.Popen(
                        [sys.executable, "-m", "stabl_jax", *args],
                        cwd=ROOT,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            code = processes[folder.name].wait()
            with lock:
                del processes[folder.name]
        if code != 0:
            raise PointFailed(folder.name, code, log_file)
        seconds = time.perf_counter() - start
        print(f"[study] {folder.name}: done in {seconds:.0f} s", flush=True)
        return seconds

    if jobs == 1:  # the command line checks each point's memory itself
        return {folder.name: one((folder, args)) for folder, args, _ in todo}
    if budget_bytes is None:
        from stabl_jax.simulate import available_memory_bytes

        budget_bytes = available_memory_bytes()
    items = [
        (
            folder.name,
            point_memory_bytes(adversary, n, learners, runs, seed, sets, config_suffix),
            (folder, args),
        )
        for folder, args, (adversary, n, learners) in todo
    ]

    def stop(interrupt: KeyboardInterrupt) -> None:
        with lock:
            stopped_by.append(
                signal.SIGTERM if isinstance(interrupt, cli.Terminated) else signal.SIGINT
            )
            for process in processes.values():
                process.send_signal(stopped_by[0])

    say = lambda line: print(line, flush=True)  # noqa: E731
    return run_within_memory(items, one, jobs=jobs, budget_bytes=budget_bytes, say=say, stop=stop)


# --------------------------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------------------------


def load_point(folder: Path) -> dict[str, Any]:
    """``{"windows", "runs", "arms", "seconds", "change_points", "learners": {name: {"sa":
    (R, K), "queries"}}}`` of one results folder."""
    from stabl_jax.experiment.results import TRACES, read_summary
    from stabl_jax.experiment.tables import TraceFile

    summary = read_summary(folder)
    keys = ["sa_window_lengths", "env/change_points"]
    keys += [f"{name}/{SA_FIELD}" for name in summary["learners"]]
    traces = TraceFile(folder / TRACES, missing_ok=False).read(keys)  # only these arrays
    windows = [int(w) for w in traces["sa_window_lengths"]]
    learners = {}
    for name, entry in summary["learners"].items():
        learners[name] = {
            "sa": traces[f"{name}/{SA_FIELD}"].astype(np.float64),
            "queries": int(entry["num_queries"]),
        }
    return {
        "windows": windows,
        "runs": int(summary["runs"]),
        "arms": int(summary["config"]["env"]["num_arms"]),
        "seconds": {
            name: entry.get("simulate_seconds") for name, entry in summary["learners"].items()
        },
        "change_points": traces["env/change_points"],
        "learners": learners,
    }


def write_bundle(folders: Sequence[Path], prefix: Path) -> list[Path]:
    """Two files holding what the analysis needs from ``folders`` (results folders):
    ``<prefix>_sa.npz`` (per folder ``<folder>/<learner>/sa_expected``, ``sa_sampled``,
    ``<folder>/env/change_points``, ``<folder>/sa_window_lengths``) and
    ``<prefix>_summaries.json`` (``{folder: summary.json}``). Small enough to move between
    machines where the full ``traces.npz`` (hundreds of MB per point) is not."""
    from stabl_jax.experiment.checkpoints import atomic_write
    from stabl_jax.experiment.results import read_summary, write_text
    from stabl_jax.experiment.tables import TraceFile

    arrays: dict[str, np.ndarray] = {}
    summaries: dict[str, Any] = {}
    for folder in folders:
        summary = read_summary(folder)
        summaries[folder.name] = summary
        keep = ["env/change_points", "sa_window_lengths"]
        keep += [f"{n}/{f}" for n in summary["learners"] for f in ("sa_expected", "sa_sampled")]
        data = TraceFile(folder / "traces.npz", missing_ok=False).read(keep)
        arrays |= {f"{folder.name}/{key}": value for key, value in data.items()}
    prefix.parent.mkdir(parents=True, exist_ok=True)
    npz, js = bundle_files(prefix)
    # numpy's stub checks **arrays against its `allow_pickle: bool` keyword as well
    atomic_write(npz, lambda f: np.savez_compressed(f, **arrays))  # type: ignore[arg-type]
    write_text(js, json.dumps(summaries) + "\n")
    return [npz, js]


def is_bundle(prefix: Path) -> bool:
    """True when ``<prefix>_summaries.json`` is a :func:`write_bundle` file: a JSON object
    of results folders' summaries (each with its ``config`` and ``learners``)."""
    from stabl_jax.experiment.checkpoints import read_json

    summaries = read_json(prefix.parent / f"{prefix.name}_summaries.json")
    return summaries is not None and all(
        isinstance(s, dict) and {"config", "learners"} <= s.keys() for s in summaries.values()
    )


def bundle_files(prefix: Path) -> tuple[Path, ...]:
    """``<prefix>_sa.npz`` and ``<prefix>_summaries.json``; ``OutputError`` if one is there
    and they are not a previous bundle (a user's file is never replaced)."""
    from stabl_jax.experiment.results import only_ours

    bundle = is_bundle(prefix)
    return only_ours(
        prefix.parent,
        (f"{prefix.name}_{end}" for end in ("sa.npz", "summaries.json")),
        lambda _: bundle,
        where=f"--bundle {prefix.parent}",
        what="the bundle",
        owner="a previous study bundle",
        remedy="give --bundle another prefix, or move the file",
    )


def read_bundle(prefix: Path, out: Path) -> list[Path]:
    """Rebuild slim results folders (``summary.json``, its ``results.csv``, a ``traces.npz``
    with the SA(L) arrays only) under ``out`` from a :func:`write_bundle` pair, each written
    and committed as ``stabl-jax run`` does (:class:`stabl_jax.experiment.results.ResultsFolder`),
    so
    that ``--force`` may replace it with a full run later.

    Raises:
      ValueError: a folder to rebuild exists already (its files, a full run's traces perhaps,
        would be replaced); nothing is written.
    """
    from stabl_jax.experiment.results import ResultsFolder
    from stabl_jax.experiment.tables import TraceFile, read_json_object

    remedy = "write the bundle again with --bundle"
    summaries = read_json_object(prefix.parent / f"{prefix.name}_summaries.json", remedy)
    taken = [out / name for name in summaries if (out / name).exists()]
    if taken:
        raise ValueError(
            f"--from-bundle would replace the files of {len(taken)} existing folder(s) under "
            f"{out} (first: {taken[0]}) with the bundle's slim ones: give --out a new folder"
        )
    written = []
    data = TraceFile(prefix.parent / f"{prefix.name}_sa.npz", missing_ok=False).read()
    for name, summary in summaries.items():
        arrays = {k[len(name) + 1 :]: v for k, v in data.items() if k.startswith(f"{name}/")}
        out.mkdir(parents=True, exist_ok=True)
        with ResultsFolder.prepare(out / name) as folder:
            written.append(folder.write(summary, arrays, lambda _: None))
    return written


def merge_groups(groups: Sequence[Mapping[str, Any]], where: str = "") -> dict[str, Any]:
    """One point from the folders of its groups; they must have faced the same environment
    draws (equal window lengths, runs and per-run change points), else ``ValueError``."""
    merged = dict(groups[0])
    merged["learners"] = dict(groups[0]["learners"])
    merged["seconds"] = dict(groups[0]["seconds"])
    for other in groups[1:]:
        same = (
            other["windows"] == merged["windows"]
            and other["runs"] == merged["runs"]
            and np.array_equal(other["change_points"], merged["change_points"])
        )
        if not same:
            raise ValueError(f"{where}: groups did not face the same environment draws")
        for name in other["learners"]:
            if name in merged["learners"]:
                raise ValueError(f"{where}: learner {name!r} is in two groups")
        merged["learners"].update(other["learners"])
        merged["seconds"].update(other["seconds"])
    return merged


def default_fit_windows(point: Mapping[str, Any]) -> list[int]:
    """The window lengths ``L <= T / 4`` of a point (``T`` = its largest window length).

    Long windows are left out of the fit: at ``L = T`` the only window is the whole run and
    its comparator is one arm for all of it, which a learner that tracks the changes beats
    (SA(T) is the static regret and may be negative); at ``L = T / 2`` the random adversary
    rarely has a segment that long, and a full-information tracker's SA(T/2) is negative
    too. ``T / 4`` keeps the table's ``L = 4096`` at ``T = 2^14``.
    """
    horizon = max(point["windows"])
    return [w for w in point["windows"] if 4 * w <= horizon]


def check_windows(
    windows: Sequence[int], table_windows: Sequence[int], fit: Sequence[int] | None, point: str
) -> None:
    """``ValueError`` unless every table window and the (>= 2) fit windows are among a point's
    SA(L) window lengths ``windows`` (a table column or a fit of a length no point scored
    would be empty)."""
    for flag, wanted in (("--table-windows", table_windows), ("--fit-windows", fit or ())):
        missing = [w for w in wanted if w not in windows]
        if missing:
            raise ValueError(
                f"{flag} {missing}: not SA(L) window lengths of {point} (its sa_windows: "
                f"{list(windows)}); choose among them, or score them with --set sa_windows=[...]"
            )
    if fit is not None and len(fit) < 2:
        raise ValueError(f"--fit-windows needs >= 2 window lengths to fit a slope, got {list(fit)}")


def dry_run(
    configs: Mapping[tuple[str, int, str], Any], out: Path, *, force: bool, jobs: int
) -> list[str]:
    """What ``--dry-run`` prints: each point of ``configs`` (:func:`check_plan`) complete,
    or to run with what ``stabl-jax run`` estimates it needs (memory and disk); nothing is
    computed or written."""
    from stabl_jax.experiment.kinds import base, paired
    from stabl_jax.experiment.kinds.base import needs_line
    from stabl_jax.experiment.results import is_complete

    lines = [f"[study] dry run: {len(configs)} points under {out}"]
    width = max(len(point_folder(out, *key).name) for key in configs)
    todo = 0
    for key, config in configs.items():
        folder = point_folder(out, *key)
        if is_complete(folder) and not force:
            lines.append(f"  {folder.name:<{width}}  complete, not run again (--force runs it)")
            continue
        needs = base.estimate_resources(paired.plan(config))  # what stabl-jax run checks
        todo += 1
        lines.append(f"  {folder.name:<{width}}  to run: {needs_line(needs).strip()}")
    at_once = "one at a time" if jobs == 1 else f"up to {jobs} at once"
    lines.append(
        f"[study] {todo} points to run ({at_once}); nothing computed or written (leave "
        "--dry-run out to run them)"
    )
    return lines


def check_plan(
    plan: Mapping[tuple[str, int, str], Sequence[str]],
    *,
    runs: int,
    seed: int,
    sets: Sequence[str],
    config_suffix: str,
    table_windows: Sequence[int],
    fit_windows: Sequence[int] | None,
) -> dict[tuple[str, int, str], Any]:
    """Load every point's config as ``stabl-jax run`` will (a missing ``--config-suffix``
    config, an arm count or ``--set`` it refuses raises ``ConfigError`` here) and check the
    table and fit windows against its ``sa_windows``: before any point runs. Returns the
    config of each point of ``plan``."""
    from stabl_jax.experiment.kinds import load_config

    configs = {}
    for (adversary, n, group), learners in plan.items():
        config = load_config(
            point_config_path(adversary, config_suffix),
            point_overrides(n, learners, sets),
            runs=runs,
            seed=seed,
        )
        check_windows(config.sa_windows, table_windows, fit_windows, f"{adversary}-n{n}")
        configs[adversary, n, group] = config
    return configs


#: What a complete point run with other settings can do instead (:func:`check_complete_points`).
RERUN_REMEDY = (
    "--force runs it again with these, --analyse-only analyses the points as they are, or give "
    "--out another folder"
)


def check_complete_points(
    configs: Mapping[tuple[str, int, str], Any], out: Path, remedy: str = RERUN_REMEDY
) -> None:
    """A complete point under ``out`` is used as it is (without ``--force``; analysed by
    ``--analyse-only`` with settings given), so it must have run its config of ``configs``
    (:func:`check_plan`; :func:`settings_differ`), else ``ValueError`` naming ``remedy``."""
    from stabl_jax.experiment.results import is_complete

    for (adversary, n, group), config in configs.items():
        folder = point_folder(out, adversary, n, group)
        if is_complete(folder):
            differ = settings_differ(folder, config)
            if differ:
                raise ValueError(
                    f"{folder} is a complete point run with other settings ({'; '.join(differ)})"
                    f": {remedy}"
                )


#: Config tables compared as built, not as written (:func:`settings_differ`).
AS_BUILT = ("env", "params", "learner_options")


def settings_differ(folder: Path, config: Any) -> list[str]:
    """``"key: there -> now"`` for each setting on which a complete point (its
    ``summary.json``) differs from what ``config`` would run. The environment and every
    learner are compared as built, every field with its default filled in (``env.bonus``,
    ``learner.NAME.constructor.FIELD``, ``learner.NAME.params.FIELD``), so that a default
    written out is no difference; the other keys of the config as written, tables by dotted
    keys, the file path, overrides and description aside."""
    from stabl_jax.experiment.kinds.paired import env_record, learner_record
    from stabl_jax.experiment.results import read_summary

    def flat(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in table.items():
            if isinstance(value, Mapping):
                out.update(flat(value, f"{prefix}{key}."))
            elif f"{prefix}{key}" not in ("source", "overrides", "description"):
                out[f"{prefix}{key}"] = value
        return out

    def as_written(written: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in written.items() if k not in AS_BUILT}

    summary = read_summary(folder)
    recorded = flat(
        {
            **as_written(summary.get("config", {})),
            "env": summary.get("env", {}),
            "learner": {
                name: {"constructor": entry.get("constructor"), "params": entry.get("params")}
                for name, entry in summary.get("learners", {}).items()
            },
        }
    )
    learners = {name: config.make_learner(name) for name in config.learners}
    wanted = {
        **as_written(config.to_dict()),
        "env": env_record(config, config.make_env()),
        "learner": {
            name: learner_record(learner, config.learner_params(learner, name))
            for name, learner in learners.items()
        },
    }
    now = flat(json.loads(json.dumps(wanted)))  # tuples as lists, as in the JSON file
    unset = "(unset)"
    return [
        f"{k}: {recorded.get(k, unset)!s:.60} -> {now.get(k, unset)!s:.60}"
        for k in sorted(recorded.keys() | now.keys())
        if recorded.get(k, unset) != now.get(k, unset)
    ]


def analyse(
    points: Mapping[tuple[str, int], Mapping[str, Any]],
    *,
    table_windows: Sequence[int] = TABLE_WINDOWS,
    fit_windows: Sequence[int] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Every fit of the study from loaded points (:func:`load_point`).

    The exponent in ``L`` is fitted over ``fit_windows`` (``None``: every window length
    ``L <= T / 4``, see :func:`default_fit_windows`); the table and the plots show every ``L``.

    Returns:
      ``{adversary: {"arms": [...], "windows": [...], "learners": {name: {"queries",
      "by_n": {n: {"mean": [K], "ci95": [K], "exponent_L": fit}}, "exponent_n": {L: fit}}}}}``
    """
    out: dict[str, Any] = {}
    for (adversary, n), point in sorted(points.items()):
        fit = list(fit_windows) if fit_windows is not None else default_fit_windows(point)
        entry = out.setdefault(
            adversary,
            {"arms": [], "windows": point["windows"], "fit_windows": fit, "learners": {}},
        )
        if point["windows"] != entry["windows"]:
            raise ValueError(f"{adversary}: points disagree on the window lengths")
        check_windows(point["windows"], table_windows, fit, f"{adversary}-n{n}")
        cols = [point["windows"].index(w) for w in fit]
        entry["arms"].append(n)
        for name, data in point["learners"].items():
            sa = data["sa"]
            learner = entry["learners"].setdefault(
                name, {"queries": {}, "by_n": {}, "exponent_n": {}}
            )
            learner["queries"][n] = data["queries"]
            mean = sa.mean(axis=0)
            half = 1.959963984540054 * sa.std(axis=0, ddof=1) / math.sqrt(sa.shape[0])
            learner["by_n"][n] = {
                "mean": mean.tolist(),
                "ci95": half.tolist(),
                "runs": int(sa.shape[0]),
                "exponent_L": exponent_with_interval(
                    fit, sa[:, cols], resamples=resamples, seed=seed + n
                ),
            }
    for adversary, entry in out.items():
        windows = entry["windows"]
        for name, learner in entry["learners"].items():
            arms = sorted(learner["by_n"])
            if len(arms) < 2:
                continue
            for length in table_windows:
                if length not in windows:
                    continue
                j = windows.index(length)
                columns = [points[(adversary, n)]["learners"][name]["sa"][:, j] for n in arms]
                learner["exponent_n"][length] = {
                    "arms": arms,
                    **exponent_with_interval(
                        arms, columns, resamples=resamples, seed=seed + length
                    ),
                }
    return out


def _exponent(value: float) -> str:
    """An exponent to two decimals; one that rounds to zero is ``0.00``, never ``-0.00``."""
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def _fmt_fit(fit: Mapping[str, Any] | None) -> str:
    if fit is None:
        return "–"
    if not math.isfinite(fit["b"]):
        return "no fit (SA ≤ 0)"
    if not math.isfinite(fit["lo"]):
        return f"{_exponent(fit['b'])} [no interval]"
    return f"{_exponent(fit['b'])} [{_exponent(fit['lo'])}, {_exponent(fit['hi'])}]"


def _queries(learner: Mapping[str, Any]) -> str:
    values = sorted(set(learner["queries"].values()))
    return "/".join(str(v) for v in values)


def _bound(name: str) -> tuple[str, str]:
    """The algorithm's name and its bound: the paper's row, else the learner's display name."""
    if name in PAPER_ROWS:
        algorithm, bound, _ = PAPER_ROWS[name]
        return algorithm, bound
    from stabl_jax.experiment import plots

    return plots.label(name), OTHER_BOUNDS.get(name, "–")


def load_analysis(folder: Path) -> dict[str, Any]:
    """The analysis of ``<folder>/study.json`` (what :func:`analyse` returned) with its integer
    keys (``n`` and ``L``, strings in JSON) restored."""
    path = Path(folder) / "study.json"
    if not path.is_file():
        raise FileNotFoundError(f"no {path}; run experiments/study.py --out {folder} first")
    from stabl_jax.experiment.tables import read_json_object

    remedy = f"run experiments/study.py --out {folder} --analyse-only again"
    analysis = read_json_object(path, remedy)["analysis"]
    for entry in analysis.values():
        for learner in entry["learners"].values():
            for field in ("queries", "by_n", "exponent_n"):
                learner[field] = {int(k): v for k, v in learner[field].items()}
    return analysis


def _table_one_row(
    label: str,
    bound: str,
    name: str,
    learner: Mapping[str, Any],
    n: int,
    windows: Sequence[int],
    table_windows: Sequence[int],
    length_for_n: int,
) -> str:
    """One learner's row of :func:`table_one` (``label`` names the algorithm)."""
    point = learner["by_n"].get(n)
    if point is None:
        cells, fit_l = ["not run" for _ in table_windows], "not run"
    else:
        cells = [
            f"{point['mean'][windows.index(w)]:.1f} ± {point['ci95'][windows.index(w)]:.1f}"
            if w in windows
            else "–"
            for w in table_windows
        ]
        fit_l = _fmt_fit(point["exponent_L"])
    fit_n = learner["exponent_n"].get(length_for_n)
    fit_n_text = _fmt_fit(fit_n)
    if fit_n is not None:
        fit_n_text += f" (n = {', '.join(map(str, fit_n['arms']))})"
    return (
        f"| {label} | `{name}` | {_queries(learner)} | {bound} | "
        + " | ".join(cells)
        + f" | {fit_l} | {fit_n_text} |"
    )


def table_one(
    analysis: Mapping[str, Any],
    adversary: str,
    n: int,
    table_windows: Sequence[int] = TABLE_WINDOWS,
    length_for_n: int | None = None,
    tuned: Mapping[str, Any] | None = None,
) -> str:
    """The empirical Table 1 of one adversary at ``n`` arms (Markdown).

    ``tuned``: the analysis of a second run of the same adversary at other step sizes (the
    study at ``configs/study_<adversary>_tuned.toml``); each of its learners gets a row
    ``…, tuned`` under its row of ``analysis`` (then ``…, theory``).
    """
    entry = analysis[adversary]
    windows = entry["windows"]
    length_for_n = length_for_n or table_windows[-1]
    fit_range = f"{min(entry['fit_windows'])}..{max(entry['fit_windows'])}"
    head = (
        "| algorithm | registry name | queries/round | bound (paper) | "
        + " | ".join(f"SA({w})" for w in table_windows)
        + f" | exponent in L (n = {n}; L = {fit_range}) | exponent in n (L = {length_for_n}) |"
    )
    lines = [head, "|" + "---|" * (7 + len(table_windows) - 1)]
    names = [k for k in PAPER_ROWS if k in entry["learners"]]
    names += [k for k in entry["learners"] if k not in names]
    for name in NOT_IMPLEMENTED:
        algorithm, bound, queries = PAPER_ROWS[name]
        lines.append(
            f"| {algorithm} | not implemented | {queries} | {bound} | "
            + " | ".join("–" for _ in table_windows)
            + " | – | – |"
        )
    other = {} if tuned is None else tuned.get(adversary, {})
    if other and other["windows"] != windows:
        raise ValueError(f"{adversary}: the tuned run's window lengths differ from the study's")
    for name in names:
        algorithm, bound = _bound(name)
        rows = [(algorithm, entry["learners"][name])]
        if name in other.get("learners", {}):
            rows = [(f"{algorithm}, theory", rows[0][1])]
            rows.append((f"{algorithm}, tuned", other["learners"][name]))
        for label, learner in rows:
            lines.append(
                _table_one_row(label, bound, name, learner, n, windows, table_windows, length_for_n)
            )
    return "\n".join(lines)


def exponent_summary(analysis: Mapping[str, Any]) -> str:
    """Markdown: every learner's exponent ``b`` in ``L`` at every adversary and ``n`` (one
    column each, two digits), then how far the farthest end of a bootstrap interval lies."""
    columns = [(adversary, n) for adversary, entry in analysis.items() for n in entry["arms"]]
    names: list[str] = []
    for entry in analysis.values():
        names += [k for k in entry["learners"] if k not in names]
    heads = [
        f"{a} n = {n}" if i == 0 or columns[i - 1][0] != a else f"{n}"
        for i, (a, n) in enumerate(columns)
    ]
    lines = ["| learner | " + " | ".join(heads) + " |", "|---|" + "---|" * len(columns)]
    spread = 0.0
    for name in names:
        cells, queries = [], {}
        for adversary, n in columns:
            learner = analysis[adversary]["learners"].get(name)
            fit = None if learner is None else learner["by_n"].get(n, {}).get("exponent_L")
            if learner is not None and n in learner["queries"]:
                queries[n] = learner["queries"][n]
            if fit is None or not (math.isfinite(fit["b"]) and math.isfinite(fit["lo"])):
                cells.append(_fmt_fit(fit))
                continue
            cells.append(_exponent(fit["b"]))
            spread = max(spread, fit["b"] - fit["lo"], fit["hi"] - fit["b"])
        counts = "/".join(str(v) for v in sorted(set(queries.values())))
        lines.append(f"| `{name}` ({counts}) | " + " | ".join(cells) + " |")
    lines += [
        "",
        "In parentheses: queries per round. Every bootstrap 95% interval of this table lies "
        f"within ±{math.ceil(spread * 100) / 100:.2f} of its value.",
    ]
    return "\n".join(lines)


def exponent_tables(analysis: Mapping[str, Any], adversary: str) -> str:
    """Markdown: exponent in L per (learner, n), and exponent in n per (learner, L)."""
    entry = analysis[adversary]
    arms = entry["arms"]
    lines = [
        "| learner | " + " | ".join(f"b (n = {n})" for n in arms) + " |",
        "|---|" + "---|" * len(arms),
    ]
    for name, learner in entry["learners"].items():
        cells = [_fmt_fit(learner["by_n"].get(n, {}).get("exponent_L")) for n in arms]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    lengths = sorted({L for lr in entry["learners"].values() for L in lr["exponent_n"]})
    if lengths:
        lines += [
            "",
            "| learner | n values | " + " | ".join(f"c (L = {L})" for L in lengths) + " |",
            "|---|---|" + "---|" * len(lengths),
        ]
        for name, learner in entry["learners"].items():
            if not learner["exponent_n"]:
                continue
            used = next(iter(learner["exponent_n"].values()))["arms"]
            cells = [_fmt_fit(learner["exponent_n"].get(L)) for L in lengths]
            lines.append(f"| `{name}` | {', '.join(map(str, used))} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _log_safe(mean: np.ndarray, half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Means ``<= 0`` (no place on a log axis) become NaN, not drawn; the lower error bar is
    cut at 1% of the mean. Returns ``(mean, (2, K) yerr)``."""
    mean = np.where(mean > 0, mean, np.nan)
    return mean, np.stack([np.minimum(half, 0.99 * mean), half])


def _panels(plt: Any, count: int) -> tuple[Any, Any]:
    """One row of ``count`` log-log panels sharing the study's size and y label."""
    fig, axes = plt.subplots(
        1, count, figsize=(4.2 * count, 4.4), layout="constrained", squeeze=False
    )
    axes[0][0].set_ylabel("SA(L) (expected loss), mean ± 95% CI")
    return fig, axes[0]


def _curve(ax: Any, x: np.ndarray, mean: np.ndarray, half: np.ndarray, style: dict) -> None:
    """A learner's means with their 95% intervals (``half``: ``(2, K)`` lower and upper)."""
    ax.errorbar(x, mean, yerr=half, ms=4, lw=1.3, capsize=2, **style)


def _style(colors: Mapping[str, Any], index: int, name: str, label: str) -> dict:
    """A learner's fixed colour (across figures), its marker and its legend label."""
    from stabl_jax.experiment import plots

    marker = plots.MARKERS[index % len(plots.MARKERS)]
    return {"color": colors[name], "marker": marker, "label": label}


def _finish(ax: Any, title: str, xlabel: str, legend_loc: str) -> None:
    ax.set_yscale("log")
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7, loc=legend_loc)


def _save(plt: Any, fig: Any, title: str, path: Path) -> Path:
    fig.suptitle(title, fontsize=12)
    from stabl_jax.experiment import plots

    try:
        return plots.save_figure(fig, path)
    finally:
        plt.close(fig)


def figure_names(adversaries: Sequence[str], prefix: str = "study") -> list[str]:
    """The PNGs :func:`write_figures` may write for ``adversaries``."""
    return [f"{prefix}_{a}_sa_vs_{axis}.png" for a in adversaries for axis in ("L", "n")]


def write_figures(analysis: Mapping[str, Any], folder: Path, prefix: str = "study") -> list[Path]:
    """``<prefix>_<adversary>_sa_vs_L.png`` (one panel per n) and
    ``<prefix>_<adversary>_sa_vs_n.png`` (one panel per table window); means with their 95%
    intervals, and the slope-1/2 and slope-1 guides."""
    from stabl_jax.experiment import plots

    plt = plots.pyplot()
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for adversary, entry in analysis.items():
        windows = np.asarray(entry["windows"], np.float64)
        names = list(entry["learners"])
        colors = plots._colors(names)
        arms = entry["arms"]
        fig, axes = _panels(plt, len(arms))
        for ax, n in zip(axes, arms, strict=True):
            for index, name in enumerate(names):
                point = entry["learners"][name]["by_n"].get(n)
                if point is None:
                    continue
                mean, half = _log_safe(np.asarray(point["mean"]), np.asarray(point["ci95"]))
                label = f"{plots.label(name)} (b={_exponent(point['exponent_L']['b'])})"
                _curve(ax, windows, mean, half, _style(colors, index, name, label))
            for slope, line in ((0.5, ":"), (1.0, "--")):
                ref = 0.5 * windows[0] * (windows / windows[0]) ** slope
                ax.plot(windows, ref, color="0.4", ls=line, lw=1.0, label=f"∝ L^{slope:g}")
            ax.set_xscale("log", base=2)
            _finish(ax, f"n = {n}", "window length L", "upper left")
        title = f"{prefix}_{adversary}: strongly adaptive regret against L"
        written.append(_save(plt, fig, title, folder / f"{prefix}_{adversary}_sa_vs_L.png"))

        lengths = sorted({L for lr in entry["learners"].values() for L in lr["exponent_n"]})
        if not lengths:
            continue
        fig, axes = _panels(plt, len(lengths))
        for ax, length in zip(axes, lengths, strict=True):
            j = entry["windows"].index(length)
            for index, name in enumerate(names):
                learner = entry["learners"][name]
                fit = learner["exponent_n"].get(length)
                if fit is None:
                    continue
                ns = np.asarray(fit["arms"], np.float64)
                mean = np.array([learner["by_n"][int(n)]["mean"][j] for n in ns])
                half = np.array([learner["by_n"][int(n)]["ci95"][j] for n in ns])
                mean, half = _log_safe(mean, half)
                label = f"{plots.label(name)} (c={_exponent(fit['b'])})"
                _curve(ax, ns, mean, half, _style(colors, index, name, label))
            ax.set_xscale("log")
            _finish(ax, f"L = {length}", "arms n", "best")
        title = f"{prefix}_{adversary}: strongly adaptive regret against n"
        written.append(_save(plt, fig, title, folder / f"{prefix}_{adversary}_sa_vs_n.png"))
    return written


def report(
    analysis: Mapping[str, Any],
    table_windows: Sequence[int] = TABLE_WINDOWS,
    table_arms: int | None = None,
) -> str:
    """The Markdown of ``study.md``: per adversary, Table 1 at every n, then the exponents."""
    parts = []
    for adversary, entry in analysis.items():
        arms = entry["arms"] if table_arms is None else [table_arms]
        for n in arms:
            if n not in entry["arms"]:
                continue
            parts += [
                f"### {adversary}, n = {n}",
                "",
                table_one(analysis, adversary, n, table_windows),
                "",
            ]
        parts += [
            f"### {adversary}: fitted exponents",
            "",
            exponent_tables(analysis, adversary),
            "",
        ]
    return "\n".join(parts)


#: The keys of every ``study.json`` this script writes: how a previous study's files
#: (replaced) are told from a user's (never touched).
STUDY_KEYS: frozenset[str] = frozenset({"meta", "analysis"})


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def main(argv: Sequence[str] | None = None) -> int:
    from stabl_jax.experiment.results import Distinct, Parser, distinct, interval_runs

    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/study", help="folder of the study's points")
    parser.add_argument("--runs", type=interval_runs, default=None, help="default 1000")
    parser.add_argument("--seed", type=int, default=None, help="default 0")
    parser.add_argument("--jobs", type=int, default=1, help="points run at once (processes)")
    parser.add_argument("--adversaries", nargs="+", action=Distinct, default=list(ADVERSARIES))
    parser.add_argument("--arms", nargs="+", type=int, action=Distinct, default=list(ARMS))
    parser.add_argument(
        "--learners", default=None, help="comma-separated: run these at every point"
    )
    parser.add_argument(
        "--groups", nargs="+", action=Distinct, default=None, help="groups of PLAN to run"
    )
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--config-suffix", default="", help="run configs/study_<adversary><SUFFIX>.toml"
    )
    parser.add_argument(
        "--table-windows", nargs="+", type=int, action=Distinct, default=list(TABLE_WINDOWS)
    )
    parser.add_argument(
        "--fit-windows",
        nargs="+",
        type=int,
        action=Distinct,
        default=None,
        help="L of the fit (default L <= T/4)",
    )
    parser.add_argument("--bootstrap", type=int, default=BOOTSTRAP_RESAMPLES)
    parser.add_argument("--bootstrap-seed", type=int, default=BOOTSTRAP_SEED)
    parser.add_argument("--figures", default=None, help="write the plots into this folder")
    parser.add_argument("--figure-prefix", default="study", help="file names PREFIX_<adversary>_*")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace --figures PNGs stabl_jax did not write"
    )
    parser.add_argument("--analyse-only", action="store_true", help="do not run missing points")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="check the study, list its points with what each needs, and stop (nothing written)",
    )
    parser.add_argument(
        "--force", action="store_true", help="run complete points again (stabl-jax run --force)"
    )
    parser.add_argument(
        "--merge-groups", action="store_true", help="run each point's groups as one folder"
    )
    parser.add_argument(
        "--bundle", default=None, help="write PREFIX_sa.npz and PREFIX_summaries.json"
    )
    parser.add_argument(
        "--from-bundle", default=None, help="first rebuild the points under --out from PREFIX"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")
    if args.bootstrap < 10:
        parser.error(f"--bootstrap must be >= 10 resamples, got {args.bootstrap}")
    if args.bootstrap_seed < 0:  # numpy.random.default_rng's seeds; checked before any point
        parser.error(f"--bootstrap-seed must be an int >= 0, got {args.bootstrap_seed}")
    if args.figures is None and (args.overwrite or args.figure_prefix != "study"):
        parser.error("--figure-prefix and --overwrite are for --figures: give --figures FOLDER")
    if args.analyse_only and (args.force or args.jobs != 1):
        unused = [f for f, on in (("--force", args.force), ("--jobs", args.jobs != 1)) if on]
        parser.error(
            f"--analyse-only runs no point: {' and '.join(unused)} (how points run) would not "
            f"be used; leave {'them' if len(unused) > 1 else 'it'} out"
        )
    if args.dry_run and (args.analyse_only or args.from_bundle):
        flag = "--analyse-only" if args.analyse_only else "--from-bundle"
        parser.error(
            f"--dry-run writes and analyses nothing: {flag} would not be used; leave it out"
        )
    learners = args.learners.split(",") if args.learners else None
    try:
        distinct("--learners", learners or ())
        check_sets(args.sets)
    except ValueError as exc:
        parser.error(str(exc))
    out = Path(args.out)
    from stabl_jax.experiment.results import (
        OutputError,
        figure_paths,
        mark_folder,
        owned_files,
        write_json,
        write_text,
    )

    try:  # before any point runs: a user's study.md, figure or bundle is never replaced
        owned_files(out, "study.json", ("study.md",), STUDY_KEYS, "experiments/study.py")
        if args.figures:
            names = figure_names(args.adversaries, args.figure_prefix)
            figure_paths(args.figures, names, "--figures", args.overwrite)
        if args.bundle:
            bundle_files(Path(args.bundle))
    except (OutputError, ValueError) as exc:
        parser.error(str(exc))
    try:
        plan = default_plan(
            args.adversaries, args.arms, learners, args.groups, merge=args.merge_groups
        )
    except ValueError as exc:
        parser.error(str(exc))
    start = time.perf_counter()
    # how every point runs: checked against the plan first, then run
    runs, seed = (DEFAULT_RUNS if args.runs is None else args.runs), (args.seed or 0)
    point = dict(runs=runs, seed=seed, sets=args.sets, config_suffix=args.config_suffix)
    given = [
        flag
        for flag, value in (
            ("--runs", args.runs),
            ("--seed", args.seed),
            ("--set", args.sets),
            ("--config-suffix", args.config_suffix),
        )
        if value not in (None, [], "")
    ]
    remedy = RERUN_REMEDY
    if args.analyse_only:  # the settings given are those the points must have run with
        remedy = f"leave {', '.join(given)} out to analyse the points as they are"
    compare = bool(given) if args.analyse_only else not args.force
    try:
        if not args.analyse_only or given:
            windows = {"table_windows": args.table_windows, "fit_windows": args.fit_windows}
            configs = check_plan(plan, **point, **windows)
            if compare:
                check_complete_points(configs, out, remedy)
        if args.from_bundle:
            read_bundle(Path(args.from_bundle), out)
            if compare:  # rebuilt points: complete ones too
                check_complete_points(configs, out, remedy)
    except (ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    if args.dry_run:
        for line in dry_run(configs, out, force=args.force, jobs=args.jobs):
            print(line)
        return 0
    if not args.analyse_only:
        if args.jobs > 1:
            # This process only estimates shapes while the points run in processes of their
            # own: its JAX stays on the host, so it never takes accelerator memory they need.
            import jax

            jax.config.update("jax_platforms", "cpu")
        from stabl_jax.experiment.cli import (
            EXIT_FAILURE,
            EXIT_INTERRUPTED,
            EXIT_TERMINATED,
            Terminated,
            sigterm_interrupts,
        )

        resume = "the complete points are kept, and the same command resumes the study"
        try:
            with sigterm_interrupts():
                run_points(plan, out, **point, jobs=args.jobs, force=args.force)
        except ValueError as exc:  # a bad --set (ConfigError) or a point that cannot fit
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except PointFailed as exc:  # the point's own status when it was interrupted
            print(f"error: {exc}; {resume}", file=sys.stderr)
            return exc.code if exc.code in (EXIT_INTERRUPTED, EXIT_TERMINATED) else EXIT_FAILURE
        except Terminated:  # SIGTERM here, between points or while --jobs processes run
            print(f"error: terminated (SIGTERM); {resume}", file=sys.stderr)
            return EXIT_TERMINATED
        except KeyboardInterrupt:  # Ctrl-C here, between points or while --jobs processes run
            print(f"error: interrupted; {resume}", file=sys.stderr)
            return EXIT_INTERRUPTED
    from stabl_jax.experiment.results import is_complete

    points = {}
    loaded: dict[tuple[str, int], list[dict[str, Any]]] = {}
    complete = []
    try:
        for adversary, n, group in plan:
            folder = point_folder(out, adversary, n, group)
            if is_complete(folder):
                loaded.setdefault((adversary, n), []).append(load_point(folder))
                complete.append(folder)
            else:
                print(f"[study] {folder}: missing, left out of the analysis", flush=True)
        if args.bundle and complete:
            for path in write_bundle(complete, Path(args.bundle)):
                print(f"[study] bundle: {path}", flush=True)
    except ValueError as exc:  # a point's summary.json or traces.npz damaged
        print(f"error: {exc} (--force runs the study's points again)", file=sys.stderr)
        return 2
    points = {key: merge_groups(groups, f"{key[0]}-n{key[1]}") for key, groups in loaded.items()}
    if not points:
        print("[study] no complete point to analyse", file=sys.stderr)
        return 1
    try:
        analysis = analyse(
            points,
            table_windows=args.table_windows,
            fit_windows=args.fit_windows,
            resamples=args.bootstrap,
            seed=args.bootstrap_seed,
        )
    except ValueError as exc:  # windows the folders did not score (--analyse-only)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    meta = {
        "runs": {f"{a}-n{n}": p["runs"] for (a, n), p in points.items()},
        "seconds": {f"{a}-n{n}": p["seconds"] for (a, n), p in points.items()},
        "bootstrap": {"resamples": args.bootstrap, "seed": args.bootstrap_seed},
        "sa_field": SA_FIELD,
        "command": " ".join(["python", "experiments/study.py", *(argv or sys.argv[1:])]),
    }
    write_json(out / "study.json", _jsonable({"meta": meta, "analysis": analysis}), indent=1)
    text = report(analysis, args.table_windows)
    write_text(out / "study.md", text + "\n")
    print(text)
    if args.figures:
        for path in write_figures(analysis, Path(args.figures), args.figure_prefix):
            print(f"[study] figure: {path}")
        mark_folder(args.figures)  # its figures: replaced by the next run
    print(f"[study] {out / 'study.md'}  ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
