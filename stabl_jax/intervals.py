"""Geometric interval schedules (the set S of Algorithm 1, line 2): expert ``k`` restarts at
every block ``[s L_k, (s + 1) L_k)``; any strictly increasing positive lengths are accepted.
The paper's ``2^k`` from ``ceil(2 + log2 log2 T)``, every dyadic scale from 1 (SAOL's), and
EFLH's doubly exponential ``2^{ceil((1 + eps)^k)}``."""

from __future__ import annotations

import functools
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


def dyadic_history_lengths(horizon: int) -> tuple[int, ...]:
    """Every dyadic scale ``2^k``, ``k = 0 .. floor(log2 T)``: the geometric covering
    intervals of Daniely et al. (ICML 2015), whose SAOL keeps one expert per scale from 1.

    Example:
      >>> dyadic_history_lengths(64)
      (1, 2, 4, 8, 16, 32, 64)
    """
    checks.check_horizon(horizon, minimum=1)
    return tuple(2**k for k in range(int(horizon).bit_length()))


#: EFLH's default growth ``eps``: inside ``(0, 1/2)``, where ``I^{1/2+eps}`` is sublinear.
EFLH_EPSILON = 0.25


@functools.lru_cache(maxsize=64)
def eflh_exponents(horizon: int, epsilon: float = EFLH_EPSILON) -> tuple[int, ...]:
    """EFLH's ``m_0 < ... < m_K``: the distinct ``ceil((1 + eps)^k)``, the last capped at the
    first ``m`` with ``2^m >= T + 1`` (at most 31: rounds are int32).

    Example:
      >>> eflh_exponents(4096)
      (1, 2, 3, 4, 5, 6, 8, 10, 12, 13)
    """
    checks.check_positive("epsilon", epsilon)
    top = min(31, max(1, math.ceil(math.log2(horizon + 1))))
    exponents: list[int] = []
    k = 0
    while not exponents or exponents[-1] < top:
        m = min(top, max(1, math.ceil((1.0 + epsilon) ** k)))
        if not exponents or m > exponents[-1]:
            exponents.append(m)
        k += 1
    return tuple(exponents)


def eflh_history_lengths(horizon: int, epsilon: float = EFLH_EPSILON) -> tuple[int, ...]:
    """EFLH's lengths ``2^{m_k}`` (:func:`eflh_exponents`) capped at ``T``, repeats dropped:
    one restarted expert per length (the interval-adaptive meta of ``eflh_saol``).

    Example:
      >>> eflh_history_lengths(4096)
      (2, 4, 8, 16, 32, 64, 256, 1024, 4096)
    """
    return tuple(sorted({min(2**m, horizon) for m in eflh_exponents(horizon, epsilon)}))


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


def restart_mask(t: jax.Array, lengths: tuple[int, ...], offset: int = 0) -> jax.Array:
    """``(B,)`` bool ``(t + offset) % L_k == 0``: experts restarting at 0-based round ``t``
    (``offset = 1``: the paper's ``2^k | t + 1``, Algorithm 1, line 13)."""
    lengths_arr = jnp.asarray(lengths, dtype=jnp.int32)
    return (t + offset) % lengths_arr == 0
