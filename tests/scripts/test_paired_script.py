"""``experiments/paired.py`` on a hand-made ``traces.npz``: per-segment means, the play trials
(``@play``), paired differences, gaps and the pairing check across folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import write_loss_traces
from tests.scripts.load import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "paired.py"


@pytest.fixture(scope="module")
def paired():
    return load_script(SCRIPT, "paired_script")


def test_segments_play_trials_differences_and_gaps(paired, tmp_path, capsys):
    # two runs, T = 4, one change point at round 2 (segments {0, 1} and {2, 3})
    a = [[0.0, 1.0, 0.5, 0.5], [1.0, 1.0, 0.0, 0.0]]
    b = [[1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]
    main = write_loss_traces(tmp_path / "main", [[2], [2]], a=a, b=b)
    other = write_loss_traces(tmp_path / "other", [[2], [2]], c=b)
    data = paired.Folders(main)

    mean, seg = data.rewards("a")
    np.testing.assert_allclose(mean, [0.5, 0.5])
    np.testing.assert_allclose(seg, [[0.5, 0.5], [0.0, 1.0]])
    mean, seg = data.rewards("a@play")  # rounds 0 and 2
    np.testing.assert_allclose(seg, [[1.0, 0.5], [0.0, 1.0]])
    np.testing.assert_array_equal(data.rewards(f"{other}::c")[1], data.rewards("b")[1])

    paired.main([str(main), "--diff", "a,b", "--gap", "a,b"])
    out = capsys.readouterr().out
    assert "| a − b | +0.2500 ± " in out  # per run: 0.5 - 0 and 0.5 - 0.5
    assert "| a vs b | 0.5000 | 0.2500 | +100.0 % ± " in out


def test_without_options_every_learner_of_the_folder_gets_its_row(paired, tmp_path, capsys):
    """``paired.py FOLDER`` alone printed nothing, with exit 0; it prints what ``--learners``
    of every learner of the folder prints, in the folder's order."""
    loss = [[0.0, 1.0, 0.5, 0.5], [1.0, 1.0, 0.0, 0.0]]
    main = write_loss_traces(tmp_path / "main", [[2], [2]], z=loss, a=[[0.5] * 4] * 2)
    assert paired.main([str(main)]) == 0
    alone = capsys.readouterr().out
    assert paired.main([str(main), "--learners", "z", "a"]) == 0
    assert alone == capsys.readouterr().out
    assert [line.split(" | ")[0] for line in alone.splitlines()[2:4]] == ["| z", "| a"]


def test_unpaired_folder_is_refused(paired, tmp_path):
    main = write_loss_traces(tmp_path / "main", [[2]], a=[[0.0] * 4])
    other = write_loss_traces(tmp_path / "other", [[3]], a=[[0.0] * 4])
    with pytest.raises(SystemExit, match="not paired"):
        paired.Folders(main).rewards(f"{other}::a")
    # The same change points, another experiment (its environment or seed): paired as if it
    # had faced the same draws.
    for key, value in (("env", {"num_arms": 6}), ("seed", 1)):
        same = write_loss_traces(tmp_path / f"same-{key}", [[2]], a=[[0.0] * 4])
        (same / "summary.json").write_text(json.dumps({"learners": {}, key: value}))
        with pytest.raises(SystemExit, match=f"not paired with {main} \\({key} differ\\)"):
            paired.Folders(main).rewards(f"{same}::a")


def test_a_folder_without_loss_traces_gives_the_same_from_its_segment_rewards(paired, tmp_path):
    """`save_traces` without `loss`: the per-run segment rewards stand in for the losses (the
    mean weighted by the segment lengths), and `@play`, which needs the rounds, says so."""
    loss = [[0.0, 1.0, 0.5, 0.5], [1.0, 1.0, 0.0, 0.25]]  # T = 4, segments {0} and {1, 2, 3}
    full = write_loss_traces(tmp_path / "full", [[1], [1]], a=loss)
    slim = tmp_path / "slim"
    slim.mkdir()
    (slim / "summary.json").write_text('{"config": {"horizon": 4}}')
    segment = paired.Folders(full).rewards("a")[1]
    np.savez(
        slim / "traces.npz",
        **{"env/change_points": np.asarray([[1], [1]], np.int32), "a/segment_reward": segment},
    )
    data = paired.Folders(slim)
    for got, want in zip(data.rewards("a"), paired.Folders(full).rewards("a"), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-15)
    with pytest.raises(SystemExit, match="save_traces"):
        data.rewards("a@play")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--learners", "z"], "z: MAIN has no learner 'z'; it has ['a', 'b']"),
        (["--diff", "a"], "argument --diff: give two learners as a,b, got 'a'"),
        (["--gap", "a,b,c"], "argument --gap: give two learners as a,b, got 'a,b,c'"),
        (["--diff", "stabl,stabl"], "argument --diff: give two different learners as a,b, got"),
        (
            ["--learners", "a@plays"],
            "a@plays: the one suffix is @play (its even trials), got @plays",
        ),
        (["--learners", "a", "--diff", "a,z"], "z: MAIN has no learner 'z'"),
        (["--learners", "MISSING::a"], "MISSING has no traces.npz"),
        (["--learners", "SEGMENTLESS::a"], "SEGMENTLESS: its traces.npz has no env/change_points"),
        (
            ["--learners", "CUT::a"],
            "CUT/traces.npz cannot be read (BadZipFile: File is not a zip file): the file is "
            "damaged or not an .npz",
        ),
    ],
)
def test_bad_names_are_refused_before_any_table(paired, tmp_path, capsys, args, message):
    """A name or pair it cannot read: one message naming it (exit 2 for an argument, the
    message as the exit status otherwise), and no table printed."""
    main = write_loss_traces(tmp_path / "main", [[2]] * 2, a=[[0.0] * 4] * 2, b=[[1.0] * 4] * 2)
    segmentless = write_loss_traces(tmp_path / "segmentless", [[2]], a=[[0.0] * 4])
    traces = dict(np.load(segmentless / "traces.npz"))
    del traces["env/change_points"]
    np.savez(segmentless / "traces.npz", **traces)
    cut = write_loss_traces(tmp_path / "cut", [[2]], a=[[0.0] * 4])  # a copy cut short
    (cut / "traces.npz").write_bytes((cut / "traces.npz").read_bytes()[:100])
    paths = {
        "MAIN": str(main),
        "MISSING": str(tmp_path / "missing"),
        "SEGMENTLESS": str(segmentless),
        "CUT": str(cut),
    }

    def fill(text: str) -> str:
        for name, path in paths.items():
            text = text.replace(name, path)
        return text

    with pytest.raises(SystemExit) as stop:
        paired.main([str(main), *map(fill, args)])
    captured = capsys.readouterr()
    said = captured.err if stop.value.code == 2 else str(stop.value.code)
    assert fill(message) in said and captured.out == ""


def test_a_folder_of_one_run_is_refused_before_any_table(paired, tmp_path, capsys):
    """Every interval of one run was printed as ``± nan``, with exit 0."""
    one_run = write_loss_traces(tmp_path / "one", [[2]], a=[[0.0] * 4], b=[[1.0] * 4])
    with pytest.raises(SystemExit) as stop:
        paired.main([str(one_run), "--learners", "b", "--diff", "a,b"])
    captured = capsys.readouterr()
    assert stop.value.code == 2 and captured.out == ""
    assert f"{one_run} has 1 run(s), and a 95% t interval needs 2 or more" in captured.err
