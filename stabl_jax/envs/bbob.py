"""The 24 noiseless BBOB functions of COCO as pure, jittable JAX functions.

Hansen, Finck, Ros and Auger, "Real-parameter black-box optimization benchmarking 2009:
noiseless functions definitions", INRIA RR-6829. ``BBOBFunction(f, d, i)`` is COCO's problem
``bbob_f{f:03d}_i{i:02d}_d{d:02d}``, with optional extra shift and rotation::

    f~(x) = f(x_opt + U (x - x_star)),   x_star = x_opt + delta,
    delta ~ U[-shift_radius, shift_radius]^d,   U ~ Haar on O(d) (identity unless rotate),

optimal value ``f_opt`` at ``x_star``; normalisation of ``Delta(x) = f~(x) - f_opt``::

    v(x) = u / (1 + u) in [0, 1),   u = log(1 + |Delta(x)| / s),

``s = norm_scale`` or ``Delta(0)``; and noise ``noise_std * xi``, ``xi ~ N(0, 1)``, added by
:meth:`~BBOBFunction.observe`. Use float64 to reproduce COCO: in float32 f16, f19 and f23
can be far off.

Static and traced: ``function_id``, ``dim``, ``instance`` (host-side COCO data), ``rotate`` and
``normalize`` set shapes or code paths and are the function's identity; ``shift_radius``,
``noise_std`` and ``norm_scale`` are numbers, declared ``dataclasses.field(compare=False)``:
defaults of :class:`BBOBNumbers` (:attr:`~BBOBFunction.numbers`), which ``sample_params(key,
numbers)`` takes as traced arrays, and programs read them from the params alone. Whether each
is zero (``None`` for ``norm_scale``) selects a code path, so it stays static (the derived
fields ``shifted``, ``noisy``, ``fixed_scale``): the plain instance is evaluated without the
extra ``x_opt + (x - x_star)``, bit for bit COCO's, and a noiseless run draws no noise.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from stabl_jax import checks, numerics
from stabl_jax.envs import bbob_instances
from stabl_jax.envs.bbob_instances import LUNACEK_D, LUNACEK_MU0, NUM_FUNCTIONS, SCHWEFEL_TWICE_XOPT

FUNCTION_NAMES: dict[int, str] = {
    1: "sphere", 2: "ellipsoid", 3: "rastrigin", 4: "bueche_rastrigin", 5: "linear_slope",
    6: "attractive_sector", 7: "step_ellipsoid", 8: "rosenbrock", 9: "rosenbrock_rotated",
    10: "ellipsoid_rotated", 11: "discus", 12: "bent_cigar", 13: "sharp_ridge",
    14: "different_powers", 15: "rastrigin_rotated", 16: "weierstrass", 17: "schaffers_f7",
    18: "schaffers_f7_ill_conditioned", 19: "griewank_rosenbrock", 20: "schwefel",
    21: "gallagher_101", 22: "gallagher_21", 23: "katsuura", 24: "lunacek_bi_rastrigin",
}  # fmt: skip


@chex.dataclass(frozen=True)
class BBOBParams:
    """Arrays of one COCO instance, in JAX: the fields of
    :class:`stabl_jax.envs.bbob_instances.BBOBInstance` (``peaks`` ``(p, d)``, ``p = 0`` unless
    f21/f22)."""

    x_opt: jax.Array
    f_opt: jax.Array
    shift: jax.Array
    signs: jax.Array
    R: jax.Array
    Q: jax.Array
    M: jax.Array
    peaks: jax.Array
    peak_scales: jax.Array
    peak_heights: jax.Array


@chex.dataclass(frozen=True)
class BBOBNumbers:
    """The numbers of a :class:`BBOBFunction` or :class:`BBOBSuite`, ``()`` arrays of JAX's
    default float dtype: what ``sample_params(key, numbers)`` takes traced.

    Attributes:
      shift_radius: the extra shift's radius (drawn from only when ``shifted``).
      noise_std: the observation noise's standard deviation (read only when ``noisy``).
      norm_scale: the given scale ``s`` (read only when ``fixed_scale``; else 1).
    """

    shift_radius: jax.Array
    noise_std: jax.Array
    norm_scale: jax.Array


@chex.dataclass(frozen=True)
class BBOBFunctionParams:
    """Parameters of a :class:`BBOBFunction`: a COCO instance plus the extra transformation.

    Attributes:
      coco: the COCO instance.
      x_star: ``(d,)`` minimiser of the shifted, rotated function.
      rotation: ``(d, d)`` the extra rotation ``U``.
      norm_scale: ``()`` the normalisation's scale ``s`` (> 0; 1 without normalisation).
      noise_std: ``()`` the observation noise's standard deviation (read when ``noisy``).
    """

    coco: BBOBParams
    x_star: jax.Array
    rotation: jax.Array
    norm_scale: jax.Array
    noise_std: jax.Array


def bbob_params(function_id: int, dim: int, instance: int) -> BBOBParams:
    """COCO instance ``(function_id, dim, instance)`` as a :class:`BBOBParams` pytree in JAX's
    default float dtype (built on the host, cached)."""
    arrays = bbob_instances.build_instance(function_id, dim, instance)
    dtype = jnp.zeros(()).dtype  # float32, or float64 under jax_enable_x64
    return BBOBParams(**{k: jnp.asarray(v, dtype) for k, v in arrays._asdict().items()})


def bbob_gap(function_id: int, params: BBOBParams, x: jax.Array) -> jax.Array:
    """``f(x) - f_opt`` of BBOB function ``function_id``, computed without ``f_opt``.

    Args:
      function_id: 1..24, static (selects the code path).
      params: the instance, from :func:`bbob_params`.
      x: ``(..., d)`` points.

    Returns:
      ``(...)`` gaps, >= 0 up to roundoff.
    """
    if function_id not in _GAPS:
        raise ValueError(f"function_id must be in 1..{NUM_FUNCTIONS}, got {function_id!r}")
    return _per_point(functools.partial(_GAPS[function_id], params), x, params.f_opt.dtype)


def bbob_value(function_id: int, params: BBOBParams, x: jax.Array) -> jax.Array:
    """COCO's BBOB function ``function_id`` at ``x``: ``f(x) = bbob_gap(...) + f_opt``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> params = bbob_params(1, 3, 1)  # sphere, d = 3, instance 1
      >>> f = jax.jit(bbob_value, static_argnums=0)
      >>> bool(jnp.allclose(f(1, params, params.x_opt), params.f_opt))
      True
    """
    return bbob_gap(function_id, params, x) + params.f_opt


class _Normalizable:
    """``value`` from ``gap`` and the numbers, shared by :class:`BBOBFunction` and
    :class:`BBOBSuite`."""

    normalize: bool
    shift_radius: float
    noise_std: float
    norm_scale: float | None

    def _set_code_paths(self) -> None:
        """The static code paths the numbers select (derived fields, part of the identity)."""
        object.__setattr__(self, "shifted", self.shift_radius > 0)
        object.__setattr__(self, "noisy", self.noise_std != 0)
        object.__setattr__(self, "fixed_scale", self.norm_scale is not None)

    @property
    def numbers(self) -> BBOBNumbers:
        """The numbers of the dataclass as ``()`` arrays (call it outside any program): the
        only reader of the fields declared ``compare=False``."""
        dtype = jnp.zeros(()).dtype  # float32, or float64 under jax_enable_x64
        scale = 1.0 if self.norm_scale is None else self.norm_scale
        return BBOBNumbers(
            shift_radius=jnp.asarray(self.shift_radius, dtype),
            noise_std=jnp.asarray(self.noise_std, dtype),
            norm_scale=jnp.asarray(scale, dtype),
        )

    def gap(self, params: Any, x: jax.Array) -> jax.Array:
        raise NotImplementedError

    def value(self, params: Any, x: jax.Array) -> jax.Array:
        """``(...)`` noiseless value: ``f~(x)``, or ``v(x)`` in [0, 1) when ``normalize``."""
        gap = self.gap(params, x)
        if self.normalize:
            return normalize_gap(gap, params.norm_scale)
        return gap + params.coco.f_opt


@dataclasses.dataclass(frozen=True)
class BBOBFunction(_Normalizable):
    """A BBOB problem ``f_{function_id}`` in ``dim`` dimensions, COCO instance ``instance``.

    Attributes:
      function_id: 1..24 (see :data:`FUNCTION_NAMES`).
      dim: dimension ``d >= 2``.
      instance: COCO instance id (>= 1).
      shift_radius: extra shift ``delta ~ U[-shift_radius, shift_radius]^d`` (0: none).
      rotate: extra Haar-random rotation ``U`` about the optimum.
      noise_std: standard deviation of the Gaussian noise of :meth:`observe`.
      normalize: return ``v = u / (1 + u)``, ``u = log1p(|f - f_opt| / s)``, in [0, 1).
      norm_scale: the scale ``s``; ``None`` uses the gap at the origin.
      shifted, noisy, fixed_scale: derived, static: ``shift_radius > 0``, ``noise_std != 0``,
        ``norm_scale is not None`` (the code paths; the numbers themselves are traced).

    Example:
      >>> import jax
      >>> fn = BBOBFunction(function_id=15, dim=4, instance=2, normalize=True)
      >>> v = fn.value(fn.sample_params(jax.random.key(0)), jax.numpy.zeros((8, 4)))
      >>> v.shape, bool((v >= 0).all() & (v <= 1).all())
      ((8,), True)
    """

    function_id: int
    dim: int
    instance: int = 1
    shift_radius: float = dataclasses.field(default=0.0, compare=False)
    rotate: bool = False
    noise_std: float = dataclasses.field(default=0.0, compare=False)
    normalize: bool = False
    norm_scale: float | None = dataclasses.field(default=None, compare=False)
    shifted: bool = dataclasses.field(init=False, repr=False)
    noisy: bool = dataclasses.field(init=False, repr=False)
    fixed_scale: bool = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        checks.check_int("function_id", self.function_id, minimum=1)
        if self.function_id > NUM_FUNCTIONS:
            raise ValueError(f"function_id must be in 1..{NUM_FUNCTIONS}, got {self.function_id!r}")
        checks.check_int("dim", self.dim, minimum=2)
        checks.check_int("instance", self.instance, minimum=1)
        checks.check_bool("rotate", self.rotate)
        checks.check_bool("normalize", self.normalize)
        for name in ("shift_radius", "noise_std"):
            checks.check_nonnegative(name, getattr(self, name))
        if self.norm_scale is not None:
            checks.check_positive("norm_scale", self.norm_scale)
        self._set_code_paths()

    @property
    def name(self) -> str:
        return f"bbob_f{self.function_id:03d}_i{self.instance:02d}_d{self.dim:02d}"

    @property
    def x_opt(self) -> np.ndarray:
        """``(d,)`` float64, COCO's optimum of the instance (without the extra shift)."""
        return bbob_instances.build_instance(self.function_id, self.dim, self.instance).x_opt

    @property
    def f_opt(self) -> float:
        """COCO's optimal value of the instance (also that of the shifted/rotated function)."""
        return float(bbob_instances.build_instance(self.function_id, self.dim, self.instance).f_opt)

    # --- parameters -------------------------------------------------------------------------
    @property
    def default_params(self) -> BBOBFunctionParams:
        """The COCO instance itself: no extra shift or rotation, whatever the options say."""
        return self._params(None, self.numbers)

    def sample_params(
        self, key: jax.Array, numbers: BBOBNumbers | None = None
    ) -> BBOBFunctionParams:
        """The instance with the extra shift/rotation drawn from ``key`` (vmappable in ``key``).

        Args:
          key: the run's key.
          numbers: :attr:`numbers`, traced inside a program that takes the function as a
            static argument; ``None``: ``self.numbers`` (constants of the program).
        """
        return self._params(key, self.numbers if numbers is None else numbers)

    def _params(
        self, key: jax.Array | None, numbers: BBOBNumbers, coco: BBOBParams | None = None
    ) -> BBOBFunctionParams:
        if coco is None:
            coco = bbob_params(self.function_id, self.dim, self.instance)
        dtype = coco.f_opt.dtype
        x_star, rotation = coco.x_opt, jnp.eye(self.dim, dtype=dtype)
        if key is not None and (self.shifted or self.rotate):
            x_star, rotation = _draw_shift_rotation(
                key, coco.x_opt, numbers.shift_radius, shifted=self.shifted, rotate=self.rotate
            )
        params = BBOBFunctionParams(
            coco=coco,
            x_star=x_star,
            rotation=rotation,
            norm_scale=jnp.ones((), dtype),
            noise_std=jnp.asarray(numbers.noise_std, dtype),
        )
        if self.normalize:
            params = dataclasses.replace(params, norm_scale=_norm_scale(self, params, numbers))
        return params

    # --- evaluation -------------------------------------------------------------------------
    def _to_coco(self, params: BBOBFunctionParams, x: jax.Array) -> jax.Array:
        """``x_opt + U (x - x_star)`` for one ``x`` of shape ``(d,)``."""
        if self.rotate:
            return params.coco.x_opt + numerics.matmul(params.rotation, x - params.x_star)
        if self.shifted:
            return params.coco.x_opt + (x - params.x_star)
        return x  # the COCO instance itself, bit-exact

    def gap(self, params: BBOBFunctionParams, x: jax.Array) -> jax.Array:
        """``(...)`` gap ``f~(x) - f_opt`` at ``x`` of shape ``(..., d)``."""
        gap = _GAPS[self.function_id]
        return _per_point(
            lambda xi: gap(params.coco, self._to_coco(params, xi)), x, params.coco.f_opt.dtype
        )

    def observe(self, params: BBOBFunctionParams, x: jax.Array, key: jax.Array) -> jax.Array:
        """``(...)`` noisy value ``value(x) + noise_std * xi``, independent ``xi ~ N(0, 1)``."""
        value = self.value(params, x)
        if not self.noisy:
            return value
        return value + params.noise_std * jax.random.normal(key, value.shape, value.dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        """:meth:`value` of the plain COCO instance (:attr:`default_params`)."""
        return self.value(self.default_params, x)


@chex.dataclass(frozen=True)
class BBOBSuiteParams:
    """A run's problem of a :class:`BBOBSuite`.

    Attributes:
      index: ``()`` int32, the function's position in ``suite.function_ids``.
      function: its :class:`BBOBFunctionParams`, padded to the suite's shapes (padded
        Gallagher peaks have height 0).
    """

    index: jax.Array
    function: BBOBFunctionParams

    @property
    def coco(self) -> BBOBParams:
        return self.function.coco

    @property
    def norm_scale(self) -> jax.Array:
        return self.function.norm_scale

    @property
    def x_star(self) -> jax.Array:
        return self.function.x_star

    @property
    def noise_std(self) -> jax.Array:
        return self.function.noise_std


@dataclasses.dataclass(frozen=True)
class BBOBSuite(_Normalizable):
    """Several BBOB functions in one program: the function is data (``params.index``).

    Attributes:
      function_ids: the BBOB ids, distinct, each in 1..24.
      dim, instance, shift_radius, rotate, noise_std, normalize, norm_scale: as
        :class:`BBOBFunction`'s, for every member (the numbers traced, the same way).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> suite = BBOBSuite((1, 21), dim=3, normalize=True)
      >>> p = suite.problem_params(1, jax.random.key(0))
      >>> f21 = BBOBFunction(21, dim=3, normalize=True)
      >>> x = jnp.full((3,), 0.5)
      >>> bool(jnp.allclose(suite.value(p, x), f21.value(f21.sample_params(jax.random.key(0)), x)))
      True
    """

    function_ids: tuple[int, ...]
    dim: int
    instance: int = 1
    shift_radius: float = dataclasses.field(default=0.0, compare=False)
    rotate: bool = False
    noise_std: float = dataclasses.field(default=0.0, compare=False)
    normalize: bool = False
    norm_scale: float | None = dataclasses.field(default=None, compare=False)
    shifted: bool = dataclasses.field(init=False, repr=False)
    noisy: bool = dataclasses.field(init=False, repr=False)
    fixed_scale: bool = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        ids = tuple(self.function_ids)
        if not ids or len(set(ids)) != len(ids):
            raise ValueError(f"function_ids must be distinct BBOB ids, got {self.function_ids!r}")
        object.__setattr__(self, "function_ids", ids)
        self._set_code_paths()
        self.members  # noqa: B018  (validates every option)

    @property
    def members(self) -> tuple[BBOBFunction, ...]:
        """One :class:`BBOBFunction` per id, with the suite's options."""
        fields = [f.name for f in dataclasses.fields(self) if f.init and f.name != "function_ids"]
        options = {name: getattr(self, name) for name in fields}
        return tuple(BBOBFunction(f, **options) for f in self.function_ids)

    @property
    def name(self) -> str:
        return f"bbob_suite{len(self.function_ids)}_i{self.instance:02d}_d{self.dim:02d}"

    def problem_params(
        self, index: jax.Array | int, key: jax.Array | None, numbers: BBOBNumbers | None = None
    ) -> BBOBSuiteParams:
        """Function ``function_ids[index]`` (``index`` may be traced), shifted and rotated
        from ``key`` as :meth:`BBOBFunction.sample_params` does (``None``: COCO's instance),
        with ``numbers`` (``None``: :attr:`numbers`)."""
        numbers = self.numbers if numbers is None else numbers
        index = jnp.asarray(index, jnp.int32)
        dtype = jnp.zeros(()).dtype
        stacked = _stacked_instances(self.function_ids, self.dim, self.instance)
        coco = BBOBParams(**{k: jnp.asarray(v, dtype)[index] for k, v in stacked.items()})
        plain = dataclasses.replace(self.members[0], normalize=False)
        params = BBOBSuiteParams(index=index, function=plain._params(key, numbers, coco))
        if self.normalize:
            scale = _norm_scale(self, params, numbers)
            params = dataclasses.replace(
                params, function=dataclasses.replace(params.function, norm_scale=scale)
            )
        return params

    def sample_params(self, key: jax.Array, numbers: BBOBNumbers | None = None) -> BBOBSuiteParams:
        """A member drawn uniformly (from ``fold_in(key, 3)``), shifted and rotated from ``key``."""
        index = jax.random.randint(jax.random.fold_in(key, 3), (), 0, len(self.function_ids))
        return self.problem_params(index, key, numbers)

    def gap(self, params: BBOBSuiteParams, x: jax.Array) -> jax.Array:
        """``(...)`` gap of the run's function at ``x`` of shape ``(..., d)``."""
        return jax.lax.switch(params.index, [fn.gap for fn in self.members], params.function, x)


@functools.cache
def _stacked_instances(function_ids: tuple[int, ...], dim: int, instance: int) -> dict:
    """``(F, ...)`` float64 arrays of the instances, Gallagher's peaks zero-padded."""
    arrays = [bbob_instances.build_instance(f, dim, instance)._asdict() for f in function_ids]
    peaks = max(a["peaks"].shape[0] for a in arrays)

    def pad(name: str, a: np.ndarray) -> np.ndarray:
        if name not in ("peaks", "peak_scales", "peak_heights"):
            return a
        return np.pad(a, [(0, peaks - a.shape[0])] + [(0, 0)] * (a.ndim - 1))

    return {k: np.stack([pad(k, a[k]) for a in arrays]) for k in arrays[0]}


@functools.partial(jax.jit, static_argnames=("shifted", "rotate"))
def _draw_shift_rotation(
    key: jax.Array, x_opt: jax.Array, shift_radius: jax.Array, *, shifted: bool, rotate: bool
) -> tuple[jax.Array, jax.Array]:
    """``x_star = x_opt + delta`` and ``U`` of the extra transformation (one compile per ``d``)."""
    dim, dtype = x_opt.shape[-1], x_opt.dtype
    x_star, rotation = x_opt, jnp.eye(dim, dtype=dtype)
    if shifted:
        shift_radius = jnp.asarray(shift_radius, dtype)
        delta = jax.random.uniform(
            jax.random.fold_in(key, 0), (dim,), dtype, -shift_radius, shift_radius
        )
        x_star = x_opt + delta
    if rotate:
        rotation = haar_orthogonal(jax.random.fold_in(key, 1), dim, dtype)
    return x_star, rotation


def _norm_scale(fn: BBOBFunction | BBOBSuite, params: Any, numbers: BBOBNumbers) -> jax.Array:
    """The normalisation scale ``s``: ``numbers.norm_scale`` where given, else
    :func:`_origin_scale`."""
    if fn.fixed_scale:
        return jnp.asarray(numbers.norm_scale, params.coco.f_opt.dtype)
    return _origin_scale(fn, params)


@functools.partial(jax.jit, static_argnums=0)
def _origin_scale(fn: BBOBFunction | BBOBSuite, params: Any) -> jax.Array:
    """The default normalisation scale ``s = |Delta(0)|`` (1 in the null event ``x_star = 0``)."""
    dtype = params.coco.f_opt.dtype
    scale = jnp.abs(fn.gap(params, jnp.zeros(fn.dim, dtype)))
    return jnp.where(scale > 0, scale, jnp.ones((), dtype))


# --- The 24 functions: gap f(x) - f_opt for one point x of shape (d,) ---------------------------
def _f1(p: BBOBParams, x: jax.Array) -> jax.Array:  # sphere
    return jnp.sum((x - p.shift) ** 2)


def _f2(p: BBOBParams, x: jax.Array) -> jax.Array:  # separable ellipsoid
    return _ellipsoid(t_osz(x - p.shift))


def _f3(p: BBOBParams, x: jax.Array) -> jax.Array:  # Rastrigin
    z = conditioning(10.0, x.shape[-1], x.dtype) * t_asy(t_osz(x - p.shift), 0.2)
    return _rastrigin(z)


def _f4(p: BBOBParams, x: jax.Array) -> jax.Array:  # Bueche-Rastrigin
    d = x.shape[-1]
    z = t_osz(x - p.shift)
    # s_i = 10^(0.5 i/(d-1)), times 10 on positive coordinates of odd 1-based index.
    odd = (jnp.arange(d) % 2) == 0
    factor = jnp.sqrt(10.0) ** _expo(d, x.dtype) * jnp.where((z > 0) & odd, 10.0, 1.0)
    return _rastrigin(factor * z) + 100.0 * boundary_penalty(x)


def _f5(p: BBOBParams, x: jax.Array) -> jax.Array:  # linear slope
    slope = jnp.sign(p.x_opt) * jnp.sqrt(100.0) ** _expo(x.shape[-1], x.dtype)
    z = jnp.where(p.x_opt * x < 25.0, x, p.x_opt)  # flat beyond the optimal corner
    return jnp.sum(5.0 * jnp.abs(slope) - slope * z)


def _f6(p: BBOBParams, x: jax.Array) -> jax.Array:  # attractive sector
    z = numerics.matmul(p.M, x - p.shift)
    s = jnp.sum(jnp.where(z * p.shift > 0, 100.0 * 100.0, 1.0) * z**2)
    return t_osz(s) ** 0.9


def _f7(p: BBOBParams, x: jax.Array) -> jax.Array:  # step ellipsoid
    expo = _expo(x.shape[-1], x.dtype)
    z_hat = jnp.sqrt(10.0**expo) * numerics.matmul(p.Q, x - p.shift)
    rounded = jnp.where(
        jnp.abs(z_hat) > 0.5, _round_half_up(z_hat), _round_half_up(10.0 * z_hat) / 10.0
    )
    z = numerics.matmul(p.R, rounded)
    core = jnp.sum(100.0**expo * z**2)
    return 0.1 * jnp.maximum(jnp.abs(z_hat[0]) * 1e-4, core) + boundary_penalty(x)


def _f8(p: BBOBParams, x: jax.Array) -> jax.Array:  # Rosenbrock
    factor = max(1.0, math.sqrt(x.shape[-1]) / 8.0)
    return _rosenbrock(factor * (x - p.shift) + 1.0)


def _f9(p: BBOBParams, x: jax.Array) -> jax.Array:  # rotated Rosenbrock
    return _rosenbrock(numerics.matmul(p.M, x) + 0.5)


def _f10(p: BBOBParams, x: jax.Array) -> jax.Array:  # rotated ellipsoid
    return _ellipsoid(t_osz(numerics.matmul(p.R, x - p.shift)))


def _f11(p: BBOBParams, x: jax.Array) -> jax.Array:  # discus
    z = t_osz(numerics.matmul(p.R, x - p.shift))
    return 1e6 * z[0] ** 2 + jnp.sum(z[1:] ** 2)


def _f12(p: BBOBParams, x: jax.Array) -> jax.Array:  # bent cigar
    z = numerics.matmul(p.R, t_asy(numerics.matmul(p.R, x - p.shift), 0.5))
    return z[0] ** 2 + 1e6 * jnp.sum(z[1:] ** 2)


def _f13(p: BBOBParams, x: jax.Array) -> jax.Array:  # sharp ridge
    z = numerics.matmul(p.M, x - p.shift)
    return z[0] ** 2 + 100.0 * jnp.sqrt(jnp.sum(z[1:] ** 2))


def _f14(p: BBOBParams, x: jax.Array) -> jax.Array:  # different powers
    z = numerics.matmul(p.R, x - p.shift)
    return jnp.sqrt(jnp.sum(jnp.abs(z) ** (2.0 + 4.0 * _expo(x.shape[-1], x.dtype))))


def _f15(p: BBOBParams, x: jax.Array) -> jax.Array:  # rotated Rastrigin
    return _rastrigin(numerics.matmul(p.M, t_asy(t_osz(numerics.matmul(p.R, x - p.shift)), 0.2)))


_WEIERSTRASS_K = 12
_WEIERSTRASS_F0 = sum(0.5**k * math.cos(2.0 * math.pi * 3.0**k * 0.5) for k in range(12))


def _f16(p: BBOBParams, x: jax.Array) -> jax.Array:  # Weierstrass
    d = x.shape[-1]
    z = numerics.matmul(p.M, t_osz(numerics.matmul(p.R, x - p.shift)))
    k = jnp.arange(_WEIERSTRASS_K, dtype=x.dtype)
    terms = (0.5**k)[None, :] * jnp.cos(2.0 * math.pi * (z[:, None] + 0.5) * (3.0**k)[None, :])
    core = 10.0 * (jnp.sum(terms) / d - _WEIERSTRASS_F0) ** 3
    return core + 10.0 / d * boundary_penalty(x)


def _schaffers(p: BBOBParams, x: jax.Array) -> jax.Array:  # f17, f18 (condition in M)
    z = numerics.matmul(p.M, t_asy(numerics.matmul(p.R, x - p.shift), 0.5))
    s = z[:-1] ** 2 + z[1:] ** 2
    core = jnp.mean(s**0.25 * (1.0 + jnp.sin(50.0 * s**0.1) ** 2)) ** 2
    return core + 10.0 * boundary_penalty(x)


def _f19(p: BBOBParams, x: jax.Array) -> jax.Array:  # composite Griewank-Rosenbrock F8F2
    z = numerics.matmul(p.M, x) + 0.5
    s = 100.0 * (z[:-1] ** 2 - z[1:]) ** 2 + (1.0 - z[:-1]) ** 2
    return 10.0 + 10.0 * jnp.mean(s / 4000.0 - jnp.cos(s))


def _f20(p: BBOBParams, x: jax.Array) -> jax.Array:  # Schwefel x sin(sqrt|x|)
    c = SCHWEFEL_TWICE_XOPT
    x_hat = 2.0 * p.signs * x
    z_hat = x_hat.at[1:].add(0.25 * (x_hat[:-1] - c))
    z = 100.0 * (numerics.matmul(p.M, z_hat - c) + c)
    penalty = jnp.sum(jnp.maximum(jnp.abs(z) - 500.0, 0.0) ** 2)
    return 0.01 * (penalty + 418.9828872724339 - jnp.mean(z * jnp.sin(jnp.sqrt(jnp.abs(z)))))


def _gallagher(p: BBOBParams, x: jax.Array) -> jax.Array:  # f21, f22
    d = x.shape[-1]
    diff = numerics.matmul(p.Q, x)[None, :] - p.peaks  # (p, d)
    heights = p.peak_heights * jnp.exp(-0.5 / d * jnp.sum(p.peak_scales * diff**2, axis=-1))
    return t_osz(10.0 - jnp.max(heights)) ** 2 + boundary_penalty(x)


def _f23(p: BBOBParams, x: jax.Array) -> jax.Array:  # Katsuura
    d = x.shape[-1]
    z = numerics.matmul(p.M, x - p.shift)
    two_j = 2.0 ** jnp.arange(1, 33, dtype=x.dtype)
    scaled = z[:, None] * two_j[None, :]  # (d, 32)
    inner = jnp.sum(jnp.abs(scaled - _round_half_up(scaled)) / two_j[None, :], axis=-1)
    log_prod = jnp.sum(jnp.log1p(jnp.arange(1, d + 1, dtype=x.dtype) * inner))
    core = 10.0 / d**2 * jnp.expm1(10.0 / d**1.2 * log_prod)
    return core + boundary_penalty(x)


def _f24(p: BBOBParams, x: jax.Array) -> jax.Array:  # Lunacek bi-Rastrigin
    d = x.shape[-1]
    mu0, dd = LUNACEK_MU0, LUNACEK_D
    s = 1.0 - 0.5 / (math.sqrt(d + 20.0) - 4.1)
    mu1 = -math.sqrt((mu0**2 - dd) / s)
    x_hat = 2.0 * p.signs * x
    z = numerics.matmul(p.M, x_hat - mu0)
    funnels = jnp.minimum(jnp.sum((x_hat - mu0) ** 2), dd * d + s * jnp.sum((x_hat - mu1) ** 2))
    return funnels + 10.0 * (d - jnp.sum(jnp.cos(2.0 * math.pi * z))) + 1e4 * boundary_penalty(x)


_GAPS: dict[int, Callable[[BBOBParams, jax.Array], jax.Array]] = {
    1: _f1, 2: _f2, 3: _f3, 4: _f4, 5: _f5, 6: _f6, 7: _f7, 8: _f8, 9: _f9, 10: _f10,
    11: _f11, 12: _f12, 13: _f13, 14: _f14, 15: _f15, 16: _f16, 17: _schaffers,
    18: _schaffers, 19: _f19, 20: _f20, 21: _gallagher, 22: _gallagher, 23: _f23, 24: _f24,
}  # fmt: skip


# --- Small pure helpers -------------------------------------------------------------------------
def t_osz(x: jax.Array) -> jax.Array:
    """COCO's oscillation ``T_osz``: ``sign(x) exp(x^ + 0.049 (sin c1 x^ + sin c2 x^))``,
    ``x^ = log|x|`` (0 at 0), ``c1, c2 = 10, 7.9`` for ``x > 0`` and ``5.5, 3.1`` for ``x < 0``."""
    positive = x > 0
    safe = jnp.where(x == 0, 1.0, jnp.abs(x))
    t = jnp.log(safe) / 0.1
    wiggle = jnp.where(
        positive, jnp.sin(t) + jnp.sin(0.79 * t), jnp.sin(0.55 * t) + jnp.sin(0.31 * t)
    )
    out = jnp.exp(0.1 * (t + 0.49 * wiggle))
    return jnp.where(x == 0, 0.0, jnp.where(positive, out, -out))


def t_asy(x: jax.Array, beta: float) -> jax.Array:
    """COCO's asymmetry ``T_asy^beta``: ``x_i^(1 + beta i/(d-1) sqrt(x_i))`` where ``x_i > 0``."""
    expo = _expo(x.shape[-1], x.dtype)
    safe = jnp.where(x > 0, x, 1.0)
    return jnp.where(x > 0, safe ** (1.0 + beta * expo * jnp.sqrt(safe)), x)


def conditioning(alpha: float, dim: int, dtype: DTypeLike) -> jax.Array:
    """``(dim,)`` diagonal of ``Lambda^alpha``: ``alpha^(0.5 i / (d - 1))``."""
    return alpha ** (0.5 * _expo(dim, dtype))


def boundary_penalty(x: jax.Array) -> jax.Array:
    """COCO's ``f_pen``: ``sum_i max(0, |x_i| - 5)^2`` (times the function's own factor)."""
    return jnp.sum(jnp.maximum(jnp.abs(x) - 5.0, 0.0) ** 2)


def normalize_gap(gap: jax.Array, scale: jax.Array) -> jax.Array:
    """``u / (1 + u)`` with ``u = log1p(|gap| / scale)``: in [0, 1) by construction."""
    u = jnp.log1p(jnp.abs(gap) / scale)
    return jnp.where(jnp.isinf(u), 1.0, u / (1.0 + u))  # the limit at an overflowed gap


def haar_orthogonal(key: jax.Array, dim: int, dtype: DTypeLike = jnp.float32) -> jax.Array:
    """``(dim, dim)`` Haar-distributed orthogonal matrix (QR of a Gaussian, signs fixed)."""
    q, r = jnp.linalg.qr(jax.random.normal(key, (dim, dim), dtype))
    return q * jnp.where(jnp.diagonal(r) < 0, -1.0, 1.0).astype(dtype)[None, :]


def _per_point(fn: Callable[[jax.Array], jax.Array], x: jax.Array, dtype: DTypeLike) -> jax.Array:
    """Applies ``fn: (d,) -> ()`` over the leading axes of ``x`` (``jnp.vectorize``)."""
    x = jnp.asarray(x)
    x = x.astype(jnp.result_type(x.dtype, dtype))
    return jnp.vectorize(fn, signature="(d)->()")(x)


def _expo(dim: int, dtype: DTypeLike) -> jax.Array:
    """``i / (d - 1)`` for ``i = 0..d-1``."""
    return jnp.arange(dim, dtype=dtype) / (dim - 1.0)


def _round_half_up(x: jax.Array) -> jax.Array:
    """COCO's ``coco_double_round``: ``floor(x + 0.5)`` (not banker's rounding)."""
    return jnp.floor(x + 0.5)


def _ellipsoid(z: jax.Array) -> jax.Array:
    return jnp.sum(1e6 ** _expo(z.shape[-1], z.dtype) * z**2)


def _rastrigin(z: jax.Array) -> jax.Array:
    return 10.0 * (z.shape[-1] - jnp.sum(jnp.cos(2.0 * math.pi * z))) + jnp.sum(z**2)


def _rosenbrock(z: jax.Array) -> jax.Array:
    return 100.0 * jnp.sum((z[:-1] ** 2 - z[1:]) ** 2) + jnp.sum((z[:-1] - 1.0) ** 2)
