"""Convex environments for bandit convex optimisation (Lu et al., ICLR 2024, Section 5).

A loss family ``family(theta, x) -> ()`` (convex, ``G``-Lipschitz on ``K``, non-negative:
Assumption 1) and round parameters ``theta_t``; round ``t``'s loss is
``Partial(family, theta_t)``. Target schedules:

- ``"piecewise"``: ``c_t = c_s = rho r u_s`` on segment ``s``, ``u_s`` uniform on the sphere.
- ``"alternate"``: ``c_t = ± rho r u``, switching sign every ``period`` rounds.
- ``"drift"``: ``c_t = rho r (cos(2 pi t / period + phi) e_1 + sin(...) e_2)``.

``rho = target_radius <= 1`` keeps targets in ``r B ⊂ K``: each round's minimum is 0.

Static and traced (``docs/environments.md``): the object is a static argument of the programs
that run it, compared and hashed by what sets a shape or a code path (``dim``, ``horizon``,
``schedule``, ``num_segments``, ``random_change_points``, the loss family, the domain). Every
number (change points, ``period``, ``rho``, ``G``, ``a_scale``, ``huber_mu``) is a field of the
params pytree (:class:`ConvexEnvParams`), read from it alone inside a program; its dataclass
field, declared ``compare=False``, is only its default, read by ``default_params``. Two
environments that differ in numbers alone share one compiled program.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar, cast

import chex
import jax
import jax.numpy as jnp
from jax.tree_util import Partial

from stabl_jax import checks, gradients
from stabl_jax.domains import Ball, Domain
from stabl_jax.envs.base import Environment, segment_of, set_segments

SCHEDULES: tuple[str, ...] = ("piecewise", "alternate", "drift")


# --- loss families: pure functions family(theta, x) -------------------------------------------


def safe_norm(v: jax.Array) -> jax.Array:
    """``||v||_2`` with gradient 0 (a valid subgradient) at ``v = 0`` instead of NaN."""
    sq = jnp.sum(v * v)
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def distance_loss(theta: jax.Array, x: jax.Array) -> jax.Array:
    """``l(x) = ||x - c||_2`` with ``theta = c`` ``(d,)``: 1-Lipschitz, minimised at ``c``."""
    return safe_norm(x - theta)


def abs_linear_loss(theta: jax.Array, x: jax.Array) -> jax.Array:
    """``l(x) = |a^T x - b|`` with ``theta = [a, b]`` ``(d + 1,)``: ``||a||``-Lipschitz."""
    return jnp.abs(jnp.dot(theta[:-1], x) - theta[-1])


def huber_loss(theta: jax.Array, x: jax.Array) -> jax.Array:
    """Huber-smoothed quadratic ``l(x) = h_mu(||x - c||)`` with ``theta = [c, mu]`` ``(d + 1,)``:
    ``h_mu(z) = z^2 / 2`` for ``z <= mu``, ``mu z - mu^2 / 2`` beyond. Gradient norm
    ``min(||x - c||, mu)``; 1-smooth."""
    c, mu = theta[:-1], theta[-1]
    z = safe_norm(x - c)
    return jnp.where(z <= mu, 0.5 * z * z, mu * z - 0.5 * mu * mu)


@chex.dataclass(frozen=True)
class ConvexEnvParams:
    """Per-run parameters of a convex environment (traced): every number a program reads.

    Attributes:
      change_points: ``(S - 1,)`` int32 rounds where a new segment starts (piecewise).
      targets: ``(num_targets, d)`` float32 the segment targets (piecewise: ``S`` rows;
        alternate: 2 rows ``c, -c``; drift: 1 unused row).
      phase: ``()`` float32 the drift's starting angle ``phi``.
      period: ``()`` int32 rounds between switches (alternate) or per revolution (drift).
      target_norm: ``()`` float32 ``rho r``, the targets' norm.
      lipschitz: ``()`` float32 ``G`` (:attr:`ConvexEnv.lipschitz`): the step sizes of the
        generic window comparator (:func:`stabl_jax.bco.simulate.minimize_window`).
    """

    change_points: jax.Array
    targets: jax.Array
    phase: jax.Array
    period: jax.Array
    target_norm: jax.Array
    lipschitz: jax.Array


@chex.dataclass(frozen=True)
class AbsoluteLinearParams(ConvexEnvParams):
    """:class:`AbsoluteLinear`'s per-run parameters: ``a_scale`` ``()`` float32, ``||a_t||``."""

    a_scale: jax.Array


@chex.dataclass(frozen=True)
class HuberParams(ConvexEnvParams):
    """:class:`HuberTarget`'s per-run parameters: ``huber_mu`` ``()`` float32, ``mu``."""

    huber_mu: jax.Array


@dataclasses.dataclass(frozen=True)
class ConvexEnv(Environment):
    """Base class: a target schedule on a domain; subclasses fix the loss family.

    Static (the environment's identity): ``dim``, ``horizon``, ``domain``, ``schedule``,
    ``num_segments``, ``random_change_points`` and a subclass's loss family. ``domain`` stays
    static although it holds a number (its size): its projection and support function are
    code of the programs, and the learners take the same domain as a static field. Traced
    (defaults of :class:`ConvexEnvParams`' fields, ``compare=False``): ``change_points``,
    ``period``, ``target_radius`` and ``G`` (:attr:`lipschitz`).

    Attributes:
      dim: ``d`` (>= 1).
      horizon: ``T`` (>= 2).
      domain: ``K``; ``None`` is the unit ball.
      schedule: ``"piecewise"`` (default), ``"alternate"`` or ``"drift"`` (module docstring).
      change_points: the given change points (piecewise), or ``None`` for ``num_segments``
        equal segments (with ``random_change_points``, the number of points to draw).
        Traced: the default of ``params.change_points``.
      num_segments: ``S`` when ``change_points`` is ``None``.
      random_change_points: draw ``S - 1`` change points per run in :meth:`sample_params`.
      period: rounds between switches (alternate) or per revolution (drift); ``None`` is
        ``T // S`` (alternate) or ``T`` (drift). Traced: the default of ``params.period``.
      target_radius: ``rho`` in (0, 1]; targets have norm ``rho r``. Traced: the default of
        ``params.target_norm``.
    """

    dim: int
    horizon: int
    domain: Domain | None = None
    schedule: str = "piecewise"
    change_points: tuple[int, ...] | None = dataclasses.field(default=None, compare=False)
    num_segments: int = 4
    random_change_points: bool = False
    period: int | None = dataclasses.field(default=None, compare=False)
    target_radius: float = dataclasses.field(default=0.8, compare=False)

    name: ClassVar[str] = "convex"
    traced_defaults: ClassVar[bool] = True
    piecewise: ClassVar[bool] = True
    #: ``window_minimum`` and ``window_subgradient`` give the exact comparator of a window.
    exact_windows: ClassVar[bool] = False
    smoothness: ClassVar[float | None] = None  # beta if every loss is beta-smooth
    trace_names: ClassVar[tuple[str, ...]] = ("loss", "best_loss")
    #: A subclass's loss family (``staticmethod(f)``): the default :attr:`family`.
    loss_family: ClassVar[Any] = None
    #: A subclass's numbers, which must be > 0, checked after the base's.
    positive_fields: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        checks.check_int("dim", self.dim, minimum=1)
        checks.check_horizon(self.horizon, minimum=2)
        if self.domain is None:
            object.__setattr__(self, "domain", Ball(dim=self.dim, radius=1.0))
        if not isinstance(self.domain, Domain) or self.domain.dim != self.dim:
            raise ValueError(f"domain must be a Domain with dim={self.dim}, got {self.domain!r}")
        checks.check_choice("schedule", self.schedule, SCHEDULES)
        set_segments(self)
        if self.period is None:
            drift = self.schedule == "drift"
            default = self.horizon if drift else self.horizon // self.num_segments
            object.__setattr__(self, "period", max(1, default))
        checks.check_int("period", self.period, minimum=1)
        if not 0.0 < checks.check_real("target_radius", self.target_radius) <= 1.0:
            raise ValueError(f"target_radius must be in (0, 1], got {self.target_radius!r}")
        for field in self.positive_fields:
            checks.check_positive(field, getattr(self, field))

    @property
    def _domain(self) -> Domain:
        """:attr:`domain` as the constructor resolved it (never ``None``)."""
        return cast(Domain, self.domain)

    @property
    def _period(self) -> int:
        """:attr:`period` as the constructor resolved it (never ``None``)."""
        return cast(int, self.period)

    # --- what a subclass defines ------------------------------------------------------------
    @property
    def family(self) -> Callable[[jax.Array, jax.Array], jax.Array]:
        """The pure loss family ``family(theta, x) -> ()`` (default: :attr:`loss_family`)."""
        if self.loss_family is None:
            raise NotImplementedError
        return cast(Callable[[jax.Array, jax.Array], jax.Array], self.loss_family)

    @property
    def lipschitz(self) -> float:
        """``G``: every ``family(theta_t, .)`` is ``G``-Lipschitz on ``K`` (host-side, from the
        fields: a learner's default; a program reads ``params.lipschitz``)."""
        raise NotImplementedError

    def theta_from_target(self, params: Any, target: jax.Array, key: jax.Array) -> jax.Array:
        """Round parameter ``theta_t`` from the target ``c_t`` ``(d,)`` (default: ``c_t``);
        a subclass reads its numbers from ``params``."""
        del params, key
        return target

    def minimizer(self, theta: jax.Array) -> jax.Array:
        """``(d,)`` a minimiser over ``K`` of ``family(theta, .)``."""
        raise NotImplementedError

    # --- schedule ---------------------------------------------------------------------------
    @property
    def num_targets(self) -> int:
        return {"piecewise": self.num_segments, "alternate": 2, "drift": 1}[self.schedule]

    @property
    def target_norm(self) -> float:
        return float(self.target_radius) * self._domain.r

    @property
    def default_params(self) -> Any:
        """A :class:`ConvexEnvParams`: the numbers of the fields (given change points,
        ``period``, ``rho r``, ``G``) with the targets and drift phase of the fixed key
        ``jax.random.key(0)``; the only reader of the fields declared ``compare=False``.
        Subclasses add their numbers (their params class)."""
        fixed = ConvexEnvParams(
            change_points=jnp.asarray(self.change_points, jnp.int32).reshape(self.num_segments - 1),
            targets=jnp.zeros((self.num_targets, self.dim), jnp.float32),
            phase=jnp.float32(0.0),
            period=jnp.int32(self._period),
            target_norm=jnp.float32(self.target_norm),
            lipschitz=jnp.float32(self.lipschitz),
        )
        return self._draw(jax.random.key(0), fixed, False)

    def sample_params(self, key: jax.Array, defaults: Any = None) -> ConvexEnvParams:
        """Per-run parameters: targets, drift phase and (with ``random_change_points``) change
        points drawn from ``key``, every other number from ``defaults``.

        Args:
          key: the run's key.
          defaults: :attr:`default_params`; a program passes them as a traced argument
            (:func:`stabl_jax.envs.base.sample_params`). ``None``: ``self.default_params``,
            constants of the program being traced, so only outside a program that takes the
            environment as a static argument.
        """
        return self._draw(key, self.default_params if defaults is None else defaults, True)

    @partial(jax.jit, static_argnums=(0, 3))  # one program, not a dozen eager dispatches
    def _draw(self, key: jax.Array, defaults: Any, random_points: bool) -> Any:
        """``defaults`` with the targets (norm ``defaults.target_norm``), the drift phase and,
        where ``random_points`` and ``random_change_points``, the change points drawn."""
        s, n = self.num_segments, self.num_targets
        k_points, k_dirs, k_phase = jax.random.split(key, 3)
        points = defaults.change_points
        if random_points and self.random_change_points and s > 1:
            # S - 1 distinct rounds uniform in 1..T-1: the top S - 1 of T - 1 iid uniforms.
            scores = jax.random.uniform(k_points, (self.horizon - 1,))
            points = jnp.sort(jax.lax.top_k(scores, s - 1)[1] + 1).astype(jnp.int32)
        g = jax.random.normal(k_dirs, (n, self.dim), jnp.float32)
        norms = jnp.linalg.norm(g, axis=1, keepdims=True)
        dirs = g / jnp.where(norms > 0, norms, 1.0)  # rows uniform on the sphere
        if self.dim == 1:  # alternate signs so consecutive targets differ
            signs = jnp.where(jnp.arange(n) % 2 == 0, 1.0, -1.0)[:, None]
            dirs = signs * jnp.where(dirs[:1] < 0, -1.0, 1.0)
        if self.schedule == "alternate":
            dirs = jnp.concatenate([dirs[:1], -dirs[:1]])
        phase = jax.random.uniform(k_phase, (), jnp.float32, 0.0, 2 * math.pi)
        targets = (defaults.target_norm * dirs).astype(jnp.float32)
        return defaults.replace(change_points=points, targets=targets, phase=phase)

    def segment(self, params: ConvexEnvParams, t: jax.Array) -> jax.Array:
        """``()`` int32 segment of round ``t`` (piecewise schedule)."""
        return segment_of(params.change_points, t)

    def target(self, params: ConvexEnvParams, t: jax.Array) -> jax.Array:
        """``(d,)`` the target ``c_t`` of round ``t``."""
        if self.schedule == "piecewise":
            return params.targets[self.segment(params, t)]
        if self.schedule == "alternate":
            return params.targets[(t // params.period) % 2]
        angle = 2.0 * math.pi * t / params.period + params.phase
        if self.dim == 1:
            return params.target_norm * jnp.cos(angle)[None]
        plane = jnp.stack([jnp.cos(angle), jnp.sin(angle)])
        return params.target_norm * jnp.concatenate([plane, jnp.zeros((self.dim - 2,))])

    # --- the environment's interface ---------------------------------------------------------
    def theta(self, params: ConvexEnvParams, t: jax.Array, key: jax.Array) -> jax.Array:
        """Round ``t``'s loss parameter ``theta_t`` (float32)."""
        return self.theta_from_target(params, self.target(params, t), key).astype(jnp.float32)

    def loss_fn(self, params: ConvexEnvParams, t: jax.Array, key: jax.Array) -> Partial:
        """``jax.tree_util.Partial(family, theta_t)``: round ``t``'s loss ``x (d,) -> ()``."""
        return Partial(self.family, self.theta(params, t, key))

    def evaluate(
        self, params: ConvexEnvParams, state: Any, t: jax.Array, query: Any, key: jax.Array
    ) -> tuple[Any, jax.Array, dict[str, jax.Array]]:
        """Round ``t``'s loss at the queried points ``query.points`` ``(Q, d)`` only (no state)."""
        loss_fn = self.loss_fn(params, t, key)
        best: jax.Array | float
        try:
            best = self.family(loss_fn.args[0], self.minimizer(loss_fn.args[0]))
        except NotImplementedError:
            best = jnp.nan
        info = {"best_loss": jnp.asarray(best, jnp.float32)}
        return state, jax.vmap(loss_fn)(query.points), info


@dataclasses.dataclass(frozen=True)
class MovingTarget(ConvexEnv):
    """Distance to a moving target, ``l_t(x) = ||x - c_t||`` (``G = 1``).

    Example:
      >>> import jax
      >>> env = MovingTarget(dim=2, horizon=64)
      >>> f = env.loss_fn(env.default_params, 0, jax.random.key(0))
      >>> float(f(env.minimizer(f.args[0])))
      0.0
    """

    name: ClassVar[str] = "moving_target"
    exact_windows: ClassVar[bool] = True
    loss_family = staticmethod(distance_loss)

    @property
    def lipschitz(self) -> float:
        return 1.0

    def minimizer(self, theta: jax.Array) -> jax.Array:
        return theta

    #: Weiszfeld steps of :meth:`window_minimum`.
    window_minimum_steps: ClassVar[int] = 200

    def window_minimum(
        self, thetas: jax.Array, num_steps: int | None = None
    ) -> tuple[jax.Array, jax.Array]:
        """``min_{x ∈ K} sum_t ||x - c_t||`` over a window's targets ``thetas`` ``(L, d)``.

        Returns:
          ``(x, value)``: ``(d,)`` the minimiser found and ``()`` the window sum there.
        """

        def total(x: jax.Array) -> jax.Array:
            return jnp.sum(jax.vmap(distance_loss, in_axes=(0, None))(thetas, x))

        def weiszfeld(x: jax.Array, _: Any) -> tuple[jax.Array, None]:
            dist = jnp.linalg.norm(thetas - x[None, :], axis=1)
            w = 1.0 / jnp.maximum(dist, 1e-12)
            return (w @ thetas) / jnp.sum(w), None

        steps = self.window_minimum_steps if num_steps is None else num_steps
        x, _ = jax.lax.scan(weiszfeld, jnp.mean(thetas, axis=0), None, length=steps)
        nearest = thetas[jnp.argmin(jnp.linalg.norm(thetas - x[None, :], axis=1))]
        fx, fn = total(x), total(nearest)
        return jnp.where(fn < fx, nearest, x), jnp.minimum(fx, fn)

    def window_subgradient(self, thetas: jax.Array, x: jax.Array) -> jax.Array:
        """``(d,)`` the least-norm subgradient of ``sum_t ||x - c_t||`` at ``x``,
        ``g (1 - m / ||g||)_+``: ``g`` the sum of unit vectors to the targets away from ``x``,
        ``m`` the number of targets at ``x``."""
        diff = x[None, :] - thetas
        dist = jnp.linalg.norm(diff, axis=1)
        coincide = dist <= 1e-6 * self._domain.D
        unit = diff / jnp.where(coincide, 1.0, dist)[:, None]
        g = jnp.sum(jnp.where(coincide[:, None], 0.0, unit), axis=0)
        g_norm = jnp.linalg.norm(g)
        m = jnp.sum(coincide).astype(g.dtype)
        shrink = jnp.maximum(0.0, 1.0 - m / jnp.where(g_norm > 0, g_norm, 1.0))
        return g * shrink


@dataclasses.dataclass(frozen=True)
class AbsoluteLinear(ConvexEnv):
    """Absolute linear loss ``l_t(x) = |a_t^T (x - c_t)|`` with a fresh direction
    ``a_t = a_scale * u_t`` each round (``u_t`` uniform on the sphere); ``G = a_scale``.

    Attributes:
      a_scale: ``||a_t||`` (> 0). Traced: the default of ``params.a_scale``
        (:class:`AbsoluteLinearParams`) and of ``params.lipschitz``.
    """

    a_scale: float = dataclasses.field(default=1.0, compare=False)

    name: ClassVar[str] = "abs_linear"
    loss_family = staticmethod(abs_linear_loss)
    positive_fields = ("a_scale",)

    @property
    def lipschitz(self) -> float:
        return float(self.a_scale)

    @property
    def default_params(self) -> AbsoluteLinearParams:
        return AbsoluteLinearParams(**super().default_params, a_scale=jnp.float32(self.a_scale))

    def theta_from_target(
        self, params: AbsoluteLinearParams, target: jax.Array, key: jax.Array
    ) -> jax.Array:
        a = params.a_scale * gradients.sphere_uniform(key, self.dim, target.dtype)
        return jnp.concatenate([a, jnp.dot(a, target)[None]])

    def minimizer(self, theta: jax.Array) -> jax.Array:
        """The least-norm point ``a b / ||a||^2`` of ``{a^T x = b}`` (in ``K``: its norm is at
        most ``||c_t|| <= r``)."""
        a, b = theta[:-1], theta[-1]
        return a * b / jnp.dot(a, a)


@dataclasses.dataclass(frozen=True)
class HuberTarget(ConvexEnv):
    """Huber-smoothed quadratic ``l_t(x) = h_mu(||x - c_t||)`` (:func:`huber_loss`):
    ``G = min(mu, D + rho r)`` (the largest ``||x - c_t||`` over ``x ∈ K``), 1-smooth.

    Attributes:
      huber_mu: ``mu`` (> 0), where the quadratic turns linear. Traced: the default of
        ``params.huber_mu`` (:class:`HuberParams`) and, through ``G``, of ``params.lipschitz``.
    """

    huber_mu: float = dataclasses.field(default=0.5, compare=False)

    name: ClassVar[str] = "huber"
    smoothness: ClassVar[float | None] = 1.0

    loss_family = staticmethod(huber_loss)
    positive_fields = ("huber_mu",)

    @property
    def lipschitz(self) -> float:
        return min(float(self.huber_mu), self._domain.D + self.target_norm)

    @property
    def default_params(self) -> HuberParams:
        return HuberParams(**super().default_params, huber_mu=jnp.float32(self.huber_mu))

    def theta_from_target(
        self, params: HuberParams, target: jax.Array, key: jax.Array
    ) -> jax.Array:
        del key
        return jnp.concatenate([target, jnp.full((1,), params.huber_mu, target.dtype)])

    def minimizer(self, theta: jax.Array) -> jax.Array:
        return theta[:-1]


@dataclasses.dataclass(frozen=True)
class CustomConvex(ConvexEnv):
    """A user's loss family on the target schedule: ``theta_t = c_t`` ``(d,)``.

    Attributes:
      loss: ``loss(theta, x) -> ()``, convex, non-negative, ``lipschitz_bound``-Lipschitz in
        ``x`` on ``K`` (module-level: compared by identity; static).
      lipschitz_bound: ``G``. Traced: the default of ``params.lipschitz``.
      minimizer_fn: optional ``theta -> (d,)`` minimiser over ``K`` (static).

    Example:
      >>> import jax.numpy as jnp
      >>> def l1(theta, x):
      ...     return jnp.sum(jnp.abs(x - theta))
      >>> env = CustomConvex(dim=2, horizon=32, loss=l1, lipschitz_bound=2**0.5)
      >>> env.lipschitz
      1.4142135623730951
    """

    loss: Callable[[jax.Array, jax.Array], jax.Array] | None = None
    lipschitz_bound: float = dataclasses.field(default=1.0, compare=False)
    minimizer_fn: Callable[[jax.Array], jax.Array] | None = None

    name: ClassVar[str] = "custom"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not callable(self.loss):
            raise TypeError(f"loss must be a callable loss(theta, x), got {self.loss!r}")
        if self.minimizer_fn is not None and not callable(self.minimizer_fn):
            raise TypeError(
                f"minimizer_fn must be None or a callable theta -> (d,), got {self.minimizer_fn!r}"
            )
        checks.check_positive("lipschitz_bound", self.lipschitz_bound)

    @property
    def family(self) -> Callable[[jax.Array, jax.Array], jax.Array]:
        return self.loss  # type: ignore[return-value]

    @property
    def lipschitz(self) -> float:
        return float(self.lipschitz_bound)

    def minimizer(self, theta: jax.Array) -> jax.Array:
        if self.minimizer_fn is None:
            raise NotImplementedError("pass minimizer_fn to CustomConvex to use minimizer()")
        return self.minimizer_fn(theta)
