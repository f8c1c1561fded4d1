"""Which code made a number, and on which processor: git commit, dirtiness and the CPU."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path
from typing import Any

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
