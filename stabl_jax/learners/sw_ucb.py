"""Sliding-window UCB (SW-UCB, Algorithm 2 of Garivier and Moulines, "On upper-confidence bound
policies for switching bandit problems", ALT 2011): a deterministic index policy on the last
``tau`` rounds, one query per round, rewards ``X = 1 - l`` in [0, 1] (``B = 1``).

:class:`SlidingWindow` keeps the window's statistics; SW-UCB reads them with the UCB index of
:class:`~stabl_jax.learners._ucb.SwitchingUCB`, SW-klUCB
(:mod:`stabl_jax.learners.sw_klucb`) with the kl-UCB index. Memory: ``8 (tau + K) + 8`` bytes
per run (float32).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, ClassVar, cast

import chex
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from stabl_jax import checks, estimators
from stabl_jax.learners import _ucb
from stabl_jax.learners.base import BanditQuery


@chex.dataclass(frozen=True)
class SWUCBParams:
    """Sweepable numbers of :class:`SWUCB`.

    Attributes:
      explore_scale: ``()`` multiplies the padding ``c_t(tau, i)`` (``>= 0``; 1 is the paper).
      xi: ``()`` the padding's constant ``xi > 0``.
    """

    explore_scale: jax.Array
    xi: jax.Array


@chex.dataclass(frozen=True)
class SWUCBState:
    """State of :class:`SlidingWindow` (SW-UCB and SW-klUCB)."""

    t: jax.Array  # () int32, rounds played so far
    window_arms: jax.Array  # (window,) int32 ring buffer of played arms; num_arms = empty slot
    window_rewards: jax.Array  # (window,) float ring buffer of their rewards X_s
    counts: jax.Array  # (num_arms,) int32, N_t(tau, i): plays of i in the window
    sums: jax.Array  # (num_arms,) float, rewards of i in the window
    params: Any  # the learner's Params


def default_window(horizon: int, num_changes: int) -> int:
    """``tau = 2B sqrt(T log T / Upsilon_T)`` with ``B = 1``, rounded down and at most ``T``
    (a longer window never fills within the horizon; ``Upsilon_T = 0`` gives ``T``)."""
    if num_changes == 0:
        return horizon
    tau = 2.0 * _ucb.REWARD_BOUND * math.sqrt(horizon * math.log(horizon) / num_changes)
    return min(horizon, max(1, math.floor(tau)))


@dataclasses.dataclass(frozen=True)
class SlidingWindow(_ucb.SwitchingPolicy):
    """Base class of SW-UCB and SW-klUCB: the statistics of the last ``tau`` rounds.

    After ``t`` rounds, with rewards ``X_s = 1 - l_s(I_s)``:
    ``N_t(tau, i) = sum_{s=t-tau+1}^{t} 1{I_s = i}`` (state ``counts``) and
    ``sum_{s=t-tau+1}^{t} X_s 1{I_s = i}`` (state ``sums``), kept in a ring buffer of
    ``tau`` (arm, reward) pairs; the exploration term is ``log(min(t, tau))``.

    Attributes:
      window: ``tau`` in ``[1, horizon]`` (static); ``None`` gives
        ``floor(2B sqrt(T log T / Upsilon_T))`` (:func:`default_window`).
    """

    window: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        window = resolve_window(self.window, self.horizon, self.num_changes)
        object.__setattr__(self, "window", window)

    @property
    def _window(self) -> int:
        """:attr:`window` as the constructor resolved it (never ``None``)."""
        return cast(int, self.window)

    def _init(self, key: jax.Array, params: Any) -> SWUCBState:
        del key
        window = empty_window(self._window, self.num_arms, self.float_dtype)
        return SWUCBState(t=jnp.zeros((), jnp.int32), params=params, **window)

    def log_term(self, state: SWUCBState) -> jax.Array:
        """``()`` ``log(min(t, tau))`` (0 before the first round)."""
        span = jnp.minimum(state.t, self._window).astype(self.float_dtype)
        return jnp.log(jnp.maximum(span, 1.0))  # t >= 1 whenever some count is > 0

    def _tell(self, state: SWUCBState, query: BanditQuery, observed: jax.Array) -> SWUCBState:
        reward = estimators.loss_to_reward(observed[0])
        window = slide_window(state, query.arms[0], reward, self._window)
        return dataclasses.replace(state, t=state.t + 1, **window)


@dataclasses.dataclass(frozen=True)
class SWUCB(SlidingWindow, _ucb.SwitchingUCB):
    """Sliding-window UCB (Garivier and Moulines 2011, Algorithm 2), one query per round.

    After ``t`` rounds, over the last ``tau`` of them, with rewards ``X_s = 1 - l_s(I_s)`` and
    ``B = 1``:

    - ``N_t(tau, i) = sum_{s=t-tau+1}^{t} 1{I_s = i}`` (state ``counts``);
    - ``X-bar_t(tau, i) = sum_{s=t-tau+1}^{t} X_s 1{I_s = i} / N_t(tau, i)``;
    - ``c_t(tau, i) = B sqrt(xi log(min(t, tau)) / N_t(tau, i))``, times ``explore_scale``.

    Round ``t + 1`` plays ``argmax_i X-bar_t(tau, i) + c_t(tau, i)`` (``+inf`` at
    ``N_t(tau, i) = 0``, lowest index on ties). The window is a ring buffer of ``tau``
    (arm, reward) pairs. Defaults: ``tau = floor(2B sqrt(T log T / Upsilon_T))`` (at most
    ``T``), ``xi = 0.6``.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes`` (through the default window
    only), ``xi``. Static: ``window`` (the ring buffer's size).

    Attributes:
      num_changes: ``Upsilon_T``, the breakpoints the default window is tuned for.
      window: ``tau`` in ``[1, horizon]`` (static); ``None`` gives the paper's value.
      xi: the padding's constant ``xi > 0`` (default 0.6).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> SWUCB(num_arms=3, horizon=400, num_changes=4).window  # the paper's default
      48
      >>> learner = SWUCB(num_arms=3, horizon=400, window=2)
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> for t in range(3):  # arms 0, 1, 2: the untried ones first, in index order
      ...     state, _ = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(t))
      >>> state.counts.tolist()  # arm 0 has left the two-round window...
      [0, 1, 1]
      >>> _, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(3))
      >>> int(info.arms[0])  # ...so it is untried again and played next
      0
    """

    xi: float = dataclasses.field(default=0.6, compare=False)

    name: ClassVar[str] = "sw_ucb"
    Params: ClassVar[type] = SWUCBParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "explore_scale": checks.Interval(0.0),
        "xi": checks.Interval(0.0, low_open=True),
    }


def resolve_window(window: int | None, horizon: int, num_changes: int) -> int:
    """``window`` checked to lie in ``[1, horizon]``; ``None`` gives :func:`default_window`."""
    if window is None:
        window = default_window(horizon, num_changes)
    window = checks.check_int("window", window, minimum=1)
    if window > horizon:
        raise ValueError(
            f"window must be in [1, horizon={horizon}], got {window} (a window longer"
            " than the horizon never fills: use window=horizon)"
        )
    return window


def empty_window(window: int, num_arms: int, dtype: DTypeLike) -> dict[str, Any]:
    """The window fields of a state (``window_arms``, ``window_rewards``, ``counts``,
    ``sums``) before any round: every slot empty (the sentinel arm ``num_arms``)."""
    return {
        "window_arms": jnp.full((window,), num_arms, jnp.int32),
        "window_rewards": jnp.zeros((window,), dtype),
        "counts": jnp.zeros((num_arms,), jnp.int32),
        "sums": jnp.zeros((num_arms,), dtype),
    }


def slide_window(state: Any, arm: jax.Array, reward: jax.Array, window: int) -> dict[str, Any]:
    """The window fields after round ``state.t``: the pair ``(arm, reward)`` enters the ring
    buffer in slot ``t mod tau``, and the pair of round ``t - tau`` it overwrites leaves
    ``counts`` and ``sums`` (an empty slot's sentinel arm is dropped).

    Args:
      state: a state with the fields of :func:`empty_window` and the round counter ``t``.
      arm: ``()`` int32, the played arm.
      reward: ``()`` its reward (a Bernoulli trial for SW-TS).
      window: ``tau`` (static).
    """
    slot = state.t % window
    old_arm = state.window_arms[slot]
    old_reward = state.window_rewards[slot]
    counts = state.counts.at[old_arm].add(-1, mode="drop").at[arm].add(1)
    sums = state.sums.at[old_arm].add(-old_reward, mode="drop").at[arm].add(reward)
    sums = jnp.where(counts == 0, 0.0, sums)  # no rounding residue in an emptied arm
    return {
        "window_arms": state.window_arms.at[slot].set(arm),
        "window_rewards": state.window_rewards.at[slot].set(reward),
        "counts": counts,
        "sums": sums.astype(state.sums.dtype),
    }
