"""GLR-klUCB (Besson, Kaufmann, Maillard and Seznec, "Efficient change-point detection for
tackling piecewise-stationary bandits", JMLR 23, 2022; arXiv:1902.01575): kl-UCB restarted by
the Bernoulli generalised likelihood ratio test, with deterministic forced exploration.

One deterministic query per round; rewards ``x = 1 - l``. With ``n_i`` samples of arm ``i``
since its restart ``tau_i``, round ``t`` (1-based):

1. ``A = t mod floor(K / alpha)``; if ``1 <= A <= K`` play arm ``A`` (forced);
2. else play ``argmax_i UCB_i``, ``UCB_i = max {q : n_i kl(mu_i, q) <= f(t - tau_i)}``
   (kl-UCB; ``+inf`` if ``n_i = 0``, lowest index on ties), ``f(x) = log x + 3 log log x``
   (the ``log log`` term taken as 0 where ``log x < 1``);
3. append the reward to the played arm's samples (``n = n_i + 1``) and, every
   ``test_every`` samples (``Delta n``), run the GLR test on them: a change if for a split
   ``s`` (a multiple of ``subsample``, ``Delta s``, ``1 <= s < n``)
   ``s kl(mu_{1:s}, mu_{1:n}) + (n - s) kl(mu_{s+1:n}, mu_{1:n}) >= beta(n, delta)``,
   ``beta(n, delta) = log(3 n^{3/2} / delta)``;
4. on a change, restart the arm (``restart="local"``: ``tau_i = t``, ``n_i = 0``) or every
   arm (``"global"``).

The state keeps the last ``H = max_splits`` prefix sums per arm, so splits older than the
last ``H Delta s`` samples are not tried. Memory: ``4 (H + 3)`` bytes per arm per run (float32).
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
from stabl_jax.learners import _detect
from stabl_jax.learners.base import BanditLearner, BanditQuery

#: Default cap on the splits kept per arm (``max_splits``): 4 KiB per arm in float32.
MAX_SPLITS = 1024


@chex.dataclass(frozen=True)
class GLRklUCBParams:
    """Sweepable numbers of :class:`GLRklUCB`.

    Attributes:
      delta: ``()`` the test's confidence level ``delta`` in (0, 1).
      alpha: ``()`` the forced-exploration fraction ``alpha`` in [0, 1].
    """

    delta: jax.Array
    alpha: jax.Array


@chex.dataclass(frozen=True)
class GLRklUCBState:
    t: jax.Array  # () int32, rounds played so far
    restarts: jax.Array  # (K,) int32, tau_i: rounds played at arm i's last restart
    counts: jax.Array  # (K,) int32, n_i: samples of arm i since its restart
    sums: jax.Array  # (K,) float, their reward sum S_{n_i}
    prefix: jax.Array  # (K, H) float ring: S_{c ds} of arm i at [i, (c - 1) mod H]
    params: GLRklUCBParams


def default_delta_alpha(
    num_arms: int, horizon: int, num_changes: int, local: bool
) -> tuple[float, float]:
    """``delta = 1 / sqrt(Upsilon_T T)`` and ``alpha = 0.1 sqrt(Upsilon_T log(T) / T)`` for
    global restarts, with an extra factor ``K`` under both roots for local restarts
    (``Upsilon_T = max(1, num_changes)``; alpha clipped to [0, 1])."""
    scale = max(1, num_changes) * (num_arms if local else 1)
    delta = min(0.5, 1.0 / math.sqrt(scale * horizon))
    return delta, min(1.0, 0.1 * math.sqrt(scale * math.log(horizon) / horizon))


@dataclasses.dataclass(frozen=True)
class GLRklUCB(BanditLearner):
    """GLR-klUCB (Besson et al. 2022, Algorithm 1 with the Bernoulli GLR test, Algorithm 2).

    Defaults: local restarts, ``Delta n = Delta s = 10`` (the authors' choices); ``delta``,
    ``alpha`` from :func:`default_delta_alpha`.

    Attributes:
      num_changes: ``Upsilon_T``, breakpoints the defaults are tuned for.
      restart: ``"local"`` or ``"global"``.
      delta, alpha: defaults of the Params; ``None`` gives :func:`default_delta_alpha`.
      subsample: ``Delta s >= 1``, the step between the splits tried.
      test_every: ``Delta n >= 1``, the test runs when ``n_i`` is a multiple of it.
      max_splits: ``H >= 1`` (static: the buffer's size); ``None`` gives
        ``min(ceil(T / Delta s), 1024)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = GLRklUCB(num_arms=3, horizon=1000, num_changes=1)
      >>> learner.max_splits, round(learner.delta, 4), round(learner.alpha, 4)
      (100, 0.0183, 0.0144)
    """

    num_changes: int = 3
    restart: str = "local"
    delta: float | None = None
    alpha: float | None = None
    subsample: int = 10
    test_every: int = 10
    max_splits: int | None = None

    name: ClassVar[str] = "glr_klucb"
    Params: ClassVar[type] = GLRklUCBParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "delta": checks.Interval(0.0, 1.0, low_open=True, high_open=True),
        "alpha": checks.Interval(0.0, 1.0),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_changes", self.num_changes, minimum=0)
        checks.check_choice("restart", self.restart, ("local", "global"))
        local = self.restart == "local"
        delta, alpha = default_delta_alpha(self.num_arms, self.horizon, self.num_changes, local)
        if checks.fill(self, "delta", delta, checks.check_probability, open_right=True) == 0.0:
            raise ValueError("delta must be in (0, 1), got 0")
        checks.fill(self, "alpha", alpha, checks.check_probability)
        ds = checks.check_int("subsample", self.subsample, minimum=1)
        checks.check_int("test_every", self.test_every, minimum=1)
        h = self.max_splits
        h = min(-(-self.horizon // ds), MAX_SPLITS) if h is None else h
        object.__setattr__(self, "max_splits", checks.check_int("max_splits", h, minimum=1))

    @property
    def _splits(self) -> int:
        return cast(int, self.max_splits)

    def _init(self, key: jax.Array, params: GLRklUCBParams) -> GLRklUCBState:
        del key
        k, f = self.num_arms, self.float_dtype
        zeros = jnp.zeros((k,), jnp.int32)
        return GLRklUCBState(
            t=jnp.zeros((), jnp.int32),
            restarts=zeros,
            counts=zeros,
            sums=jnp.zeros((k,), f),
            prefix=jnp.zeros((k, self._splits), f),
            params=params,
        )

    def index(self, state: GLRklUCBState) -> jax.Array:
        """``(num_arms,)`` step 2's kl-UCB; ``+inf`` for arms without samples since restart."""
        log_x = jnp.log((state.t - state.restarts + 1).astype(self.float_dtype))
        return _detect.klucb_index(state.counts, state.sums, _detect.klucb_exploration(log_x, 3.0))

    def _ask(self, state: GLRklUCBState, key: jax.Array) -> BanditQuery:
        """Steps 1-2 (deterministic: ``key`` is not used)."""
        del key
        forced = _detect.forced_arm(state.t + 1, state.params.alpha, self.num_arms)
        return _detect.point_query(self.index(state), forced, self.float_dtype)

    def glr_change(
        self, row: jax.Array, n: jax.Array, total: jax.Array, delta: jax.Array
    ) -> jax.Array:
        """``()`` bool, step 3's test over the kept splits of one arm (``row``: ``(H,)`` its
        prefix sums, ``n`` its samples, ``total`` their sum ``S_n``)."""
        h, ds, f = self._splits, self.subsample, self.float_dtype
        written = n // ds  # checkpoints c = 1..written were stored, the last H are kept
        c = written - (written - 1 - jnp.arange(h)) % h
        valid = (c >= 1) & (c * ds < n)
        s = jnp.where(valid, c * ds, 1).astype(f)
        nf = n.astype(f)
        mu = total / nf
        before = _detect.bernoulli_kl(jnp.clip(row / s, 0.0, 1.0), mu)
        after = _detect.bernoulli_kl(jnp.clip((total - row) / jnp.maximum(nf - s, 1.0), 0, 1), mu)
        glr = s * before + (nf - s) * after
        beta = jnp.log(3.0 * nf**1.5 / delta)
        return (n % self.test_every == 0) & jnp.any(valid & (glr >= beta))

    def _tell(self, state: GLRklUCBState, query: BanditQuery, observed: jax.Array) -> GLRklUCBState:
        """Steps 3-4."""
        arm, ds = query.arms[0], self.subsample
        y = estimators.loss_to_reward(observed[0])
        n = state.counts[arm] + 1
        total = state.sums[arm] + y
        row = state.prefix[arm]
        row = jnp.where(n % ds == 0, row.at[(n // ds - 1) % self._splits].set(total), row)
        change = self.glr_change(row, n, total, state.params.delta)
        counts, sums = state.counts.at[arm].set(n), state.sums.at[arm].set(total)
        hit = jnp.arange(self.num_arms) == arm if self.restart == "local" else True
        reset = change & hit
        return dataclasses.replace(
            state,
            t=state.t + 1,
            restarts=jnp.where(reset, state.t + 1, state.restarts),
            counts=jnp.where(reset, 0, counts),
            sums=jnp.where(reset, 0.0, sums).astype(self.float_dtype),
            prefix=state.prefix.at[arm].set(row),
        )
