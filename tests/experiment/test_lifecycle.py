"""The results-folder lifecycle under faults (docs/reliability.md, "Interrupted runs"): none
loses finished work or writes a wrong number with exit status 0."""

from __future__ import annotations

import errno
import itertools
import json
import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from stabl_jax.experiment import (
    checkpoints,
    cli,
    compare,
    files,
    identity,
    load_results,
    outputs,
    results,
)
from stabl_jax.experiment import sweep as sweep_module
from stabl_jax.experiment.tables import TraceFile, TracesDamaged
from tests.conftest import HORIZON, assert_same_results, mark_as_ours
from tests.experiment.runs import (
    CONFIG,
    command,
    fail_when,
    forbid_computation,
    run,
    run_ok,
    stopped_run,
    sweep_command,
    tree,
)

#: A learner of the user's, named by import path (a module in the test's own folder).
USER_MODULE = "from stabl_jax import EXP3\n\n\nclass Mine(EXP3):\n    pass\n"


#: stage: where Ctrl-C (or SIGTERM through its handler) stops the commit, or the final rename
#: onto ``out`` fails: (owner, name, when its arguments, the error, after the call).
STOPS = {
    "manifest": (files, "write_manifest", lambda *a: True, KeyboardInterrupt, False),
    "after COMPLETE": (
        files, "write_text", lambda path, text: Path(path).name == outputs.COMPLETE,
        KeyboardInterrupt, True,
    ),
    "removing the checkpoints": (  # the generic rmtree: any version of the code
        shutil, "rmtree",
        lambda path, *a: Path(path).name in (results.CHECKPOINT_DIR, ".checkpoint-done"),
        KeyboardInterrupt, False,
    ),
    "the final rename fails": (
        os, "replace", lambda src, dst: Path(dst).name == "out",
        OSError(errno.EBUSY, "Device or resource busy"), False,
    ),
}  # fmt: skip


@pytest.mark.parametrize("stage", list(STOPS))
def test_a_stop_at_any_step_of_the_commit_loses_nothing(
    config_path, reference, tmp_path, capsys, monkeypatch, stage
):
    """Ctrl-C/SIGTERM in the commit, or a failed final rename (exit 2), leaves ``<out>``
    complete or a partial folder the same command finishes (complete: moved, not recomputed)."""
    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        fail_when(patch, *STOPS[stage])
        code, _, err = run(command(config_path, out), capsys)
    assert code == (2 if stage == "the final rename fails" else 130), err
    if stage in ("after COMPLETE", "the final rename fails"):
        assert "complete results are kept in" in err and "out.partial" in err
    if not out.exists():
        printed = run_ok(command(config_path, out), capsys)
        if stage == "manifest":  # every learner had finished: resumed whole, nothing rerun
            done = load_results(out).summary["resumed"]["rounds_done"]
            assert done == {"uniform": HORIZON, "exp3": HORIZON}
        else:  # the results were complete: moved into place
            assert "moved into place (nothing recomputed)" in printed and "compile" not in printed
    assert_same_results(out, reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_kill_between_the_two_renames_of_the_commit_loses_nothing(
    config_path, reference, tmp_path, capsys, monkeypatch
):
    """``kill -9`` between the commit's renames (old results at ``OUT.old``): the same command
    moves the new ones into place, recomputing nothing, and removes ``OUT.old``."""
    out = tmp_path / "out"
    shutil.copytree(reference, out)

    class Killed(BaseException):
        pass

    with monkeypatch.context() as patch:
        fail_when(patch, os, "replace", lambda src, dst: Path(src).name == "out.partial", Killed)
        with pytest.raises(Killed):
            run(command(config_path, out, "--force"), capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.old", "out.partial"]
    printed = run_ok(command(config_path, out, "--force"), capsys)
    assert "moved into place (nothing recomputed)" in printed
    assert_same_results(out, reference)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _users_folder(tmp_path, reference, monkeypatch) -> Path:
    """A folder stabl_jax did not create, holding a file named like ours."""
    (tmp_path / "out" / "sub").mkdir(parents=True)
    (tmp_path / "out" / "summary.json").write_text('{"mine": true}')
    (tmp_path / "out" / "thesis.tex").write_text("\\documentclass{article}")
    (tmp_path / "out" / "sub" / "data.csv").write_bytes(b"a,b\n1,2\n")
    return tmp_path / "out"


def _symbolic_link(tmp_path, reference, monkeypatch) -> Path:
    """A link to a folder of ours holding a user's file."""
    (mark_as_ours(tmp_path / "folder") / "notes.txt").write_text("mine")
    (tmp_path / "out").symlink_to(tmp_path / "folder")
    return tmp_path / "out"


def _under_a_file(tmp_path, reference, monkeypatch) -> Path:
    (tmp_path / "afile").write_text("mine")
    return tmp_path / "afile" / "sub"


def _empty(tmp_path, reference, monkeypatch) -> str:
    monkeypatch.chdir(tmp_path)  # an empty path would otherwise mean the working folder
    return ""


def _marked_by(owner, name: str, fake):
    """A maker of an empty ``out`` that ``owner.name``, patched to ``fake(path, out)``, marks."""

    def make(tmp_path, reference, monkeypatch) -> Path:
        (out := tmp_path / "out").mkdir()
        monkeypatch.setattr(owner, name, lambda path: fake(path, out))
        return out

    return make


def _read_only_parent(tmp_path, reference, monkeypatch) -> Path:
    access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: Path(p) != tmp_path and access(p, m))
    (tmp_path / "out").mkdir()
    return tmp_path / "out"


def _users_files_in_results(tmp_path, reference, monkeypatch) -> Path:
    out = Path(shutil.copytree(reference, tmp_path / "out"))
    (out / "notes.md").write_text("mine")
    (out / "my_figs").mkdir()
    (out / "my_figs" / "a.png").write_bytes(b"png")
    return out


ANY: tuple[list[str], ...] = ([], ["--dry-run"], ["--force"], ["--force", "--dry-run"])
#: case: (make ``--out`` under the test's folder, the runs refused, words of the refusal;
#: "OUT" stands for the path given).
BAD_OUTS = {
    "a user's folder": (
        _users_folder, ANY, ("OUT", "not a stabl_jax results folder", "never replaced", "--out")
    ),
    "a symbolic link": (_symbolic_link, ANY, ("is a symbolic link (to ", "--out")),
    "under a file": (_under_a_file, ANY, ("afile", "which is a file")),
    "empty": (_empty, ANY, ("--out is empty; give a folder name",)),
    "blank": (lambda t, r, m: _empty(t, r, m) + "  ", ANY, ("--out is empty; give a folder name",)),
    "a mount point": (
        _marked_by(os.path, "ismount", lambda path, out: Path(path) == out), ANY,
        ("cannot be replaced", "--out OUT/results"),
    ),
    "immutable": (
        _marked_by(outputs, "_inode_flags", lambda path, out: 0x10 * (path == out)), ANY,
        ("cannot be replaced", "--out OUT/results"),
    ),
    "a read-only parent": (_read_only_parent, ANY, ("cannot be replaced", "--out OUT/results")),
    "complete, no --force": (
        lambda t, r, m: shutil.copytree(r, t / "out"), ANY[:2],
        ("already holds a complete result", "--force"),
    ),
    "a user's files in results": (
        _users_files_in_results, ANY[2:], ("files stabl-jax did not write (my_figs/, notes.md)",)
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_OUTS))
def test_an_out_that_cannot_be_used_is_refused_before_anything_runs(
    config_path, reference, tmp_path, capsys, monkeypatch, case
):
    """The run and its dry run (with --force where it applies) exit 2 with one line naming the
    ``--out`` and the remedy, before any computation; every byte stays, nothing beside it."""
    make, flags, words = BAD_OUTS[case]
    forbid_computation(monkeypatch)
    out = make(tmp_path, reference, monkeypatch)
    before, listing = tree(tmp_path), sorted(p.name for p in tmp_path.iterdir())
    for extra in flags:
        code, _, err = run(command(config_path, out, *extra), capsys)
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, (extra, err)
        assert all(word.replace("OUT", str(out)) in err for word in words), (extra, err)
    assert tree(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == listing


def test_a_code_change_between_a_stop_and_its_rerun_is_refused(tmp_path, capsys, monkeypatch):
    """A user's learner (by import path) edited after a stop: the rerun refuses (exit 2) naming
    the module and --force, which recomputes; an edit of stabl_jax is named by its file."""
    module = tmp_path / "lifecycle_user_learner.py"
    module.write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = tmp_path / "user.toml"
    config.write_text(CONFIG.replace("LEARNER", "lifecycle_user_learner:Mine"))
    out = tmp_path / "out"
    stopped_run(config, out, capsys, monkeypatch, 5)
    module.write_text(USER_MODULE.replace("    pass", '    """Edited."""'))
    before = tree(tmp_path / "out.partial")
    code, _, err = run(command(config, out), capsys)
    assert code == 2 and "computed by other code" in err and "lifecycle_user_learner" in err, err
    assert "--force" in err and tree(tmp_path / "out.partial") == before
    fingerprint = identity.code_fingerprint
    edited = "stabl_jax/learners/exp3.py"
    monkeypatch.setattr(identity, "code_fingerprint", lambda c: {**fingerprint(c), edited: "e"})
    code, _, err = run(command(config, out), capsys)
    assert code == 2 and edited in err, err
    code, printed, err = run(command(config, out, "--force"), capsys)
    assert code == 0 and "discarded (--force)" in printed, err
    assert load_results(out).summary["resumed"] is None


def test_the_rerun_after_a_full_disk_counts_what_the_partial_folder_holds(
    config_path, interrupted, tmp_path, capsys, monkeypatch
):
    """Free disk just short of the estimate, an interrupted run's checkpoints on it: the same
    command resumes (those bytes are not needed again) instead of asking for --allow-large."""
    needs = cli.KINDS["bandit"].estimate(cli.load_config(str(config_path), []))
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(
        cli.shutil, "disk_usage", lambda p: usage._replace(free=needs.disk_bytes - 1)
    )
    code, printed, err = run(command(config_path, tmp_path / "out"), capsys)
    assert code == 0 and "resuming out.partial" in printed, err


def test_a_changed_byte_of_a_results_file_is_one_error_naming_it(reference, tmp_path, capsys):
    """One byte of ``summary.json`` (still valid JSON), ``results.csv`` or ``traces.npz`` changed:
    reading the folder and ``compare`` name the file (exit 2, no traceback), by the manifest."""
    for name in ("summary.json", "results.csv", "traces.npz"):
        folder = tmp_path / name
        shutil.copytree(reference, folder)
        data = bytearray((folder / name).read_bytes())
        at = data.index(b"5") if name != "traces.npz" else len(data) // 2
        data[at] ^= 0x01 if name == "traces.npz" else 0x05  # "5" -> "0" keeps JSON valid
        (folder / name).write_bytes(bytes(data))
        with pytest.raises(files.DamagedFile, match=f"{name} is damaged"):
            load_results(folder).traces.read()
        with pytest.raises(files.DamagedFile, match=name):
            compare.compare_folders(folder, reference)
        code, _, err = run(["compare", str(folder), str(reference)], capsys)
        assert code == 2 and name in err and "Traceback" not in err, err


def test_a_renamed_zip_member_is_damage_not_a_missing_array(tmp_path):
    """An ``.npz`` member whose name no longer ends in ``.npy``: damage naming the file."""
    path = tmp_path / "traces.npz"
    np.savez(path, a=np.arange(3), b=np.ones(2))
    renamed = tmp_path / "renamed.npz"
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(renamed, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename.replace("b.npy", "b.npz"), src.read(info))
    assert sorted(TraceFile(path)) == ["a", "b"]
    message = r"renamed.npz cannot be read \(member 'b.npz' is not an array\)"
    with pytest.raises(TracesDamaged, match=message):
        TraceFile(renamed)


def test_a_manifest_lists_every_file_of_a_finished_folder(reference):
    """``manifest.json``: size and SHA-256 of every result file, no bookkeeping."""
    listed = json.loads((reference / files.MANIFEST).read_text())["files"]
    written = {p.name for p in reference.iterdir()} - {outputs.MARKER, outputs.COMPLETE}
    assert set(listed) == written - {files.MANIFEST}
    for name, entry in listed.items():
        sha256 = files.sha256_file(reference / name)
        assert entry == {"bytes": (reference / name).stat().st_size, "sha256": sha256}


def _points(out: Path) -> dict:
    summary = load_results(out).summary
    return {name: (r["points"], r["best"]) for name, r in summary["learners"].items()}


def test_a_stopped_sweep_resumes_its_finished_grids(
    config_path, whole_sweep, tmp_path, capsys, monkeypatch
):
    """A sweep too large is refused (and by its dry run) naming --allow-large. Ctrl-C after the
    first of four simulations, then ENOSPC at the rerun's checkpoint (one line, exit 1): the
    last rerun computes the three others only and gives the uninterrupted numbers."""
    out, calls, rewards = tmp_path / "out", itertools.count(1), sweep_module.sweep_rewards
    with monkeypatch.context() as patch:
        patch.setattr(cli, "available_memory_bytes", lambda: 1)
        for extra in (["--dry-run"], []):
            code, _, err = run(sweep_command(config_path, out, *extra), capsys)
            assert code == 2 and "does not fit" in err and "--allow-large" in err, err
    assert not out.exists() and not (tmp_path / "out.partial").exists()
    with monkeypatch.context() as patch:
        fail_when(patch, sweep_module, "sweep_rewards", lambda *a: next(calls) == 2)
        code, _, err = run(sweep_command(config_path, out), capsys)
    assert code == 130 and "checkpoints kept in" in err and "out.partial" in err, err
    with monkeypatch.context() as patch:
        full = OSError(errno.ENOSPC, "No space left on device")
        fail_when(patch, checkpoints, "save_arrays", lambda *a: True, full)
        code, _, err = run(sweep_command(config_path, out), capsys)
    line = err.strip()
    assert code == 1 and "\n" not in line and line.startswith("error: no space left"), err
    assert "checkpoints kept in" in line and "out.partial" in line
    computed: list[object] = []

    def counted(*args, **kwargs):
        computed.append(args)
        return rewards(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "sweep_rewards", counted)
    code, printed, err = run(sweep_command(config_path, out), capsys)
    assert code == 0 and "checkpoints of this experiment, resumed" in printed, err
    assert len(computed) == 3
    assert _points(out) == _points(whole_sweep)
