"""Plots a reader can trust: negative SA(L) is drawn, coinciding lines stay apart."""

from __future__ import annotations

import numpy as np
import pytest

from stabl_jax.experiment import plots, results


def _bands(values):
    x = np.asarray([16, 64, 256, 1024], float)
    return [
        plots.Band(name=f"l{i}", label=f"learner {i}", x=x, mean=np.asarray(v, float), half=x * 0)
        for i, v in enumerate(values)
    ]


def test_adaptive_regret_axis_shows_negative_values(tmp_path):
    plt = plots.pyplot()
    fig, ax = plt.subplots()
    bands = _bands([[10.0, 50.0, -20.0, -600.0], [10.0, 50.0, -20.0, -600.0]])
    plots._draw_axes(
        ax, bands, plots._colors(["l0", "l1"]), title="t", xlabel="x", ylabel="y", symlog=True
    )
    assert ax.get_yscale() == "symlog"
    drawn = [line for line in ax.get_lines() if line.get_label().startswith("learner")]
    assert all(np.nanmin(line.get_ydata()) == -600.0 for line in drawn)  # not masked out
    # identical curves are told apart by line style and marker
    assert drawn[0].get_linestyle() != drawn[1].get_linestyle()
    assert drawn[0].get_marker() != drawn[1].get_marker()
    plt.close(fig)
    assert plots.plot_adaptive_regret(bands, tmp_path / "sa.png", title="t").stat().st_size > 0


def test_cumulative_regret_plot_is_written(tmp_path):
    x = np.arange(100.0)
    band = plots.Band(name="stabl", label="StABL", x=x, mean=np.sqrt(x), half=0 * x + 0.5)
    path = plots.plot_cumulative_regret([band], tmp_path / "c.png", title="t", change_points=[50])
    assert path.stat().st_size > 0


def test_a_band_of_unequal_lengths_is_named():
    x = np.arange(4.0)
    with pytest.raises(
        ValueError, match=r"Band 'stabl': .* got x \(4,\), mean \(3,\), half \(4,\)"
    ):
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
    # another suffix, another format (matplotlib's), untagged
    pdf = plots.plot_adaptive_regret([band], tmp_path / "sa.pdf", title="t").read_bytes()
    assert pdf[:5] == b"%PDF-" and b"stabl_jax " not in pdf
    with pytest.raises(results.OutputError, match="is a file"):
        results.figure_paths(path, ["a.png"], "OUT_DIR")
