"""Plain-NumPy Beta-Bernoulli Thompson sampling and its play probabilities, written from the
papers; nothing is imported from ``stabl_jax``.

- :func:`thompson_reference` — Thompson sampling with Agrawal and Goyal's Bernoulli trials
  ("Analysis of Thompson sampling for the multi-armed bandit problem", COLT 2012, Algorithm 2),
  and its two non-stationary variants: discounted counts (Raj and Kalyani, "Taming
  non-stationary bandits: a Bayesian approach", arXiv 2017) and a sliding window (Trovò,
  Paladino, Restelli and Gatti, "Sliding-window Thompson sampling for non-stationary
  settings", JAIR 2020), literally: the window recounts the last ``tau`` rounds of the full
  history each round.
- :func:`argmax_probabilities_reference` — ``P(i = argmax_j theta_j)`` by adaptive quadrature
  (``scipy.integrate.quad``) of ``int_0^1 prod_{j != i} F_j(F_i^{-1}(u)) du``, the CDFs and
  quantiles of ``scipy.stats.beta``: a bounded integrand for every ``alpha, beta > 0``.

Losses ``l`` in [0, 1]; rewards ``r = 1 - l``; 0-based rounds. The posterior samples
``theta[t]`` and coins ``coins[t]`` are inputs (the test feeds the JAX learner's draws).
"""

from __future__ import annotations

import numpy as np
from scipy import integrate, stats

__all__ = ["argmax_probabilities_reference", "thompson_reference"]


def thompson_reference(
    losses: np.ndarray,
    theta: np.ndarray,
    coins: np.ndarray,
    *,
    prior_alpha: float = 1.0,
    prior_beta: float = 1.0,
    discount: float = 1.0,
    window: int | None = None,
) -> dict[str, np.ndarray]:
    """Thompson sampling, literally.

    Each round ``t``: the posterior of arm ``i`` is ``Beta(S_i + alpha_0, F_i + beta_0)``;
    play ``i_t = argmax_i theta[t, i]`` (``theta[t]`` drawn from that posterior); the trial
    ``r~_t = 1{coins[t] < 1 - l_t(i_t)}``; then

    - ``window=None``: ``S_i <- discount S_i + 1{i = i_t} r~_t``, ``F_i <- discount F_i +
      1{i = i_t} (1 - r~_t)`` (``discount = 1``: Thompson sampling);
    - ``window=tau``: ``S_i``, ``F_i`` count the trials of arm ``i`` in the last ``tau`` rounds.

    Returns:
      ``played`` (T,), and ``alpha``, ``beta`` (T+1, K): the posterior before round ``t``.
    """
    losses = np.asarray(losses, np.float64)
    T, K = losses.shape
    S, F = np.zeros(K), np.zeros(K)
    history: list[tuple[int, float]] = []
    played = np.zeros(T, np.int64)
    alpha, beta = np.zeros((T + 1, K)), np.zeros((T + 1, K))
    for t in range(T + 1):
        if window is not None:
            S, F = np.zeros(K), np.zeros(K)
            for arm, trial in history[-window:]:
                S[arm] += trial
                F[arm] += 1.0 - trial
        alpha[t], beta[t] = S + prior_alpha, F + prior_beta
        if t == T:
            break
        i = int(np.argmax(theta[t]))
        played[t] = i
        trial = 1.0 if coins[t] < 1.0 - losses[t, i] else 0.0
        history.append((i, trial))
        if window is None:
            S, F = discount * S, discount * F
            S[i] += trial
            F[i] += 1.0 - trial
    return {"played": played, "alpha": alpha, "beta": beta}


def argmax_probabilities_reference(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """``(K,)`` ``P(i = argmax_j theta_j)``, ``theta_j ~ Beta(alpha_j, beta_j)`` independent,
    to about 1e-10: ``P_i = int_0^1 prod_{j != i} F_j(F_i^{-1}(u)) du`` by ``quad``, split at
    where the other arms' CDFs pass their quantiles 1e-6 .. 1 - 1e-6."""
    alpha, beta = np.asarray(alpha, np.float64), np.asarray(beta, np.float64)
    K = alpha.shape[0]
    out = np.zeros(K)
    for i in range(K):
        others = [j for j in range(K) if j != i]

        def integrand(u: float, i: int = i, others: list[int] = others) -> float:
            x = stats.beta.ppf(u, alpha[i], beta[i])
            return float(np.prod([stats.beta.cdf(x, alpha[j], beta[j]) for j in others]))

        quantiles = (1e-6, 1e-3, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-6)
        cuts = {
            float(stats.beta.cdf(stats.beta.ppf(q, alpha[j], beta[j]), alpha[i], beta[i]))
            for j in others
            for q in quantiles
        }
        breaks = sorted(b for b in cuts if 0.0 < b < 1.0)
        out[i] = integrate.quad(
            integrand, 0.0, 1.0, points=breaks, limit=1000, epsabs=1e-12, epsrel=1e-10
        )[0]
    return out
