"""Run any bandit learner against any environment: ``lax.scan`` over rounds inside ``vmap``
over runs, in chunks of rounds.

Randomness (typed keys, never reused):

- run ``i``: ``run_key = fold_in(key, i)``; from it ``fold_in(run_key, 0)`` draws the
  environment's per-run parameters, ``fold_in(run_key, 1)`` is the environment's key and
  ``fold_in(run_key, 2)`` the learner's; round ``t`` uses ``fold_in(env_key, t)`` and
  ``fold_in(learner_key, t)``.
- So run ``i`` draws the same numbers whatever ``num_runs``, chunk size or device layout, and
  two learners simulated with the same ``key`` see identical losses in every run (paired
  comparisons). Its arithmetic is bitwise identical too for the same ``runs_per_block``
  (:mod:`stabl_jax.sharding`: runs are split over every device JAX sees and stepped in blocks).

Nothing of size ``runs x T x arms`` is built: losses are generated inside the scan and the
per-round outputs are scalars (plus the ``num_queries`` queried arms).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from stabl_jax import checks, prng, sharding
from stabl_jax.learners.base import BanditLearner

TRACE_FIELDS: tuple[str, ...] = ("played", "arms", "loss", "expected_loss", "prob_best")
_BYTES_PER_ROUND = 32  # per run: 4 scalars + queried arms, generous


@chex.dataclass(frozen=True)
class RunCarry:
    """Per-run loop state (stacked on a leading runs axis)."""

    state: Any  # the learner's state
    env_params: Any  # the environment's per-run parameters
    env_key: jax.Array  # () key, round t uses fold_in(env_key, t)
    learner_key: jax.Array  # () key, round t uses fold_in(learner_key, t)


@dataclasses.dataclass
class SimResult:
    """Traces of a simulation, on the host.

    Attributes:
      played: ``(R, T)`` int32 played arm ``x_t``. (Each trace is ``None`` when ``simulate``
        was asked not to record it, ``traces=...``.)
      arms: ``(R, T, num_queries)`` int32 every queried arm (``arms[..., 0] == played``).
      loss: ``(R, T)`` float32 suffered loss ``l_t(x_t)``.
      expected_loss: ``(R, T)`` float32 ``<play_probs_t, l_t>``.
      prob_best: ``(R, T)`` float32 play probability of the arm with the smallest mean loss.
      carry: the final :class:`RunCarry` (learner states, env params and keys, runs-leading).
      compile_seconds: time spent compiling the chunk program(s).
      run_seconds: time spent running them (excluding compilation).
    """

    played: np.ndarray | None
    arms: np.ndarray | None
    loss: np.ndarray | None
    expected_loss: np.ndarray | None
    prob_best: np.ndarray | None
    carry: RunCarry
    compile_seconds: float
    run_seconds: float

    def _any_trace(self) -> np.ndarray:
        return next(getattr(self, n) for n in TRACE_FIELDS if getattr(self, n) is not None)

    @property
    def num_runs(self) -> int:
        return int(self._any_trace().shape[0])

    @property
    def horizon(self) -> int:
        return int(self._any_trace().shape[1])

    def traces(self) -> dict[str, np.ndarray]:
        """The recorded traces by name (those not recorded are left out)."""
        return {n: getattr(self, n) for n in TRACE_FIELDS if getattr(self, n) is not None}


def run_keys(key: jax.Array, num_runs: int, first_run: int = 0) -> jax.Array:
    """``(num_runs,)`` keys ``fold_in(key, i)``, ``i = first_run .. first_run + num_runs - 1``."""
    runs = first_run + jnp.arange(num_runs, dtype=jnp.uint32)
    return jax.vmap(lambda i: jax.random.fold_in(key, i))(runs)


def params_axes(params: Any) -> Any:
    """vmap axes for a params pytree: leaves with a leading axis are per run, scalars shared."""
    return jax.tree.map(lambda x: 0 if jnp.ndim(x) > 0 else None, params)


def _init_one(learner: Any, env: Any, run_key: jax.Array, params: Any) -> RunCarry:
    return RunCarry(
        state=learner.init(jax.random.fold_in(run_key, 3), params),
        env_params=env.sample_params(jax.random.fold_in(run_key, 0)),
        env_key=jax.random.fold_in(run_key, 1),
        learner_key=jax.random.fold_in(run_key, 2),
    )


@partial(jax.jit, static_argnames=("learner", "env"))
def init_runs(learner: Any, env: Any, keys: jax.Array, params: Any) -> RunCarry:
    """Stacked :class:`RunCarry` for runs with ``keys``; ``params`` shared or per run."""
    return jax.vmap(partial(_init_one, learner, env), in_axes=(0, params_axes(params)))(
        keys, params
    )


def _round(
    learner: Any, env: Any, carry: RunCarry, t: jax.Array, lazy: bool = False
) -> tuple[RunCarry, dict]:
    """One round of every trace. ``lazy``: the environment reveals only the queried arms'
    losses (``learner.play`` with ``env.loss_at``, bit for bit the same values), so no
    round's full loss vector is drawn; ``expected_loss`` (which needs it) is then not
    computed."""
    # prng.fold_in is jax.random.fold_in bit for bit, unrolled (faster inside the scan).
    env_key = prng.fold_in(carry.env_key, t)
    learner_key = prng.fold_in(carry.learner_key, t)
    best = env.best_arm(carry.env_params, t)
    if lazy:
        # Materialised once (as the full loss vector is on the other path), so that every
        # consumer reads the same bits rather than a recomputation fused into it.
        def reveal(arms: jax.Array) -> jax.Array:
            return jax.lax.optimization_barrier(env.loss_at(carry.env_params, t, env_key, arms))

        state, query, observed = learner.play(carry.state, reveal, learner_key)
        play_probs = query.play_probs
        out = {"played": query.arms[0], "arms": query.arms, "loss": observed[0].astype(jnp.float32)}
    else:
        loss = env.loss(carry.env_params, t, env_key)
        state, info = learner.step(carry.state, loss, learner_key)
        play_probs = info.play_probs
        out = {
            "played": info.arms[0],
            "arms": info.arms,
            "loss": info.loss.astype(jnp.float32),
            "expected_loss": info.expected_loss.astype(jnp.float32),
        }
    out["prob_best"] = play_probs[best].astype(jnp.float32)
    return carry.replace(state=state), out


def reveals_queried_only(learner: Any, fields: tuple[str, ...]) -> bool:
    """Whether :func:`simulate` draws only the queried arms' losses for these traces: when
    ``expected_loss`` (``<p_t, l_t>``, which needs every arm's loss) is not recorded and the
    learner's ``step`` is the base class's :meth:`~BanditLearner.play` with the loss vector
    indexed (every registry learner's), so ``play`` with ``env.loss_at`` is the same round."""
    return "expected_loss" not in fields and type(learner).step is BanditLearner.step


def _chunk_one(
    learner: Any,
    env: Any,
    carry: RunCarry,
    t0: jax.Array,
    length: int,
    fields: tuple[str, ...] = TRACE_FIELDS,
):
    ts = t0 + jnp.arange(length, dtype=jnp.int32)
    lazy = reveals_queried_only(learner, fields)

    def round_(c: RunCarry, t: jax.Array) -> tuple[RunCarry, dict]:
        c, out = _round(learner, env, c, t, lazy)
        return c, {name: out[name] for name in fields}

    return jax.lax.scan(round_, carry, ts)


@partial(jax.jit, static_argnames=("learner", "env", "length"))
def run_chunk(learner: Any, env: Any, carry: RunCarry, t0: jax.Array, length: int):
    """Advance every run by ``length`` rounds from round ``t0``.

    Returns ``(carry, outputs)`` with outputs of shape ``(R, length, ...)``.
    """
    return jax.vmap(partial(_chunk_one, learner, env), in_axes=(0, None, None))(carry, t0, length)


@partial(jax.jit, static_argnames=("learner", "env", "length", "plan", "fields", "validate"))
def run_chunk_planned(
    learner: Any,
    env: Any,
    carry: RunCarry,
    t0: jax.Array,
    length: int,
    plan: Any,
    fields: tuple[str, ...] = TRACE_FIELDS,
    validate: bool = False,
) -> Any:
    """:func:`run_chunk` laid out by a :class:`stabl_jax.sharding.RunsPlan`: the runs split
    over the plan's devices and stepped ``plan.block`` at a time; the same per-run results.
    Only the traces named in ``fields`` are output.

    With ``validate``, every round runs the learner's in-trace checks (``validate=True``,
    :class:`~stabl_jax.learners.base.Learner`) under ``checkify`` and the function returns
    ``(error, (carry, outputs))``; the values are bitwise those without checks.
    """
    lrn = dataclasses.replace(learner, validate=True) if validate else learner
    one = partial(_chunk_one, lrn, env, length=length, fields=fields)
    step = jax.vmap(lambda c, t: one(c, t), in_axes=(0, None))
    run = sharding.distribute(step, plan)
    if not validate:
        return run(carry, t0)
    return checkify.checkify(run, errors=checkify.user_checks)(carry, t0)


class _RaisingLowered:
    """A lowered checkified chunk whose compiled form raises the first failed check and
    otherwise returns ``(carry, outputs)`` like an unchecked chunk (what ``run_chunks`` runs)."""

    def __init__(self, lowered: Any) -> None:
        self.lowered = lowered

    def compile(self) -> Callable[[Any, jax.Array], Any]:
        compiled = self.lowered.compile()

        def call(carry: Any, t0: jax.Array) -> Any:
            err, result = compiled(carry, t0)
            err.throw()
            return result

        return call


#: :func:`auto_chunk_size` gives one chunk's outputs this share of the available memory ...
CHUNK_MEMORY_FRACTION = 1 / 8
#: ... but never less than this (a small machine still gets useful chunks) nor more than this.
CHUNK_BUDGET_RANGE = (16 * 2**20, 2 * 2**30)


def available_memory_bytes() -> int:
    """Memory a chunk may use now: the host's available memory (``MemAvailable`` of
    ``/proc/meminfo``, else free physical pages) and, when JAX runs on an accelerator, its
    free memory (``bytes_limit - bytes_in_use`` of the first device); the smaller."""
    host = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    host = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
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


def auto_chunk_size(num_runs: int, horizon: int, budget_bytes: int | None = None) -> int:
    """Rounds per chunk so that one chunk's outputs stay under ``budget_bytes``.

    A chunk's per-round outputs (``R x chunk``: played arm, queried arms, three floats; at
    most 32 bytes per run and round) exist once on the device and once on the host before
    they join the traces. ``budget_bytes=None`` gives them
    :data:`CHUNK_MEMORY_FRACTION` of :func:`available_memory_bytes` when the call starts,
    clipped to :data:`CHUNK_BUDGET_RANGE` (16 MiB to 2 GiB): a 16 GiB laptop with 12 GiB free
    gets 1.5 GiB chunks, a GPU with 70 GiB free is capped at 2 GiB. Results do not depend on
    the chunk size; a chunk boundary costs one host transfer and a progress update.
    """
    if budget_bytes is None:
        low, high = CHUNK_BUDGET_RANGE
        budget_bytes = int(min(high, max(low, available_memory_bytes() * CHUNK_MEMORY_FRACTION)))
    per_round = max(1, num_runs) * _BYTES_PER_ROUND
    return int(max(1, min(horizon, budget_bytes // per_round)))


def simulate(
    learner: Any,
    env: Any,
    key: jax.Array,
    num_runs: int,
    *,
    horizon: int | None = None,
    params: Any = None,
    chunk_size: int | None = None,
    progress: bool | Callable[[int, int], None] = False,
    validate: bool = False,
    checkpoint: Any = None,
    runs_per_block: int | None = None,
    first_run: int = 0,
    traces: tuple[str, ...] = TRACE_FIELDS,
    host_threads: int | None = None,
) -> SimResult:
    """Simulate ``num_runs`` independent runs of ``learner`` on ``env``.

    Args:
      learner: a bandit learner (static; see :mod:`stabl_jax.learners.base`).
      env: a bandit environment with the same ``num_arms``.
      key: a typed PRNG key (``jax.random.key(seed)``).
      num_runs: ``R`` (>= 1).
      horizon: rounds to play; defaults to ``env.horizon``.
      params: learner params; ``None`` uses ``learner.default_params``. Scalar leaves are
        shared by all runs; leaves with a leading axis of size ``R`` give one value per run (a
        hyperparameter sweep in one program).
      chunk_size: rounds per compiled chunk; ``None`` picks one from the memory available
        (:func:`auto_chunk_size`). Results are identical for every chunk size.
      progress: show a tqdm bar per chunk (``True``), or a callback ``(done, total)``.
      validate: check every round's losses (finite, in [0, 1]) and play distribution inside
        the compiled program (the learner's ``validate=True``); a failure raises
        ``checkify.JaxRuntimeError`` naming the round and the value. Results are unchanged.
        The command line always validates.
      checkpoint: a :class:`~stabl_jax.checkpoint.ChunkCheckpoint`: resume from it, and
        save the loop state and outputs after every chunk (see :func:`run_chunks`).
      runs_per_block: runs stepped together on a device (``None``: chosen, see
        :func:`stabl_jax.sharding.plan_runs`). The runs are split over every device JAX sees;
        the same ``runs_per_block`` gives bitwise-identical results on any number of devices.
      host_threads: on one CPU device, groups of blocks stepped concurrently from host
        threads (``None``: one per usable core when the blocks split evenly; see
        :func:`stabl_jax.sharding.plan_runs`). Results do not depend on it, bit for bit.
      first_run: index of the first run: the runs are ``first_run .. first_run + R - 1`` of
        ``key`` (a study simulated in batches of runs, :mod:`stabl_jax.streaming`).
      traces: which of :data:`TRACE_FIELDS` to record; the others are ``None`` in the result
        (less memory: ``loss`` and ``expected_loss`` are 8 of the 24 bytes per run and round).
        Without ``expected_loss`` (``<p_t, l_t>`` needs every arm's loss) the environment
        reveals only the queried arms' losses (``env.loss_at``: the same values, one draw per
        query instead of ``n``; :func:`reveals_queried_only`), the same runs.

    Returns:
      A :class:`SimResult` with ``(R, T)`` traces.

    Example:
      >>> import jax
      >>> from stabl_jax import StABL, ExpertAdvice, simulate
      >>> env = ExpertAdvice(num_arms=5, horizon=64)
      >>> res = simulate(StABL(num_arms=5, horizon=64), env, jax.random.key(0), num_runs=3)
      >>> res.loss.shape
      (3, 64)
    """
    num_runs = checks.check_int("num_runs", num_runs, minimum=1)
    horizon = env.horizon if horizon is None else checks.check_int("horizon", horizon)
    if horizon > env.horizon:
        raise ValueError(f"horizon must be <= env.horizon={env.horizon}, got {horizon}")
    if learner.num_arms != env.num_arms:
        raise ValueError(
            f"learner.num_arms={learner.num_arms} does not match env.num_arms={env.num_arms}"
        )
    checks.check_key("key", key)
    params = learner.default_params if params is None else params
    check_run_params(params, num_runs)
    if hasattr(learner, "check_params"):
        learner.check_params(params, batch=num_runs)
    chunk = auto_chunk_size(num_runs, horizon) if chunk_size is None else chunk_size
    for name in traces:
        checks.check_choice("traces", name, TRACE_FIELDS)
    fields = tuple(traces)
    plan = sharding.plan_runs(num_runs, runs_per_block, host_threads=host_threads)
    params = sharding.pad_params(params, plan)
    carry = sharding.init_sharded(
        partial(init_runs, learner, env),
        plan,
        run_keys(key, plan.padded_runs, checks.check_int("first_run", first_run, minimum=0)),
        params,
    )
    if validate:

        def lower(c: Any, t0: jax.Array, n: int) -> Any:
            return _RaisingLowered(
                run_chunk_planned.lower(learner, env, c, t0, n, plan, fields, validate=True)
            )

    else:

        def lower(c: Any, t0: jax.Array, n: int) -> Any:
            return run_chunk_planned.lower(learner, env, c, t0, n, plan, fields)

    carry, arrays, compile_s, run_s = run_chunks(
        lower,
        carry,
        horizon,
        chunk,
        progress,
        checkpoint=checkpoint,
        host_threads=plan.host_threads,
    )
    arrays, carry = sharding.unpad((arrays, carry), plan)
    arrays = {name: arrays.get(name) for name in TRACE_FIELDS}
    return SimResult(**arrays, carry=carry, compile_seconds=compile_s, run_seconds=run_s)


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
) -> tuple[Any, dict[str, np.ndarray], float, float]:
    """Drive a chunked scan over rounds ``0..horizon-1`` (shared by every simulator).

    Args:
      lower: ``lower(carry, t0, length)`` returns the lowered chunk program (``jit(...).lower``)
        whose compiled form maps ``(carry, t0)`` to ``(carry, outputs)`` with outputs of shape
        ``(R, length, ...)``. One program is compiled per distinct chunk length (at most two),
        ahead of time, so compile and run times are measured apart.
      carry: the stacked per-run loop state.
      horizon: number of rounds.
      chunk_size: rounds per chunk (>= 1); results do not depend on it.
      progress: ``True`` for a tqdm bar, or a callback ``(done, total)`` after each chunk.
      checkpoint: ``None`` (nothing saved), or an object with
        ``restore(carry) -> (carry, outputs so far, t0) | None``, called once before the first
        chunk (the run continues from round ``t0``), and
        ``save(carry, chunk_outputs, start, stop)``, called after each chunk
        (:class:`stabl_jax.checkpoint.ChunkCheckpoint` writes them atomically).
      host_threads: split the runs into this many equal groups, each stepped by the same
        compiled program from its own thread (:mod:`stabl_jax.sharding`, "Host threads");
        ``R`` must be a multiple of it. Outputs and carry are those of one call.

    Returns:
      ``(carry, outputs (R, horizon, ...) per name, compile_seconds, run_seconds)``.
    """
    chunk = checks.check_int("chunk_size", chunk_size, minimum=1)
    threads = checks.check_int("host_threads", host_threads, minimum=1)
    step = _threaded(threads)
    compiled: dict[int, Any] = {}
    compile_s = run_s = 0.0
    pieces: dict[str, list[np.ndarray]] = {}
    bar = _progress_bar(progress, horizon)
    t0 = 0
    restored = checkpoint.restore(carry) if checkpoint is not None else None
    if restored is not None:
        carry, done, t0 = restored
        if not 0 < t0 <= horizon:
            raise ValueError(f"checkpoint resumes at round {t0}, outside [1, {horizon}]")
        pieces = {name: [value] for name, value in done.items()}
        bar(t0)
    while t0 < horizon:
        length = min(chunk, horizon - t0)
        t0_arr = jnp.asarray(t0, jnp.int32)
        if length not in compiled:
            start = time.perf_counter()
            compiled[length] = lower(_groups(carry, threads)[0], t0_arr, length).compile()
            compile_s += time.perf_counter() - start
        start = time.perf_counter()
        carry, out = step(compiled[length], carry, t0_arr)
        run_s += time.perf_counter() - start
        for name, value in out.items():
            pieces.setdefault(name, []).append(np.asarray(value))
        if checkpoint is not None:
            checkpoint.save(carry, out, t0, t0 + length)
        t0 += length
        bar(t0)
    arrays = {name: np.concatenate(parts, axis=1) for name, parts in pieces.items()}
    return carry, arrays, compile_s, run_s


def _groups(tree: Any, num: int) -> list[Any]:
    """``num`` equal slices of the runs axis of every leaf (the tree itself for one)."""
    if num == 1:
        return [tree]
    size = jax.tree.leaves(tree)[0].shape[0] // num
    return [jax.tree.map(lambda x, i=i: x[i * size : (i + 1) * size], tree) for i in range(num)]


def _threaded(num: int) -> Callable[[Any, Any, jax.Array], tuple[Any, dict]]:
    """``step(program, carry, t0) -> (carry, host outputs)``: the chunk program on ``num``
    groups of runs at once, one host thread each (JAX releases the GIL while it runs)."""

    def one(program: Any, carry: Any, t0: jax.Array) -> tuple[Any, dict]:
        carry, out = program(carry, t0)
        return carry, jax.device_get(out)

    if num == 1:
        return one

    def step(program: Any, carry: Any, t0: jax.Array) -> tuple[Any, dict]:
        with ThreadPoolExecutor(max_workers=num) as pool:
            parts = list(pool.map(lambda c: one(program, c, t0), _groups(carry, num)))
        carry = jax.tree.map(lambda *xs: jnp.concatenate(xs), *[c for c, _ in parts])
        out = {name: np.concatenate([o[name] for _, o in parts]) for name in parts[0][1]}
        return carry, out

    return step


def _progress_bar(progress: bool | Callable[[int, int], None], total: int) -> Callable[[int], None]:
    if callable(progress):
        return lambda done: progress(done, total)
    if not progress:
        return lambda done: None
    from tqdm.auto import tqdm

    bar = tqdm(total=total, unit="round", leave=False)

    def update(done: int) -> None:
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def regenerate_losses(env: Any, carry: RunCarry, t_start: int, t_stop: int) -> jax.Array:
    """``(R, t_stop - t_start, n)`` losses of every arm, regenerated from the pure environment.

    Use it on blocks of rounds/runs: the full ``R x T x n`` array is what the simulation
    avoids building.
    """
    return _regenerate(env, carry.env_params, carry.env_key, t_start, t_stop - t_start)


@partial(jax.jit, static_argnames=("env", "t_start", "length"))
def _regenerate(env: Any, env_params: Any, env_keys: jax.Array, t_start: int, length: int):
    ts = t_start + jnp.arange(length, dtype=jnp.int32)

    def one_run(p: Any, k: jax.Array) -> jax.Array:
        return jax.vmap(lambda t: env.loss(p, t, prng.fold_in(k, t)))(ts)

    return jax.vmap(one_run)(env_params, env_keys)


def num_chunks(horizon: int, chunk_size: int) -> int:
    return math.ceil(horizon / chunk_size)
