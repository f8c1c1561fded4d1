"""Imports point down only (docs/design.md, "Layers"): a module never imports a higher layer,
learners and environments never import each other, no private name crosses a module, and no
module outside ``stabl_jax/experiment/kinds/`` switches on an experiment kind."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "stabl_jax"

#: Layer of each module or subpackage of stabl_jax (docs/design.md): the library is layers 1-5,
#: the experiment tooling (``stabl_jax.experiment``) layers 6-8.
LAYERS: dict[str, int] = {
    **dict.fromkeys(
        "estimators sampling intervals prng threefry numerics domains gradients checks".split(), 1
    ),
    "versions": 1,
    **dict.fromkeys(["learners", "bco", "envs"], 2),
    "bco.simulate": 3,  # a module of a layer-2 package that drives the rollout
    **dict.fromkeys(["simulate", "sharding", "streaming", "metrics", "summaries", "kernels"], 3),
    "registry": 4,
    "hpo_metrics": 5,
    **{
        f"experiment.{name}": 6
        for name in "arguments configs files results checkpoints identity outputs plots tables"
        " compare provenance bench numpy_baselines".split()
    },
    "experiment.kinds": 7,
    **dict.fromkeys(["experiment.cli", "experiment.compile_cache", "experiment", "__main__"], 8),
    "experiment.sweep": 8,  # a command of the command line: it reads configs through kinds
    "__init__": 9,
}
#: Sibling packages of one layer that must not import each other.
APART = {("learners", "envs"), ("envs", "learners"), ("bco", "envs"), ("envs", "bco")}
#: The units of the library: what ``import stabl_jax`` loads.
LIBRARY = {unit for unit, layer in LAYERS.items() if layer <= 5}


def _unit(path: Path) -> str:
    """``"simulate"``, ``"learners"``, ``"bco.simulate"`` where a module of a subpackage has a
    layer of its own, ``"experiment.results"`` or ``"experiment.kinds"``: the unit the module
    of ``path`` is, found as an import of it would be."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return _target_unit(".".join(parts[:-1] if parts[-1] == "__init__" else parts), None)


def _package(unit: str) -> str:
    """The package whose modules may share private names: ``experiment`` for its modules,
    ``experiment.kinds``, ``bco`` for ``bco.simulate``, else the unit itself."""
    return unit if unit == "experiment.kinds" else unit.split(".")[0]


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """``(module, imported names, line)`` of every stabl_jax import in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
    return [f for f in found if f[0] == "stabl_jax" or f[0].startswith("stabl_jax.")]


def _target_unit(module: str, name: str | None) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "experiment":
        if len(parts) > 2:
            return f"experiment.{parts[2]}"
        own = f"experiment.{name}"
        return own if own in LAYERS else "experiment"
    if len(parts) > 2 and ".".join(parts[1:3]) in LAYERS:
        return ".".join(parts[1:3])
    if len(parts) > 1:
        return parts[1]
    return name or "__init__"  # from stabl_jax import X: X is a submodule


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_and_only_kinds_switch_on_a_kind(path):
    """Imports point down; only ``stabl_jax/experiment/kinds/`` compares a kind with a name (the
    rest looks it up in ``KINDS``); the library (what ``import stabl_jax`` gives) never imports
    :mod:`stabl_jax.experiment` (only ``__init__``'s lazy ``load_results`` and ``__main__``)."""
    unit = _unit(path)
    assert unit in LAYERS, f"{unit} has no layer in tests/test_layers.py (docs/design.md)"
    problems = []
    for module, names, line in _imports(path):
        submodules = module in ("stabl_jax", "stabl_jax.experiment")
        targets = {_target_unit(module, n) for n in names} if submodules else set()
        targets = targets or {_target_unit(module, None)}
        for target in targets:
            if target == unit:
                continue
            if target not in LAYERS:  # a name of the top-level package, e.g. __version__
                target = "__init__"
            if LAYERS[target] > LAYERS[unit]:
                problems.append(
                    f"line {line}: {unit} (layer {LAYERS[unit]}) imports {module} "
                    f"({target}, layer {LAYERS[target]})"
                )
            if (unit, target) in APART:
                problems.append(f"line {line}: {unit} imports {target}")
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        same_package = {_package(unit)} == {_package(t) for t in targets}
        if private and not same_package:  # a package's private helpers serve its own modules
            problems.append(f"line {line}: private names {private} imported from {module}")
        tooling = module.startswith("stabl_jax.experiment") or (
            module == "stabl_jax" and "experiment" in names
        )
        if unit in LIBRARY and tooling:
            problems.append(f"line {line}: the library imports the tooling: {module}")
    assert not problems, "\n".join(problems)
    if unit != "experiment.kinds":
        assert not kind_switches(path.read_text(encoding="utf-8"))


def _names_kind(node: ast.AST) -> bool:
    """``kind``, ``x.kind``, ``x["kind"]`` or ``x.get("kind", ...)``."""
    if isinstance(node, ast.Name):
        return node.id == "kind"
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "kind"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        first = node.args[0]
        return node.func.attr == "get" and isinstance(first, ast.Constant) and first.value == "kind"
    return False


def _is_text(node: ast.AST) -> bool:
    """A string constant, or a tuple, list or set of them."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return bool(node.elts) and all(_is_text(e) for e in node.elts)
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def kind_switches(source: str) -> list[str]:
    """Every comparison of an experiment kind with a literal name in ``source``
    (``config.kind == "bco"``, ``kind in ("bandit", "bco")``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(map(_names_kind, operands)) and any(map(_is_text, operands)):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_kind_switch_is_found():
    """The check above can fail: it finds the switches the kinds table replaced."""
    switches = 'if config.kind == "hpo": pass\nx = summary.get("kind") != "hpo"\n'
    switches += 'y = kind in ("bandit", "bco")\nz = raw["kind"] == "bco"\n'
    assert len(kind_switches(switches)) == 4
    assert not kind_switches('w = entry.kind\nv = kind in KINDS\nu = device_kind == "cpu"\n')


def test_every_subpackage_is_installed():
    """A subpackage missing from ``pyproject.toml``'s list imports here, not after install."""
    import tomllib

    pyproject = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    packages = [p.parent.relative_to(PACKAGE.parent) for p in PACKAGE.rglob("__init__.py")]
    missing = {".".join(p.parts) for p in packages} - listed
    assert missing == set(), f"add to pyproject.toml [tool.setuptools] packages: {missing}"


def test_import_loads_the_library_only():
    """``import stabl_jax`` in a fresh process leaves every tooling module, the TOML reader and
    matplotlib unloaded; ``load_results`` loads the tables on use. The check can fail: it sees a
    tooling module once something loads it (the second line)."""
    code = (
        "import sys, stabl_jax\n"
        "bad = lambda: sorted(m for m in sys.modules if m.startswith('stabl_jax.experiment')"
        " or m.split('.')[0] in ('tomllib', 'matplotlib', 'tqdm.notebook'))\n"
        "print(bad())\n"
        "assert stabl_jax.load_results.__module__ == 'stabl_jax.experiment.tables'\n"
        "import stabl_jax.experiment\n"
        "print('stabl_jax.experiment.configs' in bad())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    command = [sys.executable, "-c", code]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    assert out.stdout.splitlines() == ["[]", "True"], out.stdout
