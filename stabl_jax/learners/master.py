"""MASTER over UCB1 (Wei and Luo, "Non-stationary reinforcement learning without prior
knowledge: an optimal black-box approach", COLT 2021, Algorithm 1 (MALG) and Algorithm 2
(MASTER)), in its multi-armed bandit instantiation with UCB1 (Auer, Cesa-Bianchi and Fischer
2002) as the base algorithm ``ALG``.

One query per round; rewards ``R_t = 1 - l_t``. ``rho(t) = sqrt(K / t) + K / t`` is UCB1's
average-regret bound and ``rho-hat(t) = test_scale * 6 n-hat log(T / delta) rho(t)`` with
``n-hat = log2(T) + 1``. The algorithm boxes, mapped to the code:

- MASTER (Algorithm 2): epochs of blocks ``n = 0, 1, 2, ...``; block ``n`` covers
  ``[t_n, t_n + 2^n - 1]`` and runs a fresh MALG on it. Each round the active instance plays and
  reports its optimistic estimate ``g~_t``; ``U_t = min_{tau in [t_n, t]} g~_tau``. A test
  that fails ends the epoch: the next round starts block ``n = 0`` (``_tell``).
- MALG (Algorithm 1) on block ``n``: at each round ``tau`` and order ``m = n, ..., 0`` with
  ``2^m`` dividing ``tau - t_n``, with probability ``rho(2^n) / rho(2^m)`` schedule a fresh
  instance of order ``m`` on ``[tau, tau + 2^m - 1]`` (``_ask``; order ``n`` at ``t_n`` always).
  The active instance is the alive one of lowest order; an instance covered by a shorter one
  pauses and resumes where it stopped.
- Test 1: at the end ``t = alg.e`` of an order-``m`` instance,
  ``(1 / 2^m) sum_{tau = alg.s}^{alg.e} R_tau >= U_t + 9 rho-hat(2^m)`` fails.
- Test 2: ``(1 / (t - t_n + 1)) sum_{tau = t_n}^{t} (g~_tau - R_tau) >= 3 rho-hat(t - t_n + 1)``
  fails.
- UCB1 in an instance: play each arm once (lowest index first), then
  ``argmax_a mu-hat(a) + explore_scale sqrt(2 log N / N(a))`` (``N``: the instance's plays);
  ``g~_t = min(1, that index)``, ``1`` for an untried arm.

Reading (marked): the boxes were not available to read; the above follows the paper's abstract,
the public C++ of MALG with UCB1 (its scheduling probability ``rho(2^n) / rho(2^m)`` with
``rho(t) = sqrt(K / t) + K / t`` and the shortest alive instance playing), and this module's
reading of MASTER's tests and ``rho-hat``: the constants 9 and 3, ``6 n-hat log(T / delta)``,
``U_t`` over the block, ``g~`` as UCB1's clipped index, and the default ``delta = 1 / T``.
``test_scale`` (1: as read) multiplies ``rho-hat``. With rewards in [0, 1] no test can fail
while ``rho-hat(T) > 1/3``, which at ``test_scale = 1`` holds for every ``K >= 2`` and
``T <= 2^20``; a smaller ``test_scale`` lets the tests act.

Bounded state, exact: block ``n`` never exceeds ``floor(log2 T)`` within the horizon (blocks
``0..n-1`` take ``2^n - 1`` rounds), and MALG holds at most one instance per order, so the
state keeps ``M = floor(log2 T) + 1`` instances. Memory per run (float32):
``M (8 K + 9)`` bytes plus five scalars.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar, cast

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, estimators, sampling
from stabl_jax.learners import _ucb
from stabl_jax.learners.base import BanditLearner, BanditQuery

_NEVER = np.iinfo(np.int32).max


@chex.dataclass(frozen=True)
class MASTERParams:
    """Sweepable numbers of :class:`MASTER`.

    Attributes:
      delta: ``()`` the confidence ``delta`` in (0, 1) of ``rho-hat``.
      test_scale: ``()`` multiplies ``rho-hat`` in both tests (``> 0``; 1 is the paper).
      explore_scale: ``()`` multiplies UCB1's padding (``>= 0``; 1 is UCB1).
    """

    delta: jax.Array
    test_scale: jax.Array
    explore_scale: jax.Array


@chex.dataclass(frozen=True)
class MASTERState:
    t: jax.Array  # () int32, rounds played so far
    order: jax.Array  # () int32, the block's n
    block_start: jax.Array  # () int32, rounds played before the block (t_n - 1)
    low: jax.Array  # () float, U_t: min of g~ over the block (+inf before its first round)
    gap_sum: jax.Array  # () float, sum of g~ - R over the block
    alive: jax.Array  # (M,) bool, an instance of order m is scheduled and not ended
    inst_start: jax.Array  # (M,) int32, rounds played before it began (alg.s - 1)
    rewards: jax.Array  # (M,) float, sum of R over [alg.s, t]
    counts: jax.Array  # (M, K) int32, UCB1 plays of each arm by the instance
    sums: jax.Array  # (M, K) float, their reward sums
    params: MASTERParams


@chex.dataclass(frozen=True)
class MASTERQuery(BanditQuery):
    """A :class:`BanditQuery` that also carries MALG's draw and the instance's estimate.

    Attributes:
      scheduled: ``(M,)`` bool, the orders that start a fresh instance this round.
      optimistic: ``()`` float, ``g~_t``.
    """

    scheduled: jax.Array
    optimistic: jax.Array


def rho(t: jax.Array, num_arms: int) -> jax.Array:
    """UCB1's average-regret bound ``sqrt(K / t) + K / t``."""
    return jnp.sqrt(num_arms / t) + num_arms / t


@dataclasses.dataclass(frozen=True)
class MASTER(BanditLearner):
    """MASTER over UCB1 (Wei and Luo 2021, Algorithms 1 and 2), as the module says.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``delta``.

    Attributes:
      delta: default of the Params' ``delta``; ``None`` gives ``1 / T``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = MASTER(num_arms=3, horizon=64)
      >>> learner.num_orders  # instances of order 0..6
      7
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> arms = []
      >>> for t in range(3):  # blocks 0 and 1: each fresh UCB1 instance tries arm 0 first
      ...     state, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(t))
      ...     arms.append(int(info.arms[0]))
      >>> arms, int(state.order)
      ([0, 0, 0], 2)
    """

    delta: float | None = dataclasses.field(default=None, compare=False)

    name: ClassVar[str] = "master"
    Params: ClassVar[type] = MASTERParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "delta": checks.Interval(0.0, 1.0, low_open=True, high_open=True),
        "test_scale": checks.Interval(0.0, low_open=True),
        "explore_scale": checks.Interval(0.0),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_horizon(self.horizon, minimum=2)  # log(T / delta) > 0
        delta = checks.fill(self, "delta", 1.0 / self.horizon, checks.check_probability)
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta}")

    @property
    def num_orders(self) -> int:
        """``M = floor(log2 T) + 1``: the orders ``m = 0..M-1`` a block reaches."""
        return self.horizon.bit_length()

    def _init(self, key: jax.Array, params: MASTERParams) -> MASTERState:
        del key
        return self._fresh(params)

    def _fresh(self, params: MASTERParams) -> MASTERState:
        """Round 0's state: block 0 of an epoch, no instance yet."""
        m, k, f = self.num_orders, self.num_arms, self.float_dtype
        zero = jnp.zeros((), jnp.int32)
        return MASTERState(
            t=zero,
            order=zero,
            block_start=zero,
            low=jnp.full((), jnp.inf, f),
            gap_sum=jnp.zeros((), f),
            alive=jnp.zeros((m,), bool),
            inst_start=jnp.zeros((m,), jnp.int32),
            rewards=jnp.zeros((m,), f),
            counts=jnp.zeros((m, k), jnp.int32),
            sums=jnp.zeros((m, k), f),
            params=params,
        )

    @property
    def _lengths(self) -> jax.Array:
        """``(M,)`` int32 ``2^m``."""
        return jnp.asarray(2 ** np.arange(self.num_orders), jnp.int32)

    def _rho_hat(self, t: jax.Array, params: MASTERParams) -> jax.Array:
        n_hat = math.log2(self.horizon) + 1.0
        log_term = jnp.log(self.horizon / params.delta)
        return params.test_scale * 6.0 * n_hat * log_term * rho(t, self.num_arms)

    def _instances(
        self, state: MASTERState, scheduled: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """After this round's scheduling: alive ``(M,)``, the active order ``()``, and the
        active instance's counts and sums ``(K,)``."""
        alive = state.alive | scheduled
        active = jnp.argmin(jnp.where(alive, jnp.arange(self.num_orders), _NEVER))
        fresh = scheduled[active]
        counts = jnp.where(fresh, 0, state.counts[active])
        sums = jnp.where(fresh, 0.0, state.sums[active]).astype(self.float_dtype)
        return alive, active, counts, sums

    def _ask(self, state: MASTERState, key: jax.Array) -> MASTERQuery:
        """MALG's scheduling, then the active UCB1 instance's arm and ``g~_t``."""
        f, lengths = self.float_dtype, self._lengths
        offset = state.t - state.block_start  # tau - t_n
        u = sampling.uniforms(key, self.num_orders, f)
        block = rho(jnp.asarray(2.0, f) ** state.order, self.num_arms)
        prob = block / rho(lengths.astype(f), self.num_arms)
        due = (jnp.arange(self.num_orders) <= state.order) & (offset % lengths == 0)
        scheduled = due & (u < prob)
        _, _, counts, sums = self._instances(state, scheduled)
        width = state.params.explore_scale * math.sqrt(2.0)
        log_n = jnp.log(jnp.maximum(jnp.sum(counts), 1).astype(f))
        index = _ucb.ucb_index(counts.astype(f), sums, log_n, width)
        query = _ucb.greedy_query(index, f)
        optimistic = jnp.minimum(index[query.arms[0]], 1.0)
        return MASTERQuery(
            arms=query.arms,
            play_probs=query.play_probs,
            query_probs=query.query_probs,
            scheduled=scheduled,
            optimistic=optimistic,
        )

    def _tell(self, state: MASTERState, query: BanditQuery, observed: jax.Array) -> MASTERState:
        """UCB1's update, Tests 1 and 2, and the next block (or a new epoch on a failure)."""
        query = cast(MASTERQuery, query)
        arm, f, lengths = query.arms[0], self.float_dtype, self._lengths
        reward = estimators.loss_to_reward(observed[0])
        fresh = query.scheduled
        alive, active, _, _ = self._instances(state, fresh)
        start = jnp.where(fresh, state.t, state.inst_start)
        rewards = jnp.where(fresh, 0.0, state.rewards) + jnp.where(alive, reward, 0.0)
        low = jnp.minimum(state.low, query.optimistic)
        gap_sum = state.gap_sum + query.optimistic - reward
        ending = alive & (state.t + 1 == start + lengths)
        params = state.params
        test1 = ending & (rewards / lengths >= low + 9.0 * self._rho_hat(lengths.astype(f), params))
        span = (state.t + 1 - state.block_start).astype(f)
        test2 = gap_sum / span >= 3.0 * self._rho_hat(span, params)
        played = dataclasses.replace(
            state,
            low=low,
            gap_sum=gap_sum.astype(f),
            alive=alive & ~ending,
            inst_start=start,
            rewards=rewards.astype(f),
            counts=jnp.where(fresh[:, None], 0, state.counts).at[active, arm].add(1),
            sums=jnp.where(fresh[:, None], 0.0, state.sums).at[active, arm].add(reward),
        )
        failed = jnp.any(test1) | test2
        done = span == jnp.asarray(2.0, f) ** state.order
        order = jnp.where(failed, 0, jnp.minimum(state.order + 1, self.num_orders - 1))
        block = dataclasses.replace(self._fresh(params), order=order)
        new = jax.tree.map(lambda a, b: jnp.where(failed | done, a, b), block, played)
        t = state.t + 1
        return dataclasses.replace(
            new, t=t, block_start=jnp.where(failed | done, t, state.block_start)
        )
