"""``stabl-jax sweep`` on a tiny config (5 arms, T = 64, ``--runs 4`` a point): one sweep with
``--tune-seed`` checked file by file and point by point against ``simulate``."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import simulate
from stabl_jax.experiment import cli
from stabl_jax.experiment import sweep as sweep_module
from stabl_jax.experiment.kinds import load_config
from stabl_jax.experiment.sweep import Grid, best_of
from tests.experiment.runs import ran

REPO = Path(__file__).resolve().parents[2]
TINY = """\
name = "tiny"
seed = 3
runs = 6
horizon = 64
learners = ["exp3_uniform", "stabl"]

[env]
name = "expert_advice"
num_arms = 5
num_segments = 2

[params.exp3_uniform]
gamma = 0.05
"""
GRIDS = "--grid exp3_uniform.lr_scale=1,2,4 --grid stabl.expert_lr_scale=2**0..2**1".split()
GRIDS += ["--grid", "stabl.meta_lr_scale=1,8"]
TUNE_SEED = 11
SEEDS = "[0, 4294967295]"


def configs_digest() -> dict[str, str]:
    """Every file under ``configs/`` with the hash of its bytes and its mtime."""
    files = [p for p in sorted((REPO / "configs").rglob("*")) if p.is_file()]
    digest = lambda p: f"{hashlib.sha256(p.read_bytes()).hexdigest()} {p.stat().st_mtime_ns}"  # noqa: E731
    return {str(p): digest(p) for p in files}


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("sweep")
    config, out = tmp / "tiny.toml", tmp / "out"
    config.write_text(TINY)
    before = configs_digest()
    argv = ["sweep", str(config), *GRIDS, "--tune-seed", str(TUNE_SEED), "--runs", "4"]
    argv += ["--out", str(out)]
    status, after = cli.main([*argv, "--no-progress"]), configs_digest()
    return dict(status=status, out=out, config=config, argv=argv, before=before, after=after)


def test_folder_holds_every_file_and_the_tuned_config(swept: dict) -> None:
    assert swept["status"] == 0
    out = swept["out"]
    names = {p.name for p in out.iterdir()}
    assert {"summary.json", "results.csv", "tuned.toml", "COMPLETE"} <= names
    assert {"sweep_exp3_uniform.png", "sweep_stabl.png"} <= names
    summary = json.loads((out / "summary.json").read_text())
    assert summary["command"] == ["stabl-jax", *swept["argv"], "--no-progress"]
    assert summary["seed"] == 3 and summary["tune_seed"] == TUNE_SEED
    assert summary["runs_per_point"] == 4 and "versions" in summary and "code" in summary
    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["learner"] for r in rows] == ["exp3_uniform"] * 3 + ["stabl"] * 4
    assert [r["lr_scale"] for r in rows[:3]] == ["1.0", "2.0", "4.0"]
    stabl = summary["learners"]["stabl"]
    assert [float(r["mean"]) for r in rows[3:]] == [p["mean"] for p in stabl["points"]]
    assert stabl["grid"] == {"expert_lr_scale": [1.0, 2.0], "meta_lr_scale": [1.0, 8.0]}
    assert stabl["programs_compiled"] >= 1  # the vmapped grid's program, at least
    for learner in summary["learners"].values():  # the best point's edge flag
        grid = Grid("x", tuple(learner["fields"]), tuple(map(tuple, learner["grid"].values())))
        point = [learner["best"]["params"][f] for f in learner["fields"]]
        assert learner["best"]["on_edge"] is bool(grid.on_edge(point))
    # the tuned config in the folder, configs/ untouched; the config's own run count
    assert swept["after"] == swept["before"]
    tuned = load_config(out / "tuned.toml")
    assert tuned.name == "tiny_tuned" and tuned.seed == 3 and tuned.runs == 6
    for name, learner in summary["learners"].items():
        own = {"gamma": 0.05} if name == "exp3_uniform" else {}
        assert tuned.params[name] == {**own, **learner["best"]["params"]}


def direct(config: object, name: str, values: dict[str, float], seed: int) -> tuple:
    """Mean and Student's t 95% half-width of one point simulated alone (4 runs, ``key(seed)``)."""
    learner = config.make_learner(name)  # type: ignore[attr-defined]
    params = config.learner_params(learner, name)  # type: ignore[attr-defined]
    params = params.replace(**{k: jnp.full(4, v, jnp.float32) for k, v in values.items()})
    env = config.make_env()  # type: ignore[attr-defined]
    result = simulate(learner, env, jax.random.key(seed), 4, params=params, traces=("loss",))
    reward = 1.0 - np.asarray(result.loss, np.float64).mean(axis=1)
    return reward.mean(), 3.1824463052837078 * reward.std(ddof=1) / 2.0  # t_{0.975, 3} s / sqrt(4)


@pytest.mark.parametrize("name", ["exp3_uniform", "stabl"])
def test_each_point_equals_it_simulated_alone(swept: dict, name: str) -> None:
    """Paired draws: a point's numbers are its own run alone, on the reported and tuning seeds."""
    config = load_config(swept["config"])
    learner = json.loads((swept["out"] / "summary.json").read_text())["learners"][name]
    for key, seed in (("points", 3), ("tuning_points", TUNE_SEED)):
        for point in learner[key]:
            values = {f: point[f] for f in learner["fields"]}
            mean, half = direct(config, name, values, seed)
            assert (point["mean"], point["ci95"]) == (float(mean), float(half))
    # the best point is the tuning seed's largest mean, reported with its config-seed score
    best = learner["best"]
    tuning = [p["mean"] for p in learner["tuning_points"]]
    assert best["index"] == int(np.argmax(tuning)) and best["tuning"]["mean"] == max(tuning)
    assert best["mean"] == learner["points"][best["index"]]["mean"]


def test_tuned_toml_quotes_an_import_path_name(tmp_path: Path) -> None:
    """A learner named by import path is a quoted TOML key; the file loads back."""
    name = "stabl_jax.learners.exp3:EXP3"
    (tmp_path / "tiny.toml").write_text(TINY.replace('"exp3_uniform"', f'"{name}"'))
    config = load_config(tmp_path / "tiny.toml", runs=4)
    text = sweep_module.tuned_toml(config, {name: {"lr_scale": 2.0}}, TUNE_SEED, runs=6)
    doc = tomllib.loads(text)
    assert doc["params"][name] == {"lr_scale": 2.0} and doc["runs"] == 6
    assert doc["learners"] == [name, "stabl"]
    (tmp_path / "tuned.toml").write_text(text)
    tuned = load_config(tmp_path / "tuned.toml")
    assert tuned.params[name] == {"lr_scale": 2.0} and tuned.runs == 6


def test_tuned_toml_puts_a_static_option_with_the_learner_options(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text(TINY.replace('"stabl"', '"sw_ucb"'))
    config = load_config(tmp_path / "tiny.toml", runs=4)
    text = sweep_module.tuned_toml(config, {"sw_ucb": {"window": 16.0}}, TUNE_SEED, runs=6)
    (tmp_path / "tuned.toml").write_text(text)
    tuned = load_config(tmp_path / "tuned.toml")
    assert tuned.learner_options["sw_ucb"] == {"window": 16} and "sw_ucb" not in tuned.params
    assert tuned.make_learner("sw_ucb").window == 16


@pytest.mark.parametrize("fields", [1, 2])
def test_the_plot_draws_the_tuning_seed_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fields: int
) -> None:
    """Colours (or the line): the tuning seed's scores, the mark its choice; the title names
    both seeds and the chosen point's reported score."""
    values = ((1.0, 2.0), (4.0, 8.0))[:fields]
    grid = Grid("stabl", ("expert_lr_scale", "meta_lr_scale")[:fields], values)
    size = len(grid.points)
    tuning = [{"mean": 0.1 * i, "ci95": 0.01} for i in range(size)]
    reported = [{"mean": 0.5 - 0.1 * i, "ci95": 0.02} for i in range(size)]
    best = {**best_of(grid, tuning), "mean": 0.25, "ci95": 0.03}
    report = {"points": reported, "tuning_points": tuning, "best": best}
    drawn: dict = {}
    target = "plot_grids" if fields == 2 else "plot_sensitivity"
    monkeypatch.setattr(sweep_module.plots, target, lambda *a, **k: drawn.update(a=a, k=k))
    sweep_module.draw(grid, report, [TUNE_SEED, 3], tmp_path / "p.png")
    title = drawn["k"]["title"]
    assert f"chosen on tuning seed {TUNE_SEED} (drawn)" in title
    assert "reporting seed 3: 0.2500 ± 0.0300" in title
    assert drawn["k"]["score"].startswith(f"mean reward on seed {TUNE_SEED}")
    shown = drawn["a"][0][0].mean
    np.testing.assert_array_equal(np.ravel(shown), [r["mean"] for r in tuning])


def test_on_edge() -> None:
    grid = Grid("stabl", ("expert_lr_scale", "meta_lr_scale"), ((1.0, 2.0, 4.0), (1.0, 2.0, 3.0)))
    rows = [{"mean": float(i == 4), "ci95": 0.1} for i in range(9)]  # the centre
    assert best_of(grid, rows)["on_edge"] is False
    rows = [{"mean": float(i == 5), "ci95": 0.1} for i in range(9)]  # (2, 3): meta's top
    best = best_of(grid, rows)
    assert best["on_edge"] is True and best["edges"] == ["upper edge of meta_lr_scale"]
    assert best["params"] == {"expert_lr_scale": 2.0, "meta_lr_scale": 3.0}
    one = Grid("stabl", ("expert_lr_scale", "meta_lr_scale"), ((1.0, 2.0, 4.0), (8.0,)))
    assert best_of(one, [{"mean": m, "ci95": 0.0} for m in (0.0, 1.0, 0.0)])["on_edge"] is False
    low = best_of(one, [{"mean": m, "ci95": 0.0} for m in (1.0, 0.0, 0.0)])
    assert low["edges"] == ["lower edge of expert_lr_scale"]
    gamma = Grid("exp3_uniform", ("gamma",), ((0.0, 0.1, 0.3),))  # 0: gamma's own bound
    assert best_of(gamma, [{"mean": m, "ci95": 0.0} for m in (1.0, 0.0, 0.0)])["on_edge"] is False


TUNE = " ".join(GRIDS) + " --tune-seed "  # the grids, then a tuning seed


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ("--grid nobody.lr_scale=1,2", "unknown learner 'nobody'; the config's learners are"),
        ("--grid stabl_naive.expert_lr_scale=1", "'stabl_naive' is not in tiny's learners"),
        ("--grid stabl.lr_scale=1,2", "stabl's Params has no field 'lr_scale' and it is no static"),
        ("--grid stabl.round_offset=0.5",
         "--grid stabl.round_offset=0.5: round_offset takes integers"),
        ("--grid env.num_arms=3", "ExpertAdvice's traced numbers are ['baseline_high', 'bonus']"),
        ("--grid env.bonus=-1", "--grid env.bonus=-1: "),
        ("--grid stabl.expert_lr_scale=-1,2", "-1 outside stabl's range"),
        ("--grid stabl.expert_lr_scale=", "the grid is empty"),
        ("--grid stabl.expert_lr_scale=1,x", "the values must be numbers"),
        ("--grid stabl.expert_lr_scale=1,1", "1 is given twice"),
        ("--grid stabl=1", "expected LEARNER.FIELD="),
        ("", "the grid is empty: give at least one --grid"),
        (TUNE + "4294967296", f"--tune-seed 4294967296: must be an int in {SEEDS}"),
        (TUNE + "-1", f"--tune-seed -1: must be an int in {SEEDS}"),
        (TUNE + "3", "--tune-seed 3 is the reporting seed (seed = 3)"),
        (TUNE + "0 --seed 0", "--tune-seed 0 is the reporting seed (seed = 0)"),
        (TUNE + "5 --grid env.bonus=0.1,0.2", "numbers are studied, not tuned"),
    ],
)  # fmt: skip
def test_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture, flags: str, message: str):
    """Exit 2 naming the value, writing nothing; a bad --tune-seed says what to give or drop."""
    (tmp_path / "tiny.toml").write_text(TINY)
    out = tmp_path / "out"
    argv = ["sweep", str(tmp_path / "tiny.toml"), *flags.split(), "--out", str(out)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and not out.exists()
    assert "--tune-seed" not in flags or "give " in err or "drop " in err


def test_dry_run_computes_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "tiny.toml").write_text(TINY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sweep_module, "simulate", ran)
    argv = ["sweep", "tiny.toml", *GRIDS, "--runs", "8", "--dry-run"]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "exp3_uniform: lr_scale = 3 = 3 points x 8 runs x 64 rounds" in printed
    assert "stabl: expert_lr_scale x meta_lr_scale = 2 x 2 = 4 points x 8 runs" in printed
    assert "of memory" in printed
    assert str(tmp_path / "results" / "sweep-tiny-seed3") in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.toml"]


def test_an_environment_number_and_a_static_option_equal_their_points_alone(tmp_path: Path):
    """``env.bonus`` and ``sw_ucb.window`` points equal their environment and learner simulated
    alone on the same keys; more bonus values compile no more programs, a second window does."""
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.replace('"exp3_uniform", "stabl"', '"exp3_uniform", "sw_ucb"'))
    config = load_config(path, runs=4)
    wanted = {"env": {"bonus": (0.2, 0.5)}, "sw_ucb": {"window": (8.0, 16.0)}}
    grids = sweep_module.check_grids(config, wanted)
    expected = [("sw_ucb", ("window", "env.bonus")), ("exp3_uniform", ("env.bonus",))]
    assert [(g.learner, g.fields) for g in grids] == expected
    compiled = {}  # programs each grid compiles from an empty cache
    for grid in grids:
        jax.clear_caches()
        reward, compiled[grid.learner] = sweep_module.sweep_rewards(config, grid, 4, 3, False)
        for row, point in zip(reward, grid.points, strict=True):
            values = dict(zip(grid.fields, point, strict=True))
            env = dataclasses.replace(config.make_env(), bonus=values.pop("env.bonus"))
            learner = config.make_learner(grid.learner)
            learner = dataclasses.replace(learner, **{k: int(v) for k, v in values.items()})
            params = config.learner_params(learner, grid.learner)
            alone = simulate(learner, env, jax.random.key(3), 4, params=params, traces=("loss",))
            np.testing.assert_array_equal(row, 1.0 - np.asarray(alone.loss, np.float64).mean(1))
    jax.clear_caches()  # three values of the environment's number compile what two did
    three = Grid("exp3_uniform", ("env.bonus",), ((0.2, 0.3, 0.5),))
    assert sweep_module.sweep_rewards(config, three, 4, 3, False)[1] == compiled["exp3_uniform"]
    jax.clear_caches()  # one window compiles fewer programs than two
    one = Grid("sw_ucb", ("window",), ((8.0,),))
    assert sweep_module.sweep_rewards(config, one, 4, 3, False)[1] < compiled["sw_ucb"]
