"""Hedge: exponential weights with full information (Freund & Schapire, JCSS 1997), at the rate
of Cesa-Bianchi & Lugosi ("Prediction, Learning, and Games", 2006, Theorem 2.2).

A full-information reference line: every round queries all ``n`` arms, ``arms = (x_t +
arange(n)) % n`` with ``arms[0] = x_t`` played. ``eta = sqrt(8 ln n / T)`` minimises Hoeffding's
bound ``ln n / eta + eta T / 8``; ``lr_scale = 0.5`` gives Freund & Schapire's
``sqrt(2 ln n / T)``. Gains would give the same weights, so there is no ``feedback`` option.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, sampling
from stabl_jax.learners.base import BanditQuery, WeightsLearner, WeightsState


def full_information_arms(played: jax.Array, num_arms: int) -> jax.Array:
    """``(n,)`` int32 ``(played + arange(n)) % n``: every arm once, ``played`` first."""
    return (played + jnp.arange(num_arms, dtype=jnp.int32)) % num_arms


def full_information_query(probs: jax.Array, played: jax.Array) -> BanditQuery:
    """Play ``played ~ probs`` and observe every arm (``query_probs`` 1 but the played one's)."""
    n = probs.shape[-1]
    arms = full_information_arms(played, n)
    ones = jnp.ones((n - 1,), probs.dtype)
    return BanditQuery(
        arms=arms, play_probs=probs, query_probs=jnp.concatenate([probs[played][None], ones])
    )


def loss_vector(query: BanditQuery, observed: jax.Array) -> jax.Array:
    """``(n,)`` the round's loss vector from a full-information query's observations."""
    return jnp.zeros_like(observed).at[query.arms].set(observed)


def hedge_log_update(log_probs: jax.Array, loss: jax.Array, rate: jax.Array) -> jax.Array:
    """``log w - rate l`` renormalised over the last axis: ``w' ∝ w exp(-rate l)``.

    Args:
      log_probs: ``(..., n)`` normalised log-probabilities.
      loss: ``(..., n)`` the full loss vector, broadcastable against ``log_probs``.
      rate: the learning rate, broadcastable against ``log_probs``.
    """
    bumped = log_probs - rate * loss
    return bumped - jax.scipy.special.logsumexp(bumped, axis=-1, keepdims=True)


@chex.dataclass(frozen=True)
class HedgeParams:
    """Sweepable numbers of :class:`Hedge`.

    Attributes:
      lr_scale: ``()`` multiplies ``eta = sqrt(8 ln n / T)``.
    """

    lr_scale: jax.Array


@dataclasses.dataclass(frozen=True)
class Hedge(WeightsLearner):
    """Hedge with full information: ``n`` queries per round.

    Round ``t``: play ``x_t ~ w_t``, observe the whole ``l_t`` (queries
    ``(x_t + arange(n)) % n``), update ``w_{t+1}(i) ∝ w_t(i) exp(-eta l_t(i))`` with
    ``eta = lr_scale sqrt(8 ln n / T)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = Hedge(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> learner.num_queries, info.arms.shape
      (3, (3,))
    """

    name: ClassVar[str] = "hedge"
    Params: ClassVar[type] = HedgeParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {"lr_scale": checks.Interval(0.0)}

    @property
    def num_queries(self) -> int:  # type: ignore[override]
        """``n``: every arm is observed every round."""
        return self.num_arms

    def learning_rate(self, params: HedgeParams) -> jax.Array:
        """``()`` ``eta = lr_scale sqrt(8 ln n / T)``."""
        return params.lr_scale * math.sqrt(8.0 * math.log(self.num_arms) / self.horizon)

    def _ask(self, state: WeightsState, key: jax.Array) -> BanditQuery:
        probs = jnp.exp(state.log_weights)
        u = sampling.uniforms(key, 1, self.float_dtype)
        return full_information_query(probs, sampling.sample_index(probs, u[0]))

    def _tell(self, state: WeightsState, query: BanditQuery, observed: jax.Array) -> WeightsState:
        loss = loss_vector(query, observed)
        log_w = hedge_log_update(state.log_weights, loss, self.learning_rate(state.params))
        return dataclasses.replace(state, t=state.t + 1, log_weights=log_w.astype(self.float_dtype))
