"""The README's Python blocks run as written (1,000 vmapped runs of StABL) and print SA(L)."""

from __future__ import annotations

from pathlib import Path

from tests.doc_blocks import python_blocks, run_blocks

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_usage_block_runs(tmp_path, monkeypatch):
    assert [b.why for b in python_blocks(README)] == [""], "README's one usage block, run"
    monkeypatch.chdir(tmp_path)
    (printed,) = run_blocks(README)
    lines = printed.strip().splitlines()
    assert [line.split("=")[0].strip() for line in lines] == [
        "SA(  64)",
        "SA( 256)",
        "SA(1024)",
        "SA(4096)",
    ]
    values = [float(line.split("=")[1].split("±")[0]) for line in lines]
    # SA(L) is at most L (losses in [0, 1]) and grows with L up to the segment length.
    assert all(0 < v <= L for v, L in zip(values, [64, 256, 1024, 4096], strict=True))
    assert values[0] < values[1] < values[2]
