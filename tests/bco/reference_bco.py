"""A NumPy reference of Algorithm 3 (Strongly Adaptive BCO Learner) and its two-query variant
(Appendix D) of Lu et al., ICLR 2024: float64 loops, direct weights, no code of ``stabl_jax``;
fed the learner's draws (``k_t``, ``u``, :meth:`stabl_jax.bco.BCOLearner.draws`).

Conventions (``stabl_jax/bco/stabl_bco.py``): 0-based rounds, expert ``k`` restarts when
``(t + offset) % L_k == 0``; ``c = B`` or ``log2 T``; ``delta = min(delta_scale / (kappa T),
r)``; ``K_hat = (1 - alpha) K``, ``alpha = min(1, max(kappa delta, delta / r))``; a weight
whose factor ``1 + eta_k r~`` is ``<= 0`` becomes 0."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np


def project(kind: str, size: float, x: np.ndarray, scale: float) -> np.ndarray:
    """Euclidean projection onto ``scale * K``, ``K`` the ball or box of radius ``size``."""
    if kind == "ball":
        rad = scale * size
        n = float(np.linalg.norm(x))
        return x.copy() if n <= rad else x * (rad / n)
    if kind == "box":
        a = scale * size
        return np.clip(x, -a, a)
    raise ValueError(kind)


def radii(kind: str, size: float, dim: int) -> tuple[float, float]:
    """``(r, D)`` with ``r B ⊂ K ⊂ D B``."""
    if kind == "ball":
        return size, size
    return size, size * math.sqrt(dim)


class ReferenceStABLBCO:
    """Algorithm 3 (``two_query=False``) or Appendix D (``two_query=True``), step by step."""

    def __init__(
        self,
        *,
        dim: int,
        horizon: int,
        lengths: tuple[int, ...],
        lipschitz: float,
        kind: str,
        size: float,
        two_query: bool,
        scale_factor: str = "B",
        expert_lr_scale: float = 1.0,
        meta_lr_scale: float = 1.0,
        delta_scale: float = 1.0,
        round_offset: int = 0,
    ) -> None:
        self.d, self.T, self.kind, self.size = dim, horizon, kind, size
        self.lengths, self.two_query, self.offset = np.asarray(lengths), two_query, round_offset
        b = len(lengths)
        r, big_d = radii(kind, size, dim)
        kappa = big_d / r
        log_t = math.log2(horizon)
        self.c = 1.0 if two_query else (float(b) if scale_factor == "B" else log_t)
        g = lipschitz
        # Line 5: eta_k = min{1/2, sqrt(log T / 2^k)} / (G D).
        self.eta = np.array(
            [meta_lr_scale * min(0.5, math.sqrt(log_t / n)) / (g * big_d) for n in lengths]
        )
        # Appendix C: eta' = D / (d G sqrt(I) log T) with log T -> c (Appendix D: c = 1).
        self.eta_expert = np.array(
            [expert_lr_scale * big_d / (dim * g * self.c * math.sqrt(n)) for n in lengths]
        )
        self.delta = min(delta_scale / (kappa * horizon), r)
        self.hat_scale = 1.0 - min(1.0, max(kappa * self.delta, self.delta / r))
        self.experts, self.w = np.zeros((b, dim)), self.eta.copy()
        self.t = self.num_muted = 0

    def probs(self) -> np.ndarray:
        total = self.w.sum()
        if total <= 0:
            return np.full(len(self.w), 1.0 / len(self.w))
        return self.w / total

    def step(
        self, loss: Callable[[np.ndarray], float], k: int, u: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """One round with draws ``k_t = k`` and ``u``; returns ``(points, observed)``."""
        p = self.probs()
        x = p @ self.experts
        b = len(self.w)
        old = self.experts.copy()
        if self.two_query:
            points = np.stack([x, x + self.delta * u])
            observed = np.array([loss(q) for q in points])
            g = self.d * u * (observed[1] - observed[0]) / self.delta
            grads = np.tile(g, (b, 1))
            r_tilde = np.array([g @ x - g @ old[j] for j in range(b)])
        else:
            a = old[k]
            points = np.stack([x, a + self.delta * u, a])
            observed = np.array([loss(q) for q in points])
            g = self.c * self.d * u * (observed[1] - observed[2]) / self.delta
            grads = np.zeros((b, self.d))
            grads[k] = g
            ell = np.zeros(b)
            ell[k] = self.c * observed[2]
            ell_x = float(p @ ell)
            r_tilde = ell_x - ell
        for j in range(b):
            moved = old[j] - self.eta_expert[j] * grads[j]
            self.experts[j] = project(self.kind, self.size, moved, self.hat_scale)
        for j in range(b):
            factor = 1.0 + self.eta[j] * r_tilde[j]
            if factor > 0:
                self.w[j] *= factor
            else:
                self.w[j] = 0.0
                self.num_muted += 1
        self.t += 1
        for j, n in enumerate(self.lengths):
            if (self.t + self.offset) % n == 0:
                self.experts[j] = 0.0
                self.w[j] = self.eta[j]
        return points, observed
