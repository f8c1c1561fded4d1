"""How close do tuning-free ``stabl_anytime``, ``stabl_adaptive`` and ``stabl_rate_grid`` get to
the tuned StABL sweep (within 5% of its per-segment reward on the expert-advice configs)?

    python experiments/anytime_gap.py [--runs 500] [--configs expert_advice_equal ...]
        [--feedback loss reward] [--extra saol ...] [--out FOLDER [--force]]

Per config and feedback, one key (paired): ``stabl_anytime``, ``stabl_adaptive``, ``stabl_theory``
(``stabl`` at scales 1), ``stabl_tuned`` (``configs/<config>[_reward]_tuned.toml``'s scales), the
``--extra`` learners. Printed: per-segment mean reward ``1 - l_t(x_t)`` ± 95% interval over runs,
and each paired gap ``(x - tuned) / tuned`` in % (segments weigh the same). ``--out FOLDER``
(existing: ``--force``) writes a folder of kind ``anytime_gap``, its ``traces.npz`` holding
``CONFIG/FEEDBACK/LEARNER/segment_reward`` ``(R, S)`` (``experiments/report.py``'s ``view=gap``).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np
from _cli import md_table

from stabl_jax import metrics, simulate
from stabl_jax.experiment import outputs, provenance, tables
from stabl_jax.experiment import results as res
from stabl_jax.experiment.arguments import Distinct, Parser, interval_runs
from stabl_jax.experiment.kinds import load_config
from stabl_jax.experiment.kinds.bandit import BanditConfig
from stabl_jax.learners.base import BanditLearner

#: The paired reference every gap is measured against.
TUNED = "stabl_tuned"


def segment_rewards(
    config: BanditConfig, learner: BanditLearner, params: Any, key: jax.Array
) -> tuple[np.ndarray, int | None]:
    """``(R, S)`` per-segment mean reward of every run, and the muting count (if any)."""
    env = config.make_env()
    runs, horizon = config.runs, config.horizon  # the rewards read the loss alone: kept alone
    result = simulate(learner, env, key, runs, horizon=horizon, params=params, traces=("loss",))
    carry = result.final_carry("segment_rewards")
    segments = metrics.segment_ids(carry, config.horizon)
    reward = 1.0 - result.loss.astype(np.float64)
    muted = getattr(carry.state, "num_muted", None)
    muted = None if muted is None else int(np.asarray(muted).sum())
    return metrics.per_segment_mean(reward, segments, int(env.num_segments)), muted


def prepare(base: str, feedback: str, runs: int, extra: list[str]) -> dict:
    """One setting's configs and learners, built: a bad name or option raises before any run."""
    config = load_config(base, runs=runs, feedback=feedback)
    tuned_name = f"{base}_tuned" if feedback == "loss" else f"{base}_reward_tuned"
    tuned = load_config(tuned_name, runs=runs, feedback=feedback)
    if tuned.env != config.env or tuned.seed != config.seed or tuned.horizon != config.horizon:
        raise ValueError(f"{tuned_name} does not pair with {base}: env, seed or horizon differ")
    stabl = config.make_learner("stabl")
    entries = [
        ("stabl_anytime", config, config.make_learner("stabl_anytime"), None),
        ("stabl_adaptive", config, config.make_learner("stabl_adaptive"), None),
        ("stabl_theory", config, stabl, None),
        (TUNED, tuned, stabl, tuned.learner_params(stabl, "stabl")),
    ]
    compared = [label for label, *_ in entries]
    taken = [name for name in extra if name in compared]
    if taken:  # a second entry of a label replaced the first (for stabl_tuned: the tuned one)
        raise ValueError(
            f"--extra {' '.join(taken)}: already compared as {compared}; give other learners"
        )
    entries += [(name, config, config.make_learner(name), None) for name in extra]
    setting = dict(config=base, feedback=feedback, tuned_config=tuned_name, runs=runs)
    return setting | {"seed": config.seed, "entries": entries}


def compare(setting: dict) -> dict:
    """Simulate a :func:`prepare` setting with one key: its fields and ``"learners": {label:
    {"segment_reward": (R, S), "num_muted", "params"}}``."""
    key = jax.random.key(setting["seed"])
    learners = {}
    for label, cfg, learner, params in setting["entries"]:
        seg, muted = segment_rewards(cfg, learner, params, key)
        learners[label] = {
            "segment_reward": seg,
            "num_muted": muted,
            "params": None if params is None else {k: float(v) for k, v in params.items()},
        }
    return {k: v for k, v in setting.items() if k != "entries"} | {"learners": learners}


def gap_percent(
    values: np.ndarray,
    tuned: np.ndarray,
    mean_ci: Callable[..., tuple[Any, Any]] = metrics.mean_ci,
) -> dict:
    """Paired gap of ``values`` to ``tuned`` (``(R, S)``) in % of the tuned mean, per segment and
    over segments, each with ``mean_ci``'s 95% half-width of the paired difference."""
    diff = values - tuned
    seg_mean, seg_half = mean_ci(diff, axis=0)
    all_mean, all_half = mean_ci(diff.mean(axis=1), axis=0)
    scale = 100 / tuned.mean(axis=0)
    overall_scale = 100 / tuned.mean()
    return {
        "segment": seg_mean * scale,
        "segment_half_width": seg_half * scale,
        "overall": float(all_mean * overall_scale),
        "overall_half_width": float(all_half * overall_scale),
    }


def print_table(out: dict) -> None:
    learners, rows = out["learners"], list[Any]()
    tuned = learners[TUNED]["segment_reward"]
    for label, row in learners.items():
        mean, half = metrics.mean_ci(row["segment_reward"], axis=0)
        overall, overall_half = metrics.mean_ci(row["segment_reward"].mean(axis=1))
        cells = [f"{m:.4f} ± {h:.4f}" for m, h in zip(mean, half, strict=True)]
        rows.append([label, *cells, f"{overall:.4f} ± {overall_half:.4f}", row["num_muted"]])
    for label, row in learners.items():
        if label not in (TUNED, "stabl_theory"):
            gap = gap_percent(row["segment_reward"], tuned)
            cells = [
                f"{g:+.1f}% ± {h:.1f}"
                for g, h in zip(gap["segment"], gap["segment_half_width"], strict=True)
            ]
            overall = f"{gap['overall']:+.1f}% ± {gap['overall_half_width']:.1f}"
            rows.append(f"| gap {label} vs tuned | {' | '.join(cells)} | {overall} | |")
    head = ["learner", *(f"seg {s + 1}" for s in range(tuned.shape[1])), "mean", "muted"]
    print(f"\n## {out['config']}, feedback = {out['feedback']}, {out['runs']} runs")
    print(md_table(head, rows))


def write_folder(folder: res.ResultsFolder, outs: list[dict], argv: list[str]) -> Path:
    """Write ``outs`` into ``folder`` and commit it (see the module docstring)."""
    summary: dict = {
        "kind": "anytime_gap",
        "description": "tuning-free StABL variants against tuned StABL, paired, per segment",
        "command": ["python", "experiments/anytime_gap.py", *argv],
        **provenance.environment_info(),
        "settings": [],
        "learners": {},
    }
    arrays = {}
    for out in outs:
        summary["settings"].append(
            {k: out[k] for k in ("config", "feedback", "tuned_config", "runs", "seed")}
            | {"learners": list(out["learners"])}
        )
        for label, row in out["learners"].items():
            name = f"{out['config']}/{out['feedback']}/{label}"
            seg = row["segment_reward"]
            arrays[f"{name}/segment_reward"] = seg
            summary["learners"][name] = {
                "params": row["params"],
                "segment_reward": tables.stat(seg),
                "mean_over_segments": tables.stat(seg.mean(axis=1)),
                "num_muted": row["num_muted"],
            }
    return folder.write(summary, arrays, lambda _: None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = Parser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--runs", type=interval_runs, default=500)
    configs = ["expert_advice_equal", "expert_advice_random"]
    add("--configs", nargs="+", action=Distinct, default=configs)
    add("--feedback", nargs="+", action=Distinct, default=["loss", "reward"])
    add("--extra", nargs="*", action=Distinct, default=[], help="more learners, default params")
    add("--out", type=Path, default=None, help="write a results folder here")
    add("--force", action="store_true", help="replace an existing --out folder")
    args = parser.parse_args(argv)
    if args.force and args.out is None:
        parser.error("--force replaces an existing --out folder: give --out too")
    try:  # every setting and the output folder checked before minutes of simulation
        settings = [
            prepare(base, feedback, args.runs, args.extra)
            for base in args.configs
            for feedback in args.feedback
        ]
        folder = None if args.out is None else res.ResultsFolder.prepare(args.out, force=args.force)
    except (outputs.OutputError, ValueError) as exc:
        parser.error(str(exc))
    with folder or contextlib.nullcontext():
        outs = []
        for setting in settings:
            out = compare(setting)
            print_table(out)
            outs.append(out)
        if folder is not None:
            print(f"\nwrote {write_folder(folder, outs, argv)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
