"""File IO of the tooling, knowing files, not experiments: atomic writes, JSON, and a manifest
of SHA-256s that turns any later change of a written file into one error naming the file."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import IO, Any

#: The file of a finished folder listing ``{name: {"bytes", "sha256"}}`` of every file in it.
MANIFEST = "manifest.json"


class DamagedFile(ValueError):
    """A file stabl_jax wrote (``path``) cannot be read, or differs from what was written."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(
            f"{self.path} is damaged ({reason}): rerun the command that wrote {self.path.parent} "
            "(summary.json's 'command') to write it again"
        )


def fsync_dir(folder: str | Path) -> None:
    """``fsync`` a folder so that renames inside it survive a crash (no-op where unsupported)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write ``path`` atomically: ``write(file)`` into a temporary sibling, ``fsync``, replace.
    Permission bits are kept; a symbolic link stays one (its target is replaced)."""
    path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` as UTF-8, atomically (a crash leaves the old file whole)."""
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def write_json(path: str | Path, value: Any, indent: int = 2, allow_nan: bool = True) -> None:
    """Write ``value`` as indented JSON to ``path``, atomically."""
    write_text(path, json.dumps(value, indent=indent, allow_nan=allow_nan) + "\n")


def read_json(path: str | Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or ``None`` when it is missing, not JSON or not an object."""
    try:
        found = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file's bytes."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_manifest(folder: Path, leave_out: Collection[str]) -> None:
    """Write :data:`MANIFEST` into ``folder``: size and SHA-256 of every file under it but those
    under its top-level names ``leave_out``, each ``fsync``-ed with its folder beforehand."""
    entries = {}
    for root, dirs, names in os.walk(folder):
        if Path(root) == folder:
            dirs[:] = [name for name in dirs if name not in leave_out]
            names = [name for name in names if name not in leave_out]
        for path in (Path(root) / name for name in names):
            with open(path, "rb") as f:
                os.fsync(f.fileno())
                sha256 = hashlib.file_digest(f, "sha256").hexdigest()
            entry = {"bytes": path.stat().st_size, "sha256": sha256}
            entries[str(path.relative_to(folder))] = entry
        fsync_dir(root)
    listed = dict(sorted(entries.items()))
    write_json(folder / MANIFEST, {"format": "stabl_jax.manifest/1", "files": listed})


def manifest(folder: str | Path) -> dict[str, Any] | None:
    """``{name: {"bytes", "sha256"}}`` of ``folder``'s :data:`MANIFEST`; ``None`` without one.

    Raises:
      DamagedFile: the manifest is there but unreadable.
    """
    path = Path(folder) / MANIFEST
    if not path.exists():
        return None
    listed = (read_json(path) or {}).get("files")
    if not isinstance(listed, dict) or not all(isinstance(v, dict) for v in listed.values()):
        raise DamagedFile(path, "not a manifest of stabl_jax")
    return listed


def verify(folder: str | Path, name: str) -> Path:
    """``folder / name``, checked against the folder's manifest (where it lists it).

    Raises:
      DamagedFile: the file is missing, or its size or SHA-256 differs from the manifest's.
    """
    entry = (manifest(folder) or {}).get(name)
    path = Path(folder) / name
    if entry is None:
        return path
    try:
        same = (path.stat().st_size, sha256_file(path)) == (entry.get("bytes"), entry.get("sha256"))
    except OSError as exc:
        raise DamagedFile(path, f"cannot be read: {exc.strerror}") from None
    if not same:
        reason = "its bytes differ from those written (SHA-256 in manifest.json)"
        raise DamagedFile(path, reason)
    return path
