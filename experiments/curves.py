"""Regret against T and SA(L) against L for results folders of the expert-advice configs.

    python experiments/curves.py RESULTS_DIR OUT_DIR [--folders NAME ...] [--overwrite]

Reads each ``RESULTS_DIR/NAME`` (default: the Figure 1 folders
``expert_advice_{equal,random}-{theory,tuned}-{loss,reward}``; a missing one skipped; a
``NAME-naive`` beside it, of the same draws, adds its learners) and writes means over runs with
the Student-t 95% band: ``NAME_regret.png``, the pseudo-regret ``R(t) = bonus * sum_{s <= t} (1 -
p_s(i*_s))`` to each segment's best arm ``i*_s`` (``bonus`` below every other arm), and
``NAME_sa.png``, SA(L) of the expected loss against ``L``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from _cli import add_overwrite, check_figures, need_runs, unpaired

from stabl_jax import metrics
from stabl_jax.experiment import load_results, plots
from stabl_jax.experiment.arguments import Distinct, Parser
from stabl_jax.experiment.outputs import mark_folder
from stabl_jax.experiment.tables import TracesDamaged

FIGURE1 = tuple(
    f"expert_advice_{segments}-{steps}-{feedback}"
    for segments in ("equal", "random")
    for steps in ("theory", "tuned")
    for feedback in ("loss", "reward")
)
COMPANION = "-naive"  # a folder with learners simulated apart (experiments/docs_numbers.sh)


#: One learner of a folder: its summary entry, the folder's traces, the legend note.
Entry = tuple[Mapping[str, Any], Mapping[str, np.ndarray], str]


def folder_learners(folder: Path) -> tuple[Mapping[str, Any], dict[str, Entry]]:
    """The summary and ``{learner: (entry, traces, note)}``, the ``-naive`` folder's after its
    own; ``ValueError`` without ``bonus``, a ``prob_best`` trace or a paired companion."""
    main = load_results(folder)
    env = main.summary["env"]
    if "bonus" not in env:
        raise ValueError(
            f"{folder}: env {env.get('name')!r} has no 'bonus'; the pseudo-regret here is for "
            "the expert-advice environment (best arm's mean loss 'bonus' below the others')"
        )
    found: dict[str, Entry] = {
        name: (main.summary["learners"][name], main.traces, "") for name in main.learners
    }
    extra = folder.with_name(folder.name + COMPANION)
    if extra.is_dir():
        other = load_results(extra)
        points = main.traces["env/change_points"]
        feedback = (s.get("config", {}).get("feedback") for s in (other.summary, main.summary))
        if (
            not np.array_equal(other.traces["env/change_points"], points)
            or unpaired(main.summary, other.summary)
            or len(set(feedback)) > 1
        ):
            raise ValueError(
                f"{extra} is not paired with {folder} (seed, runs, environment, feedback or "
                "draws differ)"
            )
        note = ", validation off" if "validate=False" in other.summary.get("command", []) else ""
        for name in other.learners:
            found.setdefault(name, (other.summary["learners"][name], other.traces, note))
    for name, (_, traces, _) in found.items():
        if f"{name}/prob_best" not in traces:
            raise ValueError(
                f"{folder}: no {name}/prob_best trace; rerun it with --set 'save_traces=\"all\"'"
            )
    order = list(plots.LABELS)  # one learner, one color, in every figure
    found = dict(sorted(found.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else 99))
    return main.summary, found


def pseudo_regret(prob_best: np.ndarray, bonus: float) -> np.ndarray:
    """``(R, T)`` float64 pseudo-regret (module docstring) of the best arm's probabilities."""
    return bonus * np.cumsum(1.0 - np.asarray(prob_best, np.float64), axis=1)


def _label(name: str, entry: Mapping[str, Any], note: str) -> str:
    queries = entry["num_queries"]
    text = f"{plots.label(name)} ({queries} {'query' if queries == 1 else 'queries'}/round)"
    return text + note


def curves(
    folder: Path, out: Path, found: tuple[Mapping[str, Any], dict[str, Entry]]
) -> list[Path]:
    """Write ``NAME_regret.png`` and ``NAME_sa.png`` of a folder; print R(T) and SA(L_max)."""
    summary, learners = found
    env = summary["env"]
    regret, sa = [], []
    print(f"{folder.name} ({summary['runs']} runs): R(T) and SA(L_max) of the expected loss")
    for name, (entry, traces, note) in learners.items():
        text = _label(name, entry, note)
        mean, half = metrics.mean_ci(pseudo_regret(traces[f"{name}/prob_best"], env["bonus"]))
        rounds = np.arange(1, mean.shape[0] + 1)
        regret.append(plots.Band(name, text, rounds, mean, half))
        sa_mean, sa_half = metrics.mean_ci(traces[f"{name}/sa_expected"])
        lengths = np.asarray(traces["sa_window_lengths"])
        sa.append(plots.Band(name, text, lengths, sa_mean, sa_half))
        print(
            f"  {name:20s} R(T) {mean[-1]:8.1f} ± {half[-1]:5.1f}   "
            f"SA({lengths[-1]}) {sa_mean[-1]:8.1f} ± {sa_half[-1]:5.1f}"
        )
    points = np.asarray(traces["env/change_points"])
    fixed = points[0].tolist() if (points == points[:1]).all() else []
    setting = (
        f"{env['name']}, N={env['num_arms']}, T={summary['horizon']}, {summary['runs']} runs, "
        f"feedback={summary['config']['feedback']}; mean with 95% band"
    )
    name = summary["name"]
    out.mkdir(parents=True, exist_ok=True)
    return [
        plots.plot_cumulative_regret(
            regret,
            out / f"{folder.name}_regret.png",
            title=f"{name}: cumulative pseudo-regret to each segment's best arm\n({setting})",
            change_points=fixed,
        ),
        plots.plot_adaptive_regret(
            sa,
            out / f"{folder.name}_sa.png",
            title=f"{name}: SA(L) of the expected loss p_t·l_t\n({setting})",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the folder holding the results folders")
    parser.add_argument("out", type=Path, help="where the PNGs go")
    parser.add_argument("--folders", nargs="+", action=Distinct, default=[*FIGURE1], metavar="NAME")
    add_overwrite(parser)
    args = parser.parse_args(argv)
    folders = []
    for name in args.folders:
        folder = args.results / name
        if (folder / "summary.json").is_file():
            folders.append(folder)
        else:
            print(f"{folder}: no summary.json, skipped")
    if not folders:
        parser.error(
            f"no results folder to draw: none of {', '.join(args.folders)} under "
            f"{args.results} has a summary.json; give the folder that holds them, or name "
            "yours with --folders"
        )
    found = {}
    try:  # every folder checked before any figure is drawn; folder_learners opens each
        for folder in folders:  # traces.npz (one cut short or not an .npz is named there)
            found[folder] = folder_learners(folder)
            need_runs(folder, found[folder][0]["runs"], what="a 95% band")  # bands over runs
    except ValueError as exc:
        parser.error(str(exc))
    names = [f"{f.name}_{kind}.png" for f in folders for kind in ("regret", "sa")]
    check_figures(parser, args.out, names, "OUT_DIR", args.overwrite)
    written = []
    try:
        for folder in folders:
            written += curves(folder, args.out, found.pop(folder))  # its arrays freed
    except TracesDamaged as exc:  # an array of a traces.npz damaged
        parser.error(str(exc))
    mark_folder(args.out)  # its figures: replaced by the next run
    print(f"wrote {len(written)} PNGs into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
