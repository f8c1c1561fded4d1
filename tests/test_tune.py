"""``experiments/tune.py``'s grids: the default ones and a field's grid replaced by ``--grid``."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import jax
import numpy as np
import pytest

from stabl_jax import make
from stabl_jax.experiment.provenance import code_version

TUNE = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "tune.py"))


def test_a_wider_grid_replaces_one_field():
    field, grid = TUNE["parse_grid"]("expert_lr_scale=2**0..2**14")
    assert field == "expert_lr_scale" and grid == [2.0**k for k in range(15)]
    assert TUNE["parse_grid"]("gamma=0,0.5") == ("gamma", [0.0, 0.5])
    params = make("stabl", num_arms=5, horizon=64).default_params
    fields, points = TUNE["grid_for"](params, False, {field: grid})
    assert fields == ["expert_lr_scale", "meta_lr_scale"]
    assert len(points) == 15 * len(TUNE["GRIDS"]["meta_lr_scale"])
    assert max(p[0] for p in points) == 2.0**14


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("expert_lr=1,2", "FIELD one of"),
        ("expert_lr_scale", "FIELD one of"),
        ("gamma=a,b", "numbers or 2\\*\\*A..2\\*\\*B"),
        ("gamma=0.1,0.3,0.1", "'gamma=0.1,0.3,0.1': 0.1 is given twice"),
    ],
)
def test_a_bad_grid_names_itself(text, message):
    with pytest.raises(ValueError, match=message):
        TUNE["parse_grid"](text)


def test_a_tiny_sweep_writes_its_scores_command_and_code(tmp_path, monkeypatch):
    """One learner, a two-point grid, 64 rounds: ``sweep.json`` holds every point's score, the
    command that made it and the code's commit (with the versions and device, as results
    folders record them); the tuned config holds the chosen scale. The sweep records the loss
    alone (it held every trace: four times the memory), with the losses a full simulation
    gives."""
    argv = ["expert_advice_equal", "--set", 'learners=["exp3"]', "--set", "horizon=64"]
    argv += ["--runs-per-point", "2", "--grid", "lr_scale=1,4"]
    argv += ["--grid", "gamma=0"]
    argv += ["--configs-dir", str(tmp_path / "configs"), "--out", str(tmp_path / "sweep")]
    simulate, calls = TUNE["main"].__globals__["simulate"], []

    def both(*args, **kwargs):
        swept = simulate(*args, **kwargs)
        full = simulate(*args, **{k: v for k, v in kwargs.items() if k != "traces"})
        calls.append(kwargs.get("traces"))
        np.testing.assert_array_equal(swept.loss, full.loss)
        return swept

    monkeypatch.setitem(TUNE["main"].__globals__, "simulate", both)
    assert TUNE["main"](argv) == 0
    assert calls == [("loss",)]
    sweep = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert sweep["command"] == ["python", "experiments/tune.py", *argv]
    assert sweep["code"] == code_version()
    assert sweep["versions"]["jax"] == jax.__version__ and sweep["device"]["count"] >= 1
    entry = sweep["learners"]["exp3"]
    assert entry["points"] == [[1.0, 0.0], [4.0, 0.0]] and len(entry["mean_reward"]) == 2
    tuned = (tmp_path / "configs" / "expert_advice_equal_tuned.toml").read_text()
    assert f"lr_scale = {entry['best']['lr_scale']}" in tuned


@pytest.fixture
def no_sweep(monkeypatch):
    """``tune_learner`` raises: a command that should fail before tuning fails the test."""

    def boom(*args, **kwargs):
        raise AssertionError("the sweep ran although the command should have failed")

    monkeypatch.setitem(TUNE["main"].__globals__, "tune_learner", boom)


def test_a_config_it_did_not_write_is_never_replaced(tmp_path, capsys, no_sweep):
    """A hand-written ``<name>_tuned.toml`` in --configs-dir used to be overwritten after the
    sweep; it is refused before any tuning, the file untouched. A tuned config of the script's
    own (it holds TUNED_MARK) is replaced as before."""
    mine = tmp_path / "expert_advice_equal_tuned.toml"
    mine.write_text("# my own config\n")
    with pytest.raises(SystemExit) as refused:
        TUNE["main"](["expert_advice_equal", "--configs-dir", str(tmp_path)])
    assert refused.value.code == 2
    assert "was not written by experiments/tune.py, so it is left as it is" in (
        capsys.readouterr().err
    )
    assert mine.read_text() == "# my own config\n"
    folder = tmp_path / "folders" / "expert_advice_equal_tuned.toml"
    folder.mkdir(parents=True)  # a folder of that name was an IsADirectoryError traceback
    with pytest.raises(SystemExit) as refused:
        TUNE["main"](["expert_advice_equal", "--configs-dir", str(folder.parent)])
    assert refused.value.code == 2
    assert f"{folder} is a folder, so the tuned config cannot be written there" in (
        capsys.readouterr().err
    )
    assert folder.is_dir() and not any(folder.iterdir())
    tuned = tmp_path / "ours"
    tuned.mkdir()
    written = TUNE["tuned_toml"](TUNE["resolve_config"]("expert_advice_equal"), "x", {}, "loss")
    (tuned / "expert_advice_equal_tuned.toml").write_text(written)
    with pytest.raises(AssertionError, match="the sweep ran"):  # past the check, into tuning
        TUNE["main"](["expert_advice_equal", "--configs-dir", str(tuned)])
    # The same for --out: a user's sweep.json there was replaced after the sweep.
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text('{"mine": 1}')
    with pytest.raises(SystemExit) as refused:
        TUNE["main"](["expert_advice_equal", "--configs-dir", str(tuned), "--out", str(out)])
    assert refused.value.code == 2
    assert "sweep.json is there and is not a previous experiments/tune.py file" in (
        capsys.readouterr().err
    )
    assert (out / "sweep.json").read_text() == '{"mine": 1}'
    (out / "sweep.json").write_text(json.dumps(dict.fromkeys(TUNE["SWEEP_KEYS"], 0)))
    with pytest.raises(AssertionError, match="the sweep ran"):  # its own: replaced after
        TUNE["main"](["expert_advice_equal", "--configs-dir", str(tuned), "--out", str(out)])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "no config named 'nope'"),
        (["expert_advice_equal", "--set", "runs=0"], "key 'runs' (set on the command line)"),
        (["expert_advice_equal", "--configs-dir", "FILE"], "--configs-dir FILE is a file"),
        (
            ["expert_advice_equal", "--configs-dir", "FILE/tuned"],
            "--configs-dir FILE/tuned: FILE is a file, so FILE/tuned cannot be made",
        ),
        (
            ["expert_advice_equal", "--out", "FILE/sweep"],
            "--out FILE/sweep: FILE is a file, so FILE/sweep cannot be made",
        ),
        (
            ["expert_advice_equal", "--grid", "lr_scale=1,2", "--grid", "lr_scale=4"],
            "--grid lr_scale is given twice: give one grid per field",
        ),
        (
            ["expert_advice_equal", "--grid", "expert_lr_scale=1,-1,1e39,nan"],
            "--grid expert_lr_scale: -1, 1e+39 (float32: inf), nan outside stabl's range "
            "[0, inf) of expert_lr_scale",
        ),
        (
            ["expert_advice_equal", "--grid", "meta_lr_scale=0,1"],
            "--grid meta_lr_scale: 0 outside stabl's range (0, inf) of meta_lr_scale",
        ),
        (
            ["expert_advice_equal", "--grid", "gamma=0.5,2"],
            "--grid gamma: 2 outside exp3_uniform's range [0, 1] of gamma",
        ),
        (  # read by no sweep, but written into sweep.json's config as if it had been
            ["expert_advice_equal", "--set", "runs=100"],
            "--set runs=100: the sweep does not read runs; use --runs-per-point",
        ),
        (
            ["expert_advice_equal", "--set", "params.stabl.meta_lr_scale=4"],
            "--set params.stabl.meta_lr_scale=4: the sweep does not read params; use --grid",
        ),
        (  # no learner has gamma: the sweep ran and ignored the grid
            ["expert_advice_equal", "--set", 'learners=["uniform","stabl"]', "--grid", "gamma=0.5"],
            "--grid gamma: no learner of expert_advice_equal (uniform, stabl) has it, so its "
            "grid would be ignored; they sweep ['expert_lr_scale', 'meta_lr_scale']",
        ),
    ],
)
def test_a_bad_config_or_configs_dir_stops_it_before_the_sweep(
    tmp_path, capsys, no_sweep, args, message
):
    """A config it cannot read was a traceback; a --configs-dir that is a file failed with
    FileExistsError after the whole sweep; a field's second --grid replaced its first
    silently; a grid value a learner refuses was a traceback from ``simulate`` once the
    learners before it had been swept. All are exit 2 before any tuning now."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    with pytest.raises(SystemExit) as refused:
        TUNE["main"]([a.replace("FILE", str(afile)) for a in args])
    assert refused.value.code == 2
    assert message.replace("FILE", str(afile)) in capsys.readouterr().err
    assert afile.read_text() == "not a folder"
