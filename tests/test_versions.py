"""The oldest supported releases: ``pyproject.toml``'s lower bounds are ``MINIMUM_VERSIONS``
(what ``.ci/lowest`` installs), this environment meets them, and importing stabl_jax refuses an
older JAX, chex or optax with the command that upgrades it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from stabl_jax import versions

ROOT = Path(__file__).resolve().parents[1]


def test_minimum_versions_are_declared_installed_and_compared_as_numbers():
    with open(ROOT / "pyproject.toml", "rb") as file:
        dependencies = tomllib.load(file)["project"]["dependencies"]
    bounds = {}
    for dependency in dependencies:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9.]+)", dependency)
        assert match is not None, f"{dependency!r}: .ci/lowest pins only name>=version"
        bounds[match[1]] = match[2]
    assert bounds == versions.MINIMUM_VERSIONS
    for name, minimum in versions.MINIMUM_VERSIONS.items():
        found = versions.installed_version(name)
        assert found is not None, name
        assert versions.release(found) >= versions.release(minimum), (name, found)
    assert versions.release("0.10.2") == (0, 10, 2) > versions.release("0.8.0")
    assert versions.release("0.8.1.dev20251101") == (0, 8, 1)
    assert versions.release("2.0") == (2, 0) < versions.release("2.0.1")
    with pytest.raises(ValueError, match="not a version number: 'dev'"):
        versions.release("dev")
    versions.check_versions({"jax": "0.8.0", "chex": "0.1.90", "optax": "0.2.4"})  # these pass
    versions.check_versions({"jax": "0.10.2", "chex": "0.1.92", "optax": "0.2.10"})
    versions.check_versions({"jax": "0.8.1.dev20251101"})
    jax = "jax >= 0.8.0 (found 0.7.2): pip install -U 'jax>=0.8.0' 'jaxlib>=0.8.0'"
    both = "chex >= 0.1.90 (found 0.1.89), optax >= 0.2.4 (found 0.2.3): pip install -U "
    both += "'chex>=0.1.90' 'optax>=0.2.4'"
    for found, message in (
        ({"jax": "0.7.2", "chex": "0.1.92", "optax": "0.2.8"}, jax),
        ({"jax": "0.10.2", "chex": "0.1.89", "optax": "0.2.3"}, both),
    ):  # an older release is refused with the upgrade
        with pytest.raises(ImportError, match=f"^{re.escape('stabl_jax needs ' + message)}$"):
            versions.check_versions(found)


def test_importing_stabl_jax_checks_the_installed_versions(tmp_path):
    """An old chex's metadata first on ``sys.path``: ``import stabl_jax`` stops with the
    message, before anything runs."""
    info = tmp_path / "chex-0.1.86.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: chex\nVersion: 0.1.86\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", "import stabl_jax"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: stabl_jax needs chex >= 0.1.90 (found 0.1.86): pip install -U 'chex>=0.1.90'"
    )


def test_a_checkpoint_written_under_another_optax_is_not_resumed(tmp_path, monkeypatch):
    """optax steps the convex learners (its release changes their bits): the checkpoint records
    it, and a run under another optax refuses the folder instead of mixing the two."""
    from stabl_jax.experiment.checkpoints import CheckpointMismatch
    from stabl_jax.experiment.identity import ExperimentCheckpoints, experiment_identity
    from stabl_jax.experiment.kinds import load_config

    config = load_config("bco_d2", runs=2)
    folder = tmp_path / "checkpoint"
    ExperimentCheckpoints(folder, experiment_identity(config))
    installed = versions.installed_version
    monkeypatch.setattr(
        versions, "installed_version", lambda p: "0.2.3" if p == "optax" else installed(p)
    )
    found = re.escape(f"versions.optax: {installed('optax')!r} (checkpoint) != '0.2.3'")
    with pytest.raises(CheckpointMismatch, match=found):
        ExperimentCheckpoints(folder, experiment_identity(config))
