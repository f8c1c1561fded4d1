"""``stabl-jax bench`` at a tiny size: it runs, writes JSON and Markdown, reports ratios and
memory. No timing is asserted (the numbers depend on the machine and its load)."""

from __future__ import annotations

import datetime
import importlib
import json
import re
from pathlib import Path

import jax
import numpy as np
import pytest

from stabl_jax.envs.base import BANDIT_TRACES
from stabl_jax.experiment import bench as benchmark
from stabl_jax.experiment import cli

simulate = importlib.import_module("stabl_jax.simulate")
BANDWIDTH = "argument --bandwidth: give a finite number of GB/s > 0, got '{}'"


def test_bench_cli_tiny(tmp_path, capsys):
    """StABL against NumPy; ``uniform``, which has no NumPy version: JAX only, plain and
    validated."""
    argv = "bench --learners stabl uniform --arms 5 --runs 3 --repeats 1 --bandwidth 100 --out"
    assert cli.main([*argv.split(), str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "| learner | n | R |" in printed and "NumPy one-run loop" in printed
    result = json.loads((tmp_path / "benchmark.json").read_text())
    impls = sorted({row["impl"] for row in result["rows"]})
    assert impls == ["jax", "jax_validated", "numpy_loop", "numpy_vectorised"]
    uniform = [row["impl"] for row in result["rows"] if row["learner"] == "uniform"]
    assert uniform == ["jax", "jax_validated"] and "—" in (tmp_path / "benchmark.md").read_text()
    jax_rows = [row for row in result["rows"] if row["impl"] == "jax" and row["learner"] == "stabl"]
    assert [row["runs"] for row in jax_rows] == [3]
    for row in jax_rows:
        assert row["run_steps_per_s"] > 0 and row["compile_s"] >= 0
        assert row["arm_updates_per_s"] == pytest.approx(5 * row["run_steps_per_s"])
        assert row["x_numpy_loop"] > 0 and row["x_numpy_vectorised"] > 0
        assert row["peak_rss_bytes"] > 0 and row["x_validated"] > 0
        # StABL's state per run, from its init: the bound is 100 GB/s over twice that.
        state = benchmark.state_bytes(benchmark.make_learner("stabl", 5))
        assert row["state_bytes_per_run"] == state
        assert row["bound_run_steps_per_s"] == 100e9 / (2 * state)
    assert result["machine"]["cpu_count"] >= 1 and result["machine"]["bandwidth_gbs"] == 100
    assert (tmp_path / "benchmark.md").read_text().startswith("Machine: ")
    result["machine"]["bandwidth_gbs"] = None  # no bandwidth known: no bound, and it says so
    assert "No memory-bandwidth bound" in benchmark.to_markdown(result)
    # provenance: the command and the running code's commit, also on the Markdown's first line
    assert result["command"][:2] == ["stabl-jax", "bench"] and "--out" in result["command"]
    assert set(result["code"]) >= {"commit", "dirty"}
    if result["code"]["commit"]:
        first = (tmp_path / "benchmark.md").read_text().splitlines()[0]
        assert f"commit `{result['code']['commit'][:7]}`" in first


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--arms", "1", "--arms must be >= 2, got 1\n"),
        ("--arms", "30 1 0", "--arms must be >= 2, got 1 0\n"),
        ("--runs", "0", "--runs must be >= 1, got 0\n"),
        ("--repeats", "0", "--repeats must be >= 1, got 0\n"),
        ("--arms", "30 300 30", "--arms gives 30 twice: give each value once\n"),
        ("--runs", "8 8", "--runs gives 8 twice: give each value once\n"),
        ("--learners", "stabl exp3 stabl", "--learners gives stabl twice: give each value once\n"),
        ("--learners", "nope", "unknown"),
        *(("--bandwidth", v, BANDWIDTH.format(v)) for v in ("0", "-1", "nan", "inf", "fast")),
    ],
)  # fmt: skip
def test_bench_cli_rejects_bad_values(capsys, flag, value, message):
    """Only the values refused are named, as given; one argparse type checks the bandwidth
    (``inf`` too) with and without ``--gpu``."""
    assert cli.main(["bench", flag, *value.split()]) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err


def test_bench_bound_defaults_to_known_devices_only(monkeypatch):
    config = benchmark.BenchConfig()
    device = type("Device", (), {"device_kind": "cpu"})()
    monkeypatch.setattr(jax, "devices", lambda: [device])
    assert benchmark.device_bandwidth_gbs(config) is None  # a CPU: no bound by default
    device.device_kind = "NVIDIA H100 80GB HBM3"
    assert benchmark.device_bandwidth_gbs(config) == 3350.0
    assert benchmark.device_bandwidth_gbs(benchmark.BenchConfig(bandwidth_gbs=5.0)) == 5.0
    assert benchmark.PEAK_BANDWIDTH_GBS["NVIDIA H100 80GB HBM3"] == 3350.0


def test_auto_chunk_size_follows_available_memory(monkeypatch):
    monkeypatch.setattr(simulate, "available_memory_bytes", lambda: 8 * 2**30)
    # 1/8 of 8 GiB = 1 GiB for R x chunk x 32 bytes: 1024 runs -> 32768 rounds.
    assert simulate.auto_chunk_size(1024, 10**6) == 2**30 // (1024 * 32)
    monkeypatch.setattr(simulate, "available_memory_bytes", lambda: 2**20)
    assert simulate.auto_chunk_size(1024, 10**6) == 16 * 2**20 // (1024 * 32)  # floor 16 MiB
    assert simulate.auto_chunk_size(4, 100) == 100  # never more than the horizon


def test_bench_gpu_without_a_gpu_stops_before_any_work(tmp_path, monkeypatch, capsys):
    """``--gpu`` on a CPU stops at once (exit 2) saying what to do, writing nothing."""
    monkeypatch.setattr(benchmark, "has_accelerator", lambda: False)
    assert cli.main(["bench", "--gpu", "--out", str(tmp_path / "b")]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "error: no GPU: JAX sees only CPU devices" in err
    assert "use --quick (the same rows at tiny sizes) / drop --gpu" in err
    assert not (tmp_path / "b").exists()
    assert cli.main(["bench", "--gpu", "--runs", "3", "--no-numpy"]) == cli.EXIT_USAGE
    assert "--gpu times a fixed set of rows: drop --runs --no-numpy" in capsys.readouterr().err


def test_bench_gpu_quick_is_the_gpu_rows_at_tiny_sizes():
    full, quick = benchmark.gpu_rows(), benchmark.gpu_rows(quick=True)
    assert [(r[0], r[1], r[4]) for r in full] == [(r[0], r[1], r[4]) for r in quick]
    assert [(r[0], r[1], r[2], r[3]) for r in full] == [
        ("stabl", 30, 1024, 4096), ("stabl", 30, 16384, 4096), ("stabl", 30, 131072, 4096),
        ("exp3", 30, 131072, 4096), ("stabl", 30, 16384, 4096), ("stabl", 300, 32768, 2048),
    ]  # fmt: skip
    assert [r[4] for r in full].count(None) == 1  # one row keeps every trace
    assert max(r[2] for r in quick) <= 32 and {r[3] for r in quick} == {64}


def test_bench_gpu_quick_writes_its_json_and_records_a_failing_row(tmp_path, monkeypatch, capsys):
    """The ``--gpu`` path on a CPU (``--quick``; three rows, a failing one recorded while the
    others run), each row on both kernels."""
    rows = (("stabl", 4, 8192, 4096, None), ("no_such_learner", 4, 8192, 4096, ("played",)))
    rows += (("exp3", 4, 8192, 4096, ("played", "loss")),)
    monkeypatch.setattr(benchmark, "GPU_ROWS", rows)
    monkeypatch.setattr(benchmark, "GPU_DEVICE_ROWS", (("stabl", 4, 8192, 4096, ("loss",)),))
    out = tmp_path / "bench"
    argv = ["bench", "--gpu", "--quick", "--bandwidth", "100", "--out", str(out)]
    assert cli.main(argv) == 0
    result = json.loads((out / "benchmark.json").read_text())
    assert result["device"] == jax.devices()[0].device_kind and result["jax"] == jax.__version__
    assert datetime.date.fromisoformat(result["date"]) and result["quick"] and result["complete"]
    got = [(r["learner"], r["kernel"], r["runs"], r["rounds"]) for r in result["rows"]]
    assert got == [
        (name, kernel, 2, 64) for name, *_ in (*rows, ("stabl",)) for kernel in ("pallas", "xla")
    ]  # fmt: skip
    stabl, failed, exp3 = result["rows"][0:2], result["rows"][2:4], result["rows"][4:6]
    on_device = result["rows"][6:]  # traces kept on the device, SA(L) computed there
    assert [r["traces_on_device"] for r in result["rows"]] == [False] * 6 + [True] * 2
    for row in on_device:
        assert "error" not in row and row["same_bits_every_call"] and row["traces"] == ["loss"]
        assert len(row["summary_seconds"]) == 2 and min(row["summary_seconds"]) > 0
    np.testing.assert_allclose(on_device[0]["mean_loss"], on_device[1]["mean_loss"], rtol=1e-6)
    assert all("no_such_learner" in row["error"] for row in failed)
    for row in stabl + exp3:
        assert "error" not in row and row["same_bits_every_call"], row
        assert row["run_steps_per_s"] == pytest.approx(2 * 64 / min(row["run_seconds"]))
        assert row["us_per_round"] == pytest.approx(min(row["run_seconds"]) / 64 * 1e6)
        assert row["compile_seconds"] > 0 and len(row["run_seconds"]) == 2
        bound = 100e9 / (2 * benchmark.state_bytes(benchmark.make_learner(row["learner"], 4)))
        assert row["bound_run_steps_per_s"] == pytest.approx(bound, rel=1e-12)
        assert row["fraction_of_bound"] == pytest.approx(row["run_steps_per_s"] / bound)
    assert stabl[0]["traces"] == list(BANDIT_TRACES) and exp3[0]["traces"] == ["played", "loss"]
    for fused, scan in (stabl, exp3):  # the same runs on both paths (same seeds, same draws)
        np.testing.assert_allclose(fused["mean_loss"], scan["mean_loss"], rtol=1e-6)
    markdown = (out / "benchmark.md").read_text()
    assert markdown.startswith(f"Device: {result['device']}; JAX ") and "--quick sizes" in markdown
    assert markdown.count("| stabl | 4 | 2 | 64 | 5 |") == 2 and "failed: " in markdown
    assert "| exp3 | 4 | 2 | 64 | 2 | pallas |" in capsys.readouterr().out  # row by row
    monkeypatch.setattr(benchmark, "GPU_ROWS", rows[1:2])
    monkeypatch.setattr(benchmark, "GPU_DEVICE_ROWS", ())
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "benchmark.json").write_text('{"mine": 1}')  # a user's file is never replaced
    assert cli.main([*argv[:-1], str(theirs)]) == cli.EXIT_USAGE
    assert (theirs / "benchmark.json").read_text() == '{"mine": 1}'
    assert cli.main(argv) == cli.EXIT_FAILURE  # every row failed; the previous run replaced
    assert len(json.loads((out / "benchmark.json").read_text())["rows"]) == 2


ROOT = Path(__file__).resolve().parents[2]
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def _agrees(quoted: str, actual: float) -> bool:
    """``quoted`` ("1.19 M", "52", "2.1") is ``actual`` rounded to the digits it shows."""
    number, _, unit = quoted.partition(" ")
    decimals = len(number.partition(".")[2])
    scale = SCALE[unit]
    return abs(float(number) * scale - actual) <= 0.5 * 10.0**-decimals * scale * (1 + 1e-9)


def test_the_documents_quote_the_benchmark_they_ship():
    """Every rate and ratio README, docs/speed.md and EXPERIMENTS.md quote is
    ``docs/benchmark/benchmark.json``'s to the digits shown: no stale number."""
    rows = json.loads((ROOT / "docs" / "benchmark" / "benchmark.json").read_text())["rows"]

    def row(impl: str, learner: str, n: int, runs: int | None = 4096) -> dict:
        (match,) = [
            r for r in rows
            if (r["impl"], r["learner"], r["num_arms"]) == (impl, learner, n)
            and (runs is None or r["runs"] == runs)
        ]  # fmt: skip
        return match

    checked = 0
    readme = (ROOT / "README.md").read_text()
    sentence = r"StABL runs ([\d.]+ [kM]) run-steps/s at n = 30 arms \((\d+)× a NumPy loop,\s+"
    rate, loop, vect = re.search(sentence + r"([\d.]+)× vectorised NumPy", readme).groups()
    jax_row = row("jax", "stabl", 30)
    assert _agrees(rate, jax_row["run_steps_per_s"]), rate
    assert _agrees(loop, jax_row["x_numpy_loop"]) and _agrees(vect, jax_row["x_numpy_vectorised"])
    speed = (ROOT / "docs" / "speed.md").read_text()
    for n, loop, vect in re.findall(
        r"^\| StABL, n = (\d+) \| ([\d.]+)×[^|]*\| ([\d.]+)×", speed, re.M
    ):
        jax_row = row("jax", "stabl", int(n))
        assert _agrees(loop, jax_row["x_numpy_loop"]), (n, loop)
        assert _agrees(vect, jax_row["x_numpy_vectorised"]), (n, vect)
        checked += 1
    experiments = (ROOT / "EXPERIMENTS.md").read_text()
    pattern = r"^\| (StABL|EXP3), n = (\d+) \| ([\d.]+ [kM]) \| ([\d.]+ [kM]) \| ([\d.]+ [kM])"
    pattern += r"[^|]*\| ([\d.]+)× \| ([\d.]+)× \|"
    for name, n, rate, vect_rate, loop_rate, vect, loop in re.findall(pattern, experiments, re.M):
        learner, n = name.lower(), int(n)
        jax_row = row("jax", learner, n)
        assert _agrees(rate, jax_row["run_steps_per_s"]), (name, n, rate)
        assert _agrees(vect_rate, row("numpy_vectorised", learner, n)["run_steps_per_s"])
        assert _agrees(loop_rate, row("numpy_loop", learner, n, None)["run_steps_per_s"])
        assert _agrees(vect, jax_row["x_numpy_vectorised"]), (name, n, vect)
        assert _agrees(loop, jax_row["x_numpy_loop"]), (name, n, loop)
        checked += 1
    assert checked == 6  # two targets rows, four summary rows
