"""What a rerun may resume: an experiment's identity (config, versions, platform, code) and
its learners' checkpoints, one :class:`~.checkpoints.ChunkCheckpoint` each.

``experiment.json`` holds the identity, and every learner's state its digest, so that the
checkpoints are recognised where that file is lost; anything else is refused, naming what changed.
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
from stabl_jax.experiment.files import read_json, write_text
from stabl_jax.versions import package_versions

#: The file of an experiment's checkpoint folder holding its :func:`experiment_identity`.
IDENTITY = "experiment.json"


def experiment_identity(config: Any) -> dict[str, Any]:
    """What must match to resume an experiment: its config (less what changes no simulated
    number), versions, platform, x64 setting and code (:func:`code_fingerprint`)."""
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
    """``{file: SHA-256}`` of every ``.py`` file of stabl_jax and of every module ``config``
    names by import path (``"module:Class"``): an edit between a crash and its rerun would
    otherwise mix the numbers of two versions of the code."""
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


def learner_folders(folder: str | Path) -> list[Path]:
    """The per-learner checkpoint folders of an experiment checkpoint folder."""
    folder = Path(folder)
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


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


class ExperimentCheckpoints:
    """The checkpoint store of one experiment: under ``folder``, :data:`IDENTITY` and a
    :class:`~.checkpoints.ChunkCheckpoint` per learner, each made once.

    Args:
      folder: the experiment's checkpoint folder (one subfolder per learner).
      identity: the experiment's :func:`experiment_identity`.
      create: :meth:`create` it now; else it only reads (and :meth:`verify` deletes nothing).

    Raises:
      CheckpointMismatch: ``folder`` holds another experiment's checkpoints.
    """

    def __init__(self, folder: str | Path, identity: Mapping[str, Any], *, create: bool = True):
        self.folder, self.created = Path(folder), False
        self.identity = json.loads(json.dumps(dict(identity), sort_keys=True))
        text = json.dumps(self.identity, sort_keys=True)
        self._digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        self._learners: dict[str, ChunkCheckpoint] = {}
        if create:
            self.create()

    def create(self, *, rewrite: bool = False) -> None:
        """Make the folder and write :data:`IDENTITY`; ``rewrite``: over a lost or damaged one
        (:meth:`recognised` found this experiment's fingerprints)."""
        found = None if rewrite else read_json(self.folder / IDENTITY)
        if found is not None and found != self.identity:
            raise CheckpointMismatch(
                f"{self.folder} holds checkpoints of a different run; "
                f"{describe_mismatch(found, self.identity)}"
            )
        self.folder.mkdir(parents=True, exist_ok=True)
        if found is None:
            write_text(
                self.folder / IDENTITY, json.dumps(self.identity, indent=2, sort_keys=True) + "\n"
            )
        self.created = True

    def for_learner(self, name: str) -> ChunkCheckpoint:
        """The checkpoint of learner ``name``."""
        if name not in self._learners:
            fingerprint = {"experiment": self._digest, "learner": name}
            self._learners[name] = ChunkCheckpoint(self.folder / name, fingerprint)
        return self._learners[name]

    def recognised(self) -> tuple[bool, bool]:
        """``(same, rewrite)``: whether the stored checkpoints are this experiment's, and whether
        only by the learners' fingerprints (:data:`IDENTITY` lost or damaged: to be rewritten)."""
        if read_json(self.folder / IDENTITY) == self.identity:
            return True, False
        seen = False
        for sub in learner_folders(self.folder):
            if (sub / STATE).is_file():
                try:
                    seen = self.for_learner(sub.name).progress() > 0 or seen
                except CheckpointMismatch:
                    return False, False
        return seen, seen

    def verify(
        self, *, discard_damaged: bool = False, log: Callable[[str], None] = lambda _: None
    ) -> dict[str, int]:
        """Read and check every learner's checkpoint: ``{learner: rounds done}`` of those with a
        stored state. With ``discard_damaged``, one that cannot be resumed is deleted (only said,
        before :meth:`create`) and ``log``-ged instead of raised.

        Raises:
          CheckpointMismatch: a checkpoint cannot be resumed and ``discard_damaged`` is false.
        """
        done = {}
        for sub in learner_folders(self.folder):
            try:
                rounds = self.for_learner(sub.name).verify()
            except CheckpointMismatch as exc:
                problem = str(exc)
                if isinstance(exc, CheckpointDamaged):
                    problem = f"checkpoint file {exc.path} is damaged ({exc.reason})"
                if not discard_damaged:
                    raise CheckpointMismatch(
                        f"{problem}; rerun with --force to discard the checkpoint of {sub.name!r} "
                        "(its rounds are recomputed; the other learners' checkpoints are kept)"
                    ) from None
                if not self.created:  # a dry run
                    log(f"the checkpoint of {sub.name} would be discarded ({problem}), recomputed")
                    continue
                shutil.rmtree(sub)
                log(f"discarded the checkpoint of {sub.name} ({problem}): it is recomputed")
                continue
            if rounds:
                done[sub.name] = rounds
        return done
