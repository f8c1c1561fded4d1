"""``examples/tutorial.ipynb`` is a valid notebook whose code cells run, in order, in one
namespace, at small sizes (its ``SIZE`` dict replaced), without Jupyter, in ``examples/`` (where
Jupyter runs it) and without pandas (not a dependency)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "tutorial.ipynb"
SMALL = {"arms": 5, "horizon": 64, "runs": 16, "grid_runs": 4, "folder_runs": 4}


def _notebook() -> dict:
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["nbformat"] == 4 and isinstance(notebook["cells"], list)
    for cell in notebook["cells"]:
        assert cell["cell_type"] in ("markdown", "code") and isinstance(cell["source"], list)
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None  # stored clean
    return notebook


def test_the_tutorial_runs_top_to_bottom(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    monkeypatch.chdir(NOTEBOOK.parent)  # where Jupyter starts it
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError
    cells = _notebook()["cells"]
    text = "".join("".join(c["source"]) for c in cells)
    options = ("chunk_size", "progress", "runs_per_block", "host_threads", "kernel", "checkpoint")
    used = [option for option in options if f"{option}=" in text]
    assert not used, f"simulate with its model arguments only (a first reader's): {used}"
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert sources[0].startswith("SIZE = {")
    namespace: dict = {"__name__": "__tutorial__"}
    exec(compile(sources[0], "tutorial cell 0", "exec"), namespace)
    assert set(SMALL) | {"out"} == set(namespace["SIZE"])  # every size is replaced
    namespace["SIZE"] = {**SMALL, "out": str(tmp_path / "tutorial")}
    started = time.perf_counter()
    try:
        for index, source in enumerate(sources[1:], start=1):
            exec(compile(source, f"tutorial cell {index}", "exec"), namespace)
    finally:
        plt.close("all")
    assert time.perf_counter() - started < 120
    assert namespace["many"].loss.shape == (16, 64)
    assert namespace["per_point"].shape == (4, 4)
    assert (tmp_path / "tutorial" / "summary.json").is_file()
    table = namespace["table"]  # (segment, learner): mean
    assert {name for _, name in table} == {"exp3_uniform", "stabl"}


def test_the_tutorial_finds_stabl_jax_from_examples_installed_or_not():
    """Its setup cell puts the checkout on the path when stabl_jax is not installed, and leaves
    an installed stabl_jax alone."""
    setup = "".join(_notebook()["cells"][2]["source"])
    assert "find_spec" in setup
    code = f"{setup}\nimport stabl_jax\nprint(stabl_jax.__file__)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def python(source: str, cwd: Path) -> str:
        run = [sys.executable, "-c", source]
        done = subprocess.run(run, cwd=cwd, env=env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    where = "import importlib.util as u; s = u.find_spec('stabl_jax'); print(s and s.origin)"
    installed = python(where, Path("/"))
    checkout = str(NOTEBOOK.parent.parent / "stabl_jax" / "__init__.py")
    assert python(code, NOTEBOOK.parent) == (checkout if installed == "None" else installed)
