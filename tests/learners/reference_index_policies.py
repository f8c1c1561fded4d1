"""Independent float64 NumPy loops of six deterministic index policies, written from their
papers (nothing from ``stabl_jax``), the statistics recomputed from the whole history every
round, the kl-UCB index bisected to the last bit. Rewards ``x = 1 - l``; an arm never played
(in the window) has index ``+inf`` (the first ``K`` rounds play every arm once); ties go to the
lowest index.

- :func:`ucb1_reference` — Auer, Cesa-Bianchi and Fischer, Machine Learning 47, 2002, Fig. 1.
- :func:`klucb_reference` — Garivier and Cappé, COLT 2011, Algorithm 1 (Bernoulli).
- :func:`d_ucb_reference`, :func:`sw_ucb_reference` — Garivier and Moulines, ALT 2011,
  Algorithms 1 and 2 (``B = 1``); :func:`d_klucb_reference`, :func:`sw_klucb_reference` — their
  statistics read by the kl-UCB index (the variants compared by Besson et al., JMLR 2022).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from tests.learners.reference import record, stack


def bernoulli_kl(p: float, q: float) -> float:
    """``kl(p, q) = p log(p/q) + (1-p) log((1-p)/(1-q))``, ``0 log 0 = 0``, ``+inf`` where
    ``q`` is 0 or 1 and ``p`` is not."""
    out = 0.0
    if p > 0:
        out += math.inf if q <= 0 else p * math.log(p / q)
    if p < 1:
        out += math.inf if q >= 1 else (1 - p) * math.log((1 - p) / (1 - q))
    return out


def klucb_upper(mean: float, count: float, budget: float) -> float:
    """``max {q in [mean, 1] : count kl(mean, q) <= budget}``, bisected until the bracket is
    two adjacent floats."""
    lo, hi = mean, 1.0
    if budget <= 0:  # kl(mean, q) > 0 for every q != mean
        return mean
    if count * bernoulli_kl(mean, hi) <= budget:
        return hi
    while True:
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            return lo
        if count * bernoulli_kl(mean, mid) <= budget:
            lo = mid
        else:
            hi = mid


def argmax_first(values: np.ndarray) -> int:
    """Lowest index among the maxima (``+inf`` included)."""
    return int(np.flatnonzero(values == np.max(values))[0])


def _run(losses, weight, index) -> dict:
    """The policy's loop: after ``t`` rounds, counts ``N_i`` and reward sums ``S_i`` with round
    ``s``'s play weighted ``weight(s, t)``, and arm ``i``'s index ``index(N_i, S_i, t, N)``
    (``+inf`` if ``N_i = 0``). Returns ``played`` (T,), ``index`` (T, K) used at round t and
    ``counts`` (T+1, K) before round t."""
    (T, K), rec = losses.shape, defaultdict[str, list](list)
    arms: list[int] = []
    for t in range(T + 1):
        n, s = np.zeros(K), np.zeros(K)
        for r, a in enumerate(arms):
            n[a] += weight(r, t)
            s[a] += weight(r, t) * (1.0 - losses[r, a])
        rec["counts"].append(n)
        if t == T:
            break
        idx = np.array([index(n[i], s[i], t, n) if n[i] > 0 else np.inf for i in range(K)])
        arms.append(argmax_first(idx))
        record(rec, index=idx, played=arms[-1])
    return stack(rec)


def ucb1_reference(losses, *, explore_scale):
    """UCB1: after ``n`` plays, arm ``j`` (``n_j`` plays, mean ``x-bar_j``) has the index
    ``x-bar_j + explore_scale sqrt(2 ln n / n_j)`` (``explore_scale = 1``: Figure 1)."""

    def index(n_j, s_j, n, counts):
        return s_j / n_j + explore_scale * math.sqrt(2.0 * math.log(n) / n_j)

    return _run(losses, lambda s, t: 1.0, index)


def klucb_reference(losses, *, c):
    """kl-UCB: ``max {q : N_a kl(mu_a, q) <= log t + c log log t}`` after ``t`` plays, the
    ``log log t`` term 0 where ``log t < 1``."""

    def index(n_a, s_a, t, counts):
        log_t = math.log(t)
        return klucb_upper(s_a / n_a, n_a, log_t + (c * math.log(log_t) if log_t >= 1.0 else 0.0))

    return _run(losses, lambda s, t: 1.0, index)


def d_ucb_reference(losses, *, discount, xi, explore_scale):
    """D-UCB (Algorithm 1): ``N_t(gamma, i) = sum_{s<=t} gamma^{t-s} 1{I_s = i}``, ``X-bar_t(gamma,
    i)`` the same weights' mean reward, index ``X-bar_t(gamma, i) + explore_scale 2 sqrt(xi log
    n_t(gamma) / N_t(gamma, i))``, ``n_t(gamma) = sum_i N_t(gamma, i)``."""

    def index(n_i, s_i, t, counts):
        return s_i / n_i + explore_scale * 2.0 * math.sqrt(xi * math.log(counts.sum()) / n_i)

    return _run(losses, lambda s, t: discount ** (t - 1 - s), index)


def sw_ucb_reference(losses, *, window, xi, explore_scale):
    """SW-UCB (Algorithm 2): counts ``N_t(tau, i)`` and means ``X-bar_t(tau, i)`` of the last
    ``tau = window`` rounds, index ``X-bar_t(tau, i) + explore_scale sqrt(xi log min(t, tau) /
    N_t(tau, i))``."""

    def index(n_i, s_i, t, counts):
        return s_i / n_i + explore_scale * math.sqrt(xi * math.log(min(t, window)) / n_i)

    return _run(losses, lambda s, t: 1.0 if s >= t - window else 0.0, index)


def sw_klucb_reference(losses, *, window, explore_scale):
    """SW-klUCB: SW-UCB's statistics, index ``max {q : N_t(tau, i) kl(X-bar_t(tau, i), q) <=
    explore_scale log min(t, tau)}``."""

    def index(n_i, s_i, t, counts):
        return klucb_upper(s_i / n_i, n_i, explore_scale * math.log(min(t, window)))

    return _run(losses, lambda s, t: 1.0 if s >= t - window else 0.0, index)


def d_klucb_reference(losses, *, discount, explore_scale):
    """D-klUCB: D-UCB's statistics (the last round weighs 1), index ``max {q : N_t(gamma, i)
    kl(X-bar_t(gamma, i), q) <= explore_scale log n_t(gamma)}``."""

    def index(n_i, s_i, t, counts):
        return klucb_upper(s_i / n_i, n_i, explore_scale * math.log(counts.sum()))

    return _run(losses, lambda s, t: discount ** (t - 1 - s), index)
