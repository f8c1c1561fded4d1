"""Chunk checkpoints: an interrupted simulation resumes where it stopped, bitwise.

One folder per simulation: ``chunk-<start>-<stop>.npz`` per chunk, then ``state.npz`` (the
commit point), each written atomically with a SHA-256 of its arrays (:data:`DIGEST`), checked
on every read: a zip's CRC-32 misses an ``.npy`` header that NumPy reads as a shifted array.
A checkpoint knows its simulation alone; an experiment's are :mod:`~.identity`'s.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax.experiment.files import atomic_write

FORMAT = "stabl_jax.checkpoint/3"
STATE = "state.npz"
#: The entry of every checkpoint ``.npz`` holding the SHA-256 of its other arrays.
DIGEST = "__sha256__"
#: The entry of a state file whose loop state was dropped (:meth:`ChunkCheckpoint.drop_state`).
DROPPED = "state_dropped"


class CheckpointMismatch(ValueError):
    """A checkpoint was written by another run, or is not consistent with itself."""


class CheckpointDamaged(CheckpointMismatch):
    """A checkpoint file (``path``) is missing, unreadable, or not what was written (``reason``)."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(
            f"checkpoint file {self.path} is damaged ({reason}); delete {self.path.parent} to run "
            "that simulation from the start (stabl-jax run: rerun the command with --force to "
            "discard it)"
        )


def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 of the names, dtypes, shapes and bytes (C order) of ``arrays`` (no object array)."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        if value.dtype == object:
            raise TypeError(f"array {name!r} has dtype object, which cannot be saved unpickled")
        digest.update(f"{name}\0{value.dtype.str}{value.shape}\0".encode())
        # numpy's stubs give ndarray the buffer protocol (__buffer__) on Python >= 3.12 only
        digest.update(value.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
    return digest.hexdigest()


def save_arrays(path: str | Path, arrays: Mapping[str, np.ndarray]) -> None:
    """``np.savez`` (uncompressed, no pickles) with a :data:`DIGEST`, atomically."""
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    digest = np.asarray(_digest(arrays))
    # numpy's stub checks **arrays against its `allow_pickle: bool` keyword as well
    atomic_write(path, lambda f: np.savez(f, **arrays, **{DIGEST: digest}))  # type: ignore[arg-type]


def load_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` of :func:`save_arrays`, checked against its :data:`DIGEST`.

    Raises:
      CheckpointDamaged: the file is missing, unreadable, has no digest, or differs.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        stored = str(arrays.pop(DIGEST))
    except KeyError:
        raise CheckpointDamaged(path, "it holds no content digest") from None
    except Exception as exc:  # zipfile.BadZipFile, EOFError, OSError, ValueError, ...
        reason = f"{type(exc).__name__}: {exc}"
        if "pickle" in reason:  # never suggest unpickling what a damaged header declares
            reason = "an array header declares Python objects, which are never loaded"
        raise CheckpointDamaged(path, reason) from None
    if _digest(arrays) != stored:
        raise CheckpointDamaged(path, "its arrays differ from those written")
    return arrays


def _key_data(leaf: Any) -> tuple[Any, bool]:
    """``(key data, True)`` of a typed PRNG key, else ``(leaf, False)``."""
    is_key = jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)
    return (jax.random.key_data(leaf) if is_key else leaf), is_key


def carry_to_arrays(carry: Any) -> dict[str, np.ndarray]:
    """``{"carry/<i>": leaf i}`` for the leaves of ``carry`` (typed keys as their key data)."""
    leaves = jax.tree.leaves(carry)
    return {f"carry/{i}": np.asarray(jax.device_get(_key_data(x)[0])) for i, x in enumerate(leaves)}


def arrays_to_carry(arrays: Mapping[str, np.ndarray], template: Any) -> Any:
    """The carry shaped like ``template`` of :func:`carry_to_arrays`'s ``arrays``, else
    :class:`CheckpointMismatch` naming the leaf whose shape or dtype differs."""
    leaves, treedef = jax.tree.flatten(template)
    stored = sum(1 for name in arrays if name.startswith("carry/"))
    if stored != len(leaves):
        raise CheckpointMismatch(
            f"the checkpoint holds {stored} loop-state arrays, this simulation has {len(leaves)}"
        )
    restored = []
    for i, want in enumerate(leaves):
        data, (expected, is_key) = arrays[f"carry/{i}"], _key_data(want)
        if data.shape != expected.shape or data.dtype != expected.dtype:
            raise CheckpointMismatch(
                f"checkpoint {'key' if is_key else 'array'} {i} has shape {data.shape} "
                f"{data.dtype}, expected {expected.shape} {expected.dtype}"
            )
        value = jnp.asarray(data)
        if is_key:
            value = jax.random.wrap_key_data(value, impl=jax.random.key_impl(want))
        restored.append(value)
    return jax.tree.unflatten(treedef, restored)


def describe_mismatch(found: Any, expected: Any, prefix: str = "") -> str:
    """The first differing key of two JSON-like values, as ``key: found != expected``."""
    if isinstance(found, dict) and isinstance(expected, dict):
        for key in sorted(set(found) | set(expected), key=str):
            if found.get(key) != expected.get(key):
                return describe_mismatch(found.get(key), expected.get(key), f"{prefix}{key}.")
    return f"{prefix.rstrip('.') or 'value'}: {found!r} (checkpoint) != {expected!r} (this run)"


class ChunkCheckpoint:
    """Atomic per-chunk checkpoints of one simulation, in ``folder`` (made at the first save);
    a stored checkpoint of another ``fingerprint`` (JSON-able) raises :class:`CheckpointMismatch`.

    Example:
      >>> import jax, tempfile
      >>> from stabl_jax import EXP3, ExpertAdvice, SimOptions, simulate
      >>> env, learner = ExpertAdvice(num_arms=3, horizon=32), EXP3(num_arms=3, horizon=32)
      >>> ckpt = ChunkCheckpoint(tempfile.mkdtemp(), {"what": "doctest"})
      >>> options = SimOptions(chunk_size=8, checkpoint=ckpt)
      >>> a = simulate(learner, env, jax.random.key(0), 2, options=options)
      >>> ckpt.progress()
      32
      >>> b = simulate(learner, env, jax.random.key(0), 2, options=options)
      >>> bool((a.played == b.played).all())  # restored from the files, nothing rerun
      True
    """

    def __init__(self, folder: str | Path, fingerprint: Mapping[str, Any]) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():  # else it fails after a chunk
            raise NotADirectoryError(f"checkpoint folder {self.folder} is a file: give a folder")
        self.fingerprint = json.loads(json.dumps(dict(fingerprint), sort_keys=True))
        self._chunks: list[tuple[int, int]] = []

    def _state(self) -> dict[str, np.ndarray] | None:
        """The checked state file's arrays (``None``: none stored), its chunks in ``_chunks``."""
        self._chunks = []
        path = self.folder / STATE
        if not path.is_file():
            return None
        arrays = load_arrays(path)
        try:  # the bytes are those written (load_arrays checked them): a layout question
            found, fmt = json.loads(str(arrays["fingerprint"])), str(arrays["format"])
            chunks = [(int(a), int(b)) for a, b in np.asarray(arrays["chunks"]).reshape(-1, 2)]
        except (KeyError, ValueError) as exc:
            raise CheckpointMismatch(f"{path} is not a {FORMAT} checkpoint ({exc})") from None
        if fmt != FORMAT:
            raise CheckpointMismatch(f"{path} is not a {FORMAT} checkpoint (format {fmt!r})")
        if found != self.fingerprint:
            raise CheckpointMismatch(
                f"checkpoint {path} was written by a different run; "
                f"{describe_mismatch(found, self.fingerprint)}"
            )
        ends = [0, *(b for _, b in chunks)]
        if [a for a, _ in chunks] != ends[:-1] or any(b <= a for a, b in chunks):
            raise CheckpointMismatch(f"{self.folder}: chunk list {chunks} is not contiguous")
        if ends[-1] != int(arrays["t0"]):
            raise CheckpointMismatch(
                f"{self.folder}: chunks end at {ends[-1]}, t0 = {arrays['t0']}"
            )
        self._chunks = chunks
        return arrays

    def _outputs(self, rounds: int | None, names: Collection[str] | None) -> dict[str, np.ndarray]:
        """Every chunk file, checked, one at a time; ``names`` (``None``: all) of rounds
        ``[0, t0)`` gathered into ``(R, max(rounds, t0), ...)`` arrays (none with ``rounds=0``)."""
        length = max(rounds or 0, self._chunks[-1][1] if self._chunks else 0)
        outputs: dict[str, np.ndarray] = {}
        wanted = None if names is None else set(names)
        for start, stop in self._chunks:
            path = self.folder / f"chunk-{start:010d}-{stop:010d}.npz"
            values = load_arrays(path)
            wanted = set(values) if wanted is None else wanted
            if not wanted <= set(values):
                raise CheckpointMismatch(f"{path} holds no {sorted(wanted - set(values))}")
            for name, value in values.items():
                full = (value.shape[0], length, *value.shape[2:]) if value.ndim > 1 else ()
                fits = value.ndim > 1 and value.shape[1] == stop - start
                if not fits or (name in outputs and outputs[name].shape != full):
                    raise CheckpointMismatch(f"{path}: {name} has shape {value.shape}")
                if rounds != 0 and name in wanted:
                    if name not in outputs:
                        outputs[name] = np.empty(full, value.dtype)
                    outputs[name][:, start:stop] = value
            del values  # before the next chunk is read: one chunk in memory at a time
        return outputs

    def progress(self) -> int:
        """Rounds done according to the stored state (0 when there is none)."""
        arrays = self._state()
        return 0 if arrays is None else int(arrays["t0"])

    def verify(self) -> int:
        """Check every stored file as :meth:`restore` does; the rounds done (0: none stored)."""
        rounds = self.progress()
        self._outputs(0, None)
        return rounds

    def restore(
        self, template: Any, rounds: int | None = None, names: Collection[str] | None = None
    ) -> tuple[Any, dict[str, np.ndarray], int] | None:
        """The stored ``(carry like template, outputs (R, rounds, ...) of rounds [0, t0), t0)``
        (outputs ``names``, ``None``: all; the carry ``None`` after :meth:`drop_state`), or
        ``None`` if nothing is stored.

        Raises:
          CheckpointDamaged: a file is missing, unreadable or differs from what was written.
          CheckpointMismatch: another fingerprint or carry layout, or a dropped state and
            ``rounds`` past the stored ones.
        """
        arrays = self._state()
        if arrays is None:
            return None
        outputs, t0 = self._outputs(rounds, names), int(arrays["t0"])
        if DROPPED not in arrays:
            return arrays_to_carry(arrays, template), outputs, t0
        if rounds is not None and rounds > t0:
            raise CheckpointMismatch(
                f"{self.folder} finished at round {t0} and kept no loop state (drop_state) to "
                f"continue to round {rounds} from: delete the folder to rerun the simulation"
            )
        return None, outputs, t0

    def drop_state(self) -> None:
        """Delete the stored loop state of a finished simulation, keeping its outputs
        (:class:`CheckpointMismatch` where nothing of this simulation is stored)."""
        if not self._chunks and self._state() is None:
            raise CheckpointMismatch(f"{self.folder} holds no checkpoint whose state to drop")
        save_arrays(self.folder / STATE, {**self._meta(), DROPPED: np.asarray(True)})

    def save(self, carry: Any, outputs: Mapping[str, np.ndarray], start: int, stop: int) -> None:
        """Record rounds ``[start, stop)``: their outputs, then the loop state after them."""
        expected = self._chunks[-1][1] if self._chunks else 0
        if start != expected:
            raise ValueError(f"chunk [{start}, {stop}) does not follow round {expected}")
        self.folder.mkdir(parents=True, exist_ok=True)
        save_arrays(self.folder / f"chunk-{start:010d}-{stop:010d}.npz", dict(outputs))
        self._chunks.append((start, stop))
        save_arrays(self.folder / STATE, {**carry_to_arrays(carry), **self._meta()})

    def _meta(self) -> dict[str, np.ndarray]:
        return {
            "t0": np.asarray(self._chunks[-1][1], np.int64),
            "chunks": np.asarray(self._chunks, np.int64).reshape(-1, 2),
            "fingerprint": np.asarray(json.dumps(self.fingerprint, sort_keys=True)),
            "format": np.asarray(FORMAT),
        }
