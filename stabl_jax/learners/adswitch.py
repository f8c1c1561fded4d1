"""AdSwitch (Auer, Gajane and Ortner, "Adaptively tracking the best bandit arm with an unknown
number of distribution changes", COLT 2019, Algorithm 1): episodes of elimination on the "good"
arms, randomly scheduled checks of the "bad" ones, and a new episode when a test finds a change.

One deterministic-given-the-draws query per round; rewards ``x = 1 - l``; ``log T`` is the
natural logarithm of the horizon. ``n_[s,t](a)`` and ``mu-hat_[s,t](a)`` are the plays and mean
reward of arm ``a`` in rounds ``s..t``. The algorithm box, mapped to the code:

1. New episode ``l`` at round ``t_l``: ``GOOD = [K]``, ``BAD = {}`` (``_tell``'s restart).
2. Add checks for bad arms (``_ask``): for ``a in BAD`` and ``i = 1, 2, ...`` with
   ``2^-i >= Delta~(a) / 16``, with probability ``2^-i sqrt(l / (K T log T))`` add the
   obligation ``(2^-i, n_i = floor(2^(2i+1) log T), t)`` to ``S(a)``.
3. Select an arm (``_ask``): among ``GOOD`` and the bad arms with ``S(a)`` not empty, the one
   played least recently (lowest index on ties; never played counts as least recent).
4. Check for changes of good arms (``_tell``): a new episode if for some ``a in GOOD`` and
   ``t_l <= s1 < s2 <= t``, ``t_l <= s <= t``:
   ``|mu-hat_[s1,s2](a) - mu-hat_[s,t](a)| > sqrt(c2 log T / n_[s1,s2](a)) +
   sqrt(c2 log T / n_[s,t](a))`` (3), i.e. the two confidence intervals are disjoint.
5. Check for changes of bad arms: a new episode if for some ``a in BAD`` and ``s``,
   ``|mu-hat_[s,t](a) - mu~(a)| > Delta~(a) / 4 + sqrt(c2 log T / n_[s,t](a))`` (4).
6. Recompute ``S``: drop the obligations ``(eps, n, s)`` with ``n_[s,t](a) >= n``.
7. Evict arms from GOOD, in index order: ``a`` leaves GOOD for BAD if for some ``s``,
   ``max_{a' in GOOD} mu-hat_[s,t](a') - mu-hat_[s,t](a) > sqrt(c1 log T / (n_[s,t](a) - 1))``
   (1); then ``mu~(a) = mu-hat_[s,t](a)``, ``Delta~(a)`` is that gap (2), and ``S(a) = {}``.

Reading (marked): the algorithm box was not available to read; the steps above follow the
paper's abstract and the public SMPyBandits implementation (``AdSwitchNew``), and these
points are this module's reading: the selection rule of step 3 (least recently played); in
(2), ``s`` is the earliest start that satisfies (1); a statistic enters a test only with
``n >= 1`` samples (``n >= 2`` in (1)); the defaults ``c1 = 16.1`` (just above the ``16``
that SMPyBandits reads off the paper's analysis) and ``c2 = 2``.

Bounded state (exact in the rest):

- The starts ``s``, ``s1`` and ends ``s2`` lie on the grid ``t_l + j Delta_s`` (and ``s2 = t``),
  and only the last ``H`` grid points are kept: a per-arm ring of ``H`` prefix (count, sum)
  checkpoints. ``Delta_s = 1`` and ``H >= T`` is the paper's test over every interval.
- ``S(a)`` is kept as one number, the count ``n_[t_l, .](a)`` at which its last obligation is
  met: an obligation added later with the same or a larger ``n`` ends no earlier, so "``S(a)``
  is not empty" is exact. ``i`` runs up to ``num_levels`` ``I``; ``n_i`` is capped at ``T + 1``
  (never met within the horizon either way).

Memory per run (float32): ``8 H K`` bytes of checkpoints, ``25 K`` of per-arm statistics and
three int32 counters.
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
from stabl_jax.learners.base import BanditLearner, BanditQuery

#: Default number of grid checkpoints ``H`` kept per arm.
MAX_CHECKPOINTS = 32
_NEVER = np.iinfo(np.int32).max


@chex.dataclass(frozen=True)
class AdSwitchParams:
    """Sweepable numbers of :class:`AdSwitch`.

    Attributes:
      c1: ``()`` the eviction constant ``C_1 > 0`` of (1).
      c2: ``()`` the change tests' constant ``> 0`` (the ``2`` of ``sqrt(2 log T / n)``).
      check_scale: ``()`` multiplies the bad-arm check probability (``>= 0``; 1 is the paper).
    """

    c1: jax.Array
    c2: jax.Array
    check_scale: jax.Array


@chex.dataclass(frozen=True)
class AdSwitchState:
    t: jax.Array  # () int32, rounds played so far
    episode: jax.Array  # () int32, l >= 1
    start: jax.Array  # () int32, rounds played before the episode began (t_l - 1)
    good: jax.Array  # (K,) bool, GOOD
    counts: jax.Array  # (K,) int32, n_[t_l, t](a)
    sums: jax.Array  # (K,) float, reward sums over [t_l, t]
    last: jax.Array  # (K,) int32, round an arm was last played, -1 if never
    due: jax.Array  # (K,) int32, S(a) is not empty while counts < due
    mean_bad: jax.Array  # (K,) float, mu~(a)
    gap_bad: jax.Array  # (K,) float, Delta~(a)
    ckpt_counts: jax.Array  # (H, K) int32 ring: counts at grid point j in slot j mod H
    ckpt_sums: jax.Array  # (H, K) float ring: sums at grid point j in slot j mod H
    params: AdSwitchParams


@chex.dataclass(frozen=True)
class AdSwitchQuery(BanditQuery):
    """A :class:`BanditQuery` that also carries step 2's outcome.

    Attributes:
      due: ``(K,)`` int32, the obligations' counts after this round's draws.
    """

    due: jax.Array


@dataclasses.dataclass(frozen=True)
class AdSwitch(BanditLearner):
    """AdSwitch (Auer, Gajane and Ortner 2019, Algorithm 1), bounded as the module says.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``c1``, ``c2``. Static:
    ``checkpoint_every``, ``max_checkpoints``, ``num_levels`` (the grid and the levels: shapes).

    Attributes:
      c1, c2: defaults of the Params (16.1 and 2).
      checkpoint_every: ``Delta_s >= 1`` (static), the grid's step; ``None`` gives
        ``ceil(T / H)``, so that the grid spans the horizon.
      max_checkpoints: ``H >= 1`` (static), grid points kept per arm.
      num_levels: ``I >= 1`` (static), the check levels ``i = 1..I``; ``None`` gives
        ``4 + ceil(log2(T) / 2)`` (every ``Delta~ >= 1 / sqrt(T)``).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = AdSwitch(num_arms=3, horizon=64)
      >>> learner.checkpoint_every, learner.num_levels
      (2, 7)
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> arms = []
      >>> for t in range(4):  # round robin over GOOD = all arms
      ...     state, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(t))
      ...     arms.append(int(info.arms[0]))
      >>> arms
      [0, 1, 2, 0]
    """

    c1: float = dataclasses.field(default=16.1, compare=False)
    c2: float = dataclasses.field(default=2.0, compare=False)
    checkpoint_every: int | None = None
    max_checkpoints: int = MAX_CHECKPOINTS
    num_levels: int | None = None

    name: ClassVar[str] = "adswitch"
    Params: ClassVar[type] = AdSwitchParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "c1": checks.Interval(0.0, low_open=True),
        "c2": checks.Interval(0.0, low_open=True),
        "check_scale": checks.Interval(0.0),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_horizon(self.horizon, minimum=2)  # log T > 0
        checks.check_positive("c1", self.c1)
        checks.check_positive("c2", self.c2)
        h = checks.check_int("max_checkpoints", self.max_checkpoints, minimum=1)
        checks.fill(self, "checkpoint_every", -(-self.horizon // h), checks.check_int)
        levels = 4 + math.ceil(math.log2(self.horizon) / 2)
        checks.fill(self, "num_levels", levels, checks.check_int)

    @property
    def _levels(self) -> tuple[np.ndarray, np.ndarray]:
        """``(I,)`` ``2^-i`` and ``(I,)`` ``n_i = min(floor(2^(2i+1) log T), T + 1)``."""
        i = np.arange(1, cast(int, self.num_levels) + 1, dtype=np.float64)
        need = np.minimum(np.floor(2.0 ** (2 * i + 1) * math.log(self.horizon)), self.horizon + 1)
        return 2.0**-i, need.astype(np.int32)

    def _init(self, key: jax.Array, params: AdSwitchParams) -> AdSwitchState:
        del key
        return self._fresh(params)

    def _fresh(self, params: AdSwitchParams) -> AdSwitchState:
        """The state of round 0: episode 1, every arm good, nothing played."""
        k, h, f = self.num_arms, self.max_checkpoints, self.float_dtype
        zero = jnp.zeros((), jnp.int32)
        return AdSwitchState(
            t=zero,
            episode=jnp.ones((), jnp.int32),
            start=zero,
            good=jnp.ones((k,), bool),
            counts=jnp.zeros((k,), jnp.int32),
            sums=jnp.zeros((k,), f),
            last=jnp.full((k,), -1, jnp.int32),
            due=jnp.zeros((k,), jnp.int32),
            mean_bad=jnp.zeros((k,), f),
            gap_bad=jnp.zeros((k,), f),
            ckpt_counts=jnp.zeros((h, k), jnp.int32),
            ckpt_sums=jnp.zeros((h, k), f),
            params=params,
        )

    def _ask(self, state: AdSwitchState, key: jax.Array) -> AdSwitchQuery:
        """Steps 2-3: draw the bad arms' checks, play the least recently played active arm."""
        f, k = self.float_dtype, self.num_arms
        eps, need = self._levels
        rate = jnp.sqrt(state.episode.astype(f) / (k * self.horizon * math.log(self.horizon)))
        prob = state.params.check_scale * jnp.asarray(eps, f)[None, :] * rate  # (1, I)
        u = sampling.uniforms(key, k * eps.size, f).reshape(k, eps.size)
        level_ok = jnp.asarray(eps, f)[None, :] >= state.gap_bad[:, None] / 16.0  # (K, I)
        eligible = ~state.good[:, None] & level_ok
        added = jnp.where(eligible & (u < prob), state.counts[:, None] + need[None, :], 0)
        due = jnp.maximum(state.due, jnp.max(added, axis=1))
        active = state.good | (state.counts < due)
        arm = jnp.argmin(jnp.where(active, state.last, _NEVER)).astype(jnp.int32)
        probs = jax.nn.one_hot(arm, k, dtype=f)
        ones = jnp.ones((1,), f)
        return AdSwitchQuery(arms=arm[None], play_probs=probs, query_probs=ones, due=due)

    def _tell(self, state: AdSwitchState, query: BanditQuery, observed: jax.Array) -> AdSwitchState:
        """Steps 4-7, then a new episode (step 1) on a change, else the grid checkpoint."""
        arm, f = query.arms[0], self.float_dtype
        counts = state.counts.at[arm].add(1)
        sums = state.sums.at[arm].add(estimators.loss_to_reward(observed[0])).astype(f)
        stats = self._intervals(state, counts, sums)
        log_t = math.log(self.horizon)
        change = jnp.any(state.good & good_arm_changed(*stats, state.params.c2 * log_t))
        change |= jnp.any(
            ~state.good
            & bad_arm_changed(*stats, state.mean_bad, state.gap_bad, state.params.c2 * log_t)
        )
        good, mean_bad, gap_bad, due = evict(
            stats,
            state.good,
            state.mean_bad,
            state.gap_bad,
            cast(AdSwitchQuery, query).due,
            counts,
            state.params.c1 * log_t,
        )
        rounds = state.t + 1 - state.start  # rounds of the episode so far
        point = rounds // self._every
        write = (rounds % self._every == 0) & (
            jnp.arange(self.max_checkpoints) == point % self.max_checkpoints
        )
        played = dataclasses.replace(
            state,
            good=good,
            counts=counts,
            sums=sums,
            due=due,
            mean_bad=mean_bad,
            gap_bad=gap_bad,
            ckpt_counts=jnp.where(write[:, None], counts[None, :], state.ckpt_counts),
            ckpt_sums=jnp.where(write[:, None], sums[None, :], state.ckpt_sums),
        )
        fresh = dataclasses.replace(
            self._fresh(state.params), episode=state.episode + 1, start=state.t + 1
        )
        new = jax.tree.map(lambda a, b: jnp.where(change, a, b), fresh, played)
        return dataclasses.replace(new, t=state.t + 1, last=state.last.at[arm].set(state.t + 1))

    @property
    def _every(self) -> int:
        return cast(int, self.checkpoint_every)

    def _intervals(
        self, state: AdSwitchState, counts: jax.Array, sums: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The kept grid points and "now" as ``(P,)`` order keys (``-1``: unused),
        ``(P, K)`` counts and ``(P, K)`` sums, ``P = H + 1``, "now" last."""
        h = self.max_checkpoints
        written = (state.t - state.start) // self._every + 1  # grid points 0..written-1
        j = written - 1 - (written - 1 - jnp.arange(h)) % h
        order = jnp.append(j, written)
        return (
            order,
            jnp.concatenate([state.ckpt_counts, counts[None]]),
            jnp.concatenate([state.ckpt_sums, sums[None]]),
        )


# --- Interval statistics on the grid --------------------------------------------------------


def _pairs(
    order: jax.Array, counts: jax.Array, sums: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(P, P, K)`` plays and mean over ``(p1, p2]`` for every pair of points, and where the
    pair is an interval with at least one play (``p1`` before ``p2``, both kept)."""
    n = counts[None, :, :] - counts[:, None, :]
    kept = (order[:, None] >= 0) & (order[:, None] < order[None, :])
    ok = kept[:, :, None] & (n >= 1)
    mean = (sums[None, :, :] - sums[:, None, :]) / jnp.maximum(n, 1)
    return n, mean, ok


def good_arm_changed(
    order: jax.Array, counts: jax.Array, sums: jax.Array, budget: jax.Array
) -> jax.Array:
    """``(K,)`` test (3): some interval ``[s1, s2]`` and some ``[s, t]`` whose intervals
    ``mu-hat +- sqrt(budget / n)`` are disjoint (``budget = c2 log T``)."""
    n, mean, ok = _pairs(order, counts, sums)
    radius = jnp.sqrt(budget / jnp.maximum(n, 1))
    lo = jnp.where(ok, mean - radius, -jnp.inf)
    hi = jnp.where(ok, mean + radius, jnp.inf)
    lo_all, hi_all = jnp.max(lo, axis=(0, 1)), jnp.min(hi, axis=(0, 1))
    return (lo_all > jnp.min(hi[:, -1], axis=0)) | (jnp.max(lo[:, -1], axis=0) > hi_all)


def _since(
    order: jax.Array, counts: jax.Array, sums: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(P, K)`` plays, mean and validity of ``[s, t]`` for each kept start ``s``."""
    n, mean, ok = _pairs(order, counts, sums)
    return n[:, -1], mean[:, -1], ok[:, -1]


def bad_arm_changed(
    order: jax.Array,
    counts: jax.Array,
    sums: jax.Array,
    mean_bad: jax.Array,
    gap_bad: jax.Array,
    budget: jax.Array,
) -> jax.Array:
    """``(K,)`` test (4): ``|mu-hat_[s,t] - mu~| > Delta~ / 4 + sqrt(budget / n_[s,t])``."""
    n, mean, ok = _since(order, counts, sums)
    width = gap_bad[None, :] / 4.0 + jnp.sqrt(budget / jnp.maximum(n, 1))
    far = jnp.abs(mean - mean_bad[None, :]) > width
    return jnp.any(ok & far, axis=0)


def evict(
    stats: tuple[jax.Array, jax.Array, jax.Array],
    good: jax.Array,
    mean_bad: jax.Array,
    gap_bad: jax.Array,
    due: jax.Array,
    counts: jax.Array,
    budget: jax.Array,
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Step 7 over the arms in index order (``budget = c1 log T``): the new GOOD, ``mu~``,
    ``Delta~`` and obligations (``S(a) = {}`` for an evicted arm)."""
    order = stats[0]
    n, mean, ok = _since(*stats)
    for a in range(good.shape[0]):  # static: unrolled, each eviction seen by the next arm
        best = jnp.max(jnp.where(good[None, :] & ok, mean, -jnp.inf), axis=1)  # (P,)
        gap = best - mean[:, a]
        width = jnp.sqrt(budget / jnp.maximum(n[:, a] - 1, 1))
        hit = good[a] & ok[:, a] & (n[:, a] >= 2) & (gap > width)
        first = jnp.argmin(jnp.where(hit, order, _NEVER))
        out = jnp.any(hit)
        good = good.at[a].set(good[a] & ~out)
        mean_bad = mean_bad.at[a].set(jnp.where(out, mean[first, a], mean_bad[a]))
        gap_bad = gap_bad.at[a].set(jnp.where(out, gap[first], gap_bad[a]))
        due = due.at[a].set(jnp.where(out, counts[a], due[a]))
    return good, mean_bad, gap_bad, due
