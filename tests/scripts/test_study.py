"""The scaling study (experiments/study.py): power-law fits and bootstrap intervals on data of a
known exponent, paired groups merged, the study configs, and the study end to end, tiny."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from stabl_jax.envs import geometric_segment_lengths
from stabl_jax.experiment import cli, outputs
from stabl_jax.experiment.kinds import load_config
from tests.scripts.load import ROOT, load_script

study = load_script(ROOT / "experiments" / "study.py")

Z = 4.0  # |estimate - truth| < Z standard errors: a false failure has probability < 1e-4


def test_fit_power_law_is_exact_on_noiseless_data_vectorised_and_refuses_what_it_cannot_fit():
    x = np.array([32.0, 64.0, 128.0, 256.0])
    y = np.stack([2.0 * x**0.5, 0.3 * x**1.0, 7.0 * x**0.25])
    a, b = study.fit_power_law(x, y)
    np.testing.assert_allclose(b, [0.5, 1.0, 0.25], atol=1e-12)
    np.testing.assert_allclose(np.exp(a), [2.0, 0.3, 7.0], rtol=1e-12)
    for bad_x, bad_y, match in [
        ([1.0, 2.0], [1.0, 0.0], "positive"),
        ([1.0, 2.0], [1.0, np.nan], "finite"),
        ([1.0, 1.0], [1.0, 2.0], "2 distinct"),
        ([0.0, 2.0], [1.0, 2.0], "x must be positive"),
        ([1.0, 2.0], [1.0, 2.0, 3.0], "length len\\(x\\)=2"),
    ]:
        with pytest.raises(ValueError, match=match):
            study.fit_power_law(np.asarray(bad_x), np.asarray(bad_y))


def _synthetic_runs(rng, x, exponent, sigma, runs):
    """Per-run values ``3 x^b (1 + sigma eps)``, ``eps ~ N(0, 1)`` independent over runs and x."""
    noise = 1.0 + sigma * rng.standard_normal((runs, x.shape[0]))
    return 3.0 * x**exponent * noise


def test_bootstrap_recovers_a_known_exponent_with_a_calibrated_reproducible_interval():
    rng = np.random.default_rng(0)
    x = 2.0 ** np.arange(5, 11)
    sigma, runs, exponent = 0.5, 400, 0.5
    # delta method: the slope's se = (sigma / sqrt(R)) / sqrt(sum (log x - mean)^2)
    se = sigma / math.sqrt(runs) / math.sqrt(((np.log(x) - np.log(x).mean()) ** 2).sum())
    fit = study.exponent_with_interval(x, _synthetic_runs(rng, x, exponent, sigma, runs))
    assert abs(fit["b"] - exponent) < Z * se
    assert fit["lo"] < exponent < fit["hi"]
    # the bootstrap's sd of b estimates se (1000 resamples: 2 % relative error)
    assert 0.8 * se < fit["se"] < 1.2 * se
    assert 0.8 * 2 * 1.96 * se < fit["hi"] - fit["lo"] < 1.2 * 2 * 1.96 * se
    data = _synthetic_runs(rng, x[:3], 1.0, 0.3, 50)
    one, two = (study.exponent_with_interval(x[:3], data, resamples=100, seed=5) for _ in "12")
    assert one == two


def test_bootstrap_coverage_over_repeated_experiments():
    """40 studies: the 95% interval covers >= 33 times (Binomial(40, 0.95) < 33: p < 1e-3)."""
    rng = np.random.default_rng(1)
    x = np.array([10.0, 30.0, 100.0, 300.0])
    covered = 0
    for trial in range(40):
        columns = [c for c in _synthetic_runs(rng, x, 0.3, 0.8, 200).T]  # independent columns
        fit = study.exponent_with_interval(x, columns, resamples=400, seed=trial)
        covered += fit["lo"] <= 0.3 <= fit["hi"]
    assert covered >= 33


def _point(change_points, learners):
    sa = {name: {"sa": np.ones((2, 2)), "queries": 1} for name in learners}
    point = {"windows": [32, 64], "runs": 2, "change_points": np.asarray(change_points)}
    return point | {"learners": sa}


def test_groups_merge_only_when_they_faced_the_same_draws():
    a = _point([[5], [7]], ["stabl"])
    merged = study.merge_groups([a, _point([[5], [7]], ["saol"])])
    assert set(merged["learners"]) == {"stabl", "saol"}
    with pytest.raises(ValueError, match="same environment draws"):
        study.merge_groups([a, _point([[5], [8]], ["saol"])])
    with pytest.raises(ValueError, match="in two groups"):
        study.merge_groups([a, _point([[5], [7]], ["stabl"])])


@pytest.mark.parametrize("name", ["study_geometric", "study_random"])
def test_study_configs_cover_every_scale(name):
    cfg = load_config(name)
    assert cfg.horizon == 2**14 and cfg.runs >= 1000
    assert cfg.sa_windows == tuple(2**k for k in range(5, 15))
    env = cfg.make_env()
    assert env.random_change_points and env.best_arm_order == "random"
    if name == "study_geometric":
        assert geometric_segment_lengths(cfg.horizon, 32) == (32, 32, *(2**k for k in range(6, 14)))
    for n in study.ARMS:
        assert load_config(name, [f"env.num_arms={n}"]).make_env().num_arms == n


def test_tiny_study_end_to_end(tmp_path, capsys):
    out = tmp_path / "study"
    figures = tmp_path / "figures"
    args = ["--out", str(out), "--table-windows", "64", "128", "--bootstrap", "50"]
    args += ["--figures", str(figures)]
    with pytest.raises(SystemExit) as stop:  # nothing to analyse yet: named, exit 2
        study.main(args)
    assert stop.value.code == 2 and "no complete point under" in capsys.readouterr().err
    tiny = ["--runs", "4", "--set", "horizon=256", "--set", "sa_windows=[32,64,128,256]"]
    # the module docstring's commands at two n, a group of one learner, tiny; FLH's at n = 3
    for n, group, learner in ((3, "base", "uniform"), (3, "flh", "flh"), (5, "base", "uniform")):
        point = ["configs/study_geometric.toml", "--set", f"env.num_arms={n}"]
        where = ["--set", f'learners=["{learner}"]', "--out", str(out / f"geometric-n{n}-{group}")]
        assert cli.main(["run", *point, *where, *tiny, "--no-progress"]) == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "study.md").write_text("my notes\n")
    with pytest.raises(SystemExit) as stop:  # before the analysis
        study.main([*args[2:], "--out", str(mine)])
    assert stop.value.code == 2 and (mine / "study.md").read_text() == "my notes\n"
    assert "is there and is not a previous experiments/study.py file" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["study.md"]
    # a PNG of a figure's name that stabl_jax did not write: refused, kept
    theirs = tmp_path / "their_figures"
    theirs.mkdir()
    (theirs / "study_geometric_sa_vs_n.png").write_bytes(b"their plot")
    with pytest.raises(SystemExit) as stop:
        study.main([*args[:-1], str(theirs)])
    assert stop.value.code == 2 and not (out / "study.json").exists()
    assert "is not in a folder stabl_jax made" in capsys.readouterr().err
    assert (theirs / "study_geometric_sa_vs_n.png").read_bytes() == b"their plot"
    assert study.main(args) == 0
    saved = json.loads((out / "study.json").read_text())
    assert study.main(args) == 0  # its own study.json and study.md are replaced
    assert json.loads((out / "study.json").read_text())["analysis"] == saved["analysis"]
    text = (out / "study.md").read_text()
    flh_row = next(line for line in text.splitlines() if line.startswith("| FLH "))
    assert flh_row.startswith("| FLH (Hazan & Seshadhri 2009) | `flh` | ")
    assert "not run" not in flh_row and " ± " in flh_row  # measured, like the others
    # the EFLH rows' group did not run
    assert "| EFLH-style (Lu & Hazan 2022), FLH meta | `eflh` | O(log log T / ε) |" in text
    assert "| EFLH-style, SAOL meta | `eflh_saol` | 1 + O(log log T / ε) |" in text
    assert "| not run | not run | not run | – |" in text
    assert "| `uniform` |" in text and "SA(64)" in text
    learner = saved["analysis"]["geometric"]["learners"]["uniform"]
    assert set(learner["by_n"]) == {"3", "5"}
    assert set(learner["exponent_n"]) == {"64", "128"}
    fit = learner["by_n"]["3"]["exponent_L"]
    assert fit["lo"] <= fit["b"] <= fit["hi"]
    # Uniform play against a gap of 0.5: SA(L) is of order L, never above it.
    means = np.asarray(learner["by_n"]["5"]["mean"])
    assert np.all(means > 0) and np.all(means <= np.array([32, 64, 128, 256]))
    assert saved["analysis"]["geometric"]["fit_windows"] == [32, 64]  # L <= T / 4
    drawn = [".stabl_jax_results", *(f"study_geometric_sa_vs_{x}.png" for x in "Ln")]
    assert sorted(p.name for p in figures.iterdir()) == drawn and outputs.is_marked(figures)
    loaded = study.load_analysis(out)["geometric"]["learners"]["uniform"]
    assert loaded["by_n"][3] == learner["by_n"]["3"]
    # a point's traces.npz cut short (no manifest: the .npz's own checks): named, exit 2
    cut = sorted(out.glob("*/traces.npz"))[0]
    (cut.parent / "manifest.json").unlink()
    cut.write_bytes(cut.read_bytes()[:1000])
    study_json = (out / "study.json").read_bytes()
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        study.main(args)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"error: {cut} cannot be read (BadZipFile: " in err
    assert "Traceback" not in err
    assert (out / "study.json").read_bytes() == study_json


def test_no_power_law_where_the_mean_regret_is_not_positive_and_no_signed_zero():
    x = np.array([32.0, 64.0, 128.0])
    negative = np.array([[10.0, 20.0, -50.0], [12.0, 18.0, -40.0]])
    fit = study.exponent_with_interval(x, negative, resamples=20)
    assert math.isnan(fit["b"]) and "no power-law fit" in fit["note"]
    assert study._fmt_fit(fit) == "no fit (SA ≤ 0)"
    # Positive means, but some resamples of the runs are not: a fit without an interval.
    mixed = np.array([[10.0, 20.0, 30.0], [12.0, 18.0, -20.0]])
    fit = study.exponent_with_interval(x, mixed, resamples=200)
    assert math.isfinite(fit["b"]) and math.isnan(fit["lo"]) and "resamples" in fit["note"]
    # An exponent that rounds to zero prints without a sign.
    assert study._fmt_fit({"b": -0.004, "lo": -0.012, "hi": 0.003}) == "0.00 [-0.01, 0.00]"
    assert study._exponent(-0.005001) == "-0.01" and study._exponent(0.004) == "0.00"


def test_tuned_study_config_differs_from_its_base_only_in_learners_and_scales():
    tuned_learners = ("stabl", "stabl_one_query", "saol")
    tuned, base = load_config("study_geometric_tuned"), load_config("study_geometric")
    assert tuned.learners == tuned_learners and set(tuned.params) == set(tuned_learners)
    for field in ("seed", "runs", "horizon", "env", "sa_windows", "feedback"):
        assert getattr(tuned, field) == getattr(base, field), field
    for name in tuned_learners:  # the sweep's best points lie inside its grid, not on an edge
        values = tuned.params[name]
        assert 1.0 < values["expert_lr_scale"] < 2.0**10 and 1.0 < values["meta_lr_scale"] < 2.0**7


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--table-windows", "999"], "--table-windows [999]: not SA(L) window lengths of"),
        (["--fit-windows", "0", "64"], "--fit-windows [0]: not SA(L) window lengths of"),
        (["--fit-windows", "64"], "--fit-windows needs >= 2 window lengths"),
        (["--bootstrap-seed", "-1"], "--bootstrap-seed must be an int >= 0, got -1"),
        (["--bootstrap", "9"], "--bootstrap must be >= 10 resamples, got 9"),
        (["--figure-prefix", "mine"], "--figure-prefix and --overwrite are for --figures"),
        (["--overwrite"], "--figure-prefix and --overwrite are for --figures: give --figures"),
    ],
)
def test_what_it_cannot_tabulate_is_refused_first(tmp_path, capsys, monkeypatch, extra, message):
    out = tmp_path / "out"
    (out / "geometric-n3-custom").mkdir(parents=True)
    window = [[1.0, 2.0, 4.0]]
    point = {"windows": [32, 64, 128], "runs": 2, "change_points": np.zeros((2, 1))}
    point["learners"] = {"uniform": {"sa": np.array(window * 2), "queries": 1}}
    monkeypatch.setattr(study, "load_points", lambda _: {("geometric", 3): point})
    windows = [] if "--table-windows" in extra else ["--table-windows", "64"]  # each once
    with pytest.raises(SystemExit) as stop:
        study.main(["--out", str(out), *windows, *extra])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["geometric-n3-custom"]
