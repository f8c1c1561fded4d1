"""Independent float64 NumPy loops of the StABL family's baselines and variants, written from
the papers (conventions of :mod:`tests.learners.reference`; nothing from ``stabl_jax``):

* :func:`hedge_reference`: Hedge (Freund & Schapire, 1997; Cesa-Bianchi & Lugosi, 2006, Thm 2.2).
* :func:`saol_hedge_reference`: SAOL (Daniely, Gonen & Shalev-Shwartz, ICML 2015, Algorithm 1)
  over Hedge experts on StABL's intervals, full information.
* :func:`saol_reference`: the query-hungry bandit SAOL (Table 1 of Lu et al., ICLR 2024).
* :func:`stabl_anytime_reference`, :func:`stabl_adaptive_reference`: Algorithm 1 with anytime
  or data-dependent ("self-confident") rates and ML-Prod (Gaillard, Stoltz & van Erven, COLT
  2014) as the meta-learner, on :func:`ml_prod_reference`.
* :func:`flh_reference`: FLH2 (Hazan and Seshadhri, ICML 2009) and EFLH (Lu and Hazan,
  arXiv:2207.00646) over EXP3 experts with bandit feedback; the history lengths of SAOL's meta
  over EFLH's (:func:`eflh_saol_lengths`) and every dyadic scale (:func:`dyadic_lengths`).

Expert ``k`` restarts after round ``t`` when ``(t + 1 + round_offset) % L_k == 0``; meta rates
are scaled by ``meta_lr_scale``, expert rates by ``expert_lr_scale`` (``lr_scale`` for Hedge).

FLH's rounds ``tau = 1..T`` and starts ``i`` are 1-based; the working set ``S_tau`` (a
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
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from tests.learners.reference import draw, prod_meta_reference, record, stack


def _saol_rates(lengths, meta_lr_scale: float) -> np.ndarray:
    """SAOL's meta step ``eta_k = min(1/2, 1/sqrt(L_k))`` (regrets in [-1, 1])."""
    return np.array([meta_lr_scale * min(0.5, 1.0 / math.sqrt(L)) for L in lengths])


def hedge_reference(losses, u, *, lr_scale=1.0):
    """Hedge at ``eta = lr_scale sqrt(8 ln n / T)`` (regret at most ``sqrt(T ln n / 2)``): play
    ``x = draw(w, u[t, 0])``, observe all of ``l_t`` (queries ``x, x+1, ..., x+n-1 mod n``),
    ``w *= exp(-eta l_t)`` normalised. Returns ``played``, ``arms`` (T, n), ``weights`` (T+1, n)."""
    T, n = losses.shape
    eta = lr_scale * math.sqrt(8.0 * math.log(n) / T)
    w, rec = np.full(n, 1.0 / n), defaultdict(list)
    for t in range(T):
        x = draw(w, u[t, 0])
        record(rec, weights=w, played=x, arms=(x + np.arange(n)) % n)
        w = w * np.exp(-eta * losses[t])
        w = w / w.sum()
    rec["weights"].append(w)
    return stack(rec)


def saol_hedge_reference(losses, u, lengths, *, expert_lr_scale, meta_lr_scale, round_offset):
    """SAOL over Hedge experts ``eta'_k = sqrt(8 ln n / L_k)``, full information (queries
    ``x, x+1, ..., x+n-1 mod n``, ``arms``): the exact regret ``r_k = mix . l - v_k . l``, every
    expert steps ``v_k *= exp(-eta'_k l)``."""
    n = losses.shape[1]
    eta_e = np.array([expert_lr_scale * math.sqrt(8.0 * math.log(n) / L) for L in lengths])

    def experts_round(t, v, p, mix, x):
        loss = losses[t]
        r = np.array([float(mix @ loss) - float(v[k] @ loss) for k in range(len(lengths))])
        new_v = v * np.exp(-eta_e[:, None] * loss)
        return r, new_v / new_v.sum(axis=1)[:, None], {"arms": (x + np.arange(n)) % n}

    eta = _saol_rates(lengths, meta_lr_scale)
    return prod_meta_reference(losses, u, lengths, eta, experts_round, round_offset)


def saol_reference(losses, u, lengths, *, expert_lr_scale, meta_lr_scale, round_offset, feedback):
    """Bandit SAOL, ``1 + B`` queries: EXP3 expert ``k`` (Algorithm 2 of Lu et al., ``z = v_k``,
    ``C = 1``: ``eta'_k = sqrt(ln n / (L_k n))``) draws ``y_k = draw(v_k, u[t, 1 + k])``;
    ``r_k = sum_j p_j l(y_j) - l(y_k)``; ``v_k(y_k) *= exp(-eta'_k l(y_k) / v_k(y_k))`` (reward:
    ``exp(+eta'_k (1 - l(y_k)) / v_k(y_k))``). Adds ``arms`` (T, 1+B)."""
    n, B, sign = losses.shape[1], len(lengths), -1.0 if feedback == "loss" else 1.0
    eta_e = np.array([expert_lr_scale * math.sqrt(math.log(n) / (L * n)) for L in lengths])

    def experts_round(t, v, p, mix, x):
        ys = [draw(v[k], u[t, 1 + k]) for k in range(B)]
        ly = np.array([losses[t, y] for y in ys])
        new_v = v.copy()
        for k, y in enumerate(ys):
            gain = ly[k] if feedback == "loss" else 1.0 - ly[k]
            new_v[k, y] *= math.exp(sign * eta_e[k] * gain / v[k, y])
        return float(p @ ly) - ly, new_v / new_v.sum(axis=1)[:, None], {"arms": [x, *ys]}

    eta = _saol_rates(lengths, meta_lr_scale)
    return prod_meta_reference(losses, u, lengths, eta, experts_round, round_offset)


#: ``(tau, B_t, V, R) -> (eta', eta)``, each (B,): the rates of a round.
Rates = Callable[[np.ndarray, int, np.ndarray, np.ndarray], tuple]


def ml_prod_reference(losses, u, lengths, rates: Rates, feedback="loss"):
    """StABL with ML-Prod as the meta-learner, two queries. Expert ``k`` restarts at every
    multiple of ``L_k`` (``t = 0`` included), ``tau_k`` rounds ago; active at round ``t``: the
    first and expert ``k >= 1`` once ``t >= L_{k-1}`` (a later one is an exact copy of the last
    active one), ``B_t`` of them. Since the restart: ``Lhat_k`` the summed one-sparse estimates
    (reward: ``Ghat_k``), ``V_k = sum_s v_s(k)_{xo_s} c_s^2``, ``R_k = sum_s r_s(k)^2``, ``Lam_k =
    sum_s log(1 + eta_{k,s} r_{k,s}) / eta_{k,s}`` (``-inf`` once a factor is <= 0: muted; only
    active experts' events count). ``v_k ∝ exp(-eta'_k Lhat_k)`` (reward ``exp(+eta'_k Ghat_k)``),
    ``p ∝ eta_k exp(eta_k Lam_k)`` over the active experts, ``P`` line 9 over them; ``x =
    draw(mix, u[t, 0])`` played, ``xo = draw(P, u[t, 1])`` observed, ``c = l(xo) / P(xo)``,
    ``r_k = c (mix(xo) - v_k(xo))`` (reward: ``c = (1 - l(xo)) / P(xo)``, signs flipped).
    Returns ``played``, ``observed`` (T,), ``play_probs``, ``obs_probs`` (T, n), ``expert_probs``
    (T, B, n), ``meta_probs`` (T, B) (0 for inactive experts), ``expert_rates``, ``meta_rates`` (T,
    B), ``num_active`` (T,), ``muted``."""
    (T, n), B, sign = losses.shape, len(lengths), -1.0 if feedback == "loss" else 1.0
    cum, V, R, lam = np.zeros((B, n)), np.zeros(B), np.zeros(B), np.zeros(B)
    start, muted, rec = np.zeros(B, dtype=np.int64), 0, defaultdict[str, list](list)
    for t in range(T):
        active = np.array([k == 0 or t >= lengths[k - 1] for k in range(B)])
        b_t = int(active.sum())
        eta_e, eta = rates(t - start, b_t, V, R)
        z = (sign * eta_e)[:, None] * cum
        z = np.exp(z - z.max(axis=1)[:, None])
        v = z / z.sum(axis=1)[:, None]
        on = [active[k] and lam[k] > -np.inf for k in range(B)]
        weight = np.array([eta[k] * math.exp(eta[k] * lam[k]) if on[k] else 0.0 for k in range(B)])
        p = weight / weight.sum()
        mix = sum(p[k] * v[k] for k in range(B))
        top = v[active].max(axis=0)
        P = 0.5 * top**2 / np.sum(top**2) + 0.5 * sum(v[k] / b_t for k in range(B) if active[k])
        x, xo = draw(mix, u[t, 0]), draw(P, u[t, 1])
        record(rec, played=x, observed=xo, play_probs=mix, obs_probs=P, expert_probs=v)
        record(rec, meta_probs=p, expert_rates=eta_e, meta_rates=eta, num_active=b_t)
        c = (losses[t, xo] if feedback == "loss" else 1.0 - losses[t, xo]) / P[xo]
        r = sign * c * (v[:, xo] - mix[xo])
        for k in range(B):
            if 1.0 + eta[k] * r[k] > 0.0:
                lam[k] += math.log(1.0 + eta[k] * r[k]) / eta[k]
            else:
                lam[k] = -np.inf
                muted += int(active[k])
        cum[:, xo] += c
        V += v[:, xo] * c**2
        R += r**2
        restart = (t + 1) % np.asarray(lengths) == 0
        for statistic in (cum, V, R, lam):
            statistic[restart] = 0.0
        start[restart] = t + 1
    return stack(rec) | {"muted": muted}


def stabl_anytime_reference(losses, u, lengths, *, expert_lr_scale, meta_lr_scale, feedback):
    """Anytime rates: ``eta'_k = sqrt(ln n / ((tau_k + 1) n 2 B_t))`` (the Lemma with ``L_k ->
    tau + 1``, ``C = 2 B_t``), ``eta_k = min(1/(2 sqrt n), 1/sqrt(n (tau_k + 1)))`` (line 6)."""
    n = losses.shape[1]

    def rates(tau, b_t, V, R):
        expert = [math.sqrt(math.log(n) / ((s + 1) * n * 2.0 * b_t)) for s in tau]
        meta = [min(1.0 / (2.0 * math.sqrt(n)), 1.0 / math.sqrt(n * (s + 1))) for s in tau]
        return expert_lr_scale * np.array(expert), meta_lr_scale * np.array(meta)

    return ml_prod_reference(losses, u, lengths, rates, feedback)


def stabl_adaptive_reference(losses, u, lengths, *, expert_lr_scale, meta_lr_scale, feedback):
    """Self-confident rates: ``eta'_k = sqrt(ln n / (1 + V_k))`` and ML-Prod's adaptive
    ``eta_k = min(1 / (2 E_t), 1 / sqrt(E_t^2 + R_k))`` on ``r / E_t``, ``E_t = 2 B_t`` (the
    range of the meta regret estimates)."""
    n = losses.shape[1]

    def rates(tau, b_t, V, R):
        e_t = 2.0 * b_t
        expert = [expert_lr_scale * math.sqrt(math.log(n) / (1.0 + x)) for x in V]
        meta = [meta_lr_scale * min(1.0 / (2.0 * e_t), 1.0 / math.sqrt(e_t**2 + x)) for x in R]
        return np.array(expert), np.array(meta)

    return ml_prod_reference(losses, u, lengths, rates, feedback)


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
    ks = range(int(math.log(top) / math.log1p(epsilon)) + 2)  # (1 + eps)^k reaches top
    return [2**m for m in sorted({min(top, max(1, math.ceil((1 + epsilon) ** k))) for k in ks})]


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
