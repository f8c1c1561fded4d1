"""Stochastic Bernoulli arms whose means change at change points.

In segment ``j`` every arm has mean loss ``mean`` except the segment's best arm (``mean - gap``);
round ``t``'s losses are independent ``Bernoulli(mu_{j(t)})`` draws.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, prng, threefry
from stabl_jax.envs.base import PiecewiseEnv, SegmentParams


class BernoulliLosses(PiecewiseEnv):
    """A piecewise environment whose arms' losses are Bernoulli draws of its ``mean_loss``."""

    def loss(self, params: SegmentParams, t: jax.Array, key: jax.Array) -> jax.Array:
        # jax.random.bernoulli(key, mu) is uniform(key, (n,)) < mu; prng draws the same bits
        # with Threefry unrolled (no loop inside the round on a CPU).
        draws = prng.uniform(key, self.num_arms) < self.mean_loss(params, t)
        return draws.astype(jnp.float32)

    def loss_at(
        self, params: SegmentParams, t: jax.Array, key: jax.Array, arms: jax.Array
    ) -> jax.Array:
        """``loss(params, t, key)[arms]`` bit for bit, drawing only the ``arms``' uniforms
        (:func:`stabl_jax.prng.uniform_at`)."""
        draws = prng.uniform_at(key, self.num_arms, arms) < self.mean_loss(params, t)[arms]
        return draws.astype(jnp.float32)


@chex.dataclass(frozen=True)
class BernoulliParams(SegmentParams):
    """:class:`PiecewiseBernoulli`'s per-run parameters (traced).

    Attributes:
      mean: ``()`` float32, mean loss of every non-best arm.
      gap: ``()`` float32, the best arm's mean loss is ``mean - gap``.
    """

    mean: jax.Array
    gap: jax.Array


@dataclasses.dataclass(frozen=True)
class PiecewiseBernoulli(BernoulliLosses):
    """Bernoulli losses with a best arm that changes at change points.

    Attributes:
      mean: mean loss of every non-best arm.
      gap: the best arm's mean loss is ``mean - gap`` (``0 < gap <= mean``).

    Both are the defaults of :class:`BernoulliParams`' traced fields of the same names, not
    part of the environment's identity (``compare=False``).

    Example:
      >>> import jax
      >>> env = PiecewiseBernoulli(num_arms=4, horizon=100, change_points=(50,))
      >>> [float(x) for x in env.mean_loss(env.default_params, 60)]
      [0.5, 0.30000001192092896, 0.5, 0.5]
    """

    mean: float = dataclasses.field(default=0.5, compare=False)
    gap: float = dataclasses.field(default=0.2, compare=False)

    name = "bernoulli"

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_probability("mean", self.mean)
        checks.check_probability("gap", self.gap)
        if not 0.0 < self.gap <= self.mean:
            raise ValueError(f"gap must be in (0, mean={self.mean}], got {self.gap}")

    @property
    def default_params(self) -> BernoulliParams:
        return BernoulliParams(
            **super().default_params, mean=jnp.float32(self.mean), gap=jnp.float32(self.gap)
        )

    def mean_loss(self, params: BernoulliParams, t: jax.Array) -> jax.Array:
        means = jnp.full((self.num_arms,), params.mean, jnp.float32)
        return means.at[self.best_arm(params, t)].add(-params.gap)

    def losses_of_words(
        self, params: Any, words: threefry.Words, arms: jax.Array, is_best: jax.Array
    ) -> jax.Array:
        mean = params["mean"]
        mu = jnp.where(is_best, mean - params["gap"], mean)
        return (threefry.uniform_words(*words, arms) < mu).astype(jnp.float32)
