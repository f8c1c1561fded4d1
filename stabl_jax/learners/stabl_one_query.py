"""StABL with one query: the observed arm is the played arm (a foil for Algorithm 1 of Lu et al.,
"Adaptive Regret for Bandits Made Possible: Two Queries Suffice", ICLR 2024).

Algorithm 1 with ``x'_t = x_t``: the importance distribution of line 9 is replaced by the play
distribution ``mix = sum_k p(t)_k v(t,k)``, so the learner makes one query per round and the
estimate of line 11 becomes ``l_hat_t = 1[i = x_t] l_t(x_t) / mix_{x_t}``. Line 13 then reads

    ``r~_t(k) = l_hat_t^T mix - l_hat_t^T v(t,k) = l_t(x_t) (1 - v(t,k)_{x_t} / mix_{x_t})``.

Every step size is StABL's (``eta_k = min(1/(2 sqrt n), 1/sqrt(n L_k))``, experts
``sqrt(ln n / (L_k n C))`` with ``C = 2B``). Nothing bounds ``v(t,k)_{x_t} / mix_{x_t}`` here
(it can reach ``1 / p(t)_k``), so ``1 + eta_k r~_t(k) <= 0`` happens often and the expert is
muted until its restart (``state.num_muted`` counts it): the paper's point that, with one query,
the unbiased meta estimate has unbounded variance, and near-optimal adaptive regret is
impossible (the lower bound of Daniely et al., ICML 2015). The EXP3 Lemma's ``C`` is likewise
unbounded (``v(t,k) <= mix / p(t)_k`` only); ``C = 2B`` is kept so that the only change from
StABL is the observation.
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

    Same fields, params, state and updates as :class:`~stabl_jax.learners.stabl.StABL`
    except: ``observation`` is ``"played"`` (``P(t) = mix``), ``query.arms == [x_t]`` and
    lines 11-13 use ``l_t(x_t)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = StABLOneQuery(num_arms=5, horizon=64)
      >>> learner.num_queries
      1
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = learner.step(state, jnp.linspace(0, 1, 5), jax.random.key(1))
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
