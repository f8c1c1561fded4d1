"""PNG plots of an experiment: moving averages, SA(L) against L, probability on the best arm.

Every ``plot_*`` function writes the figure ``path``, titled ``title``, and returns its path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stabl_jax.experiment import files
from stabl_jax.versions import __version__

DPI = 120
FIGSIZE = (11.0, 5.0)  # the legend takes the right of it
MAX_POINTS = 4000  # curves are thinned to at most this many points (the eye sees no more)
MARKS_PER_LINE = 12  # markers on a time curve (staggered per line so coinciding lines show)
#: SA(L) is drawn on a symmetric-log y axis, linear on ``[-SYMLOG_LINEAR, SYMLOG_LINEAR]``:
#: a negative SA(L) (the learner beat the best arm on every window) stays visible.
SYMLOG_LINEAR = 10.0
UNIT_RANGE = (-0.02, 1.02)  # the y range of a probability or fraction: its ends stay in view
#: The PNG ``Software`` text of every figure written here (followed by the version).
SOFTWARE = "stabl_jax"

#: Legend labels of the registry names (the paper's names where it has one).
LABELS: dict[str, str] = {
    "uniform": "Uniform",
    "exp3": "EXP3",
    "exp3_uniform": "EXP3 (uniform exploration)",
    "exp3_tuned": "EXP3 (uniform exploration, tuned)",
    "exp3s": "Exp3.S",
    "exp3_ix": "Exp3-IX",
    "sw_ucb": "SW-UCB",
    "d_ucb": "D-UCB",
    "ucb1": "UCB1",
    "klucb": "kl-UCB",
    "sw_klucb": "SW-klUCB",
    "d_klucb": "D-klUCB",
    "flh": "FLH",
    "eflh": "EFLH",
    "eflh_saol": "EFLH (SAOL meta)",
    "cusum_ucb": "CUSUM-UCB",
    "m_ucb": "M-UCB",
    "glr_klucb": "GLR-klUCB",
    "rexp3": "Rexp3",
    "adswitch": "AdSwitch",
    "master": "MASTER (UCB1)",
    "thompson": "Thompson sampling",
    "discounted_thompson": "Discounted TS",
    "sw_thompson": "SW-TS",
    "tsallis_inf": "Tsallis-INF",
    "stabl": "StABL",
    "stabl_naive": "StABL Naive",
    "stabl_single_scale": "StABL Single Scale",
    "stabl_tuned": "StABL (tuned scales)",
    "stabl_vizier": "StABL, authors' code (Vizier)",
    "stabl_vizier_naive": "StABL Naive, authors' code (Vizier)",
    "stabl_vizier_single_scale": "StABL Single Scale, authors' code (Vizier)",
    "exp3_vizier": "EXP3, authors' code (Vizier)",
    "exp3_ix_vizier": "Exp3-IX, authors' code (Vizier)",
    "stabl_bco": "StABL-BCO (Alg. 3)",
    "stabl_bco_log_t": "StABL-BCO (Alg. 3, factor log2 T)",
    "stabl_bco_two_query": "StABL-BCO two-query (App. D)",
    "fkm": "FKM one-point",
    "two_point_ogd": "two-point OGD",
    "ogd_full_info": "OGD, full information",
}


def label(name: str) -> str:
    """The legend label of a learner's registry name."""
    return LABELS.get(name, name)


#: Words by which a config's description names the step sizes it runs at.
REGIME_WORDS: tuple[str, ...] = ("printed", "tuned", "scales", "authors'", "default", "vizier")


def heading(name: str, description: str, *, sets_params: bool) -> str:
    """The first title line of a config's figures: what it runs, at which step sizes.

    Example:
      >>> heading("equal", "Fig. 1 left, N=30", sets_params=False)
      'Fig. 1 left, N=30 (printed step sizes)'
    """
    text = description or name
    if not sets_params and not any(w in text.lower() for w in REGIME_WORDS):
        text += " (printed step sizes)"
    return text


@dataclasses.dataclass(frozen=True)
class Style:
    """How one learner is drawn in every figure: its color, line style and marker."""

    color: str
    linestyle: str
    marker: str


#: The style of every registry name: a family shares a hue, a variant differs in line style
#: and marker.
STYLES: dict[str, Style] = {
    "uniform": Style("0.45", ":", "x"),
    "exp3": Style("tab:blue", "-", "o"),
    "exp3_uniform": Style("tab:blue", "--", "s"),
    "exp3_tuned": Style("tab:cyan", "-", "D"),
    "exp3s": Style("tab:olive", "-", "^"),
    "exp3_ix": Style("tab:brown", "--", "<"),
    "sw_ucb": Style("tab:pink", "-", "P"),
    "d_ucb": Style("tab:pink", "--", "X"),
    "sw_klucb": Style("tab:pink", "-.", "d"),
    "d_klucb": Style("tab:pink", ":", "s"),
    "ucb1": Style("tab:green", "-", "o"),
    "klucb": Style("tab:green", ":", "d"),
    "hedge": Style("0.2", "-", "*"),
    "saol_hedge": Style("0.2", "--", "h"),
    "saol": Style("tab:olive", "--", "h"),
    "flh": Style("tab:gray", "-.", "p"),
    "eflh": Style("tab:gray", "--", "8"),
    "eflh_saol": Style("tab:gray", ":", "h"),
    "cusum_ucb": Style("tab:cyan", "--", "P"),
    "m_ucb": Style("tab:cyan", ":", "X"),
    "glr_klucb": Style("tab:brown", "-", "d"),
    "rexp3": Style("tab:brown", ":", "H"),
    "adswitch": Style("tab:olive", ":", "d"),
    "master": Style("tab:olive", "-.", "*"),
    "thompson": Style("tab:purple", "-", "o"),
    "discounted_thompson": Style("tab:purple", "--", "s"),
    "sw_thompson": Style("tab:purple", ":", "^"),
    "tsallis_inf": Style("tab:olive", ":", "D"),
    "stabl": Style("tab:red", "-", "o"),
    "stabl_tuned": Style("tab:orange", "-", "D"),
    "stabl_naive": Style("tab:red", "--", "^"),
    "stabl_single_scale": Style("tab:red", ":", "v"),
    "stabl_one_query": Style("tab:orange", "--", "<"),
    "stabl_anytime": Style("tab:orange", ":", ">"),
    "stabl_adaptive": Style("tab:orange", "-.", "P"),
    "stabl_rate_grid": Style("tab:red", "-.", "X"),
    "stabl_vizier": Style("tab:green", "-.", "s"),
    "stabl_vizier_naive": Style("tab:green", "--", "^"),
    "stabl_vizier_single_scale": Style("tab:green", ":", "v"),
    "exp3_vizier": Style("tab:purple", "-.", "v"),
    "exp3_ix_vizier": Style("tab:purple", "--", ">"),
    "stabl_bco": Style("tab:red", "-", "o"),
    "stabl_bco_log_t": Style("tab:orange", "--", "D"),
    "stabl_bco_two_query": Style("tab:red", "-.", "^"),
    "fkm": Style("tab:blue", "-", "s"),
    "two_point_ogd": Style("tab:purple", "--", "v"),
    "ogd_full_info": Style("0.2", ":", "*"),
}

#: Styles for names outside :data:`STYLES`: the one a name hashes to, or the next free one.
_COLORS = ("blue", "orange", "green", "red", "purple", "brown", "pink", "gray", "olive", "cyan")
FALLBACK_STYLES: tuple[Style, ...] = tuple(
    Style(
        f"tab:{_COLORS[i % 10]}",
        ("-", "--", "-.", ":")[i % 4],
        ("o", "s", "^", "D", "v", "P", "X")[i % 7],
    )
    for i in range(40)
)


def styles(names: Sequence[str]) -> dict[str, Style]:
    """The :class:`Style` of each of ``names``: :data:`STYLES`', else a free fallback style.

    The fallback is chosen from the name's hash, so it is the same in every figure.

    Example:
      >>> styles(["stabl", "my_learner"])["stabl"]
      Style(color='tab:red', linestyle='-', marker='o')
    """
    chosen = {name: STYLES[name] for name in names if name in STYLES}
    for name in names:
        if name in chosen:
            continue
        start = zlib.crc32(name.encode()) % len(FALLBACK_STYLES)
        ring = FALLBACK_STYLES[start:] + FALLBACK_STYLES[:start]
        # (field index, value) pairs already drawn; a style apart shares none of them
        taken = {(i, v) for st in chosen.values() for i, v in enumerate(dataclasses.astuple(st))}
        apart = [st for st in ring if taken.isdisjoint(enumerate(dataclasses.astuple(st)))]
        unused = [st for st in ring if st not in chosen.values()]
        chosen[name] = (apart or unused or list(ring))[0]
    return chosen


@dataclasses.dataclass(frozen=True)
class Band:
    """One curve with a 95% band: ``mean +- half`` at ``x``.

    Attributes:
      name, label: the learner's registry name (fixes its style) and the legend text.
      x, mean: ``(P,)`` abscissae and the curve.
      half: ``(P,)`` half-width of the 95% interval (NaN: no band).
    """

    name: str
    label: str
    x: np.ndarray
    mean: np.ndarray
    half: np.ndarray

    def __post_init__(self) -> None:
        shapes = {f: np.shape(getattr(self, f)) for f in ("x", "mean", "half")}
        if len(shapes["x"]) != 1 or len(set(shapes.values())) != 1:
            raise ValueError(
                f"Band {self.name!r}: x, mean and half must be 1-D arrays of one length, got "
                + ", ".join(f"{f} {shape}" for f, shape in shapes.items())
            )


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the ``Agg`` backend, imported on first use."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _thin(band: Band) -> Band:
    step = max(1, int(np.ceil(band.x.shape[0] / MAX_POINTS)))
    if step == 1:
        return band
    idx = np.unique(np.r_[np.arange(0, band.x.shape[0], step), band.x.shape[0] - 1])
    return dataclasses.replace(band, x=band.x[idx], mean=band.mean[idx], half=band.half[idx])


def _draw_axes(
    ax: Any,
    bands: Sequence[Band],
    drawn: Mapping[str, Style],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    vlines: Sequence[float] = (),
    symlog: bool = False,
    xlog: bool = False,
    ylim: tuple[float, float] | None = None,
    markers: bool = False,
    legend: bool = True,
    fontsize: int = 11,
) -> None:
    """Draw ``bands`` (mean lines with 95% bands) on one matplotlib axes.

    ``markers``: a marker at every point, else :data:`MARKS_PER_LINE` staggered ones.
    ``symlog``: log2 x axis and a symmetric-log y axis (linear within ``+-SYMLOG_LINEAR``).
    """
    for index, band in enumerate(bands):
        band = band if markers else _thin(band)
        step = max(1, band.x.shape[0] // MARKS_PER_LINE)
        style = drawn[band.name]
        ax.plot(
            band.x,
            band.mean,
            color=style.color,
            lw=1.6,
            ls=style.linestyle,
            label=band.label,
            marker=style.marker,
            markevery=None if markers else (index * step // max(1, len(bands)), step),
            ms=5,
        )
        if np.isfinite(band.half).any():
            lower, upper = band.mean - band.half, band.mean + band.half
            ax.fill_between(band.x, lower, upper, color=style.color, alpha=0.2, lw=0)
    for i, x in enumerate(vlines):
        ax.axvline(x, color="0.35", ls="--", lw=1.0, label="change point" if i == 0 else None)
    if symlog:
        ax.set_xscale("log", base=2)
        ax.set_yscale("symlog", linthresh=SYMLOG_LINEAR)
        ax.axhline(0.0, color="0.35", ls=":", lw=1.0)
    elif xlog:
        ax.set_xscale("log")
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_title(title, fontsize=fontsize, wrap=True)
    ax.set_xlabel(xlabel, fontsize=fontsize)
    ax.set_ylabel(ylabel, fontsize=fontsize)
    ax.grid(True, which="major", alpha=0.3)
    if legend:
        legend_outside(ax, fontsize=max(6, fontsize - 2))


def legend_outside(ax: Any, fontsize: int = 9) -> Any:
    """Place the legend of ``ax`` right of its axes, top-aligned; returns the legend."""
    return ax.legend(
        fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0
    )


def save_figure(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` atomically, in its suffix's format (default PNG); returns it.

    A PNG is tagged ``Software: stabl_jax <version>`` (:data:`SOFTWARE`).
    """
    path = Path(path)
    fmt = path.suffix[1:].lower() or "png"
    metadata = {"Software": f"{SOFTWARE} {__version__}"} if fmt == "png" else None
    files.atomic_write(path, lambda f: fig.savefig(f, format=fmt, dpi=DPI, metadata=metadata))
    return path


@contextlib.contextmanager
def _figure(title: str, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """A figure titled across its full width and its axes (default: one, :data:`FIGSIZE`).

    The figure is closed on exit.
    """
    plt = pyplot()
    subplots.setdefault("figsize", FIGSIZE)
    fig, axes = plt.subplots(layout="constrained", **subplots)
    try:
        fig.suptitle(title, fontsize=11, wrap=True)
        yield fig, axes
    finally:
        plt.close(fig)


def _draw(bands: Sequence[Band], path: str | Path, *, title: str, **options: Any) -> Path:
    """One figure of ``bands`` written to ``path``; ``options`` are :func:`_draw_axes`'s."""
    with _figure(title) as (fig, ax):
        _draw_axes(ax, bands, styles([b.name for b in bands]), title="", **options)
        return save_figure(fig, path)


def plot_panels(
    panels: Sequence[tuple[str, Sequence[Band]]],
    path: str | Path,
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    ncols: int = 4,
    ylim: tuple[float, float] | None = None,
    hline: float | None = None,
    names: Sequence[str] | None = None,
) -> Path:
    """A grid of panels, one per ``(panel title, bands)``, with shared styles and one legend below.

    Args:
      panels: per panel its title and its curves.
      xlabel, ylabel: axis labels of every panel.
      ncols: panels per row.
      ylim: common y range, or ``None``.
      hline: a horizontal reference line, or ``None``.
      names: every learner of the figure (default: the first panel's), to fix their styles.
    """
    if not panels:
        raise ValueError("plot_panels needs at least one panel")
    ncols = max(1, min(ncols, len(panels)))
    nrows = -(-len(panels) // ncols)
    drawn = styles(list(names) if names is not None else [b.name for b in panels[0][1]])
    small = len(panels) > 4
    size = (3.6 * ncols + 0.5, 2.9 * nrows + 0.9) if small else (6.2 * ncols, 4.6 * nrows)
    draw = functools.partial(_draw_axes, xlabel=xlabel, ylabel=ylabel, ylim=ylim, legend=False)
    with _figure(title, nrows=nrows, ncols=ncols, figsize=size, squeeze=False) as (fig, axes):
        for ax, (panel_title, bands) in zip(axes.flat, panels, strict=False):
            draw(ax, bands, drawn, title=panel_title, fontsize=8 if small else 10)
            if hline is not None:
                ax.axhline(hline, color="0.35", ls=":", lw=1.0)
        for ax in list(axes.flat)[len(panels) :]:
            ax.set_visible(False)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(6, len(labels)))
        return save_figure(fig, path)


def plot_profile(bands: Sequence[Band], path: str | Path, *, title: str) -> Path:
    """Dolan-More performance profiles ``rho_s(tau)`` against ``tau`` (log axis).

    Args:
      bands: per learner, ``x = tau`` and ``mean = rho_s(tau)``; the label carries the score.
    """
    xlabel = "performance ratio tau (best gap / best gap of the best learner)"
    ylabel = "fraction of problems within tau of the best"
    return _draw(bands, path, title=title, xlabel=xlabel, ylabel=ylabel, xlog=True, ylim=UNIT_RANGE)


def plot_moving_average(
    bands: Sequence[Band],
    path: str | Path,
    *,
    title: str,
    window: int,
    quantity: str = "reward",
    change_points: Sequence[int] = (),
) -> Path:
    """A moving average against rounds, one line per learner, change points dashed.

    Args:
      bands: per learner, the ``(P,)`` mean and 95% half-width over runs at rounds ``x``.
      window: the moving-average window (for the axis label).
      quantity: what is averaged (``"reward"``, ``"loss l_t(x_t)"``), for the axis label.
      change_points: rounds of the changes (empty when they differ per run).
    """
    ylabel = f"{quantity}, moving average over {window} rounds"
    return _draw(bands, path, title=title, xlabel="round t", ylabel=ylabel, vlines=change_points)


def plot_adaptive_regret(bands: Sequence[Band], path: str | Path, *, title: str) -> Path:
    """SA(L), the worst regret over any window of ``L`` rounds, against ``L``.

    Args:
      bands: per learner, mean and 95% half-width over runs of SA(L) at ``x = L``.
    """
    xlabel = "window length L (rounds, log2 axis)"
    ylabel = (
        f"SA(L), max regret over windows of length L\n(symlog axis, linear in ±{SYMLOG_LINEAR:g})"
    )
    return _draw(bands, path, title=title, xlabel=xlabel, ylabel=ylabel, symlog=True, markers=True)


def plot_cumulative_regret(
    bands: Sequence[Band], path: str | Path, *, title: str, change_points: Sequence[int] = ()
) -> Path:
    """Cumulative regret against the best arm of each round, against rounds ``t``.

    Args:
      bands: per learner, mean and 95% half-width over runs at rounds ``x``.
      change_points: rounds where the best arm changes.
    """
    ylabel = "cumulative regret to the best arm of each round"
    return _draw(bands, path, title=title, xlabel="round t", ylabel=ylabel, vlines=change_points)


def plot_paired_segments(
    diffs: Sequence[Band], path: str | Path, *, title: str, reference: str
) -> Path:
    """Per segment, every learner's mean reward minus ``reference``'s, with t 95% error bars.

    Args:
      diffs: per learner, ``x`` the segments ``1 .. S``, ``mean`` and ``half`` the paired
        difference and its 95% half-width.
      reference: the reference learner's label (for the axis label).
    """
    drawn = styles([d.name for d in diffs])
    with _figure(title) as (fig, ax):
        width = 0.7 / max(1, len(diffs))
        for index, diff in enumerate(diffs):
            style = drawn[diff.name]
            x = diff.x + (index - (len(diffs) - 1) / 2) * width
            ax.errorbar(
                x,
                diff.mean,
                yerr=diff.half,
                color=style.color,
                marker=style.marker,
                ms=6,
                ls="none",
                capsize=3,
                elinewidth=1.4,
                label=diff.label,
            )
        ax.axhline(0.0, color="0.35", ls=":", lw=1.0)
        segments = sorted({int(v) for d in diffs for v in d.x})
        ax.set_xticks(segments, [f"segment {j}" for j in segments])
        ax.set_xlabel("segment (between change points)", fontsize=11)
        ax.set_ylabel(f"mean reward on the segment\nminus {reference}'s (paired)", fontsize=11)
        ax.grid(True, axis="y", alpha=0.3)
        legend_outside(ax)
        return save_figure(fig, path)


def write_plots(
    folder: str | Path,
    *,
    reward: Sequence[Band],
    adaptive_regret: Sequence[Band],
    prob_best: Sequence[Band],
    titles: Mapping[str, str],
    window: int,
    change_points: Sequence[int],
    filenames: Mapping[str, str],
) -> list[Path]:
    """Write the reward, SA(L) and ``prob_best`` plots into ``folder``; returns their paths."""
    folder = Path(folder)
    return [
        plot_moving_average(
            reward,
            folder / filenames["reward"],
            title=titles["reward"],
            window=window,
            change_points=change_points,
        ),
        plot_adaptive_regret(
            adaptive_regret, folder / filenames["adaptive_regret"], title=titles["adaptive_regret"]
        ),
        _draw(
            prob_best,
            folder / filenames["prob_best"],
            title=titles["prob_best"],
            xlabel="round t",
            ylabel=f"P(play best arm), moving average over {window}",
            vlines=change_points,
            ylim=UNIT_RANGE,
        ),
    ]


#: The file of a results folder with the curves of its plots (:func:`save_curves`).
CURVES = "curves.npz"


def save_curves(folder: str | Path, curves: Mapping[str, Sequence[Band]]) -> Path:
    """Write the curves behind a folder's plots to ``folder / curves.npz``, to restyle a figure
    without recomputing it.

    Per plot (the PNG's stem) and learner, ``{plot}/{name}/x``, ``{plot}/{name}/mean`` and
    ``{plot}/{name}/half`` (``(P,)`` float64, every point; the figure thins a curve past
    :data:`MAX_POINTS`): the line is ``mean`` at ``x``, the band ``mean +- half`` (NaN: none).

    Args:
      folder: the results folder.
      curves: ``{plot: bands}``, the bands as drawn.

    Returns:
      The path written.
    """
    arrays = {
        f"{plot}/{band.name}/{field}": np.asarray(getattr(band, field), np.float64)
        for plot, bands in curves.items()
        for band in bands
        for field in ("x", "mean", "half")
    }
    path = Path(folder) / CURVES
    np.savez(path, **arrays)  # type: ignore[arg-type]  # uncompressed, as traces.npz
    return path


# --- step-size sensitivity (experiments/sensitivity.py) ---------------------------------------


@dataclasses.dataclass(frozen=True)
class Grid:
    """A score on a two-parameter grid, with its 95% half-width and the chosen cell.

    Attributes:
      name, label: the learner's registry name and the panel title.
      xlabel, ylabel: the two parameters' names.
      x, y: ``(J,)`` grid values of the columns, ``(I,)`` of the rows.
      mean, half: ``(I, J)`` the score and its 95% half-width.
      chosen: ``(i, j)`` the chosen cell.
    """

    name: str
    label: str
    xlabel: str
    ylabel: str
    x: np.ndarray
    y: np.ndarray
    mean: np.ndarray
    half: np.ndarray
    chosen: tuple[int, int]


def _tick(value: float) -> str:
    return f"{value:g}"


def grid_edges(grid: Grid) -> list[str]:
    """The grid edges the chosen cell sits on (``["upper edge of meta_lr_scale"]``).

    A lower end at 0 is the parameter's own bound, not the grid's, and is not listed.
    """
    edges = []
    for axis, values, at in (
        (grid.xlabel, grid.x, grid.chosen[1]),
        (grid.ylabel, grid.y, grid.chosen[0]),
    ):
        if at == len(values) - 1:
            edges.append(f"upper edge of {axis}")
        elif at == 0 and values[0] != 0:
            edges.append(f"lower edge of {axis}")
    return edges


def plot_grids(grids: Sequence[Grid], path: str | Path, *, title: str, score: str) -> Path:
    """Heatmaps of a score over :class:`Grid` panels; ``score`` labels the color bar."""
    if not grids:
        raise ValueError("plot_grids needs at least one grid")
    ncols = min(2, len(grids))
    nrows = -(-len(grids) // ncols)
    low = min(float(np.nanmin(g.mean)) for g in grids)
    high = max(float(np.nanmax(g.mean)) for g in grids)
    title += "\nbox: the chosen (best) point; dot: its 95% interval overlaps the chosen point's"
    size = (6.4 * ncols, 4.4 * nrows + 0.6)
    with _figure(title, nrows=nrows, ncols=ncols, figsize=size, squeeze=False) as (fig, axes):
        for ax, grid in zip(axes.flat, grids, strict=False):
            image = ax.imshow(
                grid.mean, origin="lower", aspect="auto", cmap="viridis", vmin=low, vmax=high
            )
            i0, j0 = grid.chosen
            near = grid.mean + grid.half >= grid.mean[i0, j0] - grid.half[i0, j0]
            for i, j in np.ndindex(grid.mean.shape):
                value = grid.mean[i, j]
                text = f"{value:.3f}"[1:] if 0 <= value < 1 else f"{value:.2g}"
                shade = "w" if value < low + 0.6 * (high - low) else "k"
                ax.text(j, i, text, ha="center", va="center", fontsize=6, color=shade)
                if near[i, j] and (i, j) != (i0, j0):
                    ax.plot(j, i - 0.32, ".", color=shade, ms=3)
            ax.add_patch(pyplot().Rectangle((j0 - 0.5, i0 - 0.5), 1, 1, fill=False, ec="k", lw=2.2))
            ny, nx = grid.mean.shape
            ax.set_xticks(range(nx), [_tick(v) for v in grid.x], fontsize=7)
            ax.set_yticks(range(ny), [_tick(v) for v in grid.y], fontsize=7)
            ax.set_xlabel(grid.xlabel, fontsize=9)
            ax.set_ylabel(grid.ylabel, fontsize=9)
            chosen = f"{grid.xlabel}={_tick(grid.x[j0])}, {grid.ylabel}={_tick(grid.y[i0])}"
            where = ", ".join(grid_edges(grid)).upper() or "interior"
            ax.set_title(f"{grid.label}\nchosen {chosen} ({where})", fontsize=9, wrap=True)
        for ax in list(axes.flat)[len(grids) :]:
            ax.set_visible(False)
        fig.colorbar(image, ax=axes, shrink=0.8, label=score)
        return save_figure(fig, path)


def plot_sensitivity(
    bands: Sequence[Band],
    path: str | Path,
    *,
    title: str,
    xlabel: str,
    score: str,
    chosen: Mapping[str, float],
) -> Path:
    """A score against one parameter's grid (log axis), one line with a 95% band per learner.

    Args:
      bands: per learner, the score at the grid values ``x``.
      xlabel: the parameter's name.
      score: the y axis label.
      chosen: per learner, the chosen value of ``x`` (starred).
    """
    drawn = styles([b.name for b in bands])
    with _figure(title) as (fig, ax):
        _draw_axes(ax, bands, drawn, title="", xlabel=xlabel, ylabel=score, xlog=True, markers=True)
        for band in bands:
            at = int(np.argmin(np.abs(band.x - chosen[band.name])))
            ax.plot(band.x[at], band.mean[at], "*", color=drawn[band.name].color, ms=16, mec="k")
        ends = [min(float(b.x.min()) for b in bands), max(float(b.x.max()) for b in bands)]
        for i, x in enumerate(ends):
            ax.axvline(x, color="0.35", ls=":", lw=1.0, label="grid's edge" if i == 0 else None)
        legend_outside(ax)
        return save_figure(fig, path)
