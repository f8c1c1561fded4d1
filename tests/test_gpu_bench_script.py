"""``experiments/gpu_bench.py``, the GPU speed table's script, end to end on the CPU at a tiny
size: the JSON it writes, its bound column and its failure rows. (Its numbers only mean
something on a GPU; this checks the script, so a run on one does not fail on a script bug.)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from stabl_jax import make
from stabl_jax.experiment import bench as benchmark
from tests.scripts import ROOT, load_script

gpu_bench = load_script(ROOT / "experiments" / "gpu_bench.py")

TINY = [("stabl", 4, 4, 64, ("played", "loss")), ("exp3", 4, 4, 64, ("played", "loss"))]


def _run(monkeypatch: pytest.MonkeyPatch, out: Path, *flags: str, rows: list | None = None) -> dict:
    monkeypatch.setattr(gpu_bench, "ROWS", TINY if rows is None else rows)
    monkeypatch.setattr(sys, "argv", ["gpu_bench.py", "--out", str(out), *flags])
    gpu_bench.main()
    return json.loads(out.read_text())


def test_rows_for_each_kernel_with_the_bound_column(tmp_path, monkeypatch, capsys):
    report = _run(monkeypatch, tmp_path / "bench.json", "--kernels", "xla,pallas")
    rows = report["rows"]
    assert [(r["learner"], r["kernel"]) for r in rows] == [
        ("stabl", "xla"),
        ("stabl", "pallas"),
        ("exp3", "xla"),
        ("exp3", "pallas"),
    ]
    for row in rows:
        assert "error" not in row, row
        assert row["same_bits_every_call"], row
        assert len(row["run_seconds"]) == 2 and row["run_steps_per_s"] > 0
        learner = make(row["learner"], num_arms=4, horizon=64)
        assert row["state_bytes_per_run"] == benchmark.state_bytes(learner)
        bound = report["bandwidth_gbs"] * 1e9 / (2 * row["state_bytes_per_run"])
        assert row["bound_run_steps_per_s"] == pytest.approx(bound, rel=1e-12)
        assert row["fraction_of_bound"] == pytest.approx(row["run_steps_per_s"] / bound)
    # the fused kernel plays the same runs as the scan (same seeds, same draws)
    for xla, fused in (rows[0:2], rows[2:4]):
        np.testing.assert_allclose(xla["mean_loss"], fused["mean_loss"], rtol=1e-6)
    table = capsys.readouterr().out
    assert table.count("| stabl |") == 2 and table.count("| exp3 |") == 2


def test_a_failing_row_is_recorded_and_the_bench_goes_on(tmp_path, monkeypatch):
    rows = [("no_such_learner", 4, 4, 64, ("played",)), TINY[1]]
    report = _run(monkeypatch, tmp_path / "bench.json", "--kernels", "xla", rows=rows)
    failed, done = report["rows"]
    assert failed["learner"] == "no_such_learner" and "no_such_learner" in failed["error"]
    assert done["learner"] == "exp3" and "error" not in done


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--kernels", "xla,cuda"], "--kernels: unknown ['cuda']; choose from ['xla', 'pallas']"),
        (["--large-kernel", "cuda"], "argument --large-kernel: invalid choice: 'cuda'"),
        (["--bandwidth", "0"], "argument --bandwidth: give a finite number of GB/s > 0, got '0'"),
        (["--kernels", "xla,pallas,xla"], "--kernels gives xla twice: give each value once"),
        (["--no-rows"], "--no-rows without --large measures nothing: add --large"),
        (["--no-rows", "--quick"], "argument --quick: not allowed with argument --no-rows"),
    ],
)
def test_an_unknown_kernel_stops_it_before_any_row(tmp_path, monkeypatch, capsys, flags, message):
    """A misspelled kernel was timed as failing rows (``--kernels``) or raised after every
    row had run (``--large-kernel``); ``--bandwidth 0`` failed every row (a division by
    zero in its bound) and a negative one gave negative bounds. A kernel given twice timed
    its rows twice; ``--no-rows`` alone wrote a file of no rows, and with ``--quick`` it
    ignored it."""
    with pytest.raises(SystemExit) as stop:
        _run(monkeypatch, tmp_path / "bench.json", *flags)
    assert stop.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "bench.json").exists()
