"""The README's usage block runs as written (1,000 vmapped runs of StABL) and prints SA(L)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_usage_block_runs():
    text = README.read_text()
    block = re.search(r"## Usage.*?```python\n(.*?)```", text, re.S)
    assert block, "README lost its usage block"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.group(1), str(README), "exec"), {})
    lines = out.getvalue().strip().splitlines()
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
