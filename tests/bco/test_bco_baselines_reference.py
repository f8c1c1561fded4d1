"""The BCO baselines (FKM, two-point OGD, full-information OGD) against plain NumPy loops
written from their stated update rules, fed the same sphere draws, on the distance loss
``l_t(x) = ||x - c_t||`` over a Euclidean ball of radius ``R`` (so ``r = D = R``, ``kappa = 1``,
``G = 1``). Float64 on both sides; points must agree to 1e-9 every round.

Rules (Flaxman et al. 2005, Thm 3.3; Agarwal et al. 2010; Zinkevich 2003), start at the centre:

- FKM: ``C = 2 G D``, ``delta = min(T^-1/4 sqrt(D d C r / (3 (G r + C))), r)``,
  ``eta = (D / (C sqrt T)) delta / d``; play ``x = y + delta u``,
  ``y <- proj_{(1 - delta/r) K}(y - eta (d/delta) l(x) u)``.
- two-point OGD: ``delta = min(1/(kappa T), r)``, ``alpha = min(1, max(kappa delta, delta/r))``,
  ``eta = D / (d G sqrt T)``; play ``y``, observe ``y + delta u``,
  ``y <- proj_{(1 - alpha) K}(y - eta (d/delta)(l(y + delta u) - l(y)) u)``.
- full information: ``eta = D / (G sqrt T)``; ``x <- proj_K(x - eta (x - c)/||x - c||)``.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from stabl_jax.bco import FKM, FullInfoOGD, TwoPointOGD
from stabl_jax.domains import Ball

T, DIM, RADIUS = 60, 3, 0.8


def _project_ball(y: np.ndarray, radius: float) -> np.ndarray:
    norm = np.linalg.norm(y)
    return y if norm <= radius else y * (radius / norm)


def _targets() -> np.ndarray:
    rng = np.random.default_rng(7)
    c = rng.normal(size=(T, DIM))
    c[T // 2 :] = -c[T // 2 :]  # a jump half-way
    return 0.6 * c / np.linalg.norm(c, axis=1, keepdims=True)


def _loss(c: np.ndarray, x: np.ndarray) -> float:
    return float(np.linalg.norm(x - c))


def _jax_loss(c, x):
    return jax.numpy.linalg.norm(x - c)


@pytest.mark.parametrize("name", ["fkm", "two_point_ogd", "ogd_full_info"])
def test_baseline_matches_numpy_rules(name):
    targets = _targets()
    with jax.enable_x64(True):
        domain = Ball(dim=DIM, radius=RADIUS)
        cls = {"fkm": FKM, "two_point_ogd": TwoPointOGD, "ogd_full_info": FullInfoOGD}[name]
        learner = cls(dim=DIM, horizon=T, domain=domain, dtype="float64")
        state = learner.init(jax.random.key(0))
        step = jax.jit(learner.step)
        keys = jax.random.split(jax.random.key(1), T)
        d, r, big_d, g = DIM, RADIUS, RADIUS, 1.0
        y = np.zeros(DIM)
        for t in range(T):
            c = targets[t]
            loss_fn = jax.tree_util.Partial(_jax_loss, jax.numpy.asarray(c))
            state, info = step(state, loss_fn, keys[t])
            u = np.asarray(learner.draws(keys[t]).direction)
            if name == "fkm":
                cb = 2 * g * big_d
                delta = min(T**-0.25 * math.sqrt(big_d * d * cb * r / (3 * (g * r + cb))), r)
                eta = big_d / (cb * math.sqrt(T)) * delta / d
                x = y + delta * u
                grad = d / delta * _loss(c, x) * u
                y = _project_ball(y - eta * grad, (1 - delta / r) * RADIUS)
            elif name == "two_point_ogd":
                delta = min(1.0 / T, r)
                alpha = min(1.0, max(delta, delta / r))
                eta = big_d / (d * g * math.sqrt(T))
                x = y
                grad = d / delta * (_loss(c, y + delta * u) - _loss(c, y)) * u
                y = _project_ball(y - eta * grad, (1 - alpha) * RADIUS)
            else:
                eta = big_d / (g * math.sqrt(T))
                x = y
                y = _project_ball(y - eta * (y - c) / np.linalg.norm(y - c), RADIUS)
            np.testing.assert_allclose(np.asarray(info.played), x, atol=1e-9, err_msg=str(t))
            np.testing.assert_allclose(float(info.loss), _loss(c, x), atol=1e-9)
        np.testing.assert_allclose(np.asarray(state.ogd.point), y, atol=1e-9)
