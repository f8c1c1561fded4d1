"""Geometric interval schedules (the set S of Algorithm 1, line 2).

Expert ``k`` of a strongly adaptive learner runs on the consecutive blocks
``[s L_k, (s + 1) L_k - 1]``, ``s = 0, 1, ...`` and is restarted at the start of each block.
Its history length ``L_k`` is ``2^k`` in the paper, for ``ceil(2 + log2 log2 T) <= k <=
floor(log2 T)``; any strictly increasing tuple of positive lengths is accepted (the paper's
hyperparameter experiment uses 20, 40, ..., 2560).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks


def geometric_history_lengths(horizon: int) -> tuple[int, ...]:
    """The paper's default history lengths ``2^k``, ``k = ceil(2 + log2 log2 T) .. floor(log2 T)``.

    The logarithms are base 2 (the intervals are powers of two). ``B`` of Algorithm 1, line 3
    (``log T - (1 + log log T)``, not an integer in general) is taken to be the number of
    lengths returned, which is what makes ``P(t)`` of line 9 a probability distribution.

    Raises:
      ValueError: if the range of ``k`` is empty: ``horizon < 16``, and also
        ``17 <= horizon <= 31`` (``ceil(2 + log2 log2 T) = 5 > floor(log2 T) = 4`` there).

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
    try:
        out: tuple[Any, ...] = tuple(lengths)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"history_lengths must be a tuple of ints, got {lengths!r}") from None
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
    """``(B,)`` bool: which experts start a new block at round ``t`` (0-based).

    Expert ``k`` restarts when ``(t + offset) % L_k == 0``. With ``offset = 1`` the rule is the
    paper's 1-based ``2^k | t + 1`` (Algorithm 1, line 13); see the learners' docstrings.
    """
    lengths_arr = jnp.asarray(lengths, dtype=jnp.int32)
    return (t + offset) % lengths_arr == 0
