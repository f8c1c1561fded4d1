"""``experiments/anytime_gap.py``'s folder of hand-made segment rewards and ``report.py``'s
``view=gap`` table of it, against numbers worked out by hand."""

from __future__ import annotations

import json
import runpy

import numpy as np
import pytest

from stabl_jax.experiment.results import ResultsFolder
from tests.scripts.load import ROOT, load_script

REPORT = runpy.run_path(str(ROOT / "experiments" / "report.py"))
script = load_script(ROOT / "experiments" / "anytime_gap.py", "anytime_gap_script")


# Four runs, two segments. tuned: segment means 0.5 and 0.4; "x" is tuned minus a per-run
# difference d (the same in both segments) with d = 0.1, 0.2, 0.1, 0.2 -> mean 0.15, sd
# 0.057735, t(3) = 3.182446 -> half-width 0.091868.
TUNED = np.array([[0.5, 0.4]] * 4)
D = np.array([0.1, 0.2, 0.1, 0.2])
X = TUNED - D[:, None]


def _outs() -> list[dict]:
    learners = {
        "stabl_anytime": {"segment_reward": X, "num_muted": 0, "params": None},
        "stabl_theory": {"segment_reward": X + 0.01, "num_muted": 0, "params": None},
        "stabl_tuned": {"segment_reward": TUNED, "num_muted": 7, "params": {"s": 2.0}},
    }
    setting = {"config": "expert_advice_equal", "feedback": "loss", "runs": 4, "seed": 0}
    return [setting | {"tuned_config": "expert_advice_equal_tuned", "learners": learners}]


def test_folder_and_gap_table(tmp_path):
    with ResultsFolder.prepare(tmp_path / "gap") as folder:
        final = script.write_folder(folder, _outs(), ["--runs", "4"])
    summary = json.loads((final / "summary.json").read_text())
    assert summary["kind"] == "anytime_gap"
    assert summary["command"] == ["python", "experiments/anytime_gap.py", "--runs", "4"]
    assert set(summary["code"]) == {"commit", "dirty", "source"}
    entry = summary["learners"]["expert_advice_equal/loss/stabl_tuned"]
    assert entry["num_muted"] == 7 and entry["params"] == {"s": 2.0}
    np.testing.assert_allclose(entry["mean_over_segments"]["mean"], 0.45)
    csv = (final / "results.csv").read_text()
    assert "expert_advice_equal/loss/stabl_anytime,,segment_reward,,2," in csv

    text = REPORT["render"]("gap view=gap columns=stabl_theory,stabl_tuned", tmp_path)
    # x over segments: 0.45 - 0.15 = 0.3000, run values 0.35, 0.25, ... -> same half 0.0919;
    # gap per segment: -0.15 / 0.5 = -30.0 %, -0.15 / 0.4 = -37.5 %; overall -0.15 / 0.45 =
    # -33.3 % +- 0.091868 / 0.45 = 20.4 points; per segment +- 18.4 and 23.0 points.
    row = (
        "| equal, loss, 4 | 0.3000 ± 0.0919 | 0.3100 | 0.4500 | −30.0, −37.5 % "
        "| **−33.3 % ± 20.4** |"
    )
    assert row in text.splitlines()
    assert "Per-segment intervals of the gap: ± 18.4 to 23.0 points." in text
    with pytest.raises(ValueError, match="no learner"):
        REPORT["render"]("gap learner=saol", tmp_path)
    summary["settings"][0]["runs"] = 1  # a folder of one run
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "one" / "traces.npz").write_bytes((final / "traces.npz").read_bytes())
    with pytest.raises(ValueError, match=r"has 1 run\(s\), and a 95% t interval needs 2"):
        REPORT["render"]("one view=gap", tmp_path)
    with pytest.raises(ValueError, match="view=gap only"):
        REPORT["render"]("gap view=paired", tmp_path)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--configs", "expert_advice_equal", "nope"], "no config named 'nope'"),
        (["--feedback", "loss", "both"], "must be one of ['loss', 'reward'], got 'both'"),
        (["--extra", "nope"], "unknown learner 'nope'"),
        (["--extra", "saol", "stabl_tuned"], "--extra stabl_tuned: already compared as "
         "['stabl_anytime', 'stabl_adaptive', 'stabl_theory', 'stabl_tuned']; give other learners"),
        (["--force"], "--force replaces an existing --out folder: give --out too"),
        (["--out", "mine", "--force"], "never replaced"),  # a user's folder
    ],
)  # fmt: skip
def test_every_setting_is_checked_before_a_run(tmp_path, capsys, monkeypatch, args, message):
    """A bad config, feedback, learner or output folder: exit 2 naming it before any run."""
    simulated = []
    monkeypatch.setattr(script, "compare", simulated.append)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    monkeypatch.chdir(tmp_path)
    out = [] if "--force" in args else ["--out", "out"]
    with pytest.raises(SystemExit) as stop:
        script.main(["--runs", "2", *out, *args])
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert simulated == [] and not (tmp_path / "out").exists()
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"


def test_segment_rewards_record_the_loss_alone(monkeypatch):
    """The simulations record the loss alone; the rewards are those of a full simulation."""
    import jax

    from stabl_jax import metrics
    from stabl_jax.experiment.kinds import load_config

    simulate, kept = script.simulate, []

    def spy(*args, **kwargs):
        kept.append(kwargs.get("traces"))
        return simulate(*args, **kwargs)

    monkeypatch.setattr(script, "simulate", spy)
    config = load_config("expert_advice_equal", ["runs=3", "horizon=64", "env.num_arms=5"])
    learner = config.make_learner("exp3")  # any learner: the rewards read its loss alone
    rewards, _ = script.segment_rewards(config, learner, None, jax.random.key(2))
    assert kept == [("loss",)]
    full = simulate(learner, config.make_env(), jax.random.key(2), 3, horizon=64)
    segments = metrics.segment_ids(full.final_carry("test"), 64)
    expected = metrics.per_segment_mean(1.0 - full.loss.astype(np.float64), segments, 4)
    np.testing.assert_array_equal(rewards, expected)
