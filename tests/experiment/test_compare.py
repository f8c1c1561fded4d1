"""``stabl-jax compare``: two runs of one experiment agree whatever their run record; a changed
bit, value or array is named; ``--rtol`` accepts float rounding only."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stabl_jax.experiment import cli, compare, files
from stabl_jax.experiment.provenance import environment_info
from tests.conftest import NUM_ARMS, flip_a_byte_of
from tests.experiment.runs import CONFIG as RUNS_CONFIG
from tests.experiment.runs import command, run, sweep_command

#: The fault tests' config (5 arms, T = 64, 2 runs of uniform and exp3), every trace saved.
CONFIG = RUNS_CONFIG.replace("LEARNER", "exp3").replace("[env]", 'save_traces = "all"\n\n[env]')


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """``a`` and ``b``: the same command twice (another --out, so another run record);
    ``other``: another seed."""
    root = tmp_path_factory.mktemp("compare")
    config = root / "compare.toml"
    config.write_text(CONFIG)
    extra = {"a": [], "b": [], "other": ["--seed", "6"]}
    for name, flags in extra.items():
        assert cli.main(command(config, root / name, *flags)) == 0
    return {name: root / name for name in extra}


def _edit(folder: Path, traces=None, summary=None) -> Path:
    """``folder`` edited by hand: ``traces`` edits the dict of its arrays, ``summary`` its
    ``summary.json``; its manifest, which would call an edit damage, removed."""
    (folder / files.MANIFEST).unlink(missing_ok=True)
    if traces is not None:
        with np.load(folder / "traces.npz") as archive:
            arrays = {name: archive[name] for name in archive.files}
        traces(arrays)
        np.savez(folder / "traces.npz", **arrays)
    if summary is not None:
        data = json.loads((folder / "summary.json").read_text())
        summary(data)
        (folder / "summary.json").write_text(json.dumps(data))
    return folder


def _copy(folder: Path, tmp_path: Path, **edits) -> Path:
    """A copy of ``folder`` in ``tmp_path``, :func:`_edit`-ed by ``edits``."""
    return _edit(Path(shutil.copytree(folder, tmp_path / "copy")), **edits)


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    return run(["compare", *map(str, args)], capsys)


def test_two_runs_of_one_experiment_hold_the_same_numbers(folders, capsys, monkeypatch):
    monkeypatch.setattr(cli.compile_cache, "enable", lambda folder: pytest.fail("enabled"))
    a, b = folders["a"], folders["b"]
    commands = [json.loads((f / "summary.json").read_text())["command"] for f in (a, b)]
    assert commands[0] != commands[1]  # the run records differ: --out, start time, timings
    result = compare.compare_folders(a, b)
    assert result.equal and result.differences == ()
    assert result.numbers > 50 and result.arrays >= 10  # every learner's traces and statistics
    code, out, err = _cli(capsys, a, b)
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "the same numbers"
    assert f"traces.npz: {result.arrays} arrays in both: equal" in out


def test_another_seed_differs_in_numbers_and_in_the_played_arms(folders, capsys):
    result = compare.compare_folders(folders["a"], folders["other"])
    assert not result.equal
    names = {d.name for d in result.differences}
    assert "seed" in names and "config.seed" in names
    assert "exp3/played" in names and "learners.exp3.mean_reward.mean" in names
    assert all(d.only_in is None for d in result.differences)
    code, out, _ = _cli(capsys, folders["a"], folders["other"])
    assert code == 1
    assert out.splitlines()[-1].startswith(f"different: {len(result.differences)} values")


def test_one_ulp_in_one_entry_is_found_and_rtol_accepts_it(folders, tmp_path, capsys):
    where = (1, 37)

    def nudge(arrays):
        x = arrays["exp3/expected_loss"]
        assert x.dtype == np.float32
        x[where] = np.nextafter(x[where], np.float32(2))

    copy = _copy(folders["a"], tmp_path, traces=nudge)
    (difference,) = compare.compare_folders(folders["a"], copy).differences
    assert difference.name == "exp3/expected_loss"
    assert "1 of 128 entries differ (first at [1, 37]" in difference.detail
    assert "in 1 of 2 runs, from column 37 at the earliest (median 37)" in difference.detail
    assert "1 ulps of float32" in difference.detail
    equal = [compare.compare_folders(folders["a"], copy, rtol=r).equal for r in (1e-6, 1e-9)]
    assert equal == [True, False]  # 1 ulp ~ 6e-8
    code, out, _ = _cli(capsys, folders["a"], copy, "--rtol", "1e-6")
    assert code == 0 and "to a relative 1e-06" in out


def test_a_played_arm_is_never_within_a_tolerance_and_its_integer_type_does_not_count(
    folders, tmp_path
):

    def widen(arrays):
        assert arrays["exp3/played"].dtype == np.uint8
        arrays["exp3/played"] = arrays["exp3/played"].astype(np.int32)

    copy = _copy(folders["a"], tmp_path, traces=widen)
    assert compare.compare_folders(folders["a"], copy).equal

    def change(arrays):
        played = arrays["exp3/played"]
        played[0, 5] = (played[0, 5] + 1) % NUM_ARMS
        played[1, 40:] = (played[1, 40:] + 1) % NUM_ARMS  # a run that parts ways at round 40

    (difference,) = compare.compare_folders(folders["a"], _edit(copy, change), rtol=0.5).differences
    assert difference.name == "exp3/played"
    assert difference.detail.startswith("uint8 (2, 64): 25 of 128 entries differ (first at [0, 5]")
    assert "in 2 of 2 runs, from column 5 at the earliest (median 22)" in difference.detail


def test_a_float_array_of_another_dtype_or_shape_differs(folders, tmp_path):

    def change(arrays):
        arrays["exp3/loss"] = arrays["exp3/loss"].astype(np.float64)
        arrays["uniform/loss"] = arrays["uniform/loss"][:, :-1]

    copy = _copy(folders["a"], tmp_path, traces=change)
    found = {d.name: d.detail for d in compare.compare_folders(folders["a"], copy).differences}
    expected = {"exp3/loss": "float32 (2, 64): dtype float32 != float64"}
    assert found == {**expected, "uniform/loss": "float32 (2, 64): shape (2, 64) != (2, 63)"}


def test_summary_values_are_compared_and_the_run_record_is_left_out(folders, tmp_path):
    """The run record names every field the environment record writes (a new provenance field
    written by every run would otherwise count as a difference)."""
    assert set(environment_info()) <= compare.RUN_RECORD
    summary = json.loads((folders["a"] / "summary.json").read_text())
    mean = summary["learners"]["exp3"]["mean_reward"]["mean"]

    def change(summary):
        summary["learners"]["exp3"]["mean_reward"]["mean"] = mean * (1 + 1e-12)
        summary["learners"]["exp3"]["label"] = "EXP3 (renamed)"
        summary["learners"]["exp3"]["extra"] = 1
        # the run record: none of these is a difference
        summary["started"] = "1999-01-01T00:00:00+00:00"
        summary["code"] = {"commit": "0" * 40, "dirty": True, "source": "/elsewhere"}
        summary["cpu"] = {"model": "another", "vector_extensions": []}
        summary["timings"]["wall_seconds"] = 1e9
        summary["learners"]["exp3"]["run_seconds"] = 1e9
        summary["config"]["source"] = "/elsewhere/compare.toml"
        summary["config"]["overrides"] = ["runs=2"]

    copy = _copy(folders["a"], tmp_path, summary=change)
    result = compare.compare_folders(folders["a"], copy)
    found = {d.name: (d.detail, d.only_in) for d in result.differences}
    assert found == {
        "learners.exp3.mean_reward.mean": (f"{mean!r} != {mean * (1 + 1e-12)!r}", None),
        "learners.exp3.label": ("'EXP3' != 'EXP3 (renamed)'", None),
        "learners.exp3.extra": (f"only in {copy}", copy),
    }
    relaxed = compare.compare_folders(folders["a"], copy, rtol=1e-9)
    assert [d.name for d in relaxed.differences] == ["learners.exp3.label", "learners.exp3.extra"]


def test_two_sweeps_of_one_grid_differ_in_timings_only(config_path, whole_sweep, tmp_path, capsys):
    """A sweep's per-learner ``seconds`` (and a host or end time anywhere) is no difference."""
    a, b = whole_sweep, tmp_path / "b"
    assert run(sweep_command(config_path, b), None)[0] == 0

    def change(summary):
        summary["learners"]["exp3"]["seconds"] = 1e9
        summary["learners"]["exp3"]["best"]["elapsed"] = 1e9
        summary["learners"]["exp3"]["hostname"] = "elsewhere"
        summary["learners"]["exp3"]["finished"] = "1999-01-01T00:00:00+00:00"

    code, out, err = _cli(capsys, a, _edit(b, summary=change))
    assert (code, err, out.splitlines()[-1]) == (0, "", "the same numbers"), out
    assert "summary.json:" in out and "traces.npz: 0 arrays in both: equal" in out


def test_every_difference_is_listed_with_all(folders, tmp_path, capsys):
    copy = _copy(folders["a"], tmp_path)
    _edit(copy, lambda arrays: [arrays.pop(n) for n in list(arrays) if "exp3/" in n])
    result = compare.compare_folders(folders["a"], copy)
    gone = [d for d in result.differences if d.only_in == folders["a"]]
    assert len(gone) == len(result.differences) > 3
    _, short, _ = _cli(capsys, folders["a"], copy)
    assert len([line for line in short.splitlines() if line.startswith("  ")]) == len(gone)
    assert f"{len(gone)} only in {folders['a']}" in short
    lines = result.lines(shown=2)
    assert f"  ... and {len(gone) - 2} more (--all lists them)" in lines


@pytest.mark.parametrize("damage", ["no summary", "not json", "damaged traces"])
def test_a_folder_that_cannot_be_read_is_exit_2_naming_it(folders, tmp_path, capsys, damage):
    copy = _copy(folders["a"], tmp_path)
    if damage == "no summary":
        (copy / "summary.json").unlink()
    elif damage == "not json":
        (copy / "summary.json").write_text("{")
    else:
        flip_a_byte_of(copy / "traces.npz", "exp3/loss.npy")
    code, out, err = _cli(capsys, folders["a"], copy)
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and str(copy) in err


@pytest.mark.parametrize("rtol", ["-1", "nan", "inf", "tiny"])
def test_a_bad_rtol_is_refused(folders, capsys, rtol):
    code, _, err = _cli(capsys, folders["a"], folders["b"], "--rtol", rtol)
    expected = f"--rtol takes a number >= 0 (0: bit for bit; 1e-6: float32 rounding), got '{rtol}'"
    assert code == 2 and expected in err
    with pytest.raises(ValueError, match="rtol must be a finite number >= 0"):
        compare.compare_folders(folders["a"], folders["b"], rtol=float(rtol.replace("tiny", "-2")))


def test_the_status_says_different_when_the_reader_leaves_early(folders):
    """``stabl-jax compare A B | head -1``: the reader's exit leaves the status 1."""
    script = f"set -o pipefail; {sys.executable} -m stabl_jax compare {folders['a']} "
    script += f"{folders['other']} | head -c 1 >/dev/null; echo $?"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "1", proc.stderr


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_ulps_counts_the_steps_of_nextafter(dtype):
    """``k`` steps of ``np.nextafter`` from ``x`` are ``k`` ulps, across zero, subnormals and
    powers of two."""
    info = np.finfo(dtype)
    starts = [dtype(0), -info.smallest_subnormal * 3, dtype(1), -dtype(2), info.max / 4]
    starts += list(np.random.default_rng(0).standard_normal(20).astype(dtype))
    for x in starts:
        for toward in (dtype(np.inf), dtype(-np.inf)):
            y = np.asarray(x, dtype)
            for k in range(1, 40):
                y = np.nextafter(y, toward)
                got = compare.ulps(np.asarray([x], dtype), np.asarray([y], dtype))
                assert int(got[0]) == k, (x, toward, k)
    assert int(compare.ulps(np.asarray([0.0], dtype), np.asarray([-0.0], dtype))[0]) == 0
    with pytest.raises(ValueError, match="two float arrays of one dtype"):
        compare.ulps(np.zeros(1, np.float32), np.zeros(1, np.float64))
