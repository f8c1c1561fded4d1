"""What a rerun may resume: an experiment's identity (its config, versions, platform and code)
and the checkpoints of its learners, one :class:`~.checkpoints.ChunkCheckpoint` each.

``experiment.json`` holds the identity; every learner's state carries its digest, so the
checkpoints are recognised even where that file is lost. A checkpoint resumes only under the
same identity: anything else is refused, naming what changed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jax

from stabl_jax.experiment import files
from stabl_jax.experiment.checkpoints import (
    FORMAT,
    STATE,
    CheckpointDamaged,
    CheckpointMismatch,
    ChunkCheckpoint,
    describe_mismatch,
)
from stabl_jax.experiment.files import atomic_write, read_json
from stabl_jax.versions import package_versions

#: The file of an experiment's checkpoint folder holding its :func:`experiment_identity`.
IDENTITY = "experiment.json"


def experiment_identity(config: Any) -> dict[str, Any]:
    """What must match to resume an experiment: its config, versions, platform, x64 setting,
    and the code that computes it (:func:`code_fingerprint`).

    ``source``, ``overrides``, ``chunk_size``, ``save_traces`` and ``reference`` are left
    out: they change no simulated number.
    """
    resolved = config.to_dict()
    for key in ("source", "overrides", "chunk_size", "save_traces", "reference"):
        resolved.pop(key, None)
    identity = {
        "format": FORMAT,
        "config": resolved,
        "code": code_fingerprint(resolved),
        "versions": package_versions(),
        "platform": jax.devices()[0].platform,
        "x64": bool(jax.config.jax_enable_x64),  # type: ignore[attr-defined]
    }
    return json.loads(json.dumps(identity, sort_keys=True))


def code_fingerprint(config: Mapping[str, Any]) -> dict[str, str]:
    """``{file: SHA-256}`` of the code a run of ``config`` executes: every ``.py`` file of
    stabl_jax (keyed by its path in the package) and the file of every module that ``config``
    names by import path (``"module:Class"``, keyed by module name).

    A checkpoint resumes only under the same fingerprint: an edit between a crash and a rerun
    would otherwise mix numbers of two versions of the code.
    """
    package = Path(__file__).resolve().parents[1]
    found = {
        str(path.relative_to(package.parent)): files.sha256_file(path)
        for path in sorted(package.rglob("*.py"))
    }
    for name in sorted(set(_import_paths(config))):
        module = sys.modules.get(name)
        source = getattr(module, "__file__", None)
        if source is not None and not Path(source).resolve().is_relative_to(package):
            found[name] = files.sha256_file(source)
    return found


def _import_paths(value: Any) -> Iterator[str]:
    """The module names of the ``"module:qualname"`` strings anywhere in ``value``."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _import_paths(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _import_paths(item)
    elif isinstance(value, str) and re.fullmatch(r"[\w.]+:[\w.]+", value):
        yield value.partition(":")[0]


def describe_change(found: Mapping[str, Any], expected: Mapping[str, Any]) -> str:
    """What differs between two experiment identities: the first differing config key, version
    or setting, else the files of :func:`code_fingerprint` that changed."""
    rest = {k: v for k, v in found.items() if k != "code"}
    if rest != {k: v for k, v in expected.items() if k != "code"}:
        return describe_mismatch(rest, {k: v for k, v in expected.items() if k != "code"})
    old, new = found.get("code") or {}, expected.get("code") or {}
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
    return f"the code changed since they were written ({', '.join(changed[:3])}{more})"


def _identity_digest(identity: Mapping[str, Any]) -> str:
    text = json.dumps(json.loads(json.dumps(dict(identity), sort_keys=True)), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def learner_folders(folder: str | Path) -> list[Path]:
    """The per-learner checkpoint folders of an experiment checkpoint folder."""
    folder = Path(folder)
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


def fingerprints_match(folder: str | Path, identity: Mapping[str, Any]) -> bool | None:
    """Whether the learners' checkpoints under ``folder`` were written for ``identity``.

    ``True`` when one matches and none differs or is unreadable, ``False`` when one differs,
    ``None`` when no learner has a stored state.
    """
    digest, seen = _identity_digest(identity), False
    for sub in learner_folders(folder):
        if not (sub / STATE).is_file():
            continue
        try:
            found = ChunkCheckpoint(sub, {"experiment": digest, "learner": sub.name}).progress()
        except CheckpointMismatch:
            return False
        seen = seen or found > 0
    return True if seen else None


def matches(folder: str | Path, identity: Mapping[str, Any] | None) -> tuple[bool, bool]:
    """``(same, rewrite)``: whether the checkpoints under ``folder`` are those of ``identity``
    (``None``: no experiment, never the same), and whether only by the learners' fingerprints
    (:data:`IDENTITY` missing or damaged: to be written again)."""
    found = read_json(Path(folder) / IDENTITY)
    if identity is None or found == identity:
        return identity is not None, False
    same = bool(fingerprints_match(folder, identity))
    return same, same


def describe_other(
    folder: str | Path, identity: Mapping[str, Any] | None
) -> tuple[str, str] | None:
    """What the checkpoints of another run under ``folder`` are, and how to resume them;
    ``None`` where there are none (no :data:`IDENTITY`, no learner's folder)."""
    found = read_json(Path(folder) / IDENTITY)
    if found is None and not learner_folders(folder):
        return None
    if found is None or identity is None:
        what = "checkpoints it cannot identify (experiment.json lost, fingerprints of another run)"
        return what, "move the folder away to keep them"
    change = describe_change(found, identity)
    if change.startswith("the code changed"):
        return f"checkpoints of this experiment computed by other code ({change})", (
            "resuming them would mix the numbers of two versions of the code"
        )
    if {k: v for k, v in found.items() if k != "versions"} == {
        k: v for k, v in identity.items() if k != "versions"
    }:
        return f"checkpoints of this experiment under other versions ({change})", (
            f"install the versions it ran with ({IDENTITY} lists them) to resume it"
        )
    return f"checkpoints of a different experiment ({change})", (
        "rerun the command that made them to finish it"
    )


def verify_learners(
    folder: str | Path,
    identity: Mapping[str, Any],
    *,
    discard_damaged: bool = False,
    log: Callable[[str], None] = lambda _: None,
    dry_run: bool = False,
) -> dict[str, int]:
    """Check every learner's checkpoint under ``folder`` against its digests, writing nothing.

    Args:
      folder: an experiment's checkpoint folder (one subfolder per learner).
      identity: the experiment's :func:`experiment_identity`.
      discard_damaged: delete (and ``log``) a checkpoint that cannot be resumed instead of
        raising; that learner is recomputed.
      log: receives one line per discarded checkpoint.
      dry_run: delete nothing; ``log`` says what would be discarded.

    Returns:
      ``{learner: rounds done}`` for every learner with a stored state.

    Raises:
      CheckpointMismatch: a checkpoint cannot be resumed and ``discard_damaged`` is false.
    """
    digest = _identity_digest(identity)
    done = {}
    for sub in learner_folders(folder):
        try:
            rounds = ChunkCheckpoint(sub, {"experiment": digest, "learner": sub.name}).verify()
        except CheckpointMismatch as exc:
            problem = str(exc)
            if isinstance(exc, CheckpointDamaged):
                problem = f"checkpoint file {exc.path} is damaged ({exc.reason})"
            if not discard_damaged:
                raise CheckpointMismatch(
                    f"{problem}; rerun with --force to discard the checkpoint of {sub.name!r} "
                    "(its rounds are recomputed; the other learners' checkpoints are kept)"
                ) from None
            if dry_run:
                log(f"the checkpoint of {sub.name} would be discarded ({problem}) and recomputed")
                continue
            shutil.rmtree(sub)
            log(f"discarded the checkpoint of {sub.name} ({problem}): it is recomputed")
            continue
        if rounds:
            done[sub.name] = rounds
    return done


class ExperimentCheckpoints:
    """Checkpoints of every learner of one experiment, under ``folder``.

    Args:
      folder: the experiment's checkpoint folder (one subfolder per learner).
      identity: the experiment's :func:`experiment_identity`.
      rewrite: write :data:`IDENTITY` again (it was lost or damaged, and :func:`matches` found
        the learners' fingerprints of ``identity``).

    Raises:
      CheckpointMismatch: ``folder`` holds another experiment's checkpoints.
    """

    def __init__(
        self, folder: str | Path, identity: Mapping[str, Any], *, rewrite: bool = False
    ) -> None:
        self.folder = Path(folder)
        if rewrite:
            (self.folder / IDENTITY).unlink(missing_ok=True)
        self.identity = json.loads(json.dumps(dict(identity), sort_keys=True))
        found = read_json(self.folder / IDENTITY)
        if found is not None and found != self.identity:
            raise CheckpointMismatch(
                f"{self.folder} holds checkpoints of a different run; "
                f"{describe_mismatch(found, self.identity)}"
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        if found is None:
            text = json.dumps(self.identity, indent=2, sort_keys=True) + "\n"
            atomic_write(self.folder / IDENTITY, lambda f: f.write(text.encode("utf-8")))
        self._digest = _identity_digest(self.identity)

    def for_learner(self, name: str) -> ChunkCheckpoint:
        """The checkpoint of learner ``name``."""
        return ChunkCheckpoint(self.folder / name, {"experiment": self._digest, "learner": name})

    def verify(
        self, *, discard_damaged: bool = False, log: Callable[[str], None] = lambda _: None
    ) -> dict[str, int]:
        """:func:`verify_learners` of this experiment's folder: ``{learner: rounds done}``."""
        return verify_learners(self.folder, self.identity, discard_damaged=discard_damaged, log=log)
