"""Discounted UCB (D-UCB, Algorithm 1 of Garivier and Moulines, "On upper-confidence bound
policies for switching bandit problems", ALT 2011): a deterministic index policy, one query per
round, rewards ``X = 1 - l`` in [0, 1] (``B = 1``).

:class:`Discounted` keeps the discounted statistics; D-UCB reads them with the UCB index of
:class:`~stabl_jax.learners._ucb.SwitchingUCB`, D-klUCB (:mod:`stabl_jax.learners.d_klucb`)
with the kl-UCB index. Memory: ``8 K + 12`` bytes per run (float32).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, estimators
from stabl_jax.learners import _ucb
from stabl_jax.learners.base import BanditQuery


@chex.dataclass(frozen=True)
class DUCBParams:
    """Sweepable numbers of :class:`DUCB`.

    Attributes:
      explore_scale: ``()`` multiplies the padding ``c_t(gamma, i)`` (``>= 0``; 1 is the paper).
      discount: ``()`` the discount factor ``gamma`` in (0, 1]; 1 is undiscounted UCB.
      xi: ``()`` the padding's constant ``xi > 0``.
    """

    explore_scale: jax.Array
    discount: jax.Array
    xi: jax.Array


@chex.dataclass(frozen=True)
class DUCBState:
    """State of :class:`Discounted` (D-UCB and D-klUCB)."""

    t: jax.Array  # () int32, rounds played so far
    counts: jax.Array  # (num_arms,) float, N_t(gamma, i) = sum_s gamma^{t-s} 1{I_s = i}
    sums: jax.Array  # (num_arms,) float, sum_s gamma^{t-s} X_s 1{I_s = i}
    params: Any  # the learner's Params


def default_discount(horizon: int, num_changes: int) -> float:
    """``gamma = 1 - (4B)^{-1} sqrt(Upsilon_T / T)`` with ``B = 1`` (Garivier and Moulines)."""
    return 1.0 - math.sqrt(num_changes / horizon) / (4.0 * _ucb.REWARD_BOUND)


@dataclasses.dataclass(frozen=True)
class Discounted(_ucb.SwitchingPolicy):
    """Base class of D-UCB and D-klUCB: statistics discounted by ``gamma`` a round.

    After ``t`` rounds, with rewards ``X_s = 1 - l_s(I_s)``:
    ``N_t(gamma, i) = sum_{s<=t} gamma^{t-s} 1{I_s = i}`` (state ``counts``),
    ``sum_{s<=t} gamma^{t-s} X_s 1{I_s = i}`` (state ``sums``); the exploration term is
    ``log n_t(gamma)``, ``n_t(gamma) = sum_i N_t(gamma, i)``. The ``Params`` carry
    ``discount``.

    Attributes:
      discount: default ``gamma`` in (0, 1]; ``None`` gives ``1 - (1/4) sqrt(Upsilon_T / T)``
        (:func:`default_discount`).
    """

    discount: float | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        discount = self.discount
        if discount is None:
            discount = default_discount(self.horizon, self.num_changes)
            object.__setattr__(self, "discount", discount)
        discount = checks.check_real("discount", discount)
        if not 0.0 < discount <= 1.0:
            raise ValueError(
                f"discount must be in (0, 1] (1 is undiscounted UCB), got {self.discount!r}"
            )
        object.__setattr__(self, "discount", discount)

    def _init(self, key: jax.Array, params: Any) -> DUCBState:
        del key
        zeros = jnp.zeros((self.num_arms,), self.float_dtype)
        return DUCBState(t=jnp.zeros((), jnp.int32), counts=zeros, sums=zeros, params=params)

    def log_term(self, state: DUCBState) -> jax.Array:
        """``()`` ``log n_t(gamma)`` (0 before the first round)."""
        return jnp.log(jnp.maximum(jnp.sum(state.counts), 1.0))  # n_t >= 1 once any play

    def _tell(self, state: DUCBState, query: BanditQuery, observed: jax.Array) -> DUCBState:
        gamma = state.params.discount
        arm = query.arms[0]
        reward = estimators.loss_to_reward(observed[0])
        counts = (gamma * state.counts).at[arm].add(1.0)
        sums = (gamma * state.sums).at[arm].add(reward)
        return dataclasses.replace(
            state,
            t=state.t + 1,
            counts=counts.astype(self.float_dtype),
            sums=sums.astype(self.float_dtype),
        )


@dataclasses.dataclass(frozen=True)
class DUCB(Discounted, _ucb.SwitchingUCB):
    """Discounted UCB (Garivier and Moulines 2011, Algorithm 1), one query per round.

    After ``t`` rounds, with rewards ``X_s = 1 - l_s(I_s)`` and ``B = 1``:

    - ``N_t(gamma, i) = sum_{s<=t} gamma^{t-s} 1{I_s = i}`` (state ``counts``);
    - ``X-bar_t(gamma, i) = sum_{s<=t} gamma^{t-s} X_s 1{I_s = i} / N_t(gamma, i)``;
    - ``n_t(gamma) = sum_i N_t(gamma, i)``;
    - ``c_t(gamma, i) = 2B sqrt(xi log n_t(gamma) / N_t(gamma, i))``, times ``explore_scale``.

    Round ``t + 1`` plays ``argmax_i X-bar_t(gamma, i) + c_t(gamma, i)`` (``+inf`` at
    ``N = 0``, lowest index on ties). Defaults: ``gamma = 1 - (1/4) sqrt(Upsilon_T / T)``,
    ``xi = 1/2``. With ``gamma = 1`` and ``xi = 1/2`` it is UCB1
    (:class:`~stabl_jax.learners.ucb1.UCB1`).

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes``, ``discount``, ``xi``.

    Attributes:
      num_changes: ``Upsilon_T``, the breakpoints the default discount is tuned for.
      discount: default ``gamma`` in (0, 1]; ``None`` gives the paper's value.
      xi: the padding's constant ``xi > 0`` (default 1/2).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = DUCB(num_arms=3, horizon=400, num_changes=4)
      >>> learner.discount
      0.975
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> arms = []
      >>> for t in range(4):
      ...     state, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(t))
      ...     arms.append(int(info.arms[0]))
      >>> arms  # untried arms first, in index order, then the largest index
      [0, 1, 2, 0]
    """

    xi: float = dataclasses.field(default=0.5, compare=False)

    name: ClassVar[str] = "d_ucb"
    Params: ClassVar[type] = DUCBParams
    PADDING: ClassVar[float] = 2.0 * _ucb.REWARD_BOUND
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "explore_scale": checks.Interval(0.0),
        "discount": checks.Interval(0.0, 1.0, low_open=True),
        "xi": checks.Interval(0.0, low_open=True),
    }
