"""The BCO learners against plain float64 NumPy loops fed the same draws, round by round:
Algorithm 3 and its two-query variant against ``tests/bco/reference_bco.py`` (in float32 the
two-point estimate divides rounding errors by ``delta``: trajectories drift ~1e-5 a round), and
the baselines against their stated rules on ``l_t(x) = ||x - c_t||`` over a ball of radius
``R`` (``r = D = R``, ``kappa = 1``, ``G = 1``), points within 1e-9 every round.

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
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax.bco import FKM, FullInfoOGD, StABLBCO, StABLBCOParams, StABLBCOTwoQuery, TwoPointOGD
from stabl_jax.domains import Ball, Box
from stabl_jax.envs.convex import MovingTarget, distance_loss
from tests.bco.reference_bco import ReferenceStABLBCO, project

HORIZON = 40
LENGTHS = (4, 8, 16)
T, DIM, RADIUS = 60, 3, 0.8


@partial(jax.jit, static_argnums=(0, 1))
def _round(learner, env, state, env_params, t, key):
    """The learner's step and, for the reference, the draws it consumed and the target."""
    loss_fn = env.loss_fn(env_params, t, key)
    new_state, info = learner.step(state, loss_fn, key)
    return new_state, info, learner.draws(key), loss_fn.args[0]


LOG_T_OFFSET_1 = {"scale_factor": "log_T", "round_offset": 1}
CASES = {
    # name: (class, domain kind, size, dim, options, params (expert, meta, delta))
    "alg3_ball": (StABLBCO, "ball", 0.7, 3, {}, (1.0, 1.0, 3.0)),
    "alg3_box_logT_offset1": (StABLBCO, "box", 1.5, 2, LOG_T_OFFSET_1, (2.0, 0.5, 1.0)),
    "two_query_ball": (StABLBCOTwoQuery, "ball", 1.0, 3, {}, (1.0, 1.0, 2.0)),
    "two_query_box": (StABLBCOTwoQuery, "box", 0.6, 2, {"round_offset": 1}, (3.0, 4.0, 5.0)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_numpy_reference_step_by_step(case):
    with jax.enable_x64(True):
        _compare(case)


def _compare(case):
    cls, kind, size, dim, options, (s_exp, s_meta, s_delta) = CASES[case]
    domain = Ball(dim=dim, radius=size) if kind == "ball" else Box(dim=dim, half_width=size)
    sizes = dict(dim=dim, horizon=HORIZON)
    learner = cls(**sizes, domain=domain, history_lengths=LENGTHS, dtype="float64", **options)
    scales = dict(expert_lr_scale=s_exp, meta_lr_scale=s_meta, delta_scale=s_delta)
    numbers = scales | {"lipschitz": learner.lipschitz}
    params = StABLBCOParams(**{name: jnp.float64(value) for name, value in numbers.items()})
    shape = dict(lengths=LENGTHS, kind=kind, size=size, two_query=cls is StABLBCOTwoQuery)
    ref = ReferenceStABLBCO(**sizes, **shape, **numbers, **options)
    env = MovingTarget(dim=dim, horizon=HORIZON, domain=domain, change_points=(9, 23, 30))
    env_params = env.sample_params(jax.random.key(7))
    state = learner.init(jax.random.key(0), params)
    restarts = 0
    for t in range(HORIZON):
        key = jax.random.fold_in(jax.random.key(1), t)
        state, info, draws, target = _round(learner, env, state, env_params, t, key)
        target = np.asarray(target, np.float64)
        direction = np.asarray(draws.direction, np.float64)
        distance = partial(lambda c, x: float(np.linalg.norm(x - c)), target)
        points, observed = ref.step(distance, int(draws.expert), direction)
        assert info.points.dtype == jnp.float64
        np.testing.assert_allclose(info.points, points, atol=1e-9, err_msg=f"points, t={t}")
        np.testing.assert_allclose(info.observed, observed, atol=1e-9, err_msg=f"loss, t={t}")
        np.testing.assert_allclose(state.experts.point, ref.experts, atol=1e-9, err_msg=f"t={t}")
        weights = np.exp(np.asarray(state.meta_log_weights, np.float64))
        np.testing.assert_allclose(weights, ref.w, rtol=1e-9, atol=1e-12, err_msg=f"w, t={t}")
        assert int(state.num_muted) == ref.num_muted, t
        restarts += int(np.any((t + 1 + ref.offset) % np.asarray(LENGTHS) == 0))
    assert restarts >= 3
    if case != "two_query_ball":
        assert ref.num_muted > 0  # the muting branch is exercised (and matched)


def _targets() -> np.ndarray:
    rng = np.random.default_rng(7)
    c = rng.normal(size=(T, DIM))
    c[T // 2 :] = -c[T // 2 :]  # a jump half-way
    return 0.6 * c / np.linalg.norm(c, axis=1, keepdims=True)


def _loss(c: np.ndarray, x: np.ndarray) -> float:
    return float(np.linalg.norm(x - c))


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
            loss_fn = jax.tree_util.Partial(distance_loss, jnp.asarray(c))
            state, info = step(state, loss_fn, keys[t])
            u = np.asarray(learner.draws(keys[t]).direction)
            if name == "fkm":
                cb = 2 * g * big_d
                delta = min(T**-0.25 * math.sqrt(big_d * d * cb * r / (3 * (g * r + cb))), r)
                eta = big_d / (cb * math.sqrt(T)) * delta / d
                x = y + delta * u
                grad = d / delta * _loss(c, x) * u
                y = project("ball", RADIUS, y - eta * grad, 1 - delta / r)
            elif name == "two_point_ogd":
                delta = min(1.0 / T, r)
                alpha = min(1.0, max(delta, delta / r))
                eta = big_d / (d * g * math.sqrt(T))
                x = y
                grad = d / delta * (_loss(c, y + delta * u) - _loss(c, y)) * u
                y = project("ball", RADIUS, y - eta * grad, 1 - alpha)
            else:
                eta = big_d / (g * math.sqrt(T))
                x = y
                y = project("ball", RADIUS, y - eta * (y - c) / np.linalg.norm(y - c), 1.0)
            np.testing.assert_allclose(np.asarray(info.played), x, atol=1e-9, err_msg=str(t))
            np.testing.assert_allclose(float(info.loss), _loss(c, x), atol=1e-9)
        np.testing.assert_allclose(np.asarray(state.ogd.point), y, atol=1e-9)
