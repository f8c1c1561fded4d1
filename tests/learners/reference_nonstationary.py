"""Independent float64 NumPy loops of two parameter-free non-stationary bandit algorithms,
written from their papers with the full history of plays (nothing from ``stabl_jax``); losses
``l`` in [0, 1], rewards ``x = 1 - l``.

- :func:`adswitch_reference` — AdSwitch, Auer, Gajane and Ortner, COLT 2019, Algorithm 1, on
  the library's bounded grid of interval endpoints (step ``every``, the last ``keep`` points).
  1-based rounds; intervals ``[s, e]`` read from the raw history, obligations kept as the
  paper's triples ``(eps, n, s)`` (``n`` uncapped), the change test (3) as the paper writes it.
- :func:`master_reference` — MASTER over UCB1, Wei and Luo, COLT 2021, Algorithms 1 (MALG) and
  2 (MASTER), with a list of MALG's instances per block and the block's history.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["adswitch_reference", "master_reference"]


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

    Returns:
      ``played`` ``(T,)``, ``episode`` ``(T,)`` (after each round), ``good`` ``(T, K)`` bool
      (after each round), ``pending`` ``(T, K)`` bool (``S(a)`` not empty after each round),
      ``mean_bad`` and ``gap_bad`` ``(T, K)`` (``nan`` for good arms).
    """
    horizon, k = losses.shape
    log_t = math.log(horizon)
    plays = np.full(horizon + 1, -1)
    rewards = np.zeros(horizon + 1)
    episode, t_l = 1, 1
    good = [True] * k
    tilde: dict[int, tuple[float, float]] = {}
    obligations: dict[int, list[tuple[float, int, int]]] = {a: [] for a in range(k)}
    last = [-1] * k
    out = {name: np.zeros((horizon, k), bool) for name in ("good", "pending")}
    out |= {name: np.zeros((horizon, k)) for name in ("mean_bad", "gap_bad")}
    out |= {name: np.zeros(horizon, int) for name in ("played", "episode")}
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
        ) or any(
            _bad_changed(plays, rewards, a, starts, t, *tilde[a], budget)
            for a in range(k)
            if not good[a]
        )
        # Step 6: drop the met obligations.
        for a in range(k):
            obligations[a] = [
                (e, n, s) for e, n, s in obligations[a] if _stat(plays, rewards, a, s, t)[0] < n
            ]
        # Step 7: evict arms from GOOD.
        for a, values in _evict(plays, rewards, good, starts, t, c1 * log_t).items():
            tilde[a], obligations[a] = values, []
        if change:  # Step 1: a new episode from round t + 1.
            episode, t_l = episode + 1, t + 1
            good = [True] * k
            tilde = {}
            obligations = {a: [] for a in range(k)}
            plays[: t + 1] = -1
        out["played"][t - 1], out["episode"][t - 1] = arm, episode
        out["good"][t - 1] = good
        out["pending"][t - 1] = [bool(obligations[a]) for a in range(k)]
        for a in range(k):
            out["mean_bad"][t - 1, a], out["gap_bad"][t - 1, a] = tilde.get(a, (math.nan,) * 2)
    return out


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

    Returns:
      ``played`` ``(T,)``, ``optimistic`` ``(T,)`` (``g~_t``), ``order`` ``(T,)`` (the block
      after each round), ``restart`` ``(T,)`` bool (a test failed at round ``t``) and ``test1``
      ``(T,)`` bool (Test 1 failed).
    """
    horizon, k = losses.shape

    def rho(x: float) -> float:
        return math.sqrt(k / x) + k / x

    def rho_hat(x: float) -> float:
        return test_scale * 6.0 * (math.log2(horizon) + 1.0) * math.log(horizon / delta) * rho(x)

    out = {name: np.zeros(horizon, int) for name in ("played", "order")}
    out |= {"optimistic": np.zeros(horizon)} | {
        k: np.zeros(horizon, bool) for k in ("restart", "test1")
    }
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
        out["played"][t - 1], out["optimistic"][t - 1] = arm, g
        out["test1"][t - 1] = test1
        if test1 or test2:
            n, t_n, instances, history = 0, t + 1, [], []
            out["restart"][t - 1] = True
        elif t + 1 == t_n + 2**n:  # the block is over: the next, twice as long
            n, t_n, instances, history = n + 1, t + 1, [], []
        out["order"][t - 1] = n
    return out
