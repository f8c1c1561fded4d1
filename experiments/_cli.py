"""The command-line checks the scripts of ``experiments/`` share (imported as ``_cli``: a
script's folder is first on ``sys.path`` when Python runs it)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from stabl_jax.experiment import checkpoints


def need_runs(
    source: str | Path,
    runs: int,
    least: int = 2,
    what: str = "a 95% t interval",
    flag: str = "--runs",
) -> None:
    """``ValueError`` unless ``source`` (a results folder, or a sweep's ``summary.json``) has
    ``runs >= least``, since a table or figure of intervals over fewer runs shows every one
    of them as ``nan``; ``flag`` is the option that sets the runs when ``source`` is made
    again (the folder check that goes with ``stabl_jax.experiment.results.interval_runs``)."""
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
    """A file written after the work (a script's ``--json FILE``), checked before it: its
    folder exists and is writable, and ``path`` is not a folder. An argparse ``type=``, so
    a mistyped folder stops the script at once (exit 2), not after the work; it returns
    ``path`` as given (a string, as the scripts record their arguments in JSON). The scripts
    use it through :func:`json_output`, which also checks a file already at ``path``.

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
    """An argparse ``type=`` for the JSON file a script writes after its work (``--json
    FILE``): :func:`output_file`'s checks, and a file already there is replaced only when it
    is that script's previous output, a JSON object with every one of ``keys`` (and one of
    ``one_of``, when given). Any other file (a user's notes, a config, another tool's JSON)
    stops the script at once, exit 2, and is left as it is.

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
