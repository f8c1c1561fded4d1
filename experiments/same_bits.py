"""Do two versions of the code give the same numbers? Shipped configs run by both, compared.

    python experiments/same_bits.py --base REV                 # a commit, branch or tag
    python experiments/same_bits.py --base-source DIR          # another checkout
    python experiments/same_bits.py --base REV --only figure1 bco_d2
    python experiments/same_bits.py --base REV --config my.toml --set runs=4

Each run of :data:`RUNS` is made in fresh processes, compilation cache off, with the base code
on ``PYTHONPATH`` (a ``git worktree`` of REV, or DIR) and its config (``--config FILE``: FILE
for both), then this checkout's, and compared as ``stabl-jax compare`` does. Exit 0: all the
same; 1: any differs (printed); 2: the base or a run fails. ``--keep DIR`` keeps the folders.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from stabl_jax.experiment import compare
from stabl_jax.experiment.arguments import Distinct, Parser

REPO = Path(__file__).resolve().parents[1]
_ALL = ["--set", 'save_traces="all"']  # every (R, T) trace of a bandit run
#: ``config name: arguments``: the shipped runs compared.
RUNS: dict[str, list[str]] = {
    "figure1": ["--runs", "4", *_ALL],
    "expert_advice_equal_tuned": ["--runs", "4", *_ALL],
    "study_geometric": ["--runs", "16", *_ALL],
    "bco_d2": ["--runs", "2"],
    "hpo_bbob_sphere": "--runs 2 --set bbob.dims=[32] --set bbob.evaluations=[1000]".split(),
    "hpo_bbob_suite": ["--runs", "1", "--set", "bbob.functions=[1, 8, 15]"],
}


class RunFailed(Exception):
    """A run, or the base code, could not be had; the message says which and why."""


@contextlib.contextmanager
def worktree(rev: str, parent: Path) -> Iterator[Path]:
    """A detached ``git worktree`` of ``rev`` under ``parent``, removed when the block ends."""

    def git(*words: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(REPO), *words], capture_output=True, text=True)

    try:
        commit = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        commit.check_returncode()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RunFailed(f"--base {rev}: not a commit of {REPO} ({exc})") from None
    folder = parent / f"base-{commit.stdout.strip()[:12]}"
    add = git("worktree", "add", "--detach", "--quiet", str(folder), commit.stdout.strip())
    if add.returncode != 0:
        raise RunFailed(f"--base {rev}: git worktree add failed: {add.stderr.strip()}")
    try:
        yield folder
    finally:
        git("worktree", "remove", "--force", str(folder))


def check_source(source: Path) -> None:
    """``source`` is a checkout whose ``stabl_jax`` a fresh process imports (not a shadow)."""
    if not (source / "stabl_jax" / "__init__.py").is_file():
        raise RunFailed(f"{source}: no stabl_jax package in it; give a checkout of the project")
    proc = subprocess.run(
        [sys.executable, "-c", "import stabl_jax; print(stabl_jax.__file__)"],
        env={**os.environ, "PYTHONPATH": str(source)},
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        check=False,
    )
    imported = Path(proc.stdout.strip()).resolve().parent if proc.returncode == 0 else None
    if imported != (source / "stabl_jax").resolve():
        raise RunFailed(
            f"{source}: a fresh process imports stabl_jax from {imported} instead "
            f"({proc.stderr.strip()[-300:]})"
        )


def run_one(source: Path, config: Path, arguments: Sequence[str], out: Path) -> None:
    """``stabl-jax run config`` with ``source``'s code into ``out``, or :class:`RunFailed`."""
    command = [sys.executable, "-m", "stabl_jax", "--compile-cache", "off", "run", str(config)]
    command += ["--no-progress", "--out", str(out), *arguments]
    env = {**os.environ, "PYTHONPATH": str(source)}
    proc = subprocess.run(command, env=env, capture_output=True, text=True, cwd=out.parent)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise RunFailed(
            f"{config.name} with the code of {source} exited {proc.returncode}:\n{tail}"
        )


def compare_runs(
    base: Path, runs: dict[str, tuple[Path | None, list[str]]], folder: Path
) -> list[tuple[str, compare.Comparison]]:
    """Every run with ``base``'s code and this checkout's, compared; a config ``None``: each
    code's own ``configs/NAME.toml``."""
    results = []
    for name, (given, arguments) in runs.items():
        outs = []
        for source, side in ((base, "base"), (REPO, "this")):
            config = given or source / "configs" / f"{name}.toml"
            (folder / side).mkdir(exist_ok=True)
            run_one(source, config, arguments, folder / side / name)
            outs.append(folder / side / name)
        results.append((name, compare.compare_folders(*outs)))
        print(_row(name, results[-1][1]), flush=True)
    return results


def _row(name: str, result: compare.Comparison) -> str:
    verdict = "same" if result.equal else f"{len(result.differences)} differences"
    return f"| {name} | {result.numbers:,} | {result.fields:,} | {result.arrays:,} | {verdict} |"


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    base = parser.add_mutually_exclusive_group(required=True)
    base.add_argument("--base", metavar="REV", help="a commit, branch or tag of this repository")
    base.add_argument("--base-source", type=Path, metavar="DIR", help="another checkout")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--only", nargs="+", action=Distinct, metavar="NAME", help=", ".join(RUNS))
    chosen.add_argument("--config", type=Path, help="one run of this config file instead")
    parser.add_argument(
        "--set", action="append", default=[], dest="overrides", help="--config's overrides"
    )
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep the results folders here")
    args = parser.parse_args(argv)
    if args.overrides and args.config is None:
        parser.error("--set goes with --config (the shipped runs have their own overrides)")
    if args.config is not None and not args.config.is_file():
        parser.error(f"--config {args.config}: no such file")
    unknown = sorted(set(args.only or ()) - set(RUNS))
    if unknown:
        parser.error(f"--only: unknown {unknown}; choose from {', '.join(RUNS)}")
    runs: dict[str, tuple[Path | None, list[str]]]
    if args.config is not None:
        sets = [a for o in args.overrides for a in ("--set", o)]
        runs = {args.config.stem: (args.config.resolve(), sets)}
    else:
        runs = {name: (None, RUNS[name]) for name in (args.only or RUNS)}
    if args.keep is not None:
        if args.keep.exists() and any(args.keep.iterdir()):
            parser.error(f"--keep {args.keep}: not empty; give a new or empty folder")
        args.keep.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="same_bits-")))
        folder = args.keep.resolve() if args.keep is not None else scratch
        try:
            if args.base is not None:
                source = stack.enter_context(worktree(args.base, scratch))
            else:
                source = args.base_source.resolve()
            for checkout in (source, REPO):
                check_source(checkout)
            print(f"base: {args.base or source}; this: {REPO}")
            print("| run | numbers | other values | arrays | |")
            print("|---|---|---|---|---|")
            results = compare_runs(source, runs, folder)
        except RunFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    for name, result in results:
        if not result.equal:
            print(f"\n{name}:")
            print("\n".join(result.lines()))
    return 0 if all(result.equal for _, result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
