"""Results folders as tables: :func:`load_results`, the readers, the tidy ``results.csv``, and
the JSON-ready numbers (:func:`stat`, :func:`clean`) a summary is made of.

Example:
  >>> res = load_results("results/expert_advice_equal-seed0")  # doctest: +SKIP
  >>> res.rows()[0]  # doctest: +SKIP
  {'learner': 'uniform', 'problem': '', 'metric': 'mean_reward', 'window': '', ...}
  >>> res.to_dataframe().query("metric == 'sa_sampled'")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import functools
import io
import json
import math
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stabl_jax import metrics
from stabl_jax.experiment import files, provenance

#: The ``format`` of every ``summary.json``.
FORMAT = "stabl_jax.results/1"
SUMMARY = "summary.json"
TRACES = "traces.npz"
COLUMNS: tuple[str, ...] = ("learner", "problem", "metric", "window", "segment", "mean", "ci95")
CSV_NAME = "results.csv"

#: Keys of a learner's summary that describe it rather than measure it.
_NOT_METRICS = frozenset({"label", "class", "constructor", "params", "num_queries"})


def is_number(x: Any) -> bool:
    """Whether a JSON value ``x`` is a number (an int or a float, not a bool)."""
    return isinstance(x, int | float) and not isinstance(x, bool)


def _metric_rows(metric: str, node: Any, windows: list[int] | None) -> Iterator[dict[str, Any]]:
    """Rows of one metric node of a learner's summary (recursive over sub-metrics)."""
    if isinstance(node, Mapping) and "mean" in node and "ci95" in node:
        means, halves = node["mean"], node["ci95"]
        if isinstance(means, list):
            for i, (m, h) in enumerate(zip(means, halves, strict=True)):
                where = {"window": windows[i]} if windows is not None else {"segment": i + 1}
                yield {"metric": metric, "mean": m, "ci95": h, **where}
        else:
            yield {"metric": metric, "mean": means, "ci95": halves}
    elif isinstance(node, Mapping):
        sub_windows = node.get("window_lengths", windows)
        for key, child in node.items():
            if key == "window_lengths":
                continue
            if metric.endswith("adaptive_regret"):  # .../sampled -> sa_sampled, .../sa -> sa
                stem = metric.removesuffix("adaptive_regret")  # "paired_" of a difference
                name = stem + ("sa" if key == "sa" else f"sa_{key}")
            else:
                name = f"{metric}_{key}"
            yield from _metric_rows(name, child, sub_windows)
    elif is_number(node):
        yield {"metric": metric, "mean": node, "ci95": None}


def _learner_rows(learner: str, summary: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    for metric, node in summary.items():
        if metric in _NOT_METRICS or metric.endswith("_seconds"):
            continue
        if metric.endswith("_ci") and metric[: -len("_ci")] in summary:
            continue  # the interval of the metric before it (algorithm-selection summaries)
        for row in _metric_rows(metric, node, None):
            if row["ci95"] is None and is_number(summary.get(f"{metric}_ci")):
                row["ci95"] = summary[f"{metric}_ci"]
            yield {"learner": learner, **row}


def summary_rows(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tidy rows (:data:`COLUMNS`) of a ``summary.json`` dict, of any kind."""
    rows: list[dict[str, Any]] = []
    groups = [("", summary.get("learners", {})), *summary.get("problems", {}).items()]
    for problem, learners in groups:
        for learner, node in learners.items():
            rows += [{"problem": problem, **row} for row in _learner_rows(learner, node)]
    return [{c: row.get(c, "") if row.get(c) is not None else "" for c in COLUMNS} for row in rows]


def write_csv(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write tidy rows as CSV (header :data:`COLUMNS`, floats to 17 digits), atomically."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=COLUMNS)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    path = Path(path)
    files.atomic_write(path, lambda f: f.write(text.getvalue().encode("utf-8")))
    return path


@dataclasses.dataclass(frozen=True)
class Results:
    """A results folder, read back: the ``folder`` and its ``summary.json`` as ``summary``."""

    folder: Path
    summary: Mapping[str, Any]

    @property
    def config(self) -> Mapping[str, Any]:
        """The resolved config the folder was made from (every default filled in)."""
        return self.summary.get("config", {})

    @property
    def learners(self) -> list[str]:
        """The learners' registry names, in the order they were run."""
        names = list(self.summary.get("learners", {}))
        return names or list(self.config.get("learners", []))

    @functools.cached_property
    def traces(self) -> TraceFile:
        """``traces.npz``'s arrays, each read on first access (empty when there is none).

        The ``(R, T)`` traces present (``res.traces["stabl/played"]``, in the smallest unsigned
        dtype) are ``res.config["save_traces"]``.
        """
        return TraceFile(files.verify(self.folder, "traces.npz"))

    def rows(self) -> list[dict[str, Any]]:
        """The tidy rows of :func:`summary_rows`."""
        return summary_rows(self.summary)

    def to_dataframe(self) -> Any:
        """The rows as a ``pandas.DataFrame`` (pandas is not a dependency)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError(
                "to_dataframe needs pandas (pip install pandas); rows() and the folder's "
                f"{CSV_NAME} give the same table without it"
            ) from exc
        frame = pd.DataFrame(self.rows(), columns=list(COLUMNS))
        for column in ("window", "segment", "mean", "ci95"):
            frame[column] = pd.to_numeric(frame[column], errors="coerce")
        return frame

    def to_csv(self, path: str | Path | None = None) -> Path:
        """Write the tidy table (default: ``<folder>/results.csv``)."""
        return write_csv(self.rows(), self.folder / CSV_NAME if path is None else path)


#: What reading a damaged .npz raises: anything an archive or ``.npy`` header can make
#: zipfile or NumPy's header parser raise (RuntimeError, NotImplementedError, TokenError, ...).
_DAMAGED = (Exception,)


class TracesDamaged(files.DamagedFile):
    """An ``.npz`` of traces cannot be read: not an ``.npz``, cut short, or a byte changed."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        ValueError.__init__(
            self,
            f"{path} cannot be read ({reason}): the file is damaged or not an .npz; run what "
            "wrote it again",
        )


class TraceFile(Mapping[str, np.ndarray]):
    """The arrays of one ``.npz`` file as a read-only mapping, each read on first access
    (no file stays open between accesses).

    Args:
      path: the ``.npz`` file (as :func:`numpy.savez` writes it).
      missing_ok: a missing file is an empty mapping (else ``FileNotFoundError``).
    """

    def __init__(self, path: Path, missing_ok: bool = True) -> None:
        self._path = path
        self._names: tuple[str, ...] = ()
        if path.exists() or not missing_ok:
            with self._archive() as archive:
                members = archive.namelist()
            odd = [m for m in members if not m.endswith(".npy")]
            if odd:  # np.savez writes .npy members only: a changed name would hide an array
                raise TracesDamaged(path, f"member {odd[0]!r} is not an array")
            self._names = tuple(m.removesuffix(".npy") for m in members)
        self._arrays: dict[str, np.ndarray] = {}

    @contextlib.contextmanager
    def _archive(self) -> Iterator[zipfile.ZipFile]:
        """The file open as a zip archive; read errors as :class:`TracesDamaged`."""
        try:
            with zipfile.ZipFile(self._path) as archive:
                yield archive
        except (TracesDamaged, FileNotFoundError):
            raise
        except _DAMAGED as exc:
            raise TracesDamaged(self._path, f"{type(exc).__name__}: {exc}") from None

    def read(self, names: Iterable[str] | None = None) -> dict[str, np.ndarray]:
        """The arrays ``names`` (default: all); those not yet read are read in one pass."""
        names = self._names if names is None else tuple(names)
        for name in names:
            if name not in self._names:
                raise KeyError(f"{name!r} is not a trace of {self._path}; it has {self._names}")
        unread = [name for name in names if name not in self._arrays]
        if unread:
            with self._archive() as archive:
                for name in unread:
                    with archive.open(f"{name}.npy") as member:  # streamed, in chunks
                        array = np.lib.format.read_array(member, allow_pickle=False)
                        left = len(member.read())  # to the end, where the CRC-32 is checked
                    if left:
                        raise ValueError(f"{left} bytes of {name} after its array")
                    self._arrays[name] = array
        return {name: self._arrays[name] for name in names}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.read((name,))[name]

    def __contains__(self, name: object) -> bool:
        """Whether the file holds ``name``, without reading it."""
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    @property
    def path(self) -> Path:
        """The ``.npz`` file."""
        return self._path

    @property
    def files(self) -> list[str]:
        """The names, as NumPy's ``NpzFile.files`` gives them."""
        return list(self._names)


def finished_folder(folder: str | Path, name: str = "summary.json") -> Path:
    """``folder`` as a path when it holds ``name``, else ``FileNotFoundError``."""
    folder = Path(folder)
    if not (folder / name).is_file():
        raise FileNotFoundError(
            f"{folder} has no {name}: not a finished results folder of stabl-jax run"
        )
    return folder


def load_results(folder: str | Path) -> Results:
    """Read a results folder written by ``stabl-jax run``.

    Args:
      folder: the folder (it holds ``summary.json``).

    Returns:
      A :class:`Results` (config, per-learner summaries, lazy traces, tidy rows).

    Raises:
      FileNotFoundError: no ``summary.json`` in ``folder`` (a run still writing it has
        ``<folder>.partial-*``).
      ValueError: ``summary.json`` is not a JSON object.
    """
    folder = finished_folder(folder)
    files.verify(folder, "results.csv")
    summary = read_json_object(files.verify(folder, "summary.json"), "rerun the experiment")
    return Results(folder, summary)


def read_json_object(path: str | Path, remedy: str) -> dict[str, Any]:
    """The JSON object in the file ``path``.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not UTF-8 JSON, or not an object; the message ends with ``remedy``.
    """
    path = Path(path)
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); {remedy}") from None
    if not isinstance(found, dict):
        raise ValueError(f"{path} holds a JSON {type(found).__name__}, not an object; {remedy}")
    return found


def text_table(rows: list[list[str]], footer: str) -> str:
    """Rows of cells as an aligned text table (first row the header) with a footer line."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, footer])


def plus_minus(mean: float, half: float, digits: int) -> str:
    """``"0.512±0.004"`` (just the mean when the half-width is not finite)."""
    if not np.isfinite(half):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f}±{half:.{digits}f}"


def byte_size(count: float) -> str:
    """``1536`` -> ``"1.5 KiB"``: a byte count for people (B, KiB, ..., TiB)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


def read_traces(folder: str | Path) -> dict[str, np.ndarray]:
    """Every array of ``<folder>/traces.npz`` (``allow_pickle=False``).

    Raises:
      FileNotFoundError: ``folder`` is not a finished results folder.
      ValueError: the file is damaged.
    """
    return TraceFile(finished_folder(folder, TRACES) / TRACES).read()


def read_summary(folder: str | Path) -> dict[str, Any]:
    """``<folder>/summary.json`` as a dict (errors as :func:`load_results`)."""
    return dict(load_results(folder).summary)


def stat(values: np.ndarray, axis: int = 0) -> dict[str, Any]:
    """``{"mean", "ci95"}`` over runs: :func:`stabl_jax.metrics.mean_ci`, the mean and the
    half-width of its Student-t 95% interval (``None`` where not finite)."""
    mean, half = metrics.mean_ci(values, axis=axis)
    return {"mean": clean(mean), "ci95": clean(half)}


def clean(value: Any) -> Any:
    """JSON-ready: arrays to lists, numpy scalars to Python, NaN/inf to ``None``, a function
    or class to its import path ``"module:qualname"``."""
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # e.g. a Domain
        return {"class": type(value).__name__, **clean(provenance.static_fields(value))}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if callable(value) and hasattr(value, "__qualname__"):  # a user environment's loss function
        return f"{value.__module__}:{value.__qualname__}"
    if isinstance(value, np.ndarray | np.generic):
        return clean(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
