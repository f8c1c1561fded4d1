"""Markdown tables from results folders (what EXPERIMENTS.md and docs/speed.md quote).

    python experiments/report.py 'FOLDER [view=VIEW] [option=value ...]' [--results results]
    python experiments/report.py --update EXPERIMENTS.md --results results
    python experiments/report.py --check EXPERIMENTS.md --results results

A document's tables sit between ``<!-- report: FOLDER [view=VIEW] [option=value ...] -->``
(options may span lines) and ``<!-- /report -->``, ``FOLDER`` under ``--results``; a marker
given as the argument prints its table. Views (:data:`VIEWS`): ``table`` (default;
``windows=L1,L2``, ``sa=sampled``); ``paired`` StABL (``reference=``) minus each learner per
run, or for algorithm selection each log10 gap minus ``baseline=``'s; ``diff`` paired
differences ``diff=a,b`` and gaps ``gap=a,b`` (repeatable; a side may be ``OTHER::name`` of a
folder of the same draws, or ``name@play``); ``regret`` final pseudo-regrets, a row per folder
(``rows=F2,F3``); ``gap`` an ``experiments/anytime_gap.py`` folder (``learner=``,
``columns=``); ``table1``, ``exponents``, ``b`` the scaling study (``adversary=``, ``n=``,
``tuned=OTHER``); ``bench`` ``stabl-jax bench``'s JSON. An option its view does not read is
refused; intervals are Student's t 95% over runs. ``--update`` rewrites every block,
``--check`` exits 1 listing those that would change; both exit 1 naming a missing folder.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
from _cli import md_table, need_runs, script, with_sign

from stabl_jax import metrics
from stabl_jax.experiment import bench as benchmark
from stabl_jax.experiment import plots
from stabl_jax.experiment.arguments import Parser
from stabl_jax.experiment.files import write_text
from stabl_jax.experiment.tables import TraceFile, read_json_object, read_summary
from stabl_jax.hpo_metrics import log10_gap

MARKER = re.compile(
    r"(<!-- report: (?P<args>[^>]*?) -->\n)(?P<body>.*?)(<!-- /report -->)", re.DOTALL
)


def _pm(stat: dict, index: int | None = None, digits: int = 3) -> str:
    """``mean ± half`` of a ``summary.json`` statistic (the mean alone without a half)."""
    mean, half = stat["mean"], stat["ci95"]
    if index is not None:
        mean, half = mean[index], None if half is None else half[index]
    if half is None:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {half:.{digits}f}"


def _sa_cells(sa: dict, lengths: list, windows: tuple[int, ...]) -> list[str]:
    return [_pm(sa, lengths.index(w), 1) if w in lengths else "–" for w in windows]


def bco_table(folder: Path, summary: dict, windows: tuple[int, ...]) -> str:
    """Table of a ``kind = "bco"`` results folder (SA(L) of the suffered loss)."""
    runs = summary["runs"]
    rows: list[list[Any] | str] = []
    for name, entry in summary["learners"].items():
        sa = entry["adaptive_regret"]
        muted = entry.get("num_muted")
        loss = _pm(entry["mean_loss"], digits=4)
        cells = _sa_cells(sa["sa"], sa["window_lengths"], windows)
        rows.append([name, entry["num_queries"], loss, *cells, "–" if muted is None else muted])
    gap = summary.get("adaptive_regret", {}).get("comparator_gap")
    if gap is not None:
        lengths = summary["adaptive_regret"]["window_lengths"]
        cells = [f"{gap['max'][lengths.index(w)]:.1e}" if w in lengths else "–" for w in windows]
        rows.append("| comparator gap (max over runs) | | | " + " | ".join(cells) + " | |")
    title = f"`{folder}` — {summary['description']} ({runs} runs, seed {summary['seed']})"
    head = ["learner", "q", "mean loss", *(f"SA({w})" for w in windows), "muted"]
    return md_table(head, rows, title)


def hpo_table(folder: Path, summary: dict) -> str:
    """Table of a ``kind = "hpo"`` folder: per learner the profile score and score against
    Uniform (half, full budget); per problem the final log10 gap and each half's score."""
    cfg, problems = summary["config"], summary["problems"]
    learners = cfg["learners"]
    title = (
        f"`{folder}` — {cfg['description']} ({len(problems)} problems x {cfg['runs']} repeats, "
        f"seed {cfg['seed']}, feedback={cfg['feedback']}; final mean log10 gap ± 95% "
        "t-interval over repeats)"
    )
    profile = ("profile_scores_half_budget", "profile_scores")
    versus = ("score_vs_uniform_half_budget", "score_vs_uniform")
    scores = [
        [
            name,
            *(f"{summary[k][name]:.3f}" for k in profile),
            *(f"{summary[k].get(name, 0.0):+.3f}" for k in versus),
        ]
        for name in learners
    ]
    head = ["learner", "profile score (N/2)", "profile score (N)", "vs Uniform (N/2)"]
    rows = []
    for key, by_name in problems.items():
        cells = []
        for name in learners:
            r = by_name[name]
            ci = r["final_log10_gap_ci"]
            gap = f"{r['final_log10_gap']:.2f}" + (f" ± {ci:.2f}" if ci is not None else "")
            if name != "uniform" and "score_vs_uniform_first_half" in r:
                gap += (
                    f" ({r['score_vs_uniform_first_half']:+.2f}/"
                    f"{r['score_vs_uniform_second_half']:+.2f})"
                )
            cells.append(gap)
        rows.append([key, *cells])
    per_problem = ["problem", *(f"{n}: log10 gap (vs Unif. 1st/2nd half)" for n in learners)]
    return "\n".join(
        [md_table([*head, "vs Uniform (N)"], scores, title), "", md_table(per_problem, rows)]
    )


def hpo_paired_table(folder: Path, label: str, baseline: str = "uniform") -> str:
    """Algorithm selection, paired: each log10 best gap minus ``baseline``'s (same problem and
    repeat) at budget N and N/2, per problem when at most four; the arms' shares over ``1/A``."""
    summary = read_summary(folder)
    learners, problems = summary["config"]["learners"], summary["config"]["problems"]
    if baseline not in learners:
        raise ValueError(f"{folder}: baseline {baseline!r} is not one of its learners {learners}")
    need_runs(folder, summary["config"]["runs"])
    traces = TraceFile(folder / "traces.npz", missing_ok=False).read()
    counts = {n: np.stack([traces[f"{p}/{n}/arm_counts"] for p in problems]) for n in learners}

    def log_gap(problem: str, name: str, fraction: float) -> np.ndarray:
        gap = traces[f"{problem}/{name}/best_gap"]
        return log10_gap(gap[:, max(1, round(fraction * gap.shape[1])) - 1])

    def cell(values: np.ndarray) -> str:
        mean, half = metrics.mean_ci(values)
        return f"{mean:+.3f} ± {half:.3f}"

    per_problem = problems if len(problems) <= 4 else []
    rows = []
    for name in learners:
        share = counts[name] / counts[name].sum(axis=1, keepdims=True) * counts[name].shape[1]
        cells = ["–"] * (2 + len(per_problem))
        if name != baseline:
            diffs = {
                f: {p: log_gap(p, name, f) - log_gap(p, baseline, f) for p in problems}
                for f in (1.0, 0.5)
            }
            cells = [cell(np.concatenate(list(diffs[f].values()))) for f in (1.0, 0.5)]
            cells += [cell(diffs[1.0][p]) for p in per_problem]
        rows.append([name, *cells, f"{share.min():.2f}–{share.max():.2f}"])
    title = (
        f"`{label}` — log10 best gap minus {baseline}'s on the same (problem, repeat), mean ± "
        f"95% t-interval over the {len(problems) * summary['config']['runs']} pairs (negative: "
        f"better than {baseline}); arm shares relative to 1/A"
    )
    head = ["learner", f"minus {baseline} (N)", "(N/2)", *(f"{p} (N)" for p in per_problem)]
    return md_table([*head, "arm shares"], rows, title)


def table(
    folder: Path, windows: tuple[int, ...], *, label: str | None = None, sa: str = "expected"
) -> str:
    """The table of one results folder, headed by ``label`` (default: the folder's path)."""
    summary = read_summary(folder)
    if summary.get("kind") == "bco":
        return bco_table(Path(label or folder), summary, windows)
    if summary.get("kind") == "hpo":
        return hpo_table(Path(label or folder), summary)
    runs, rows = summary["runs"], []
    for name, entry in summary["learners"].items():
        regret = entry["adaptive_regret"]
        cells = _sa_cells(regret[sa], regret["window_lengths"], windows)
        seg = ", ".join(f"{m:.3f}" for m in entry["segment_reward"]["mean"])
        params = ", ".join(f"{k}={v:g}" for k, v in entry["params"].items()) or "–"
        muted = entry["num_muted"] if entry["num_muted"] is not None else "–"
        reward, best = (_pm(s) for s in (entry["mean_reward"], entry["prob_best"]["overall"]))
        rows.append([name, entry["num_queries"], params, reward, seg, *cells, best, muted])
    title = (
        f"`{label or folder}` — {summary['description']} ({runs} runs, seed "
        f"{summary['seed']}, feedback={summary['config']['feedback']}; SA(L) of the {sa} loss)"
    )
    head = ["learner", "q", "scales", "mean reward", "reward per segment"]
    return md_table([*head, *(f"SA({w})" for w in windows), "P(best arm)", "muted"], rows, title)


def paired_table(folder: Path, label: str, reference: str = "stabl") -> str:
    """``reference`` minus every other learner but Uniform, paired per run."""
    data = script("paired")["Folders"](folder)
    names = data.learners(folder)
    if reference not in names:
        raise ValueError(
            f"{folder}: view=paired gives {reference!r} minus every other learner, and its "
            f"traces.npz has no {reference!r} (it has {sorted(names)})"
        )
    others = [n for n in read_summary(folder)["learners"] if n in names]
    mine, mine_segments = data.rewards(reference)
    runs = len(mine)
    need_runs(folder, runs)
    rows = []
    for other in (n for n in others if n not in (reference, "uniform")):
        overall, segments = data.rewards(other)
        mean, half = metrics.mean_ci(mine - overall)
        seg_mean, seg_half = metrics.mean_ci(mine_segments - segments)
        segs = ", ".join(f"{m:+.3f} ± {h:.3f}" for m, h in zip(seg_mean, seg_half, strict=True))
        rows.append([f"{reference} − {other}", f"{mean:+.3f} ± {half:.3f}", segs])
    title = (
        f"`{label}` — paired differences of mean reward, {reference} minus each learner, "
        f"per run, then mean ± 95% t-interval over the {runs} runs (positive: {reference} "
        "earns more)"
    )
    return md_table(["difference", "mean reward", "per segment"], rows, title)


def gap_table(folder: Path, label: str, learner: str, columns: list[str]) -> str:
    """An ``experiments/anytime_gap.py`` folder: per setting ``learner``'s mean over segments,
    the means of ``columns`` and ``learner``'s paired gap to tuned StABL in %."""
    anytime = script("anytime_gap")
    summary = read_summary(folder)
    traces = TraceFile(folder / "traces.npz", missing_ok=False).read()
    rewards = {k.removesuffix("/segment_reward"): v for k, v in traces.items()}
    rows, seg_halves = [], []
    for setting in summary["settings"]:
        prefix = f"{setting['config']}/{setting['feedback']}"
        missing = [n for n in (learner, "stabl_tuned", *columns) if n not in setting["learners"]]
        if missing:
            raise ValueError(f"{folder}: {prefix} has no learner(s) {missing}")
        need_runs(folder, setting["runs"])
        values, tuned = rewards[f"{prefix}/{learner}"], rewards[f"{prefix}/stabl_tuned"]
        mean, half = metrics.mean_ci(values.mean(axis=1))
        gap = anytime["gap_percent"](values, tuned, mean_ci=metrics.mean_ci)
        seg_halves += list(gap["segment_half_width"])
        name = setting["config"].removeprefix("expert_advice_")
        rows.append(
            [
                f"{name}, {setting['feedback']}, {setting['runs']}",
                f"{mean:.4f} ± {half:.4f}",
                *(f"{rewards[f'{prefix}/{c}'].mean(axis=1).mean():.4f}" for c in columns),
                f"{', '.join(with_sign(g) for g in gap['segment'])} %",
                f"**{with_sign(gap['overall'])} % ± {gap['overall_half_width']:.1f}**",
            ]
        )
    title = (
        f"`{label}` — mean over segments of the per-segment mean reward (each segment weighs "
        f"the same), seed {summary['settings'][0]['seed']}, one key for every learner; "
        f"{learner} ± 95% t-interval over runs; gap: ({learner} − tuned StABL) / tuned StABL, "
        "paired, ± 95% t-interval"
    )
    head = ["config, feedback, runs", learner, *columns, "gap per segment", "gap overall"]
    return (
        md_table(head, rows, title) + f"\n\nPer-segment intervals of the gap: ± "
        f"{min(seg_halves):.1f} to {max(seg_halves):.1f} points."
    )


def diff_table(
    folder: Path, label: str, pairs: list[str], results: Path, gaps: tuple[str, ...] = ()
) -> str:
    """The paired differences of ``pairs`` and gaps of ``gaps`` (``experiments/paired.py
    --diff``, ``--gap``), ``OTHER::name`` a learner of ``results/OTHER``."""
    paired = script("paired")

    def spec(side: str) -> tuple[Path, str]:
        other, sep, name = side.rpartition("::")
        return (results / other, f"{results / other}::{name}") if sep else (folder, side)

    tables = []
    if pairs:
        data = paired["Folders"](folder)
        runs, num_segments = data.points.shape[0], data.points.shape[-1] + 1
        rows = []
        for pair in pairs:
            a, b = (spec(side)[1] for side in pair.split(","))
            (ma, sa), (mb, sb) = data.rewards(a), data.rewards(b)
            name = f"{paired['label'](a)} − {paired['label'](b)}"
            rows.append(paired["row"](name, ma - mb, sa - sb, signed=True))
        title = (
            f"`{label}` — paired differences of mean reward (1 − loss of the played arm), per "
            f"run, then mean ± 95% t-interval over the {runs} runs; `[FOLDER]`: a learner of "
            "`results/FOLDER` (same seed, same draws); `@play`: its play trials only"
        )
        head = ["paired difference", "mean", *(f"segment {s + 1}" for s in range(num_segments))]
        tables.append(md_table(head, rows, title))
    if gaps:
        rows = []
        for pair in gaps:
            (main, a), (_, b) = (spec(side) for side in pair.split(","))
            data = paired["Folders"](main)
            sa, sb = data.rewards(a)[1].mean(axis=1), data.rewards(b)[1].mean(axis=1)
            rows.append(paired["gap_row"](paired["label"](a), paired["label"](b), sa, sb))
        title = (
            f"`{label}` — paired gaps (a − b)/b of the mean over segments (each segment weighs "
            "the same), ± 95% t-interval of the paired difference divided by b's mean; "
            "`[FOLDER]`: a learner of `results/FOLDER` (same seed, same draws)"
        )
        head = ["a vs b", "a (mean over segments)", "b", "gap (a − b)/b"]
        tables.append(md_table(head, rows, title))
    return "\n\n".join(tables)


def regret_table(folders: list[Path]) -> str:
    """A row per expert-advice folder: each learner's final pseudo-regret ``R(T)``
    (``experiments/curves.py``), with those of a ``FOLDER-naive`` folder."""
    curves = script("curves")
    rows, names = [], []
    for folder in folders:
        summary, learners = curves["folder_learners"](folder)
        cells = {}
        for name, (_, traces, note) in learners.items():
            regret = curves["pseudo_regret"](traces[f"{name}/prob_best"], summary["env"]["bonus"])
            mean, half = metrics.mean_ci(regret[:, -1])
            digits = 1 if half < 1 else 0
            cells[name] = f"{mean:.1f}" if half == 0 else f"{mean:.{digits}f} ± {half:.{digits}f}"
            cells[name] += f" ({note.lstrip(', ')})" if note else ""
            names += [name] if name not in names else []
        setting = folder.name.removeprefix("expert_advice_").replace("-", ", ")
        rows.append((f"{setting} ({summary['runs']} runs)", cells))
    title = (
        "`R(T)`: cumulative pseudo-regret to each segment's best arm at the last round, mean ± "
        "95% t-interval over runs (`experiments/curves.py`)"
    )
    head = ["folder", *(plots.label(n) for n in names)]
    return md_table(head, [[r, *(c.get(n, "–") for n in names)] for r, c in rows], title)


GAP = "anytime_gap"  # the kind of an experiments/anytime_gap.py folder
#: Every view: per folder kind (``summary.json``'s), the options it reads; ``None``: a JSON's.
VIEWS: dict[str, dict[str | None, set[str]]] = {
    "table": {"bandit": {"windows", "sa"}, "bco": {"windows"}, "hpo": set()},
    "paired": {"bandit": {"reference"}, "hpo": {"baseline"}},
    "gap": {GAP: {"learner", "columns"}},
    "diff": {"bandit": {"diff", "gap"}},
    "regret": {"bandit": {"rows"}},
    "table1": {None: {"adversary", "n", "tuned"}},
    "exponents": {None: {"adversary"}},
    "b": {None: set()},
    "bench": {None: set()},
}
REPEATED = ("diff", "gap", "rows")  # options a marker may give more than once
KINDS = {GAP: "the folders of experiments/anytime_gap.py"}


def check_options(folder: Path, view: str, given: list[str], where: str) -> str | None:
    """The kind of ``folder`` (``None``: a script's JSON, or no folder); ``ValueError`` unless
    ``view`` applies to it and reads every option of ``given``."""
    if view not in VIEWS:
        raise ValueError(f"{where}: unknown view {view!r}: one of {', '.join(VIEWS)}")
    kinds = VIEWS[view]
    kind = None
    if None not in kinds and (folder / "summary.json").is_file():
        kind = read_summary(folder).get("kind", "bandit")
        if kind not in kinds:
            named = " and ".join(KINDS.get(str(k), f"{k} folders") for k in kinds)
            views = "|".join(v for v in VIEWS if kind in VIEWS[v])
            raise ValueError(
                f"{where}: view={view} is for {named}; this {kind} folder has view={views} only"
            )
    reads = kinds[kind] if kind in kinds else set().union(*kinds.values())
    unread = [o for o in given if o not in reads]
    if unread:
        takes = ", ".join(f"{o}=" for o in sorted(reads)) + " only" if reads else "no other option"
        hints = [
            f"{o}= only with view="
            + "|".join(v for v in VIEWS if any(o in r for r in VIEWS[v].values()))
            for o in unread
        ]
        of = f" of this {kind} folder" if kind else ""
        raise ValueError(
            f"{where}: {' '.join(unread)} is not read by view={view}{of} "
            f"(view={view} takes {takes}); {'; '.join(hints)}; give it only where it applies"
        )
    return kind


def _need_summary(folder: Path, where: str) -> None:
    """``FileNotFoundError`` if ``folder`` has no summary."""
    if not (folder / "summary.json").is_file():
        raise FileNotFoundError(
            f"{where}: no {folder / 'summary.json'}; run experiments/docs_numbers.sh (or the "
            "command above the table) first"
        )


def render(args: str, results: Path) -> str:
    """The Markdown a marker ``<!-- report: ARGS -->`` stands for, headed ``results/FOLDER``."""
    name, *words = args.split()
    items = [word.split("=", 1) for word in words]
    where = f"report marker {args!r}"
    known = {"view", *(o for kinds in VIEWS.values() for r in kinds.values() for o in r)}
    unknown = sorted({k for k, _ in items} - known)
    if unknown:
        raise ValueError(f"{where}: unknown option(s) {unknown}")
    opts = {k: v for k, v in items if k not in REPEATED}
    lists = {key: [v for k, v in items if k == key] for key in REPEATED}
    rows = [results / f for v in lists["rows"] for f in v.split(",") if f]
    folder, label = results / name, f"results/{name}"
    view = opts.pop("view", None)
    given = [k for k, _ in items if k != "view"]
    if view is None and not (folder / "summary.json").is_file():  # table or gap: not known
        check_options(folder, "table", [o for o in given if o not in VIEWS["gap"][GAP]], where)
        _need_summary(folder, where)
    view = view or ("gap" if read_summary(folder).get("kind") == GAP else "table")
    kind = check_options(folder, view, given, where)
    if view in ("table1", "exponents", "b"):
        return study_table(folder, {"view": view, **opts}, results)
    if view == "bench":
        return bench_table(folder)
    _need_summary(folder, where)
    if view == "regret":
        return regret_table([folder, *rows])
    if view == "diff":
        if not lists["diff"] and not lists["gap"]:
            raise ValueError(f"{where}: view=diff needs diff=a,b or gap=a,b")
        return diff_table(folder, label, lists["diff"], results, tuple(lists["gap"]))
    if kind == GAP:
        columns = opts.get("columns", "stabl_theory,stabl_tuned").split(",")
        return gap_table(folder, label, opts.get("learner", "stabl_anytime"), columns)
    if view == "paired":
        if kind == "hpo":
            return hpo_paired_table(folder, label, opts.get("baseline", "uniform"))
        return paired_table(folder, label, opts.get("reference", "stabl"))
    windows = parse_windows(opts.get("windows", "256,1024,4096"))
    return table(folder, windows, label=label, sa=opts.get("sa", "expected"))


def bench_table(folder: Path) -> str:
    """A ``stabl-jax bench --out FOLDER`` table, headed by the machine and the day."""
    path, command = folder / "benchmark.json", f"stabl-jax bench --out {folder}"
    if not path.is_file():
        raise FileNotFoundError(
            f"no {path}; run `{command}` (experiments/docs_numbers.sh does) first"
        )
    bench = read_json_object(path, f"run `{command}` again")
    m = bench["machine"]
    _, rest = benchmark.to_markdown(bench).strip().split("\n", 1)
    devices = ", ".join(m["devices"])
    return (
        f"Machine: {m['cpu']}, {m['cpu_count']} cores; JAX {m['jax']} ({m['jax_backend']}: "
        f"{devices}), NumPy {m['numpy']}; {m['date'][:10]}.\n{rest}"
    )


def study_table(folder: Path, opts: dict[str, str], results: Path) -> str:
    """A table of the study's ``FOLDER/study.json``: ``view=table1`` (``adversary=`` default
    ``geometric``, ``n=`` the smallest), ``exponents`` (one adversary's) or ``b`` (all in L)."""
    study = script("study")
    analysis = study["load_analysis"](folder)
    if opts["view"] == "b":
        return study["exponent_summary"](analysis)
    adversary = opts.get("adversary", "geometric")
    if adversary not in analysis:
        raise ValueError(
            f"{folder / 'study.json'} has no adversary {adversary!r}: {list(analysis)}"
        )
    if opts["view"] == "exponents":
        return study["exponent_tables"](analysis, adversary)
    n = int(opts.get("n", min(analysis[adversary]["arms"])))
    tuned = study["load_analysis"](results / opts["tuned"]) if "tuned" in opts else None
    return study["table_one"](analysis, adversary, n, tuned=tuned)


def parse_windows(text: str) -> tuple[int, ...]:
    """``"256,1024"`` -> ``(256, 1024)``: distinct window lengths, ints >= 1."""
    try:
        windows = tuple(int(w) for w in text.split(","))
    except ValueError:
        windows = ()
    if not windows or min(windows) < 1:
        raise ValueError(f"windows must be comma-separated ints >= 1, e.g. 256,1024, got {text!r}")
    if len(set(windows)) < len(windows):
        raise ValueError(f"windows {text!r} give a window twice: give each length once")
    return windows


def update(text: str, results: Path) -> tuple[str, list[str], list[str]]:
    """``text`` with every block regenerated, the markers changed, and those with no folder."""
    changed: list[str] = []
    missing: list[str] = []

    def replace(match: re.Match) -> str:
        try:
            body = "\n" + render(match["args"], results) + "\n\n"
        except FileNotFoundError as exc:
            missing.append(str(exc))
            return match.group(0)
        if body != match["body"]:
            changed.append(match["args"])
        return match.group(1) + body + match.group(4)

    return MARKER.sub(replace, text), changed, missing


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("marker", nargs="?", metavar="MARKER", help="'FOLDER [option=value ...]'")
    mode.add_argument("--update", type=Path, metavar="DOC", help="rewrite DOC's marked tables")
    mode.add_argument("--check", type=Path, metavar="DOC", help="exit 1 if a table would change")
    parser.add_argument("--results", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    try:
        return _main(args)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, ValueError) as exc:
        parser.error(str(exc))  # a document or folder that is not there, a bad option


def _main(args: argparse.Namespace) -> int:
    if args.marker is not None:
        print(render(args.marker, args.results) + "\n")
        return 0
    doc = args.update or args.check
    try:
        text = doc.read_text()
    except UnicodeDecodeError as exc:  # its words do not name the file
        raise ValueError(f"{doc} is not UTF-8 text ({exc}): give a Markdown document") from exc
    new, changed, missing = update(text, args.results)
    for problem in missing:
        print(problem, file=sys.stderr)
    if args.update:
        write_text(doc, new)  # atomically: a full disk leaves the document whole
        print(f"{doc}: {len(MARKER.findall(text))} tables, {len(changed)} rewritten")
        return 1 if missing else 0
    for marker in changed:
        print(f"{doc}: differs from {args.results}: <!-- report: {marker} -->")
    return 1 if changed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
