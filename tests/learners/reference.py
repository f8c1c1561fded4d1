"""Independent plain-NumPy reference implementations of EXP3 and StABL.

This module is written from the paper "Adaptive regret with two queries"
(``adaptive-regret-two-queries.tex``: Algorithm 1 "StABL", Algorithm 2 "EXP3 with a
general loss estimator", and the Lemma "Regret for EXP3") and from the conventions of
the test specification. It deliberately does not import anything from ``stabl_jax``:
the tests compare the JAX implementation against these loops step by step, feeding
both the same uniforms.

Conventions shared by both algorithms
-------------------------------------
* float64 everywhere; rounds are 0-based, ``t = 0, ..., T-1``; losses lie in [0, 1].
* Every random draw uses the inverse-CDF rule of :func:`draw` with a caller-supplied
  uniform: ``u[t, 0]`` draws the *played* arm and ``u[t, 1]`` (StABL only) the
  *observed* arm.
* ``feedback="loss"`` builds the importance-weighted loss estimator
  ``lhat = l / z(x) * e_x`` (paper, Algorithm 1 line 11); ``feedback="reward"`` builds
  the gain estimator ``ghat = (1 - l) / z(x) * e_x`` and flips the signs of every update
  so that both modes optimise the same objective.

Everything is written as plain loops over ``t`` for clarity, not speed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "default_history_lengths",
    "draw",
    "exp3_reference",
    "stabl_reference",
]

_FEEDBACKS = ("loss", "reward")
_OBSERVATIONS = ("importance", "uniform")
_EXPERT_CS = ("2B", "2logT")


def draw(p: np.ndarray, u: float) -> int:
    """Draw an index from the probability vector ``p`` with the uniform ``u`` in [0, 1).

    Inverse-CDF rule of the specification: ``cdf = cumsum(p)`` and the index is the
    number of CDF entries that are ``<= u * cdf[-1]``, clipped to ``n - 1``. Scaling by
    ``cdf[-1]`` makes the rule insensitive to a total mass that is off by rounding;
    arms of zero probability are never selected (except for a trailing one through the
    clip, which needs ``u * cdf[-1] >= cdf[-1]``, impossible for ``u < 1`` up to
    rounding).
    """
    p = np.asarray(p, dtype=np.float64)
    n = p.shape[0]
    cdf = np.cumsum(p)
    idx = int(np.sum(cdf <= float(u) * cdf[-1]))
    return min(idx, n - 1)


def default_history_lengths(T: int) -> tuple[int, ...]:
    """Default interval lengths ``L = 2**k`` of StABL's experts for horizon ``T``.

    Algorithm 1 line 2 builds the geometric interval set with
    ``2 + log log T <= k <= log T`` (logs base 2); here
    ``k = ceil(2 + log2(log2 T)), ..., floor(log2 T)`` inclusive. The count is
    ``floor(log2 T) - ceil(2 + log2 log2 T) + 1``, which matches line 3's
    ``B = log T - (1 + log log T)`` when ``T`` is a suitable power of two.

    Raises:
        ValueError: if ``T < 2`` (``log2 log2 T`` undefined) or the range is empty.
    """
    T = int(T)
    if T < 2:
        raise ValueError(f"default_history_lengths needs T >= 2, got T={T}")
    log_t = math.log2(T)
    k_lo = math.ceil(2.0 + math.log2(log_t)) if log_t > 0 else None
    k_hi = math.floor(log_t)
    if k_lo is None or k_lo > k_hi:
        raise ValueError(
            f"no history lengths for T={T}: need ceil(2 + log2 log2 T) <= floor(log2 T)"
        )
    return tuple(2**k for k in range(k_lo, k_hi + 1))


def _check_common(losses: np.ndarray, u: np.ndarray, min_u_cols: int, feedback: str) -> None:
    if losses.ndim != 2:
        raise ValueError(f"losses must have shape (T, n), got {losses.shape}")
    if u.ndim != 2 or u.shape[0] != losses.shape[0] or u.shape[1] < min_u_cols:
        raise ValueError(
            f"u must have shape (T, >={min_u_cols}) with T={losses.shape[0]}, got {u.shape}"
        )
    if feedback not in _FEEDBACKS:
        raise ValueError(f"feedback must be one of {_FEEDBACKS}, got {feedback!r}")


def exp3_reference(
    losses: np.ndarray,
    u: np.ndarray,
    *,
    gamma: float = 0.0,
    lr_scale: float = 1.0,
    feedback: str = "loss",
) -> dict[str, np.ndarray]:
    """Run EXP3 (paper Algorithm 2) with optional uniform exploration ``gamma``.

    Algorithm 2: start from ``w_1 = 1/n`` (line 1), play ``i_t ~ w_t`` (line 3), form an
    unbiased one-sparse estimator (line 4) and update
    ``w_{t+1}(i) ∝ w_t(i) exp(-eta * lhat_t(i))`` (line 5). With exploration the arm is
    played from ``q = (1 - gamma) w + gamma / n`` and the estimator divides by ``q``;
    since ``w(i) <= q(i) / (1 - gamma)`` the Lemma "Regret for EXP3" applies with
    ``C = 1 / (1 - gamma)``, giving ``eta = sqrt(ln n / (T n C))``
    ``= sqrt(ln(n) (1 - gamma) / (T n))``, multiplied here by ``lr_scale``.

    Per round ``t``:

    * ``q = (1 - gamma) * w + gamma / n``; ``x = draw(q, u[t, 0])``; ``l = losses[t, x]``.
    * loss mode: ``c = l / q[x]``, ``w[x] *= exp(-eta c)``;
      reward mode: ``c = (1 - l) / q[x]``, ``w[x] *= exp(+eta c)``; then ``w /= sum(w)``.

    Args:
        losses: array of shape (T, n) with entries in [0, 1].
        u: uniforms of shape (T, >=1); only ``u[:, 0]`` is used.
        gamma: uniform exploration rate in [0, 1].
        lr_scale: multiplier of the Lemma's step size.
        feedback: ``"loss"`` or ``"reward"``.

    Returns:
        dict with ``"played"`` (T,) int, ``"observed"`` (T,) int (equal to played),
        ``"play_probs"`` (T, n) the ``q`` used at round t, and ``"weights"`` (T+1, n) the
        ``w`` before round t (index T is the final one).
    """
    losses = np.asarray(losses, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    _check_common(losses, u, 1, feedback)
    gamma = float(gamma)
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma must be in [0, 1], got {gamma}")
    T, n = losses.shape

    eta = float(lr_scale) * math.sqrt(math.log(n) * (1.0 - gamma) / (T * n))

    w = np.full(n, 1.0 / n)
    played = np.zeros(T, dtype=np.int64)
    play_probs = np.zeros((T, n))
    weights = np.zeros((T + 1, n))

    for t in range(T):
        weights[t] = w
        q = (1.0 - gamma) * w + gamma / n
        play_probs[t] = q
        x = draw(q, u[t, 0])
        played[t] = x
        loss = losses[t, x]
        w = w.copy()
        if feedback == "loss":
            c = loss / q[x]
            w[x] *= math.exp(-eta * c)
        else:
            c = (1.0 - loss) / q[x]
            w[x] *= math.exp(eta * c)
        w /= w.sum()
    weights[T] = w

    return {
        "played": played,
        "observed": played.copy(),
        "play_probs": play_probs,
        "weights": weights,
    }


def stabl_reference(
    losses: np.ndarray,
    u: np.ndarray,
    history_lengths: Sequence[int],
    *,
    observation: str = "importance",
    expert_lr_scale: float = 1.0,
    meta_lr_scale: float = 1.0,
    expert_c: str = "2B",
    round_offset: int = 0,
    horizon: int | None = None,
    feedback: str = "loss",
    rate_scales: Sequence[float] | None = None,
    meta_scales: Sequence[float] | None = None,
) -> dict[str, np.ndarray | int]:
    """Run StABL, the Strongly Adaptive Bandit Learner (paper Algorithm 1).

    There are ``B = len(history_lengths)`` experts (line 3); expert ``k`` is an EXP3
    instance (Algorithm 2) with arm distribution ``v[k]`` that is restarted every
    ``L_k`` rounds, and the meta-learner keeps unnormalised weights ``w[k]``.

    Step sizes:

    * meta (line 6): ``eta_k = meta_lr_scale * min(1 / (2 sqrt n), 1 / sqrt(n L_k))``;
    * experts (Lemma "Regret for EXP3" with ``T = L_k``):
      ``etaE_k = expert_lr_scale * sqrt(ln n / (L_k n C))`` with ``C = 2B`` (since
      ``P(i) >= v[k](i) / (2B)``, line 9) or ``C = 2 log2(horizon)`` (the proof
      sketch's "C = 2 log T").

    Round ``t`` (0-based):

    1. ``p = w / sum(w)`` (line 8); ``mix = sum_k p[k] v[k]`` (line 10).
    2. Observation distribution ``P`` (line 9): with ``m = max_k v[k]`` elementwise,
       ``P = 0.5 m**2 / sum(m**2) + 0.5 sum_k v[k] / B`` for ``"importance"``, or
       uniform ``1/n`` for ``"uniform"`` (the naive choice discussed after Theorem 1).
    3. ``x = draw(mix, u[t, 0])`` is played (its loss is suffered but not used);
       ``xo = draw(P, u[t, 1])`` is observed, ``l = losses[t, xo]`` (lines 10-11).
    4. Loss mode: ``c = l / P[xo]``, i.e. ``lhat = c e_xo`` (line 11). Each expert does
       its EXP3 step ``v[k][xo] *= exp(-etaE_k c)`` and renormalises (line 12). The meta
       "instantaneous regret" (line 13) is
       ``r[k] = lhat . mix - lhat . v_old[k] = c (mix[xo] - v_old[k][xo])`` with
       ``v_old`` the expert distributions before this round's update.
       Reward mode: ``c = (1 - l) / P[xo]``, ``v[k][xo] *= exp(+etaE_k c)``,
       ``r[k] = c (v_old[k][xo] - mix[xo])``.
    5. Meta update (line 13): ``factor = 1 + eta_k r[k]``; ``w[k] *= factor`` if
       ``factor > 0``, otherwise ``w[k] = 0`` and the expert is "muted" until its next
       restart. Every round and expert in which ``factor <= 0`` counts as one muting
       event (including experts whose weight was already zero).
    6. Restarts (line 13, first case, and line 3): for every ``k`` with
       ``(t + 1 + round_offset) % L_k == 0`` set ``v[k] = 1/n`` and ``w[k] = eta_k``;
       these are the values used in round ``t + 1``. At ``t = 0`` every expert starts
       fresh (line 6: ``w_1(k) = eta_k``).

    Args:
        losses: array of shape (T, n) with entries in [0, 1].
        u: uniforms of shape (T, >=2): ``u[t, 0]`` for the played arm, ``u[t, 1]`` for
            the observed arm.
        history_lengths: interval lengths ``L_1 < ... < L_B`` (positive ints).
        observation: ``"importance"`` (line 9) or ``"uniform"``.
        expert_lr_scale: multiplier of the experts' EXP3 step sizes.
        meta_lr_scale: multiplier of the meta step sizes ``eta_k``.
        expert_c: ``"2B"`` or ``"2logT"``; the constant ``C`` of the EXP3 Lemma.
        round_offset: shift of the restart schedule (global index of round 0).
        horizon: horizon used by ``expert_c="2logT"``; defaults to ``T``.
        feedback: ``"loss"`` or ``"reward"``.
        rate_scales: one extra multiplier of ``etaE_k`` per expert (default all 1); with
            ``history_lengths`` listing each length once per scale, this is the rate-grid
            variant (every (length, scale) pair an expert, ``B`` counting them all).
        meta_scales: one extra multiplier of ``eta_k`` per expert (default all 1).

    Returns:
        dict with ``"played"`` (T,), ``"observed"`` (T,), ``"play_probs"`` (T, n) = mix,
        ``"obs_probs"`` (T, n) = P, ``"meta_probs"`` (T, B) = p, ``"expert_probs"``
        (T, B, n) = v at the start of round t, ``"meta_weights"`` (T+1, B) = w at the
        start of each round (index T: after the last round, restarts included),
        ``"muted"`` (int) the number of muting events, ``"suffered"`` (T,) =
        ``losses[t, x]`` and ``"expected"`` (T,) = ``mix . losses[t]``.
    """
    losses = np.asarray(losses, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    _check_common(losses, u, 2, feedback)
    if observation not in _OBSERVATIONS:
        raise ValueError(f"observation must be one of {_OBSERVATIONS}, got {observation!r}")
    if expert_c not in _EXPERT_CS:
        raise ValueError(f"expert_c must be one of {_EXPERT_CS}, got {expert_c!r}")
    lengths = [int(L) for L in history_lengths]
    if not lengths or any(L <= 0 for L in lengths):
        raise ValueError(f"history_lengths must be non-empty positive ints, got {lengths}")
    T, n = losses.shape
    B = len(lengths)
    if horizon is None:
        horizon = T

    # Step sizes (line 6 for the meta-learner, the EXP3 Lemma for the experts).
    lengths_arr = np.asarray(lengths, dtype=np.float64)
    eta_meta = float(meta_lr_scale) * np.minimum(
        1.0 / (2.0 * math.sqrt(n)), 1.0 / np.sqrt(n * lengths_arr)
    )
    if expert_c == "2B":
        C = 2.0 * B
    else:
        if horizon < 2:
            raise ValueError(f'expert_c="2logT" needs horizon >= 2, got {horizon}')
        C = 2.0 * math.log2(horizon)
    eta_expert = float(expert_lr_scale) * np.sqrt(math.log(n) / (lengths_arr * n * C))
    if rate_scales is not None:
        eta_expert = eta_expert * np.asarray(rate_scales, dtype=np.float64)
    if meta_scales is not None:
        eta_meta = eta_meta * np.asarray(meta_scales, dtype=np.float64)

    # Fresh state at t = 0.
    v = np.full((B, n), 1.0 / n)
    w = eta_meta.copy()
    muted = 0

    played = np.zeros(T, dtype=np.int64)
    observed = np.zeros(T, dtype=np.int64)
    play_probs = np.zeros((T, n))
    obs_probs = np.zeros((T, n))
    meta_probs = np.zeros((T, B))
    expert_probs = np.zeros((T, B, n))
    meta_weights = np.zeros((T + 1, B))
    suffered = np.zeros(T)
    expected = np.zeros(T)

    for t in range(T):
        expert_probs[t] = v
        meta_weights[t] = w

        # Line 8: meta distribution over experts; line 10: the played mixture.
        p = w / w.sum()
        mix = np.zeros(n)
        for k in range(B):
            mix += p[k] * v[k]
        meta_probs[t] = p
        play_probs[t] = mix

        # Line 9: observation distribution.
        if observation == "importance":
            m = v.max(axis=0)
            P = 0.5 * m**2 / np.sum(m**2) + 0.5 * v.sum(axis=0) / B
        else:
            P = np.full(n, 1.0 / n)
        obs_probs[t] = P

        # Lines 10-11: play x (suffered, unused for learning), observe xo.
        x = draw(mix, u[t, 0])
        xo = draw(P, u[t, 1])
        played[t] = x
        observed[t] = xo
        suffered[t] = losses[t, x]
        expected[t] = float(mix @ losses[t])
        loss = losses[t, xo]

        v_old = v.copy()
        if feedback == "loss":
            c = loss / P[xo]
            sign = -1.0
        else:
            c = (1.0 - loss) / P[xo]
            sign = 1.0

        # Line 12: every expert takes its EXP3 step (Algorithm 2, line 5).
        v = v_old.copy()
        for k in range(B):
            v[k, xo] *= math.exp(sign * eta_expert[k] * c)
            v[k] /= v[k].sum()

        # Line 13: meta update with r[k] = lhat.mix - lhat.v_old[k] (signs flipped for
        # gains).
        w = w.copy()
        for k in range(B):
            if feedback == "loss":
                r = c * (mix[xo] - v_old[k, xo])
            else:
                r = c * (v_old[k, xo] - mix[xo])
            factor = 1.0 + eta_meta[k] * r
            if factor > 0.0:
                w[k] = w[k] * factor
            else:
                w[k] = 0.0
                muted += 1

        # Restarts for round t + 1.
        for k in range(B):
            if (t + 1 + round_offset) % lengths[k] == 0:
                v[k] = 1.0 / n
                w[k] = eta_meta[k]

    meta_weights[T] = w

    return {
        "played": played,
        "observed": observed,
        "play_probs": play_probs,
        "obs_probs": obs_probs,
        "meta_probs": meta_probs,
        "expert_probs": expert_probs,
        "meta_weights": meta_weights,
        "muted": int(muted),
        "suffered": suffered,
        "expected": expected,
    }
