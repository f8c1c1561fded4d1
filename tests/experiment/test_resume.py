"""Interrupted runs lose nothing: ``kill -9`` of a real run (mid-learner, then while writing
results), SIGTERM, and a resume that holds the outputs once (Ctrl-C: ``runs.py``)."""

from __future__ import annotations

import itertools
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
from stabl_jax.experiment.outputs import COMPLETE
from stabl_jax.experiment.results import CHECKPOINT_DIR
from stabl_jax.experiment.tables import read_summary
from stabl_jax.metrics import adaptive_regret
from stabl_jax.simulate import run_chunks
from tests.conftest import HORIZON, NUM_ARMS, assert_same_results
from tests.experiment.runs import CHUNK, command, run_ok

REPO = Path(__file__).resolve().parents[2]
KILLED_HORIZON = 1024  # chunks of 8 rounds: 128 checkpoints per learner, a kill lands mid-learner
CONFIG = f"""
name = "resume"
seed = 5
runs = 2
horizon = {KILLED_HORIZON}
learners = ["uniform", "exp3"]
chunk_size = 8
window = 8
sa_windows = [16, 128]

[env]
name = "expert_advice"
num_arms = {NUM_ARMS}
change_points = [300, 700]
"""


def _state_t0(out: Path, learner: str) -> int:
    for partial in out.parent.glob(f"{out.name}.partial*"):
        try:
            state = partial / CHECKPOINT_DIR / learner / checkpoint.STATE
            return int(checkpoint.load_arrays(state)["t0"])
        except (OSError, KeyError, ValueError):
            continue
    return 0


def _kill_when(command: list[str], cwd: Path, log: Path, ready, may_end: bool = False) -> None:
    """Start ``command`` and ``SIGKILL`` it once ``ready()`` (before which, unless ``may_end``,
    it must not end)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))  # the same JAX settings as this process
    with open(log, "wb") as sink:
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=sink, stderr=sink)
        try:
            deadline = time.monotonic() + 300
            while not ready() and (proc.poll() is None or not may_end):
                assert proc.poll() is None, f"the run ended before its kill:\n{log.read_text()}"
                assert time.monotonic() < deadline, f"nothing to kill at:\n{log.read_text()}"
                time.sleep(0.005)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
    assert may_end or proc.returncode == -signal.SIGKILL


@pytest.mark.slow  # two JAX start-ups and compilations in subprocesses (CI runs it)
def test_kill_9_and_resume_is_bitwise_identical(tmp_path):
    """Killed mid-learner, then once every learner is done; the same command (in-process)
    writes an uninterrupted run's traces and summary, bitwise."""
    config_path = tmp_path / "resume.toml"
    config_path.write_text(CONFIG)
    reference = tmp_path / "reference"
    assert cli.main(command(config_path, reference)) == 0
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "stabl_jax", *command(config_path, out)]
    in_exp3 = lambda: 0 < _state_t0(out, "exp3") < KILLED_HORIZON  # noqa: E731
    _kill_when(argv, tmp_path, tmp_path / "first.log", in_exp3)
    assert not out.exists()
    (partial,) = tmp_path.glob("out.partial*")
    assert not (partial / COMPLETE).exists()
    assert _state_t0(out, "uniform") == KILLED_HORIZON
    killed_at = _state_t0(out, "exp3")
    assert 0 < killed_at < KILLED_HORIZON
    second = tmp_path / "second.log"

    def finished() -> bool:
        if _state_t0(out, "exp3") == KILLED_HORIZON:
            time.sleep(0.3)
            return True
        return False

    if not out.exists():
        _kill_when(argv, tmp_path, second, finished, may_end=True)
        assert f"resuming {partial.name}: exp3 {killed_at}/{KILLED_HORIZON}" in second.read_text()
    if not out.exists():
        stdout = run_ok(command(config_path, out), None)
        # resumed whole; or (killed between COMPLETE and the rename) the complete folder moved
        assert "resuming" in stdout or "moved into place" in stdout, stdout
    assert (out / COMPLETE).is_file() and not list(tmp_path.glob("out.partial*"))
    assert not (out / CHECKPOINT_DIR).exists()
    assert_same_results(out, reference)
    # what a rerun needs: the command, the resolved config, the seed, the JAX settings
    summary = read_summary(out)
    assert summary["command"] == ["stabl-jax", *argv[3:]]
    assert summary["config"]["seed"] == summary["seed"] == 5 and summary["runs"] == 2
    assert summary["jax_config"]["x64"] is False
    assert summary["jax_config"]["JAX_PLATFORMS"] == os.environ.get("JAX_PLATFORMS")


class _SigtermNotHandled(Exception):
    """Raised by this test's SIGTERM handler: ``cli.main`` did not install its own."""


def _guard(signum, frame):
    raise _SigtermNotHandled


def test_sigterm_keeps_the_checkpoints_and_the_rerun_resumes(
    config_path, reference, tmp_path, capsys
):
    """A SIGTERM after two chunks exits 143 keeping the partial folder; the handler before the
    call is put back; the rerun resumes into the uninterrupted run's results."""
    saves, original = itertools.count(1), checkpoint.ChunkCheckpoint.save

    def interrupting_save(self, *args, **kwargs):
        original(self, *args, **kwargs)
        if next(saves) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    out = tmp_path / "out"
    previous = signal.signal(signal.SIGTERM, _guard)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(checkpoint.ChunkCheckpoint, "save", interrupting_save)
            code = cli.main(command(config_path, out))
        assert signal.getsignal(signal.SIGTERM) is _guard
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert code == 143
    err = capsys.readouterr().err
    assert "checkpoints kept" in err and "rerun the same command to resume" in err
    assert err.strip().splitlines()[-1] == "error: terminated (SIGTERM)"
    assert _state_t0(out, "uniform") == 2 * CHUNK
    assert cli.main(command(config_path, out)) == 0
    assert "resuming" in capsys.readouterr().out
    assert not list(tmp_path.glob("out.partial*"))
    assert read_summary(out)["resumed"]["rounds_done"] == {"uniform": 2 * CHUNK}
    assert_same_results(out, reference)


def test_a_second_sigterm_does_not_break_off_the_first():
    """A second SIGTERM (a scheduler signals every process of a job) while the first is handled
    is ignored; the handler before the block is back after it."""
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


_RUNS, _ROUNDS, _WIDTH, _CHUNK = 64, 1024, 64, 128  # outputs of 16 MiB in chunks of 2 MiB
_OUTPUT_BYTES = _RUNS * _ROUNDS * _WIDTH * 4
# The outputs once, plus a few chunk-sized temporaries; a concatenated copy is far above it.
_PEAK_BOUND = _OUTPUT_BYTES + 4 * _OUTPUT_BYTES * _CHUNK // _ROUNDS


class _FakeChunkProgram:
    """A lowered chunk program: ``(R, length, W)`` outputs of round numbers; a round counter."""

    def __init__(self, length: int, names: tuple[str, ...] = ("x",)) -> None:
        self.length = length
        self.names = names

    def compile(self):
        def call(carry, t0):
            rounds = np.arange(int(t0), int(t0) + self.length, dtype=np.float32)
            out = np.broadcast_to(rounds[None, :, None], (_RUNS, self.length, _WIDTH)).copy()
            return carry + self.length, dict.fromkeys(self.names, out)

        return call


def _run_chunks(tmp_path: Path, what: str, outputs: tuple[str, ...] = ("x",), **kwargs):
    """``run_chunks`` of a :class:`_FakeChunkProgram` checkpointed in ``tmp_path / "ckpt"``: the
    carry, the arrays and the peak bytes allocated (NumPy reports to tracemalloc)."""
    ckpt = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": what})
    lower = lambda carry, t0, length: _FakeChunkProgram(length, outputs)  # noqa: E731
    carry0 = np.zeros((), np.int32)
    tracemalloc.start()
    try:
        carry, arrays, _, _ = run_chunks(lower, carry0, _ROUNDS, _CHUNK, checkpoint=ckpt, **kwargs)
        return carry, arrays, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _interrupt_after(folder: Path, chunks: int) -> None:
    """The checkpoint in ``folder`` as if interrupted after its first ``chunks`` chunks."""
    state = checkpoint.load_arrays(folder / checkpoint.STATE)
    for path in sorted(folder.glob("chunk-*"))[chunks:]:
        path.unlink()
    kept = np.asarray(state["chunks"])[:chunks]
    done = np.asarray(kept[-1][1], np.int32)
    checkpoint.save_arrays(
        folder / checkpoint.STATE, {**state, "t0": done, "chunks": kept, "carry/0": done}
    )


def test_outputs_are_held_once_in_a_fresh_and_in_a_resumed_run(tmp_path):
    """Outputs are filled in place: the peak is the outputs plus about a chunk, fresh or resumed."""
    rounds = np.arange(_ROUNDS, dtype=np.float32)[None, :, None]
    expected = np.broadcast_to(rounds, (_RUNS, _ROUNDS, _WIDTH))
    carry, arrays, fresh_peak = _run_chunks(tmp_path, "memory")
    assert int(carry) == _ROUNDS
    np.testing.assert_array_equal(arrays["x"], expected)
    assert fresh_peak < _PEAK_BOUND, fresh_peak / _OUTPUT_BYTES
    del arrays
    _interrupt_after(tmp_path / "ckpt", 6)  # of 8 chunks, then resume
    _, arrays, resumed_peak = _run_chunks(tmp_path, "memory")
    np.testing.assert_array_equal(arrays["x"], expected)
    assert resumed_peak < _PEAK_BOUND, resumed_peak / _OUTPUT_BYTES


def test_a_checkpoint_with_a_trace_this_run_does_not_record_resumes_without_it(tmp_path):
    """A checkpoint with one more trace than the run records resumes without it."""
    _run_chunks(tmp_path, "traces", ("x", "arms"))
    _interrupt_after(tmp_path / "ckpt", 2)
    rounds = np.arange(_ROUNDS, dtype=np.float32)[None, :, None]
    for names in (None, ("x",)):  # simulate passes the traces it records: "arms" is not read
        carry, arrays, peak = _run_chunks(tmp_path, "traces", names=names)
        assert int(carry) == _ROUNDS and sorted(arrays) == ["x"]
        np.testing.assert_array_equal(arrays["x"], np.broadcast_to(rounds, arrays["x"].shape))
        if names is not None:
            assert peak < _PEAK_BOUND, peak / _OUTPUT_BYTES


def test_a_finished_checkpoint_whose_state_was_dropped_restores_its_traces_only(tmp_path):
    """``drop_state`` keeps a finished simulation's outputs only: the same call returns them and
    no carry (a metric needing one says why); a longer simulation refuses to continue."""
    env = ExpertAdvice(num_arms=NUM_ARMS, horizon=HORIZON)
    learner = EXP3(num_arms=NUM_ARMS, horizon=HORIZON)

    def resumed(horizon: int, ckpt: checkpoint.ChunkCheckpoint | None = None):
        ckpt = ckpt or checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "dropped"})
        options = SimOptions(chunk_size=16, checkpoint=ckpt)
        return simulate(learner, env, jax.random.key(3), 5, horizon=horizon, options=options,
                        traces=("played", "loss"))  # fmt: skip

    ckpt = checkpoint.ChunkCheckpoint(tmp_path / "ckpt", {"what": "dropped"})
    with pytest.raises(checkpoint.CheckpointMismatch, match="holds no checkpoint"):
        ckpt.drop_state()
    first = resumed(32, ckpt)
    state_file = ckpt.folder / checkpoint.STATE
    before = state_file.stat().st_size
    ckpt.drop_state()
    ckpt.drop_state()  # a second call is harmless: it writes the same small state again
    stored = checkpoint.load_arrays(state_file)
    assert not [name for name in stored if name.startswith("carry/")]
    assert int(stored["t0"]) == 32 and state_file.stat().st_size < before
    second = resumed(32)
    assert second.carry is None and sorted(second.arrays) == sorted(first.arrays)
    for name, value in first.arrays.items():
        np.testing.assert_array_equal(second.arrays[name], value)
    with pytest.raises(ValueError, match="adaptive_regret reads the runs' final loop state"):
        adaptive_regret(second, env, (8,))
    with pytest.raises(checkpoint.CheckpointMismatch, match="finished at round 32 and kept no"):
        resumed(HORIZON)
