"""``stabl-jax bench`` at a tiny size: it runs, writes JSON and Markdown, reports ratios and
memory. No timing is asserted (the numbers depend on the machine and its load)."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import jax
import pytest

from stabl_jax.experiment import bench as benchmark
from stabl_jax.experiment import cli

simulate = importlib.import_module("stabl_jax.simulate")


def test_bench_cli_tiny(tmp_path, capsys):
    code = cli.main(
        [
            "bench", "--learners", "stabl", "--arms", "5", "--runs", "3",
            "--repeats", "1", "--out", str(tmp_path), "--bandwidth", "100",
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "| learner | n | R |" in printed and "NumPy one-run loop" in printed
    result = json.loads((tmp_path / "benchmark.json").read_text())
    impls = sorted({row["impl"] for row in result["rows"]})
    assert impls == ["jax", "jax_validated", "numpy_loop", "numpy_vectorised"]
    jax_rows = [row for row in result["rows"] if row["impl"] == "jax"]
    assert [row["runs"] for row in jax_rows] == [3]
    for row in jax_rows:
        assert row["run_steps_per_s"] > 0 and row["compile_s"] >= 0
        assert row["arm_updates_per_s"] == pytest.approx(5 * row["run_steps_per_s"])
        assert row["x_numpy_loop"] > 0 and row["x_numpy_vectorised"] > 0
        assert row["peak_rss_bytes"] > 0
        assert row["x_validated"] > 0  # the validated call's rate over the plain one
        # StABL's state per run, from its init: the bound is 100 GB/s over twice that.
        assert row["state_bytes_per_run"] == benchmark.state_bytes(
            benchmark.make_learner("stabl", 5)
        )
        assert row["bound_run_steps_per_s"] == 100e9 / (2 * row["state_bytes_per_run"])
    assert result["machine"]["cpu_count"] >= 1 and result["machine"]["bandwidth_gbs"] == 100
    assert (tmp_path / "benchmark.md").read_text().startswith("Machine: ")
    # provenance: the command and the running code's commit, also on the Markdown's first line
    assert result["command"][:2] == ["stabl-jax", "bench"] and "--out" in result["command"]
    assert set(result["code"]) >= {"commit", "dirty"}
    if result["code"]["commit"]:
        first = (tmp_path / "benchmark.md").read_text().splitlines()[0]
        assert f"commit `{result['code']['commit'][:7]}`" in first


def test_bench_cli_rejects_unknown_learner(capsys):
    assert cli.main(["bench", "--learners", "nope"]) == cli.EXIT_USAGE
    assert "unknown" in capsys.readouterr().err


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
    ],
)
def test_bench_cli_rejects_sizes_below_one_run(capsys, flag, value, message):
    """Only the values refused are named, as given (not the tuple they became); a value given
    twice would time the same row twice."""
    assert cli.main(["bench", flag, *value.split()]) == cli.EXIT_USAGE
    assert message in capsys.readouterr().err


def test_bench_without_numpy_for_other_learners():
    config = benchmark.BenchConfig(
        learners=("uniform",), arms=(4,), runs=(2,), repeats=1, work=256, numpy=True
    )
    result = benchmark.run_benchmark(config)
    # no NumPy version: JAX only, plain and validated
    assert [row["impl"] for row in result["rows"]] == ["jax", "jax_validated"]
    assert "—" in benchmark.to_markdown(result)


def test_bench_bound_defaults_to_known_devices_only(monkeypatch):
    config = benchmark.BenchConfig()
    device = type("Device", (), {"device_kind": "cpu"})()
    monkeypatch.setattr(jax, "devices", lambda: [device])
    assert benchmark.device_bandwidth_gbs(config) is None  # a CPU: no bound by default
    device.device_kind = "NVIDIA H100 80GB HBM3"
    assert benchmark.device_bandwidth_gbs(config) == 3350.0
    assert benchmark.device_bandwidth_gbs(benchmark.BenchConfig(bandwidth_gbs=5.0)) == 5.0
    assert benchmark.PEAK_BANDWIDTH_GBS["NVIDIA H100 80GB HBM3"] == 3350.0


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "fast"])
def test_bench_rejects_a_bad_bandwidth(capsys, value):
    """``inf`` passed the old ``> 0`` check (a bound column of zeros); one argparse type
    (``benchmark.bandwidth``) checks ``stabl-jax bench`` and ``experiments/gpu_bench.py``."""
    assert cli.main(["bench", "--bandwidth", value]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"argument --bandwidth: give a finite number of GB/s > 0, got '{value}'" in err


def test_auto_chunk_size_follows_available_memory(monkeypatch):
    monkeypatch.setattr(simulate, "available_memory_bytes", lambda: 8 * 2**30)
    # 1/8 of 8 GiB = 1 GiB for R x chunk x 32 bytes: 1024 runs -> 32768 rounds.
    assert simulate.auto_chunk_size(1024, 10**6) == 2**30 // (1024 * 32)
    monkeypatch.setattr(simulate, "available_memory_bytes", lambda: 2**20)
    assert simulate.auto_chunk_size(1024, 10**6) == 16 * 2**20 // (1024 * 32)  # floor 16 MiB
    assert simulate.auto_chunk_size(4, 100) == 100  # never more than the horizon


def test_available_memory_is_positive():
    from stabl_jax.simulate import available_memory_bytes

    assert available_memory_bytes() > 0


def test_bench_gpu_preset_times_the_accelerator_rows(monkeypatch):
    """``--gpu`` selects :data:`benchmark.GPU` (4,096 rounds at every R, no NumPy); the other
    flags still apply on top of it."""
    seen = {}

    def fake(config, log=None):
        seen["config"] = config
        return {"machine": benchmark.machine_info(), "config": {}, "rows": []}

    monkeypatch.setattr(benchmark, "run_benchmark", fake)
    assert cli.main(["bench", "--gpu", "--repeats", "1"]) == 0
    config = seen["config"]
    assert config.runs == (1024, 16384, 131072) and config.arms == (30, 300)
    assert config.jax_rounds(131072, 300) == config.jax_rounds(1024, 30) == 4096
    assert not config.numpy and config.repeats == 1


ROOT = Path(__file__).resolve().parents[1]
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}


def _agrees(quoted: str, actual: float) -> bool:
    """``quoted`` ("1.19 M", "52", "2.1") is ``actual`` rounded to the digits it shows."""
    number, _, unit = quoted.partition(" ")
    decimals = len(number.partition(".")[2])
    scale = SCALE[unit]
    return abs(float(number) * scale - actual) <= 0.5 * 10.0**-decimals * scale * (1 + 1e-9)


def test_the_documents_quote_the_benchmark_they_ship():
    """README's speed sentence, docs/speed.md's targets table and EXPERIMENTS.md's summary
    table quote ``docs/benchmark/benchmark.json`` (which ``docs_numbers.sh`` replaces): every
    quoted rate and ratio is the JSON's to the digits shown, so a rerun of the benchmark
    cannot leave a stale number behind."""
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
    rate, loop, vect = re.search(
        r"StABL runs ([\d.]+ [kM]) run-steps/s at n = 30 arms \((\d+)× a NumPy loop,\s+"
        r"([\d.]+)× vectorised NumPy",
        readme,
    ).groups()
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
    pattern = (
        r"^\| (StABL|EXP3), n = (\d+) \| ([\d.]+ [kM]) \| ([\d.]+ [kM]) \| ([\d.]+ [kM])"
        r"[^|]*\| ([\d.]+)× \| ([\d.]+)× \|"
    )
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
