"""Test configuration: strict rank promotion, tiny sizes, shared fixtures."""

from __future__ import annotations

import builtins
import dataclasses
import errno
import io
import json
import os
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")
# The scripts of experiments/ import their folder's `_cli`, as Python finds it when it runs one
# (the script's folder is first on sys.path); the tests load them with runpy or load_script.
sys.path.append(str(Path(__file__).resolve().parent.parent / "experiments"))

from stabl_jax import LEARNERS, ExpertAdvice, make  # noqa: E402
from stabl_jax.experiment import compile_cache  # noqa: E402
from stabl_jax.experiment.outputs import MARKER, MARKER_FORMAT  # noqa: E402

# No persistent compilation cache in the tests, in the workers or in the command-line runs
# they start (which inherit the environment variable): serializing an executable for the
# cache is the one place a test process has crashed (a segmentation fault in
# ``executable.serialize()`` on CPU), and a crashed worker must never be a tolerated event.
# Programs are shared instead by the canonical sizes below and the fixtures that build each
# program once. tests/experiment/test_compile_cache.py exercises the command line's cache
# with folders of its own.
os.environ[compile_cache.ENV_VAR] = "off"

# The tests check what a program computes, and a test's programs are compiled once and run
# for a few rounds: XLA's expensive optimisation passes are skipped (JAX's own switch for
# this trade-off, also for the command-line runs the tests start), which cuts the compile
# time that dominates the suite. The optimisations keep IEEE semantics (no fast math on
# CPU); a test compares programs compiled alike, never bits stored by an optimised run.
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"
jax.config.update("jax_disable_most_optimizations", True)


@pytest.fixture(autouse=True)
def _optimized(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """A test marked ``optimized`` (a program run long enough that the passes pay: 2^20
    rounds, 10,000 arms, a documented run) compiles with XLA's optimisations, in the test
    process and in the command-line runs it starts."""
    if request.node.get_closest_marker("optimized") is None:
        yield
        return
    monkeypatch.delenv("JAX_DISABLE_MOST_OPTIMIZATIONS")
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", True)


#: The test files that take longest (worker-seconds, ``pytest --durations=0``), longest first.
#: They are dealt to the xdist workers first (``--no-loadscope-reorder`` in pyproject.toml
#: keeps this order), so that a long file never starts last while the other worker idles.
SLOWEST_FIRST = (
    "test_shipped_configs.py", "test_reference.py", "test_contract.py", "test_many_arms.py",
    "test_kernels.py", "test_faults.py", "test_traced_env_numbers.py", "test_hpo.py",
    "test_simulate.py", "test_docs.py", "test_traced_options.py", "test_metrics.py",
    "test_sweep.py", "test_multihost.py", "test_sharding.py", "test_cli.py", "test_bbob.py",
    "test_gpu_measure_script.py", "test_properties.py", "test_resume.py", "test_examples.py",
    "test_same_bits_script.py", "test_input_table.py", "test_lazy_losses.py",
    "test_bco_simulate.py", "test_bco_contract.py", "test_baselines.py",
)  # fmt: skip


def pytest_collection_modifyitems(config, items):
    """The files of :data:`SLOWEST_FIRST` first, in its order; the rest as collected."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


NUM_ARMS = 5
HORIZON = 64


def small_learner(name: str, **kwargs):
    """Registry entry ``name`` at a tiny size (Single Scale gets a length that fits T)."""
    if name == "stabl_single_scale":
        kwargs.setdefault("history_lengths", (16,))
    return make(
        name,
        num_arms=kwargs.pop("num_arms", NUM_ARMS),
        horizon=kwargs.pop("horizon", HORIZON),
        **kwargs,
    )


def recompiled(obj: Any) -> Any:
    """``obj`` (a frozen dataclass) as an instance of a subclass that adds nothing: another
    static argument, so its programs are compiled anew from the same code, and every other
    program of the process stays cached (unlike ``jax.clear_caches``)."""
    fresh = type(f"Fresh{type(obj).__name__}", (type(obj),), {})
    return fresh(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init})


def env_options(name: str, num_arms: int, num_segments: int) -> dict[str, Any]:
    """The constructor arguments registry environment ``name`` needs beyond ``num_arms``,
    ``horizon`` and the segments (``bernoulli_table``: a means table, 0.3 on arm ``j mod n``
    of segment ``j`` and 0.6 elsewhere)."""
    if name != "bernoulli_table":
        return {}
    means = [
        [0.3 if i == j % num_arms else 0.6 for i in range(num_arms)] for j in range(num_segments)
    ]
    return {"means": tuple(tuple(row) for row in means)}


def assert_params_bounded(learner: Any) -> None:
    """``param_bounds`` names exactly the fields of ``learner``'s params (a sweep may read
    the fields from it), each with a range that holds its default, and ``init`` refuses a
    value just outside it (below the lower end; above a finite upper end), naming the field,
    the value and the range."""
    params = learner.default_params
    fields = [f.name for f in dataclasses.fields(params)]
    missing = [f for f in fields if f not in learner.param_bounds]
    assert not missing, f"{type(learner).__name__} gives no range for params {missing}"
    extra = sorted(set(learner.param_bounds) - set(fields))
    assert not extra, f"{type(learner).__name__} gives ranges for no params field: {extra}"
    learner.check_params(params)
    for field in fields:
        interval = learner.param_bounds[field]
        outside = [interval.low - (0.0 if interval.low_open else 1.0)]
        outside += [interval.high + (0.0 if interval.high_open else 1.0)]
        for value in outside:
            if not np.isfinite(value):
                continue
            bad = params.replace(**{field: jnp.asarray(value, learner.float_dtype)})
            message = f"params.{field} must be finite and in {interval}, got {value:g}"
            with pytest.raises(ValueError, match=re.escape(message)):
                learner.init(jax.random.key(0), bad)


class _FullDisk:
    """A file opened for writing on a disk with ``room`` bytes left (then ``ENOSPC``)."""

    def __init__(self, handle: Any, room: int) -> None:
        self._handle, self._room = handle, room

    def write(self, data: Any) -> int:
        if len(data) > self._room:
            self._handle.write(data[: self._room])
            self._room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self._room -= len(data)
        return self._handle.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)

    def __iter__(self) -> Any:
        return iter(self._handle)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()


def fill_disk_while_writing(monkeypatch: pytest.MonkeyPatch, room: int = 4096) -> None:
    """From now on (within ``monkeypatch``), every file opened for writing through ``open``
    or ``Path.open`` takes ``room`` bytes, then fails with ``ENOSPC``."""
    real_open = io.open

    def full_disk_open(file: Any, mode: str = "r", *rest: Any, **kw: Any) -> Any:
        handle = real_open(file, mode, *rest, **kw)
        return _FullDisk(handle, room) if "w" in mode else handle

    monkeypatch.setattr(io, "open", full_disk_open)
    monkeypatch.setattr(builtins, "open", full_disk_open)


def run_small_figure1(out: Path) -> None:
    """``stabl-jax run figure1`` at a tiny size into ``out``: 2 runs of 64 rounds, 5 arms,
    tuned EXP3 and StABL (every plot, ``stabl/played`` saved). One program set for the tests
    that need a results folder of the main job."""
    from stabl_jax.experiment import cli

    argv = ["run", "figure1", "--runs", "2", "--set", "horizon=64", "--set", "env.num_arms=5"]
    argv += ["--set", 'learners=["exp3_tuned", "stabl"]', "--set", "sa_windows=[16, 64]"]
    assert cli.main([*argv, "--out", str(out), "--no-progress"]) == 0


def mark_as_ours(folder: Path) -> Path:
    """Create ``folder`` as stabl_jax does (with its marker), by a process now gone."""
    folder.mkdir()
    marker = {"format": MARKER_FORMAT, "created": ""}
    (folder / MARKER).write_text(json.dumps(marker))
    return folder


def write_loss_traces(folder: Path, points: list[list[int]], **losses: list[list[float]]) -> Path:
    """A finished results folder made by hand: ``summary.json`` with no learners, and a
    ``traces.npz`` holding the ``(R, C)`` change points ``points`` and, per keyword, learner
    ``name``'s ``(R, T)`` loss trace (``<name>/loss``, float32)."""
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"learners": {}}))
    arrays: dict[str, Any] = {"env/change_points": np.asarray(points, np.int32)}
    arrays |= {f"{name}/loss": np.asarray(v, np.float32) for name, v in losses.items()}
    np.savez(folder / "traces.npz", **arrays)
    return folder


def flip_a_byte_of(path: Path, member: str) -> None:
    """One byte in the middle of ``member``'s data in the ``.npz`` at ``path`` inverted (its
    CRC-32 then fails)."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    data = bytearray(path.read_bytes())
    data[info.header_offset + 30 + len(info.filename) + info.file_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def write_config_variant(tmp_path, good: str, cases: dict, case: str, filename: str = "bad.toml"):
    """Write ``good`` config text with ``cases[case] = (anchor, new, ...)`` applied: ``new``
    replaces ``anchor`` (or is appended when ``anchor`` is None). Returns the file's path."""
    anchor, new = cases[case][:2]
    text = good + new if anchor is None else good.replace(anchor, new, 1)
    assert text != good
    path = tmp_path / filename
    path.write_text(text)
    return path


# Entries of summary.json that may differ between an interrupted and an uninterrupted run.
VOLATILE = {"started", "timings", "compile_seconds", "run_seconds", "simulate_seconds"}
VOLATILE |= {"command", "resumed"}


def numbers(summary: dict) -> dict:
    """``summary`` without the entries that record when, how long and how it ran."""
    if isinstance(summary, dict):
        return {k: numbers(v) for k, v in summary.items() if k not in VOLATILE}
    return summary


def assert_same_results(folder, reference) -> None:
    """A complete results folder whose traces and every number of ``summary.json`` are
    bitwise those of ``reference``."""
    from stabl_jax.experiment.outputs import COMPLETE
    from stabl_jax.experiment.tables import read_summary, read_traces

    assert (Path(folder) / COMPLETE).is_file()
    traces, expected = read_traces(folder), read_traces(reference)
    assert sorted(traces) == sorted(expected)
    for name in expected:
        assert traces[name].dtype == expected[name].dtype, name
        np.testing.assert_array_equal(traces[name], expected[name], err_msg=name)
    assert numbers(read_summary(folder)) == numbers(read_summary(reference))


@pytest.fixture(params=sorted(LEARNERS))
def learner_name(request) -> str:
    return request.param


@pytest.fixture
def learner(learner_name):
    return small_learner(learner_name)


@pytest.fixture
def env():
    return ExpertAdvice(num_arms=NUM_ARMS, horizon=HORIZON, change_points=(20, 41))


def pytest_runtest_logreport(report):
    """With ``STABL_JAX_FAILURE_LOG=PATH``, append each failure's traceback to PATH as it
    happens (the controller process only, under xdist): a run stopped at a time bound
    (``experiments/gpu_check.sh``) keeps the tracebacks pytest would print at the end."""
    path = os.environ.get("STABL_JAX_FAILURE_LOG")
    if not path or not report.failed or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    with open(path, "a") as f:
        f.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")
