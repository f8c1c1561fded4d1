"""The runs of :data:`tests.experiment.runs.CONFIG` the tests share, made once per process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from stabl_jax.experiment import cli
from tests.experiment.runs import CONFIG, command, partials, run, stopped_run, sweep_command


@pytest.fixture(scope="session")
def config_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The config file, learners ``uniform`` and ``exp3``."""
    path = tmp_path_factory.mktemp("config") / "lifecycle.toml"
    path.write_text(CONFIG.replace("LEARNER", "exp3"))
    return path


@pytest.fixture(scope="session")
def reference(config_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run of ``config_path``."""
    out = tmp_path_factory.mktemp("reference") / "out"
    assert cli.main(command(config_path, out)) == 0
    return out


@pytest.fixture(scope="session")
def _interrupted(config_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("interrupted") / "out"
    with pytest.MonkeyPatch.context() as patch:
        stopped_run(config_path, out, None, patch, 6)
    (partial,) = partials(out)
    return partial


@pytest.fixture
def interrupted(_interrupted: Path, tmp_path: Path) -> Path:
    """A copy in ``tmp_path`` of the partial folder of a run stopped by Ctrl-C after 6 chunk
    checkpoints (``uniform`` done, ``exp3`` at round 32)."""
    return Path(shutil.copytree(_interrupted, tmp_path / _interrupted.name))


@pytest.fixture(scope="session")
def whole_sweep(config_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted :func:`~tests.experiment.runs.sweep_command` of ``config_path``."""
    out = tmp_path_factory.mktemp("sweep") / "whole"
    assert run(sweep_command(config_path, out), None)[0] == 0
    return out
