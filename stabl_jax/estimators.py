"""One-sparse importance-weighted estimators and the reward/loss convention.

Losses are the library's currency: environments emit losses in [0, 1] and learners receive
losses at their queried arms. A learner with ``feedback="reward"`` converts an observed loss
``l`` to the gain ``g = 1 - l`` here, and nowhere else.
"""

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
    """Value of the one-sparse estimator at the observed arm, signed as a gain.

    With ``x'`` drawn from ``z``, the estimator of Algorithm 1, line 11 is
    ``l_hat = 1[i = x'] l(x') / z(x')``; it is unbiased: ``E[l_hat] = l``. This returns

    - ``feedback="loss"``:   ``s = -l(x') / z(x')``   (so that ``+s`` is the update direction),
    - ``feedback="reward"``: ``s = (1 - l(x')) / z(x')``, the unbiased gain estimate.

    Multiplicative-weight updates then read ``log w_i += eta * s * 1[i = x']`` in both cases.

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
    """Restarted multiplicative-weights update of the meta-learner (Algorithm 1 and 3, line 13)
    in the log domain: ``w_{t+1}(k) = w_t(k) (1 + eta_k r~_t(k))``.

    The paper's argument that weights stay non-negative needs ``eta_k |r~| <= 1``; when a
    factor ``1 + eta_k r~_t(k) <= 0`` the weight is set to zero instead (log weight ``-inf``:
    the expert is muted until its next restart), never to a negative value.

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
    """``exp(log_probs)``, computed once (``lax.optimization_barrier``): every consumer
    sees the same bits however the runs are batched (a fused ``exp`` may differ in the last
    bit)."""
    return jax.lax.optimization_barrier(jnp.exp(log_probs))


def exp3_log_update(
    log_probs: jax.Array, arm: jax.Array, value: jax.Array, eta: jax.Array
) -> jax.Array:
    """EXP3 update of Algorithm 2, line 5 in the log domain, for one or many experts.

    ``y(i) = w(i) exp(eta * s * 1[i = arm])``, ``w <- y / ||y||_1`` where ``s`` is the signed
    estimate of :func:`signed_estimate`. Only entry ``arm`` moves (a select against
    ``arange(n) == arm`` stands for the scatter); the row is then renormalised by a
    max-shifted logsumexp of the *bumped* row.

    The max shift keeps the normaliser right when ``eta * s`` is far below ``log w(arm)``
    and every other ``exp`` would underflow in float32.

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
