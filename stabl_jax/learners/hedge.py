"""Hedge: the exponentially weighted forecaster with full information (Freund & Schapire,
"A decision-theoretic generalization of on-line learning and an application to boosting",
JCSS 1997; the rate of Cesa-Bianchi & Lugosi, "Prediction, Learning, and Games", 2006,
Theorem 2.2).

A full-information reference line for the bandit learners: every round it queries all ``n``
arms (``num_queries = n``), so it sees the whole loss vector. ``arms[0]`` is the played arm
and ``arms = (x_t + arange(n)) % n``, so every arm is observed exactly once.

Learning rate. ``eta = sqrt(8 ln n / T)`` (natural log). For losses in [0, 1], Hoeffding's
lemma bounds the regret of exponential weights by ``ln n / eta + eta T / 8``, minimised by this
``eta`` at ``sqrt(T ln n / 2)`` (Cesa-Bianchi & Lugosi, Thm 2.2). Freund & Schapire's own
tuning, ``beta = 1 / (1 + sqrt(2 ln n / T))`` (``eta = -ln beta ~ sqrt(2 ln n / T)``), comes
from the cruder bound ``ln n / eta + eta T / 2`` (``e^{-x} <= 1 - x + x^2/2``); it is half as
aggressive. We take the sharper constant; ``lr_scale = 0.5`` gives ``sqrt(2 ln n / T)``.

Feedback. With the whole loss vector observed, gains ``g = 1 - l`` give exactly the same
weights (``exp(+eta g) ∝ exp(-eta l)`` after normalisation), so there is no ``feedback``
option.
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
    """The query of a full-information learner: play ``played ~ probs``, observe every arm.

    ``query_probs`` is ``probs[played]`` for the played arm and 1 for the others (each is
    observed with certainty; nothing divides by it).
    """
    n = probs.shape[-1]
    arms = full_information_arms(played, n)
    ones = jnp.ones((n - 1,), probs.dtype)
    return BanditQuery(
        arms=arms, play_probs=probs, query_probs=jnp.concatenate([probs[played][None], ones])
    )


def loss_vector(query: BanditQuery, observed: jax.Array) -> jax.Array:
    """``(n,)`` the round's loss vector rebuilt from a full-information query's observations
    (``arms`` is a permutation, so the scatter writes each entry once)."""
    return jnp.zeros_like(observed).at[query.arms].set(observed)


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
    ``eta = lr_scale sqrt(8 ln n / T)`` (module docstring).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = Hedge(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = learner.step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
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
        bumped = state.log_weights - self.learning_rate(state.params) * loss
        log_w = bumped - jax.scipy.special.logsumexp(bumped)
        return dataclasses.replace(state, t=state.t + 1, log_weights=log_w.astype(self.float_dtype))
