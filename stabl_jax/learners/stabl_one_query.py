"""StABL with one query: the observed arm is the played arm (a foil for Algorithm 1 of Lu et al.,
ICLR 2024).

Algorithm 1 with ``x'_t = x_t``: ``P(t) = mix``, ``l_hat_t = 1[i = x_t] l_t(x_t) / mix_{x_t}``
and ``r~_t(k) = l_t(x_t) (1 - v(t,k)_{x_t} / mix_{x_t})``. Nothing bounds
``v(t,k)_{x_t} / mix_{x_t}``, so experts are muted often: the paper's point that one query
does not suffice (lower bound of Daniely et al., ICML 2015).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import jax
import jax.numpy as jnp

from stabl_jax.learners.base import BanditQuery, sample_query
from stabl_jax.learners.stabl import StABL, StABLState


@dataclasses.dataclass(frozen=True)
class StABLOneQuery(StABL):
    """StABL whose observed arm is the played arm: one query per round.

    StABL's fields, params, state and updates, except ``observation="played"``
    (``P(t) = mix``), ``query.arms == [x_t]`` and lines 11-13 use ``l_t(x_t)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = StABLOneQuery(num_arms=5, horizon=64)
      >>> learner.num_queries
      1
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.linspace(0, 1, 5), jax.random.key(1))
      >>> info.arms.shape
      (1,)
    """

    observation: str = "played"

    num_queries: ClassVar[int] = 1
    name: ClassVar[str] = "stabl_one_query"
    observations: ClassVar[tuple[str, ...]] = ("played",)
    learning_query: ClassVar[int] = 0

    def distributions(self, state: StABLState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(v, mix, mix)``: the observation distribution is the play distribution."""
        v = jnp.exp(state.expert_log_probs)
        mix = jax.nn.softmax(state.meta_log_weights) @ v
        return v, mix, mix

    def _ask(self, state: StABLState, key: jax.Array) -> BanditQuery:
        _, mix, _ = self.distributions(state)
        return sample_query(key, mix)
