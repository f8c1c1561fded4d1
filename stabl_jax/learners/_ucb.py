"""Pieces shared by the deterministic index policies: UCB1 and kl-UCB on all the history
(:class:`~stabl_jax.learners.ucb1.UCB1`, :class:`~stabl_jax.learners.klucb.KLUCB`), and the
sliding-window and discounted policies of Garivier and Moulines (ALT 2011) with a UCB or a
kl-UCB index (:class:`~stabl_jax.learners.sw_ucb.SWUCB`,
:class:`~stabl_jax.learners.sw_klucb.SWklUCB`, :class:`~stabl_jax.learners.d_ucb.DUCB`,
:class:`~stabl_jax.learners.d_klucb.DklUCB`).

A policy plays the arm of largest :meth:`IndexPolicy.index` (:func:`greedy_query`). The
switching policies split into where the statistics come from (a window or a discount: the
state, :meth:`SwitchingPolicy.log_term`) and which index reads them (:class:`SwitchingUCB` or
:class:`SwitchingKLUCB`), so each pair shares its state and update.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

import chex
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from stabl_jax import checks, estimators
from stabl_jax.learners import _detect
from stabl_jax.learners.base import BanditLearner, BanditQuery

REWARD_BOUND = 1.0  # B: rewards 1 - l lie in [0, 1]


def ucb_index(
    counts: jax.Array, sums: jax.Array, log_term: jax.Array, width: jax.Array
) -> jax.Array:
    """``(K,)`` ``X-bar_i + width sqrt(log_term / N_i)``, ``+inf`` where ``N_i = 0``.

    Args:
      counts: ``(K,)`` (discounted or windowed) play counts ``N_i >= 0``.
      sums: ``(K,)`` matching reward sums.
      log_term: ``()`` the logarithm under the square root (``log t``, ``log n_t(gamma)`` or
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
class IndexPolicy(BanditLearner):
    """Base class of the deterministic index policies: a round plays the arm of largest
    :meth:`index` (:func:`greedy_query`)."""

    def index(self, state: Any) -> jax.Array:
        """``(num_arms,)`` the arms' indices; ``+inf`` for an arm with no (remembered) play."""
        raise NotImplementedError

    def _ask(self, state: Any, key: jax.Array) -> BanditQuery:
        """The arm of largest index (deterministic: ``key`` is not used)."""
        del key
        return greedy_query(self.index(state), self.float_dtype)


@chex.dataclass(frozen=True)
class CountsState:
    """State of :class:`CountingPolicy`.

    Attributes:
      t: ``()`` int32, rounds played so far.
      counts: ``(num_arms,)`` int32, ``N_i``: plays of arm ``i``.
      sums: ``(num_arms,)`` float, their reward sum.
      params: the learner's ``Params``.
    """

    t: jax.Array
    counts: jax.Array
    sums: jax.Array
    params: Any


@dataclasses.dataclass(frozen=True)
class CountingPolicy(IndexPolicy):
    """Base class of the index policies on all the history (UCB1, kl-UCB): a
    :class:`CountsState` of play counts and reward sums (rewards ``1 - l``)."""

    def _init(self, key: jax.Array, params: Any) -> CountsState:
        del key
        k, f = self.num_arms, self.float_dtype
        return CountsState(
            t=jnp.zeros((), jnp.int32),
            counts=jnp.zeros((k,), jnp.int32),
            sums=jnp.zeros((k,), f),
            params=params,
        )

    def _tell(self, state: CountsState, query: BanditQuery, observed: jax.Array) -> CountsState:
        arm = query.arms[0]
        reward = estimators.loss_to_reward(observed[0])
        return dataclasses.replace(
            state,
            t=state.t + 1,
            counts=state.counts.at[arm].add(1),
            sums=state.sums.at[arm].add(reward).astype(self.float_dtype),
        )


@dataclasses.dataclass(frozen=True)
class SwitchingPolicy(IndexPolicy):
    """Base class of the sliding-window and discounted policies, with the field
    ``num_changes`` (``Upsilon_T``, an int >= 0, the breakpoints their default window or
    discount is tuned for). A subclass keeps ``counts`` and ``sums`` in its state and gives
    the logarithm of its exploration term (:meth:`log_term`)."""

    num_changes: int = dataclasses.field(default=3, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_changes", self.num_changes, minimum=0)

    def log_term(self, state: Any) -> jax.Array:
        """``()`` the logarithm of the exploration term (``log min(t, tau)``,
        ``log n_t(gamma)``), ``>= 0`` whenever some count is ``> 0``."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class SwitchingUCB(SwitchingPolicy):
    """The UCB index of Garivier and Moulines on a :class:`SwitchingPolicy`'s statistics:
    ``X-bar_i + explore_scale * PADDING * sqrt(xi log_term / N_i)`` (:func:`ucb_index`).

    A subclass declares the field ``xi`` (the padding's constant, > 0, checked here; the
    default of ``Params.xi``, traced), the class constant ``PADDING`` (``B`` or ``2B``) and a
    ``Params`` with ``explore_scale`` and ``xi``."""

    PADDING: ClassVar[float] = REWARD_BOUND

    if TYPE_CHECKING:
        # The subclass's field; a read-only property to type checkers, no field of this base.
        @property
        def xi(self) -> float: ...

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "xi", checks.check_positive("xi", self.xi))

    def index(self, state: Any) -> jax.Array:
        """``(num_arms,)`` ``X-bar_i + c_i``; ``+inf`` for an arm with no (remembered) play."""
        params = state.params
        width = params.explore_scale * self.PADDING * jnp.sqrt(params.xi)
        counts = state.counts.astype(self.float_dtype)
        return ucb_index(counts, state.sums, self.log_term(state), width)


@dataclasses.dataclass(frozen=True)
class SwitchingKLUCB(SwitchingPolicy):
    """The kl-UCB index on a :class:`SwitchingPolicy`'s statistics:
    ``max {q : N_i kl(X-bar_i, q) <= explore_scale * log_term}``
    (:func:`~stabl_jax.learners._detect.klucb_index`). A subclass declares a ``Params`` with
    ``explore_scale``."""

    def index(self, state: Any) -> jax.Array:
        """``(num_arms,)`` the kl-UCB indices; ``+inf`` for an arm with no remembered play."""
        budget = state.params.explore_scale * self.log_term(state)
        return _detect.klucb_index(state.counts, state.sums, budget, eps=0.0)
