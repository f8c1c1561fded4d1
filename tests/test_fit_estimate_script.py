"""``experiments/fit_estimate.py``: the fit finds the constants of times made by the model,
a measured run gives a row per learner from its ``summary.json``, and saved measurements
are refitted with ``--from``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stabl_jax.experiment.kinds import paired
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
FIT = load_script(ROOT / "experiments" / "fit_estimate.py")


def synthetic_rows(coef: np.ndarray) -> list[dict]:
    """Rows whose run seconds are the model's with ``coef``."""
    rows = []
    for horizon in (512, 2048):
        for runs in (16, 256, 4096):
            for width, state in ((2, 20), (30, 760), (300, 7240), (10, 43360)):
                seconds = horizon * (coef[0] + runs * (coef[1] + coef[2] * width + coef[3] * state))
                rows.append(
                    {
                        "config": "c",
                        "overrides": [f"runs={runs}"],
                        "learner": f"l{state}",
                        "width": width,
                        "runs": runs,
                        "horizon": horizon,
                        "state_bytes": state,
                        "run_seconds": seconds,
                        "compile_seconds": 2.5,
                    }
                )
    return rows


def test_the_fit_finds_the_constants_of_the_model():
    """Exact model times give back its constants; each constant matters (doubling one moves
    the fit away from the truth by far more than the tolerance)."""
    true = np.array([4e-5, 7e-8, 6e-9, 9e-10])
    np.testing.assert_allclose(FIT.fit(synthetic_rows(true)), true, rtol=1e-6)
    for i in range(4):
        other = true.copy()
        other[i] *= 2
        assert not np.allclose(FIT.fit(synthetic_rows(other)), true, rtol=1e-2, atol=0)


def test_a_measured_run_gives_a_row_per_learner(tmp_path):
    overrides = ["runs=2", "horizon=64", 'learners=["uniform", "exp3"]']
    rows = FIT.measure("expert_advice_equal", overrides, tmp_path)
    assert [r["learner"] for r in rows] == ["uniform", "exp3"]
    for row in rows:
        assert (row["width"], row["runs"], row["horizon"]) == (30, 2, 64)
        assert row["run_seconds"] > 0 and row["compile_seconds"] > 0
    assert rows[0]["state_bytes"] < rows[1]["state_bytes"]  # Uniform keeps almost nothing


def test_saved_measurements_are_refitted(tmp_path, capsys):
    true = np.array(
        [getattr(paired, f"ESTIMATE_SECONDS_{c}") for c in FIT.CONSTANTS], dtype=np.float64
    )
    saved = tmp_path / "measured.json"
    measured = {"date": "2026-11-30", "cpu": {"model": "a CPU"}}
    document = {"measured": measured, "rows": synthetic_rows(true), "fitted": {}, "totals": []}
    saved.write_text(json.dumps(document))
    out = tmp_path / "fit.json"
    assert FIT.main(["--from", str(saved), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "per learner, measured / announced (shipped): 1.00 to 1.00" in printed
    written = json.loads(out.read_text())
    assert written["measured"] == measured  # where the times were measured, kept
    fitted = written["fitted"]
    assert fitted["PER_ARM"] == pytest.approx(paired.ESTIMATE_SECONDS_PER_ARM, rel=1e-6)
    (tmp_path / "notes.json").write_text("[1, 2]")
    with pytest.raises(SystemExit) as stopped:
        FIT.main(["--from", str(tmp_path / "notes.json")])
    assert stopped.value.code == 2
    assert "not an output of this script" in capsys.readouterr().err
