"""``experiments/paired.py`` on hand-made ``traces.npz``: segment means, ``@play`` trials,
paired differences, gaps, segment rewards alone, and what it cannot pair refused first."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import write_loss_traces
from tests.scripts.load import ROOT, load_script

paired = load_script(ROOT / "experiments" / "paired.py", "paired_script")
# two runs, T = 4, one change point at round 2 (segments {0, 1} and {2, 3})
A = [[0.0, 1.0, 0.5, 0.5], [1.0, 1.0, 0.0, 0.0]]
B = [[1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("paired")
    made = {
        "MAIN": write_loss_traces(root / "main", [[2], [2]], a=A, b=B),
        "OTHER": write_loss_traces(root / "other", [[2], [2]], c=B),
        "MOVED": write_loss_traces(root / "moved", [[3], [3]], a=A),
        "ZA": write_loss_traces(root / "za", [[2], [2]], z=A, a=[[0.5] * 4] * 2),
        "ONE": write_loss_traces(root / "one", [[2]], a=[[0.0] * 4], b=[[1.0] * 4]),
        "MISSING": root / "missing",
        # the same change points, another experiment (its environment or seed)
        **{
            k.upper(): write_loss_traces(root / f"same-{k}", [[2], [2]], a=A)
            for k in ("env", "seed")
        },
        "SEGMENTLESS": write_loss_traces(root / "segmentless", [[2]], a=[[0.0] * 4]),
        "CUT": write_loss_traces(root / "cut", [[2]], a=[[0.0] * 4]),  # a copy cut short
    }
    for key, value in (("env", {"num_arms": 6}), ("seed", 1)):
        (made[key.upper()] / "summary.json").write_text(json.dumps({"learners": {}, key: value}))
    traces = dict(np.load(made["SEGMENTLESS"] / "traces.npz"))
    del traces["env/change_points"]
    np.savez(made["SEGMENTLESS"] / "traces.npz", **traces)
    (made["CUT"] / "traces.npz").write_bytes((made["CUT"] / "traces.npz").read_bytes()[:100])
    return made


def test_segments_play_trials_differences_and_gaps(folders, capsys):
    data = paired.Folders(folders["MAIN"])
    mean, seg = data.rewards("a")
    np.testing.assert_allclose(mean, [0.5, 0.5])
    np.testing.assert_allclose(seg, [[0.5, 0.5], [0.0, 1.0]])
    mean, seg = data.rewards("a@play")  # rounds 0 and 2
    np.testing.assert_allclose(seg, [[1.0, 0.5], [0.0, 1.0]])
    np.testing.assert_array_equal(data.rewards(f"{folders['OTHER']}::c")[1], data.rewards("b")[1])
    paired.main([str(folders["MAIN"]), "--diff", "a,b", "--gap", "a,b"])
    out = capsys.readouterr().out
    assert "| a − b | +0.2500 ± " in out  # per run: 0.5 - 0 and 0.5 - 0.5
    assert "| a vs b | 0.5000 | 0.2500 | +100.0 % ± " in out


def test_without_options_every_learner_of_the_folder_gets_its_row(folders, capsys):
    """``paired.py FOLDER`` prints what ``--learners`` of all its learners prints, in order."""
    assert paired.main([str(folders["ZA"])]) == 0
    alone = capsys.readouterr().out
    assert paired.main([str(folders["ZA"]), "--learners", "z", "a"]) == 0
    assert alone == capsys.readouterr().out
    assert [line.split(" | ")[0] for line in alone.splitlines()[2:4]] == ["| z", "| a"]


def test_a_folder_without_loss_traces_gives_the_same_from_its_segment_rewards(tmp_path):
    """Without `loss` traces the segment rewards stand in; `@play`, needing the rounds, says so."""
    loss = [[0.0, 1.0, 0.5, 0.5], [1.0, 1.0, 0.0, 0.25]]  # T = 4, segments {0} and {1, 2, 3}
    full = write_loss_traces(tmp_path / "full", [[1], [1]], a=loss)
    slim = tmp_path / "slim"
    slim.mkdir()
    (slim / "summary.json").write_text('{"config": {"horizon": 4}}')
    segment = paired.Folders(full).rewards("a")[1]
    points = np.asarray([[1], [1]], np.int32)
    np.savez(slim / "traces.npz", **{"env/change_points": points, "a/segment_reward": segment})
    data = paired.Folders(slim)
    assert data.learners(slim) == ["a"]
    for got, want in zip(data.rewards("a"), paired.Folders(full).rewards("a"), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    with pytest.raises(SystemExit, match="save_traces"):
        data.rewards("a@play")


REFUSED = [
    ("MAIN", ["--learners", "z"], "z: MAIN has no learner 'z'; it has ['a', 'b']"),
    ("MAIN", ["--diff", "a"], "argument --diff: give two learners as a,b, got 'a'"),
    ("MAIN", ["--gap", "a,b,c"], "argument --gap: give two learners as a,b, got 'a,b,c'"),
    ("MAIN", ["--diff", "stabl,stabl"], "argument --diff: give two different learners as a,b, got"),
    ("MAIN", ["--learners", "a@plays"],
     "a@plays: the one suffix is @play (its even trials), got @plays"),
    ("MAIN", ["--learners", "a", "--diff", "a,z"], "z: MAIN has no learner 'z'"),
    ("MAIN", ["--learners", "MISSING::a"], "MISSING has no traces.npz"),
    ("MAIN", ["--learners", "SEGMENTLESS::a"], "SEGMENTLESS: its traces.npz has no env/change_"),
    ("MAIN", ["--learners", "CUT::a"], "CUT/traces.npz cannot be read (BadZipFile: File is not a "
     "zip file): the file is damaged or not an .npz"),
    ("MAIN", ["--learners", "MOVED::a"], "MOVED::a: not paired with MAIN (change points differ)"),
    ("MAIN", ["--learners", "ENV::a"], "ENV::a: not paired with MAIN (env differ)"),
    ("MAIN", ["--learners", "SEED::a"], "SEED::a: not paired with MAIN (seed differ)"),
    ("ONE", ["--learners", "b", "--diff", "a,b"], "ONE has 1 run(s), and a 95% t interval needs"),
]  # fmt: skip


@pytest.mark.parametrize(("folder", "args", "message"), REFUSED)
def test_what_it_cannot_pair_is_refused_before_any_table(folders, capsys, folder, args, message):
    """One message naming it (exit 2 for an argument, else the exit status), no table."""

    def fill(text: str) -> str:
        for name, path in folders.items():
            text = text.replace(name, str(path))
        return text

    with pytest.raises(SystemExit) as stop:
        paired.main([str(folders[folder]), *map(fill, args)])
    captured = capsys.readouterr()
    said = captured.err if stop.value.code == 2 else str(stop.value.code)
    assert fill(message) in said and captured.out == ""
