"""A kind defined outside the package (``examples/custom_kind.py``) runs by import path, is
listed, and is registered with the checks of :func:`~stabl_jax.experiment.register_kind`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import numpy as np
import pytest

from stabl_jax import ExpertAdvice, make, simulate
from stabl_jax.experiment import cli, kinds, register_kind
from stabl_jax.experiment.configs import ConfigError
from stabl_jax.experiment.kinds import KINDS, load_config
from stabl_jax.experiment.outputs import is_marked

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONFIG = EXAMPLES / "horizon_study.toml"


@pytest.fixture
def on_path(monkeypatch):
    """``examples/`` importable; the kinds table as it was afterwards."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    before = dict(KINDS)
    yield
    KINDS.clear()
    KINDS.update(before)


def _write(tmp_path: Path, kind: str) -> Path:
    """``CONFIG`` with ``kind = "KIND"``, in ``tmp_path``."""
    path = tmp_path / "study.toml"
    path.write_text(CONFIG.read_text().replace('"custom_kind:KIND"', f'"{kind}"'), encoding="utf-8")
    return path


def test_a_kind_named_by_import_path_runs_end_to_end(on_path, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", str(CONFIG), "--out", str(out), "--runs", "3", "--no-progress"]
    # a dry run of a kind that estimates nothing does not claim to have checked resources
    assert cli.main([*argv, "--dry-run"]) == 0 and not out.exists()
    checked = "config, output folder, interrupted runs"  # no " and resources"
    assert capsys.readouterr().out.endswith(cli.DRY_RUN_DONE.format(checked=checked) + "\n")
    assert cli.main([*argv, "--set", "horizons=[32, 64]", "--set", "learners=['exp3']"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["kind"] == "horizon_study" and summary["config"]["horizons"] == [32, 64]
    traces = np.load(out / "traces.npz")
    for horizon in (32, 64):  # simulate's numbers, validated as the kind runs it
        env = ExpertAdvice(num_arms=10, horizon=horizon)
        learner = make("exp3", num_arms=10, horizon=horizon)
        direct = simulate(learner, env, jax.random.key(0), 3, traces=("loss",), validate=True)
        expected = direct.loss.mean(axis=1)
        np.testing.assert_array_equal(traces[f"exp3/T{horizon}/average_loss"], expected)
        got = summary["learners"]["exp3"]["average_loss"][f"T{horizon}"]["mean"]
        assert got == pytest.approx(float(expected.astype(np.float64).mean()), rel=1e-12)
    assert is_marked(out) and (out / "average_loss.png").stat().st_size > 0
    assert (out / "results.csv").is_file() and "T=32" in capsys.readouterr().out
    # imported once, it is a registered kind: listed, and nameable by its own name
    assert KINDS["horizon_study"].name == "horizon_study"
    # without a resumed_line of its own, a dry run names each checkpoint's rounds
    assert KINDS["horizon_study"].describe_resumed(None, {"exp3": 16}) == "exp3 at round 16"
    assert cli.main(["list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert any(line.split()[:1] == ["horizon_study"] for line in listed)
    assert load_config(_write(tmp_path, "horizon_study")).kind == "horizon_study"


def test_the_kinds_own_checks_name_the_key(on_path, tmp_path):
    path = tmp_path / "study.toml"
    path.write_text(CONFIG.read_text().replace("horizons = [256, 1024, 4096]", "horizonz = [8]"))
    with pytest.raises(ConfigError, match=r"(?s)2 errors.*'horizonz'.*'horizons'.*is required"):
        load_config(path)
    with pytest.raises(ConfigError, match=r"key 'horizons'.*must be an int >= 2, got 1"):
        load_config(CONFIG, ["horizons=[1]"])
    with pytest.raises(ConfigError, match=r"key 'horizons'.*lists a horizon twice: \[64, 64\]"):
        load_config(CONFIG, ["horizons=[64, 64]"])


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("bandt", r"must be one of \['bandit'.*or an import path.*did you mean 'bandit'"),
        ("no_such_module_here:KIND", r"cannot import kind 'no_such_module_here:KIND'.*PYTHONPATH"),
        ("custom_kind:NAME",
         r"register_kind takes a stabl_jax.experiment.kinds.base.Kind, got str"),
    ],
)  # fmt: skip
def test_a_kind_that_is_not_one_is_a_config_error(on_path, tmp_path, kind, message):
    with pytest.raises(ConfigError, match=rf"key 'kind' in .*study.toml: {message}"):
        load_config(_write(tmp_path, kind))


def test_register_kind_checks_the_kind_its_name_and_its_configs(on_path, tmp_path, monkeypatch):
    bandit = KINDS["bandit"]
    assert register_kind(bandit) is bandit  # the same object again: allowed
    with pytest.raises(TypeError, match="got dict"):
        register_kind({"name": "mine"})
    with pytest.raises(ValueError, match="kind name '1st' must be letters"):
        register_kind(dataclasses.replace(bandit, name="1st"))
    with pytest.raises(ValueError, match=r"kind 'bandit' is already registered.*another name"):
        register_kind(dataclasses.replace(bandit, description="another"))
    other = register_kind(dataclasses.replace(bandit, description="another"), replace=True)
    assert kinds.KINDS["bandit"] is other
    # a kind whose ``validate`` gives configs of another kind is named at once (not met later
    # as a ``KeyError``); so is a kind taking a shipped name
    import custom_kind

    def validate(*args, **kwargs):
        return dataclasses.replace(custom_kind.validate(*args, **kwargs), kind="other")

    register_kind(dataclasses.replace(custom_kind.KIND, name="mislabelled", validate=validate))
    with pytest.raises(TypeError, match=r"kind 'mislabelled': .* kind is 'other'; it must be"):
        load_config(_write(tmp_path, "mislabelled"))
    (tmp_path / "clash.py").write_text(
        "import dataclasses\nfrom stabl_jax.experiment.kinds import KINDS\n"
        "KIND = dataclasses.replace(KINDS['bandit'], description='mine')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="kind 'bandit' is already registered"):
        load_config(_write(tmp_path, "clash:KIND"))
