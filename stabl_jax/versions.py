"""The version of stabl_jax, the oldest supported releases of its dependencies, and those of
the packages that compute its results.

Importing stabl_jax checks JAX, chex and optax against :data:`MINIMUM_VERSIONS`.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from collections.abc import Mapping

import jax
import numpy as np

__version__ = "0.2.0"

#: The oldest supported release of each runtime dependency: the lower bounds of
#: ``pyproject.toml`` (``tests/test_versions.py`` compares the two).
MINIMUM_VERSIONS: dict[str, str] = {
    "jax": "0.8.0",
    "jaxlib": "0.8.0",
    "optax": "0.2.4",
    "chex": "0.1.90",
    "numpy": "2.0",
    "matplotlib": "3.8.4",
    "tqdm": "4.66",
    "scipy": "1.13",
}
#: Checked when stabl_jax is imported, from the installed packages' metadata.
CHECKED_AT_IMPORT: tuple[str, ...] = ("jax", "chex", "optax")


def release(version: str) -> tuple[int, ...]:
    """The leading numbers of ``version``: ``"0.10.2"`` -> ``(0, 10, 2)``, ``"0.8.1.dev2025"``
    -> ``(0, 8, 1)`` (compared as numbers, so 0.10 is newer than 0.8)."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    if match is None:
        raise ValueError(f"not a version number: {version!r}")
    return tuple(int(part) for part in match.group().split("."))


def check_versions(found: Mapping[str, str] | None = None) -> None:
    """Raise ``ImportError`` naming every package of :data:`CHECKED_AT_IMPORT` older than its
    :data:`MINIMUM_VERSIONS` entry, with the ``pip`` command that upgrades them.

    Args:
      found: package name -> installed version; default those installed (a package without
        metadata is not checked).
    """
    if found is None:
        found = {n: v for n in CHECKED_AT_IMPORT if (v := installed_version(n)) is not None}
    old = {
        name: version
        for name, version in found.items()
        if release(version) < release(MINIMUM_VERSIONS[name])
    }
    if old:
        needed = ", ".join(f"{n} >= {MINIMUM_VERSIONS[n]} (found {v})" for n, v in old.items())
        upgrade = [*old, "jaxlib"] if "jax" in old else list(old)
        pins = " ".join(f"'{n}>={MINIMUM_VERSIONS[n]}'" for n in upgrade)
        raise ImportError(f"stabl_jax needs {needed}: pip install -U {pins}")


def installed_version(package: str) -> str | None:
    """The installed version of ``package``, or ``None`` when it is not installed."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_versions() -> dict[str, str | None]:
    """The versions of stabl_jax, JAX, jaxlib, NumPy and optax (results depend on each:
    optax's transformations and projections step the convex learners)."""
    return {
        "stabl_jax": __version__,
        "jax": jax.__version__,
        "jaxlib": installed_version("jaxlib"),
        "numpy": np.__version__,
        "optax": installed_version("optax"),
    }


def describe() -> str:
    """stabl_jax's version and those its results depend on, as ``stabl-jax --version`` prints:
    ``"X.Y.Z (jax ..., jaxlib ..., numpy ..., optax ..., Python ...)"``."""
    found = package_versions()
    mine = found.pop("stabl_jax")
    parts = [f"{name} {version or '(no metadata)'}" for name, version in found.items()]
    return f"{mine} ({', '.join([*parts, f'Python {platform.python_version()}'])})"


check_versions()
