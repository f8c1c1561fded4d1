"""One results folder per experiment, written atomically; it knows no experiment kind."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
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
    matches,
    verify_learners,
)
from stabl_jax.experiment.outputs import MARKER, OutputError, is_marked, mark_folder

COMPLETE = "COMPLETE"

#: The folder of a partial results folder holding the chunk checkpoints of its learners.
CHECKPOINT_DIR = "checkpoint"
#: What a results folder holds besides its results (left out of its manifest).
_BOOKKEEPING = {MARKER, COMPLETE, files.MANIFEST, CHECKPOINT_DIR}


# --- The lifecycle ----------------------------------------------------------------------------
#
#   nothing ──prepare──▶ <out>.partial (marked, locked) ──each chunk──▶ + checkpoint/
#     ──write──▶ + results, manifest.json ──▶ + COMPLETE ──one rename──▶ <out> ──▶ - checkpoint/
#
# A stop anywhere leaves either <out> or <out>.partial; the same command resumes the partial
# folder from its checkpoints, or moves a complete one into place without recomputing.

PARTIAL = ".partial"
OLD = ".old"
_FS_IOC_GETFLAGS, _IMMUTABLE_OR_APPEND = 0x80086601, 0x10 | 0x20
#: Files of a results folder written before manifests existed (``--force`` replaces them).
_RESULT_FILES = re.compile(r"(summary\.json|results\.csv|traces\.npz|tuned\.toml|[\w.-]+\.png)")


def is_complete(path: str | Path) -> bool:
    """True when ``path`` is a finished results folder (it holds ``COMPLETE``)."""
    return (Path(path) / COMPLETE).is_file()


def partial_path(final: Path) -> Path:
    """The one partial folder of the output ``final``: ``<final>.partial``."""
    return final.with_name(final.name + PARTIAL)


def _lock(folder: Path) -> int | None:
    """An open descriptor of ``folder``'s marker, locked (``flock``), or ``None`` when a live
    process holds the lock (the OS drops a dead process's lock, whatever its pid)."""
    fd = os.open(folder / MARKER, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _user_files(folder: Path) -> list[str]:
    """What ``folder`` holds that stabl_jax did not write (its manifest lists what it did)."""
    try:
        listed = files.manifest(folder)
    except files.DamagedFile:
        listed = {}
    found = []
    for path in sorted(folder.iterdir()):
        name = path.name
        if listed is not None:
            written = name in listed or any(k.startswith(f"{name}/") for k in listed)
        else:
            written = bool(_RESULT_FILES.fullmatch(name))
        if name in _BOOKKEEPING or written:
            continue
        found.append(name + "/" * path.is_dir())
    return found


def _inode_flags(path: Path) -> int:
    """Linux's inode flags of ``path`` (``chattr``); 0 where they cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return 0
    try:
        return int.from_bytes(fcntl.ioctl(fd, _FS_IOC_GETFLAGS, bytes(8))[:4], sys.byteorder)
    except OSError:
        return 0
    finally:
        os.close(fd)


def _check_movable(final: Path) -> None:
    """:class:`OutputError` where a folder could not be renamed onto ``final`` at the end."""
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
    """:class:`OutputError` unless the results may be moved onto ``final`` (absent; an empty
    folder; with ``force``, a results folder holding only what stabl_jax wrote)."""
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
    if final.exists() and is_marked(final):
        if not force:
            what = "a complete result" if is_complete(final) else "an unfinished stabl_jax result"
            raise OutputError(
                f"output folder {final} already holds {what}; "
                "pass --force to replace it or choose another --out"
            )
        theirs = _user_files(final)
        if theirs:
            raise OutputError(
                f"output folder {final} holds files stabl-jax did not write ({', '.join(theirs)});"
                " --force replaces the whole folder, so move them out first or choose another --out"
            )
    _check_movable(final)


@dataclasses.dataclass
class Resumed:
    """What a run took over from its partial folder ``source``: ``progress``, ``{learner:
    rounds already done}``."""

    source: Path
    progress: dict[str, int]


@dataclasses.dataclass
class _Plan:
    """What :meth:`ResultsFolder.prepare` does with ``<out>.partial``: ``action`` one of
    ``"new"``, ``"resume"``, ``"commit"`` (complete: move into place), ``"restart"`` (discard
    its checkpoints, ``--force``) or ``"set_aside"`` (another run's complete results,
    ``--force``); ``line`` says so (empty when there was no partial folder)."""

    action: str
    line: str = ""
    rewrite_identity: bool = False


def _plan(partial: Path, identity: Mapping[str, Any] | None, force: bool) -> _Plan:
    """Decide what to do with ``partial``, moving and writing nothing.

    Raises:
      OutputError: it is not stabl_jax's, a live run holds it, or it holds another
        experiment's checkpoints or complete results and ``force`` is false.
    """
    if not partial.exists() and not partial.is_symlink():
        return _Plan("new")
    if is_marked(partial):
        lock = _lock(partial)
        if lock is None:
            raise OutputError(
                f"another stabl-jax run is writing {partial.with_suffix('')} (it holds "
                f"{partial}): wait for it to end, or give another --out"
            )
        os.close(lock)
    source = partial / CHECKPOINT_DIR
    # Ours too: a folder another run is creating (nothing in it yet but its marker's temp file).
    made = (
        all(p.name.startswith(f".{MARKER}") for p in partial.iterdir())
        if partial.is_dir()
        else False
    )
    known = is_complete(partial) or source.is_dir() or made
    if partial.is_symlink() or not partial.is_dir() or (not is_marked(partial) and not known):
        raise OutputError(
            f"{partial} is not a partial folder of stabl-jax (no {MARKER} and unknown contents); "
            "it is left as it is: move it away, or give another --out"
        )
    same, rewrite = matches(source, identity)
    note = (
        f" ({IDENTITY} was missing or damaged; the checkpoints carry this "
        "experiment's fingerprint, so it is written again)"
        if rewrite
        else ""
    )
    if is_complete(partial):
        if same:
            return _Plan("commit", f"{partial.name}: the complete results of this experiment, "
                         f"moved into place (nothing recomputed){note}", rewrite)  # fmt: skip
        if not force:
            raise OutputError(
                f"{partial} holds the complete results of another run; rerun its own command to "
                "move them into place, or pass --force to set them aside"
            )
        return _Plan("set_aside", f"{partial.name}: the complete results of another run; kept "
                     "beside it as <out>.kept-<time> (--force)")  # fmt: skip
    if same:
        return _Plan("resume", f"{partial.name}: checkpoints of this experiment, resumed{note}",
                     rewrite)  # fmt: skip
    other = describe_other(source, identity)
    if other is None:
        line = f"{partial.name}: an interrupted run with no finished chunk, reused"
        return _Plan("restart" if source.exists() else "new", line)
    what, remedy = other
    if not force:
        raise OutputError(f"{partial} holds {what}; {remedy}, or pass --force to recompute")
    return _Plan("restart", f"{partial.name}: {what}; discarded (--force)")


def _restore_old(final: Path) -> None:
    """Put back ``<final>.old`` where a stop fell between its two renames of a commit."""
    old = final.with_name(final.name + OLD)
    if not is_marked(old):
        return
    if final.exists() or final.is_symlink():
        shutil.rmtree(old)
    else:
        os.replace(old, final)


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

    def __init__(self, final: Path, force: bool, lock: int, plan: _Plan) -> None:
        self.final, self.partial, self.force = final, partial_path(final), force
        self.plan, self.committed = plan, False
        self._lock: int | None = lock
        self.store: ExperimentCheckpoints | None = None
        self.resumed: Resumed | None = None

    @staticmethod
    def check(out: str | Path, *, force: bool = False) -> Path:
        """The absolute path ``out``, when the results may be moved onto it; writes nothing.

        Raises:
          OutputError: ``out`` holds a result and ``force`` is false; it is not empty and not
            stabl_jax's; it holds files stabl_jax did not write; or it cannot be renamed onto
            (a mount point, immutable, another user's, a read-only parent).
        """
        if not str(out).strip():
            raise OutputError("--out is empty; give a folder name")
        final = Path(out).expanduser().absolute()
        _check_out(final, force)
        return final

    @staticmethod
    def preview(
        out: str | Path, identity: Mapping[str, Any] | None, *, force: bool = False
    ) -> tuple[list[str], Resumed | None]:
        """What :meth:`prepare` would do, as the lines it would log and what it would resume;
        moves, removes and writes nothing.

        Raises:
          OutputError, CheckpointMismatch: as :meth:`prepare`.
        """
        final = ResultsFolder.check(out, force=force)
        plan = _plan(partial_path(final), identity, force)
        lines = [plan.line] if plan.line else []
        if plan.action != "resume" or identity is None:
            return lines, None
        source = partial_path(final) / CHECKPOINT_DIR
        done = verify_learners(
            source, identity, discard_damaged=force, log=lines.append, dry_run=True
        )
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
          OutputError: as :meth:`check`, or the partial folder cannot be taken (another live
            run, another experiment's, not stabl_jax's, not writable).
          CheckpointMismatch: a checkpoint to resume is damaged and ``force`` is false.
        """
        final = cls.check(out, force=force)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            _restore_old(final)
            folder = cls._take(final, identity, force, log)
        except OSError as exc:
            raise OutputError(f"output location {final.parent} is not writable: {exc}") from None
        folder._open_store(identity, log)
        return folder

    @classmethod
    def _take(
        cls, final: Path, identity: Mapping[str, Any] | None, force: bool, log: Callable
    ) -> ResultsFolder:
        partial = partial_path(final)
        plan = _plan(partial, identity, force)
        if plan.line:
            log(plan.line)
        if plan.action == "set_aside":
            stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
            os.replace(partial, final.with_name(f"{final.name}.kept-{stamp}"))
        partial.mkdir(exist_ok=True)
        mark_folder(partial)
        lock = _lock(partial)
        if lock is None:
            raise OutputError(
                f"another stabl-jax run is writing {final} (it holds {partial}): wait for it "
                "to end, or give another --out"
            )
        if plan.action == "restart":
            shutil.rmtree(partial / CHECKPOINT_DIR)
        return cls(final, force, lock, plan)

    def _open_store(self, identity: Mapping[str, Any] | None, log: Callable) -> None:
        """The one checkpoint store of the run, with the checkpoints it resumes verified."""
        if identity is None:
            return
        try:
            self.store = ExperimentCheckpoints(
                self.checkpoint_dir, identity, rewrite=self.plan.rewrite_identity
            )
            if self.plan.action == "resume":
                done = self.store.verify(discard_damaged=self.force, log=log)
                self.resumed = Resumed(self.partial, done)
        except BaseException:
            self.__exit__(None, None, None)
            raise

    @property
    def checkpoint_dir(self) -> Path:
        """Where the experiment's chunk checkpoints live while it runs."""
        return self.partial / CHECKPOINT_DIR

    @property
    def complete(self) -> bool:
        """Whether the partial folder already holds complete results (only :meth:`commit`)."""
        return is_complete(self.partial)

    def commit(self) -> Path:
        """Write the manifest and ``COMPLETE``, rename onto ``<out>``, then drop the checkpoints.

        Raises:
          OutputError: ``<out>`` cannot be replaced now; the complete results stay in
            :attr:`partial`, and the same command moves them into place.
        """
        if not self.complete:
            written = [
                str(p.relative_to(self.partial))
                for p in self.partial.rglob("*")
                if p.is_file() and p.parts[len(self.partial.parts)] not in _BOOKKEEPING
            ]
            files.write_manifest(self.partial, written)
            files.fsync_tree(self.partial, skip=CHECKPOINT_DIR)
            files.write_text(self.partial / COMPLETE, _now() + "\n")
        self._move_into_place()
        shutil.rmtree(self.final / CHECKPOINT_DIR, ignore_errors=True)
        self.committed = True
        self._release()
        return self.final

    def _move_into_place(self) -> None:
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
                self._rename_onto(final, old)
        except OSError as exc:
            raise OutputError(f"cannot move the results onto {final} ({exc}){kept}") from None
        files.fsync_dir(final.parent)
        if is_marked(old):
            shutil.rmtree(old)

    def _rename_onto(self, final: Path, old: Path) -> None:
        """Rename :attr:`partial` onto ``final``, a results folder there first to ``old``."""
        if final.exists() and is_marked(final):
            os.replace(final, old)
        try:
            os.replace(self.partial, final)
        except OSError:
            if is_marked(old) and not final.exists():
                os.replace(old, final)
            raise

    def write(
        self,
        summary: Mapping[str, Any],
        arrays: Mapping[str, np.ndarray],
        draw: Callable[[Path], Any],
    ) -> Path:
        """Write ``summary.json``, ``results.csv``, ``traces.npz``, plots; then :meth:`commit`."""
        files.write_text(
            self.partial / tables.SUMMARY, json.dumps(summary, indent=2, allow_nan=False) + "\n"
        )
        tables.write_csv(tables.summary_rows(summary), self.partial / tables.CSV_NAME)
        # Uncompressed, far faster to write (numpy's stub also types **arrays as allow_pickle)
        np.savez(self.partial / tables.TRACES, **arrays)  # type: ignore[arg-type]
        draw(self.partial)
        return self.commit()

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def has_checkpoints(self) -> bool:
        """Whether the partial folder holds chunk checkpoints worth resuming."""
        return bool(learner_folders(self.checkpoint_dir))

    def __enter__(self) -> ResultsFolder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Removed only when it holds nothing to resume and nothing complete.
        if not self.committed and not self.complete and not self.has_checkpoints():
            shutil.rmtree(self.partial, ignore_errors=True)
        self._release()


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back (delivered at the end), so that no handler runs between
    the renames of a commit; a no-op off the main thread."""
    held = {signal.SIGINT, signal.SIGTERM}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
