"""``experiments/gpu_measure.sh``, the prepared GPU measurement, end to end on the CPU with
``SMALL=1`` (every size tiny): each part writes its JSON into the folder and the files parse,
so a run on a GPU does not fail on a script bug. (Its numbers only mean something there.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from stabl_jax.experiment import bench as benchmark
from tests.scripts.load import ROOT


def test_small_measurement_writes_every_json(tmp_path):
    out = tmp_path / "measure"
    env = {**os.environ, "SMALL": "1", "PYTHON": sys.executable, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        ["bash", str(ROOT / "experiments" / "gpu_measure.sh"), str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for part in ("split", "bench", "trace"):
        assert f"{part} exit code: 0" in done.stdout, done.stdout
    split = json.loads((out / "split.json").read_text())
    assert split["chunk"]["runs"] == 256 and split["chunk"]["rounds"] == 64
    assert set(split["chunk"]["median_seconds"]) == {"compute", "device_get", "scatter"}
    assert split["copy"]["bytes"] == 8 * 2**20 and split["copy"]["pageable"]["gb_per_s"] > 0
    assert "gb_per_s" in split["copy"]["pinned"] or "error" in split["copy"]["pinned"]
    bench = json.loads((out / "bench" / "benchmark.json").read_text())
    rows = 2 * (len(benchmark.GPU_ROWS) + len(benchmark.GPU_DEVICE_ROWS))  # both kernels
    assert bench["quick"] and bench["complete"] and len(bench["rows"]) == rows
    assert all("error" not in row for row in bench["rows"]), bench["rows"]
    trace = json.loads((out / "trace.json").read_text())
    assert trace["trace_files"] and all(str(out / "trace") in f for f in trace["trace_files"])
