"""The command-line checks the scripts of ``experiments/`` share (imported as ``_cli``: a
script's folder is first on ``sys.path`` when Python runs it)."""

from __future__ import annotations

import argparse
import os
import runpy
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stabl_jax.experiment import checkpoints
from stabl_jax.experiment.results import OutputError, Parser, figure_paths


def need_runs(
    source: str | Path,
    runs: int,
    least: int = 2,
    what: str = "a 95% t interval",
    flag: str = "--runs",
) -> None:
    """``ValueError`` unless ``source`` (a results folder, or a sweep's ``summary.json``) has
    ``runs >= least`` (an interval over fewer runs is ``nan``); ``flag`` sets the runs."""
    if runs < least:
        raise ValueError(
            f"{source} has {runs} run(s), and {what} needs {least} or more: rerun it with "
            f"{flag} {least} or more"
        )


def unpaired(summary: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """The keys among ``seed``, ``runs``, ``horizon`` and ``env`` on which two results folders'
    ``summary.json`` differ: learners of the two are paired run by run (the same environment
    draws) only when there are none and their change points agree too."""
    return [k for k in ("seed", "runs", "horizon", "env") if summary.get(k) != other.get(k)]


def output_file(path: str) -> str:
    """An argparse ``type=`` for a file written after the work, checked before it: its folder
    exists and is writable, and ``path`` is not a folder; returns ``path`` as given.

    Raises:
      argparse.ArgumentTypeError: naming the path and what to do.
    """
    file = Path(path)
    if file.is_dir():
        raise argparse.ArgumentTypeError(f"{file} is a folder: name a file in it")
    if not file.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"the folder {file.parent} of {file} does not exist: create it first"
        )
    if not os.access(file.parent, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write into {file.parent}")
    return path


def json_output(keys: Iterable[str], *, one_of: Iterable[str] = ()) -> Callable[[str], str]:
    """An argparse ``type=`` for a script's JSON output: :func:`output_file`'s checks, and a
    file already there is replaced only when it is a JSON object with every one of ``keys``
    (and one of ``one_of``, when given): a previous output. Any other file stops the script.

    Raises (from the returned function):
      argparse.ArgumentTypeError: naming the path and what to do.
    """
    keys, one_of = frozenset(keys), frozenset(one_of)
    wanted = ", ".join(sorted(keys)) + (
        f" and one of {', '.join(sorted(one_of))}" if one_of else ""
    )

    def check(path: str) -> str:
        file = Path(output_file(path))
        if file.exists() or file.is_symlink():
            data = checkpoints.read_json(file)
            if data is None or not keys <= data.keys() or (one_of and not one_of & data.keys()):
                raise argparse.ArgumentTypeError(
                    f"{file} is there and is not a previous output of this script (a JSON "
                    f"object with {wanted}): name another file, or move it"
                )
        return path

    return check


def md_table(head: Sequence[str], rows: Iterable[Sequence[Any] | str], title: str = "") -> str:
    """A Markdown table: ``head``, its rule, one line per row (a string row as it is), under
    ``title`` and a blank line when given."""
    lines = [title, ""] if title else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += [r if isinstance(r, str) else "| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def script(name: str) -> dict[str, Any]:
    """The globals of the script ``experiments/NAME.py`` (its tables and loaders)."""
    return runpy.run_path(str(Path(__file__).with_name(f"{name}.py")))


def check_figures(
    parser: Parser, out: Path | str, names: list[str], flag: str, force: bool
) -> None:
    """Exit 2 (``parser.error``) before any figure is drawn if a PNG of ``names`` in ``out``
    is a user's (not written by stabl_jax) and ``force`` is off."""
    try:
        figure_paths(out, names, flag, force)
    except (OutputError, ValueError) as exc:
        parser.error(str(exc))


def add_overwrite(parser: Parser, where: str = "OUT_DIR") -> None:
    """The ``--overwrite`` flag of the scripts that draw figures."""
    parser.add_argument(
        "--overwrite", action="store_true", help=f"replace PNGs in {where} stabl_jax did not write"
    )
