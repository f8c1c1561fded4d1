"""One results folder per experiment, written atomically; it knows no experiment kind.

The life of ``<out>`` (docs/reliability.md, "Interrupted runs")::

  nothing ──prepare──▶ <out>.partial (marked, locked) ──each chunk──▶ + checkpoint/
    ──write──▶ + results, manifest.json ──▶ + COMPLETE ──one rename──▶ <out> ──▶ - checkpoint/
"""

from __future__ import annotations

import dataclasses
import datetime
import fcntl
import os
import shutil
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from stabl_jax.experiment import files, tables
from stabl_jax.experiment.identity import (
    IDENTITY,
    ExperimentCheckpoints,
    describe_other,
    learner_folders,
)
from stabl_jax.experiment.outputs import (
    COMPLETE,
    MARKER,
    OutputError,
    check_replaceable,
    is_complete,
    is_marked,
    mark_folder,
)

#: The folder of a partial results folder holding the chunk checkpoints of its learners.
CHECKPOINT_DIR = "checkpoint"
#: What a results folder holds besides its results (left out of its manifest).
_BOOKKEEPING = {MARKER, COMPLETE, files.MANIFEST, CHECKPOINT_DIR}
PARTIAL, OLD = ".partial", ".old"


def partial_path(final: Path) -> Path:
    """The one partial folder of the output ``final``: ``<final>.partial``."""
    return final.with_name(final.name + PARTIAL)


def _lock(partial: Path) -> IO[bytes]:
    """``partial``'s marker, open and ``flock``-ed (the OS drops a dead run's lock)."""
    marker = open(partial / MARKER, "rb")
    try:
        fcntl.flock(marker, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        marker.close()
        raise OutputError(
            f"another stabl-jax run is writing {partial.with_suffix('')} (it holds {partial}): "
            "wait for it to end, or give another --out"
        ) from None
    return marker


@dataclasses.dataclass
class Resumed:
    """What a run took over from its partial folder ``source``: ``{learner: rounds done}``."""

    source: Path
    progress: dict[str, int]


def _plan(
    final: Path, identity: Mapping[str, Any] | None, force: bool, log: Callable[[str], None]
) -> tuple[str, ExperimentCheckpoints | None, bool]:
    """``(action, store, rewrite)`` for ``<final>.partial``, ``log``-ging what is to be done and
    moving and writing nothing: ``action`` is ``"new"``, ``"resume"``, ``"commit"`` (complete:
    only to be moved into place), ``"discard"`` or ``"set aside"`` (another run's complete
    results, with ``force``); ``store``: the checkpoints of ``identity`` (``None``: none);
    ``rewrite``: :data:`IDENTITY` is to be written again.

    Raises:
      OutputError: it is not stabl_jax's, a live run holds it, or it holds another run's
        checkpoints or complete results and ``force`` is false.
    """
    partial = partial_path(final)
    source, complete = partial / CHECKPOINT_DIR, is_complete(partial)
    store = None if identity is None else ExperimentCheckpoints(source, identity, create=False)
    if not partial.exists() and not partial.is_symlink():
        return "new", store, False
    if is_marked(partial):
        _lock(partial).close()
    # Ours too: a folder another run is creating (nothing in it yet but its marker's temp file).
    made = partial.is_dir() and all(p.name.startswith(f".{MARKER}") for p in partial.iterdir())
    ours = is_marked(partial) or complete or source.is_dir() or made
    if partial.is_symlink() or not partial.is_dir() or not ours:
        raise OutputError(
            f"{partial} is not a partial folder of stabl-jax (no {MARKER} and unknown contents); "
            "it is left as it is: move it away, or give another --out"
        )
    same, rewrite = (False, False) if store is None else store.recognised()
    if same:
        note = f" ({IDENTITY} was missing or damaged; the checkpoints carry this experiment's "
        note = (note + "fingerprint, so it is written again)") * rewrite
        what = "the complete results of this experiment, moved into place (nothing recomputed)"
        what = what if complete else "checkpoints of this experiment, resumed"
        log(f"{partial.name}: {what}{note}")
        return ("commit" if complete else "resume"), store, rewrite
    other = describe_other(source, identity)
    remedy = "pass --force to recompute"
    if complete:  # never deleted: --force sets them aside
        other = "the complete results of another run", "rerun its own command to move them"
        remedy = f"pass --force to move them to {_kept(partial).name} and recompute"
    if other is None:
        log(f"{partial.name}: an interrupted run with no finished chunk, reused")
        return "discard", store, False
    if not force:
        raise OutputError(f"{partial} holds {other[0]}; {other[1]}, or {remedy}")
    if complete:
        log(f"{partial.name}: {other[0]}; moved to {_kept(partial).name}")
        return "set aside", store, False
    log(f"{partial.name}: {other[0]}; discarded (--force)")
    return "discard", store, False


def _kept(partial: Path) -> Path:
    """Where ``--force`` sets another run's complete results aside: ``<out>.kept-<finished>``."""
    done = datetime.datetime.fromtimestamp((partial / COMPLETE).stat().st_mtime, datetime.UTC)
    return partial.with_name(f"{partial.name.removesuffix(PARTIAL)}.kept-{done:%Y%m%dT%H%M%S}")


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

    def __init__(
        self, final: Path, force: bool, lock: IO[bytes], store: ExperimentCheckpoints | None
    ):
        self.final, self.partial, self.force = final, partial_path(final), force
        self._lock = lock  # closed once committed or released
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
        check_replaceable(final, force, _BOOKKEEPING)
        return final

    @staticmethod
    def preview(
        out: str | Path, identity: Mapping[str, Any] | None, *, force: bool = False
    ) -> tuple[list[str], Resumed | None]:
        """The lines :meth:`prepare` would log and what it would resume (raising as it does);
        moves, removes and writes nothing."""
        final = ResultsFolder.check(out, force=force)
        lines: list[str] = []
        action, store, _ = _plan(final, identity, force, lines.append)
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
        partial = partial_path(final)
        try:
            action, store, rewrite = _plan(final, identity, force, log)
            if action == "discard":
                shutil.rmtree(partial)
            elif action == "set aside":
                os.replace(partial, _kept(partial))
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
    def complete(self) -> bool:
        """Whether the partial folder holds complete results (only to be committed)."""
        return is_complete(self.partial)

    def has_checkpoints(self) -> bool:
        """Whether the partial folder holds chunk checkpoints worth resuming."""
        return bool(learner_folders(self.partial / CHECKPOINT_DIR))

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
            files.write_manifest(self.partial, _BOOKKEEPING)
            now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
            files.write_text(self.partial / COMPLETE, now + "\n")
        final, old = self.final, self.final.with_name(self.final.name + OLD)
        kept = (
            f"; this run's complete results are kept in {self.partial}: once that is fixed, "
            "the same command moves them into place without recomputing"
        )
        try:
            check_replaceable(final, self.force, _BOOKKEEPING)
            # SIGINT and SIGTERM held back: no handler runs between these renames.
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            try:
                if is_marked(old):  # left by a stop between these renames
                    shutil.rmtree(old)
                if is_marked(final):
                    os.replace(final, old)
                try:
                    os.replace(self.partial, final)
                except OSError:
                    if is_marked(old) and not final.exists():
                        os.replace(old, final)
                    raise
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        except OutputError as exc:
            raise OutputError(f"{exc}{kept}") from None
        except OSError as exc:
            raise OutputError(f"cannot move the results onto {final} ({exc}){kept}") from None
        files.fsync_dir(final.parent)
        if is_marked(old):
            shutil.rmtree(old)
        self._lock.close()
        shutil.rmtree(final / CHECKPOINT_DIR, ignore_errors=True)
        return final

    def __enter__(self) -> ResultsFolder:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # Removed only while held (not committed), and holding nothing to resume or commit.
        if not self._lock.closed and not self.complete and not self.has_checkpoints():
            shutil.rmtree(self.partial, ignore_errors=True)
        self._lock.close()
