"""Chunk checkpoints: an interrupted simulation resumes where it stopped, bitwise.

One folder per simulation: ``chunk-<start>-<stop>.npz`` per chunk, then ``state.npz`` (the
commit point), each written atomically and read back against its SHA-256 (:data:`DIGEST`).
A checkpoint knows its simulation alone; an experiment's, one per learner, are
:mod:`~stabl_jax.experiment.identity`'s.
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

FORMAT = "stabl_jax.checkpoint/2"
STATE = "state.npz"
#: The entry of every checkpoint ``.npz`` holding the SHA-256 of its other arrays (JSON).
DIGEST = "__sha256__"
#: The entry of a checkpoint's state file whose loop state was dropped (``drop_state``).
DROPPED = "state_dropped"


class CheckpointMismatch(ValueError):
    """A checkpoint was written by a different run (config, seed, runs or versions)."""


class CheckpointDamaged(CheckpointMismatch):
    """A checkpoint file is missing, unreadable, or differs from its stored SHA-256.

    Attributes:
      path: the damaged file.
      reason: what is wrong with it.
    """

    def __init__(self, path: Path, reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(
            f"checkpoint file {self.path} is damaged ({reason}); delete {self.path.parent} to run "
            "that simulation from the start (stabl-jax run: rerun the command with --force to "
            "discard it)"
        )


def _digest(value: np.ndarray) -> str:
    """SHA-256 of an array's dtype, shape and bytes (C order)."""
    value = np.ascontiguousarray(value)
    digest = hashlib.sha256(f"{value.dtype.str}{value.shape}".encode())
    # numpy's stubs give ndarray the buffer protocol (__buffer__) on Python >= 3.12 only
    digest.update(value.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
    return digest.hexdigest()


def save_arrays(path: str | Path, arrays: Mapping[str, np.ndarray]) -> None:
    """``np.savez`` (uncompressed, no pickles), atomically, plus a :data:`DIGEST` of SHA-256s."""
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    for name, value in arrays.items():
        if value.dtype == object:
            raise TypeError(f"array {name!r} has dtype object, which cannot be saved unpickled")
    digests = json.dumps({name: _digest(value) for name, value in arrays.items()}, sort_keys=True)
    atomic_write(
        path,
        # numpy's stub checks **arrays against its `allow_pickle: bool` keyword as well
        lambda f: np.savez(f, **arrays, **{DIGEST: np.asarray(digests)}),  # type: ignore[arg-type]
    )


def load_arrays(path: str | Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` written by :func:`save_arrays`, checked against its SHA-256.

    Raises:
      CheckpointDamaged: the file is missing, unreadable, has no digests, or an array differs.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        stored = json.loads(str(arrays.pop(DIGEST)))
    except KeyError:
        raise CheckpointDamaged(path, "it holds no content digest") from None
    except Exception as exc:  # zipfile.BadZipFile, EOFError, OSError, ValueError, ...
        reason = f"{type(exc).__name__}: {exc}"
        if "pickle" in reason:  # never suggest unpickling what a damaged header declares
            reason = "an array header declares Python objects, which are never loaded"
        raise CheckpointDamaged(path, reason) from None
    if not isinstance(stored, dict) or sorted(stored) != sorted(arrays):
        raise CheckpointDamaged(path, "its list of arrays differs from the one written")
    for name, value in arrays.items():
        if _digest(value) != stored[name]:
            raise CheckpointDamaged(path, f"array {name!r} differs from the one written")
    return arrays


def _is_key(leaf: Any) -> bool:
    return jnp.issubdtype(leaf.dtype, jax.dtypes.prng_key)


def carry_to_arrays(carry: Any) -> dict[str, np.ndarray]:
    """``{"carry/<i>": leaf i}`` for the leaves of ``carry`` (typed keys as their key data)."""
    out: dict[str, np.ndarray] = {}
    for i, leaf in enumerate(jax.tree.leaves(carry)):
        value = jax.random.key_data(leaf) if _is_key(leaf) else leaf
        out[f"carry/{i}"] = np.asarray(jax.device_get(value))
    return out


def arrays_to_carry(arrays: Mapping[str, np.ndarray], template: Any) -> Any:
    """Rebuild a carry shaped like ``template`` from :func:`carry_to_arrays`'s output.

    Raises:
      CheckpointMismatch: a leaf is missing or its shape or dtype differs from the template's.
    """
    leaves, treedef = jax.tree.flatten(template)
    stored = sum(1 for name in arrays if name.startswith("carry/"))
    if stored != len(leaves):
        raise CheckpointMismatch(
            f"the checkpoint holds {stored} loop-state arrays, this simulation has {len(leaves)}"
        )
    restored = []
    for i, want in enumerate(leaves):
        data, is_key = arrays[f"carry/{i}"], _is_key(want)
        expected = jax.random.key_data(want) if is_key else want
        if data.shape != expected.shape or data.dtype != expected.dtype:
            raise CheckpointMismatch(
                f"checkpoint {'key' if is_key else 'array'} {i} has shape {data.shape} "
                f"{data.dtype}, expected {expected.shape} {expected.dtype}"
            )
        # wrap_key_data is annotated for a jax.Array; a NumPy uint32 array is accepted
        restored.append(
            jax.random.wrap_key_data(data, impl=jax.random.key_impl(want))  # type: ignore[arg-type]
            if is_key
            else jnp.asarray(data, dtype=want.dtype)
        )
    return jax.tree.unflatten(treedef, restored)


def describe_mismatch(found: Any, expected: Any, prefix: str = "") -> str:
    """The first differing key of two JSON-like values, as ``key: found != expected``."""
    if isinstance(found, dict) and isinstance(expected, dict):
        for key in sorted(set(found) | set(expected), key=str):
            if found.get(key) != expected.get(key):
                return describe_mismatch(found.get(key), expected.get(key), f"{prefix}{key}.")
    return f"{prefix.rstrip('.') or 'value'}: {found!r} (checkpoint) != {expected!r} (this run)"


def _chunk_name(start: int, stop: int) -> str:
    return f"chunk-{start:010d}-{stop:010d}.npz"


class ChunkCheckpoint:
    """Atomic per-chunk checkpoints of one simulation, in ``folder``.

    Args:
      folder: where the files go (created on the first save).
      fingerprint: JSON-able description of the simulation; a stored checkpoint with another
        one raises :class:`CheckpointMismatch`.

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

    def _read_state(self) -> dict[str, np.ndarray] | None:
        path = self.folder / STATE
        if not path.is_file():
            return None
        arrays = load_arrays(path)
        try:  # the bytes are those written (load_arrays checked them): a layout question
            found = json.loads(str(arrays["fingerprint"]))
            fmt = str(arrays["format"])
        except (KeyError, ValueError) as exc:
            raise CheckpointMismatch(f"{path} is not a {FORMAT} checkpoint ({exc})") from None
        if fmt != FORMAT:
            raise CheckpointMismatch(f"{path} is not a {FORMAT} checkpoint (format {fmt!r})")
        if found != self.fingerprint:
            raise CheckpointMismatch(
                f"checkpoint {path} was written by a different run; "
                f"{describe_mismatch(found, self.fingerprint)}"
            )
        return arrays

    def _read(
        self, keep: bool, rounds: int | None = None, names: Collection[str] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None:
        """``(state arrays, outputs of rounds [0, t0))``, every file checked, or ``None``.

        Outputs are read only with ``keep`` (only ``names`` when given), each into one
        ``(R, max(rounds, t0), ...)`` array, one chunk at a time.
        """
        arrays = self._read_state()
        if arrays is None:
            return None
        t0 = int(arrays["t0"])
        chunks = [(int(a), int(b)) for a, b in np.asarray(arrays["chunks"]).reshape(-1, 2)]
        expected_start = 0
        for start, stop in chunks:
            if start != expected_start or stop <= start:
                raise CheckpointMismatch(f"{self.folder}: chunk list {chunks} is not contiguous")
            expected_start = stop
        if expected_start != t0:
            raise CheckpointMismatch(f"{self.folder}: chunks end at {expected_start}, t0 = {t0}")
        length = t0 if rounds is None else max(rounds, t0)
        outputs: dict[str, np.ndarray] = {}
        # Every chunk must hold the wanted outputs; others are not read.
        wanted = None if names is None else set(names)
        for start, stop in chunks:
            path = self.folder / _chunk_name(start, stop)
            values = load_arrays(path)
            wanted = set(values) if wanted is None else wanted
            if not wanted <= set(values):
                raise CheckpointMismatch(f"{path} holds no {sorted(wanted - set(values))}")
            for name, value in values.items():
                if value.ndim < 2 or value.shape[1] != stop - start:
                    raise CheckpointMismatch(f"{path}: {name} has shape {value.shape}")
                if not keep or name not in wanted:
                    continue
                if name not in outputs:
                    shape = (value.shape[0], length, *value.shape[2:])
                    outputs[name] = np.empty(shape, value.dtype)
                target = outputs[name]
                if (value.shape[0], *value.shape[2:]) != (target.shape[0], *target.shape[2:]):
                    raise CheckpointMismatch(f"{path}: {name} has shape {value.shape}")
                target[:, start:stop] = value
            del values  # before the next chunk is read: one chunk in memory at a time
        self._chunks = chunks
        return arrays, outputs

    def progress(self) -> int:
        """Rounds done according to the stored state (0 when there is none)."""
        arrays = self._read_state()
        return 0 if arrays is None else int(arrays["t0"])

    def verify(self) -> int:
        """Check every stored file against its digests; returns the rounds done (0: nothing stored).

        Raises:
          CheckpointDamaged: a file is missing, unreadable or differs from what was written.
          CheckpointMismatch: the checkpoint belongs to another simulation.
        """
        read = self._read(keep=False)
        return 0 if read is None else int(read[0]["t0"])

    def restore(
        self, template: Any, rounds: int | None = None, names: Collection[str] | None = None
    ) -> tuple[Any, dict[str, np.ndarray], int] | None:
        """The stored ``(carry, outputs of rounds [0, t0), t0)``, or ``None`` if nothing is stored.

        The carry is ``None`` where :meth:`drop_state` dropped it.

        Args:
          template: the freshly initialised carry (structure, shapes, dtypes, key types).
          rounds: allocate each output as ``(R, rounds, ...)``, to be filled from ``t0`` on.
          names: restore only these outputs; ``None``: all.

        Raises:
          CheckpointDamaged: a file is missing, unreadable or differs from what was written.
          CheckpointMismatch: another fingerprint or carry layout, or a dropped state and
            ``rounds`` past the stored ones.
        """
        read = self._read(keep=True, rounds=rounds, names=names)
        if read is None:
            self._chunks = []
            return None
        arrays, outputs = read
        t0 = int(arrays["t0"])
        if DROPPED not in arrays:
            return arrays_to_carry(arrays, template), outputs, t0
        if rounds is not None and rounds > t0:
            raise CheckpointMismatch(
                f"{self.folder} finished at round {t0} and kept no loop state (drop_state) to "
                f"continue to round {rounds} from: delete the folder to rerun the simulation"
            )
        return None, outputs, t0

    def drop_state(self) -> None:
        """Delete the stored loop state of a finished simulation, keeping its outputs.

        Raises:
          CheckpointMismatch: nothing is stored, or the state belongs to another simulation.
        """
        # The chunk list is known once this object restored or saved; else read from the state.
        if not self._chunks and self._read(keep=False) is None:
            raise CheckpointMismatch(f"{self.folder} holds no checkpoint whose state to drop")
        save_arrays(self.folder / STATE, {**self._meta(), DROPPED: np.asarray(True)})

    def save(self, carry: Any, outputs: Mapping[str, np.ndarray], start: int, stop: int) -> None:
        """Record rounds ``[start, stop)``: their outputs, then the loop state after them."""
        expected = self._chunks[-1][1] if self._chunks else 0
        if start != expected:
            raise ValueError(f"chunk [{start}, {stop}) does not follow round {expected}")
        self.folder.mkdir(parents=True, exist_ok=True)
        save_arrays(self.folder / _chunk_name(start, stop), dict(outputs))
        self._chunks.append((start, stop))
        save_arrays(self.folder / STATE, {**carry_to_arrays(carry), **self._meta()})

    def _meta(self) -> dict[str, np.ndarray]:
        """The state file's other entries: rounds done, chunks, fingerprint and format."""
        return {
            "t0": np.asarray(self._chunks[-1][1], np.int64),
            "chunks": np.asarray(self._chunks, np.int64).reshape(-1, 2),
            "fingerprint": np.asarray(json.dumps(self.fingerprint, sort_keys=True)),
            "format": np.asarray(FORMAT),
        }
