"""M-UCB (Cao, Wen, Kveton and Xie, "Nearly optimal adaptive procedure with change detection for
piecewise-stationary bandit", AISTATS 2019): UCB with forced exploration, restarted globally
when a sliding-window test sees the mean of one arm move.

One deterministic query per round; rewards ``x = 1 - l``. Memory: ``4 K (w + 2)`` bytes per
run (float32).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar, cast

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, estimators
from stabl_jax.learners import _detect, _ucb
from stabl_jax.learners.base import BanditLearner, BanditQuery


@chex.dataclass(frozen=True)
class MUCBParams:
    """Sweepable numbers of :class:`MUCB`.

    Attributes:
      threshold: ``()`` the test's threshold ``b > 0``.
      gamma: ``()`` the forced-exploration fraction ``gamma`` in [0, 1].
    """

    threshold: jax.Array
    gamma: jax.Array


@chex.dataclass(frozen=True)
class MUCBState:
    t: jax.Array  # () int32, rounds played so far
    tau: jax.Array  # () int32, rounds played at the last restart
    counts: jax.Array  # (K,) int32, n_k: samples of arm k since the restart
    sums: jax.Array  # (K,) float, their reward sum
    recent: jax.Array  # (K, w) float ring buffer: sample j of arm k at [k, (j - 1) mod w]
    params: MUCBParams


def default_window(num_arms: int, horizon: int, num_changes: int, min_change: float) -> int:
    """Cao et al.'s Remark 1 window ``w = (4 / delta^2) (sqrt(log(2 K T^2)) + sqrt(log(2T)))^2``
    for the smallest change ``delta = min_change``, rounded up to even, then capped at the mean
    segment length ``T / M`` (``M = num_changes + 1``) rounded down to even, at least 2."""
    k, t, m = num_arms, horizon, num_changes + 1
    root = math.sqrt(math.log(2 * k * t * t)) + math.sqrt(math.log(2 * t))
    w = math.ceil(4.0 / min_change**2 * root**2)
    return max(2, min(w + w % 2, 2 * (t // (2 * m))))


#: What ``M`` counts in the default ``gamma``: Cao et al.'s stationary segments
#: (``Upsilon_T + 1``) or Besson et al.'s breakpoints (``max(1, Upsilon_T)``).
GAMMA_COUNTS = ("segments", "breakpoints")


def default_threshold_gamma(
    num_arms: int, horizon: int, num_changes: int, window: int, count: str = "segments"
) -> tuple[float, float]:
    """Remark 1's ``b = sqrt((w / 2) log(2 K T^2))`` and ``gamma = sqrt(M K (2b + 3 sqrt(w)) /
    (2T))`` (clipped to [0, 1]) for window ``w``, with ``M = num_changes + 1`` segments
    (``count="segments"``) or ``M = max(1, num_changes)`` breakpoints (``"breakpoints"``)."""
    m = num_changes + 1 if count == "segments" else max(1, num_changes)
    k, t = num_arms, horizon
    b = math.sqrt(window / 2 * math.log(2 * k * t * t))
    return b, min(1.0, math.sqrt(m * k * (2 * b + 3 * math.sqrt(window)) / (2 * t)))


@dataclasses.dataclass(frozen=True)
class MUCB(BanditLearner):
    """M-UCB (Cao et al. 2019, Algorithms 1 (change detection) and 2 (M-UCB)).

    With ``tau`` the last restart and ``n_k`` the samples of arm ``k`` since then, round
    ``t`` (1-based):

    1. ``A = (t - tau) mod floor(K / gamma)``; if ``1 <= A <= K`` play arm ``A`` (forced);
    2. else play ``argmax_k X-bar_k + sqrt(2 log(t - tau) / n_k)`` (``+inf`` if ``n_k = 0``,
       lowest index on ties);
    3. append the reward to the played arm's samples; once ``n_k >= w``, with ``Y_1..Y_w``
       its last ``w`` samples, if ``|sum_{j > w/2} Y_j - sum_{j <= w/2} Y_j| > b``, restart:
       ``tau = t`` and every ``n_k = 0``.

    Defaults: Remark 1's ``w``, ``b``, ``gamma`` for ``M = num_changes + 1`` segments and
    ``delta = min_change``, ``w`` capped at the mean segment length so it fills between changes.
    ``M`` is what Cao et al. call it, the number of stationary segments; Besson et al.'s code
    (SMPyBandits ``Policies/Monitored_UCB.py``) puts the breakpoints ``max(1, Upsilon_T)`` in
    ``gamma``'s ``M``: ``gamma_count="breakpoints"``. (Their experiments also set
    ``w = K ceil(T / 100)`` and leave ``Upsilon_T`` unset, so ``M = 1``: pass ``window`` and
    ``num_changes`` to run those.)

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes``, ``min_change`` (both also
    through the default window), ``threshold``, ``gamma``, ``gamma_count``. Static: ``window``
    (the buffer's size).

    Attributes:
      num_changes: breakpoints the defaults are tuned for (``M - 1``).
      min_change: ``delta`` in (0, 1], the smallest change of a mean the window is sized for.
      window: ``w``, even and ``>= 2`` (static: the buffer's size); ``None`` gives the default.
      threshold, gamma: defaults of the Params; ``None`` gives Remark 1's values for ``w``.
      gamma_count: ``"segments"`` (Cao et al.) or ``"breakpoints"`` (Besson et al.'s code),
        what ``M`` counts in the default ``gamma``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = MUCB(num_arms=3, horizon=1000, num_changes=1)
      >>> learner.window, round(learner.threshold, 2), round(learner.gamma, 3)
      (500, 62.46, 0.759)
    """

    num_changes: int = dataclasses.field(default=3, compare=False)
    min_change: float = dataclasses.field(default=0.1, compare=False)
    window: int | None = None
    threshold: float | None = dataclasses.field(default=None, compare=False)
    gamma: float | None = dataclasses.field(default=None, compare=False)
    gamma_count: str = dataclasses.field(default="segments", compare=False)

    name: ClassVar[str] = "m_ucb"
    Params: ClassVar[type] = MUCBParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "threshold": checks.Interval(0.0, low_open=True),
        "gamma": checks.Interval(0.0, 1.0),
    }
    records_restarts: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_changes", self.num_changes, minimum=0)
        delta = checks.check_probability("min_change", self.min_change)
        if delta == 0.0:
            raise ValueError("min_change must be in (0, 1], got 0")
        w = default_window(self.num_arms, self.horizon, self.num_changes, delta)
        w = checks.fill(self, "window", w, checks.check_int, minimum=2)
        if w % 2:
            raise ValueError(f"window must be even (two halves), got {w}")
        checks.check_choice("gamma_count", self.gamma_count, GAMMA_COUNTS)
        k, t, count = self.num_arms, self.horizon, self.gamma_count
        b, gamma = default_threshold_gamma(k, t, self.num_changes, w, count)
        checks.fill(self, "threshold", b, checks.check_positive)
        checks.fill(self, "gamma", gamma, checks.check_probability)

    @property
    def _window(self) -> int:
        return cast(int, self.window)

    def _init(self, key: jax.Array, params: MUCBParams) -> MUCBState:
        del key
        k, f = self.num_arms, self.float_dtype
        return MUCBState(
            t=jnp.zeros((), jnp.int32),
            tau=jnp.zeros((), jnp.int32),
            counts=jnp.zeros((k,), jnp.int32),
            sums=jnp.zeros((k,), f),
            recent=jnp.zeros((k, self._window), f),
            params=params,
        )

    def index(self, state: MUCBState) -> jax.Array:
        """``(num_arms,)`` step 2's UCB; ``+inf`` for arms without samples since the restart."""
        f = self.float_dtype
        log_s = jnp.log((state.t - state.tau + 1).astype(f))
        return _ucb.ucb_index(
            state.counts.astype(f), state.sums, log_s, jnp.asarray(math.sqrt(2.0), f)
        )

    def _ask(self, state: MUCBState, key: jax.Array) -> BanditQuery:
        """Steps 1-2 (deterministic: ``key`` is not used)."""
        del key
        forced = _detect.forced_arm(state.t - state.tau + 1, state.params.gamma, self.num_arms)
        return _detect.point_query(self.index(state), forced, self.float_dtype)

    def _tell(self, state: MUCBState, query: BanditQuery, observed: jax.Array) -> MUCBState:
        """Step 3."""
        w, arm = self._window, query.arms[0]
        y = estimators.loss_to_reward(observed[0])
        n = state.counts[arm] + 1
        row = state.recent[arm].at[(n - 1) % w].set(y)
        age = (n - 1 - jnp.arange(w)) % w  # 0 for the newest sample
        newer = jnp.sum(jnp.where(age < w // 2, row, 0.0))
        older = jnp.sum(jnp.where(age >= w // 2, row, 0.0))
        alarm = (n >= w) & (jnp.abs(newer - older) > state.params.threshold)
        counts = state.counts.at[arm].set(n)
        sums = state.sums.at[arm].add(y)
        return dataclasses.replace(
            state,
            t=state.t + 1,
            tau=jnp.where(alarm, state.t + 1, state.tau),
            counts=jnp.where(alarm, 0, counts),
            sums=jnp.where(alarm, 0.0, sums).astype(self.float_dtype),
            recent=state.recent.at[arm].set(row),
        )

    def restarted(self, state: MUCBState, new_state: MUCBState) -> jax.Array:
        """``()`` bool: the round from ``state`` to ``new_state`` raised an alarm (a global
        restart: every count returns to 0, the alarming arm's from ``w - 1`` or more)."""
        return jnp.any(new_state.counts < state.counts)
