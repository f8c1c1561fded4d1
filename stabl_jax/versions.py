"""The version of stabl_jax (its one definition: ``pyproject.toml`` reads it from here) and
those of the packages that compute its results."""

from __future__ import annotations

import importlib.metadata

import jax
import numpy as np

__version__ = "0.1.0"


def installed_version(package: str) -> str | None:
    """The installed version of ``package``, or ``None`` when it is not installed."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_versions() -> dict[str, str | None]:
    """The versions of stabl_jax, JAX, jaxlib and NumPy (results depend on each)."""
    return {
        "stabl_jax": __version__,
        "jax": jax.__version__,
        "jaxlib": installed_version("jaxlib"),
        "numpy": np.__version__,
    }
