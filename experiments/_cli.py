"""The command-line checks of the ``experiments/`` scripts (``import _cli``: their folder)."""

from __future__ import annotations

import argparse
import os
import runpy
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stabl_jax.experiment import files
from stabl_jax.experiment.arguments import Parser
from stabl_jax.experiment.outputs import OutputError, figure_paths


def need_runs(
    source: str | Path,
    runs: int,
    least: int = 2,
    what: str = "a 95% t interval",
    flag: str = "--runs",
) -> None:
    """``ValueError`` unless ``source`` has ``runs >= least`` (fewer give a ``nan`` interval)."""
    if runs < least:
        raise ValueError(
            f"{source} has {runs} run(s), and {what} needs {least} or more: rerun it with "
            f"{flag} {least} or more"
        )


def unpaired(summary: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """The keys of ``seed``, ``runs``, ``horizon``, ``env`` two ``summary.json`` differ on: their
    learners are paired (the same draws) only with none and equal change points."""
    return [k for k in ("seed", "runs", "horizon", "env") if summary.get(k) != other.get(k)]


def output_file(path: str) -> str:
    """An argparse ``type=`` for a file written after the work: not a folder, its folder
    writable (else ``ArgumentTypeError``)."""
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
    """:func:`output_file` for a JSON output; a file there is replaced only if it is a JSON
    object with all of ``keys`` (and one of ``one_of``): a previous output."""
    keys, one_of = frozenset(keys), frozenset(one_of)
    wanted = ", ".join(sorted(keys)) + (
        f" and one of {', '.join(sorted(one_of))}" if one_of else ""
    )

    def check(path: str) -> str:
        file = Path(output_file(path))
        if file.exists() or file.is_symlink():
            data = files.read_json(file)
            if data is None or not keys <= data.keys() or (one_of and not one_of & data.keys()):
                raise argparse.ArgumentTypeError(
                    f"{file} is there and is not a previous output of this script (a JSON "
                    f"object with {wanted}): name another file, or move it"
                )
        return path

    return check


def md_table(head: Sequence[str], rows: Iterable[Sequence[Any] | str], title: str = "") -> str:
    """A Markdown table (a string row as it is), under ``title`` and a blank line if given."""
    lines = [title, ""] if title else []
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += [r if isinstance(r, str) else "| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines)


def with_sign(value: float) -> str:
    """``+1.5`` / ``−1.5`` (a minus sign, as the documents print it)."""
    return f"{value:+.1f}".replace("-", "\u2212")


def script(name: str) -> dict[str, Any]:
    """The globals of the script ``experiments/NAME.py`` (its tables and loaders)."""
    return runpy.run_path(str(Path(__file__).with_name(f"{name}.py")))


def check_figures(
    parser: Parser, out: Path | str, names: list[str], flag: str, force: bool
) -> None:
    """``parser.error`` if a PNG of ``names`` in ``out`` is a user's and ``force`` is off."""
    try:
        figure_paths(out, names, flag, force)
    except (OutputError, ValueError) as exc:
        parser.error(str(exc))


def add_overwrite(parser: Parser, where: str = "OUT_DIR") -> None:
    """The ``--overwrite`` flag of the scripts that draw figures."""
    parser.add_argument(
        "--overwrite", action="store_true", help=f"replace PNGs in {where} stabl_jax did not write"
    )
