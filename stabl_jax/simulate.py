"""One rollout for every learner and environment: ``lax.scan`` over rounds inside ``vmap``
over runs, in chunks of rounds, sharded over devices.

Round ``t`` of each run (``docs/environments.md``)::

    query = learner.ask(state, fold_in(learner_key, t))
    env_state, observed, info = env.evaluate(env_params, env_state, t, query, fold_in(env_key, t))
    state = learner.tell(state, query, observed)

A learner that overrides ``step`` (:func:`overrides_step`) is given the round's whole loss.
Run ``i`` has ``run_key = fold_in(key, i)``; ``fold_in(run_key, j)`` for ``j = 0, 1, 2, 3``
draws the environment's parameters, is the environment's key, the learner's, and initialises
the learner. So a run's numbers do not depend on ``num_runs``, chunk size or devices, and
two learners simulated with one ``key`` see the same losses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, cast

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from stabl_jax import checks, kernels, prng, sharding
from stabl_jax.envs.base import (
    BANDIT_TRACES,
    as_environment,
    env_defaults,
    reveals_lazily,
    sample_params,
)

#: The default traces of an oblivious bandit environment.
TRACE_FIELDS: tuple[str, ...] = BANDIT_TRACES
#: Traces every rollout can record: ``played`` (``arms[0]`` or ``points[0]``), ``arms`` ``(Q,)``,
#: ``points`` ``(Q, d)``, ``loss`` (``observed[0]``), ``observed`` ``(Q,)``, ``prob_best``.
QUERY_TRACES: tuple[str, ...] = ("played", "arms", "points", "loss", "observed", "prob_best")
#: The trace of a learner with ``records_restarts``: ``()`` bool, the round ended in a restart.
RESTART_TRACE = "restart"
_BYTES_PER_ROUND = 32  # per run: 4 scalars + queried arms, generous
#: The largest ``first_run`` (it enters the program as an int32).
MAX_FIRST_RUN = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class SimOptions:
    """How :func:`simulate` executes its runs, and which runs of the key they are.

    Attributes:
      chunk_size: rounds per compiled chunk; ``None``: from the memory available
        (:func:`auto_chunk_size`). Results do not depend on it.
      runs_per_block: runs stepped together on a device (``None``:
        :func:`~stabl_jax.sharding.plan_runs`); one value gives one set of bits on any devices.
      host_threads: on one CPU device, groups of blocks stepped from host threads (``None``:
        one per usable core). Results do not depend on it.
      kernel: ``"xla"``, ``"pallas"`` (:mod:`stabl_jax.kernels`: the same arms, probabilities
        equal to float32 rounding) or ``"auto"`` (:func:`stabl_jax.kernels.auto_kernel`).
      first_run: index of the first run: runs ``first_run .. first_run + R - 1``.
      runs_per_point: run ``i`` uses the keys of run ``first_run + i mod runs_per_point``
        (common random numbers across a sweep's points); ``R`` a multiple of it.
      progress: ``True`` for a tqdm bar, or a callback ``(done, total)`` after each chunk.
      checkpoint: a :class:`~stabl_jax.experiment.checkpoints.ChunkCheckpoint` to resume from
        and save to after every chunk.
      traces_on_device: keep the traces on the device as ``jax.Array`` (one host thread, no
        checkpoint); the same bits.

    Example:
      >>> SimOptions(chunk_size=64, kernel="xla").chunk_size
      64
    """

    chunk_size: int | None = None
    runs_per_block: int | None = None
    host_threads: int | None = None
    kernel: str = "auto"
    first_run: int = 0
    runs_per_point: int | None = None
    progress: bool | Callable[[int, int], None] = False
    checkpoint: Any = None
    traces_on_device: bool = False

    def __post_init__(self) -> None:
        remedy = {
            "chunk_size": "None picks one from the memory available",
            "runs_per_block": "None chooses it",
            "host_threads": "None: one per usable core",
            "runs_per_point": "None gives every run its own keys",
        }
        for name, hint in remedy.items():
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _option_int(name, value, 1, hint))
        first = _option_int("first_run", self.first_run, 0, "runs are counted from 0")
        if first > MAX_FIRST_RUN:
            raise ValueError(
                f"SimOptions: first_run must be <= 2**31 - 1 = {MAX_FIRST_RUN} (a run's index "
                f"is folded into the key as a 32-bit int), got {first}"
            )
        object.__setattr__(self, "first_run", first)
        checks.check_choice("kernel", self.kernel, kernels.KERNELS)
        if not callable(self.progress):
            object.__setattr__(self, "progress", checks.check_bool("progress", self.progress))
        checks.check_bool("traces_on_device", self.traces_on_device)
        if self.traces_on_device and self.checkpoint is not None:
            raise ValueError(
                "SimOptions: traces_on_device=True keeps the traces in device memory and a "
                "checkpoint saves them to disk after every chunk: give one of the two"
            )
        if self.traces_on_device and self.host_threads not in (None, 1):
            raise ValueError(
                f"SimOptions: traces_on_device=True steps the runs from one host thread, got "
                f"host_threads={self.host_threads}: leave host_threads at None or 1"
            )
        if self.checkpoint is not None:
            checks.check_interface(
                "checkpoint",
                self.checkpoint,
                "a stabl_jax.experiment.checkpoints.ChunkCheckpoint",
                ("restore", "save"),
            )


def _option_int(name: str, value: object, minimum: int, remedy: str) -> int:
    """``value`` checked by :func:`~stabl_jax.checks.check_int`, its error naming the remedy."""
    try:
        return checks.check_int(name, value, minimum=minimum)
    except (TypeError, ValueError) as err:
        raise type(err)(f"SimOptions: {err} ({remedy})") from None


@chex.dataclass(frozen=True)
class RunCarry:
    """Per-run loop state (stacked on a leading runs axis)."""

    state: Any  # the learner's state
    env_params: Any  # the environment's per-run parameters
    env_state: Any  # the environment's state (None for an oblivious environment)
    env_key: jax.Array  # () key, round t uses fold_in(env_key, t)
    learner_key: jax.Array  # () key, round t uses fold_in(learner_key, t)


@dataclasses.dataclass
class SimResult:
    """Traces of a simulation: NumPy arrays, or ``jax.Array`` with ``traces_on_device``.

    Every recorded trace is an attribute (``result.loss``), ``(R, T, ...)``; an offered trace
    not recorded reads ``None``. Bandit: ``played`` ``(R, T)`` int32, ``arms`` ``(R, T, Q)``,
    ``loss`` ``l_t(x_t)``, ``expected_loss`` ``<p_t, l_t>``, ``prob_best``. Convex: ``loss``,
    ``best_loss``, ``played`` ``(R, T, d)``. Algorithm selection: ``arms``, ``observed``
    ``(R, T, Q)``, ``reward``, ``best_gap``, ``best_value``.

    Attributes:
      arrays: the recorded traces by name.
      carry: the final :class:`RunCarry` (runs-leading); ``None`` when restored from a
        finished checkpoint whose state was dropped.
      compile_seconds: time spent compiling the chunk programs.
      run_seconds: time spent running them.
      offered: the trace names that read ``None`` when not recorded.
      kernel: the path that stepped the runs, ``"xla"`` or ``"pallas"``.
      env: the environment simulated.
    """

    arrays: dict[str, np.ndarray]
    carry: RunCarry | None
    compile_seconds: float
    run_seconds: float
    offered: tuple[str, ...] = QUERY_TRACES
    kernel: str = "xla"
    env: Any = None

    def __getattr__(self, name: str) -> Any:
        fields = self.__dict__
        if "arrays" in fields and name in fields["arrays"]:
            return fields["arrays"][name]
        if name in fields.get("offered", ()):
            return None
        raise AttributeError(f"{type(self).__name__} has no trace or attribute {name!r}")

    @property
    def num_runs(self) -> int:
        return int(next(iter(self.arrays.values())).shape[0])

    @property
    def horizon(self) -> int:
        return int(next(iter(self.arrays.values())).shape[1])

    def traces(self) -> dict[str, np.ndarray]:
        """The recorded traces by name."""
        return dict(self.arrays)

    def final_carry(self, caller: str) -> RunCarry:
        """The final :attr:`carry`; ``ValueError`` naming ``caller`` where the result holds none."""
        if self.carry is None:
            raise ValueError(
                f"{caller} reads the runs' final loop state, which this result does not hold: "
                "it was restored from a finished checkpoint whose state was dropped "
                "(ChunkCheckpoint.drop_state); simulate again without that checkpoint"
            )
        return self.carry

    def check_env(self, env: Any, caller: str) -> None:
        """Raise ``ValueError`` unless ``env`` is the environment simulated (when known), its
        numbers included (``repr``: equality leaves out the traced numbers' defaults)."""
        if self.env is not None and (self.env != env or repr(self.env) != repr(env)):
            raise ValueError(
                f"result was simulated on {self.env!r}, not on env={env!r}: give {caller} the "
                "environment of the simulation (result.env)"
            )


def run_keys(
    key: jax.Array, num_runs: int, first_run: int = 0, runs_per_point: int | None = None
) -> jax.Array:
    """``(num_runs,)`` keys ``fold_in(key, first_run + i)``, ``i = 0 .. num_runs - 1``; with
    ``runs_per_point`` ``P``, ``fold_in(key, first_run + i mod P)`` (paired sweep points)."""
    index = jnp.arange(num_runs, dtype=jnp.uint32)
    if runs_per_point is not None:
        index = index % jnp.uint32(runs_per_point)
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(first_run + index)


def params_axes(params: Any) -> Any:
    """vmap axes for a params pytree: leaves with a leading axis are per run, scalars shared."""
    return jax.tree.map(lambda x: 0 if jnp.ndim(x) > 0 else None, params)


def sample_env_params(env: Any, keys: jax.Array) -> Any:
    """``(R, ...)`` the runs' environment parameters, ``env.sample_params(fold_in(key_i, 0))``;
    the environment's numbers enter the program traced (:func:`~stabl_jax.envs.base.env_defaults`),
    so environments that differ in numbers alone share it."""
    return _sample_env_params(env, keys, env_defaults(env))


def env_params_grid(env: Any, key: jax.Array, runs_per_point: int, field: str, values: Any) -> Any:
    """``(P * R, ...)`` environment parameters sweeping ``env``'s traced number ``field`` over
    its ``P`` ``values``, each point's ``R = runs_per_point`` runs on the keys of runs
    ``0 .. R - 1`` (common random numbers across points).

    Give it to :func:`simulate` as ``env_params`` with
    ``SimOptions(runs_per_point=runs_per_point)`` and the same ``key``: every point is one
    group of runs of one compiled program (the numbers declared
    ``dataclasses.field(compare=False)`` are no part of the environment's identity), and the
    point whose value is ``env``'s own has the numbers :func:`simulate` draws without
    ``env_params``, bit for bit.

    Args:
      env: an environment whose numbers are traced (``traced_defaults``).
      key: the simulation's key.
      runs_per_point: ``R``, the runs of each point.
      field: a field of ``env`` declared ``compare=False`` (``"bonus"``, ``"gap"``,
        ``"change_points"``...); fields that set a shape are static and take one program each.
      values: the ``P`` values, each a valid ``field`` of ``env`` (checked by its constructor).

    Raises:
      ValueError: ``field`` is not a traced number of ``env``, or ``values`` is empty.
    """
    traced = [f.name for f in dataclasses.fields(env) if not f.compare]
    if not getattr(env, "traced_defaults", False) or field not in traced:
        raise ValueError(
            f"field={field!r} is not a traced number of {type(env).__name__} (its traced "
            f"numbers: {traced or 'none'}): sweep a static field, which sets a shape or a code "
            "path, with one simulate call per value"
        )
    checks.check_int("runs_per_point", runs_per_point, minimum=1)
    if len(values) == 0:
        raise ValueError(f"values of {field!r} is empty: give at least one value")
    keys = run_keys(key, runs_per_point)
    points = [sample_env_params(dataclasses.replace(env, **{field: v}), keys) for v in values]
    return jax.tree.map(lambda *leaves: jnp.concatenate(leaves), *points)


@partial(jax.jit, static_argnames=("env",))
def _sample_env_params(env: Any, keys: jax.Array, defaults: Any) -> Any:
    return jax.vmap(lambda k: sample_params(env, jax.random.fold_in(k, 0), defaults))(keys)


@jax.jit
def _run_streams(keys: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(R,)`` run keys -> the keys of ``learner.init``, of the environment and of the learner:
    ``fold_in(key_i, j)`` for ``j = 3, 1, 2``."""
    streams = tuple(jax.vmap(jax.random.fold_in, in_axes=(0, None))(keys, i) for i in (3, 1, 2))
    return cast("tuple[jax.Array, jax.Array, jax.Array]", streams)


@partial(jax.jit, static_argnames=("learner", "env"))
def _init_from_streams(
    learner: Any,
    env: Any,
    streams: tuple[jax.Array, jax.Array, jax.Array],
    env_params: Any,
    params: Any,
) -> RunCarry:
    def one(
        init_key: jax.Array, env_key: jax.Array, learner_key: jax.Array, env_p: Any, p: Any
    ) -> RunCarry:
        return RunCarry(
            state=learner.init(init_key, p),
            env_params=env_p,
            env_state=env.init(env_p) if hasattr(env, "init") else None,
            env_key=env_key,
            learner_key=learner_key,
        )

    return jax.vmap(one, in_axes=(0, 0, 0, 0, params_axes(params)))(*streams, env_params, params)


def init_runs(learner: Any, env: Any, keys: jax.Array, params: Any) -> RunCarry:
    """Stacked :class:`RunCarry` for runs with ``keys``; ``params`` shared or per run."""
    env = as_environment(env)
    env_params = sample_env_params(env, keys)
    return _init_from_streams(learner, env, _run_streams(keys), env_params, params)


def _trace(name: str, query: Any, observed: jax.Array, info: Any) -> jax.Array:
    """One per-round output (:data:`QUERY_TRACES`, else ``info[name]``)."""
    if name == "played":
        return query.arms[0] if hasattr(query, "arms") else query.points[0].astype(jnp.float32)
    if name == "arms":
        return query.arms.astype(jnp.int32)
    if name == "points":
        return query.points.astype(jnp.float32)
    if name in ("loss", "observed"):
        return (observed[0] if name == "loss" else observed).astype(jnp.float32)
    if name == "prob_best":
        return query.play_probs[info["best_arm"]].astype(jnp.float32)
    if name not in info:
        raise ValueError(f"traces: the environment's info has no {name!r} (it has {list(info)})")
    return info[name]


def _round(
    learner: Any, env: Any, fields: tuple[str, ...], validate: bool, carry: RunCarry, t: jax.Array
) -> tuple[RunCarry, dict]:
    """One round of one run: ask, evaluate the query, tell; with ``validate``, in-program checks."""
    # prng.fold_in is jax.random.fold_in bit for bit, unrolled (faster inside the scan).
    env_key = prng.fold_in(carry.env_key, t)
    learner_key = prng.fold_in(carry.learner_key, t)
    params, env_state = carry.env_params, carry.env_state
    full = overrides_step(learner)
    if full:  # the learner reads the round's whole loss (module docstring)
        state, query = learner.step(carry.state, env.loss_fn(params, t, env_key), learner_key)
        observed = query.observed
        env_state, _, info = env.evaluate(params, env_state, t, query, env_key)
    else:
        query = learner.ask(carry.state, learner_key)
        env_state, observed, info = env.evaluate(params, env_state, t, query, env_key)
    # Checks on bandit rounds only: a check on a convex round's losses changes how XLA fuses
    # StABL-BCO's update (the last bit of its losses), and values must not depend on checks.
    bandit = hasattr(query, "play_probs")
    if validate and bandit:
        checks.traced_check_losses("observed loss", observed, t)
    if not full:
        state = learner.tell(carry.state, query, observed)
    if validate and bandit:
        mixed = getattr(learner, "num_mixed", 1)  # a learner without it mixes one row
        checks.traced_check_distribution("play distribution", query.play_probs, t, mixed)
    out = {
        name: learner.restarted(carry.state, state)
        if name == RESTART_TRACE
        else _trace(name, query, observed, info)
        for name in fields
    }
    return dataclasses.replace(carry, state=state, env_state=env_state), out


def overrides_step(learner: Any) -> bool:
    """Whether ``learner``'s class replaces the generic ``step`` with its own: a full-information
    learner (:class:`~stabl_jax.bco.FullInfoOGD`), run only on oblivious environments."""
    return sum("step" in vars(c) for c in type(learner).__mro__) > 1


def reveals_queried_only(env: Any, fields: tuple[str, ...]) -> bool:
    """Whether :func:`simulate` draws only the queried arms' losses of ``env`` for these traces:
    no ``expected_loss`` and :func:`~stabl_jax.envs.base.reveals_lazily`; same values either way."""
    return "expected_loss" not in fields and reveals_lazily(env)


def _chunk_one(
    learner: Any,
    env: Any,
    fields: tuple[str, ...],
    validate: bool,
    carry: RunCarry,
    t0: jax.Array,
    length: int,
) -> tuple[RunCarry, Any]:
    ts = t0 + jnp.arange(length, dtype=jnp.int32)
    return jax.lax.scan(partial(_round, learner, env, fields, validate), carry, ts)


@partial(
    jax.jit,
    static_argnames=("learner", "env", "length", "plan", "fields", "validate", "kernel"),
    donate_argnames=("carry",),
)
def run_chunk(
    learner: Any,
    env: Any,
    carry: RunCarry,
    t0: jax.Array,
    length: int,
    plan: Any,
    fields: tuple[str, ...] = TRACE_FIELDS,
    validate: bool = False,
    kernel: str = "xla",
) -> Any:
    """Advance every run by ``length`` rounds from round ``t0``, laid out by ``plan``.

    Args:
      learner, env: the rollout's learner and environment (static).
      carry: the stacked :class:`RunCarry` (donated).
      t0: ``()`` int32 first round.
      length: rounds (static).
      plan: a :class:`stabl_jax.sharding.RunsPlan`.
      fields: the traces to record.
      validate: run the checks under ``checkify``.
      kernel: ``"xla"`` or ``"pallas"`` (:func:`stabl_jax.kernels.chunk_step`).

    Returns:
      ``(carry, outputs)``, outputs ``(R, length, ...)``; with ``validate``,
      ``(error, (carry, outputs))``, the values bitwise those without checks.
    """
    if kernel == "pallas":
        interpret = kernels.interpreted(plan.mesh)
        # The kernel's per-round inputs of one block within the chunk budget.
        keys = (carry.env_key, carry.learner_key)
        inputs = kernels.input_bytes_per_round(learner, fields, env, keys)
        max_rounds = auto_chunk_size(plan.block, length, bytes_per_round=inputs)
        drawn = tuple(dict.fromkeys((*fields, "observed"))) if validate else fields
        step = kernels.chunk_step(
            learner, env, drawn, length, interpret=interpret, max_rounds=max_rounds
        )
        if validate:
            step = _checked_chunks(step, learner, fields, length)
    else:
        one = partial(_chunk_one, learner, env, fields, validate, length=length)
        step = jax.vmap(one, in_axes=(0, None))
    run = sharding.distribute(step, plan)
    if not validate:
        return run(carry, t0)
    return checkify.checkify(run, errors=checkify.user_checks)(carry, t0)


def _checked_chunks(
    step: Callable[[Any, jax.Array], tuple[Any, dict]],
    learner: Any,
    fields: tuple[str, ...],
    length: int,
) -> Callable[[Any, jax.Array], tuple[Any, dict]]:
    """The kernel's chunk ``step`` under ``checkify``: observed losses finite and in [0, 1], and
    the play distribution at the chunk's end a distribution."""
    mixed = getattr(learner, "num_mixed", 1)

    def checked(carry: Any, t0: jax.Array) -> tuple[Any, dict]:
        carry, out = step(carry, t0)
        observed = out["observed"]  # (runs, L, Q)
        bad = ~(jnp.isfinite(observed) & (observed >= 0.0) & (observed <= 1.0))
        first = jnp.argmax(jnp.any(bad, axis=(0, 2)))
        checks.traced_check_losses("observed loss", observed[:, first], t0 + first)
        probe = jax.random.key(0)  # the play distribution does not depend on the key

        def distribution(state: Any) -> None:
            probs = learner.ask(state, probe).play_probs
            checks.traced_check_distribution("play distribution", probs, t0 + length, mixed)

        jax.vmap(distribution)(carry.state)
        return carry, {name: out[name] for name in fields}

    return checked


@dataclasses.dataclass(frozen=True)
class _RaisingLowered:
    """A lowered checkified chunk whose compiled form raises the first failed check, else returns
    ``(carry, outputs)``."""

    lowered: Any

    def compile(self) -> Callable[[Any, jax.Array], Any]:
        compiled = self.lowered.compile()

        def call(carry: Any, t0: jax.Array) -> Any:
            err, result = compiled(carry, t0)
            sharding.to_host(err).throw()  # on every process's host: no collective to deadlock
            return result

        return call


#: :func:`auto_chunk_size` gives one chunk's outputs this share of the available memory ...
CHUNK_MEMORY_FRACTION = 1 / 8
#: ... but never less than this (a small machine still gets useful chunks) nor more than this.
CHUNK_BUDGET_RANGE = (16 * 2**20, 2 * 2**30)


def available_memory_bytes() -> int:
    """Memory a chunk may use: the smaller of the host's available memory and, on an
    accelerator, the first device's free memory."""
    host = None
    with contextlib.suppress(OSError), open("/proc/meminfo") as f:
        kib = next((line.split()[1] for line in f if line.startswith("MemAvailable:")), None)
        host = None if kib is None else int(kib) * 1024
    if host is None:
        try:
            host = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            host = 4 * 2**30  # unknown platform: assume a small machine
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(min(host, stats["bytes_limit"] - stats.get("bytes_in_use", 0)))
    return int(host)


def auto_chunk_size(
    num_runs: int,
    horizon: int,
    budget_bytes: int | None = None,
    bytes_per_round: int = _BYTES_PER_ROUND,
) -> int:
    """Rounds per chunk so that ``R x chunk x bytes_per_round`` stays under ``budget_bytes``
    (``None``: :data:`CHUNK_MEMORY_FRACTION` of :func:`available_memory_bytes`, clipped to
    :data:`CHUNK_BUDGET_RANGE`)."""
    if budget_bytes is None:
        low, high = CHUNK_BUDGET_RANGE
        budget_bytes = int(min(high, max(low, available_memory_bytes() * CHUNK_MEMORY_FRACTION)))
    per_round = max(1, num_runs) * bytes_per_round
    return int(max(1, min(horizon, budget_bytes // per_round)))


def simulate(
    learner: Any,
    env: Any,
    key: jax.Array,
    num_runs: int,
    *,
    horizon: int | None = None,
    params: Any = None,
    traces: tuple[str, ...] | None = None,
    validate: bool = False,
    env_params: Any = None,
    options: SimOptions = SimOptions(),
) -> SimResult:
    """Simulate ``R = num_runs`` runs of ``learner`` on ``env`` for ``T`` rounds.

    Args:
      learner: a learner (``init``, ``ask``, ``tell``) with ``env``'s ``num_arms`` (or ``dim``
        and ``domain``) and ``horizon >= T``.
      env: an environment with ``evaluate``, or an oblivious bandit one with a pure ``loss``.
      key: a typed PRNG key (``jax.random.key(seed)``).
      num_runs: ``R`` (>= 1).
      horizon: ``T``; default ``env.horizon`` (else ``learner.horizon``).
      params: learner params (``None``: the defaults); leaves ``(R, ...)`` are per run.
      traces: the traces to record (:data:`QUERY_TRACES`, ``info`` entries, and
        :data:`RESTART_TRACE` for a learner with ``records_restarts``); ``None``:
        ``env.trace_names``.
      validate: check losses in [0, 1] and the play distribution; results unchanged, slower.
      env_params: ``(R, ...)`` environment parameters instead of ``env.sample_params``.
      options: a :class:`SimOptions`.

    Returns:
      A :class:`SimResult` with ``(R, T, ...)`` traces.

    Example:
      >>> import jax
      >>> from stabl_jax import SimOptions, StABL, ExpertAdvice, simulate
      >>> env = ExpertAdvice(num_arms=5, horizon=64)
      >>> res = simulate(StABL(num_arms=5, horizon=64), env, jax.random.key(0), num_runs=3,
      ...                options=SimOptions(chunk_size=32))
      >>> res.loss.shape
      (3, 64)
    """
    num_runs, validate = _check_call(learner, env, num_runs, validate, options)
    fields, names, rollout_env, kernel = _rollout(learner, env, traces, validate, options.kernel)
    horizon = _check_pairing(learner, env, horizon)
    checks.check_key("key", key)
    params = _learner_params(learner, params, num_runs)
    threads = 1 if options.traces_on_device else options.host_threads
    plan = sharding.plan_runs(num_runs, options.runs_per_block, host_threads=threads)
    # run_chunks gets the only reference to the first carry: it frees it after the first chunk.
    first = [_first_carry(learner, env, rollout_env, key, plan, params, env_params, options)]
    chunk_size = options.chunk_size
    if chunk_size is None:  # from the traces' bytes per round (and the kernel's inputs)
        per_round = _round_bytes(learner, rollout_env, first[0], fields)
        if kernel == "pallas":
            keys = (first[0].env_key, first[0].learner_key)
            per_round += kernels.input_bytes_per_round(learner, fields, rollout_env, keys)
        chunk_size = auto_chunk_size(num_runs, horizon, bytes_per_round=per_round)
    carry, arrays, compile_s, run_s = run_chunks(
        _lowering(learner, rollout_env, plan, fields, validate, kernel),
        first.pop(),
        horizon,
        chunk_size,
        options.progress,
        checkpoint=options.checkpoint,
        host_threads=plan.host_threads,
        names=fields,
        on_device=options.traces_on_device,
    )
    arrays, carry = sharding.unpad((arrays, sharding.to_host(carry)), plan)
    if validate and _query_kind(learner) == "dim":
        _check_convex_traces(arrays, options.first_run)
    offered = tuple(dict.fromkeys(QUERY_TRACES + names))
    return SimResult(arrays, carry, compile_s, run_s, offered, kernel, env)


def _check_call(
    learner: Any, env: Any, num_runs: int, validate: bool, options: SimOptions
) -> tuple[int, bool]:
    """``(num_runs, validate)`` checked, after the interfaces of ``learner`` and ``env``."""
    checks.check_interface("learner", learner, "a learner", ("init", "ask", "tell"))
    checks.check_interface("env", env, "an environment", ("sample_params",))
    num_runs = checks.check_int("num_runs", num_runs, minimum=1)
    validate = checks.check_bool("validate", validate)
    if not isinstance(options, SimOptions):
        raise TypeError(
            f"options must be a SimOptions, got {options!r} ({type(options).__name__}): write "
            "options=stabl_jax.SimOptions(chunk_size=..., ...)"
        )
    return num_runs, validate


def _rollout(
    learner: Any, env: Any, traces: tuple[str, ...] | None, validate: bool, kernel: str
) -> tuple[tuple[str, ...], tuple[str, ...], Any, str]:
    """``(fields, names, rollout_env, kernel)``: the traces to record, those ``env`` offers, the
    environment stepped and the kernel (``"auto"`` resolved)."""
    bandit = as_environment(env) is not env
    names = tuple(getattr(env, "trace_names", TRACE_FIELDS if bandit else ()))
    restarts = (RESTART_TRACE,) if getattr(learner, "records_restarts", False) else ()
    allowed = tuple(dict.fromkeys(QUERY_TRACES + names + restarts))
    fields = names if traces is None else checks.check_names("traces", traces, allowed)
    rollout_env = as_environment(env, reveal_all="expected_loss" in fields, validate=validate)
    if kernel == "pallas":
        kernels.check_supported(learner, rollout_env, fields, validate)
    elif kernel == "auto":
        kernel = kernels.auto_kernel(learner, rollout_env, fields, validate)
    if overrides_step(learner) and not hasattr(rollout_env, "loss_fn"):
        raise TypeError(
            f"{type(learner).__name__} overrides step (it reads the round's whole loss), so it "
            f"runs only on an oblivious environment with loss_fn; {type(env).__name__} has none"
        )
    return fields, names, rollout_env, kernel


def _learner_params(learner: Any, params: Any, num_runs: int) -> Any:
    """``params`` (``None``: the learner's defaults), checked for ``num_runs`` runs."""
    params = learner.default_params if params is None else params
    check_run_params(params, num_runs)
    if hasattr(learner, "check_params"):
        learner.check_params(params, batch=num_runs)
    else:
        checks.check_param_values(params, {}, batch=num_runs)
    return params


def _first_carry(
    learner: Any,
    env: Any,
    rollout_env: Any,
    key: jax.Array,
    plan: Any,
    params: Any,
    env_params: Any,
    options: SimOptions,
) -> RunCarry:
    """The padded runs' initial :class:`RunCarry`, sharded by ``plan``, holding none of the
    caller's arrays."""
    num_runs, runs_per_point = plan.num_runs, options.runs_per_point
    params = sharding.pad_params(params, plan)
    if runs_per_point is not None and num_runs % runs_per_point:
        raise ValueError(
            f"num_runs={num_runs} is not a multiple of runs_per_point={runs_per_point}: "
            "simulate points x runs_per_point runs (one group of runs per sweep point)"
        )
    keys = run_keys(key, plan.padded_runs, options.first_run, runs_per_point)
    if env_params is not None:
        for leaf in jax.tree.leaves(env_params):
            if jnp.shape(leaf)[:1] != (num_runs,):
                raise ValueError(
                    f"env_params leaves must have leading axis num_runs={num_runs}, got shape "
                    f"{jnp.shape(leaf)}"
                )
        env_params = sharding.pad_params(env_params, plan)

    def init(keys: jax.Array, params: Any, env_params: Any) -> RunCarry:
        drawn = sample_env_params(env, keys) if env_params is None else env_params
        return _init_from_streams(learner, rollout_env, _run_streams(keys), drawn, params)

    carry = sharding.init_sharded(init, plan, keys, params, env_params)
    return cast("RunCarry", _owned(carry, given=(params, env_params)))


def _lowering(
    learner: Any, env: Any, plan: Any, fields: tuple[str, ...], validate: bool, kernel: str
) -> Callable[[Any, jax.Array, int], Any]:
    """``lower(carry, t0, length)``: the lowered :func:`run_chunk`, for :func:`run_chunks`."""

    def lower(c: Any, t0: jax.Array, n: int) -> Any:
        args = (learner, env, c, t0, n, plan, fields)
        if validate:
            return _RaisingLowered(run_chunk.lower(*args, validate=True, kernel=kernel))
        return run_chunk.lower(*args, kernel=kernel)

    return lower


def _owned(carry: Any, given: Any) -> Any:
    """``carry`` with a copy of every leaf that is one of ``given``'s arrays: the chunk program
    donates the carry, never a caller's arrays."""
    ids = {id(x) for x in jax.tree.leaves(given)}
    return jax.tree.map(lambda x: jnp.array(x, copy=True) if id(x) in ids else x, carry)


def _check_convex_traces(arrays: Mapping[str, np.ndarray], first_run: int) -> None:
    """``validate`` for convex runs, on the host after the run: ``ValueError`` naming the trace,
    run and round of the first loss or point that is not finite."""
    for name in ("loss", "observed", "played", "points"):
        values = np.asarray(arrays[name]) if name in arrays else None
        if values is None or np.isfinite(values).all():
            continue
        run, t = (int(i) for i in np.argwhere(~np.isfinite(values))[0][:2])
        raise ValueError(
            f"{name} of run {first_run + run} at round {t} is {values[run, t]}, not finite: the "
            "convex environment's loss (or the learner fed it) produced NaN or inf; convex "
            "runs are checked after they finish (docs/reliability.md, row E11)"
        )


def _check_pairing(learner: Any, env: Any, horizon: int | None) -> int:
    """The horizon ``T`` to simulate, after checking that ``learner`` fits ``env``: equal
    ``num_arms`` (or ``dim`` and ``domain``), ``T <= env.horizon`` and ``T <= learner.horizon``."""
    plays, takes = _query_kind(learner), _query_kind(env)
    if plays and takes and plays != takes:
        raise TypeError(
            f"learner {type(learner).__name__} is {_KINDS[plays][0]} ({plays}="
            f"{getattr(learner, plays)}) but env {type(env).__name__} is {_KINDS[takes][1]} "
            f"({takes}={getattr(env, takes)}): pair bandit learners (stabl_jax.make) with "
            "bandit environments (stabl_jax.make_env, envs.hpo.HPOEnv) and BCO learners "
            "(registry.BCO_LEARNERS) with convex environments (registry.CONVEX_ENVS)"
        )
    for name in ("num_arms", "dim", "domain"):
        mine, theirs = getattr(learner, name, None), getattr(env, name, None)
        if mine is not None and theirs is not None and mine != theirs:
            raise ValueError(f"learner.{name}={mine} does not match env.{name}={theirs}")
    env_horizon = getattr(env, "horizon", None)
    if horizon is None:
        horizon = learner.horizon if env_horizon is None else env_horizon
    horizon = checks.check_horizon(horizon)
    if env_horizon is not None and horizon > env_horizon:
        raise ValueError(f"horizon must be <= env.horizon={env_horizon}, got {horizon}")
    if horizon > learner.horizon:
        raise ValueError(
            f"learner.horizon={learner.horizon} is shorter than the {horizon} rounds simulated: "
            f"build the learner with horizon >= {horizon} (its step sizes and history lengths "
            "are set from its horizon)"
        )
    return horizon


#: The two kinds of learner and environment, by the size each is built with, as named in messages.
_KINDS = {
    "num_arms": ("a bandit learner", "a bandit environment"),
    "dim": ("a BCO learner", "a convex environment"),
}


def _query_kind(x: Any) -> str | None:
    """``"num_arms"`` for a bandit learner or environment, ``"dim"`` for a BCO one, or ``None``."""
    return next((name for name in _KINDS if hasattr(x, name)), None)


def _round_bytes(learner: Any, env: Any, carry: Any, fields: tuple[str, ...]) -> int:
    """Bytes of one run's recorded traces per round (at least :data:`_BYTES_PER_ROUND`), from
    one round traced by ``jax.eval_shape`` and cached."""
    leaves, tree = jax.tree.flatten(carry)
    shapes = tuple((x.shape[1:], x.dtype) for x in leaves)
    x64 = bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]
    key = (learner, env, fields, tree, shapes, x64)
    try:
        hash(key)
    except TypeError:  # an unhashable learner or environment: trace it every time
        return _traced_round_bytes.__wrapped__(*key)
    return _traced_round_bytes(*key)


@functools.lru_cache(maxsize=256)
def _traced_round_bytes(
    learner: Any, env: Any, fields: tuple[str, ...], tree: Any, shapes: tuple, x64: bool
) -> int:
    del x64  # part of the cache key only: it changes the traced dtypes
    one = jax.tree.unflatten(tree, [jax.ShapeDtypeStruct(s, d) for s, d in shapes])
    chunk = partial(_chunk_one, learner, env, fields, False, length=1)
    _, out = jax.eval_shape(chunk, one, jnp.zeros((), jnp.int32))
    return max(_BYTES_PER_ROUND, sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(out)))


def check_run_params(params: Any, num_runs: int) -> None:
    """Params leaves are scalars (shared) or have a leading axis of size ``num_runs``."""
    for leaf in jax.tree.leaves(params):
        if jnp.ndim(leaf) > 0 and jnp.shape(leaf)[0] != num_runs:
            raise ValueError(
                f"per-run params must have leading axis num_runs={num_runs}, got shape "
                f"{jnp.shape(leaf)}"
            )


def run_chunks(
    lower: Callable[[Any, jax.Array, int], Any],
    carry: Any,
    horizon: int,
    chunk_size: int,
    progress: bool | Callable[[int, int], None] = False,
    checkpoint: Any = None,
    host_threads: int = 1,
    names: tuple[str, ...] | None = None,
    on_device: bool = False,
) -> tuple[Any, dict[str, Any], float, float]:
    """Drive a chunked scan over rounds ``0..horizon-1`` (shared by every simulator).

    Args:
      lower: ``lower(carry, t0, length)``, the lowered chunk program ``(carry, t0) -> (carry,
        outputs (R, length, ...))``, compiled once per distinct length.
      carry: the stacked per-run loop state, consumed (donated).
      horizon: number of rounds.
      chunk_size: rounds per chunk (>= 1).
      progress: ``True`` for a tqdm bar, or a callback ``(done, total)`` after each chunk.
      checkpoint: ``None``, or an object with ``restore(carry, horizon, names) -> (carry,
        outputs, t0) | None`` and ``save(carry, outputs, start, stop)``.
      host_threads: equal groups of runs, each stepped from its own thread; results unchanged.
      names: the outputs recorded, for ``checkpoint.restore`` (``None``: all it holds).
      on_device: keep the outputs in ``(R, horizon, ...)`` device buffers.

    Returns:
      ``(carry, outputs (R, horizon, ...) per name, compile_seconds, run_seconds)``.
    """
    chunk = checks.check_int("chunk_size", chunk_size, minimum=1)
    threads = checks.check_int("host_threads", host_threads, minimum=1)
    compiled: dict[int, Any] = {}
    compile_s = run_s = 0.0
    bar = progress_bar(progress, horizon)
    carry, arrays, t0 = _resume(checkpoint, carry, horizon, names)
    if t0:
        bar(t0)
    # The runs stay split in their threads' groups, joined only for a checkpoint and at the end.
    groups = _groups(carry, threads) if t0 < horizon else [carry]
    del carry
    # Without a checkpoint or threads, chunk k + 1 is dispatched before chunk k's outputs are
    # fetched, overlapping the copy with the device's work.
    overlap = checkpoint is None and threads == 1
    if on_device and not overlap:
        raise ValueError("on_device=True needs checkpoint=None and host_threads=1")
    pending: tuple[Any, int, int] | None = None
    while t0 < horizon:
        length = min(chunk, horizon - t0)
        t0_arr = jnp.asarray(t0, jnp.int32)
        if length not in compiled:
            start = time.perf_counter()
            compiled[length] = lower(groups[0], t0_arr, length).compile()
            compile_s += time.perf_counter() - start
        start = time.perf_counter()
        if overlap:
            carry, out = compiled[length](groups[0], t0_arr)
            groups = [carry]
            if on_device:
                arrays = _record_on_device(arrays, out, t0_arr, horizon)
            else:
                if pending is not None:
                    arrays = _record(arrays, jax.device_get(pending[0]), *pending[1:], horizon)
                    bar(pending[1] + pending[2])
                pending = (out, t0, length)
        else:
            groups, out = _threaded(compiled[length], groups, t0_arr)
            arrays = _record(arrays, out, t0, length, horizon)
        run_s += time.perf_counter() - start
        if checkpoint is not None:
            checkpoint.save(_join(groups), out, t0, t0 + length)
        t0 += length
        if not overlap or on_device:
            bar(t0)
    start = time.perf_counter()
    if pending is not None:
        arrays = _record(arrays, jax.device_get(pending[0]), *pending[1:], horizon)
        bar(t0)
    jax.block_until_ready(arrays)  # device buffers: the last chunk's work is timed too
    run_s += time.perf_counter() - start
    return _join(groups), arrays, compile_s, run_s


def _resume(
    checkpoint: Any, carry: Any, horizon: int, names: tuple[str, ...] | None
) -> tuple[Any, dict[str, np.ndarray], int]:
    """``(carry, outputs, t0)`` to continue from: ``checkpoint``'s, or ``carry`` at round 0."""
    restored = checkpoint.restore(carry, horizon, names) if checkpoint is not None else None
    if restored is None:
        return carry, {}, 0
    del carry  # the restored state: held by the returned carry only
    carry, arrays, t0 = restored
    del restored
    if not 0 < t0 <= horizon:
        raise ValueError(f"checkpoint resumes at round {t0}, outside [1, {horizon}]")
    return carry, arrays, t0


def _record(
    arrays: dict[str, np.ndarray], out: dict, t0: int, length: int, horizon: int
) -> dict[str, np.ndarray]:
    """``arrays`` with a chunk's ``(R, length, ...)`` outputs written at rounds ``t0 ..
    t0 + length - 1`` of preallocated ``(R, horizon, ...)`` arrays."""
    if arrays.keys() - out.keys():
        arrays = {name: value for name, value in arrays.items() if name in out}
    for name, value in out.items():
        value = np.asarray(value)
        if name not in arrays:
            if t0:  # a resumed run's checkpoint must hold every output
                raise ValueError(f"the checkpoint holds no {name!r} (it has {sorted(arrays)})")
            arrays[name] = np.empty((value.shape[0], horizon, *value.shape[2:]), value.dtype)
        arrays[name][:, t0 : t0 + length] = value
    return arrays


def _record_on_device(
    arrays: dict[str, Any], out: dict, t0: jax.Array, horizon: int
) -> dict[str, Any]:
    """:func:`_record` into donated device buffers."""
    for name, value in out.items():
        if name not in arrays:
            arrays[name] = jnp.empty((value.shape[0], horizon, *value.shape[2:]), value.dtype)
        arrays[name] = _write_chunk(arrays[name], value, t0)
    return arrays


@partial(jax.jit, donate_argnums=0)
def _write_chunk(buffer: jax.Array, value: jax.Array, t0: jax.Array) -> jax.Array:
    start = (jnp.zeros((), jnp.int32), t0) + (jnp.zeros((), jnp.int32),) * (value.ndim - 2)
    return jax.lax.dynamic_update_slice(buffer, value, start)


def _groups(tree: Any, num: int) -> list[Any]:
    """``num`` equal slices of the runs axis of every leaf (the tree itself for one)."""
    if num == 1:
        return [tree]
    size = jax.tree.leaves(tree)[0].shape[0] // num
    return [jax.tree.map(lambda x, i=i: x[i * size : (i + 1) * size], tree) for i in range(num)]


def _join(groups: list[Any]) -> Any:
    """The runs' groups of :func:`_groups` as one tree again (the group itself for one)."""
    if len(groups) == 1:
        return groups[0]
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *groups)


def _threaded(program: Any, groups: list[Any], t0: jax.Array) -> tuple[list[Any], dict]:
    """``(groups, host outputs)``: the chunk program on each group of runs, one host thread
    each (one group: this thread); outputs joined along the runs axis."""

    def one(carry: Any) -> tuple[Any, dict]:
        carry, out = program(carry, t0)
        return carry, jax.device_get(out)

    if len(groups) == 1:
        carry, out = one(groups[0])
        return [carry], out
    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        parts = list(pool.map(one, groups))
    out = {name: np.concatenate([o[name] for _, o in parts]) for name in parts[0][1]}
    return [c for c, _ in parts], out


def progress_bar(
    progress: bool | Callable[[int, int], None], total: int, unit: str = "round"
) -> Callable[[int], None]:
    """``update(done)``: calls ``progress(done, total)``, moves a tqdm bar (``True``) or nothing.

    The bar is drawn only when stderr is a terminal: a log file gets no bar.
    """
    if callable(progress):
        return lambda done: progress(done, total)
    if not progress:
        return lambda done: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit=unit, leave=False, disable=None)  # None: only on a terminal

    def update(done: int) -> None:
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def regenerate_losses(env: Any, carry: RunCarry, t_start: int, t_stop: int) -> jax.Array:
    """``(R, t_stop - t_start, n)`` losses of every arm, regenerated from the pure environment.

    Raises:
      ValueError: ``t_start`` negative, ``t_stop < t_start`` or ``t_stop > env.horizon``.
      TypeError: a round that is not an int.
    """
    t_start = checks.check_int("t_start", t_start, minimum=0)
    t_stop = checks.check_int("t_stop", t_stop, minimum=t_start)
    env_horizon = getattr(env, "horizon", None)
    if env_horizon is not None and t_stop > env_horizon:
        raise ValueError(
            f"cannot regenerate rounds up to {t_stop} of {type(env).__name__} with "
            f"horizon={env_horizon}: give the environment the runs were simulated on"
        )
    return _regenerate(env, carry.env_params, carry.env_key, t_start, t_stop - t_start)


@partial(jax.jit, static_argnames=("env", "t_start", "length"))
def _regenerate(
    env: Any, env_params: Any, env_keys: jax.Array, t_start: int, length: int
) -> jax.Array:
    ts = t_start + jnp.arange(length, dtype=jnp.int32)
    return jax.vmap(lambda p, k: arm_losses(env, p, k, ts))(env_params, env_keys)


def arm_losses(env: Any, params: Any, key: jax.Array, ts: jax.Array) -> jax.Array:
    """``(len(ts), n)`` every arm's loss of one run at rounds ``ts``, as the simulation drew it."""
    return jax.vmap(lambda t: env.loss(params, t, prng.fold_in(key, t)))(ts)
