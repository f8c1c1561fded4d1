"""Independent plain-NumPy reference for ``stabl_adaptive``: StABL (Algorithm 1 of Lu et al.,
ICLR 2024) with data-dependent ("self-confident") step sizes.

Written from the equations below as a plain loop over rounds, before the JAX version, importing
nothing from ``stabl_jax`` (only :func:`reference.draw`, the shared inverse-CDF sampling
convention). Float64, 0-based rounds ``t``, losses in [0, 1]; ``u[t, j]`` is the ``j``-th
uniform of round ``t``.

Expert ``k`` restarts at every multiple of ``L_k`` (``t = 0`` included). Active experts at
round ``t``: the first one and expert ``k >= 1`` once ``t >= L_{k-1}``; ``B_t`` their number
and ``E_t = 2 B_t`` (the range of the meta regret estimates, ``|r_k| <= E_t``).

Since expert ``k``'s last restart (all sums over the rounds ``s < t`` since then):

* ``Lhat_k = sum_s lhat_s`` (``Ghat_k`` for reward feedback), the cumulated one-sparse estimates;
* ``V_k = sum_s sum_i v_s(k)_i lhat_s(i)^2 = sum_s v_s(k)_{xo_s} c_s^2``;
* ``R_k = sum_s r_s(k)^2`` and ``Lam_k = sum_s log(1 + eta_{k,s} r_s(k)) / eta_{k,s}``.

Rates at round ``t``: ``eta'_k = expert_lr_scale * sqrt(ln n / (1 + V_k))`` (self-confident
exponential weights) and ``eta_k = meta_lr_scale * min(1 / (2 E_t), 1 / sqrt(E_t^2 + R_k))``
(ML-Prod with per-expert adaptive rates, on ``r / E_t``). Then ``v_k ∝ exp(-eta'_k Lhat_k)``
(reward: ``exp(+eta'_k Ghat_k)``), ``p ∝ eta_k exp(eta_k Lam_k)`` over the active experts,
``P(t)`` is line 9 over the active experts with ``B_t``; ``x = draw(mix, u[t, 0])`` played,
``xo = draw(P, u[t, 1])`` observed, ``c = l(xo) / P(xo)`` (reward ``(1 - l(xo)) / P(xo)``),
``r_k = c (mix(xo) - v_k(xo))`` (reward ``c (v_k(xo) - mix(xo))``). A factor
``1 + eta_k r_k <= 0`` mutes expert ``k`` (``Lam_k = -inf``) until its restart; only active
experts' events are counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tests.learners.reference import draw

__all__ = ["stabl_adaptive_reference"]


def stabl_adaptive_reference(
    losses: np.ndarray,
    u: np.ndarray,
    history_lengths: Sequence[int],
    *,
    expert_lr_scale: float = 1.0,
    meta_lr_scale: float = 1.0,
    feedback: str = "loss",
) -> dict[str, np.ndarray | int]:
    """StABL with self-confident expert rates and ML-Prod adaptive meta rates (module docstring).

    Args:
        losses: ``(T, n)`` losses in [0, 1].
        u: ``(T, 2)`` uniforms: ``u[t, 0]`` draws the played arm, ``u[t, 1]`` the observed one.
        history_lengths: ``L_1 < ... < L_B``.

    Returns:
        ``"played"``, ``"observed"`` (T,), ``"play_probs"``, ``"obs_probs"`` (T, n),
        ``"expert_probs"`` (T, B, n), ``"meta_probs"`` (T, B) (zero for inactive experts),
        ``"expert_rates"``, ``"meta_rates"`` (T, B) (scaled), ``"num_active"`` (T,),
        ``"muted"``.
    """
    losses = np.asarray(losses, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    T, n = losses.shape
    if u.shape != (T, 2):
        raise ValueError(f"u must have shape {(T, 2)}, got {u.shape}")
    lengths = [int(x) for x in history_lengths]
    B = len(lengths)
    sign = -1.0 if feedback == "loss" else 1.0
    cum = np.zeros((B, n))
    V = np.zeros(B)
    R = np.zeros(B)
    lam = np.zeros(B)
    muted = 0
    out = {
        "played": np.zeros(T, dtype=np.int64),
        "observed": np.zeros(T, dtype=np.int64),
        "play_probs": np.zeros((T, n)),
        "obs_probs": np.zeros((T, n)),
        "expert_probs": np.zeros((T, B, n)),
        "meta_probs": np.zeros((T, B)),
        "expert_rates": np.zeros((T, B)),
        "meta_rates": np.zeros((T, B)),
        "num_active": np.zeros(T, dtype=np.int64),
    }
    for t in range(T):
        active = [k == 0 or t >= lengths[k - 1] for k in range(B)]
        b_t = sum(active)
        e_t = 2.0 * b_t
        eta_e = np.zeros(B)
        eta = np.zeros(B)
        for k in range(B):
            eta_e[k] = expert_lr_scale * math.sqrt(math.log(n) / (1.0 + V[k]))
            eta[k] = meta_lr_scale * min(1.0 / (2.0 * e_t), 1.0 / math.sqrt(e_t**2 + R[k]))
        v = np.zeros((B, n))
        for k in range(B):
            z = sign * eta_e[k] * cum[k]
            z = np.exp(z - z.max())
            v[k] = z / z.sum()
        weight = np.zeros(B)
        for k in range(B):
            if active[k] and lam[k] > -np.inf:
                weight[k] = eta[k] * math.exp(eta[k] * lam[k])
        p = weight / weight.sum()
        mix = np.zeros(n)
        top = np.zeros(n)
        avg = np.zeros(n)
        for k in range(B):
            mix += p[k] * v[k]
            if active[k]:
                top = np.maximum(top, v[k])
                avg += v[k] / b_t
        P = 0.5 * top**2 / np.sum(top**2) + 0.5 * avg
        x = draw(mix, u[t, 0])
        xo = draw(P, u[t, 1])
        out["expert_probs"][t] = v
        out["meta_probs"][t] = p
        out["play_probs"][t] = mix
        out["obs_probs"][t] = P
        out["played"][t] = x
        out["observed"][t] = xo
        out["expert_rates"][t] = eta_e
        out["meta_rates"][t] = eta
        out["num_active"][t] = b_t

        loss = losses[t, xo]
        c = (loss if feedback == "loss" else 1.0 - loss) / P[xo]
        for k in range(B):
            r = c * (mix[xo] - v[k, xo]) if feedback == "loss" else c * (v[k, xo] - mix[xo])
            factor = 1.0 + eta[k] * r
            if factor > 0.0 and lam[k] > -np.inf:
                lam[k] += math.log(factor) / eta[k]
            elif factor <= 0.0:
                lam[k] = -np.inf
                muted += int(active[k])
            cum[k, xo] += c
            V[k] += v[k, xo] * c**2
            R[k] += r**2
        for k in range(B):
            if (t + 1) % lengths[k] == 0:
                cum[k] = 0.0
                V[k] = 0.0
                R[k] = 0.0
                lam[k] = 0.0
    return {**out, "muted": muted}
