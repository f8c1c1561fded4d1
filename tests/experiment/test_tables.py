"""Results folders as tidy tables (``stabl_jax.experiment.tables``)."""

from __future__ import annotations

import csv
import io
import json
import re
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stabl_jax.experiment import read_summary, read_traces
from stabl_jax.experiment.tables import COLUMNS, TraceFile, load_results, summary_rows
from tests.conftest import fill_disk_while_writing, flip_a_byte_of, run_small_figure1

SA = {"window_lengths": [16, 64], "sampled": {"mean": [3.0, -5.0], "ci95": [0.1, 0.2]}}
STABL = {"label": "StABL", "constructor": {"num_arms": 5}, "compile_seconds": 1.0, "num_muted": 7}
STABL["mean_reward"] = {"mean": 0.5, "ci95": 0.01}
STABL["segment_reward"] = {"mean": [0.4, 0.6], "ci95": [0.02, 0.03]}
BANDIT = {"learners": {"stabl": {**STABL, "adaptive_regret": SA}}}
EXP3 = {"final_log10_gap": -0.8, "final_log10_gap_ci": 0.5}
SELECTION = {"problems": {"f01_d4_n200": {"exp3": EXP3}}}


def test_summary_rows_of_a_bandit_and_a_selection_summary():
    rows = summary_rows(BANDIT)
    assert all(tuple(r) == COLUMNS for r in rows)
    by = {(r["metric"], r["window"], r["segment"]): (r["mean"], r["ci95"]) for r in rows}
    assert by[("mean_reward", "", "")] == (0.5, 0.01)
    assert by[("segment_reward", "", 2)] == (0.6, 0.03)
    assert by[("sa_sampled", 64, "")] == (-5.0, 0.2)
    assert by[("num_muted", "", "")] == (7, "")
    assert len(rows) == 6  # label, constructor and timings are not metrics
    (row,) = summary_rows(SELECTION)  # the interval paired with its mean
    got = (row["problem"], row["learner"], row["metric"], row["mean"], row["ci95"])
    assert got == ("f01_d4_n200", "exp3", "final_log10_gap", -0.8, 0.5)


def test_load_results_errors(tmp_path):
    """``read_summary`` and ``read_traces`` say what ``load_results`` says."""
    for read in (load_results, read_summary, read_traces):
        with pytest.raises(FileNotFoundError, match="not a finished results folder"):
            read(tmp_path)
    (tmp_path / "summary.json").write_text("{not json")
    for read in (load_results, read_summary):
        with pytest.raises(ValueError, match="not valid JSON"):
            read(tmp_path)
    # not UTF-8 (a UnicodeDecodeError without the file's name), or not an object
    for data, words in ((b"\xff\xfe{", "is not valid JSON ("), (b"[1, 2]", "holds a JSON list")):
        (tmp_path / "summary.json").write_bytes(data)
        message = f"{tmp_path / 'summary.json'} {words}"
        with pytest.raises(ValueError, match=re.escape(message) + ".*rerun the experiment"):
            load_results(tmp_path)


def test_traces_are_read_once_each_and_named_when_missing(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"learners": {}}))
    res = load_results(tmp_path)
    assert dict(res.traces) == {} and res.traces.files == []  # no traces.npz
    arms = np.arange(6, dtype=np.uint8).reshape(2, 3)
    arrays: dict[str, Any] = {"stabl/played": arms, "stabl/loss": arms / 8.0}
    np.savez(tmp_path / "traces.npz", **arrays)
    res = load_results(tmp_path)
    opened: list[str] = []
    real_open = zipfile.ZipFile

    def counting_open(*args: Any, **kwargs: Any) -> Any:
        opened.append(str(args[0]))
        return real_open(*args, **kwargs)

    monkeypatch.setattr(zipfile, "ZipFile", counting_open)
    assert sorted(res.traces) == ["stabl/loss", "stabl/played"] and len(res.traces) == 2
    assert len(opened) == 1  # the names only
    for _ in range(3):
        np.testing.assert_array_equal(res.traces["stabl/played"], arms)
    assert len(opened) == 2 and res.traces["stabl/loss"][1, 2] == 5 / 8
    assert len(opened) == 3 and res.traces is res.traces
    assert res.traces.files == ["stabl/played", "stabl/loss"]  # NumPy's NpzFile.files
    with pytest.raises(KeyError, match=r"'stabl/regret' is not a trace of .*'stabl/played'"):
        res.traces["stabl/regret"]
    fresh = load_results(tmp_path).traces  # every array in one pass: one more open
    assert sorted(fresh.read()) == ["stabl/loss", "stabl/played"] and len(opened) == 5
    assert fresh.read(["stabl/loss"])["stabl/loss"] is fresh["stabl/loss"] and len(opened) == 5
    with pytest.raises(KeyError, match="'stabl/regret' is not a trace of"):
        fresh.read(["stabl/played", "stabl/regret"])


def test_a_damaged_traces_file_is_named(tmp_path: Path) -> None:
    """``traces.npz`` cut short, not an ``.npz`` or with a changed array: a ``ValueError`` naming
    the file and remedy, from every reader; the sound arrays read as they were."""
    (tmp_path / "summary.json").write_text(json.dumps({"learners": {}}))
    path = tmp_path / "traces.npz"
    arms = np.arange(600, dtype=np.int32).reshape(2, 300)
    arrays: dict[str, Any] = {"stabl/played": arms, "stabl/loss": arms / 600.0}
    np.savez(path, **arrays)
    sound = path.read_bytes()
    named = re.escape(f"{path} cannot be read (") + ".*"
    named += re.escape("): the file is damaged or not an .npz; run what wrote it again")
    for damaged in (sound[: len(sound) // 2], b"not an npz file"):
        path.write_bytes(damaged)
        for read in (read_traces, lambda folder: load_results(folder).traces):
            with pytest.raises(ValueError, match=named):
                read(tmp_path)
    path.write_bytes(sound)
    flip_a_byte_of(path, "stabl/played.npy")
    res = load_results(tmp_path)
    assert sorted(res.traces) == ["stabl/loss", "stabl/played"]  # the names are intact
    # a membership test reads nothing (Mapping's own would read the damaged array)
    assert "stabl/played" in res.traces and "stabl/expected_loss" not in res.traces
    np.testing.assert_array_equal(res.traces["stabl/loss"], arms / 600.0)
    with pytest.raises(ValueError, match=named.replace(r"\(", r"\(BadZipFile: Bad CRC-32", 1)):
        res.traces["stabl/played"]
    with pytest.raises(ValueError, match=named):
        read_traces(tmp_path)
    # a member with bytes after its array (its CRC-32 sound): NumPy reads the array alone
    npy = io.BytesIO()
    np.lib.format.write_array(npy, arms)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("stabl/played.npy", npy.getvalue() + b"tail")
    with np.load(path, allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["stabl/played"], arms)
    trailing = re.escape("(ValueError: 4 bytes of stabl/played after its array)")
    with pytest.raises(ValueError, match=trailing):
        read_traces(tmp_path)
    path.unlink()
    assert len(TraceFile(path)) == 0
    with pytest.raises(FileNotFoundError):
        TraceFile(path, missing_ok=False)


def test_a_real_results_folder_as_a_table(tmp_path, monkeypatch):
    out = tmp_path / "run"
    run_small_figure1(out)
    res = load_results(out)
    assert res.learners == ["exp3_tuned", "stabl"]
    played = res.traces["stabl/played"]  # the default save_traces: the arms, as uint8
    assert played.shape == (2, res.config["horizon"]) and played.dtype == np.uint8
    rows = res.rows()
    summary = json.loads((out / "summary.json").read_text())
    want = summary["learners"]["stabl"]["mean_reward"]["mean"]
    means = [r["mean"] for r in rows if (r["learner"], r["metric"]) == ("stabl", "mean_reward")]
    assert means == [want]
    with res.to_csv(tmp_path / "t.csv").open() as f:
        read = list(csv.DictReader(f))
    assert len(read) == len(rows) and float(read[0]["mean"]) == rows[0]["mean"]  # round trip
    assert np.isfinite([float(r["mean"]) for r in read]).all()
    # the same rows as a pandas DataFrame, numbers as numbers (docs/results.md's example)
    frame = res.to_dataframe()
    assert list(frame.columns) == list(COLUMNS) and len(frame) == len(rows)
    for column in ("window", "segment", "mean", "ci95"):
        assert frame[column].dtype.kind == "f", column
    assert frame["mean"].tolist() == [r["mean"] for r in rows]
    sa = frame.query("metric == 'sa_expected'")
    sa = sa.pivot(index="learner", columns="window", values="mean")
    assert sorted(sa.index) == ["exp3_tuned", "stabl"]
    windows = summary["learners"]["stabl"]["adaptive_regret"]["window_lengths"]
    assert sa.columns.tolist() == [float(w) for w in windows]
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match=r"pip install pandas.*results\.csv"):
        res.to_dataframe()


def test_a_full_disk_leaves_the_csv_whole(tmp_path, monkeypatch):
    """``to_csv`` replaces ``results.csv`` atomically: a disk that fills leaves the old file."""
    (tmp_path / "summary.json").write_text(json.dumps(BANDIT))
    res = load_results(tmp_path)
    path = res.to_csv()
    before = path.read_text(encoding="utf-8")
    assert len(before) > 200 and before.count("\n") == 7  # the header and 6 rows
    with monkeypatch.context() as patch:
        fill_disk_while_writing(patch, room=100)
        with pytest.raises(OSError, match="No space"):
            res.to_csv()
    assert path.read_text(encoding="utf-8") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv", "summary.json"]
