"""The speed benchmark: ``simulate`` against NumPy, in one process (``stabl-jax bench``).

Each row is a learner, number of arms ``n`` and runs ``R`` on the expert-advice environment:
run-steps/s (``R T / s``) and arm-updates/s (``R T n / s``) as the median of ``repeats`` calls
(compilation apart), peak RSS, the ``validate=True`` rate, the memory-traffic bound, and the
NumPy baselines (:mod:`stabl_jax.experiment.numpy_baselines`) timed in turn with it.
``--gpu`` (:func:`run_gpu_benchmark`) times :data:`GPU_ROWS` on each kernel, without NumPy.

Example:
  >>> from stabl_jax.experiment.bench import BenchConfig, run_benchmark
  >>> res = run_benchmark(BenchConfig(learners=("exp3",), arms=(5,), runs=(2,), repeats=1,
  ...                                 work=160, numpy_work=80, validate=False))
  >>> [row["impl"] for row in res["rows"]]
  ['jax', 'numpy_vectorised', 'numpy_loop']
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import itertools
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import summaries
from stabl_jax.envs import ExpertAdvice
from stabl_jax.experiment import numpy_baselines, provenance
from stabl_jax.experiment.files import atomic_write
from stabl_jax.experiment.outputs import owned_files
from stabl_jax.registry import make
from stabl_jax.simulate import SimOptions, simulate

#: Learners with a NumPy implementation, by registry name.
NUMPY_IMPLEMENTATIONS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "exp3": (numpy_baselines.exp3_loop, numpy_baselines.exp3_vectorised),
    "stabl": (numpy_baselines.stabl_loop, numpy_baselines.stabl_vectorised),
}


#: Peak memory bandwidth in GB/s by ``device_kind``, from the vendors' data sheets (the bound
#: column's default; ``--bandwidth`` sets another).
PEAK_BANDWIDTH_GBS: dict[str, float] = {
    "NVIDIA H100 80GB HBM3": 3350.0,  # H100 SXM
    "NVIDIA H100 PCIe": 2000.0,
    "NVIDIA H200": 4800.0,
    "NVIDIA A100-SXM4-80GB": 2039.0,
    "NVIDIA A100-SXM4-40GB": 1555.0,
    "NVIDIA A100 80GB PCIe": 1935.0,
}


def default_horizon(num_arms: int) -> int:
    """The paper's horizon for ``n`` arms: 4096 up to 100 arms (Figure 1), else 65536."""
    return 4096 if num_arms <= 100 else 65536


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """What to time; a call's rounds are ``T = clip(work // (R n), min_rounds, max_rounds)``.

    Attributes:
      learners, arms, runs: registry names, values of ``n``, values of ``R``.
      repeats: timed calls per configuration (after one untimed first call).
      work, numpy_work: arm-updates per timed JAX and NumPy call.
      min_rounds, max_rounds: the fewest rounds a JAX call times, the most any call times.
      numpy: also time the NumPy versions (where one exists).
      validate: also time ``simulate(validate=True)``.
      bandwidth_gbs: memory bandwidth for the bound column; ``None``: the device's known peak.
      seed: PRNG seed.
    """

    learners: tuple[str, ...] = ("exp3", "stabl")
    arms: tuple[int, ...] = (30, 300)
    runs: tuple[int, ...] = (1, 64, 1024, 4096)
    repeats: int = 5
    work: int = 2**24
    numpy_work: int = 2**16
    min_rounds: int = 32
    max_rounds: int = 4096
    numpy: bool = True
    validate: bool = True
    bandwidth_gbs: float | None = None
    seed: int = 0

    def jax_rounds(self, num_runs: int, num_arms: int) -> int:
        return int(np.clip(self.work // (num_runs * num_arms), self.min_rounds, self.max_rounds))

    def numpy_rounds(self, num_runs: int, num_arms: int) -> int:
        return int(np.clip(self.numpy_work // (num_runs * num_arms), 2, self.max_rounds))


#: ``stabl-jax bench --quick``: seconds, for a smoke test of the tool, not for quoting.
QUICK = BenchConfig(arms=(30,), runs=(1, 64), repeats=3, work=2**16, numpy_work=2**12)

#: A ``--gpu`` row ``(learner, n, R, rounds, traces)``; ``traces=None``: every ExpertAdvice trace.
GpuRow = tuple[str, int, int, int, tuple[str, ...] | None]
#: The traces of most ``--gpu`` rows: what a study keeps.
TWO_TRACES: tuple[str, ...] = ("played", "loss")
#: ``stabl-jax bench --gpu``: the rows in timing order, each once per kernel.
GPU_ROWS: tuple[GpuRow, ...] = (
    ("stabl", 30, 1_024, 4_096, TWO_TRACES),
    ("stabl", 30, 16_384, 4_096, TWO_TRACES),
    ("stabl", 30, 131_072, 4_096, TWO_TRACES),
    ("exp3", 30, 131_072, 4_096, TWO_TRACES),
    ("stabl", 30, 16_384, 4_096, None),
    ("stabl", 300, 32_768, 2_048, TWO_TRACES),
)
#: ``--gpu`` rows whose traces stay on the device, reduced there to SA(L).
GPU_DEVICE_ROWS: tuple[GpuRow, ...] = (
    ("stabl", 30, 131_072, 4_096, ("loss",)),
    ("stabl", 30, 1_048_576, 4_096, ("loss",)),
)
SUMMARY_WINDOWS: tuple[int, ...] = (64, 256, 1024, 4096)
#: The paths each ``--gpu`` row is timed on: the fused kernel and the scan under ``vmap``.
GPU_KERNELS: tuple[str, ...] = ("pallas", "xla")
#: Calls of ``simulate`` per ``--gpu`` row (the fastest is reported).
GPU_REPEATS = 2
#: Rounds of a simulated chunk in the ``--gpu`` rows (a chunk's traces go to the host).
GPU_CHUNK = 512


def gpu_rows(quick: bool = False, rows: tuple | None = None) -> list[GpuRow]:
    """``rows`` (default :data:`GPU_ROWS`); ``quick``: at ``R / 4096`` runs and 64 rounds."""
    rows = GPU_ROWS if rows is None else rows
    if not quick:
        return list(rows)
    return [(name, n, max(2, runs >> 12), 64, traces) for name, n, runs, _, traces in rows]


def time_gpu_row(
    spec: GpuRow,
    kernel: str,
    repeats: int,
    bandwidth_gbs: float | None,
    seed: int = 0,
    on_device: bool = False,
) -> dict[str, Any]:
    """One ``--gpu`` row: the fastest of ``repeats`` calls on ``kernel``, compilation apart.

    The row says whether every call gave the same traces; ``on_device`` keeps the traces on
    the device and times SA(L) there. A call that raises gives a row with its ``error``.
    """
    name, n, runs, rounds, traces = spec
    row: dict[str, Any] = {"learner": name, "num_arms": n, "runs": runs}
    row |= {"horizon": default_horizon(n), "rounds": rounds, "kernel": kernel}
    row |= {"traces": list(traces or ExpertAdvice.trace_names), "traces_on_device": on_device}
    try:
        learner = make_learner(name, n)
        env = ExpertAdvice(num_arms=n, horizon=row["horizon"])
        options = SimOptions(
            chunk_size=min(GPU_CHUNK, rounds), kernel=kernel, traces_on_device=on_device
        )
        seconds, compile_s, mean_loss, first, same, summary = [], 0.0, [], None, True, []
        for _ in range(repeats):
            res = simulate(
                learner, env, jax.random.key(seed), runs, horizon=rounds, traces=traces,
                options=options,
            )  # fmt: skip
            row["kernel"] = res.kernel
            compile_s = max(compile_s, res.compile_seconds)
            seconds.append(res.run_seconds)
            xp = jnp if on_device else np  # each reduced where it is
            mean_loss.append(float(xp.mean(res.loss, dtype=xp.float64 if xp is np else None)))
            if on_device:
                summary.append(_summarise(env, res, rounds))
            if first is None:
                first = res.arrays
            else:
                same &= all(bool(xp.array_equal(first[k], v)) for k, v in res.arrays.items())
            del res
        row["state_bytes_per_run"] = state_bytes(learner)
    except Exception as err:  # a kernel not yet tried on this device must not end the bench
        return {**row, "error": repr(err)[:2000]}
    best = min(seconds)
    row |= {"run_seconds": seconds, "compile_seconds": compile_s}
    row |= {"run_steps_per_s": runs * rounds / best, "us_per_round": best / rounds * 1e6}
    if summary:
        row["summary_seconds"] = summary
    if bandwidth_gbs is not None:
        row["bound_run_steps_per_s"] = bandwidth_gbs * 1e9 / (2 * row["state_bytes_per_run"])
        row["fraction_of_bound"] = row["run_steps_per_s"] / row["bound_run_steps_per_s"]
    return row | {"mean_loss": mean_loss, "same_bits_every_call": same}


def _summarise(env: Any, res: Any, rounds: int) -> float:
    """Seconds of SA(L) at :data:`SUMMARY_WINDOWS` of ``res``'s device ``loss`` trace."""
    windows = tuple(w for w in SUMMARY_WINDOWS if w <= rounds)
    start = time.perf_counter()
    sa = summaries.adaptive_regret(
        env, res.carry, {"loss": res.loss}, windows, runs_per_batch=min(res.num_runs, 4096)
    )
    jax.block_until_ready(sa)
    return time.perf_counter() - start


def run_gpu_benchmark(
    repeats: int = GPU_REPEATS,
    bandwidth_gbs: float | None = None,
    quick: bool = False,
    log: Callable[[str], None] | None = None,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Time every row of :func:`gpu_rows` on every kernel of :data:`GPU_KERNELS`.

    Returns:
      ``{"device", "date", "jax", "quick", "complete", "bandwidth_gbs", "machine", "code",
      "config", "rows"}``; ``on_row`` gets it after each row (``complete`` false until the last).
    """
    log = log or (lambda _: None)
    device = jax.devices()[0]
    if bandwidth_gbs is None:
        bandwidth_gbs = PEAK_BANDWIDTH_GBS.get(device.device_kind)
    rows = [(spec, False) for spec in gpu_rows(quick)]
    rows += [(spec, True) for spec in gpu_rows(quick, GPU_DEVICE_ROWS)]
    result: dict[str, Any] = {
        "device": device.device_kind,
        "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
        "jax": jax.__version__,
        "quick": quick,
        "complete": False,
        "bandwidth_gbs": bandwidth_gbs,
        "machine": machine_info(),
        "code": provenance.code_version(),
        "config": {
            "rows": [spec for spec, _ in rows],
            "on_device": [device for _, device in rows],
            "kernels": GPU_KERNELS,
            "repeats": repeats,
            "chunk": GPU_CHUNK,
        },
        "rows": [],
    }
    log(f"# {device.platform} {device.device_kind}, JAX {jax.__version__}")
    log("\n".join(GPU_TABLE_HEAD))
    for (spec, on_device), kernel in itertools.product(rows, GPU_KERNELS):
        row = time_gpu_row(spec, kernel, repeats, bandwidth_gbs, on_device=on_device)
        result["rows"].append(row)
        result["complete"] = len(result["rows"]) == len(rows) * len(GPU_KERNELS)
        log(gpu_markdown_row(row))
        if on_row is not None:
            on_row(result)
    return result


#: The header of the ``--gpu`` table (:func:`gpu_markdown`).
GPU_TABLE_HEAD = (
    "| learner | n | R | T | traces | kernel | compile s | run-steps/s | µs/round "
    "| bound run-steps/s | of bound |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
)


def has_accelerator() -> bool:
    """Whether JAX sees a device other than a CPU (what ``--gpu`` is sized for)."""
    return any(d.platform != "cpu" for d in jax.devices())


def gpu_markdown_row(row: dict[str, Any]) -> str:
    """One row of :func:`gpu_markdown`'s table."""
    head = (
        f"| {row['learner']} | {row['num_arms']} | {row['runs']:,} | {row['rounds']:,} "
        f"| {len(row['traces'])} | {row['kernel']} |"
    )
    if "error" in row:
        return f"{head} failed: {row['error'][:200]} | | | | |"
    return (
        f"{head} {row['compile_seconds']:.1f} | {_si(row['run_steps_per_s'])} "
        f"| {row['us_per_round']:.1f} "
        f"| {_si(row['bound_run_steps_per_s']) if 'bound_run_steps_per_s' in row else '—'} "
        f"| {_percent(row.get('fraction_of_bound'))} |"
    )


def gpu_markdown(result: dict[str, Any]) -> str:
    """:func:`run_gpu_benchmark`'s result as a Markdown table, the device on its first line."""
    lines = [
        f"Device: {result['device']}; JAX {result['jax']}; {result['date']}"
        f"{_code(result.get('code'))}"
        + ("; --quick sizes (a check of the code, not a measurement)" if result["quick"] else "")
        + ("" if result["complete"] else "; incomplete")
        + ".",
        _bound_note(result.get("bandwidth_gbs")),
        "",
        *GPU_TABLE_HEAD,
    ]
    return "\n".join(lines + [gpu_markdown_row(row) for row in result["rows"]]) + "\n"


def machine_info() -> dict[str, Any]:
    """Where the numbers come from: CPU model and cores, JAX devices, versions, load."""
    processor = provenance.cpu()
    devices = jax.devices()
    return {
        "cpu": processor["model"],
        "cpu_vector_extensions": processor["vector_extensions"],
        "cpu_count": os.cpu_count(),
        "jax_backend": jax.default_backend(),
        "devices": [f"{d.platform}:{d.device_kind}" for d in devices],
        "device_count": len(devices),
        "jax": jax.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def reset_peak_rss() -> bool:
    """Reset this process's ``VmHWM`` to its current RSS (Linux >= 4.0); ``False`` if not."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_bytes(field: str) -> int | None:
    """``VmRSS`` or ``VmHWM`` of this process in bytes (Linux), else ``None``."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    if field == "VmHWM":
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    return None


class Timed:
    """One configuration: a first call (compilation, memory), then timed calls.

    ``call()`` returns ``(run_seconds, compile_seconds)``; ``None`` run seconds: the wall time.
    """

    def __init__(self, row: dict[str, Any], call: Callable[[], tuple[float | None, float | None]]):
        self.row, self.call = row, call
        self.times: list[float] = []

    def _once(self) -> tuple[float, float | None]:
        start = time.perf_counter()
        run_s, compile_s = self.call()
        return (time.perf_counter() - start if run_s is None else run_s), compile_s

    def first(self) -> None:
        reset = reset_peak_rss()
        self.row["rss_before_bytes"] = rss_bytes("VmRSS")
        _, compile_s = self._once()
        if compile_s is not None:
            self.row["compile_s"] = compile_s
        self.row["peak_rss_bytes"] = rss_bytes("VmHWM")
        self.row["peak_rss_since_process_start"] = not reset

    def timed(self) -> None:
        self.times.append(self._once()[0])

    def finish(self) -> dict[str, Any]:
        row, steps = self.row, self.row["runs"] * self.row["rounds"]
        rates = sorted(steps / t for t in self.times)
        row["seconds"] = self.times
        row["run_steps_per_s"] = statistics.median(rates)
        row["run_steps_per_s_min"] = rates[0]
        row["run_steps_per_s_max"] = rates[-1]
        row["arm_updates_per_s"] = row["run_steps_per_s"] * row["num_arms"]
        return row


def time_in_turn(cases: Sequence[Timed], repeats: int) -> list[dict[str, Any]]:
    """First calls of every case, then ``repeats`` timed calls of each in turn; their rows."""
    for case in cases:
        case.first()
    for _ in range(repeats):
        for case in cases:
            case.timed()
    return [case.finish() for case in cases]


def _row(impl: str, name: str, num_arms: int, num_runs: int, rounds: int) -> dict[str, Any]:
    return {
        "impl": impl,
        "learner": name,
        "num_arms": num_arms,
        "horizon": default_horizon(num_arms),
        "runs": num_runs,
        "rounds": rounds,
    }


def state_bytes(learner: Any) -> int:
    """Bytes of one run's learner state (every leaf of ``learner.init``'s pytree)."""
    state = jax.eval_shape(learner.init, jax.random.key(0))
    return int(sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state)))


def bandwidth(text: str) -> float:
    """An argparse ``type=`` for ``--bandwidth`` (GB/s): a finite number > 0, else exit 2."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"give a finite number of GB/s > 0, got {text!r}")
    return value


def device_bandwidth_gbs(config: BenchConfig) -> float | None:
    """``config.bandwidth_gbs``, else the vendor's peak for the first device if known."""
    if config.bandwidth_gbs is not None:
        return config.bandwidth_gbs
    return PEAK_BANDWIDTH_GBS.get(jax.devices()[0].device_kind)


def make_learner(name: str, num_arms: int) -> Any:
    """The registry's learner ``name`` at the paper's horizon for ``n`` arms."""
    return make(name, num_arms=num_arms, horizon=default_horizon(num_arms))


def _jax_case(
    name: str, num_arms: int, num_runs: int, rounds: int, seed: int, validate: bool = False
) -> Timed:
    row = _row("jax_validated" if validate else "jax", name, num_arms, num_runs, rounds)
    learner = make_learner(name, num_arms)
    env = ExpertAdvice(num_arms=num_arms, horizon=row["horizon"])
    row["state_bytes_per_run"] = state_bytes(learner)

    def call() -> tuple[float, float]:
        res = simulate(
            learner,
            env,
            jax.random.key(seed),
            num_runs,
            horizon=rounds,
            validate=validate,
            options=SimOptions(chunk_size=rounds),
        )
        row["mean_expected_loss"] = float(np.mean(res.expected_loss))
        row["kernel"] = res.kernel  # "pallas" where kernel="auto" picked the fused kernel
        return res.run_seconds, res.compile_seconds

    return Timed(row, call)


def _numpy_case(name: str, num_arms: int, num_runs: int | None, rounds: int, seed: int) -> Timed:
    loop, vectorised = NUMPY_IMPLEMENTATIONS[name]
    impl = "numpy_loop" if num_runs is None else "numpy_vectorised"
    row = _row(impl, name, num_arms, num_runs or 1, rounds)
    env = numpy_baselines.ExpertAdviceSpec(num_arms=num_arms, horizon=row["horizon"])
    rng = np.random.default_rng(seed)

    def call() -> tuple[None, None]:
        source = numpy_baselines.RandomSource(env, rng, num_runs)
        if num_runs is None:
            out = loop(env, source, rounds)
        else:
            out = vectorised(env, source, rounds, num_runs)
        row["mean_expected_loss"] = float(np.mean(out["expected_loss"]))
        return None, None

    return Timed(row, call)


def run_benchmark(
    config: BenchConfig = BenchConfig(), log: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Time every configuration of ``config``; returns ``{"machine", "code", "config", "rows"}``.

    Per ``(learner, n)``, every call is first run once, then timed ``repeats`` times in turn.
    """
    log = log or (lambda _: None)
    rows: list[dict[str, Any]] = []
    info = machine_info()
    log(
        f"# {info['cpu']} ({info['cpu_count']} cores), JAX {info['jax']} on "
        f"{', '.join(info['devices'])}; load average {info['load_average']}"
    )
    for name in config.learners:
        for n in config.arms:
            cases = [
                _jax_case(name, n, r, config.jax_rounds(r, n), config.seed, validate)
                for r in config.runs
                for validate in ((False, True) if config.validate else (False,))
            ]
            if config.numpy and name in NUMPY_IMPLEMENTATIONS:
                cases += [
                    _numpy_case(name, n, r, config.numpy_rounds(r, n), config.seed)
                    for r in config.runs
                ]
                cases.append(_numpy_case(name, n, None, config.numpy_rounds(1, n), config.seed))
            for row in time_in_turn(cases, config.repeats):
                rows.append(row)
                log(_log_line(row))
    info["bandwidth_gbs"] = device_bandwidth_gbs(config)
    _add_ratios(rows, info["bandwidth_gbs"])
    info["load_average_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    code = provenance.code_version()
    return {"machine": info, "code": code, "config": dataclasses.asdict(config), "rows": rows}


def _log_line(row: dict[str, Any]) -> str:
    compile_s = f" compile {row['compile_s']:.1f} s" if "compile_s" in row else ""
    return (
        f"{row['impl']:>16} {row['learner']:<8} n={row['num_arms']:<4} R={row['runs']:<5} "
        f"{row['run_steps_per_s']:>12,.0f} run-steps/s{compile_s}"
        + (" (fused kernel)" if row.get("kernel") == "pallas" else "")
    )


def _find(
    rows: list[dict[str, Any]], impl: str, learner: str, n: int, runs: int | None = None
) -> dict | None:
    """The first row of ``impl`` for ``learner`` at ``n`` arms (and ``runs``, when given)."""
    matches = (r for r in rows if (r["impl"], r["learner"], r["num_arms"]) == (impl, learner, n))
    return next((r for r in matches if runs is None or r["runs"] == runs), None)


def _add_ratios(rows: list[dict[str, Any]], bandwidth_gbs: float | None = None) -> None:
    for row in (r for r in rows if r["impl"] == "jax"):
        key = (row["learner"], row["num_arms"])
        for impl, runs in (("numpy_vectorised", row["runs"]), ("numpy_loop", None)):
            numpy_row = _find(rows, impl, *key, runs)
            if numpy_row is not None:
                row[f"x_{impl}"] = row["run_steps_per_s"] / numpy_row["run_steps_per_s"]
        checked = _find(rows, "jax_validated", *key, row["runs"])
        if checked is not None:
            row["x_validated"] = checked["run_steps_per_s"] / row["run_steps_per_s"]
        if bandwidth_gbs is not None:
            row["bound_run_steps_per_s"] = bandwidth_gbs * 1e9 / (2 * row["state_bytes_per_run"])
            row["fraction_of_bound"] = row["run_steps_per_s"] / row["bound_run_steps_per_s"]


def _fmt_rate(row: dict[str, Any]) -> str:
    return (
        f"{_si(row['run_steps_per_s'])} ({_si(row['run_steps_per_s_min'])}–"
        f"{_si(row['run_steps_per_s_max'])})"
    )


def _si(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g}"


def to_markdown(result: dict[str, Any]) -> str:
    """The benchmark as a Markdown table (one row per JAX configuration), with the machine."""
    m = result["machine"]
    rows = result["rows"]
    lines = [
        f"Machine: {m['cpu']}, {m['cpu_count']} cores; JAX {m['jax']} "
        f"({m['jax_backend']}: {', '.join(m['devices'])}), NumPy {m['numpy']}; "
        f"load average {_load(m.get('load_average'))} at the start, "
        f"{_load(m.get('load_average_end'))} at the end; {m['date']}"
        f"{_code(result.get('code'))}.",
        _bound_note(m.get("bandwidth_gbs")),
        "",
        "| learner | n | R | compile s | JAX run-steps/s: median (min–max) | arm-updates/s "
        "| NumPy vectorised run-steps/s | × vectorised | × loop | validated rate × "
        "| state B/run | bound run-steps/s | of bound | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in (r for r in rows if r["impl"] == "jax"):
        vec = _find(rows, "numpy_vectorised", row["learner"], row["num_arms"], row["runs"])
        lines.append(
            f"| {row['learner']} | {row['num_arms']} | {row['runs']} | {row['compile_s']:.1f} "
            f"| {_fmt_rate(row)} | {_si(row['arm_updates_per_s'])} "
            f"| {_fmt_rate(vec) if vec else '—'} "
            f"| {_ratio(row.get('x_numpy_vectorised'))} | {_ratio(row.get('x_numpy_loop'))} "
            f"| {_ratio(row.get('x_validated'))} | {row['state_bytes_per_run']} "
            f"| {_si(row['bound_run_steps_per_s']) if 'bound_run_steps_per_s' in row else '—'} "
            f"| {_percent(row.get('fraction_of_bound'))} "
            f"| {_mib(row.get('peak_rss_bytes'))} |"
        )
    loops = [
        f"{r['learner']} n={r['num_arms']}: {_fmt_rate(r)} run-steps/s"
        for r in rows
        if r["impl"] == "numpy_loop"
    ]
    if loops:
        lines += ["", f"NumPy one-run loop: {'; '.join(loops)}."]
    return "\n".join(lines) + "\n"


def _code(code: dict[str, Any] | None) -> str:
    """``; commit abc1234`` (``+ uncommitted changes`` if dirty) when the commit is known."""
    if not code or not code.get("commit"):
        return ""
    return f"; commit `{code['commit'][:7]}`" + (" + uncommitted changes" if code["dirty"] else "")


def _bound_note(bandwidth_gbs: float | None) -> str:
    if bandwidth_gbs is None:
        return "No memory-bandwidth bound (no bandwidth known for this device; --bandwidth GB/s)."
    return (
        f"Bound: {bandwidth_gbs:g} GB/s / (2 x state bytes per run): the rate at which "
        "reading and writing each run's state once a round fills the memory bandwidth."
    )


def _percent(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _ratio(x: float | None) -> str:
    return "—" if x is None else f"{x:.3g}×"


def _mib(x: int | None) -> str:
    return "—" if x is None else f"{x / 2**20:.0f}"


def _load(x: Sequence[float] | None) -> str:
    return "—" if not x else f"{x[0]:.1f}"


#: The keys every ``benchmark.json`` has: what tells a previous benchmark's files from a user's.
RESULT_KEYS: frozenset[str] = frozenset({"machine", "code", "config", "rows"})


def check_out(out: str | os.PathLike) -> tuple[Path, Path]:
    """Paths of ``benchmark.json`` and ``benchmark.md`` in ``out``, each absent or a benchmark's.

    Raises:
      OutputError: ``out`` is not a folder, or a file there is not a previous benchmark's.
    """
    json_path, md_path = owned_files(
        out, "benchmark.json", ("benchmark.md",), RESULT_KEYS, "stabl-jax bench"
    )
    return json_path, md_path


def write(result: dict[str, Any], out: str | os.PathLike) -> tuple[Path, Path]:
    """Write ``benchmark.json`` and ``benchmark.md`` into ``out`` (created), each atomically."""
    json_path, md_path = check_out(out)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    markdown = (gpu_markdown if "device" in result else to_markdown)(result)
    text = json.dumps(result, indent=2) + "\n"
    atomic_write(md_path, lambda f: f.write(markdown.encode("utf-8")))
    atomic_write(json_path, lambda f: f.write(text.encode("utf-8")))
    return json_path, md_path
