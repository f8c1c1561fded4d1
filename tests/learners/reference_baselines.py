"""Independent float64 NumPy loops of two one-query baselines, written from their papers with
unnormalised weights (conventions of :mod:`tests.learners.reference`; nothing from
``stabl_jax``), and the default tunings of D-UCB and SW-UCB (their loops:
:mod:`tests.learners.reference_index_policies`).

- :func:`exp3s_reference` — Exp3.S, Auer, Cesa-Bianchi, Freund and Schapire, "The nonstochastic
  multiarmed bandit problem", SIAM J. Comput. 32(1), 2002, Section 8 (rewards ``x = 1 - l``).
- :func:`exp3_ix_reference` — Exp3-IX, Neu, "Explore no more: improved high-probability regret
  bounds for non-stochastic bandits", NeurIPS 2015, Algorithm 1 and Theorem 1.
- :func:`default_discount`, :func:`default_window` — Garivier and Moulines, ALT 2011.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from tests.learners.reference import draw, stack

__all__ = [
    "default_discount",
    "default_window",
    "exp3_ix_rates",
    "exp3_ix_reference",
    "exp3s_gamma",
    "exp3s_reference",
]


def exp3s_gamma(num_arms: int, horizon: int, hardness: int) -> float:
    """Section 8's ``gamma = min(1, sqrt(K (S ln(K T) + e) / ((e - 1) T)))``, ``S`` bounding the
    hardness ``1 + #switches`` of the compared action sequence."""
    k, t, s = num_arms, horizon, hardness
    return min(1.0, math.sqrt(k * (s * math.log(k * t) + math.e) / ((math.e - 1.0) * t)))


def exp3s_reference(losses, u, *, gamma, alpha, lr_scale=1.0):
    """Exp3.S from ``w_i(1) = 1``: ``p_i(t) = (1 - gamma) w_i(t) / W(t) + gamma / K``; draw
    ``i_t ~ p(t)``; ``x^_j(t) = x_j(t) / p_j(t)`` for ``j = i_t``, else 0; ``w_j(t+1) = w_j(t)
    exp(lr_scale gamma x^_j(t) / K) + (e alpha / K) W(t)``. Returns ``played`` (T,),
    ``play_probs`` (T, K) and the normalised ``weights`` (T+1, K)."""
    (T, K), w, rec = losses.shape, np.ones(losses.shape[1]), defaultdict(list)
    for t in range(T):
        W = w.sum()
        p = (1.0 - gamma) * w / W + gamma / K
        i = draw(p, u[t, 0])
        rec["weights"].append(w / W)
        rec["play_probs"].append(p)
        rec["played"].append(i)
        x_hat = np.zeros(K)
        x_hat[i] = (1.0 - losses[t, i]) / p[i]
        w = w * np.exp(lr_scale * gamma * x_hat / K) + math.e * alpha / K * W
    rec["weights"].append(w / w.sum())
    return stack(rec)


def exp3_ix_rates(num_arms: int, horizon: int) -> tuple[float, float]:
    """Theorem 1's ``(eta, gamma)``: ``eta = 2 gamma = sqrt(2 ln K / (K T))``."""
    eta = math.sqrt(2.0 * math.log(num_arms) / (num_arms * horizon))
    return eta, eta / 2.0


def exp3_ix_reference(losses, u, *, eta, gamma):
    """Exp3-IX from ``w_{1,i} = 1``: ``p_t = w_t / W_t``; draw ``I_t ~ p_t``; ``l~_{t,i} =
    l_{t,i} 1{I_t = i} / (p_{t,i} + gamma)``; ``w_{t+1,i} = w_{t,i} exp(-eta l~_{t,i})``.
    Returns ``played`` (T,), ``play_probs`` (T, K) and ``weights`` (T+1, K), normalised."""
    (T, K), w, rec = losses.shape, np.ones(losses.shape[1]), defaultdict(list)
    for t in range(T):
        p = w / w.sum()
        i = draw(p, u[t, 0])
        rec["weights"].append(p)
        rec["play_probs"].append(p)
        rec["played"].append(i)
        l_tilde = np.zeros(K)
        l_tilde[i] = losses[t, i] / (p[i] + gamma)
        w = w * np.exp(-eta * l_tilde)
    rec["weights"].append(w / w.sum())
    return stack(rec)


def default_discount(horizon: int, num_changes: int) -> float:
    """D-UCB's ``gamma = 1 - (4 B)^{-1} sqrt(Upsilon_T / T)`` with ``B = 1``."""
    return 1.0 - 0.25 * math.sqrt(num_changes / horizon)


def default_window(horizon: int, num_changes: int) -> int:
    """SW-UCB's ``tau = 2 B sqrt(T log T / Upsilon_T)``, ``B = 1``, rounded down, at most ``T``."""
    tau = 2.0 * math.sqrt(horizon * math.log(horizon) / num_changes)
    return min(horizon, max(1, math.floor(tau)))
