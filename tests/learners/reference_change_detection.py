"""Independent float64 NumPy loops of four non-stationary bandit baselines, written from their
papers (conventions of :mod:`tests.learners.reference`; nothing from ``stabl_jax``): every arm's
list of samples since its restart, the statistics recomputed from it each round; rewards ``x =
1 - l``; the papers' round is ``t + 1``.

- :func:`cusum_ucb_reference` — Liu, Lee, Shroff, AAAI 2018, Algorithms 1-2.
- :func:`m_ucb_reference` — Cao, Wen, Kveton, Xie, AISTATS 2019, Algorithms 1-2
  (:func:`m_ucb_gamma`, Remark 1's default ``gamma``).
- :func:`glr_klucb_reference` — Besson, Kaufmann, Maillard, Seznec, JMLR 2022, Algorithm 1.
- :func:`rexp3_reference` — Besbes, Gur, Zeevi, NeurIPS 2014, Rexp3.

Each returns ``played`` (T,), ``index`` or ``play_probs`` (T, K) of round t, ``counts`` (T + 1,
K) samples since the restart before round t, and ``restarts``, the rounds ending in a restart.
"""

from __future__ import annotations

import math

import numpy as np

from tests.learners import reference_index_policies as index_policies
from tests.learners.reference import draw
from tests.learners.reference_index_policies import argmax_first

__all__ = [
    "bernoulli_kl",
    "cusum_ucb_reference",
    "glr_klucb_reference",
    "m_ucb_gamma",
    "m_ucb_reference",
    "rexp3_reference",
]


def _ucb(samples: list[list[float]], log_term: float, width: float) -> np.ndarray:
    return np.array(
        [np.mean(s) + width * math.sqrt(log_term / len(s)) if s else np.inf for s in samples]
    )


def _forced(round_1: int, alpha: float, k: int) -> int:
    """Arm ``A - 1`` if ``1 <= A = round_1 mod floor(K / alpha) <= K``, else -1."""
    if alpha <= 0:
        return round_1 - 1 if round_1 <= k else -1
    a = round_1 % math.floor(k / alpha)
    return a - 1 if 1 <= a <= k else -1


def cusum_ucb_reference(losses, u, *, threshold, drift, alpha, warmup, xi=1.0, test_every=1):
    """CUSUM-UCB: UCB over the samples since each arm's restart, ``alpha``-uniform mixing,
    a two-sided CUSUM on the played arm (first ``M = warmup`` samples estimate ``u0``), run
    from the arm's restart every ``test_every`` samples: an alarm if ``g+`` or ``g-`` reaches
    ``h`` at any of them."""
    T, K = losses.shape
    samples: list[list[float]] = [[] for _ in range(K)]
    out = {"played": np.zeros(T, int), "play_probs": np.zeros((T, K)), "index": np.zeros((T, K))}
    out["counts"], restarts = np.zeros((T + 1, K)), []
    for t in range(T):
        out["counts"][t] = [len(s) for s in samples]
        n_t = max(1, sum(len(s) for s in samples))
        index = _ucb(samples, math.log(n_t), math.sqrt(xi))
        probs = np.full(K, alpha / K)
        probs[argmax_first(index)] += 1.0 - alpha
        arm = draw(probs, u[t, 0])
        out["index"][t], out["play_probs"][t], out["played"][t] = index, probs, arm
        ys = [*samples[arm], 1.0 - losses[t, arm]]
        g_plus = g_minus = 0.0
        alarm = False
        if len(ys) > warmup and len(ys) % test_every == 0:
            u0 = sum(ys[:warmup]) / warmup
            for y in ys[warmup:]:
                g_plus = max(0.0, g_plus + y - u0 - drift)
                g_minus = max(0.0, g_minus + u0 - y - drift)
                alarm = alarm or g_plus >= threshold or g_minus >= threshold
        if alarm:
            samples[arm] = []
            restarts.append(t)
        else:
            samples[arm] = ys
    out["counts"][T] = [len(s) for s in samples]
    return {**out, "restarts": restarts}


def m_ucb_reference(losses, *, window, threshold, gamma):
    """M-UCB: forced exploration ``(t - tau) mod floor(K / gamma)``, UCB1 with
    ``log(t - tau)``, a global restart when the last ``w`` samples' halves differ by ``> b``."""
    T, K = losses.shape
    samples: list[list[float]] = [[] for _ in range(K)]
    out = {"played": np.zeros(T, int), "index": np.zeros((T, K)), "counts": np.zeros((T + 1, K))}
    tau, restarts = 0, []
    for t in range(T):
        out["counts"][t] = [len(s) for s in samples]
        index = _ucb(samples, math.log(t + 1 - tau), math.sqrt(2.0))
        forced = _forced(t + 1 - tau, gamma, K)
        arm = forced if forced >= 0 else argmax_first(index)
        out["index"][t], out["played"][t] = index, arm
        samples[arm].append(1.0 - losses[t, arm])
        last = samples[arm][-window:]
        half = window // 2
        if len(samples[arm]) >= window and abs(sum(last[half:]) - sum(last[:half])) > threshold:
            samples = [[] for _ in range(K)]
            tau = t + 1
            restarts.append(t)
    out["counts"][T] = [len(s) for s in samples]
    return {**out, "restarts": restarts}


def m_ucb_gamma(num_arms, horizon, num_changes, window, count):
    """Cao et al.'s Remark 1 ``gamma = sqrt(M K (2b + 3 sqrt(w)) / (2T))``,
    ``b = sqrt((w / 2) log(2 K T^2))``, ``M`` the segments ``num_changes + 1`` or (Besson et
    al.'s code) the breakpoints ``max(1, num_changes)``; at most 1."""
    m = num_changes + 1 if count == "segments" else max(1, num_changes)
    b = math.sqrt(window / 2 * math.log(2 * num_arms * horizon**2))
    return min(1.0, math.sqrt(m * num_arms * (2 * b + 3 * math.sqrt(window)) / (2 * horizon)))


def bernoulli_kl(p: float, q: float, eps: float = 1e-7) -> float:
    """``kl(p, q)`` of Bernoulli means, ``q`` clipped to ``[eps, 1 - eps]``."""
    return index_policies.bernoulli_kl(p, min(max(q, eps), 1.0 - eps))


def _klucb(s: list[float], budget: float) -> float:
    if not s:
        return np.inf
    mu = min(1.0, max(0.0, float(np.mean(s))))
    lo, hi = mu, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if len(s) * bernoulli_kl(mu, mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def _glr_change(
    ys: list[float], delta: float, subsample: int, max_splits: int, threshold_scale: float
) -> bool:
    """Bernoulli GLR over ``ys`` at the splits ``s = c Delta s`` of the last ``H`` checkpoints,
    threshold ``log(b n^{3/2} / delta)``."""
    n = len(ys)
    mu = sum(ys) / n
    beta = math.log(threshold_scale * n**1.5 / delta)
    first = max(1, n // subsample - max_splits + 1)
    for c in range(first, (n - 1) // subsample + 1):
        s = c * subsample
        glr = s * bernoulli_kl(sum(ys[:s]) / s, mu)
        glr += (n - s) * bernoulli_kl(sum(ys[s:]) / (n - s), mu)
        if glr >= beta:
            return True
    return False


def glr_klucb_reference(losses, *, delta, alpha, subsample, test_every, max_splits, **options):
    """GLR-klUCB: forced exploration ``t mod floor(K / alpha_k)`` (``alpha_k = alpha``, or
    ``min(1, alpha sqrt(1 + k))`` after ``k`` detections), kl-UCB with
    ``f(x) = a log x + c log max(1, log x)`` at ``x = t - tau_i``, the Bernoulli GLR test
    every ``test_every`` samples of the played arm. ``options``: ``restart`` ("local"),
    ``log_scale`` ``a`` (3), ``loglog_scale`` ``c`` (0), ``threshold_scale`` (3),
    ``alpha_schedule`` ("constant")."""
    restart, threshold_scale = options.get("restart", "local"), options.get("threshold_scale", 3.0)
    log_scale, loglog_scale = options.get("log_scale", 3.0), options.get("loglog_scale", 0.0)
    constant = options.get("alpha_schedule", "constant") == "constant"
    T, K = losses.shape
    samples: list[list[float]] = [[] for _ in range(K)]
    out = {"played": np.zeros(T, int), "index": np.zeros((T, K)), "counts": np.zeros((T + 1, K))}
    tau, restarts = [0] * K, []
    for t in range(T):
        out["counts"][t] = [len(s) for s in samples]
        logs = [math.log(t + 1 - tau[i]) for i in range(K)]
        budgets = [log_scale * b + loglog_scale * math.log(max(b, 1.0)) for b in logs]
        index = np.array([_klucb(samples[i], budgets[i]) for i in range(K)])
        rate = alpha if constant else min(1.0, alpha * math.sqrt(1 + len(restarts)))
        forced = _forced(t + 1, rate, K)
        arm = forced if forced >= 0 else argmax_first(index)
        out["index"][t], out["played"][t] = index, arm
        samples[arm].append(1.0 - losses[t, arm])
        n = len(samples[arm])
        test = n % test_every == 0
        if test and _glr_change(samples[arm], delta, subsample, max_splits, threshold_scale):
            for i in [arm] if restart == "local" else range(K):
                samples[i], tau[i] = [], t + 1
            restarts.append(t)
    out["counts"][T] = [len(s) for s in samples]
    return {**out, "restarts": restarts}


def rexp3_reference(losses, u, *, gamma, batch):
    """Rexp3: Exp3 with unnormalised weights ``w``, reset to 1 after every ``batch`` rounds."""
    T, K = losses.shape
    w = np.ones(K)
    out = {"played": np.zeros(T, int), "play_probs": np.zeros((T, K))}
    restarts = []
    for t in range(T):
        probs = (1.0 - gamma) * w / w.sum() + gamma / K
        arm = draw(probs, u[t, 0])
        out["play_probs"][t], out["played"][t] = probs, arm
        w[arm] *= math.exp(gamma * (1.0 - losses[t, arm]) / probs[arm] / K)
        if (t + 1) % batch == 0:
            w = np.ones(K)
            restarts.append(t)
    return {**out, "restarts": restarts}
