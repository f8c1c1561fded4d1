"""Run a small experiment from the command line, then read its results folder back.

``stabl-jax run`` writes ``summary.json``, ``results.csv`` (one row per learner x metric x
window or segment), ``traces.npz`` and plots; ``stabl_jax.load_results`` reads them. Run it
with ``python examples/load_results.py [FOLDER]`` (default: a temporary folder).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from stabl_jax.experiment import load_results


def run_small_experiment(folder: Path) -> None:
    """Figure 1 (left)'s config, shortened: 8 runs of 512 rounds, two learners."""
    command = [sys.executable, "-m", "stabl_jax", "run", "expert_advice_equal"]
    command += ["--runs", "8", "--set", "horizon=512", "--set", "env.change_points=[256]"]
    command += ["--set", 'learners=["exp3", "stabl"]', "--set", "sa_windows=[16, 64, 256]"]
    command += ["--out", str(folder), "--no-progress"]
    done = subprocess.run(command, stdout=subprocess.DEVNULL)
    if done.returncode:  # the command line said why on stderr (e.g. a folder of the user's)
        raise SystemExit(done.returncode)


def main(folder: Path) -> dict[str, float]:
    if not (folder / "summary.json").exists():
        run_small_experiment(folder)
    results = load_results(folder)
    print(f"{folder}: learners {results.learners}, {results.config['runs']} runs")
    rows = [r for r in results.rows() if r["metric"] == "mean_reward"]
    for row in rows:  # ci95 is "" for a folder of one run (no interval)
        interval = f"± {row['ci95']:.4f}" if row["ci95"] != "" else "(one run: no interval)"
        print(f"  {row['learner']:>6} mean reward {row['mean']:.4f} {interval}")
    rewards = {row["learner"]: row["mean"] for row in rows}
    if "stabl/played" not in results.traces:  # another config, or save_traces left it out
        print(f"  no stabl/played trace in {folder}: it has {sorted(results.traces)}")
        return rewards
    played = results.traces["stabl/played"]  # (R, T), the smallest unsigned dtype
    print(f"  stabl/played: shape {played.shape}, dtype {played.dtype}")
    best = np.bincount(played[:, -64:].ravel()).argmax()
    print(f"  StABL's most played arm over the last 64 rounds: {best}")
    return rewards


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "results"
    main(target)
