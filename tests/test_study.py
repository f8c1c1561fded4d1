"""The scaling study (experiments/study.py): power-law fits and their bootstrap intervals on
synthetic data with a known exponent, the merging of paired groups, the study configs, and
the whole study end to end at a tiny size."""

from __future__ import annotations

import json
import math
import re
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from stabl_jax.envs import geometric_segment_lengths
from stabl_jax.experiment import results
from stabl_jax.experiment.kinds import load_config
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parent.parent
study = load_script(ROOT / "experiments" / "study.py")

Z = 4.0  # |estimate - truth| < Z standard errors: a false failure has probability < 1e-4


def test_fit_power_law_is_exact_on_noiseless_data_and_vectorised():
    x = np.array([32.0, 64.0, 128.0, 256.0])
    y = np.stack([2.0 * x**0.5, 0.3 * x**1.0, 7.0 * x**0.25])
    a, b = study.fit_power_law(x, y)
    np.testing.assert_allclose(b, [0.5, 1.0, 0.25], atol=1e-12)
    np.testing.assert_allclose(np.exp(a), [2.0, 0.3, 7.0], rtol=1e-12)


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        ([1.0, 2.0], [1.0, 0.0], "positive"),
        ([1.0, 2.0], [1.0, np.nan], "finite"),
        ([1.0, 1.0], [1.0, 2.0], "2 distinct"),
        ([0.0, 2.0], [1.0, 2.0], "x must be positive"),
        ([1.0, 2.0], [1.0, 2.0, 3.0], "length len\\(x\\)=2"),
    ],
)
def test_fit_power_law_rejects_what_it_cannot_fit(x, y, match):
    with pytest.raises(ValueError, match=match):
        study.fit_power_law(np.asarray(x), np.asarray(y))


def _synthetic_runs(rng, x, exponent, sigma, runs):
    """Per-run values ``3 x^b (1 + sigma eps)``, ``eps ~ N(0, 1)`` independent over runs and
    x: the mean over runs is exactly ``3 x^b``."""
    noise = 1.0 + sigma * rng.standard_normal((runs, x.shape[0]))
    return 3.0 * x**exponent * noise


def _slope_se(x, sigma, runs):
    """Delta method: ``log mean_k`` has standard error ``sigma / sqrt(R)`` (independent over k),
    so the least-squares slope has ``se = (sigma / sqrt(R)) / sqrt(sum (log x - mean)^2)``."""
    lx = np.log(x)
    return sigma / math.sqrt(runs) / math.sqrt(((lx - lx.mean()) ** 2).sum())


def test_bootstrap_recovers_a_known_exponent_with_a_calibrated_interval():
    rng = np.random.default_rng(0)
    x = 2.0 ** np.arange(5, 11)
    sigma, runs, exponent = 0.5, 400, 0.5
    se = _slope_se(x, sigma, runs)
    fit = study.exponent_with_interval(x, _synthetic_runs(rng, x, exponent, sigma, runs))
    assert abs(fit["b"] - exponent) < Z * se
    assert fit["lo"] < exponent < fit["hi"]
    # The bootstrap standard deviation of b estimates se: with 1000 resamples its own relative
    # error is about 1/sqrt(2 * 1000) = 2%, and the delta method is accurate to O(sigma^2 / R).
    assert 0.8 * se < fit["se"] < 1.2 * se
    # The 95% interval is about +- 1.96 se wide.
    assert 0.8 * 2 * 1.96 * se < fit["hi"] - fit["lo"] < 1.2 * 2 * 1.96 * se


def test_bootstrap_coverage_over_repeated_experiments():
    """Over 40 independent synthetic studies the 95% interval covers the truth about 38
    times; Binomial(40, 0.95) falls below 33 with probability < 1e-3."""
    rng = np.random.default_rng(1)
    x = np.array([10.0, 30.0, 100.0, 300.0])
    covered = 0
    for trial in range(40):
        columns = [c for c in _synthetic_runs(rng, x, 0.3, 0.8, 200).T]  # independent columns
        fit = study.exponent_with_interval(x, columns, resamples=400, seed=trial)
        covered += fit["lo"] <= 0.3 <= fit["hi"]
    assert covered >= 33


def test_bootstrap_is_reproducible_from_its_seed():
    rng = np.random.default_rng(2)
    x = np.array([1.0, 2.0, 4.0])
    data = _synthetic_runs(rng, x, 1.0, 0.3, 50)
    one = study.exponent_with_interval(x, data, resamples=100, seed=5)
    two = study.exponent_with_interval(x, data, resamples=100, seed=5)
    assert one == two


def _point(change_points, learners):
    return {
        "windows": [32, 64],
        "runs": 2,
        "arms": 3,
        "seconds": dict.fromkeys(learners, 1.0),
        "change_points": np.asarray(change_points),
        "learners": {name: {"sa": np.ones((2, 2)), "queries": 1} for name in learners},
    }


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


def test_plan_skips_unregistered_learners_and_rejects_unknown_names():
    plan = study.default_plan(["geometric"], [10], ["uniform", "stabl"])
    assert plan == {("geometric", 10, "custom"): ("uniform", "stabl")}
    with pytest.raises(ValueError, match="unknown learners"):
        study.default_plan(["geometric"], [10], ["nope"])
    with pytest.raises(ValueError, match="adversary must be one of"):
        study.default_plan(["sideways"], [10])
    # an n or group outside the plan was an empty plan ("no complete point to analyse")
    with pytest.raises(ValueError, match=r"--arms 7: the study has points at n in \[10, 30, 100"):
        study.default_plan(["geometric"], [30, 7])
    with pytest.raises(ValueError, match=r"--groups: unknown \['foo'\]; choose from \['base'"):
        study.default_plan(["geometric"], [30], groups=["foo", "base"])
    for (_, _, _), names in study.default_plan(["geometric", "random"], list(study.ARMS)).items():
        assert names  # every planned group runs at least one learner


def test_tiny_study_end_to_end(tmp_path, capsys):
    out = tmp_path / "study"
    figures = tmp_path / "figures"
    args = [
        "--out",
        str(out),
        "--runs",
        "4",
        "--adversaries",
        "geometric",
        "--arms",
        "3",
        "5",
        "--learners",
        "uniform",
        "--set",
        "horizon=256",
        "--set",
        "sa_windows=[32,64,128,256]",
        "--table-windows",
        "64",
        "128",
        "--bootstrap",
        "50",
        "--figures",
        str(figures),
    ]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "study.md").write_text("my notes\n")
    with pytest.raises(SystemExit) as stop:  # before any point runs
        study.main([*args[2:], "--out", str(mine)])
    assert stop.value.code == 2 and (mine / "study.md").read_text() == "my notes\n"
    assert "is there and is not a previous experiments/study.py file" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["study.md"]
    # A PNG of a figure's name in --figures that stabl_jax did not write: refused before any
    # point runs, kept byte for byte
    theirs = tmp_path / "their_figures"
    theirs.mkdir()
    (theirs / "study_geometric_sa_vs_n.png").write_bytes(b"their plot")
    with pytest.raises(SystemExit) as stop:
        study.main([*args[:-1], str(theirs)])
    assert stop.value.code == 2 and not out.exists()
    assert "is not in a folder stabl_jax made" in capsys.readouterr().err
    assert (theirs / "study_geometric_sa_vs_n.png").read_bytes() == b"their plot"
    # ... and so is a file of --bundle's names that is not a previous bundle
    (theirs / "study_summaries.json").write_text('{"mine": 1}')
    with pytest.raises(SystemExit) as stop:
        study.main([*args, "--bundle", str(theirs / "study")])
    assert stop.value.code == 2 and not out.exists()
    assert "is not a previous study bundle" in capsys.readouterr().err
    assert (theirs / "study_summaries.json").read_text() == '{"mine": 1}'
    # --dry-run: every point listed with its estimate, nothing written
    assert study.main([*args, "--dry-run"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"[study] dry run: 2 points under {out}"
    for line, n in zip(printed[1:3], (3, 5), strict=True):
        assert line.startswith(f"  geometric-n{n}-") and "to run: needs about " in line, line
        assert "roughly" not in line and line.endswith("(traces and checkpoints)"), line
    assert printed[3] == (
        "[study] 2 points to run (one at a time); nothing computed or written (leave --dry-run "
        "out to run them)"
    )
    assert len(printed) == 4 and not out.exists() and not figures.exists()
    for extra in (["--analyse-only"], ["--from-bundle", str(theirs / "study")]):
        with pytest.raises(SystemExit) as stop:
            study.main([*args, "--dry-run", *extra])
        assert stop.value.code == 2 and f"{extra[0]} would not be used" in capsys.readouterr().err
    assert study.main(args) == 0
    assert study.main(args) == 0  # its own study.json and study.md are replaced
    capsys.readouterr()
    assert study.main([*args, "--dry-run", "--jobs", "2"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert all("complete, not run again (--force runs it)" in line for line in printed[1:3])
    assert printed[3].startswith("[study] 0 points to run (up to 2 at once)")
    assert "(up to 2 at once)" in printed[3]
    text = (out / "study.md").read_text()
    assert "| FLH (Hazan & Seshadhri 2009) | not implemented |" in text
    assert "| `uniform` |" in text and "SA(64)" in text
    saved = json.loads((out / "study.json").read_text())
    learner = saved["analysis"]["geometric"]["learners"]["uniform"]
    assert set(learner["by_n"]) == {"3", "5"}
    assert set(learner["exponent_n"]) == {"64", "128"}
    fit = learner["by_n"]["3"]["exponent_L"]
    assert fit["lo"] <= fit["b"] <= fit["hi"]
    # Uniform play against a gap of 0.5: SA(L) is of order L, never above it.
    means = np.asarray(learner["by_n"]["5"]["mean"])
    assert np.all(means > 0) and np.all(means <= np.array([32, 64, 128, 256]))
    assert saved["analysis"]["geometric"]["fit_windows"] == [32, 64]  # L <= T / 4
    assert sorted(p.name for p in figures.iterdir()) == [
        ".stabl_jax_results",
        "study_geometric_sa_vs_L.png",
        "study_geometric_sa_vs_n.png",
    ]
    assert results.is_marked(figures)
    # A second call finds the points complete and only re-analyses them; its bundle rebuilds
    # folders elsewhere that give the same analysis.
    capsys.readouterr()
    bundle = tmp_path / "bundle" / "study"
    assert study.main([*args, "--bundle", str(bundle)]) == 0
    assert capsys.readouterr().out.count("complete, not run again") == 2
    # Other settings than the complete points ran with: refused before anything runs (they
    # were analysed as they are, under the new settings' name).
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    runs = args.index("--runs") + 1
    for changed, named in (
        ([*args[:runs], "5", *args[runs + 1 :]], "runs: 4 -> 5"),
        ([*args, "--set", "env.bonus=0.25"], "(env.bonus: 0.5 -> 0.25)"),
    ):
        with pytest.raises(SystemExit) as refused:
            study.main(changed)
        err = capsys.readouterr().err
        assert refused.value.code == 2 and "is a complete point run with other settings (" in err
        assert named in err and "--force runs it again with these" in err
    assert before == {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    # ... compared as built: a default written out is the same setting, the points reused
    assert study.main([*args, "--set", "env.bonus=0.5"]) == 0
    assert capsys.readouterr().out.count("complete, not run again") == 2
    # --analyse-only analyses the points as they are; the settings given with it are those
    # the points must have run with, so another --runs is refused, not analysed as if
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        study.main([*args[:runs], "5", *args[runs + 1 :], "--analyse-only"])
    err = capsys.readouterr().err
    assert refused.value.code == 2 and "runs: 4 -> 5" in err, err
    assert "leave --runs, --set out to analyse the points as they are" in err, err
    for flags in (["--force"], ["--jobs", "2"]):  # how points run: none does
        with pytest.raises(SystemExit) as refused:
            study.main([*args, "--analyse-only", *flags])
        err = capsys.readouterr().err
        assert refused.value.code == 2, err
        assert f"--analyse-only runs no point: {flags[0]} (how points run)" in err, err
    bare = [a for i, a in enumerate(args) if "--runs" not in args[i - 1 : i + 1]]
    bare = [a for i, a in enumerate(bare) if "--set" not in bare[i - 1 : i + 1]]
    assert len(bare) == len(args) - 6
    assert study.main([*bare, "--analyse-only"]) == 0
    assert json.loads((out / "study.json").read_text())["analysis"] == saved["analysis"]
    assert study.main([*args, "--analyse-only", "--bundle", str(bundle)]) == 0  # its own
    rebuilt = tmp_path / "rebuilt"
    moved = [*args, "--analyse-only", "--from-bundle", str(bundle)]
    moved[moved.index(str(out))] = str(rebuilt)
    assert study.main(moved) == 0
    again = json.loads((rebuilt / "study.json").read_text())
    assert again["analysis"] == saved["analysis"]
    # Rebuilt and then run (no --analyse-only) with other settings: its points are complete
    # points run with other settings, refused as any (they were reused).
    other = [*moved[: moved.index("--analyse-only")], *moved[moved.index("--analyse-only") + 1 :]]
    other[other.index(str(rebuilt))] = str(tmp_path / "rebuilt-other")
    other[other.index("--runs") + 1] = "5"
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        study.main(other)
    assert refused.value.code == 2 and "runs: 4 -> 5" in capsys.readouterr().err
    assert not (tmp_path / "rebuilt-other" / "study.json").exists()
    # Rebuilt over the full folders, it would replace their traces with the slim ones: refused.
    traces = {p: p.read_bytes() for p in out.glob("*/traces.npz")}
    assert traces
    with pytest.raises(SystemExit) as refused:
        study.main([*args, "--analyse-only", "--from-bundle", str(bundle)])
    assert refused.value.code == 2
    assert "would replace the files of 2 existing folder(s)" in capsys.readouterr().err
    assert traces == {p: p.read_bytes() for p in out.glob("*/traces.npz")}
    # --force runs the complete points again (same seed: the same numbers)
    capsys.readouterr()
    assert study.main([*args, "--force"]) == 0
    assert capsys.readouterr().out.count("complete, not run again") == 0
    assert json.loads((out / "study.json").read_text())["analysis"] == saved["analysis"]
    # ... and replaces the slim rebuilt folders too: they are committed results folders
    forced = [*args, "--force"]
    forced[forced.index(str(out))] = str(rebuilt)
    assert study.main(forced) == 0
    for path in rebuilt.glob("*/traces.npz"):
        with np.load(path) as data:
            assert "uniform/played" in data.files  # a full run's, not the slim SA(L) only
    assert json.loads((rebuilt / "study.json").read_text())["analysis"] == saved["analysis"]
    # A point whose traces.npz was cut short: named, exit 2 (a traceback), study.json kept
    cut = sorted(rebuilt.glob("*/traces.npz"))[0]
    cut.write_bytes(cut.read_bytes()[:1000])
    study_json = (rebuilt / "study.json").read_bytes()
    capsys.readouterr()
    assert study.main([*forced[:-1], "--analyse-only"]) == 2
    err = capsys.readouterr().err
    assert f"error: {cut} cannot be read (BadZipFile: " in err and "Traceback" not in err
    assert (rebuilt / "study.json").read_bytes() == study_json


def test_no_power_law_where_the_mean_regret_is_not_positive():
    x = np.array([32.0, 64.0, 128.0])
    negative = np.array([[10.0, 20.0, -50.0], [12.0, 18.0, -40.0]])
    fit = study.exponent_with_interval(x, negative, resamples=20)
    assert math.isnan(fit["b"]) and "no power-law fit" in fit["note"]
    assert study._fmt_fit(fit) == "no fit (SA ≤ 0)"
    # Positive means, but some resamples of the runs are not: a fit without an interval.
    mixed = np.array([[10.0, 20.0, 30.0], [12.0, 18.0, -20.0]])
    fit = study.exponent_with_interval(x, mixed, resamples=200)
    assert math.isfinite(fit["b"]) and math.isnan(fit["lo"]) and "resamples" in fit["note"]


def test_tuned_study_config_differs_from_its_base_only_in_learners_and_scales():
    from stabl_jax.registry import LEARNERS

    tuned_learners = ("stabl", "stabl_one_query", "saol")
    if not set(tuned_learners) <= set(LEARNERS):  # the baselines' branch not merged yet
        pytest.skip("saol / stabl_one_query are not registered")
    tuned, base = load_config("study_geometric_tuned"), load_config("study_geometric")
    assert tuned.learners == tuned_learners and set(tuned.params) == set(tuned_learners)
    for field in ("seed", "runs", "horizon", "env", "sa_windows", "feedback"):
        assert getattr(tuned, field) == getattr(base, field), field
    for name in tuned_learners:  # the sweep's best points lie inside its grid, not on an edge
        values = tuned.params[name]
        assert 1.0 < values["expert_lr_scale"] < 2.0**10 and 1.0 < values["meta_lr_scale"] < 2.0**7


def _recording_runner(fail: str | None = None, seconds: float = 0.05):
    """A ``run_one`` for :func:`study.run_within_memory` whose argument is ``(name, bytes)``:
    it records the estimates running at once (their largest sum and count) and the order.
    Each point takes ``seconds``; the point ``fail`` raises at once (so it fails before any
    point started beside it finishes, whatever the threads' timing)."""
    lock = threading.Lock()
    state = {"bytes": 0, "count": 0, "max_bytes": 0, "max_count": 0, "started": []}

    def run_one(argument):
        name, need = argument
        with lock:
            state["bytes"] += need
            state["count"] += 1
            state["max_bytes"] = max(state["max_bytes"], state["bytes"])
            state["max_count"] = max(state["max_count"], state["count"])
            state["started"].append(name)
        if name != fail:
            time.sleep(seconds)
        with lock:
            state["bytes"] -= need
            state["count"] -= 1
        if name == fail:
            raise RuntimeError(f"point {name} failed")
        return float(need)

    return run_one, state


def _items(sizes):
    return [(name, need, (name, need)) for name, need in sizes]


def test_points_run_at_once_only_as_far_as_their_estimated_memory_fits():
    """The n = 300 case: a 21-unit point beside a 3-unit one exceeds a 22-unit budget, so it
    waits; the small points still run two at a time."""
    run_one, state = _recording_runner()
    sizes = [("big", 21), ("base", 3), ("small1", 2), ("small2", 2), ("small3", 2)]
    lines = []
    results = study.run_within_memory(
        _items(sizes), run_one, jobs=2, budget_bytes=22, say=lines.append
    )
    assert results == {name: float(need) for name, need in sizes}
    assert state["max_bytes"] <= 22
    assert state["max_count"] == 2  # the small ones did run side by side
    assert state["started"][0] == "big"
    assert any("waits for memory" in line for line in lines)


def test_a_point_larger_than_the_memory_is_refused_before_anything_runs():
    run_one, state = _recording_runner()
    match = r"even alone, huge \(about .*\) would not fit .* lower --runs"
    with pytest.raises(ValueError, match=match):
        study.run_within_memory(
            _items([("fine", 2**20), ("huge", 5 * 2**30)]), run_one, jobs=2, budget_bytes=2**30
        )
    assert state["started"] == []


def test_a_failing_point_stops_the_queue_and_is_raised():
    run_one, state = _recording_runner(fail="first", seconds=0.5)
    sizes = [("first", 1), ("second", 1), ("third", 1), ("fourth", 1)]
    with pytest.raises(RuntimeError, match="point first failed"):
        study.run_within_memory(_items(sizes), run_one, jobs=2, budget_bytes=10)
    assert state["started"] == ["first", "second"]  # nothing started after the failure


def test_the_study_refuses_points_that_cannot_fit_before_running_any(tmp_path):
    """With ``jobs > 1`` each point's estimate is the one ``stabl-jax run`` checks; a point
    that alone exceeds the budget stops the study before anything runs (``main``: exit 2)."""
    from stabl_jax.experiment.cli import build_parser
    from stabl_jax.experiment.kinds.bandit import KIND

    plan = study.default_plan(["geometric"], [300], groups=["baselines"])
    sets = ["horizon=16384"]
    out = tmp_path / "study"
    with pytest.raises(ValueError, match=r"geometric-n300-baselines \(about .*lower --runs"):
        study.run_points(plan, out, runs=1000, seed=0, sets=sets, jobs=2, budget_bytes=2**30)
    assert not any(out.iterdir())
    # The estimate is that of the config the command line reads from the point's arguments.
    args = build_parser().parse_args(
        study.cli_args("geometric", 300, study._BASELINES, out, 1000, 0, sets)
    )
    config = load_config(args.config, args.overrides, runs=args.runs, seed=args.seed)
    estimate = study.point_memory_bytes("geometric", 300, study._BASELINES, 1000, 0, sets)
    assert estimate == KIND.estimate(config).memory_bytes > 2**30


@pytest.mark.parametrize(("code", "status"), [(1, 1), (2, 1), (130, 130), (143, 143)])
def test_a_failed_or_interrupted_point_stops_the_study_with_one_line(
    code, status, tmp_path, capsys, monkeypatch
):
    """A point's non-zero exit stops the study at that point: one line naming it and its
    status (no traceback), exit 1, or the point's own 130 or 143 when it was interrupted
    (Ctrl-C, SIGTERM), so that a scheduler sees the interruption."""
    from stabl_jax.experiment import cli

    calls = []
    monkeypatch.setattr(cli, "main", lambda args: calls.append(args) or code)
    args = ["--out", str(tmp_path / "study"), "--runs", "4", "--adversaries", "geometric"]
    args += ["--arms", "3", "5", "--learners", "uniform", "--set", "horizon=256"]
    args += ["--set", "sa_windows=[32,64,128,256]", "--table-windows", "64", "128"]
    assert study.main(args) == status
    err = capsys.readouterr().err
    assert len(calls) == 1  # the second point never started
    assert err.strip().splitlines()[-1] == (
        f"error: point geometric-n3-custom failed with exit status {code} (its message is "
        "above); the complete points are kept, and the same command resumes the study"
    )
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (143, "failed with exit status 143"),
        (-9, "was killed by signal SIGKILL (kill -9, or the kernel when memory runs out: "),
        (-11, "was killed by signal SIGSEGV"),
    ],
)
def test_a_failed_point_run_as_a_process_names_its_log(code, status, tmp_path, monkeypatch):
    """With ``--jobs`` > 1 the point's output is in ``<out>/<point>.log``: the error names it,
    and the signal that killed the process (not "exit status -9")."""

    class Done:
        def __init__(self, *args, **kwargs):
            pass

        def wait(self):
            return code

    monkeypatch.setattr(study.subprocess, "Popen", Done)
    plan = study.default_plan(["geometric"], [3], ["uniform"])
    out = tmp_path / "study"
    log = out / "geometric-n3-custom.log"
    named = (
        re.escape(f"point geometric-n3-custom {status}")
        + r".*"
        + re.escape(f"(its output is in {log})")
    )
    with pytest.raises(study.PointFailed, match=named) as failed:
        study.run_points(
            plan,
            out,
            runs=4,
            seed=0,
            sets=["horizon=256", "sa_windows=[32]"],
            jobs=2,
            budget_bytes=2**40,
        )
    assert failed.value.code == code and log.exists()


class _SignalReachedTheTest(Exception):
    """Raised by the test's own SIGTERM handler: the study did not install its own."""


def _guard(signum, frame):
    raise _SignalReachedTheTest


@pytest.mark.parametrize(
    ("signum", "status", "message"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_an_interrupted_study_passes_the_signal_on_to_its_running_points(
    signum, status, message, tmp_path, capsys, monkeypatch
):
    """``--jobs 2``, three points: Ctrl-C or SIGTERM reaching the study while two points run
    (in sessions of their own, out of the terminal's reach) is passed on once to each; the
    third never starts; the study waits for the two to stop (each keeps its checkpoints and
    exits 130 or 143), prints one line and exits with the signal's status; SIGTERM's handler
    before the call is back after it."""
    points = []

    class Point:
        """A point's ``stabl-jax run``: runs until it gets a signal, then exits 128 + it."""

        def __init__(self, command, **kwargs):
            self.options, self.signals, self.stopped = kwargs, [], threading.Event()
            points.append(self)
            if len(points) == 2:  # both running: the signal reaches the study
                signal.pthread_kill(threading.main_thread().ident, signum)

        def send_signal(self, sent):
            self.signals.append(sent)
            self.stopped.set()

        def wait(self):
            assert self.stopped.wait(20), "the point was never signalled"
            return 128 + self.signals[0]

    monkeypatch.setattr(study.subprocess, "Popen", Point)
    args = ["--out", str(tmp_path / "study"), "--runs", "4", "--adversaries", "geometric"]
    args += ["--arms", "3", "5", "7", "--learners", "uniform", "--set", "horizon=256"]
    args += ["--set", "sa_windows=[32,64,128,256]", "--table-windows", "64", "128"]
    args += ["--jobs", "2"]
    # Python's own Ctrl-C handler, whatever an earlier test in this process left
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = signal.signal(signal.SIGTERM, _guard)
    try:
        assert study.main(args) == status
        assert signal.getsignal(signal.SIGTERM) is _guard
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
    assert len(points) == 2  # the third point never started
    for point in points:
        assert point.signals == [signum] and point.options["start_new_session"] is True
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        f"error: {message}; the complete points are kept, and the same command resumes the study"
    )


def test_an_exponent_that_rounds_to_zero_prints_without_a_sign():
    fit = {"b": -0.004, "lo": -0.012, "hi": 0.003}
    assert study._fmt_fit(fit) == "0.00 [-0.01, 0.00]"
    assert study._exponent(-0.005001) == "-0.01"
    assert study._exponent(0.004) == "0.00"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config-suffix", "_nope"], "study_geometric_nope.toml' does not exist"),
        (["--arms", "1"], "num_arms must be >= 2, got 1"),
        (["--set", "env.bonus=7"], "bonus must be in [0, 1], got 7.0"),
        (["--table-windows", "999"], "--table-windows [999]: not SA(L) window lengths of"),
        (["--fit-windows", "0", "64"], "--fit-windows [0]: not SA(L) window lengths of"),
        (["--fit-windows", "64"], "--fit-windows needs >= 2 window lengths"),
        (["--from-bundle", "MISSING"], "No such file or directory"),
        (["--from-bundle", "DAMAGED"], "d_sa.npz cannot be read (BadZipFile: File is not a zip"),
        (["--bootstrap-seed", "-1"], "--bootstrap-seed must be an int >= 0, got -1"),
        (["--figure-prefix", "mine"], "--figure-prefix and --overwrite are for --figures"),
        (["--overwrite"], "--figure-prefix and --overwrite are for --figures: give --figures"),
        # a key the study sets per point: it ran every point at 7 arms, analysed as n = 3
        (["--set", "env.num_arms=7"], "--set env.num_arms=7: the study sets env.num_arms for"),
        (["--set", 'env={name="expert_advice"}'], "sets env for each point; use --arms"),
        (["--set", 'learners=["exp3"]'], "sets learners for each point; use --learners or"),
        (["--set", "runs=8"], "--set runs=8: the study sets runs for each point; use --runs"),
        (["--set", "seed=1"], "--set seed=1: the study sets seed for each point; use --seed"),
    ],
)
def test_a_point_it_cannot_run_or_tabulate_is_refused_before_any_runs(
    tmp_path, capsys, monkeypatch, extra, message
):
    """Each used to surface only once the points ran: as the failing point's exit status (a
    config or arm count), or as a traceback or a table column of dashes after every point
    had run (the windows)."""

    def boom(*args, **kwargs):
        raise AssertionError("a point ran although the command should have failed")

    monkeypatch.setattr(study, "run_points", boom)
    args = ["--out", str(tmp_path / "out"), "--runs", "4", "--adversaries", "geometric"]
    args += ["--learners", "uniform", "--set", "horizon=256", "--set", "sa_windows=[32,64,128]"]
    (tmp_path / "d_summaries.json").write_text("{}")  # a bundle whose arrays are not an .npz
    (tmp_path / "d_sa.npz").write_text("not an npz")
    named = {"MISSING": str(tmp_path / "b"), "DAMAGED": str(tmp_path / "d")}
    windows = [] if "--table-windows" in extra else ["--table-windows", "64"]  # each once
    args += [*windows, *[named.get(a, a) for a in extra]]
    with pytest.raises(SystemExit) as stop:
        study.main(args)
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--arms", "1"], "--arms 1: the study has points at n in [10, 30, 100, 300]"),
        (["--groups", "base", "extra"], "--groups: unknown ['extra']"),
        # --learners ran its own group and ignored these
        (["--learners", "uniform", "--groups", "base"], "--learners runs one group of its own"),
        (["--learners", "uniform", "--merge-groups"], "give one or the other"),
    ],
)
def test_a_selection_outside_the_plan_is_refused(tmp_path, capsys, monkeypatch, extra, message):
    """It selected no point: the study ran nothing and ended with exit 1 ("no complete point
    to analyse"); or, with --learners, it ran that group and ignored --groups."""

    def boom(*args, **kwargs):
        raise AssertionError("a point ran although the command should have failed")

    monkeypatch.setattr(study, "run_points", boom)
    with pytest.raises(SystemExit) as stop:
        study.main(["--out", str(tmp_path / "out"), *extra])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
