"""BCO simulation (``stabl_jax.simulate``), the adaptive-regret metric against brute force,
and the convex environments (``stabl_jax.envs.convex``)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import SimOptions, simulate
from stabl_jax.bco import TwoPointOGD
from stabl_jax.bco import simulate as bco_simulate
from stabl_jax.bco.simulate import (
    _check_domain,
    bco_adaptive_regret,
    minimize_window,
    regenerate_thetas,
    sa_memory_bytes,
    sa_runs_per_block,
    window_comparators,
    window_starts,
)
from stabl_jax.domains import Box
from stabl_jax.envs.convex import (
    AbsoluteLinear,
    CustomConvex,
    HuberTarget,
    MovingTarget,
    abs_linear_loss,
    distance_loss,
    huber_loss,
)
from stabl_jax.experiment.kinds import load_config

H = 0.01  # spacing of the brute-force grid over the unit disc


def _disc_grid() -> jax.Array:
    axis = np.arange(-1.0, 1.0 + H / 2, H)
    grid = np.stack(np.meshgrid(axis, axis), axis=-1).reshape(-1, 2)
    return jnp.asarray(grid[np.linalg.norm(grid, axis=1) <= 1.0], jnp.float32)


@partial(jax.jit, static_argnums=0)
def _grid_values(family, thetas, grid):
    """``(..., T, G)`` per-round losses of ``thetas`` ``(..., T, p)`` on a grid of points."""

    def one(th):
        return jax.vmap(lambda x: family(th, x))(grid)

    return jax.vmap(jax.vmap(one))(thetas) if thetas.ndim == 3 else jax.vmap(one)(thetas)


def test_simulate_bco_and_adaptive_regret_against_brute_force():
    """Chunk sizes change nothing; the per-round minimum is 0; ``SA(L)`` matches a brute force
    over a grid of the disc (within ``L G H``), windows of 4 (exact median) and of T (Weiszfeld)."""
    horizon = 24
    env = MovingTarget(dim=2, horizon=horizon, random_change_points=True, num_segments=3)
    learner = TwoPointOGD(dim=2, horizon=horizon)
    traces = ("loss", "best_loss", "played")
    full = simulate(learner, env, jax.random.key(0), num_runs=3, traces=traces)
    chunked = simulate(learner, env, jax.random.key(0), 3, options=SimOptions(chunk_size=12))
    assert full.loss.shape == (3, horizon) and full.played.shape == (3, horizon, 2)
    assert chunked.played is None
    np.testing.assert_array_equal(chunked.loss, full.loss)
    np.testing.assert_array_equal(full.best_loss, 0.0)
    assert np.all(full.loss >= 0.0) and full.compile_seconds > 0.0
    thetas = regenerate_thetas(env, full.carry.env_params, full.carry.env_key, horizon)
    distance = np.linalg.norm(full.played - np.asarray(thetas), axis=2)
    np.testing.assert_allclose(distance, full.loss, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="domain"):
        simulate(TwoPointOGD(dim=2, horizon=horizon, domain=Box(dim=2)), env, None, 1)

    lengths = (4, horizon)
    metric = bco_adaptive_regret(full, env, lengths, stride=1)
    values = np.asarray(_grid_values(env.family, thetas, _disc_grid()), np.float64)  # (R, T, G)
    prefix = np.concatenate([np.zeros((3, 1, values.shape[2])), np.cumsum(values, 1)], 1)
    brute = np.empty((3, len(lengths)))
    for j, length in enumerate(lengths):
        for r in range(3):
            brute[r, j] = max(
                float(full.loss[r, s : s + length].astype(np.float64).sum())
                - (prefix[r, s + length] - prefix[r, s]).min()
                for s in range(horizon - length + 1)
            )
    slack = np.asarray(lengths) * env.lipschitz * H
    assert np.all(metric["sa"] >= brute - 1e-4), (metric["sa"], brute)
    assert np.all(metric["sa"] <= brute + slack), (metric["sa"], brute)
    # The Frank-Wolfe certificate: the exact SA lies in [sa, sa + gap]; tight here.
    assert np.all(metric["comparator_gap"] >= 0.0) and np.all(metric["comparator_gap"] < 0.05)
    assert not np.allclose(metric["sa"][:, 0], metric["sa"][:, 1])


@jax.jit
def _generic_solver_cases(grid):
    """Window comparators of :func:`minimize_window` (Huber, absolute-linear) and by grid."""
    huber = HuberTarget(dim=2, horizon=8, change_points=(3,), huber_mu=0.3)
    absl = AbsoluteLinear(dim=2, horizon=8, change_points=(5,))
    out = {}
    key = jax.random.key(11)
    for name, env in (("huber", huber), ("abs_linear", absl)):
        params = env.sample_params(key)
        keys = jax.vmap(lambda t: jax.random.fold_in(key, t))(jnp.arange(8))
        thetas = jax.vmap(partial(env.theta, params))(jnp.arange(8), keys)
        _, value = minimize_window(env.family, thetas, env.domain, env.lipschitz, env.smoothness)
        grid_sum = jnp.sum(_grid_values(env.family, thetas, grid), axis=0)
        out[name] = (value, jnp.min(grid_sum))
    return out


def test_generic_window_solver_against_brute_force():
    """At most the grid minimum and within ``L G H`` of it (Huber), or within the subgradient
    method's tolerance ``0.05 G 2D`` per round (absolute-linear)."""
    out = jax.device_get(_generic_solver_cases(_disc_grid()))
    value, grid_min = out["huber"]
    assert value <= grid_min + 1e-5 and value >= grid_min - 8 * H
    value, grid_min = out["abs_linear"]
    assert value <= grid_min + 8 * 0.05 * 2.0 and value >= grid_min - 8 * H


def test_window_grid_and_default_stride():
    np.testing.assert_array_equal(window_starts(10, 4, 3), [0, 3, 6])
    np.testing.assert_array_equal(window_starts(10, 4, 4), [0, 4, 6])
    np.testing.assert_array_equal(window_starts(10, 10, 1), [0])
    with pytest.raises(ValueError):
        window_starts(10, 11, 1)


def l1_target(theta, x):
    return jnp.sum(jnp.abs(x - theta))


def _identity(theta):
    return theta


ENVS = {
    "abs_linear_drift_box": AbsoluteLinear(
        dim=3, horizon=40, schedule="drift", domain=Box(dim=3, half_width=0.5), a_scale=2.0
    ),
    "huber_piecewise_random": HuberTarget(
        dim=3, horizon=40, huber_mu=0.4, random_change_points=True, num_segments=4
    ),
    "custom_l1_1d_alternate": CustomConvex(
        dim=1,
        horizon=40,
        schedule="alternate",
        period=5,
        loss=l1_target,
        lipschitz_bound=1.0,
        minimizer_fn=_identity,
    ),
}


@partial(jax.jit, static_argnums=0)
def _env_checks(env, key, xs, ys):
    params = env.sample_params(key)
    ts = jnp.arange(env.horizon, dtype=jnp.int32)
    thetas = jax.vmap(lambda t: env.theta(params, t, jax.random.fold_in(key, t)))(ts)
    targets = jax.vmap(lambda t: env.target(params, t))(ts)
    fx = jax.vmap(lambda th: jax.vmap(lambda x: env.family(th, x))(xs))(thetas)  # (T, n)
    fy = jax.vmap(lambda th: jax.vmap(lambda y: env.family(th, y))(ys))(thetas)
    minimizers = jax.vmap(env.minimizer)(thetas)
    at_min = jax.vmap(env.family)(thetas, minimizers)
    fn = env.loss_fn(params, ts[5], jax.random.fold_in(key, ts[5]))
    return {
        "params": params,
        "thetas": thetas,
        "targets": targets,
        "fx": fx,
        "fy": fy,
        "minimizers": minimizers,
        "at_min": at_min,
        "partial_value": fn(xs[0]),
        "direct_value": env.family(thetas[5], xs[0]),
    }


@pytest.mark.parametrize("name", sorted(ENVS))
def test_convex_environments(name):
    """Non-negative, ``G``-Lipschitz, minimiser in ``K``, ``loss_fn`` partial; the schedules."""
    env = ENVS[name]
    rng = np.random.default_rng(0)
    raw = rng.uniform(-1.0, 1.0, size=(2, 128, env.dim))
    xs, ys = (jnp.asarray(jax.vmap(env.domain.project)(jnp.asarray(r)), jnp.float32) for r in raw)
    out = jax.device_get(_env_checks(env, jax.random.key(4), xs, ys))
    assert np.all(out["fx"] >= 0.0)
    dist = np.linalg.norm(np.asarray(xs) - np.asarray(ys), axis=1)
    assert np.all(np.abs(out["fx"] - out["fy"]) <= env.lipschitz * dist[None, :] + 1e-5)
    assert np.all(out["at_min"][:, None] <= out["fx"] + 1e-5)
    assert np.all(np.asarray(jax.vmap(env.domain.contains)(jnp.asarray(out["minimizers"]))))
    assert np.all(np.asarray(jax.vmap(env.domain.contains)(jnp.asarray(out["targets"]))))
    np.testing.assert_allclose(out["partial_value"], out["direct_value"], rtol=1e-6)
    targets = out["targets"]
    if env.schedule == "piecewise":
        points = out["params"].change_points
        assert np.all(np.diff(points) > 0) and points[0] >= 1 and points[-1] <= env.horizon - 1
        changes = np.flatnonzero(np.any(np.diff(targets, axis=0) != 0, axis=1)) + 1
        np.testing.assert_array_equal(changes, points)
    elif env.schedule == "alternate":
        np.testing.assert_allclose(targets[5:10], -targets[:5])
        np.testing.assert_allclose(targets[10:15], targets[:5])
        assert abs(float(targets[0, 0])) > 0.0
    else:
        norms = np.linalg.norm(targets, axis=1)
        np.testing.assert_allclose(norms, env.target_radius * env.domain.r, rtol=1e-5)
        assert np.max(np.linalg.norm(np.diff(targets, axis=0), axis=1)) < 0.2  # slow drift


@jax.jit
def _family_values():
    c = jnp.array([0.3, -0.2])
    theta = jnp.array([0.0, 0.0, 0.5])
    return {
        "distance_at_target": distance_loss(c, c),
        "distance_grad_at_target": jax.grad(distance_loss, argnums=1)(c, c),
        "abs_linear_on_plane": abs_linear_loss(jnp.array([1.0, 2.0, 0.5]), jnp.array([0.5, 0.0])),
        "huber_inner": huber_loss(theta, jnp.array([0.2, 0.0])),
        "huber_outer": huber_loss(theta, jnp.array([1.0, 0.0])),
    }


def test_families_and_lipschitz_constants():
    """The families' values, ``G`` capped by the domain, and the refused configurations."""
    out = jax.device_get(_family_values())
    assert out["distance_at_target"] == 0.0 and out["abs_linear_on_plane"] == 0.0
    np.testing.assert_array_equal(out["distance_grad_at_target"], 0.0)  # a subgradient, no NaN
    np.testing.assert_allclose(out["huber_inner"], 0.5 * 0.2**2, rtol=1e-6)
    np.testing.assert_allclose(out["huber_outer"], 0.5 * 1.0 - 0.5 * 0.5**2, rtol=1e-6)
    huber = HuberTarget(dim=2, horizon=8, huber_mu=5.0)
    assert huber.lipschitz == huber.domain.D + huber.target_norm  # capped by the domain
    with pytest.raises(ValueError):
        MovingTarget(dim=2, horizon=8, target_radius=1.5)
    with pytest.raises(TypeError):
        CustomConvex(dim=2, horizon=8)
    for domain in (Box(dim=3), "ball"):  # what a convex environment cannot be
        with pytest.raises(ValueError, match="a Domain with dim=2"):
            MovingTarget(dim=2, horizon=8, domain=domain)


def test_a_custom_family_without_minimizer_has_no_dynamic_comparator():
    """``best_loss`` is the loss at the minimiser given by ``minimizer_fn``, NaN without one."""
    kwargs = dict(dim=1, horizon=16, schedule="alternate", period=4, loss=l1_target)
    with_min = CustomConvex(**kwargs, minimizer_fn=_identity)
    without = CustomConvex(**kwargs)
    with pytest.raises(NotImplementedError, match="pass minimizer_fn"):
        without.minimizer(jnp.zeros(1))
    learner = TwoPointOGD(dim=1, horizon=16)
    a = simulate(learner, with_min, jax.random.key(0), 2, traces=("loss", "best_loss"))
    b = simulate(learner, without, jax.random.key(0), 2, traces=("loss", "best_loss"))
    np.testing.assert_array_equal(a.loss, b.loss)
    np.testing.assert_array_equal(a.best_loss, 0.0)  # |c_t - c_t| at the round's minimiser
    assert np.isnan(b.best_loss).all()


@pytest.mark.parametrize("config", ["bco_d2", "bco_d10", "bco_d50"])
def test_the_memory_estimate_of_sa_bounds_what_xla_allocates_for_its_blocks(config):
    """``4 (T + W L) p 4 + 2 (T + 1) 8`` per run bounds XLA's buffers for a block's comparators
    (shortest and longest window of each shipped config) within 3x; ``4 (T + W L) 8`` without
    ``p`` does not at d = 50."""
    cfg = load_config(config, [], runs=8, seed=0)
    env = cfg.make_env()
    domain = _check_domain(env, None)
    horizon, block = cfg.horizon, 8
    keys = jax.random.split(jax.random.key(0), block)
    regenerate = partial(regenerate_thetas, env, horizon=horizon)
    thetas = jax.eval_shape(lambda k: regenerate(jax.vmap(env.sample_params)(k), k), keys)
    lipschitz = jax.ShapeDtypeStruct((block,), jnp.float32)
    most_xla = most_counted = 0.0
    for length in (min(cfg.sa_windows), max(cfg.sa_windows)):
        starts = window_starts(horizon, length)
        compiled = (
            jax.jit(lambda th, g, s, L=length: window_comparators(env, domain, th, g, s, L))
            .lower(thetas, lipschitz, jax.ShapeDtypeStruct(starts.shape, jnp.int32))
            .compile()
        )
        memory = compiled.memory_analysis()
        xla = memory.temp_size_in_bytes + memory.argument_size_in_bytes
        xla = (xla + memory.output_size_in_bytes) / block
        size = env.dim  # MovingTarget's theta_t is its target
        assert sa_runs_per_block(horizon, length, len(starts), block, size=size) == block
        counted = sa_memory_bytes(env, block, [length]) / block
        assert xla <= counted, (length, xla, counted)
        most_xla, most_counted = max(most_xla, xla), max(most_counted, counted)
        if config == "bco_d50":
            assert xla > 8 * 4 * (horizon + len(starts) * length) * 8
    assert most_counted <= 3 * most_xla, (most_xla, most_counted)


def test_sa_blocks_are_cut_to_their_memory_bound(monkeypatch):
    """Blocks are cut to ``SA_BLOCK_MAX_BYTES``, the shipped configs' unchanged, by default."""
    sizes = {"bco_d2": 2, "bco_d10": 10, "bco_d50": 50}
    for name, size in sizes.items():  # every run in one block, as before the cut
        cfg = load_config(name)
        for length in cfg.sa_windows:
            starts = len(window_starts(cfg.horizon, length))
            got = bco_simulate.sa_runs_per_block(cfg.horizon, length, starts, cfg.runs, size=size)
            assert got == cfg.runs, (name, length)
    run_bytes = bco_simulate.sa_run_bytes(4096, 16, 1021, 50)
    assert run_bytes == 4 * (4096 + 1021 * 16) * 50 * 4 + 2 * 4097 * 8
    cut = bco_simulate.SA_BLOCK_MAX_BYTES // run_bytes
    assert cut == 65 and bco_simulate.sa_runs_per_block(4096, 16, 1021, 1000, size=50) == cut
    assert bco_simulate.sa_runs_per_block(4096, 16, 1021, 1000, size=1) == 410  # uncut
    large = load_config("bco_d50", ["runs=1000"])
    counted = bco_simulate.sa_memory_bytes(large.make_env(), 1000, large.sa_windows)
    assert counted <= bco_simulate.SA_BLOCK_MAX_BYTES

    # the default blocks follow the cut: with room for 2 runs, 5 runs are solved as 2, 2, 1
    env = MovingTarget(dim=2, horizon=32, change_points=(9, 20))
    result = simulate(TwoPointOGD(dim=2, horizon=32), env, jax.random.key(3), num_runs=5)
    starts = len(window_starts(32, 8))
    two = 2 * bco_simulate.sa_run_bytes(32, 8, starts, 2)
    monkeypatch.setattr(bco_simulate, "SA_BLOCK_MAX_BYTES", two)
    solved = []
    solve = bco_simulate.window_comparators

    def spy(env, domain, thetas, *args, **kwargs):
        solved.append(thetas.shape[0])
        return solve(env, domain, thetas, *args, **kwargs)

    monkeypatch.setattr(bco_simulate, "window_comparators", spy)
    default = bco_adaptive_regret(result, env, [8])
    assert solved == [2, 2, 1]
    explicit = bco_adaptive_regret(result, env, [8], runs_per_block=5)
    assert solved == [2, 2, 1, 5]
    for key in ("sa", "comparator_gap"):  # here the block's size leaves the numbers alone
        np.testing.assert_array_equal(default[key], explicit[key])
