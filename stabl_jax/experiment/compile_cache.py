"""JAX's persistent compilation cache for the command line.

A ``stabl-jax run`` compiles one program per learner (a few seconds each on a CPU); with the
cache on, a second run of the same config (or any run that builds the same programs) loads
them from disk instead. The library itself never turns the cache on: it is a process-wide JAX
setting, so only the command line, which owns its process, does.

Where the cache lives, first match wins:

1. ``stabl-jax --compile-cache DIR`` (``--compile-cache off`` disables it);
2. the environment variable ``STABL_JAX_COMPILE_CACHE`` (a folder, or ``off``);
3. ``$XDG_CACHE_HOME/stabl_jax/jax`` (``~/.cache/stabl_jax/jax`` when unset).
"""

from __future__ import annotations

import os
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
    """Point JAX's persistent compilation cache at ``folder`` (nothing when ``None``).

    Every program that took at least 0.5 s to compile is stored. A folder that cannot be
    created leaves the cache off (a warning on stderr), never failing the run.
    """
    if folder is None:
        return None
    import sys

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
