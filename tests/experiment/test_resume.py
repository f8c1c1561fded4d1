"""Interrupted runs lose nothing.

A real ``python -m stabl_jax run`` subprocess is killed with ``SIGKILL`` in the middle of its
second learner (the first one finished, the second one part-way through its chunks); the same
command then resumes from the checkpoints and must write ``traces.npz`` and ``summary.json``
bitwise identical to an uninterrupted run (timings and the record of the resume aside). A
Ctrl-C (``KeyboardInterrupt``) in-process must keep the checkpoints the same way.

The config is tiny (2 runs, 4 arms, T = 1024, chunks of 8 rounds: 128 checkpoints per
learner, so the kill lands mid-learner) and its two learners are cheap to compile. One
``stabl-jax run`` of it costs about 12 s of CPU (``time python -m stabl_jax run ...``: JAX
start-up, compilation, metrics, plots); the file runs two and a half of them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import jax
import numpy as np
import pytest

from stabl_jax import EXP3, ExpertAdvice, SimOptions, simulate
from stabl_jax.experiment import checkpoints as checkpoint
from stabl_jax.experiment import cli
from stabl_jax.experiment.results import CHECKPOINT_DIR, COMPLETE
from stabl_jax.experiment.tables import read_summary
from stabl_jax.metrics import adaptive_regret
from stabl_jax.simulate import run_chunks
from tests.conftest import assert_same_results

REPO = Path(__file__).resolve().parents[2]
HORIZON = 1024
CONFIG = f"""
name = "resume"
seed = 5
runs = 2
horizon = {HORIZON}
learners = ["uniform", "exp3"]
chunk_size = 8
window = 8
sa_windows = [16, 128]

[env]
name = "expert_advice"
num_arms = 4
change_points = [300, 700]
"""


@pytest.fixture(scope="module")
def config_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "resume.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture(scope="module")
def reference(config_path, tmp_path_factory) -> Path:
    """The uninterrupted run, in-process."""
    out = tmp_path_factory.mktemp("reference") / "out"
    assert cli.main(["run", str(config_path), "--out", str(out), "--no-progress"]) == 0
    return out


def _state_t0(partial_glob: list[Path], learner: str) -> int:
    for partial in partial_glob:
        path = partial / CHECKPOINT_DIR / learner / checkpoint.STATE
        try:
            return int(checkpoint.load_arrays(path)["t0"])
        except (OSError, KeyError, ValueError):
            continue
    return 0


@pytest.mark.slow  # two JAX start-ups and compilations in subprocesses (CI runs it)
def test_kill_9_and_resume_is_bitwise_identical(config_path, reference, tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "stabl_jax", "run", str(config_path), "--out", str(out)]
    command.append("--no-progress")
    env = dict(os.environ, PYTHONPATH=str(REPO))  # the same JAX settings as this process
    log = tmp_path / "first.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + 300
            while True:
                partials = list(tmp_path.glob("out.partial*"))
                if 0 < _state_t0(partials, "exp3") < HORIZON:
                    break
                assert proc.poll() is None, (
                    f"the run ended before it was killed:\n{log.read_text()}"
                )
                assert time.monotonic() < deadline, f"no checkpoint appeared:\n{log.read_text()}"
                time.sleep(0.005)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    # Killed: no results folder, a partial one holding the checkpoints.
    assert not out.exists()
    (partial,) = tmp_path.glob("out.partial*")
    assert not (partial / COMPLETE).exists()
    assert _state_t0([partial], "uniform") == HORIZON  # the first learner had finished
    killed_at = _state_t0([partial], "exp3")
    assert 0 < killed_at < HORIZON  # ... the second one was part-way through

    # The same command again: resumes, completes, removes the dead run's folder.
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert f"resuming {partial.name}" in done.stdout
    assert (out / COMPLETE).is_file()
    assert not list(tmp_path.glob("out.partial*"))
    assert not (out / CHECKPOINT_DIR).exists()
    summary = read_summary(out)
    assert summary["resumed"] == {
        "from": partial.name,
        "rounds_done": {"uniform": HORIZON, "exp3": killed_at},
    }
    assert_same_results(out, reference)
    # What a rerun needs is recorded: the exact command, the resolved config, the seed, the
    # versions and the JAX settings.
    assert summary["command"] == ["stabl-jax", *command[3:]]
    assert summary["config"]["seed"] == summary["seed"] == 5 and summary["runs"] == 2
    for package in ("stabl_jax", "jax", "jaxlib", "numpy", "python"):
        assert summary["versions"][package]
    assert summary["jax_config"]["x64"] is False
    assert summary["jax_config"]["JAX_PLATFORMS"] == os.environ.get("JAX_PLATFORMS")


class _SigtermNotHandled(Exception):
    """Raised by the test's own SIGTERM handler: ``cli.main`` did not install its own."""


def _guard(signum, frame):
    raise _SigtermNotHandled


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_ctrl_c_keeps_the_checkpoints_and_the_rerun_resumes(
    stop, config_path, reference, tmp_path, monkeypatch, capsys
):
    """In-process: a KeyboardInterrupt after 20 chunks exits 130 and keeps the partial folder
    (same pid on the rerun: it is set aside and taken over, not deleted); a SIGTERM there (a
    scheduler's time limit) does the same, exit 143, and the handler before the call is put
    back after it (this test's own, which would fail the test if SIGTERM reached it)."""
    saves = {"n": 0}
    original = checkpoint.ChunkCheckpoint.save

    def interrupting_save(self, *args, **kwargs):
        original(self, *args, **kwargs)
        saves["n"] += 1
        if saves["n"] == 20:
            if stop == "ctrl-c":
                raise KeyboardInterrupt
            os.kill(os.getpid(), signal.SIGTERM)

    out = tmp_path / "out"
    args = ["run", str(config_path), "--out", str(out), "--no-progress"]
    monkeypatch.setattr(checkpoint.ChunkCheckpoint, "save", interrupting_save)
    previous = signal.signal(signal.SIGTERM, _guard)
    try:
        code = cli.main(args)
        assert signal.getsignal(signal.SIGTERM) is _guard
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert code == {"ctrl-c": 130, "sigterm": 143}[stop]
    err = capsys.readouterr().err
    assert "checkpoints kept" in err and "rerun the same command to resume" in err
    last = {"ctrl-c": "error: interrupted", "sigterm": "error: terminated (SIGTERM)"}[stop]
    assert err.strip().splitlines()[-1] == last
    (partial,) = tmp_path.glob("out.partial*")
    assert _state_t0([partial], "uniform") == 20 * 8

    monkeypatch.setattr(checkpoint.ChunkCheckpoint, "save", original)
    assert cli.main(args) == 0
    assert "resuming" in capsys.readouterr().out
    assert not list(tmp_path.glob("out.partial*"))
    assert read_summary(out)["resumed"]["rounds_done"] == {"uniform": 160}
    assert_same_results(out, reference)


def test_a_second_sigterm_does_not_break_off_the_first():
    """A scheduler signals every process of a job, and ``experiments/study.py`` passes its own
    SIGTERM on to its points: a second SIGTERM while the first is handled (the checkpoints
    kept, the message printed) is ignored; the handler before the block is back after it."""
    handled = []
    previous = signal.signal(signal.SIGTERM, _guard)
    try:
        with cli.sigterm_interrupts():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(500):  # Python runs the handler between bytecodes
                    time.sleep(0.01)
            except cli.Terminated:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(20):
                    time.sleep(0.01)
                handled.append("first")
        assert signal.getsignal(signal.SIGTERM) is _guard
    except cli.Terminated:
        pytest.fail("the second SIGTERM broke off the handling of the first")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert handled == ["first"]


# --------------------------------------------------------------------------------------------
# Memory: the outputs are held once, in a fresh run and in a resumed one
# --------------------------------------------------------------------------------------------

_RUNS, _ROUNDS, _WIDTH, _CHUNK = 64, 1024, 64, 128  # outputs of 16 MiB in chunks of 2 MiB
_OUTPUT_BYTES = _RUNS * _ROUNDS * _WIDTH * 4
# The outputs once, plus a few chunk-sized temporaries (the program's outputs, their host
# copy, the checkpoint file's buffer); a concatenated copy of the outputs is far above it.
_PEAK_BOUND = _OUTPUT_BYTES + 4 * _OUTPUT_BYTES * _CHUNK // _ROUNDS


class _FakeChunkProgram:
    """A stand-in for a lowered chunk program (``run_chunks``' ``lower``): its outputs are
    ``(R, length, W)`` float32 arrays holding the round numbers; the carry counts rounds."""

    def __init__(self, length: int, names: tuple[str, ...] = ("x",)) -> None:
        self.length = length
        self.names = names

    def compile(self):
        def call(carry, t0):
            rounds = np.arange(int(t0), int(t0) + self.length, dtype=np.float32)
            out = np.broadcast_to(rounds[None, :, None], (_RUNS, self.length, _WIDTH)).copy()
            return carry + self.length, dict.fromkeys(self.names, out)

        return call


def _peak_bytes(fn):
    """``(fn(), peak bytes allocated while it ran)`` (NumPy reports to tracemalloc)."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _interrupt_after(folder: Path, chunks: int) -> None:
    """Make the checkpoint in ``folder`` look interrupted after its first ``chunks`` chunks:
    the later chunk files removed, the state's round (``t0``, and the carry, which counts
    rounds) and chunk list set back."""
    state = checkpoint.load_arrays(folder / checkpoint.STATE)
    for path in sorted(folder.glob("chunk-*"))[chunks:]:
        path.unlink()
    kept = np.asarray(state["chunks"])[:chunks]
    done = np.asarray(kept[-1][1], np.int32)
    checkpoint.save_arrays(
        folder / checkpoint.STATE, {**state, "t0": done, "chunks": kept, "carry/0": done}
    )


def test_outputs_are_held_once_in_a_fresh_and_in_a_resumed_run(tmp_path):
    """A run's outputs are filled in place: peak memory is the outputs plus about a chunk
    (a list of chunks concatenated at the end, or a checkpoint's chunks concatenated on
    resume, needed twice the outputs; a run that fitted could not be resumed)."""
    lower = lambda carry, t0, length: _FakeChunkProgram(length)  # noqa: E731
    expected = np.broadcast_to(
        np.arange(_ROUNDS, dtype=np.float32)[None, :, None], (_RUNS, _ROUNDS, _WIDTH)
    )
    ckpt = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "memory"})
    carry0 = np.zeros((), np.int32)
    (carry, arrays, _, _), fresh_peak = _peak_bytes(
        lambda: run_chunks(lower, carry0, _ROUNDS, _CHUNK, checkpoint=ckpt)
    )
    assert int(carry) == _ROUNDS
    np.testing.assert_array_equal(arrays["x"], expected)
    assert fresh_peak < _PEAK_BOUND, fresh_peak / _OUTPUT_BYTES
    del arrays
    _interrupt_after(ckpt.folder, 6)  # of 8 chunks, then resume
    again = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "memory"})
    (carry, arrays, _, _), resumed_peak = _peak_bytes(
        lambda: run_chunks(lower, carry0, _ROUNDS, _CHUNK, checkpoint=again)
    )
    np.testing.assert_array_equal(arrays["x"], expected)
    assert resumed_peak < _PEAK_BOUND, resumed_peak / _OUTPUT_BYTES


def test_a_checkpoint_with_a_trace_this_run_does_not_record_resumes_without_it(tmp_path):
    """A checkpoint written when the run recorded one more trace (a bandit run's queried
    arms, no longer recorded) resumes: the extra trace is dropped, the others are whole."""
    ckpt = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "traces"})
    carry0 = np.zeros((), np.int32)
    both = lambda carry, t0, length: _FakeChunkProgram(length, ("x", "arms"))  # noqa: E731
    run_chunks(both, carry0, _ROUNDS, _CHUNK, checkpoint=ckpt)
    _interrupt_after(ckpt.folder, 2)
    one = lambda carry, t0, length: _FakeChunkProgram(length)  # noqa: E731
    rounds = np.arange(_ROUNDS, dtype=np.float32)[None, :, None]
    for names in (None, ("x",)):  # simulate passes the traces it records: "arms" is not read
        again = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "traces"})
        (carry, arrays, _, _), peak = _peak_bytes(
            lambda again=again, names=names: run_chunks(
                one, carry0, _ROUNDS, _CHUNK, checkpoint=again, names=names
            )
        )
        assert int(carry) == _ROUNDS and sorted(arrays) == ["x"]
        np.testing.assert_array_equal(arrays["x"], np.broadcast_to(rounds, arrays["x"].shape))
        if names is not None:
            assert peak < _PEAK_BOUND, peak / _OUTPUT_BYTES


def test_a_finished_checkpoint_whose_state_was_dropped_restores_its_traces_only(tmp_path):
    """``drop_state`` deletes a finished simulation's loop state and keeps its outputs: the
    same call then returns the same traces and no carry (a metric that needs one says why),
    and a longer simulation refuses to continue from it."""
    env, learner = ExpertAdvice(num_arms=4, horizon=48), EXP3(num_arms=4, horizon=48)
    call = dict(traces=("played", "loss"))
    ckpt = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "dropped"})
    with pytest.raises(checkpoint.CheckpointMismatch, match="holds no checkpoint"):
        ckpt.drop_state()
    first = simulate(
        learner,
        env,
        jax.random.key(3),
        5,
        horizon=32,
        options=SimOptions(chunk_size=16, checkpoint=ckpt),
        **call,
    )
    state_file = ckpt.folder / checkpoint.STATE
    before = state_file.stat().st_size
    ckpt.drop_state()
    ckpt.drop_state()  # a second call is harmless: it writes the same small state again
    stored = checkpoint.load_arrays(state_file)
    assert not [name for name in stored if name.startswith("carry/")]
    assert int(stored["t0"]) == 32 and state_file.stat().st_size < before
    again = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "dropped"})
    second = simulate(
        learner,
        env,
        jax.random.key(3),
        5,
        horizon=32,
        options=SimOptions(chunk_size=16, checkpoint=again),
        **call,
    )
    assert second.carry is None and sorted(second.arrays) == sorted(first.arrays)
    for name, value in first.arrays.items():
        np.testing.assert_array_equal(second.arrays[name], value)
    with pytest.raises(ValueError, match="adaptive_regret reads the runs' final loop state"):
        adaptive_regret(second, env, (8,))
    longer = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "dropped"})
    with pytest.raises(checkpoint.CheckpointMismatch, match="finished at round 32 and kept no"):
        simulate(
            learner,
            env,
            jax.random.key(3),
            5,
            horizon=48,
            options=SimOptions(chunk_size=16, checkpoint=longer),
            **call,
        )
