"""One results folder per experiment, written atomically.

Layout (readable without Python)::

    <out>/
      summary.json         config, seed, versions, commit, device, timings and every metric
      results.csv          the tidy table of the metrics (stabl_jax.tables)
      traces.npz           per-run traces (np.savez uncompressed, no pickled objects)
      reward.png           moving-average reward (the paper's Figure 1)
      adaptive_regret.png  SA(L) against L (log2 x axis, symlog y axis)
      prob_best.png        play probability of the current best arm
      COMPLETE             written last: the folder is whole
      .stabl_jax_results   the marker: stabl_jax created this folder (format, run id, pid)

A BCO experiment (``kind = "bco"``) writes the same folder with ``loss.png`` (moving-average
loss) and ``adaptive_regret.png`` as its plots, and traces ``<learner>/loss``,
``<learner>/best_loss`` and ``<learner>/sa`` plus ``comparator_gap``.

Atomicity: everything is built in the sibling ``<out>.partial-<pid>-<random>``, created with
the marker; every file is ``fsync``-ed, ``COMPLETE`` is written, the checkpoints are dropped
and the folder is renamed to ``<out>``. A reader that sees ``<out>`` sees all of it; a crash
leaves only a partial folder behind.

Never a user's folder: only folders holding the :data:`MARKER` are ever replaced (``--force``)
or deleted; an existing ``<out>`` without it is refused even with ``--force`` (an empty one
is used). If another run completes ``<out>`` while this one runs, this run's results are kept
in ``<out>.conflict-<run id>`` and the error says so.

Resuming: while it runs, the partial folder holds chunk checkpoints
(``checkpoint/``, :mod:`stabl_jax.checkpoint`) and the run holds a lock (``flock``) on its
marker, which the operating system drops when the process dies however it dies. After a crash
or ``kill -9``, the same command finds the partial folders whose lock is free
(:meth:`ResultsFolder.resume`), takes over the checkpoints written for the same experiment
(told by ``experiment.json``, or when that is lost by the fingerprint in every learner's
state), checks every file against its digests and continues; a checkpoint of a different
experiment, or a damaged one, is an error naming it unless ``--force`` discards it.
``traces.npz`` keys are ``"<learner>/<field>"`` (``stabl/loss``); read it with
:func:`read_traces` (``allow_pickle=False``). Which ``(R, T)`` traces a bandit experiment
keeps is the config's ``save_traces`` (default ``["played"]``, the arms as ``uint8`` up to 256
arms); the metrics and plots are computed from all of them in memory before they are written,
so ``summary.json`` and the PNGs do not depend on it (:func:`trace_arrays`).

An algorithm-selection experiment (``kind = "hpo"``) writes ``best_objective.png`` (log
best-gap curves per problem), ``score_vs_uniform.png`` and ``profile.png`` (Dolan-More
profiles), with traces ``<problem>/<learner>/best_gap`` and ``.../arm_counts``
(:mod:`stabl_jax.hpo_experiment`).
"""

from __future__ import annotations

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
from collections.abc import Callable, Mapping
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

import jax
import numpy as np

from stabl_jax import checkpoint, metrics, plots, provenance, tables
from stabl_jax.config import arm_dtype, saved_dtype  # noqa: F401  (arm_dtype: re-exported)
from stabl_jax.experiment import BCOExperimentResult, ExperimentResult, LearnerOutcome
from stabl_jax.versions import __version__, installed_version

if typing.TYPE_CHECKING:
    from stabl_jax.hpo_experiment import HPOExperimentResult

SUMMARY = "summary.json"
TRACES = "traces.npz"
COMPLETE = "COMPLETE"
PLOT_FILES: dict[str, str] = {
    "reward": "reward.png",
    "adaptive_regret": "adaptive_regret.png",
    "prob_best": "prob_best.png",
}
BCO_PLOT_FILES: dict[str, str] = {
    "loss": "loss.png",
    "adaptive_regret": "adaptive_regret.png",
}
FORMAT = "stabl_jax.results/1"
#: The file stabl_jax writes into every folder it creates (format, random run id, pid, time):
#: the only folders it ever replaces or deletes are those holding it.
MARKER = ".stabl_jax_results"
MARKER_FORMAT = "stabl_jax.results-folder/1"


class OutputError(Exception):
    """The output folder cannot be used (exists, not writable, not a results folder)."""


# --------------------------------------------------------------------------------------------
# The atomic folder
# --------------------------------------------------------------------------------------------


def is_complete(path: str | Path) -> bool:
    """True when ``path`` is a finished results folder (it holds ``COMPLETE``)."""
    return (Path(path) / COMPLETE).is_file()


def _fsync_tree(folder: Path, skip: str | None = None) -> None:
    """``fsync`` every file under ``folder`` and the folders themselves (not the top-level
    folder ``skip``)."""
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
        checkpoint.fsync_dir(root)


def _marker(folder: Path) -> dict[str, Any] | None:
    """The contents of ``folder``'s :data:`MARKER` when stabl_jax created the folder, else
    ``None``."""
    path = folder / MARKER
    if folder.is_symlink() or path.is_symlink():
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) and found.get("format") == MARKER_FORMAT else None


def created_by_stabl_jax(path: str | Path) -> bool:
    """Whether ``path`` is a folder stabl_jax created (it holds a valid :data:`MARKER`): the
    only folders the command line ever replaces or deletes."""
    return _marker(Path(path)) is not None


def _lock(folder: Path) -> int | None:
    """Lock ``folder``'s marker for this process: an open descriptor (close it to release),
    or ``None`` when a running process holds the lock. The operating system drops the lock
    of a process that dies, however it dies, so a process that reuses a dead run's pid is
    never mistaken for it."""
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
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    except OSError:
        return False
    return True


def _create_marked(folder: Path, run_id: str) -> int:
    """Create ``folder`` with its :data:`MARKER` (format, run id, pid, time), locked before
    it has contents so that no other process can take it for a dead run's; returns the lock."""
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


@dataclasses.dataclass
class Resumed:
    """What :meth:`ResultsFolder.resume` took over.

    Attributes:
      source: the interrupted partial folder the checkpoints came from.
      progress: ``{learner: rounds already done}``.
    """

    source: Path
    progress: dict[str, int]


def _check_replaceable(final: Path, force: bool) -> None:
    """Raise :class:`OutputError` unless ``final`` may become the results folder: an empty
    folder, or (with ``force``) one stabl_jax created."""
    if not final.is_dir() or final.is_symlink():
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


class ResultsFolder:
    """A results folder under construction: write into :attr:`partial`, then :meth:`commit`.

    Create it with :meth:`prepare` *before* any computation: that is where an existing
    folder or an unwritable location is reported. Used as a context manager, the partial
    folder is removed if the block raises (unless it holds checkpoints to resume from).

    Only folders carrying stabl_jax's own :data:`MARKER` (written when it creates a folder,
    with a random run id) are ever replaced or deleted; while a run lives, it holds a lock on
    its partial folder's marker, which is how another run tells a running one from a dead one.

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
    def prepare(cls, out: str | Path, *, force: bool = False) -> ResultsFolder:
        """Check ``out`` and create the sibling ``<out>.partial-<pid>-<random>``.

        Raises:
          OutputError: ``out`` holds a result and ``force`` is false; ``out`` exists, is not
            empty and was not created by stabl_jax (never replaced, even with ``force``); or
            the location is not writable.
        """
        if not str(out).strip():
            raise OutputError("--out is empty; give a folder name")
        final = Path(out).expanduser().absolute()
        if final.exists() or final.is_symlink():
            _check_replaceable(final, force)
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
        return self.partial / checkpoint.CHECKPOINT_DIR

    def _dead_partials(self) -> list[tuple[Path, int]]:
        """Partial folders of the same ``<out>`` created by stabl_jax runs that are no longer
        running, newest first, each with its lock (now held by this process)."""
        found = []
        for path in self.final.parent.glob(f"{glob_escape(self.final.name)}.partial-*"):
            if path == self.partial or path.is_symlink() or _marker(path) is None:
                continue
            lock = _lock(path)
            if lock is not None:  # else: another run of the same --out is still going
                found.append((path, lock))
        return sorted(found, key=lambda item: item[0].stat().st_mtime, reverse=True)

    def resume(
        self,
        identity: Mapping[str, Any],
        *,
        force: bool = False,
        log: Callable[[str], None] = lambda _: None,
    ) -> Resumed | None:
        """Take over the checkpoints of an interrupted run of the same experiment.

        Every partial folder of the same ``<out>`` left by a dead run is looked at: the newest
        one whose ``checkpoint/experiment.json`` equals ``identity`` (or, when that file is
        missing or unreadable, whose learners' checkpoints carry its fingerprint) has its
        checkpoints moved into :attr:`partial`, and every file of them is checked
        (:meth:`~stabl_jax.checkpoint.ExperimentCheckpoints.verify`). A folder that holds no
        finished chunk is removed; one with checkpoints of another experiment, or that cannot
        be identified, only with ``force``. ``log`` receives one line per decision.

        Returns:
          What was taken over, or ``None``.

        Raises:
          OutputError: an interrupted run of a different (or unidentifiable) experiment left
            checkpoints there and ``force`` is false.
          CheckpointMismatch: a checkpoint taken over is damaged and ``force`` is false
            (``force`` discards it: that learner is recomputed).
        """
        identity = json.loads(json.dumps(dict(identity), sort_keys=True))
        taken: Resumed | None = None
        for path, lock in self._dead_partials():
            try:
                if is_complete(path):  # stopped while moving its results into place
                    log(f"left {path.name} alone: it holds the complete results of a run")
                    continue
                source = path / checkpoint.CHECKPOINT_DIR
                found = checkpoint.read_identity(source)
                matches = (
                    None if found is not None else checkpoint.fingerprints_match(source, identity)
                )
                if found is None and matches is None:
                    log(f"removed {path.name}: an interrupted run with no finished chunk")
                elif found == identity or (found is None and matches):
                    if taken is None:
                        if found is None:
                            log(
                                f"{path.name}: {checkpoint.IDENTITY} is missing or unreadable, "
                                "but its checkpoints carry this experiment's fingerprint"
                            )
                        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
                        os.replace(source, self.checkpoint_dir)
                        taken = Resumed(source=path, progress={})
                    else:
                        log(f"removed {path.name}: an older interrupted run of this experiment")
                elif not force:
                    what = (
                        f"a different experiment ({checkpoint.describe_mismatch(found, identity)})"
                        if found is not None
                        else f"an experiment it cannot identify ({checkpoint.IDENTITY} is "
                        "missing or unreadable and its checkpoints do not carry this "
                        "experiment's fingerprint, or are damaged)"
                    )
                    raise OutputError(
                        f"{path} holds checkpoints of an interrupted run of {what}; rerun that "
                        "exact command to resume it, or pass --force to discard it"
                    )
                else:
                    log(f"discarded {path.name}: checkpoints of another experiment (--force)")
                shutil.rmtree(path)
            finally:
                os.close(lock)
        if taken is not None:
            store = checkpoint.ExperimentCheckpoints(self.checkpoint_dir, identity)
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
        """``fsync`` every file, write ``COMPLETE``, drop the checkpoints and move the folder
        into place; returns the final path.

        Raises:
          OutputError: ``<out>`` appeared meanwhile (another run finished first, or someone
            created it) and may not be replaced: the results are kept in
            ``<out>.conflict-<run id>``, which the message names.
        """
        _fsync_tree(self.partial, skip=checkpoint.CHECKPOINT_DIR)
        stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds") + "\n"
        checkpoint.atomic_write(self.partial / COMPLETE, lambda f: f.write(stamp.encode()))
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
        checkpoint.fsync_dir(self.final.parent)
        if old is not None and _marker(old) is not None:
            shutil.rmtree(old, ignore_errors=True)
        self.committed = True
        self._release()
        return self.final

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
        return bool(checkpoint.learner_folders(self.checkpoint_dir))

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # An interrupted run keeps its checkpoints: the same command resumes from them.
        if not self.committed and not self.has_checkpoints():
            self.discard()
        self._release()


# --------------------------------------------------------------------------------------------
# Contents
# --------------------------------------------------------------------------------------------


def _stat(values: np.ndarray, axis: int = 0) -> dict[str, Any]:
    """``{"mean", "ci95"}`` over runs (``ci95``: half-width of the normal 95% interval)."""
    mean, half = metrics.mean_ci(values, axis=axis)
    return {"mean": _clean(mean), "ci95": _clean(half)}


def _clean(value: Any) -> Any:
    """JSON-ready: arrays to lists, numpy scalars to Python, NaN/inf to ``None``."""
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # e.g. a Domain
        return {"class": type(value).__name__, **_clean(_static_fields(value))}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return _clean(value.tolist())
    if isinstance(value, np.generic):
        return _clean(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def environment_info() -> dict[str, Any]:
    """Versions, the code's commit and dirtiness (:func:`stabl_jax.provenance.code_version`),
    Python, platform and the JAX device the run used."""
    devices = jax.devices()
    return {
        "code": provenance.code_version(),
        "versions": {
            "stabl_jax": __version__,
            "jax": jax.__version__,
            "jaxlib": installed_version("jaxlib"),
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "python": sys.version,
        "platform": platform.platform(),
        "jax_config": {
            "x64": bool(jax.config.jax_enable_x64),
            "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
            "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS"),
        },
        "device": {
            "platform": devices[0].platform,
            "kind": devices[0].device_kind,
            "count": len(devices),
        },
    }


def _static_fields(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        # Fields left out of repr (a learner's validate switch) are how it ran, not what it is.
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.repr}
    return {}


def _params_dict(params: Any) -> dict[str, Any]:
    if not dataclasses.is_dataclass(params):
        return {}
    return {
        f.name: np.asarray(getattr(params, f.name)).tolist() for f in dataclasses.fields(params)
    }


def _learner_header(outcome: Any) -> dict[str, Any]:
    """What every learner's summary starts with: names, constructor, params, timings."""
    learner = outcome.learner
    return {
        "label": plots.label(outcome.name),
        "class": type(learner).__name__,
        "num_queries": int(learner.num_queries),
        "constructor": _static_fields(learner),
        "params": _params_dict(outcome.params),
        "compile_seconds": outcome.result.compile_seconds,
        "run_seconds": outcome.result.run_seconds,
        "simulate_seconds": outcome.wall_seconds,
    }


def learner_summary(outcome: LearnerOutcome, window_lengths: tuple[int, ...]) -> dict[str, Any]:
    """Metrics of one learner (means and 95% half-widths over runs)."""
    result = outcome.result
    reward = 1.0 - result.loss.astype(np.float64)
    return {
        **_learner_header(outcome),
        "mean_reward": _stat(reward.mean(axis=1)),
        "segment_reward": _stat(outcome.segment_reward),
        "adaptive_regret": {
            "window_lengths": list(window_lengths),
            "sampled": _stat(outcome.sa_sampled),
            "expected": _stat(outcome.sa_expected),
        },
        "prob_best": {
            "overall": _stat(result.prob_best.astype(np.float64).mean(axis=1)),
            "per_segment": _stat(outcome.prob_best_segment),
        },
        "num_muted": outcome.num_muted,
    }


def _fixed_change_points(env: Any) -> tuple[int, ...] | None:
    """The environment's change points, or ``None`` when they are drawn per run."""
    if getattr(env, "random_change_points", False):
        return None
    return tuple(int(t) for t in env.change_points)


def _summary_header(result: Any, started: str | None) -> dict[str, Any]:
    """The parts of ``summary.json`` every experiment kind shares: identity, config,
    environment, versions and timings."""
    config = result.config
    env = result.env
    points = _fixed_change_points(env)
    return {
        "format": FORMAT,
        "kind": config.kind,
        "name": config.name,
        "description": config.description,
        "started": started,
        "seed": config.seed,
        "runs": config.runs,
        "horizon": config.horizon,
        "config": config.to_dict(),
        "env": {
            "name": config.env.name,
            "class": type(env).__name__,
            **_static_fields(env),
            "change_points": None if points is None else list(points),
        },
        **environment_info(),
        "timings": {
            "wall_seconds": result.wall_seconds,
            "metrics_seconds": result.metrics_seconds,
            "chunk_size": result.chunk_size,
            "learners": {
                name: {
                    "compile_seconds": o.result.compile_seconds,
                    "run_seconds": o.result.run_seconds,
                }
                for name, o in result.outcomes.items()
            },
        },
    }


def build_summary(result: ExperimentResult, *, started: str | None = None) -> dict[str, Any]:
    """The ``summary.json`` document of an experiment."""
    config = result.config
    summary: dict[str, Any] = {
        **_summary_header(result, started),
        "notes": {
            "ci95": "half-width of the normal 95% interval over runs, 1.96 sd / sqrt(runs)",
            "segment_reward": "per run, mean of 1 - l_t(x_t) over each segment",
            "adaptive_regret": "SA(L) = max over windows of length L of (learner's loss - "
            "best arm's loss); 'sampled' uses l_t(x_t), 'expected' uses <p_t, l_t>",
            "prob_best": "play probability of the arm with the smallest mean loss at round t",
            "num_muted": "StABL meta-weight updates with 1 + eta_k r~ <= 0, summed over runs",
            "paired": "every learner was simulated with the same key: identical environment "
            "draws in every run",
        },
        "learners": {
            name: learner_summary(outcome, config.sa_windows)
            for name, outcome in result.outcomes.items()
        },
        "files": {"summary": SUMMARY, "traces": TRACES, "plots": dict(PLOT_FILES)},
    }
    return _clean(summary)


def trace_arrays(result: ExperimentResult) -> dict[str, np.ndarray]:
    """Arrays of ``traces.npz``. Always: per learner the per-run SA(L) (``sa_sampled``,
    ``sa_expected``, ``(R, len(L))`` float64) and ``segment_reward`` (``(R, S)`` float64,
    the mean of ``1 - l_t(x_t)`` over each segment), ``env/change_points`` ``(R, S - 1)``
    int32 and ``sa_window_lengths``. Then the ``(R, T)`` traces named by the config's
    ``save_traces``: ``loss``, ``expected_loss`` and ``prob_best`` as float32 (exactly the
    simulated values), ``played`` as :func:`~stabl_jax.config.arm_dtype` (``uint8`` up to 256
    arms)."""
    arrays: dict[str, np.ndarray] = {
        "env/change_points": result.change_points.astype(np.int32),
        "sa_window_lengths": np.asarray(result.config.sa_windows, np.int64),
    }
    for name, outcome in result.outcomes.items():
        res = outcome.result
        for field in result.config.save_traces:
            dtype = saved_dtype(field, result.env.num_arms)
            arrays[f"{name}/{field}"] = getattr(res, field).astype(dtype)
        arrays[f"{name}/segment_reward"] = outcome.segment_reward.astype(np.float64)
        arrays[f"{name}/sa_sampled"] = outcome.sa_sampled.astype(np.float64)
        arrays[f"{name}/sa_expected"] = outcome.sa_expected.astype(np.float64)
    return arrays


def _moving_band(name: str, values: np.ndarray, window: int, label: str) -> plots.Band:
    mean, half = metrics.mean_ci(metrics.moving_average(values, window), axis=0)
    return plots.Band(name=name, label=label, x=np.arange(values.shape[1]), mean=mean, half=half)


def _regret_band(name: str, sa: np.ndarray, window_lengths: Any, num_queries: int) -> plots.Band:
    """SA(L) against L over runs, with the queries per round in the legend."""
    mean, half = metrics.mean_ci(sa, axis=0)
    queries = f"{num_queries} {'query' if num_queries == 1 else 'queries'}/round"
    return plots.Band(
        name=name,
        label=f"{plots.label(name)} ({queries})",
        x=np.asarray(window_lengths),
        mean=mean,
        half=half,
    )


def render_plots(result: ExperimentResult, folder: str | Path) -> list[Path]:
    """Draw the three PNGs of an experiment into ``folder``."""
    config = result.config
    env = result.env
    window = config.window
    reward, regret, prob = [], [], []
    for name, outcome in result.outcomes.items():
        res = outcome.result
        text = plots.label(name)
        reward.append(_moving_band(name, 1.0 - res.loss.astype(np.float64), window, text))
        prob.append(_moving_band(name, res.prob_best.astype(np.float64), window, text))
        regret.append(
            _regret_band(name, outcome.sa_sampled, config.sa_windows, outcome.learner.num_queries)
        )
    change_points = _fixed_change_points(env) or ()
    setting = (
        f"{config.env.name}, N={env.num_arms}, T={config.horizon}, {config.runs} runs, "
        f"feedback={config.feedback}"
    )
    titles = {
        "reward": f"{config.name}: reward ({setting})\nmean over runs with 95% band",
        "adaptive_regret": f"{config.name}: strongly adaptive regret SA(L), sampled loss\n"
        f"({setting}; mean with 95% band)",
        "prob_best": f"{config.name}: probability on the current best arm\n({setting})",
    }
    return plots.write_plots(
        folder,
        reward=reward,
        adaptive_regret=regret,
        prob_best=prob,
        titles=titles,
        window=window,
        change_points=change_points,
        filenames=PLOT_FILES,
    )


# --- bandit convex optimisation ---------------------------------------------------------------


def bco_learner_summary(outcome: Any, window_lengths: tuple[int, ...]) -> dict[str, Any]:
    """Metrics of one BCO learner (means and 95% half-widths over runs)."""
    return {
        **_learner_header(outcome),
        "mean_loss": _stat(outcome.result.loss.astype(np.float64).mean(axis=1)),
        "adaptive_regret": {"window_lengths": list(window_lengths), "sa": _stat(outcome.sa)},
        "num_muted": outcome.num_muted,
    }


def build_bco_summary(result: BCOExperimentResult, *, started: str | None = None) -> dict[str, Any]:
    """The ``summary.json`` document of a BCO experiment."""
    config = result.config
    summary: dict[str, Any] = {
        **_summary_header(result, started),
        "adaptive_regret": {
            "window_lengths": list(config.sa_windows),
            **result.sa_method,
            "comparator_gap": {
                "max": result.comparator_gap.max(axis=0),
                "mean": result.comparator_gap.mean(axis=0),
            },
        },
        "notes": {
            "ci95": "half-width of the normal 95% interval over runs, 1.96 sd / sqrt(runs)",
            "mean_loss": "per run, mean of the suffered loss l_t(x_t) over the T rounds (every "
            "round's minimum over K is 0 for the moving target)",
            "adaptive_regret": "SA(L) = max over the windows [j, j + L) of the grid of (sum of "
            "l_t(x_t) - min over x in K of sum of l_t(x)), from the suffered loss",
            "comparator_gap": "largest Frank-Wolfe certificate g^T x - min_K g^T y of a window "
            "comparator, per L (max and mean over runs; shared by all learners): the exact "
            "SA(L) on the grid lies in [SA, SA + gap]",
            "num_muted": "meta-weight updates with 1 + eta_k r~ <= 0 (Algorithm 3 and "
            "Appendix D), summed over runs",
            "paired": "every learner was simulated with the same key: identical environment "
            "draws in every run",
        },
        "learners": {
            name: bco_learner_summary(outcome, config.sa_windows)
            for name, outcome in result.outcomes.items()
        },
        "files": {"summary": SUMMARY, "traces": TRACES, "plots": dict(BCO_PLOT_FILES)},
    }
    return _clean(summary)


def bco_trace_arrays(result: BCOExperimentResult) -> dict[str, np.ndarray]:
    """Arrays of a BCO ``traces.npz``: per learner ``loss`` and ``best_loss`` (``(R, T)``
    float32) and ``sa`` (``(R, len(L))`` float64); ``comparator_gap`` ``(R, len(L))``,
    ``env/change_points`` ``(R, S - 1)`` int32 and ``sa_window_lengths``."""
    arrays: dict[str, np.ndarray] = {
        "env/change_points": result.change_points.astype(np.int32),
        "sa_window_lengths": np.asarray(result.config.sa_windows, np.int64),
        "comparator_gap": result.comparator_gap.astype(np.float64),
    }
    for name, outcome in result.outcomes.items():
        arrays[f"{name}/loss"] = outcome.result.loss.astype(np.float32)
        arrays[f"{name}/best_loss"] = outcome.result.best_loss.astype(np.float32)
        arrays[f"{name}/sa"] = outcome.sa.astype(np.float64)
    return arrays


def render_bco_plots(result: BCOExperimentResult, folder: str | Path) -> list[Path]:
    """Draw the two PNGs of a BCO experiment into ``folder``."""
    config = result.config
    env = result.env
    loss, regret = [], []
    for name, outcome in result.outcomes.items():
        values = outcome.result.loss.astype(np.float64)
        loss.append(_moving_band(name, values, config.window, plots.label(name)))
        regret.append(
            _regret_band(name, outcome.sa, config.sa_windows, outcome.learner.num_queries)
        )
    setting = (
        f"{config.env.name}, d={env.dim}, {type(env.domain).__name__.lower()}, "
        f"T={config.horizon}, {config.runs} runs"
    )
    folder = Path(folder)
    return [
        plots.plot_loss(
            loss,
            folder / BCO_PLOT_FILES["loss"],
            title=f"{config.name}: loss l_t(x_t) ({setting})\nmean over runs with 95% band",
            window=config.window,
            change_points=_fixed_change_points(env) or (),
        ),
        plots.plot_adaptive_regret(
            regret,
            folder / BCO_PLOT_FILES["adaptive_regret"],
            title=f"{config.name}: strongly adaptive regret SA(L)\n({setting}; mean with 95% band)",
        ),
    ]


def write_results(
    result: ExperimentResult | BCOExperimentResult | HPOExperimentResult,
    folder: ResultsFolder,
    *,
    started: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write summary, traces and plots into ``folder.partial``, then commit it.

    Args:
      result: the experiment's results.
      folder: the folder being built.
      started: ISO time the run started.
      extra: more top-level entries of ``summary.json`` (the command line adds ``command``
        and ``resumed``).

    Returns:
      The final folder path.
    """
    if isinstance(result, BCOExperimentResult):
        summary = build_bco_summary(result, started=started)
        arrays, render = bco_trace_arrays(result), render_bco_plots
    elif getattr(result.config, "kind", None) == "hpo":
        from stabl_jax import hpo_experiment as hpo

        summary = hpo.build_hpo_summary(result, started=started)
        arrays, render = hpo.hpo_trace_arrays(result), hpo.render_hpo_plots
    else:
        summary = build_summary(result, started=started)
        arrays, render = trace_arrays(result), render_plots
    summary.update(_clean(dict(extra or {})))
    text = json.dumps(summary, indent=2, allow_nan=False)
    (folder.partial / SUMMARY).write_text(text + "\n", encoding="utf-8")
    tables.write_csv(tables.summary_rows(summary), folder.partial / tables.CSV_NAME)
    # Uncompressed: 0.5 s instead of 11 s for the default run's traces, for 27% more bytes.
    np.savez(folder.partial / TRACES, **arrays)
    render(result, folder.partial)
    return folder.commit()


def read_traces(folder: str | Path) -> dict[str, np.ndarray]:
    """Every array of ``<folder>/traces.npz`` (loaded with ``allow_pickle=False``)."""
    with np.load(Path(folder) / TRACES, allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def read_summary(folder: str | Path) -> dict[str, Any]:
    """``<folder>/summary.json`` as a dict."""
    return json.loads((Path(folder) / SUMMARY).read_text(encoding="utf-8"))
