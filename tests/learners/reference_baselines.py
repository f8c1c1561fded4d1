"""Plain-NumPy loops of two one-query bandit baselines, written from their source papers.

Each function follows the published pseudo-code literally (1-based rounds of the papers are
the 0-based ``t`` here: ``t`` rounds have been played before round ``t``), in float64, with
unnormalised weights or full histories where the paper uses them. Nothing is imported from
``stabl_jax``: the only shared convention is the inverse-CDF draw of :func:`reference.draw`
fed the same uniforms as the JAX learner (``u[t, 0]`` draws round ``t``'s arm). The UCB
policies are deterministic and use no uniforms.

Losses ``l`` in [0, 1] are the input everywhere; Exp3.S, written for rewards, uses
``x = 1 - l``.

- :func:`exp3s_reference` — Exp3.S, Auer, Cesa-Bianchi, Freund and Schapire, "The
  nonstochastic multiarmed bandit problem", SIAM J. Comput. 32(1), 2002, Section 8.
- :func:`exp3_ix_reference` — Exp3-IX, Neu, "Explore no more: improved high-probability regret
  bounds for non-stochastic bandits", NeurIPS 2015, Algorithm 1 and Theorem 1.
- :func:`default_discount`, :func:`default_window` — the tunings of D-UCB and SW-UCB, Garivier
  and Moulines, ALT 2011 (their loops are in :mod:`reference_index_policies`).
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

from tests.learners.reference import draw

__all__ = [
    "default_discount",
    "default_window",
    "exp3_ix_rates",
    "exp3_ix_reference",
    "exp3s_gamma",
    "exp3s_reference",
]


#: ``u``'s type passes through ``_check``: an array stays an array, ``None`` stays ``None``.
U = TypeVar("U", np.ndarray, None)


def _check(losses: np.ndarray, u: U) -> tuple[np.ndarray, U]:
    losses = np.asarray(losses, dtype=np.float64)
    if losses.ndim != 2 or losses.shape[1] < 2:
        raise ValueError(f"losses must have shape (T, n>=2), got {losses.shape}")
    if np.any(losses < 0) or np.any(losses > 1):
        raise ValueError("losses must lie in [0, 1]")
    if u is not None:
        u = np.asarray(u, dtype=np.float64)
        if u.ndim != 2 or u.shape[0] != losses.shape[0]:
            raise ValueError(f"u must have shape (T, >=1) with T={losses.shape[0]}, got {u.shape}")
    return losses, u


# --------------------------------------------------------------------------------------------
# Exp3.S (Auer et al. 2002, Section 8)
# --------------------------------------------------------------------------------------------


def exp3s_gamma(num_arms: int, horizon: int, hardness: int) -> float:
    """The exploration rate of Section 8's corollary to Theorem 8.1,
    ``min(1, sqrt(K (S ln(K T) + e) / ((e - 1) T)))``, where ``S`` bounds the hardness
    ``H = 1 + #switches`` of the compared action sequence."""
    k, t, s = num_arms, horizon, hardness
    return min(1.0, math.sqrt(k * (s * math.log(k * t) + math.e) / ((math.e - 1.0) * t)))


def exp3s_reference(
    losses: np.ndarray,
    u: np.ndarray,
    *,
    gamma: float,
    alpha: float,
    lr_scale: float = 1.0,
) -> dict[str, np.ndarray]:
    """Exp3.S, literally (unnormalised weights).

    Initialise ``w_i(1) = 1``. Each round:

    1. ``p_i(t) = (1 - gamma) w_i(t) / sum_j w_j(t) + gamma / K``;
    2. draw ``i_t ~ p(t)``; receive the reward ``x_{i_t}(t) = 1 - l_{i_t}(t)``;
    3. ``x^_j(t) = x_j(t) / p_j(t)`` if ``j = i_t``, else 0;
    4. ``w_j(t+1) = w_j(t) exp(gamma x^_j(t) / K) + (e alpha / K) sum_i w_i(t)``.

    ``lr_scale`` multiplies the exponent's ``gamma / K`` (1 is the paper).

    Returns:
      ``played`` (T,), ``play_probs`` (T, K) the ``p(t)`` used at round t, and ``weights``
      (T+1, K) the normalised ``w(t) / W(t)`` before round t (index T: after the last round).
    """
    losses, u = _check(losses, u)
    T, K = losses.shape
    w = np.ones(K)
    played = np.zeros(T, dtype=np.int64)
    play_probs = np.zeros((T, K))
    weights = np.zeros((T + 1, K))
    for t in range(T):
        W = w.sum()
        weights[t] = w / W
        p = (1.0 - gamma) * w / W + gamma / K
        play_probs[t] = p
        i = draw(p, u[t, 0])
        played[t] = i
        x_hat = np.zeros(K)
        x_hat[i] = (1.0 - losses[t, i]) / p[i]
        w = w * np.exp(lr_scale * gamma * x_hat / K) + math.e * alpha / K * W
    weights[T] = w / w.sum()
    return {"played": played, "play_probs": play_probs, "weights": weights}


# --------------------------------------------------------------------------------------------
# Exp3-IX (Neu 2015, Algorithm 1)
# --------------------------------------------------------------------------------------------


def exp3_ix_rates(num_arms: int, horizon: int) -> tuple[float, float]:
    """Theorem 1's tuning ``eta = 2 gamma = sqrt(2 ln K / (K T))``: returns ``(eta, gamma)``."""
    eta = math.sqrt(2.0 * math.log(num_arms) / (num_arms * horizon))
    return eta, eta / 2.0


def exp3_ix_reference(
    losses: np.ndarray, u: np.ndarray, *, eta: float, gamma: float
) -> dict[str, np.ndarray]:
    """Exp3-IX, literally (unnormalised weights).

    Initialise ``w_{1,i} = 1``. Each round: ``p_{t,i} = w_{t,i} / W_t``; draw ``I_t ~ p_t``;
    observe ``l_{t,I_t}``; ``l~_{t,i} = l_{t,i} 1{I_t = i} / (p_{t,i} + gamma)``;
    ``w_{t+1,i} = w_{t,i} exp(-eta l~_{t,i})``.

    Returns:
      ``played`` (T,), ``play_probs`` (T, K) and ``weights`` (T+1, K), normalised.
    """
    losses, u = _check(losses, u)
    T, K = losses.shape
    w = np.ones(K)
    played = np.zeros(T, dtype=np.int64)
    play_probs = np.zeros((T, K))
    weights = np.zeros((T + 1, K))
    for t in range(T):
        p = w / w.sum()
        weights[t] = p
        play_probs[t] = p
        i = draw(p, u[t, 0])
        played[t] = i
        l_tilde = np.zeros(K)
        l_tilde[i] = losses[t, i] / (p[i] + gamma)
        w = w * np.exp(-eta * l_tilde)
    weights[T] = w / w.sum()
    return {"played": played, "play_probs": play_probs, "weights": weights}


# --------------------------------------------------------------------------------------------
# D-UCB and SW-UCB (Garivier and Moulines 2011)
# --------------------------------------------------------------------------------------------


def default_discount(horizon: int, num_changes: int) -> float:
    """D-UCB's ``gamma = 1 - (4 B)^{-1} sqrt(Upsilon_T / T)`` with ``B = 1``."""
    return 1.0 - 0.25 * math.sqrt(num_changes / horizon)


def default_window(horizon: int, num_changes: int) -> int:
    """SW-UCB's ``tau = 2 B sqrt(T log T / Upsilon_T)`` with ``B = 1``, rounded down, at most
    ``T`` (a window that never fills is the whole history)."""
    tau = 2.0 * math.sqrt(horizon * math.log(horizon) / num_changes)
    return min(horizon, max(1, math.floor(tau)))
