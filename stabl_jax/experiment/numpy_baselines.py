"""Plain-NumPy EXP3 and StABL on the expert-advice environment: the baselines of the benchmark.

Written from the paper, importing no learner: ``*_loop`` is one run, ``*_vectorised`` ``R``
runs on ``(R, ...)`` arrays, both with the JAX learners' default step sizes and traces.
Draws come from a :class:`Source` (PCG64, or fixed arrays to compare with JAX exactly), by
inverse CDF: ``np.searchsorted(cdf, u * cdf[-1], side="right")`` capped at ``n - 1``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Protocol

import numpy as np


@dataclasses.dataclass(frozen=True)
class ExpertAdviceSpec:
    """The expert-advice environment: ``S`` equal segments, segment ``j``'s best arm ``j mod n``.

    Attributes:
      num_arms: ``n``.
      horizon: ``T``.
      num_segments: ``S``; change points at ``round(j T / S)``, ``j = 1..S-1``.
      baseline_high: baseline rewards are ``U[0, baseline_high)``.
      bonus: added to the best arm's reward.
    """

    num_arms: int
    horizon: int
    num_segments: int = 4
    baseline_high: float = 0.5
    bonus: float = 0.5

    @property
    def change_points(self) -> np.ndarray:
        s, h = self.num_segments, self.horizon
        return np.asarray([round(j * h / s) for j in range(1, s)], np.int64)

    def best_arm(self, t: int) -> int:
        """The arm with the smallest mean loss at round ``t``."""
        segment = int(np.searchsorted(self.change_points, t, side="right"))
        return segment % self.num_arms


class Source(Protocol):
    """Where a simulation's random numbers come from (one round at a time)."""

    def losses(self, t: int, best: int) -> np.ndarray:
        """``(n,)`` or ``(R, n)`` losses of every arm at round ``t``."""
        ...

    def uniforms(self, t: int, num: int) -> np.ndarray:
        """``(num,)`` or ``(R, num)`` U[0, 1) draws for the learner at round ``t``."""
        ...


@dataclasses.dataclass
class RandomSource:
    """Fresh draws from a NumPy generator: losses ``1 - (U[0, high) + bonus 1[i = best])``.

    Attributes:
      env, rng: the environment and a NumPy generator.
      num_runs: ``None`` for one run (``(n,)`` draws), else ``R`` (``(R, n)`` draws).
      dtype: float dtype of the draws.
    """

    env: ExpertAdviceSpec
    rng: np.random.Generator
    num_runs: int | None = None
    dtype: type = np.float32

    def _shape(self, size: int) -> tuple[int, ...]:
        return (size,) if self.num_runs is None else (self.num_runs, size)

    def losses(self, t: int, best: int) -> np.ndarray:
        del t
        reward = self.rng.random(self._shape(self.env.num_arms), dtype=self.dtype)
        reward *= self.env.baseline_high
        reward[..., best] += self.env.bonus
        return 1.0 - reward

    def uniforms(self, t: int, num: int) -> np.ndarray:
        del t
        return self.rng.random(self._shape(num), dtype=self.dtype)


@dataclasses.dataclass
class ArraySource:
    """Given draws (for exact comparisons with JAX).

    Attributes:
      loss_array: ``(T, n)`` or ``(T, R, n)`` every arm's loss.
      uniform_array: ``(T, q)`` or ``(T, R, q)`` the learner's uniforms.
    """

    loss_array: np.ndarray
    uniform_array: np.ndarray

    def losses(self, t: int, best: int) -> np.ndarray:
        del best
        return self.loss_array[t]

    def uniforms(self, t: int, num: int) -> np.ndarray:
        return self.uniform_array[t][..., :num]


# --- step sizes (the JAX learners' formulas, written again) ---------------------------------


def exp3_rate(num_arms: int, horizon: int, gamma: float = 0.0) -> float:
    """EXP3's ``eta = sqrt(ln(n) (1 - gamma) / (T n))`` (the Lemma with ``C = 1/(1-gamma)``)."""
    return math.sqrt(math.log(num_arms) * (1.0 - gamma) / (horizon * num_arms))


def stabl_lengths(horizon: int) -> np.ndarray:
    """``L_k = 2^k``, ``k = ceil(2 + log2 log2 T) .. floor(log2 T)`` (Algorithm 1, line 2)."""
    log_t = math.log2(horizon)
    return np.asarray(
        [2**k for k in range(math.ceil(2 + math.log2(log_t)), math.floor(log_t) + 1)], np.int64
    )


def stabl_rates(num_arms: int, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(eta_k, eta'_k)``: meta steps ``min(1/(2 sqrt n), 1/sqrt(n L_k))``, EXP3 rates."""
    n, b = num_arms, len(lengths)
    lengths = lengths.astype(np.float64)
    meta = np.minimum(1.0 / (2.0 * math.sqrt(n)), 1.0 / np.sqrt(n * lengths))
    expert = np.sqrt(math.log(n) / (lengths * n * 2.0 * b))
    return meta, expert


def _rounds(
    env: ExpertAdviceSpec, source: Source, rounds: int, num_uniforms: int
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
    """Per round ``t``: ``(t, best arm, losses, the learner's uniforms)``, drawn in this order."""
    for t in range(rounds):
        best = env.best_arm(t)
        yield t, best, source.losses(t, best), source.uniforms(t, num_uniforms)


def _traces(shape: tuple[int, ...], num_queries: int) -> dict[str, np.ndarray]:
    return {
        "played": np.zeros(shape, np.int32),
        "arms": np.zeros((*shape, num_queries), np.int32),
        "loss": np.zeros(shape, np.float32),
        "expected_loss": np.zeros(shape, np.float32),
        "prob_best": np.zeros(shape, np.float32),
    }


# --- one run, Python loop over rounds -------------------------------------------------------


def _draw(probs: np.ndarray, u: float) -> int:
    cdf = np.cumsum(probs)
    return min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), probs.shape[0] - 1)


def exp3_loop(
    env: ExpertAdviceSpec, source: Source, rounds: int, *, dtype: type = np.float32
) -> dict[str, np.ndarray]:
    """One run of EXP3 (Algorithm 2).

    Returns:
      Traces ``{"played", "arms", "loss", "expected_loss", "prob_best"}``, each ``(rounds,)``
      (``arms``: ``(rounds, 1)``).
    """
    n = env.num_arms
    eta = exp3_rate(n, env.horizon)
    w: np.ndarray = np.full(n, 1.0 / n, dtype)
    out = _traces((rounds,), 1)
    for t, best, loss, u in _rounds(env, source, rounds, 1):
        x = _draw(w, u[0])
        out["played"][t] = x
        out["loss"][t] = loss[x]
        out["expected_loss"][t] = np.dot(w, loss)
        out["prob_best"][t] = w[best]
        w[x] *= np.exp(-eta * loss[x] / w[x])
        w /= w.sum()
    out["arms"][:, 0] = out["played"]
    return out


def stabl_loop(
    env: ExpertAdviceSpec, source: Source, rounds: int, *, dtype: type = np.float32
) -> dict[str, np.ndarray]:
    """One run of StABL (Algorithm 1) with the paper's geometric lengths and step sizes.

    Meta weights whose update factor is ``<= 0`` are zeroed; expert ``k`` restarts
    (``v_k = 1/n``, ``w_k = eta_k``) when ``(t + 1) % L_k == 0``.

    Returns:
      Traces ``{"played", "arms", "loss", "expected_loss", "prob_best"}``, each ``(rounds,)``
      (``arms``: ``(rounds, 2)``, played then observed).
    """
    n = env.num_arms
    lengths = stabl_lengths(env.horizon)
    b = len(lengths)
    meta_eta: np.ndarray
    expert_eta: np.ndarray
    meta_eta, expert_eta = (x.astype(dtype) for x in stabl_rates(n, lengths))
    v: np.ndarray = np.full((b, n), 1.0 / n, dtype)
    w: np.ndarray = meta_eta.copy()
    out = _traces((rounds,), 2)
    for t, best, loss, u in _rounds(env, source, rounds, 2):
        p = w / w.sum()
        mix = p @ v
        top = v.max(axis=0)
        top *= top
        obs = 0.5 * top / top.sum() + v.sum(axis=0) / (2 * b)
        x, xo = _draw(mix, u[0]), _draw(obs, u[1])
        out["played"][t] = x
        out["arms"][t] = (x, xo)
        out["loss"][t] = loss[x]
        out["expected_loss"][t] = np.dot(mix, loss)
        out["prob_best"][t] = mix[best]
        c = loss[xo] / obs[xo]
        column = v[:, xo].copy()
        factor = 1.0 + meta_eta * c * (mix[xo] - column)
        w = np.where(factor > 0.0, w * factor, 0.0).astype(dtype)
        v[:, xo] = column * np.exp(-expert_eta * c)
        v /= v.sum(axis=1, keepdims=True)
        restart = (t + 1) % lengths == 0
        if restart.any():
            v[restart] = 1.0 / n
            w[restart] = meta_eta[restart]
    return out


# --- R runs at once, Python loop over rounds ------------------------------------------------


def _draw_rows(probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``(R,)`` inverse-CDF draws from the rows of ``probs`` ``(R, n)`` with ``u`` ``(R,)``."""
    cdf = np.cumsum(probs, axis=1)
    count = np.sum(cdf <= (u * cdf[:, -1])[:, None], axis=1)
    return np.minimum(count, probs.shape[1] - 1)


def exp3_vectorised(
    env: ExpertAdviceSpec, source: Source, rounds: int, num_runs: int, *, dtype: type = np.float32
) -> dict[str, np.ndarray]:
    """:func:`exp3_loop` for ``num_runs`` runs at once; traces ``(R, rounds)``."""
    n, r = env.num_arms, num_runs
    eta = exp3_rate(n, env.horizon)
    w: np.ndarray = np.full((r, n), 1.0 / n, dtype)
    rows = np.arange(r)
    out = _traces((r, rounds), 1)
    for t, best, loss, u in _rounds(env, source, rounds, 1):
        x = _draw_rows(w, u[:, 0])
        out["played"][:, t] = x
        lx = loss[rows, x]
        out["loss"][:, t] = lx
        out["expected_loss"][:, t] = np.einsum("ri,ri->r", w, loss)
        out["prob_best"][:, t] = w[:, best]
        w[rows, x] *= np.exp(-eta * lx / w[rows, x])
        w /= w.sum(axis=1, keepdims=True)
    out["arms"][..., 0] = out["played"]
    return out


def stabl_vectorised(
    env: ExpertAdviceSpec, source: Source, rounds: int, num_runs: int, *, dtype: type = np.float32
) -> dict[str, np.ndarray]:
    """:func:`stabl_loop` for ``num_runs`` runs at once; traces ``(R, rounds)``."""
    n, r = env.num_arms, num_runs
    lengths = stabl_lengths(env.horizon)
    b = len(lengths)
    meta_eta: np.ndarray
    expert_eta: np.ndarray
    meta_eta, expert_eta = (x.astype(dtype) for x in stabl_rates(n, lengths))
    v: np.ndarray = np.full((r, b, n), 1.0 / n, dtype)
    w: np.ndarray = np.tile(meta_eta, (r, 1))
    rows = np.arange(r)
    out = _traces((r, rounds), 2)
    for t, best, loss, u in _rounds(env, source, rounds, 2):
        p = w / w.sum(axis=1, keepdims=True)
        mix = np.einsum("rk,rki->ri", p, v)
        top = v.max(axis=1)
        top *= top
        obs = 0.5 * top / top.sum(axis=1, keepdims=True) + v.sum(axis=1) / (2 * b)
        x, xo = _draw_rows(mix, u[:, 0]), _draw_rows(obs, u[:, 1])
        out["played"][:, t] = x
        out["arms"][:, t, 0], out["arms"][:, t, 1] = x, xo
        out["loss"][:, t] = loss[rows, x]
        out["expected_loss"][:, t] = np.einsum("ri,ri->r", mix, loss)
        out["prob_best"][:, t] = mix[:, best]
        c = loss[rows, xo] / obs[rows, xo]  # (R,)
        column = v[rows, :, xo]  # (R, B), a copy
        factor = 1.0 + meta_eta * (c * mix[rows, xo])[:, None] - meta_eta * c[:, None] * column
        w = np.where(factor > 0.0, w * factor, 0.0).astype(dtype)
        v[rows, :, xo] = column * np.exp(-expert_eta * c[:, None])
        v /= v.sum(axis=2, keepdims=True)
        restart = (t + 1) % lengths == 0
        if restart.any():
            v[:, restart] = 1.0 / n
            w[:, restart] = meta_eta[restart]
    return out
