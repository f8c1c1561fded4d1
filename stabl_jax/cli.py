"""The ``stabl-jax`` command line.

::

    stabl-jax run [CONFIG] [--runs R] [--seed S] [--out DIR] [--set key=value ...]
                  [--force] [--allow-large] [--no-progress]
    stabl-jax list
    stabl-jax bench [--quick] [--out DIR] [--learners ...] [--arms ...] [--runs ...]

``run`` simulates every learner of an experiment config on the same environment draws, writes
one results folder (``results/<config name>-seed<S>`` by default; see
:mod:`stabl_jax.results`) and prints a summary table. With no CONFIG it runs
``expert_advice_equal``, the paper's Figure 1 (left). A BCO config (``kind = "bco"``, e.g.
``configs/bco_d2.toml``) runs the same way: ``stabl-jax run configs/bco_d2.toml``, and so
does an algorithm-selection config on BBOB (``kind = "hpo"``: ``stabl-jax run hpo_bbob_sphere``).

``run`` checks every round's losses and play distributions inside the compiled program
(``simulate(validate=True)``) and checkpoints every learner after every chunk; if it is
interrupted (Ctrl-C, a crash, ``kill -9``), the same command resumes from the last chunk and
writes results bitwise identical to an uninterrupted run (see :mod:`stabl_jax.checkpoint`).

Before it computes anything, ``run`` estimates the memory, disk and time the config needs
(:func:`stabl_jax.experiment.estimate_resources`) and refuses a run that does not fit (exit 2
naming the sizes; ``--allow-large`` runs it anyway). It only ever replaces or deletes folders
it created (they hold a ``.stabl_jax_results`` marker); a damaged checkpoint is named and
``--force`` discards it; a full disk ends with one line naming the folder (rerunning after
freeing space resumes). See ``docs/reliability.md``.

Exit status: 0 success, 2 usage or config error, a folder it may not use, a damaged
checkpoint or a run that does not fit (``error: ...`` on stderr), 1 unexpected failure or a
full disk, 130 interrupted.
"""

from __future__ import annotations

import argparse
import datetime
import errno
import sys
import time
import tomllib
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from stabl_jax import compile_cache, tables
from stabl_jax.config import ConfigError, ExperimentConfig, load_config, shipped_configs
from stabl_jax.versions import __version__

DEFAULT_CONFIG = "figure1"
#: Printed when a learner's meta-learner zeroed weights (``num_muted > 0``).
MUTED_WARNING = (
    "warning: {name} muted a meta weight {count} times over all runs and rounds: a factor "
    "1 + eta_k r~ <= 0 of Algorithm 1, line 13 set w(k) to 0 until expert k restarts. The "
    "paper's bound eta_k * 2B <= 1 that prevents it does not hold at these step sizes (tuned "
    "scales above the printed ones do this; the results are still valid runs of the learner)."
)
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``run`` and ``list``)."""
    parser = argparse.ArgumentParser(
        prog="stabl-jax",
        description="Strongly adaptive bandit experiments (StABL, ICLR 2024) in JAX.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR",
        help="folder of JAX's persistent compilation cache, or 'off' (default: "
        f"${compile_cache.ENV_VAR}, else ~/.cache/stabl_jax/jax); second runs skip compiling",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run an experiment config and write a results folder",
        description="Simulate every learner of a config on the same environment draws, write "
        "summary.json, traces.npz and PNG plots to one folder, and print a summary.",
    )
    run.add_argument(
        "config",
        nargs="?",
        default=DEFAULT_CONFIG,
        metavar="CONFIG",
        help=f"a .toml file or the name of a shipped config (default: {DEFAULT_CONFIG}; "
        "see `stabl-jax list`)",
    )
    run.add_argument("--runs", type=int, default=None, help="number of runs (overrides `runs`)")
    run.add_argument("--seed", type=int, default=None, help="PRNG seed (overrides `seed`)")
    run.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="results folder (default: results/<config name>-seed<seed>)",
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override a config value, dotted keys reach into tables, values are TOML: "
        '--set env.num_arms=10 --set \'learners=["stabl","exp3"]\' (repeatable)',
    )
    run.add_argument(
        "--force",
        action="store_true",
        help="replace a results folder stabl-jax wrote, and discard damaged checkpoints or "
        "those of another experiment (a folder stabl-jax did not create is never replaced)",
    )
    run.add_argument(
        "--allow-large",
        action="store_true",
        help="run even when the estimated memory or disk exceeds what is available",
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.set_defaults(handler=_cmd_run)

    lst = sub.add_parser("list", help="list learners, environments and shipped configs")
    lst.set_defaults(handler=_cmd_list)
    _add_bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``stabl-jax`` and ``python -m stabl_jax``; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2, message printed)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if getattr(args, "handler", None) is None:
        parser.print_usage(sys.stderr)
        print("error: choose a command: run, list or bench", file=sys.stderr)
        return EXIT_USAGE

    from stabl_jax.checkpoint import CheckpointMismatch
    from stabl_jax.results import OutputError

    try:
        compile_cache.enable(compile_cache.resolve(args.compile_cache))
        return args.handler(args)
    except (ConfigError, OutputError, CheckpointMismatch) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `stabl-jax list | head`: the reader left; not our failure
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the exit-time flush cannot fail again
        return EXIT_OK
    except Exception as exc:  # the last line of defence: report, exit 1
        traceback.print_exc()
        print(f"error: unexpected failure: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE


# --------------------------------------------------------------------------------------------
# stabl-jax list
# --------------------------------------------------------------------------------------------


def _cmd_list(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from stabl_jax.registry import BCO_LEARNERS, CONVEX_ENVS, ENVS, LEARNERS

    out = out or sys.stdout
    configs = shipped_configs()
    sections = {
        "learners": LEARNERS,
        "environments": ENVS,
        'BCO learners (kind = "bco")': BCO_LEARNERS,
        'convex environments (kind = "bco")': CONVEX_ENVS,
    }
    width = max(len(n) for n in [*configs, *(n for d in sections.values() for n in d)]) + 2
    for title, entries in sections.items():
        print(f"{title}:", file=out)
        for name, entry in entries.items():
            print(f"  {name:<{width}}{entry.description}", file=out)
    print("configs:", file=out)
    for name, path in configs.items():
        print(f"  {name:<{width}}{_config_description(path)}", file=out)
    return EXIT_OK


def _config_description(path: Any) -> str:
    try:
        description = tomllib.loads(path.read_text(encoding="utf-8")).get("description", "")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"(unreadable: {exc})"
    return str(description)


# --------------------------------------------------------------------------------------------
# stabl-jax run
# --------------------------------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    from stabl_jax.results import ResultsFolder

    start = time.perf_counter()
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    config = load_config(args.config, args.overrides, runs=args.runs, seed=args.seed)
    if args.out is not None and not args.out.strip():
        raise ConfigError("--out is empty; give a folder name (or leave --out out for the default)")
    out = Path(args.out or Path("results") / f"{config.name}-seed{config.seed}")
    needs = _check_fits(config, out, args.allow_large)
    folder = ResultsFolder.prepare(out, force=args.force)  # fails before any computation
    try:
        return _run(config, folder, args, needs, started=started, start=start)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        kept = (
            f"the checkpoints of finished chunks are kept in {folder.partial}: free space "
            "and rerun the same command to resume"
            if folder.partial.is_dir() and folder.has_checkpoints()
            else "free space and rerun the same command"
        )
        print(
            f"error: no space left on the device of {folder.final.parent}; {kept}", file=sys.stderr
        )
        return EXIT_FAILURE


def _check_fits(config: Any, out: Path, allow_large: bool) -> Any:
    """The resources ``config`` needs (``None`` for an algorithm-selection config); raises
    :class:`ConfigError` when they exceed the memory available or the disk free under
    ``out``, unless ``allow_large``."""
    import shutil

    from stabl_jax.experiment import estimate_resources
    from stabl_jax.simulate import available_memory_bytes

    if config.kind == "hpo":
        return None
    needs = estimate_resources(config)
    existing = out.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = {"memory": available_memory_bytes(), "disk": shutil.disk_usage(existing).free}
    where = {"memory": "available", "disk": f"free under {existing}"}
    wanted = {"memory": needs.memory_bytes, "disk": needs.disk_bytes}
    over = [k for k in wanted if wanted[k] > free[k]]
    if over and not allow_large:
        sizes = "; ".join(
            f"about {_bytes(wanted[k])} of {k}, {_bytes(free[k])} {where[k]}" for k in over
        )
        raise ConfigError(
            f"this run does not fit ({config.runs} runs x {config.horizon} rounds x "
            f"{len(config.learners)} learners): it needs {sizes}; lower runs or horizon "
            "(--runs, --set horizon=...), or pass --allow-large to run it anyway"
        )
    return needs


def _bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def _run(
    config: ExperimentConfig,
    folder: Any,
    args: argparse.Namespace,
    needs: Any,
    *,
    started: str,
    start: float,
) -> int:
    """``stabl-jax run`` for any config, in ``folder`` (algorithm selection: :func:`_run_hpo`
    once the folder is resumed and its checkpoints are known)."""
    from stabl_jax.checkpoint import ExperimentCheckpoints, experiment_identity
    from stabl_jax.experiment import resolve_chunk_size, run_experiment
    from stabl_jax.results import write_results

    with folder:
        if config.kind != "hpo":
            _print_header(config, folder.final, resolve_chunk_size(config), needs)
        identity = experiment_identity(config)
        resumed = folder.resume(
            identity, force=args.force, log=lambda line: print(f"  {line}", flush=True)
        )
        checkpoints = ExperimentCheckpoints(folder.checkpoint_dir, identity)
        if config.kind == "hpo":
            return _run_hpo(config, folder, checkpoints, started=started, start=start)
        if resumed is not None:
            done = ", ".join(f"{k} {v}/{config.horizon}" for k, v in resumed.progress.items())
            print(f"  resuming {resumed.source.name}: {done or 'nothing done yet'}", flush=True)
        try:
            result = run_experiment(
                config,
                progress=None if args.no_progress else _progress_bars(config.horizon),
                on_learner_done=_print_learner_done,
                checkpoints=checkpoints,
                validate=True,
            )
        except KeyboardInterrupt:
            print(
                f"\ninterrupted: checkpoints kept in {folder.partial}; "
                "run the same command again to resume",
                file=sys.stderr,
                flush=True,
            )
            raise
        what = "SA(L)" if config.kind == "bco" else "SA(L), per segment"
        print(f"  metrics ({what}): {result.metrics_seconds:.1f} s", flush=True)
        extra = {
            "command": ["stabl-jax", *args.argv],
            "resumed": None
            if resumed is None
            else {"from": resumed.source.name, "rounds_done": resumed.progress},
        }
        final = write_results(result, folder, started=started, extra=extra)
    print()
    print(format_table(result))
    print()
    print(f"results: {final}")
    print(f"total time: {time.perf_counter() - start:.1f} s")
    return EXIT_OK


def _run_hpo(config: Any, folder: Any, checkpoints: Any, *, started: str, start: float) -> int:
    """``stabl-jax run`` for an algorithm-selection config (``kind = "hpo"``): every learner
    of every problem checkpoints its chunks in the partial folder, so the same command
    resumes an interrupted run."""
    from stabl_jax.hpo_experiment import format_hpo_table, run_hpo_experiment
    from stabl_jax.results import write_results

    print(f"stabl-jax run {config.name}  ({config.source})")
    if config.overrides:
        print(f"  overrides: {' '.join(config.overrides)}")
    print(
        f"  {len(config.problems)} BBOB problems (function, dim, evaluations), {config.runs} "
        f"repeats each, seed {config.seed}, feedback={config.feedback}, "
        f"noise {config.noise_std:g}; same key for every learner (paired)"
    )
    print(f"  learners: {', '.join(config.learners)}")
    print(f"  output: {folder.final}", flush=True)

    def learner_done(name: str, problem: Any, seconds: dict[str, float]) -> None:
        print(
            f"  {problem.key:<16} {name:<20} compile {seconds['compile']:5.1f} s  "
            f"run {seconds['run']:6.1f} s",
            flush=True,
        )

    result = run_hpo_experiment(
        config, checkpoints=checkpoints, validate=True, on_learner_done=learner_done
    )
    final = write_results(result, folder, started=started)
    print()
    print(format_hpo_table(result))
    print()
    print(f"results: {final}")
    print(f"total time: {time.perf_counter() - start:.1f} s")
    return EXIT_OK


def _print_header(config: ExperimentConfig, out: Path, chunk: int, needs: Any = None) -> None:
    env = config.make_env()
    points = (
        "random per run"
        if getattr(env, "random_change_points", False)
        else ", ".join(map(str, env.change_points)) or "none"
    )
    print(f"stabl-jax run {config.name}  ({config.source})")
    if config.overrides:
        print(f"  overrides: {' '.join(config.overrides)}")
    if config.kind == "bco":
        size = f"d={env.dim}, {type(env.domain).__name__.lower()} K"
        feedback = f"SA(L) stride {config.sa_stride or 'max(1, L // 4)'}"
    else:
        size = f"N={env.num_arms} arms"
        feedback = f"feedback={config.feedback}"
    print(
        f"  env: {config.env.name}, {size}, T={config.horizon} rounds, "
        f"{env.num_segments} segments (change points: {points})"
    )
    print(
        f"  {config.runs} runs, seed {config.seed}, {feedback}, "
        f"chunks of {chunk} rounds; same key for every learner (paired)"
    )
    print(f"  learners: {', '.join(config.learners)}")
    if needs is not None:
        print(
            f"  needs about {_bytes(needs.memory_bytes)} of memory, {_bytes(needs.disk_bytes)} of "
            f"disk (traces and checkpoints), roughly {_duration(needs.seconds)} of simulation"
        )
    print(f"  output: {out}", flush=True)


def _progress_bars(horizon: int) -> Callable[[str], Callable[[int, int], None]]:
    """Per learner, a tqdm bar (shown from the start, compilation included) driven by
    ``simulate``'s per-chunk progress callback."""
    from tqdm import tqdm

    def for_learner(name: str) -> Callable[[int, int], None]:
        bar = tqdm(total=horizon, desc=f"  {name}", unit="round", leave=False, file=sys.stderr)

        def update(done: int, total: int) -> None:
            bar.update(done - bar.n)
            if done >= total:
                bar.close()

        return update

    return for_learner


def _print_learner_done(outcome: Any) -> None:
    res = outcome.result
    queries = int(outcome.learner.num_queries)
    muted = "" if outcome.num_muted is None else f", muted {outcome.num_muted}"
    per_round = f"{queries} {'query' if queries == 1 else 'queries'}/round"
    print(
        f"  {outcome.name:<20} {per_round:<16} "
        f"compile {res.compile_seconds:5.1f} s  run {res.run_seconds:6.1f} s{muted}",
        flush=True,
    )
    if outcome.num_muted:
        print(f"  {MUTED_WARNING.format(name=outcome.name, count=outcome.num_muted)}", flush=True)


def _pick_windows(windows: Sequence[int], count: int = 3) -> list[int]:
    if len(windows) <= count:
        return list(windows)
    return [windows[0], windows[len(windows) // 2], windows[-1]]


def format_table(result: Any) -> str:
    """The printed summary: per learner, queries, per-segment reward, SA(L) at up to three
    ``L``, and probability on the best arm (means +- 95% half-widths over runs); for a BCO
    experiment :func:`format_bco_table`."""
    from stabl_jax import metrics

    config = result.config
    if config.kind == "bco":
        return format_bco_table(result)
    shown = _pick_windows(config.sa_windows)
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
        pb_mean, pb_half = metrics.mean_ci(outcome.result.prob_best.astype(np.float64).mean(1))
        row = [name, str(outcome.learner.num_queries)]
        row += [tables.plus_minus(m, h, 3) for m, h in zip(seg_mean, seg_half, strict=True)]
        row += [tables.plus_minus(sa_mean[c], sa_half[c], 1) for c in columns]
        row += [tables.plus_minus(pb_mean, pb_half, 3)]
        rows.append(row)
    return tables.text_table(
        rows,
        f"{_over(config.runs)}; reward = 1 - loss of the played arm; SA(L) = worst regret over "
        "any L consecutive rounds (sampled loss); q = queries/round",
    )


def format_bco_table(result: Any) -> str:
    """The printed summary of a BCO experiment: per learner, queries, mean loss, SA(L) at up
    to three ``L`` (means +- 95% half-widths over runs) and muting events; a last row gives
    the largest comparator certificate per ``L``."""
    from stabl_jax import metrics

    config = result.config
    shown = _pick_windows(config.sa_windows)
    columns = [config.sa_windows.index(L) for L in shown]
    rows = [["learner", "q", "mean loss", *(f"SA({L})" for L in shown), "muted"]]
    for name, outcome in result.outcomes.items():
        loss_mean, loss_half = metrics.mean_ci(outcome.result.loss.astype(np.float64).mean(1))
        sa_mean, sa_half = metrics.mean_ci(outcome.sa)
        row = [name, str(outcome.learner.num_queries), tables.plus_minus(loss_mean, loss_half, 4)]
        row += [tables.plus_minus(sa_mean[c], sa_half[c], 1) for c in columns]
        row += ["-" if outcome.num_muted is None else str(outcome.num_muted)]
        rows.append(row)
    gap = result.comparator_gap.max(axis=0)
    rows.append(["comparator gap (max)", "", "", *(f"{gap[c]:.2g}" for c in columns), ""])
    stride = config.sa_stride or "max(1, L // 4)"
    return tables.text_table(
        rows,
        f"{_over(config.runs)}; loss = l_t(x_t) at the played point; SA(L) = worst regret over "
        f"windows of L rounds starting every {stride} rounds; q = queries/round",
    )


def _over(runs: int) -> str:
    return f"mean ± 95% CI over {runs} runs" if runs > 1 else "one run (no CI)"


# --------------------------------------------------------------------------------------------
# stabl-jax bench
# --------------------------------------------------------------------------------------------


def _add_bench_parser(sub: Any) -> None:
    from stabl_jax.bench.benchmark import BenchConfig

    default = BenchConfig()
    bench = sub.add_parser(
        "bench",
        help="time simulate against NumPy implementations (run-steps/s, ratios, memory)",
        description="Time stabl_jax.simulate for each learner, number of arms and number of "
        "runs, and in the same process a NumPy loop (one run) and a NumPy version vectorised "
        "over runs; print a Markdown table and write benchmark.json and benchmark.md.",
    )
    bench.add_argument("--quick", action="store_true", help="small sizes, seconds (a smoke test)")
    bench.add_argument("--out", default=None, metavar="DIR", help="write benchmark.json/.md here")
    bench.add_argument("--learners", nargs="+", default=None, metavar="NAME")
    bench.add_argument("--arms", nargs="+", type=int, default=None, metavar="N")
    bench.add_argument("--runs", nargs="+", type=int, default=None, metavar="R")
    bench.add_argument("--repeats", type=int, default=None, help=f"(default {default.repeats})")
    bench.add_argument("--no-numpy", action="store_true", help="time only simulate")
    bench.add_argument(
        "--no-validate", action="store_true", help="skip timing simulate(validate=True)"
    )
    bench.add_argument(
        "--bandwidth",
        type=float,
        default=None,
        metavar="GBS",
        help="device memory bandwidth in GB/s for the bound column (default: the vendor's "
        "peak for a known GPU; none on a CPU)",
    )
    bench.set_defaults(handler=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    import dataclasses

    from stabl_jax.bench import benchmark
    from stabl_jax.registry import LEARNERS

    config = benchmark.QUICK if args.quick else benchmark.BenchConfig()
    changes: dict[str, Any] = {}
    for name in ("learners", "arms", "runs"):
        if getattr(args, name) is not None:
            changes[name] = tuple(getattr(args, name))
    if args.repeats is not None:
        changes["repeats"] = args.repeats
    if args.no_numpy:
        changes["numpy"] = False
    if args.no_validate:
        changes["validate"] = False
    if args.bandwidth is not None:
        if not args.bandwidth > 0:
            raise ConfigError(f"--bandwidth must be > 0 GB/s, got {args.bandwidth}")
        changes["bandwidth_gbs"] = args.bandwidth
    config = dataclasses.replace(config, **changes)
    unknown = [name for name in config.learners if name not in LEARNERS]
    if unknown:
        raise ConfigError(f"--learners: unknown {unknown}; choose from {sorted(LEARNERS)}")
    for name in ("arms", "runs", "repeats"):
        values = getattr(config, name)
        if any(v < (2 if name == "arms" else 1) for v in np.atleast_1d(values)):
            raise ConfigError(f"--{name} must be >= {2 if name == 'arms' else 1}, got {values}")
    result = benchmark.run_benchmark(config, log=lambda line: print(line, flush=True))
    print()
    print(benchmark.to_markdown(result), end="")
    if args.out:
        json_path, md_path = benchmark.write(result, args.out)
        print(f"\nwrote {json_path} and {md_path}")
    return EXIT_OK
