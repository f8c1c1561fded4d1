"""Throughput of ``simulate`` on an accelerator: the rows of the GPU speed table.

    python experiments/gpu_bench.py --out gpu_bench.json [--quick] [--large]
        [--kernels xla,pallas] [--bandwidth GBS]

Each row is ``simulate(learner, ExpertAdvice, key, R, traces=...,
options=SimOptions(kernel=...))`` at the paper's step sizes on the default device, timed
twice after compilation (the faster call is
reported; ``same_bits_every_call`` records whether both gave the same arms and losses), once
per ``--kernels`` (``xla``: the scan; ``pallas``: the fused kernel; one that fails to compile
records its error). ``run-steps/s = R * T / run seconds``; the bound is
``--bandwidth / (2 * state bytes per run)`` (GB/s: 3350 for an H100 SXM, 4800 for an H200).
``--large`` adds R = 2^20 runs of StABL (n = 30, T = 4096, the loss trace only) with the
kernel of ``--large-kernel``.
"""

from __future__ import annotations

import datetime
import itertools
import platform
import time
from typing import Any

import jax
import numpy as np
from _cli import json_output

from stabl_jax import ExpertAdvice, SimOptions, make, simulate
from stabl_jax.experiment import bench as benchmark
from stabl_jax.experiment.results import Parser, distinct, write_json
from stabl_jax.kernels import KERNELS

#: (learner, n, R, T, traces): the rows of the speed table, in the order they are timed.
ROWS: list[tuple[str, int, int, int, tuple[str, ...]]] = [
    ("stabl", 30, 1_024, 2_048, ("played", "loss")),
    ("stabl", 30, 16_384, 4_096, ("played", "loss")),
    ("stabl", 30, 131_072, 4_096, ("played", "loss")),
    ("exp3", 30, 131_072, 4_096, ("played", "loss")),
    ("stabl", 30, 16_384, 4_096, ("played", "arms", "loss", "expected_loss", "prob_best")),
    ("stabl", 300, 32_768, 2_048, ("played", "loss")),  # last: the slowest to compile
]
QUICK_ROWS = [row for row in ROWS if row[2] <= 16_384]


def time_row(
    name: str,
    n: int,
    runs: int,
    horizon: int,
    traces: tuple[str, ...],
    bandwidth_gbs: float,
    kernel: str = "xla",
    repeats: int = 2,
) -> dict[str, Any]:
    learner = make(name, num_arms=n, horizon=horizon)
    env = ExpertAdvice(num_arms=n, horizon=horizon)
    seconds, compile_s, mean_loss, used, first, same = [], 0.0, [], kernel, None, True
    for _ in range(repeats):  # the same key each time: the calls must repeat bit for bit
        options = SimOptions(chunk_size=512, kernel=kernel)
        res = simulate(learner, env, jax.random.key(0), runs, traces=traces, options=options)
        compile_s = max(compile_s, res.compile_seconds)
        seconds.append(res.run_seconds)
        mean_loss.append(float(res.loss.mean(dtype=np.float64)))
        used = res.kernel
        if first is None:
            first = (res.played, res.loss)
        else:
            same &= bool(np.array_equal(first[0], res.played))
            same &= bool(np.array_equal(first[1], res.loss))
        del res
    best = min(seconds)
    rate = runs * horizon / best
    sbytes = benchmark.state_bytes(learner)
    bound = bandwidth_gbs * 1e9 / (2 * sbytes)
    return {
        "learner": name,
        "kernel": used,
        "num_arms": n,
        "runs": runs,
        "horizon": horizon,
        "traces": list(traces),
        "run_seconds": seconds,
        "compile_seconds": compile_s,
        "run_steps_per_s": rate,
        "us_per_round": best / horizon * 1e6,
        "state_bytes_per_run": sbytes,
        "bound_run_steps_per_s": bound,
        "fraction_of_bound": rate / bound,
        "mean_loss": mean_loss,
        "same_bits_every_call": same,
    }


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=json_output(["bandwidth_gbs", "rows"]), required=True)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--quick", action="store_true", help="only the rows with R <= 16384")
    which.add_argument("--no-rows", action="store_true", help="skip the table's rows")
    parser.add_argument("--large", action="store_true", help="add the R = 2^20 StABL run")
    parser.add_argument("--bandwidth", type=benchmark.bandwidth, default=3350.0, help="device GB/s")
    parser.add_argument("--kernels", default="xla,pallas", help="comma-separated kernels")
    parser.add_argument(
        "--large-kernel", default="auto", choices=KERNELS, help="simulate's kernel for --large"
    )
    args = parser.parse_args()
    kernels = args.kernels.split(",")
    unknown = [k for k in kernels if k not in KERNELS[1:]]  # "auto" is no row of its own
    if unknown:
        parser.error(f"--kernels: unknown {unknown}; choose from {list(KERNELS[1:])}")
    try:
        distinct("--kernels", kernels)
    except ValueError as exc:
        parser.error(str(exc))
    if args.no_rows and not args.large:
        parser.error("--no-rows without --large measures nothing: add --large")
    device = jax.devices()[0]
    report = {
        "device": f"{device.platform} {device.device_kind}",
        "jax": jax.__version__,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.machine(),
        "bandwidth_gbs": args.bandwidth,
        "rows": [],
    }
    print(f"# {report['device']}, JAX {jax.__version__}")
    print("| learner | kernel | n | R | T | traces | run-steps/s | µs/round | bound | fraction |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = [] if args.no_rows else QUICK_ROWS if args.quick else ROWS
    for (name, n, runs, horizon, traces), kernel in itertools.product(rows, kernels):
        head = f"| {name} | {kernel} | {n} | {runs:,} | {horizon} | {len(traces)} |"
        try:
            row = time_row(name, n, runs, horizon, traces, args.bandwidth, kernel)
        except Exception as err:  # a kernel not yet tried on this device must not end the bench
            failed = {"learner": name, "kernel": kernel, "num_arms": n, "runs": runs}
            report["rows"].append({**failed, "horizon": horizon, "error": repr(err)[:2000]})
            print(f"{head} failed: {repr(err)[:300]} |", flush=True)
        else:
            report["rows"].append(row)
            print(
                f"{head} {row['run_steps_per_s']:.3g} | {row['us_per_round']:.1f} | "
                f"{row['bound_run_steps_per_s']:.3g} | {row['fraction_of_bound']:.3f} |",
                flush=True,
            )
        write_json(args.out, report)
    if args.large:
        runs, horizon = 1 << 20, 4096
        learner = make("stabl", num_arms=30, horizon=horizon)
        env = ExpertAdvice(num_arms=30, horizon=horizon)
        start = time.perf_counter()
        res = simulate(
            learner,
            env,
            jax.random.key(0),
            runs,
            traces=("loss",),
            options=SimOptions(chunk_size=256, kernel=args.large_kernel),
        )
        wall = time.perf_counter() - start
        large = {
            "kernel": res.kernel,
            "runs": runs,
            "horizon": horizon,
            "wall_seconds": wall,
            "run_seconds": res.run_seconds,
            "compile_seconds": res.compile_seconds,
            "run_steps_per_s": runs * horizon / res.run_seconds,
            "mean_loss": float(res.loss.mean(dtype=np.float64)),
        }
        report["large"] = large
        print(f"# R = 2^20: {large}", flush=True)
        write_json(args.out, report)


if __name__ == "__main__":
    main()
