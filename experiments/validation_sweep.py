"""Where validation stops a sound run: every registered learner at the corners of its scales.

    python experiments/validation_sweep.py [--arms 3 10] [--horizon 4096] [--low 1]
        [--high 1024] [--runs-per-corner 2] [--learners NAME ...] [--max-shifted-normaliser]
        [--json PATH]
    python experiments/validation_sweep.py --divergence [--json PATH]

For each number of arms, each bandit environment (``ExpertAdvice``, ``PiecewiseBernoulli``),
each registered learner and each of its feedback modes (``loss`` and ``reward`` where it takes
both), one validated :func:`stabl_jax.simulate` whose runs hold every corner of the learner's
params: each ``param_bounds`` field without an upper end (the scales) at ``--low`` and
``--high``, a field with one at its two ends (EXP3's ``gamma`` at 0 and 1; an open lower end
is replaced by half the upper one: D-UCB's ``discount`` at 0.5 and 1); ``--runs-per-corner``
runs a corner, seed 0.
A case either runs to the end with finite traces or stops; the line of a stopped case gives
the round, the sum's deviation from 1 and the allowed one, in eps.

``--divergence`` measures instead what adopting that normaliser would change: at the paper's
expert advice (n = 30, T = 4096, 500 runs, seed 0), for EXP3 and StABL at their printed rates
and StABL at 64 times its printed expert rate, how many runs draw another arm, from which
round, and the mean suffered and expected losses with each normaliser.

``--max-shifted-normaliser`` replaces :func:`stabl_jax.estimators.exp3_log_update`'s
normaliser ``x - logsumexp(x)`` by ``(x - max x) - log sum exp(x - max x)`` before anything
is compiled: the change that docs/reliability.md ("What the tolerance does not cover")
measures and does not adopt, since it changes the runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import re
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import LEARNERS, checks, estimators, make, simulate
from stabl_jax.envs.bernoulli import PiecewiseBernoulli
from stabl_jax.envs.expert_advice import ExpertAdvice
from stabl_jax.experiment.results import Distinct, Parser, count, json_output, write_json

EPS = float(jnp.finfo(jnp.float32).eps)
#: What ``divergence`` compares: the arms played and the losses (the other traces are not kept).
TRACES = ("played", "loss", "expected_loss")


def max_shifted_exp3_log_update(
    log_probs: jax.Array, arm: jax.Array, value: jax.Array, eta: jax.Array
) -> jax.Array:
    """:func:`stabl_jax.estimators.exp3_log_update` with the row normalised as
    ``(x - max x) - log sum exp(x - max x)``."""
    at_arm = jnp.arange(log_probs.shape[-1]) == arm
    bumped = jnp.where(at_arm, log_probs + jnp.asarray(eta * value)[..., None], log_probs)
    shifted = bumped - jax.lax.stop_gradient(jnp.max(bumped, axis=-1, keepdims=True))
    return shifted - jnp.log(jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True))


def corner_params(learner: Any, low: float, high: float, runs_per_corner: int) -> tuple[Any, int]:
    """Per-run params holding every corner of ``learner``'s ``param_bounds`` fields."""
    fields = list(learner.param_bounds)
    if not fields:
        return None, runs_per_corner
    ends = []
    for interval in learner.param_bounds.values():
        if np.isfinite(interval.high):
            start = interval.high / 2 if interval.low_open else interval.low
            ends.append((start, interval.high))
        else:
            ends.append((low, high))
    corners = list(itertools.product(*ends))
    columns = {
        f: jnp.repeat(jnp.asarray([c[i] for c in corners], learner.float_dtype), runs_per_corner)
        for i, f in enumerate(fields)
    }
    return learner.default_params.replace(**columns), len(corners) * runs_per_corner


def run_case(learner: Any, env: Any, args: argparse.Namespace) -> dict[str, Any]:
    """One validated simulation: ``{"stopped": False}`` or where and by how much it stopped."""
    params, runs = corner_params(learner, args.low, args.high, args.runs_per_corner)
    n = learner.num_arms
    try:
        result = simulate(
            learner,
            env,
            jax.random.key(0),
            runs,
            horizon=args.horizon,
            params=params,
            validate=True,
        )
    except Exception as error:
        message = str(error)
        found = re.search(r"at round (\d+) is not a distribution: sum (\S+) ", message)
        if found is None:
            return {"stopped": True, "message": message.splitlines()[0]}
        return {
            "stopped": True,
            "round": int(found.group(1)),
            "deviation_eps": abs(float(found.group(2)) - 1.0) / EPS,
            "allowed_eps": checks.distribution_tolerance(n, jnp.float32, learner.num_mixed) / EPS,
        }
    finite = all(bool(np.isfinite(trace).all()) for trace in result.traces().values())
    return {"stopped": False, "finite": finite}


def divergence(runs: int = 500, horizon: int = 4096, num_arms: int = 30) -> list[dict[str, Any]]:
    """The same runs with ``estimators.exp3_log_update`` as shipped and with the max-shifted
    normaliser (module docstring, ``--divergence``)."""
    env = ExpertAdvice(num_arms=num_arms, horizon=horizon)
    shipped = estimators.exp3_log_update
    rows = []
    for name, scale in (("exp3", None), ("stabl", None), ("stabl", 64.0)):
        learner = make(name, num_arms=num_arms, horizon=horizon)
        params = None
        if scale is not None:
            params = learner.default_params.replace(expert_lr_scale=jnp.float32(scale))
        results = []
        for update in (shipped, max_shifted_exp3_log_update):
            estimators.exp3_log_update = update
            jax.clear_caches()  # the update is read when the program is traced
            results.append(
                simulate(learner, env, jax.random.key(0), runs, params=params, traces=TRACES)
            )
        estimators.exp3_log_update = shipped
        jax.clear_caches()
        a, b = results
        differs = a.played != b.played
        diverged = differs.any(axis=1)
        first = differs.argmax(axis=1)[diverged]
        rows.append(
            {
                "learner": name,
                "expert_lr_scale": scale,
                "runs_diverged": int(diverged.sum()),
                "runs": runs,
                "median_first_round": float(np.median(first)) if first.size else None,
                "mean_loss": [float(r.loss.astype(np.float64).mean()) for r in results],
                "mean_expected_loss": [
                    float(r.expected_loss.astype(np.float64).mean()) for r in results
                ],
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", type=int, nargs="+", action=Distinct, default=[3, 10])
    parser.add_argument("--horizon", type=count, default=4096)
    parser.add_argument("--low", type=float, default=1.0)
    parser.add_argument("--high", type=float, default=1024.0)
    parser.add_argument("--runs-per-corner", type=count, default=2)
    parser.add_argument("--learners", nargs="+", action=Distinct, default=sorted(LEARNERS))
    parser.add_argument("--max-shifted-normaliser", action="store_true")
    parser.add_argument("--divergence", action="store_true")
    parser.add_argument(
        "--json",
        type=json_output(["command"], one_of=["cases", "divergence"]),
        help="write the cases to this file",
    )
    args = parser.parse_args(argv)
    if args.divergence:  # a fixed setting (module docstring): the sweep's options do not apply
        sweep = ("arms", "horizon", "low", "high", "runs_per_corner", "learners")
        given = [
            f"--{dest.replace('_', '-')}"
            for dest in (*sweep, "max_shifted_normaliser")  # it compares both normalisers
            if getattr(args, dest) != parser.get_default(dest)
        ]
        if given:
            parser.error(
                f"--divergence takes only --json, not {' '.join(given)} (the sweep's options)"
            )
        rows = divergence()
        if args.json:
            write_json(args.json, {"command": sys.argv, "divergence": rows})
        return rows
    if args.max_shifted_normaliser:
        estimators.exp3_log_update = max_shifted_exp3_log_update
        jax.clear_caches()
    if not 0 < args.low <= args.high < float("inf"):
        parser.error(f"--low and --high must satisfy 0 < low <= high, got {args.low}, {args.high}")
    todo = []
    try:  # every case built before any runs: a bad name or size stops it at once
        for n, env_cls, name in itertools.product(
            args.arms, (ExpertAdvice, PiecewiseBernoulli), args.learners
        ):
            env = env_cls(num_arms=n, horizon=args.horizon)
            plain = make(name, num_arms=n, horizon=args.horizon)
            takes_feedback = "feedback" in {f.name for f in dataclasses.fields(plain)}
            for feedback in ("loss", "reward") if takes_feedback else (None,):
                options = {} if feedback is None else {"feedback": feedback}
                learner = make(name, num_arms=n, horizon=args.horizon, **options)
                case = {"arms": n, "env": env_cls.__name__, "learner": name, "feedback": feedback}
                todo.append((case, learner, env))
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    cases = []
    for case, learner, env in todo:
        case.update(run_case(learner, env, args))
        cases.append(case)
        print(json.dumps(case), flush=True)
    stopped = sum(c["stopped"] for c in cases)
    print(f"{stopped} of {len(cases)} cases stopped", file=sys.stderr)
    if args.json:
        write_json(args.json, {"command": sys.argv, "cases": cases})
    return cases


if __name__ == "__main__":
    main()
