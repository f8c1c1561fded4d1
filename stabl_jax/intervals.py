"""Geometric interval schedules (the set S of Algorithm 1, line 2): expert ``k`` restarts at
every block ``[s L_k, (s + 1) L_k)``; any strictly increasing positive lengths are accepted."""

from __future__ import annotations

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks


def geometric_history_lengths(horizon: int) -> tuple[int, ...]:
    """The paper's default history lengths ``2^k``, ``k = ceil(2 + log2 log2 T) .. floor(log2 T)``.
    ``B`` of Algorithm 1, line 3 is the number of lengths returned.

    Raises:
      ValueError: the range of ``k`` is empty (``T < 16`` and ``17 <= T <= 31``).

    Example:
      >>> geometric_history_lengths(4096)
      (64, 128, 256, 512, 1024, 2048, 4096)
    """
    if isinstance(horizon, bool) or not isinstance(horizon, int | np.integer):
        raise TypeError(f"horizon must be an int, got {horizon!r}")
    if horizon < 2:
        raise ValueError(f"horizon must be >= 2 for geometric intervals, got {horizon}")
    log_t = math.log2(horizon)
    k_min = math.ceil(2 + math.log2(log_t)) if log_t > 0 else 2
    k_max = math.floor(log_t)
    if k_min > k_max:
        raise ValueError(
            f"horizon={horizon} is too small for the geometric intervals of Algorithm 1: "
            f"k runs from ceil(2 + log2 log2 T) = {k_min} to floor(log2 T) = {k_max}, which is "
            "empty (it is for T < 16 and for 17 <= T <= 31); use horizon = 16 or >= 32, or "
            "pass history_lengths explicitly"
        )
    return tuple(2**k for k in range(k_min, k_max + 1))


def validate_history_lengths(lengths: object) -> tuple[int, ...]:
    """Check a user-given tuple of history lengths: positive ints up to
    :data:`stabl_jax.checks.MAX_HORIZON`, strictly increasing."""
    if isinstance(lengths, int | np.integer):
        lengths = (lengths,)
    out = checks.as_tuple("history_lengths", lengths, "a tuple of ints")
    if not out:
        raise ValueError("history_lengths must not be empty")
    for length in out:
        if isinstance(length, bool) or not isinstance(length, int | np.integer) or length < 1:
            raise ValueError(f"history_lengths must be positive ints, got {out!r}")
        checks.check_horizon(length, name="history_lengths")
    if any(b <= a for a, b in itertools.pairwise(out)):
        raise ValueError(f"history_lengths must be strictly increasing, got {out!r}")
    return tuple(int(x) for x in out)


def resolve_history_lengths(lengths: object, horizon: int) -> tuple[int, ...]:
    """``lengths`` validated, or the paper's geometric default for ``horizon`` when ``None``."""
    if lengths is None:
        return geometric_history_lengths(horizon)
    return validate_history_lengths(lengths)


def restart_mask(t: jax.Array, lengths: tuple[int, ...], offset: int = 0) -> jax.Array:
    """``(B,)`` bool ``(t + offset) % L_k == 0``: experts restarting at 0-based round ``t``
    (``offset = 1``: the paper's ``2^k | t + 1``, Algorithm 1, line 13)."""
    lengths_arr = jnp.asarray(lengths, dtype=jnp.int32)
    return (t + offset) % lengths_arr == 0
