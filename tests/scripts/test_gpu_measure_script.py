"""``experiments/gpu_measure.sh`` on the CPU with ``SMALL=1``: the script (Python stubbed) starts
each part with tiny sizes and reports its exit code; each part, run here with the script's
arguments, writes its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from stabl_jax import ExpertAdvice
from stabl_jax.experiment import bench as benchmark
from stabl_jax.experiment import cli
from tests.scripts.load import ROOT, load_script


def test_small_measurement_writes_every_json(tmp_path, monkeypatch):
    out, log = tmp_path / "measure", tmp_path / "calls.txt"
    stub = tmp_path / "python"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    stub.chmod(0o755)
    env = {**os.environ, "SMALL": "1", "PYTHON": str(stub)}
    done = subprocess.run(
        ["bash", str(ROOT / "experiments" / "gpu_measure.sh"), str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for part in ("split", "bench", "trace"):
        assert f"{part} exit code: 0" in done.stdout, done.stdout
    sizes = "--runs 256 --rounds 64 --copy-mib 8"
    split, bench, trace = log.read_text().splitlines()
    assert split == f"experiments/gpu_split.py --out {out}/split.json {sizes}"
    assert bench == f"-m stabl_jax bench --gpu --quick --out {out}/bench"
    assert trace == f"experiments/gpu_split.py --out {out}/trace.json --trace {out}/trace {sizes}"
    script = load_script(ROOT / "experiments" / "gpu_split.py", "_measure_gpu_split")
    for call in (split, trace):
        monkeypatch.setattr(sys, "argv", call.split())
        script.main()
    lists = {"GPU_ROWS": False, "GPU_DEVICE_ROWS": True}  # on_device
    shipped = {
        (name, n, traces or ExpertAdvice.trace_names, on_device)
        for key, on_device in lists.items()
        for name, n, _, _, traces in getattr(benchmark, key)
    }
    for key in lists:  # the first row of each (learner, n, traces): the others differ in runs
        first: dict = {}
        for row in getattr(benchmark, key):
            first.setdefault((row[0], row[1], row[4]), row)
        monkeypatch.setattr(benchmark, key, tuple(first.values()))
    assert cli.main(bench.split()[2:]) == 0
    split = json.loads((out / "split.json").read_text())
    assert split["chunk"]["runs"] == 256 and split["chunk"]["rounds"] == 64
    assert set(split["chunk"]["median_seconds"]) == {"compute", "device_get", "scatter"}
    assert split["copy"]["bytes"] == 8 * 2**20 and split["copy"]["pageable"]["gb_per_s"] > 0
    assert "gb_per_s" in split["copy"]["pinned"] or "error" in split["copy"]["pinned"]
    bench = json.loads((out / "bench" / "benchmark.json").read_text())
    rows = bench["rows"]
    got = [(r["learner"], r["num_arms"], tuple(r["traces"]), r["traces_on_device"]) for r in rows]
    assert set(got) == shipped and len(got) == 2 * len(shipped)  # every program, both kernels
    assert bench["quick"] and bench["complete"]
    assert all("error" not in row for row in bench["rows"]), bench["rows"]
    trace = json.loads((out / "trace.json").read_text())
    assert trace["trace_files"] and all(str(out / "trace") in f for f in trace["trace_files"])
