"""Algorithm 3 and its two-query variant against the independent NumPy reference
(``tests/bco/reference_bco.py``), fed the same draws, compared round by round.

The learners run with ``dtype="float64"`` (inside ``jax.enable_x64``) so the comparison is
tight: in float32 the two-point estimate divides rounding errors of the observed losses by
``delta = 1 / (kappa T)`` and trajectories drift apart by ~1e-5 per round, which would hide
real discrepancies behind a loose tolerance. Float32 behaviour is covered by the contract
tests."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax.bco import StABLBCO, StABLBCOParams, StABLBCOTwoQuery
from stabl_jax.domains import Ball, Box
from stabl_jax.envs.convex import MovingTarget
from tests.bco.reference_bco import ReferenceStABLBCO

HORIZON = 40
LENGTHS = (4, 8, 16)


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
        points, observed = ref.step(
            lambda x, c=target: float(np.linalg.norm(x - c)),
            int(draws.expert),
            np.asarray(draws.direction, np.float64),
        )
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
