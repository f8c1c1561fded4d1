"""A chunk of bandit rounds for a block of runs in one Pallas kernel:
``SimOptions(kernel="pallas")`` of ``simulate``.

One ``pallas_call`` steps ``rows`` runs through ``L`` rounds in a ``fori_loop``, the
learner's state on chip, writing each round's traces. Round ``t`` draws with the XLA path's
keys and rules (``sampling.uniforms(fold_in(learner_key, t), Q)``, ``loss(params, t,
fold_in(env_key, t))``), hashed in the kernel (:mod:`stabl_jax.threefry`) where
:func:`draws_inside`, else drawn outside and read. So one seed draws the same arms on both
paths; probabilities agree to float32 rounding (importance weights ``1/P(t)`` can amplify
it over a long run).

Arms are padded to a power of two >= 16 with log-weight ``-inf``. Compiled by Triton on a
GPU, run in interpret mode elsewhere.

Supported (:func:`check_supported`): :class:`~stabl_jax.learners.EXP3` and
:class:`~stabl_jax.learners.StABL` themselves, float32, oblivious bandit environments and
the traces of :data:`FIELDS`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from stabl_jax import estimators, prng, sampling, threefry
from stabl_jax.envs.base import ObliviousBandit, draws_from_words
from stabl_jax.learners import EXP3, StABL

#: ``simulate``'s ``kernel`` choices: the XLA rollout, this kernel, or the default choice.
KERNELS: tuple[str, ...] = ("auto", "xla", "pallas")
#: The traces the kernel records (``simulate``'s ``QUERY_TRACES`` of a bandit, and the
#: oblivious environment's ``expected_loss``).
FIELDS: tuple[str, ...] = ("played", "arms", "loss", "observed", "expected_loss", "prob_best")
#: Runs per program on a GPU: at most this many, fewer where their state would exceed
#: :data:`GPU_THREAD_FLOATS` a thread (it lives in registers), never fewer than 16.
GPU_ROWS = 64
#: Warps per program on a GPU (Triton's ``num_warps``).
GPU_WARPS = 4
#: State floats a GPU thread holds at most: more spills registers on sm_90 (the ptxas counts
#: of ``experiments/gpu_compile.py``, docs/gpu.md).
GPU_THREAD_FLOATS = 32
#: Arms are padded to, and a GPU program holds, at least this many (powers of two).
_MIN_BLOCK = 16
#: Arms (after padding) up to which ``kernel="auto"`` takes the kernel (where it was measured
#: faster than the XLA path, docs/speed.md).
AUTO_MAX_ARMS = 128
#: One unit of :func:`cdf`, a fraction of a row's total (sums of units stay below 2^31).
CDF_UNIT = 2.0**-30


def _padded_arms(n: int) -> int:
    """``n`` rounded up to a power of two, at least :data:`_MIN_BLOCK`."""
    return max(_MIN_BLOCK, 1 << (n - 1).bit_length())


# --- maths on rows of runs: (rows, n_pad) arrays, one run a row ----------------------------------
def _iota(shape: tuple[int, ...], axis: int = -1) -> jax.Array:
    return jax.lax.broadcasted_iota(jnp.int32, shape, axis % len(shape))


def _pick(x: jax.Array, index: jax.Array) -> jax.Array:
    """``(rows,)`` ``x[r, index[r]]`` of ``(rows, m)`` ``x`` (a masked sum: exact)."""
    return jnp.sum(jnp.where(_iota(x.shape) == index[:, None], x, 0.0), axis=1)


def cdf(probs: jax.Array) -> jax.Array:
    """``(rows, m)`` int32 cumulative sums along the arms of non-negative ``probs`` ``(rows, m)``
    (each row of positive total) in units of :data:`CDF_UNIT` of the row's total, each entry
    truncated: ``jnp.cumsum``, a scan in Triton (no product on the FMA units). Integer sums
    are exact in any order the scan adds them, so each row never decreases and stays flat at
    every entry below one unit."""
    scale = (1.0 / CDF_UNIT) / jnp.sum(probs, axis=1)
    return jnp.cumsum((probs * scale[:, None]).astype(jnp.int32), axis=1)


def sample(probs: jax.Array, u: jax.Array, n: int) -> jax.Array:
    """``(rows,)`` int32 inverse-CDF draws from ``(rows, m)`` padded ``probs`` and ``(rows,)``
    uniforms ``u``: ``min(#{i : cdf_i <= u cdf_{n-1}}, n - 1)``, ``sampling.sample_index``'s
    rule on :func:`cdf`. An arm below one unit of its row's total is never drawn (probability 0
    included).

    Example:
      >>> import jax.numpy as jnp
      >>> probs = jnp.array([[0.2, 0.0, 0.8] + [0.0] * 13, [0.5, 0.5, 0.0] + [0.0] * 13])
      >>> sample(probs, jnp.array([0.5, 0.5]), 3).tolist()
      [2, 1]
    """
    sums = cdf(probs).astype(jnp.float32)
    total = _pick(sums, jnp.full(u.shape, n - 1, jnp.int32))
    below = jnp.where(sums <= (u * total)[:, None], 1.0, 0.0)
    return jnp.minimum(jnp.sum(below, axis=1).astype(jnp.int32), n - 1)


def _exp3_update(log_w: jax.Array, arm: jax.Array, step: jax.Array) -> jax.Array:
    """:func:`stabl_jax.estimators.exp3_log_update` on padded rows: bump ``log_w[r, arm[r]]``
    by ``step[r]`` and renormalise by the max-shifted logsumexp of the bumped row."""
    bumped = jnp.where(_iota(log_w.shape) == arm[:, None], log_w + step[:, None], log_w)
    top = jnp.max(bumped, axis=1)
    lse = jnp.log(jnp.sum(jnp.exp(bumped - top[:, None]), axis=1)) + top
    return bumped - lse[:, None]


def _fresh(shape: tuple[int, ...], n: int) -> jax.Array:
    """Uniform log-probabilities ``-log n`` on the real arms, ``-inf`` on the padding."""
    return jnp.where(_iota(shape) < n, jnp.float32(-math.log(n)), -jnp.inf)


# --- what each learner contributes ---------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Kernel:
    """A learner's part of the kernel. Runs-leading arrays outside, ``(K, runs, ...)`` at the
    kernel's boundary (``K`` rows of state per run), lists of ``K`` ``(rows, ...)`` inside.

    Attributes:
      learner: the learner (static).
      n_pad: arms after padding.
    """

    learner: Any
    n_pad: int

    queries: ClassVar[int] = 1

    @property
    def n(self) -> int:
        return self.learner.num_arms

    def pad(self, log_w: jax.Array) -> jax.Array:
        """``(..., n)`` log-weights padded with ``-inf`` to ``(..., n_pad)``."""
        extra = [(0, 0)] * (log_w.ndim - 1) + [(0, self.n_pad - self.n)]
        return jnp.pad(log_w, extra, constant_values=-jnp.inf)

    def pack(self, state: Any) -> tuple[tuple[jax.Array, ...], jax.Array]:
        """``(state arrays (K, runs, ...), coefficients (C, runs) float32)``."""
        raise NotImplementedError

    def unpack(self, state: Any, arrays: tuple[jax.Array, ...], length: int) -> Any:
        """The learner's state after ``length`` rounds, from the kernel's state arrays."""
        raise NotImplementedError

    def table(self, ts: jax.Array) -> jax.Array | None:
        """``(L, X)`` int32 values of the chunk's rounds shared by every run, or ``None``."""
        del ts
        return None

    def ask(self, coefs: list, state: tuple, u: list) -> tuple[list, list, jax.Array, Any]:
        """``(arms, probs, play, aux)`` from the ``Q`` uniforms ``u``: ``Q`` ``(rows,)`` arms, their
        probabilities, the play distribution ``(rows, n_pad)`` and what :meth:`tell` needs."""
        raise NotImplementedError

    def tell(self, coefs: list, state: tuple, row: list, query: tuple, observed: list) -> tuple:
        """The state after the round: ``query`` from :meth:`ask`, ``observed`` the ``Q``
        ``(rows,)`` losses at its arms, ``row`` this round's entries of :meth:`table`."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class _EXP3Kernel(_Kernel):
    """:class:`~stabl_jax.learners.EXP3` (Algorithm 2): state ``log w`` ``(1, runs, n_pad)``;
    coefficients ``eta``, ``gamma``."""

    def pack(self, state: Any) -> tuple[tuple[jax.Array, ...], jax.Array]:
        eta = jax.vmap(self.learner.learning_rate)(state.params)
        return (self.pad(state.log_weights)[None],), jnp.stack([eta, state.params.gamma])

    def unpack(self, state: Any, arrays: tuple[jax.Array, ...], length: int) -> Any:
        return dataclasses.replace(state, t=state.t + length, log_weights=arrays[0][0, :, : self.n])

    def ask(self, coefs: list, state: tuple, u: list) -> tuple[list, list, jax.Array, Any]:
        (log_w,), gamma = state[0], coefs[1][:, None]
        q = (1.0 - gamma) * jnp.exp(log_w) + gamma / self.n  # EXP3.play_distribution
        q = jnp.where(_iota(q.shape) < self.n, q, 0.0)
        arm = sample(q, u[0], self.n)
        return [arm], [_pick(q, arm)], q, None

    def tell(self, coefs: list, state: tuple, row: list, query: tuple, observed: list) -> tuple:
        (arm,), (prob,), _, _ = query
        value = estimators.signed_estimate(observed[0], prob, self.learner.feedback)
        return ([_exp3_update(state[0][0], arm, coefs[0] * value)],)


@dataclasses.dataclass(frozen=True)
class _StABLKernel(_Kernel):
    """:class:`~stabl_jax.learners.StABL` (Algorithm 1): state ``log v(t, k)``
    ``(B, runs, n_pad)``, ``log w_t(k)`` ``(B, runs)``, ``num_muted``; coefficients ``eta'_k``,
    ``eta_k``, ``log eta_k``."""

    queries: ClassVar[int] = 2

    @property
    def b(self) -> int:
        return self.learner.num_experts

    def pack(self, state: Any) -> tuple[tuple[jax.Array, ...], jax.Array]:
        experts = jnp.swapaxes(self.pad(state.expert_log_probs), 0, 1)
        meta_eta = jax.vmap(self.learner.meta_step_sizes)(state.params)
        expert_eta = jax.vmap(self.learner.expert_learning_rates)(state.params)
        coefs = jnp.concatenate([expert_eta, meta_eta, jnp.log(meta_eta)], axis=1).T
        return (experts, state.meta_log_weights.T, state.num_muted[None]), coefs

    def unpack(self, state: Any, arrays: tuple[jax.Array, ...], length: int) -> Any:
        experts, meta, muted = arrays
        return dataclasses.replace(
            state,
            t=state.t + length,
            expert_log_probs=jnp.swapaxes(experts, 0, 1)[..., : self.n],
            meta_log_weights=meta.T,
            num_muted=muted[0],
        )

    def table(self, ts: jax.Array) -> jax.Array:
        # Ensemble._advance: the experts restarting at t + 1 (ts is every run's state.t).
        return jax.vmap(self.learner.restarts)(ts + 1).astype(jnp.int32)

    def ask(self, coefs: list, state: tuple, u: list) -> tuple[list, list, jax.Array, Any]:
        experts, meta_log, _ = state
        v = [jnp.exp(x) for x in experts]
        # Line 8: p(t) = softmax(log w_t), as jax.nn.softmax computes it.
        top_w = meta_log[0]
        for w in meta_log[1:]:
            top_w = jnp.maximum(top_w, w)
        e = [jnp.exp(w - top_w) for w in meta_log]
        total_e = e[0]
        for x in e[1:]:
            total_e = total_e + x
        p = [x / total_e for x in e]
        # Lines 8-9 in StABL.distributions' order: mix, max and sum over k = 0..B-1.
        mix, top, total = p[0][:, None] * v[0], v[0], v[0]
        for k in range(1, self.b):
            mix = mix + p[k][:, None] * v[k]
            top = jnp.maximum(top, v[k])
            total = total + v[k]
        if self.learner.observation == "importance":
            top_sq = top * top
            obs = 0.5 * top_sq / jnp.sum(top_sq, axis=1)[:, None] + total / (2.0 * self.b)
        else:
            obs = jnp.where(_iota(mix.shape) < self.n, jnp.float32(1.0 / self.n), 0.0)
        arms = [sample(mix, u[0], self.n), sample(obs, u[1], self.n)]
        # Every expert's value at the observed arm now, so that no v(t, k) stays live to tell.
        at = [_pick(mix, arms[1])] + [_pick(x, arms[1]) for x in v]
        return arms, [_pick(mix, arms[0]), _pick(obs, arms[1])], mix, at

    def tell(self, coefs: list, state: tuple, row: list, query: tuple, observed: list) -> tuple:
        experts, meta_log, (muted,) = state
        (_, arm), (_, prob), _, (mix_at, *v_at) = query
        b = self.b
        expert_eta, meta_eta, log_meta_eta = coefs[:b], coefs[b : 2 * b], coefs[2 * b :]
        # Lines 11-13 from the observed arm x' = arms[1] (StABL._tell, Ensemble._advance).
        value = estimators.signed_estimate(observed[1], prob, self.learner.feedback)
        fresh = _fresh(experts[0].shape, self.n)
        new_experts, new_meta = [], []
        for k in range(b):
            regret_gain = value * (v_at[k] - mix_at)
            x = _exp3_update(experts[k], arm, expert_eta[k] * value)
            factor = 1.0 + meta_eta[k] * regret_gain  # estimators.meta_log_update
            alive = factor > 0.0
            w = jnp.where(alive, meta_log[k] + jnp.log(jnp.where(alive, factor, 1.0)), -jnp.inf)
            muted = muted + jnp.where(alive, 0, 1)
            restart = row[k] != 0
            new_experts.append(jnp.where(restart, fresh, x))
            new_meta.append(jnp.where(restart, log_meta_eta[k], w))
        return new_experts, new_meta, [muted]


_KERNELS: dict[type, type[_Kernel]] = {EXP3: _EXP3Kernel, StABL: _StABLKernel}


def check_supported(learner: Any, env: Any, fields: tuple[str, ...], validate: bool) -> None:
    """Raise ``ValueError`` unless the kernel runs ``learner`` on the rollout's ``env`` recording
    ``fields``."""
    supported = "supported: EXP3 or StABL (float32) on an oblivious bandit environment"
    if type(learner) not in _KERNELS or learner.dtype != "float32":
        what = type(learner).__name__ + (
            f" with dtype={learner.dtype}" if type(learner) in _KERNELS else ""
        )
        raise ValueError(f"kernel='pallas' does not run {what} ({supported}); use kernel='xla'")
    if not isinstance(env, ObliviousBandit):
        raise ValueError(
            f"kernel='pallas' does not run on {type(env).__name__} ({supported}, one "
            "with a pure loss(params, t, key) such as ExpertAdvice); use kernel='xla'"
        )
    others = [name for name in fields if name not in FIELDS]
    if others:
        raise ValueError(f"kernel='pallas' records only the traces {FIELDS}, got {others}")
    del validate  # checked on each chunk's outputs (stabl_jax.simulate), not inside


def auto_kernel(learner: Any, env: Any, fields: tuple[str, ...], validate: bool) -> str:
    """``"pallas"`` where the kernel is compiled (a GPU), supports the call and the arms pad to at
    most :data:`AUTO_MAX_ARMS`; else ``"xla"``."""
    arms = _padded_arms(getattr(learner, "num_arms", AUTO_MAX_ARMS + 1))
    if interpreted() or arms > AUTO_MAX_ARMS:
        return "xla"
    if not triton_available():
        _warn_no_triton()
        return "xla"
    try:
        check_supported(learner, env, fields, validate)
    except ValueError:
        return "xla"
    return "pallas"


@functools.cache
def triton_available() -> bool:
    """Whether the installed JAX has Pallas's Triton backend, which the kernel compiles with
    on a GPU (JAX's changelog deprecates it; docs/gpu.md)."""
    try:
        importlib.import_module("jax.experimental.pallas.triton")
    except ImportError:
        return False
    return True


@functools.cache
def _warn_no_triton() -> None:
    """One warning a process that ``kernel="auto"`` fell back to the XLA path."""
    warnings.warn(
        f"jax {jax.__version__} has no Pallas Triton backend "
        "(jax.experimental.pallas.triton): kernel='auto' runs the XLA path; install a JAX "
        "with it for the fused kernel, or pass kernel='xla' to silence this",
        RuntimeWarning,
        stacklevel=3,
    )


def draws_inside(env: Any, keys: tuple[jax.Array, ...] = ()) -> bool:
    """Whether the kernel hashes each round's uniforms and losses itself: ``env`` has
    ``losses_of_words`` (:func:`~stabl_jax.envs.base.draws_from_words`) and every key of
    ``keys`` is hashed unrolled (:func:`~stabl_jax.prng.unrolled`)."""
    inner = env.env if isinstance(env, ObliviousBandit) else env
    return draws_from_words(inner) and all(prng.unrolled(key) for key in keys)


def input_bytes_per_round(
    learner: Any, fields: tuple[str, ...], env: Any = None, keys: tuple[jax.Array, ...] = ()
) -> int:
    """Bytes per run and round the kernel reads besides the state (counted twice): the best arm
    where it draws inside, else the uniforms and every arm's loss too."""
    if env is not None and draws_inside(env, keys):
        return 2 * 4
    per = _padded_arms(learner.num_arms) + _KERNELS[type(learner)].queries
    return 2 * 4 * (per + ("prob_best" in fields))


def chunk_step(
    learner: Any,
    env: Any,
    fields: tuple[str, ...],
    length: int,
    *,
    interpret: bool | None = None,
    rows: int | None = None,
    max_rounds: int | None = None,
) -> Callable[[Any, jax.Array], tuple[Any, dict[str, jax.Array]]]:
    """``step(carry, t0) -> (carry, outputs)``: ``length`` rounds of one block of runs from ``t0``,
    the same as ``vmap`` of the XLA rollout's scan.

    Args:
      learner: an :class:`~stabl_jax.learners.EXP3` or :class:`~stabl_jax.learners.StABL`.
      env: the rollout's environment (an oblivious bandit one, wrapped).
      fields: the traces to record (:data:`FIELDS`).
      length: ``L``, rounds in the chunk.
      interpret: run in interpret mode; ``None``: unless on a GPU (:func:`interpreted`).
      rows: runs per program; ``None``: the whole block interpreted, :func:`gpu_rows` compiled.
      max_rounds: rounds per ``pallas_call`` at most (pieces of the largest divisor of
        ``length`` not above it); ``None``: one call.

    Returns:
      The step; ``carry`` a runs-leading :class:`~stabl_jax.simulate.RunCarry`, outputs
      ``(runs, L, ...)`` by name.
    """
    check_supported(learner, env, fields, validate=False)
    spec = _KERNELS[type(learner)](learner, _padded_arms(learner.num_arms))
    if interpret is None:
        interpret = interpreted()
    if rows is not None and not interpret and (rows < _MIN_BLOCK or rows & (rows - 1)):
        raise ValueError(f"rows must be a power of two >= {_MIN_BLOCK} on a GPU, got {rows}")
    compiler_params = None
    if not interpret:
        from jax.experimental.pallas import triton as pltriton

        compiler_params = pltriton.CompilerParams(num_warps=GPU_WARPS, num_stages=1)
    call = partial(_call, spec, env.env, fields, interpret, rows, compiler_params)
    piece = length if max_rounds is None else largest_divisor(length, max_rounds)

    def step(carry: Any, t0: jax.Array) -> tuple[Any, dict[str, jax.Array]]:
        if piece == length:
            return call(carry, t0, length)

        def one(carry: Any, i: jax.Array) -> tuple[Any, dict[str, jax.Array]]:
            return call(carry, t0 + i * piece, piece)

        carry, outputs = jax.lax.scan(one, carry, jnp.arange(length // piece, dtype=jnp.int32))
        # (pieces, runs, piece, ...) -> (runs, length, ...)
        joined = {
            name: jnp.swapaxes(x, 0, 1).reshape(x.shape[1], length, *x.shape[3:])
            for name, x in outputs.items()
        }
        return carry, joined

    return step


def _call(
    spec: _Kernel,
    env: Any,
    fields: tuple[str, ...],
    interpret: bool,
    rows: int | None,
    compiler_params: Any,
    carry: Any,
    t0: jax.Array,
    length: int,
) -> tuple[Any, dict[str, jax.Array]]:
    """``length`` rounds from ``t0`` of the block of runs ``carry`` in one ``pallas_call``."""
    runs = carry.learner_key.shape[0]
    ts = t0 + jnp.arange(length, dtype=jnp.int32)
    states, coefs = spec.pack(carry.state)
    inside = draws_inside(env, (carry.env_key, carry.learner_key))  # chosen at trace time
    drawn = _key_words(env, carry, ts) if inside else _draws(spec, env, fields, carry, ts)
    ins = {"state": states, "coefs": coefs, **drawn}
    block = rows or (runs if interpret else gpu_rows(states))
    padded = -(-runs // block) * block
    ins = jax.tree.map(lambda x: _pad_runs(x, padded), ins)
    shared = {"table": spec.table(ts), "ts": ts if inside else None}  # whole, every program
    ins.update({name: x for name, x in shared.items() if x is not None})
    per_round = jax.ShapeDtypeStruct((length, padded), jnp.float32)
    out_shape: dict[str, Any] = {
        "state": tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in ins["state"]),
        "arms": [per_round.update(dtype=jnp.int32)] * _written(fields, "played", "arms", spec),
        "observed": [per_round] * _written(fields, "loss", "observed", spec),
        **{name: per_round for name in ("expected_loss", "prob_best") if name in fields},
    }

    def specs(tree: dict) -> dict:  # the runs axis is axis 1 of every array but the shared
        return {
            k: jax.tree.map(lambda x, k=k: _block_spec(x.shape, k not in shared, block), v)
            for k, v in tree.items()
        }

    out = pl.pallas_call(
        partial(_kernel, spec, env, length),
        out_shape=out_shape,
        grid=(padded // block,),
        in_specs=(specs(ins),),
        out_specs=specs(out_shape),
        interpret=interpret,
        compiler_params=compiler_params,
        name=f"{spec.learner.name}_chunk",
    )(ins)
    return _unpacked(spec, fields, carry, jax.tree.map(lambda x: x[:, :runs], out), length)


def _unpacked(
    spec: _Kernel, fields: tuple[str, ...], carry: Any, out: dict, length: int
) -> tuple[Any, dict[str, jax.Array]]:
    """The carry after the call and its traces ``(runs, L, ...)``, from the kernel's
    outputs (runs on axis 1)."""
    values = {
        "played": lambda: out["arms"][0],
        "arms": lambda: jnp.stack(out["arms"], axis=-1),
        "loss": lambda: out["observed"][0],
        "observed": lambda: jnp.stack(out["observed"], axis=-1),
        "expected_loss": lambda: out["expected_loss"],
        "prob_best": lambda: out["prob_best"],
    }
    state = spec.unpack(carry.state, out["state"], length)
    outputs = {name: jnp.swapaxes(values[name](), 0, 1) for name in fields}
    return dataclasses.replace(carry, state=state), outputs


def _written(fields: tuple[str, ...], first: str, every: str, spec: _Kernel) -> int:
    """How many of the ``Q`` per-query outputs the kernel writes: all ``Q`` when ``fields``
    has ``every`` (``"arms"``, ``"observed"``), the first when it has only ``first``
    (``"played"``, ``"loss"``), none otherwise: a trace nobody asked for is never stored."""
    return spec.queries if every in fields else int(first in fields)


def largest_divisor(length: int, at_most: int) -> int:
    """The largest divisor of ``length`` that is ``<= at_most`` (1 at least).

    Example:
      >>> largest_divisor(512, 15), largest_divisor(4096, 4096), largest_divisor(7, 3)
      (8, 4096, 1)
    """
    if at_most >= length:
        return length
    small = [d for d in range(1, math.isqrt(length) + 1) if length % d == 0]
    return max(d for d in small + [length // d for d in small] if d <= at_most)


def _draws(spec: _Kernel, env: Any, fields: tuple[str, ...], carry: Any, ts: jax.Array) -> dict:
    """A chunk's draws outside the kernel: ``u`` ``Q x (L, runs)`` uniforms, ``loss``
    ``(L, runs, n_pad)`` and, for ``prob_best``, ``best`` ``(L, runs)``."""

    def one(params: Any, env_key: jax.Array, learner_key: jax.Array, t: jax.Array) -> dict:
        loss = env.loss(params, t, prng.fold_in(env_key, t)).astype(jnp.float32)
        out = {
            "u": sampling.uniforms(prng.fold_in(learner_key, t), spec.queries),
            "loss": jnp.pad(loss, (0, spec.n_pad - spec.n)),
        }
        if "prob_best" in fields:
            out["best"] = env.best_arm(params, t)
        return out

    over_rounds = jax.vmap(one, in_axes=(None, None, None, 0))
    draws = jax.vmap(over_rounds, in_axes=(0, 0, 0, None), out_axes=1)(
        carry.env_params, carry.env_key, carry.learner_key, ts
    )
    draws["u"] = list(jnp.moveaxis(draws["u"], -1, 0))
    return draws


def _key_words(env: Any, carry: Any, ts: jax.Array) -> dict:
    """Inputs of a kernel that draws inside: ``keys`` ``(2, runs)`` uint32 key words of ``env``
    and ``learner``, ``best`` ``(L, runs)`` int32 the best arm each round, and ``numbers``
    ``(1, runs)`` float32 each the environment's traced scalars (``losses_of_words``' params)."""
    keys = {
        "env": jax.random.key_data(carry.env_key).T,
        "learner": jax.random.key_data(carry.learner_key).T,
    }

    def best(params: Any) -> jax.Array:
        return jax.vmap(lambda t: env.best_arm(params, t))(ts).astype(jnp.int32)

    numbers = {
        name: value[None].astype(jnp.float32)
        for name, value in carry.env_params.items()
        if value.ndim == 1 and jnp.issubdtype(value.dtype, jnp.floating)
    }
    return {"keys": keys, "best": jax.vmap(best, out_axes=1)(carry.env_params), "numbers": numbers}


def interpreted(mesh: Any = None) -> bool:
    """Whether the kernel runs in interpret mode on ``mesh``'s devices (or the default device):
    compiled on a GPU only."""
    if mesh is not None:
        device = mesh.devices.flat[0]
    else:
        device = jax.config.jax_default_device or jax.devices()[0]  # type: ignore[attr-defined]
    return (device if isinstance(device, str) else device.platform) != "gpu"


def gpu_rows(states: tuple[jax.Array, ...]) -> int:
    """Runs per program on a GPU: :data:`GPU_ROWS`, halved while their state exceeds
    :data:`GPU_THREAD_FLOATS` for each of the program's ``32 GPU_WARPS`` threads, at least 16."""
    per_run = sum(x.size // x.shape[1] for x in states)
    rows = GPU_ROWS
    while rows > _MIN_BLOCK and rows * per_run > GPU_THREAD_FLOATS * 32 * GPU_WARPS:
        rows //= 2
    return rows


def _block_spec(shape: tuple[int, ...], per_run: bool, rows: int) -> pl.BlockSpec:
    """``rows`` runs of axis 1 per program; the whole array when not ``per_run``."""
    if not per_run:
        return pl.BlockSpec(shape, lambda i: (0,) * len(shape))
    block = (shape[0], rows, *shape[2:])
    return pl.BlockSpec(block, lambda i: (0, i) + (0,) * (len(shape) - 2))


def _pad_runs(x: jax.Array, padded: int) -> jax.Array:
    """``x`` with its runs axis (1) padded to ``padded`` by copies of the last run."""
    if x.ndim < 2 or x.shape[1] == padded:
        return x
    widths = [(0, 0)] * x.ndim
    widths[1] = (0, padded - x.shape[1])
    return jnp.pad(x, widths, mode="edge")


class _Drawn:
    """Round ``i``'s draws read from the inputs :func:`_draws` made outside the kernel."""

    def __init__(self, ins: dict, i: jax.Array) -> None:
        self.u = [u[i] for u in ins["u"]]
        self.loss = ins["loss"][i]

    def uniforms(self) -> list:
        return self.u

    def losses(self, arms: list) -> list:
        return [_pick(self.loss, arm) for arm in arms]

    def every_loss(self) -> jax.Array:
        return self.loss


class _Hashed:
    """Round ``i``'s draws hashed in the kernel from the runs' key words, bit for bit the XLA
    path's (:mod:`stabl_jax.threefry`)."""

    def __init__(
        self,
        spec: _Kernel,
        env: Any,
        ins: dict,
        words: dict[str, threefry.Words],
        numbers: dict[str, jax.Array],
        i: jax.Array,
    ) -> None:
        self.spec, self.env, self.best = spec, env, ins["best"][i]
        self.numbers = numbers
        t = jnp.full(self.best.shape, ins["ts"][i], jnp.int32)
        self.learner = threefry.fold_in_words(*words["learner"], t)
        self.round_key = threefry.fold_in_words(*words["env"], t)

    def uniforms(self) -> list:
        shape = self.best.shape
        return [
            threefry.uniform_words(*self.learner, jnp.full(shape, j, jnp.uint32))
            for j in range(self.spec.queries)
        ]

    def losses(self, arms: list) -> list:
        return [
            self.env.losses_of_words(self.numbers, self.round_key, arm, arm == self.best)
            for arm in arms
        ]

    def every_loss(self) -> jax.Array:
        """``(rows, n_pad)`` every arm's loss, the padding 0 (for ``expected_loss``)."""
        arms = _iota((self.best.shape[0], self.spec.n_pad))
        words = tuple(w[:, None] for w in self.round_key)
        numbers = {name: x[:, None] for name, x in self.numbers.items()}
        loss = self.env.losses_of_words(numbers, words, arms, arms == self.best[:, None])
        return jnp.where(arms < self.spec.n, loss, 0.0)


def _kernel(spec: _Kernel, env: Any, length: int, ins: dict, out: dict) -> None:
    """One program: load ``rows`` runs' state, step them through ``length`` rounds, store it;
    each round writes the traces asked for (:func:`_written`): arms, observed losses,
    ``expected_loss``, ``prob_best``."""
    coefs = [ins["coefs"][c] for c in range(ins["coefs"].shape[0])]
    table = ins.get("table")
    words: dict[str, threefry.Words] | None = None
    numbers: dict[str, jax.Array] = {}
    if "keys" in ins:  # drawn inside: the key words and the environment's numbers, loaded once
        words = {name: (ref[0], ref[1]) for name, ref in ins["keys"].items()}
        numbers = {name: ref[0] for name, ref in ins["numbers"].items()}  # (rows,) each

    def round_(i: jax.Array, state: tuple) -> tuple:
        draws = _Drawn(ins, i) if words is None else _Hashed(spec, env, ins, words, numbers, i)
        query = spec.ask(coefs, state, draws.uniforms())
        arms, _, play, _ = query
        observed = draws.losses(arms)
        for j, ref in enumerate(out["arms"]):
            ref[i] = arms[j]
        for j, ref in enumerate(out["observed"]):
            ref[i] = observed[j]
        if "expected_loss" in out:  # <p_t, l_t>
            out["expected_loss"][i] = jnp.sum(play * draws.every_loss(), axis=1)
        if "prob_best" in out:
            out["prob_best"][i] = _pick(play, ins["best"][i])
        row = [] if table is None else [table[i, k] for k in range(table.shape[1])]
        return tuple(spec.tell(coefs, state, row, query, observed))

    start = tuple([ref[k] for k in range(ref.shape[0])] for ref in ins["state"])
    state = jax.lax.fori_loop(0, length, round_, start)
    for ref, values in zip(out["state"], state, strict=True):
        for k, value in enumerate(values):
            ref[k] = value
