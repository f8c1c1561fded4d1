"""Choose step-size scales by a vmapped sweep, on seeds disjoint from the reported ones.

    python experiments/tune.py expert_advice_equal [--runs-per-point 32] [--set key=value ...]
    python experiments/tune.py expert_advice_random --set 'learners=["stabl_naive"]' \
        --grid expert_lr_scale=2**0..2**14          # a wider grid for one field

Per learner with sweepable params, one ``simulate`` call runs the whole grid (``points x
runs_per_point`` runs, params with a leading runs axis) keeping the loss alone; the objective
is the mean reward ``1 - l_t(x_t)``, on the key ``config.seed + TUNING_SEED_OFFSET`` (draws
independent of the reported runs'). ``--set`` of ``runs`` or ``params`` is refused
(:data:`UNREAD`). Writes ``configs/<name>[_reward]_tuned.toml`` (the config plus the chosen
``[params.<learner>]``) and ``results/tune-<name>/sweep.json`` (every point's score and 95%
interval, the command, commit, versions and device), and prints the best points.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import SimOptions, metrics, simulate
from stabl_jax.experiment.configs import parse_override, resolve_config
from stabl_jax.experiment.kinds import load_config
from stabl_jax.experiment.kinds.paired import ExperimentConfig
from stabl_jax.experiment.results import (
    OutputError,
    Parser,
    environment_info,
    interval_runs,
    owned_files,
    writable_folder,
    write_text,
)

TUNING_SEED_OFFSET = 1_000_003

#: Grids, per params field: powers of two around the paper's scale 1, and exploration rates.
GRIDS: dict[str, list[float]] = {
    "expert_lr_scale": [2.0**k for k in range(0, 11)],
    "meta_lr_scale": [2.0**k for k in range(0, 8)],
    "lr_scale": [2.0**k for k in range(0, 11)],
    "gamma": [0.0, 0.01, 0.03, 0.1, 0.3],
}


def parse_grid(text: str) -> tuple[str, list[float]]:
    """``FIELD=V1,V2,...`` or ``FIELD=2**A..2**B`` (the powers of two from ``2**A`` to
    ``2**B``) as a field and its grid, e.g. ``expert_lr_scale=2**0..2**14``."""
    field, sep, values = text.partition("=")
    if not sep or field not in GRIDS:
        raise ValueError(f"--grid {text!r}: expected FIELD=VALUES with FIELD one of {list(GRIDS)}")
    power = re.fullmatch(r"2\*\*(-?\d+)\.\.2\*\*(-?\d+)", values)
    if power:
        low, high = int(power[1]), int(power[2])
        grid = [2.0**k for k in range(low, high + 1)]
    else:
        try:
            grid = [float(v) for v in values.split(",")]
        except ValueError:
            raise ValueError(f"--grid {text!r}: values must be numbers or 2**A..2**B") from None
    if not grid:
        raise ValueError(f"--grid {text!r}: the grid is empty")
    twice = sorted({v for v in grid if grid.count(v) > 1})
    if twice:  # each point would be swept again, a tie for the best
        raise ValueError(f"--grid {text!r}: {twice[0]:g} is given twice")
    return field, grid


def parse_grids(texts: list[str]) -> dict[str, list[float]]:
    """Every ``--grid`` as ``{field: grid}`` (:func:`parse_grid`); ``ValueError`` for a field
    given twice, whose last grid alone would be swept."""
    grids: dict[str, list[float]] = {}
    for text in texts:
        field, grid = parse_grid(text)
        if field in grids:
            raise ValueError(f"--grid {field} is given twice: give one grid per field")
        grids[field] = grid
    return grids


def check_grids(config: ExperimentConfig, grids: dict[str, list[float]]) -> None:
    """``ValueError`` naming a value of ``grids`` that a learner of ``config`` sweeping its
    field refuses (outside the field's ``param_bounds`` in the learner's float dtype), before
    any sweep: the sweep would stop at that learner, after those before it; and a field no
    learner of ``config`` sweeps (its grid would be ignored)."""
    sweepable: set[str] = set()  # the fields of GRIDS the learners' params have
    for name in config.learners:
        learner = config.make_learner(name)
        sweepable |= set(getattr(learner.default_params, "__dataclass_fields__", ())) & set(GRIDS)
        for field, grid in grids.items():
            bounds = learner.param_bounds.get(field)
            if bounds is None:
                continue
            dtype = np.dtype(learner.float_dtype)
            with np.errstate(over="ignore"):  # a value beyond the dtype: inf, named below
                stored = np.asarray(grid, dtype)
            outside = [
                f"{v:g}" if s == v or np.isnan(v) else f"{v:g} ({dtype.name}: {s:g})"
                for v, s, ok in zip(grid, stored.tolist(), bounds.holds(stored), strict=True)
                if not ok
            ]
            if outside:
                raise ValueError(
                    f"--grid {field}: {', '.join(outside)} outside {name}'s range {bounds} of "
                    f"{field}"
                )
    unused = [field for field in grids if field not in sweepable]
    if unused:
        names = ", ".join(config.learners)
        raise ValueError(
            f"--grid {', '.join(unused)}: no learner of {config.name} ({names}) has it, so its "
            f"grid would be ignored; they sweep {sorted(sweepable) or 'nothing'}"
        )


def grid_for(
    params: object, coarse: bool, grids: dict[str, list[float]] | None = None
) -> tuple[list[str], list[tuple[float, ...]]]:
    grids = {**GRIDS, **(grids or {})}
    fields = [f for f in params.__dataclass_fields__ if f in grids]  # type: ignore[attr-defined]
    axes = [grids[f][::2] if coarse else grids[f] for f in fields]
    return fields, list(itertools.product(*axes))


def tune_learner(
    config: ExperimentConfig,
    name: str,
    runs_per_point: int,
    coarse: bool,
    grids: dict | None = None,
) -> dict | None:
    learner = config.make_learner(name)
    default = learner.default_params
    fields, points = grid_for(default, coarse, grids)
    if not fields:
        return None
    values = np.asarray(points, dtype=np.float32)  # (P, F)
    per_run = {
        f: jnp.repeat(jnp.asarray(values[:, j]), runs_per_point) for j, f in enumerate(fields)
    }
    params = default.replace(**per_run)
    env = config.make_env()
    key = jax.random.key(config.seed + TUNING_SEED_OFFSET)
    start = time.perf_counter()
    runs = len(points) * runs_per_point  # the score reads the loss alone: the only trace kept
    options = SimOptions(progress=True)
    result = simulate(learner, env, key, runs, params=params, traces=("loss",), options=options)
    seconds = time.perf_counter() - start
    reward = 1.0 - result.loss.astype(np.float64).mean(axis=1)  # (P * r,)
    reward = reward.reshape(len(points), runs_per_point)
    mean, half = metrics.mean_ci(reward, axis=1)
    best = int(np.argmax(mean))
    print(
        f"{name}: {len(points)} points x {runs_per_point} runs in {seconds:.1f}s "
        f"(one program); best {dict(zip(fields, points[best], strict=True))} "
        f"mean reward {mean[best]:.4f} ± {half[best]:.4f}"
    )
    for i in np.argsort(-mean)[1:4]:
        print(f"    {dict(zip(fields, points[i], strict=True))} {mean[i]:.4f} ± {half[i]:.4f}")
    return {
        "fields": fields,
        "points": [list(p) for p in points],
        "mean_reward": mean.tolist(),
        "half_width": half.tolist(),
        "best": dict(zip(fields, [float(x) for x in points[best]], strict=True)),
        "seconds": seconds,
    }


#: The line every config this script writes holds: a file without it is not replaced.
TUNED_MARK = "# Step-size scales chosen by experiments/tune.py"
#: Keys of every ``sweep.json`` this script writes: how its own (replaced) is told from a
#: user's file of that name (never touched).
SWEEP_KEYS: frozenset[str] = frozenset({"tuning_seed", "grids", "learners"})


def tuned_toml(source: Path, name: str, chosen: dict[str, dict[str, float]], feedback: str) -> str:
    text = source.read_text()
    text = re.sub(r'(?m)^feedback = ".*"$', f'feedback = "{feedback}"', text, count=1)
    text = re.sub(r'(?m)^name = ".*"$', f'name = "{name}_tuned"', text, count=1)
    text = re.sub(
        r'(?m)^description = "(.*)"$', r'description = "\1 (tuned scales)"', text, count=1
    )
    lines = [
        text.rstrip(),
        "",
        f"{TUNED_MARK} on seed seed + {TUNING_SEED_OFFSET} (disjoint from the reported runs).",
    ]
    for learner, values in chosen.items():
        lines.append(f"[params.{learner}]")
        lines += [f"{k} = {v!r}" for k, v in values.items()]
        lines.append("")
    return "\n".join(lines)


#: The config keys the sweep does not read, with what sets them instead: a ``--set`` of one
#: (or inside one) would be recorded in ``sweep.json``'s config but not used.
UNREAD: dict[str, str] = {
    "runs": "--runs-per-point (the runs at each grid point)",
    "params": "--grid FIELD=VALUE (each learner is swept from its default params)",
}


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--runs-per-point", type=interval_runs, default=32)
    parser.add_argument("--coarse", action="store_true", help="every other grid value")
    grid_help = "replace one field's grid: V1,V2,... or 2**A..2**B (repeatable)"
    parser.add_argument(
        "--grid", action="append", default=[], metavar="FIELD=VALUES", help=grid_help
    )
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--configs-dir", default="configs")
    parser.add_argument("--out", default=None)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    try:
        grids = parse_grids(args.grid)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        source = Path(resolve_config(args.config))
        config = load_config(source, overrides=args.set)
        check_grids(config, grids)
        for text in args.set:
            top = parse_override(text)[0][0]
            if top in UNREAD:
                raise ValueError(f"--set {text}: the sweep does not read {top}; use {UNREAD[top]}")
    except ValueError as exc:  # ConfigError: a config or --set it cannot use; a grid value
        parser.error(str(exc))
    base = config.name + ("_reward" if config.feedback == "reward" else "")
    configs_dir, out_dir = Path(args.configs_dir), Path(args.out or f"results/tune-{base}")
    try:  # before the sweep, not after it: a user's sweep.json in --out is never replaced
        writable_folder(configs_dir, f"--configs-dir {configs_dir}", "the tuned config")
        owned_files(out_dir, "sweep.json", (), SWEEP_KEYS, "experiments/tune.py")
    except OutputError as exc:
        parser.error(str(exc))
    target = configs_dir / f"{base}_tuned.toml"
    if target.is_dir():
        parser.error(
            f"{target} is a folder, so the tuned config cannot be written there: give "
            "--configs-dir another folder, or move the folder"
        )
    if target.exists() and TUNED_MARK not in target.read_text(errors="replace"):
        parser.error(
            f"{target} was not written by experiments/tune.py, so it is left as it is: give "
            "--configs-dir another folder, or move the file"
        )
    report, chosen = {}, {}
    for name in config.learners:
        out = tune_learner(config, name, args.runs_per_point, args.coarse, grids)
        if out is not None:
            report[name] = out
            chosen[name] = out["best"]
    configs_dir.mkdir(parents=True, exist_ok=True)
    write_text(target, tuned_toml(source, base, chosen, config.feedback))
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text(
        out_dir / "sweep.json",
        json.dumps(
            {
                "command": ["python", "experiments/tune.py", *argv],
                **environment_info(),
                "config": config.to_dict(),
                "tuning_seed": config.seed + TUNING_SEED_OFFSET,
                "runs_per_point": args.runs_per_point,
                "grids": {**GRIDS, **grids},
                "learners": report,
            },
            indent=2,
        ),
    )
    print(f"wrote {target} and {out_dir / 'sweep.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
