"""The project's scripts (``experiments/``, ``examples/``) loaded as modules for the tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(path: Path, name: str | None = None, *, register: bool = False) -> ModuleType:
    """Execute the file at ``path`` as a module ``name`` (default: its stem); ``register=True``
    puts it in ``sys.modules`` first (for dataclasses resolving string annotations through it)."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
