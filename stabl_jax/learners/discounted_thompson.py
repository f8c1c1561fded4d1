"""Discounted Thompson sampling (dTS; Raj and Kalyani, "Taming non-stationary bandits: a
Bayesian approach", arXiv:1707.09727, 2017): Beta-Bernoulli Thompson sampling whose success and
failure counts are discounted by ``gamma`` every round, one query per round.

The paper's algorithm, with its symbols (the pieces it shares with Thompson sampling are in
:mod:`stabl_jax.learners.thompson`):

::

    S_k = F_k = 0 for every arm k                        state successes, failures
    for t = 1, 2, ...:
        theta_k ~ Beta(S_k + alpha_0, F_k + beta_0)      _ask
        play k_t = argmax_k theta_k, observe r_t         _ask
        S_k <- gamma S_k + 1{k = k_t} r_t                _tell, every arm discounted
        F_k <- gamma F_k + 1{k = k_t} (1 - r_t)

The paper states it for Bernoulli rewards; here ``r_t`` is the Bernoulli trial ``1{u < 1 - l}``
of Agrawal and Goyal (our extension to rewards in [0, 1], as for :class:`Thompson`).
``gamma = 1`` is Thompson sampling. Defaults: ``alpha_0 = beta_0 = 1``; ``gamma = 0.95`` is our
choice (the paper's experiments vary ``gamma``; SMPyBandits ships 0.95), a ``Params`` entry so
a sweep can tune it. We could read the abstract only, not the algorithm box: the update above
is our reading.

Memory per run: ``2 K + 3`` floats and an int32.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax

from stabl_jax import checks
from stabl_jax.learners.base import BanditQuery
from stabl_jax.learners.thompson import (
    PRIOR_BOUNDS,
    Thompson,
    ThompsonState,
    bernoulli_trial,
)


@chex.dataclass(frozen=True)
class DiscountedThompsonParams:
    """Sweepable numbers of :class:`DiscountedThompson`.

    Attributes:
      prior_alpha: ``()`` ``alpha_0 > 0`` of the Beta prior.
      prior_beta: ``()`` ``beta_0 > 0`` of the Beta prior.
      discount: ``()`` ``gamma`` in (0, 1]; 1 is Thompson sampling.
    """

    prior_alpha: jax.Array
    prior_beta: jax.Array
    discount: jax.Array


@dataclasses.dataclass(frozen=True)
class DiscountedThompson(Thompson):
    """Discounted Thompson sampling (Raj and Kalyani 2017), one query per round.

    After ``t`` rounds ``S_k = sum_s gamma^{t-s} 1{k_s = k} r~_s`` and ``F_k = sum_s
    gamma^{t-s} 1{k_s = k} (1 - r~_s)``; round ``t + 1`` draws ``theta_k ~ Beta(S_k + alpha_0,
    F_k + beta_0)`` and plays ``argmax_k theta_k``.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``discount``.

    Attributes:
      discount: the default ``gamma`` in (0, 1] (default 0.95).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = DiscountedThompson(num_arms=2, horizon=100, discount=0.5)
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> for t in range(2):
      ...     state, _ = step(state, jnp.array([1.0, 1.0]), jax.random.key(t))
      >>> float(state.failures.sum())  # two failures, the first discounted once: 0.5 + 1
      1.5
    """

    discount: float = dataclasses.field(default=0.95, compare=False)

    name: ClassVar[str] = "discounted_thompson"
    Params: ClassVar[type] = DiscountedThompsonParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        **PRIOR_BOUNDS,
        "discount": checks.Interval(0.0, 1.0, low_open=True),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        discount = checks.check_real("discount", self.discount)
        if not 0.0 < discount <= 1.0:
            raise ValueError(
                f"discount must be in (0, 1] (1 is Thompson sampling), got {self.discount!r}"
            )
        object.__setattr__(self, "discount", discount)

    def _tell(self, state: ThompsonState, query: BanditQuery, observed: jax.Array) -> ThompsonState:
        gamma = state.params.discount
        hit = bernoulli_trial(query, observed)
        arm = query.arms[0]
        return dataclasses.replace(
            state,
            t=state.t + 1,
            successes=(gamma * state.successes).at[arm].add(hit),
            failures=(gamma * state.failures).at[arm].add(1.0 - hit),
        )
