"""Uniform play: the baseline that never learns (one query per round)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax.learners.base import BanditLearner, BanditQuery, sample_query


@chex.dataclass(frozen=True)
class UniformParams:
    """Nothing to sweep; kept so every learner has the same contract."""


@chex.dataclass(frozen=True)
class UniformState:
    t: jax.Array  # () int32, rounds played so far
    params: UniformParams


@dataclasses.dataclass(frozen=True)
class Uniform(BanditLearner):
    """Plays ``x_t ~ Uniform([n])`` every round and ignores feedback.

    Example:
      >>> import jax
      >>> learner = Uniform(num_arms=3, horizon=10)
      >>> state = learner.init(jax.random.key(0))
      >>> learner.ask(state, jax.random.key(1)).arms.shape
      (1,)
    """

    name: ClassVar[str] = "uniform"
    Params: ClassVar[type] = UniformParams

    def _init(self, key: jax.Array, params: UniformParams) -> UniformState:
        del key
        return UniformState(t=jnp.zeros((), jnp.int32), params=params)

    def _ask(self, state: UniformState, key: jax.Array) -> BanditQuery:
        probs = jnp.full((self.num_arms,), 1.0 / self.num_arms, self.float_dtype)
        return sample_query(key, probs)

    def _tell(self, state: UniformState, query: BanditQuery, observed: jax.Array) -> UniformState:
        del query, observed
        return dataclasses.replace(state, t=state.t + 1)
