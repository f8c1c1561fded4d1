"""FLH, Follow the Leading History (Hazan and Seshadhri, "Efficient learning algorithms for
changing environments", ICML 2009, Algorithm FLH2), over EXP3 experts with bandit feedback:
the FLH row of Table 1 of Lu et al. (ICLR 2024), ``sqrt(nT)``-type adaptive regret with
``O(log T)`` queries.

FLH2 line by line (round ``tau = t + 1``, 1-based as in the paper):

- experts ``E^j`` start at round ``j``: EXP3 (Algorithm 2 of Lu et al.),
  ``eta' = sqrt(ln n / (T n))``, uniform at its start; ``S_1 = {1}``, ``v_1^(1) = 1``.
- play ``x_tau = sum_{j in S_tau} v^(j) x^(j)``: here ``J ~ v_tau``, ``y_j ~ E^j``, play ``y_J``.
- ``f_tau(x^(j))``: ``l_tau(y_j)``, one query per slot (unbiased for ``E^j``'s expected loss).
- ``v^_(i) ∝ v^(i) e^{-alpha f(x^(i))}`` over the alive slots.
- prune: ``E^i``, ``i = r 2^k`` (``r`` odd), is alive iff ``i <= tau <= i + 2^{k+2}``.
- :meth:`FLH._advance`: ``v^(tau+1) = 1/(tau+1)``, others ``(1 - 1/(tau+1)) v^_``.

``|S_tau| = O(log T)``: ``M = num_queries`` slots (:func:`flh_capacity`). ``alpha =
sqrt(8 ln T / T)``; ``Params`` scale ``alpha`` and every expert's ``eta'``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, estimators, sampling
from stabl_jax.learners.base import BanditLearner, BanditQuery
from stabl_jax.learners.ensemble import SCALE_BOUNDS, EnsembleParams


@chex.dataclass(frozen=True)
class FLHParams(EnsembleParams):
    """Sweepable numbers of :class:`FLH` and EFLH: ``expert_lr_scale`` (EXP3's ``eta'``) and
    ``meta_lr_scale`` (``alpha``)."""


@chex.dataclass(frozen=True)
class FLHState:
    """State of :class:`FLH` and EFLH: ``M`` slots of experts.

    Attributes:
      t: ``()`` int32, rounds played so far (the next round is the paper's ``tau = t + 1``).
      start: ``(M,)`` int32, the paper's start round ``i`` of each slot's expert, 0 if empty.
      expert_log_probs: ``(M, n)`` float, each slot's EXP3 log-distribution.
      meta_log_weights: ``(M,)`` float, normalised ``log v_tau^(i)``; ``-inf`` if dead.
      params: :class:`FLHParams`.
    """

    t: jax.Array
    start: jax.Array
    expert_log_probs: jax.Array
    meta_log_weights: jax.Array
    params: FLHParams


@chex.dataclass(frozen=True)
class FLHQuery(BanditQuery):
    """A :class:`BanditQuery` that also names the played slot ``J`` (``arms[0] = y_J`` and
    ``arms[i] = y_{(J + i) % M}``).

    Attributes:
      expert: ``()`` int32, the slot ``J ~ v_tau`` whose arm is played.
    """

    expert: jax.Array


@functools.lru_cache(maxsize=64)
def flh_capacity(horizon: int) -> int:
    """``max_{tau <= T+1} |S_tau|``, counting per ``k`` the odd ``r`` with ``i = r 2^k`` alive."""
    tau = np.arange(1, horizon + 2, dtype=np.int64)
    count = np.zeros_like(tau)
    for k in range(int(horizon + 1).bit_length()):
        lo = np.maximum(1, -((2 ** (k + 2) - tau) // 2**k))
        hi = tau // 2**k
        count += np.maximum(0, (hi + 1) // 2 - lo // 2)
    return int(count.max())


@dataclasses.dataclass(frozen=True)
class FLH(BanditLearner):
    """FLH2 over EXP3 experts started every round and pruned by their lifetimes (module
    docstring): ``M = O(log T)`` queries, one per alive expert, the played arm among them.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = FLH(num_arms=3, horizon=64)
      >>> learner.num_queries
      13
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> state.start[:3].tolist()
      [1, 2, 0]
    """

    name: ClassVar[str] = "flh"
    Params: ClassVar[type] = FLHParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = SCALE_BOUNDS

    @property
    def num_queries(self) -> int:  # type: ignore[override]
        """``M``, the most experts alive in any round up to ``T + 1``."""
        return flh_capacity(self.horizon)

    @property
    def num_mixed(self) -> int:
        return self.num_queries

    # --- the schedule (EFLH overrides these) ------------------------------------------------
    def alive(self, start: jax.Array, tau: jax.Array) -> jax.Array:
        """``(M,)`` bool: ``E^i`` alive at round ``tau``, ``i <= tau <= i + 2^{k+2}``
        (written ``(tau - i - 1) // 4 < 2^k``, which cannot overflow int32)."""
        low_bit = jnp.bitwise_and(start, -start)  # 2^k, 0 for an empty slot
        return (start > 0) & (start <= tau) & ((tau - start - 1) // 4 < low_bit)

    def starts(self, tau: jax.Array) -> jax.Array:
        """``()`` bool: a new expert starts at round ``tau`` (FLH: every round)."""
        return jnp.ones((), bool)

    def base_expert_learning_rates(self, start: jax.Array) -> jax.Array:
        """``(M,)`` EXP3's ``sqrt(ln n / (T n))`` for every slot."""
        rate = math.sqrt(math.log(self.num_arms) / (self.horizon * self.num_arms))
        return jnp.full(start.shape, rate, self.float_dtype)

    def meta_learning_rate(self, params: FLHParams) -> jax.Array:
        """``alpha = meta_lr_scale sqrt(8 ln T / T)``."""
        return params.meta_lr_scale * math.sqrt(8.0 * math.log(self.horizon) / self.horizon)

    # --- the maths ----------------------------------------------------------------------------
    def _init(self, key: jax.Array, params: FLHParams) -> FLHState:
        del key
        first = jnp.arange(self.num_queries) == 0
        return FLHState(
            t=jnp.zeros((), jnp.int32),
            start=first.astype(jnp.int32),
            expert_log_probs=self.uniform_log_probs(self.num_queries),
            meta_log_weights=jnp.where(first, 0.0, -jnp.inf).astype(self.float_dtype),
            params=params,
        )

    def distributions(self, state: FLHState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(E, v, mix)``: experts ``(M, n)``, meta ``v_tau`` ``(M,)`` and the play
        distribution ``mix = sum_i v^(i) E^i`` ``(n,)``.

        Rows are renormalised after ``exp``: at log-probabilities near ``-1e4`` a float32
        ``logsumexp`` is off by an ulp, so ``exp`` alone would not sum to one."""
        experts = estimators.probabilities(state.expert_log_probs)
        meta = estimators.probabilities(state.meta_log_weights)
        experts = experts / jnp.sum(experts, axis=-1, keepdims=True)
        meta = meta / jnp.sum(meta)
        return experts, meta, meta @ experts

    def _ask(self, state: FLHState, key: jax.Array) -> FLHQuery:
        experts, meta, mix = self.distributions(state)
        u = sampling.uniforms(key, 1 + self.num_queries, self.float_dtype)
        played = sampling.sample_index(meta, u[0])
        own = jax.vmap(sampling.sample_index)(experts, u[1:])  # (M,) y_j ~ E^j
        own_probs = jnp.take_along_axis(experts, own[:, None], axis=1)[:, 0]
        order = (played + jnp.arange(self.num_queries)) % self.num_queries
        probs = own_probs[order].at[0].set(mix[own[played]])
        return FLHQuery(arms=own[order], play_probs=mix, query_probs=probs, expert=played)

    def _tell(self, state: FLHState, query: BanditQuery, observed: jax.Array) -> FLHState:
        assert isinstance(query, FLHQuery), "FLH learns from its own FLHQuery"
        back = (jnp.arange(self.num_queries) - query.expert) % self.num_queries
        own, own_loss = query.arms[back], observed[back]  # slot i's y_i and l(y_i)
        log_probs = state.expert_log_probs
        probs = self.distributions(state)[0]  # the probabilities ask sampled from
        own_prob = jnp.take_along_axis(probs, own[:, None], axis=1)[:, 0]
        value = estimators.signed_estimate(own_loss, own_prob, "loss")
        eta = state.params.expert_lr_scale * self.base_expert_learning_rates(state.start)
        experts = jax.vmap(estimators.exp3_log_update)(log_probs, own, value, eta)
        alpha = self.meta_learning_rate(state.params)
        return self._advance(state, experts, state.meta_log_weights - alpha * own_loss)

    def _advance(self, state: FLHState, experts: jax.Array, log_hat: jax.Array) -> FLHState:
        """Prune to ``S_{tau+1}``, start ``E^{tau+1}`` with ``v = 1/(tau+1)`` and give the
        survivors ``(1 - 1/(tau+1)) v^ / sum v^`` (no new expert: ``v^ / sum v^``)."""
        tau = state.t + 2  # the next round, 1-based
        alive = self.alive(state.start, tau)
        new = self.starts(tau)
        slot = jnp.argmin(jnp.where(alive, state.start, 0))  # a dead slot, else the oldest
        put = new & (jnp.arange(self.num_queries) == slot)
        old = alive & ~put
        prior = 1.0 / tau.astype(self.float_dtype)
        norm = jax.nn.logsumexp(jnp.where(old, log_hat, -jnp.inf))
        survivors = log_hat - norm + jnp.where(new, jnp.log1p(-prior), 0.0)
        meta = jnp.where(put, jnp.log(prior), jnp.where(old, survivors, -jnp.inf))
        fresh = self.uniform_log_probs(self.num_queries)
        return dataclasses.replace(
            state,
            t=state.t + 1,
            start=jnp.where(put, tau, jnp.where(old, state.start, 0)),
            expert_log_probs=jnp.where(put[:, None], fresh, experts).astype(self.float_dtype),
            meta_log_weights=meta.astype(self.float_dtype),
        )
