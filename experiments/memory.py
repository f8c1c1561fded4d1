"""Peak host memory of a large study: simulate and score SA(L) without (R, T) traces.

    python experiments/memory.py [--runs 4096] [--arms 300] [--horizon 65536]
                                 [--windows 64 1024 16384 65536] [--batch 64] [--block B]
                                 [--json PATH]

Runs :func:`stabl_jax.streaming.simulate_summaries` (StABL on the expert-advice environment)
and prints the peak resident memory of the process (``VmHWM``), the resident memory after
JAX started, and the time spent simulating and scoring. The design target: ``R = 4096``,
``n = 300``, ``T = 65536`` under 2 GiB.
"""

from __future__ import annotations

import json
import sys
import time

import jax

from stabl_jax import ExpertAdvice, SimOptions, StABL
from stabl_jax.experiment.bench import machine_info, rss_bytes
from stabl_jax.experiment.provenance import code_version
from stabl_jax.experiment.results import Distinct, Parser, count, json_output, write_json
from stabl_jax.streaming import simulate_summaries


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=count, default=4096)
    parser.add_argument("--arms", type=int, default=300)
    parser.add_argument("--horizon", type=count, default=65536)
    parser.add_argument(
        "--windows", type=count, nargs="+", action=Distinct, default=[64, 1024, 16384, 65536]
    )
    parser.add_argument(
        "--batch", type=count, default=64, help="runs simulated and scored together"
    )
    parser.add_argument(
        "--block",
        type=count,
        default=None,
        help="runs_per_block (default: chosen by simulate); a batch of two or more blocks "
        "is stepped from one host thread per core",
    )
    parser.add_argument(
        "--json",
        type=json_output(["peak_rss_bytes", "machine"]),
        help="also write the numbers to this JSON file",
    )
    args = parser.parse_args()
    windows = args.windows
    if max(windows) > args.horizon:
        parser.error(f"--windows {max(windows)} is longer than --horizon {args.horizon}")
    try:
        env = ExpertAdvice(num_arms=args.arms, horizon=args.horizon)
        learner = StABL(num_arms=args.arms, horizon=args.horizon)
    except ValueError as error:  # a size the library refuses: name the option it concerns
        blamed = "horizon" if "horizon" in str(error) else "arms"
        parser.error(f"--{blamed} {getattr(args, blamed)}: {error}")
    jax.block_until_ready(jax.numpy.zeros(1))
    baseline = rss_bytes("VmRSS")
    start = time.perf_counter()

    def progress(done: int, total: int) -> None:
        elapsed = time.perf_counter() - start
        peak = rss_bytes("VmHWM")
        shown = "unknown" if peak is None else f"{peak / 2**20:.0f} MiB"
        print(f"  {done}/{total} runs, {elapsed:.0f} s, peak RSS {shown}", flush=True)

    summaries = simulate_summaries(
        learner,
        env,
        jax.random.key(0),
        args.runs,
        windows,
        runs_per_batch=args.batch,
        progress=progress,
        options=SimOptions(runs_per_block=args.block),
    )
    out = {
        "machine": machine_info(),
        "command": ["python", *sys.argv],
        "code": code_version(),
        "args": vars(args),
        "windows": windows,
        "rss_after_jax_start_bytes": baseline,
        "peak_rss_bytes": rss_bytes("VmHWM"),
        "simulate_seconds": summaries.simulate_seconds,
        "metrics_seconds": summaries.metrics_seconds,
        "total_seconds": time.perf_counter() - start,
        "mean_sa_sampled": summaries.sa_sampled.mean(axis=0).tolist(),
        "mean_loss": float(summaries.mean_loss.mean()),
    }
    print(json.dumps({k: v for k, v in out.items() if k not in ("machine", "code")}, indent=2))
    if args.json:
        write_json(args.json, out)


if __name__ == "__main__":
    main()
