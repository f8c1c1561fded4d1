"""Tsallis-INF with the 1/2-Tsallis entropy (Zimmert and Seldin, "Tsallis-INF: an optimal
algorithm for stochastic and adversarial bandits", JMLR 22, 2021, Algorithm 1 with the
reduced-variance estimator and Algorithm 2's Newton normalisation), one query per round.

Algorithm 1, with the paper's symbols:

::

    L^_0 = 0
    for t = 1, 2, ...:
        eta_t = 2 / sqrt(t)                                    learning_rate, times lr_scale
        w_t = argmin_{w in simplex} <w, L^_{t-1}> + Psi_t(w)   tsallis_weights:
            = 4 (eta_t (L^_{t-1,i} - x))^{-2}, x s.t. sum = 1    Newton on x (Algorithm 2)
        draw I_t ~ w_t, observe l_{t,I_t}                       _ask (sampling.sample_index)
        B_t(i) = 1/2 1{w_{t,i} >= eta_t^2}                      reduced_variance_estimate
        l^_{t,i} = (1{I_t = i} (l_{t,i} - B_t(i))) / w_{t,i} + B_t(i)
        L^_t = L^_{t-1} + l^_t                                  _tell

Newton (Algorithm 2): ``x <- x - (sum_i w_i - 1) / (eta_t sum_i w_i^{3/2})``, since
``d w_i / dx = eta_t w_i^{3/2}``. The paper warm-starts ``x`` from the previous round; here
every round starts from ``x = min_i L^_i - 2 / eta_t`` (where the best arm's ``w`` is 1, so
``sum w >= 1``): ``sum_i w_i(x)`` is convex and increasing, so from there the iterates decrease
monotonically to the root and never cross ``min_i L^_i``, and a fixed number of steps
(:func:`newton_steps`) normalises to rounding in float64.

Learning rate: ``eta_t = 2 / sqrt(t)``, the rate of Theorem 1 as we read it (stated there for
the importance-weighted estimator; secondary sources quote ``4 / sqrt(t)`` with the
reduced-variance one, which is ``lr_scale = 2``). We could not read the paper's
algorithm and theorem boxes: the pseudo-code above is our reading.
The state keeps ``L^`` shifted so that its minimum is 0 (``w`` is unchanged by a common shift),
which keeps float32 exact at long horizons.

Memory per run: ``K + 1`` floats (``L^`` and ``lr_scale``) and an int32.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks
from stabl_jax.learners.base import BanditLearner, BanditQuery, sample_query


@chex.dataclass(frozen=True)
class TsallisINFParams:
    """Sweepable numbers of :class:`TsallisINF`.

    Attributes:
      lr_scale: ``()`` multiplies ``eta_t = 2 / sqrt(t)`` (``> 0``).
    """

    lr_scale: jax.Array


@chex.dataclass(frozen=True)
class TsallisINFState:
    t: jax.Array  # () int32, rounds played so far
    loss_estimates: jax.Array  # (num_arms,) float, L^_t - min_i L^_{t,i}
    params: TsallisINFParams


def newton_steps(num_arms: int) -> int:
    """Newton steps that normalise ``w`` from :func:`tsallis_weights`' start: the ratio of
    root to start distance grows by 3/2 a step while far (at most ``sqrt(K)`` to go), then
    converges quadratically (7 steps from 0.9 of the way)."""
    return math.ceil(math.log(math.sqrt(num_arms)) / math.log(1.5)) + 7


def tsallis_weights(loss_estimates: jax.Array, eta: jax.Array) -> jax.Array:
    """``(K,)`` ``w_i = 4 (eta (L^_i - x))^{-2}`` with ``x`` the normaliser, by Newton.

    Args:
      loss_estimates: ``(K,)`` cumulative loss estimates ``L^``.
      eta: ``()`` the learning rate ``eta_t > 0``.

    Returns:
      ``(K,)`` the distribution ``w_t`` (sums to 1 up to rounding).

    Example:
      >>> import jax.numpy as jnp
      >>> [round(float(v), 6) for v in tsallis_weights(jnp.zeros(4), jnp.float32(1.0))]
      [0.25, 0.25, 0.25, 0.25]
    """

    def weights(x: jax.Array) -> jax.Array:
        return 4.0 / (eta * (loss_estimates - x)) ** 2

    x = jnp.min(loss_estimates) - 2.0 / eta
    for _ in range(newton_steps(loss_estimates.shape[-1])):  # unrolled: no loop in a round
        w = weights(x)
        x = x - (jnp.sum(w) - 1.0) / (eta * jnp.sum(w * jnp.sqrt(w)))
    return weights(x)


def reduced_variance_estimate(
    weights: jax.Array, arm: jax.Array, loss: jax.Array, eta: jax.Array
) -> jax.Array:
    """``(K,)`` ``l^_i = 1{I = i} (l - B(i)) / w_i + B(i)``, ``B(i) = 1/2 1{w_i >= eta^2}``
    (Zimmert and Seldin's reduced-variance estimator).

    Args:
      weights: ``(K,)`` the play distribution ``w_t``.
      arm: ``()`` int32, the played arm ``I_t``.
      loss: ``()`` its loss ``l_{t,I_t}``.
      eta: ``()`` the learning rate ``eta_t``.
    """
    baseline = jnp.where(weights >= eta**2, 0.5, 0.0).astype(weights.dtype)
    played = jnp.arange(weights.shape[-1]) == arm
    return jnp.where(played, (loss - baseline) / weights, 0.0) + baseline


@dataclasses.dataclass(frozen=True)
class TsallisINF(BanditLearner):
    """Tsallis-INF, 1/2-Tsallis entropy and reduced-variance estimates (Zimmert and Seldin
    2021, Algorithm 1), one query per round.

    Round ``t`` (1-based) plays ``I_t ~ w_t``, ``w_{t,i} = 4 (eta_t (L^_{t-1,i} - x))^{-2}``,
    ``eta_t = lr_scale * 2 / sqrt(t)``, and adds the reduced-variance estimate ``l^_t`` to
    ``L^``. Anytime: the horizon is not used.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = TsallisINF(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> for t in range(50):
      ...     state, info = step(state, jnp.array([0.9, 0.1, 0.9]), jax.random.key(t))
      >>> int(jnp.argmax(info.play_probs))
      1
    """

    name: ClassVar[str] = "tsallis_inf"
    Params: ClassVar[type] = TsallisINFParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "lr_scale": checks.Interval(0.0, low_open=True)
    }

    def _init(self, key: jax.Array, params: TsallisINFParams) -> TsallisINFState:
        del key
        zeros = jnp.zeros((self.num_arms,), self.float_dtype)
        return TsallisINFState(t=jnp.zeros((), jnp.int32), loss_estimates=zeros, params=params)

    def learning_rate(self, state: TsallisINFState) -> jax.Array:
        """``()`` ``eta_t = lr_scale * 2 / sqrt(t)`` for the round ``t = state.t + 1``."""
        t = (state.t + 1).astype(self.float_dtype)
        return state.params.lr_scale * 2.0 / jnp.sqrt(t)

    def play_distribution(self, state: TsallisINFState) -> jax.Array:
        """``(num_arms,)`` ``w_t``."""
        return tsallis_weights(state.loss_estimates, self.learning_rate(state))

    def _ask(self, state: TsallisINFState, key: jax.Array) -> BanditQuery:
        return sample_query(key, self.play_distribution(state))

    def _tell(
        self, state: TsallisINFState, query: BanditQuery, observed: jax.Array
    ) -> TsallisINFState:
        eta = self.learning_rate(state)
        estimate = reduced_variance_estimate(query.play_probs, query.arms[0], observed[0], eta)
        totals = state.loss_estimates + estimate
        return dataclasses.replace(state, t=state.t + 1, loss_estimates=totals - jnp.min(totals))
