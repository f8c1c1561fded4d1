"""The ``stabl-jax`` command line."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import errno
import math
import os
import shutil
import signal
import sys
import threading
import time
import tomllib
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stabl_jax import versions
from stabl_jax.experiment import bench as benchmark
from stabl_jax.experiment import compare, compile_cache, sweep, tables
from stabl_jax.experiment.arguments import Distinct, Parser
from stabl_jax.experiment.checkpoints import CheckpointMismatch
from stabl_jax.experiment.configs import ConfigError, shipped_configs
from stabl_jax.experiment.files import DamagedFile
from stabl_jax.experiment.identity import experiment_identity
from stabl_jax.experiment.kinds import KINDS, load_config, write_results
from stabl_jax.experiment.kinds.base import Kind, Resources, RunFailed
from stabl_jax.experiment.outputs import OutputError
from stabl_jax.experiment.results import ResultsFolder, partial_path
from stabl_jax.registry import BCO_LEARNERS, CONVEX_ENVS, ENVS, LEARNERS
from stabl_jax.simulate import available_memory_bytes

DEFAULT_CONFIG = "figure1"
#: What ``run --dry-run`` prints after the header and the checkpoint decisions.
DRY_RUN_DONE = (
    "dry run: {checked} checked; nothing computed or written (leave --dry-run out to run it)"
)
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, a shell's status of a process SIGTERM ended


class Terminated(KeyboardInterrupt):
    """SIGTERM while a command runs, handled as Ctrl-C; exit :data:`EXIT_TERMINATED`."""


def _raise_terminated(signum: int, frame: Any) -> None:
    # Once: a second SIGTERM must not break off the first's handling, which keeps the checkpoints.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Within the block, the first SIGTERM raises :class:`Terminated`; later ones are ignored.

    The handler runs after the running compiled chunk returns, and the previous one is put
    back after the block. A call from a thread other than the main one changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _PrintVersion(argparse.Action):
    """``--version``: :func:`stabl_jax.versions.describe` on one line, then exit 0."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(f"{parser.prog} {versions.describe()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands ``run``, ``list``, ``compare`` and ``bench``)."""
    parser = Parser(
        prog="stabl-jax",
        description="Strongly adaptive bandit experiments (StABL, ICLR 2024) in JAX.",
    )
    parser.add_argument(
        "--version",
        action=_PrintVersion,
        nargs=0,
        default=argparse.SUPPRESS,
        help="print the versions of stabl-jax and of what its results depend on, and exit",
    )
    parser.add_argument(
        "--compile-cache",
        default=None,
        metavar="DIR",
        help="folder of JAX's persistent compilation cache, or 'off' (default: "
        f"${compile_cache.ENV_VAR}, else ~/.cache/stabl_jax/jax); second runs skip compiling",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _add_run_parser(sub)
    sub.add_parser(
        "list", help="list experiment kinds, learners, environments and shipped configs"
    ).set_defaults(handler=_cmd_list)
    _add_compare_parser(sub)
    _add_bench_parser(sub)
    _add_sweep_parser(sub)
    return parser


def _add_run_parser(sub: Any) -> None:
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
    _add_config_options(
        run,
        runs="number of runs (overrides `runs`)",
        out="results folder (default: results/<config name>-seed<seed>)",
        force="replace a results folder stabl-jax wrote, and discard damaged checkpoints or "
        "those of another experiment (a folder stabl-jax did not create is never replaced)",
        allow_large="run even when the estimated memory or disk exceeds what is available",
        dry_run="check the config and the output folder, print what the run would need "
        "(memory and disk) and stop: nothing is computed or written",
    )
    run.set_defaults(handler=_cmd_run)


def _add_sweep_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "sweep",
        help="sweep learners' params and options, or an environment number, over a grid",
        description="Run every point of each learner's grid on the same draws, one compiled "
        "program per learner and value of its static options (a Params field or the "
        "environment's number is vmapped), write summary.json, results.csv and a plot per "
        "learner, and print the best point; with --tune-seed, choose on that seed, report on "
        "the config's and write tuned.toml into the results folder.",
    )
    parser.add_argument("config", metavar="CONFIG", help="a .toml file or a shipped config's name")
    parser.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="LEARNER.FIELD=VALUES",
        help="one field's values, V1,V2,... or 2**A..2**B: a Params field or a static option "
        "of LEARNER, or env.FIELD, a number of the environment, for every learner (repeatable; "
        "a learner's grid is the product of its fields')",
    )
    parser.add_argument(
        "--tune-seed",
        type=int,
        default=None,
        metavar="S",
        help="choose the best point on seed S (in [0, 2**32 - 1], not the reporting seed)",
    )
    _add_config_options(
        parser,
        runs="runs per grid point",
        out="results folder",
        force="replace a folder stabl-jax wrote; discard the finished grids of another sweep",
        dry_run="say the grid sizes, runs, memory and what would be resumed; compute nothing",
        allow_large="run even when the estimated memory or disk exceeds what is available",
    )
    parser.set_defaults(handler=_cmd_sweep)


def _add_config_options(
    parser: argparse.ArgumentParser,
    *,
    runs: str,
    out: str,
    force: str,
    dry_run: str,
    allow_large: str | None = None,
) -> None:
    """The options of ``run`` and ``sweep``, with these help texts (no ``--allow-large``: none)."""
    parser.add_argument("--runs", type=int, default=None, help=runs)
    parser.add_argument("--seed", type=int, default=None, help="PRNG seed (overrides `seed`)")
    parser.add_argument("--out", default=None, metavar="DIR", help=out)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="override a config value, dotted keys reach into tables, values are TOML: "
        '--set env.num_arms=10 --set \'learners=["stabl","exp3"]\' (repeatable)',
    )
    parser.add_argument("--force", action="store_true", help=force)
    if allow_large is not None:
        parser.add_argument("--allow-large", action="store_true", help=allow_large)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--dry-run", action="store_true", help=dry_run)


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
        print("error: choose a command: run, sweep, list, compare or bench", file=sys.stderr)
        return EXIT_USAGE

    try:
        cache = compile_cache.resolve(args.compile_cache)
    except ValueError as exc:  # an empty --compile-cache or $STABL_JAX_COMPILE_CACHE
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        # A dry run and compare compile nothing (enable creates the cache's folder).
        if getattr(args, "compiles", True) and not getattr(args, "dry_run", False):
            compile_cache.enable(cache)
        with sigterm_interrupts():
            return args.handler(args)
    except (ConfigError, OutputError, CheckpointMismatch, DamagedFile) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RunFailed as exc:  # a check of the numbers stopped the run: its own line says why
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except Terminated:
        print("error: terminated (SIGTERM)", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `stabl-jax list | head`: the reader left; not our failure
        _stdout_to_devnull()
        return EXIT_OK
    except Exception as exc:  # the last line of defence: report, exit 1
        traceback.print_exc()
        print(f"error: unexpected failure: {type(exc).__name__}: {exc}", file=sys.stderr)
        return getattr(args, "failure_status", EXIT_FAILURE)


def _stdout_to_devnull() -> None:
    """Send stdout to ``os.devnull`` once its reader left, so the exit-time flush cannot fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _cmd_list(args: argparse.Namespace) -> int:
    configs = shipped_configs()
    sections: dict[str, Mapping[str, Any]] = {
        "experiment kinds (a config's kind)": KINDS,
        "learners": LEARNERS,
        "environments": ENVS,
        'BCO learners (kind = "bco")': BCO_LEARNERS,
        'convex environments (kind = "bco")': CONVEX_ENVS,
    }
    width = max(len(n) for n in [*configs, *(n for d in sections.values() for n in d)]) + 2
    for title, entries in sections.items():
        print(f"{title}:")
        for name, entry in entries.items():
            print(f"  {name:<{width}}{entry.description}")
    print("configs:")
    for name, path in configs.items():
        print(f"  {name:<{width}}{_config_description(path)}")
    return EXIT_OK


def _config_description(path: Any) -> str:
    try:
        description = tomllib.loads(path.read_text(encoding="utf-8")).get("description", "")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return f"(unreadable: {exc})"
    return str(description)


def _cmd_run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    config = load_config(args.config, args.overrides, runs=args.runs, seed=args.seed)
    if args.out is not None and not args.out.strip():
        raise ConfigError("--out is empty; give a folder name (or leave --out out for the default)")
    out = Path(args.out or Path("results") / f"{config.name}-seed{config.seed}")
    kind = KINDS[config.kind]
    needs = None if kind.estimate is None else kind.estimate(config)
    identity = experiment_identity(config)
    if args.dry_run:
        _say(kind.header(config, ResultsFolder.check(out, force=args.force), needs))
        _check_fits(needs, out, args.allow_large)
        lines, resumed = ResultsFolder.preview(out, identity, force=args.force)
        for line in lines:
            _say(f"  {line}")
        if resumed is not None:
            _say(f"  would resume: {kind.describe_resumed(config, resumed.progress)}")
        checked = "config, output folder, interrupted runs" + (" and resources" if needs else "")
        _say(DRY_RUN_DONE.format(checked=checked))
        return EXIT_OK
    _say(kind.header(config, ResultsFolder.check(out, force=args.force), needs))
    _check_fits(needs, out, args.allow_large)
    code = _in_folder(out, identity, args, lambda f: _run(kind, config, f, args, started=started))
    print(f"total time: {time.perf_counter() - start:.1f} s")
    return code


def _cmd_sweep(args: argparse.Namespace) -> int:
    """``stabl-jax sweep``: check, sweep every learner's grid (resuming finished grids of an
    interrupted sweep of the same ``--out``), write the folder, print the best points."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    config, grids, out = sweep.prepare(args)
    seeds = [config.seed] if args.tune_seed is None else [args.tune_seed, config.seed]
    identity = sweep.identity(config, grids, seeds)
    needs = sweep.resources(config, grids, seeds)
    if args.dry_run:
        sweep.say_plan(config, grids, seeds, ResultsFolder.check(out, force=args.force))
        _check_fits(needs, out, args.allow_large)
        for line in ResultsFolder.preview(out, identity, force=args.force)[0]:
            _say(f"  {line}")
        _say(f"dry run: config, grids, {out} and resources checked; nothing computed or written")
        return EXIT_OK
    ResultsFolder.check(out, force=args.force)
    _check_fits(needs, out, args.allow_large)
    return _in_folder(
        out, identity, args, lambda f: sweep.write(f, config, grids, seeds, args, started)
    )


def _in_folder(
    out: Path, identity: Mapping[str, Any], args: argparse.Namespace, body: Callable
) -> int:
    """``body(folder)`` in the results folder of ``out`` (resumed, or only committed when an
    earlier run left it complete): one line for a full disk, and, when a run stops, where its
    finished work is kept."""
    folder = None
    try:
        folder = ResultsFolder.prepare(out, identity, force=args.force, log=_indented)
        with folder:
            final = folder.commit() if folder.complete else body(folder)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        kept = _kept(folder, "free space and ")
        print(f"error: no space left on the device of {out.absolute().parent}; {kept}",
              file=sys.stderr)  # fmt: skip
        return EXIT_FAILURE
    except BaseException as exc:
        if folder is not None and not isinstance(exc, OutputError) and _has_work(folder):
            why = "interrupted" if isinstance(exc, KeyboardInterrupt) else "stopped by an error"
            print(f"\n{why}: {_kept(folder, '')}", file=sys.stderr, flush=True)
        raise
    print(f"results: {final}")
    return EXIT_OK


def _indented(line: str) -> None:
    _say(f"  {line}")


def _has_work(folder: ResultsFolder) -> bool:
    return folder.partial.is_dir() and (folder.complete or folder.has_checkpoints())


def _kept(folder: ResultsFolder | None, first: str) -> str:
    """Where the finished work of a stopped run is, and how the same command goes on."""
    if folder is None or not folder.partial.is_dir():
        return f"{first}rerun the same command"
    if folder.complete:
        return (
            f"the complete results are kept in {folder.partial}: {first}rerun the same command "
            "to move them into place"
        )
    if folder.has_checkpoints():
        return (
            f"checkpoints kept in {folder.partial}: {first}rerun the same command to resume "
            "(after a change of code or config, --force recomputes)"
        )
    return f"{first}rerun the same command"


def _check_fits(needs: Resources | None, out: Path, allow_large: bool) -> None:
    """:class:`ConfigError` if ``needs`` exceed free memory or disk, unless ``allow_large``."""
    if needs is None:
        return
    existing = out.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    # What an interrupted run of this --out already wrote is needed no more.
    partial = partial_path(out.absolute())
    held = (
        sum(p.stat().st_size for p in partial.rglob("*") if p.is_file()) if partial.is_dir() else 0
    )
    over = [
        f"about {tables.byte_size(wanted)} of {what}, {tables.byte_size(free)} {where}"
        for what, wanted, free, where in (
            ("memory", needs.memory_bytes, available_memory_bytes(), "available"),
            (
                "disk",
                needs.disk_bytes - held,
                shutil.disk_usage(existing).free,
                f"free under {existing}",
            ),
        )
        if wanted > free
    ]
    if over and not allow_large:
        raise ConfigError(
            f"this run does not fit ({needs.size}): it needs {'; '.join(over)}; {needs.remedy}, "
            "or pass --allow-large to run it anyway"
        )


def _say(line: str) -> None:
    print(line, flush=True)


def _run(
    kind: Kind, config: Any, folder: ResultsFolder, args: argparse.Namespace, *, started: str
) -> Path:
    """``stabl-jax run`` of ``config`` in ``folder``: run, write, print the table."""
    assert folder.store is not None
    result = kind.run(
        config,
        checkpoints=folder.store,
        resumed=folder.resumed,
        progress=not args.no_progress,
        log=_say,
    )
    extra = {
        "command": ["stabl-jax", *args.argv],
        "resumed": None
        if folder.resumed is None
        else {"from": folder.resumed.source.name, "rounds_done": folder.resumed.progress},
    }
    final = write_results(result, folder, started=started, extra=extra)
    print(f"\n{kind.table(result)}\n")
    return final


def _rtol(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(
            f"--rtol takes a number >= 0 (0: bit for bit; 1e-6: float32 rounding), got {text!r}"
        )
    return value


def _add_compare_parser(sub: Any) -> None:
    cmp = sub.add_parser(
        "compare",
        help="say whether two results folders hold the same numbers (exit 0) or not (exit 1)",
        description="Compare two results folders of stabl-jax run: every value of summary.json "
        "but the run record (start time, command, code, versions, platform, device, CPU, "
        "timings) and every array of traces.npz. Exit 0 when all are equal, 1 when any "
        "differs or is in one folder only, 2 when a folder cannot be read.",
    )
    cmp.add_argument("a", metavar="A", help="a results folder (it holds summary.json)")
    cmp.add_argument("b", metavar="B", help="the results folder to compare it with")
    cmp.add_argument(
        "--rtol",
        type=_rtol,
        default=0.0,
        metavar="R",
        help="relative tolerance for floating-point values and float traces (default 0: bit "
        "for bit); integers such as the played arms are always compared exactly",
    )
    cmp.add_argument(
        "--all",
        action="store_true",
        help=f"list every difference (default: the first {compare.SHOWN} of each file)",
    )
    # 2, not 1, for a failure: 1 says that the folders differ.
    cmp.set_defaults(handler=_cmd_compare, failure_status=EXIT_USAGE, compiles=False)


def _cmd_compare(args: argparse.Namespace) -> int:
    try:
        result = compare.compare_folders(args.a, args.b, rtol=args.rtol)
    except (OSError, ValueError) as exc:  # not a results folder, not JSON, damaged traces
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    status = EXIT_OK if result.equal else EXIT_FAILURE
    try:
        for line in result.lines(shown=len(result.differences) if args.all else compare.SHOWN):
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:  # `stabl-jax compare A B | head`: the status still tells
        _stdout_to_devnull()
    return status


def _add_bench_parser(sub: Any) -> None:
    default = benchmark.BenchConfig()
    bench = sub.add_parser(
        "bench",
        help="time simulate against NumPy implementations (run-steps/s, ratios, memory)",
        description="Time stabl_jax.simulate for each learner, number of arms and number of "
        "runs, and in the same process a NumPy loop (one run) and a NumPy version vectorised "
        "over runs; print a Markdown table and write benchmark.json and benchmark.md.",
    )
    bench.add_argument("--quick", action="store_true", help="small sizes, seconds (a smoke test)")
    bench.add_argument(
        "--gpu",
        action="store_true",
        help="the accelerator benchmark: fixed rows of EXP3 and StABL (R = 1,024 to 131,072) on "
        "the fused kernel and the XLA path, no NumPy; needs a GPU (with --quick: the same rows "
        "at tiny sizes, on any device)",
    )
    bench.add_argument("--out", default=None, metavar="DIR", help="write benchmark.json/.md here")
    bench.add_argument("--learners", nargs="+", action=Distinct, default=None, metavar="NAME")
    bench.add_argument("--arms", nargs="+", type=int, action=Distinct, default=None, metavar="N")
    bench.add_argument("--runs", nargs="+", type=int, action=Distinct, default=None, metavar="R")
    bench.add_argument(
        "--repeats",
        type=int,
        default=None,
        help=f"timed calls per row (default {default.repeats}; with --gpu {benchmark.GPU_REPEATS})",
    )
    # --no-numpy, --no-validate and --bandwidth set BenchConfig's numpy, validate, bandwidth_gbs
    for name, what in (
        ("numpy", "time only simulate"),
        ("validate", "skip timing simulate(validate=True)"),
    ):
        bench.add_argument(f"--no-{name}", dest=name, action="store_const", const=False, help=what)
    bench.add_argument(
        "--bandwidth",
        dest="bandwidth_gbs",
        type=benchmark.bandwidth,
        default=None,
        metavar="GBS",
        help="device memory bandwidth in GB/s for the bound column (default: the vendor's "
        "peak for a known GPU; none on a CPU)",
    )
    bench.set_defaults(handler=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    if args.gpu:
        return _cmd_bench_gpu(args)
    config = benchmark.QUICK if args.quick else benchmark.BenchConfig()
    changes: dict[str, Any] = {
        name: tuple(value) if isinstance(value, list) else value
        for name in ("learners", "arms", "runs", "repeats", "numpy", "validate", "bandwidth_gbs")
        if (value := getattr(args, name)) is not None
    }
    config = dataclasses.replace(config, **changes)
    unknown = [name for name in config.learners if name not in LEARNERS]
    if unknown:
        raise ConfigError(f"--learners: unknown {unknown}; choose from {sorted(LEARNERS)}")
    for name, least in (("arms", 2), ("runs", 1), ("repeats", 1)):
        bad = [int(v) for v in np.atleast_1d(getattr(config, name)) if v < least]
        if bad:
            raise ConfigError(f"--{name} must be >= {least}, got {' '.join(map(str, bad))}")
    if args.out:
        benchmark.check_out(args.out)  # before minutes of timing, not after
    result = benchmark.run_benchmark(config, log=_say)
    result["command"] = ["stabl-jax", *args.argv]
    print(f"\n{benchmark.to_markdown(result)}", end="")
    if args.out:
        json_path, md_path = benchmark.write(result, args.out)
        print(f"\nwrote {json_path} and {md_path}")
    return EXIT_OK


def _cmd_bench_gpu(args: argparse.Namespace) -> int:
    """``stabl-jax bench --gpu``; ``benchmark.json`` is rewritten after every row."""
    fixed = [f"--{k.replace('_', '-')}" for k in ("learners", "arms", "runs") if getattr(args, k)]
    fixed += [f"--no-{k}" for k in ("numpy", "validate") if getattr(args, k) is not None]
    if fixed:
        raise ConfigError(f"--gpu times a fixed set of rows: drop {' '.join(fixed)}")
    repeats = benchmark.GPU_REPEATS if args.repeats is None else args.repeats
    if repeats < 1:
        raise ConfigError(f"--repeats must be >= 1, got {repeats}")
    if not benchmark.has_accelerator() and not args.quick:
        raise ConfigError(
            "no GPU: JAX sees only CPU devices, and --gpu times rows sized for an accelerator "
            "(R up to 131,072). Install a CUDA build of JAX (docs/gpu.md), or use --quick "
            "(the same rows at tiny sizes) / drop --gpu (the CPU benchmark)"
        )
    if args.out:
        benchmark.check_out(args.out)

    def save(result: dict[str, Any]) -> None:
        result["command"] = ["stabl-jax", *args.argv]
        if args.out:
            benchmark.write(result, args.out)

    result = benchmark.run_gpu_benchmark(repeats, args.bandwidth_gbs, args.quick, _say, save)
    if args.out:
        json_path = Path(args.out) / "benchmark.json"
        print(f"\nwrote {json_path} and {json_path.with_suffix('.md')}")
    return EXIT_OK if any("error" not in row for row in result["rows"]) else EXIT_FAILURE
