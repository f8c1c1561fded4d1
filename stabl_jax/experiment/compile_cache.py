"""JAX's persistent compilation cache for the command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENV_VAR = "STABL_JAX_COMPILE_CACHE"
OFF = frozenset({"off", "none", "0", "false", "no"})


def resolve(flag: str | None, environ: dict[str, str] | None = None) -> Path | None:
    """The cache folder chosen by ``flag`` and the environment, or ``None`` when disabled.

    Args:
      flag: the ``--compile-cache`` value, or ``None`` when not given.
      environ: the environment (default ``os.environ``).

    Raises:
      ValueError: an empty folder name.
    """
    environ = dict(os.environ if environ is None else environ)
    for source, value in (("--compile-cache", flag), (ENV_VAR, environ.get(ENV_VAR))):
        if value is None:
            continue
        if value.strip().lower() in OFF:
            return None
        if not value.strip():
            raise ValueError(f"{source} is empty: give a folder, or 'off' to disable the cache")
        return Path(value).expanduser()
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stabl_jax" / "jax"


def enable(folder: Path | None) -> Path | None:
    """Point JAX's persistent compilation cache at ``folder`` (nothing when ``None``)."""
    if folder is None:
        return None
    import jax

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"warning: compilation cache off: cannot create {folder}: {exc}", file=sys.stderr)
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
