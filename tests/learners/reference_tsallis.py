"""Plain-NumPy Tsallis-INF (Zimmert and Seldin, "Tsallis-INF: an optimal algorithm for
stochastic and adversarial bandits", JMLR 2021, Algorithm 1, 1/2-Tsallis entropy, reduced-
variance estimator), written from the paper; nothing is imported from ``stabl_jax``.

The normaliser ``x`` of ``w_i = 4 (eta_t (L^_i - x))^{-2}`` is found by Brent's method
(``scipy.optimize.brentq``) on ``sum_i w_i(x) = 1``, not by the Newton iteration of the
learner; the draw is the shared inverse-CDF rule of :func:`tests.learners.reference.draw`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from tests.learners.reference import draw

__all__ = ["tsallis_inf_reference", "tsallis_weights_reference"]


def tsallis_weights_reference(cum_loss: np.ndarray, eta: float) -> np.ndarray:
    """``(K,)`` ``w_i = 4 (eta (L^_i - x))^{-2}`` with ``sum_i w_i = 1``: the root ``x`` lies
    in ``[min L^ - 2 sqrt(K) / eta, min L^ - 2 / eta]`` (the best arm's ``w`` between ``1/K``
    and 1)."""
    cum_loss = np.asarray(cum_loss, np.float64)
    K, low = cum_loss.shape[0], float(cum_loss.min())

    def excess(x: float) -> float:
        return float(np.sum(4.0 / (eta * (cum_loss - x)) ** 2) - 1.0)

    a, b = low - 2.0 * math.sqrt(K) / eta, low - 2.0 / eta
    if excess(a) >= 0.0:  # equal L^: the bracket's end is the root (up to rounding)
        x = a
    elif excess(b) <= 0.0:
        x = b
    else:
        x = optimize.brentq(excess, a, b, xtol=1e-300, rtol=1e-15)
    return 4.0 / (eta * (cum_loss - x)) ** 2


def tsallis_inf_reference(
    losses: np.ndarray, u: np.ndarray, *, lr_scale: float = 1.0
) -> dict[str, np.ndarray]:
    """Tsallis-INF, literally (cumulative ``L^`` unshifted).

    ``L^_0 = 0``. Round ``t = 1, 2, ...``: ``eta_t = lr_scale * 2 / sqrt(t)``; ``w_t`` from
    ``L^_{t-1}``; ``I_t = draw(w_t, u[t-1, 0])``; ``B_t(i) = 1/2 1{w_{t,i} >= eta_t^2}``;
    ``l^_{t,i} = 1{I_t = i} (l_{t,i} - B_t(i)) / w_{t,i} + B_t(i)``; ``L^_t = L^_{t-1} + l^_t``.

    Returns:
      ``played`` (T,), ``weights`` (T, K) the ``w_t`` of each round, ``estimates`` (T, K) the
      ``l^_t``, and ``cum_loss`` (T+1, K) the ``L^`` before each round.
    """
    losses = np.asarray(losses, np.float64)
    T, K = losses.shape
    cum = np.zeros((T + 1, K))
    played = np.zeros(T, np.int64)
    weights, estimates = np.zeros((T, K)), np.zeros((T, K))
    for t in range(T):
        eta = lr_scale * 2.0 / math.sqrt(t + 1)
        w = tsallis_weights_reference(cum[t], eta)
        i = draw(w, u[t, 0])
        baseline = np.where(w >= eta**2, 0.5, 0.0)
        estimate = baseline.copy()
        estimate[i] += (losses[t, i] - baseline[i]) / w[i]
        weights[t], estimates[t], played[t] = w, estimate, i
        cum[t + 1] = cum[t] + estimate
    return {"played": played, "weights": weights, "estimates": estimates, "cum_loss": cum}
