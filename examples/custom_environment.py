"""A custom environment in one class: an adaptive adversary simulated with StABL and EXP3.

    python examples/custom_environment.py [--runs 64] [--horizon 2048] [--arms 8]

The adversary is neither piecewise nor oblivious: every arm has a base loss drawn per run, and
the arms the learner has been playing get more expensive. Its state is an exponential moving
average ``m`` of the learner's plays (``m <- rho m + (1 - rho) e_{x_t}``) and round ``t``'s mean
losses are ``clip(base + penalty * m, 0, 1)``, observed with uniform noise; the best arm moves
whenever the learner settles on one. It follows the contract of ``docs/environments.md``: a
frozen dataclass with ``sample_params``, ``init`` and ``evaluate``, whose ``info`` gives
``simulate`` the best arm and the expected loss ``<p_t, l_t>``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import EXP3, Environment, StABL, simulate
from stabl_jax.experiment.arguments import Parser, count


@dataclasses.dataclass(frozen=True)
class PunishingAdversary(Environment):
    """Losses that rise on the arms the learner plays (an adaptive adversary).

    Attributes:
      num_arms: ``n``.
      horizon: ``T``.
      memory: ``rho`` in [0, 1), the decay of the play average.
      penalty: added to an arm's mean loss per unit of play average.
      noise: half-width of the uniform noise around the mean loss.
    """

    num_arms: int
    horizon: int
    memory: float = 0.99
    penalty: float = 0.4
    noise: float = 0.1

    trace_names: ClassVar[tuple[str, ...]] = (
        "played",
        "arms",
        "loss",
        "expected_loss",
        "prob_best",
    )

    def sample_params(self, key: jax.Array) -> jax.Array:
        """``(n,)`` base mean losses, uniform in [0.2, 0.5)."""
        return jax.random.uniform(key, (self.num_arms,), jnp.float32, 0.2, 0.5)

    def init(self, params: jax.Array) -> jax.Array:
        """``(n,)`` the play average ``m``, zero before any play."""
        return jnp.zeros_like(params)

    def mean_loss(self, params: jax.Array, state: jax.Array) -> jax.Array:
        return jnp.clip(params + self.penalty * state, 0.0, 1.0)

    def evaluate(
        self, params: jax.Array, state: jax.Array, t: jax.Array, query: Any, key: jax.Array
    ) -> tuple[jax.Array, jax.Array, dict[str, jax.Array]]:
        mean = self.mean_loss(params, state)
        noise = jax.random.uniform(key, mean.shape, mean.dtype, -self.noise, self.noise)
        loss = jnp.clip(mean + noise, 0.0, 1.0)  # every arm's: n is small here
        played = jax.nn.one_hot(query.arms[0], self.num_arms, dtype=state.dtype)
        info = {
            "best_arm": jnp.argmin(mean).astype(jnp.int32),
            "expected_loss": jnp.dot(query.play_probs, loss).astype(jnp.float32),
        }
        return self.memory * state + (1.0 - self.memory) * played, loss[query.arms], info


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=count, default=64)
    parser.add_argument("--horizon", type=count, default=2048)
    parser.add_argument("--arms", type=count, default=8)
    args = parser.parse_args(argv)
    try:  # the library's checks (e.g. num_arms >= 2) as one line, before any run
        env = PunishingAdversary(num_arms=args.arms, horizon=args.horizon)
        learners = (StABL(num_arms=args.arms, horizon=args.horizon), EXP3(args.arms, args.horizon))
    except ValueError as error:
        parser.error(str(error))
    out = {}
    for learner in learners:
        res = simulate(learner, env, jax.random.key(0), args.runs)  # same key: paired runs
        out[learner.name] = {
            "mean_loss": float(np.mean(res.loss)),
            "mean_expected_loss": float(np.mean(res.expected_loss)),
            "prob_best": float(np.mean(res.prob_best)),
            "max_play_average": float(np.max(res.final_carry("this example").env_state)),
        }
        row = "  ".join(f"{k} {v:.4f}" for k, v in out[learner.name].items())
        print(f"{learner.name:<6} {row}")
    return out


if __name__ == "__main__":
    main()
