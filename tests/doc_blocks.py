"""The ```python blocks of the README and docs/*.md, and a runner for them.

A page's blocks run in order in one namespace, as a reader pastes them into one session. A
block that is only a sketch says so on the line before it, ``<!-- not run: REASON -->``, and
is not run; every block, sketch or not, must parse, and its calls of stabl_jax's public names
must use keywords those accept (a renamed argument fails even in a sketch).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import io
import re
from pathlib import Path

import stabl_jax

ROOT = Path(__file__).resolve().parent.parent
#: An optional ``<!-- not run: REASON -->`` line, then a fenced ```python block.
BLOCK = re.compile(
    r"^(?:<!-- not run: (?P<why>[^\n]*?) -->\n)?```python\n(?P<code>.*?)^```", re.S | re.M
)
#: The folder the pages read back (``load_results(...)``), relative to where they run.
RESULTS = Path("results") / "figure1-seed0"


@dataclasses.dataclass(frozen=True)
class Block:
    """One ```python block: where it is, its code, and why it is not run (``""``: it is)."""

    page: Path
    line: int
    code: str
    why: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def python_blocks(page: Path) -> list[Block]:
    """Every ```python block of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    return [
        Block(page, text.count("\n", 0, m.start("code")) + 1, m["code"], (m["why"] or "").strip())
        for m in BLOCK.finditer(text)
    ]


def bad_keywords(block: Block) -> list[str]:
    """Calls in ``block`` of a public stabl_jax name with arguments it does not accept."""
    tree = ast.parse(block.code, block.where)
    bad = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
            continue
        target = getattr(stabl_jax, call.func.id, None)
        if not callable(target) or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        keywords = {k.arg: None for k in call.keywords if k.arg is not None}
        try:
            inspect.signature(target).bind_partial(*call.args, **keywords)
        except TypeError as exc:
            bad.append(f"{block.where}: {call.func.id}(...): {exc}")
    return bad


def run_blocks(page: Path) -> list[str]:
    """Run ``page``'s blocks but its sketches, in order, in one namespace, in the current
    folder; returns what each block run printed."""
    namespace: dict = {"__name__": "__docs__"}
    printed = []
    for block in python_blocks(page):
        if block.why:
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block.code, block.where, "exec", dont_inherit=True), namespace)
        printed.append(out.getvalue())
    return printed
