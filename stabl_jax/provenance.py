"""Which code made a number: the git commit of the running stabl_jax, and whether its tree
had uncommitted changes, recorded in every results folder.

An installed copy (``pip install .``, a wheel) has no git history beside it; its version
number is then all there is, and the record says so (``commit: null``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent


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
    """``{"commit": sha or None, "dirty": bool or None, "source": folder}``.

    ``commit`` is ``git rev-parse HEAD`` of the checkout that holds the imported package (None
    outside a git checkout, e.g. an installed wheel); ``dirty`` is True when ``git status
    --porcelain`` lists a change to a tracked or untracked file under that checkout (None
    without git). A dirty tree's numbers cannot be traced to a commit.
    """
    top = _git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != PACKAGE_DIR.parent:
        return {"commit": None, "dirty": None, "source": str(PACKAGE_DIR)}
    status = _git("status", "--porcelain", "--untracked-files=normal")
    return {
        "commit": _git("rev-parse", "HEAD"),
        "dirty": None if status is None else bool(status),
        "source": str(PACKAGE_DIR),
    }
