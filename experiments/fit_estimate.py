"""Fit the simulation time ``stabl-jax run`` announces (``kinds.paired.simulation_seconds``).

    python experiments/fit_estimate.py [--json FILE]
    python experiments/fit_estimate.py --from FILE     # refit saved measurements

Runs ``stabl-jax run expert_advice_equal`` with 8 bandit learners at n = 10, 30, 300 arms and
R = 64, 1024 runs (T = 2048), and ``bco_d2``, ``bco_d10``, ``bco_d50`` as shipped, into a
temporary folder (about 12 minutes on 2 CPU cores), and reads every learner's ``run_seconds``
and ``compile_seconds`` from ``summary.json``. The model ``T (a + R (b + c n + e S))`` (n arms or
coordinates, S the learner's loop-state bytes per run) is fitted by least squares on the
logarithm of the times (so each run weighs by its ratio, not by its seconds). Printed: the
fitted constants beside the shipped ones, and per run the measured seconds over the
announced ones, learner by learner and summed (what the header announces); the compile time
announced per program (``ESTIMATE_COMPILE_SECONDS``) is the measured mean.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np

from stabl_jax.experiment import cli, provenance
from stabl_jax.experiment.kinds import base, load_config, paired
from stabl_jax.experiment.results import Parser, json_output, write_json

BANDIT_LEARNERS = [
    "uniform",
    "exp3",
    "stabl",
    "saol_hedge",
    "stabl_rate_grid",
    "sw_ucb",
    "stabl_vizier",
    "exp3s",
]
#: ``(config, overrides)`` of every measured run.
RUNS: list[tuple[str, list[str]]] = [
    (
        "expert_advice_equal",
        [f"env.num_arms={n}", f"runs={r}", "horizon=2048", f"learners={BANDIT_LEARNERS}"],
    )
    for n in (10, 30, 300)
    for r in (64, 1024)
] + [(f"bco_d{d}", []) for d in (2, 10, 50)]
CONSTANTS = ("PER_ROUND", "PER_RUN_ROUND", "PER_ARM", "PER_STATE_BYTE")


def measure(name: str, overrides: list[str], folder: Path) -> list[dict[str, Any]]:
    """One ``stabl-jax run``: a row per learner (its width, runs, rounds, state bytes, run
    seconds)."""
    out = folder / name
    sets = [arg for o in overrides for arg in ("--set", o)]
    argv = ["--compile-cache", "off", "run", name, *sets, "--out", str(out), "--force"]
    if cli.main([*argv, "--no-progress"]) != 0:
        raise SystemExit(f"stabl-jax {' '.join(argv)} failed")
    timings = json.loads((out / "summary.json").read_text())["timings"]["learners"]
    config = load_config(name, overrides)
    width = paired.env_width(config.make_env())
    rows = []
    for learner, seconds in timings.items():
        init = config.make_learner(learner).init
        rows.append(
            {
                "config": name,
                "overrides": overrides,
                "learner": learner,
                "width": width,
                "runs": int(config.runs),
                "horizon": int(config.horizon),
                "state_bytes": base.tree_bytes(jax.eval_shape(init, jax.random.key(0))),
                "run_seconds": seconds["run_seconds"],
                "compile_seconds": seconds["compile_seconds"],
            }
        )
    return rows


def features(rows: list[dict[str, Any]]) -> np.ndarray:
    """The model's terms per row: ``T``, ``T R``, ``T R n``, ``T R S``."""
    return np.array(
        [
            [t, t * r, t * r * n, t * r * s]
            for t, r, n, s in (
                (row["horizon"], row["runs"], row["width"], row["state_bytes"]) for row in rows
            )
        ],
        dtype=np.float64,
    )


def fit(rows: list[dict[str, Any]], steps: int = 200) -> np.ndarray:
    """Non-negative constants minimising the squared log ratio of measured to modelled
    seconds (Gauss-Newton from the relative least-squares solution)."""
    x, y = features(rows), np.array([row["run_seconds"] for row in rows])
    coef = np.maximum(np.linalg.lstsq(x / y[:, None], np.ones(len(y)), rcond=None)[0], 1e-15)
    for _ in range(steps):
        model = x @ coef
        step = np.linalg.lstsq(x / model[:, None], np.log(y / model), rcond=None)[0]
        coef = np.maximum(coef + 0.5 * step, 1e-15)
    return coef


def report(rows: list[dict[str, Any]], coef: np.ndarray) -> list[dict[str, Any]]:
    """Measured over announced seconds, per run (summed over its learners, as the header
    announces them) with the shipped and the fitted constants; printed as a table."""
    shipped = np.array([getattr(paired, f"ESTIMATE_SECONDS_{c}") for c in CONSTANTS])
    x = features(rows)
    print("| constant | shipped | fitted |\n|---|---|---|")
    for name, a, b in zip(CONSTANTS, shipped, coef, strict=True):
        print(f"| ESTIMATE_SECONDS_{name} | {a:.2e} | {b:.2e} |")
    compiles = np.array([r["compile_seconds"] for r in rows])
    print(
        f"| ESTIMATE_COMPILE_SECONDS | {paired.ESTIMATE_COMPILE_SECONDS:.2g} | "
        f"{compiles.mean():.2g} (measured {compiles.min():.2g} to {compiles.max():.2g}) |"
    )
    ratios = {
        label: np.array([r["run_seconds"] for r in rows]) / (x @ c)
        for label, c in (("shipped", shipped), ("fitted", coef))
    }
    for label, r in ratios.items():
        print(f"per learner, measured / announced ({label}): {r.min():.2f} to {r.max():.2f}")
    print("\n| config | overrides | measured s | shipped: announced s (ratio) |\n|---|---|---|---|")
    totals = []
    for key in dict.fromkeys((r["config"], tuple(r["overrides"])) for r in rows):
        picked = [i for i, r in enumerate(rows) if (r["config"], tuple(r["overrides"])) == key]
        measured = sum(rows[i]["run_seconds"] for i in picked)
        announced = float((x[picked] @ shipped).sum())
        totals.append(
            {
                "config": key[0],
                "overrides": list(key[1]),
                "measured": measured,
                "announced": announced,
            }
        )
        sets = " ".join(o for o in key[1] if not o.startswith("learners=")) or "as shipped"
        print(
            f"| {key[0]} | {sets} | {measured:.2f} | {announced:.2f} ({measured / announced:.2f}) |"
        )
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--json",
        type=json_output(["rows", "fitted", "totals"]),
        help="also write the measurements and the fit to this JSON file",
    )
    parser.add_argument("--from", dest="source", type=Path, help="refit this --json output")
    args = parser.parse_args(argv)
    if args.source is not None:
        try:
            document = json.loads(args.source.read_text())
            rows, measured = document["rows"], document.get("measured")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            parser.error(f"--from {args.source}: not an output of this script ({exc})")
    else:
        measured = {
            "date": datetime.date.today().isoformat(),
            "code": provenance.code_version(),
            "cpu": provenance.cpu(),
            "cores": os.cpu_count(),
        }
        rows = []
        with tempfile.TemporaryDirectory(prefix="fit_estimate-") as folder:
            for name, overrides in RUNS:
                rows += measure(name, overrides, Path(folder))
    coef = fit(rows)
    totals = report(rows, coef)
    if args.json:
        fitted = dict(zip(CONSTANTS, map(float, coef), strict=True))
        fitted["COMPILE"] = float(np.mean([r["compile_seconds"] for r in rows]))
        document = {"measured": measured, "rows": rows, "fitted": fitted, "totals": totals}
        write_json(args.json, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
