"""GLR-klUCB (Besson, Kaufmann, Maillard and Seznec, "Efficient change-point detection for
tackling piecewise-stationary bandits", JMLR 23, 2022; arXiv:1902.01575): kl-UCB restarted by
the Bernoulli generalised likelihood ratio test, with deterministic forced exploration.

One deterministic query per round; rewards ``x = 1 - l``. With ``n_i`` samples of arm ``i``
since its restart ``tau_i``, ``k`` the detections so far, round ``t`` (1-based):

1. ``A = t mod floor(K / alpha_k)``; if ``1 <= A <= K`` play arm ``A`` (forced), with
   ``alpha_k = alpha`` (``alpha_schedule="constant"``) or ``min(1, alpha sqrt(1 + k))``
   (``"sqrt_detections"``, the schedule that needs no ``Upsilon_T``);
2. else play ``argmax_i UCB_i``, ``UCB_i = max {q : n_i kl(mu_i, q) <= f(t - tau_i)}``
   (kl-UCB; ``+inf`` if ``n_i = 0``, lowest index on ties),
   ``f(x) = a log x + c log log x`` (the ``log log`` term taken as 0 where ``log x < 1``);
3. append the reward to the played arm's samples (``n = n_i + 1``) and, every
   ``test_every`` samples (``Delta n``), run the GLR test on them: a change if for a split
   ``s`` (a multiple of ``subsample``, ``Delta s``, ``1 <= s < n``)
   ``s kl(mu_{1:s}, mu_{1:n}) + (n - s) kl(mu_{s+1:n}, mu_{1:n}) >= beta(n, delta)``,
   ``beta(n, delta) = log(b n^{3/2} / delta)``;
4. on a change, restart the arm (``restart="local"``: ``tau_i = t``, ``n_i = 0``) or every
   arm (``"global"``), and count the detection (``k = k + 1``).

Defaults follow the code of the authors' experiments (SMPyBandits, ``Policies/GLR_UCB.py``,
``Policies/klUCB_forGLR.py``, ``configuration_nonstationary.py``): local restarts,
``Delta n = Delta s = 10``, ``delta = 1 / sqrt(K Upsilon_T T)``,
``alpha = 0.05 sqrt(K Upsilon_T log(T) / T)`` held constant (the code's increasing-alpha
switch never takes effect), ``b = 3`` (``threshold_BernoulliGLR``), and the index's
``f(x) = 3 log x`` (``a = 3, c = 0``: ``klUCB_forGLR`` scales ``log(t - tau_i)`` by its
``c = 3``). The algorithm as analysed (Besson's thesis, Algorithm 1) reads ``a = 1, c = 3``,
``alpha_0 = 0.1`` and the exact test (``Delta n = Delta s = 1``): set those options to run it.
The experiments' code also differs in two details kept here as the paper states them: its
forced arm is ``(t - max_i tau_i) mod ceil(K / alpha)``, and a restarted arm keeps its
samples after the split that fired (their "localization") instead of none.

The state keeps the last ``H = max_splits`` prefix sums per arm, so splits older than the
last ``H Delta s`` samples are not tried; the exact test (``Delta s = 1``) refuses an ``H``
below ``T``. Memory: ``4 (H + 3)`` bytes per arm per run (float32).
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

#: Default cap on the splits kept per arm (``max_splits``) when ``subsample > 1``: 4 KiB per
#: arm in float32.
MAX_SPLITS = 1024
#: The forced-exploration schedules ``alpha_k`` of step 1.
ALPHA_SCHEDULES = ("constant", "sqrt_detections")


@chex.dataclass(frozen=True)
class GLRklUCBParams:
    """Sweepable numbers of :class:`GLRklUCB`.

    Attributes:
      delta: ``()`` the test's confidence level ``delta`` in (0, 1).
      alpha: ``()`` the forced-exploration fraction ``alpha`` in [0, 1] (``alpha_0`` of the
        ``"sqrt_detections"`` schedule).
      log_scale: ``()`` ``a >= 0`` of the index's ``f(x) = a log x + c log log x``.
      loglog_scale: ``()`` ``c >= 0`` of ``f``.
      threshold_scale: ``()`` ``b > 0`` of the threshold ``log(b n^{3/2} / delta)``.
    """

    delta: jax.Array
    alpha: jax.Array
    log_scale: jax.Array
    loglog_scale: jax.Array
    threshold_scale: jax.Array


@chex.dataclass(frozen=True)
class GLRklUCBState:
    t: jax.Array  # () int32, rounds played so far
    restarts: jax.Array  # (K,) int32, tau_i: rounds played at arm i's last restart
    counts: jax.Array  # (K,) int32, n_i: samples of arm i since its restart
    sums: jax.Array  # (K,) float, their reward sum S_{n_i}
    prefix: jax.Array  # (K, H) float ring: S_{c ds} of arm i at [i, (c - 1) mod H]
    detections: jax.Array  # () int32, k: changes detected so far
    params: GLRklUCBParams


def default_delta_alpha(
    num_arms: int, horizon: int, num_changes: int, local: bool, alpha_scale: float = 0.05
) -> tuple[float, float]:
    """``delta = 1 / sqrt(Upsilon_T T)`` and ``alpha = alpha_0 sqrt(Upsilon_T log(T) / T)``
    for global restarts, with an extra factor ``K`` under both roots for local restarts
    (``Upsilon_T = max(1, num_changes)``, ``alpha_0 = alpha_scale``; delta capped at 0.5,
    alpha clipped to [0, 1])."""
    scale = max(1, num_changes) * (num_arms if local else 1)
    delta = min(0.5, 1.0 / math.sqrt(scale * horizon))
    return delta, min(1.0, alpha_scale * math.sqrt(scale * math.log(horizon) / horizon))


@dataclasses.dataclass(frozen=True)
class GLRklUCB(BanditLearner):
    """GLR-klUCB (Besson et al. 2022, Algorithm 1 with the Bernoulli GLR test, Algorithm 2).

    Defaults: those of the authors' experiments (module docstring); ``delta``, ``alpha``
    from :func:`default_delta_alpha`.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes``, ``delta``, ``alpha``,
    ``alpha_scale``, ``log_scale``, ``loglog_scale``, ``threshold_scale``. Static: ``restart``,
    ``alpha_schedule`` (code paths), ``subsample``, ``test_every`` (schedules), ``max_splits``
    (the buffer's size).

    Attributes:
      num_changes: ``Upsilon_T``, breakpoints the defaults are tuned for (``alpha``'s default
        takes ``Upsilon_T = 1`` under ``alpha_schedule="sqrt_detections"``).
      restart: ``"local"`` or ``"global"``.
      delta, alpha: defaults of the Params; ``None`` gives :func:`default_delta_alpha`.
      alpha_scale: ``alpha_0 >= 0`` of the default ``alpha`` (``0.05``, the experiments').
      alpha_schedule: ``"constant"`` or ``"sqrt_detections"`` (step 1).
      log_scale, loglog_scale, threshold_scale: defaults of the Params ``a``, ``c``, ``b``.
      subsample: ``Delta s >= 1``, the step between the splits tried.
      test_every: ``Delta n >= 1``, the test runs when ``n_i`` is a multiple of it.
      max_splits: ``H >= 1`` (static: the buffer's size); ``None`` gives ``T`` for the exact
        test (``Delta s = 1``), else ``min(ceil(T / Delta s), 1024)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = GLRklUCB(num_arms=3, horizon=1000, num_changes=1)
      >>> learner.max_splits, round(learner.delta, 4), round(learner.alpha, 4)
      (100, 0.0183, 0.0072)
    """

    num_changes: int = dataclasses.field(default=3, compare=False)
    restart: str = "local"
    delta: float | None = dataclasses.field(default=None, compare=False)
    alpha: float | None = dataclasses.field(default=None, compare=False)
    alpha_scale: float = dataclasses.field(default=0.05, compare=False)
    alpha_schedule: str = "constant"
    log_scale: float = dataclasses.field(default=3.0, compare=False)
    loglog_scale: float = dataclasses.field(default=0.0, compare=False)
    threshold_scale: float = dataclasses.field(default=3.0, compare=False)
    subsample: int = 10
    test_every: int = 10
    max_splits: int | None = None

    name: ClassVar[str] = "glr_klucb"
    Params: ClassVar[type] = GLRklUCBParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "delta": checks.Interval(0.0, 1.0, low_open=True, high_open=True),
        "alpha": checks.Interval(0.0, 1.0),
        "log_scale": checks.Interval(0.0),
        "loglog_scale": checks.Interval(0.0),
        "threshold_scale": checks.Interval(0.0, low_open=True),
    }
    records_restarts: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_changes", self.num_changes, minimum=0)
        checks.check_choice("restart", self.restart, ("local", "global"))
        checks.check_choice("alpha_schedule", self.alpha_schedule, ALPHA_SCHEDULES)
        a0 = checks.check_nonnegative("alpha_scale", self.alpha_scale)
        object.__setattr__(self, "alpha_scale", a0)
        upsilon = self.num_changes if self.alpha_schedule == "constant" else 1
        local = self.restart == "local"
        delta, _ = default_delta_alpha(self.num_arms, self.horizon, self.num_changes, local)
        _, alpha = default_delta_alpha(self.num_arms, self.horizon, upsilon, local, a0)
        if checks.fill(self, "delta", delta, checks.check_probability, open_right=True) == 0.0:
            raise ValueError("delta must be in (0, 1), got 0")
        checks.fill(self, "alpha", alpha, checks.check_probability)
        for name in ("log_scale", "loglog_scale"):
            object.__setattr__(self, name, checks.check_nonnegative(name, getattr(self, name)))
        b = checks.check_positive("threshold_scale", self.threshold_scale)
        object.__setattr__(self, "threshold_scale", b)
        self._fill_splits()

    def _fill_splits(self) -> None:
        """Check ``subsample``, ``test_every``; fill ``max_splits``; refuse an inexact
        exact test."""
        ds = checks.check_int("subsample", self.subsample, minimum=1)
        checks.check_int("test_every", self.test_every, minimum=1)
        needed = -(-self.horizon // ds)
        h = self.max_splits
        h = (needed if ds == 1 else min(needed, MAX_SPLITS)) if h is None else h
        h = checks.check_int("max_splits", h, minimum=1)
        if ds == 1 and h < self.horizon // ds:
            raise ValueError(
                f"max_splits={h} is below the horizon T={self.horizon}: the exact test "
                f"(subsample=1) tries every split of up to T samples; set max_splits={needed} "
                "(or leave it None), or subsample > 1 to try splits Delta s apart"
            )
        object.__setattr__(self, "max_splits", h)

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
            detections=jnp.zeros((), jnp.int32),
            params=params,
        )

    def index(self, state: GLRklUCBState) -> jax.Array:
        """``(num_arms,)`` step 2's kl-UCB; ``+inf`` for arms without samples since restart."""
        p = state.params
        log_x = jnp.log((state.t - state.restarts + 1).astype(self.float_dtype))
        budget = p.log_scale * log_x + p.loglog_scale * jnp.log(jnp.maximum(log_x, 1.0))
        return _detect.klucb_index(state.counts, state.sums, budget)

    def exploration(self, state: GLRklUCBState) -> jax.Array:
        """``()`` step 1's ``alpha_k``."""
        alpha = state.params.alpha
        if self.alpha_schedule == "constant":
            return alpha
        k = (state.detections + 1).astype(alpha.dtype)
        return jnp.minimum(1.0, alpha * jnp.sqrt(k))

    def _ask(self, state: GLRklUCBState, key: jax.Array) -> BanditQuery:
        """Steps 1-2 (deterministic: ``key`` is not used)."""
        del key
        forced = _detect.forced_arm(state.t + 1, self.exploration(state), self.num_arms)
        return _detect.point_query(self.index(state), forced, self.float_dtype)

    def glr_change(
        self, row: jax.Array, n: jax.Array, total: jax.Array, params: GLRklUCBParams
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
        beta = jnp.log(params.threshold_scale * nf**1.5 / params.delta)
        return (n % self.test_every == 0) & jnp.any(valid & (glr >= beta))

    def _tell(self, state: GLRklUCBState, query: BanditQuery, observed: jax.Array) -> GLRklUCBState:
        """Steps 3-4."""
        arm, ds = query.arms[0], self.subsample
        y = estimators.loss_to_reward(observed[0])
        n = state.counts[arm] + 1
        total = state.sums[arm] + y
        row = state.prefix[arm]
        row = jnp.where(n % ds == 0, row.at[(n // ds - 1) % self._splits].set(total), row)
        change = self.glr_change(row, n, total, state.params)
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
            detections=state.detections + change.astype(jnp.int32),
        )

    def restarted(self, state: GLRklUCBState, new_state: GLRklUCBState) -> jax.Array:
        """``()`` bool: the round from ``state`` to ``new_state`` detected a change."""
        return new_state.detections > state.detections
