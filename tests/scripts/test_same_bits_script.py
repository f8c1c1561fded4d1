"""``experiments/same_bits.py``: the same code gives the same numbers (exit 0), a changed
learning rate is found (exit 1), and a base it cannot use or a run that fails is exit 2 before
or instead of a verdict."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from experiments import same_bits
from tests.experiment.test_compare import CONFIG

REPO = Path(__file__).resolve().parents[2]
RATE = "return params.lr_scale * jnp.sqrt(base * (1.0 - params.gamma))"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("config") / "tiny.toml"
    path.write_text(CONFIG)
    return path


def _checkout(folder: Path) -> Path:
    """A copy of this checkout's package and configs (what a base needs)."""
    for part in ("stabl_jax", "configs"):
        shutil.copytree(REPO / part, folder / part, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def test_the_same_code_gives_the_same_numbers_and_a_changed_rate_does_not(tiny, tmp_path, capsys):
    base = _checkout(tmp_path / "base")
    assert same_bits.main(["--base-source", str(base), "--config", str(tiny)]) == 0
    out = capsys.readouterr().out
    assert "| tiny | " in out and out.rstrip().endswith("| same |")

    exp3 = base / "stabl_jax" / "learners" / "exp3.py"
    assert exp3.read_text().count(RATE) == 1
    exp3.write_text(exp3.read_text().replace(RATE, RATE + " * 1.5"))
    keep = tmp_path / "kept"
    assert (
        same_bits.main(["--base-source", str(base), "--config", str(tiny), "--keep", str(keep)])
        == 1
    )
    out = capsys.readouterr().out
    assert "differences |" in out and "different: " in out
    assert "learners.exp3.mean_reward.mean" in out and "exp3/played" in out
    assert "uniform/" not in out  # only the changed learner moved
    assert (keep / "base" / "tiny" / "summary.json").is_file()
    assert (keep / "this" / "tiny" / "summary.json").is_file()


def test_a_run_that_fails_is_exit_2_with_its_last_lines(tiny, tmp_path, capsys):
    base = _checkout(tmp_path / "base")
    (base / "stabl_jax" / "__main__.py").write_text("import sys\nsys.exit('broken base')\n")
    assert same_bits.main(["--base-source", str(base), "--config", str(tiny)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: tiny.toml with the code of ") and "exited 1" in err
    assert "broken base" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base", "no-such-revision"], "--base no-such-revision: not a commit of"),
        (["--base-source", "/nonexistent"], "/nonexistent: no stabl_jax package in it"),
    ],
)
def test_a_base_it_cannot_use_is_exit_2(args, message, capsys):
    assert same_bits.main([*args, "--only", "bco_d2"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "nope"], "--only: unknown ['nope']; choose from figure1,"),
        (["--set", "runs=2"], "--set goes with --config"),
        (["--config", "/nonexistent.toml"], "--config /nonexistent.toml: no such file"),
        (["--only", "bco_d2", "--config", "x.toml"], "not allowed with argument"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        same_bits.main(["--base", "HEAD", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_worktree_of_a_revision_is_made_and_removed(tmp_path):
    with same_bits.worktree("HEAD", tmp_path) as folder:
        assert (folder / "stabl_jax" / "__init__.py").is_file()
        assert (folder / "configs" / "figure1.toml").is_file()
    assert not folder.exists()
