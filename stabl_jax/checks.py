"""Argument checks shared by constructors and entry points.

Host-side values (sizes, horizons, option strings) are checked eagerly in constructors.
Array values are checked when they are concrete (eager calls); inside ``jit``/``scan`` they are
tracers and cannot raise, so :func:`check_losses` returns silently there — the CLI and
``simulate`` generate losses from environments that are tested to stay in [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np


def check_int(name: str, value: object, minimum: int = 1) -> int:
    """``value`` as an int ``>= minimum``, else ``TypeError``/``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_choice(name: str, value: object, allowed: Sequence[object]) -> None:
    """Raise ``ValueError`` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {tuple(allowed)}, got {value!r}")


def check_probability(name: str, value: float, *, open_right: bool = False) -> float:
    """A float in [0, 1] (or [0, 1) with ``open_right``)."""
    v = float(value)
    if not np.isfinite(v) or v < 0.0 or v > 1.0 or (open_right and v >= 1.0):
        interval = "[0, 1)" if open_right else "[0, 1]"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return v


def is_concrete(x: object) -> bool:
    """True when ``x`` holds values now (not a tracer under ``jit``/``vmap``/``scan``)."""
    return not isinstance(x, jax.core.Tracer)


def check_losses(name: str, losses: jax.Array, shape: tuple[int, ...] | None = None) -> None:
    """Eagerly reject NaN, inf or values outside [0, 1] (and a wrong shape) in concrete losses.

    Shapes are static, so the shape check also runs under ``jit``. Value checks need concrete
    arrays; for traced values wrap the call with ``jax.experimental.checkify`` instead.
    """
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


def check_param_range(
    name: str,
    value: object,
    low: float,
    high: float = float("inf"),
    *,
    low_open: bool = False,
) -> None:
    """Reject a concrete ``Params`` entry outside ``[low, high]`` (``(low, high]`` with
    ``low_open``), or NaN, naming it. Traced values (a params grid under ``vmap``/``jit``)
    return silently, like :func:`check_losses`."""
    if not is_concrete(value):
        return
    arr = np.asarray(value, dtype=np.float64)
    bad = ~np.isfinite(arr) if high == float("inf") else np.isnan(arr)
    bad |= (arr <= low) if low_open else (arr < low)
    bad |= arr > high
    if bad.any():
        left = "(" if low_open else "["
        right = "]" if high < float("inf") else ")"
        interval = f"{left}{low:g}, {high:g}{right}"
        found = arr[tuple(np.argwhere(bad)[0])] if arr.ndim else arr
        raise ValueError(f"params.{name} must be in {interval}, got {float(found)!r}")
