"""A learner in one file: epsilon-greedy on running mean losses (``docs/learners.md``).

Round ``t``: with probability ``epsilon`` play a uniform arm, otherwise the arm with the
smallest mean observed loss (ties to the lowest index; untried arms have mean 0, so they go
first). One query per round: the played arm. Run it with ``python examples/custom_learner.py``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import ExpertAdvice, simulate
from stabl_jax.checks import Interval
from stabl_jax.learners.base import BanditLearner, BanditQuery, sample_query


@chex.dataclass(frozen=True)
class EpsilonGreedyParams:
    """Sweepable numbers (a pytree of scalars).

    Attributes:
      epsilon: ``()`` exploration probability in [0, 1].
    """

    epsilon: jax.Array


@chex.dataclass(frozen=True)
class EpsilonGreedyState:
    t: jax.Array  # () int32, rounds played so far (every state has it)
    counts: jax.Array  # (num_arms,) float, plays of each arm
    sums: jax.Array  # (num_arms,) float, their summed losses
    params: EpsilonGreedyParams


@dataclasses.dataclass(frozen=True)
class EpsilonGreedy(BanditLearner):
    """Epsilon-greedy: static configuration on the object, sweepable numbers in ``Params``.

    Attributes:
      epsilon: the default exploration probability (a ``Params`` entry, so it can be swept).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = EpsilonGreedy(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = learner.step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(1))
      >>> int(state.t), info.arms.shape
      (1, (1,))
    """

    epsilon: float = 0.1

    num_queries: ClassVar[int] = 1
    name: ClassVar[str] = "epsilon_greedy"
    # default_params fills each Params field from the option of the same name (here epsilon).
    Params: ClassVar[type] = EpsilonGreedyParams
    param_bounds: ClassVar[Mapping[str, Interval]] = {"epsilon": Interval(0.0, 1.0)}

    def play_distribution(self, state: EpsilonGreedyState) -> jax.Array:
        """``(num_arms,)`` ``(1 - epsilon) 1[i = greedy] + epsilon / n``."""
        means = state.sums / jnp.maximum(state.counts, 1.0)
        greedy = jax.nn.one_hot(jnp.argmin(means), self.num_arms, dtype=self.float_dtype)
        eps = state.params.epsilon
        return (1.0 - eps) * greedy + eps / self.num_arms

    # The maths only: the base class checks keys, states, params and observed losses.
    def _init(self, key: jax.Array, params: EpsilonGreedyParams) -> EpsilonGreedyState:
        del key
        zeros = jnp.zeros((self.num_arms,), self.float_dtype)
        t = jnp.zeros((), jnp.int32)
        return EpsilonGreedyState(t=t, counts=zeros, sums=zeros, params=params)

    def _ask(self, state: EpsilonGreedyState, key: jax.Array) -> BanditQuery:
        # Play arms[0] ~ the play distribution (more distributions: more observed arms).
        return sample_query(key, self.play_distribution(state))

    def _tell(
        self, state: EpsilonGreedyState, query: BanditQuery, observed: jax.Array
    ) -> EpsilonGreedyState:
        arm = query.arms[0]
        return dataclasses.replace(
            state,
            t=state.t + 1,
            counts=state.counts.at[arm].add(1.0),
            sums=state.sums.at[arm].add(observed[0]),
        )


def main(num_runs: int = 8, horizon: int = 256) -> float:
    """Simulate ``num_runs`` runs on the paper's expert-advice environment, with the in-program
    checks on; return the mean loss per round."""
    env = ExpertAdvice(num_arms=5, horizon=horizon)
    learner = EpsilonGreedy(num_arms=5, horizon=horizon)
    result = simulate(learner, env, jax.random.key(0), num_runs, validate=True)
    return float(result.loss.mean())


if __name__ == "__main__":
    print(f"mean loss per round: {main():.3f}")
