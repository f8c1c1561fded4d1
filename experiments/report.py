"""Markdown tables from results folders (what EXPERIMENTS.md quotes).

    python experiments/report.py results/expert_advice_equal-theory-loss [...]

Reads each folder's ``summary.json`` (no Python objects are unpickled) and prints one table per
folder: learner | queries/round | step-size scales | mean reward | per-segment reward | SA(L)
(expected loss) at three window lengths | probability on the best arm | muted meta updates.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _pm(stat: dict, index: int | None = None, digits: int = 3) -> str:
    mean, half = stat["mean"], stat["ci95"]
    if index is not None:
        mean, half = mean[index], half[index]
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def bco_table(folder: Path, summary: dict, windows: tuple[int, ...]) -> str:
    """Table of a ``kind = "bco"`` results folder (SA(L) of the suffered loss)."""
    lines = [
        f"`{folder}` — {summary['description']} ({summary['runs']} runs, seed {summary['seed']})",
        "",
        "| learner | q | mean loss | " + " | ".join(f"SA({w})" for w in windows) + " | muted |",
        "|---|---|---|" + "---|" * len(windows) + "---|",
    ]
    for name, entry in summary["learners"].items():
        sa = entry["adaptive_regret"]
        lengths = sa["window_lengths"]
        cells = [_pm(sa["sa"], lengths.index(w), 1) if w in lengths else "–" for w in windows]
        muted = entry.get("num_muted")
        lines.append(
            f"| {name} | {entry['num_queries']} | {_pm(entry['mean_loss'], digits=4)} | "
            + " | ".join(cells)
            + f" | {muted if muted is not None else '–'} |"
        )
    return "\n".join(lines)


def hpo_table(folder: Path, summary: dict) -> str:
    """Table of a ``kind = "hpo"`` results folder: per learner, the profile score and the
    score against Uniform over all problems (at half and full budget), then per problem the
    final mean log10 gap and the score against Uniform in each half of the budget."""
    cfg = summary["config"]
    problems = summary["problems"]
    learners = cfg["learners"]
    lines = [
        f"`{folder}` — {cfg['description']} ({len(problems)} problems x {cfg['runs']} repeats, "
        f"seed {cfg['seed']}, feedback={cfg['feedback']})",
        "",
        "| learner | profile score (N/2) | profile score (N) | vs Uniform (N/2) | vs Uniform (N) |",
        "|---|---|---|---|---|",
    ]
    for name in learners:
        lines.append(
            f"| {name} | {summary['profile_scores_half_budget'][name]:.3f} | "
            f"{summary['profile_scores'][name]:.3f} | "
            f"{summary['score_vs_uniform_half_budget'].get(name, 0.0):+.3f} | "
            f"{summary['score_vs_uniform'].get(name, 0.0):+.3f} |"
        )
    lines += [
        "",
        "| problem | "
        + " | ".join(f"{n}: log10 gap (vs Unif. 1st/2nd half)" for n in learners)
        + " |",
        "|---|" + "---|" * len(learners),
    ]
    for key, rows in problems.items():
        cells = []
        for name in learners:
            r = rows[name]
            ci = r["final_log10_gap_ci"]
            gap = f"{r['final_log10_gap']:.2f}" + (f" ± {ci:.2f}" if ci is not None else "")
            if name != "uniform" and "score_vs_uniform_first_half" in r:
                gap += (
                    f" ({r['score_vs_uniform_first_half']:+.2f}/"
                    f"{r['score_vs_uniform_second_half']:+.2f})"
                )
            cells.append(gap)
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(folder: Path, windows: tuple[int, ...]) -> str:
    summary = json.loads((folder / "summary.json").read_text())
    if summary.get("kind") == "bco":
        return bco_table(folder, summary, windows)
    if summary.get("kind") == "hpo":
        return hpo_table(folder, summary)
    lines = [
        f"`{folder}` — {summary['description']} ({summary['runs']} runs, seed "
        f"{summary['seed']}, feedback={summary['config']['feedback']})",
        "",
        "| learner | q | scales | mean reward | reward per segment | "
        + " | ".join(f"SA({w})" for w in windows)
        + " | P(best arm) | muted |",
        "|---|---|---|---|---|" + "---|" * len(windows) + "---|---|",
    ]
    for name, entry in summary["learners"].items():
        sa = entry["adaptive_regret"]
        lengths = sa["window_lengths"]
        cells = [_pm(sa["expected"], lengths.index(w), 1) if w in lengths else "–" for w in windows]
        segments = entry["segment_reward"]
        seg = ", ".join(f"{m:.3f}" for m in segments["mean"])
        params = ", ".join(f"{k}={v:g}" for k, v in entry["params"].items()) or "–"
        muted = entry["num_muted"] if entry["num_muted"] is not None else "–"
        lines.append(
            f"| {name} | {entry['num_queries']} | {params} | {_pm(entry['mean_reward'])} | "
            f"{seg} | " + " | ".join(cells) + f" | {_pm(entry['prob_best']['overall'])} | "
            f"{muted} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--windows", default="256,1024,4096")
    args = parser.parse_args(argv)
    windows = tuple(int(w) for w in args.windows.split(","))
    for folder in args.folders:
        print(table(folder, windows))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
