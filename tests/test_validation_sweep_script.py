"""``experiments/validation_sweep.py``: it finds a validated run stopped by the log-domain
normaliser's rounding, and the max-shifted normaliser it measures lets that run finish."""

from __future__ import annotations

from pathlib import Path

import jax
import pytest

from stabl_jax import estimators
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
SWEEP = load_script(ROOT / "experiments" / "validation_sweep.py")
# EXP3 at a million times its rate on 3 Bernoulli arms: the normaliser is rounded at the
# magnitude of a step of about 1e4 and the play distribution sums to 1 + 18,144 eps at round 5.
ARGS = ["--arms", "3", "--horizon", "64", "--learners", "exp3", "--high", "1e6"]


def _bernoulli_loss(cases: list[dict]) -> dict:
    (case,) = [c for c in cases if c["env"] == "PiecewiseBernoulli" and c["feedback"] == "loss"]
    return case


@pytest.fixture
def restored(monkeypatch):
    """The script's ``--max-shifted-normaliser`` replaces a library function: put it back."""
    monkeypatch.setattr(estimators, "exp3_log_update", estimators.exp3_log_update)
    yield
    monkeypatch.undo()
    jax.clear_caches()  # no program traced with the replacement outlives the test


def test_the_sweep_finds_the_stop_and_the_max_shifted_normaliser_removes_it(restored, tmp_path):
    cases = SWEEP.main([*ARGS, "--json", str(tmp_path / "plain.json")])
    assert len(cases) == 4  # two environments, two feedbacks
    stopped = _bernoulli_loss(cases)
    assert stopped["stopped"] and stopped["round"] == 5
    assert stopped["deviation_eps"] > 100 * stopped["allowed_eps"]
    assert not any(c["stopped"] for c in cases if c is not stopped)
    assert (tmp_path / "plain.json").exists()

    shifted = SWEEP.main([*ARGS, "--max-shifted-normaliser"])
    assert not any(c["stopped"] for c in shifted)
    assert all(c["finite"] for c in shifted)


def test_divergence_compares_the_same_runs_and_puts_the_update_back(monkeypatch):
    shipped, original, recorded = estimators.exp3_log_update, SWEEP.simulate, []

    def simulate(*args, **kwargs):  # the traces kept are the three it reads
        result = original(*args, **kwargs)
        recorded.append(sorted(result.traces()))
        return result

    monkeypatch.setattr(SWEEP, "simulate", simulate)
    rows = SWEEP.divergence(runs=3, horizon=64, num_arms=3)
    assert recorded == [["expected_loss", "loss", "played"]] * 6
    assert estimators.exp3_log_update is shipped
    assert [(r["learner"], r["expert_lr_scale"]) for r in rows] == [
        ("exp3", None),
        ("stabl", None),
        ("stabl", 64.0),
    ]
    for row in rows:
        assert 0 <= row["runs_diverged"] <= row["runs"] == 3
        assert (row["median_first_round"] is None) == (row["runs_diverged"] == 0)
        assert len(row["mean_loss"]) == len(row["mean_expected_loss"]) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--learners", "exp3", "nope"], "unknown learner 'nope'"),
        (["--arms", "3", "1"], "num_arms must be >= 2, got 1"),
        (["--low", "0"], "--low and --high must satisfy 0 < low <= high, got 0.0, 1024.0"),
    ],
)
def test_every_case_is_built_before_any_runs(monkeypatch, capsys, args, message):
    """A bad learner or size used to stop it with a traceback after the cases before it had
    run; a scale of 0 failed inside the first run."""
    ran = []
    monkeypatch.setattr(SWEEP, "run_case", lambda *a: ran.append(a) or {})
    with pytest.raises(SystemExit) as stop:
        SWEEP.main(["--horizon", "64", *args])
    assert stop.value.code == 2 and message in capsys.readouterr().err and ran == []


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--arms", "30"], "--arms"),
        (["--horizon", "64", "--learners", "exp3"], "--horizon --learners"),
        (["--max-shifted-normaliser"], "--max-shifted-normaliser"),
    ],
)
def test_divergence_refuses_the_sweeps_options(monkeypatch, capsys, argv, named):
    """``--divergence`` measures a fixed setting; the sweep's options were silently ignored."""
    monkeypatch.setattr(SWEEP, "divergence", lambda: pytest.fail("it measured"))
    with pytest.raises(SystemExit) as stop:
        SWEEP.main(["--divergence", *argv])
    assert stop.value.code == 2
    assert f"--divergence takes only --json, not {named} (the sweep's options)" in (
        capsys.readouterr().err
    )
