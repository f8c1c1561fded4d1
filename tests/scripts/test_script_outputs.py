"""The benchmark scripts' output files are checked before the work they record."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import pytest

from stabl_jax.experiment.arguments import Distinct, Parser
from stabl_jax.experiment.files import write_json
from stabl_jax.experiment.outputs import OutputError, writable_folder
from tests.scripts.load import ROOT, load_script

_cli = load_script(ROOT / "experiments" / "_cli.py", register=True)
json_output, output_file = _cli.json_output, _cli.output_file

#: Each script writing one JSON file after its work, and the flag naming that file.
SCRIPTS = {"gpu_compile": "--out", "gpu_split": "--out"}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_an_output_it_cannot_write_stops_the_script_before_its_work(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A missing folder, or a file not its previous output (kept): exit 2 before the work."""
    module = load_script(ROOT / "experiments" / f"{name}.py", f"_outputs_{name}")
    target, notes = tmp_path / "missing" / "out.json", tmp_path / "notes.md"
    notes.write_text("my notes\n")
    for path, message in (
        (target, f"the folder {target.parent} of {target} does not exist: create it first"),
        (notes, f"{notes} is there and is not a previous output of this script"),
    ):
        monkeypatch.setattr(sys, "argv", [f"{name}.py", SCRIPTS[name], str(path)])
        with pytest.raises(SystemExit) as stop:
            module.main()
        assert stop.value.code == 2
        assert message in capsys.readouterr().err
    assert not target.parent.exists() and notes.read_text() == "my notes\n"


def test_json_output_replaces_only_the_scripts_previous_output(tmp_path: Path) -> None:
    check = json_output(["rows", "device"], one_of=["cases", "divergence"])
    path = tmp_path / "out.json"
    assert check(str(path)) == str(path)  # absent: written after the work
    write_json(path, {"rows": [], "device": "cpu", "cases": []})
    assert check(str(path)) == str(path)  # the previous output: replaced
    for theirs in ('{"rows": [], "cases": []}', '{"rows": [], "device": "cpu"}', "[1, 2]", "x"):
        path.write_text(theirs)
        with pytest.raises(argparse.ArgumentTypeError, match="device, rows and one of cases"):
            check(str(path))
        assert path.read_text() == theirs


def test_output_file_and_write_json(tmp_path: Path) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="is a folder: name a file in it"):
        output_file(str(tmp_path))
    path = output_file(str(tmp_path / "out.json"))
    assert path == str(tmp_path / "out.json") and not Path(path).exists()
    write_json(path, {"rows": [1.5, float("nan")]})
    assert json.loads(Path(path).read_text())["rows"][0] == 1.5
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left


def test_a_folder_written_after_the_work_is_checked_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``writable_folder`` refuses a folder under a file, a dangling link or no write right."""
    afile = tmp_path / "afile"
    afile.write_text("mine")
    with pytest.raises(OutputError, match=re.escape("--out X is a file: give a folder for Y")):
        writable_folder(afile, "--out X", "Y")
    under = afile / "new" / "deeper"
    message = f"--out X: {afile} is a file, so {under} cannot be made: give a folder for Y"
    with pytest.raises(OutputError, match=re.escape(message)):
        writable_folder(under, "--out X", "Y")
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "gone")
    for target in (dangling, dangling / "deeper"):  # mkdir would fail on the link, later
        message = f"--out X: {dangling} is a symbolic link to nothing, so {target} cannot be"
        with pytest.raises(OutputError, match=re.escape(message)):
            writable_folder(target, "--out X", "Y")
    dangling.unlink()
    fresh = tmp_path / "new" / "deeper"
    assert writable_folder(fresh, "--out X", "Y") == fresh and not (tmp_path / "new").exists()
    assert writable_folder(tmp_path, "--out X", "Y") == tmp_path
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # as a user without the right
    message = f"--out X: cannot write into {tmp_path}: give a folder for Y"
    with pytest.raises(OutputError, match=re.escape(message)):
        writable_folder(fresh, "--out X", "Y")
    assert afile.read_text() == "mine"


TWICE, REPLACED = "twice: give each value once", "the second would silently replace the first"
WHY, GIVEN = {1: "", 2: " (a 95% interval needs two runs)"}, "--bootstrap is given twice"
#: Arguments that stop a script at once (exit 2), and the words its message holds: a count
#: below its least, a list option's value twice (``Distinct``), an option twice (``Parser``).
STOPPED = [
    (name, f"{flag} {n}", [f"argument {flag}: give an int >= {least}{WHY[least]}, got '{n}'"])
    for name, flag, least in (("gpu_compile", "--runs", 1), ("gpu_compile", "--rounds", 1),
                              ("anytime_gap", "--runs", 2))
    for n in (str(least - 1), "-3", "2.5")
] + [
    ("anytime_gap", "--configs expert_advice_equal expert_advice_equal", ["--configs", TWICE]),
    ("anytime_gap", "--feedback loss reward loss", ["--feedback gives loss twice", TWICE]),
    ("anytime_gap", "--extra exp3 exp3", ["--extra gives exp3 twice", TWICE]),
    ("curves", "results out --folders a a", ["--folders gives a twice", TWICE]),
    ("paired", "folder --learners stabl stabl", ["--learners gives stabl twice", TWICE]),
    ("paired", "folder --diff stabl,exp3 stabl,exp3", ["--diff gives stabl,exp3 twice", TWICE]),
    ("paired", "folder --gap a,b a,b", ["--gap gives a,b twice", TWICE]),
    ("study", "--fit-windows 64 64", ["--fit-windows gives 64 twice", TWICE]),
    ("study", "--bootstrap 20 --bootstrap 30", [f"{GIVEN} (20 and 30)", REPLACED]),
    ("study", "--fit-windows 32 64 --fit-windows 8", ["(32 64 and 8)", REPLACED]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "argv", "words"), STOPPED, ids=[c[1] for c in STOPPED])
def test_a_bad_count_or_a_value_or_an_option_given_twice_stops_the_script_at_once(
    name: str, argv: str, words: list[str], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    module = load_script(ROOT / "experiments" / f"{name}.py", f"_stopped_{name}")
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv.split()])
    with pytest.raises(SystemExit) as stop:
        module.main()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and all(word in err for word in words), err


def test_the_parser_refuses_an_option_twice_in_one_parse_only() -> None:
    """Each parse starts afresh; ``append`` options and flags may repeat."""
    parser = Parser(prog="p", exit_on_error=False)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--force", action="store_true")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run").add_argument("--out")
    assert parser.parse_args(["--runs", "1"]).runs == 1
    assert parser.parse_args(["--runs", "2"]).runs == 2
    args = parser.parse_args(["--set", "a=1", "--set", "b=2", "--force", "--force"])
    assert args.set == ["a=1", "b=2"] and args.force and args.runs is None
    assert parser.parse_args(["run", "--out", "x"]).out == "x"
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--out", "x", "--out", "y"])


def test_distinct_keeps_the_values_in_their_order() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arms", type=int, nargs="+", action=Distinct, default=[3])
    assert parser.parse_args(["--arms", "10", "3"]).arms == [10, 3]
    assert parser.parse_args([]).arms == [3]
