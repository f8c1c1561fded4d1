"""The command line's persistent compilation cache: where it lives, how to turn it off."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from stabl_jax import __version__
from stabl_jax.experiment import cli, compile_cache
from stabl_jax.versions import installed_version
from tests.experiment.runs import sets

ROOT = Path(__file__).resolve().parents[2]


def test_flag_beats_environment_beats_default_and_off_disables(tmp_path):
    env = {compile_cache.ENV_VAR: str(tmp_path / "env"), "XDG_CACHE_HOME": str(tmp_path)}
    assert compile_cache.resolve(str(tmp_path / "flag"), env) == tmp_path / "flag"
    assert compile_cache.resolve(None, env) == tmp_path / "env"
    default = compile_cache.resolve(None, {"XDG_CACHE_HOME": str(tmp_path)})
    assert default == tmp_path / "stabl_jax" / "jax"
    for word in ("off", "OFF", "none", "0"):
        assert compile_cache.resolve(word, {}) is None
        assert compile_cache.resolve(None, {compile_cache.ENV_VAR: word}) is None


def test_empty_folder_is_an_error(monkeypatch, capsys):
    with pytest.raises(ValueError, match="compile-cache is empty"):
        compile_cache.resolve("  ", {})
    # the command line: a usage error (exit 2, one line), from the flag or the variable
    assert cli.main(["--compile-cache", "", "list"]) == cli.EXIT_USAGE
    monkeypatch.setenv(compile_cache.ENV_VAR, " ")
    assert cli.main(["list"]) == cli.EXIT_USAGE
    remedy = "is empty: give a folder, or 'off' to disable the cache"
    expected = [f"error: --compile-cache {remedy}", f"error: {compile_cache.ENV_VAR} {remedy}"]
    assert capsys.readouterr().err.splitlines() == expected


@pytest.mark.slow  # one JAX start-up and one learner's compilation in a subprocess
def test_enable_points_jax_at_the_folder_or_leaves_the_cache_off(tmp_path, capsys):
    """``enable`` creates the folder and sets JAX's cache options (restored here: the tests run
    without the cache); a folder it cannot create leaves the cache off, with a warning."""
    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs")
    before = {name: getattr(jax.config, name) for name in names}
    try:
        assert compile_cache.enable(tmp_path / "cache") == tmp_path / "cache"
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "cache")
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.5
    finally:
        for name, value in before.items():
            jax.config.update(name, value)
    assert (tmp_path / "cache").is_dir()
    assert compile_cache.enable(None) is None
    (tmp_path / "file").write_text("")
    assert compile_cache.enable(tmp_path / "file" / "cache") is None
    assert "warning: compilation cache off: cannot create" in capsys.readouterr().err


def test_cli_fills_the_cache_folder(tmp_path):
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    env.pop(compile_cache.ENV_VAR, None)
    args = ["--compile-cache", str(cache), "run", "--runs", "2", "--no-progress"]
    args += [*sets(['learners=["stabl"]', "horizon=64", "env.num_arms=5", "window=8"])]
    args += ["--out", str(tmp_path / "out")]
    argv = [sys.executable, "-m", "stabl_jax", *args]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any(cache.iterdir()), "no compiled program was stored"


def test_version_flag(capsys, monkeypatch):
    """The versions the results depend on, on one line however narrow the terminal."""
    monkeypatch.setenv("COLUMNS", "40")
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"stabl-jax {__version__} (jax {jax.__version__}, jaxlib {installed_version('jaxlib')}, "
        f"numpy {np.__version__}, optax {installed_version('optax')}, "
        f"Python {platform.python_version()})"
    )
