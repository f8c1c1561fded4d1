"""The multi-host recipe of docs/gpu.md on JAX's distributed runtime, on one machine: two
processes (two CPU devices each) run a study exactly as one process would, and every array and
metric equals this process's (one device) bit for bit (one against four: test_sharding.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pytest

from stabl_jax.experiment import tables

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120  # seconds for each process (a JAX start-up, a few compilations, gloo set-up)

# argv: process id, process count, coordinator port, output folder. Process 0 writes the
# gathered traces and final state, and the results folder of a two-learner experiment.
SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import jax

    def main(pid, nproc, port, out):
        if nproc > 1:
            jax.distributed.initialize(
                coordinator_address=f"127.0.0.1:{port}", num_processes=nproc, process_id=pid
            )
        import numpy as np
        from stabl_jax import ExpertAdvice, SimOptions, make, simulate
        from stabl_jax.experiment import results
        from stabl_jax.experiment.kinds import load_config, write_results
        from stabl_jax.experiment.kinds.bandit import run_experiment

        env = ExpertAdvice(num_arms=5, horizon=64, change_points=(20, 41))
        res = simulate(make("stabl", num_arms=5, horizon=64), env, jax.random.key(3), 8,
                       options=SimOptions(chunk_size=40, runs_per_block=2))
        arrays = {f"trace/{k}": v for k, v in res.traces().items()}
        for i, leaf in enumerate(jax.tree.leaves(res.carry.state)):
            arrays[f"state/{i}"] = np.asarray(leaf)
        arrays["layout"] = np.asarray([jax.process_count(), len(jax.devices())])
        config = load_config("expert_advice_equal", ["env.num_arms=5"], runs=8, horizon=64,
                             learners=["stabl", "exp3_uniform"], seed=1)
        experiment = run_experiment(config)  # validates every round, as the command line does
        if jax.process_index() == 0:
            np.savez(out / "arrays.npz", **arrays)
            write_results(experiment, results.ResultsFolder.prepare(out / "results"))

    if __name__ == "__main__":
        main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_both(script: str, folder: Path, processes: int, devices: int, timeout=TIMEOUT) -> tuple:
    """``script``'s ``main(pid, nproc, port, out)`` run as ``processes`` processes of ``devices``
    CPU devices each (``out = folder / "multi"``), then here on the CPU device (``folder /
    "single"``: the processes' bits, also beside a GPU); returns the ``arrays.npz`` of each. A
    process that fails or runs past ``timeout`` seconds is named with its output (all then get
    SIGKILL: JAX's distributed runtime catches SIGTERM)."""
    (folder / "multi").mkdir()
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    args = [str(processes), str(_free_port()), str(folder / "multi")]
    out: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
    command = [[sys.executable, "-c", script, str(i), *args] for i in range(processes)]
    procs = [subprocess.Popen(c, env=env, cwd=ROOT, text=True, **out) for c in command]
    logs = []
    try:
        for proc in procs:
            logs.append(proc.communicate(timeout=timeout)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    failed = [i for i, proc in enumerate(procs) if proc.returncode != 0]
    assert not failed, "\n".join(f"process {i}:\n{logs[i][-3000:]}" for i in failed)
    namespace: dict = {}
    exec(compile(script, "script", "exec"), namespace)
    (folder / "single").mkdir()
    with jax.default_device(jax.devices("cpu")[0]):
        namespace["main"](0, 1, "", folder / "single")
    return tuple(dict(np.load(folder / run / "arrays.npz")) for run in ("multi", "single"))


@pytest.mark.slow  # two JAX start-ups and their compilations in subprocesses
def test_two_processes_equal_one(tmp_path):
    multi, single = run_both(SCRIPT, tmp_path, 2, 2)
    np.testing.assert_array_equal(multi.pop("layout"), [2, 4])  # 2 processes, 4 devices
    np.testing.assert_array_equal(single.pop("layout"), [1, 1])
    assert sorted(multi) == sorted(single) and any(k.startswith("state/") for k in multi)
    for name in single:
        np.testing.assert_array_equal(multi[name], single[name], err_msg=name, strict=True)
    written = [tables.read_traces(tmp_path / run / "results") for run in ("multi", "single")]
    assert sorted(written[0]) == sorted(written[1]) and written[0]
    for name, value in written[1].items():
        np.testing.assert_array_equal(written[0][name], value, err_msg=name, strict=True)
    summaries = [tables.read_summary(tmp_path / run / "results") for run in ("multi", "single")]
    for summary in summaries:  # timings differ; every metric must not
        for entry in summary["learners"].values():
            for key in ("compile_seconds", "run_seconds", "simulate_seconds"):
                entry.pop(key)
    assert summaries[0]["learners"] == summaries[1]["learners"]
