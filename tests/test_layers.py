"""Imports point down only (docs/design.md, "Layers"): a module never imports a higher layer,
learners and environments never import each other, and no private name crosses a module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "stabl_jax"

#: Layer of each top-level module or subpackage of stabl_jax (docs/design.md).
LAYERS: dict[str, int] = {
    **dict.fromkeys(
        ["estimators", "sampling", "intervals", "prng", "numerics", "domains", "gradients"], 1
    ),
    "checks": 1,
    "versions": 1,
    **dict.fromkeys(["learners", "bco", "envs"], 2),
    "bco.simulate": 3,  # a module of a layer-2 package that drives the rollout
    **dict.fromkeys(["simulate", "sharding", "streaming", "metrics", "reactive", "kernels"], 3),
    "registry": 4,
    **dict.fromkeys(
        [
            "config",
            "experiment",
            "hpo_experiment",
            "hpo_metrics",
            "results",
            "plots",
            "tables",
            "checkpoint",
            "provenance",
            "bench",
            "kinds",
            "io",
        ],
        5,
    ),
    **dict.fromkeys(["cli", "__main__", "compile_cache"], 6),
    "__init__": 7,
}
#: Sibling packages of one layer that must not import each other.
APART = {("learners", "envs"), ("envs", "learners"), ("bco", "envs"), ("envs", "bco")}


def _unit(path: Path) -> str:
    """``"simulate"``, ``"learners"``, or ``"bco.simulate"`` where a module of a subpackage has
    a layer of its own."""
    rel = path.relative_to(PACKAGE)
    if len(rel.parts) == 1:
        return rel.stem
    own = f"{rel.parts[0]}.{Path(rel.parts[-1]).stem}"
    return own if own in LAYERS else rel.parts[0]


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """``(module, imported names, line)`` of every stabl_jax import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "stabl_jax" or node.module.startswith("stabl_jax."):
                found.append((node.module, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("stabl_jax"):
                    found.append((alias.name, [], node.lineno))
    return found


def _target_unit(module: str, name: str | None) -> str:
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[1:3]) in LAYERS:
        return ".".join(parts[1:3])
    if len(parts) > 1:
        return parts[1]
    return name or "__init__"  # from stabl_jax import X: X is a submodule


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    unit = _unit(path)
    assert unit in LAYERS, f"{unit} has no layer in tests/test_layers.py (docs/design.md)"
    problems = []
    for module, names, line in _imports(path):
        targets = {_target_unit(module, n) for n in names} if module == "stabl_jax" else set()
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
        same_package = module.split(".")[1:2] == [unit.split(".")[0]]
        if private and not same_package:  # a package's private helpers serve its own modules
            problems.append(f"line {line}: private names {private} imported from {module}")
    assert not problems, "\n".join(problems)
