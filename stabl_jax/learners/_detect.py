"""Pieces shared by the change-detecting index policies :class:`~stabl_jax.learners.cusum_ucb.
CUSUMUCB`, :class:`~stabl_jax.learners.m_ucb.MUCB` and :class:`~stabl_jax.learners.glr_klucb.
GLRklUCB`: forced exploration on a fixed cycle, the Bernoulli KL divergence and the kl-UCB
index (which kl-UCB, SW-klUCB and D-klUCB read too, through :mod:`stabl_jax.learners._ucb`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import xlogy

from stabl_jax.learners.base import BanditQuery

#: Bisection steps of :func:`klucb_index`: the bracket ``[mu, 1]`` shrinks to ``2^-40``.
KLUCB_STEPS = 40
#: Means are clipped to ``[KL_EPS, 1 - KL_EPS]`` inside :func:`bernoulli_kl`'s second argument.
KL_EPS = 1e-7
#: Cap on the forced-exploration period ``floor(K / alpha)`` (int32; no horizon reaches it).
MAX_PERIOD = 2**30


def bernoulli_kl(p: jax.Array, q: jax.Array, eps: float = KL_EPS) -> jax.Array:
    """``kl(p, q) = p log(p / q) + (1 - p) log((1 - p) / (1 - q))`` (``0 log 0 = 0``), with
    ``q`` clipped to ``[eps, 1 - eps]`` so it stays finite (``eps = 0``: ``+inf`` at a ``q``
    of 0 or 1 that ``p`` is not)."""
    q = jnp.clip(q, eps, 1.0 - eps)
    return xlogy(p, p) - xlogy(p, q) + xlogy(1.0 - p, 1.0 - p) - xlogy(1.0 - p, 1.0 - q)


def klucb_index(
    counts: jax.Array, sums: jax.Array, budget: jax.Array, eps: float = KL_EPS
) -> jax.Array:
    """``(K,)`` ``max {q in [mu_i, 1] : N_i kl(mu_i, q) <= budget_i}``, ``mu_i = sums_i / N_i``,
    by :data:`KLUCB_STEPS` bisection steps (``mu_i`` where ``budget_i = 0``); ``+inf`` where
    ``N_i = 0``.

    Args:
      counts: ``(K,)`` play counts ``N_i >= 0`` (int, or float where discounted).
      sums: ``(K,)`` reward sums.
      budget: ``(K,)`` or ``()`` the exploration budget ``f(.) >= 0``.
      eps: :func:`bernoulli_kl`'s clip. The bisection needs none (``kl = +inf`` at a ``q``
        of 1 is "outside"), so 0 gives the exact index; the default :data:`KL_EPS` (GLR-klUCB's
        reading) takes any ``q`` above ``1 - KL_EPS`` as inside once ``1 - KL_EPS`` is.
    """
    tried = counts > 0
    n = jnp.where(tried, counts, 1).astype(sums.dtype)
    mu = jnp.clip(sums / n, 0.0, 1.0)

    def halve(_: int, bracket: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        inside = n * bernoulli_kl(mu, mid, eps) <= budget
        return jnp.where(inside, mid, lo), jnp.where(inside, hi, mid)

    # Unrolled: no loop inside a round (tests/test_simulate.py).
    lo, _ = jax.lax.fori_loop(0, KLUCB_STEPS, halve, (mu, jnp.ones_like(mu)), unroll=True)
    # A zero budget gives mu itself (kl rounds to <= 0 up to ~1e-8 away from mu in float64).
    return jnp.where(tried, jnp.where(budget > 0, lo, mu), jnp.inf)


def klucb_exploration(log_t: jax.Array, c: jax.Array | float) -> jax.Array:
    """``f(t) = log t + c log log t`` from ``log t >= 0``, the ``log log`` term taken as 0
    where ``log t < 1`` (kl-UCB's exploration function; Garivier and Cappe 2011)."""
    return log_t + c * jnp.log(jnp.maximum(log_t, 1.0))


def forced_arm(rounds: jax.Array, alpha: jax.Array, num_arms: int) -> jax.Array:
    """The arm forced at a round, or ``-1``: with ``A = rounds mod floor(K / alpha)``
    (``rounds`` 1-based since the last restart), arm ``A - 1`` if ``1 <= A <= K``.

    ``alpha = 0`` forces nothing after the first ``K`` rounds (the period is
    :data:`MAX_PERIOD`).
    """
    ratio = num_arms / jnp.maximum(alpha, num_arms / MAX_PERIOD)
    period = jnp.floor(jnp.minimum(ratio, MAX_PERIOD)).astype(jnp.int32)
    a = rounds % period
    return jnp.where((a >= 1) & (a <= num_arms), a - 1, -1).astype(jnp.int32)


def point_query(index: jax.Array, forced: jax.Array, dtype: jnp.dtype) -> BanditQuery:
    """Play the forced arm if ``forced >= 0``, else ``argmax index`` (lowest index on ties,
    so untried arms go first); the play distribution is the point mass on it."""
    arm = jnp.where(forced >= 0, forced, jnp.argmax(index)).astype(jnp.int32)
    probs = jax.nn.one_hot(arm, index.shape[-1], dtype=dtype)
    return BanditQuery(arms=arm[None], play_probs=probs, query_probs=jnp.ones((1,), dtype))
