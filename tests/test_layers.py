"""Imports point down only (docs/design.md, "Layers"): a module never imports a higher layer,
learners and environments never import each other, no private name crosses a module, and no
module outside ``stabl_jax/kinds/`` switches on an experiment kind."""

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
    **dict.fromkeys(["simulate", "sharding", "streaming", "metrics", "kernels"], 3),
    "registry": 4,
    **dict.fromkeys(["io", "provenance", "hpo_metrics", "bench"], 5),
    "kinds": 6,
    **dict.fromkeys(["cli", "__main__", "compile_cache"], 7),
    "__init__": 8,
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
    """The check below can fail: it finds the switches the kinds table replaced."""
    switches = 'if config.kind == "hpo": pass\nx = summary.get("kind") != "hpo"\n'
    switches += 'y = kind in ("bandit", "bco")\nz = raw["kind"] == "bco"\n'
    assert len(kind_switches(switches)) == 4
    assert not kind_switches('w = entry.kind\nv = kind in KINDS\nu = device_kind == "cpu"\n')


@pytest.mark.parametrize(
    "path",
    [p for p in MODULES if _unit(p) != "kinds"],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_no_kind_switch_outside_kinds(path):
    """Only ``stabl_jax/kinds/`` knows the experiment kinds; the rest looks a kind up in
    ``stabl_jax.kinds.KINDS`` (docs/design.md, "Adding things")."""
    assert not kind_switches(path.read_text(encoding="utf-8"))


def test_every_subpackage_is_installed():
    """``pyproject.toml`` lists the packages a non-editable install ships (the configs need an
    explicit list); a subpackage missing there imports here but not after ``pip install .``."""
    import tomllib

    listed = set(
        tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["tool"]["setuptools"][
            "packages"
        ]
    )
    found = {
        ".".join(path.parent.relative_to(PACKAGE.parent).parts)
        for path in PACKAGE.rglob("__init__.py")
    }
    assert found - listed == set(), (
        f"add to pyproject.toml [tool.setuptools] packages: {found - listed}"
    )
