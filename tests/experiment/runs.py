"""The in-process runs the lifecycle and fault tests share: the command line, its output, the
files of a folder, and a run stopped by Ctrl-C after a number of chunk checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from stabl_jax.experiment import cli
from stabl_jax.experiment.checkpoints import ChunkCheckpoint


def command(config_path: Path, out: Path, *extra: str) -> list[str]:
    """``stabl-jax run CONFIG --out OUT --no-progress EXTRA...`` as ``cli.main``'s argv."""
    return ["run", str(config_path), "--out", str(out), "--no-progress", *extra]


def run(args: list[str], capsys: pytest.CaptureFixture) -> tuple[int, str, str]:
    """``cli.main(args)``: its exit status, stdout and stderr."""
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def partials(out: Path) -> list[Path]:
    """The partial folders of ``out``."""
    return sorted(out.parent.glob(f"{out.name}.partial*"))


def stopped_run(
    config_path: Path,
    out: Path,
    capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    chunks: int,
) -> str:
    """A run stopped by Ctrl-C after ``chunks`` chunk checkpoints; asserts exit 130 and
    returns its stderr."""
    save, count = ChunkCheckpoint.save, {"n": 0}

    def save_then_stop(self, *args, **kwargs):
        save(self, *args, **kwargs)
        count["n"] += 1
        if count["n"] == chunks:
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(ChunkCheckpoint, "save", save_then_stop)
        code, _, err = run(command(config_path, out), capsys)
    assert code == 130, err
    return err
