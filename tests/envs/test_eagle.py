"""The Eagle-strategy optimiser (:mod:`stabl_jax.envs.eagle`): Vizier's pool rules case by case,
suggestions, ensembles vmapped over arms, and that it optimises (Sphere, against random search)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax.envs import eagle
from stabl_jax.envs.bbob import BBOBFunction

DIM = 2
SLOTS = 3


_update = jax.jit(eagle.update)
_suggest = jax.jit(eagle.suggest)


def _params(**kwargs) -> eagle.EagleParams:
    kwargs.setdefault("pool_size", SLOTS)
    return eagle.EagleConfig(**kwargs).params(DIM)


def _fill(params: eagle.EagleParams, values=(0.5, 0.2, 0.8)) -> eagle.EagleState:
    """A full pool: slot i at (0.1 + 0.4 i, 0.1 + 0.4 i) with value values[i] (foreign points)."""
    state = eagle.init_pool(params, SLOTS, DIM)
    for i, v in enumerate(values):
        x = jnp.full((DIM,), 0.1 + 0.4 * i)
        state = _update(params, state, x, jnp.float32(v), jnp.int32(-1))
    return state


def test_pool_capacity_is_vizier_formula():
    # min(10 + round((d^1.2 + d) / 2), 1000)
    assert [eagle.pool_capacity(d) for d in (1, 4, 32, 64)] == [11, 15, 58, 116]
    assert eagle.pool_capacity(10_000) == 1000
    assert eagle.EagleConfig(pool_size=7).capacity(64) == 7
    grid = eagle.eagle_grid()
    assert len(grid) == 24 and len(set(grid)) == 24
    assert eagle.EagleEnsemble(dim=32).num_slots == eagle.pool_capacity(32, 1.4)


def test_config_validation():
    with pytest.raises(ValueError, match="penalize_factor"):
        eagle.EagleConfig(penalize_factor=1.0)
    with pytest.raises(ValueError, match="perturbation"):
        eagle.EagleConfig(perturbation=0.0)
    with pytest.raises(ValueError, match="dim"):
        eagle.EagleEnsemble(dim=0)
    with pytest.raises(TypeError, match=r"penalize_factor must be a real number, got '0\.5'"):
        eagle.EagleConfig(penalize_factor="0.5")
    with pytest.raises(ValueError, match=r"pool_size must be 0 .* or >= 2 flies, got 1"):
        eagle.EagleConfig(pool_size=1)
    assert eagle.EagleConfig(pool_size=2).capacity(64) == 2
    assert eagle.EagleConfig(max_pool_size=2).capacity(64) == 2
    with pytest.raises(ValueError, match="EagleEnsemble with dtype='float64' needs 64-bit JAX"):
        eagle.EagleEnsemble(dim=2, dtype="float64").init()  # was float32, with warnings


def test_foreign_evaluations_fill_the_pool_then_replace_the_closest_if_better():
    params = _params()
    state = _fill(params)
    np.testing.assert_array_equal(state.alive, [True, True, True])
    np.testing.assert_allclose(state.values, [0.5, 0.2, 0.8])
    np.testing.assert_allclose(state.perturbations, [0.1] * 3, rtol=1e-6)
    assert int(state.num_seen) == 3 and float(state.best_value) == pytest.approx(0.2)
    assert int(state.pointer) == -1  # foreign points never move the pointer

    # Full pool: a worse point near slot 2 is dropped, a better one replaces slot 2.
    near2 = jnp.full((DIM,), 0.85)
    worse = _update(params, state, near2, jnp.float32(0.9), jnp.int32(-1))
    np.testing.assert_array_equal(worse.values, state.values)
    np.testing.assert_array_equal(worse.positions, state.positions)
    better = _update(params, state, near2, jnp.float32(0.7), jnp.int32(-1))
    np.testing.assert_allclose(better.values, [0.5, 0.2, 0.7])
    np.testing.assert_allclose(better.positions[2], near2)
    np.testing.assert_allclose(better.perturbations, state.perturbations)


def test_own_suggestion_improves_or_penalises_its_parent():
    params = _params()
    state = _fill(params)
    x = jnp.array([0.3, 0.3])
    improved = _update(params, state, x, jnp.float32(0.1), jnp.int32(0))
    np.testing.assert_allclose(improved.positions[0], x)
    np.testing.assert_allclose(improved.values, [0.1, 0.2, 0.8])
    assert int(improved.pointer) == 0

    failed = _update(params, state, x, jnp.float32(0.6), jnp.int32(0))
    np.testing.assert_allclose(failed.values, state.values)
    np.testing.assert_allclose(failed.perturbations, [0.1 * 0.9, 0.1, 0.1], rtol=1e-6)
    assert int(failed.pointer) == 0

    stuck = _update(params, state, state.positions[0], jnp.float32(0.6), jnp.int32(0))
    np.testing.assert_allclose(stuck.perturbations[0], 0.5)  # min(10 x 0.1, max 0.5)


def test_weak_flies_are_removed_but_never_the_best():
    # perturbation 0.0011 * 0.9 < 1e-3 after one failure.
    params = _params(perturbation=0.0011)
    state = _fill(params)
    removed = _update(params, state, jnp.array([0.3, 0.3]), jnp.float32(0.9), jnp.int32(0))
    np.testing.assert_array_equal(removed.alive, [False, True, True])
    assert float(removed.values[0]) == np.inf
    kept = _update(params, state, jnp.array([0.6, 0.6]), jnp.float32(0.9), jnp.int32(1))
    np.testing.assert_array_equal(kept.alive, [True, True, True])  # slot 1 holds the best
    # The freed slot is refilled by the next evaluation, with a fresh perturbation.
    refilled = _update(params, removed, jnp.array([0.2, 0.2]), jnp.float32(0.9), jnp.int32(-1))
    np.testing.assert_array_equal(refilled.alive, [True, True, True])
    np.testing.assert_allclose(refilled.perturbations[0], 0.0011, rtol=1e-6)


def test_suggest_explores_below_capacity_then_moves_flies_round_robin():
    params = _params()
    empty = eagle.init_pool(params, SLOTS, DIM)
    s = _suggest(params, empty, jax.random.key(0))
    assert int(s.parent) == -1
    state = _fill(params)
    parents = []
    for t in range(4):
        s = _suggest(params, state, jax.random.key(t))
        assert bool(jnp.all((s.x >= 0) & (s.x <= 1)))
        parents.append(int(s.parent))
        state = _update(params, state, s.x, jnp.float32(0.99), s.parent)
    assert parents == [0, 1, 2, 0]


def test_pull_weight_and_laplace_direction():
    params = _params()
    w_near = eagle.pull_weight(params, jnp.float32(0.0), DIM, jnp.bool_(True))
    w_far = eagle.pull_weight(params, jnp.float32(1.0), DIM, jnp.bool_(True))
    w_worse = eagle.pull_weight(params, jnp.float32(0.0), DIM, jnp.bool_(False))
    assert float(w_near) == pytest.approx(1.0)  # gravity at distance 0
    assert 0 < float(w_far) < 1e-6  # exp(-3 * 10 * 1 / 2)
    assert float(w_worse) == pytest.approx(-0.02)  # -negative_gravity
    u = jnp.array([0.0, 0.25, 0.5, 0.999], jnp.float32)
    d = eagle.laplace_direction(u)
    assert bool(jnp.all(jnp.isfinite(d))) and float(jnp.max(jnp.abs(d))) == pytest.approx(1.0)


def test_ensemble_is_vmappable_over_arms():
    ens = eagle.EagleEnsemble(dim=DIM, configs=eagle.eagle_grid(perturbations=(0.1,)))
    params, states = ens.params(), ens.init()
    assert params.gravity.shape == (ens.num_arms,) == (8,)
    assert states.positions.shape == (8, ens.num_slots, DIM)
    assert states.values.dtype == jnp.float32 and states.alive.dtype == jnp.bool_
    sug = jax.jit(jax.vmap(eagle.suggest, in_axes=(0, 0, None)))(params, states, jax.random.key(0))
    assert sug.x.shape == (8, DIM)
    np.testing.assert_array_equal(sug.parent, -1)


def test_eagle_beats_random_search_on_sphere():
    """Over 8 paired seeds, log10 best gap (random - Eagle) > max(0.5, 3 standard errors)."""
    dim, budget, seeds = 4, 200, 8
    fn = BBOBFunction(function_id=1, dim=dim)
    p = fn.default_params

    def objective(u):
        return fn.gap(p, -5.0 + 10.0 * u)

    params = eagle.EagleConfig().params(dim)

    @jax.jit
    def both(keys):
        ours = jax.vmap(lambda k: eagle.minimize(params, objective, k, budget, dim=dim))(keys)
        rand = jax.vmap(lambda k: objective(jax.random.uniform(k, (budget, dim))))(keys)
        return ours.min(axis=1), rand.min(axis=1)

    ours, rand = both(jax.random.split(jax.random.key(0), seeds))
    diff = np.log10(np.asarray(rand, np.float64)) - np.log10(np.asarray(ours, np.float64))
    se = diff.std(ddof=1) / np.sqrt(seeds)
    assert diff.mean() > max(0.5, 3 * se), (diff.mean(), se)


def test_vizier_grid_holds_vizier_defaults():
    grid = eagle.named_grid("vizier")
    assert len(grid) == 24 and len(set(grid)) == 24
    cfg = eagle.EagleConfig()
    assert (cfg.perturbation, cfg.gravity, cfg.visibility, cfg.pool_size_factor) == (0.1, 1, 3, 1.2)
    assert cfg in grid
    assert {c.gravity for c in grid} == {0.5, 1.0}
    assert {c.pool_size_factor for c in grid} == {1.0, 1.2}
    assert eagle.named_grid("default") == eagle.eagle_grid()
    with pytest.raises(ValueError, match="grid"):
        eagle.named_grid("paper")


def test_halton_known_values_and_scipy():
    """Radical inverses in bases 2, 3, 5 by hand; scipy's sequence from Vizier's skip, d = 7."""
    from scipy.stats import qmc

    with jax.enable_x64(True):
        got = _halton_points(jnp.arange(1, 6), 3, jnp.float64)
        expected = [
            [1 / 2, 1 / 3, 1 / 5], [1 / 4, 2 / 3, 2 / 5], [3 / 4, 1 / 9, 3 / 5],
            [1 / 8, 4 / 9, 4 / 5], [5 / 8, 7 / 9, 1 / 25],
        ]  # fmt: skip
        np.testing.assert_allclose(got, expected, rtol=1e-15)
        engine = qmc.Halton(d=7, scramble=False)
        engine.fast_forward(eagle.HALTON_SKIP)
        ours = _halton_points(eagle.HALTON_SKIP + jnp.arange(20), 7, jnp.float64)
        np.testing.assert_allclose(ours, engine.random(20), rtol=1e-13)


def test_scrambled_halton_is_scipys_with_the_same_permutations():
    """Scipy's ``van_der_corput`` given :func:`halton_scramble`'s permutations, bases 2..29."""
    from scipy.stats._qmc import van_der_corput

    dim = 10
    indices = eagle.HALTON_SKIP + jnp.arange(8)
    with jax.enable_x64(True):
        mult, add = _halton_scramble(jax.random.key(4), dim)
        ours = _halton_points(indices, dim, jnp.float64, (mult, add))
    for j, b in enumerate(eagle.primes(dim)):
        k = eagle.halton_num_digits(b)
        digits = np.arange(b)[None, :]
        perms = (np.asarray(mult[j, :k, None]) * digits + np.asarray(add[j, :k, None])) % b
        assert all(sorted(p) == list(range(b)) for p in perms)  # permutations
        skip = eagle.HALTON_SKIP
        theirs = van_der_corput(8, b, start_index=skip, scramble=True, permutations=perms)
        np.testing.assert_allclose(ours[:, j], theirs, rtol=1e-13)
    assert not np.allclose(ours, _halton_points(indices, dim, jnp.float32))


def test_halton_fill_walks_each_pool_through_its_own_sequence():
    """``fill="halton"``: the next Halton point; own random suggestions advance, foreign not."""
    params = _params()
    state = eagle.init_pool(params, SLOTS, DIM)
    key = jax.random.key(7)
    s0 = _suggest_halton(params, state, jax.random.key(0), key)
    scramble = _halton_scramble(key, DIM)
    expected = _halton_points(eagle.HALTON_SKIP + jnp.arange(2), DIM, jnp.float32, scramble)
    np.testing.assert_allclose(s0.x, expected[0])
    assert int(s0.parent) == -1
    state = _update(params, state, s0.x, 0.5, s0.parent, True)
    assert int(state.num_random) == 1
    state = _update(params, state, jnp.full((DIM,), 0.3), 0.4, -1, False)  # foreign
    assert int(state.num_random) == 1
    s1 = _suggest_halton(params, state, jax.random.key(1), key)
    np.testing.assert_allclose(s1.x, expected[1])


_suggest_halton = jax.jit(lambda p, s, k, h: eagle.suggest(p, s, k, "halton", h))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _halton_points(indices, dim, dtype, scramble=None):
    """``(len(indices), dim)`` Halton points, one compiled program per size and dtype."""
    return jax.vmap(lambda i: eagle.halton(i, dim, dtype, scramble))(indices)


_halton_scramble = jax.jit(eagle.halton_scramble, static_argnums=1)
