"""The paper's expert-advice environment (Section "Learning from Expert Advice").

Round ``t`` draws baseline rewards ``r~_{t,i} ~ U[0, 0.5)`` and adds 0.5 to the segment's
best arm; the loss is ``l_{t,i} = 1 - r_{t,i}`` (mean 0.25 for the best arm, 0.75 else).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from stabl_jax import checks, estimators, prng, threefry
from stabl_jax.envs.base import PiecewiseEnv, SegmentParams


@dataclasses.dataclass(frozen=True)
class ExpertAdvice(PiecewiseEnv):
    """Piecewise-stationary expert advice with uniform baseline rewards.

    Attributes:
      baseline_high: baseline rewards are ``U[0, baseline_high)`` (paper: 0.5).
      bonus: added to the best arm's reward (paper: 0.5). ``baseline_high + bonus <= 1``.

    Example:
      >>> import jax
      >>> env = ExpertAdvice(num_arms=30, horizon=4096)
      >>> env.change_points
      (1024, 2048, 3072)
      >>> env.loss(env.default_params, 0, jax.random.key(0)).shape
      (30,)
    """

    baseline_high: float = 0.5
    bonus: float = 0.5

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

    def reward(self, params: SegmentParams, t: jax.Array, key: jax.Array) -> jax.Array:
        """``(num_arms,)`` rewards ``r_t`` in [0, 1)."""
        # jax.random.uniform(key, (n,), float32, 0, baseline_high), bit for bit (prng).
        base = prng.uniform(key, self.num_arms, jnp.float32, 0.0, self.baseline_high)
        best = self.best_arm(params, t)
        return base.at[best].add(self.bonus)

    def loss(self, params: SegmentParams, t: jax.Array, key: jax.Array) -> jax.Array:
        return estimators.reward_to_loss(self.reward(params, t, key))

    def loss_at(
        self, params: SegmentParams, t: jax.Array, key: jax.Array, arms: jax.Array
    ) -> jax.Array:
        """``loss(params, t, key)[arms]`` bit for bit, drawing only the ``arms``' baselines."""
        base = prng.uniform_at(key, self.num_arms, arms, jnp.float32, 0.0, self.baseline_high)
        reward = jnp.where(arms == self.best_arm(params, t), base + self.bonus, base)
        return estimators.reward_to_loss(reward)

    def losses_of_words(
        self, words: threefry.Words, arms: jax.Array, is_best: jax.Array
    ) -> jax.Array:
        base = threefry.uniform_words(*words, arms, 0.0, self.baseline_high)
        return estimators.reward_to_loss(jnp.where(is_best, base + jnp.float32(self.bonus), base))

    def mean_loss(self, params: SegmentParams, t: jax.Array) -> jax.Array:
        mean_reward = jnp.full((self.num_arms,), 0.5 * self.baseline_high, jnp.float32)
        return estimators.reward_to_loss(mean_reward.at[self.best_arm(params, t)].add(self.bonus))
