"""``experiments/same_bits.py``: the same code gives the same numbers (exit 0), a changed rate
is found (exit 1), a base it cannot use or a failing run is exit 2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from experiments import same_bits
from stabl_jax.experiment import cli
from tests.experiment.test_compare import CONFIG

REPO = Path(__file__).resolve().parents[2]
RATE = "return params.lr_scale * jnp.sqrt(base * (1.0 - params.gamma))"


def _once(monkeypatch: pytest.MonkeyPatch, keep: Path) -> None:
    """The base checked once and run in a subprocess; this checkout's run made once, kept."""
    checked: set[Path] = {same_bits.REPO}
    check, run = same_bits.check_source, same_bits.run_one

    def check_once(source: Path) -> None:
        if source not in checked:
            check(source)
            checked.add(source)

    def run_this_here(source: Path, config: Path, arguments: list, out: Path) -> None:
        if source != same_bits.REPO:
            run(source, config, arguments, out)
            return
        if not keep.exists():
            argv = ["run", str(config), "--no-progress", "--out", str(keep), *arguments]
            assert cli.main(argv) == 0
        shutil.copytree(keep, out)

    monkeypatch.setattr(same_bits, "check_source", check_once)
    monkeypatch.setattr(same_bits, "run_one", run_this_here)


def test_same_code_same_bits_a_changed_rate_differs(tmp_path, capsys, monkeypatch):
    _once(monkeypatch, tmp_path / "this-run")
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(CONFIG)
    base = tmp_path / "base"  # a copy of this checkout's package and configs
    for part in ("stabl_jax", "configs"):
        shutil.copytree(REPO / part, base / part, ignore=shutil.ignore_patterns("__pycache__"))
    args = ["--base-source", str(base), "--config", str(tiny)]
    assert same_bits.main(args) == 0
    out = capsys.readouterr().out
    assert "| tiny | " in out and out.rstrip().endswith("| same |")

    exp3 = base / "stabl_jax" / "learners" / "exp3.py"
    assert exp3.read_text().count(RATE) == 1
    exp3.write_text(exp3.read_text().replace(RATE, RATE + " * 1.5"))
    keep = tmp_path / "kept"
    assert same_bits.main([*args, "--keep", str(keep)]) == 1
    out = capsys.readouterr().out
    assert "differences |" in out and "different: " in out
    assert "learners.exp3.mean_reward.mean" in out and "exp3/played" in out
    assert "uniform/" not in out  # only the changed learner moved
    assert (keep / "base" / "tiny" / "summary.json").is_file()
    assert (keep / "this" / "tiny" / "summary.json").is_file()

    (base / "stabl_jax" / "__main__.py").write_text("import sys\nsys.exit('broken base')\n")
    assert same_bits.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: tiny.toml with the code of ") and "exited 1" in err
    assert "broken base" in err


#: A base it cannot use (exit 2 from main), then arguments it refuses (argparse's exit 2).
UNUSABLE = [
    (["--base", "no-such-revision", "--only", "bco_d2"], "--base no-such-revision: not a commit"),
    (["--base-source", "/nonexistent", "--only", "bco_d2"], "/nonexistent: no stabl_jax package"),
    (["--base", "HEAD", "--only", "nope"], "--only: unknown ['nope']; choose from figure1,"),
    (["--base", "HEAD", "--set", "runs=2"], "--set goes with --config"),
    (["--base", "HEAD", "--config", "/no.toml"], "--config /no.toml: no such file"),
    (["--base", "HEAD", "--only", "bco_d2", "--config", "x.toml"], "not allowed with arg"),
]


@pytest.mark.parametrize(("args", "message"), UNUSABLE)
def test_a_base_or_arguments_it_cannot_use_are_exit_2_before_anything_runs(args, message, capsys):
    try:
        code = same_bits.main(args)
    except SystemExit as stop:
        code = stop.code
    assert code == 2 and message in capsys.readouterr().err


def test_a_worktree_of_a_revision_is_made_and_removed(tmp_path):
    with same_bits.worktree("HEAD", tmp_path) as folder:
        assert (folder / "stabl_jax" / "__init__.py").is_file()
        assert (folder / "configs" / "figure1.toml").is_file()
    assert not folder.exists()
