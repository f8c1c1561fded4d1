"""One results folder per experiment, written atomically; it knows no experiment kind.

The life of ``<out>`` (docs/reliability.md, "Interrupted runs")::

  nothing ──prepare──▶ <out>.partial (marked, locked) ──each chunk──▶ + checkpoint/
    ──write──▶ + results, manifest.json ──▶ + COMPLETE ──one rename──▶ <out> ──▶ - checkpoint/
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import os
import re
import shutil
import signal
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stabl_jax.experiment import files, tables
from stabl_jax.experiment.identity import (
    IDENTITY,
    ExperimentCheckpoints,
    describe_other,
    learner_folders,
)
from stabl_jax.experiment.outputs import MARKER, OutputError, is_marked, mark_folder

COMPLETE = "COMPLETE"
#: The folder of a partial results folder holding the chunk checkpoints of its learners.
CHECKPOINT_DIR = "checkpoint"
#: What a results folder holds besides its results (left out of its manifest).
_BOOKKEEPING = {MARKER, COMPLETE, files.MANIFEST, CHECKPOINT_DIR}
PARTIAL, OLD = ".partial", ".old"
_FS_IOC_GETFLAGS, _IMMUTABLE_OR_APPEND = 0x80086601, 0x10 | 0x20
#: Files of a results folder written before manifests existed (``--force`` replaces them).
_RESULT_FILES = re.compile(r"(summary\.json|results\.csv|traces\.npz|tuned\.toml|[\w.-]+\.png)")


def is_complete(path: str | Path) -> bool:
    """True when ``path`` is a finished results folder."""
    return (Path(path) / COMPLETE).is_file()


def partial_path(final: Path) -> Path:
    """The one partial folder of the output ``final``: ``<final>.partial``."""
    return final.with_name(final.name + PARTIAL)


def _lock(partial: Path) -> int:
    """A descriptor of ``partial``'s marker, ``flock``-ed (the OS drops a dead run's lock)."""
    fd = os.open(partial / MARKER, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise OutputError(
            f"another stabl-jax run is writing {partial.with_suffix('')} (it holds {partial}): "
            "wait for it to end, or give another --out"
        ) from None
    return fd


def _user_files(folder: Path) -> list[str]:
    """What ``folder`` holds that stabl_jax did not write (its manifest lists what it did)."""
    try:
        listed = files.manifest(folder)
    except files.DamagedFile:
        listed = {}
    return [
        p.name + "/" * p.is_dir()
        for p in sorted(folder.iterdir())
        if p.name not in _BOOKKEEPING
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


def _check_out(final: Path, force: bool) -> None:
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
    if theirs := final.is_dir() and is_marked(final) and _user_files(final):
        raise OutputError(
            f"output folder {final} holds files stabl-jax did not write ({', '.join(theirs)});"
            " --force replaces the whole folder, so move them out first or choose another --out"
        )
    _check_movable(final)


@dataclasses.dataclass
class Resumed:
    """What a run took over from its partial folder ``source``: ``{learner: rounds done}``."""

    source: Path
    progress: dict[str, int]


def _plan(partial: Path, store: ExperimentCheckpoints | None, force: bool) -> tuple[str, str, bool]:
    """``(action, line, rewrite)`` for ``partial``, moving and writing nothing: ``action`` is
    ``"new"``, ``"resume"``, ``"commit"`` (complete: only to be moved into place) or
    ``"discard"``; ``line`` says so; ``rewrite``: :data:`IDENTITY` is to be written again.

    Raises:
      OutputError: it is not stabl_jax's, a live run holds it, or it holds another run's
        checkpoints or complete results and ``force`` is false.
    """
    if not partial.exists() and not partial.is_symlink():
        return "new", "", False
    if is_marked(partial):
        os.close(_lock(partial))
    source, complete = partial / CHECKPOINT_DIR, is_complete(partial)
    # Ours too: a folder another run is creating (nothing in it yet but its marker's temp file).
    made = partial.is_dir() and all(p.name.startswith(f".{MARKER}") for p in partial.iterdir())
    if partial.is_symlink() or not partial.is_dir() or not (is_marked(partial) or complete
                                                           or source.is_dir() or made):  # fmt: skip
        raise OutputError(
            f"{partial} is not a partial folder of stabl-jax (no {MARKER} and unknown contents); "
            "it is left as it is: move it away, or give another --out"
        )
    same, rewrite = (False, False) if store is None else store.recognised()
    if same:
        note = f" ({IDENTITY} was missing or damaged; the checkpoints carry this experiment's "
        note = (note + "fingerprint, so it is written again)") * rewrite
        if complete:
            what = "the complete results of this experiment, moved into place (nothing recomputed)"
            return "commit", f"{partial.name}: {what}{note}", rewrite
        return "resume", f"{partial.name}: checkpoints of this experiment, resumed{note}", rewrite
    other = describe_other(source, None if store is None else store.identity)
    if complete:
        other = "the complete results of another run", "rerun its own command to move them"
    if other is None:
        return (
            "discard",
            f"{partial.name}: an interrupted run with no finished chunk, reused",
            False,
        )
    what, remedy = other
    if not force:
        raise OutputError(f"{partial} holds {what}; {remedy}, or pass --force to recompute")
    return "discard", f"{partial.name}: {what}; discarded (--force)", False


def _store(final: Path, identity: Mapping[str, Any] | None) -> ExperimentCheckpoints | None:
    if identity is None:
        return None
    return ExperimentCheckpoints(partial_path(final) / CHECKPOINT_DIR, identity, create=False)


class ResultsFolder:
    """A results folder under construction: write into :attr:`partial`, then :meth:`commit`.

    Example:
      >>> import tempfile, pathlib
      >>> out = pathlib.Path(tempfile.mkdtemp()) / "demo"
      >>> with ResultsFolder.prepare(out) as folder:
      ...     _ = (folder.partial / "note.txt").write_text("hello")
      ...     final = folder.commit()
      >>> sorted(p.name for p in final.iterdir())
      ['.stabl_jax_results', 'COMPLETE', 'manifest.json', 'note.txt']
    """

    def __init__(self, final: Path, force: bool, lock: int, store: ExperimentCheckpoints | None):
        self.final, self.partial, self.force = final, partial_path(final), force
        self.committed = False
        self._lock: int | None = lock
        #: The run's one checkpoint store (``None`` without an experiment identity).
        self.store = store
        self.resumed: Resumed | None = None

    @staticmethod
    def check(out: str | Path, *, force: bool = False) -> Path:
        """The absolute path ``out``, when the results may be moved onto it (else
        :class:`OutputError`); writes nothing."""
        if not str(out).strip():
            raise OutputError("--out is empty; give a folder name")
        final = Path(out).expanduser().absolute()
        _check_out(final, force)
        return final

    @staticmethod
    def preview(
        out: str | Path, identity: Mapping[str, Any] | None, *, force: bool = False
    ) -> tuple[list[str], Resumed | None]:
        """The lines :meth:`prepare` would log and what it would resume (raising as it does);
        moves, removes and writes nothing."""
        final = ResultsFolder.check(out, force=force)
        store = _store(final, identity)
        action, line, _ = _plan(partial_path(final), store, force)
        lines = [line] if line else []
        if action != "resume" or store is None:
            return lines, None
        done = store.verify(discard_damaged=force, log=lines.append)
        return lines, Resumed(partial_path(final), done)

    @classmethod
    def prepare(
        cls,
        out: str | Path,
        identity: Mapping[str, Any] | None = None,
        *,
        force: bool = False,
        log: Callable[[str], None] = lambda _: None,
    ) -> ResultsFolder:
        """:meth:`check` ``out``, then take ``<out>.partial`` (created, resumed, or complete
        and only to be committed), with one checkpoint store for ``identity`` (``None``: none).

        Raises:
          OutputError: as :meth:`check`, or the partial folder cannot be taken.
          CheckpointMismatch: a checkpoint to resume is damaged and ``force`` is false.
        """
        final = cls.check(out, force=force)
        partial, store = partial_path(final), _store(final, identity)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            action, line, rewrite = _plan(partial, store, force)
            if line:
                log(line)
            if action == "discard":
                shutil.rmtree(partial)
            mark_folder(partial)
            lock = _lock(partial)
        except OSError as exc:
            raise OutputError(f"output location {final.parent} is not writable: {exc}") from None
        folder = cls(final, force, lock, store)
        try:
            if store is not None:
                store.create(rewrite=rewrite)
                if action == "resume":
                    folder.resumed = Resumed(partial, store.verify(discard_damaged=force, log=log))
        except BaseException:
            folder.__exit__(None, None, None)
            raise
        return folder

    @property
    def checkpoint_dir(self) -> Path:
        return self.partial / CHECKPOINT_DIR

    @property
    def complete(self) -> bool:
        """Whether the partial folder holds complete results (only to be committed)."""
        return is_complete(self.partial)

    def has_checkpoints(self) -> bool:
        """Whether the partial folder holds chunk checkpoints worth resuming."""
        return bool(learner_folders(self.checkpoint_dir))

    def write(
        self, summary: Mapping[str, Any], arrays: Mapping[str, np.ndarray], draw: Callable
    ) -> Path:
        """Write ``summary.json``, ``results.csv``, ``traces.npz``, plots; then :meth:`commit`."""
        files.write_json(self.partial / tables.SUMMARY, summary, allow_nan=False)
        tables.write_csv(tables.summary_rows(summary), self.partial / tables.CSV_NAME)
        # Uncompressed, far faster to write (numpy's stub also types **arrays as allow_pickle)
        np.savez(self.partial / tables.TRACES, **arrays)  # type: ignore[arg-type]
        draw(self.partial)
        return self.commit()

    def commit(self) -> Path:
        """Write the manifest and ``COMPLETE``, rename onto ``<out>``, then drop the checkpoints
        (:class:`OutputError` where ``<out>`` cannot be replaced: the results stay complete)."""
        if not self.complete:
            written = [
                str(p.relative_to(self.partial))
                for p in self.partial.rglob("*")
                if p.is_file() and p.parts[len(self.partial.parts)] not in _BOOKKEEPING
            ]
            files.write_manifest(self.partial, written)
            files.fsync_tree(self.partial, skip=CHECKPOINT_DIR)
            now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            files.write_text(self.partial / COMPLETE, now + "\n")
        final, old = self.final, self.final.with_name(self.final.name + OLD)
        kept = (
            f"; this run's complete results are kept in {self.partial}: once that is fixed, "
            "the same command moves them into place without recomputing"
        )
        try:
            _check_out(final, self.force)
        except OutputError as exc:
            raise OutputError(f"{exc}{kept}") from None
        try:
            with _signals_deferred():
                if is_marked(old):  # left by a stop between these renames
                    shutil.rmtree(old)
                if final.exists() and is_marked(final):
                    os.replace(final, old)
                try:
                    os.replace(self.partial, final)
                except OSError:
                    if is_marked(old) and not final.exists():
                        os.replace(old, final)
                    raise
        except OSError as exc:
            raise OutputError(f"cannot move the results onto {final} ({exc}){kept}") from None
        files.fsync_dir(final.parent)
        if is_marked(old):
            shutil.rmtree(old)
        shutil.rmtree(final / CHECKPOINT_DIR, ignore_errors=True)
        self.committed = True
        self.__exit__(None, None, None)
        return final

    def __enter__(self) -> ResultsFolder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Removed only when it holds nothing to resume and nothing complete.
        if not self.committed and not self.complete and not self.has_checkpoints():
            shutil.rmtree(self.partial, ignore_errors=True)
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back until the end (no handler between a commit's renames); a
    no-op off the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
