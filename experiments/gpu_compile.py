"""What one simulated round compiles to on a GPU: kernels per round, counted from XLA's
optimised chunk program (``stabl_jax.simulate.run_chunk``), with or without a GPU.

Per row: ``round_kernels`` (the loop over rounds' body, each launched once a round), the loops
nested in it and their kernels a round, ``chunk_kernels`` (once a chunk: all, on the fused
kernel), ``temp_mib`` (XLA's scratch memory) and, where ``ptxas`` is found, the fused kernel's
``ptxas -v`` counts a thread (stack, spill bytes, registers). ``--large``: the GPU speed
table's largest rows; ``--scaling``: R = 1,024 to 2^20 (docs/gpu.md). Without a GPU it compiles
for an H100 SXM (``h100_sxm.txtpb`` or ``--target-config``; JAX's CUDA plugin, no driver);
``--local`` for this machine's first device. Nothing is run::

    JAX_PLATFORMS=cpu JAX_SKIP_CUDA_CONSTRAINTS_CHECK=1 python experiments/gpu_compile.py \\
        --out gpu_compile.json
    python experiments/gpu_compile.py --local --out gpu_compile.json   # on a GPU machine
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from _cli import json_output, md_table
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from stabl_jax import registry, sharding
from stabl_jax.envs import ExpertAdvice
from stabl_jax.envs.base import as_environment
from stabl_jax.experiment import provenance
from stabl_jax.experiment.arguments import Parser, count
from stabl_jax.experiment.bench import default_horizon
from stabl_jax.experiment.files import write_json

sim = importlib.import_module("stabl_jax.simulate")

#: The default ``--target-config``: an H100 80GB HBM3 (SXM) from NVIDIA's published limits
#: (compute capability 9.0, 132 SMs, 228 KiB shared memory/SM, 3.35 TB/s), CUDA 12.8, cuDNN 9.7.
H100_TARGET = Path(__file__).with_name("h100_sxm.txtpb")

#: Operations that launch nothing.
FREE = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast", "after-all"}
_COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) ")
_INSTRUCTION = re.compile(r"^\s+(?:ROOT )?%\S+ = (.*)$")
_BODY = re.compile(r"body=%([\w.\-]+)")
_CONDITION = re.compile(r"condition=%([\w.\-]+)")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_PTXAS = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads.*?"
    r"Used (\d+) registers",
    re.S,
)


def _opcode(rest: str) -> str:
    """The opcode of an instruction's text after ``=``: what follows its (tuple) shape."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0:
                rest = rest[i + 1 :]
                break
    else:
        rest = rest.split(" ", 1)[1]
    return rest.strip().split("(", 1)[0]


def computations(hlo: str) -> tuple[dict[str, list[str]], str | None]:
    """``({computation: [its instructions' text after '=']}, entry name)`` of an HLO text."""
    out: dict[str, list[str]] = {}
    name = entry = None
    for line in hlo.splitlines():
        head = _COMPUTATION.match(line)
        if head and line.rstrip().endswith("{"):
            name = head.group(1)
            out[name] = []
            entry = name if line.startswith("ENTRY") else entry
        elif name is not None and (m := _INSTRUCTION.match(line)):
            out[name].append(m.group(1))
    return out, entry


def count_kernels(hlo: str, rounds: int) -> dict[str, Any]:
    """Kernels per round and per chunk: the loop over rounds is the ``while`` of known trip
    count ``rounds`` (the fused kernel has none: everything per chunk)."""
    comps, entry = computations(hlo)

    def launched(name: str | None) -> list[str]:
        return [op for op in map(_opcode, comps.get(name or "", [])) if op not in FREE]

    def loop(text: str) -> tuple[str, str, int | None]:
        trip = _TRIP.search(text)
        body, condition = _BODY.search(text), _CONDITION.search(text)
        assert body and condition, text
        return body.group(1), condition.group(1), int(trip.group(1)) if trip else None

    whiles = [loop(t) for insts in comps.values() for t in insts if _opcode(t) == "while"]
    round_body = next((body for body, _, trip in whiles if trip == rounds), None)
    inner = [loop(t) for t in comps.get(round_body or "", []) if _opcode(t) == "while"]
    # Each iteration of a nested loop launches its body's and its condition's kernels.
    in_loops = [
        None if trip is None else trip * (len(launched(body)) + len(launched(cond)))
        for body, cond, trip in inner
    ]
    ops_round = [op for op in launched(round_body) if op != "while"]
    return {
        "round_kernels": len(ops_round),
        "loops_in_round": len(inner),
        "loop_kernels_per_round": None if None in in_loops else sum(in_loops),
        "chunk_kernels": sum(op != "while" for op in launched(entry)),
        "triton_calls": hlo.count("__gpu$xla.gpu.triton"),
        "round_ops": sorted(set(ops_round)),
    }


def target_device(local: bool, target_config: str) -> Any:
    """The device to compile for: this machine's first, or a described GPU (deviceless)."""
    if local:
        return jax.devices()[0]
    from jax.experimental import topologies

    topology = topologies.get_topology_desc(
        platform="cuda", target_config=target_config, topology="1x1x1"
    )
    return topology.devices[0]


def compile_row(device: Any, row: dict[str, Any], ptxas: str | None = None) -> dict[str, Any]:
    """Compile one chunk program on ``device`` for ``row`` and count its kernels; with the
    ``ptxas`` binary, also its Pallas kernel's registers and spills (:func:`ptxas_report`)."""
    kind, name, size, runs, rounds = row["kind"], row["learner"], row["n"], row["R"], row["L"]
    if kind == "bandit":
        horizon = default_horizon(size)
        learner = registry.make(name, num_arms=size, horizon=horizon)
        env = ExpertAdvice(num_arms=size, horizon=horizon)
    else:
        env = registry.CONVEX_ENVS[row["env"]](dim=size, horizon=4096)
        learner = registry.BCO_LEARNERS[name](
            dim=size, horizon=4096, domain=env.domain, lipschitz=env.lipschitz
        )
    fields = tuple(row["traces"]) if row["traces"] else tuple(env.trace_names)
    rollout = as_environment(env, reveal_all="expected_loss" in fields)
    small = sim.init_runs(
        learner, rollout, sim.run_keys(jax.random.key(0), 2), learner.default_params
    )
    mesh = Mesh(np.asarray([device]), (sharding.RUNS_AXIS,))
    runs_spec = NamedSharding(mesh, PartitionSpec(sharding.RUNS_AXIS))
    carry = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct((runs, *x.shape[1:]), x.dtype, sharding=runs_spec), small
    )
    t0 = jax.ShapeDtypeStruct((), jnp.int32, sharding=NamedSharding(mesh, PartitionSpec()))
    plan = sharding.RunsPlan(num_runs=runs, padded_runs=runs, block=runs, mesh=mesh)
    start = time.perf_counter()
    lowered = sim.run_chunk.lower(
        learner, rollout, carry, t0, rounds, plan, fields, kernel=row["kernel"]
    )
    with tempfile.TemporaryDirectory() as dump:
        compiled = lowered.compile({"xla_dump_to": dump} if ptxas else None)
        seconds = time.perf_counter() - start
        report = ptxas_report(ptxas, Path(dump), f"{name}_chunk") if ptxas else None
    memory = compiled.memory_analysis()
    counts = count_kernels(compiled.as_text(), rounds)
    temp = None if memory is None else memory.temp_size_in_bytes / 2**20
    return {**row, **counts, "compile_s": round(seconds, 2), "temp_mib": temp, "ptxas": report}


def ptxas_report(ptxas: str, dump: Path, entry: str) -> dict[str, int] | None:
    """``ptxas -v``'s stack, spill and register counts a thread of the kernel ``entry`` (a
    Pallas kernel's name), from the PTX that XLA dumped, for the PTX's own target."""
    ptx = next((p for p in sorted(dump.glob("*.ptx")) if f".entry {entry}(" in p.read_text()), None)
    arch = ptx and re.search(r"^\.target (\S+)", ptx.read_text(), re.M)
    if not arch:
        return None
    cmd = [ptxas, "-v", f"-arch={arch.group(1)}", str(ptx), "-o", os.devnull]
    found = _PTXAS.search(subprocess.run(cmd, capture_output=True, text=True, check=True).stderr)
    keys = ("stack_bytes", "spill_store_bytes", "spill_load_bytes", "registers")
    return dict(zip(keys, map(int, found.groups()), strict=True)) if found else None


def find_ptxas() -> str | None:
    """The ``ptxas`` that ``jax[cuda12]`` installs (nvidia-cuda-nvcc, XLA's), else the PATH's."""
    wheels = (p for d in sys.path for p in Path(d or ".").glob("nvidia/cuda_nvcc/bin/ptxas"))
    return next(map(str, wheels), None) or shutil.which("ptxas")


def default_rows(runs: int, rounds: int) -> list[dict[str, Any]]:
    """Every bandit learner at n = 30 (XLA); StABL, EXP3 fused; StABL n = 300, all traces; BCO."""
    two = ["played", "loss"]
    base = {"kind": "bandit", "R": runs, "L": rounds, "traces": two, "kernel": "xla"}
    rows = [{**base, "learner": name, "n": 30} for name in sorted(registry.LEARNERS)]
    rows += [{**base, "learner": name, "n": 30, "kernel": "pallas"} for name in ("exp3", "stabl")]
    rows += [{**base, "learner": "stabl", "n": 300}]
    rows += [{**base, "learner": "stabl", "n": 30, "traces": None}]
    bco = {"kind": "bco", "env": "moving_target", "R": runs, "L": rounds, "n": 2}
    rows += [
        {**bco, "learner": n, "traces": None, "kernel": "xla"}
        for n in ("stabl_bco", "two_point_ogd")
    ]
    return rows


def large_rows() -> list[dict[str, Any]]:
    """StABL at n = 300, R = 32,768 (chunks of 512) and n = 30, R = 2^20 (256), both paths:
    the largest GPU rows measured (``gpu_check.sh``'s ``large``): does it fit (``temp_mib``)."""
    sizes = [(300, 32_768, 512, ["played", "loss"]), (30, 1 << 20, 256, ["loss"])]
    row = {"kind": "bandit", "learner": "stabl"}
    return [
        {**row, "n": n, "R": r, "L": rounds, "traces": traces, "kernel": kernel}
        for n, r, rounds, traces in sizes
        for kernel in ("xla", "pallas")
    ]


def scaling_rows(rounds: int) -> list[dict[str, Any]]:
    """StABL and EXP3 at n = 30 (XLA path) for R = 1,024 to 2^20 runs in one block."""
    base = {"kind": "bandit", "n": 30, "L": rounds, "traces": ["played", "loss"], "kernel": "xla"}
    sizes = (1_024, 4_096, 16_384, 65_536, 131_072, 1 << 20)
    return [{**base, "learner": name, "R": runs} for name in ("stabl", "exp3") for runs in sizes]


def to_markdown(result: dict[str, Any]) -> str:
    rows = [
        [
            *(r["learner"], r["n"], f"{r['R']:,}"),
            "all" if r["traces"] is None else ", ".join(r["traces"]),
            r["kernel"],
            "—" if r["kernel"] == "pallas" else r["round_kernels"],
            f"{r['loops_in_round']} ({r['loop_kernels_per_round']})",
            r["chunk_kernels"],
            "—" if r["temp_mib"] is None else f"{r['temp_mib']:,.0f}",
            (r["ptxas"] or {}).get("spill_store_bytes", "—"),
        ]
        for r in result["rows"]
    ]
    head = ["learner", "n", "R", "traces", "path", "kernels per round"]
    head += ["loops in a round (their kernels)", "kernels per chunk", "scratch MiB", "spill stores"]
    return md_table(head, rows)


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--out", type=json_output(["deviceless", "rows"]), help="write the rows as JSON here")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--local", action="store_true", help="compile for this machine's GPU")
    target.add_argument("--target-config", type=Path, help="an XLA GPU target (default H100)")
    add("--runs", type=count, default=1024, help="R, runs in the block")
    add("--rounds", type=count, default=64, help="L, rounds in the chunk")
    add("--large", action="store_true", help="add the GPU table's largest rows (minutes)")
    add("--scaling", action="store_true", help="add StABL and EXP3 for R = 1,024 to 2^20")
    args = parser.parse_args(argv)
    ptxas = find_ptxas()
    try:
        config = (args.target_config or H100_TARGET).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        parser.error(f"--target-config {args.target_config}: cannot read it ({exc})")
    try:
        device = target_device(args.local, config)
    except NotImplementedError as exc:  # JAX without its CUDA plugin: no GPU to describe
        parser.error(
            f"a deviceless GPU compile needs JAX's CUDA plugin ({exc}): pip install "
            f'"jax[cuda12]=={jax.__version__}" (no GPU needed; docs/gpu.md), or run with '
            "--local on a machine with a GPU"
        )
    rows, asked = [], default_rows(args.runs, args.rounds) + (large_rows() if args.large else [])
    asked += scaling_rows(args.rounds) if args.scaling else []
    for row in asked:
        rows.append(compile_row(device, row, ptxas if row["kernel"] == "pallas" else None))
        keys = ("learner", "n", "R", "kernel", "round_kernels", "temp_mib", "ptxas")
        print(json.dumps({k: rows[-1][k] for k in keys}), flush=True)
    device_kind, code = getattr(device, "device_kind", str(device)), provenance.code_version()
    result = dict(device=device_kind, deviceless=not args.local, jax=jax.__version__, code=code)
    result["rows"] = rows
    print(to_markdown(result))
    if args.out is not None:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
