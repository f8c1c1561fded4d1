"""Paired differences of an algorithm-selection results folder (``kind = "hpo"``).

For every learner against a baseline (default: Uniform), the difference in final
``log10(best f - f_opt)`` (or after a ``--fraction`` of the budget) per (problem, repeat)
pair (all learners share the repeats), mean ± 95% Student's t interval, over all problems
and per problem (up to four); and the range of the arms' shares of the evaluations relative
to ``1/A``.

    python experiments/hpo_paired.py results/hpo_bbob_suite [--baseline stabl] [--fraction 0.5]
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from stabl_jax.hpo_metrics import GAP_FLOOR
from stabl_jax.io.results import read_summary, read_traces


def t_interval(x: np.ndarray) -> tuple[float, float]:
    """Mean and 95% Student's t half-width of ``x`` (``t_{n-1}``)."""
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return float(x.mean()), float(half)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder")
    parser.add_argument("--baseline", default="uniform")
    parser.add_argument("--fraction", type=float, default=1.0, help="of the budget (0, 1]")
    args = parser.parse_args()
    summary, traces = read_summary(args.folder), read_traces(args.folder)
    learners, problems = summary["config"]["learners"], summary["config"]["problems"]

    def final(problem: str, name: str) -> np.ndarray:
        gap = traces[f"{problem}/{name}/best_gap"]
        at = max(1, round(args.fraction * gap.shape[1])) - 1
        return np.log10(np.maximum(gap[:, at], GAP_FLOOR))

    for name in learners:
        counts = np.stack([traces[f"{p}/{name}/arm_counts"] for p in problems])
        share = counts / counts.sum(axis=1, keepdims=True) * counts.shape[1]
        line = f"{name}: arm shares {share.min():.2f}-{share.max():.2f} of 1/A"
        if name != args.baseline:
            diffs = {p: final(p, name) - final(p, args.baseline) for p in problems}
            mean, half = t_interval(np.concatenate(list(diffs.values())))
            per = ", ".join(
                f"{p} {m:+.3f} ± {h:.3f}"
                for p, (m, h) in ((p, t_interval(d)) for p, d in diffs.items())
            )
            line += f"; minus {args.baseline}: {mean:+.3f} ± {half:.3f} over all"
            line += f" ({per})" if len(problems) <= 4 else ""
        print(line)


if __name__ == "__main__":
    main()
