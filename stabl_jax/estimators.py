"""One-sparse importance-weighted estimators; the one place a loss ``l`` becomes a gain
``1 - l`` (``feedback="reward"``)."""

from __future__ import annotations

import typing
from typing import Literal

import jax
import jax.numpy as jnp

Feedback = Literal["loss", "reward"]
FEEDBACKS: tuple[str, ...] = typing.get_args(Feedback)


def loss_to_reward(loss: jax.Array) -> jax.Array:
    """``r = 1 - l``: the single place where a loss in [0, 1] becomes a reward in [0, 1]."""
    return 1.0 - loss


reward_to_loss = loss_to_reward  # the map is its own inverse


def signed_estimate(observed_loss: jax.Array, prob: jax.Array, feedback: Feedback) -> jax.Array:
    """Algorithm 1, line 11's ``l_hat = 1[i = x'] l(x') / z(x')`` at ``x'``, signed as a gain:
    ``-l / z`` (``"loss"``) or ``(1 - l) / z`` (``"reward"``).

    Args:
      observed_loss: ``()`` loss in [0, 1] at the observed arm.
      prob: ``()`` probability with which that arm was drawn (> 0).
      feedback: ``"loss"`` or ``"reward"`` (static).
    """
    if feedback == "loss":
        return -observed_loss / prob
    if feedback == "reward":
        return loss_to_reward(observed_loss) / prob
    raise ValueError(f"feedback must be one of {FEEDBACKS}, got {feedback!r}")


def meta_log_update(
    log_weights: jax.Array, eta: jax.Array, regret_gain: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """Meta-learner update ``w_{t+1}(k) = w_t(k) (1 + eta_k r~_t(k))`` (Algorithms 1 and 3,
    line 13) in logs; a factor ``<= 0`` mutes the expert (``-inf``) until its restart.

    Args:
      log_weights: ``(B,)`` ``log w_t``, unnormalised (``-inf`` for muted experts).
      eta: ``(B,)`` step sizes ``eta_k``.
      regret_gain: ``(B,)`` ``r~_t(k)``, expert ``k``'s estimated gain over the mixture.

    Returns:
      ``(log w_{t+1}, number of muting events)``, shapes ``(B,)`` and ``()`` int32.
    """
    factor = 1.0 + eta * regret_gain
    alive = factor > 0.0
    log_factor = jnp.log(jnp.where(alive, factor, 1.0))
    new = jnp.where(alive, log_weights + log_factor, -jnp.inf)
    return new, jnp.sum(~alive, dtype=jnp.int32)


def probabilities(log_probs: jax.Array) -> jax.Array:
    """``exp(log_probs)`` behind ``lax.optimization_barrier``: the same bits for every consumer."""
    return jax.lax.optimization_barrier(jnp.exp(log_probs))


def exp3_log_update(
    log_probs: jax.Array, arm: jax.Array, value: jax.Array, eta: jax.Array
) -> jax.Array:
    """EXP3 update (Algorithm 2, line 5) in logs: ``y(i) = w(i) exp(eta s 1[i = arm])``,
    ``w <- y / ||y||_1`` by a max-shifted logsumexp.

    Args:
      log_probs: ``(..., n)`` normalised log-probabilities.
      arm: ``()`` int32 index of the observed arm.
      value: ``()`` signed estimate ``s``.
      eta: ``(...)`` learning rate(s), one per leading index.

    Returns:
      ``(..., n)`` normalised log-probabilities.
    """
    at_arm = jnp.arange(log_probs.shape[-1]) == arm
    step = jnp.asarray(eta * value)[..., None]  # (..., 1)
    bumped = jnp.where(at_arm, log_probs + step, log_probs)
    return bumped - jax.nn.logsumexp(bumped, axis=-1, keepdims=True)
