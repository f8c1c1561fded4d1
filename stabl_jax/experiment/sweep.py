"""``stabl-jax sweep``: a grid over learners' params, their static options and the environment's
numbers; one compiled program per learner and static option, every point on the same draws."""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import functools
import io
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import metrics, simulate
from stabl_jax.experiment import checkpoints, files, plots, tables
from stabl_jax.experiment.configs import ConfigError
from stabl_jax.experiment.identity import experiment_identity
from stabl_jax.experiment.kinds import load_config
from stabl_jax.experiment.kinds.base import MAX_SEED, PLOTS_BYTES, Resources, tree_bytes
from stabl_jax.experiment.provenance import environment_info
from stabl_jax.experiment.results import CHECKPOINT_DIR, ResultsFolder
from stabl_jax.experiment.tables import clean
from stabl_jax.registry import LEARNERS
from stabl_jax.simulate import SimOptions, env_params_grid

#: ``LEARNER.FIELD=VALUES``.
GRID_FORM = "LEARNER.FIELD=V1,V2,... or LEARNER.FIELD=2**A..2**B"
#: ``--grid env.FIELD=...`` sweeps a number of the environment, for every learner.
ENV = "env"
#: A TOML key written bare; any other key is written quoted.
BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclasses.dataclass(frozen=True)
class Grid:
    """One learner's sweep: its fields and the product of their values.

    Attributes:
      learner: the learner's name in the config.
      fields, values: the swept ``Params`` fields (``--grid`` order), and per field its values.
    """

    learner: str
    fields: tuple[str, ...]
    values: tuple[tuple[float, ...], ...]

    @property
    def points(self) -> list[tuple[float, ...]]:
        """The grid's ``P`` points, the last field varying fastest."""
        return list(itertools.product(*self.values))

    def on_edge(self, point: Sequence[float]) -> list[str]:
        """The grid edges ``point`` sits on (``"upper edge of lr_scale"``)."""
        edges = []
        for field, values, x in zip(self.fields, self.values, point, strict=True):
            low, high = min(values), max(values)
            if len(values) > 1 and x == high:
                edges.append(f"upper edge of {field}")
            elif len(values) > 1 and x == low and low != 0:
                edges.append(f"lower edge of {field}")
        return edges


def parse_values(text: str, values: str) -> tuple[float, ...]:
    """``V1,V2,...`` or ``2**A..2**B`` as numbers; ``ConfigError`` naming ``text``."""
    power = re.fullmatch(r"2\*\*(-?\d+)\.\.2\*\*(-?\d+)", values.strip())
    if power:
        grid = tuple(2.0**k for k in range(int(power[1]), int(power[2]) + 1))
    else:
        try:
            grid = tuple(float(v) for v in values.split(",") if v.strip())
        except ValueError:
            raise ConfigError(
                f"--grid {text}: the values must be numbers V1,V2,... or 2**A..2**B"
            ) from None
    if not grid:
        raise ConfigError(f"--grid {text}: the grid is empty; give values, e.g. {GRID_FORM}")
    twice = sorted({v for v in grid if grid.count(v) > 1})
    if twice:
        raise ConfigError(f"--grid {text}: {twice[0]:g} is given twice; give each value once")
    return grid


def parse_grids(texts: Sequence[str]) -> dict[str, dict[str, tuple[float, ...]]]:
    """Every ``--grid LEARNER.FIELD=VALUES`` as ``{learner: {field: values}}``."""
    if not texts:
        raise ConfigError(f"the grid is empty: give at least one --grid {GRID_FORM}")
    grids: dict[str, dict[str, tuple[float, ...]]] = {}
    for text in texts:
        target, sep, values = text.partition("=")
        learner, dot, field = target.strip().partition(".")
        if not sep or not dot or not learner or not field:
            raise ConfigError(f"--grid {text!r}: expected {GRID_FORM}")
        if field in grids.get(learner, {}):
            raise ConfigError(f"--grid {learner}.{field} is given twice: give one grid per field")
        grids.setdefault(learner, {})[field] = parse_values(text, values)
    return grids


def check_grids(config: Any, grids: Mapping[str, Mapping[str, Sequence[float]]]) -> list[Grid]:
    """The grids of ``config``'s learners; an ``env`` grid joins every learner's grid.

    Raises:
      ConfigError: an unknown learner or one not in the config, a field that is neither in its
        ``Params`` nor a static number of it, a value outside the field's range, or an
        environment field that is not one traced number.
    """
    grids = dict(grids)
    env_fields = _check_env_grid(config, grids.pop(ENV, {}))
    checked = []
    for name in config.learners if env_fields else ():
        grids.setdefault(name, {})
    for name, fields in grids.items():
        learners = list(config.learners)
        if name in LEARNERS and name not in learners:
            raise ConfigError(
                f"--grid {name}: learner {name!r} is not in {config.name}'s learners "
                f"{learners}; add it with --set 'learners=[..., \"{name}\"]'"
            )
        if name not in learners:
            raise ConfigError(
                f"--grid {name}: unknown learner {name!r}; the config's learners are "
                f"{learners} (stabl-jax list names every learner)"
            )
        learner = config.make_learner(name)
        for field, values in fields.items():
            _check_learner_field(config, learner, name, field, values)
        fields = {**fields, **env_fields}
        checked.append(Grid(name, tuple(fields), tuple(tuple(v) for v in fields.values())))
    return checked


def _check_learner_field(
    config: Any, learner: Any, name: str, field: str, values: Sequence[float]
) -> None:
    """``field`` is a ``Params`` field holding ``values``, or a static number of ``learner``
    (not a size the config sets) whose constructor accepts each value."""
    allowed = list(getattr(learner.default_params, "__dataclass_fields__", ()))
    if field in allowed:
        bounds = learner.param_bounds.get(field)
        if bounds is None:
            return
        holds = bounds.holds(np.asarray(values, np.dtype(learner.float_dtype)))
        if not bool(np.all(holds)):
            outside = [f"{v:g}" for v, ok in zip(values, holds, strict=True) if not ok]
            raise ConfigError(
                f"--grid {name}.{field}: {', '.join(outside)} outside {name}'s range "
                f"{bounds} of {field}; give values inside it"
            )
        return
    static = static_options(config, learner)
    if field not in static:
        raise ConfigError(
            f"--grid {name}.{field}: {name}'s Params has no field {field!r} and it is no "
            f"static number of {name}; its Params fields are {allowed or 'none'}, its static "
            f"numbers {static or 'none'}"
        )
    for value in values:
        try:
            swept_learner(config, name, {field: value})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--grid {name}.{field}={value:g}: {exc}") from None


def static_options(config: Any, learner: Any) -> list[str]:
    """``learner``'s options outside its ``Params`` holding one number that the config does
    not set as a size (``window``, ``num_changes``...): one simulation per value, a program of
    its own for an option of the learner's identity (``window``), one shared program for a
    traced one (``compare=False``: ``num_changes``, which sets only defaults)."""
    sizes = {"horizon", *config.learner_sizes()}
    return [
        f.name
        for f in dataclasses.fields(learner)
        if f.name not in sizes
        and isinstance(getattr(learner, f.name), (int, float))
        and not isinstance(getattr(learner, f.name), bool)
    ]


def static_values(learner: Any, values: Mapping[str, float]) -> dict[str, Any]:
    """``values`` of ``learner``'s static options, an integer field's as integers (integral
    values only)."""
    cast = {}
    for field, value in values.items():
        if isinstance(getattr(learner, field), int):
            if not float(value).is_integer():
                raise ValueError(f"{field} takes integers, got {value:g}")
            value = int(value)
        cast[field] = value
    return cast


def swept_learner(config: Any, name: str, values: Mapping[str, float]) -> Any:
    """Learner ``name`` of ``config`` built anew with the static ``values``."""
    return config.build_learner(name, **static_values(config.make_learner(name), values))


def _check_env_grid(config: Any, fields: Mapping[str, Sequence[float]]) -> dict[str, Any]:
    """The ``env`` grid: at most one traced number of the environment, each value accepted by
    its constructor; as ``{"env.FIELD": values}``."""
    if not fields:
        return {}
    env = config.make_env()
    numbers = [
        f.name
        for f in dataclasses.fields(env)
        if not f.compare and isinstance(getattr(env, f.name), (int, float))
    ]
    if len(fields) > 1:
        raise ConfigError(f"--grid env: one environment number per sweep, got {list(fields)}")
    ((field, values),) = fields.items()
    if field not in numbers:
        raise ConfigError(
            f"--grid env.{field}: {type(env).__name__}'s traced numbers are {numbers or 'none'}; "
            f"a field that sets a shape, or a tuple such as change points, is one run per value "
            f"(--set env.{field}=...; from Python: stabl_jax.env_params_grid)"
        )
    for value in values:
        try:
            dataclasses.replace(env, **{field: value})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--grid env.{field}={value:g}: {exc}") from None
    return {f"{ENV}.{field}": values}


def sweep_rewards(
    config: Any, grid: Grid, runs: int, seed: int, progress: bool
) -> tuple[np.ndarray, int]:
    """``(P, runs)`` mean reward of every run of every point of ``grid``, and the number of XLA
    programs compiled for it.

    Every point's runs use the keys of runs ``0 .. runs - 1`` (common random numbers). One
    simulation per combination of static options: the grid's ``Params`` fields and the
    environment's number are traced, so their points are rows of that one program.
    """
    learner, env, key = config.make_learner(grid.learner), config.make_env(), jax.random.key(seed)
    static = [f for f in grid.fields if f in static_options(config, learner)]
    groups: dict[tuple[float, ...], list[int]] = {}
    for j, point in enumerate(grid.points):
        fixed = tuple(x for f, x in zip(grid.fields, point, strict=True) if f in static)
        groups.setdefault(fixed, []).append(j)
    reward = np.empty((len(grid.points), runs))
    with compile_count() as compiled:
        for fixed, rows in groups.items():
            one = swept_learner(config, grid.learner, dict(zip(static, fixed, strict=True)))
            reward[rows] = _point_rewards(config, grid, one, env, key, rows, runs, progress)
    return reward, len(compiled)


def _point_rewards(
    config: Any, grid: Grid, learner: Any, env: Any, key: jax.Array, rows: list[int],
    runs: int, progress: bool,
) -> np.ndarray:  # fmt: skip
    """``(len(rows), runs)`` rewards of the grid's points ``rows``, which share ``learner``'s
    static options: one simulation, the traced fields per run."""
    points = [grid.points[j] for j in rows]
    params, env_params = config.learner_params(learner, grid.learner), None
    traced = dataclasses.fields(params) if dataclasses.is_dataclass(params) else ()
    per_run = {}
    for i, field in enumerate(grid.fields):
        column = [point[i] for point in points]
        if field.startswith(f"{ENV}."):
            env_params = env_params_grid(env, key, runs, field[len(ENV) + 1 :], column)
        elif field in {f.name for f in traced}:
            dtype = np.dtype(learner.float_dtype)
            per_run[field] = jnp.repeat(jnp.asarray(column, dtype), runs)
    result = simulate(
        learner,
        env,
        key,
        len(points) * runs,
        params=params.replace(**per_run) if per_run else params,
        env_params=env_params,
        traces=("loss",),
        options=SimOptions(progress=progress, runs_per_point=runs),
    )
    reward = 1.0 - np.asarray(result.loss, np.float64).mean(axis=1)
    return reward.reshape(len(points), runs)


@contextlib.contextmanager
def compile_count() -> Iterator[list[str]]:
    """The XLA programs compiled inside the block, one entry each (``jax.monitoring``)."""
    compiled: list[str] = []

    def listen(event: str, duration_secs: float, **kwargs: Any) -> None:
        del duration_secs, kwargs
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield compiled
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def point_rows(grid: Grid, reward: np.ndarray) -> list[dict[str, Any]]:
    """Per point of ``grid``: its values, mean objective and t 95% half-width over runs."""
    mean, half = metrics.mean_ci(reward, axis=1)
    return [
        {**dict(zip(grid.fields, point, strict=True)), "mean": float(m), "ci95": float(h)}
        for point, m, h in zip(grid.points, mean, half, strict=True)
    ]


def best_of(grid: Grid, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The row of the largest mean, with its ``params`` and the edges it sits on."""
    at = int(np.argmax([-math.inf if math.isnan(r["mean"]) else r["mean"] for r in rows]))
    point = grid.points[at]
    edges = grid.on_edge(point)
    return {
        "index": at,
        "params": dict(zip(grid.fields, point, strict=True)),
        **{k: rows[at][k] for k in ("mean", "ci95")},
        "on_edge": bool(edges),
        "edges": edges,
    }


def memory_bytes(config: Any, grid: Grid, runs: int) -> int:
    """Peak host memory of ``grid``'s sweep, every array counted per run: the loop state twice
    (the scan's carry in and out), the environment's params, and the ``(T,)`` loss trace three
    times (float32 on the device and on the host, float64 for the mean)."""
    learner = config.make_learner(grid.learner)
    key = jax.random.key(0)
    state = tree_bytes(jax.eval_shape(learner.init, key))
    env_state = tree_bytes(jax.eval_shape(config.make_env().sample_params, key))
    return len(grid.points) * runs * (2 * state + env_state + 16 * int(config.horizon))


def _toml_key(key: str) -> str:
    """``key`` bare where TOML allows it, else quoted (``"dts:DiscountedTS"``)."""
    return key if BARE_KEY.fullmatch(key) else json.dumps(key)


def _toml_table(prefix: str, table: Mapping[str, Any]) -> list[str]:
    """``table`` as TOML lines: its values, then its sub-tables as ``[prefix.key]``.

    ``None`` values (TOML has no null) are left out: they mean the key's default.
    """
    lines = [
        f"{_toml_key(k)} = {json.dumps(v)}"
        for k, v in table.items()
        if v is not None and not isinstance(v, Mapping)
    ]
    for key, value in table.items():
        if isinstance(value, Mapping):
            name = f"{prefix}.{_toml_key(key)}" if prefix else _toml_key(key)
            lines += ["", f"[{name}]", *_toml_table(name, value)]
    return lines


def tuned_toml(
    config: Any, chosen: Mapping[str, Mapping[str, float]], tune_seed: int, runs: int
) -> str:
    """The config (``--set`` applied) with the chosen points in ``[params.<learner>]`` (a static
    option's in ``[learner_options.<learner>]``).

    Args:
      config: the swept config (its ``runs`` may be the sweep's ``--runs``).
      chosen: per learner, the chosen value of each swept field.
      tune_seed: the seed the points were chosen on.
      runs: the config's own run count, written as ``runs`` (not the sweep's runs a point).
    """
    skipped = ("source", "overrides")
    doc = {k: v for k, v in config.to_dict().items() if k not in skipped}
    doc["name"] = f"{config.name}_tuned"
    doc["runs"] = runs
    doc["params"] = params = {k: dict(v) for k, v in doc.get("params", {}).items()}
    options = {k: dict(v) for k, v in doc.get("learner_options", {}).items()}
    for name, values in chosen.items():
        learner = config.make_learner(name)
        static = static_options(config, learner)
        fixed = static_values(learner, {k: v for k, v in values.items() if k in static})
        traced = {k: v for k, v in values.items() if k not in static}
        if traced:
            params[name] = {**params.get(name, {}), **traced}
        if len(traced) < len(values):
            options[name] = {
                **options.get(name, {}),
                **{k: fixed[k] for k in static if k in values},
            }
    if options:
        doc["learner_options"] = options
    head = (
        f"# Params chosen by stabl-jax sweep on seed {tune_seed} "
        f"({config.runs} runs a point; reported on seed {config.seed})."
    )
    return "\n".join([head, *_toml_table("", doc)]) + "\n"


def draw(grid: Grid, report: Mapping[str, Any], seeds: Sequence[int], path: Path) -> Path:
    """A heatmap (two fields) or a line with a band (one field); three or more fields: no plot.

    It draws the scores on ``seeds[0]``, the seed the point was chosen on, marks the chosen
    point, and says in its title which seed it draws and the chosen point's reported score.
    """
    rows = report.get("tuning_points", report["points"])
    best = report["best"]
    mean = np.asarray([r["mean"] for r in rows])
    half = np.asarray([r["ci95"] for r in rows])
    score = f"mean reward on seed {seeds[0]} (95% interval)"
    reported = f"{best['mean']:.4f} ± {best['ci95']:.4f}"
    if len(seeds) > 1:
        title = (
            f"{grid.learner}: sweep, chosen on tuning seed {seeds[0]} (drawn)\n"
            f"the chosen point's reward on reporting seed {seeds[-1]}: {reported}"
        )
    else:
        title = f"{grid.learner}: sweep on seed {seeds[0]}, best {reported}"
    if len(grid.fields) == 1:
        x = np.asarray(grid.values[0])
        band = plots.Band(grid.learner, grid.learner, x, mean, half)
        chosen = {grid.learner: best["params"][grid.fields[0]]}
        return plots.plot_sensitivity(
            [band], path, title=title, xlabel=grid.fields[0], score=score, chosen=chosen
        )
    if len(grid.fields) == 2:
        shape = (len(grid.values[0]), len(grid.values[1]))  # rows: the first field
        heat = plots.Grid(
            name=grid.learner,
            label=grid.learner,
            xlabel=grid.fields[1],
            ylabel=grid.fields[0],
            x=np.asarray(grid.values[1]),
            y=np.asarray(grid.values[0]),
            mean=mean.reshape(shape),
            half=half.reshape(shape),
            chosen=divmod(best["index"], shape[1]),
        )
        return plots.plot_grids([heat], path, title=title, score=score)
    return path


def write_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Write ``results.csv``: a row per learner and point, floats with 17 significant digits."""
    fields = list(dict.fromkeys(k for r in rows for k in r if k not in ("learner", "seed")))
    columns = ["learner", "seed", *(f for f in fields if f not in ("mean", "ci95")), "mean", "ci95"]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns, restval="")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: repr(v) if isinstance(v, float) else v for k, v in row.items()})
    path.write_text(text.getvalue(), encoding="utf-8", newline="")


def prepare(args: argparse.Namespace) -> tuple[Any, list[Grid], Path]:
    """The config, its grids and the results folder's path, every input checked."""
    config = load_config(args.config, args.overrides, runs=args.runs, seed=args.seed)
    if not hasattr(config, "learner_params"):
        raise ConfigError(
            f"{config.name} is a {config.kind!r} config; stabl-jax sweep runs bandit configs"
        )
    if config.runs < 2:
        raise ConfigError(f"--runs {config.runs}: a 95% interval needs 2 or more runs per point")
    check_tune_seed(args.tune_seed, config.seed)
    grids = check_grids(config, parse_grids(args.grid))
    if args.tune_seed is not None and any(f.startswith(f"{ENV}.") for g in grids for f in g.fields):
        raise ConfigError(
            "--tune-seed with --grid env.*: an environment's numbers are studied, not tuned; "
            "drop --tune-seed"
        )
    if args.out is not None and not args.out.strip():
        raise ConfigError("--out is empty; give a folder name (or leave --out out)")
    out = Path(args.out or Path("results") / f"sweep-{config.name}-seed{config.seed}")
    return config, grids, out


def check_tune_seed(tune_seed: int | None, seed: int) -> None:
    """``--tune-seed``: ``None``, or a seed in ``[0, MAX_SEED]`` other than ``seed``.

    Raises:
      ConfigError: a seed out of range (``jax.random.key`` would keep its low 32 bits only)
        or the reporting seed itself (the reported scores would be the tuning scores).
    """
    if tune_seed is None:
        return
    if not 0 <= tune_seed <= MAX_SEED:
        raise ConfigError(
            f"--tune-seed {tune_seed}: must be an int in [0, {MAX_SEED}]; give a seed in that "
            f"range other than the reporting seed {seed}"
        )
    if tune_seed == seed:
        raise ConfigError(
            f"--tune-seed {tune_seed} is the reporting seed (seed = {seed}): the point would be "
            "scored on the draws it was chosen on; give another --tune-seed (or another --seed)"
        )


def config_runs(args: argparse.Namespace, config: Any) -> int:
    """The config's own ``runs``: ``config.runs`` unless ``--runs`` replaced it."""
    if args.runs is None:
        return int(config.runs)
    return int(load_config(args.config, args.overrides, seed=args.seed).runs)


def sweep_learner(
    grid: Grid, seeds: list[int], rewards: Callable[[int], tuple[np.ndarray, int]]
) -> dict:
    """``grid``'s report: every point's statistics on each of ``seeds`` (``rewards(seed)``:
    ``(P, runs)`` and the programs compiled for them), the best point, and the programs
    compiled in all.

    The best point is chosen on ``seeds[0]`` and scored on ``seeds[-1]``.
    """
    start = time.perf_counter()
    computed = [rewards(s) for s in seeds]
    scored = [point_rows(grid, reward) for reward, _ in computed]
    best = best_of(grid, scored[0])
    if len(seeds) > 1:  # the chosen point's score on the reported seed
        best = {**best, "tuning": {k: best[k] for k in ("mean", "ci95")}}
        best.update({k: scored[-1][best["index"]][k] for k in ("mean", "ci95")})
    return {
        "fields": list(grid.fields),
        "grid": {f: list(v) for f, v in zip(grid.fields, grid.values, strict=True)},
        "points": scored[-1],
        **({"tuning_points": scored[0]} if len(seeds) > 1 else {}),
        "best": best,
        "programs_compiled": sum(compiled for _, compiled in computed),
        "seconds": time.perf_counter() - start,
    }


def say_plan(config: Any, grids: list[Grid], seeds: list[int], final: Path) -> None:
    """What ``--dry-run`` prints: per learner its grid's sizes, runs, seeds and memory."""
    for grid in grids:
        sizes = " x ".join(str(len(v)) for v in grid.values)
        print(
            f"{grid.learner}: {' x '.join(grid.fields)} = {sizes} = {len(grid.points)} points "
            f"x {config.runs} runs x {config.horizon} rounds on seed(s) {seeds}, about "
            f"{tables.byte_size(memory_bytes(config, grid, int(config.runs)))} of memory"
        )
    print(f"dry run: config, grids and {final} checked; nothing computed or written")


def identity(config: Any, grids: list[Grid], seeds: list[int]) -> dict[str, Any]:
    """What must match to resume a sweep: the experiment's identity (config, code, versions),
    the grids and the seeds."""
    sweep = {"grids": [dataclasses.asdict(grid) for grid in grids], "seeds": seeds}
    return json.loads(json.dumps({**experiment_identity(config), "sweep": sweep}))


def resources(config: Any, grids: list[Grid], seeds: list[int]) -> Resources:
    """The memory of the largest grid's program and the disk of every grid's rewards."""
    runs = int(config.runs)
    disk = sum(len(grid.points) * runs * 8 * len(seeds) for grid in grids) + PLOTS_BYTES
    largest = max(grids, key=lambda grid: len(grid.points))
    return Resources(
        memory_bytes=max(memory_bytes(config, grid, runs) for grid in grids),
        disk_bytes=disk,
        size=f"{len(largest.points)} points x {runs} runs x {config.horizon} rounds",
        remedy="lower runs, horizon or the grid's size (--runs, --set horizon=..., --grid)",
    )


def write(
    folder: ResultsFolder,
    config: Any,
    grids: list[Grid],
    seeds: list[int],
    args: argparse.Namespace,
    started: str,
) -> Path:
    """Sweep every grid into ``folder`` (each learner's rewards on each seed checkpointed, and
    taken from the checkpoint when an interrupted sweep left it), write it, print the best."""
    learners = {}
    for grid in grids:
        rewards = functools.partial(_rewards, folder, config, grid, progress=not args.no_progress)
        learners[grid.learner] = report = sweep_learner(grid, seeds, rewards)
        best = report["best"]
        edge = f" (ON THE EDGE: {', '.join(best['edges'])})" if best["on_edge"] else ""
        print(
            f"{grid.learner}: best {best['params']} mean reward {best['mean']:.4f} ± "
            f"{best['ci95']:.4f} over {config.runs} runs{edge}"
        )
        draw(grid, report, seeds, folder.partial / f"sweep_{grid.learner}.png")
    summary = {
        "command": ["stabl-jax", *getattr(args, "argv", [])],
        "started": started,
        **environment_info(),
        "config": config.to_dict(),
        "seed": config.seed,
        "tune_seed": args.tune_seed,
        "runs_per_point": int(config.runs),
        "objective": "mean reward 1 - l_t(x_t) over rounds, Student's t 95% interval",
        "learners": learners,
    }
    text = json.dumps(clean(summary), indent=2, allow_nan=False)
    files.write_text(folder.partial / "summary.json", text + "\n")
    rows = [
        {"learner": name, "seed": config.seed, **row}
        for name, report in learners.items()
        for row in report["points"]
    ]
    write_rows(rows, folder.partial / tables.CSV_NAME)
    if args.tune_seed is not None:
        chosen = {name: report["best"]["params"] for name, report in learners.items()}
        toml = tuned_toml(config, chosen, args.tune_seed, config_runs(args, config))
        files.write_text(folder.partial / "tuned.toml", toml)
    return folder.commit()


def _rewards(
    folder: ResultsFolder, config: Any, grid: Grid, seed: int, *, progress: bool
) -> tuple[np.ndarray, int]:
    """``(P, runs)`` rewards of ``grid`` on ``seed`` and the programs compiled for them: from
    its checkpoint, or computed and checkpointed (atomically, with its digest)."""
    path = folder.partial / CHECKPOINT_DIR / f"{grid.learner}-seed{seed}" / "rewards.npz"
    if path.is_file():
        saved = checkpoints.load_arrays(path)
        return saved["reward"], int(saved["compiled"])
    reward, compiled = sweep_rewards(config, grid, int(config.runs), seed, progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoints.save_arrays(path, {"reward": reward, "compiled": np.asarray(compiled)})
    return reward, compiled
