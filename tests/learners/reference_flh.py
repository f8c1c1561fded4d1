"""Independent float64 NumPy FLH2 (Hazan and Seshadhri, ICML 2009) and EFLH (Lu and Hazan,
arXiv:2207.00646) over EXP3 experts with bandit feedback, written from the papers (nothing
from ``stabl_jax``); and the history lengths of SAOL's meta over EFLH's and every dyadic scale.

The paper's rounds ``tau = 1..T`` and starts ``i`` are 1-based; the working set ``S_tau`` (a
set) and the weights ``v_tau^(i)`` (a dict) are updated literally: play ``x_tau = y_J``, ``J ~
v_tau`` over the alive experts, ``y_j ~ E^j``; ``v^(i) = v^(i) e^{-alpha l(y_i)} / sum_{j in
S_tau} v^(j) e^{-alpha l(y_j)}``; ``S_{tau+1}`` by the pruning rule (FLH: lifetimes; EFLH: the
lookback); a new expert ``E^{tau+1}`` gets ``1/(tau+1)``, the others ``(1 - 1/(tau+1)) v^(i)``
renormalised over the kept ones; every expert runs EXP3 on ``l_hat = 1[a = y_i] l(y_i) /
E^i(y_i)``. Shared with ``stabl_jax`` for the shared draws: ``u[tau-1, 0]`` draws ``J``,
``u[tau-1, 1 + slot]`` the arm of the expert in ``slot``, a new expert takes the lowest free
slot of ``M``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from tests.learners.reference import draw


def flh_lifetime(i: int) -> int:
    """FLH's lifetime of ``E^i``: ``i = r 2^k`` with ``r`` odd lives ``2^{k+2} + 1`` rounds."""
    k = (i & -i).bit_length() - 1  # the trailing zeros of i
    return 2 ** (k + 2) + 1


def flh_working_set(previous: set[int], tau: int) -> set[int]:
    """``S_tau``: the experts of ``S_{tau-1} ∪ {tau}`` alive at ``tau``,
    ``i <= tau <= i + lifetime(i) - 1``."""
    return {i for i in previous | {tau} if i <= tau <= i + flh_lifetime(i) - 1}


def eflh_lengths(horizon: int, epsilon: float) -> list[int]:
    """``L_k = 2^{m_k}``, ``m_k = ceil((1 + eps)^k)`` distinct, up to the first ``2^m > T``."""
    top = max(1, math.ceil(math.log2(horizon + 1)))
    exponents: list[int] = []
    k = 0
    while not exponents or exponents[-1] < top:
        m = min(top, max(1, math.ceil((1 + epsilon) ** k)))
        if not exponents or m > exponents[-1]:
            exponents.append(m)
        k += 1
    return [2**m for m in exponents]


def eflh_saol_lengths(horizon: int, epsilon: float) -> list[int]:
    """The restart periods of EFLH's lengths under SAOL's meta: ``min(L_k, T)``, distinct.
    (An expert restarted every ``L_k >= T`` rounds never restarts within ``T``.)"""
    return list(dict.fromkeys(min(length, horizon) for length in eflh_lengths(horizon, epsilon)))


def dyadic_lengths(horizon: int) -> list[int]:
    """SAOL's geometric covering intervals (Daniely et al. 2015): every ``2^k <= T``, from 1."""
    return [2**k for k in range(horizon.bit_length())]


def eflh_working_set(lengths: list[int]) -> Callable[[set[int], int], set[int]]:
    """EFLH's lookback: ``S_tau = {s - (s mod L_k) + 1 : k}``, ``s = tau - 1``."""
    return lambda previous, tau: {tau - 1 - (tau - 1) % length + 1 for length in lengths}


def flh_reference(losses, u, *, capacity, alpha, rate, working_set=flh_working_set):
    """FLH2 / EFLH with EXP3 experts on ``capacity`` slots ``M``: meta rate ``alpha``, EXP3's
    ``rate(i)`` for the expert started at ``i``, ``working_set(S_{tau-1}, tau) -> S_tau``.
    Returns per round: ``played`` (T,), ``expert`` (T,) the slot ``J``, ``arms`` (T, M) each alive
    slot's arm (-1 where empty); per state (T+1, before round tau and after the last): ``start``
    (T+1, M) (0: empty), ``meta`` (T+1, M) ``v`` per slot and ``experts`` (T+1, M, n) each alive
    slot's distribution (NaN where empty)."""
    (T, n), slots = losses.shape, [1] + [0] * (capacity - 1)  # slot -> start i, 0 = empty
    v, dists = {1: 1.0}, {1: np.full(n, 1.0 / n)}
    out = {"played": np.zeros(T, np.int64), "expert": np.zeros(T, np.int64)}
    out |= {"arms": np.full((T, capacity), -1), "start": np.zeros((T + 1, capacity), np.int64)}
    out |= {"meta": np.zeros((T + 1, capacity)), "experts": np.full((T + 1, capacity, n), np.nan)}
    for tau in range(1, T + 2):
        out["start"][tau - 1] = slots
        for slot, i in enumerate(slots):
            if i:
                out["meta"][tau - 1, slot], out["experts"][tau - 1, slot] = v[i], dists[i]
        if tau == T + 1:
            break
        meta = np.array([v[i] if i else 0.0 for i in slots])
        j = draw(meta, u[tau - 1, 0])
        own = {i: draw(dists[i], u[tau - 1, 1 + slot]) for slot, i in enumerate(slots) if i}
        out["played"][tau - 1], out["expert"][tau - 1] = own[slots[j]], j
        for slot, i in enumerate(slots):
            if i:
                out["arms"][tau - 1, slot] = own[i]
        loss = {i: losses[tau - 1, a] for i, a in own.items()}
        total = sum(v[i] * math.exp(-alpha * loss[i]) for i in v)
        v_hat = {i: v[i] * math.exp(-alpha * loss[i]) / total for i in v}
        for i, a in own.items():  # EXP3, Algorithm 2: w <- w exp(-eta' l_hat), normalised
            l_hat = np.zeros(n)
            l_hat[a] = loss[i] / dists[i][a]
            w = dists[i] * np.exp(-rate(i) * l_hat)
            dists[i] = w / w.sum()
        following = working_set(set(v), tau + 1)
        fresh = following - set(v)
        assert fresh <= {tau + 1}, (tau, fresh)
        kept = following - fresh
        mass = sum(v_hat[i] for i in kept)
        share = 1.0 - 1.0 / (tau + 1) if fresh else 1.0
        v = {i: share * v_hat[i] / mass for i in kept}
        slots = [i if i in kept else 0 for i in slots]
        for i in fresh:
            slots[slots.index(0)] = i
            v[i], dists[i] = 1.0 / (tau + 1), np.full(n, 1.0 / n)
        dists = {i: dists[i] for i in v}
    return out
