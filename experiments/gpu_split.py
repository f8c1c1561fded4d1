"""Where one chunk of ``simulate`` spends its time on the default device, and how fast the
device copies to the host.

    python experiments/gpu_split.py --out split.json [--runs R] [--rounds T] [--copy-mib M]
    python experiments/gpu_split.py --out trace.json --trace DIR   # a profile of one chunk

StABL (n = 30, the paper's horizon), ``traces=("played", "loss")``, one chunk of ``T`` rounds
for ``R`` runs on ``kernel="auto"``'s path, compiled once, then ``--repeats`` times: ``compute``
(until its outputs are ready), ``device_get`` (them to the host) and ``scatter`` (into the
``(R, T)`` result arrays, as ``simulate`` does). ``copy``: a ``--copy-mib`` MiB float32 array to
pageable (``jax.device_get``) and to pinned host memory (``device_put`` to memory kind
``pinned_host``, then read). ``--trace DIR``: a ``jax.profiler`` trace of one chunk instead.
A part that fails writes its error into the JSON.
"""

from __future__ import annotations

import importlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from _cli import json_output

from stabl_jax import ExpertAdvice, SimOptions, make, sharding
from stabl_jax.experiment.arguments import Parser, count
from stabl_jax.experiment.bench import default_horizon
from stabl_jax.experiment.files import write_json

sim = importlib.import_module("stabl_jax.simulate")


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """``(seconds, fn(*args))``."""
    start = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - start, value


def chunk_program(runs: int, rounds: int) -> tuple[Any, Any, str, float]:
    """``(program, first carry, kernel, compile seconds)`` of StABL's chunk, as ``simulate``'s."""
    learner = make("stabl", num_arms=30, horizon=default_horizon(30))
    env = ExpertAdvice(num_arms=30, horizon=learner.horizon)
    fields, _, rollout_env, kernel = sim._rollout(learner, env, ("played", "loss"), False, "auto")
    options = SimOptions(host_threads=1)
    plan = sharding.plan_runs(runs, host_threads=1)
    params = sim._learner_params(learner, None, runs)
    key = jax.random.key(0)
    carry = sim._first_carry(learner, env, rollout_env, key, plan, params, None, options)
    lower = sim._lowering(learner, rollout_env, plan, fields, False, kernel)
    seconds, program = _timed(lambda: lower(carry, jnp.asarray(0, jnp.int32), rounds).compile())
    return program, carry, kernel, seconds


def chunk_split(runs: int, rounds: int, repeats: int) -> dict[str, Any]:
    """The median seconds of each part of a chunk (module docstring), each call's too."""
    program, carry, kernel, compile_s = chunk_program(runs, rounds)
    t0 = jnp.asarray(0, jnp.int32)
    parts: dict[str, list[float]] = {"compute": [], "device_get": [], "scatter": []}
    for _ in range(repeats):
        seconds, (carry, out) = _timed(lambda c: jax.block_until_ready(program(c, t0)), carry)
        parts["compute"].append(seconds)
        seconds, host = _timed(jax.device_get, out)
        parts["device_get"].append(seconds)
        parts["scatter"].append(_timed(sim._record, {}, host, 0, rounds, rounds)[0])
    nbytes = sum(x.nbytes for x in jax.tree.leaves(host))
    median = {k: statistics.median(v) for k, v in parts.items()}
    out = dict(
        kernel=kernel, runs=runs, rounds=rounds, output_bytes=nbytes, compile_seconds=compile_s
    )
    gb_per_s = nbytes / median["device_get"] / 1e9
    return out | {"seconds": parts, "median_seconds": median, "device_get_gb_per_s": gb_per_s}


def raw_copy(mib: int, repeats: int) -> dict[str, Any]:
    """Seconds and GB/s of a ``mib`` MiB device array to pageable and to pinned host memory."""
    x = jnp.zeros(mib * 2**18, jnp.float32)
    report: dict[str, Any] = {"bytes": x.nbytes}
    pageable = []
    for i in range(repeats):  # a fresh array each time: JAX keeps an array's host copy
        y = jax.block_until_ready(x + i)
        pageable.append(_timed(jax.device_get, y)[0])
    report["pageable"] = {"seconds": pageable, "gb_per_s": x.nbytes / min(pageable) / 1e9}
    try:
        pinned = x.sharding.with_memory_kind("pinned_host")
        put, read = [], []
        for i in range(repeats):
            y = jax.block_until_ready(x + i)
            seconds, z = _timed(lambda a: jax.block_until_ready(jax.device_put(a, pinned)), y)
            put.append(seconds)
            read.append(_timed(jax.device_get, z)[0])
        report["pinned"] = {"put_seconds": put, "read_seconds": read}
        fastest = min(p + r for p, r in zip(put, read, strict=True))
        report["pinned"]["gb_per_s"] = x.nbytes / fastest / 1e9
    except Exception as err:  # no pinned host memory on this device or JAX
        report["pinned"] = {"error": repr(err)[:2000]}
    return report


def trace_chunk(runs: int, rounds: int, folder: str) -> list[str]:
    """A ``jax.profiler`` trace of one chunk (after an untraced one) into ``folder``; its files."""
    program, carry, _, _ = chunk_program(runs, rounds)
    t0 = jnp.asarray(0, jnp.int32)
    carry, _ = jax.block_until_ready(program(carry, t0))  # it donates its carry
    with jax.profiler.trace(folder):
        jax.block_until_ready(program(carry, t0))
    return sorted(str(p) for p in Path(folder).rglob("*") if p.is_file())


def main() -> None:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=json_output(["device", "jax"]), required=True)
    parser.add_argument("--runs", type=count, default=131_072)
    parser.add_argument("--rounds", type=count, default=512)
    parser.add_argument("--repeats", type=count, default=3)
    parser.add_argument("--copy-mib", type=count, default=512)
    parser.add_argument("--trace", default=None, metavar="DIR", help="profile one chunk instead")
    args = parser.parse_args()
    report: dict[str, Any] = {"device": jax.devices()[0].device_kind, "jax": jax.__version__}
    report["args"] = vars(args)
    if args.trace:
        try:
            report["trace_files"] = trace_chunk(args.runs, args.rounds, args.trace)
        except Exception as err:  # no profiler on this device: say so in the JSON
            report["trace_error"] = repr(err)[:2000]
    else:
        for name, part in (
            ("chunk", lambda: chunk_split(args.runs, args.rounds, args.repeats)),
            ("copy", lambda: raw_copy(args.copy_mib, args.repeats)),
        ):
            try:
                report[name] = part()
            except Exception as err:  # the other part still runs and is written
                report[name] = {"error": repr(err)[:2000]}
            print(name, report[name], flush=True)
            write_json(args.out, report)
    write_json(args.out, report)


if __name__ == "__main__":
    main()
