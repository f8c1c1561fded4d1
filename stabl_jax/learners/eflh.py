"""EFLH-style learner after Lu and Hazan ("On the computational efficiency of adaptive and
dynamic regret minimization", arXiv:2207.00646, 2022), over EXP3 experts with bandit feedback:
the EFLH row of Table 1 of Lu et al. (ICLR 2024), adaptive regret ``I^{1/2+eps} sqrt(n log T)``
with ``O(log log T / eps)`` queries.

What was read and what is a reading: Table 1 of Lu et al. (the bound and the query count) and
the abstract of Lu and Hazan (a working set reduced from ``O(log T)`` to ``O(log log T)``
experts) were read; their algorithm box was not. The lookback below, the lengths, the experts'
rates and the meta learner are this library's reading, built so that the ``|S_tau|`` and the
bound's shape match Table 1's row; hence "EFLH-style".

The reading: :class:`~stabl_jax.learners.flh.FLH` with a doubly exponential lookback. With
``L_k = 2^{m_k}``, ``m_k = ceil((1 + eps)^k)`` (repeats dropped, the last capped at
``2^{m_K} >= T + 1``; :func:`~stabl_jax.intervals.eflh_exponents`) and ``s = tau - 1``, the
working set is

    ``S_tau = { s - (s mod L_k) + 1 : k = 0..K }``    (1-based start rounds),

so ``|S_tau| <= K + 1 = O(log log T / eps)``. The expert of length ``L_k`` is EXP3 with
``eta' = sqrt(ln n / (min(L_k, T) n))``; ``M = num_queries`` is :func:`eflh_capacity`.

``eps`` sets the lengths, hence the shapes: it is a static option (``[learner_options.eflh]
epsilon`` in a config), never a ``Params`` field; each value is a program of its own. Its
default, 0.25, lies inside ``(0, 1/2)``, where ``I^{1/2+eps}`` is sublinear in ``I``; at
``eps >= 1/2`` the row's bound is no better than linear. ``M`` is 9 at ``T = 4096``, 10 at
``T = 16384`` and 11 at ``T = 65536``.

The meta learner is selected by registry name:

- ``eflh`` (this class): FLH's meta, ``v^(i) ∝ v^(i) e^{-alpha l}`` at the fixed
  ``alpha = sqrt(8 ln T / T)`` with prior ``1/tau`` for a new expert; tuned for the whole
  horizon, so its regret on an interval of fixed length grows with ``T``.
- ``eflh_saol``: :class:`~stabl_jax.learners.saol.SAOL` with ``scales="eflh"``: SAOL's
  restarted multiplicative weights (``eta_k = min(1/2, 1/sqrt(L_k))``, ``w(k) = eta_k`` at a
  restart) over one EXP3 expert per length ``min(L_k, T)``
  (:func:`~stabl_jax.intervals.eflh_history_lengths`), which adapts to the interval;
  ``1 + B`` queries (10 at ``T = 4096``, 12 at ``T = 65536``).

Memory per run: ``M (n + 2) + 1`` numbers (the slots' EXP3 rows, starts and meta weights).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, intervals
from stabl_jax.intervals import eflh_exponents
from stabl_jax.learners.flh import FLH

__all__ = ["EFLH", "eflh_capacity", "eflh_exponents"]


@functools.lru_cache(maxsize=64)
def eflh_capacity(horizon: int, epsilon: float) -> int:
    """``max_{tau <= T+1} |S_tau|``: the distinct ``s - (s mod L_k)`` over ``k``, counted as
    1 plus the ``k >= 1`` whose lookback differs from that of ``k - 1``."""
    s = np.arange(horizon + 1, dtype=np.int64)
    back = [s - s % 2**m for m in eflh_exponents(horizon, epsilon)]
    count = 1 + sum((b != a).astype(np.int64) for a, b in itertools.pairwise(back))
    return int(np.max(count))


@dataclasses.dataclass(frozen=True)
class EFLH(FLH):
    """FLH with EFLH's doubly exponential lookback (module docstring): ``O(log log T / eps)``
    experts and queries, FLH's fixed-rate meta.

    Attributes:
      epsilon: ``eps > 0``, static: the lengths' growth ``m_{k+1} ~ (1 + eps) m_k``
        (default 0.25, :data:`~stabl_jax.intervals.EFLH_EPSILON`).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = EFLH(num_arms=3, horizon=4096)
      >>> learner.lengths
      (2, 4, 8, 16, 32, 64, 256, 1024, 4096, 8192)
      >>> learner.num_queries
      9
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> info.arms.shape
      (9,)
    """

    epsilon: float = intervals.EFLH_EPSILON

    name: ClassVar[str] = "eflh"

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_positive("epsilon", self.epsilon)

    @property
    def exponents(self) -> tuple[int, ...]:
        """``m_0 < ... < m_K`` (:func:`eflh_exponents`)."""
        return eflh_exponents(self.horizon, float(self.epsilon))

    @property
    def lengths(self) -> tuple[int, ...]:
        """``L_k = 2^{m_k}``."""
        return tuple(2**m for m in self.exponents)

    @property
    def num_queries(self) -> int:  # type: ignore[override]
        """``M <= K + 1``, the most experts alive in any round up to ``T + 1``."""
        return eflh_capacity(self.horizon, float(self.epsilon))

    def _scale(self, start: jax.Array) -> jax.Array:
        """``(M,)`` int32: the index ``k`` of the largest ``L_k`` dividing ``s = start - 1``
        (``K`` for ``s = 0``; -1 for an empty slot)."""
        masks = jnp.asarray([2**m - 1 for m in self.exponents], jnp.int32)
        divides = jnp.bitwise_and((start - 1)[:, None], masks[None, :]) == 0
        return jnp.sum(divides, axis=1, dtype=jnp.int32) - 1

    def alive(self, start: jax.Array, tau: jax.Array) -> jax.Array:
        """``(M,)`` bool: ``start <= tau < start + L_k``, ``k`` the expert's scale."""
        scale = self._scale(start)
        bits = jnp.asarray(self.exponents, jnp.int32)[jnp.maximum(scale, 0)]
        return (scale >= 0) & (start <= tau) & (jnp.right_shift(tau - start, bits) == 0)

    def starts(self, tau: jax.Array) -> jax.Array:
        """``()`` bool: ``tau - 1`` is a multiple of ``L_0``."""
        return jnp.bitwise_and(tau - 1, self.lengths[0] - 1) == 0

    def base_expert_learning_rates(self, start: jax.Array) -> jax.Array:
        """``(M,)`` ``sqrt(ln n / (min(L_k, T) n))`` for each slot's scale ``k``."""
        spans = np.minimum(np.asarray(self.lengths, np.float64), self.horizon)
        rates = np.sqrt(math.log(self.num_arms) / (spans * self.num_arms))
        table = jnp.asarray(rates, self.float_dtype)
        return table[jnp.maximum(self._scale(start), 0)]
