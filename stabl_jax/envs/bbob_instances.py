"""Host-side (NumPy, float64) generator of COCO's BBOB instances, bit-for-bit where it matters.

COCO (Hansen et al., "COCO: a platform for comparing continuous optimizers in a black-box
setting", Optim. Methods Softw. 2021) draws every BBOB instance from a legacy 2009 generator:
a Park-Miller ("minimal standard") congruential sequence shuffled through a 32-entry table
(``bbob2009_unif`` in ``code-experiments/src/suite_bbob_legacy_code.c``), a Box-Muller step on
top of it (``bbob2009_gauss``), and a Gram-Schmidt orthonormalisation of a Gaussian matrix
(``bbob2009_compute_rotation``). The seed of function ``f`` in instance ``i`` is
``rseed = f + 10000 i`` (``coco_get_bbob_problem`` in ``suite_bbob.c``), except that f4 uses the
seed of f3 and f18 the seed of f17. This module re-implements those generators and the
per-function set-up code (``f_*_bbob_problem_allocate``) so that :mod:`stabl_jax.envs.bbob`
evaluates the same instances as the ``cocoex`` package; the integer and ``floor`` steps are
exact, the floating-point steps agree to a few ulps (sum orders differ).

Nothing here imports JAX or ``cocoex``: :func:`build_instance` returns plain read-only arrays,
cached per ``(function_id, dim, instance)``.

Naming. ``R`` is COCO's ``rot1`` (seed ``rseed + 1000000``) and ``Q`` its ``rot2`` (seed
``rseed``); the functions that use a single rotation seeded by ``rseed`` (f9, f19, f21, f22)
find it in ``Q``. ``M`` is the composite linear map a function applies in one go (for
example ``R diag(lambda) Q``), computed here once in float64 as COCO does.
"""

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
      x_opt: ``(d,)`` the location COCO reports as optimal (``best_parameter``).
      f_opt: ``()`` the optimal value ``bbob2009_compute_fopt(function, instance)``.
      shift: ``(d,)`` the offset subtracted from ``x`` before the first linear map (COCO's
        internal ``xopt``; zeros where the function does not shift: f5, f9, f19, f20-24).
      signs: ``(d,)`` the ``±1`` vector of the x-hat step of f20 and f24 (ones otherwise).
      R: ``(d, d)`` rotation from seed ``rseed + 1000000`` (identity when unused).
      Q: ``(d, d)`` rotation from seed ``rseed`` (identity when unused).
      M: ``(d, d)`` composite linear map of the function (identity when unused).
      peaks: ``(p, d)`` Gallagher local optima ``y_i`` in the rotated frame (``p = 0`` otherwise).
      peak_scales: ``(p, d)`` Gallagher per-peak diagonal conditioning ``C_i``.
      peak_heights: ``(p,)`` Gallagher peak heights ``w_i`` (10 for the global one).
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
    """Arrays of BBOB function ``function_id`` (1..24) in dimension ``dim`` (>= 2), ``instance``.

    Args:
      function_id: BBOB function number, 1..24.
      dim: search-space dimension ``d >= 2``. COCO itself stops at 44 (its rotation buffer);
        larger ``d`` extends the same generators unchanged.
      instance: COCO instance id (>= 1; the BBOB suites use 1-15, 21-110, ...).

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
    rseed = instance_seed(f, i)
    f_opt = legacy_fopt(f, i)
    expo = np.arange(d, dtype=np.float64) / (d - 1.0)  # 0, 1/(d-1), ..., 1: COCO's exponents
    r = q = m = np.eye(d)
    shift = np.zeros(d)
    signs = np.ones(d)
    x_opt = None
    peaks = np.zeros((0, d))  # no Gallagher peaks outside f21/f22
    peak_scales = np.zeros((0, d))
    peak_heights = np.zeros((0,))

    if f in (1, 2, 3):
        shift = legacy_xopt(rseed, d)
    elif f == 4:
        shift = legacy_xopt(rseed, d)
        shift[::2] = np.abs(shift[::2])  # in COCO's legacy code, not in the function documentation
    elif f == 5:
        x_opt = np.where(legacy_xopt(rseed, d) < 0.0, -5.0, 5.0)
    elif f in (6, 7, 13, 15, 16, 17, 18, 23):
        shift = legacy_xopt(rseed, d)
        r = legacy_rotation(rseed + 1000000, d)
        q = legacy_rotation(rseed, d)
        if f in (6, 13, 15):
            m = _composite(r, np.sqrt(10.0) ** expo, q)
        elif f == 16:
            m = _composite(r, (1.0 / math.sqrt(100.0)) ** expo, q)
        elif f in (17, 18):
            m = np.sqrt(SCHAFFERS_CONDITION[f]) ** expo[:, None] * q
        elif f == 23:
            m = _composite(r, np.sqrt(100.0) ** expo, q)
    elif f == 8:
        shift = 0.75 * legacy_xopt(rseed, d)  # z = max(1, sqrt(d)/8) (x - shift) + 1
    elif f in (9, 19):
        q = legacy_rotation(rseed, d)
        factor = max(1.0, math.sqrt(d) / 8.0)
        m = factor * q
        x_opt = q.sum(axis=0) / (2.0 * factor)  # solves factor Q x + 1/2 = 1
    elif f in (10, 11, 14):
        shift = legacy_xopt(rseed, d)
        r = legacy_rotation(rseed + 1000000, d)
    elif f == 12:
        shift = legacy_xopt(rseed + 1000000, d)
        r = legacy_rotation(rseed + 1000000, d)
    elif f == 20:
        signs = np.where(legacy_uniform(d, rseed) - 0.5 < 0.0, -1.0, 1.0)
        m = np.diag(np.sqrt(10.0) ** expo)
        x_opt = SCHWEFEL_BEST * signs
    elif f in (21, 22):
        q = legacy_rotation(rseed, d)
        peaks, peak_scales, peak_heights, x_opt = _gallagher(d, rseed, GALLAGHER_PEAKS[f], q)
    elif f == 24:
        r = legacy_rotation(rseed + 1000000, d)
        q = legacy_rotation(rseed, d)
        m = _composite(r, np.sqrt(100.0) ** expo, q)
        x_opt = np.where(legacy_gauss(d, rseed) < 0.0, -0.5, 0.5) * LUNACEK_MU0
        signs = np.sign(x_opt)

    if x_opt is None:
        x_opt = shift.copy()
    arrays = BBOBInstance(
        x_opt=x_opt,
        f_opt=np.asarray(f_opt, dtype=np.float64),
        shift=shift,
        signs=signs,
        R=r,
        Q=q,
        M=m,
        peaks=peaks,
        peak_scales=peak_scales,
        peak_heights=peak_heights,
    )
    for a in arrays:
        a.flags.writeable = False
    return arrays
