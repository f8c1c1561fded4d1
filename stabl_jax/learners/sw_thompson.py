"""Sliding-window Thompson sampling (SW-TS; Trovò, Paladino, Restelli and Gatti,
"Sliding-window Thompson sampling for non-stationary settings", JAIR 68, 2020): Beta-Bernoulli
Thompson sampling on the last ``tau`` rounds only, one query per round.

The paper's algorithm (SW-TS, Algorithm 1), with its symbols (the pieces it shares with
Thompson sampling are in :mod:`stabl_jax.learners.thompson`, the window with SW-UCB in
:mod:`stabl_jax.learners.sw_ucb`):

::

    for t = 1, 2, ...:
        S_{i,t,tau} = successes of arm i in rounds t - tau .. t - 1      state sums
        F_{i,t,tau} = failures of arm i in those rounds                  counts - sums
        theta_i ~ Beta(S_{i,t,tau} + alpha_0, F_{i,t,tau} + beta_0)      _ask
        play i_t = argmax_i theta_i, observe r~_t                        _ask, _tell
        the pair (i_t, r~_t) enters the window, round t - tau's leaves   sw_ucb.slide_window

``r~_t = 1{u < 1 - l}`` is the Bernoulli trial of Agrawal and Goyal (for rewards in [0, 1];
the paper's rewards are Bernoulli). Defaults: ``alpha_0 = beta_0 = 1`` (the paper's uniform
prior); ``tau`` is our choice, the one SW-UCB uses for ``Upsilon_T = num_changes`` changes,
``floor(2 sqrt(T log T / Upsilon_T))`` at most ``T`` (``sw_ucb.default_window``), so that the
two sliding windows compare at equal ``tau``. We could read the abstract only, not the
algorithm box: the pseudo-code above is our reading.

Memory per run: a ring buffer of ``tau`` (int32 arm, float trial) pairs, ``2 K`` counts and sums,
the two prior parameters and an int32: ``8 tau + 8 K + 12`` bytes (float32).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar, cast

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks
from stabl_jax.learners import sw_ucb
from stabl_jax.learners.base import BanditQuery
from stabl_jax.learners.thompson import (
    PRIOR_BOUNDS,
    BetaThompson,
    ThompsonParams,
    bernoulli_trial,
)


@chex.dataclass(frozen=True)
class SWThompsonState:
    t: jax.Array  # () int32, rounds played so far
    window_arms: jax.Array  # (window,) int32 ring buffer of played arms; num_arms = empty slot
    window_rewards: jax.Array  # (window,) float ring buffer of their Bernoulli trials r~_s
    counts: jax.Array  # (num_arms,) int32, plays of i in the window
    sums: jax.Array  # (num_arms,) float, S_{i,t,tau}: successes of i in the window
    params: ThompsonParams


@dataclasses.dataclass(frozen=True)
class SWThompson(BetaThompson):
    """Sliding-window Thompson sampling (Trovò et al. 2020), one query per round.

    Round ``t + 1`` draws ``theta_i ~ Beta(S_i + alpha_0, F_i + beta_0)`` with ``S_i``,
    ``F_i`` the successes and failures of arm ``i`` in the last ``tau`` rounds (the Bernoulli
    trials ``1{u_s < 1 - l_s}``), and plays ``argmax_i theta_i``.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes`` (through the default
    window only). Static: ``window`` (the ring buffer's size).

    Attributes:
      num_changes: ``Upsilon_T``, the breakpoints the default window is tuned for.
      window: ``tau`` in ``[1, horizon]`` (static); ``None`` gives SW-UCB's default.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = SWThompson(num_arms=3, horizon=100, window=2)
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> for t in range(5):
      ...     state, _ = step(state, jnp.array([0.0, 0.0, 0.0]), jax.random.key(t))
      >>> int(state.counts.sum())  # only the last two rounds are remembered
      2
    """

    num_changes: int = dataclasses.field(default=3, compare=False)
    window: int | None = None

    name: ClassVar[str] = "sw_thompson"
    Params: ClassVar[type] = ThompsonParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = PRIOR_BOUNDS

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_changes", self.num_changes, minimum=0)
        window = sw_ucb.resolve_window(self.window, self.horizon, self.num_changes)
        object.__setattr__(self, "window", window)

    def _init(self, key: jax.Array, params: ThompsonParams) -> SWThompsonState:
        del key
        window = sw_ucb.empty_window(cast(int, self.window), self.num_arms, self.float_dtype)
        return SWThompsonState(t=jnp.zeros((), jnp.int32), params=params, **window)

    def posterior(self, state: SWThompsonState) -> tuple[jax.Array, jax.Array]:
        """``(S + alpha_0, F + beta_0)`` over the window (``F = counts - S``)."""
        failures = state.counts.astype(state.sums.dtype) - state.sums
        return state.sums + state.params.prior_alpha, failures + state.params.prior_beta

    def _tell(
        self, state: SWThompsonState, query: BanditQuery, observed: jax.Array
    ) -> SWThompsonState:
        hit = bernoulli_trial(query, observed)
        window = sw_ucb.slide_window(state, query.arms[0], hit, cast(int, self.window))
        return dataclasses.replace(state, t=state.t + 1, **window)
