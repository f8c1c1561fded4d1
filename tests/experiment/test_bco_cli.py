"""``kind = "bco"`` configs: each validated at full size; ``bco_d2`` (``bco_d10``/``d50`` differ
only in dimension and runs) run end to end shrunk (2 runs, T = 64) and checked file by file."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from stabl_jax.envs.convex import CustomConvex, MovingTarget
from stabl_jax.experiment import cli
from stabl_jax.experiment.kinds import load_config
from stabl_jax.experiment.kinds.bco import BCO_PLOT_FILES
from stabl_jax.experiment.outputs import COMPLETE
from stabl_jax.experiment.tables import read_summary, read_traces
from tests.experiment.runs import sets

BCO_CONFIGS = {"bco_d2": 2, "bco_d10": 10, "bco_d50": 50}
BCO_LEARNER_QUERIES = {"stabl_bco": 3, "stabl_bco_two_query": 2, "fkm": 1, "two_point_ogd": 2}
BCO_LEARNER_QUERIES["ogd_full_info"] = 1
CHANGE_POINTS = (400, 1100, 1300, 2600, 3500)
TINY = ["runs=2", "horizon=64", "window=8", "sa_windows=[16, 64]", "env.dim=2"]
TINY += ["env.change_points=[6, 17, 20, 40, 54]"]  # the shipped ones times 64 / 4096


def tiny_args(name: str) -> list[str]:
    return [name, "--no-progress", *sets(TINY)]


@pytest.mark.parametrize("name", sorted(BCO_CONFIGS))
def test_bco_config_validates(name):
    cfg = load_config(name)
    assert cfg.kind == "bco" and cfg.name == name and cfg.description
    assert cfg.horizon == 4096 and cfg.runs >= 10
    assert cfg.learners == tuple(BCO_LEARNER_QUERIES)
    env = cfg.make_env()
    assert type(env).__name__ == "MovingTarget" and env.dim == BCO_CONFIGS[name]
    assert env.change_points == CHANGE_POINTS
    assert type(env.domain).__name__ == "Ball" and env.domain.r == 1.0
    for learner_name in cfg.learners:
        learner = cfg.make_learner(learner_name)
        assert learner.dim == env.dim and learner.domain == env.domain
        assert learner.horizon == 4096 and learner.lipschitz == env.lipschitz
        assert learner.num_queries == BCO_LEARNER_QUERIES[learner_name]


def test_bco_config_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "bco_d2"
    assert cli.main(["run", *tiny_args("bco_d2"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "comparator gap" in printed and "SA(64)" in printed and "±" in printed
    assert (out / COMPLETE).is_file() and not list(tmp_path.glob("bco_d2.partial*"))
    summary = json.loads((out / "summary.json").read_text())  # strict JSON (no NaN)
    assert summary["kind"] == "bco" and summary["runs"] == 2 and summary["horizon"] == 64
    assert summary["env"]["dim"] == 2 and summary["config"]["env"]["dim"] == 2
    assert summary["env"]["change_points"] == [6, 17, 20, 40, 54]
    sa_info = summary["adaptive_regret"]
    assert summary["timings"]["wall_seconds"] > 0 and sa_info["window_lengths"] == [16, 64]
    assert sa_info["stride"] == "max(1, L // 4)" and "window_minimum" in sa_info["solver"]
    assert all(0 <= g < 1e-2 for g in sa_info["comparator_gap"]["max"])
    assert list(summary["learners"]) == list(BCO_LEARNER_QUERIES)
    for learner_name, entry in summary["learners"].items():
        assert entry["num_queries"] == BCO_LEARNER_QUERIES[learner_name]
        assert entry["kernel"] == "xla"
        assert entry["mean_loss"]["mean"] > 0 and entry["mean_loss"]["ci95"] >= 0
        assert len(entry["adaptive_regret"]["sa"]["mean"]) == 2
        muted = entry["num_muted"]
        assert (muted is None) == (learner_name not in ("stabl_bco", "stabl_bco_two_query"))
    traces = read_traces(out)
    for learner_name in BCO_LEARNER_QUERIES:
        loss = traces[f"{learner_name}/loss"]
        assert loss.shape == (2, 64) and loss.dtype == np.float32
        assert traces[f"{learner_name}/sa"].shape == (2, 2)
        np.testing.assert_allclose(traces[f"{learner_name}/best_loss"], 0.0, atol=1e-6)
        mean = summary["learners"][learner_name]["mean_loss"]["mean"]
        assert mean == pytest.approx(loss.astype(np.float64).mean())
    # paired by run against the reference (the first learner), scipy's t quantile over 2 runs
    reference = summary["config"]["reference"]
    assert reference == next(iter(BCO_LEARNER_QUERIES))
    assert f"minus {reference}, paired by run" in printed
    t_quantile = stats.t.ppf(0.975, 1)
    assert "paired" not in summary["learners"][reference]
    for learner in set(BCO_LEARNER_QUERIES) - {reference}:
        got = summary["learners"][learner]["paired"]
        for key, name in (("mean_loss", "loss"), ("sa", "sa")):
            mine, theirs = (traces[f"{n}/{name}"].astype(np.float64) for n in (learner, reference))
            diff = mine.mean(axis=1) - theirs.mean(axis=1) if name == "loss" else mine - theirs
            stat = got[key] if key == "mean_loss" else got["adaptive_regret"]["sa"]
            half = t_quantile * diff.std(axis=0, ddof=1) / np.sqrt(2)
            np.testing.assert_allclose(stat["mean"], diff.mean(axis=0), rtol=1e-9)
            np.testing.assert_allclose(stat["ci95"], half, rtol=1e-9)
    assert traces["env/change_points"].shape == (2, 5)
    assert traces["comparator_gap"].shape == (2, 2)
    for filename in BCO_PLOT_FILES.values():
        data = (out / filename).read_bytes()
        assert len(data) > 1000 and data.startswith(b"\x89PNG\r\n\x1a\n")


def test_window_minimum_runs_the_steps_the_estimate_counts(monkeypatch):
    env = MovingTarget(dim=2, horizon=8)
    thetas = jnp.asarray([[0.5, 0.0], [0.0, 0.5], [-0.3, -0.3], [0.2, 0.4]])
    default = env.window_minimum(thetas)
    for got, want in zip(default, env.window_minimum(thetas, num_steps=200), strict=True):
        np.testing.assert_array_equal(got, want)
    monkeypatch.setattr(MovingTarget, "window_minimum_steps", 1)
    few = env.window_minimum(thetas)
    for got, want in zip(few, env.window_minimum(thetas, num_steps=1), strict=True):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(few[0], default[0])  # one Weiszfeld step is not 200


def _l1(theta, x):
    return jnp.sum(jnp.abs(x - theta))


def _nan(theta, x):
    return jnp.nan * _l1(theta, x)


@dataclasses.dataclass(frozen=True)
class L1Target(CustomConvex):
    """A user's convex family (by import path): a function among its fields."""

    loss: Any = _l1
    lipschitz_bound: float = 2**0.5


@dataclasses.dataclass(frozen=True)
class BrokenTarget(CustomConvex):
    """A user's convex family whose loss is NaN."""

    loss: Any = _nan


def test_a_users_environment_with_a_function_runs_and_a_broken_one_stops(tmp_path, capsys):
    """The function is recorded by its import path; a NaN loss stops the run naming run and
    round (no summary of NaNs with exit 0)."""
    one = ["--set", 'learners=["fkm"]']
    out = tmp_path / "l1"
    user = ["--set", f'env.name="{__name__}:L1Target"']
    assert cli.main(["run", *tiny_args("bco_d2"), *one, *user, "--out", str(out)]) == 0
    assert read_summary(out)["env"]["loss"] == f"{__name__}:_l1"
    capsys.readouterr()
    broken = ["--set", f'env.name="{__name__}:BrokenTarget"', "--out", str(tmp_path / "nan")]
    assert cli.main(["run", *tiny_args("bco_d2"), *one, *broken]) == 1
    assert "loss of run 0 at round 0 is nan, not finite" in capsys.readouterr().err
    assert not (tmp_path / "nan").exists()
