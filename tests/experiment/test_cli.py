"""The command line, configs and results folders: the shipped configs shrunk by ``--set`` (4
runs, T = 64, 5 arms) run and checked file by file; bad configs named by key and file."""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from stabl_jax import ENVS, LEARNERS, metrics
from stabl_jax.experiment import cli, plots, provenance
from stabl_jax.experiment.configs import (
    ConfigError,
    parse_override,
    resolve_config,
    shipped_configs,
)
from stabl_jax.experiment.kinds import KINDS, load_config
from stabl_jax.experiment.kinds import bandit as experiment
from stabl_jax.experiment.kinds.bandit import PLOT_FILES, arm_dtype
from stabl_jax.experiment.kinds.paired import MUTED_WARNING, default_sa_windows
from stabl_jax.experiment.kinds.selection import HPOProblem
from stabl_jax.experiment.outputs import COMPLETE
from stabl_jax.experiment.tables import load_results, read_summary, read_traces
from stabl_jax.learners.exp3 import EXP3
from stabl_jax.registry import BCO_LEARNERS
from tests.conftest import numbers, write_config_variant
from tests.experiment.runs import forbid_computation, sets

REPO = Path(__file__).resolve().parents[2]
SHIPPED = ("expert_advice_equal", "expert_advice_random", "expert_advice_large")
PAPER_LEARNERS = ("uniform", "exp3_uniform", "stabl", "stabl_naive", "stabl_single_scale")
# The (R, T) traces of `save_traces = "all"`; the default keeps `played` only.
TRACE_FIELDS = {"loss": np.float32, "expected_loss": np.float32, "played": np.uint8}
TRACE_FIELDS["prob_best"] = np.float32
TINY = ["runs=4", "horizon=64", "env.num_arms=5", "window=8"]
TINY += ["learner_options.stabl_single_scale.history_lengths=[16]"]
# The random config's change points scaled by 64/4096; the large config is, at this size, the
# random one under another name (test_shipped_config_validates loads its keys).
# name: (its change points at this size, its number of segments)
TINY_CHANGE_POINTS = {
    "expert_advice_equal": ([], 4),  # num_segments = 4 -> 16, 32, 48
    "expert_advice_random": (["env.change_points=[21, 22, 28, 50]"], 5),
}


def tiny_args(name: str) -> list[str]:
    return [name, "--no-progress", *sets(TINY + TINY_CHANGE_POINTS[name][0])]


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory) -> Callable[[str], Path]:
    """``get(name)``: the results folder of shipped config ``name`` run at a tiny size (once
    per module)."""
    root = tmp_path_factory.mktemp("results")
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            assert cli.main(["run", *tiny_args(name), "--out", str(root / name)]) == 0
            done[name] = root / name
        return done[name]

    return get


# BCO configs: test_bco_cli.py; HPO: test_hpo_cli.py; study_*: tests/scripts/test_study.py.
TUNED = [c for c in sorted(shipped_configs()) if c.endswith("_tuned") and c[:6] != "study_"]


@pytest.mark.parametrize("name", TUNED)
def test_tuned_configs_validate_and_differ_only_in_scales(name):
    """A tuned config (docs/usage.md's sweeps) differs from its base only in name,
    description, feedback and [params.*]."""
    assert len(TUNED) >= 5  # the tuned variants (docs/usage.md's sweeps)
    cfg, base = load_config(name), load_config(name.removesuffix("_tuned").removesuffix("_reward"))
    assert cfg.params and set(cfg.params) <= set(cfg.learners)
    for field in ("seed", "runs", "horizon", "learners", "env", "window", "sa_windows"):
        assert getattr(cfg, field) == getattr(base, field), field
    assert cfg.feedback == ("reward" if "_reward" in name else "loss")
    for learner_name, values in cfg.params.items():
        learner = cfg.make_learner(learner_name)
        params = cfg.learner_params(learner, learner_name)
        for key, value in values.items():
            assert np.asarray(getattr(params, key)) == np.float32(value)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_validates(name):
    assert name in shipped_configs()
    cfg = load_config(name)
    assert (cfg.name, cfg.learners, cfg.feedback) == (name, PAPER_LEARNERS, "loss")
    assert cfg.env.name == "expert_advice"
    assert cfg.learner_options["stabl_single_scale"]["history_lengths"] == (1024,)
    assert cfg.sa_windows == default_sa_windows(cfg.horizon) and cfg.description
    env = cfg.make_env()
    assert env.best_arm_order == "sequential"  # the paper: segment j's best arm is arm j
    for learner_name in cfg.learners:
        learner = cfg.make_learner(learner_name)
        assert learner.num_arms == env.num_arms
        if learner_name != "uniform":
            assert learner.feedback == "loss"
    expected = {
        "expert_advice_equal": (30, 4096, 500, 50, (1024, 2048, 3072)),
        "expert_advice_random": (30, 4096, 500, 50, (1355, 1437, 1798, 3249)),
        "expert_advice_large": (300, 65536, 100, 500, (7853, 13822, 25180, 56621)),
    }[name]  # fmt: skip
    assert (env.num_arms, cfg.horizon, cfg.runs, cfg.window, env.change_points) == expected


def test_overrides_parse_and_reach_every_level():
    overrides = ["env.num_arms=10", "runs=50", 'learners=["stabl","exp3"]', "feedback=reward"]
    overrides += ["params.stabl.meta_lr_scale=8", "sa_windows=[64, 16]", "chunk_size=128"]
    cfg = load_config("expert_advice_equal", overrides)
    assert (cfg.env.num_arms, cfg.runs, cfg.learners) == (10, 50, ("stabl", "exp3"))
    assert cfg.sa_windows == (16, 64) and cfg.chunk_size == 128
    stabl = cfg.make_learner("stabl")
    assert stabl.feedback == "reward"
    assert float(cfg.learner_params(stabl, "stabl").meta_lr_scale) == 8.0
    assert cfg.overrides[0] == "env.num_arms=10"
    assert parse_override("runs=50") == (("runs",), 50)
    assert parse_override("env.num_arms = 10") == (("env", "num_arms"), 10)
    assert parse_override('learners=["stabl","exp3"]') == (("learners",), ["stabl", "exp3"])
    assert parse_override("feedback=reward") == (("feedback",), "reward")  # not TOML: a string
    flag = ("env", "random_change_points")
    assert parse_override("env.random_change_points=true") == (flag, True)


def test_settings_of_a_learner_left_out_are_named_as_unused():
    """``[params.X]`` and ``[learner_options.X]`` stay valid when ``learners`` leaves ``X`` out;
    the config says they are not used."""
    assert load_config("figure1").unused_settings() == []
    overrides = ['learners=["uniform", "stabl"]', "learner_options.saol.history_lengths=[16]"]
    unused = ["learner_options.saol", "params.stabl_tuned", "params.exp3_tuned"]
    assert load_config("figure1", overrides).unused_settings() == unused


def test_the_mistakes_of_an_override_or_a_name_are_named(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    message = r"--set runs\.x: key 'runs' in .*good\.toml is 2 \(int\), not a table"
    with pytest.raises(ConfigError, match=message):
        load_config(path, ["runs.x=1"])
    with pytest.raises(ConfigError, match="expert_advice_equal"):  # the shipped ones listed
        resolve_config("no_such_config")
    with pytest.raises(ConfigError, match=r"is 50, longer than horizon = 20.*--set window=N"):
        load_config("expert_advice_equal", ["horizon=20"])


GOOD = """
name = "bad_example"
runs = 2
horizon = 64
learners = ["uniform", "stabl"]
[env]
name = "expert_advice"
num_arms = 5
"""
BCO_GOOD = """
kind = "bco"
runs = 2
horizon = 64
learners = ["stabl_bco", "fkm"]
[env]
name = "moving_target"
dim = 2
"""
HPO_GOOD = """kind = "hpo"
runs = 2
learners = ["uniform", "stabl"]
[bbob]
functions = [1]
dims = [2]
evaluations = [24]
"""
TOP, ENV, END, DIMS = "runs = 2", "num_arms = 5", None, "dims = [2]"
T, N, D = TOP + "\n", ENV + "\n", DIMS + "\n"  # a key added after the anchor
G, C, H = GOOD, BCO_GOOD, HPO_GOOD  # the good config of each kind
LRN, LO, EA = '"uniform", "stabl"', "[learner_options.stabl]\n", 'name = "expert_advice"'
#: case: (the good config of its kind, anchor, new text: replaces the anchor or, for END, is
#: appended; then what the message must say besides the file: the key, what is allowed).
BAD_CASES = {
    "wrong type": (G, TOP, 'runs = "many"', "'runs'", "must be an int"),
    "unknown learner": (G, LRN, '"uniform", "stabel"', "'learners'", "stabl_naive"),
    "learner twice": (G, LRN, '"stabl", "stabl"', "'learners'", "a learner twice"),
    "no learners": (G, '["uniform", "stabl"]', "[]", "'learners'", "a non-empty array"),
    "sa window too long": (G, TOP, T + "sa_windows = [16, 128]", "'sa_windows'", "[1, 64]"),
    "sa window twice": (G, TOP, T + "sa_windows = [16, 16]", "'sa_windows'", "a value twice"),
    "trace twice": (G, TOP, T + 'save_traces = ["loss", "loss"]', "'save_traces'", "twice"),
    "bad feedback": (G, TOP, T + 'feedback = "regret"', "'feedback'", "reward"),
    "reference not run": (
        G, TOP, T + 'reference = "exp3"', "'reference'",
        "'exp3', which is not among learners = ['uniform', 'stabl']",
    ),
    "reference type": (G, TOP, T + "reference = 1", "'reference'", "must be a string"),
    "unknown trace": (G, TOP, T + 'save_traces = ["los"]', "'save_traces'", "'loss'?"),
    "traces not a list": (G, TOP, T + "save_traces = 3", "'save_traces'", '"none"'),
    "unknown env": (G, EA, 'name = "roulette"', "'env.name'", "bernoulli"),
    "unknown env kwarg": (G, ENV, N + "arms = 3", "'env.arms'", "num_segments"),
    "env kwarg type":
        (G, ENV, N + "random_change_points = 1", "'env.random_change_points'", "bool"),
    "unknown param": (G, END, "[params.stabl]\nlr = 2.0\n", "'params.stabl.lr'", "meta_lr_scale"),
    "learner option type":
        (G, END, LO + "observation = 3\n", "'learner_options.stabl.observation'", "a string"),
    # feedback's Literal hint (estimators.Feedback) refuses a number before any learner is built
    "learner feedback type":
        (G, END, LO + "feedback = 3\n", "'learner_options.stabl.feedback'", "a string"),
    "learner feedback choice": (
        G, END, LO + 'feedback = "rewards"\n', "'learner_options.stabl.feedback'",
        "one of 'loss', 'reward'",
    ),
    "required key missing": (G, "horizon = 64", "", "'horizon'", "is required"),
    "env name missing": (G, EA, "", "'env.name'", "is required; choose from"),
    "env horizon": (G, ENV, N + "horizon = 64", "'env.horizon'", "at the top level"),
    "options not a table": (G, TOP, T + "learner_options = 3", "'learner_options'", "a table"),
    "feedback type": (G, TOP, T + "feedback = 1", "'feedback'", "one of ['loss', 'reward']"),
    "learner option array": (
        G, END, LO + 'history_lengths = "long"\n', "'learner_options.stabl.history_lengths'",
        "must be an array of ints, got 'long' (string)",
    ),
    "learner rejects option":
        (G, END, LO + 'observation = "psychic"\n', "'learner_options.stabl'", "importance"),
    "bco: unknown kind": (C, 'kind = "bco"', 'kind = "convex"', "'kind'", "'bandit', 'bco'"),
    "bco: bandit learner":
        (C, '"stabl_bco", "fkm"', '"stabl", "fkm"', "'learners'", "two_point_ogd"),
    "bco: bandit env": (C, 'name = "moving_target"', EA, "'env.name'", "huber"),
    "bco: missing dim": (C, "dim = 2", "", "'env.dim'", "required"),
    "bco: unknown env kwarg":
        (C, "dim = 2", "dim = 2\nradius = 2", "'env.radius'", "change_points"),
    "bco: bad domain": (C, "dim = 2", 'dim = 2\ndomain = "sphere"', "'env.domain.name'", "l1_ball"),
    "bco: feedback": (C, TOP, T + 'feedback = "loss"', "'feedback'", "'bandit'"),
    "bco: reserved option":
        (C, END, "[learner_options.fkm]\ndim = 3\n", "'learner_options.fkm.dim'", "env.dim"),
    "bco: unknown param": (C, END, "[params.fkm]\nlr = 2.0\n", "'params.fkm.lr'", "delta_scale"),
    "bco: bad stride": (C, TOP, T + "sa_stride = 0", "'sa_stride'", "[1, 64]"),
    "hpo: unknown top-level key": (H, TOP, T + "horizon = 64", "HPO-config key 'horizon'"),
    "hpo: unknown bbob key": (H, DIMS, D + "dim = 3", "'bbob.dim'"),
    "hpo: function out of range": (H, "functions = [1]", "functions = [25]", "bbob.functions"),
    "hpo: dimension too small": (H, DIMS, "dims = [1]", "bbob.dims"),
    "hpo: unknown learner": (H, '"stabl"]', '"stable"]', "unknown learner 'stable'"),
    "hpo: bad feedback": (H, TOP, T + 'feedback = "gain"', "feedback"),
    "hpo: lengths not increasing": (H, DIMS, D + "history_lengths = [40, 20]", "strictly"),
    "hpo: negative noise": (H, DIMS, D + "noise_std = -0.1", "bbob.noise_std"),
    "hpo: tau_max of 1": (H, DIMS, D + "tau_max = 1", "bbob.tau_max"),
    "hpo: missing budgets": (H, "evaluations = [24]\n", "", "'bbob.evaluations'"),
    "hpo: functions not a list": (H, "functions = [1]", 'functions = "some"', "bbob.functions"),
    "hpo: unknown reward": (H, DIMS, D + 'reward = "vizer"', "bbob.reward"),
    "hpo: unknown grid": (H, DIMS, D + 'eagle_grid = "paper"', "bbob.eagle_grid"),
    "hpo: unknown fill": (H, DIMS, D + 'eagle_fill = "sobol"', "bbob.eagle_fill"),
    "hpo: rotate not a bool": (H, DIMS, D + "rotate = 1", "must be a bool"),
    "hpo: reward_lambda of 1": (H, DIMS, D + "reward_lambda = 1", "in [0, 1)"),
    "hpo: a dimension twice": (H, DIMS, "dims = [2, 2]", "lists a value twice"),
}  # fmt: skip


def bad_config(tmp_path: Path, case: str) -> Path:
    good, *change = BAD_CASES[case][:3]
    assert good is not None
    return write_config_variant(tmp_path, good, {case: change}, case, "bad.toml")


def test_the_good_examples_load(tmp_path):
    path = tmp_path / "good.toml"
    path.write_text(GOOD)
    cfg = load_config(path)
    assert cfg.runs == 2 and cfg.window == 50 and cfg.seed == 0 and cfg.save_traces == ("played",)
    path.write_text(GOOD.replace('["uniform", "stabl"]', '"stabl"'))  # one learner, no array
    assert load_config(path).learners == ("stabl",)
    path.write_text(BCO_GOOD)
    cfg = load_config(path)
    assert cfg.kind == "bco" and cfg.make_env().dim == 2 and cfg.sa_stride is None
    assert set(cfg.learners) <= set(BCO_LEARNERS)
    path.write_text(HPO_GOOD)
    cfg = load_config(path)
    assert cfg.problems == (HPOProblem(1, 2, 24),) and cfg.runs == 2
    assert (cfg.reward, cfg.eagle_grid, cfg.eagle_fill) == ("paper", "default", "uniform")
    cases = [('"none"', ()), ("[]", ()), ('"all"', tuple(TRACE_FIELDS))]
    cases.append(('["played", "loss"]', ("loss", "played")))  # in the documented order
    for value, expected in cases:
        path.write_text(GOOD.replace(TOP, f"{TOP}\nsave_traces = {value}"))
        assert load_config(path).save_traces == expected
    with pytest.raises(ConfigError, match="only for kind = 'bandit'"):
        load_config("bco_d2", overrides=['save_traces="all"'])


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_config_names_key_and_file(tmp_path, case, capsys, monkeypatch):
    """One mistake: one line naming file, key and what is allowed; the command line prints it
    after ``error:`` and exits 2 before any computation, writing nothing."""
    path = bad_config(tmp_path, case)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and (case != "wrong type" or message.startswith("key 'runs'"))
    for fragment in (str(path), *BAD_CASES[case][3:]):
        assert fragment in message, fragment
    forbid_computation(monkeypatch)
    code = cli.main(["run", str(path), "--no-progress", "--out", str(tmp_path / "out")])
    assert (code, capsys.readouterr().err) == (2, f"error: {message}\n")
    assert not (tmp_path / "out").exists()


def test_every_independent_config_error_is_reported_at_once(tmp_path, capsys, monkeypatch):
    """Five unrelated mistakes (an HPO config's three): one error naming each, typos with a
    "did you mean"; the learners are not built while a key they need is bad."""
    text = GOOD.replace(TOP, 'runs = 0\nfeedbak = "reward"\nsave_traces = ["los"]')
    text = text.replace('"uniform", "stabl"', '"uniform", "stabel"').replace(ENV, "num_arms = 1")
    path = tmp_path / "many.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    lines = str(info.value).splitlines()
    assert lines[0] == f"5 errors in {path}:"
    # unknown keys first, then in the order of the schema
    keys = ("runs", "learners", "save_traces", "env")
    expected = ["unknown key 'feedbak'", *(f"key '{k}'" for k in keys)]
    for line, fragment in zip(lines[1:], expected, strict=True):
        assert line.startswith("  ") and fragment in line, (line, fragment)
    assert "did you mean 'feedback'?" in lines[1] and "did you mean 'stabl'" in lines[3]
    assert "'loss'?" in lines[4]
    forbid_computation(monkeypatch)
    assert cli.main(["run", str(path), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith(f"error: 5 errors in {path}:\n  unknown key")
    text = HPO_GOOD.replace(TOP, "runs = 2\nhorizon = 64").replace(DIMS, "dims = [1]")
    path.write_text(text.replace("evaluations = [24]", 'evaluations = [24]\nreward = "vizer"'))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    lines = str(info.value).splitlines()
    assert lines[0] == f"3 errors in {path}:"
    expected = ["HPO-config key 'horizon'", "'bbob.dims'", "'bbob.reward'"]
    for line, fragment in zip(lines[1:], expected, strict=True):
        assert fragment in line, (line, fragment)
    assert "did you mean 'vizier'?" in lines[3]


@dataclasses.dataclass(frozen=True)
class ShortBudgetRefusingEXP3(EXP3):
    """A user's learner with a check of its own: it refuses fewer than 16 rounds."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.horizon < 16:
            raise ValueError(f"needs horizon >= 16, got {self.horizon}")


def test_a_learner_that_rejects_a_budget_is_named_with_the_budget(tmp_path):
    """An HPO config's learners' own checks run at load, once per budget: a refusal names the
    budget and the learner's message (a user's learner: no registered one refuses)."""
    user = f"{__name__}:ShortBudgetRefusingEXP3"
    text = HPO_GOOD.replace('"stabl"]', f'"stabl", "{user}"]').replace("[24]", "[8, 24]")
    path = tmp_path / "budget.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    lines = str(info.value).splitlines()
    assert len(lines) == 1, lines  # the budget of 24 is accepted
    assert f"learner '{user}' rejects a budget of 8: needs horizon >= 16, got 8" in lines[0]
    assert str(path) in lines[0]
    path.write_text(text.replace("[8, 24]", "[16, 24]"))
    assert load_config(path).learners[-1] == user


def test_cli_usage_error_exits_2(capsys):
    assert cli.main(["run", "--no-such-flag"]) == 2
    assert "error:" in capsys.readouterr().err
    assert cli.main([]) == 2


@pytest.mark.parametrize("name", sorted(TINY_CHANGE_POINTS))
def test_shipped_config_runs_end_to_end(tiny_runs, name):
    out = tiny_runs(name)
    assert (out / COMPLETE).is_file() and not list(out.parent.glob(f"{out.name}.partial*"))
    summary = json.loads((out / "summary.json").read_text())  # strict JSON (no NaN)
    assert summary["name"] == name and summary["seed"] == 0 and summary["runs"] == 4
    assert summary["config"]["horizon"] == 64
    assert all(summary["versions"][k] for k in ("jax", "jaxlib", "numpy", "python", "stabl_jax"))
    assert summary["device"]["platform"] and summary["platform"]
    assert summary["cpu"] == provenance.cpu()
    assert summary["timings"]["wall_seconds"] > 0
    num_segments = TINY_CHANGE_POINTS[name][1]
    assert len(summary["env"]["change_points"]) == num_segments - 1
    assert list(summary["learners"]) == list(PAPER_LEARNERS)
    for learner_name, entry in summary["learners"].items():
        assert entry["num_queries"] == LEARNERS_QUERIES[learner_name]
        assert entry["compile_seconds"] >= 0 and entry["run_seconds"] >= 0
        segment = entry["segment_reward"]
        assert len(segment["mean"]) == len(segment["ci95"]) == num_segments
        sa = entry["adaptive_regret"]
        assert sa["window_lengths"] == [16, 32, 64]
        assert len(sa["sampled"]["mean"]) == len(sa["expected"]["ci95"]) == 3
        assert 0.0 <= entry["prob_best"]["overall"]["mean"] <= 1.0
        assert len(entry["prob_best"]["per_segment"]["mean"]) == num_segments
        if learner_name.startswith("stabl"):
            assert isinstance(entry["num_muted"], int) and entry["num_muted"] >= 0
        else:
            assert entry["num_muted"] is None
    assert summary["learners"]["stabl_single_scale"]["constructor"]["history_lengths"] == [16]
    traces = read_traces(out)  # allow_pickle=False
    for learner_name in PAPER_LEARNERS:  # the default save_traces: the arms only
        played = traces[f"{learner_name}/played"]
        assert played.shape == (4, 64) and played.dtype == np.uint8 and played.max() < 5
        assert f"{learner_name}/loss" not in traces
        assert traces[f"{learner_name}/segment_reward"].shape == (4, num_segments)
    assert traces["env/change_points"].shape == (4, num_segments - 1)
    # paired (one key for every learner): the summary's means are those of the runs' rewards
    segment = summary["learners"]["stabl"]["segment_reward"]["mean"]
    assert segment == pytest.approx(traces["stabl/segment_reward"].mean(axis=0).tolist())
    # a CPU steps every learner on the XLA path, and the summary says so
    assert {entry["kernel"] for entry in summary["learners"].values()} == {"xla"}
    for filename in PLOT_FILES.values():
        data = (out / filename).read_bytes()
        assert len(data) > 1000 and data.startswith(b"\x89PNG\r\n\x1a\n")


def test_save_traces_chooses_the_arrays_not_the_results(tiny_runs, tmp_path):
    """`save_traces = "all"` writes every (R, T) trace as simulated; the numbers, results.csv
    and plots are the default folder's, which keeps one byte per run, round and learner."""
    default = tiny_runs("expert_advice_equal")
    out = tmp_path / "all"
    args = ["run", *tiny_args("expert_advice_equal"), "--set", 'save_traces="all"']
    assert cli.main([*args, "--out", str(out)]) == 0
    first, second = (numbers(read_summary(f)) for f in (default, out))
    assert first.pop("config").pop("save_traces") == ["played"]
    assert second.pop("config").pop("save_traces") == list(TRACE_FIELDS)
    assert first == second
    for name in ("results.csv", *PLOT_FILES.values()):
        assert (default / name).read_bytes() == (out / name).read_bytes(), name
    kept, full = load_results(default).traces, load_results(out).traces
    for learner_name in PAPER_LEARNERS:
        for field, dtype in TRACE_FIELDS.items():
            array = full[f"{learner_name}/{field}"]
            assert array.shape == (4, 64) and array.dtype == dtype
        played = f"{learner_name}/played"
        np.testing.assert_array_equal(kept[played], full[played])
        reward = 1.0 - full[f"{learner_name}/loss"].astype(np.float64)
        mean = read_summary(out)["learners"][learner_name]["mean_reward"]["mean"]
        assert mean == float(metrics.mean_ci(reward.mean(axis=1))[0])  # the simulated loss
    # Bytes of the default's (R, T) arrays per run, round and learner: 1 (uint8 arms); the
    # smallest unsigned dtype holds any arm
    assert [arm_dtype(n) for n in (2, 256, 257, 65536)] == [np.uint8] * 2 + [np.uint16] * 2
    per_round = [a.nbytes for k in kept.files if (a := kept[k]).shape[-1:] == (64,)]
    assert sum(per_round) / (4 * 64 * len(PAPER_LEARNERS)) == 1
    small = sum(kept[k].nbytes for k in kept.files) - sum(per_round)
    # float64 (R, S) segment rewards and 2 (R, L) SA(L); int32 (R, S - 1) change points; L
    assert small == len(PAPER_LEARNERS) * 4 * 8 * (4 + 2 * 3) + 4 * 3 * 4 + 8 * 3


LEARNERS_QUERIES = dict(uniform=1, exp3_uniform=1, stabl=2, stabl_naive=2, stabl_single_scale=2)


def test_experiment_sa_equals_each_learners_own_metric(tiny_runs):
    """SA(L) computed once over shared arm losses equals :func:`metrics.adaptive_regret` of
    each learner's own simulation (pairing is real)."""
    tiny_runs("expert_advice_equal")  # same programs: compiled once
    cfg = load_config("expert_advice_equal", TINY, learners=["uniform", "stabl"])
    outcome = experiment.run_experiment(cfg)
    env = cfg.make_env()
    for o in outcome.outcomes.values():
        reference = metrics.adaptive_regret(o.result, env, cfg.sa_windows)
        np.testing.assert_allclose(o.sa_sampled, reference["sampled"], rtol=1e-12)
        np.testing.assert_allclose(o.sa_expected, reference["expected"], rtol=1e-12)


def test_list_in_process(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # ./configs is absent here: found next to the package
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    names = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    bco = {"moving_target", "abs_linear", "huber", "bco_d2", "bco_d10", "bco_d50"}
    assert {*KINDS, *LEARNERS, *ENVS, *SHIPPED, *BCO_LEARNERS, *bco} <= names
    assert "Fig. 1 left" in out


def test_list_into_a_closed_pipe_exits_quietly_and_imports_no_matplotlib(tmp_path):
    """`python -m stabl_jax list | head -1` elsewhere: exit 0, no traceback; the command line's
    face modules import no matplotlib (one start-up checks both)."""
    faces = "cli, configs, kinds, results, plots"
    code = f"import sys, runpy; from stabl_jax.experiment import {faces}; "
    code += "assert 'matplotlib' not in sys.modules, 'matplotlib imported'; "
    code += "sys.argv = ['stabl_jax', 'list']; runpy.run_module('stabl_jax', run_name='__main__')"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pipe = subprocess.PIPE
    proc = subprocess.Popen(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, stdout=pipe, stderr=pipe, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith("experiment kinds"), proc.stderr.read()
    proc.stdout.close()  # like `head -1` exiting
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "unexpected failure" not in err


@pytest.mark.slow  # one learner compiled and run for 4096 rounds
def test_muting_is_explained_when_it_happens(tmp_path, capsys):
    """StABL Naive at the equal config's tuned scales mutes; the run explains the count."""
    args = ["run", "expert_advice_equal_tuned", "--runs", "2", "--no-progress"]
    args += ["--set", 'learners=["stabl_naive"]', "--out", str(tmp_path / "out")]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    muted = read_summary(tmp_path / "out")["learners"]["stabl_naive"]["num_muted"]
    assert muted > 0 and MUTED_WARNING.format(name="stabl_naive", count=muted) in out


def _t_interval(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over runs (axis 0) and its Student-t 95% half-width, with scipy."""
    runs = values.shape[0]
    half = stats.t.ppf(0.975, runs - 1) * values.std(axis=0, ddof=1) / np.sqrt(runs)
    return values.mean(axis=0), half


def test_paired_differences_are_those_of_the_traces(tiny_runs):
    """Every learner but the reference (``stabl``) carries its metrics minus the reference's,
    run by run, with the t 95% half-width: NumPy's from ``traces.npz``, and ``results.csv``'s."""
    out = tiny_runs("expert_advice_equal")
    summary, traces = read_summary(out), read_traces(out)
    assert summary["config"]["reference"] == "stabl"
    assert "paired" not in summary["learners"]["stabl"]
    rows = {
        (r["learner"], r["metric"], r["window"], r["segment"]): (float(r["mean"]), float(r["ci95"]))
        for r in csv.DictReader((out / "results.csv").open())
        if r["metric"].startswith("paired_")
    }
    for name in set(PAPER_LEARNERS) - {"stabl"}:
        got = summary["learners"][name]["paired"]
        assert got["reference"] == "stabl"
        segment = traces[f"{name}/segment_reward"] - traces["stabl/segment_reward"]
        mean, half = _t_interval(segment)
        np.testing.assert_allclose(got["segment_reward"]["mean"], mean, rtol=1e-12)
        np.testing.assert_allclose(got["segment_reward"]["ci95"], half, rtol=1e-12)
        # four equal segments: the mean reward is the mean of the segments' rewards
        mean, half = _t_interval(segment.mean(axis=1))
        assert got["mean_reward"]["mean"] == pytest.approx(mean, rel=1e-9, abs=1e-12)
        assert got["mean_reward"]["ci95"] == pytest.approx(half, rel=1e-9)
        for sa in ("sampled", "expected"):
            diff = traces[f"{name}/sa_{sa}"] - traces[f"stabl/sa_{sa}"]
            mean, half = _t_interval(diff)
            np.testing.assert_allclose(got["adaptive_regret"][sa]["mean"], mean, rtol=1e-12)
            np.testing.assert_allclose(got["adaptive_regret"][sa]["ci95"], half, rtol=1e-12)
            for j, window in enumerate((16, 32, 64)):
                row = rows[(name, f"paired_sa_{sa}", str(window), "")]
                assert row == (mean[j], half[j])
        for j in range(4):
            row = rows[(name, "paired_segment_reward", "", str(j + 1))]
            assert row == tuple(got["segment_reward"][k][j] for k in ("mean", "ci95"))
        assert rows[(name, "paired_mean_reward", "", "")] == tuple(got["mean_reward"].values())
    assert {key[0] for key in rows} == set(PAPER_LEARNERS) - {"stabl"}


def test_default_folder_and_a_chosen_reference_printed_and_every_plot_saves_its_curves(
    tmp_path, capsys, monkeypatch
):
    """No --out: ``results/<name>-seed<S>``; no bars in a log; tables on stdout, differences
    from ``reference = "uniform"``; every line drawn is the curve ``curves.npz`` keeps."""
    drawn: dict[str, list] = {}
    save = plots.save_figure

    def keep(fig, path):
        (ax,) = fig.axes  # an error bar's line is its container's first
        lines = [bars.lines[0] for bars in ax.containers] or ax.get_lines()
        drawn[Path(path).stem] = [(ln.get_label(), ln.get_xdata(), ln.get_ydata()) for ln in lines]
        return save(fig, path)

    monkeypatch.setattr(plots, "save_figure", keep)
    monkeypatch.chdir(tmp_path)  # ./configs is absent here: found next to the package
    learners = ["uniform", "exp3_uniform", "stabl"]
    args = [a for a in tiny_args("expert_advice_equal") if a != "--no-progress"]
    args += ["--seed", "3", "--set", f"learners={json.dumps(learners)}"]
    assert cli.main(["run", *args, "--set", 'reference="uniform"']) == 0
    printed, err = capsys.readouterr()
    assert "/64" not in err  # no tqdm bar in a log
    out = tmp_path / "results" / "expert_advice_equal-seed3"
    assert (out / COMPLETE).is_file() and f"results: {out}" in printed
    assert "SA(16)" in printed and "P(best arm)" in printed
    table = printed[printed.index("learner ") :]
    assert "stabl" in table and "uniform" in table and "±" in table
    # TINY's options for stabl_single_scale, which these learners leave out, are named
    assert "not used (no such learner in learners): learner_options.stabl_single_scale" in printed
    assert "needs about" in printed and "roughly" not in printed  # memory and disk, no time
    start = printed.index("\nlearner ", printed.index("P(best arm)"))
    table = printed[start : printed.index("\n", printed.index("minus uniform"))]
    head, _, *rows = table.strip().splitlines()
    assert head.split()[:3] == ["learner", "reward", "seg1"] and "SA(64)" in head
    assert [row.split()[0] for row in rows[:-1]] == learners[1:]
    assert rows[-1].startswith("minus uniform, paired by run: mean ± 95% CI over 4 runs")
    summary = read_summary(out)
    stabl = summary["learners"]["stabl"]["paired"]
    assert stabl["reference"] == "uniform" and "paired" not in summary["learners"]["uniform"]
    assert f"{stabl['mean_reward']['mean']:.3f}±" in rows[1]  # stabl's row, as printed
    curves = np.load(out / plots.CURVES)
    assert summary["files"]["curves"] == plots.CURVES
    assert set(drawn) == set(PLOT_FILES)  # five plots, each with its curves
    for plot, lines in drawn.items():
        names = [n for n in learners if f"{plot}/{n}/mean" in curves]
        assert names, plot
        for name, (_, x, y) in zip(names, lines, strict=False):
            if plot != "paired_segments":  # its bars sit beside each segment's number
                np.testing.assert_array_equal(x, curves[f"{plot}/{name}/x"])
            np.testing.assert_array_equal(y, curves[f"{plot}/{name}/mean"])
            assert curves[f"{plot}/{name}/half"].shape == y.shape
