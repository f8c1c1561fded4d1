"""Beta-Bernoulli Thompson sampling (Thompson, Biometrika 1933; Agrawal and Goyal, "Analysis of
Thompson sampling for the multi-armed bandit problem", COLT 2012, Algorithm 2, and "Near-optimal
regret bounds for Thompson sampling", JACM 2017; Kaufmann, Korda and Munos, ALT 2012), one query
per round, and the pieces its discounted and sliding-window variants share.

Agrawal and Goyal's Algorithm 2 (general rewards in [0, 1]), with the paper's symbols:

::

    S_i = F_i = 0 for every arm i                      state successes, failures
    for t = 1, 2, ...:
        theta_i ~ Beta(S_i + alpha_0, F_i + beta_0)    _ask: jax.random.beta
        play i(t) = argmax_i theta_i, observe r_t      _ask (lowest index on ties)
        draw r~_t ~ Bernoulli(r_t)                      _ask draws the coin u, _tell: u < r_t
        S_i(t) += r~_t, F_i(t) += 1 - r~_t              _tell

The paper's prior is Beta(1, 1) (``alpha_0 = beta_0 = 1``, the defaults of ``Params``). A loss
``l`` enters as the reward ``r = 1 - l``; the Bernoulli trial ``r~ = 1{u < r}`` with a uniform
``u`` makes the algorithm exact for rewards in [0, 1], not only Bernoulli ones. The papers'
algorithm boxes were not available to us: the pseudo-code above is our reading of them.

Randomness: the round key splits into a Beta key (``jax.random.beta`` of the ``K`` posteriors)
and a coin key (:func:`stabl_jax.sampling.uniforms`, one draw ``u``).

Play probabilities: Thompson sampling has no closed form; :func:`argmax_probabilities` computes
``P(i = argmax_j theta_j) = int f_i(x) prod_{j != i} F_j(x) dx`` by quadrature (accurate to
1e-4; see its docstring for the grid and its cost, which every round pays inside the scan).

Memory per run: ``2 K + 2`` floats (successes, failures, the two prior parameters) and an int32.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import digamma, polygamma

from stabl_jax import checks, estimators, sampling
from stabl_jax.learners.base import BanditLearner, BanditQuery

#: Nodes per arm of the quadrature grid, in units of the arm's logit-space spread.
NODES_PER_ARM = 12
#: The nodes of an arm span its logit-space mean plus or minus this many standard deviations.
NODE_SPAN = 10.0
#: Gauss-Legendre points per cell of the grid.
GAUSS_POINTS = 6


@chex.dataclass(frozen=True)
class ThompsonParams:
    """Sweepable numbers of :class:`Thompson` and of sliding-window Thompson sampling.

    Attributes:
      prior_alpha: ``()`` ``alpha_0 > 0`` of the Beta prior (1: the uniform prior).
      prior_beta: ``()`` ``beta_0 > 0`` of the Beta prior (1: the uniform prior).
    """

    prior_alpha: jax.Array
    prior_beta: jax.Array


@chex.dataclass(frozen=True)
class ThompsonState:
    t: jax.Array  # () int32, rounds played so far
    successes: jax.Array  # (num_arms,) float, S_i (discounted for DiscountedThompson)
    failures: jax.Array  # (num_arms,) float, F_i
    params: Any  # ThompsonParams, or DiscountedThompsonParams


@chex.dataclass(frozen=True)
class ThompsonQuery(BanditQuery):
    """A :class:`BanditQuery` that also carries the round's coin ``u ~ U[0, 1)``, drawn before
    the loss is revealed, which turns the reward ``r`` into the Bernoulli trial ``1{u < r}``.

    Attributes:
      coin: ``()`` float, ``u``.
    """

    coin: jax.Array


PRIOR_BOUNDS: Mapping[str, checks.Interval] = {
    "prior_alpha": checks.Interval(0.0, low_open=True),
    "prior_beta": checks.Interval(0.0, low_open=True),
}


@dataclasses.dataclass(frozen=True)
class BetaThompson(BanditLearner):
    """Base class of the Beta-Bernoulli Thompson samplers: a round draws ``theta_i ~
    Beta(alpha_i, beta_i)`` from :meth:`posterior`, plays ``argmax_i theta_i`` and carries the
    coin of the Bernoulli trial; a subclass sets :meth:`posterior`, ``_init`` and ``_tell``."""

    def posterior(self, state: Any) -> tuple[jax.Array, jax.Array]:
        """``(alpha, beta)``, each ``(num_arms,)``: the Beta posterior of every arm."""
        raise NotImplementedError

    def _ask(self, state: Any, key: jax.Array) -> ThompsonQuery:
        f = self.float_dtype
        alpha, beta = self.posterior(state)
        beta_key, coin_key = jax.random.split(key)
        theta = jax.random.beta(beta_key, alpha, beta, dtype=f)
        arm = jnp.argmax(theta).astype(jnp.int32)
        probs = argmax_probabilities(alpha, beta)
        # Nothing divides by query_probs; the floor keeps it in (0, 1] where the computed
        # probability of a drawn arm underflows.
        floor = jnp.finfo(f).tiny
        return ThompsonQuery(
            arms=arm[None],
            play_probs=probs,
            query_probs=jnp.maximum(probs[arm], floor)[None],
            coin=sampling.uniforms(coin_key, 1, f)[0],
        )


def bernoulli_trial(query: BanditQuery, observed: jax.Array) -> jax.Array:
    """``()`` ``r~ = 1{u < r}`` with ``r = 1 - l`` the played arm's reward and ``u`` the
    coin of the :class:`ThompsonQuery`: a Bernoulli(``r``) success (Agrawal and Goyal's
    Algorithm 2, line 6)."""
    assert isinstance(query, ThompsonQuery), "Thompson sampling learns from its ThompsonQuery"
    reward = estimators.loss_to_reward(observed[0])
    return (query.coin < reward).astype(observed.dtype)


@dataclasses.dataclass(frozen=True)
class Thompson(BetaThompson):
    """Beta-Bernoulli Thompson sampling (Agrawal and Goyal 2012, Algorithm 2), one query.

    After ``t`` rounds arm ``i`` has ``S_i`` successes and ``F_i`` failures of the Bernoulli
    trials ``r~_s = 1{u_s < 1 - l_s}`` of the rounds it was played; round ``t + 1`` draws
    ``theta_i ~ Beta(S_i + alpha_0, F_i + beta_0)`` and plays ``argmax_i theta_i``.
    ``play_probs`` is :func:`argmax_probabilities` of the posterior.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = Thompson(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> state, info = jax.jit(learner.step)(state, jnp.array([0.0, 0.0, 0.0]), jax.random.key(1))
      >>> [round(float(p), 4) for p in info.play_probs]  # the round's law: a uniform prior
      [0.3333, 0.3333, 0.3333]
      >>> (state.successes + state.failures).tolist()  # one trial, of the played arm
      [0.0, 1.0, 0.0]
    """

    name: ClassVar[str] = "thompson"
    Params: ClassVar[type] = ThompsonParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = PRIOR_BOUNDS

    def _init(self, key: jax.Array, params: Any) -> ThompsonState:
        del key
        zeros = jnp.zeros((self.num_arms,), self.float_dtype)
        return ThompsonState(
            t=jnp.zeros((), jnp.int32), successes=zeros, failures=zeros, params=params
        )

    def posterior(self, state: ThompsonState) -> tuple[jax.Array, jax.Array]:
        """``(S + alpha_0, F + beta_0)``."""
        p = state.params
        return state.successes + p.prior_alpha, state.failures + p.prior_beta

    def _tell(self, state: ThompsonState, query: BanditQuery, observed: jax.Array) -> Any:
        hit = bernoulli_trial(query, observed)
        arm = query.arms[0]
        return dataclasses.replace(
            state,
            t=state.t + 1,
            successes=state.successes.at[arm].add(hit),
            failures=state.failures.at[arm].add(1.0 - hit),
        )


def argmax_probabilities(alpha: jax.Array, beta: jax.Array) -> jax.Array:
    """``P(i = argmax_j theta_j)`` for independent ``theta_j ~ Beta(alpha_j, beta_j)``, by
    quadrature.

    ``P_i = int_0^1 f_i(x) prod_{j != i} F_j(x) dx`` is computed in logit space ``x =
    sigmoid(y)``, where ``f_i(x) dx = x^{alpha_i} (1 - x)^{beta_i} dy / B(alpha_i, beta_i)`` is
    smooth and bounded for every ``alpha, beta > 0`` (no singularity at 0 or 1):

    1. nodes: each arm places :data:`NODES_PER_ARM` nodes evenly over ``m_j +- NODE_SPAN s_j``,
       ``m_j = psi(alpha_j) - psi(beta_j)`` and ``s_j^2 = psi'(alpha_j) + psi'(beta_j)`` the
       mean and variance of ``logit theta_j``; the sorted union of all nodes cuts ``C = K
       NODES_PER_ARM - 1`` cells, each narrower than an arm's spread where that arm has mass;
    2. ``GAUSS_POINTS``-point Gauss-Legendre in each cell gives the densities' integrals; the
       CDFs ``F_j`` at the points are the masses of the cells before plus the integral of the
       cell's interpolating polynomial up to the point (no incomplete Beta function);
    3. each density is normalised by its own quadrature mass (so ``B(alpha, beta)`` cancels)
       and the result by its sum.

    Cost per call: ``K C GAUSS_POINTS`` exponentials and ``K C GAUSS_POINTS^2`` multiply-adds,
    ``O(K^2)``, plus a sort of ``K NODES_PER_ARM`` nodes; the grid meets 1e-4 against an
    adaptive integration (tests/learners/test_baselines.py) in float64 and, for posteriors of up to
    about 10^4 pseudo-counts, in float32.

    Args:
      alpha: ``(K,)`` ``alpha_j > 0``.
      beta: ``(K,)`` ``beta_j > 0``.

    Returns:
      ``(K,)`` probabilities summing to 1, in ``alpha``'s dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> p = argmax_probabilities(jnp.array([2.0, 1.0]), jnp.array([1.0, 1.0]))
      >>> [round(float(v), 4) for v in p]  # P(Beta(2, 1) draw > uniform draw) = 2/3
      [0.6667, 0.3333]
    """
    dtype = alpha.dtype
    points, weights, within = _logit_grid(alpha, beta)
    dens = _log_density_ratio(alpha, beta, points)  # (K, C, q)
    dens = jnp.exp(dens - jnp.max(dens, axis=(1, 2))[:, None, None])
    masses = dens * weights[None]  # (K, C, q) mass at each point
    partial = jnp.einsum("kcj,cij->kci", dens, within)  # mass from each cell's start to a point
    cells = jnp.sum(masses, axis=-1)  # (K, C) mass of each cell
    before = jnp.cumsum(cells, axis=-1) - cells  # (K, C) mass left of each cell
    total = jnp.sum(cells, axis=-1)  # (K,)
    cdf = jnp.clip((before[..., None] + partial) / total[:, None, None], 0.0, 1.0)
    others = _exclusive_product(cdf)  # (K, C, q) prod_{j != i} F_j
    probs = jnp.sum(masses * others, axis=(1, 2)) / total
    return (probs / jnp.sum(probs)).astype(dtype)


def _logit_grid(alpha: jax.Array, beta: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """:func:`argmax_probabilities`' grid in ``y = logit x``: the Gauss-Legendre points
    ``(C, q)`` of each cell, their weights ``(C, q)``, and the matrices ``(C, q, q)`` that
    integrate the interpolating polynomial of a cell's point values from the cell's start
    to each point."""
    dtype = alpha.dtype
    mean = digamma(alpha) - digamma(beta)
    spread = jnp.sqrt(polygamma(1, alpha) + polygamma(1, beta))
    offsets = jnp.linspace(-NODE_SPAN, NODE_SPAN, NODES_PER_ARM, dtype=dtype)
    nodes = jnp.sort(jnp.ravel(mean[:, None] + spread[:, None] * offsets[None, :]))
    start, width = nodes[:-1, None], jnp.diff(nodes)[:, None]  # (C, 1)
    frac, half, integrate = _gauss_rule(GAUSS_POINTS)
    points = start + width * jnp.asarray(frac, dtype)[None, :]  # (C, q)
    weights = width * jnp.asarray(half, dtype)[None, :]
    return points, weights, width[:, :, None] * jnp.asarray(integrate, dtype)[None]


def _gauss_rule(q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gauss-Legendre on [0, 1]: the points ``s_j`` ``(q,)``, weights ``(q,)``, and ``A``
    ``(q, q)`` with ``A_ij = int_0^{s_i} L_j`` (``L_j`` the Lagrange basis of the points)."""
    g, w = np.polynomial.legendre.leggauss(q)
    s = (1.0 + g) / 2.0
    integrate = np.zeros((q, q))
    for j in range(q):
        basis = np.polynomial.Polynomial.fromroots(np.delete(s, j))
        antiderivative = (basis / basis(s[j])).integ()
        integrate[:, j] = antiderivative(s) - antiderivative(0.0)
    return s, w / 2.0, integrate


def _log_density_ratio(alpha: jax.Array, beta: jax.Array, y: jax.Array) -> jax.Array:
    """``(K, *y.shape)`` ``alpha_j log sigmoid(y) + beta_j log sigmoid(-y)``: the log-density
    of ``logit theta_j`` at ``y`` up to ``-log B(alpha_j, beta_j)``."""
    lead = (slice(None),) + (None,) * y.ndim
    return alpha[lead] * jax.nn.log_sigmoid(y)[None] + beta[lead] * jax.nn.log_sigmoid(-y)[None]


def _exclusive_product(values: jax.Array) -> jax.Array:
    """``out[i] = prod_{j != i} values[j]`` along axis 0, without division (zeros allowed)."""
    ones = jnp.ones_like(values[:1])
    before = jnp.cumprod(jnp.concatenate([ones, values[:-1]]), axis=0)
    after = jnp.cumprod(jnp.concatenate([ones, values[::-1][:-1]]), axis=0)[::-1]
    return before * after
