"""Host-side (NumPy, float64) generator of COCO's BBOB instances."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

NUM_FUNCTIONS = 24

#: Number of Gallagher peaks of f21 and f22.
GALLAGHER_PEAKS = {21: 101, 22: 21}
#: Schaffers F7 conditioning of f17 and f18.
SCHAFFERS_CONDITION = {17: 10.0, 18: 1000.0}
#: ``2 |x_opt,i|`` of f20 as hard-coded in COCO (``0.5 * 4.2096874637`` per coordinate).
SCHWEFEL_TWICE_XOPT = 4.2096874637
#: The optimum COCO reports for f20 (``transform_vars_x_hat.c``); differs from the above at 1e-10.
SCHWEFEL_BEST = 0.5 * 4.2096874633
#: Lunacek bi-Rastrigin: first funnel centre ``mu_0`` and the ``d`` constant of f24.
LUNACEK_MU0 = 2.5
LUNACEK_D = 1.0


class BBOBInstance(NamedTuple):
    """The arrays that pin down one COCO BBOB instance (float64, read-only).

    Attributes:
      x_opt: ``(d,)`` COCO's optimum (``best_parameter``).
      f_opt: ``()`` the optimal value.
      shift: ``(d,)`` offset subtracted before the first linear map (COCO's internal ``xopt``).
      signs: ``(d,)`` the ``±1`` vector of f20 and f24 (ones otherwise).
      R: ``(d, d)`` rotation from seed ``rseed + 1000000`` (identity when unused).
      Q: ``(d, d)`` rotation from seed ``rseed`` (identity when unused).
      M: ``(d, d)`` the function's composite linear map (identity when unused).
      peaks: ``(p, d)`` Gallagher local optima ``y_i`` (``p = 0`` otherwise).
      peak_scales: ``(p, d)`` Gallagher per-peak conditioning ``C_i``.
      peak_heights: ``(p,)`` Gallagher peak heights ``w_i``.
    """

    x_opt: np.ndarray
    f_opt: np.ndarray
    shift: np.ndarray
    signs: np.ndarray
    R: np.ndarray
    Q: np.ndarray
    M: np.ndarray
    peaks: np.ndarray
    peak_scales: np.ndarray
    peak_heights: np.ndarray


# --- COCO's legacy random numbers ---------------------------------------------------------------
def legacy_uniform(n: int, seed: int) -> np.ndarray:
    """``bbob2009_unif``: ``n`` uniforms in (0, 1] from the shuffled Park-Miller sequence."""

    def park_miller(state: int) -> int:
        """Schrage's trick for ``16807 * state mod (2^31 - 1)``; Python ints are exact."""
        tmp = state // 127773
        state = 16807 * (state - tmp * 127773) - 2836 * tmp
        return state + 2147483647 if state < 0 else state

    state = max(abs(int(seed)), 1)
    table = [0] * 32
    for i in range(39, -1, -1):
        state = park_miller(state)
        if i < 32:
            table[i] = state
    current = table[0]
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        state = park_miller(state)
        slot = current // 67108865
        current = table[slot]
        table[slot] = state
        out[i] = current / 2.147483647e9
    out[out == 0.0] = 1e-99
    return out


def legacy_gauss(n: int, seed: int) -> np.ndarray:
    """``bbob2009_gauss``: Box-Muller on ``2 n`` legacy uniforms (first half radii)."""
    u = legacy_uniform(2 * n, seed)
    g = np.sqrt(-2.0 * np.log(u[:n])) * np.cos(2.0 * math.pi * u[n:])
    g[g == 0.0] = 1e-99
    return g


def legacy_rotation(seed: int, dim: int) -> np.ndarray:
    """``bbob2009_compute_rotation``: modified Gram-Schmidt on the columns of a Gaussian matrix.

    The Gaussian vector fills the matrix column by column (``B[i][j] = g[j * dim + i]``).
    """
    b = legacy_gauss(dim * dim, seed).reshape(dim, dim).T.copy()
    for i in range(dim):
        for j in range(i):
            b[:, i] -= np.dot(b[:, i], b[:, j]) * b[:, j]
        b[:, i] /= math.sqrt(np.dot(b[:, i], b[:, i]))
    return b


def legacy_xopt(seed: int, dim: int) -> np.ndarray:
    """``bbob2009_compute_xopt``: uniform on the 1e-4 grid of [-4, 4), 0 replaced by -1e-5."""
    u = legacy_uniform(dim, seed)
    x = 8.0 * np.floor(1e4 * u) / 1e4 - 4.0
    x[x == 0.0] = -1e-5
    return x


def legacy_fopt(function_id: int, instance: int) -> float:
    """``bbob2009_compute_fopt``: Cauchy-like ratio of two Gaussians, rounded to 0.01, in ±1000."""
    seed = instance_seed(function_id, instance)
    ratio = legacy_gauss(1, seed)[0] / legacy_gauss(1, seed + 1)[0]
    value = math.floor(100.0 * 100.0 * ratio + 0.5) / 100.0
    return min(1000.0, max(-1000.0, value))


def instance_seed(function_id: int, instance: int) -> int:
    """``rseed`` of ``coco_get_bbob_problem``: f4 borrows f3's seed and f18 f17's."""
    base = {4: 3, 18: 17}.get(function_id, function_id)
    return base + 10000 * instance


# --- Per-function set-up --------------------------------------------------------------------------
def _composite(r: np.ndarray, diag: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``R diag(lambda) Q`` as COCO's affine set-up computes it."""
    return (r * diag[None, :]) @ q


def _gallagher(
    dim: int, rseed: int, num_peaks: int, q: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Peaks, scales, heights and optimum of f21/f22 (``f_gallagher_bbob_problem_allocate``)."""
    max_condition = 1000.0
    if num_peaks == 101:
        first_condition, b, c = math.sqrt(max_condition), 10.0, 5.0
    else:
        first_condition, b, c = max_condition, 9.8, 4.9
    # Condition numbers of peaks 1..p-1: a random permutation of 1000^(k / (p - 2)).
    order = np.argsort(legacy_uniform(num_peaks - 1, rseed), kind="stable")
    conditions = np.concatenate([[first_condition], max_condition ** (order / (num_peaks - 2.0))])
    heights = np.concatenate(
        [[10.0], 1.1 + (9.1 - 1.1) * np.arange(num_peaks - 1) / (num_peaks - 2.0)]
    )
    scales = np.empty((num_peaks, dim))
    for i in range(num_peaks):
        perm = np.argsort(legacy_uniform(dim, rseed + 1000 * i), kind="stable")
        scales[i] = conditions[i] ** (perm / (dim - 1.0) - 0.5)
    u = legacy_uniform(dim * num_peaks, rseed).reshape(num_peaks, dim)
    centres = b * u - c  # (p, d), unrotated
    centres[0] *= 0.8
    peaks = centres @ q.T  # y_i = Q (b u_i - c)
    x_opt = centres[0].copy()
    return peaks, scales, heights, x_opt


@functools.lru_cache(maxsize=512)
def build_instance(function_id: int, dim: int, instance: int) -> BBOBInstance:
    """Arrays of BBOB function ``function_id`` (1..24) in dimension ``dim``, ``instance``.

    Args:
      function_id: BBOB function number, 1..24.
      dim: dimension ``d >= 2`` (COCO stops at 44; larger ``d`` uses the same generators).
      instance: COCO instance id (>= 1).

    Returns:
      A :class:`BBOBInstance` of read-only float64 arrays.
    """
    f, d, i = int(function_id), int(dim), int(instance)
    if not 1 <= f <= NUM_FUNCTIONS:
        raise ValueError(f"function_id must be in 1..{NUM_FUNCTIONS}, got {function_id!r}")
    if d < 2:
        raise ValueError(f"dim must be >= 2, got {dim!r}")
    if i < 1:
        raise ValueError(f"instance must be >= 1, got {instance!r}")
    eye = np.eye(d)
    fields: dict[str, np.ndarray] = {
        "shift": np.zeros(d),
        "signs": np.ones(d),
        "R": eye,
        "Q": eye,
        "M": eye,
        "peaks": np.zeros((0, d)),  # no Gallagher peaks outside f21/f22
        "peak_scales": np.zeros((0, d)),
        "peak_heights": np.zeros((0,)),
    }
    fields.update(_setup(f, d, instance_seed(f, i)))
    fields.setdefault("x_opt", fields["shift"].copy())
    f_opt = np.asarray(legacy_fopt(f, i), dtype=np.float64)
    arrays = BBOBInstance(f_opt=f_opt, **fields)
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _setup(f: int, d: int, rseed: int) -> dict[str, np.ndarray]:
    """The arrays of function ``f`` that differ from the defaults (``f_*_allocate``)."""
    expo = np.arange(d, dtype=np.float64) / (d - 1.0)  # 0, 1/(d-1), ..., 1: COCO's exponents
    if f in (1, 2, 3):
        return {"shift": legacy_xopt(rseed, d)}
    if f == 4:
        shift = legacy_xopt(rseed, d)
        shift[::2] = np.abs(shift[::2])  # in COCO's legacy code, not in the function definition
        return {"shift": shift}
    if f == 5:
        return {"x_opt": np.where(legacy_xopt(rseed, d) < 0.0, -5.0, 5.0)}
    if f in (6, 7, 13, 15, 16, 17, 18, 23):
        r = legacy_rotation(rseed + 1000000, d)
        q = legacy_rotation(rseed, d)
        out = {"shift": legacy_xopt(rseed, d), "R": r, "Q": q}
        if f in (6, 13, 15):
            out["M"] = _composite(r, np.sqrt(10.0) ** expo, q)
        elif f == 16:
            out["M"] = _composite(r, (1.0 / math.sqrt(100.0)) ** expo, q)
        elif f in (17, 18):
            out["M"] = np.sqrt(SCHAFFERS_CONDITION[f]) ** expo[:, None] * q
        elif f == 23:
            out["M"] = _composite(r, np.sqrt(100.0) ** expo, q)
        return out
    if f == 8:
        return {"shift": 0.75 * legacy_xopt(rseed, d)}  # z = max(1, sqrt(d)/8) (x - shift) + 1
    if f in (9, 19):
        q = legacy_rotation(rseed, d)
        factor = max(1.0, math.sqrt(d) / 8.0)
        return {"Q": q, "M": factor * q, "x_opt": q.sum(axis=0) / (2.0 * factor)}
    if f in (10, 11, 14):
        return {"shift": legacy_xopt(rseed, d), "R": legacy_rotation(rseed + 1000000, d)}
    if f == 12:
        return {"shift": legacy_xopt(rseed + 1000000, d), "R": legacy_rotation(rseed + 1000000, d)}
    if f == 20:
        signs = np.where(legacy_uniform(d, rseed) - 0.5 < 0.0, -1.0, 1.0)
        return {"signs": signs, "M": np.diag(np.sqrt(10.0) ** expo), "x_opt": SCHWEFEL_BEST * signs}
    if f in (21, 22):
        q = legacy_rotation(rseed, d)
        peaks, scales, heights, x_opt = _gallagher(d, rseed, GALLAGHER_PEAKS[f], q)
        return {
            "Q": q,
            "peaks": peaks,
            "peak_scales": scales,
            "peak_heights": heights,
            "x_opt": x_opt,
        }
    r = legacy_rotation(rseed + 1000000, d)  # f24
    q = legacy_rotation(rseed, d)
    x_opt = np.where(legacy_gauss(d, rseed) < 0.0, -0.5, 0.5) * LUNACEK_MU0
    return {
        "R": r,
        "Q": q,
        "M": _composite(r, np.sqrt(100.0) ** expo, q),
        "x_opt": x_opt,
        "signs": np.sign(x_opt),
    }
