"""Step-size sensitivity plots from the results folders of ``stabl-jax sweep``.

    python experiments/sensitivity.py SWEEPS_DIR OUT_DIR [--overwrite]

Reads every ``SWEEPS_DIR/NAME/summary.json`` (``stabl-jax sweep ... --out SWEEPS_DIR/NAME``) and
writes ``NAME_sensitivity.png`` (per two-param learner a heatmap of the mean reward on the seed
the point was chosen on, it boxed, the points whose interval overlaps it dotted) and
``NAME_sensitivity_1d.png`` (one-param learners); prints each chosen point, edge and overlaps.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from _cli import add_overwrite, check_figures, need_runs

from stabl_jax.experiment import plots
from stabl_jax.experiment.arguments import Parser
from stabl_jax.experiment.outputs import mark_folder
from stabl_jax.experiment.tables import read_json_object

SCORE = "mean reward 1 - l_t(x_t)"


def _rows(entry: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(points (P, F), mean (P,), ci95 (P,))`` of an entry, on the seed its best was chosen on."""
    rows = entry.get("tuning_points", entry["points"])
    points = np.asarray([[r[f] for f in entry["fields"]] for r in rows], np.float64)
    return points, np.asarray([r["mean"] for r in rows]), np.asarray([r["ci95"] for r in rows])


def grid_of(name: str, entry: dict[str, Any]) -> plots.Grid:
    """The :class:`~stabl_jax.experiment.plots.Grid` of a two-param learner's sweep entry."""
    fx, fy = entry["fields"]
    points, score, ci95 = _rows(entry)
    x, y = np.unique(points[:, 0]), np.unique(points[:, 1])
    mean = np.full((y.size, x.size), np.nan)
    half = np.full_like(mean, np.nan)
    cols, rows = np.searchsorted(x, points[:, 0]), np.searchsorted(y, points[:, 1])
    mean[rows, cols], half[rows, cols] = score, ci95
    best = entry["best"]["params"]
    chosen = (int(np.searchsorted(y, best[fy])), int(np.searchsorted(x, best[fx])))
    return plots.Grid(name, plots.label(name), fx, fy, x, y, mean, half, chosen)


def _describe(name: str, mean: np.ndarray, half: np.ndarray, at: tuple, edges: list) -> str:
    near = int((mean + half >= mean[at] - half[at]).sum()) - 1
    return (
        f"  {name:20s} best {mean[at]:.4f} ± {half[at]:.4f}, {near:2d} other points' "
        f"intervals overlap it; {', '.join(edges) or 'interior'}:"
    )


def read_sweep(file: Path) -> dict[str, Any]:
    """``file``, or ``ValueError``: not a ``stabl-jax sweep`` summary, or of one run a point."""
    sweep = read_json_object(file, "write it again with stabl-jax sweep --out")
    missing = [k for k in ("config", "seed", "runs_per_point", "learners") if k not in sweep]
    if missing:
        raise ValueError(f"{file} is not a summary.json of stabl-jax sweep: it has no {missing}")
    need_runs(file, sweep["runs_per_point"], what="a 95% band", flag="stabl-jax sweep --runs")
    return sweep


def figure_names(sweep_file: Path) -> list[str]:
    """The PNGs :func:`sensitivity` writes for one sweep (module docstring)."""
    counts = {len(e["fields"]) for e in read_sweep(sweep_file)["learners"].values()}
    stem = sweep_file.parent.name
    return [f"{stem}_sensitivity{end}.png" for end, n in (("", 2), ("_1d", 1)) if n in counts]


def _band(name: str, entry: dict[str, Any], chosen: dict[str, float]) -> plots.Band:
    """A one-param learner's line (printing its chosen point); ``chosen`` gets its value."""
    (field,) = entry["fields"]
    points, mean, half = _rows(entry)
    x, at = points[:, 0], (int(np.argmax(mean)),)
    chosen[name] = entry["best"]["params"][field]
    edges = [
        f"{end} edge of {field}"
        for end, i in (("lower", 0), ("upper", -1))
        if x[at] == x[i] and x[at] != 0
    ]
    print(_describe(name, mean, half, at, edges) + f" {entry['best']['params']}")
    return plots.Band(name, f"{plots.label(name)} ({field})", x, mean, half)


def sensitivity(sweep_file: Path, out: Path) -> list[Path]:
    """Write the sensitivity PNGs of one sweep (:func:`figure_names`), print its points."""
    sweep = read_sweep(sweep_file)
    config, stem = sweep["config"], sweep_file.parent.name
    seed = sweep["seed"] if sweep.get("tune_seed") is None else sweep["tune_seed"]
    setting = (
        f"{config['name']}, feedback={config['feedback']}, {sweep['runs_per_point']} runs per "
        f"point on seed {seed}"
    )
    print(f"{stem}: {setting}")
    grids, bands = [], []
    chosen: dict[str, float] = {}
    for name, entry in sweep["learners"].items():
        if len(entry["fields"]) == 2:
            grid = grid_of(name, entry)
            edges = plots.grid_edges(grid)
            print(
                _describe(name, grid.mean, grid.half, grid.chosen, edges), entry["best"]["params"]
            )
            grids.append(grid)
        elif len(entry["fields"]) == 1:
            bands.append(_band(name, entry, chosen))
        else:
            print(f"  {name}: {len(entry['fields'])} swept params, not drawn")
    out.mkdir(parents=True, exist_ok=True)
    title, written = f"Step-size sensitivity: {setting}", []
    if grids:
        path = out / f"{stem}_sensitivity.png"
        written.append(plots.plot_grids(grids, path, title=title, score=SCORE))
    if bands:
        path, score = out / f"{stem}_sensitivity_1d.png", f"{SCORE}, 95% band"
        kwargs = dict(title=title, xlabel="scale (log axis)", score=score)
        written.append(plots.plot_sensitivity(bands, path, chosen=chosen, **kwargs))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", type=Path, help="folder of NAME/summary.json")
    parser.add_argument("out", type=Path, help="where the PNGs go")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    files = sorted(args.sweeps.glob("*/summary.json"))
    if not files:
        parser.error(
            f"{args.sweeps}: no */summary.json to draw; give the folder that holds them "
            "(stabl-jax sweep ... --out SWEEPS_DIR/NAME writes SWEEPS_DIR/NAME/summary.json)"
        )
    try:  # before any is drawn: every sweep read (figure_names), a user's PNG never replaced
        names = [n for f in files for n in figure_names(f)]
    except ValueError as exc:
        parser.error(str(exc))
    check_figures(parser, args.out, names, "OUT_DIR", args.overwrite)
    written = [path for f in files for path in sensitivity(f, args.out)]
    mark_folder(args.out)  # its figures: replaced by the next run
    print(f"wrote {len(written)} PNGs into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
