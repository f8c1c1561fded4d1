"""The speed choices of the simulator, each timed against its alternatives in one process.

    python experiments/ablations.py [--runs 4096] [--rounds 512] [--repeats 5]
                                    [--only NAME ...] [--json PATH]

Every ablation is a set of variants of one choice the code makes (its choice listed first),
timed in alternating order (variant 1, 2, ..., 1, 2, ...; ``--repeats`` rounds) so that a
change of the machine's load falls on all of them; the median rate of each is compared with
the choice's. Run-steps per second are ``runs x rounds / seconds`` of the run alone
(``simulate``'s ``run_seconds``, compilation excluded; for the two kernels below, the wall time
of a compiled call).

- ``block_n30``, ``block_n300``: ``simulate(..., runs_per_block=K)``, StABL at n = 30
  (``--runs`` runs) and n = 300 (a quarter of them); the runs' blocks are shared out to one
  host thread per core (a single block runs on one).
- ``host_threads_n30``, ``host_threads_n300``: ``simulate(..., host_threads=)`` one thread
  per core against one, at n = 30 and n = 300 (a quarter of the runs).
- ``lazy_losses_n30``, ``lazy_losses_n300``: ``simulate(..., traces=("played", "loss",
  "prob_best"))`` (the environment draws the queried arms' losses only) against every trace
  (``expected_loss`` needs every arm's loss), StABL at n = 30 and n = 300 (a quarter of the
  runs).
- ``cumsum_n30``, ``cumsum_n300``: one inverse-CDF draw per run and round,
  :func:`stabl_jax.sampling.sample_index` (the two-level cumulative sum the code uses)
  against its rule with ``jnp.cumsum``, under ``vmap`` inside a ``scan``, at n = 30 and 300
  (a quarter of the runs).
- ``threefry``: ``n = 30`` uniforms per run and round from the round's key, with
  :mod:`stabl_jax.prng` (Threefry written out, the same bits) against ``jax.random``.

The JSON (``--json``) holds every timing, the machine, the command and the commit;
``experiments/report.py`` writes EXPERIMENTS.md's table from it (``view=ablations``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from stabl_jax import ExpertAdvice, SimOptions, StABL, prng, sampling, simulate
from stabl_jax.experiment.bench import Timed, machine_info, time_in_turn
from stabl_jax.experiment.provenance import code_version
from stabl_jax.experiment.results import Distinct, Parser, count, json_output, write_json

#: The traces of the lazy path: everything but ``expected_loss`` that a bandit run records.
LAZY_TRACES = ("played", "loss", "prob_best")

#: One call of a variant -> ``(run seconds, compile seconds)``, ``None`` for the wall time
#: of the call (what :class:`stabl_jax.experiment.bench.Timed` times).
Timer = Callable[[], tuple[float | None, float | None]]


def _simulate_timer(
    num_arms: int, runs: int, rounds: int, traces: Any = None, **options: Any
) -> Timer:
    """StABL on expert advice at ``num_arms``: ``simulate``'s own run and compile times."""
    env = ExpertAdvice(num_arms=num_arms, horizon=rounds)
    learner = StABL(num_arms=num_arms, horizon=rounds)

    def call() -> tuple[float, float]:
        opts = SimOptions(chunk_size=rounds, **options)
        res = simulate(learner, env, jax.random.key(0), runs, traces=traces, options=opts)
        return res.run_seconds, res.compile_seconds

    return call


def _compiled_timer(fn: Callable[..., jax.Array], *args: Any) -> Timer:
    """``fn(*args)`` compiled ahead (not timed); a call is timed by its wall time."""
    compiled = jax.jit(fn).lower(*args).compile()

    def call() -> tuple[None, None]:
        jax.block_until_ready(compiled(*args))
        return None, None

    return call


def _cumsum_draw(probs: jax.Array, u: jax.Array) -> jax.Array:
    """:func:`stabl_jax.sampling.sample_index`'s rule with ``jnp.cumsum`` for its two-level
    cumulative sum (the alternative the ``cumsum`` ablations time)."""
    cdf = jnp.cumsum(probs)
    count = jnp.sum(jnp.where(cdf <= u * cdf[-1], 1.0, 0.0), dtype=jnp.float32)
    return jnp.minimum(count.astype(jnp.int32), probs.shape[-1] - 1)


def _draws(
    draw: Callable[[jax.Array, jax.Array], jax.Array], runs: int, num_arms: int, rounds: int
) -> Timer:
    """One ``draw(probs, u)`` per run and round from ``(runs, n)`` weights; the uniforms are a
    cheap golden-ratio sequence so that the draw is what is timed."""

    def run(probs: jax.Array, offsets: jax.Array) -> jax.Array:
        def one_round(total: jax.Array, t: jax.Array) -> tuple[jax.Array, None]:
            u = jnp.mod(offsets + t.astype(jnp.float32) * 0.618034, 1.0)
            # weights that change every round (fixed ones would be summed once, outside
            # the loop); scaling a row leaves its draw rule unchanged
            return total + jax.vmap(draw)(probs * (1.0 + u)[:, None], u), None

        return jax.lax.scan(one_round, jnp.zeros(runs, jnp.int32), jnp.arange(rounds))[0]

    probs = jax.random.dirichlet(jax.random.key(1), jnp.ones(num_arms), (runs,))
    offsets = jax.random.uniform(jax.random.key(2), (runs,))
    return _compiled_timer(run, probs, offsets)


def _uniforms(fold_in: Callable, uniform: Callable, runs: int, num: int, rounds: int) -> Timer:
    """``num`` uniforms per run and round from ``fold_in(run key, t)``, summed."""

    def run(keys: jax.Array) -> jax.Array:
        def one_round(total: jax.Array, t: jax.Array) -> tuple[jax.Array, None]:
            draws = jax.vmap(lambda k: uniform(fold_in(k, t), num).sum())(keys)
            return total + draws, None

        return jax.lax.scan(one_round, jnp.zeros(runs), jnp.arange(rounds))[0]

    return _compiled_timer(run, jax.random.split(jax.random.key(3), runs))


def ablations(runs: int, rounds: int) -> dict[str, dict[str, Any]]:
    """Every ablation: its setting and ``{variant label: (runs, timer factory)}``, the code's
    choice first. The factories are called in :func:`measure` (a kernel compiles there, a
    ``simulate`` variant at its first, untimed call)."""
    quarter = max(runs // 4, 1)
    return {
        **{
            f"block_n{n}": {
                "setting": f"StABL, n = {n}, R = {r}, T = {rounds}",
                "variants": {
                    f"runs_per_block={k}" + (" (default)" if k == 256 else ""): (
                        r,
                        lambda n=n, r=r, k=k: _simulate_timer(n, r, rounds, runs_per_block=k),
                    )
                    for k in sizes
                },
            }
            for n, r, sizes in ((30, runs, (256, 64, 1024, 4096)), (300, quarter, (256, 64, 1024)))
        },
        **{
            f"host_threads_n{n}": {
                "setting": f"StABL, n = {n}, R = {r}, T = {rounds}, blocks of 256",
                "variants": {
                    "one per core (default)": (r, lambda n=n, r=r: _simulate_timer(n, r, rounds)),
                    "host_threads=1": (
                        r,
                        lambda n=n, r=r: _simulate_timer(n, r, rounds, host_threads=1),
                    ),
                },
            }
            for n, r in ((30, runs), (300, quarter))
        },
        **{
            f"lazy_losses_n{n}": {
                "setting": f"StABL, n = {n}, R = {r}, T = {rounds}",
                "variants": {
                    "queried arms' losses only": (
                        r,
                        lambda n=n, r=r: _simulate_timer(n, r, rounds, traces=LAZY_TRACES),
                    ),
                    "every arm's loss (expected_loss recorded)": (
                        r,
                        lambda n=n, r=r: _simulate_timer(n, r, rounds),
                    ),
                },
            }
            for n, r in ((30, runs), (300, quarter))
        },
        **{
            f"cumsum_n{n}": {
                "setting": f"one draw per run and round, n = {n}, R = {quarter}, T = {rounds}",
                "variants": {
                    "two-level sum (sampling.blocked_cumsum)": (
                        quarter,
                        lambda n=n: _draws(sampling.sample_index, quarter, n, rounds),
                    ),
                    "jnp.cumsum": (quarter, lambda n=n: _draws(_cumsum_draw, quarter, n, rounds)),
                },
            }
            for n in (30, 300)
        },
        "threefry": {
            "setting": f"30 uniforms per run and round, R = {runs}, T = {rounds}",
            "variants": {
                "stabl_jax.prng (written out)": (
                    runs,
                    lambda: _uniforms(prng.fold_in, prng.uniform, runs, 30, rounds),
                ),
                "jax.random": (
                    runs,
                    lambda: _uniforms(
                        jax.random.fold_in,
                        lambda k, num: jax.random.uniform(k, (num,)),
                        runs,
                        30,
                        rounds,
                    ),
                ),
            },
        },
    }


def measure(spec: dict[str, Any], rounds: int, repeats: int) -> list[dict[str, Any]]:
    """Time ``spec``'s variants in alternating order (the benchmark's
    :func:`~stabl_jax.experiment.bench.time_in_turn`: a first, untimed call each, then
    ``repeats`` calls in turn); median rates relative to the first variant (the code's
    choice)."""
    cases = [
        Timed({"variant": label, "runs": r, "rounds": rounds}, factory())
        for label, (r, factory) in spec["variants"].items()
    ]
    rows = time_in_turn(cases, repeats)
    for row in rows:
        row["ratio"] = row["run_steps_per_s"] / rows[0]["run_steps_per_s"]
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=count, default=4096)
    parser.add_argument(
        "--rounds", type=count, default=512, help="rounds per run (StABL needs 16 or >= 32)"
    )
    parser.add_argument("--repeats", type=count, default=5)
    parser.add_argument(
        "--only", nargs="+", action=Distinct, help="these ablations only (default: every one)"
    )
    parser.add_argument(
        "--json",
        type=json_output(["ablations", "machine"]),
        help="also write the timings to this JSON file",
    )
    args = parser.parse_args(argv)
    specs = ablations(args.runs, args.rounds)
    unknown = sorted(set(args.only or ()) - set(specs))
    if unknown:
        parser.error(f"unknown ablation(s) {unknown}; choose from {sorted(specs)}")
    results = {}
    for name, spec in specs.items():
        if args.only and name not in args.only:
            continue
        rows = measure(spec, args.rounds, args.repeats)
        results[name] = {"setting": spec["setting"], "variants": rows}
        print(f"{name} ({spec['setting']})", flush=True)
        for row in rows:
            rate, ratio = row["run_steps_per_s"], row["ratio"]
            print(f"  {row['variant']}: {rate:,.0f} run-steps/s, {ratio:.2f}x")
    out = {
        "machine": machine_info(),
        "command": ["python", *(sys.argv if argv is None else ["experiments/ablations.py", *argv])],
        "code": code_version(),
        "args": vars(args),
        "ablations": results,
    }
    if args.json:
        write_json(args.json, out)
    return out


if __name__ == "__main__":
    main()
