"""``experiments/curves.py`` on a tiny folder and its companion (3 runs, T = 64) and edited
copies: the pseudo-regret, the PNGs, and every folder it cannot draw refused first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from stabl_jax.experiment import cli, load_results, outputs
from tests.conftest import flip_a_byte_of
from tests.scripts.load import ROOT, load_script

curves = load_script(ROOT / "experiments" / "curves.py", "curves_script")
TINY = ["runs=3", "horizon=64", "env.num_arms=5", "window=8", 'save_traces="all"']
TINY += ["env.change_points=[21, 22, 28, 50]"]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """``tiny`` (Uniform and StABL) and its companion ``tiny-naive``, of the same draws."""
    root = tmp_path_factory.mktemp("curves")
    for name, learners in (("tiny", '"uniform", "stabl"'), ("tiny-naive", '"stabl_naive"')):
        args = ["run", str(ROOT / "configs" / "expert_advice_random.toml"), "--no-progress"]
        for item in [*TINY, f"learners=[{learners}]"]:
            args += ["--set", item]
        args += ["--out", str(root / name)]
        assert cli.main(args) == 0
    return root


def _copy(source: Path, to: Path, summary=None, drop: str = "") -> Path:
    """``source`` without its manifest, ``summary.json`` edited, the ``drop`` trace removed."""
    shutil.copytree(source, to)
    (to / "manifest.json").unlink()
    if summary is not None:
        edited = json.loads((to / "summary.json").read_text())
        summary(edited)
        (to / "summary.json").write_text(json.dumps(edited))
    if drop:
        with np.load(to / "traces.npz") as archive:
            arrays = {k: archive[k] for k in archive.files if k != drop}
        np.savez(to / "traces.npz", **arrays)
    return to


def test_curves_of_a_tiny_folder_and_its_companion(results, tmp_path, capsys):
    png = tmp_path / "png"
    assert curves.main([str(results), str(png), "--folders", "tiny"]) == 0
    written = sorted(p.name for p in png.glob("*.png"))
    assert written == ["tiny_regret.png", "tiny_sa.png"]
    assert sorted(p.name for p in png.iterdir()) == [".stabl_jax_results", *written]
    assert all((png / name).stat().st_size > 10_000 for name in written)
    assert "stabl_naive" in capsys.readouterr().out  # the companion's learner is drawn too
    assert outputs.is_marked(png)
    assert curves.main([str(results), str(png), "--folders", "tiny"]) == 0  # its own: replaced

    # Uniform plays the best arm with probability 1/5 every round: R(t) = 0.5 t (1 - 1/5)
    traces = load_results(results / "tiny").traces
    regret = curves.pseudo_regret(traces["uniform/prob_best"], 0.5)
    np.testing.assert_allclose(regret, np.tile(0.4 * np.arange(1, 65), (3, 1)), rtol=1e-6)
    # R(T) is the mean of sum_t (p_t . l_t - 0.25): R T terms of variance <= 0.5**2 / 12, 4 se
    gap = (np.asarray(traces["stabl/expected_loss"], np.float64) - 0.25).sum()
    regret = curves.pseudo_regret(traces["stabl/prob_best"], 0.5)[:, -1].sum()
    assert abs(gap - regret) <= 4.0 * np.sqrt(3 * 64 * 0.5**2 / 12)

    theirs = tmp_path / "theirs"  # a user's folder, holding a PNG of one of its names
    theirs.mkdir()
    (theirs / "tiny_sa.png").write_bytes(b"their plot")
    args = [str(results), str(theirs), "--folders", "tiny"]
    with pytest.raises(SystemExit) as stop:  # before any figure is drawn
        curves.main(args)
    assert stop.value.code == 2 and "is not in a folder stabl_jax made" in capsys.readouterr().err
    assert sorted(p.name for p in theirs.iterdir()) == ["tiny_sa.png"]
    assert (theirs / "tiny_sa.png").read_bytes() == b"their plot"
    assert curves.main([*args, "--overwrite"]) == 0
    assert (theirs / "tiny_sa.png").read_bytes()[:4] == b"\x89PNG" and outputs.is_marked(theirs)


PAIRED, ALL = "tiny-naive is not paired with", "with --set 'save_traces=\"all\"'"
#: Each drawn after a good folder (its summary.json edited, a trace dropped): nothing is drawn
#: and the folder is named (exit 2).
UNDRAWABLE = [
    ("tiny-naive", lambda s: s.update(seed=1), "", PAIRED),
    ("tiny-naive", lambda s: s["env"].update(num_arms=6), "", PAIRED),
    ("tiny-naive", lambda s: s["env"].update(bonus=0.25), "", PAIRED),
    ("tiny-naive", lambda s: s["config"].update(feedback="reward"), "", PAIRED),
    ("played", None, "uniform/prob_best", f"played: no uniform/prob_best trace; rerun it {ALL}"),
    ("bernoulli", lambda s: s.update(env={"name": "bernoulli"}), "", "bernoulli: env 'bernoulli' "
     "has no 'bonus'"),
    ("one", lambda s: s.update(runs=1), "", "one has 1 run(s), and a 95% band needs 2 or more"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "edit", "drop", "message"), UNDRAWABLE)
def test_an_undrawable_folder_is_refused(results, tmp_path, capsys, name, edit, drop, message):
    _copy(results / "tiny", tmp_path / "tiny")
    source = results / ("tiny-naive" if name == "tiny-naive" else "tiny")
    _copy(source, tmp_path / name, edit, drop)
    folders = ["tiny"] if name == "tiny-naive" else ["tiny", name]
    with pytest.raises(SystemExit) as stop:
        curves.main([str(tmp_path), str(tmp_path / "png"), "--folders", *folders])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "png").exists()


def test_no_folder_to_draw_is_an_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        curves.main([str(tmp_path), str(tmp_path / "png")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and not (tmp_path / "png").exists()
    assert "no results folder to draw: none of expert_advice_equal-theory-loss, " in err
    assert "has a summary.json; give the folder that holds them, or name yours with" in err


def test_a_damaged_traces_file_is_named(results, tmp_path, capsys):
    """``traces.npz`` cut short, or a byte of one array changed: exit 2 naming the file."""
    for name in ("good", "cut", "flipped"):  # without the manifest, which names any change
        _copy(results / "tiny", tmp_path / "res" / name)
    traces = tmp_path / "res" / "cut" / "traces.npz"
    traces.write_bytes(traces.read_bytes()[:300])
    flip_a_byte_of(tmp_path / "res" / "flipped" / "traces.npz", "uniform/prob_best.npy")
    png = tmp_path / "png"
    for name, reason in (("cut", "File is not a zip file"), ("flipped", "Bad CRC-32")):
        with pytest.raises(SystemExit) as stop:
            curves.main([str(tmp_path / "res"), str(png), "--folders", "good", name])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and "Traceback" not in err
        assert f"{tmp_path / 'res' / name / 'traces.npz'} cannot be read (BadZipFile: " in err
        assert reason in err
    assert sorted(p.name for p in png.iterdir()) == ["good_regret.png", "good_sa.png"]
