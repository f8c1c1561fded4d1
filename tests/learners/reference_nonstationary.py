"""Independent float64 NumPy loops of the non-stationary bandit algorithms, written from their
papers (conventions of :mod:`tests.learners.reference`; nothing from ``stabl_jax``); rewards
``x = 1 - l``. The change detectors keep every arm's samples since its restart (the papers'
round is ``t + 1``) and return ``played`` (T,), ``index`` or ``play_probs`` (T, K), ``counts``
(T + 1, K) since the restart before round t, and ``restarts`` (the rounds ending in one):

- :func:`cusum_ucb_reference` — Liu, Lee, Shroff, AAAI 2018, Algorithms 1-2.
- :func:`m_ucb_reference` — Cao, Wen, Kveton, Xie, AISTATS 2019, Algorithms 1-2
  (:func:`m_ucb_gamma`, Remark 1's default ``gamma``).
- :func:`glr_klucb_reference` — Besson, Kaufmann, Maillard, Seznec, JMLR 2022, Algorithm 1.
- :func:`rexp3_reference` — Besbes, Gur, Zeevi, NeurIPS 2014, Rexp3.

The parameter-free ones keep the full history of plays:

- :func:`adswitch_reference` — AdSwitch, Auer, Gajane and Ortner, COLT 2019, Algorithm 1, on
  the library's grid of interval endpoints (step ``every``, the last ``keep``); 1-based rounds,
  obligations as the paper's triples ``(eps, n, s)``, the change test (3) as the paper writes it.
- :func:`master_reference` — MASTER over UCB1, Wei and Luo, COLT 2021, Algorithms 1 (MALG) and
  2 (MASTER), with a list of MALG's instances per block and the block's history.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from tests.learners import reference_baselines as baselines
from tests.learners.reference import draw, record, stack
from tests.learners.reference_baselines import argmax_first


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
    (T, K), rec, restarts = losses.shape, defaultdict[str, list](list), []
    samples: list[list[float]] = [[] for _ in range(K)]
    for t in range(T):
        rec["counts"].append([len(s) for s in samples])
        n_t = max(1, sum(len(s) for s in samples))
        index = _ucb(samples, math.log(n_t), math.sqrt(xi))
        probs = np.full(K, alpha / K)
        probs[argmax_first(index)] += 1.0 - alpha
        arm = draw(probs, u[t, 0])
        record(rec, index=index, play_probs=probs, played=arm)
        ys = [*samples[arm], 1.0 - losses[t, arm]]
        g_plus, g_minus, alarm = 0.0, 0.0, False
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
    rec["counts"].append([len(s) for s in samples])
    return stack(rec) | {"restarts": restarts}


def m_ucb_reference(losses, *, window, threshold, gamma):
    """M-UCB: forced exploration ``(t - tau) mod floor(K / gamma)``, UCB1 with
    ``log(t - tau)``, a global restart when the last ``w`` samples' halves differ by ``> b``."""
    (T, K), rec, tau, restarts = losses.shape, defaultdict[str, list](list), 0, []
    samples: list[list[float]] = [[] for _ in range(K)]
    for t in range(T):
        rec["counts"].append([len(s) for s in samples])
        index = _ucb(samples, math.log(t + 1 - tau), math.sqrt(2.0))
        forced = _forced(t + 1 - tau, gamma, K)
        arm = forced if forced >= 0 else argmax_first(index)
        record(rec, index=index, played=arm)
        samples[arm].append(1.0 - losses[t, arm])
        last, half = samples[arm][-window:], window // 2
        if len(samples[arm]) >= window and abs(sum(last[half:]) - sum(last[:half])) > threshold:
            samples, tau = [[] for _ in range(K)], t + 1
            restarts.append(t)
    rec["counts"].append([len(s) for s in samples])
    return stack(rec) | {"restarts": restarts}


def m_ucb_gamma(num_arms, horizon, num_changes, window, count):
    """Cao et al.'s Remark 1 ``gamma = sqrt(M K (2b + 3 sqrt(w)) / (2T))``,
    ``b = sqrt((w / 2) log(2 K T^2))``, ``M`` the segments ``num_changes + 1`` or (Besson et
    al.'s code) the breakpoints ``max(1, num_changes)``; at most 1."""
    m = num_changes + 1 if count == "segments" else max(1, num_changes)
    b = math.sqrt(window / 2 * math.log(2 * num_arms * horizon**2))
    return min(1.0, math.sqrt(m * num_arms * (2 * b + 3 * math.sqrt(window)) / (2 * horizon)))


def bernoulli_kl(p: float, q: float, eps: float = 1e-7) -> float:
    """``kl(p, q)`` of Bernoulli means, ``q`` clipped to ``[eps, 1 - eps]``."""
    return baselines.bernoulli_kl(p, min(max(q, eps), 1.0 - eps))


def _klucb(s: list[float], budget: float) -> float:
    """kl-UCB's index of the samples ``s`` (``+inf`` if none)."""
    return baselines.klucb_upper(float(np.mean(s)), len(s), budget) if s else np.inf


def _glr_change(ys: list[float], delta, subsample, max_splits, threshold_scale) -> bool:
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
    (T, K), rec = losses.shape, defaultdict[str, list](list)
    tau, restarts = [0] * K, []
    samples: list[list[float]] = [[] for _ in range(K)]
    for t in range(T):
        rec["counts"].append([len(s) for s in samples])
        logs = [math.log(t + 1 - tau[i]) for i in range(K)]
        budgets = [log_scale * b + loglog_scale * math.log(max(b, 1.0)) for b in logs]
        index = np.array([_klucb(samples[i], budgets[i]) for i in range(K)])
        rate = alpha if constant else min(1.0, alpha * math.sqrt(1 + len(restarts)))
        forced = _forced(t + 1, rate, K)
        arm = forced if forced >= 0 else argmax_first(index)
        record(rec, index=index, played=arm)
        samples[arm].append(1.0 - losses[t, arm])
        test = len(samples[arm]) % test_every == 0
        if test and _glr_change(samples[arm], delta, subsample, max_splits, threshold_scale):
            for i in [arm] if restart == "local" else range(K):
                samples[i], tau[i] = [], t + 1
            restarts.append(t)
    rec["counts"].append([len(s) for s in samples])
    return stack(rec) | {"restarts": restarts}


def rexp3_reference(losses, u, *, gamma, batch):
    """Rexp3: Exp3 with unnormalised weights ``w``, reset to 1 after every ``batch`` rounds."""
    (T, K), rec, restarts = losses.shape, defaultdict[str, list](list), []
    w = np.ones(K)
    for t in range(T):
        probs = (1.0 - gamma) * w / w.sum() + gamma / K
        arm = draw(probs, u[t, 0])
        record(rec, play_probs=probs, played=arm)
        w[arm] *= math.exp(gamma * (1.0 - losses[t, arm]) / probs[arm] / K)
        if (t + 1) % batch == 0:
            w = np.ones(K)
            restarts.append(t)
    return stack(rec) | {"restarts": restarts}


def _grid(t: int, t_l: int, every: int, keep: int) -> list[int]:
    """The kept starts ``s = t_l + j every <= t`` (the last ``keep`` grid points)."""
    last = (t - t_l) // every
    return [t_l + j * every for j in range(max(0, last - keep + 1), last + 1)]


def _stat(plays: np.ndarray, rewards: np.ndarray, a: int, s: int, e: int) -> tuple[int, float]:
    """``n_[s,e](a)`` and ``mu-hat_[s,e](a)`` (``nan`` if ``n = 0``); ``plays[r]`` is the arm
    of round ``r`` (1-based, ``-1`` before the episode)."""
    mask = plays[s : e + 1] == a
    n = int(mask.sum())
    return n, (float(rewards[s : e + 1][mask].sum()) / n if n else math.nan)


def _good_changed(plays, rewards, a, starts, t, budget) -> bool:
    """Test (3) for one good arm, literally, over every ``[s1, s2]`` and ``[s, t]``."""
    ends = [s - 1 for s in starts] + [t]
    pairs = [_stat(plays, rewards, a, s1, s2) for s1 in starts for s2 in ends if s1 <= s2]
    pairs = [(n, m) for n, m in pairs if n >= 1]
    recent = [_stat(plays, rewards, a, s, t) for s in starts]
    recent = [(n, m) for n, m in recent if n >= 1]
    if not pairs or not recent:
        return False
    n12, m12 = (np.array(x, dtype=np.float64) for x in zip(*pairs, strict=True))
    n, m = (np.array(x, dtype=np.float64) for x in zip(*recent, strict=True))
    lhs = np.abs(m12[:, None] - m[None, :])
    rhs = np.sqrt(budget / n12)[:, None] + np.sqrt(budget / n)[None, :]
    return bool((lhs > rhs).any())


def _bad_changed(plays, rewards, a, starts, t, mean, gap, budget) -> bool:
    """Test (4) for one bad arm."""
    for s in starts:
        n, m = _stat(plays, rewards, a, s, t)
        if n >= 1 and abs(m - mean) > gap / 4.0 + math.sqrt(budget / n):
            return True
    return False


def _evict(plays, rewards, good, starts, t, budget):
    """Step 7 in index order: ``{a: (mu~, Delta~)}`` of the evicted arms (``good`` shrinks)."""
    out = {}
    for a in range(len(good)):
        if not good[a]:
            continue
        for s in starts:  # earliest start first
            n, m = _stat(plays, rewards, a, s, t)
            if n < 2:
                continue
            others = [_stat(plays, rewards, b, s, t) for b in range(len(good)) if good[b]]
            best = max(mb for nb, mb in others if nb >= 1)
            if best - m > math.sqrt(budget / (n - 1)):
                good[a] = False
                out[a] = (m, best - m)
                break
    return out


def adswitch_reference(losses, u, *, c1, c2, check_scale, every, keep, levels):
    """AdSwitch on ``losses`` ``(T, K)`` with check draws ``u`` ``(T, K * levels)`` (draw
    ``a * levels + i - 1`` decides arm ``a``'s level ``i``), horizon ``T``.
    Returns ``played`` ``(T,)``, ``episode`` ``(T,)`` (after each round), ``good`` ``(T, K)`` bool
    (after each round), ``pending`` ``(T, K)`` bool (``S(a)`` not empty after each round),
    ``mean_bad`` and ``gap_bad`` ``(T, K)`` (``nan`` for good arms)."""
    horizon, k = losses.shape
    log_t = math.log(horizon)
    plays, rewards = np.full(horizon + 1, -1), np.zeros(horizon + 1)
    episode, t_l, good, last = 1, 1, [True] * k, [-1] * k
    tilde: dict[int, tuple[float, float]] = {}
    obligations: dict[int, list[tuple[float, int, int]]] = {a: [] for a in range(k)}
    rec = defaultdict[str, list](list)
    for t in range(1, horizon + 1):
        # Step 2: add checks for bad arms.
        rate = math.sqrt(episode / (k * horizon * log_t))
        for a in range(k):
            if good[a]:
                continue
            for i in range(1, levels + 1):
                if (
                    2.0**-i >= tilde[a][1] / 16
                    and u[t - 1, a * levels + i - 1] < check_scale * 2.0**-i * rate
                ):
                    obligations[a].append((2.0**-i, math.floor(2 ** (2 * i + 1) * log_t), t))
        # Step 3: the least recently played of GOOD and the bad arms with obligations.
        active = [good[a] or bool(obligations[a]) for a in range(k)]
        arm = min((a for a in range(k) if active[a]), key=lambda a: (last[a], a))
        plays[t], rewards[t], last[arm] = arm, 1.0 - losses[t - 1, arm], t
        starts = _grid(t, t_l, every, keep)
        # Steps 4-5: tests of the good and the bad arms.
        budget = c2 * log_t
        change = any(
            _good_changed(plays, rewards, a, starts, t, budget) for a in range(k) if good[a]
        )
        bad = [a for a in range(k) if not good[a]]
        change |= any(_bad_changed(plays, rewards, a, starts, t, *tilde[a], budget) for a in bad)
        # Step 6: drop the met obligations.
        for a in range(k):
            obligations[a] = [
                (e, n, s) for e, n, s in obligations[a] if _stat(plays, rewards, a, s, t)[0] < n
            ]
        # Step 7: evict arms from GOOD.
        for a, values in _evict(plays, rewards, good, starts, t, c1 * log_t).items():
            tilde[a], obligations[a] = values, []
        if change:  # Step 1: a new episode from round t + 1.
            episode, t_l, good, tilde = episode + 1, t + 1, [True] * k, {}
            obligations = {a: [] for a in range(k)}
            plays[: t + 1] = -1
        mean, gap = zip(*(tilde.get(a, (math.nan, math.nan)) for a in range(k)), strict=True)
        pending = [bool(obligations[a]) for a in range(k)]
        record(rec, played=arm, episode=episode, good=list(good), pending=pending)
        record(rec, mean_bad=mean, gap_bad=gap)
    return stack(rec)


def _ucb1(counts: np.ndarray, sums: np.ndarray, explore_scale: float) -> tuple[int, float]:
    """UCB1's arm (untried arms first, lowest index) and its index clipped at 1 (``g~``)."""
    untried = np.flatnonzero(counts == 0)
    if untried.size:
        return int(untried[0]), 1.0
    index = sums / counts + explore_scale * np.sqrt(2.0 * math.log(counts.sum()) / counts)
    arm = int(np.argmax(index))
    return arm, min(1.0, float(index[arm]))


def master_reference(losses, u, *, delta, test_scale, explore_scale):
    """MASTER over UCB1 on ``losses`` ``(T, K)`` with MALG's draws ``u`` ``(T, M)`` (draw
    ``m`` decides order ``m``), horizon ``T``: Wei and Luo, COLT 2021, Algorithms 1 and 2.
    Returns ``played`` ``(T,)``, ``optimistic`` ``(T,)`` (``g~_t``), ``order`` ``(T,)`` (the block
    after each round) and ``restart`` ``(T,)`` bool (a test failed at round ``t``)."""
    horizon, k = losses.shape

    def rho(x: float) -> float:
        return math.sqrt(k / x) + k / x

    def rho_hat(x: float) -> float:
        return test_scale * 6.0 * (math.log2(horizon) + 1.0) * math.log(horizon / delta) * rho(x)

    rec = defaultdict[str, list](list)
    n, t_n = 0, 1  # block n starts at round t_n (1-based)
    instances: list[dict] = []  # MALG's instances of block n: order m, start s, end e, UCB1
    history: list[tuple[float, float]] = []  # (g~, R) of the block's rounds
    rewards = np.zeros(horizon + 1)
    for t in range(1, horizon + 1):
        # MALG (Algorithm 1): schedule, from the longest order down.
        for m in range(n, -1, -1):
            if (t - t_n) % 2**m == 0 and u[t - 1, m] < rho(2**n) / rho(2**m):
                instances = [i for i in instances if i["m"] != m]
                instances.append(
                    {"m": m, "s": t, "e": t + 2**m - 1, "N": np.zeros(k), "S": np.zeros(k)}
                )
        alive = [i for i in instances if i["s"] <= t <= i["e"]]
        alg = min(alive, key=lambda i: i["e"] - i["s"])
        arm, g = _ucb1(alg["N"], alg["S"], explore_scale)
        reward = 1.0 - losses[t - 1, arm]
        alg["N"][arm] += 1
        alg["S"][arm] += reward
        rewards[t] = reward
        history.append((g, reward))
        # MASTER (Algorithm 2): the two tests.
        low = min(x for x, _ in history)
        test1 = any(
            i["e"] == t and rewards[i["s"] : t + 1].mean() >= low + 9.0 * rho_hat(2 ** i["m"])
            for i in alive
        )
        span = t - t_n + 1
        test2 = sum(x - r for x, r in history) / span >= 3.0 * rho_hat(span)
        if restart := test1 or test2:
            n, t_n, instances, history = 0, t + 1, [], []
        elif t + 1 == t_n + 2**n:  # the block is over: the next, twice as long
            n, t_n, instances, history = n + 1, t + 1, [], []
        record(rec, played=arm, optimistic=g, restart=restart, order=n)
    return stack(rec)
