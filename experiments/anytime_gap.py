"""How close do tuning-free ``stabl_anytime`` and ``stabl_adaptive`` get to the tuned StABL
sweep? (the target: "within 5% of the tuned sweep's per-segment reward on the shipped
expert-advice configs without any tuning").

    python experiments/anytime_gap.py [--runs 500] [--configs expert_advice_equal ...]
                                      [--feedback loss reward] [--extra saol ...] [--json out.json]

For every config and feedback, three (or more) learners are simulated on the reported seed with
the same key, so every run faces the same environment draws (paired):

- ``stabl_anytime`` with its default params (scales 1: nothing tuned, never swept here),
- ``stabl_adaptive`` likewise (data-dependent rates, scales 1),
- ``stabl`` with the theory default params (scales 1),
- ``stabl`` with the scales in ``configs/<config>[_reward]_tuned.toml`` (chosen by
  ``experiments/tune.py`` on a disjoint seed),

plus any ``--extra`` registry learners with default params. Printed: per-segment mean reward
``1 - l_t(x_t)`` with its 95% interval over runs, and the paired gaps of ``stabl_anytime``,
``stabl_adaptive`` and every ``--extra`` learner to tuned StABL, ``(x - tuned) / tuned`` in %,
with the 95% interval of the paired difference (divided by the tuned mean).
``--seed-offset 1000003`` runs on the tuning seed instead of the reported one (for design
decisions; never for reported numbers).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import jax
import numpy as np

from stabl_jax import metrics, simulate
from stabl_jax.kinds import load_config


def segment_rewards(config, learner, params, key) -> tuple[np.ndarray, int | None]:
    """``(R, S)`` per-segment mean reward of every run, and the muting count (if any)."""
    env = config.make_env()
    result = simulate(learner, env, key, config.runs, horizon=config.horizon, params=params)
    segments = metrics.segment_ids(result.carry, config.horizon)
    reward = 1.0 - result.loss.astype(np.float64)
    muted = getattr(result.carry.state, "num_muted", None)
    muted = None if muted is None else int(np.asarray(muted).sum())
    return metrics.per_segment_mean(reward, segments, int(env.num_segments)), muted


def compare(base: str, feedback: str, runs: int, extra: list[str], seed_offset: int = 0) -> dict:
    config = load_config(base, runs=runs, feedback=feedback)
    tuned_name = f"{base}_tuned" if feedback == "loss" else f"{base}_reward_tuned"
    tuned = load_config(tuned_name, runs=runs, feedback=feedback)
    if tuned.env != config.env or tuned.seed != config.seed or tuned.horizon != config.horizon:
        raise SystemExit(f"{tuned_name} does not pair with {base}: env, seed or horizon differ")
    key = jax.random.key(config.seed + seed_offset)
    rows: dict[str, dict] = {}
    stabl = config.make_learner("stabl")
    entries = [
        ("stabl_anytime", config, config.make_learner("stabl_anytime"), None),
        ("stabl_adaptive", config, config.make_learner("stabl_adaptive"), None),
        ("stabl (theory)", config, stabl, None),
        ("stabl (tuned)", tuned, stabl, tuned.learner_params(stabl, "stabl")),
    ]
    entries += [(name, config, config.make_learner(name), None) for name in extra]
    per_run = {}
    for label, cfg, learner, params in entries:
        seg, muted = segment_rewards(cfg, learner, params, key)
        per_run[label] = seg
        mean, half = metrics.mean_ci(seg, axis=0)
        overall, overall_half = metrics.mean_ci(seg.mean(axis=1))
        rows[label] = {
            "segment_mean": mean.tolist(),
            "segment_half_width": half.tolist(),
            "mean_over_segments": float(overall),
            "mean_over_segments_half_width": float(overall_half),
            "num_muted": muted,
            "params": None if params is None else {k: float(v) for k, v in params.items()},
        }
    tuned_mean = np.asarray(rows["stabl (tuned)"]["segment_mean"])
    out = {
        "config": base,
        "feedback": feedback,
        "runs": runs,
        "seed": config.seed + seed_offset,
        "learners": rows,
    }
    gaps = [("stabl_anytime", "gap"), ("stabl_adaptive", "gap_adaptive")]
    gaps += [(name, f"gap_{name}") for name in extra]
    out["gaps"] = [prefix for _, prefix in gaps]
    for label, prefix in gaps:
        diff = per_run[label] - per_run["stabl (tuned)"]  # (R, S), paired
        d_mean, d_half = metrics.mean_ci(diff, axis=0)
        o_mean, o_half = metrics.mean_ci(diff.mean(axis=1))
        out[f"{prefix}_percent"] = (100 * d_mean / tuned_mean).tolist()
        out[f"{prefix}_percent_half_width"] = (100 * d_half / tuned_mean).tolist()
        out[f"{prefix}_percent_over_segments"] = float(100 * o_mean / tuned_mean.mean())
        out[f"{prefix}_percent_over_segments_half_width"] = float(100 * o_half / tuned_mean.mean())
    return out


def print_table(out: dict) -> None:
    print(f"\n## {out['config']}, feedback = {out['feedback']}, {out['runs']} runs")
    num = len(out["gap_percent"])
    header = " | ".join(f"seg {s + 1}" for s in range(num))
    print(f"| learner | {header} | mean | muted |")
    print("|---|" + "---|" * (num + 2))
    for label, row in out["learners"].items():
        cells = [
            f"{m:.4f} ± {h:.4f}"
            for m, h in zip(row["segment_mean"], row["segment_half_width"], strict=True)
        ]
        mean = f"{row['mean_over_segments']:.4f} ± {row['mean_over_segments_half_width']:.4f}"
        print(f"| {label} | {' | '.join(cells)} | {mean} | {row['num_muted']} |")
    for prefix in out["gaps"]:
        name = {"gap": "anytime", "gap_adaptive": "adaptive"}.get(prefix, prefix[4:])
        gaps = [
            f"{g:+.1f}% ± {h:.1f}"
            for g, h in zip(
                out[f"{prefix}_percent"], out[f"{prefix}_percent_half_width"], strict=True
            )
        ]
        overall = (
            f"{out[f'{prefix}_percent_over_segments']:+.1f}% ± "
            f"{out[f'{prefix}_percent_over_segments_half_width']:.1f}"
        )
        print(f"| gap {name} vs tuned | {' | '.join(gaps)} | {overall} | |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument(
        "--configs", nargs="+", default=["expert_advice_equal", "expert_advice_random"]
    )
    parser.add_argument("--feedback", nargs="+", default=["loss", "reward"])
    parser.add_argument("--extra", nargs="*", default=[], help="more learners, default params")
    parser.add_argument("--json", default=None, help="also write every number here")
    parser.add_argument(
        "--seed-offset", type=int, default=0, help="1000003: the tuning seed (design only)"
    )
    args = parser.parse_args(argv)
    results = []
    for base in args.configs:
        for feedback in args.feedback:
            out = compare(base, feedback, args.runs, args.extra, args.seed_offset)
            print_table(out)
            results.append(out)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
