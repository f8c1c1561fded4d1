"""First throughput numbers: run-steps per second of ``simulate`` for every registry learner.

    python experiments/throughput.py [--runs 1000] [--horizon 4096] [--arms 30]

Compile time is reported separately (ahead-of-time compilation inside ``simulate``); the run
time excludes it. Timings are of one process on whatever device JAX picks; compare ratios
within one run, not absolute numbers across machines. (The full benchmark with NumPy
baselines is ``experiments/benchmark.py``.)
"""

from __future__ import annotations

import platform

import jax

from stabl_jax import LEARNERS, ExpertAdvice, SimOptions, make, simulate
from stabl_jax.experiment.results import Parser, count, json_output, write_json


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=count, default=1000)
    parser.add_argument("--horizon", type=count, default=4096)
    parser.add_argument("--arms", type=int, default=30)
    parser.add_argument(
        "--json",
        type=json_output(["device", "args", "rows"]),
        help="also write the rows to this JSON file",
    )
    args = parser.parse_args()
    try:  # every learner is built before the first is timed
        env = ExpertAdvice(num_arms=args.arms, horizon=args.horizon)
        learners = {n: make(n, num_arms=args.arms, horizon=args.horizon) for n in LEARNERS}
    except ValueError as error:  # a size the library refuses: name the option it concerns
        blamed = "horizon" if "horizon" in str(error) else "arms"
        parser.error(f"--{blamed} {getattr(args, blamed)}: {error}")
    device = jax.devices()[0]
    print(f"# {device.platform} {device.device_kind}, {platform.processor() or platform.machine()}")
    print(f"# R={args.runs} T={args.horizon} n={args.arms}")
    print("| learner | queries | compile s | run s | run-steps/s |")
    print("|---|---|---|---|---|")
    rows = []
    for name, learner in learners.items():
        options = SimOptions(chunk_size=args.horizon)
        res = simulate(learner, env, jax.random.key(0), args.runs, options=options)
        rate = args.runs * args.horizon / res.run_seconds
        rows.append(
            {
                "learner": name,
                "compile_s": res.compile_seconds,
                "run_s": res.run_seconds,
                "run_steps_per_s": rate,
            }
        )
        print(
            f"| {name} | {learner.num_queries} | {res.compile_seconds:.2f} | "
            f"{res.run_seconds:.2f} | {rate:,.0f} |"
        )
    if args.json:
        write_json(args.json, {"device": str(device), "args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
