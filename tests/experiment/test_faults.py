"""Faults lose no finished work and write no wrong number with exit status 0: damaged checkpoints,
lost bookkeeping, a full disk, concurrent runs, runs too large, a user's bad environment."""

from __future__ import annotations

import dataclasses
import errno
import itertools
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import matplotlib.figure
import numpy as np
import pytest

from stabl_jax import EXP3, ExpertAdvice, SimOptions, simulate
from stabl_jax.envs.base import BanditEnv
from stabl_jax.experiment import checkpoints as checkpoint
from stabl_jax.experiment import cli, load_results, read_traces
from stabl_jax.experiment import files as files_module
from stabl_jax.experiment import identity as identity_module
from stabl_jax.experiment.checkpoints import CheckpointDamaged, ChunkCheckpoint, load_arrays
from stabl_jax.experiment.kinds import bandit, load_config
from stabl_jax.experiment.kinds.paired import recorded_bytes, resolve_chunk_size, simulate_learners
from stabl_jax.experiment.outputs import COMPLETE, MARKER, OutputError
from stabl_jax.experiment.results import CHECKPOINT_DIR, ResultsFolder
from stabl_jax.experiment.tables import read_summary
from tests.conftest import HORIZON, NUM_ARMS, assert_same_results, mark_as_ours
from tests.experiment.runs import (
    CHUNK,
    CONFIG,
    command,
    fail_when,
    forbid_computation,
    partials,
    run,
    run_ok,
    tree,
)

REPO = Path(__file__).resolve().parents[2]
NO_SPACE = OSError(errno.ENOSPC, "No space left on device")
UNSHARE = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c"]


def test_a_live_run_and_foreign_folders_beside_out_are_left_alone(
    config_path, reference, tmp_path, capsys
):
    """A partial folder held by a live run (its lock) is refused, named and untouched, as is a
    lookalike folder; once the live run is gone, a run into the empty ``--out`` completes."""
    out = tmp_path / "out"
    out.mkdir()  # an empty folder may be used
    lookalike = tmp_path / "out.partial-123-abc"
    lookalike.mkdir()
    (lookalike / "notes.txt").write_text("mine")
    live = ResultsFolder.prepare(out)  # holds its lock until released
    (live.partial / CHECKPOINT_DIR / "uniform").mkdir(parents=True)
    before = tree(lookalike), tree(live.partial)
    code, _, err = run(command(config_path, out), capsys)
    assert code == 2 and "another stabl-jax run is writing" in err and str(live.partial) in err
    assert (tree(lookalike), tree(live.partial)) == before
    live.__exit__(None, None, None)  # the live run ends, keeping its checkpoint folder
    stdout = run_ok(command(config_path, out, "--force"), capsys)
    assert "needs about" in stdout and "of disk" in stdout  # the estimate is printed
    assert tree(lookalike) == before[0]
    assert_same_results(out, reference)
    assert (out / MARKER).is_file()


def _stopped_after_first_chunk(tmp_path: Path, fingerprint: dict[str, str]) -> tuple[Path, Any]:
    """An EXP3 run (n = 3, T = 32, R = 2, chunks of 16) stopped after its first chunk: its
    checkpoint folder and ``resume(folder)`` (``None``: the run uninterrupted)."""
    env, learner = ExpertAdvice(num_arms=3, horizon=32), EXP3(num_arms=3, horizon=32)

    def resume(folder: Path | None) -> Any:
        checkpoint = None if folder is None else ChunkCheckpoint(folder, fingerprint)
        options = SimOptions(chunk_size=16, checkpoint=checkpoint)
        return simulate(learner, env, jax.random.key(0), 2, options=options)

    with pytest.MonkeyPatch.context() as patch, pytest.raises(KeyboardInterrupt):
        fail_when(patch, ChunkCheckpoint, "save", lambda *a: True, after=True)
        resume(tmp_path / "stopped")
    return tmp_path / "stopped", resume


def _npy_starts(path: Path) -> dict[str, tuple[int, int]]:
    """Per member of the ``.npz`` at ``path``: where its zip local header and ``.npy`` start."""
    data = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        offsets = {info.filename: info.header_offset for info in archive.infolist()}
    starts = {}
    for name, start in offsets.items():
        name_len, extra_len = struct.unpack("<HH", data[start + 26 : start + 30])
        npy = start + 30 + name_len + extra_len
        assert data[npy : npy + 6] == b"\x93NUMPY" and data[npy + 6] == 1
        starts[name] = (start, npy)
    return starts


def _header_positions(path: Path) -> set[int]:
    """Byte positions of every member's zip local header and ``.npy`` header."""
    data = path.read_bytes()
    positions: set[int] = set()
    for start, npy in _npy_starts(path).values():
        (header_len,) = struct.unpack("<H", data[npy + 8 : npy + 10])
        positions.update(range(start, npy + 10 + header_len))
    return positions


def _same_arrays(got: dict, expected: dict) -> bool:
    key = lambda a: (a.dtype, a.shape, a.tobytes())  # noqa: E731
    return sorted(got) == sorted(expected) and all(
        key(got[k]) == key(expected[k]) for k in expected
    )


def test_every_byte_flip_is_detected_or_harmless(tmp_path: Path) -> None:
    """A bit flipped at every header byte (every 16th elsewhere) of a checkpoint file: named as
    damaged, or the arrays written (the resume then bitwise an uninterrupted run's)."""
    stopped, resume = _stopped_after_first_chunk(tmp_path, {"test": "flips"})
    whole = resume(None)
    for name in ("chunk-0000000000-0000000016.npz", checkpoint.STATE):
        path = stopped / name
        data, expected = path.read_bytes(), load_arrays(path)
        positions = _header_positions(path) | set(range(0, len(data), 16))
        outcome: dict[str, list[int]] = {"detected": [], "harmless": [], "different": []}
        for i in sorted(positions):
            path.write_bytes(_flip(data, i))
            try:
                got = load_arrays(path)
            except CheckpointDamaged as exc:
                assert str(path) in str(exc) and "damaged" in str(exc) and "pickle" not in str(exc)
                outcome["detected"].append(i)
                continue
            outcome["harmless" if _same_arrays(got, expected) else "different"].append(i)
        path.write_bytes(data)
        assert not outcome["different"], (name, outcome["different"])
        assert outcome["detected"] and outcome["harmless"]
        for kind in ("harmless", "detected"):  # end to end through simulate's resume
            copy = shutil.copytree(stopped, tmp_path / f"{kind}-{name}")
            (copy / name).write_bytes(_flip(data, outcome[kind][0]))
            if kind == "detected":
                with pytest.raises(CheckpointDamaged, match=name):
                    resume(copy)
            else:
                result = resume(copy)
                for field, trace in whole.traces().items():
                    np.testing.assert_array_equal(getattr(result, field), trace, err_msg=field)


def test_the_digests_catch_what_a_valid_zip_can_hide(tmp_path: Path) -> None:
    """Valid zip and ``.npy`` headers, wrong arrays (no digests; the old digests with one array
    more, another value, another shape): refused naming the file; the untouched file reads."""
    path = tmp_path / "state.npz"
    written = {"t0": np.asarray(16, np.int32), "carry/0": np.arange(32, dtype=np.float32)}
    checkpoint.save_arrays(path, written)
    with np.load(path, allow_pickle=False) as data:
        digests = data[checkpoint.DIGEST]
    assert _same_arrays(load_arrays(path), written)
    ok, changed = {**written, checkpoint.DIGEST: digests}, written["carry/0"].copy()
    changed[3], reshaped = 1.5, written["carry/0"].reshape(4, 8)
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "no digests": (dict(written), "holds no content digest"),
        "one array more": ({**ok, "extra": np.zeros(2)}, "its arrays differ from those written"),
        "another value": ({**ok, "carry/0": changed}, "its arrays differ"),
        "another shape": ({**ok, "carry/0": reshaped}, "its arrays differ"),
    }
    for case, (arrays, reason) in cases.items():
        bad = tmp_path / f"{case.replace(' ', '_')}.npz"
        np.savez(bad, **arrays)
        with pytest.raises(CheckpointDamaged, match=re.escape(reason)) as info:
            load_arrays(bad)
        assert str(bad) in str(info.value), case


def _shorten_npy_header(path: Path, member: str) -> bytes:
    """``member``'s ``.npy`` header length changed 0x76 -> 0x72 (data read 4 bytes early)."""
    data = bytearray(path.read_bytes())
    length_byte = _npy_starts(path)[member][1] + 8
    assert data[length_byte] == 0x76
    data[length_byte] = 0x72
    path.write_bytes(data)
    return bytes(data)


@pytest.mark.parametrize("columns", [16, 4096])
@pytest.mark.parametrize("where", ["checkpoint", "traces"])
def test_a_shortened_npy_header_is_caught(tmp_path: Path, where: str, columns: int) -> None:
    """A shortened ``loss.npy`` header (large: NumPy returns shifted values) is refused by the
    digest or the CRC in a checkpoint, and by the CRC in ``traces.npz`` (read whole)."""
    loss = np.random.default_rng(0).uniform(size=(2, columns)).astype(np.float32)
    path = tmp_path / f"{where}.npz"
    if where == "traces":
        (tmp_path / "summary.json").write_text(json.dumps({"learners": {}}))
        np.savez(path, loss=loss)
    else:
        checkpoint.save_arrays(path, {"loss": loss})
    _shorten_npy_header(path, "loss.npy")
    if columns == 4096:
        with np.load(path, allow_pickle=False) as npz:
            shifted = npz["loss"]
        assert shifted.shape == loss.shape and not np.array_equal(shifted, loss)
    crc = "BadZipFile: Bad CRC-32 for file 'loss.npy'"
    if where == "traces":
        for read in (read_traces, lambda folder: load_results(folder).traces["loss"]):
            with pytest.raises(ValueError, match=re.escape(f"cannot be read ({crc})")):
                read(tmp_path)
        return
    reason = "its arrays differ from those written" if columns == 4096 else crc
    with pytest.raises(CheckpointDamaged, match=re.escape(reason)):
        load_arrays(path)


_CHUNK = "chunk-0000000000-0000000016.npz"
#: (file, edit of its arrays, words of the refusal): valid digests, content not this run's.
_INCONSISTENT: dict[str, tuple[str, Any, str]] = {
    "no fingerprint": (checkpoint.STATE, lambda a: a.pop("fingerprint"), "is not a"),
    "another format": (
        checkpoint.STATE, lambda a: a.update(format=np.asarray("stabl_jax.checkpoint/1")),
        "(format 'stabl_jax.checkpoint/1')",
    ),
    "a gap in the chunks": (
        checkpoint.STATE, lambda a: a.update(chunks=np.asarray([[0, 8]])),
        "chunks end at 8, t0 = 16",
    ),
    "chunks out of order": (
        checkpoint.STATE, lambda a: a.update(chunks=np.asarray([[8, 16]])),
        "chunk list [(8, 16)] is not contiguous",
    ),
    "a trace missing": (_CHUNK, lambda a: a.pop("loss"), "holds no ['loss']"),
    "a chunk of other rounds": (
        _CHUNK, lambda a: a.update(loss=a["loss"][:, :8]), "loss has shape (2, 8)"
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(_INCONSISTENT))
def test_a_checkpoint_that_is_not_what_this_run_wrote_is_refused(tmp_path: Path, case: str):
    """Valid digests, content inconsistent with itself or this run: the resume raises
    :class:`CheckpointMismatch` naming what is wrong and changes no file."""
    stopped, resume = _stopped_after_first_chunk(tmp_path, {"test": case})
    name, edit, reason = _INCONSISTENT[case]
    arrays = load_arrays(stopped / name)
    edit(arrays)
    checkpoint.save_arrays(stopped / name, arrays)
    before = {p.name: p.read_bytes() for p in stopped.iterdir()}
    with pytest.raises(checkpoint.CheckpointMismatch, match=re.escape(reason)):
        resume(stopped)
    assert {p.name: p.read_bytes() for p in stopped.iterdir()} == before


def _flip(data: bytes, i: int) -> bytes:
    """``data`` with bit ``i % 8`` of byte ``i`` flipped."""
    flipped = bytearray(data)
    flipped[i] ^= 1 << (i % 8)
    return bytes(flipped)


def test_damaged_checkpoint_is_named_and_force_discards_it(
    config_path, interrupted, reference, tmp_path, capsys
):
    """Garbage in ``state.npz``, a shortened header in a chunk: named with --force as remedy by
    the run and its dry run; --force discards that learner's checkpoint only."""
    out = tmp_path / "out"

    def exp3() -> Path:  # each rerun takes the checkpoints over into its own partial folder
        (partial,) = partials(out)
        return partial / CHECKPOINT_DIR / "exp3"

    state = exp3() / checkpoint.STATE
    good_state = state.read_bytes()
    state.write_bytes(np.random.default_rng(0).bytes(len(good_state)))
    code, _, err = run(command(config_path, out), capsys)
    assert code == 2 and "exp3/state.npz" in err and "damaged" in err and "--force" in err, err
    assert "pickle" not in err and "Traceback" not in err
    (exp3() / checkpoint.STATE).write_bytes(good_state)
    chunk = sorted(exp3().glob("chunk-*.npz"))[-1]
    _shorten_npy_header(chunk, "loss.npy")
    before = tree(interrupted)
    for extra in (["--dry-run"], []):
        code, printed, err = run(command(config_path, out, *extra), capsys)
        assert code == 2 and f"exp3/{chunk.name}" in err and "damaged" in err, err
        assert "--force" in err and "dry run:" not in printed and "Traceback" not in err
        assert partials(out) == [interrupted] and tree(interrupted) == before  # none discarded
    printed = run_ok(command(config_path, out, "--dry-run", "--force"), capsys)
    assert "  the checkpoint of exp3 would be discarded (" in printed
    assert "  would resume: uniform 64/64\n" in printed
    assert partials(out) == [interrupted] and tree(interrupted) == before and not out.exists()
    stdout = run_ok(command(config_path, out, "--force"), capsys)
    assert "discarded the checkpoint of exp3" in stdout
    assert read_summary(out)["resumed"]["rounds_done"] == {"uniform": HORIZON}
    assert_same_results(out, reference)
    assert not partials(out)


def _set_pid_1(marker: Path) -> None:
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "pid": 1}))


OTHER_RUN = '{"format": "stabl_jax.checkpoint/3", "config": {}}'
#: damage: (edit of the partial folder's identity and marker, "missing or damaged" said).
BOOKKEEPING = {
    "missing": (lambda identity, marker: identity.unlink(), True),
    "garbled": (lambda identity, marker: identity.write_text(OTHER_RUN[:25]), True),
    "valid JSON of another run": (lambda identity, marker: identity.write_text(OTHER_RUN), True),
    "pid": (lambda identity, marker: _set_pid_1(marker), False),
    "garbled marker": (lambda identity, marker: marker.write_text("{garbled"), False),
}


@pytest.mark.parametrize("damage", BOOKKEEPING)
def test_lost_bookkeeping_still_resumes(
    config_path, reference, interrupted, tmp_path, capsys, damage
):
    """``experiment.json`` lost or wrong: the checkpoints carry the fingerprint, so the rerun
    says so and resumes (lost, another seed's run refuses naming --force). A dead run's pid
    reused (pid 1), a garbled marker: taken over all the same (its lock)."""
    out, partial = tmp_path / "out", interrupted
    edit, said = BOOKKEEPING[damage]
    edit(partial / CHECKPOINT_DIR / identity_module.IDENTITY, partial / MARKER)
    if damage == "missing":  # unidentifiable checkpoints are kept without --force
        before = tree(partial)
        code, _, err = run(command(config_path, out, "--seed", "6"), capsys)
        assert code == 2 and str(partial) in err and "cannot identify" in err, err
        assert "--force" in err and tree(partial) == before
    stdout = run_ok(command(config_path, out), capsys)
    assert f"resuming {partial.name}" in stdout
    assert ("missing or damaged" in stdout) == said
    assert read_summary(out)["resumed"]["rounds_done"] == {"uniform": HORIZON, "exp3": 32}
    assert_same_results(out, reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("complete", [False, True], ids=["checkpoints", "complete results"])
def test_another_runs_partial_folder_is_refused_then_cleared_with_force(
    tmp_path: Path, complete: bool
) -> None:
    """``<out>.partial`` of another config or run: refused naming --force, which discards
    checkpoints and moves complete results whole to ``<out>.kept-<finished>``."""
    out, identity = tmp_path / "out", {"config": {"runs": 2}, "format": "test"}
    other = mark_as_ours(tmp_path / "out.partial")
    if complete:
        (other / "summary.json").write_text("{}")
        (other / COMPLETE).write_text("2026-01-02T03:04:05+00:00\n")
        os.utime(other / COMPLETE, (1767323045, 1767323045))  # 2026-01-02T03:04:05 UTC
        refused = r"complete results of another run.*--force to move them to out\.kept-2026"
        said = "the complete results of another run; moved to out.kept-20260102T030405"
    else:
        (other / CHECKPOINT_DIR / "uniform").mkdir(parents=True)
        theirs = {**identity, "config": {"runs": 3}}
        (other / CHECKPOINT_DIR / identity_module.IDENTITY).write_text(json.dumps(theirs))
        refused = r"config.runs: 3 \(checkpoint\) != 2.*--force"
        said = "checkpoints of a different experiment (config.runs: 3 (checkpoint) != 2 "
        said += "(this run)); discarded (--force)"
    before = tree(other)
    for attempt in (ResultsFolder.preview, ResultsFolder.prepare):
        with pytest.raises(OutputError, match=refused):
            attempt(out, identity)
    assert tree(other) == before
    lines: list[str] = []
    with ResultsFolder.prepare(out, identity, force=True, log=lines.append) as folder:
        assert folder.resumed is None and not folder.has_checkpoints()
    assert lines == [f"out.partial: {said}"]
    if complete:
        assert tree(tmp_path / "out.kept-20260102T030405") == before


def _assert_one_line_no_space(err: str, out: Path) -> None:
    line = err.strip()
    assert "\n" not in line and "Traceback" not in err, err
    assert line.startswith("error: no space left") and str(out.parent) in line
    assert "rerun the same command" in line


def test_disk_full_at_any_point_then_resume(config_path, reference, tmp_path, capsys, monkeypatch):
    """ENOSPC at a chunk, ``traces.npz``, a plot, ``COMPLETE`` in successive reruns: one line
    (exit 1), all work kept and resumed; at a fresh run's ``experiment.json``: nothing left."""
    out = tmp_path / "out"
    chunks, both = itertools.count(1), {"uniform": HORIZON, "exp3": HORIZON}
    fifth_chunk = lambda p, w: "chunk-" in Path(p).name and next(chunks) == 5  # noqa: E731
    stages = [  # (owner, name, when its arguments, the rounds then resumed)
        (checkpoint, "atomic_write", fifth_chunk, None),
        (np, "savez", lambda file, *a: str(file).endswith("traces.npz"), {"uniform": 4 * CHUNK}),
        (matplotlib.figure.Figure, "savefig", lambda *a: True, both),
        (files_module, "atomic_write", lambda p, w: Path(p).name == COMPLETE, both),
    ]
    for owner, name, when, resumed in stages:
        with monkeypatch.context() as patch:
            fail_when(patch, owner, name, when, NO_SPACE)
            code, stdout, err = run(command(config_path, out), capsys)
        assert code == 1 and not out.exists()
        _assert_one_line_no_space(err, out)
        assert "checkpoints kept in" in err
        if resumed is not None:
            assert "resuming" in stdout
            assert all(f"{k} {v}/{HORIZON}" in stdout for k, v in resumed.items()), stdout
        assert len(partials(out)) == 1
    run_ok(command(config_path, out), capsys)
    assert read_summary(out)["resumed"]["rounds_done"] == both
    assert_same_results(out, reference)
    assert not partials(out)
    fresh = tmp_path / "fresh"
    with monkeypatch.context() as patch:
        identity = lambda p, w: Path(p).name == identity_module.IDENTITY  # noqa: E731
        fail_when(patch, files_module, "atomic_write", identity, NO_SPACE)
        code, _, err = run(command(config_path, fresh), capsys)
    assert code == 1
    _assert_one_line_no_space(err, fresh)
    assert not fresh.exists() and not partials(fresh)


@pytest.mark.slow  # a JAX start-up in a subprocess (CI runs it)
def test_disk_full_on_a_small_tmpfs(config_path, reference, tmp_path, capsys):
    """A real full disk (a 2 MiB tmpfs, 1950 KiB taken; --allow-large passes the size check):
    one line, exit 1; the partial folder, copied off, resumes (in-process) into the results."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    run_it = f"{sys.executable} -m stabl_jax run {config_path} --out {mount}/out --no-progress"
    script = f"""
        mount -t tmpfs -o size=2m tmpfs {mount} || exit 1
        head -c 1950k /dev/zero > {mount}/filler
        {run_it} --allow-large > {tmp_path}/first.out 2> {tmp_path}/first.err
        echo $? > {tmp_path}/first.rc
        cp -r {mount}/out.partial* {tmp_path}/
    """
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if shutil.which("unshare") is not None:
        subprocess.run([*UNSHARE, script], cwd=tmp_path, env=env, timeout=300, check=False)
    if not (tmp_path / "first.rc").exists():  # unshare or mount failed
        pytest.skip("cannot mount a tmpfs here (needs unprivileged user namespaces or root)")
    first_err = (tmp_path / "first.err").read_text()
    assert (tmp_path / "first.rc").read_text().strip() == "1", first_err
    _assert_one_line_no_space(first_err, mount / "out")
    assert len(partials(tmp_path / "out")) == 1
    code, stdout, err = run(command(config_path, tmp_path / "out", "--allow-large"), capsys)
    assert code == 0 and "resuming" in stdout, err
    assert_same_results(tmp_path / "out", reference)


def test_a_folder_made_at_out_meanwhile_is_never_replaced(tmp_path):
    """A ``<out>`` made meanwhile is not replaced until it is gone (results kept, said so);
    ``--force`` replaces a folder of ours."""
    out, identity = tmp_path / "out", {"config": {"runs": 2}, "format": "test"}
    first = ResultsFolder.prepare(out, identity)
    (first.partial / "who").write_text("first")
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    with first, pytest.raises(OutputError, match=r"kept in .*out.partial: once that is fixed"):
        first.commit()
    assert tree(out) == {"mine.txt": b"mine"} and (first.partial / COMPLETE).is_file()
    shutil.rmtree(out)
    with ResultsFolder.prepare(out, identity) as again:
        assert again.complete
        again.commit()
    assert (out / "who").read_text() == "first" and not partials(out)
    with ResultsFolder.prepare(out, force=True) as forced:
        (forced.partial / "who").write_text("forced")
        forced.commit()
    assert (out / "who").read_text() == "forced"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.slow  # a JAX start-up in a subprocess (CI runs it)
def test_two_runs_at_once_with_the_same_out(config_path, reference, tmp_path):
    """A ``stabl-jax run`` process and this one, started once it checkpointed a chunk, with the
    same ``--out``: one writes it; the other exits 2 (another run is writing, or a result)."""
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    argv = [sys.executable, "-m", "stabl_jax", *command(config_path, out)]
    pipe = subprocess.PIPE
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=pipe, stderr=pipe, text=True)
    deadline = time.monotonic() + 300
    chunks = f"out.partial*/{CHECKPOINT_DIR}/*/chunk-*"
    while not any(tmp_path.glob(chunks)) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    outcomes = [run(command(config_path, out), None)]
    outcomes.append((proc.wait(timeout=300), proc.stdout.read(), proc.stderr.read()))
    assert sorted(code for code, _, _ in outcomes) == [0, 2], outcomes
    assert_same_results(out, reference)
    refusals = ("already holds a complete result", "another stabl-jax run")
    for code, _, err in outcomes:
        assert code == 0 or any(refusal in err for refusal in refusals), err
    assert not partials(out)


DONE = cli.DRY_RUN_DONE.format(checked="config, output folder, interrupted runs and resources")


def test_a_dry_run_makes_every_check_and_writes_nothing(
    config_path, reference, tmp_path, capsys, monkeypatch
):
    """``--dry-run`` makes a run's checks, prints what it needs and stops: nothing run, compiled
    or written. With no memory to spare the run and its dry run refuse; --allow-large runs it."""

    def cache(*args, **kwargs):
        raise AssertionError("the compilation cache was enabled")

    forbid_computation(monkeypatch)
    enable = cli.compile_cache.enable
    monkeypatch.setattr(cli.compile_cache, "enable", cache)
    work = tmp_path / "work"
    work.mkdir()
    out = work / "out"
    printed = run_ok(command(config_path, out, "--dry-run"), capsys)
    assert "needs about" in printed and f"  output: {out}\n" in printed
    assert printed.endswith(DONE + "\n") and list(work.iterdir()) == []
    for name in ("bco_d2", "hpo_bbob_sphere"):  # memory and disk; no time was measured
        code, printed, err = run(["run", name, "--out", str(work / name), "--dry-run"], capsys)
        assert code == 0 and "needs about" in printed and "roughly" not in printed, err
    assert list(work.iterdir()) == []
    with monkeypatch.context() as patch:
        patch.setattr(cli, "available_memory_bytes", lambda: 1)
        code, printed, err = run(command(config_path, out, "--dry-run"), capsys)
        assert code == 2 and "needs about" in printed and DONE not in printed
        assert "of memory" in err and "--allow-large" in err
        code, printed, _ = run(command(config_path, out, "--dry-run", "--allow-large"), capsys)
        assert code == 0 and printed.endswith(DONE + "\n")
        patch.setattr(cli.compile_cache, "enable", enable)  # a run enables it (off in tests)
        code, _, err = run(command(config_path, out), capsys)
        assert code == 2 and "of memory" in err and "--allow-large" in err
        code, _, err = run(command(config_path, out, "--allow-large"), capsys)
        assert code == 1 and "the experiment ran" in err
    assert list(work.iterdir()) == []
    before = sorted((p.name, p.stat().st_mtime_ns) for p in reference.iterdir())
    run_ok(command(config_path, reference, "--dry-run", "--force"), capsys)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in reference.iterdir()) == before
    assert not partials(reference)


def test_a_dry_run_says_what_the_run_would_do_with_an_interrupted_run(
    config_path, interrupted, tmp_path, capsys
):
    """A dry run says the run resumes an interrupted run; of another seed, refuses it (exit 2),
    with ``--force`` says it is discarded. Nothing moves; the real rerun then resumes it."""
    out, partial = tmp_path / "out", interrupted
    before = tree(partial)
    printed = run_ok(command(config_path, out, "--dry-run"), capsys)
    assert f"  {partial.name}: checkpoints of this experiment, resumed\n" in printed
    assert "  would resume: exp3 32/64, uniform 64/64\n" in printed
    code, _, err = run(command(config_path, out, "--dry-run", "--seed", "1"), capsys)
    assert code == 2 and f"error: {partial} holds checkpoints of a " in err
    assert "different experiment (config.seed: 3 (checkpoint) != 1 (this run))" in err
    code, printed, err = run(
        command(config_path, out, "--dry-run", "--seed", "1", "--force"), capsys
    )
    assert code == 0, err
    assert f"{partial.name}: checkpoints of a different experiment (config.seed" in printed
    assert "discarded (--force)" in printed
    assert partials(out) == [partial] and tree(partial) == before and not out.exists()
    printed = run_ok(command(config_path, out), capsys)
    assert f"  resuming {partial.name}: exp3 32/64, uniform 64/64" in printed, printed


def test_the_memory_estimate_and_automatic_chunks_count_the_widest_chunk(monkeypatch):
    """A chunk's outputs exist on the device and the host before joining the traces (counted
    twice); without ``chunk_size``, the widest learner's chunk stays within 1/8 of the memory
    available, by the bytes the kind records per run and round."""
    sets = ["runs=50", "env.num_arms=40", 'learners=["exp3","saol_hedge"]']
    small, large = (
        bandit.KIND.estimate(load_config("expert_advice_equal", [*sets, f"chunk_size={rounds}"]))
        for rounds in (64, 512)
    )
    widest = 16  # the played arm and three floats per run and round, for every learner
    assert large.memory_bytes - small.memory_bytes == 2 * 50 * (512 - 64) * widest
    assert large.disk_bytes == small.disk_bytes
    simulate_module = sys.modules["stabl_jax.simulate"]
    monkeypatch.setattr(simulate_module, "available_memory_bytes", lambda: 8 * 2**30)
    budget = 2**30  # 1/8 of the 8 GiB above
    sets = ["runs=4096", "horizon=1048576", 'learners=["exp3","saol_hedge"]']
    config = load_config("expert_advice_equal", sets)
    assert recorded_bytes(config) == 16
    assert resolve_chunk_size(config) == budget // (4096 * 16)  # 16384 rounds
    # a kind that records every queried arm too: 16 + 4 n bytes (136 at n = 30)
    wide = lambda self, learner, width: (16 + 4 * width, 0)  # noqa: E731
    monkeypatch.setattr(bandit.BanditConfig, "trace_bytes", wide)
    assert recorded_bytes(config) == 136
    chunk = resolve_chunk_size(config)
    assert chunk == budget // (4096 * 136)
    assert 4096 * chunk * 136 <= budget < 4096 * (chunk + 1) * 136


def test_a_bandit_run_records_what_it_reads_not_the_queried_arms():
    """A full-information learner queries every arm; a bandit run records only the traces the
    summary and ``save_traces`` read, 16 bytes per run and round whatever the queries."""
    sets = ["runs=2", "horizon=64", "env.num_arms=6", 'learners=["exp3","saol_hedge"]']
    config = load_config("expert_advice_equal", sets)
    env = config.make_env()
    outcomes = simulate_learners(config, env, progress=None, checkpoints=None, validate=False)
    for name, learner, _, result, _ in outcomes:
        assert sorted(result.traces()) == sorted(bandit.SAVABLE_TRACES), name
        assert config.trace_bytes(learner, 6)[0] == 16, name


@dataclasses.dataclass(frozen=True)
class Flat(BanditEnv):
    num_arms: int
    horizon: int
    has_best_arm: ClassVar[bool] = True

    def sample_params(self, key):
        return jax.random.uniform(key, (self.num_arms,), jnp.float32, 0.2, 0.8)

    def loss(self, params, t, key):
        noise = jax.random.uniform(key, (self.num_arms,), jnp.float32, -0.1, 0.1)
        return jnp.clip(params + noise, 0.0, 1.0)

    def best_arm(self, params, t):
        return jnp.argmin(params).astype(jnp.int32)


class SegmentsOnTheClassOnly(Flat):
    change_points: ClassVar[tuple[int, ...]] = (32,)
    num_segments: ClassVar[int] = 2
    piecewise: ClassVar[bool] = True


class BestArmUndeclared(Flat):
    has_best_arm: ClassVar[bool] = False


class SegmentsUndeclared(Flat):
    num_segments: ClassVar[int] = 2


class NoExpectedLoss(Flat):
    def evaluate(self, params, state, t, query, key):
        info = {"best_arm": self.best_arm(params, t)}
        return state, self.loss(params, t, key)[query.arms], info


class TooHigh(ExpertAdvice):
    def loss(self, params, t, key):
        return super().loss(params, t, key) + 1.0


def user_config(folder: Path, env: str) -> Path:
    """The tiny config of ``CONFIG``'s learners on environment ``env`` of this module."""
    path = folder / f"{env}.toml"
    path.write_text(
        'runs = 4\nhorizon = 64\nlearners = ["uniform", "exp3"]\nwindow = 8\n\n'
        f'[env]\nname = "{__name__}:{env}"\nnum_arms = 5\n'
    )
    return path


def test_an_environment_without_change_points_runs_as_one_segment(tmp_path, capsys):
    """No change points: one segment; SA(L) and the cumulative regret are computed."""
    out = tmp_path / "out"
    printed = run_ok(command(user_config(tmp_path, "Flat"), out), capsys)
    assert "one segment (no change points)" in printed
    summary = read_summary(out)
    flat = summary["learners"]["exp3"]
    assert summary["env"]["change_points"] == [] and len(flat["segment_reward"]["mean"]) == 1
    assert np.isfinite(flat["cumulative_regret"]["mean"])
    assert len(flat["adaptive_regret"]["sampled"]["mean"]) == 3  # L = 16, 32, 64
    assert read_traces(out)["env/change_points"].shape == (4, 0)


#: A user's environment class: what the refusal says it lacks (after its name).
LACKS = {
    "SegmentsOnTheClassOnly": "has num_segments = 2, but sample_params returns params whose "
    "change_points are none, not (1,) int32",
    "NoExpectedLoss": "defines evaluate, and its info lacks ['expected_loss']",
    "BestArmUndeclared": "has best_arm but does not declare has_best_arm = True",
    "SegmentsUndeclared": "has num_segments but does not declare piecewise = True",
}


@pytest.mark.parametrize("env", LACKS)
def test_what_an_environment_lacks_is_named_before_any_run(tmp_path, capsys, monkeypatch, env):
    """One line naming the class, what it lacks and where the requirements are listed."""
    forbid_computation(monkeypatch)
    code, _, err = run(command(user_config(tmp_path, env), tmp_path / "out"), capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"environment '{__name__}:{env}': {env} {LACKS[env]}" in err
    assert err.rstrip().endswith("(see docs/environments.md, 'What the command line needs')")


def test_a_failed_validation_is_one_line_naming_the_learner(tmp_path, capsys):
    code, _, err = run(command(user_config(tmp_path, "TooHigh"), tmp_path / "out"), capsys)
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(
        f"error: learner 'uniform' on environment '{__name__}:TooHigh' failed validation: "
        "loss at round 0 must be finite and in [0, 1]; found "
    )
    assert "rescale them to [0, 1] first" in err and "docs/environments.md, 'Validation'" in err


@pytest.mark.parametrize("where", ["file", "--set"])
def test_a_list_of_params_is_refused_naming_the_sweep(tmp_path, capsys, where):
    extra = "[params.exp3]\nlr_scale = [1.0, 2.0]\n" if where == "file" else ""
    path = tmp_path / "params.toml"
    path.write_text(CONFIG.replace("LEARNER", "exp3") + extra)
    sets = ["--set", "params.exp3.lr_scale=[1.0, 2.0]"] if where == "--set" else []
    code, _, err = run(command(path, tmp_path / "out", "--dry-run", *sets), capsys)
    assert code == 2 and "key 'params.exp3.lr_scale'" in err, err
    assert "must be one number, got the array [1.0, 2.0]; to sweep values run `stabl-jax " in err
    assert "sweep CONFIG --grid exp3.lr_scale=1.0,2.0`" in err


def test_a_list_of_params_given_to_simulate_is_refused():
    learner = EXP3(num_arms=NUM_ARMS, horizon=HORIZON)
    params = learner.default_params.replace(lr_scale=[1.0, 2.0])
    env = ExpertAdvice(num_arms=NUM_ARMS, horizon=HORIZON)
    with pytest.raises(ValueError, match=r"params.lr_scale is a Python list, \[1.0, 2.0\]: a "):
        simulate(learner, env, jax.random.key(0), 2, params=params)
