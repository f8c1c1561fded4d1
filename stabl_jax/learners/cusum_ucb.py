"""CUSUM-UCB (Liu, Lee and Shroff, "A change-detection based framework for piecewise-stationary
multi-armed bandit problem", AAAI 2018): UCB restarted arm by arm by a two-sided CUSUM test.

One query per round; rewards ``x = 1 - l``. Memory: ``21 K`` bytes per run (float32).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, estimators
from stabl_jax.learners import _ucb
from stabl_jax.learners.base import BanditLearner, BanditQuery, sample_query


@chex.dataclass(frozen=True)
class CUSUMUCBParams:
    """Sweepable numbers of :class:`CUSUMUCB`.

    Attributes:
      threshold: ``()`` the CUSUM threshold ``h > 0``.
      drift: ``()`` the CUSUM drift ``epsilon >= 0``.
      alpha: ``()`` the uniform-exploration probability ``alpha`` in [0, 1].
      warmup: ``()`` ``M >= 1``, samples that estimate the pre-change mean (its floor is used).
      xi: ``()`` the padding's constant ``xi > 0``.
    """

    threshold: jax.Array
    drift: jax.Array
    alpha: jax.Array
    warmup: jax.Array
    xi: jax.Array


@chex.dataclass(frozen=True)
class CUSUMUCBState:
    t: jax.Array  # () int32, rounds played so far
    counts: jax.Array  # (K,) int32, N_i: samples of arm i since its last restart
    sums: jax.Array  # (K,) float, their reward sum
    warm_sums: jax.Array  # (K,) float, the sum of the first M of them (M u0_i once full)
    g_plus: jax.Array  # (K,) float, CUSUM g+ (upward change of the reward)
    g_minus: jax.Array  # (K,) float, CUSUM g- (downward change)
    crossed: jax.Array  # (K,) bool, g+ or g- reached h since arm i's last test
    params: CUSUMUCBParams


def default_threshold_alpha(horizon: int, num_changes: int) -> tuple[float, float]:
    """``h = log(T / Upsilon_T)`` and ``alpha = sqrt(Upsilon_T / T * log(T / Upsilon_T))``
    (Liu et al., Corollary 1), ``Upsilon_T = max(1, num_changes)``, alpha clipped to [0, 1]."""
    ratio = horizon / max(1, num_changes)
    h = math.log(max(ratio, math.e))  # at least 1 when T <= e Upsilon_T
    return h, min(1.0, math.sqrt(h / ratio))


@dataclasses.dataclass(frozen=True)
class CUSUMUCB(BanditLearner):
    """CUSUM-UCB (Liu, Lee and Shroff 2018, Algorithms 1 (CD-UCB) and 2 (two-sided CUSUM)).

    After ``t`` rounds, arm ``i`` has ``N_i`` rewards ``y_1..y_{N_i}`` since its last restart
    (state ``counts``, ``sums``), ``n_t = sum_i N_i``, and round ``t + 1``:

    1. ``UCB_i = X-bar_i + sqrt(xi log n_t / N_i)`` (``+inf`` if ``N_i = 0``);
    2. plays ``argmax_i UCB_i`` with probability ``1 - alpha`` and a uniform arm with
       probability ``alpha``: ``p = (1 - alpha) e_{argmax} + alpha / K`` (lowest index on ties);
    3. feeds the reward ``y_k`` (``k = N_i + 1``) of the played arm ``i`` to its CUSUM:
       ``u0 = (1/M) sum_{j<=M} y_j``; for ``k > M``,
       ``g+ = max(0, g+ + y_k - u0 - epsilon)``, ``g- = max(0, g- + u0 - y_k - epsilon)``;
    4. on an alarm, ``g+ >= h`` or ``g- >= h``, restarts arm ``i`` (``tau_i = t + 1``):
       ``N_i``, its sums and its CUSUM return to 0 (the alarming sample is dropped). With
       ``test_every = Delta n > 1`` the alarm waits for ``k`` to be a multiple of ``Delta n``
       and fires if ``g+`` or ``g-`` reached ``h`` at any sample since the last test.

    Defaults: ``h = log(T / Upsilon_T)``, ``alpha = sqrt((Upsilon_T / T) log(T / Upsilon_T))``
    (Corollary 1); ``epsilon = 0.05``, ``M = 50`` (the paper's experiments); ``xi = 1``; the
    test on every sample (``Delta n = 1``, the paper). Besson et al.'s experiments
    (SMPyBandits ``Policies/CUSUM_UCB.py``, ``configuration_nonstationary.py``) ran it with
    ``epsilon = 0.1``, ``M = 100``, ``Delta n = 20``, a kl-UCB index and a restarted arm keeping
    its samples after the estimated change (those two not offered here).

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes``, ``threshold``, ``drift``,
    ``alpha``, ``warmup``, ``xi``. Static: ``test_every`` (a schedule).

    Attributes:
      num_changes: ``Upsilon_T``, breakpoints the default ``h`` and ``alpha`` are tuned for.
      threshold, alpha: defaults of the Params; ``None`` gives Corollary 1's values.
      drift, warmup: defaults of the Params (``epsilon``, ``M``).
      xi: the padding's constant ``xi > 0``.
      test_every: ``Delta n >= 1``, the alarm is checked when ``k`` is a multiple of it.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = CUSUMUCB(num_arms=3, horizon=1000, num_changes=1)
      >>> round(learner.threshold, 3), round(learner.alpha, 3)
      (6.908, 0.083)
      >>> state, info = jax.jit(learner.step)(learner.init(jax.random.key(0)),
      ...                            jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> state.counts.tolist()
      [1, 0, 0]
    """

    num_changes: int = dataclasses.field(default=3, compare=False)
    threshold: float | None = dataclasses.field(default=None, compare=False)
    drift: float = dataclasses.field(default=0.05, compare=False)
    alpha: float | None = dataclasses.field(default=None, compare=False)
    warmup: int = dataclasses.field(default=50, compare=False)
    xi: float = dataclasses.field(default=1.0, compare=False)
    test_every: int = 1

    name: ClassVar[str] = "cusum_ucb"
    Params: ClassVar[type] = CUSUMUCBParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "threshold": checks.Interval(0.0, low_open=True),
        "drift": checks.Interval(0.0),
        "alpha": checks.Interval(0.0, 1.0),
        "warmup": checks.Interval(1.0),
        "xi": checks.Interval(0.0, low_open=True),
    }
    records_restarts: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_changes", self.num_changes, minimum=0)
        h, alpha = default_threshold_alpha(self.horizon, self.num_changes)
        checks.fill(self, "threshold", h, checks.check_positive)
        checks.fill(self, "alpha", alpha, checks.check_probability)
        object.__setattr__(self, "drift", checks.check_nonnegative("drift", self.drift))
        checks.check_int("warmup", self.warmup, minimum=1)
        object.__setattr__(self, "xi", checks.check_positive("xi", self.xi))
        checks.check_int("test_every", self.test_every, minimum=1)

    def _init(self, key: jax.Array, params: CUSUMUCBParams) -> CUSUMUCBState:
        del key
        zeros = jnp.zeros((self.num_arms,), self.float_dtype)
        return CUSUMUCBState(
            t=jnp.zeros((), jnp.int32),
            counts=jnp.zeros((self.num_arms,), jnp.int32),
            sums=zeros,
            warm_sums=zeros,
            g_plus=zeros,
            g_minus=zeros,
            crossed=jnp.zeros((self.num_arms,), bool),
            params=params,
        )

    def index(self, state: CUSUMUCBState) -> jax.Array:
        """``(num_arms,)`` ``UCB_i``; ``+inf`` for arms without samples since their restart."""
        f = self.float_dtype
        log_n = jnp.log(jnp.maximum(jnp.sum(state.counts), 1).astype(f))
        return _ucb.ucb_index(state.counts.astype(f), state.sums, log_n, jnp.sqrt(state.params.xi))

    def play_distribution(self, state: CUSUMUCBState) -> jax.Array:
        """``(num_arms,)`` step 2: ``(1 - alpha) e_{argmax UCB} + alpha / K``."""
        alpha = state.params.alpha
        greedy = jax.nn.one_hot(jnp.argmax(self.index(state)), self.num_arms, dtype=alpha.dtype)
        return (1.0 - alpha) * greedy + alpha / self.num_arms

    def _ask(self, state: CUSUMUCBState, key: jax.Array) -> BanditQuery:
        return sample_query(key, self.play_distribution(state))

    def _tell(self, state: CUSUMUCBState, query: BanditQuery, observed: jax.Array) -> CUSUMUCBState:
        """Steps 3-4 for the played arm."""
        p, arm = state.params, query.arms[0]
        y = estimators.loss_to_reward(observed[0])
        m = jnp.floor(p.warmup)
        k = state.counts[arm] + 1
        warm = state.warm_sums[arm] + jnp.where(k <= m, y, 0.0)
        u0, active = warm / m, k > m
        g_plus = jnp.where(active, jnp.maximum(0.0, state.g_plus[arm] + y - u0 - p.drift), 0.0)
        g_minus = jnp.where(active, jnp.maximum(0.0, state.g_minus[arm] + u0 - y - p.drift), 0.0)
        crossed = state.crossed[arm] | (
            active & ((g_plus >= p.threshold) | (g_minus >= p.threshold))
        )
        tested = k % self.test_every == 0
        keep = ~(crossed & tested)

        def put(values: jax.Array, value: jax.Array) -> jax.Array:
            return values.at[arm].set(jnp.where(keep, value, 0).astype(values.dtype))

        return dataclasses.replace(
            state,
            t=state.t + 1,
            counts=put(state.counts, k),
            sums=put(state.sums, state.sums[arm] + y),
            warm_sums=put(state.warm_sums, warm),
            g_plus=put(state.g_plus, g_plus),
            g_minus=put(state.g_minus, g_minus),
            crossed=state.crossed.at[arm].set(crossed & ~tested),
        )

    def restarted(self, state: CUSUMUCBState, new_state: CUSUMUCBState) -> jax.Array:
        """``()`` bool: the round from ``state`` to ``new_state`` raised an alarm (the played
        arm's count returns to 0 from ``M`` or more)."""
        return jnp.any(new_state.counts < state.counts)
