"""The scaling study: SA(L) against L and n on adversaries that change on many time scales.

Each point ``(adversary, n)`` is one results folder per learner group of
``configs/study_<adversary>.toml`` (``study_geometric_tuned.toml``: the tuned scales) at
``n`` arms, ``<out>/<adversary>-n<n>-<group>``::

    for a in geometric random; do for n in 10 30 100 300; do
      stabl-jax run configs/study_$a.toml --set env.num_arms=$n --out results/study/$a-n$n-base \
        --set 'learners=["stabl","exp3_uniform","uniform","stabl_naive","stabl_single_scale"]'
      stabl-jax run configs/study_$a.toml --set env.num_arms=$n \
        --set 'learners=["saol","stabl_one_query","saol_hedge","exp3s"]' \
        --out results/study/$a-n$n-baselines
      stabl-jax run configs/study_$a.toml --set env.num_arms=$n \
        --set 'learners=["flh","eflh","eflh_saol"]' --out results/study/$a-n$n-flh
    done; done
    python experiments/study.py [--out results/study] [--bootstrap 1000] [--figures DIR]

A point's groups share config and seed, hence the draws: they are merged (checked). From the
complete points: the exponent in ``L``, least squares ``log SA(L) = a + b log L`` over
``L <= T / 4`` (``--fit-windows``), ``SA(L)`` the mean over runs of the per-run SA(L) of the
expected loss ``<p_t, l_t>``; in ``n``, ``log SA(L) = a + c log n`` at fixed ``L``; percentile
bootstrap 95% intervals over runs. Writes ``<out>/study.json``, ``<out>/study.md`` (Table 1 per
adversary and n, the exponents) and with ``--figures`` ``<prefix>_<adversary>_sa_vs_{L,n}.png``.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from _cli import md_table

from stabl_jax import metrics
from stabl_jax.experiment import files, load_results, outputs, plots
from stabl_jax.experiment.arguments import Distinct, Parser
from stabl_jax.experiment.tables import read_json_object

ADVERSARIES = ("geometric", "random")
ARMS: tuple[int, ...] = (10, 30, 100, 300)
TABLE_WINDOWS: tuple[int, ...] = (256, 1024, 4096)
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20240506
SA_FIELD = "sa_expected"  # per-run SA(L) of the expected loss <p_t, l_t>

#: Table 1 of the paper and the study's rows, by registry name: (algorithm, adaptive-regret
#: bound, queries per round as the paper states it); ``I`` is the interval length (our ``L``).
PAPER_ROWS: dict[str, tuple[str, str, str]] = {
    "flh": ("FLH (Hazan & Seshadhri 2009)", "√(nT)", "O(log T)"),
    "saol": ("SAOL (Daniely et al. 2015), bandit", "√(nI log T)", "O(log T)"),
    "eflh": ("EFLH-style (Lu & Hazan 2022), FLH meta", "I^(1/2+ε)·√(n log T)", "O(log log T / ε)"),
    "eflh_saol": ("EFLH-style, SAOL meta", "I^(1/2+ε)·√(n log T)", "1 + O(log log T / ε)"),
    "stabl": ("StABL (this paper, Thm. 1)", "√(nI log n)·log^1.5 T", "2"),
    "stabl_one_query": (
        "StABL, one query",
        "Ω(I^(1−ε)) for any 1-query learner (Daniely et al. 2015)",
        "1",
    ),
}
OTHER_BOUNDS: dict[str, str] = {
    "saol_hedge": "full information; not in Table 1",
    "exp3s": "switching regret; not in Table 1",
    "hedge": "full information, static regret only",
    "exp3": "static regret √(nT log n) only",
    "exp3_uniform": "static regret √(nT log n) only",
    "uniform": "none (never learns): linear in L",
    "stabl_naive": "none (the paper's ablation)",
    "stabl_single_scale": "none (the paper's ablation)",
    "stabl_anytime": "as StABL (doubling)",
}


def fit_power_law(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a, b)`` of the least-squares fit ``log y = a + b log x`` along the last axis of
    ``y`` (``(..., K)``, positive; leading axes independent), ``x`` ``(K,)`` positive.

    Example:
      >>> a, b = fit_power_law(np.array([1.0, 4.0, 16.0]), np.array([3.0, 6.0, 12.0]))
      >>> round(float(b), 6), round(float(np.exp(a)), 6)
      (0.5, 3.0)
    """
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    if x.ndim != 1 or x.shape[0] < 2 or np.unique(x).size < 2:
        raise ValueError(f"x must hold at least 2 distinct values, got {x!r}")
    if y.shape[-1] != x.shape[0]:
        raise ValueError(f"y's last axis must have length len(x)={x.shape[0]}, got {y.shape}")
    if np.any(x <= 0):
        raise ValueError(f"x must be positive for a log-log fit, got {x!r}")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError(
            f"y must be finite and positive for a log-log fit, got min {np.nanmin(y)!r}"
        )
    lx, ly = np.log(x), np.log(y)
    cx = lx - lx.mean()
    b = (ly - ly.mean(axis=-1, keepdims=True)) @ cx / (cx @ cx)
    return ly.mean(axis=-1) - b * lx.mean(), b


def bootstrap_means(
    samples: np.ndarray, resamples: int, rng: np.random.Generator, block: int = 100
) -> np.ndarray:
    """``(B, K)`` column means of ``B = resamples`` resamples of the rows of ``(R, K)`` samples."""
    samples = np.asarray(samples, np.float64)
    runs = samples.shape[0]
    out = np.empty((resamples, samples.shape[1]))
    for lo in range(0, resamples, block):
        hi = min(resamples, lo + block)
        out[lo:hi] = samples[rng.integers(0, runs, size=(hi - lo, runs))].mean(axis=1)
    return out


def exponent_with_interval(
    x: Sequence[float] | np.ndarray,
    columns: Sequence[np.ndarray] | np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> dict[str, Any]:
    """``{"a", "b", "lo", "hi", "se", "note"}``: the exponent ``b`` of ``mean(y) ~ e^a x^b``,
    its percentile bootstrap interval from ``default_rng(seed)``. ``columns``: ``K`` ``(R_k,)``
    arrays (resampled apart) or one ``(R, K)`` array of runs. A mean ``<= 0`` (of the data or a
    resample) makes ``b`` or the interval NaN; ``note`` says which."""
    rng = np.random.default_rng(seed)
    xs = np.asarray(x, np.float64)
    if isinstance(columns, np.ndarray) and columns.ndim == 2:
        full, boot = columns.mean(axis=0), bootstrap_means(columns, resamples, rng)
    else:
        if len(columns) != xs.shape[0]:
            raise ValueError(f"need one column per x value: {len(columns)} vs {xs.shape[0]}")
        full = np.array([np.mean(c) for c in columns])
        boot = np.stack(
            [bootstrap_means(np.asarray(c)[:, None], resamples, rng)[:, 0] for c in columns],
            axis=1,
        )
    fit = dict.fromkeys(("a", "b", "lo", "hi", "se"), float("nan")) | {"note": ""}
    if np.any(full <= 0):
        return fit | {"note": f"mean <= 0 at x = {xs[full <= 0].tolist()}: no power-law fit"}
    fit["a"], fit["b"] = map(float, fit_power_law(xs, full))
    bad = np.any(boot <= 0, axis=1)
    if bad.any():
        note = f"{int(bad.sum())} of {resamples} resamples have a mean <= 0: no interval"
        return fit | {"note": note}
    _, boot_b = fit_power_law(xs, boot)
    fit["lo"], fit["hi"] = map(float, np.quantile(boot_b, [(1 - level) / 2, (1 + level) / 2]))
    return fit | {"se": float(boot_b.std(ddof=1))}


def load_point(folder: Path) -> dict[str, Any]:
    """``{"windows", "runs", "change_points", "learners": {name: {"sa": (R, K), "queries"}}}``."""
    results = load_results(folder)
    traces, entries = results.traces, results.summary["learners"]
    return {
        "windows": [int(w) for w in traces["sa_window_lengths"]],
        "runs": int(results.summary["runs"]),
        "change_points": traces["env/change_points"],
        "learners": {
            name: {
                "sa": traces[f"{name}/{SA_FIELD}"].astype(np.float64),
                "queries": int(entries[name]["num_queries"]),
            }
            for name in results.learners
        },
    }


def merge_groups(groups: Sequence[Mapping[str, Any]], where: str = "") -> dict[str, Any]:
    """One point from its groups' folders; ``ValueError`` unless they faced the same draws."""
    merged = {**groups[0], "learners": dict(groups[0]["learners"])}
    for other in groups[1:]:
        if not (
            other["windows"] == merged["windows"]
            and other["runs"] == merged["runs"]
            and np.array_equal(other["change_points"], merged["change_points"])
        ):
            raise ValueError(f"{where}: groups did not face the same environment draws")
        for name in other["learners"]:
            if name in merged["learners"]:
                raise ValueError(f"{where}: learner {name!r} is in two groups")
        merged["learners"].update(other["learners"])
    return merged


def load_points(out: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The complete points under ``out`` (``<adversary>-n<n>-<group>``), groups merged."""
    loaded: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for folder in sorted(out.glob("*-n*-*")):
        adversary, _, rest = folder.name.partition("-n")
        n = rest.split("-")[0]
        if adversary in ADVERSARIES and n.isdigit() and outputs.is_complete(folder):
            loaded.setdefault((adversary, int(n)), []).append(load_point(folder))
    return {key: merge_groups(groups, f"{key[0]}-n{key[1]}") for key, groups in loaded.items()}


def check_windows(
    windows: Sequence[int], table_windows: Sequence[int], fit: Sequence[int], point: str
) -> None:
    """``ValueError`` unless the table and (>= 2) fit windows are among a point's ``windows``."""
    for flag, wanted in (("--table-windows", table_windows), ("--fit-windows", fit)):
        missing = [w for w in wanted if w not in windows]
        if missing:
            raise ValueError(
                f"{flag} {missing}: not SA(L) window lengths of {point} (its sa_windows: "
                f"{list(windows)}); choose among them, or score them with --set sa_windows=[...]"
            )
    if len(fit) < 2:
        raise ValueError(f"--fit-windows needs >= 2 window lengths to fit a slope, got {list(fit)}")


def analyse(
    points: Mapping[tuple[str, int], Mapping[str, Any]],
    *,
    table_windows: Sequence[int] = TABLE_WINDOWS,
    fit_windows: Sequence[int] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Every fit of the points, the exponent in ``L`` over ``fit_windows`` (``None``: each
    ``L <= T / 4``; SA(T), the static regret, may be negative): ``{adversary: {"arms",
    "windows", "fit_windows", "learners": {name: {"queries": {n: q}, "by_n": {n: {"mean": [K],
    "ci95": [K], "runs", "exponent_L": fit}}, "exponent_n": {L: {"arms", **fit}}}}}}``."""
    out: dict[str, Any] = {}
    exponent = functools.partial(exponent_with_interval, resamples=resamples)
    for (adversary, n), point in sorted(points.items()):
        windows = point["windows"]
        fit = list(fit_windows or [w for w in windows if 4 * w <= max(windows)])
        entry = out.setdefault(
            adversary, {"arms": [], "windows": windows, "fit_windows": fit, "learners": {}}
        )
        if windows != entry["windows"]:
            raise ValueError(f"{adversary}: points disagree on the window lengths")
        check_windows(windows, table_windows, fit, f"{adversary}-n{n}")
        cols = [windows.index(w) for w in fit]
        entry["arms"].append(n)
        for name, data in point["learners"].items():
            sa = data["sa"]
            learner = entry["learners"].setdefault(
                name, {"queries": {}, "by_n": {}, "exponent_n": {}}
            )
            learner["queries"][n] = data["queries"]
            mean, ci95 = metrics.mean_ci(sa)
            learner["by_n"][n] = {
                "mean": mean.tolist(),
                "ci95": ci95.tolist(),
                "runs": int(sa.shape[0]),
                "exponent_L": exponent(fit, sa[:, cols], seed=seed + n),
            }
    for adversary, entry in out.items():
        for name, learner in entry["learners"].items():
            arms = sorted(learner["by_n"])
            for length in table_windows if len(arms) >= 2 else ():
                j = entry["windows"].index(length)
                columns = [points[(adversary, n)]["learners"][name]["sa"][:, j] for n in arms]
                fit_n = exponent(arms, columns, seed=seed + length)
                learner["exponent_n"][length] = {"arms": arms, **fit_n}
    return out


def _exponent(value: float) -> str:
    """An exponent to two decimals; one that rounds to zero is ``0.00``, never ``-0.00``."""
    text = f"{value:.2f}"
    return "0.00" if text == "-0.00" else text


def _fmt_fit(fit: Mapping[str, Any] | None) -> str:
    if fit is None:
        return "–"
    if not math.isfinite(fit["b"]):
        return "no fit (SA ≤ 0)"
    if not math.isfinite(fit["lo"]):
        return f"{_exponent(fit['b'])} [no interval]"
    return f"{_exponent(fit['b'])} [{_exponent(fit['lo'])}, {_exponent(fit['hi'])}]"


def _queries(learner: Mapping[str, Any]) -> str:
    return "/".join(str(v) for v in sorted(set(learner["queries"].values())))


def load_analysis(folder: Path) -> dict[str, Any]:
    """:func:`analyse`'s dict from ``<folder>/study.json``, its int keys (``n``, ``L``) back."""
    path = Path(folder) / "study.json"
    if not path.is_file():
        raise FileNotFoundError(f"no {path}; run experiments/study.py --out {folder} first")
    analysis = read_json_object(path, f"run experiments/study.py --out {folder} again")["analysis"]
    for entry in analysis.values():
        for learner in entry["learners"].values():
            for field in ("queries", "by_n", "exponent_n"):
                learner[field] = {int(k): v for k, v in learner[field].items()}
    return analysis


def table_one(
    analysis: Mapping[str, Any],
    adversary: str,
    n: int,
    table_windows: Sequence[int] = TABLE_WINDOWS,
    length_for_n: int | None = None,
    tuned: Mapping[str, Any] | None = None,
) -> str:
    """The empirical Table 1 of one adversary at ``n`` arms; ``tuned`` (an analysis at other
    step sizes) adds a row ``…, tuned`` under each of its learners' (then ``…, theory``)."""
    entry = analysis[adversary]
    length = length_for_n or table_windows[-1]
    fit_range = f"{min(entry['fit_windows'])}..{max(entry['fit_windows'])}"
    other = {} if tuned is None else tuned.get(adversary, {})
    if other and other["windows"] != entry["windows"]:
        raise ValueError(f"{adversary}: the tuned run's window lengths differ from the study's")

    def row(label: str, bound: str, name: str, learner: Mapping[str, Any]) -> list[str]:
        point, windows = learner["by_n"].get(n), entry["windows"]
        cells, fit_l = ["not run" for _ in table_windows], "not run"
        if point is not None:
            at = [windows.index(w) if w in windows else None for w in table_windows]
            cells = [
                "–" if j is None else f"{point['mean'][j]:.1f} ± {point['ci95'][j]:.1f}" for j in at
            ]
            fit_l = _fmt_fit(point["exponent_L"])
        fit_n = learner["exponent_n"].get(length)
        arms = "" if fit_n is None else f" (n = {', '.join(map(str, fit_n['arms']))})"
        return [label, f"`{name}`", _queries(learner), bound, *cells, fit_l, _fmt_fit(fit_n) + arms]

    rows = []
    for name in [*PAPER_ROWS, *(k for k in entry["learners"] if k not in PAPER_ROWS)]:
        default = (plots.label(name), OTHER_BOUNDS.get(name, "–"), "")
        algorithm, bound, queries = PAPER_ROWS.get(name, default)
        if name not in entry["learners"]:  # a row of the paper's Table 1 this study did not run
            rows.append([algorithm, f"`{name}`", queries, bound, *["not run"] * len(table_windows)])
            rows[-1] += ["not run", "–"]
            continue
        mine = [(algorithm, entry["learners"][name])]
        if name in other.get("learners", {}):
            mine = [(f"{algorithm}, theory", mine[0][1])]
            mine.append((f"{algorithm}, tuned", other["learners"][name]))
        rows += [row(label, bound, name, learner) for label, learner in mine]
    head = ["algorithm", "registry name", "queries/round", "bound (paper)"]
    head += [f"SA({w})" for w in table_windows]
    head += [f"exponent in L (n = {n}; L = {fit_range})", f"exponent in n (L = {length})"]
    return md_table(head, rows)


def exponent_summary(analysis: Mapping[str, Any]) -> str:
    """Every learner's exponent ``b`` in ``L`` per adversary and ``n``, and the widest interval."""
    columns = [(adversary, n) for adversary, entry in analysis.items() for n in entry["arms"]]
    names: list[str] = []
    for entry in analysis.values():
        names += [k for k in entry["learners"] if k not in names]
    heads = [
        f"{a} n = {n}" if i == 0 or columns[i - 1][0] != a else f"{n}"
        for i, (a, n) in enumerate(columns)
    ]
    rows, spread = [], 0.0
    for name in names:
        cells, queries = [], set()
        for adversary, n in columns:
            learner = analysis[adversary]["learners"].get(name)
            fit = None if learner is None else learner["by_n"].get(n, {}).get("exponent_L")
            if learner is not None and n in learner["queries"]:
                queries.add(learner["queries"][n])
            if fit is None or not (math.isfinite(fit["b"]) and math.isfinite(fit["lo"])):
                cells.append(_fmt_fit(fit))
                continue
            cells.append(_exponent(fit["b"]))
            spread = max(spread, fit["b"] - fit["lo"], fit["hi"] - fit["b"])
        rows.append([f"`{name}` ({'/'.join(str(v) for v in sorted(queries))})", *cells])
    return (
        md_table(["learner", *heads], rows) + "\n\nIn parentheses: queries per round. Every "
        f"bootstrap 95% interval of this table lies within ±{math.ceil(spread * 100) / 100:.2f} "
        "of its value."
    )


def exponent_tables(analysis: Mapping[str, Any], adversary: str) -> str:
    """Markdown: exponent in L per (learner, n), and exponent in n per (learner, L)."""
    entry = analysis[adversary]
    arms, learners = entry["arms"], entry["learners"]
    rows = [
        [f"`{name}`", *(_fmt_fit(lr["by_n"].get(n, {}).get("exponent_L")) for n in arms)]
        for name, lr in learners.items()
    ]
    text = md_table(["learner", *(f"b (n = {n})" for n in arms)], rows)
    lengths = sorted({L for lr in learners.values() for L in lr["exponent_n"]})
    if not lengths:
        return text
    rows = [
        [
            f"`{name}`",
            ", ".join(map(str, next(iter(lr["exponent_n"].values()))["arms"])),
            *(_fmt_fit(lr["exponent_n"].get(L)) for L in lengths),
        ]
        for name, lr in learners.items()
        if lr["exponent_n"]
    ]
    head = ["learner", "n values", *(f"c (L = {L})" for L in lengths)]
    return text + "\n\n" + md_table(head, rows)


def figure_names(adversaries: Sequence[str], prefix: str = "study") -> list[str]:
    """The PNGs :func:`write_figures` may write for ``adversaries``."""
    return [f"{prefix}_{a}_sa_vs_{axis}.png" for a in adversaries for axis in ("L", "n")]


def _figure(path: Path, title: str, panels: list[Any], guides: np.ndarray | None) -> Path:
    """A row of log-log panels ``(title, x label, [(x, mean, ci95, style)])`` (means ``<= 0``
    not drawn); ``guides`` (window lengths): slope-1/2 and slope-1 lines, a base-2 axis."""
    plt = plots.pyplot()
    size = (4.2 * len(panels), 4.4)
    fig, axes = plt.subplots(1, len(panels), figsize=size, layout="constrained", squeeze=False)
    axes[0][0].set_ylabel("SA(L) (expected loss), mean ± 95% CI")
    for ax, (name, xlabel, curves) in zip(axes[0], panels, strict=True):
        for x, mean, half, style in curves:
            mean = np.where(mean > 0, mean, np.nan)
            yerr = np.stack([np.minimum(half, 0.99 * mean), half])
            ax.errorbar(x, mean, yerr=yerr, ms=4, lw=1.3, capsize=2, **style)
        if guides is not None:
            for slope, line in ((0.5, ":"), (1.0, "--")):
                ref = 0.5 * guides[0] * (guides / guides[0]) ** slope
                ax.plot(guides, ref, color="0.4", ls=line, lw=1.0, label=f"∝ L^{slope:g}")
        ax.set_xscale("log", **({"base": 2} if guides is not None else {}))
        ax.set_yscale("log")
        ax.set_title(name, fontsize=11)
        ax.set_xlabel(xlabel)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="best" if guides is None else "upper left")
    fig.suptitle(title, fontsize=12)
    try:
        return plots.save_figure(fig, path)
    finally:
        plt.close(fig)


def write_figures(analysis: Mapping[str, Any], folder: Path, prefix: str = "study") -> list[Path]:
    """``<prefix>_<adversary>_sa_vs_L.png`` (a panel per n) and ``..._sa_vs_n.png`` (per table
    window): means with 95% intervals, a learner's colour and marker the same in each."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for adversary, entry in analysis.items():
        windows, learners = np.asarray(entry["windows"], np.float64), entry["learners"]
        styles = plots.styles(list(learners))

        def curve(name: str, x: Any, mean: Any, half: Any, fit: str) -> Any:
            style = dict(color=styles[name].color, marker=styles[name].marker)  # noqa: B023
            label = f"{plots.label(name)} ({fit})"
            return x, np.asarray(mean), np.asarray(half), {**style, "label": label}

        by_l = []
        for n in entry["arms"]:
            found = [(k, lr["by_n"][n]) for k, lr in learners.items() if n in lr["by_n"]]
            curves = [
                curve(k, windows, p["mean"], p["ci95"], f"b={_exponent(p['exponent_L']['b'])}")
                for k, p in found
            ]
            by_l.append((f"n = {n}", "window length L", curves))
        title = f"{prefix}_{adversary}: strongly adaptive regret against"
        path = folder / f"{prefix}_{adversary}_sa_vs_L.png"
        written.append(_figure(path, f"{title} L", by_l, windows))
        by_n = []
        for length in sorted({L for lr in learners.values() for L in lr["exponent_n"]}):
            j, curves = entry["windows"].index(length), []
            for k, lr in learners.items():
                if (fit := lr["exponent_n"].get(length)) is not None:
                    at = [lr["by_n"][int(n)] for n in fit["arms"]]
                    x = np.asarray(fit["arms"], np.float64)
                    mean, half = [p["mean"][j] for p in at], [p["ci95"][j] for p in at]
                    curves.append(curve(k, x, mean, half, f"c={_exponent(fit['b'])}"))
            by_n.append((f"L = {length}", "arms n", curves))
        if by_n:
            path = folder / f"{prefix}_{adversary}_sa_vs_n.png"
            written.append(_figure(path, f"{title} n", by_n, None))
    return written


def report(analysis: Mapping[str, Any], table_windows: Sequence[int] = TABLE_WINDOWS) -> str:
    """The Markdown of ``study.md``: per adversary, Table 1 at every n, then the exponents."""
    parts = []
    for adversary, entry in analysis.items():
        tables = [
            (f", n = {n}", table_one(analysis, adversary, n, table_windows)) for n in entry["arms"]
        ]
        tables.append((": fitted exponents", exponent_tables(analysis, adversary)))
        parts += [
            line for head, table in tables for line in (f"### {adversary}{head}", "", table, "")
        ]
    return "\n".join(parts)


#: The keys of the ``study.json`` written here: a previous study's files are replaced, no other.
STUDY_KEYS: frozenset[str] = frozenset({"meta", "analysis"})


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--out", default="results/study", help="the folder of the study's points")
    add("--table-windows", nargs="+", type=int, action=Distinct, default=list(TABLE_WINDOWS))
    add("--fit-windows", nargs="+", type=int, action=Distinct, default=None, help="L <= T/4")
    add("--bootstrap", type=int, default=BOOTSTRAP_RESAMPLES, help="resamples, >= 10")
    add("--bootstrap-seed", type=int, default=BOOTSTRAP_SEED)
    add("--figures", default=None, help="write the plots into this folder")
    add("--figure-prefix", default="study", help="file names PREFIX_<adversary>_*")
    add("--overwrite", action="store_true", help="replace --figures PNGs stabl_jax did not write")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.bootstrap < 10:
        parser.error(f"--bootstrap must be >= 10 resamples, got {args.bootstrap}")
    if args.bootstrap_seed < 0:  # numpy.random.default_rng's seeds
        parser.error(f"--bootstrap-seed must be an int >= 0, got {args.bootstrap_seed}")
    if args.figures is None and (args.overwrite or args.figure_prefix != "study"):
        parser.error("--figure-prefix and --overwrite are for --figures: give --figures FOLDER")
    try:  # before the analysis: a user's study.md or figure is never replaced
        outputs.owned_files(out, "study.json", ("study.md",), STUDY_KEYS, "experiments/study.py")
        if args.figures:
            names = figure_names(ADVERSARIES, args.figure_prefix)
            outputs.figure_paths(args.figures, names, "--figures", args.overwrite)
        points = load_points(out)
        if not points:
            raise ValueError(
                f"no complete point under {out}: run its stabl-jax run commands (module docstring)"
            )
        windows = {"table_windows": args.table_windows, "fit_windows": args.fit_windows}
        analysis = analyse(points, **windows, resamples=args.bootstrap, seed=args.bootstrap_seed)
    except (outputs.OutputError, ValueError, FileNotFoundError) as exc:
        parser.error(str(exc))
    meta = {
        "runs": {f"{a}-n{n}": p["runs"] for (a, n), p in points.items()},
        "bootstrap": {"resamples": args.bootstrap, "seed": args.bootstrap_seed},
        "sa_field": SA_FIELD,
        "command": " ".join(["python", "experiments/study.py", *(argv or sys.argv[1:])]),
    }
    files.write_json(out / "study.json", {"meta": meta, "analysis": analysis}, indent=1)
    text = report(analysis, args.table_windows)
    files.write_text(out / "study.md", text + "\n")
    print(text)
    if args.figures:
        for path in write_figures(analysis, Path(args.figures), args.figure_prefix):
            print(f"[study] figure: {path}")
        outputs.mark_folder(Path(args.figures))  # its figures: replaced by the next run
    return 0


if __name__ == "__main__":
    sys.exit(main())
