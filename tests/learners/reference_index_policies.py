"""Independent float64 NumPy loops of six deterministic index policies, written from their
papers (nothing from ``stabl_jax``): the statistics are recomputed from the whole history every
round, the kl-UCB index bisected to the last bit on the exact Bernoulli divergence. 0-based
rounds, rewards ``x = 1 - l``; an arm never played (in the window) has index ``+inf``, so the
first ``K`` rounds play every arm once in index order; ties go to the lowest index.

- :func:`ucb1_reference` — UCB1, Auer, Cesa-Bianchi and Fischer, Machine Learning 47, 2002,
  Figure 1.
- :func:`klucb_reference` — kl-UCB, Garivier and Cappé, COLT 2011, Algorithm 1 (Bernoulli).
- :func:`d_ucb_reference`, :func:`sw_ucb_reference` — Garivier and Moulines, "On
  upper-confidence bound policies for switching bandit problems", ALT 2011, Algorithms 1 and 2,
  ``B = 1``.
- :func:`sw_klucb_reference`, :func:`d_klucb_reference` — the same statistics read by the
  kl-UCB index with the budget ``explore_scale log min(t, tau)`` or ``explore_scale log
  n_t(gamma)`` (the variants compared by Besson et al., JMLR 2022).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from tests.learners.reference import stack

__all__ = [
    "argmax_first",
    "bernoulli_kl",
    "d_klucb_reference",
    "d_ucb_reference",
    "klucb_reference",
    "klucb_upper",
    "sw_klucb_reference",
    "sw_ucb_reference",
    "ucb1_reference",
]

#: ``(arms, rewards, t) -> (N, S)``: per-arm counts and reward sums after ``t`` rounds.
Stats = Callable[[list[int], list[float], int], tuple[np.ndarray, np.ndarray]]
#: ``(N_i, S_i, t, N) -> index of arm i`` for ``N_i > 0`` (``N``: all arms' counts).
Index = Callable[[float, float, int, np.ndarray], float]


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


def _run(losses: np.ndarray, stats: Stats, index: Index) -> dict:
    """The policy's loop: ``played`` (T,), ``index`` (T, K) used at round t, ``counts`` (T+1, K)
    before round t."""
    (T, K), rec = losses.shape, defaultdict[str, list](list)
    arms: list[int] = []
    rewards: list[float] = []
    for t in range(T + 1):
        n, s = stats(arms, rewards, t)
        rec["counts"].append(n)
        if t == T:
            break
        idx = np.array([index(n[i], s[i], t, n) if n[i] > 0 else np.inf for i in range(K)])
        rec["index"].append(idx)
        arms.append(argmax_first(idx))
        rec["played"].append(arms[-1])
        rewards.append(1.0 - losses[t, arms[-1]])
    return stack(rec)


def _weighted_stats(weight: Callable[[int, int], float], num_arms: int) -> Stats:
    """Counts and sums with round ``s``'s play weighted by ``weight(s, t)``."""

    def stats(arms: list[int], rewards: list[float], t: int) -> tuple[np.ndarray, np.ndarray]:
        n, s = np.zeros(num_arms), np.zeros(num_arms)
        for r, (a, x) in enumerate(zip(arms, rewards, strict=True)):
            w = weight(r, t)
            n[a] += w
            s[a] += w * x
        return n, s

    return stats


def _in_window(window: int) -> Callable[[int, int], float]:
    """Weight 1 for the last ``window`` rounds' plays, 0 before."""
    return lambda s, t: 1.0 if s >= t - window else 0.0


def ucb1_reference(losses: np.ndarray, *, explore_scale: float = 1.0) -> dict[str, np.ndarray]:
    """UCB1: after ``n`` plays, arm ``j`` played ``n_j`` times with mean ``x-bar_j`` has index
    ``x-bar_j + explore_scale sqrt(2 ln n / n_j)`` (``explore_scale = 1`` is Figure 1)."""

    def index(n_j: float, s_j: float, n: int, _: np.ndarray) -> float:
        return s_j / n_j + explore_scale * math.sqrt(2.0 * math.log(n) / n_j)

    return _run(losses, _weighted_stats(lambda s, t: 1.0, losses.shape[1]), index)


def klucb_reference(losses: np.ndarray, *, c: float = 0.0) -> dict[str, np.ndarray]:
    """kl-UCB: after ``t`` plays, arm ``a`` (``N_a`` plays, mean ``mu_a``) has index
    ``max {q : N_a kl(mu_a, q) <= log t + c log log t}``, the ``log log t`` term taken as 0
    where ``log t < 1``."""

    def index(n_a: float, s_a: float, t: int, _: np.ndarray) -> float:
        log_t = math.log(t)
        budget = log_t + (c * math.log(log_t) if log_t >= 1.0 else 0.0)
        return klucb_upper(s_a / n_a, n_a, budget)

    return _run(losses, _weighted_stats(lambda s, t: 1.0, losses.shape[1]), index)


def d_ucb_reference(
    losses: np.ndarray, *, discount: float, xi: float = 0.5, explore_scale: float = 1.0
) -> dict[str, np.ndarray]:
    """D-UCB (Algorithm 1): after ``t`` rounds arm ``i`` has ``N_t(gamma, i) = sum_{s<=t}
    gamma^{t-s} 1{I_s = i}`` and ``X-bar_t(gamma, i)`` the same weights' mean reward, and index
    ``X-bar_t(gamma, i) + explore_scale 2 sqrt(xi log n_t(gamma) / N_t(gamma, i))``,
    ``n_t(gamma) = sum_i N_t(gamma, i)``."""

    def index(n_i: float, s_i: float, t: int, n: np.ndarray) -> float:
        return s_i / n_i + explore_scale * 2.0 * math.sqrt(xi * math.log(n.sum()) / n_i)

    return _run(
        losses, _weighted_stats(lambda s, t: discount ** (t - 1 - s), losses.shape[1]), index
    )


def sw_ucb_reference(
    losses: np.ndarray, *, window: int, xi: float = 0.6, explore_scale: float = 1.0
) -> dict[str, np.ndarray]:
    """SW-UCB (Algorithm 2): counts ``N_t(tau, i)`` and mean rewards ``X-bar_t(tau, i)`` of the
    last ``tau = window`` rounds, index ``X-bar_t(tau, i) + explore_scale sqrt(xi log min(t,
    tau) / N_t(tau, i))``."""

    def index(n_i: float, s_i: float, t: int, _: np.ndarray) -> float:
        return s_i / n_i + explore_scale * math.sqrt(xi * math.log(min(t, window)) / n_i)

    return _run(losses, _weighted_stats(_in_window(window), losses.shape[1]), index)


def sw_klucb_reference(
    losses: np.ndarray, *, window: int, explore_scale: float = 1.0
) -> dict[str, np.ndarray]:
    """SW-klUCB: counts and sums of the last ``tau = window`` rounds, index
    ``max {q : N_t(tau, i) kl(X-bar_t(tau, i), q) <= explore_scale log min(t, tau)}``."""

    def index(n_i: float, s_i: float, t: int, _: np.ndarray) -> float:
        return klucb_upper(s_i / n_i, n_i, explore_scale * math.log(min(t, window)))

    return _run(losses, _weighted_stats(_in_window(window), losses.shape[1]), index)


def d_klucb_reference(
    losses: np.ndarray, *, discount: float, explore_scale: float = 1.0
) -> dict[str, np.ndarray]:
    """D-klUCB: counts and sums discounted by ``gamma^{t-s}`` (the last round weighs 1),
    index ``max {q : N_t(gamma, i) kl(X-bar_t(gamma, i), q) <= explore_scale log n_t(gamma)}``,
    ``n_t(gamma) = sum_i N_t(gamma, i)``."""

    def index(n_i: float, s_i: float, t: int, n: np.ndarray) -> float:
        return klucb_upper(s_i / n_i, n_i, explore_scale * math.log(n.sum()))

    return _run(
        losses, _weighted_stats(lambda s, t: discount ** (t - 1 - s), losses.shape[1]), index
    )
