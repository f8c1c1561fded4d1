"""Plots a reader can trust: negative SA(L) is drawn, coinciding lines stay apart."""

from __future__ import annotations

import io
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from stabl_jax.experiment import outputs, plots
from stabl_jax.experiment.kinds import bandit, paired
from stabl_jax.registry import BCO_LEARNERS, LEARNERS
from stabl_jax.simulate import progress_bar
from tests.conftest import run_small_figure1


def test_adaptive_regret_axis_shows_negative_values(tmp_path):
    plt = plots.pyplot()
    fig, ax = plt.subplots()
    x, y = np.asarray([16.0, 64.0, 256.0, 1024.0]), np.asarray([10.0, 50.0, -20.0, -600.0])
    bands = [plots.Band(f"l{i}", f"learner {i}", x, y, x * 0) for i in range(2)]
    labels = {"title": "t", "xlabel": "x", "ylabel": "y"}
    plots._draw_axes(ax, bands, plots.styles(["l0", "l1"]), **labels, symlog=True)
    assert ax.get_yscale() == "symlog"
    drawn = [line for line in ax.get_lines() if line.get_label().startswith("learner")]
    assert all(np.nanmin(line.get_ydata()) == -600.0 for line in drawn)  # not masked out
    # identical curves are told apart by line style and marker
    assert drawn[0].get_linestyle() != drawn[1].get_linestyle()
    assert drawn[0].get_marker() != drawn[1].get_marker()
    plt.close(fig)
    assert plots.plot_adaptive_regret(bands, tmp_path / "sa.png", title="t").stat().st_size > 0


def test_a_band_of_unequal_lengths_is_named():
    x = np.arange(4.0)
    message = r"Band 'stabl': .* got x \(4,\), mean \(3,\), half \(4,\)"
    with pytest.raises(ValueError, match=message):
        plots.Band(name="stabl", label="StABL", x=x, mean=x[:3], half=x)
    with pytest.raises(ValueError, match=r"x \(2, 2\)"):
        plots.Band(name="stabl", label="StABL", x=x.reshape(2, 2), mean=x, half=x)


def test_figures_are_tagged_and_written_atomically(tmp_path):
    x = np.arange(10.0)
    band = plots.Band(name="stabl", label="StABL", x=x, mean=x, half=0 * x)
    path = plots.plot_adaptive_regret([band], tmp_path / "sa.png", title="t")
    assert b"Software\x00stabl_jax " in path.read_bytes()  # the PNG's text chunk
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sa.png"]  # no temporary left
    plt = plots.pyplot()
    fig, _ = plt.subplots()
    fig.savefig(tmp_path / "plain.png")  # matplotlib's own PNG: not this library's
    plt.close(fig)
    assert b"stabl_jax" not in (tmp_path / "plain.png").read_bytes()
    pdf = plots.plot_adaptive_regret([band], tmp_path / "sa.pdf", title="t").read_bytes()
    assert pdf[:5] == b"%PDF-" and b"stabl_jax " not in pdf
    with pytest.raises(outputs.OutputError, match="is a file"):
        outputs.figure_paths(path, ["a.png"], "OUT_DIR")


def _drawn_figures(monkeypatch):
    """The figures :func:`plots.save_figure` is given, drawn (their layout done), kept."""
    figures = []
    save = plots.save_figure

    def keep(fig, path):
        fig.canvas.draw()
        figures.append(fig)
        return save(fig, path)

    monkeypatch.setattr(plots, "save_figure", keep)
    monkeypatch.setattr(plots.pyplot(), "close", lambda fig: None)
    return figures


def _line_styles(fig):
    return {
        line.get_label(): (line.get_color(), line.get_linestyle(), line.get_marker())
        for ax in fig.axes
        for line in ax.get_lines()
        if not line.get_label().startswith("_")
    }


def _named(names, x):
    return [
        plots.Band(n, plots.label(n), x, np.sin(x + i), 0.1 + 0 * x) for i, n in enumerate(names)
    ]


def test_a_learner_keeps_its_style_in_every_figure(tmp_path, monkeypatch):
    """One learner, one color, line style and marker, whatever else the figure draws. The
    table names every registry learner (and every label), no two alike; a name outside it gets
    a style no other line of its figure has, the same in every figure."""
    figures = _drawn_figures(monkeypatch)
    x = np.arange(1.0, 65.0)
    two = _named(["stabl", "exp3_uniform"], x)
    three = _named(["uniform", "stabl_vizier", "stabl"], x)
    plots.plot_moving_average(two, tmp_path / "a.png", title="t", window=8)
    plots.plot_adaptive_regret(three, tmp_path / "b.png", title="t")
    first, second = (_line_styles(f) for f in figures)
    style = plots.STYLES["stabl"]
    assert first["StABL"] == second["StABL"] == (style.color, style.linestyle, style.marker)
    assert len(set(second.values())) == 3
    assert set(LEARNERS) | set(BCO_LEARNERS) <= set(plots.STYLES)
    assert set(plots.LABELS) <= set(plots.STYLES)
    bandit = [plots.STYLES[n] for n in LEARNERS]
    assert len(set(bandit)) == len(bandit)
    mine = plots.styles(["stabl", "mine", "yours"])
    assert mine == plots.styles(["stabl", "mine", "yours"]) and len(set(mine.values())) == 3
    assert mine["stabl"] == plots.STYLES["stabl"]


@pytest.mark.parametrize("kind", ["moving_average", "panels", "paired_segments", "sensitivity"])
def test_the_legend_lies_outside_the_data(tmp_path, monkeypatch, kind):
    """No legend covers a curve: its box and the axes' box do not overlap."""
    figures = _drawn_figures(monkeypatch)
    x = np.arange(1.0, 5.0)
    bands = _named(["stabl", "stabl_tuned", "exp3_uniform", "uniform"], x)
    path, labels = tmp_path / "p.png", {"xlabel": "x", "title": "t"}
    if kind == "moving_average":
        plots.plot_moving_average(bands, path, title="t", window=8)
    elif kind == "panels":
        plots.plot_panels([("a", bands), ("b", bands)], path, ylabel="y", **labels)
    elif kind == "paired_segments":
        plots.plot_paired_segments(bands, path, title="t", reference="StABL")
    else:
        chosen = {b.name: 2.0 for b in bands}
        plots.plot_sensitivity(bands, path, score="s", chosen=chosen, **labels)
    (fig,) = figures
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    assert len(legends) == 1
    box = legends[0].get_window_extent()
    for ax in fig.axes:
        if ax.get_visible():
            assert not box.overlaps(ax.get_window_extent()), kind
    assert path.stat().st_size > 1000


def test_paired_segments_plot_draws_one_bar_per_segment_and_learner(tmp_path, monkeypatch):
    figures = _drawn_figures(monkeypatch)
    x = np.arange(1.0, 5.0)
    diffs = _named(["stabl", "exp3_uniform"], x)
    path = tmp_path / "paired_segments.png"
    plots.plot_paired_segments(diffs, path, title="t", reference="StABL (tuned scales)")
    (ax,) = figures[0].axes
    bars = {bar.get_label(): bar.lines[0] for bar in ax.containers}
    points = [bars["StABL"], bars["EXP3 (uniform exploration)"]]
    assert [len(line.get_xdata()) for line in points] == [4, 4]
    np.testing.assert_array_equal(points[0].get_ydata(), diffs[0].mean)
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"segment {j}" for j in (1, 2, 3, 4)]


def test_a_title_names_the_step_sizes():
    cases = [
        ("x", "Fig. 1 left (tuned scales)", True, "Fig. 1 left (tuned scales)"),
        ("x", "Fig. 1 left", False, "Fig. 1 left (printed step sizes)"),
        ("x", "the authors' StABL", False, "the authors' StABL"),
        ("figure1", "", True, "figure1"),
    ]
    for name, description, sets_params, title in cases:
        assert plots.heading(name, description, sets_params=sets_params) == title


def test_the_default_reference_is_tuned_stabl_where_a_config_runs_it():
    assert paired.default_reference(["uniform", "stabl", "stabl_tuned"]) == "stabl_tuned"
    assert paired.default_reference(["uniform", "stabl"]) == "stabl"
    assert paired.default_reference(["uniform", "exp3"]) == "uniform"

    def result(names, segments=4):
        return SimpleNamespace(outcomes=dict.fromkeys(names), num_segments=segments)

    assert bandit.has_paired_segments(result(["uniform", "stabl"]))
    assert not bandit.has_paired_segments(result(["uniform", "stabl"], segments=1))
    assert not bandit.has_paired_segments(result(["stabl"]))


def _outside(fig) -> list[str]:
    """The titles of ``fig`` (its own and its axes') whose box leaves the figure's."""
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    titles = [fig._suptitle, *(ax.title for ax in fig.axes if ax.get_visible())]
    outside = []
    for title in titles:
        if title is None or not title.get_text():
            continue
        box = title.get_window_extent(renderer)
        if box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1:
            outside.append(f"{title.get_text()!r}: {box.extents} outside {frame.extents}")
    return outside


def test_every_title_lies_within_its_figure(tmp_path, monkeypatch):
    """The plots of ``stabl-jax run`` of Figure 1 (a long title): no title cut at the edges; a
    title line far wider than the figure is broken into lines that fit."""
    figures = _drawn_figures(monkeypatch)
    run_small_figure1(tmp_path / "out")
    drawn = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert "cumulative_regret.png" in drawn and len(figures) == len(drawn)
    band = _named(["stabl"], np.arange(1.0, 9.0))
    title = "a heading\n" + " ".join(["a long second line of words"] * 12)
    plots.plot_cumulative_regret(band, tmp_path / "c.png", title=title)
    x, y = np.asarray([1.0, 8.0]), np.asarray([1.0, 2.0, 4.0])
    names = ("stabl", "stabl", "meta_lr_scale", "expert_lr_scale")
    grid = plots.Grid(*names, x, y, np.ones((3, 2)), 0.1 + np.zeros((3, 2)), (2, 1))
    plots.plot_grids([grid], tmp_path / "g.png", title=title, score="s")  # the panel's title too
    assert len(figures) == len(drawn) + 2
    for fig in figures:
        assert _outside(fig) == []


@pytest.mark.parametrize("terminal", [False, True])
def test_progress_bars_only_on_a_terminal(monkeypatch, terminal):
    """tqdm bars (``simulate``'s and the command line's) draw on a terminal, not into a log."""

    class Stderr(io.StringIO):
        def isatty(self) -> bool:
            return terminal

    stderr = Stderr()
    monkeypatch.setattr(sys, "stderr", stderr)
    update, learner = progress_bar(True, 10), paired.progress_bars(64)("stabl")
    for done in (1, 2):
        update(5 * done)
        learner(32 * done, 64)
    assert bool(stderr.getvalue()) is terminal
    if terminal:
        assert "stabl" in stderr.getvalue()
