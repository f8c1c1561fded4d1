"""Two results folders compared number by number (``stabl-jax compare A B``).

Example:
  >>> from stabl_jax.experiment.compare import compare_folders
  >>> comparison = compare_folders("results/a", "results/b")  # doctest: +SKIP
  >>> comparison.equal  # doctest: +SKIP
  True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from stabl_jax.experiment import tables

#: Top-level fields of ``summary.json`` that record when, where and how a run was made, left
#: out of a comparison.
RUN_RECORD = frozenset(
    "started command resumed code versions python platform jax_config device cpu environment "
    "timings".split()
)
#: Keys that record how long, when or where a part of a run was made, at any depth: a
#: sweep's per-learner ``seconds`` and ``programs_compiled`` (what the process had compiled
#: before), any ``*_seconds``, a start or end time, a host.
TIMING = frozenset("seconds programs_compiled elapsed started finished hostname host".split())
#: Fields of the recorded config that say how it was given, not what it is.
CONFIG_RECORD = frozenset({"source", "overrides"})
#: How many differences :meth:`Comparison.lines` lists per file by default.
SHOWN = 20
#: A float array's largest difference is also given in ulps up to this many.
ROUNDING_ULPS = 2**20


@dataclasses.dataclass(frozen=True)
class Difference:
    """One summary value or traces array that is not the same in both folders.

    Attributes:
      where: ``"summary.json"`` or ``"traces.npz"``.
      name: the value's path (``learners.stabl.mean_reward.mean``) or the array's name
        (``stabl/expected_loss``).
      detail: what differs, in words, or in which folder alone it is.
      only_in: the folder that alone holds it, or ``None`` when both do.
    """

    where: str
    name: str
    detail: str
    only_in: Path | None = None


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare_folders`.

    Attributes:
      a, b: the two folders.
      rtol: the relative tolerance used (0: bit for bit).
      numbers: how many numbers of ``summary.json`` were compared.
      fields: how many other values of ``summary.json`` were compared.
      arrays: how many arrays of ``traces.npz`` were compared.
      differences: every difference, summary values first, in the files' order.
    """

    a: Path
    b: Path
    rtol: float
    numbers: int
    fields: int
    arrays: int
    differences: tuple[Difference, ...]

    @property
    def equal(self) -> bool:
        """Whether every compared value and array is the same and none is in one folder only."""
        return not self.differences

    def lines(self, shown: int = SHOWN) -> list[str]:
        """The report ``stabl-jax compare`` prints, with at most ``shown`` differences per file."""
        tolerance = "bit for bit" if self.rtol == 0 else f"to a relative {self.rtol:g}"
        out = [
            f"comparing {self.a} with {self.b} ({tolerance}; the run record of summary.json "
            "is left out: start time, command, code, versions, platform, device, CPU, timings, "
            "and every seconds, programs_compiled, elapsed, started, finished or host field)"
        ]
        for where, counted in (
            ("summary.json", f"{self.numbers:,} numbers and {self.fields:,} other values"),
            ("traces.npz", f"{self.arrays:,} arrays"),
        ):
            found = [d for d in self.differences if d.where == where]
            unequal = [d for d in found if d.only_in is None]
            line = f"{where}: {counted} in both: " + (
                f"{len(unequal):,} differ" if unequal else "equal"
            )
            for folder in (self.a, self.b):
                alone = sum(d.only_in == folder for d in found)
                line += f"; {alone:,} only in {folder}" if alone else ""
            out.append(line)
            out += [f"  {d.name}: {d.detail}" for d in found[:shown]]
            if len(found) > shown:
                out.append(f"  ... and {len(found) - shown:,} more (--all lists them)")
        one_side = sum(d.only_in is not None for d in self.differences)
        out.append(
            "the same numbers"
            if self.equal
            else f"different: {len(self.differences) - one_side:,} values or arrays differ, "
            f"{one_side:,} are in one folder only"
        )
        return out


def _leaves(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """``(path, value)`` of every leaf of a JSON tree: ``a.b[2].c``."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, f"{path}[{i}]")
    else:
        yield path, node


def _is_run_record(path: str) -> bool:
    keys = [part.partition("[")[0] for part in path.split(".")]
    in_config = keys[0] == "config" and len(keys) > 1 and keys[1] in CONFIG_RECORD
    timing = any(k in TIMING or k.endswith("_seconds") for k in keys)
    return keys[0] in RUN_RECORD or in_config or timing


def _close(x: Any, y: Any, rtol: float) -> np.ndarray:
    """Where two float arrays agree: equal, both NaN, or at most ``rtol`` relatively apart."""
    x, y = np.asarray(x), np.asarray(y)
    with np.errstate(invalid="ignore", over="ignore"):
        bound = rtol * np.maximum(np.abs(x), np.abs(y))
        return (x == y) | (np.isnan(x) & np.isnan(y)) | (np.abs(x - y) <= bound)


def _paired(left: Any, right: Any, folders: tuple[Path, Path]) -> Iterator[tuple[str, Any]]:
    """Names of ``left`` then of ``right`` alone, with the folder alone holding each (or None)."""
    for name in [*left, *(n for n in right if n not in left)]:
        yield name, None if name in left and name in right else folders[name not in left]


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance of two same-dtype float arrays in units in the last place, as ``uint64``.

    ``+0`` and ``-0`` are 0 apart; exact for float16 and float32, and float64 below 2^63 steps.

    Example:
      >>> x = np.float32(1.0)
      >>> int(ulps(np.array([x]), np.array([np.nextafter(x, np.float32(2))]))[0])
      1
    """
    if a.dtype != b.dtype or not _floating(a):
        raise ValueError(f"ulps needs two float arrays of one dtype, got {a.dtype} and {b.dtype}")
    bits = np.dtype(f"int{8 * a.dtype.itemsize}")
    least = np.int64(-(2 ** (8 * a.dtype.itemsize - 1)))  # the sign bit alone: -0.0

    def ordered(x: np.ndarray) -> np.ndarray:
        # Sign and magnitude to an integer line on which adjacent floats are adjacent.
        i = np.ascontiguousarray(x).view(bits).astype(np.int64)
        return np.where(i < 0, least - i, i)

    with np.errstate(over="ignore"):
        d = (ordered(a) - ordered(b)).astype(np.uint64)  # modulo 2^64: exact below 2^63
    return np.minimum(d, np.uint64(0) - d)


def _floating(x: np.ndarray) -> bool:
    return bool(np.issubdtype(x.dtype, np.floating))


def _integral(x: np.ndarray) -> bool:
    return bool(np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.bool_))


def _array_difference(x: np.ndarray, y: np.ndarray, rtol: float) -> str | None:
    """Why two traces differ, or ``None`` when they agree."""
    if x.shape != y.shape:
        return f"shape {x.shape} != {y.shape}"
    if x.dtype != y.dtype and not (_integral(x) and _integral(y)):
        return f"dtype {x.dtype} != {y.dtype}"
    unequal = ~_close(x, y, rtol) if _floating(x) else x != y
    count = int(np.count_nonzero(unequal))
    if count == 0:
        return None
    first = tuple(int(i) for i in np.argwhere(unequal)[0])
    detail = f"{count:,} of {x.size:,} entries differ (first at {list(first)}"
    if x.ndim == 2:  # (R, T) traces: where each run parts ways
        rows = unequal.any(axis=1)
        starts = np.argmax(unequal[rows], axis=1)
        detail += (
            f"; in {int(rows.sum()):,} of {x.shape[0]:,} runs, from column {int(starts.min()):,}"
            f" at the earliest (median {int(np.median(starts)):,})"
        )
    if _floating(x):
        xs, ys = x[unequal], y[unequal]
        finite = np.isfinite(xs) & np.isfinite(ys)
        if finite.any():
            xf, yf = xs[finite].astype(np.float64), ys[finite].astype(np.float64)
            with np.errstate(over="ignore"):
                gap = np.abs(xf - yf)
            rel = gap / np.maximum(np.abs(xf), np.abs(yf))
            steps = int(ulps(xs[finite], ys[finite]).max())
            detail += f"; largest difference {gap.max():.3g}, relative {rel.max():.3g}"
            # In ulps where the two differ by rounding (up to about a million steps).
            detail += f", {steps:,} ulps of {x.dtype}" if steps <= ROUNDING_ULPS else ""
        if not finite.all():
            detail += f"; {int((~finite).sum()):,} where one side is not finite"
    else:
        detail += f": {x[first]} != {y[first]}"
    return detail + ")"


def compare_folders(a: str | Path, b: str | Path, *, rtol: float = 0.0) -> Comparison:
    """Compare two finished results folders value by value and trace by trace.

    Args:
      a, b: results folders of ``stabl-jax run`` (``traces.npz`` may be absent).
      rtol: relative tolerance for floats, ``>= 0``; 0 compares bit for bit. Integers and
        every other value are compared exactly.

    Returns:
      A :class:`Comparison`; ``.equal`` says whether the two agree.

    Raises:
      ValueError: ``rtol`` negative or not finite, a ``summary.json`` that is not JSON, or a
        damaged ``traces.npz``.
      FileNotFoundError: a folder without ``summary.json``.
    """
    if not (isinstance(rtol, int | float) and math.isfinite(rtol) and rtol >= 0):
        raise ValueError(f"rtol must be a finite number >= 0 (0: bit for bit), got {rtol!r}")
    found = tables.load_results(a), tables.load_results(b)
    folders = (found[0].folder, found[1].folder)
    left, right = ({p: v for p, v in _leaves(r.summary) if not _is_run_record(p)} for r in found)
    diffs: list[Difference] = []
    numbers = fields = 0
    for path, alone in _paired(left, right, folders):
        if alone is not None:
            diffs.append(Difference("summary.json", path, f"only in {alone}", alone))
            continue
        x, y = left[path], right[path]
        if tables.is_number(x) and tables.is_number(y):
            numbers += 1
            floats = isinstance(x, float) or isinstance(y, float)
            same = bool(_close(x, y, rtol)) if floats else x == y
        else:
            fields += 1
            same = type(x) is type(y) and x == y
        if not same:
            diffs.append(Difference("summary.json", path, f"{x!r} != {y!r}"))
    arrays = 0
    paths = [r.traces.path for r in found]  # checked against the manifests by .traces
    for name, alone in _paired(found[0].traces, found[1].traces, folders):
        if alone is not None:
            diffs.append(Difference("traces.npz", name, f"only in {alone}", alone))
            continue
        arrays += 1
        # A fresh reader per array: a folder's traces can be larger than memory together.
        x, y = (tables.TraceFile(path)[name] for path in paths)
        detail = _array_difference(x, y, float(rtol))
        if detail is not None:
            diffs.append(Difference("traces.npz", name, f"{x.dtype} {x.shape}: {detail}"))
    return Comparison(*folders, float(rtol), numbers, fields, arrays, tuple(diffs))
