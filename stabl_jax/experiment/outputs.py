"""Paths stabl_jax may write or replace: the marker of every folder it makes, and the checks,
before any work, that an output is absent or its own (:class:`OutputError` otherwise).

The results folders of ``stabl-jax run`` (:mod:`.results`), ``stabl-jax bench``'s files and
the figures and reports of the ``experiments/`` scripts go through these checks.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import re
import stat
import sys
from collections.abc import Collection, Iterable
from pathlib import Path

from stabl_jax.experiment import files

#: The file stabl_jax writes into every folder it creates (format, time): the only folders it
#: ever replaces or deletes are those holding it.
MARKER = ".stabl_jax_results"
MARKER_FORMAT = "stabl_jax.results-folder/1"
#: The file of a finished results folder, written last.
COMPLETE = "COMPLETE"
_FS_IOC_GETFLAGS, _IMMUTABLE_OR_APPEND = 0x80086601, 0x10 | 0x20
#: Files of a results folder written before manifests existed (``--force`` replaces them).
_RESULT_FILES = re.compile(r"(summary\.json|results\.csv|traces\.npz|tuned\.toml|[\w.-]+\.png)")


class OutputError(Exception):
    """The output folder cannot be used (exists, not writable, not a results folder)."""


def is_marked(folder: str | Path) -> bool:
    """True when ``folder`` holds stabl_jax's :data:`MARKER` (its files may be replaced); a
    symbolic link, or a marker that is one, never does."""
    folder = Path(folder)
    path = folder / MARKER
    if folder.is_symlink() or path.is_symlink():
        return False
    found = files.read_json(path)
    return found is not None and found.get("format") == MARKER_FORMAT


def mark_folder(folder: str | Path) -> Path:
    """Create ``folder`` if needed and mark it as stabl_jax's (:data:`MARKER`); returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if not is_marked(folder):
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        files.write_json(folder / MARKER, {"format": MARKER_FORMAT, "created": stamp})
    return folder


def owned_files(
    folder: str | os.PathLike, record: str, others: tuple[str, ...], keys: frozenset[str], tool: str
) -> tuple[Path, ...]:
    """Paths of ``record`` (JSON) and ``others`` in ``folder``, each absent or ``tool``'s
    (``record`` a JSON object with every one of ``keys``).

    Raises:
      OutputError: ``folder`` is a file, or one of the files is not ``tool``'s.
    """
    data = files.read_json(Path(folder) / record)
    return only_ours(
        folder,
        (record, *others),
        data is not None and keys <= data.keys(),
        where=f"--out {folder}",
        what=f"the {tool} files",
        owner=f"a previous {tool} file (no {record} of {tool} beside it)",
        remedy="give --out another folder, or move the file",
    )


def writable_folder(folder: str | os.PathLike, where: str, what: str) -> Path:
    """``folder``, checked before the work to be a folder or creatable; ``what`` goes into it.

    Raises:
      OutputError: ``folder`` (or the nearest existing path above it) is a file or not writable.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{where} is a file: give a folder for {what}")
    above = folder
    while not above.exists() and not above.is_symlink() and above.parent != above:
        above = above.parent
    if above.is_symlink() and not above.exists():
        raise OutputError(
            f"{where}: {above} is a symbolic link to nothing, so {folder} cannot be made: "
            f"give a folder for {what}"
        )
    if not above.is_dir():
        raise OutputError(
            f"{where}: {above} is a file, so {folder} cannot be made: give a folder for {what}"
        )
    if not os.access(above, os.W_OK):
        raise OutputError(f"{where}: cannot write into {above}: give a folder for {what}")
    return folder


def only_ours(
    folder: str | os.PathLike,
    names: Iterable[str],
    ours: bool,
    *,
    where: str,
    what: str,
    owner: str,
    remedy: str,
) -> tuple[Path, ...]:
    """Paths of ``names`` in ``folder``, each absent or ``ours``; checked before the work.

    Raises:
      OutputError: ``folder`` is not writable, or a file of ``names`` is not ours.
    """
    folder = writable_folder(folder, where, what)
    paths = tuple(folder / name for name in names)
    for path in paths:
        if path.exists() and not ours:
            raise OutputError(
                f"{path} is there and is not {owner}, so it is left as it is: {remedy}"
            )
    return paths


def figure_paths(
    folder: str | os.PathLike, names: Iterable[str], tool: str, overwrite: bool = False
) -> tuple[Path, ...]:
    """Paths of figures ``names`` in ``folder``: each absent, the folder marked, or ``overwrite``.

    Raises:
      OutputError: ``folder`` is a file, or a figure exists in a folder that is not stabl_jax's.
    """
    return only_ours(
        folder,
        names,
        overwrite or is_marked(Path(folder)),
        where=str(folder),
        what=f"the {tool} figures",
        owner=f"in a folder stabl_jax made (one holding {MARKER})",
        remedy=f"give {tool} another folder, move the file, or pass --overwrite to replace it",
    )


def is_complete(path: str | Path) -> bool:
    """True when ``path`` is a finished results folder."""
    return (Path(path) / COMPLETE).is_file()


def _user_files(folder: Path, bookkeeping: Collection[str]) -> list[str]:
    """What ``folder`` holds that stabl_jax did not write (its manifest lists what it did,
    ``bookkeeping`` what is never listed)."""
    try:
        listed = files.manifest(folder)
    except files.DamagedFile:
        listed = {}
    return [
        p.name + "/" * p.is_dir()
        for p in sorted(folder.iterdir())
        if p.name not in bookkeeping
        and not (
            _RESULT_FILES.fullmatch(p.name)
            if listed is None
            else p.name in listed or any(k.startswith(f"{p.name}/") for k in listed)
        )
    ]


def _inode_flags(path: Path) -> int:
    """Linux's inode flags of ``path`` (``chattr``); 0 where they cannot be read."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            return int.from_bytes(fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))[:4], sys.byteorder)
        finally:
            os.close(fd)
    return 0


def _check_movable(final: Path) -> None:
    parent = final.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    here = [final] if final.exists() else []
    problem = None
    if not parent.is_dir():
        problem = f"lies under {parent}, which is a file"
    elif here and os.path.ismount(final):
        problem = "is a mount point"
    elif any(_inode_flags(path) & _IMMUTABLE_OR_APPEND for path in [*here, parent]):
        problem = "or the folder holding it is immutable or append-only (chattr +i / +a)"
    elif not os.access(parent, os.W_OK):
        problem = f"lies in {parent}, which is read-only to this user"
    elif here and os.geteuid() != 0 and parent.stat().st_mode & stat.S_ISVTX:
        owners = {final.stat().st_uid, parent.stat().st_uid}
        problem = None if os.geteuid() in owners else "belongs to another user in a sticky folder"
    if problem is not None:
        raise OutputError(
            f"--out {final} cannot be replaced: it {problem}, and stabl-jax moves the finished "
            f"results onto --out in one rename; give a folder inside it (--out {final}/results) "
            "or another path"
        )


def check_replaceable(final: Path, force: bool, bookkeeping: Collection[str]) -> None:
    """:class:`OutputError` unless ``final`` is absent, an empty folder, or (``force``) a results
    folder holding only what stabl_jax wrote, and a folder can be renamed onto it."""
    if final.is_symlink():
        raise OutputError(
            f"output path {final} is a symbolic link (to {os.readlink(final)}), which is left "
            "as it is: give --out the folder it points to, or another path"
        )
    if final.exists() and not final.is_dir():
        raise OutputError(f"output path {final} exists and is not a folder")
    if final.exists() and not is_marked(final) and any(final.iterdir()):
        raise OutputError(
            f"output folder {final} exists and is not a stabl_jax results folder (it has no "
            f"{MARKER} file); it is never replaced or deleted, even with --force: "
            "choose another --out"
        )
    if final.exists() and is_marked(final) and not force:
        what = "a complete result" if is_complete(final) else "an unfinished stabl_jax result"
        raise OutputError(
            f"output folder {final} already holds {what}; "
            "pass --force to replace it or choose another --out"
        )
    if theirs := final.is_dir() and is_marked(final) and _user_files(final, bookkeeping):
        raise OutputError(
            f"output folder {final} holds files stabl-jax did not write ({', '.join(theirs)});"
            " --force replaces the whole folder, so move them out first or choose another --out"
        )
    _check_movable(final)
