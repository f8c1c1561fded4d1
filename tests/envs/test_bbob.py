"""The BBOB functions against COCO's ``cocoex`` (functions 1..24, d = 2, 10, 40, instances 1, 2,
5, float64, points in, near the optimum of and outside [-5, 5]^d); golden values of ``cocoex``
2.8.2 pin the instances where it is not installed."""

from __future__ import annotations

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax.envs import bbob, bbob_instances
from stabl_jax.envs.bbob import BBOBFunction

FUNCTIONS = tuple(range(1, 25))
DIMS = (2, 10, 40)
INSTANCES = (1, 2, 5)
RTOL = 1e-6
#: Functions whose float32 values may be far from float64 (cos/rounding of large arguments).
FLOAT32_FRAGILE = (16, 19, 23)
N_POINTS = 32  # every float64 evaluation is padded to this many points


@functools.cache
def _program64(function_id: int):
    """``(gap, value)`` of one function: one compile per (function, dim), shared by all tests."""

    def both(params, x):
        return bbob.bbob_gap(function_id, params, x), bbob.bbob_value(function_id, params, x)

    return jax.jit(both)


def _evaluate64(function_id: int, params, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float64 ``(gap, value)`` at up to ``N_POINTS`` points (zero-padded to a fixed shape)."""
    n, d = x.shape
    padded = np.zeros((N_POINTS, d))
    padded[:n] = x
    with jax.enable_x64(True):
        gap, value = _program64(function_id)(params, jnp.asarray(padded))
        assert value.dtype == jnp.float64
    return np.asarray(gap)[:n], np.asarray(value)[:n]


def _params64(function_id: int, dim: int, instance: int):
    with jax.enable_x64(True):
        return bbob.bbob_params(function_id, dim, instance)


def _points(rng: np.random.Generator, x_opt: np.ndarray) -> np.ndarray:
    """``(31, d)``: 20 uniform in [-5, 5]^d, 5 near ``x_opt``, ``x_opt``, 5 in [-7, 7]^d."""
    d = x_opt.shape[0]
    near = x_opt + rng.normal(0.0, 1e-2, (5, d))
    return np.concatenate(
        [rng.uniform(-5, 5, (20, d)), near, x_opt[None], rng.uniform(-7, 7, (5, d))]
    )


@pytest.fixture(scope="module")
def coco_suite():
    cocoex = pytest.importorskip("cocoex")
    return cocoex.Suite("bbob", "instances: 1,2,5", "dimensions: 2,10,40")


# --- Against cocoex ----------------------------------------------------------------------------
@pytest.mark.parametrize("function_id", FUNCTIONS)
def test_matches_cocoex(coco_suite, function_id):
    """Relative error <= 1e-6 in f; the gap f - f_opt to 1e-6 of itself plus COCO's roundoff."""
    rng = np.random.default_rng(function_id)
    for dim in DIMS:
        for instance in INSTANCES:
            problem = coco_suite.get_problem_by_function_dimension_instance(
                function_id, dim, instance
            )
            params = _params64(function_id, dim, instance)
            x = _points(rng, np.asarray(params.x_opt))
            ref = np.array([problem(xi) for xi in x])
            gap, value = _evaluate64(function_id, params, x)
            rel = np.abs(value - ref) / np.abs(ref)
            where = f"f{function_id} d={dim} i={instance}"
            assert rel.max() <= RTOL, f"{where}: max relative error {rel.max():.3g}"
            # COCO returns f, so its own gap f - f_opt carries the roundoff of f_opt.
            f_opt = float(params.f_opt)
            slack = 64 * np.finfo(np.float64).eps * max(abs(f_opt), 1.0)
            np.testing.assert_allclose(gap, ref - f_opt, rtol=RTOL, atol=slack, err_msg=where)


def test_x_opt_and_f_opt_match_cocoex(coco_suite, tmp_path, monkeypatch):
    """Our ``x_opt`` is COCO's ``best_parameter``; COCO's value there is our ``f_opt``."""
    get = coco_suite.get_problem_by_function_dimension_instance
    if not hasattr(get(1, 2, 1), "_best_parameter"):
        pytest.skip("this cocoex does not expose _best_parameter")
    monkeypatch.chdir(tmp_path)  # _best_parameter("print") writes a file into the cwd
    out = tmp_path / "._bbob_problem_best_parameter.txt"
    for function_id in FUNCTIONS:
        for dim in DIMS:
            for instance in INSTANCES:
                problem = get(function_id, dim, instance)
                problem._best_parameter("print")
                coco_x_opt = np.array(out.read_text().split(), dtype=np.float64)
                inst = bbob_instances.build_instance(function_id, dim, instance)
                np.testing.assert_allclose(inst.x_opt, coco_x_opt, rtol=0, atol=1e-12)
                assert problem(inst.x_opt) == pytest.approx(float(inst.f_opt), abs=1e-9)


# Golden values from cocoex 2.8.2, problem bbob_f{f}_i03_d10: (f(0), f(linspace(-4.5, 4.5, 10))).
GOLDEN_D10_I3 = {
    1: (-169.89108224000003, -155.08308224), 2: (13333483.89683386, 9605296.78131648),
    3: (880.8183852620834, 7312.003377138554), 4: (533.1300391352657, 879.3369126630614),
    5: (271.05763060936016, 297.76068155540315), 6: (302374.5582401336, 563796.1874542685),
    7: (250.3892562909946, 1012.9629906933187), 8: (42093.31811491266, 356632.9221003558),
    9: (113.84, 90091.35191107102), 10: (3035209.730246043, 30573668.336230863),
    11: (3519888.913650285, 2242633.8216165006), 12: (216053004.85197508, 81207386.16982533),
    13: (997.23102641321, 1938.4708063289252), 14: (99.39590857755668, 159.56307989189767),
    15: (604.1862290405442, 2107.2304543021464), 16: (226.21540430627084, 153.9689432102228),
    17: (300.3286298005474, 307.50356666631177), 18: (392.4329884325048, 374.97845431669396),
    19: (214.26037374271976, 277.54918534189335), 20: (10545.856136018378, 58110.585628065346),
    21: (-306.0550620620819, -297.60496963807026), 22: (34.81616384810351, 36.141998022536676),
    23: (-114.29184659725615, -98.39932600001762), 24: (166.97519137935336, 306.21418445888094),
}  # fmt: skip


def test_golden_values_without_cocoex():
    """Pins COCO's instances (d = 10, instance 3) even where cocoex is not installed."""
    x = np.stack([np.zeros(10), np.linspace(-4.5, 4.5, 10)])
    for function_id, expected in GOLDEN_D10_I3.items():
        _, value = _evaluate64(function_id, _params64(function_id, 10, 3), x)
        np.testing.assert_allclose(value, expected, rtol=RTOL, err_msg=f"f{function_id}")


# --- Structural truths -----------------------------------------------------------------------
@pytest.mark.parametrize("function_id", FUNCTIONS)
def test_optimum(function_id):
    """``f(x_opt) = f_opt`` and ``f > f_opt`` at random points (instance 7)."""
    _check_optimum(function_id, DIMS)


@pytest.mark.slow
@pytest.mark.parametrize("function_id", FUNCTIONS)
def test_optimum_beyond_coco_dimensions(function_id):
    """COCO's rotation buffer stops at d = 44; the same generators extend to any d."""
    _check_optimum(function_id, (50,))


def _check_optimum(function_id: int, dims: tuple[int, ...]) -> None:
    rng = np.random.default_rng(100 + function_id)
    for dim in dims:
        params = _params64(function_id, dim, 7)
        assert float(params.f_opt) == bbob_instances.legacy_fopt(function_id, 7)
        x = np.concatenate([np.asarray(params.x_opt)[None], rng.uniform(-6, 6, (16, dim))])
        gap, value = _evaluate64(function_id, params, x)
        assert abs(gap[0]) <= 1e-9, f"f{function_id} d={dim}: gap at x_opt {gap[0]:.3g}"
        assert value[0] == pytest.approx(float(params.f_opt), abs=1e-9)
        assert gap[1:].min() > 0.0


def test_rotations_orthogonal_and_x_opt_in_range():
    for dim in (2, 7, 40):
        r = bbob_instances.legacy_rotation(1 + 10000, dim)
        np.testing.assert_allclose(r @ r.T, np.eye(dim), atol=1e-12)
        x = bbob_instances.legacy_xopt(1 + 10000, dim)
        assert np.all((x >= -4) & (x < 4))
        np.testing.assert_allclose(np.round(x * 1250), x * 1250, atol=1e-9)  # 8e-4 grid


def test_jit_vmap_and_no_retrace():
    """Batched == vmapped == one point; stacked instances vmap; one trace per shape."""
    rng = np.random.default_rng(0)
    dim = 6
    x = jnp.asarray(rng.uniform(-5, 5, (8, dim)), jnp.float32)
    for function_id in (3, 21):  # float32-robust functions (not FLOAT32_FRAGILE)
        value = jax.jit(functools.partial(bbob.bbob_value, function_id))
        params = bbob.bbob_params(function_id, dim, 1)
        batched = value(params, x)
        assert batched.shape == (8,) and batched.dtype == jnp.float32
        np.testing.assert_allclose(jax.vmap(value, (None, 0))(params, x), batched, rtol=1e-5)
        np.testing.assert_allclose(value(params, x[3]), batched[3], rtol=1e-5)
        stacked = jax.tree.map(
            lambda *a: jnp.stack(a), *(bbob.bbob_params(function_id, dim, i) for i in (1, 2, 3))
        )
        per_instance = jax.vmap(value, (0, None))(stacked, x)
        assert per_instance.shape == (3, 8)
        np.testing.assert_allclose(per_instance[0], batched, rtol=1e-5)

    fn = BBOBFunction(15, 4, normalize=True)
    value = jax.jit(chex.assert_max_traces(fn.value, n=1))
    for seed in range(3):
        value(fn.sample_params(jax.random.key(seed)), jnp.zeros((5, 4)))
    assert hash(fn) == hash(BBOBFunction(15, 4, normalize=True))


# --- The wrapper: normalisation, extra shift/rotation, noise ------------------------------------
@pytest.mark.parametrize("function_id", FUNCTIONS)
def test_float32_and_normalised_values(function_id):
    """Float32 by default (within 1e-3 of float64 unless FLOAT32_FRAGILE); v in [0, 1]."""
    fn = BBOBFunction(function_id, 10, 2, normalize=True)

    @jax.jit
    def run(x):  # one compile per function: parameters, raw and normalised values
        params = fn.default_params
        return bbob.bbob_value(function_id, params.coco, x), fn.value(params, x), params.coco.M

    rng = np.random.default_rng(function_id)
    far = rng.uniform(-50, 50, (16, 10))
    x = np.concatenate([np.zeros((1, 10)), fn.x_opt[None], rng.uniform(-5, 5, (30, 10)), far])
    raw, v, m = map(np.asarray, run(jnp.asarray(x, jnp.float32)))
    assert raw.dtype == m.dtype == np.float32 and np.isfinite(raw).all()
    assert np.all((v >= 0.0) & (v <= 1.0)), (v.min(), v.max())
    # The default scale is the gap at the origin, so v(0) = log 2 / (1 + log 2).
    assert v[0] == pytest.approx(math.log(2) / (1 + math.log(2)), rel=1e-4)
    assert v[1] == pytest.approx(0.0, abs=1e-3)  # the optimum
    if function_id not in FLOAT32_FRAGILE:
        _, v64 = _evaluate64(function_id, _params64(function_id, 10, 2), x[:N_POINTS])
        np.testing.assert_allclose(raw[:N_POINTS], v64, rtol=1e-3, err_msg=f"f{function_id}")


def test_normalisation_is_monotone_and_bounded():
    gap = jnp.asarray([0.0, 1e-8, 1e-3, 1.0, 1e3, 1e8, 1e30, np.inf])
    v = np.asarray(bbob.normalize_gap(gap, jnp.asarray(1.0)))
    assert v[0] == 0.0 and np.all(np.diff(v) >= 0) and np.all(v <= 1.0)
    fixed = BBOBFunction(1, 3, normalize=True, norm_scale=2.0)
    assert float(fixed.default_params.norm_scale) == 2.0


def test_extra_shift_and_rotation():
    x = np.random.default_rng(0).uniform(-5, 5, (6, 4))
    for function_id in (6, 22):
        fn = BBOBFunction(function_id, 4, 1, shift_radius=1.0, rotate=True)
        with jax.enable_x64(True):
            params = fn.sample_params(jax.random.key(3))
            chex.assert_trees_all_equal(params, fn.sample_params(jax.random.key(3)))
            other = fn.sample_params(jax.random.key(4))
            shifted = x - np.asarray(params.x_star)[None, :]
            moved = fn.x_opt[None, :] + shifted @ np.asarray(params.rotation).T
            ours = jax.jit(fn.value)(params, jnp.asarray(np.concatenate([x, x[:1] * 0])))
            at_star = jax.jit(fn.gap)(params, params.x_star)
            _, expected = _evaluate64(function_id, params.coco, moved)
        assert not np.allclose(params.x_star, other.x_star)
        u = np.asarray(params.rotation)
        np.testing.assert_allclose(u @ u.T, np.eye(4), atol=1e-12)
        assert np.all(np.abs(np.asarray(params.x_star) - fn.x_opt) <= 1.0)
        assert float(at_star) == pytest.approx(0.0, abs=1e-9)
        # The wrapped function is f(x_opt + U (x - x_star)).
        np.testing.assert_allclose(ours[:-1], expected, rtol=1e-10)
    # default_params is the COCO instance, bit for bit.
    plain = BBOBFunction(6, 4, 1, shift_radius=1.0, rotate=True).default_params
    np.testing.assert_array_equal(
        jax.jit(BBOBFunction(6, 4, 1).value)(plain, jnp.asarray(x, jnp.float32)),
        jax.jit(functools.partial(bbob.bbob_value, 6))(plain.coco, jnp.asarray(x, jnp.float32)),
    )
    keys = jax.random.split(jax.random.key(0), 5)
    batch = jax.vmap(BBOBFunction(8, 3, shift_radius=0.5).sample_params)(keys)
    assert batch.x_star.shape == (5, 3) and batch.coco.R.shape == (5, 3, 3)


def test_observation_noise_statistics():
    fn = BBOBFunction(2, 3, noise_std=0.3, normalize=True)
    quiet = BBOBFunction(2, 3, normalize=True)
    params = fn.default_params
    n = 4000
    x = jnp.full((n, 3), 0.5)

    @jax.jit
    def run(key):
        return fn.observe(params, x, key), quiet.observe(params, x, key), quiet.value(params, x)

    noisy, silent, clean = map(np.asarray, run(jax.random.key(7)))
    se = 0.3 / math.sqrt(n)
    assert abs(noisy.mean() - clean[0]) <= 4 * se
    # the sample standard deviation's standard error: about sigma / sqrt(2 n)
    assert abs(noisy.std() - 0.3) <= 4 * 0.3 / math.sqrt(2 * n)
    np.testing.assert_array_equal(silent, clean)


INVALID = [
    {"function_id": 0, "dim": 2}, {"function_id": 25, "dim": 2}, {"function_id": 1, "dim": 1},
    {"function_id": 1, "dim": 2, "instance": 0}, {"function_id": 1, "dim": 2, "noise_std": -0.1},
    {"function_id": 1, "dim": 2, "shift_radius": math.nan},
    {"function_id": 1, "dim": 2, "norm_scale": 0.0},
]  # fmt: skip


@pytest.mark.parametrize("kwargs", INVALID)
def test_invalid_configuration(kwargs):
    with pytest.raises(ValueError):
        BBOBFunction(**kwargs)


def test_the_plain_instance_by_name_call_and_optimum():
    """The name, ``f(x)`` (``value`` at the default params) and ``f_opt``, taken at ``x_opt``;
    sizes are real numbers of any float type (a string is refused, NumPy's float32 taken)."""
    fn = BBOBFunction(function_id=8, dim=4, instance=3)
    with pytest.raises(TypeError, match=r"noise_std must be a real number, got '0\.1'"):
        BBOBFunction(function_id=1, dim=2, noise_std="0.1")
    sized = BBOBFunction(function_id=1, dim=2, noise_std=np.float32(0.25), norm_scale=np.float32(2))
    assert sized.noise_std == np.float32(0.25)  # NumPy's float32 is a real number
    assert fn.name == "bbob_f008_i03_d04"
    x = jnp.linspace(-2.0, 2.0, 4)
    assert float(fn(x)) == float(fn.value(fn.default_params, x))
    inst = bbob_instances.build_instance(8, 4, 3)
    assert fn.f_opt == float(inst.f_opt)
    np.testing.assert_allclose(float(fn(jnp.asarray(fn.x_opt, jnp.float32))), fn.f_opt, atol=1e-4)


def test_a_suite_draws_each_member_equally_often():
    """Members drawn uniformly (within 4 se), with their keys' shift and rotation, raw values."""
    suite = bbob.BBOBSuite((1, 8, 21), dim=3, shift_radius=1.0, rotate=True)
    keys = jax.random.split(jax.random.key(11), 3000)
    index = np.asarray(jax.jit(jax.vmap(lambda k: suite.sample_params(k).index))(keys))
    counts = np.bincount(index, minlength=3)
    se = math.sqrt(3000 * (1 / 3) * (2 / 3))
    assert np.all(np.abs(counts - 1000) < 4 * se), counts
    assert suite.name == "bbob_suite3_i01_d03"
    x = jnp.asarray([0.5, -1.0, 2.0])
    for key, i in zip(keys[:6], index[:6], strict=True):
        params, value = _draw(suite, key, x)
        _, member_value = _draw(suite.members[int(i)], key, x)
        chex.assert_trees_all_equal(params, _problem_params(suite, int(i), key))
        assert params.x_star is params.function.x_star
        np.testing.assert_allclose(float(value), float(member_value), rtol=1e-6)


@functools.partial(jax.jit, static_argnums=0)
def _draw(problem, key, x):
    params = problem.sample_params(key)
    return params, problem.value(params, x)


_problem_params = jax.jit(lambda suite, i, key: suite.problem_params(i, key), static_argnums=0)
