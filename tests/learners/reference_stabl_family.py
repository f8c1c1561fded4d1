"""Independent plain-NumPy references for the StABL family's baselines and variants.

Written from the source papers, as plain loops over rounds, before the JAX versions, and
importing nothing from ``stabl_jax`` (only :func:`reference.draw`, the inverse-CDF
sampling convention every learner shares):

* :func:`hedge_reference`: Hedge / the exponentially weighted forecaster (Freund & Schapire,
  1997; Cesa-Bianchi & Lugosi, 2006, Thm 2.2) with full information.
* :func:`saol_hedge_reference`: SAOL (Daniely, Gonen & Shalev-Shwartz, ICML 2015, Algorithm 1)
  over Hedge experts on StABL's geometric intervals, full information.
* :func:`saol_reference`: the query-hungry bandit SAOL (Table 1 of Lu et al., ICLR 2024):
  every EXP3 expert samples and observes its own arm.
* :func:`stabl_one_query_reference`: Algorithm 1 of Lu et al. with the observed arm equal to
  the played arm (one query).
* :func:`stabl_anytime_reference`: Algorithm 1 with anytime step sizes (tau since the expert's
  restart), the experts as anytime EXP3 (``v ∝ exp(-eta'_t Lhat)``) and the meta-learner as
  ML-Prod (Gaillard, Stoltz & van Erven, COLT 2014): ``w ∝ eta_t exp(eta_t Lambda)`` with
  ``Lambda = sum_s log(1 + eta_s r_s) / eta_s``.

Conventions (as in :mod:`reference`): float64, 0-based rounds ``t``, losses in [0, 1];
``u[t, j]`` is the ``j``-th uniform of round ``t``; expert ``k`` restarts after round ``t``
when ``(t + 1 + round_offset) % L_k == 0``; meta step sizes are multiplied by
``meta_lr_scale`` and expert rates by ``expert_lr_scale`` (``lr_scale`` for Hedge).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tests.learners.reference import draw

__all__ = [
    "hedge_reference",
    "saol_hedge_reference",
    "saol_reference",
    "stabl_anytime_reference",
    "stabl_one_query_reference",
]


def _check(losses: np.ndarray, u: np.ndarray, cols: int) -> tuple[np.ndarray, np.ndarray]:
    losses = np.asarray(losses, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    if losses.ndim != 2:
        raise ValueError(f"losses must have shape (T, n), got {losses.shape}")
    if u.shape != (losses.shape[0], cols):
        raise ValueError(f"u must have shape {(losses.shape[0], cols)}, got {u.shape}")
    return losses, u


def _lengths(history_lengths: Sequence[int]) -> list[int]:
    lengths = [int(x) for x in history_lengths]
    if not lengths or any(x <= 0 for x in lengths):
        raise ValueError(f"history_lengths must be positive ints, got {lengths}")
    return lengths


def hedge_reference(
    losses: np.ndarray, u: np.ndarray, *, lr_scale: float = 1.0
) -> dict[str, np.ndarray]:
    """Hedge with full information.

    ``eta = lr_scale * sqrt(8 ln n / T)`` (Cesa-Bianchi & Lugosi 2006, Thm 2.2: the
    exponentially weighted forecaster with this rate has regret at most ``sqrt(T ln n / 2)``
    for losses in [0, 1]). Round ``t``: play ``x = draw(w, u[t, 0])``, observe the whole
    ``l_t`` (``n`` queries: ``x, x+1, ..., x+n-1 mod n``), ``w(i) <- w(i) exp(-eta l_t(i))``,
    normalise.

    Returns:
        ``"played"`` (T,), ``"arms"`` (T, n), ``"weights"`` (T+1, n) before each round.
    """
    losses, u = _check(losses, u, 1)
    T, n = losses.shape
    eta = lr_scale * math.sqrt(8.0 * math.log(n) / T)
    w = np.full(n, 1.0 / n)
    played = np.zeros(T, dtype=np.int64)
    arms = np.zeros((T, n), dtype=np.int64)
    weights = np.zeros((T + 1, n))
    for t in range(T):
        weights[t] = w
        x = draw(w, u[t, 0])
        played[t] = x
        for j in range(n):
            arms[t, j] = (x + j) % n
        w = w * np.exp(-eta * losses[t])
        w = w / w.sum()
    weights[T] = w
    return {"played": played, "arms": arms, "weights": weights}


def saol_hedge_reference(
    losses: np.ndarray,
    u: np.ndarray,
    history_lengths: Sequence[int],
    *,
    expert_lr_scale: float = 1.0,
    meta_lr_scale: float = 1.0,
    round_offset: int = 0,
) -> dict[str, np.ndarray | int]:
    """SAOL (Daniely et al. 2015, Algorithm 1) over Hedge experts, full information.

    Expert ``k`` is Hedge tuned for ``L_k`` rounds, ``eta'_k = sqrt(8 ln n / L_k)``, restarted
    every ``L_k`` rounds. SAOL's meta step ``eta_k = min(1/2, 1/sqrt(L_k))``; a (re)started
    expert gets weight ``w(k) = eta_k``. Round ``t``:

    1. ``p = w / sum(w)``, ``mix = sum_k p_k v_k``; play ``x = draw(mix, u[t, 0])``.
    2. Observe all of ``l = l_t``; ``r_k = mix . l - v_k . l`` (exact instantaneous regret).
    3. ``w_k <- w_k (1 + eta_k r_k)`` (set to 0 and counted as muted if the factor is <= 0,
       which needs ``meta_lr_scale >= 2``); ``v_k(i) <- v_k(i) exp(-eta'_k l(i))``, normalise.
    4. Restart every ``k`` with ``(t + 1 + round_offset) % L_k == 0``.

    Returns:
        ``"played"``, ``"play_probs"`` (T, n), ``"expert_probs"`` (T, B, n),
        ``"meta_weights"`` (T+1, B), ``"muted"``.
    """
    losses, u = _check(losses, u, 1)
    lengths = _lengths(history_lengths)
    T, n = losses.shape
    B = len(lengths)
    eta = np.array([meta_lr_scale * min(0.5, 1.0 / math.sqrt(L)) for L in lengths])
    eta_e = np.array([expert_lr_scale * math.sqrt(8.0 * math.log(n) / L) for L in lengths])
    v = np.full((B, n), 1.0 / n)
    w = eta.copy()
    muted = 0
    out = {
        "played": np.zeros(T, dtype=np.int64),
        "play_probs": np.zeros((T, n)),
        "expert_probs": np.zeros((T, B, n)),
        "meta_weights": np.zeros((T + 1, B)),
    }
    for t in range(T):
        out["expert_probs"][t] = v
        out["meta_weights"][t] = w
        p = w / w.sum()
        mix = np.zeros(n)
        for k in range(B):
            mix += p[k] * v[k]
        out["play_probs"][t] = mix
        out["played"][t] = draw(mix, u[t, 0])
        loss = losses[t]
        new_w = w.copy()
        new_v = v.copy()
        for k in range(B):
            r = float(mix @ loss) - float(v[k] @ loss)
            factor = 1.0 + eta[k] * r
            if factor > 0.0:
                new_w[k] = w[k] * factor
            else:
                new_w[k] = 0.0
                muted += 1
            new_v[k] = v[k] * np.exp(-eta_e[k] * loss)
            new_v[k] /= new_v[k].sum()
        w, v = new_w, new_v
        for k in range(B):
            if (t + 1 + round_offset) % lengths[k] == 0:
                v[k] = 1.0 / n
                w[k] = eta[k]
    out["meta_weights"][T] = w
    return {**out, "muted": muted}


def saol_reference(
    losses: np.ndarray,
    u: np.ndarray,
    history_lengths: Sequence[int],
    *,
    expert_lr_scale: float = 1.0,
    meta_lr_scale: float = 1.0,
    round_offset: int = 0,
    feedback: str = "loss",
) -> dict[str, np.ndarray | int]:
    """Bandit SAOL with one query per expert (``1 + B`` queries per round).

    Expert ``k`` is EXP3 (Algorithm 2 of Lu et al.) sampling from its own distribution:
    ``z = v_k`` in the Lemma, so ``C = 1`` and ``eta'_k = sqrt(ln n / (L_k n))``. Meta step
    ``eta_k = min(1/2, 1/sqrt(L_k))`` (SAOL's, the regrets below lie in [-1, 1]). Round ``t``:

    1. ``p = w / sum(w)``, ``mix = sum_k p_k v_k``; play ``x = draw(mix, u[t, 0])``.
    2. Every expert draws ``y_k = draw(v_k, u[t, 1 + k])`` and observes ``l(y_k)``.
    3. ``r_k = sum_j p_j l(y_j) - l(y_k)`` (unbiased for ``mix . l - v_k . l``);
       ``w_k <- w_k (1 + eta_k r_k)`` (0 and muted if the factor is <= 0).
    4. Loss: ``v_k(y_k) <- v_k(y_k) exp(-eta'_k l(y_k) / v_k(y_k))``; reward: the gain
       ``g = 1 - l`` with ``exp(+eta'_k g(y_k) / v_k(y_k))``; normalise.
    5. Restarts as in StABL.

    Returns:
        ``"played"``, ``"arms"`` (T, 1+B), ``"play_probs"``, ``"expert_probs"``,
        ``"meta_weights"`` (T+1, B), ``"muted"``.
    """
    lengths = _lengths(history_lengths)
    B = len(lengths)
    losses, u = _check(losses, u, 1 + B)
    if feedback not in ("loss", "reward"):
        raise ValueError(f"feedback must be 'loss' or 'reward', got {feedback!r}")
    T, n = losses.shape
    eta = np.array([meta_lr_scale * min(0.5, 1.0 / math.sqrt(L)) for L in lengths])
    eta_e = np.array([expert_lr_scale * math.sqrt(math.log(n) / (L * n)) for L in lengths])
    v = np.full((B, n), 1.0 / n)
    w = eta.copy()
    muted = 0
    out = {
        "played": np.zeros(T, dtype=np.int64),
        "arms": np.zeros((T, 1 + B), dtype=np.int64),
        "play_probs": np.zeros((T, n)),
        "expert_probs": np.zeros((T, B, n)),
        "meta_weights": np.zeros((T + 1, B)),
    }
    for t in range(T):
        out["expert_probs"][t] = v
        out["meta_weights"][t] = w
        p = w / w.sum()
        mix = np.zeros(n)
        for k in range(B):
            mix += p[k] * v[k]
        out["play_probs"][t] = mix
        x = draw(mix, u[t, 0])
        ys = [draw(v[k], u[t, 1 + k]) for k in range(B)]
        out["played"][t] = x
        out["arms"][t] = [x, *ys]
        ly = np.array([losses[t, y] for y in ys])
        mixed = float(p @ ly)
        new_w = w.copy()
        new_v = v.copy()
        for k in range(B):
            factor = 1.0 + eta[k] * (mixed - ly[k])
            if factor > 0.0:
                new_w[k] = w[k] * factor
            else:
                new_w[k] = 0.0
                muted += 1
            y = ys[k]
            if feedback == "loss":
                new_v[k, y] *= math.exp(-eta_e[k] * ly[k] / v[k, y])
            else:
                new_v[k, y] *= math.exp(eta_e[k] * (1.0 - ly[k]) / v[k, y])
            new_v[k] /= new_v[k].sum()
        w, v = new_w, new_v
        for k in range(B):
            if (t + 1 + round_offset) % lengths[k] == 0:
                v[k] = 1.0 / n
                w[k] = eta[k]
    out["meta_weights"][T] = w
    return {**out, "muted": muted}


def stabl_one_query_reference(
    losses: np.ndarray,
    u: np.ndarray,
    history_lengths: Sequence[int],
    *,
    expert_lr_scale: float = 1.0,
    meta_lr_scale: float = 1.0,
    round_offset: int = 0,
    feedback: str = "loss",
) -> dict[str, np.ndarray | int]:
    """Algorithm 1 of Lu et al. with ``x'_t = x_t``: one query, StABL's step sizes.

    ``eta_k = min(1/(2 sqrt n), 1/sqrt(n L_k))`` (line 6), ``eta'_k = sqrt(ln n/(L_k n 2B))``.
    Round ``t``: ``p = w / sum(w)``, ``mix = sum_k p_k v_k``, ``x = draw(mix, u[t, 0])``
    is played and observed; ``c = l(x) / mix(x)`` (loss) or ``(1 - l(x)) / mix(x)`` (gain).
    Loss: ``r_k = c (mix(x) - v_k(x)) = l(x) (1 - v_k(x)/mix(x))``, ``v_k(x) *=
    exp(-eta'_k c)``; reward: ``r_k = c (v_k(x) - mix(x))``, ``v_k(x) *= exp(+eta'_k c)``.
    ``w_k *= 1 + eta_k r_k`` or 0 (muted) when that factor is <= 0. Restarts as StABL's.
    """
    losses, u = _check(losses, u, 1)
    lengths = _lengths(history_lengths)
    T, n = losses.shape
    B = len(lengths)
    eta = np.array(
        [meta_lr_scale * min(1.0 / (2.0 * math.sqrt(n)), 1.0 / math.sqrt(n * L)) for L in lengths]
    )
    eta_e = np.array(
        [expert_lr_scale * math.sqrt(math.log(n) / (L * n * 2.0 * B)) for L in lengths]
    )
    v = np.full((B, n), 1.0 / n)
    w = eta.copy()
    muted = 0
    out = {
        "played": np.zeros(T, dtype=np.int64),
        "play_probs": np.zeros((T, n)),
        "expert_probs": np.zeros((T, B, n)),
        "meta_weights": np.zeros((T + 1, B)),
    }
    for t in range(T):
        out["expert_probs"][t] = v
        out["meta_weights"][t] = w
        p = w / w.sum()
        mix = np.zeros(n)
        for k in range(B):
            mix += p[k] * v[k]
        out["play_probs"][t] = mix
        x = draw(mix, u[t, 0])
        out["played"][t] = x
        loss = losses[t, x]
        new_w = w.copy()
        new_v = v.copy()
        for k in range(B):
            if feedback == "loss":
                c = loss / mix[x]
                r = c * (mix[x] - v[k, x])
                new_v[k, x] *= math.exp(-eta_e[k] * c)
            else:
                c = (1.0 - loss) / mix[x]
                r = c * (v[k, x] - mix[x])
                new_v[k, x] *= math.exp(eta_e[k] * c)
            new_v[k] /= new_v[k].sum()
            factor = 1.0 + eta[k] * r
            if factor > 0.0:
                new_w[k] = w[k] * factor
            else:
                new_w[k] = 0.0
                muted += 1
        w, v = new_w, new_v
        for k in range(B):
            if (t + 1 + round_offset) % lengths[k] == 0:
                v[k] = 1.0 / n
                w[k] = eta[k]
    out["meta_weights"][T] = w
    return {**out, "muted": muted}


def stabl_anytime_reference(
    losses: np.ndarray,
    u: np.ndarray,
    history_lengths: Sequence[int],
    *,
    expert_lr_scale: float = 1.0,
    meta_lr_scale: float = 1.0,
    feedback: str = "loss",
) -> dict[str, np.ndarray | int]:
    """StABL (Algorithm 1) with anytime step sizes, two queries per round.

    Expert ``k`` restarts at every multiple of ``L_k`` (``t = 0`` included); ``tau_k`` is the
    number of rounds since its last restart. Active experts at round ``t``: the first one, and
    expert ``k >= 1`` once ``t >= L_{k-1}`` (every later expert has never restarted and is an
    exact copy of the last active one); ``B_t`` = their number. Rates at round ``t``:

    * experts: ``eta'_k = sqrt(ln n / ((tau_k + 1) n 2 B_t))`` (the Lemma with ``L_k -> tau+1``
      and ``C = 2 B_t``); anytime EXP3: ``v_k ∝ exp(-eta'_k Lhat_k)`` with ``Lhat_k`` the
      estimated loss summed since the restart (reward: ``exp(+eta'_k Ghat_k)``);
    * meta: ``eta_k = min(1/(2 sqrt n), 1/sqrt(n (tau_k + 1)))`` (line 6 with ``L_k -> tau+1``);
      ML-Prod: ``p ∝ eta_k exp(eta_k Lam_k)`` over active experts, where
      ``Lam_k = sum_s log(1 + eta_{k,s} r_{k,s}) / eta_{k,s}`` since the restart (``-inf``
      once a factor is <= 0: muted; only active experts' events are counted).

    ``P(t)`` is line 9 over the active experts with ``B_t``; ``x = draw(mix, u[t, 0])`` is
    played, ``xo = draw(P, u[t, 1])`` observed; ``c = l(xo)/P(xo)`` and ``r_k = c (mix(xo) -
    v_k(xo))`` (reward: ``c = (1 - l(xo))/P(xo)``, ``r_k = c (v_k(xo) - mix(xo))``).

    Returns:
        ``"played"``, ``"observed"``, ``"play_probs"``, ``"obs_probs"``, ``"expert_probs"``
        (T, B, n), ``"meta_probs"`` (T, B) (zero for inactive experts), ``"num_active"``
        (T,), ``"muted"``.
    """
    losses, u = _check(losses, u, 2)
    lengths = _lengths(history_lengths)
    T, n = losses.shape
    B = len(lengths)
    sign = -1.0 if feedback == "loss" else 1.0
    cum = np.zeros((B, n))  # Lhat (loss) or Ghat (reward) since the restart
    lam = np.zeros(B)  # ML-Prod's Lambda since the restart
    start = np.zeros(B, dtype=np.int64)  # round of the last restart
    muted = 0
    out = {
        "played": np.zeros(T, dtype=np.int64),
        "observed": np.zeros(T, dtype=np.int64),
        "play_probs": np.zeros((T, n)),
        "obs_probs": np.zeros((T, n)),
        "expert_probs": np.zeros((T, B, n)),
        "meta_probs": np.zeros((T, B)),
        "num_active": np.zeros(T, dtype=np.int64),
    }
    for t in range(T):
        active = [k == 0 or t >= lengths[k - 1] for k in range(B)]
        b_t = sum(active)
        tau = t - start
        eta_e = np.array(
            [
                expert_lr_scale * math.sqrt(math.log(n) / ((tau[k] + 1) * n * 2.0 * b_t))
                for k in range(B)
            ]
        )
        eta = np.array(
            [
                meta_lr_scale * min(1.0 / (2.0 * math.sqrt(n)), 1.0 / math.sqrt(n * (tau[k] + 1)))
                for k in range(B)
            ]
        )
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
        out["num_active"][t] = b_t

        loss = losses[t, xo]
        c = (loss if feedback == "loss" else 1.0 - loss) / P[xo]
        for k in range(B):
            r = c * (mix[xo] - v[k, xo]) if feedback == "loss" else c * (v[k, xo] - mix[xo])
            factor = 1.0 + eta[k] * r
            if factor > 0.0:
                lam[k] += math.log(factor) / eta[k]
            else:
                lam[k] = -np.inf
                muted += int(active[k])
            cum[k, xo] += c
        for k in range(B):
            if (t + 1) % lengths[k] == 0:
                cum[k] = 0.0
                lam[k] = 0.0
                start[k] = t + 1
    return {**out, "muted": muted}
