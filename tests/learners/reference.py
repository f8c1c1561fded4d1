"""Independent float64 NumPy loops of EXP3 and StABL (Lu et al., "Adaptive regret for bandits
made possible: two queries suffice", ICLR 2024: Algorithm 1, Algorithm 2 and the Lemma "Regret
for EXP3"), and the helpers every reference shares. Nothing is imported from ``stabl_jax``.

Conventions of every reference: float64, 0-based rounds ``t``, losses ``l`` in [0, 1];
``u[t, j]`` is round ``t``'s ``j``-th uniform, turned into an arm by :func:`draw` (``u[t, 0]``
draws the played arm); ``feedback="reward"`` estimates the gain ``1 - l`` and flips the signs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np


def draw(p: np.ndarray, u: float) -> int:
    """The inverse-CDF draw: the number of ``cumsum(p)`` entries ``<= u sum(p)``, at most
    ``n - 1`` (a total off by rounding is harmless; an arm of probability 0 is never drawn)."""
    cdf = np.cumsum(np.asarray(p, dtype=np.float64))
    return min(int(np.sum(cdf <= float(u) * cdf[-1])), len(cdf) - 1)


def record(records: dict[str, list], **values) -> None:
    """Append each of ``values`` to its list in ``records`` (a ``defaultdict(list)``)."""
    for name, value in values.items():
        records[name].append(value)


def stack(records: dict[str, list]) -> dict[str, np.ndarray]:
    """The per-round records of a loop, as arrays."""
    return {name: np.asarray(values) for name, values in records.items()}


def exp3_reference(losses, u, *, gamma=0.0, lr_scale=1.0, feedback="loss"):
    """EXP3 (Algorithm 2) playing ``q = (1 - gamma) w + gamma / n``: the Lemma with
    ``C = 1 / (1 - gamma)`` gives ``eta = lr_scale sqrt(ln n (1 - gamma) / (T n))``; with
    ``c = l(x) / q(x)``, ``w(x) *= exp(-eta c)`` (reward: ``(1 - l(x)) / q(x)``, ``exp(+eta c)``),
    normalised. Returns ``played`` (T,), ``play_probs`` (T, n), ``weights`` (T+1, n)."""
    T, n = losses.shape
    eta = lr_scale * math.sqrt(math.log(n) * (1.0 - gamma) / (T * n))
    sign, w, rec = -1.0 if feedback == "loss" else 1.0, np.full(n, 1.0 / n), defaultdict(list)
    for t in range(T):
        q = (1.0 - gamma) * w + gamma / n
        x = draw(q, u[t, 0])
        record(rec, weights=w, play_probs=q, played=x)
        c = (losses[t, x] if feedback == "loss" else 1.0 - losses[t, x]) / q[x]
        w = w.copy()
        w[x] *= math.exp(sign * eta * c)
        w /= w.sum()
    rec["weights"].append(w)
    return stack(rec)


#: ``(t, v, p, mix, x) -> (r, new v, records)``: a round of the experts (see below).
ExpertsRound = Callable[[int, np.ndarray, np.ndarray, np.ndarray, int], tuple]


def prod_meta_reference(losses, u, lengths, eta, experts_round: ExpertsRound, round_offset=0):
    """The meta loop StABL (Algorithm 1) and SAOL (Daniely, Gonen & Shalev-Shwartz, ICML 2015,
    Algorithm 1) share. Experts ``v`` (B, n) start at ``1/n`` and meta weights at ``w_k =
    eta_k``; round ``t`` plays ``x = draw(mix, u[t, 0])``, ``mix = sum_k p_k v_k``, ``p = w /
    sum(w)``; ``experts_round`` gives the regret estimates ``r`` (B,), the experts' new ``v`` and
    records; ``w_k *= 1 + eta_k r_k``, or 0 and one muting event where that factor is <= 0;
    expert ``k`` restarts (``1/n``, ``eta_k``) after round ``t`` if ``(t + 1 + round_offset) %
    L_k == 0``.
    Returns ``played`` (T,), ``play_probs`` (T, n), ``meta_probs`` (T, B), ``expert_probs`` (T, B,
    n), ``meta_weights`` (T+1, B), ``muted`` and ``experts_round``'s records."""
    (T, n), B = losses.shape, len(lengths)
    v, w, muted, rec = np.full((B, n), 1.0 / n), eta.copy(), 0, defaultdict[str, list](list)
    for t in range(T):
        p = w / w.sum()
        mix = sum(p[k] * v[k] for k in range(B))
        x = draw(mix, u[t, 0])
        r, new_v, extra = experts_round(t, v, p, mix, x)
        record(rec, played=x, play_probs=mix, meta_probs=p, expert_probs=v, meta_weights=w, **extra)
        factor = 1.0 + eta * r
        muted += int(np.sum(factor <= 0.0))
        v, w = new_v, np.where(factor > 0.0, w * factor, 0.0)
        restart = (t + 1 + round_offset) % np.asarray(lengths) == 0
        v[restart], w[restart] = 1.0 / n, eta[restart]
    rec["meta_weights"].append(w)
    return stack(rec) | {"muted": muted}


def stabl_reference(losses, u, lengths, *, expert_lr_scale, meta_lr_scale, **options):
    """StABL (Algorithm 1) on :func:`prod_meta_reference`: meta rates ``eta_k = min(1 / (2
    sqrt n), 1 / sqrt(n L_k))`` (line 6), EXP3 experts (Algorithm 2) at ``eta'_k = sqrt(ln n /
    (L_k n C))``, ``C = 2B`` (``P >= v_k / (2B)``) or ``2 log2 T`` (``expert_c="2logT"``);
    ``rate_scales``, ``meta_scales`` scale them per expert (the rate grid: an expert per
    (length, scale)). Line 9: ``P = m^2 / (2 |m|^2) + sum_k v_k / (2B)``, ``m = max_k v_k``
    (``observation="uniform"``: ``1/n``); ``xo = draw(P, u[t, 1])`` is observed
    (``observation="played"``, one query: ``P = mix``, ``xo = x``), ``c = l(xo) / P(xo)`` (line
    11), ``v_k(xo) *= exp(-eta'_k c)`` normalised (line 12), ``r_k = c (mix(xo) - v_k(xo))``
    (line 13; reward: ``c = (1 - l(xo)) / P(xo)``, signs flipped). Adds ``observed``,
    ``obs_probs``, ``suffered`` ``l(x)``, ``expected`` ``mix . l``. ``options``:
    ``observation``, ``expert_c``, ``feedback``, ``round_offset``, the scales."""
    observation = options.get("observation", "importance")
    feedback = options.get("feedback", "loss")
    (T, n), L = losses.shape, np.asarray(lengths, dtype=np.float64)
    B, sign = len(L), -1.0 if feedback == "loss" else 1.0
    C = 2.0 * B if options.get("expert_c", "2B") == "2B" else 2.0 * math.log2(T)
    eta = meta_lr_scale * np.minimum(1.0 / (2.0 * math.sqrt(n)), 1.0 / np.sqrt(n * L))  # line 6
    eta = eta * np.asarray(options.get("meta_scales", 1.0))
    eta_e = expert_lr_scale * np.sqrt(math.log(n) / (L * n * C))
    eta_e = eta_e * np.asarray(options.get("rate_scales", 1.0))

    def experts_round(t, v, p, mix, x):
        if observation == "importance":
            m = v.max(axis=0)
            P = 0.5 * m**2 / np.sum(m**2) + 0.5 * v.sum(axis=0) / B
        else:
            P = mix if observation == "played" else np.full(n, 1.0 / n)
        xo = x if observation == "played" else draw(P, u[t, 1])
        c = (losses[t, xo] if feedback == "loss" else 1.0 - losses[t, xo]) / P[xo]
        new_v = v.copy()
        for k in range(B):
            new_v[k, xo] *= math.exp(sign * eta_e[k] * c)
        records = dict(observed=xo, obs_probs=P, suffered=losses[t, x], expected=mix @ losses[t])
        return sign * c * (v[:, xo] - mix[xo]), new_v / new_v.sum(axis=1)[:, None], records

    round_offset = options.get("round_offset", 0)
    return prod_meta_reference(losses, u, lengths, eta, experts_round, round_offset)
