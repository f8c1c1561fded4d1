"""Per-segment rewards and paired differences from results folders' ``traces.npz``.

    python experiments/paired.py FOLDER [--learners a b ...] [--diff a,b ...] [--gap a,b ...]

A round's reward is ``1 - l_t(x_t)`` (the ``<learner>/loss`` trace, or else the
``<learner>/segment_reward`` arrays), averaged over the run ("mean") and each segment, paired
run by run (a folder's learners face the same draws), with 95% Student t intervals over runs:
``--learners`` (default: all) the rewards; ``--diff a,b`` ``a - b``; ``--gap a,b`` ``(a - b) /
b`` in % of the mean over segments. A learner may be ``OTHER_FOLDER::name`` (a folder of the
same draws: checked) and ``name@play`` (its even rounds: the play trials of ``stabl_vizier``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from _cli import md_table, need_runs, unpaired, with_sign

from stabl_jax import metrics
from stabl_jax.experiment import read_summary, read_traces
from stabl_jax.experiment.arguments import Distinct, Parser


class Folders:
    """Traces of one main folder and any ``OTHER::name`` folders, per-run segment rewards."""

    def __init__(self, main: Path) -> None:
        self.main = main
        self.traces: dict[Path, dict] = {}
        self.points = self._load(main)["env/change_points"]

    def _load(self, folder: Path) -> dict:
        if folder not in self.traces:
            traces = read_traces(folder)
            if "env/change_points" not in traces:
                raise SystemExit(
                    f"{folder}: its traces.npz has no env/change_points, so its segments are "
                    "unknown: name the folder of a bandit or BCO `stabl-jax run`"
                )
            self.traces[folder] = traces
        return self.traces[folder]

    def learners(self, folder: Path) -> list[str]:
        """The learners of ``folder`` whose rewards it holds, in the order of its traces."""
        ends = ("/segment_reward", "/loss")
        names = [k.split("/")[0] for k in self._load(folder) if k.endswith(ends)]
        return list(dict.fromkeys(names))

    def rewards(self, spec: str) -> tuple[np.ndarray, np.ndarray]:
        """``(R,)`` mean reward and ``(R, S)`` per-segment reward of ``spec``'s runs."""
        folder, _, name = spec.rpartition("::")
        name, _, only = name.partition("@")
        if only not in ("", "play"):
            raise SystemExit(f"{spec}: the one suffix is @play (its even trials), got @{only}")
        traces = self._load(Path(folder) if folder else self.main)
        if not {f"{name}/segment_reward", f"{name}/loss"} & set(traces):
            known = sorted(self.learners(Path(folder) if folder else self.main))
            raise SystemExit(
                f"{spec}: {folder or self.main} has no learner {name!r}; it has {known}"
            )
        if not np.array_equal(traces["env/change_points"], self.points):
            raise SystemExit(f"{spec}: not paired with {self.main} (change points differ)")
        if folder and Path(folder) != self.main:  # the same change points, another experiment?
            differ = unpaired(read_summary(self.main), read_summary(Path(folder)))
            if differ:
                raise SystemExit(
                    f"{spec}: not paired with {self.main} ({', '.join(differ)} differ)"
                )
        points = self.points if self.points.ndim == 2 else self.points[None]
        if f"{name}/loss" not in traces and not only:  # the loss traces were not kept
            per_segment = np.asarray(traces[f"{name}/segment_reward"], np.float64)
            horizon = read_summary(folder or self.main)["config"]["horizon"]
            bounds = np.concatenate(
                [np.zeros((len(points), 1)), points, [[horizon]] * len(points)], 1
            )
            lengths = np.diff(bounds, axis=1)
            return (per_segment * lengths).sum(axis=1) / horizon, per_segment
        if f"{name}/loss" not in traces:
            raise SystemExit(
                f"{spec}: the folder has no {name}/loss trace; rerun it with "
                '--set \'save_traces=["loss", "played"]\''
            )
        reward = 1.0 - np.asarray(traces[f"{name}/loss"], np.float64)
        horizon = reward.shape[1]
        segments = np.stack([np.searchsorted(p, np.arange(horizon), side="right") for p in points])
        if only:  # "play": the even trials
            reward, segments = reward[:, ::2], segments[:, ::2]
        num_segments = points.shape[1] + 1
        return reward.mean(axis=1), metrics.per_segment_mean(reward, segments, num_segments)


def label(spec: str) -> str:
    """``name`` or ``name [folder's last part]`` for a learner of another folder."""
    folder, _, name = spec.rpartition("::")
    return f"{name} [{Path(folder).name}]" if folder else name


def row(label: str, overall: np.ndarray, segments: np.ndarray, signed: bool = False) -> str:
    num = "{:+.4f}" if signed else "{:.4f}"
    m, h = metrics.mean_ci(overall)
    sm, sh = metrics.mean_ci(segments)
    cells = " | ".join(f"{num.format(x)} ± {y:.4f}" for x, y in zip(sm, sh, strict=True))
    return f"| {label} | {num.format(m)} ± {h:.4f} | {cells} |"


def gap_row(label_a: str, label_b: str, sa: np.ndarray, sb: np.ndarray) -> str:
    """``| a vs b | a | b | gap |``: the gap ``(a − b) / b`` in %, ± the 95% t half-width of the
    paired difference over ``b``'s mean; ``sa``, ``sb``: ``(R,)`` per-run means over segments."""
    diff, half = metrics.mean_ci(sa - sb)
    base = sb.mean()
    gap = with_sign(100 * diff / base)
    cells = f"{sa.mean():.4f} | {base:.4f} | {gap} % ± {100 * half / base:.1f}"
    return f"| {label_a} vs {label_b} | {cells} |"


def pair(spec: str) -> tuple[str, str]:
    """``"a,b"`` -> ``("a", "b")``, an argparse type of ``--diff`` and ``--gap``."""
    parts = spec.split(",")
    if len(parts) != 2 or not all(parts):
        raise argparse.ArgumentTypeError(f"give two learners as a,b, got {spec!r}")
    if parts[0] == parts[1]:  # a learner against itself: zero, by construction
        raise argparse.ArgumentTypeError(f"give two different learners as a,b, got {spec!r}")
    return parts[0], parts[1]


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--learners", nargs="*", action=Distinct, default=[])
    parser.add_argument("--diff", nargs="*", type=pair, action=Distinct, default=[])
    parser.add_argument("--gap", nargs="*", type=pair, action=Distinct, default=[])
    args = parser.parse_args(argv)
    try:  # every folder and name checked before a table is printed
        data = Folders(args.folder)
        if not (args.learners or args.diff or args.gap):  # the default: every learner's row
            args.learners = data.learners(args.folder)
        specs = [*args.learners, *(s for p in [*args.diff, *args.gap] for s in p)]
        runs = {spec: len(data.rewards(spec)[0]) for spec in specs}
        for spec, count in runs.items():  # every interval of one run would be nan
            need_runs(spec.rpartition("::")[0] or args.folder, count)
    except (FileNotFoundError, ValueError) as exc:  # ValueError: damaged traces, one run
        parser.error(str(exc))
    segments = [f"segment {s + 1}" for s in range(data.points.shape[-1] + 1)]
    if args.learners:
        print(
            md_table(
                ["learner", "mean", *segments],
                [row(label(s), *data.rewards(s)) for s in args.learners],
            )
            + "\n"
        )
    if args.diff:
        rows = []
        for a, b in args.diff:
            (ma, sa), (mb, sb) = data.rewards(a), data.rewards(b)
            rows.append(row(f"{label(a)} − {label(b)}", ma - mb, sa - sb, signed=True))
        print(md_table(["paired difference", "mean", *segments], rows) + "\n")
    if args.gap:
        rows = []
        for a, b in args.gap:
            sa, sb = data.rewards(a)[1].mean(axis=1), data.rewards(b)[1].mean(axis=1)
            rows.append(gap_row(label(a), label(b), sa, sb))
        print(md_table(["a vs b", "a (mean over segments)", "b", "gap (a − b)/b"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
