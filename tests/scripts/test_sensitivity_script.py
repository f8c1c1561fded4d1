"""``experiments/sensitivity.py`` on a hand-made ``stabl-jax sweep`` ``summary.json``: heatmaps
and lines written, grid-edge optima named, an exploration rate's 0 not taken for a grid edge."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from stabl_jax.experiment import outputs, plots
from tests.scripts.load import ROOT, load_script

script = load_script(ROOT / "experiments" / "sensitivity.py", "sensitivity_script")


def _sweep(learners: dict) -> dict:
    """A ``stabl-jax sweep`` summary.json of ``learners`` (4 runs a point, tuned on seed 7)."""
    config = {"name": "demo", "feedback": "loss"}
    return {"config": config, "seed": 0, "tune_seed": 7, "runs_per_point": 4, "learners": learners}


def _entry(fields, axes, score):
    """A learner's sweep entry: ``tuning_points`` scored by ``score``, ``points`` (the reported
    seed's) by its negative, so a plot of the wrong seed's points would box another point."""
    points = [list(p) for p in itertools.product(*axes)]
    mean = [score(*p) for p in points]
    best = points[int(np.argmax(mean))]

    def rows(sign):
        at = [dict(zip(fields, p, strict=True)) for p in points]
        return [{**p, "mean": sign * m, "ci95": 0.01} for p, m in zip(at, mean, strict=True)]

    best = {"params": dict(zip(fields, best, strict=True))}
    return {"fields": fields, "points": rows(-1.0), "tuning_points": rows(1.0), "best": best}


def test_sensitivity_plots_and_edges(tmp_path, capsys):
    scales, metas, gammas = [1.0, 2.0, 4.0, 8.0], [1.0, 2.0, 4.0], [0.0, 0.1, 0.3]
    # stabl: best at the grid's upper edge; exp3_uniform: at gamma = 0, not an edge
    stabl = _entry(["expert_lr_scale", "meta_lr_scale"], [scales, metas], lambda e, m: m)
    exp3 = _entry(["lr_scale", "gamma"], [scales, gammas], lambda s, g: -abs(s - 2.0) - g)
    saol = _entry(["lr_scale"], [scales], lambda s: -abs(s - 4.0))
    sweep = _sweep({"stabl": stabl, "exp3_uniform": exp3, "saol": saol})
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "summary.json").write_text(json.dumps(sweep))
    assert script.main([str(tmp_path), str(tmp_path / "png")]) == 0
    out = capsys.readouterr().out
    assert "upper edge of meta_lr_scale: {'expert_lr_scale': 1.0, 'meta_lr_scale': 4.0}" in out
    assert "interior: {'lr_scale': 2.0, 'gamma': 0.0}" in out
    assert "interior: {'lr_scale': 4.0}" in out
    for name in ("demo_sensitivity.png", "demo_sensitivity_1d.png"):
        assert (tmp_path / "png" / name).stat().st_size > 10_000
    assert outputs.is_marked(tmp_path / "png")  # its folder: a rerun replaces them
    assert script.main([str(tmp_path), str(tmp_path / "png")]) == 0
    # a PNG of one of its names in a user's folder is left alone, nothing drawn (--overwrite)
    user = tmp_path / "user"
    user.mkdir()
    theirs = user / "demo_sensitivity_1d.png"
    theirs.write_bytes(b"their plot")
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        script.main([str(tmp_path), str(user)])
    assert stop.value.code == 2 and theirs.read_bytes() == b"their plot"
    assert [p.name for p in user.iterdir()] == [theirs.name]
    err = capsys.readouterr().err
    assert "demo_sensitivity_1d.png is there and is not in a folder stabl_jax made" in err
    assert script.main([str(tmp_path), str(user), "--overwrite"]) == 0
    assert theirs.read_bytes()[:4] == b"\x89PNG" and outputs.is_marked(user)

    grid = script.grid_of("stabl", sweep["learners"]["stabl"])
    assert grid.mean.shape == (3, 4) and grid.chosen == (2, 0)
    np.testing.assert_array_equal(grid.mean[:, 1], metas)  # rows: meta scale, columns: expert
    edges = ["lower edge of expert_lr_scale", "upper edge of meta_lr_scale"]
    assert plots.grid_edges(grid) == edges


def _one_run(sweep):
    sweep["runs_per_point"] = 1
    for row in sweep["learners"]["saol"]["tuning_points"]:
        row["ci95"] = float("nan")
    return json.dumps(sweep)


UNDRAWN = {
    "one run a point": (_one_run, "has 1 run(s), and a 95% band needs 2 or more: rerun it with "
                        "stabl-jax sweep --runs 2 or more"),
    "not JSON": (lambda sweep: json.dumps(sweep)[:-1], "is not valid JSON (Expecting"),
    "keys missing": (lambda sweep: json.dumps({"learners": sweep["learners"]}), "is not a "
                     "summary.json of stabl-jax sweep: it has no ['config', 'seed', 'runs_per_"
                     "point']"),
}  # fmt: skip


@pytest.mark.parametrize(("text", "message"), UNDRAWN.values(), ids=UNDRAWN)
def test_a_sweep_it_cannot_draw_is_refused_before_any_figure(tmp_path, capsys, text, message):
    """One run a point, not JSON, or not a sweep's keys: named, nothing drawn (nor the good)."""
    sweep = _sweep({"saol": _entry(["lr_scale"], [[1.0, 2.0]], lambda s: s)})
    for name, body in (("a_good", json.dumps(sweep)), ("bad", text(sweep))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(body)
    with pytest.raises(SystemExit) as stop:
        script.main([str(tmp_path), str(tmp_path / "png")])
    assert stop.value.code == 2 and not (tmp_path / "png").exists()
    assert f"{tmp_path / 'bad' / 'summary.json'} {message}" in capsys.readouterr().err


def test_a_folder_without_sweeps_is_an_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        script.main([str(tmp_path / "empty"), str(tmp_path / "png")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and not (tmp_path / "png").exists()
    assert f"error: {tmp_path / 'empty'}: no */summary.json to draw; give the folder" in err
