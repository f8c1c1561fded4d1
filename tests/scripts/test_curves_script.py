"""``experiments/curves.py`` on tiny results folders it makes itself (3 runs, T = 64): the
pseudo-regret's definition, the companion folder's learners, and the PNGs written."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from stabl_jax.experiment import cli, load_results, outputs
from tests.conftest import flip_a_byte_of
from tests.scripts.load import load_script

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "runs=3",
    "horizon=64",
    "env.num_arms=5",
    "window=8",
    "env.change_points=[21, 22, 28, 50]",
    'save_traces="all"',
]


@pytest.fixture(scope="module")
def curves():
    return load_script(ROOT / "experiments" / "curves.py", "curves_script")


def _run(out: Path, learners: str, *extra: str) -> Path:
    """``stabl-jax run`` of the tiny config; ``extra`` overrides replace TINY's of their key
    (a key set twice is refused)."""
    args = ["run", str(ROOT / "configs" / "expert_advice_random.toml"), "--no-progress"]
    replaced = {item.partition("=")[0] for item in extra}
    tiny = [item for item in TINY if item.partition("=")[0] not in replaced]
    for item in [*tiny, f"learners={learners}", *extra]:
        args += ["--set", item]
    assert cli.main([*args, "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def uniform(tmp_path_factory) -> Path:
    """A tiny folder of Uniform alone, run once for the module."""
    return _run(tmp_path_factory.mktemp("uniform") / "tiny", '["uniform"]')


def _copy(folder: Path, to: Path) -> Path:
    shutil.copytree(folder, to)
    return to


def test_curves_of_a_tiny_folder_and_its_companion(curves, tmp_path, capsys):
    main = _run(tmp_path / "res" / "tiny", '["uniform", "stabl"]')
    _run(tmp_path / "res" / "tiny-naive", '["uniform", "stabl_naive"]')
    assert curves.main([str(tmp_path / "res"), str(tmp_path / "png"), "--folders", "tiny"]) == 0
    written = sorted(p.name for p in (tmp_path / "png").glob("*.png"))
    assert written == ["tiny_regret.png", "tiny_sa.png"]
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == [".stabl_jax_results", *written]
    assert all((tmp_path / "png" / name).stat().st_size > 10_000 for name in written)
    out = capsys.readouterr().out
    assert "stabl_naive" in out  # the companion's learner is drawn too

    # Uniform plays the best arm with probability 1/5 every round: R(t) = 0.5 t (1 - 1/5)
    traces = load_results(main).traces
    regret = curves.pseudo_regret(traces["uniform/prob_best"], 0.5)
    np.testing.assert_allclose(regret, np.tile(0.4 * np.arange(1, 65), (3, 1)), rtol=1e-6)
    # For any learner, R(T) is the conditional mean of the expected-loss regret
    # sum_t (p_t . l_t - 0.25): their difference sums R*T terms of mean 0, each a mixture of
    # U[0, 0.5) deviations with variance <= 0.5**2 / 12; tolerance 4 standard errors.
    gap = (np.asarray(traces["stabl/expected_loss"], np.float64) - 0.25).sum()
    regret = curves.pseudo_regret(traces["stabl/prob_best"], 0.5)[:, -1].sum()
    assert abs(gap - regret) <= 4.0 * np.sqrt(3 * 64 * 0.5**2 / 12)


@pytest.mark.parametrize(
    "differs",
    [
        "seed=1",
        # Same seed, runs and change points: the companion's learners faced another
        # environment or feedback, and were drawn beside the folder's as if paired.
        "env.num_arms=6",
        "env.bonus=0.25",
        'feedback="reward"',
    ],
)
def test_unpaired_companion_is_refused(curves, uniform, tmp_path, differs, capsys):
    _copy(uniform, tmp_path / "tiny")
    _run(tmp_path / "tiny-naive", '["uniform"]', differs)
    with pytest.raises(SystemExit) as stop:
        curves.main([str(tmp_path), str(tmp_path / "png"), "--folders", "tiny"])
    assert stop.value.code == 2 and "tiny-naive is not paired with" in capsys.readouterr().err
    assert not (tmp_path / "png").exists()


def test_every_folder_is_checked_before_any_figure(curves, uniform, tmp_path, capsys):
    """A folder without ``prob_best`` traces (the default ``save_traces``), or of another
    environment than expert advice, after a good one: the good one's PNGs were written, then
    the script stopped with exit 1. Now nothing is drawn and the folder is named, exit 2."""
    _copy(uniform, tmp_path / "res" / "good")
    _run(tmp_path / "res" / "played", '["uniform"]', 'save_traces=["played"]')
    png = tmp_path / "png"
    with pytest.raises(SystemExit) as stop:
        curves.main([str(tmp_path / "res"), str(png), "--folders", "good", "played"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and not png.exists()
    assert "played: no uniform/prob_best trace; rerun it with --set 'save_traces=\"all\"'" in err
    _run(tmp_path / "res" / "bernoulli", '["uniform"]', 'env.name="bernoulli"')
    with pytest.raises(SystemExit) as stop:
        curves.main([str(tmp_path / "res"), str(png), "--folders", "good", "bernoulli"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "bernoulli: env 'bernoulli' has no 'bonus'" in err, err
    assert not png.exists()


def test_no_folder_to_draw_is_an_error(curves, tmp_path, capsys):
    """It printed a note per folder and exited 1 without a word of what to do."""
    with pytest.raises(SystemExit) as stop:
        curves.main([str(tmp_path), str(tmp_path / "png")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and not (tmp_path / "png").exists()
    assert "no results folder to draw: none of expert_advice_equal-theory-loss, " in err
    assert "has a summary.json; give the folder that holds them, or name yours with" in err


def test_a_png_it_did_not_write_is_left_alone(curves, uniform, tmp_path, capsys):
    _copy(uniform, tmp_path / "res" / "tiny")
    png = tmp_path / "png"
    args = [str(tmp_path / "res"), str(png), "--folders", "tiny"]
    assert curves.main(args) == 0
    assert outputs.is_marked(png) and len(list(png.glob("*.png"))) == 2
    assert curves.main(args) == 0  # its own figures are replaced
    theirs = tmp_path / "theirs"  # a user's folder, holding a PNG of one of its names
    theirs.mkdir()
    (theirs / "tiny_sa.png").write_bytes(b"their plot")
    args = [str(tmp_path / "res"), str(theirs), "--folders", "tiny"]
    with pytest.raises(SystemExit) as stop:  # before any figure is drawn
        curves.main(args)
    assert stop.value.code == 2 and "is not in a folder stabl_jax made" in capsys.readouterr().err
    assert (theirs / "tiny_sa.png").read_bytes() == b"their plot"
    assert sorted(p.name for p in theirs.iterdir()) == ["tiny_sa.png"]
    assert curves.main([*args, "--overwrite"]) == 0
    assert (theirs / "tiny_sa.png").read_bytes()[:4] == b"\x89PNG" and outputs.is_marked(theirs)


def test_a_folder_of_one_run_is_refused_before_any_figure(curves, tmp_path, capsys):
    """Its bands and the printed intervals were ``nan`` (exit 0)."""
    _run(tmp_path / "res" / "tiny", '["uniform"]', "runs=1")
    with pytest.raises(SystemExit) as stop:
        curves.main([str(tmp_path / "res"), str(tmp_path / "png"), "--folders", "tiny"])
    assert stop.value.code == 2
    assert "tiny has 1 run(s), and a 95% band needs 2 or more" in capsys.readouterr().err
    assert not (tmp_path / "png").exists()


def test_a_damaged_traces_file_is_named(curves, uniform, tmp_path, capsys):
    """A folder's ``traces.npz`` cut short: refused before any figure; one array's byte
    changed (found only when that array is read): refused when it is, exit 2, naming the
    file, no traceback."""
    good = _copy(uniform, tmp_path / "res" / "good")
    for name in ("cut", "flipped"):  # without the manifest, which names any changed byte
        shutil.copytree(good, tmp_path / "res" / name)
        (tmp_path / "res" / name / "manifest.json").unlink()
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
