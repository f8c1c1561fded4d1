"""The paper's expert-advice environment (Section "Learning from Expert Advice").

Round ``t`` draws baseline rewards ``r~_{t,i} ~ U[0, 0.5)`` and adds 0.5 to the segment's
best arm; the loss is ``l_{t,i} = 1 - r_{t,i}`` (mean 0.25 for the best arm, 0.75 else).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, estimators, prng, threefry
from stabl_jax.envs.base import PiecewiseEnv, SegmentParams


@chex.dataclass(frozen=True)
class ExpertAdviceParams(SegmentParams):
    """:class:`ExpertAdvice`'s per-run parameters (traced).

    Attributes:
      baseline_high: ``()`` float32, baseline rewards are ``U[0, baseline_high)``.
      bonus: ``()`` float32, added to the best arm's reward.
    """

    baseline_high: jax.Array
    bonus: jax.Array


@dataclasses.dataclass(frozen=True)
class ExpertAdvice(PiecewiseEnv):
    """Piecewise-stationary expert advice with uniform baseline rewards.

    Attributes:
      baseline_high: baseline rewards are ``U[0, baseline_high)`` (paper: 0.5).
      bonus: added to the best arm's reward (paper: 0.5). ``baseline_high + bonus <= 1``.

    Both are the defaults of :class:`ExpertAdviceParams`' traced fields of the same names, not
    part of the environment's identity (``compare=False``).

    Example:
      >>> import jax
      >>> env = ExpertAdvice(num_arms=30, horizon=4096)
      >>> env.change_points
      (1024, 2048, 3072)
      >>> env.loss(env.default_params, 0, jax.random.key(0)).shape
      (30,)
    """

    baseline_high: float = dataclasses.field(default=0.5, compare=False)
    bonus: float = dataclasses.field(default=0.5, compare=False)

    name = "expert_advice"

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_probability("baseline_high", self.baseline_high)
        checks.check_probability("bonus", self.bonus)
        if self.baseline_high + self.bonus > 1.0:
            raise ValueError(
                f"baseline_high + bonus must be <= 1 so that rewards stay in [0, 1], got "
                f"{self.baseline_high} + {self.bonus}"
            )

    @property
    def default_params(self) -> ExpertAdviceParams:
        return ExpertAdviceParams(
            **super().default_params,
            baseline_high=jnp.float32(self.baseline_high),
            bonus=jnp.float32(self.bonus),
        )

    def reward(self, params: ExpertAdviceParams, t: jax.Array, key: jax.Array) -> jax.Array:
        """``(num_arms,)`` rewards ``r_t`` in [0, 1)."""
        # jax.random.uniform(key, (n,), float32, 0, baseline_high), bit for bit (prng).
        base = prng.uniform(key, self.num_arms, jnp.float32, 0.0, params.baseline_high)
        best = self.best_arm(params, t)
        return base.at[best].add(params.bonus)

    def loss(self, params: ExpertAdviceParams, t: jax.Array, key: jax.Array) -> jax.Array:
        return estimators.reward_to_loss(self.reward(params, t, key))

    def loss_at(
        self, params: ExpertAdviceParams, t: jax.Array, key: jax.Array, arms: jax.Array
    ) -> jax.Array:
        """``loss(params, t, key)[arms]`` bit for bit, drawing only the ``arms``' baselines."""
        base = prng.uniform_at(key, self.num_arms, arms, jnp.float32, 0.0, params.baseline_high)
        reward = jnp.where(arms == self.best_arm(params, t), base + params.bonus, base)
        return estimators.reward_to_loss(reward)

    def losses_of_words(
        self, params: Any, words: threefry.Words, arms: jax.Array, is_best: jax.Array
    ) -> jax.Array:
        base = threefry.uniform_words(*words, arms, 0.0, params["baseline_high"])
        return estimators.reward_to_loss(jnp.where(is_best, base + params["bonus"], base))

    def mean_loss(self, params: ExpertAdviceParams, t: jax.Array) -> jax.Array:
        mean_reward = jnp.full((self.num_arms,), 0.5 * params.baseline_high, jnp.float32)
        return estimators.reward_to_loss(mean_reward.at[self.best_arm(params, t)].add(params.bonus))
