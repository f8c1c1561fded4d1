"""What made a number: the git commit and dirtiness, versions, platform, device and CPU of a
run, and the fields of the learners and environments it ran."""

from __future__ import annotations

import dataclasses
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from stabl_jax.versions import package_versions

PACKAGE_DIR = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(PACKAGE_DIR.parent), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def code_version() -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None, "source": folder}``."""
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != PACKAGE_DIR.parent:
        return {"commit": None, "dirty": None, "source": str(PACKAGE_DIR)}
    status = _git("status", "--porcelain", "--untracked-files=normal")
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": None if status is None else bool(status),
        "source": str(PACKAGE_DIR),
    }


#: The x86 vector extensions XLA's CPU compiler may use, hence the last bits of float32 results.
VECTOR_EXTENSIONS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """``{"model": str, "vector_extensions": [str, ...]}`` of the host CPU."""
    try:
        lines = cpuinfo.read_text().splitlines()
    except OSError:
        lines = []
    first: dict[str, str] = {}  # each key's value on its first line: the first processor's
    for line in lines:
        key, _, value = line.partition(":")
        first.setdefault(key.strip(), value)
    flags = set(first.get("flags", "").split())
    return {
        "model": first.get("model name", "").strip() or platform.processor() or platform.machine(),
        "vector_extensions": [f for f in VECTOR_EXTENSIONS if f in flags],
    }


def environment_info() -> dict[str, Any]:
    """Versions, code commit and dirtiness, Python, platform, JAX device and CPU."""
    devices = jax.devices()
    return {
        "code": code_version(),
        "versions": {**package_versions(), "python": platform.python_version()},
        "python": sys.version,
        "platform": platform.platform(),
        "jax_config": {
            "x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]
            "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
            "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS"),
        },
        "device": {
            "platform": devices[0].platform,
            "kind": devices[0].device_kind,
            "count": len(devices),
        },
        "cpu": cpu(),
    }


def static_fields(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj):
        # Fields left out of repr (a learner's validate switch) are how it ran, not what it is.
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.repr}
    return {}


def params_dict(params: Any) -> dict[str, Any]:
    if not dataclasses.is_dataclass(params):
        return {}
    return {
        f.name: np.asarray(getattr(params, f.name)).tolist() for f in dataclasses.fields(params)
    }
