"""One results folder per experiment, written atomically; it knows no experiment kind."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import errno
import json
import math
import os
import platform
import secrets
import shutil
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

import jax
import numpy as np

from stabl_jax import metrics
from stabl_jax.experiment import checkpoints, provenance, tables
from stabl_jax.versions import package_versions

SUMMARY = "summary.json"
TRACES = "traces.npz"
COMPLETE = "COMPLETE"

FORMAT = "stabl_jax.results/1"
#: The file stabl_jax writes into every folder it creates (format, random run id, pid, time):
#: the only folders it ever replaces or deletes are those holding it.
MARKER = ".stabl_jax_results"
MARKER_FORMAT = "stabl_jax.results-folder/1"


class OutputError(Exception):
    """The output folder cannot be used (exists, not writable, not a results folder)."""


def count(text: str) -> int:
    """An argparse ``type=`` for a count (``--runs``, ``--horizon``): an int >= 1, else exit 2."""
    return _int_at_least(text, 1, "")


def interval_runs(text: str) -> int:
    """An argparse ``type=`` for runs with 95% intervals: an int >= 2 (one run gives ``nan``)."""
    return _int_at_least(text, 2, " (a 95% interval needs two runs)")


def distinct(name: str, values: Iterable[Any]) -> None:
    """``ValueError`` naming the first value of option ``name`` given twice."""
    seen: list[Any] = []
    for value in values:
        if value in seen:
            shown = ",".join(value) if isinstance(value, tuple) else value  # --diff a,b
            raise ValueError(f"{name} gives {shown} twice: give each value once")
        seen.append(value)


class _Once(argparse.Action):
    """argparse's ``store``, except that an option given twice stops the script (exit 2)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        values = self.checked(parser, values, option_string)
        given: list[argparse.Namespace] = self.__dict__.setdefault("_given_in", [])
        if any(seen is namespace for seen in given):
            first = getattr(namespace, self.dest)
            parser.error(
                f"{option_string or self.dest} is given twice ({_shown(first)} and "
                f"{_shown(values)}): the second would silently replace the first; give it once"
            )
        given.append(namespace)
        setattr(namespace, self.dest, values)

    def checked(self, parser: argparse.ArgumentParser, values: Any, option: str | None) -> Any:
        """The value to store; a subclass checks it here (``parser.error`` to refuse it)."""
        return values


def _shown(values: Any) -> str:
    return " ".join(map(str, values)) if isinstance(values, list) else str(values)


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` refusing a storing option given twice (exit 2); appends collect."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)


class Distinct(_Once):
    """argparse ``action=`` for a ``nargs="+"`` option: exit 2 on a repeated value (as parsed)."""

    def checked(self, parser: argparse.ArgumentParser, values: Any, option: str | None) -> Any:
        try:
            distinct(option or self.dest, values)
        except ValueError as exc:
            parser.error(str(exc))
        return list(values)


def _int_at_least(text: str, least: int, why: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"give an int >= {least}{why}, got {text!r}")
    return value


def owned_files(
    folder: str | os.PathLike, record: str, others: tuple[str, ...], keys: frozenset[str], tool: str
) -> tuple[Path, ...]:
    """Paths of ``record`` (JSON) and ``others`` in ``folder``, each absent or ``tool``'s
    (``record`` a JSON object with every one of ``keys``).

    Raises:
      OutputError: ``folder`` is a file, or one of the files is not ``tool``'s.
    """
    data = checkpoints.read_json(Path(folder) / record)
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


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8, atomically (a crash leaves the old file whole)."""
    checkpoints.atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def write_json(path: str | Path, value: Any, indent: int = 2) -> None:
    """Write ``value`` as indented JSON to ``path``, atomically."""
    write_text(path, json.dumps(value, indent=indent) + "\n")


# --- The atomic folder ----------------------------------------------------------------------


def is_complete(path: str | Path) -> bool:
    """True when ``path`` is a finished results folder (it holds ``COMPLETE``)."""
    return (Path(path) / COMPLETE).is_file()


def _fsync_tree(folder: Path, skip: str | None = None) -> None:
    """``fsync`` every file and folder under ``folder`` (not the top-level folder ``skip``)."""
    for root, dirs, files in os.walk(folder):
        if Path(root) == folder and skip in dirs:
            dirs.remove(skip)
        for name in files:
            try:
                fd = os.open(Path(root) / name, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        checkpoints.fsync_dir(root)


def _marker(folder: Path) -> dict[str, Any] | None:
    """The contents of ``folder``'s :data:`MARKER`, or ``None``."""
    path = folder / MARKER
    if folder.is_symlink() or path.is_symlink():
        return None
    found = checkpoints.read_json(path)
    return found if found is not None and found.get("format") == MARKER_FORMAT else None


def is_marked(folder: str | Path) -> bool:
    """True when ``folder`` holds stabl_jax's :data:`MARKER` (its files may be replaced)."""
    return _marker(Path(folder)) is not None


def mark_folder(folder: str | Path) -> Path:
    """Create ``folder`` if needed and mark it as stabl_jax's (:data:`MARKER`); returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if not is_marked(folder):
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        text = {"format": MARKER_FORMAT, "run_id": None, "pid": os.getpid(), "created": stamp}
        checkpoints.atomic_write(folder / MARKER, lambda f: f.write(json.dumps(text).encode()))
    return folder


def _lock(folder: Path) -> int | None:
    """Lock ``folder``'s marker: an open descriptor, or ``None`` when a live process holds it
    (the OS drops a dead process's lock, so a reused pid is never mistaken for a live run)."""
    try:
        fd = os.open(folder / MARKER, os.O_RDONLY)
    except OSError:
        return None
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the pid written in the marker decides
        pid = (_marker(folder) or {}).get("pid")
        if isinstance(pid, int) and pid != os.getpid() and _pid_alive(pid):
            os.close(fd)
            return None
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as exc:  # PermissionError: it exists, owned by someone else
        return isinstance(exc, PermissionError)
    return True


def _create_marked(folder: Path, run_id: str) -> int:
    """Create ``folder`` and its :data:`MARKER`, locked before it has contents; returns the lock."""
    folder.mkdir()
    fd = os.open(folder / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with contextlib.suppress(ImportError):
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        text = {"format": MARKER_FORMAT, "run_id": run_id, "pid": os.getpid(), "created": stamp}
        os.write(fd, (json.dumps(text) + "\n").encode("utf-8"))
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _without_versions(identity: Mapping[str, Any]) -> dict[str, Any]:
    """An experiment's identity without the package versions."""
    return {key: value for key, value in identity.items() if key != "versions"}


@dataclasses.dataclass
class Resumed:
    """What :meth:`ResultsFolder.resume` took over: the interrupted partial folder ``source``
    the checkpoints came from, and ``progress``, ``{learner: rounds already done}``."""

    source: Path
    progress: dict[str, int]


def _check_replaceable(final: Path, force: bool) -> None:
    """Raise :class:`OutputError` unless ``final`` is empty or (``force``) stabl_jax's."""
    if final.is_symlink():
        raise OutputError(
            f"output path {final} is a symbolic link (to {os.readlink(final)}), which is left "
            "as it is: give --out the folder it points to, or another path"
        )
    if not final.is_dir():
        raise OutputError(f"output path {final} exists and is not a folder")
    if _marker(final) is None:
        try:
            empty = not any(final.iterdir())
        except OSError as exc:
            raise OutputError(f"cannot read the output folder {final}: {exc}") from None
        if empty:
            return  # replaced by the results (never once it holds anything: see commit)
        older = (
            " (a results folder written by a stabl_jax older than the marker: move or delete it "
            "yourself)"
            if is_complete(final)
            else ""
        )
        raise OutputError(
            f"output folder {final} exists and is not a stabl_jax results folder (it has no "
            f"{MARKER} file){older}; it is never replaced or deleted, even with --force: "
            "choose another --out"
        )
    if not force:
        what = "a complete result" if is_complete(final) else "an unfinished stabl_jax result"
        raise OutputError(
            f"output folder {final} already holds {what}; "
            "pass --force to replace it or choose another --out"
        )


def _dead_partials(final: Path, own: Path | None = None) -> list[tuple[Path, int]]:
    """Partial folders of ``final`` (not ``own``) of dead runs, newest first, each with its lock."""
    found = []
    for path in final.parent.glob(f"{glob_escape(final.name)}.partial-*"):
        if path == own or path.is_symlink() or _marker(path) is None:
            continue
        lock = _lock(path)
        if lock is not None:  # else: another run of the same --out is still going
            found.append((path, lock))
    return sorted(found, key=lambda item: item[0].stat().st_mtime, reverse=True)


def _judge(path: Path, identity: Mapping[str, Any]) -> tuple[str, str]:
    """``(verdict, note)`` of the partial folder ``path`` for the experiment ``identity``:
    ``"complete"``, ``"empty"`` (no finished chunk), ``"same"`` (checkpoints of this experiment)
    or ``"other"`` (``note``: what they are and how to resume them)."""
    if is_complete(path):
        return "complete", ""
    source = path / checkpoints.CHECKPOINT_DIR
    found = checkpoints.read_json(source / checkpoints.IDENTITY)
    matches = None if found is not None else checkpoints.fingerprints_match(source, identity)
    if found is None and matches is None:
        return "empty", ""
    if found == identity:
        return "same", ""
    if found is None and matches:
        return "same", (
            f"{checkpoints.IDENTITY} is missing or unreadable, but its checkpoints carry this "
            "experiment's fingerprint"
        )
    remedy = "rerun that exact command to resume it"
    if found is None:
        what = (
            f"an experiment it cannot identify ({checkpoints.IDENTITY} is missing or unreadable "
            "and its checkpoints do not carry this experiment's fingerprint, or are damaged)"
        )
    else:
        differ = checkpoints.describe_mismatch(found, identity)
        what = f"a different experiment ({differ})"
        if _without_versions(found) == _without_versions(identity):
            what = f"this experiment under other versions ({differ})"
            listed = f"{checkpoints.IDENTITY} lists them"
            remedy = f"install the versions it ran with ({listed}) to resume it"
    return "other", f"holds checkpoints of an interrupted run of {what}; {remedy}"


# What a run does with a partial folder of an interrupted run, by its verdict (:func:`_judge`;
# "older": "same" but not the newest): (what it holds, what is done with it)
_DECISIONS = {
    "complete": ("the complete results of a run", "left alone"),
    "empty": ("an interrupted run with no finished chunk", "removed"),
    "same": ("checkpoints of this experiment", "resumed"),
    "older": ("an older interrupted run of this experiment", "removed"),
    "other": ("checkpoints of another experiment", "discarded (--force)"),
}


@contextlib.contextmanager
def _interrupted_runs(
    final: Path, own: Path | None, identity: Mapping[str, Any], force: bool
) -> typing.Iterator[list[tuple[Path, str, str]]]:
    """``(path, decision, line)`` for each dead partial folder of ``final``, newest first:
    ``decision`` a key of :data:`_DECISIONS`, ``line`` what the run prints. Locks held to the end.

    Raises:
      OutputError: a folder holds checkpoints of another experiment and ``force`` is false.
    """
    found = _dead_partials(final, own)
    try:
        decided: list[tuple[Path, str, str]] = []
        taken = False
        for path, _ in found:
            verdict, detail = _judge(path, identity)
            if verdict == "other" and not force:
                raise OutputError(f"{path} {detail}, or pass --force to discard it")
            decision = "older" if verdict == "same" and taken else verdict
            taken = taken or verdict == "same"
            what, done = _DECISIONS[decision]
            how = f" ({detail})" if detail and decision == "same" else ""
            decided.append((path, decision, f"interrupted run {path.name}: {what}, {done}{how}"))
        yield decided
    finally:
        for _, lock in found:
            os.close(lock)


class ResultsFolder:
    """A results folder under construction: write into :attr:`partial`, then :meth:`commit`.

    Example:
      >>> import tempfile, pathlib
      >>> out = pathlib.Path(tempfile.mkdtemp()) / "demo"
      >>> with ResultsFolder.prepare(out) as folder:
      ...     _ = (folder.partial / "note.txt").write_text("hello")
      ...     final = folder.commit()
      >>> sorted(p.name for p in final.iterdir())
      ['.stabl_jax_results', 'COMPLETE', 'note.txt']
    """

    def __init__(self, final: Path, partial: Path, force: bool, run_id: str, lock: int) -> None:
        self.final = final
        self.partial = partial
        self.force = force
        self.run_id = run_id
        self.committed = False
        self._lock: int | None = lock

    @classmethod
    def check(cls, out: str | Path, *, force: bool = False) -> Path:
        """The absolute path ``out``, when it may become a results folder; writes nothing.

        Raises:
          OutputError: ``out`` holds a result and ``force`` is false, or ``out`` is not empty
            and not stabl_jax's (never replaced).
        """
        if not str(out).strip():
            raise OutputError("--out is empty; give a folder name")
        final = Path(out).expanduser().absolute()
        if final.exists() or final.is_symlink():
            _check_replaceable(final, force)
        return final

    @classmethod
    def prepare(cls, out: str | Path, *, force: bool = False) -> ResultsFolder:
        """:meth:`check` ``out`` and create the sibling ``<out>.partial-<pid>-<random>``.

        Raises:
          OutputError: as :meth:`check`, or the location is not writable.
        """
        final = cls.check(out, force=force)
        parent = final.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create the output location {parent}: {exc}") from None
        run_id = f"{os.getpid()}-{secrets.token_hex(4)}"
        partial = parent / f"{final.name}.partial-{run_id}"
        try:
            lock = _create_marked(partial, run_id)
        except OSError as exc:
            if partial.is_dir():
                shutil.rmtree(partial, ignore_errors=True)
            raise OutputError(f"output location {parent} is not writable: {exc}") from None
        return cls(final, partial, force, run_id, lock)

    @property
    def checkpoint_dir(self) -> Path:
        """Where the experiment's chunk checkpoints live while it runs."""
        return self.partial / checkpoints.CHECKPOINT_DIR

    @staticmethod
    def preview_resume(
        out: str | Path, identity: Mapping[str, Any], *, force: bool = False
    ) -> tuple[list[str], Resumed | None]:
        """What :meth:`resume` would do, without moving, removing or writing anything.

        Returns:
          The lines :meth:`resume` would log, one per folder and discarded checkpoint, and the
          rounds each learner would resume from (or ``None``).

        Raises:
          OutputError, CheckpointMismatch: as :meth:`resume`.
        """
        final = Path(out).expanduser().absolute()
        identity = json.loads(json.dumps(dict(identity), sort_keys=True))
        lines: list[str] = []
        taken: Resumed | None = None
        with _interrupted_runs(final, None, identity, force) as decided:
            for path, decision, line in decided:
                lines.append(line)
                if decision == "same":
                    discarded: list[str] = []
                    done = checkpoints.verify_learners(
                        path / checkpoints.CHECKPOINT_DIR,
                        identity,
                        discard_damaged=force,
                        log=discarded.append,
                        dry_run=True,
                    )
                    lines += [f"interrupted run {path.name}: {d} (--force)" for d in discarded]
                    taken = Resumed(source=path, progress=done)
        return lines, taken

    def resume(
        self,
        identity: Mapping[str, Any],
        *,
        force: bool = False,
        log: Callable[[str], None] = lambda _: None,
    ) -> Resumed | None:
        """Take over the checkpoints of an interrupted run of the same experiment.

        Returns:
          What was taken over, or ``None``.

        Raises:
          OutputError: another (or unidentifiable) experiment's checkpoints are there and
            ``force`` is false.
          CheckpointMismatch: a checkpoint is damaged and ``force`` is false (``force`` discards
            it and that learner is recomputed).
        """
        identity = json.loads(json.dumps(dict(identity), sort_keys=True))
        taken: Resumed | None = None
        with _interrupted_runs(self.final, self.partial, identity, force) as decided:
            for path, decision, line in decided:
                log(line)
                if decision == "complete":  # stopped while moving its results into place
                    continue
                if decision == "same":
                    shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
                    os.replace(path / checkpoints.CHECKPOINT_DIR, self.checkpoint_dir)
                    taken = Resumed(source=path, progress={})
                shutil.rmtree(path)
        if taken is not None:
            store = checkpoints.ExperimentCheckpoints(self.checkpoint_dir, identity)
            taken.progress = store.verify(discard_damaged=force, log=log)
        return taken

    def _conflict(self, happened: str) -> typing.NoReturn:
        """Keep this run's complete results beside ``<out>`` and say where."""
        kept = self.final.parent / f"{self.final.name}.conflict-{self.run_id}"
        os.replace(self.partial, kept)
        self.partial, self.committed = kept, True
        self._release()
        raise OutputError(
            f"output folder {self.final} {happened} while this run was going (another run with "
            f"the same --out?); it was not replaced: this run's complete results are in {kept}"
        )

    def commit(self) -> Path:
        """``fsync``, write ``COMPLETE``, drop the checkpoints, move into place; returns the path.

        Raises:
          OutputError: ``<out>`` appeared meanwhile; the results are kept in
            ``<out>.conflict-<run id>``.
        """
        _fsync_tree(self.partial, skip=checkpoints.CHECKPOINT_DIR)
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds") + "\n"
        checkpoints.atomic_write(self.partial / COMPLETE, lambda f: f.write(stamp.encode()))
        if self.checkpoint_dir.exists():  # in one step: a kill leaves all of them or none
            done = self.partial / ".checkpoint-done"
            os.replace(self.checkpoint_dir, done)
            shutil.rmtree(done, ignore_errors=True)
        old: Path | None = None
        if self.final.exists() or self.final.is_symlink():
            if _marker(self.final) is None:
                if not self.final.is_dir() or any(self.final.iterdir()):
                    self._conflict("was created by someone else")
            elif not self.force:
                self._conflict("was completed by another run")
            else:
                old = self.final.parent / f"{self.final.name}.old-{self.run_id}"
                os.replace(self.final, old)
        try:
            os.replace(self.partial, self.final)
        except OSError as exc:
            if old is not None:
                os.replace(old, self.final)
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                self._conflict("was created by another process")
            raise
        checkpoints.fsync_dir(self.final.parent)
        if old is not None and _marker(old) is not None:
            shutil.rmtree(old, ignore_errors=True)
        self.committed = True
        self._release()
        return self.final

    def write(
        self,
        summary: Mapping[str, Any],
        arrays: Mapping[str, np.ndarray],
        draw: Callable[[Path], Any],
    ) -> Path:
        """Write ``summary.json``, ``results.csv``, ``traces.npz``, plots; then :meth:`commit`."""
        text = json.dumps(summary, indent=2, allow_nan=False)
        (self.partial / SUMMARY).write_text(text + "\n", encoding="utf-8")
        tables.write_csv(tables.summary_rows(summary), self.partial / tables.CSV_NAME)
        # Uncompressed, far faster to write (numpy's stub also types **arrays as allow_pickle)
        np.savez(self.partial / TRACES, **arrays)  # type: ignore[arg-type]
        draw(self.partial)
        return self.commit()

    def _release(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def discard(self) -> None:
        """Remove the partial folder (nothing is left behind)."""
        shutil.rmtree(self.partial, ignore_errors=True)
        self._release()

    def __enter__(self) -> ResultsFolder:
        return self

    def has_checkpoints(self) -> bool:
        """Whether the partial folder holds chunk checkpoints worth resuming."""
        return bool(checkpoints.learner_folders(self.checkpoint_dir))

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # An interrupted run keeps its checkpoints: the same command resumes from them.
        if not self.committed and not self.has_checkpoints():
            self.discard()
        self._release()


# --- Contents -------------------------------------------------------------------------------


def stat(values: np.ndarray, axis: int = 0) -> dict[str, Any]:
    """``{"mean", "ci95"}`` over runs (``ci95``: half-width of the normal 95% interval)."""
    mean, half = metrics.mean_ci(values, axis=axis)
    return {"mean": clean(mean), "ci95": clean(half)}


def clean(value: Any) -> Any:
    """JSON-ready: arrays to lists, numpy scalars to Python, NaN/inf to ``None``, a function
    or class to its import path ``"module:qualname"``."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # e.g. a Domain
        return {"class": type(value).__name__, **clean(static_fields(value))}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if callable(value) and hasattr(value, "__qualname__"):  # a user environment's loss function
        return f"{value.__module__}:{value.__qualname__}"
    if isinstance(value, np.ndarray | np.generic):
        return clean(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def environment_info() -> dict[str, Any]:
    """Versions, code commit and dirtiness, Python, platform, JAX device and CPU."""
    devices = jax.devices()
    return {
        "code": provenance.code_version(),
        "versions": {**package_versions(), "python": platform.python_version()},
        "python": sys.version,
        "platform": platform.platform(),
        "jax_config": {
            "x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]
            "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
            "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS"),
        },
        "device": {
            "platform": devices[0].platform,
            "kind": devices[0].device_kind,
            "count": len(devices),
        },
        "cpu": provenance.cpu(),
    }


def static_fields(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        # Fields left out of repr (a learner's validate switch) are how it ran, not what it is.
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.repr}
    return {}


def params_dict(params: Any) -> dict[str, Any]:
    if not dataclasses.is_dataclass(params):
        return {}
    return {
        f.name: np.asarray(getattr(params, f.name)).tolist() for f in dataclasses.fields(params)
    }


def read_traces(folder: str | Path) -> dict[str, np.ndarray]:
    """Every array of ``<folder>/traces.npz`` (``allow_pickle=False``).

    Raises:
      FileNotFoundError: ``folder`` is not a finished results folder.
      ValueError: the file is damaged.
    """
    return tables.TraceFile(tables.finished_folder(folder, TRACES) / TRACES).read()


def read_summary(folder: str | Path) -> dict[str, Any]:
    """``<folder>/summary.json`` as a dict (errors as :func:`.tables.load_results`)."""
    return dict(tables.load_results(folder).summary)
