"""The documentation stays true to the code: its Python blocks run (in order, in one
namespace; a sketch marked ``<!-- not run: REASON -->`` only parses and calls stabl_jax's
public names with keywords they accept), links resolve, and every config key, option, params
field, registered name and command-line flag the code accepts is documented.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import io
import re
from pathlib import Path

import pytest

import stabl_jax
from stabl_jax import registry
from stabl_jax.experiment import cli
from stabl_jax.experiment.kinds.bandit import SAVABLE_TRACES
from stabl_jax.experiment.kinds.paired import TOP_LEVEL_KEYS
from stabl_jax.experiment.kinds.selection import BBOB_KEYS, HPO_TOP_LEVEL_KEYS
from tests.conftest import run_small_figure1

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", ROOT / "EXPERIMENTS.md", *sorted(DOCS.glob("*.md"))]
README = PAGES[0].read_text(encoding="utf-8")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")

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
    """Run ``page``'s blocks but its sketches, in order, in one namespace; returns what each
    printed."""
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


def _unfenced(path: Path) -> str:
    """The page without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def _documented(page: str) -> set[str]:
    """Every name written as inline code (outside code blocks, unquoted) on ``docs/<page>``."""
    return {name.strip('"') for name in re.findall(r"`([^`\n]+)`", _unfenced(DOCS / page))}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve_to_files(page: Path) -> None:
    prose = re.sub(r"`[^`\n]*`", "", _unfenced(page))  # inline code's brackets are no links
    targets = [t for t in LINK.findall(prose) if not re.match(r"[a-z]+:", t)]
    if page.name == "README.md":
        assert len(targets) >= 8, "README links to the docs pages"
    for target in targets:
        assert "#" not in target, f"{page.name}: link {target!r} has an anchor; name the section"
        assert (page.parent / target).exists(), f"{page.name}: link {target!r} resolves to nothing"


CODE_PAGES = [p for p in PAGES if p.name != "EXPERIMENTS.md" and python_blocks(p)]


@pytest.fixture(scope="module")
def results_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding ``results/figure1-seed0``, a tiny run of the main job."""
    where = tmp_path_factory.mktemp("docs")
    run_small_figure1(where / RESULTS)
    return where


@pytest.mark.parametrize(
    "page",
    [  # README's: test_readme_usage_block_runs; usage.md's blocks run the longest programs
        pytest.param(p, marks=pytest.mark.optimized) if p.name == "usage.md" else p
        for p in CODE_PAGES
        if p.name != "README.md"
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_the_python_blocks_run(
    page: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page's blocks run, in a folder holding a results folder where the page reads one
    (results.md's ``res.to_csv("table.csv")`` writes that folder's results.csv)."""
    reads_results = str(RESULTS) in page.read_text(encoding="utf-8")
    monkeypatch.chdir(request.getfixturevalue("results_folder" if reads_results else "tmp_path"))
    run_blocks(page)
    if page.name == "results.md":
        assert Path("table.csv").read_text() == (RESULTS / "results.csv").read_text()


def test_every_python_block_calls_with_accepted_keywords() -> None:
    """Sketches too: a call of a public name with an argument it lost fails here."""
    for page in PAGES:  # a marker not right above a block would mark nothing
        marked = [b for b in python_blocks(page) if b.why]
        assert page.read_text(encoding="utf-8").count("<!-- not run:") == len(marked), page
    blocks = [b for page in CODE_PAGES for b in python_blocks(page)]
    assert [bad for b in blocks for bad in bad_keywords(b)] == []


def test_readme_setup_is_the_two_commands() -> None:
    venv = "python3.11 -m venv .venv && .venv/bin/pip install "
    assert venv + ". && .venv/bin/stabl-jax run" in README
    assert venv + "'.[test]' && .venv/bin/python -m pytest" in README


def test_every_config_key_option_and_params_field_is_documented() -> None:
    """Every config key, and the ``[env]`` keys, ``[learner_options]`` options and ``[params]``
    fields of every registered environment and learner appear in docs/configs.md."""
    names = {*TOP_LEVEL_KEYS, *HPO_TOP_LEVEL_KEYS, *BBOB_KEYS, *SAVABLE_TRACES}
    sizes = {"bandit": {"num_arms": 30}, "bco": {"dim": 2}}
    for kind, learners, envs in (
        ("bandit", registry.LEARNERS, registry.ENVS),
        ("bco", registry.BCO_LEARNERS, registry.CONVEX_ENVS),
    ):
        for table in (learners, envs):
            for name in table:
                names |= set(table.entry(name).hints)
        for name in learners:
            params = learners.make(name, horizon=4096, **sizes[kind]).default_params
            if dataclasses.is_dataclass(params):
                names |= {field.name for field in dataclasses.fields(params)}
    missing = sorted(names - _documented("configs.md"))
    assert not missing, f"keys, options or params fields missing from docs/configs.md: {missing}"


def test_every_registered_name_is_documented() -> None:
    tables = (registry.LEARNERS, registry.BCO_LEARNERS, registry.ENVS, registry.CONVEX_ENVS)
    names = {name for table in tables for name in table}
    missing = sorted(names - _documented("algorithms.md"))
    assert not missing, f"registered names missing from docs/algorithms.md: {missing}"


def test_every_command_line_flag_is_documented() -> None:
    flags: set[str] = set()
    for argv in (["--help"], ["run", "--help"], ["list", "--help"], ["bench", "--help"]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(argv) == 0
        flags |= set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", out.getvalue()))
    assert "--compile-cache" in flags and "--allow-large" in flags
    text = (DOCS / "usage.md").read_text(encoding="utf-8")
    missing = sorted(flag for flag in flags if flag not in text)
    assert not missing, f"flags missing from docs/usage.md: {missing}"


def _design_files_tree() -> dict[str, set[str]]:
    """The files docs/design.md's "Files" block names, per top folder (``stabl_jax`` modules
    with their subfolder: a line indented by two spaces names one, or the top level)."""
    text = (ROOT / "docs" / "design.md").read_text()
    block = text[text.index("## Files") :].split("```")[1]
    named: dict[str, set[str]] = {}
    top = sub = ""
    for line in block.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            top, rest = line.split("/", 1)
            sub, line = "", rest
        elif top == "stabl_jax" and re.match(r"  \S", line):
            folder = re.match(r"  ([\w/]+)/\s", line)
            sub = f"{folder[1]}/" if folder else ""
            line = line[folder.end() :] if folder else line
        for name in re.findall(r"\b[\w.]+\.(?:py|sh|md)\b", line):
            named.setdefault(top, set()).add(sub + name)
    return named


def test_the_design_pages_file_tree_is_the_repository():
    """Every module of the package, experiment script, example and docs page is in
    docs/design.md's file tree, and every file the tree names exists."""
    named = _design_files_tree()
    package = {
        str(p.relative_to(ROOT / "stabl_jax"))
        for p in (ROOT / "stabl_jax").rglob("*.py")
        if p.name != "__init__.py"
    }
    assert named["stabl_jax"] == package
    for folder in ("experiments", "examples", "docs"):
        on_disk = {p.name for p in (ROOT / folder).iterdir() if p.suffix in (".py", ".sh", ".md")}
        assert named[folder] == on_disk, folder


def test_readme_is_short_and_has_a_row_per_claim() -> None:
    """At most 200 lines; its results table has a row for each claim of the paper and each
    study the paper lacks, each with a verdict and a link to EXPERIMENTS.md."""
    assert len(README.splitlines()) <= 200
    section = README[README.index("## Results at a glance") :].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    claims = "\n".join(row.split(" | ")[0] for row in rows[1:])
    for claim in ("Figure 1 left", "Figure 1 right", "N = 300", "BBOB", "Table 1", "BCO", "code"):
        assert claim in claims, claim
    verdicts = ("reproduced", "reversed", "new evidence")
    for row in rows[1:]:
        assert any(v in row.split(" | ")[2] for v in verdicts), row
        assert row.endswith("(EXPERIMENTS.md) |"), row


def test_readme_algorithm_table_names_registered_learners() -> None:
    section = README.split("## Algorithms", 1)[1].split("\n## ", 1)[0]
    names = {
        name
        for line in section.splitlines()
        if line.startswith("| ") and "---" not in line
        for name in re.findall(r"`([a-z0-9_]+)`", line.rsplit(" | ", 1)[-1])
    }
    names |= {f"stabl_vizier{suffix}" for suffix in ("_naive", "_single_scale")}
    names -= {"_naive", "_single_scale"}
    assert len(names) > 20
    registered = {*registry.LEARNERS, *registry.BCO_LEARNERS}
    assert names <= registered, sorted(names - registered)


def test_license_and_citation() -> None:
    """LICENSE is the Apache License 2.0 (pyproject's license); CITATION.cff is CFF 1.2.0 and
    cites the paper with the authors its source names."""
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert license_text.lstrip().startswith("Apache License") and "Version 2.0" in license_text
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    cff = (ROOT / "CITATION.cff").read_text(encoding="utf-8")
    assert cff.startswith("cff-version: 1.2.0\n") and "\nlicense: Apache-2.0\n" in cff
    for key in ("message:", "title:", "authors:", "preferred-citation:"):
        assert re.search(rf"^{key}", cff, re.M), key
    families = re.findall(r"family-names: (\w+)", cff)
    assert families == ["Lu", "Zhang", "Chen", "Zhang", "Woodruff", "Hazan"]
    for family in families:
        assert f"{family}," in README, f"the README's BibTeX names {family}"


@pytest.mark.optimized
def test_readme_usage_block_runs(tmp_path, monkeypatch):
    """The README's one Python block runs as written and prints SA(L), which is at most L
    (losses in [0, 1]) and grows with L up to the segment length."""
    assert [b.why for b in python_blocks(PAGES[0])] == [""], "README's one usage block, run"
    monkeypatch.chdir(tmp_path)
    (printed,) = run_blocks(PAGES[0])
    lines = printed.strip().splitlines()
    labels = [line.split("=")[0].strip() for line in lines]
    assert labels == ["SA(  64)", "SA( 256)", "SA(1024)", "SA(4096)"]
    values = [float(line.split("=")[1].split("±")[0]) for line in lines]
    assert all(0 < v <= L for v, L in zip(values, [64, 256, 1024, 4096], strict=True))
    assert values[0] < values[1] < values[2]
