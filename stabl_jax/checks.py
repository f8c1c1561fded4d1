"""Argument checks shared by constructors and entry points (``docs/reliability.md``).

Concrete values are checked eagerly; under ``jit`` shapes are, and values only through
:mod:`jax.experimental.checkify` (the ``traced_check_*`` functions, run with ``validate=True``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an int ``>= minimum``, else ``TypeError``/``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


#: The longest horizon: rounds are counted in int32.
MAX_HORIZON = 2**31 - 1


def check_horizon(value: object, minimum: int = 1, name: str = "horizon") -> int:
    """``value`` as a number of rounds: :func:`check_int`, at most :data:`MAX_HORIZON`."""
    horizon = check_int(name, value, minimum)
    if horizon > MAX_HORIZON:
        raise ValueError(
            f"{name} must be <= 2**31 - 1 = {MAX_HORIZON} (rounds are counted in int32), "
            f"got {horizon}"
        )
    return horizon


def check_bool(name: str, value: object) -> bool:
    """``value`` when it is ``True`` or ``False`` (NumPy's too), else ``TypeError`` naming it."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_choice(name: str, value: object, allowed: Sequence[object]) -> None:
    """``ValueError`` unless ``value`` is one of ``allowed`` (``TypeError``: a bool among ints)."""
    if isinstance(value, bool) and not any(isinstance(a, bool) for a in allowed):
        raise TypeError(f"{name} must be one of {tuple(allowed)}, got {value!r} (bool)")
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")


def check_names(name: str, value: object, allowed: Sequence[str]) -> tuple[str, ...]:
    """``value`` as a tuple of names from ``allowed`` (a lone string is a ``TypeError``)."""
    if isinstance(value, str):
        raise TypeError(
            f"{name} must be a tuple of names, got the string {value!r} (write ({value!r},))"
        )
    names = as_tuple(name, value, f"a tuple of names from {tuple(allowed)}")
    for item in names:
        check_choice(name, item, allowed)
    return names


def as_tuple(name: str, value: object, what: str) -> tuple[Any, ...]:
    """``tuple(value)``, else ``TypeError``: ``{name} must be {what}, got {value!r}``."""
    try:
        return tuple(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be {what}, got {value!r}") from None


def check_interface(name: str, value: object, what: str, attributes: Sequence[str]) -> None:
    """``TypeError`` naming ``name`` unless ``value`` has every one of ``attributes``."""
    missing = [attr for attr in attributes if not hasattr(value, attr)]
    if missing:
        maker = {"env": "make_env", "learner": "make"}.get(name)
        hint = f"; make it with stabl_jax.{maker}({value!r}, ...)" if maker else ""
        raise TypeError(
            f"{name} must be {what}, got {value!r} ({type(value).__name__}, which has no "
            f"{missing[0]!r}){hint if isinstance(value, str) else ''}"
        )


def check_real(name: str, value: object) -> float:
    """``value`` as a float when it is a real number (not a bool), else ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    return float(value)


def check_positive(name: str, value: object, zero: bool = False) -> float:
    """A finite float ``> 0`` (``>= 0`` with ``zero``), else ``TypeError``/``ValueError``."""
    v = check_real(name, value)
    if not math.isfinite(v) or v < 0.0 or (v == 0.0 and not zero):
        raise ValueError(f"{name} must be a finite number {'>=' if zero else '>'} 0, got {value!r}")
    return v


def check_nonnegative(name: str, value: object) -> float:
    """:func:`check_positive` with 0 allowed."""
    return check_positive(name, value, zero=True)


def check_probability(name: str, value: float, *, open_right: bool = False) -> float:
    """A float in [0, 1] (or [0, 1) with ``open_right``)."""
    v = check_real(name, value)
    if not np.isfinite(v) or v < 0.0 or v > 1.0 or (open_right and v >= 1.0):
        interval = "[0, 1)" if open_right else "[0, 1]"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return v


def fill(obj: Any, name: str, default: object, check: Callable[..., Any], **kwargs: Any) -> Any:
    """Set the frozen dataclass field ``name`` of ``obj`` to ``check(name, value, **kwargs)``,
    ``value`` the field's own or ``default`` where it is ``None``, and return it (a learner's
    ``__post_init__`` filling its defaults)."""
    value = getattr(obj, name)
    value = check(name, default if value is None else value, **kwargs)
    object.__setattr__(obj, name, value)
    return value


def check_x64(name: str, dtype: Any) -> None:
    """``ValueError`` naming ``name`` when ``dtype`` is float64 and JAX runs without x64."""
    if np.dtype(dtype) == np.float64 and not jax.config.jax_enable_x64:  # type: ignore[attr-defined]
        raise ValueError(
            f"{name} with dtype='float64' needs 64-bit JAX: call "
            "jax.config.update('jax_enable_x64', True) at startup (or run it inside "
            "jax.enable_x64(True)); without it every array of its state would be float32"
        )


def check_finite(name: str, values: object) -> np.ndarray:
    """``values`` as a NumPy array when every entry is finite, else ``ValueError`` naming the
    first entry that is not."""
    arr = np.asarray(values)
    finite = np.isfinite(arr)
    if not finite.all():
        bad = np.argwhere(~finite)
        idx = tuple(int(i) for i in bad[0])
        raise ValueError(
            f"{name} must be finite, got {arr[idx]} at index {idx} ({len(bad)} of {arr.size} "
            "entries)"
        )
    return arr


def is_concrete(x: object) -> bool:
    """True when ``x`` holds values now (not a tracer under ``jit``/``vmap``/``scan``)."""
    return not isinstance(x, jax.core.Tracer)


def check_losses(name: str, losses: jax.Array, shape: tuple[int, ...] | None = None) -> None:
    """Reject a wrong shape (also under ``jit``) and, in concrete losses, NaN, inf or values
    outside [0, 1] (traced ones: :func:`traced_check_losses`)."""
    if shape is not None and tuple(np.shape(losses)) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(np.shape(losses))}")
    if not is_concrete(losses):
        return
    arr = np.asarray(losses)
    if not np.issubdtype(arr.dtype, np.floating):
        raise TypeError(f"{name} must be floating point, got dtype {arr.dtype}")
    bad = ~np.isfinite(arr) | (arr < 0.0) | (arr > 1.0)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{name} must be finite and in [0, 1]; found {arr[idx]!r} at index {idx}"
            " (losses are never clipped: rescale them to [0, 1] first)"
        )


def check_key(name: str, key: object) -> None:
    """A single PRNG key: a typed key of shape ``()`` (``jax.random.key(seed)``) or a legacy
    raw ``uint32[2]`` key (``jax.random.PRNGKey(seed)``)."""
    shape = getattr(key, "shape", None)
    dtype = getattr(key, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(
            f"{name} must be a PRNG key from jax.random.key(seed), got {key!r} "
            f"({type(key).__name__})"
        )
    if jnp.issubdtype(dtype, jax.dtypes.prng_key):
        if tuple(shape) != ():
            raise ValueError(
                f"{name} must be a single PRNG key (shape ()), got a key array of shape "
                f"{tuple(shape)}"
            )
        return
    if np.dtype(dtype) == np.uint32 and tuple(shape) == (2,):
        return
    raise TypeError(
        f"{name} must be a PRNG key from jax.random.key(seed), got an array of shape "
        f"{tuple(shape)} and dtype {dtype}"
    )


@dataclasses.dataclass(frozen=True)
class Interval:
    """A range of allowed values: ``[low, high]``, either end open when asked."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def holds(self, values: np.ndarray) -> np.ndarray:
        """Elementwise: finite and inside the interval."""
        above = values > self.low if self.low_open else values >= self.low
        below = values < self.high if self.high_open else values <= self.high
        return np.isfinite(values) & above & below

    def __str__(self) -> str:
        left = "(" if self.low_open or self.low == -math.inf else "["
        right = ")" if self.high_open or self.high == math.inf else "]"
        return f"{left}{self.low:g}, {self.high:g}{right}"


def check_param_values(
    params: Any, bounds: Mapping[str, Interval], *, name: str = "params", batch: int | None = None
) -> None:
    """Check a learner's ``Params`` pytree: every leaf a scalar (or, with ``batch``, a
    ``(batch,)`` vector), and concrete leaves finite and inside ``bounds[field]``.

    Raises:
      ValueError: naming ``params.<field>``, the bad value or shape, and what is allowed.
    """
    fields = (
        {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
        if dataclasses.is_dataclass(params)
        else dict(enumerate(jax.tree.leaves(params)))
    )
    for field, value in fields.items():
        label = f"{name}.{field}"
        if isinstance(value, list | tuple):
            raise ValueError(
                f"{label} is a Python {type(value).__name__}, {value!r}: a param is one number "
                "(or a (num_runs,) array of per-run values, as simulate takes); to sweep "
                "values, vmap over stacked Params, or run `stabl-jax sweep CONFIG --grid "
                "LEARNER.FIELD=V1,V2`"
            )
        shape = tuple(np.shape(value))
        allowed_shapes = [()] if batch is None else [(), (batch,)]
        if shape not in allowed_shapes:
            what = "a scalar" if batch is None else f"a scalar or a ({batch},) per-run vector"
            hint = " (sweep with jax.vmap or simulate's per-run params)" if batch is None else ""
            raise ValueError(f"{label} must be {what}, got shape {shape}{hint}")
        if not is_concrete(value):
            continue
        arr = np.asarray(value, dtype=np.float64)
        interval = bounds.get(str(field), Interval())
        bad = ~interval.holds(arr)
        if bad.any():
            found = np.asarray(value)[bad].flat[0]  # in its own dtype: 1e-30, not 1.0000000031e-30
            allowed = "finite" if interval == Interval() else f"finite and in {interval}"
            raise ValueError(f"{label} must be {allowed}, got {found}")


@functools.cache
def _state_template(learner: Any, x64: bool) -> Any:
    """Shapes and dtypes of ``learner.init``'s state (once per learner and x64 setting)."""
    del x64  # part of the cache key: float64 states exist only under jax_enable_x64
    return jax.eval_shape(learner.init, jax.random.key(0))


def check_state(learner: Any, state: Any, name: str = "state") -> None:
    """``ValueError`` unless ``state`` has the structure, shapes and dtypes of
    ``learner.init``'s (also under ``jit``)."""
    x64 = bool(jax.config.jax_enable_x64)  # type: ignore[attr-defined]
    template = _state_template(learner, x64)
    expected_def = jax.tree.structure(template)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(state)
    if treedef != expected_def:  # type: ignore[operator]  # jaxlib has no stub for PyTreeDef
        raise ValueError(
            f"{name} does not come from {type(learner).__name__}.init: its structure "
            f"{type(state).__name__} differs from the expected {expected_def}"
        )
    for (path, leaf), want in zip(leaves, jax.tree.leaves(template), strict=True):
        shape, dtype = tuple(np.shape(leaf)), getattr(leaf, "dtype", None)
        if shape != tuple(want.shape) or dtype != want.dtype:
            raise ValueError(
                f"{name}{jax.tree_util.keystr(path)} has shape {shape} and dtype {dtype}, "
                f"expected {tuple(want.shape)} {want.dtype} for {learner!r} (a state of "
                "another learner or of other sizes?)"
            )


def check_query(query: Any, num_arms: int, num_queries: int) -> None:
    """A :class:`~stabl_jax.learners.base.BanditQuery` fits the learner: its shapes, and when
    concrete, arms in ``[0, num_arms)`` and query probabilities in ``(0, 1]``."""
    arms, probs = query.arms, query.query_probs
    sizes = {"arms": num_queries, "query_probs": num_queries, "play_probs": num_arms}
    for field, size in sizes.items():
        shape = tuple(np.shape(getattr(query, field)))
        if shape != (size,):
            raise ValueError(f"query.{field} must have shape ({size},), got {shape}")
    if is_concrete(arms):
        a = np.asarray(arms)
        if not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"query.arms must be integers, got dtype {a.dtype}")
        if ((a < 0) | (a >= num_arms)).any():
            raise ValueError(f"query.arms must lie in [0, {num_arms - 1}], got {a.tolist()}")
    if is_concrete(probs):
        p = np.asarray(probs, dtype=np.float64)
        if (~np.isfinite(p) | (p <= 0.0) | (p > 1.0)).any():
            raise ValueError(f"query.query_probs must be in (0, 1], got {p.tolist()}")


# --- In-trace checks (jax.experimental.checkify) -------------------------------------------


def traced_check_losses(name: str, losses: jax.Array, t: jax.Array | int = -1) -> None:
    """``checkify.check`` that ``losses`` are finite and in [0, 1]; the error names the
    round ``t``, the first bad index and its value (run under ``checkify``)."""
    flat = jnp.ravel(losses)
    bad = ~(jnp.isfinite(flat) & (flat >= 0.0) & (flat <= 1.0))
    index = jnp.argmax(bad)
    checkify.check(
        ~jnp.any(bad),
        f"{name} at round {{t}} must be finite and in [0, 1]; found {{value}} at index "
        "{index} (losses are never clipped: rescale them to [0, 1] first)",
        t=jnp.asarray(t, jnp.int32),
        value=flat[index].astype(jnp.float32),
        index=index,
    )


def distribution_tolerance(num_arms: int, dtype: Any, num_mixed: int = 1) -> float:
    """How far ``sum(p)`` of a mixture of ``B = num_mixed`` computed distributions may be from
    1: ``4 max(n, B) eps``, above the ``(2n + 2B + 8) u`` rounding of the log-domain normaliser.

    Example:
      >>> distribution_tolerance(30, "float32") == 120 * 2.0**-23
      True
    """
    return 4.0 * max(num_arms, num_mixed) * float(jnp.finfo(dtype).eps)


def traced_check_distribution(
    name: str, probs: jax.Array, t: jax.Array | int = -1, num_mixed: int = 1
) -> None:
    """``checkify.check`` that ``probs``, a mixture of ``num_mixed`` distributions, is a
    distribution: finite, ``>= 0``, summing to 1 within :func:`distribution_tolerance`."""
    n = probs.shape[-1]
    tol = distribution_tolerance(n, probs.dtype, num_mixed)
    total = jnp.sum(probs)
    ok = jnp.all(jnp.isfinite(probs)) & jnp.all(probs >= 0.0) & (jnp.abs(total - 1.0) <= tol)
    checkify.check(
        ok,
        f"{name} at round {{t}} is not a distribution: sum {{total}} (allowed 1 ± {tol:.2g}), "
        "min {low}. A sum off by a small multiple of that after very large learning rates "
        "on few arms is the rounding of the log-domain normaliser, not lost mass: lower the "
        "scale, or run it from Python with validate=False (the command line always "
        "validates); docs/reliability.md, 'What the tolerance does not cover'",
        t=jnp.asarray(t, jnp.int32),
        total=total.astype(jnp.float32),
        low=jnp.min(probs).astype(jnp.float32),
    )


def checked_step(learner: Any) -> Callable[[Any, jax.Array, jax.Array], tuple[Any, Any]]:
    """``learner.step`` with ``validate=True``, jitted under :mod:`checkify`: it raises
    :class:`checkify.JaxRuntimeError` naming the argument, the round and the value.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from stabl_jax import EXP3
      >>> step = checked_step(EXP3(num_arms=3, horizon=16))
      >>> state = EXP3(num_arms=3, horizon=16).init(jax.random.key(0))
      >>> state, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> step(state, jnp.array([0.1, jnp.nan, 0.9]), jax.random.key(2))
      Traceback (most recent call last):
      ...
      jax._src.checkify.JaxRuntimeError: loss at round 1 must be finite and in [0, 1]; found nan at index 1 (losses are never clipped: rescale them to [0, 1] first) (`check` failed)
    """  # noqa: E501
    checked = dataclasses.replace(learner, validate=True)
    program = jax.jit(checkify.checkify(checked.step, errors=checkify.user_checks))

    def step(state: Any, loss: jax.Array, key: jax.Array) -> tuple[Any, Any]:
        err, out = program(state, loss, key)
        err.throw()
        return out

    return step
