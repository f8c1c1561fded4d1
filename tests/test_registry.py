"""Registries with metadata: what an entry defines, a user's own learner and environment (an
import path in a config, or registered by name) run through the config and the command line
like shipped ones, and unknown names are answered with the known ones and a close match."""

from __future__ import annotations

import json
import re

import pytest

import stabl_jax
from stabl_jax import hpo_metrics, register_env, register_learner
from stabl_jax.experiment import cli
from stabl_jax.experiment.configs import ConfigError
from stabl_jax.experiment.kinds import load_config
from stabl_jax.learners import auer_gamma
from stabl_jax.registry import BCO_LEARNERS, CONVEX_ENVS, ENVS, LEARNERS, make, make_env

USER_MODULE = """
import dataclasses
from stabl_jax import EXP3, ExpertAdvice

@dataclasses.dataclass(frozen=True)
class NotedEXP3(EXP3):  # a user's learner
    note: str = "none"

@dataclasses.dataclass(frozen=True)
class FlavouredAdvice(ExpertAdvice):  # a user's environment
    flavour: str = "plain"

@dataclasses.dataclass(frozen=True)
class NoSegments:  # no change points (the experiment's segment metrics need them)
    num_arms: int
    horizon: int
    def sample_params(self, key): ...
    def loss(self, params, t, key): ...
    def loss_at(self, params, t, key, arms): ...
    def best_arm(self, params, t): ...

class NotFrozen: ...
"""

CONFIG = """
name = "mine"
runs = 3
horizon = 32
window = 8
sa_windows = [8, 16]
learners = ["exp3", "user_parts:NotedEXP3"]
env = { name = "user_parts:FlavouredAdvice", num_arms = 3, num_segments = 2, flavour = "spicy" }
learner_options = { "user_parts:NotedEXP3" = { note = "from the config" } }
"""


@pytest.fixture
def user_parts(tmp_path, monkeypatch):
    """The module ``user_parts`` importable from ``tmp_path``; registries restored after."""
    (tmp_path / "user_parts.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    for known in (LEARNERS, ENVS):
        monkeypatch.setattr(known, "_entries", dict(known._entries))
    import user_parts

    return user_parts


def load_config_text(tmp_path, text: str):
    (tmp_path / "config.toml").write_text(text)
    return load_config(tmp_path / "config.toml")


def _run(tmp_path, text: str) -> dict:
    (tmp_path / "mine.toml").write_text(text)
    out = tmp_path / "out"
    assert cli.main(["run", str(tmp_path / "mine.toml"), "--no-progress", "--out", str(out)]) == 0
    return json.loads((out / "summary.json").read_text())


def test_entries_carry_their_defining_options_and_queries():
    """An entry's options, queries and description; every environment class is exported."""
    classes = [e.cls for e in ENVS.values()]
    missing = [c.__name__ for c in classes if getattr(stabl_jax, c.__name__, None) is not c]
    assert not missing, f"ENVS classes not exported by stabl_jax: {missing}"
    assert all(c.__name__ in stabl_jax.__all__ for c in classes)
    assert LEARNERS["stabl_naive"].cls is LEARNERS["stabl"].cls
    assert make("stabl_naive", num_arms=3, horizon=64).observation == "uniform"
    assert make("stabl_single_scale", num_arms=3, horizon=4096).history_lengths == (1024,)
    assert make("exp3_uniform", num_arms=5, horizon=100).gamma == auer_gamma(5, 100)
    assert make("exp3_uniform", num_arms=5, horizon=100, gamma=0.25).gamma == 0.25
    assert BCO_LEARNERS.make("stabl_bco_log_t", dim=2, horizon=64).scale_factor == "log_T"
    assert LEARNERS["stabl"].num_queries == 2 and LEARNERS["exp3"].num_queries == 1
    assert LEARNERS["hedge"].num_queries is None  # n: set by num_arms
    assert "history_lengths" in LEARNERS["stabl_single_scale"].hints
    for known in (LEARNERS, ENVS, BCO_LEARNERS, CONVEX_ENVS):
        assert all(entry.description for entry in known.values())
    # the learners of a hyper-parameter search keep the options their entry fixes
    single = hpo_metrics.make_hpo_learner("stabl_single_scale", 24, 4096)
    assert single.history_lengths == (1024,) and single.horizon == 2048
    assert hpo_metrics.make_hpo_learner("hedge", 24, 1000).horizon == 42  # ceil(1000 / 24)


def test_import_paths_run_through_config_and_cli_paired_with_shipped(tmp_path, user_parts):
    cfg = load_config_text(tmp_path, CONFIG)
    assert cfg.make_learner("user_parts:NotedEXP3").note == "from the config"
    assert cfg.make_learner("user_parts:NotedEXP3").feedback == "loss"  # the config's feedback
    assert cfg.make_env().flavour == "spicy"
    summary = _run(tmp_path, CONFIG)
    shipped, mine = (summary["learners"][n] for n in ("exp3", "user_parts:NotedEXP3"))
    assert mine["class"] == "NotedEXP3" and mine["constructor"]["note"] == "from the config"
    # Same algorithm, same key: the user's subclass sees the shipped learner's draws.
    assert mine["adaptive_regret"] == shipped["adaptive_regret"]
    assert mine["mean_reward"] == shipped["mean_reward"]


def test_registered_names_run_through_the_cli(tmp_path, user_parts, capsys):
    register_learner("noted_exp3", user_parts.NotedEXP3, "EXP3 with a note (1 query)")
    register_env("flavoured", user_parts.FlavouredAdvice, "advice with a flavour")
    assert cli.main(["list"]) == 0
    listed = capsys.readouterr().out
    assert "noted_exp3" in listed and "advice with a flavour" in listed
    text = CONFIG.replace("user_parts:NotedEXP3", "noted_exp3")
    summary = _run(tmp_path, text.replace("user_parts:FlavouredAdvice", "flavoured"))
    assert summary["learners"]["noted_exp3"]["constructor"]["note"] == "from the config"
    assert make_env("flavoured", num_arms=3, horizon=32).flavour == "plain"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "user_parts:Missing",
            "cannot import learner 'user_parts:Missing': AttributeError: module 'user_parts' "
            "has no attribute 'Missing' (is 'Missing' spelled as in the module?)",
        ),
        (
            "no_such_module:X",
            "cannot import learner 'no_such_module:X': ModuleNotFoundError: No module named "
            "'no_such_module' (is the module's folder on PYTHONPATH?)",
        ),
        (  # found, and failing to import: its own error, not the PYTHONPATH hint
            "broken_user_parts:X",
            "cannot import learner 'broken_user_parts:X': ModuleNotFoundError: No module named "
            "'no_such_dependency' (raised while importing broken_user_parts)",
        ),
        ("user_parts:", "cannot import learner 'user_parts:': give it as 'package.module:Name'"),
        ("user_parts:NotFrozen", "NotFrozen must be a frozen dataclass"),
        ("user_parts:FlavouredAdvice", "FlavouredAdvice lacks ['ask', 'tell'"),
    ],
)
def test_import_paths_that_fail_say_why(tmp_path, user_parts, name, message):
    (tmp_path / "broken_user_parts.py").write_text("import no_such_dependency\n")
    with pytest.raises(ValueError, match=re.escape(message)):
        make(name, num_arms=3, horizon=32)
    with pytest.raises(ConfigError, match="key 'learners'") as info:
        load_config_text(tmp_path, CONFIG.replace("user_parts:NotedEXP3", name, 1))
    assert message in str(info.value)


def test_register_checks_name_contract_and_clashes(user_parts):
    with pytest.raises(ValueError, match="lacks"):
        register_learner("advice", user_parts.FlavouredAdvice)
    ENVS.check(user_parts.NoSegments, "no_segments")  # change points are optional
    with pytest.raises(
        ValueError, match=re.escape("lacks ['sample_params', 'loss', 'best_arm']")
    ) as info:
        register_env("no_loss", user_parts.NotedEXP3)
    assert str(info.value).endswith("(see docs/environments.md, 'What the command line needs')")
    with pytest.raises(ValueError, match="letters, digits"):
        register_learner("my:exp3", user_parts.NotedEXP3)
    with pytest.raises(ValueError, match="'stabl' is already registered"):
        register_learner("stabl", user_parts.NotedEXP3)
    # a default the class does not take: refused here, not in every make() of the name
    message = "learner 'gamma_exp3': defaults ['gama'] are not arguments of NotedEXP3 (did "
    with pytest.raises(ValueError, match=re.escape(message + "you mean 'gamma'?); its ar")):
        register_learner("gamma_exp3", user_parts.NotedEXP3, defaults={"gama": 0.1})
    assert "gamma_exp3" not in LEARNERS
    with pytest.raises(ValueError, match="kind must be one of"):
        register_env("flavoured", user_parts.FlavouredAdvice, kind="convex")


def test_unknown_names_list_the_known_ones_and_the_closest(tmp_path, user_parts):
    """(A learner's name: tests/test_input_table.py, row L10.)"""
    with pytest.raises(ValueError, match=r"did you mean 'expert_advice'.*bernoulli"):
        make_env("expert_advise", num_arms=3, horizon=16)
    for old, new, hint in [
        ('"exp3", ', '"exp_3", ', "did you mean 'exp3'"),
        ("user_parts:FlavouredAdvice", "expert_advise", "did you mean 'expert_advice'"),
        ("runs = 3", "runz = 3", "did you mean 'runs'"),
        ('"exp3", ', "[1], ", "unknown learner [1]; choose one of"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(hint)):
            load_config_text(tmp_path, CONFIG.replace(old, new, 1))
