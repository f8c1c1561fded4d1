"""Deterministic limits and reductions of the BCO learners: full-information OGD converges to a
fixed target; Algorithm 3 and its two-query variant with a single expert on ``[0, T)`` are
two-point OGD; a swapped optax optimiser works; muting keeps the weights a distribution."""

from __future__ import annotations

import math
from functools import partial

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.tree_util import Partial

from stabl_jax.bco import (
    FullInfoOGD,
    ProjectedOGD,
    StABLBCO,
    StABLBCOParams,
    StABLBCOTwoQuery,
    TwoPointOGD,
)
from stabl_jax.domains import Ball, Box
from stabl_jax.envs.convex import MovingTarget, distance_loss, huber_loss


def _scan(learner, params, loss_of_t, horizon):
    """Scan ``horizon`` rounds; returns the final state and the stacked queried points."""
    key = jax.random.key(0)

    @jax.jit
    def run(params):
        def body(s, t):
            s, info = learner.step(s, loss_of_t(t), jax.random.fold_in(key, t))
            return s, info.points

        return jax.lax.scan(body, learner.init(key, params), jnp.arange(horizon))

    return run(params)


def test_full_information_ogd_converges_to_a_fixed_target():
    horizon = 400
    target = jnp.array([0.3, -0.5, 0.2], jnp.float32)
    learner = FullInfoOGD(dim=3, horizon=horizon)
    eta = learner.domain.D / (learner.lipschitz * math.sqrt(horizon))  # 0.05
    for family, theta in ((distance_loss, target), (huber_loss, jnp.append(target, 0.5))):
        final, points = _scan(learner, None, lambda t, f=family, th=theta: Partial(f, th), horizon)
        dist = float(jnp.linalg.norm(final.ogd.point - target))
        # constant-step subgradient descent on ||x - c|| ends within one step of c; Huber converges
        assert dist <= eta, (family.__name__, dist)
        tail = jnp.linalg.norm(points[-100:, 0] - target[None, :], axis=1)
        assert float(jnp.max(tail)) <= 2 * eta


def test_single_expert_algorithm3_and_two_query_reduce_to_two_point_ogd():
    """One history length ``T`` (``p = 1``, ``k_t = 0``, ``c = B = 1``): Algorithm 3 queries ``[y,
    y + delta u, y]`` and Appendix D ``[y, y + delta u]``, two-point OGD's ``eta``, ``delta``."""
    horizon, dim = 48, 3
    domain = Box(dim=dim, half_width=0.8)
    env = MovingTarget(dim=dim, horizon=horizon, domain=domain, change_points=(16, 30))
    env_params = env.default_params

    def loss_of_t(t):
        return env.loss_fn(env_params, t, jax.random.key(0))

    kwargs = dict(dim=dim, horizon=horizon, domain=domain, lipschitz=1.5)
    scales = (1.3, 8.0)  # lr scale, delta scale
    base = TwoPointOGD(**kwargs)
    lr, delta = map(jnp.float32, scales)
    p_base = base.default_params.replace(lr_scale=lr, delta_scale=delta)
    one, lipschitz = jnp.float32(1.0), jnp.float32(kwargs["lipschitz"])
    p_ens = StABLBCOParams(
        expert_lr_scale=lr, meta_lr_scale=one, delta_scale=delta, lipschitz=lipschitz
    )
    _, pts_b = _scan(base, p_base, loss_of_t, horizon)
    for cls in (StABLBCO, StABLBCOTwoQuery):
        learner = cls(history_lengths=(horizon,), **kwargs)
        final, pts = _scan(learner, p_ens, loss_of_t, horizon)
        np.testing.assert_allclose(pts[:, :2], pts_b, rtol=1e-5, atol=1e-6)
        if cls is StABLBCO:
            np.testing.assert_array_equal(pts[:, 2], pts[:, 0])
        # the expert restarts at t = T, after the last round: queries compared only
        assert int(final.num_muted) == 0
    assert float(jnp.std(pts_b[:, 0])) > 0.01  # it did move


def test_projected_ogd_default_is_algorithm4_and_optimiser_is_swappable():
    ball = Ball(dim=2, radius=1.0)
    ogd = ProjectedOGD(ball)
    state = ogd.init(jnp.array([0.1, 0.2]))
    g = jnp.array([1.0, -3.0])
    new = ogd.update(state, g, 0.5, 0.25)
    expected = jnp.array([0.1, 0.2]) - 0.5 * g
    expected = expected * min(1.0, 0.75 / float(jnp.linalg.norm(expected)))
    np.testing.assert_allclose(new.point, expected, rtol=1e-6)

    # Adam as the experts' base optimiser: runs under scan, stays feasible
    horizon = 32
    adam = optax.adam(1.0)
    learner = StABLBCO(dim=2, horizon=horizon, history_lengths=(4, 16), optimizer=adam)
    assert learner == StABLBCO(dim=2, horizon=horizon, history_lengths=(4, 16), optimizer=adam)
    env = MovingTarget(dim=2, horizon=horizon)
    state0 = learner.init(jax.random.key(0))
    loss_of_t = partial(env.loss_fn, env.default_params, key=jax.random.key(0))
    final, pts = _scan(learner, None, loss_of_t, horizon)
    chex.assert_trees_all_equal_shapes_and_dtypes(final, state0)
    assert jax.tree.leaves(final.experts.opt_state)[0].shape[0] == 2  # stacked per expert
    assert bool(jnp.all(jax.vmap(learner.domain.contains)(pts.reshape(-1, 2))))
    assert bool(jnp.all(jnp.isfinite(pts)))


def test_long_horizon_muting_keeps_weights_finite_and_normalised():
    """T = 2^12: weights muted, never NaN, an expert alive, ``p`` summing to one every round."""
    horizon = 4096
    learner = StABLBCO(dim=2, horizon=horizon)
    env = MovingTarget(dim=2, horizon=horizon, schedule="drift")
    key = jax.random.key(0)

    @jax.jit
    def run():
        def body(s, t):
            s, info = learner.step(s, env.loss_fn(env.default_params, t, key), key)
            p = learner.meta_probs(s)
            alive = jnp.any(jnp.isfinite(s.meta_log_weights))
            ok = alive & jnp.all(jnp.isfinite(p)) & (jnp.abs(jnp.sum(p) - 1.0) < 1e-5)
            return s, ok & jnp.all(jnp.isfinite(info.points))

        return jax.lax.scan(body, learner.init(key), jnp.arange(horizon))

    final, ok = run()
    assert bool(jnp.all(ok))
    assert int(final.num_muted) > 0
    assert not bool(jnp.any(jnp.isnan(final.meta_log_weights)))
