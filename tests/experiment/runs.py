"""What the lifecycle, fault, resume and compare tests share: a tiny config (5 arms, T = 64,
chunks of 16 rounds; its runs: conftest.py), the command line and a run stopped by Ctrl-C."""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    monkeypatch.setattr(bandit, "run_experiment", ran)


def ran(*args, **kwargs):
    raise AssertionError("the experiment ran")


def sets(items: list[str]) -> list[str]:
    """``--set ITEM`` for each of ``items``."""
    return [arg for item in items for arg in ("--set", item)]


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


def run_ok(args: list[str], capsys: pytest.CaptureFixture | None) -> str:
    """:func:`run`, asserted to exit 0 (else its stderr is shown): its stdout."""
    code, out, err = run(args, capsys)
    assert code == 0, err
    return out


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def partials(out: Path) -> list[Path]:
    """The partial folders of ``out``."""
    return sorted(out.parent.glob(f"{out.name}.partial*"))


def fail_when(
    patch: pytest.MonkeyPatch,
    owner: Any,
    name: str,
    when: Callable[..., bool],
    error: BaseException | type[BaseException] = KeyboardInterrupt,
    after: bool = False,
) -> None:
    """Patch ``owner.name`` to raise ``error`` on a call whose positional arguments satisfy
    ``when`` (before the call, or once it is done where ``after``)."""
    real = getattr(owner, name)

    def failing(*args, **kwargs):
        if not after and when(*args):
            raise error
        result = real(*args, **kwargs)
        if after and when(*args):
            raise error
        return result

    patch.setattr(owner, name, failing)


def stopped_run(
    config_path: Path,
    out: Path,
    capsys: pytest.CaptureFixture | None,
    monkeypatch: pytest.MonkeyPatch,
    chunks: int,
) -> str:
    """A run stopped by Ctrl-C after ``chunks`` chunk checkpoints (exit 130 and the message
    asserted); its stderr."""
    count = itertools.count(1)
    with monkeypatch.context() as patch:
        fail_when(patch, ChunkCheckpoint, "save", lambda *a: next(count) == chunks, after=True)
        code, _, err = run(command(config_path, out), capsys)
    assert code == 130 and "checkpoints kept in" in err, err
    assert "rerun the same command to resume" in err
    assert err.strip().splitlines()[-1] == "error: interrupted"
    return err
