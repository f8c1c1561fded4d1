"""The runs axis over every device JAX sees, in blocks of runs: the layout of
:func:`~stabl_jax.simulate.simulate`.

Runs are split over a 1-D mesh ``("runs",)`` under ``jax.shard_map``; each device steps
``runs_per_block`` runs at a time (``lax.map`` over blocks, ``vmap`` inside); on one CPU
device ``host_threads`` groups of blocks run from their own threads. ``R`` is padded to a
multiple of ``devices x runs_per_block``, the padding dropped afterwards. Results are
bitwise identical for the same ``runs_per_block``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from stabl_jax import checks

RUNS_AXIS = "runs"

#: Largest block on a CPU (runs stepped together); GPUs and TPUs use one block per device.
CPU_MAX_BLOCK = 256


@dataclasses.dataclass(frozen=True)
class RunsPlan:
    """How ``num_runs`` runs are laid out: ``padded_runs`` a multiple of ``devices * block``,
    ``block`` runs stepped together, ``mesh`` (``None`` on one device), ``host_threads``
    groups of whole blocks stepped from host threads."""

    num_runs: int
    padded_runs: int
    block: int
    mesh: Mesh | None
    host_threads: int = 1

    @property
    def num_devices(self) -> int:
        return 1 if self.mesh is None else int(self.mesh.devices.size)


def plan_runs(
    num_runs: int,
    runs_per_block: int | None = None,
    mesh: Any = "auto",
    host_threads: int | None = None,
) -> RunsPlan:
    """Choose the padding, block size and host threads for ``num_runs`` runs.

    Args:
      num_runs: ``R`` (>= 1).
      runs_per_block: ``None``: on a CPU, ``R`` split evenly into blocks of at most
        :data:`CPU_MAX_BLOCK`; elsewhere all of a device's runs.
      mesh: a 1-D mesh with axis ``"runs"``, ``None``, or ``"auto"``: over every device of
        every process (``None`` for a single device).
      host_threads: ``None``: on one CPU device, the largest divisor of the number of blocks
        at most :func:`usable_cores`; elsewhere 1. A given value must divide the blocks.
    """
    num_runs = checks.check_int("num_runs", num_runs, minimum=1)
    if isinstance(mesh, str):
        checks.check_choice("mesh", mesh, ("auto",))  # "none" is not None: it would shard
        mesh = Mesh(np.asarray(jax.devices()), (RUNS_AXIS,)) if jax.device_count() > 1 else None
    elif mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be 'auto', None or a jax.sharding.Mesh, got {mesh!r}")
    devices = 1 if mesh is None else int(mesh.devices.size)
    if runs_per_block is None and jax.default_backend() == "cpu":
        # From R alone, never the device count: the same bits on one CPU device or many.
        block = math.ceil(num_runs / math.ceil(num_runs / CPU_MAX_BLOCK))
    elif runs_per_block is None:
        block = math.ceil(num_runs / devices)
    else:
        block = checks.check_int("runs_per_block", runs_per_block, minimum=1)
    padded = math.ceil(num_runs / (devices * block)) * devices * block
    blocks = padded // block
    if host_threads is None:
        threads = 1
        if mesh is None and jax.default_backend() == "cpu":
            threads = max(d for d in range(1, usable_cores() + 1) if blocks % d == 0)
    else:
        threads = checks.check_int("host_threads", host_threads, minimum=1)
        if mesh is not None and threads > 1:
            raise ValueError(f"host_threads={threads} needs a single device; got a mesh")
        if blocks % threads:
            raise ValueError(
                f"host_threads={threads} must divide the number of blocks ({blocks} blocks of "
                f"{block} runs for num_runs={num_runs})"
            )
    return RunsPlan(num_runs, padded, block, mesh, threads)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS reports it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def pad_params(params: Any, plan: RunsPlan) -> Any:
    """Per-run params leaves ``(R, ...)`` padded to ``(padded_runs, ...)`` with their last row
    (the padded runs are dropped); shared scalars unchanged."""
    extra = plan.padded_runs - plan.num_runs

    def pad(x: Any) -> Any:
        if extra == 0 or jnp.ndim(x) == 0:
            return x
        x = jnp.asarray(x)
        return jnp.concatenate([x, jnp.repeat(x[-1:], extra, axis=0)], axis=0)

    return jax.tree.map(pad, params)


def init_sharded(init: Callable[..., Any], plan: RunsPlan, *args: Any) -> Any:
    """``init(*args)`` (a function returning runs-leading arrays), its result sharded on its
    leading axis over the runs mesh: each process computes only its own devices' runs."""
    if plan.mesh is None:
        return init(*args)
    return jax.jit(init, out_shardings=NamedSharding(plan.mesh, PartitionSpec(RUNS_AXIS)))(*args)


def blocked(step: Callable[..., Any], block: int) -> Callable[..., Any]:
    """``step(carry, *rest) -> (carry, outputs)`` over runs-leading arrays, applied ``block``
    runs at a time (``lax.map`` over blocks); the runs axis must be a multiple of ``block``."""

    def run(carry: Any, *rest: Any) -> Any:
        num = jax.tree.leaves(carry)[0].shape[0]
        if num == block:
            return step(carry, *rest)
        split = jax.tree.map(lambda x: x.reshape((num // block, block, *x.shape[1:])), carry)
        carry, outputs = jax.lax.map(lambda c: step(c, *rest), split)
        merge = partial(jax.tree.map, lambda x: x.reshape((num, *x.shape[2:])))
        return merge(carry), merge(outputs)

    return run


def distribute(step: Callable[..., Any], plan: RunsPlan) -> Callable[..., Any]:
    """``step(carry, t0) -> (carry, outputs)`` run blockwise on each device of ``plan``'s
    mesh; outputs are gathered (every device holds all runs' outputs), the carry stays
    sharded."""
    local = blocked(step, plan.block)
    if plan.mesh is None:
        return local
    specs = (PartitionSpec(RUNS_AXIS), PartitionSpec())  # (carry, t0) and (carry, outputs)

    def per_device(carry: Any, t0: jax.Array) -> Any:
        carry, outputs = local(carry, t0)
        gather = partial(jax.lax.all_gather, axis_name=RUNS_AXIS, axis=0, tiled=True)
        return carry, jax.tree.map(gather, outputs)

    # all_gather makes the outputs equal on every device; check_vma cannot infer that (there
    # is no all_gather_invariant), so the check is switched off for this function.
    return jax.shard_map(
        per_device, mesh=plan.mesh, in_specs=specs, out_specs=specs, check_vma=False
    )


def to_host(tree: Any) -> Any:
    """``tree`` unchanged within one process; across processes, its sharded leaves gathered to
    every process (``process_allgather``; typed keys as local key arrays)."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    def gather(x: Any) -> Any:
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):  # typed keys: their bits
            bits = multihost_utils.process_allgather(jax.random.key_data(x), tiled=True)
            return jax.random.wrap_key_data(bits, impl=jax.random.key_impl(x))
        return multihost_utils.process_allgather(x, tiled=True)

    return jax.tree.map(gather, tree)


def unpad(tree: Any, plan: RunsPlan) -> Any:
    """The first ``num_runs`` rows of every runs-leading leaf."""
    if plan.padded_runs == plan.num_runs:
        return tree
    return jax.tree.map(lambda x: x[: plan.num_runs], tree)
