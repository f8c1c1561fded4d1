"""What the lifecycle, fault, resume and compare tests share: one tiny config at the canonical
sizes (5 arms, T = 64, chunks of 16 rounds; its runs: conftest.py's fixtures), the command
line, its output, the files of a folder, and a run stopped after a number of chunk
checkpoints."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from stabl_jax.experiment import cli
from stabl_jax.experiment.checkpoints import ChunkCheckpoint
from stabl_jax.experiment.kinds import bandit
from tests.conftest import HORIZON, NUM_ARMS

CHUNK = 16
CONFIG = f"""
name = "lifecycle"
seed = 3
runs = 2
horizon = {HORIZON}
learners = ["uniform", "LEARNER"]
chunk_size = {CHUNK}
window = 8
sa_windows = [16]

[env]
name = "expert_advice"
num_arms = {NUM_ARMS}
change_points = [32]
"""
SWEEP = ["--set", 'learners=["exp3", "exp3_uniform"]', "--grid", "exp3.lr_scale=1,2,4"]
SWEEP += ["--grid", "exp3_uniform.gamma=0.05,0.5", "--no-progress"]


def sweep_command(config_path: Path, out: Path, *extra: str) -> list[str]:
    """``stabl-jax sweep CONFIG`` of two learners' grids (four simulations) into ``out``."""
    return ["sweep", str(config_path), *SWEEP, "--tune-seed", "7", "--out", str(out), *extra]


def forbid_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any bandit experiment fail loudly: a refusal must come before any computation."""

    def ran(*args, **kwargs):
        raise AssertionError("the experiment ran")

    monkeypatch.setattr(bandit, "run_experiment", ran)


def command(config_path: Path, out: Path | str, *extra: str) -> list[str]:
    """``stabl-jax run CONFIG --out OUT --no-progress EXTRA...`` as ``cli.main``'s argv."""
    return ["run", str(config_path), "--out", str(out), "--no-progress", *extra]


def run(args: list[str], capsys: pytest.CaptureFixture | None) -> tuple[int, str, str]:
    """``cli.main(args)``: its exit status, stdout and stderr (``capsys=None``: ``sys``'s)."""
    if capsys is not None:
        code = cli.main(args)
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(args)
    return code, out.getvalue(), err.getvalue()


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def partials(out: Path) -> list[Path]:
    """The partial folders of ``out``."""
    return sorted(out.parent.glob(f"{out.name}.partial*"))


def stopped_run(
    config_path: Path,
    out: Path,
    capsys: pytest.CaptureFixture | None,
    monkeypatch: pytest.MonkeyPatch,
    chunks: int,
) -> str:
    """A run stopped by Ctrl-C after ``chunks`` chunk checkpoints; asserts exit 130, the
    kept checkpoints and the last line, and returns its stderr."""
    save, count = ChunkCheckpoint.save, {"n": 0}

    def save_then_stop(self, *args, **kwargs):
        save(self, *args, **kwargs)
        count["n"] += 1
        if count["n"] == chunks:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(ChunkCheckpoint, "save", save_then_stop)
        code, _, err = run(command(config_path, out), capsys)
    assert code == 130 and "checkpoints kept in" in err, err
    assert "rerun the same command to resume" in err
    assert err.strip().splitlines()[-1] == "error: interrupted"
    return err
