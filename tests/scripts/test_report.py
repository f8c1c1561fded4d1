"""``experiments/report.py`` (marked tables, ``--update``/``--check``, one marker printed, every
view) on hand-made folders of known numbers, and ``experiments/docs_numbers.sh``."""

from __future__ import annotations

import json
import re
import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

from tests.conftest import fill_disk_while_writing, write_loss_traces
from tests.scripts.load import ROOT, load_script

report = load_script(ROOT / "experiments" / "report.py", "report_script")
study = load_script(ROOT / "experiments" / "study.py", "report_study")
DOCS_NUMBERS = ROOT / "experiments" / "docs_numbers.sh"
MARK = "<!-- report: demo windows=16,64 -->\n"
OLD = MARK + "old\n<!-- /report -->\n"
OTHER_KINDS = ("bco", "hpo", "bandit", "anytime_gap")
LENGTHS = np.array([256.0, 1024.0, 4096.0, 16384.0])


def _json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path.parent


def _summary(reward: float = 0.5, runs: int = 20) -> dict:
    stat = {"mean": [3.0, -5.0], "ci95": [0.1, 0.2]}
    entry = {
        "num_queries": 2,
        "params": {"expert_lr_scale": 1.0},
        "mean_reward": {"mean": reward, "ci95": 0.01},
        "segment_reward": {"mean": [0.4, 0.6], "ci95": [0.02, 0.03]},
        "adaptive_regret": {"window_lengths": [16, 64], "expected": stat, "sampled": stat},
        "prob_best": {"overall": {"mean": 0.3, "ci95": 0.01}},
        "num_muted": 7,
    }
    summary = {"description": "demo", "runs": runs, "seed": 0, "config": {"feedback": "loss"}}
    return summary | {"learners": {"stabl": entry}}


def _paired_folder(folder: Path, stabl: np.ndarray, exp3: np.ndarray) -> Path:
    """StABL and EXP3 (the same summary entries) of ``(R, 4)`` losses, a change at round 2."""
    summary = _summary(runs=len(stabl))
    summary["learners"]["exp3_uniform"] = summary["learners"]["stabl"]
    _json(folder / "summary.json", summary)
    arrays: dict[str, Any] = {"stabl/loss": stabl, "exp3_uniform/loss": exp3}
    arrays["env/change_points"] = np.full((len(stabl), 1), 2, np.int32)
    np.savez(folder / "traces.npz", **arrays)
    return folder


def _hpo_folder(folder: Path, runs: int = 5) -> None:
    """Algorithm selection, 2 problems x 5 repeats x 4 evaluations: StABL's best gap is 10x
    Uniform's on problem a and equal on b (paired log10 difference +1, 0, +0.5 over all)."""
    row = {"final_log10_gap": 1.0, "final_log10_gap_ci": 0.1}
    learners = ["uniform", "stabl"]
    config = {"description": "demo", "runs": runs, "seed": 0, "feedback": "reward"}
    summary = {"kind": "hpo", "config": config | {"learners": learners, "problems": ["a", "b"]}}
    summary["problems"] = {p: {"uniform": row, "stabl": row} for p in "ab"}
    for key in ("profile_scores", "score_vs_uniform", "profile_scores_half_budget"):
        summary[key] = {"uniform": 0.5, "stabl": 0.25}
    summary["score_vs_uniform_half_budget"] = {"uniform": 0.0, "stabl": -0.1}
    _json(folder / "summary.json", summary)
    gap = np.random.default_rng(0).uniform(0.1, 1.0, (5, 4))
    counts = np.array([3, 1], np.int32)  # shares 1.5 and 0.5 of 1/A
    arrays: dict[str, Any] = {"a/uniform/best_gap": gap, "a/stabl/best_gap": 10 * gap}
    arrays |= {"b/uniform/best_gap": gap, "b/stabl/best_gap": gap}
    arrays |= {f"{p}/{n}/arm_counts": counts for p in "ab" for n in learners}
    np.savez(folder / "traces.npz", **arrays)


def _regret_folder(folder: Path, probs: dict, command=()) -> None:
    """Expert advice (bonus 0.5) of 2 runs and T = 3, the ``prob_best`` trace of each learner."""
    env = {"name": "expert_advice", "bonus": 0.5}
    learners = {n: {"num_queries": 2} for n in probs}
    info = {"name": "demo", "runs": 2, "seed": 0, "horizon": 3, "command": list(command)}
    _json(folder / "summary.json", info | {"env": env, "learners": learners})
    arrays: dict[str, Any] = {"env/change_points": np.zeros((2, 0))}
    arrays |= {f"{n}/prob_best": np.asarray(p, np.float32) for n, p in probs.items()}
    np.savez(folder / "traces.npz", **arrays)


def _study_folder(folder: Path, points: dict) -> None:
    """``study.json`` as ``experiments/study.py`` writes it for ``{(adversary, n): {learner:
    (R, 4) SA(L)}}`` at L = :data:`LENGTHS`, with 20 bootstrap resamples."""
    loaded = {
        key: {
            "windows": [int(w) for w in LENGTHS],
            "learners": {n: {"sa": sa, "queries": 2} for n, sa in learners.items()},
        }
        for key, learners in points.items()
    }
    _json(folder / "study.json", {"meta": {}, "analysis": study.analyse(loaded, resamples=20)})


def _bench() -> dict:
    rate = {"run_steps_per_s": 1.5e6, "run_steps_per_s_min": 1.2e6, "run_steps_per_s_max": 1.6e6}
    case = {"learner": "stabl", "num_arms": 5, "runs": 3}
    rows = [
        {**case, **rate, "impl": "jax", "compile_s": 0.42, "arm_updates_per_s": 7.5e6,
         "x_numpy_vectorised": 3.0, "x_numpy_loop": 75.0, "x_validated": 0.9,
         "state_bytes_per_run": 884, "peak_rss_bytes": 300 * 2**20},
        {**case, "impl": "numpy_vectorised", "run_steps_per_s": 5e5,
         "run_steps_per_s_min": 4e5, "run_steps_per_s_max": 6e5},
        {**case, "runs": 1, "impl": "numpy_loop", "run_steps_per_s": 2e4,
         "run_steps_per_s_min": 1e4, "run_steps_per_s_max": 3e4},
    ]  # fmt: skip
    machine = {
        "cpu": "Test CPU", "cpu_count": 2, "jax": "0.0", "jax_backend": "cpu",
        "devices": ["cpu:cpu"], "numpy": "2.0", "load_average": [0.5, 0, 0],
        "load_average_end": [1.25, 0, 0], "date": "2026-01-01T00:00:00+00:00",
    }  # fmt: skip
    return {"machine": machine, "code": {"commit": "abcdef0123", "dirty": True}, "rows": rows}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """Every hand-made folder of the views (each described where it is read) and ``doc.md``."""
    root = tmp_path_factory.mktemp("results")
    _json(root / "demo" / "summary.json", _summary())
    for kind in OTHER_KINDS:
        _json(root / kind / "summary.json", {"kind": kind})
    one = _summary(runs=1)  # one run: null half-widths
    entry = one["learners"]["stabl"]
    for stat in (entry["mean_reward"], entry["prob_best"]["overall"]):
        stat["ci95"] = None
    entry["adaptive_regret"]["expected"] = {"mean": [3.0, -5.0], "ci95": None}
    _json(root / "onerun" / "summary.json", one)
    # pair: 10 runs of 4 rounds; StABL earns 0.1 more than EXP3 in every run's first segment
    exp3 = np.random.default_rng(0).uniform(0.2, 0.8, (10, 4)).astype(np.float32)
    _paired_folder(root / "pair", exp3 - np.array([0.1, 0.1, 0, 0], np.float32), exp3)
    _paired_folder(root / "one", exp3[:1], exp3[:1])
    for name in ("nostabl", "cut", "badjson"):  # no stabl; traces cut short; summary cut short
        write_loss_traces(root / name, [[2], [2]], exp3_uniform=[[0.0] * 4] * 2)
    (root / "cut" / "traces.npz").write_bytes((root / "cut" / "traces.npz").read_bytes()[:200])
    (root / "badjson" / "summary.json").write_text('{"learners')
    _hpo_folder(root / "sel")
    _hpo_folder(root / "sel-one", runs=1)
    a = [[0.0, 1.0, 0.5, 0.5], [1.0, 1.0, 0.0, 0.0]]
    b = [[1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]]
    write_loss_traces(root / "main", [[2], [2]], a=a)
    write_loss_traces(root / "other", [[2], [2]], b=b)
    _regret_folder(root / "f", {"a": [[0, 0, 0], [1, 1, 1]], "b": [[1, 1, 1], [1, 1, 1]]})
    _regret_folder(root / "f-naive", {"c": [[0.5] * 3, [0.5] * 3]}, command=["validate=False"])
    _json(root / "bench" / "benchmark.json", _bench())
    # study: every run's SA(L) is k·L (StABL k = 1 at n = 3 and 2 at n = 9, Uniform 3);
    # study-tuned: StABL's SA(L) = √L at both n
    runs = np.ones((6, 1))
    theory = {
        ("geometric", 3): {"stabl": runs * LENGTHS, "uniform": 3 * runs * LENGTHS},
        ("geometric", 9): {"stabl": 2 * runs * LENGTHS, "uniform": 3 * runs * LENGTHS},
        ("random", 3): {"stabl": runs * LENGTHS, "uniform": 3 * runs * LENGTHS},
    }
    _study_folder(root / "study", theory)
    tuned = {key: {"stabl": runs * np.sqrt(LENGTHS)} for key in list(theory)[:2]}
    _study_folder(root / "study-tuned", tuned)
    (root / "study-cut").mkdir()
    (root / "study-cut" / "study.json").write_text('{"analysis": ')  # cut short
    (root / "doc.md").write_text(OLD)
    return root


def test_check_fails_until_update_writes_the_table(tmp_path, capsys):
    _json(tmp_path / "demo" / "summary.json", _summary(0.5))
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n\n" + MARK + "stale\n<!-- /report -->\n\nafter\n")
    args = ["--results", str(tmp_path)]
    assert report.main(["--check", str(doc), *args]) == 1
    assert "<!-- report: demo windows=16,64 -->" in capsys.readouterr().out
    assert report.main(["--update", str(doc), *args]) == 0
    text = doc.read_text()
    assert text.startswith("intro\n\n" + MARK + "\n`results/demo` — demo (20 runs")
    assert text.endswith("<!-- /report -->\n\nafter\n")
    # summary.json's half-width as it is (Student's t already; never rescaled)
    assert "| stabl | 2 | expert_lr_scale=1 | 0.500 ± 0.010 |" in text
    assert "| 3.0 ± 0.1 | -5.0 ± 0.2 |" in text
    assert report.main(["--check", str(doc), *args]) == 0
    _json(tmp_path / "demo" / "summary.json", _summary(0.6))  # a new result: stale again
    assert report.main(["--check", str(doc), *args]) == 1


def test_update_writes_the_document_whole_or_not_at_all(results, tmp_path, monkeypatch):
    """A full disk leaves the document as it was; its mode is kept and a link stays a link."""
    doc = tmp_path / "doc.md"
    before = MARK + "stale\n<!-- /report -->\n" + "more text\n" * 2000
    doc.write_text(before)
    doc.chmod(0o640)
    link = tmp_path / "link.md"
    link.symlink_to(doc)
    args = ["--update", str(link), "--results", str(results)]
    with monkeypatch.context() as patch:
        fill_disk_while_writing(patch)
        with pytest.raises(OSError, match="No space"):
            report.main(args)
    assert doc.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.md", "link.md"]
    assert report.main(args) == 0
    assert link.is_symlink() and "| stabl | 2 |" in doc.read_text()
    assert doc.stat().st_mode & 0o777 == 0o640


def test_a_marker_given_as_the_argument_prints_its_table(results, capsys):
    """The argument is a marker's text: its table on stdout, as ``--update`` writes it."""
    assert report.main(["demo windows=16,64", "--results", str(results)]) == 0
    assert capsys.readouterr().out == report.render("demo windows=16,64", results) + "\n\n"
    # the options a view reads apply, given or not
    assert report.main(["demo sa=sampled windows=16", "--results", str(results)]) == 0
    assert "SA(L) of the sampled loss" in capsys.readouterr().out
    assert report.main(["sel view=paired", "--results", str(results)]) == 0
    assert "+1.000 ± 0.000" in capsys.readouterr().out


#: Arguments refused (exit 2, one line naming what, nothing printed, the document untouched):
#: bad options, missing folders, options the folder's view does not read, a marker with
#: --check/--update, both modes or neither, folders the paired view cannot read.
REFUSED = [
    (["demo windows=abc"], "windows must be comma-separated ints >= 1, e.g. 256,1024, got 'abc'"),
    (["demo windows=0,64"], "got '0,64'"),
    (["demo windows=64,256,64"], "windows '64,256,64' give a window twice"),
    (["demo view=gap"], "view=gap is for the folders of experiments/anytime_gap.py"),
    (["demo colour=red"], "report marker 'demo colour=red': unknown option(s) ['colour']"),
    (["missing"], "report marker 'missing': no missing/summary.json; run experiments/docs_"),
    (["--check", "missing.md"], "No such file or directory: 'missing.md'"),
    (["--check", "doc.md", "demo"], "argument MARKER: not allowed with argument --check"),
    (["demo", "--update", "doc.md"], "argument --update: not allowed with argument MARKER"),
    (["--update", "doc.md", "--check", "doc.md"], "--check: not allowed with argument --upd"),
    ([], "one of the arguments MARKER --update --check is required"),
    *[
        ([f"{kind} {options}"], f"report marker '{kind} {options}': {named}")
        for kind, options, named in [
            ("bco", "sa=sampled", "sa is not read by view=table of this bco folder"),
            ("hpo", "windows=64", "windows is not read by view=table of this hpo folder"),
            ("bandit", "view=paired baseline=exp3", "baseline is not read by view=paired"),
            ("bandit", "learner=stabl columns=a,b", "learner columns is not read by view=table"),
            ("anytime_gap", "windows=64", "windows is not read by view=gap of this anytime_gap"),
            ("demo", "view=paired windows=16", "windows is not read by view=paired of this bandit"),
            ("demo", "view=paired sa=sampled", "sa is not read by view=paired"),
            ("demo", "view=regret sa=sampled", "sa is not read by view=regret"),
            ("demo", "view=diff diff=stabl,stabl windows=16", "windows is not read by view=diff"),
        ]
    ],
    (["nostabl view=paired"], "view=paired gives 'stabl' minus every other learner, and its "
     "traces.npz has no 'stabl' (it has ['exp3_uniform'])"),
    (["cut view=paired"], "traces.npz cannot be read (BadZipFile: File is not a zip file): the "
     "file is damaged or not an .npz; run what wrote it again"),
    (["badjson view=paired"], "summary.json is not valid JSON (Unterminated string"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_what_it_cannot_use_is_named_before_any_table(results, capsys, monkeypatch, args, message):
    monkeypatch.chdir(results)
    with pytest.raises(SystemExit) as stop:
        report.main([*args, "--results", "."])
    captured = capsys.readouterr()
    assert stop.value.code == 2 and message in captured.err and "Traceback" not in captured.err
    assert captured.out == ""
    assert (results / "doc.md").read_text() == OLD


@pytest.mark.parametrize(
    ("marker", "named"),
    [
        ("demo learner=stabl", "learner is not read by view=table of this bandit folder"),
        (None, "is not UTF-8 text ("),
    ],
)
def test_an_unread_option_or_document_is_named(results, tmp_path, capsys, marker, named):
    """``--check``/``--update`` name an unread option or a non-text document (exit 2)."""
    doc = tmp_path / "doc.md"
    text = f"<!-- report: {marker} -->\nold\n<!-- /report -->\n".encode()
    text = b"\xff\xfe" + MARK.encode() if marker is None else text
    doc.write_bytes(text)
    for mode in ("--check", "--update"):
        with pytest.raises(SystemExit) as stop:
            report.main([mode, str(doc), "--results", str(results)])
        err = capsys.readouterr().err
        where = f"{doc} " if marker is None else f"report marker {marker!r}: "
        assert stop.value.code == 2 and where + named in err, err
    assert doc.read_bytes() == text


def test_a_marker_without_its_folder_fails_and_keeps_its_block(results, tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text(OLD.replace("demo", "absent"))
    for mode in ("--check", "--update"):
        assert report.main([mode, str(doc), "--results", str(results)]) == 1
        assert "docs_numbers.sh" in capsys.readouterr().err
    assert doc.read_text() == OLD.replace("demo", "absent")


#: What a view cannot give: named (the exception and its words) instead of a table.
UNRENDERED = [
    ("one view=paired", ValueError,
     "has 1 run(s), and a 95% t interval needs 2 or more: rerun it with"),
    ("sel view=paired baseline=exp3", ValueError, "baseline 'exp3' is not one of its learners"),
    ("sel-one view=paired", ValueError, "has 1 run(s), and a 95% t interval needs 2"),
    ("main diff=a,other::b", ValueError, "only with view=diff"),
    ("f rows=f", ValueError, "rows= only with view=regret"),
    ("bench view=bench windows=16", ValueError, "view=bench takes no other option"),
    ("elsewhere view=bench", FileNotFoundError, "stabl-jax bench --out"),
    ("study view=table1 adversary=poisson", ValueError, "no adversary 'poisson'"),
    ("study tuned=study-tuned", ValueError, "only with view="),
    ("study view=exponents n=3", ValueError, "takes adversary= only"),
    ("nostudy view=b", FileNotFoundError, "run experiments/study.py --out"),
    ("study-cut view=b", ValueError, "study-cut/study.json is not valid JSON ("),
]  # fmt: skip


@pytest.mark.parametrize(("marker", "error", "words"), UNRENDERED, ids=[m for m, *_ in UNRENDERED])
def test_what_a_view_cannot_give_is_named(results, marker, error, words):
    with pytest.raises(error) as raised:
        report.render(marker, results)
    assert words in str(raised.value)
    if marker.startswith("study-cut"):
        assert "run experiments/study.py --out" in str(raised.value)


def test_a_one_run_folder_gives_means_without_intervals(results):
    """One run: ``summary.json``'s null half-widths give the means alone, not a failure."""
    row = "| stabl | 2 | expert_lr_scale=1 | 0.500 | 0.400, 0.600 | 3.0 | -5.0 | 0.300 | 7 |"
    assert row in report.render("onerun windows=16,64", results)


def test_paired_view_from_traces(results):
    """StABL earns 0.1 more than EXP3 in every run's first segment and the same in the second:
    +0.100, +0.000 and +0.050 overall, zero spread."""
    table = report.render("pair view=paired", results)
    assert "| stabl − exp3_uniform | +0.050 ± 0.000 | +0.100 ± 0.000, +0.000 ± 0.000 |" in table
    flipped = report.render("pair view=paired reference=exp3_uniform", results)
    assert "| exp3_uniform − stabl | -0.050 ± 0.000 | -0.100 ± 0.000, +0.000 ± 0.000 |" in flipped


def test_algorithm_selection_tables_use_t_intervals_and_pair_the_repeats(results):
    table = report.render("sel", results)
    assert "| stabl | 0.250 | 0.250 | -0.100 | +0.250 |" in table
    # summary.json's Student-t half-width as it is (never rescaled)
    assert "| a | 1.00 ± 0.10 | 1.00 ± 0.10 (" not in table  # no scores in this summary
    assert "| a | 1.00 ± 0.10 | 1.00 ± 0.10 |" in table
    table = report.render("sel view=paired", results)
    # five 1s and five 0s: sd = sqrt(10 * 0.25 / 9), half-width t_9 sd / sqrt(10) = 0.377
    row = "| stabl | +0.500 ± 0.377 | +0.500 ± 0.377 | +1.000 ± 0.000 | +0.000 ± 0.000 |"
    assert row in table and table.endswith("| 0.50–1.50 |")


def test_diff_view_pairs_learners_across_folders(results):
    """Rewards a = (1, 0, .5, .5), (0, 0, 1, 1); b = (0, 0, 0, 0), (.5, .5, .5, .5); change at
    2. a - b per run .5 and 0 (t(1) = 12.7062: .25 ± 3.1766), segments .5/-.5 and .5/.5; gap
    a .5 vs b .25: +100 % ± 3.1766 / .25 = 1270.6 points."""
    text = report.render("main view=diff\n  diff=a,other::b\n  gap=main::a,other::b", results)
    lines = text.splitlines()
    assert "| a − b [other] | +0.2500 ± 3.1766 | +0.0000 ± 6.3531 | +0.5000 ± 0.0000 |" in lines
    assert "| a [main] vs b [other] | 0.5000 | 0.2500 | +100.0 % ± 1270.6 |" in lines


def test_regret_view_from_prob_best_with_a_companion_folder(results):
    """R(T) = bonus * sum_t (1 - p_t(best)): a's p = 0 and 1 over T = 3 give 1.5 and 0 (0.75 ±
    9.53 by t(1)); b's p = 1 gives 0.0; the companion ``f-naive``'s c (p = 0.5) 0.75."""
    text = report.render("f view=regret", results)
    assert "| a | b | c |" in text
    assert "| f (2 runs) | 1 ± 10 | 0.0 | 0.8 (validation off) |" in text.splitlines()


def test_bench_view_is_the_benchmark_table_of_the_folder(results):
    """The machine line, one row per JAX configuration and the loop's rates, from the JSON."""
    text = report.render("bench view=bench", results)
    lines = text.splitlines()
    assert lines[0] == "Machine: Test CPU, 2 cores; JAX 0.0 (cpu: cpu:cpu), NumPy 2.0; 2026-01-01."
    assert "abcdef0" not in text and "load average" not in text  # benchmark.json keeps them
    assert (
        "| stabl | 5 | 3 | 0.4 | 1.5 M (1.2 M–1.6 M) | 7.5 M | 500 k (400 k–600 k) | 3× | 75× "
        "| 0.9× | 884 | — | — | 300 |" in lines
    )
    assert lines[-1] == "NumPy one-run loop: stabl n=5: 20 k (10 k–30 k) run-steps/s."


def test_study_views_from_study_json(results, tmp_path):
    """``view=table1`` (with tuned rows), ``view=b``, ``view=exponents`` written by ``--update``.
    SA(L) = k·L: exponent in L 1, StABL's in n log 2 / log 3 = 0.63; tuned SA(L) = √L: 0.5
    and 0."""
    doc = tmp_path / "doc.md"
    doc.write_text(
        "<!-- report: study view=table1 tuned=study-tuned -->\n<!-- /report -->\n"
        "<!-- report: study view=b -->\n<!-- /report -->\n"
        "<!-- report: study-tuned view=exponents adversary=geometric -->\n<!-- /report -->\n"
    )
    assert report.main(["--update", str(doc), "--results", str(results)]) == 0
    text = doc.read_text()
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in text.splitlines()}
    fits = "| 1.00 [1.00, 1.00] | 0.63 [0.63, 0.63] (n = 3, 9) |"
    theory = "| 256.0 ± 0.0 | 1024.0 ± 0.0 | 4096.0 ± 0.0 " + fits
    assert rows["StABL (this paper, Thm. 1), theory"].endswith(theory)
    flat = "| 0.00 [0.00, 0.00] (n = 3, 9) |"
    tuned = "| 16.0 ± 0.0 | 32.0 ± 0.0 | 64.0 ± 0.0 | 0.50 [0.50, 0.50] " + flat
    assert rows["StABL (this paper, Thm. 1), tuned"].endswith(tuned)
    uniform = "| 768.0 ± 0.0 | 3072.0 ± 0.0 | 12288.0 ± 0.0 | 1.00 [1.00, 1.00] " + flat
    assert rows["Uniform"].endswith(uniform)
    assert "| learner | geometric n = 3 | 9 | random n = 3 |" in text
    assert "| `stabl` (2) | 1.00 | 1.00 | 1.00 |" in text
    assert "| `stabl` | 3, 9 | 0.00 [0.00, 0.00] | 0.00 [0.00, 0.00] | 0.00 [0.00, 0.00] |" in text


def test_tables_of_the_kept_benchmark_json_are_what_the_documents_show(tmp_path):
    """``docs/benchmark/benchmark.json`` regenerates every ``view=bench`` table of speed.md."""
    kept = (ROOT / "docs" / "benchmark" / "benchmark.json").read_bytes()
    (tmp_path / "benchmark").mkdir()
    (tmp_path / "benchmark" / "benchmark.json").write_bytes(kept)
    text = (ROOT / "docs" / "speed.md").read_text()
    ours = [m["args"] for m in report.MARKER.finditer(text) if "view=bench" in m["args"].split()]
    assert ours, "docs/speed.md has no table of a kept JSON"
    new, changed, missing = report.update(text, tmp_path)
    assert changed == [] and new == text
    assert not [m for m in missing if any(f"/{a.split()[0]}/" in m for a in ours)], missing


class Stubbed(NamedTuple):
    """What ``docs_numbers.sh`` did with ``cp`` and Python stubbed by logs: the folders it ran
    (in order), each ``cp``'s arguments after the number of folders run before it, and the
    arguments of each Python call."""

    results: Path
    ran: list[str]
    copies: list[tuple[int, list[str]]]
    python: list[list[str]]


def _run_docs_numbers_stubbed(tmp_path: Path, **env: str) -> Stubbed:
    stub, results = tmp_path / "bin", tmp_path / "results"
    stub.mkdir(parents=True)
    done = f"$(cat {results}/timings.txt 2>/dev/null | wc -l)"
    for name, logged in (("cp", f"{done} $*"), ("python", "$*")):
        (stub / name).write_text(f'#!/bin/sh\necho "{logged}" >> {tmp_path}/{name}.txt\n')
        (stub / name).chmod(0o755)
    env = {"PATH": f"{stub}:/usr/bin:/bin", "RESULTS": str(results), **env}
    env["PYTHON"] = str(stub / "python")
    subprocess.run(["bash", str(DOCS_NUMBERS)], env=env, check=True, cwd=tmp_path)

    def log(path: Path) -> list[list[str]]:
        return [line.split() for line in path.read_text().splitlines()] if path.exists() else []

    copies = [(int(words[0]), words[1:]) for words in log(tmp_path / "cp.txt")]
    ran = [words[0] for words in log(results / "timings.txt")]
    return Stubbed(results, ran, copies, log(tmp_path / "python.txt"))


@pytest.fixture(scope="module")
def stubbed(tmp_path_factory) -> Stubbed:
    """The whole of ``docs_numbers.sh``, run once with ``cp`` and Python stubbed."""
    return _run_docs_numbers_stubbed(tmp_path_factory.mktemp("docs_numbers"))


@pytest.mark.parametrize("doc", ["EXPERIMENTS.md", "docs/speed.md"])
def test_every_marked_table_has_its_run_in_docs_numbers(doc, stubbed):
    """Markers well formed; ``docs_numbers.sh`` writes their folders, updates and checks the doc."""
    text, script = (ROOT / doc).read_text(), DOCS_NUMBERS.read_text()
    for action in ("--update", "--check"):
        assert f"experiments/report.py {action} {doc} --results" in script, (action, doc)
    blocks = report.MARKER.findall(text)
    starts = [line for line in text.splitlines() if line.startswith("<!-- report: ")]
    ends = [line for line in text.splitlines() if line == "<!-- /report -->"]
    assert len(blocks) == len(starts) == len(ends) > 0
    for block in blocks:
        folder, *options = block[1].split()
        pairs = [o.split("=", 1)[1] for o in options if o.startswith(("diff=", "gap="))]
        sides = [side for pair in pairs for side in pair.split(",")]
        named = [side.split("::")[0] for side in sides if "::" in side]
        named += [f for o in options if o.startswith("rows=") for f in o[5:].split(",")]
        named += [o.removeprefix("tuned=") for o in options if o.startswith("tuned=")]
        for name in [folder, *named]:
            assert name in stubbed.ran, f"{name} is not written by experiments/docs_numbers.sh"


def test_every_figure_of_the_documents_is_copied_from_a_folder_of_docs_numbers(stubbed):
    """Every figure ``docs_numbers.sh`` copies or draws comes from a folder it runs, every
    figure README.md and EXPERIMENTS.md show is one of them, and ``docs/figures`` holds exactly
    the figures the documents show."""
    results, written, made = stubbed.results, set(stubbed.ran), set()
    # the study draws into $RESULTS/docs/figures, copied into docs/ after every run
    assert (len(written), ["-R", f"{results}/docs/.", "docs/"]) in stubbed.copies
    for _, (*source, dest) in stubbed.copies:
        if dest.startswith("docs/figures/"):
            folder, plot = Path(source[0]).relative_to(results).parts
            assert folder in written, f"docs_numbers.sh copies a plot of {folder}, never run"
            assert plot.endswith(".png"), source
            made.add(dest.removeprefix("docs/figures/"))
    calls = {name: [w for w in stubbed.python if w[0] == f"experiments/{name}.py"]
             for name in ("sensitivity", "curves", "study")}  # fmt: skip
    ((*_, sweeps_folder, into),) = calls["sensitivity"]
    assert (sweeps_folder, into) == (f"{results}/sweeps", "docs/figures")
    sweeps = [w.removeprefix("sweeps/") for w in written if w.startswith("sweeps/")]
    assert sweeps
    made |= {f"{name}_sensitivity.png" for name in sweeps}
    (curves,) = [c[c.index("--folders") + 1 :] for c in calls["curves"]]
    for folder in curves:
        assert folder in written, folder
        made |= {f"{folder}_regret.png", f"{folder}_sa.png"}
    studies = set()
    for words in (w for w in calls["study"] if "--figures" in w):
        after = dict(pairwise(words))
        assert after["--figures"] == f"{results}/docs/figures", words
        out = str(Path(after["--out"]).relative_to(results))
        assert out in written, words
        points = [w.removeprefix(f"{out}/") for w in written if w.startswith(f"{out}/")]
        prefix = after.get("--figure-prefix", "study")
        studies |= {f"{prefix}_{p.split('-n')[0]}_sa_vs_{x}.png" for p in points for x in "Ln"}
    assert len(studies) == 6, studies
    made |= studies
    docs = [(ROOT / doc).read_text() for doc in ("README.md", "EXPERIMENTS.md")]
    shown = {name for text in docs for name in re.findall(r"docs/figures/([\w.-]+\.png)", text)}
    on_disk = {p.name for p in (ROOT / "docs" / "figures").glob("*.png")}
    assert shown == on_disk, (shown - on_disk, on_disk - shown)
    assert made <= on_disk, made - on_disk
    assert shown <= made, f"{sorted(shown - made)}: not written by docs_numbers.sh"


def test_only_runs_its_folders_and_the_whole_script_writes_under_docs_after_every_run(
    stubbed, tmp_path
):
    """``ONLY=REGEX`` runs exactly the matching folders, in order, and writes nothing under
    ``docs/``; without it every folder runs before anything is copied into ``docs/`` (an
    earlier copy would make later folders record a dirty tree)."""
    only = "^(bco_d(2|10)|sweeps/expert_advice_equal|study/random-n30-base)$"
    ran = _run_docs_numbers_stubbed(tmp_path, ONLY=only)
    assert ran.ran == ["bco_d2", "bco_d10", "sweeps/expert_advice_equal", "study/random-n30-base"]
    assert ran.copies == []
    into_docs = [(when, args[-1]) for when, args in stubbed.copies]
    assert all(dest.startswith("docs/") for _, dest in into_docs), into_docs
    folders = {dest.rsplit("/", 1)[0] + "/" for _, dest in into_docs}
    assert into_docs[0][1] == "docs/" and {"docs/benchmark/", "docs/figures/"} <= folders
    assert all(when == len(stubbed.ran) for when, _ in into_docs), into_docs[:3]


def test_every_bandit_folder_of_docs_numbers_keeps_every_trace():
    """The ``run`` lines and the ``unvalidated`` step keep every trace (``save_traces="all"``)."""
    script = DOCS_NUMBERS.read_text()
    run = script[script.index("run() {") : script.index("gap() {")]
    assert """--set 'save_traces="all"'""" in run
    unvalidated = script[script.index("unvalidated() {") :]
    unvalidated = unvalidated[: unvalidated.index("\nPY\n")]
    (call,) = [line for line in unvalidated.splitlines() if "load_config(" in line]
    assert """'save_traces="all"'""" in call, call
