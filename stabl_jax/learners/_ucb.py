"""Pieces shared by the index policies :class:`~stabl_jax.learners.d_ucb.DUCB` and
:class:`~stabl_jax.learners.sw_ucb.SWUCB` (Garivier and Moulines, ALT 2011)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from stabl_jax import checks
from stabl_jax.learners.base import BanditLearner, BanditQuery

REWARD_BOUND = 1.0  # B: rewards 1 - l lie in [0, 1]


def ucb_index(
    counts: jax.Array, sums: jax.Array, log_term: jax.Array, width: jax.Array
) -> jax.Array:
    """``(K,)`` ``X-bar_i + width sqrt(log_term / N_i)``, ``+inf`` where ``N_i = 0``.

    Args:
      counts: ``(K,)`` (discounted or windowed) play counts ``N_i >= 0``.
      sums: ``(K,)`` matching reward sums.
      log_term: ``()`` the logarithm under the square root (``log n_t(gamma)`` or
        ``log min(t, tau)``), ``>= 0`` whenever some ``N_i > 0``.
      width: ``()`` the padding's constant (``explore_scale * 2B sqrt(xi)`` or
        ``explore_scale * B sqrt(xi)``).
    """
    tried = counts > 0
    safe = jnp.where(tried, counts, 1)
    value = sums / safe + width * jnp.sqrt(log_term / safe)
    return jnp.where(tried, value, jnp.inf)


def greedy_query(index: jax.Array, dtype: DTypeLike) -> BanditQuery:
    """Play ``argmax index`` (the lowest index among ties, so untried arms go first in index
    order); the play distribution is the point mass on it."""
    arm = jnp.argmax(index).astype(jnp.int32)
    probs = jax.nn.one_hot(arm, index.shape[-1], dtype=dtype)
    return BanditQuery(arms=arm[None], play_probs=probs, query_probs=jnp.ones((1,), dtype))


@dataclasses.dataclass(frozen=True)
class SwitchingUCB(BanditLearner):
    """Base class of the two index policies, with the field ``num_changes`` (``Upsilon_T``,
    an int >= 0). A subclass declares the field ``xi`` (the padding's constant, > 0) and
    :meth:`index`; both fields are checked here, and a round plays the arm of largest index
    (:func:`greedy_query`)."""

    num_changes: int = 3

    if TYPE_CHECKING:
        # The subclass's field; a read-only property to type checkers, no field of this base.
        @property
        def xi(self) -> float: ...

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_changes", self.num_changes, minimum=0)
        object.__setattr__(self, "xi", checks.check_positive("xi", self.xi))

    def index(self, state: Any) -> jax.Array:
        """``(num_arms,)`` the arms' indices; ``+inf`` for an arm with no (remembered) play."""
        raise NotImplementedError

    def _ask(self, state: Any, key: jax.Array) -> BanditQuery:
        """The arm of largest index (deterministic: ``key`` is not used)."""
        del key
        return greedy_query(self.index(state), self.float_dtype)
