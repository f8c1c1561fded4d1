"""Eagle strategy (a firefly algorithm) in pure JAX, and ensembles of it on shared data.

The arms of the algorithm-selection task of Lu et al. (ICLR 2024). A port of OSS Vizier's
Eagle-strategy designer (Golovin et al., KDD 2017; Song et al., AutoML 2022), a firefly
algorithm (Yang, SAGA 2009) without Levy flights and with repulsion from worse flies,
minimising ``f`` over ``[0, 1]^d`` with at most ``pool_size`` flies.

* :func:`suggest`: below capacity, with probability ``explore_rate``, a random point
  (uniform, or scrambled Halton with ``fill="halton"``); else the next live fly moves, pulled
  by every other live fly ``j`` in random order, ``x <- clip(w_j x_j + (1 - w_j) x)``::

      w_j = G_j exp(-10 visibility ||x_j - x||^2 / d),
      G_j = gravity if f_j < f_fly else -negative_gravity,

  then perturbed by Laplace noise scaled by the fly's perturbation.
* :func:`update`: a live parent is replaced on improvement, else its perturbation shrinks by
  ``penalize_factor``; below ``perturbation_lower_bound`` it leaves a full pool unless best.
  Without a parent: a new fly below capacity, else it replaces the closest fly it beats.

Every arm's pool ingests every evaluation in order (the others' with ``parent = -1``), so
each pool is a function of the shared history; pools are padded to ``P`` slots for ``vmap``.
Defaults are Vizier's (:class:`EagleConfig`); continuous parameters only.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence

import chex
import jax
import jax.numpy as jnp
from jax.typing import DTypeLike

from stabl_jax import checks

# Vizier's distance scaling: squared distances are divided by d and multiplied by 10.
_DISTANCE_SCALE = 10.0
#: Points of the Halton sequence Vizier's ``QuasiRandomDesigner`` skips (``skip_points``).
HALTON_SKIP = 1000
#: How a pool below capacity draws its random points (module docstring).
FILLS: tuple[str, ...] = ("uniform", "halton")


@chex.dataclass(frozen=True)
class EagleParams:
    """The numbers of one Eagle optimiser (``()`` leaves; ``(A,)`` for an ensemble).

    Attributes:
      perturbation: perturbation of a new fly (fraction of the cube's side).
      gravity: attraction of a better fly.
      negative_gravity: repulsion of a worse fly.
      visibility: how fast a pull decays with distance.
      penalize_factor: perturbation multiplier after an unsuccessful move.
      perturbation_lower_bound: a fly below it is removed (full pool, not best).
      max_perturbation: cap on a stuck fly's perturbation.
      explore_rate: in [0, 1], chance of a random suggestion below capacity.
      pool_size: int32, the pool's capacity (at most ``P``).
    """

    perturbation: jax.Array
    gravity: jax.Array
    negative_gravity: jax.Array
    visibility: jax.Array
    penalize_factor: jax.Array
    perturbation_lower_bound: jax.Array
    max_perturbation: jax.Array
    explore_rate: jax.Array
    pool_size: jax.Array


@chex.dataclass(frozen=True)
class EagleState:
    """A pool of fireflies in ``P`` slots (``(A, ...)`` leading axis for an ensemble).

    Attributes:
      positions: ``(P, d)`` fly positions in ``[0, 1]^d``.
      values: ``(P,)`` the value observed at each fly (``+inf`` in empty slots).
      perturbations: ``(P,)`` each fly's perturbation size.
      alive: ``(P,)`` bool, which slots hold a fly.
      pointer: ``()`` int32, the last moved fly.
      best_value: ``()`` the best value this pool has ingested (``+inf`` before any).
      num_seen: ``()`` int32, evaluations ingested (all arms').
      num_random: ``()`` int32, this pool's random suggestions evaluated (its Halton index).
    """

    positions: jax.Array
    values: jax.Array
    perturbations: jax.Array
    alive: jax.Array
    pointer: jax.Array
    best_value: jax.Array
    num_seen: jax.Array
    num_random: jax.Array


@chex.dataclass(frozen=True)
class Suggestion:
    """What an optimiser proposes.

    Attributes:
      x: ``(d,)`` float, the point, in ``[0, 1]^d``.
      parent: ``()`` int32, the slot of the moved fly, ``-1`` for a random (new-fly) point.
    """

    x: jax.Array
    parent: jax.Array


def pool_capacity(dim: int, pool_size_factor: float = 1.2, max_pool_size: int = 1000) -> int:
    """Vizier's pool capacity ``min(10 + round((d^factor + d) / 2), max_pool_size)``.

    Example:
      >>> pool_capacity(4), pool_capacity(32), pool_capacity(64)
      (15, 58, 116)
    """
    return min(10 + round((dim**pool_size_factor + dim) * 0.5), max_pool_size)


@dataclasses.dataclass(frozen=True)
class EagleConfig:
    """One Eagle optimiser's hyperparameters (frozen, hashable); defaults are Vizier's.

    Attributes:
      perturbation, gravity, negative_gravity, visibility, penalize_factor,
      perturbation_lower_bound, max_perturbation, explore_rate: see :class:`EagleParams`.
      pool_size_factor: exponent of :func:`pool_capacity`.
      pool_size: an explicit capacity (>= 2); 0 uses the formula.
      max_pool_size: ceiling of the formula.
    """

    perturbation: float = 0.1
    gravity: float = 1.0
    negative_gravity: float = 0.02
    visibility: float = 3.0
    penalize_factor: float = 0.9
    perturbation_lower_bound: float = 1e-3
    max_perturbation: float = 0.5
    explore_rate: float = 1.0
    pool_size_factor: float = 1.2
    pool_size: int = 0
    max_pool_size: int = 1000

    def __post_init__(self) -> None:
        for name in ("perturbation", "visibility", "max_perturbation", "pool_size_factor"):
            checks.check_positive(name, getattr(self, name))
        for name in ("gravity", "negative_gravity", "perturbation_lower_bound"):
            checks.check_nonnegative(name, getattr(self, name))
        checks.check_probability("explore_rate", self.explore_rate)
        if not (0.0 < checks.check_real("penalize_factor", self.penalize_factor) < 1.0):
            raise ValueError(f"penalize_factor must be in (0, 1), got {self.penalize_factor!r}")
        if checks.check_int("pool_size", self.pool_size, minimum=0) == 1:
            raise ValueError("pool_size must be 0 (Vizier's formula) or >= 2 flies, got 1")
        checks.check_int("max_pool_size", self.max_pool_size, minimum=2)

    def capacity(self, dim: int) -> int:
        """The pool capacity in ``dim`` dimensions (>= 2)."""
        return self.pool_size or pool_capacity(dim, self.pool_size_factor, self.max_pool_size)

    def params(self, dim: int, dtype: DTypeLike = jnp.float32) -> EagleParams:
        """The numbers as an :class:`EagleParams` with ``()`` leaves."""
        names = [f.name for f in dataclasses.fields(EagleParams) if f.name != "pool_size"]
        floats = {name: jnp.asarray(getattr(self, name), dtype) for name in names}
        return EagleParams(**floats, pool_size=jnp.asarray(self.capacity(dim), jnp.int32))


# The default grid around Vizier's defaults: 3 x 2 x 2 x 2 = 24 arms.
DEFAULT_PERTURBATIONS: tuple[float, ...] = (0.03, 0.1, 0.3)
DEFAULT_GRAVITIES: tuple[float, ...] = (0.5, 1.5)
DEFAULT_VISIBILITIES: tuple[float, ...] = (1.0, 3.0)
DEFAULT_POOL_SIZE_FACTORS: tuple[float, ...] = (1.0, 1.4)
# The grid whose arm 15 is Vizier's default optimiser (gravity 1.0, pool-size factor 1.2).
VIZIER_GRAVITIES: tuple[float, ...] = (0.5, 1.0)
VIZIER_POOL_SIZE_FACTORS: tuple[float, ...] = (1.0, 1.2)
#: ``named_grid``'s names.
GRIDS: tuple[str, ...] = ("default", "vizier")


def eagle_grid(
    perturbations: Sequence[float] = DEFAULT_PERTURBATIONS,
    gravities: Sequence[float] = DEFAULT_GRAVITIES,
    visibilities: Sequence[float] = DEFAULT_VISIBILITIES,
    pool_size_factors: Sequence[float] = DEFAULT_POOL_SIZE_FACTORS,
    **common: float,
) -> tuple[EagleConfig, ...]:
    """The static grid of arms: every combination, perturbation varying slowest.

    Example:
      >>> len(eagle_grid()), eagle_grid()[0].perturbation, eagle_grid()[-1].pool_size_factor
      (24, 0.03, 1.4)
    """
    return tuple(
        EagleConfig(perturbation=p, gravity=g, visibility=v, pool_size_factor=s, **common)  # type: ignore[arg-type]
        for p, g, v, s in itertools.product(
            perturbations, gravities, visibilities, pool_size_factors
        )
    )


def named_grid(name: str) -> tuple[EagleConfig, ...]:
    """``"default"``: :func:`eagle_grid`; ``"vizier"``: a 24-arm grid holding Vizier's default.

    Example:
      >>> grid = named_grid("vizier")
      >>> len(grid), grid.index(EagleConfig())
      (24, 15)
    """
    checks.check_choice("grid", name, GRIDS)
    if name == "vizier":
        return eagle_grid(gravities=VIZIER_GRAVITIES, pool_size_factors=VIZIER_POOL_SIZE_FACTORS)
    return eagle_grid()


@dataclasses.dataclass(frozen=True)
class EagleEnsemble:
    """Arms that are Eagle optimisers with different hyperparameters, on shared data.

    Attributes:
      dim: ``d``, the dimension of the search space.
      configs: one :class:`EagleConfig` per arm (default: :func:`eagle_grid`, 24 arms).
      dtype: float dtype of positions and values.
      fill: ``"uniform"`` or ``"halton"``: how a pool below capacity draws random points.

    Example:
      >>> ens = EagleEnsemble(dim=4)
      >>> ens.num_arms, ens.init().positions.shape
      (24, (24, 15, 4))
    """

    dim: int
    configs: tuple[EagleConfig, ...] = dataclasses.field(default_factory=eagle_grid)
    dtype: str = "float32"
    fill: str = "uniform"

    def __post_init__(self) -> None:
        checks.check_int("dim", self.dim, minimum=1)
        checks.check_choice("fill", self.fill, FILLS)
        configs = tuple(self.configs)
        if not configs or not all(isinstance(c, EagleConfig) for c in configs):
            raise ValueError("configs must be a non-empty sequence of EagleConfig")
        object.__setattr__(self, "configs", configs)
        checks.check_choice("dtype", self.dtype, ("float32", "float64"))

    @property
    def num_arms(self) -> int:
        return len(self.configs)

    @property
    def num_slots(self) -> int:
        """``P``: the largest capacity; every pool is padded to it."""
        return max(c.capacity(self.dim) for c in self.configs)

    def params(self) -> EagleParams:
        """``(A,)``-stacked :class:`EagleParams`, arm ``i`` from ``configs[i]``."""
        checks.check_x64("EagleEnsemble", self.dtype)
        each = [c.params(self.dim, jnp.dtype(self.dtype)) for c in self.configs]
        return jax.tree.map(lambda *xs: jnp.stack(xs), *each)

    def init(self) -> EagleState:
        """``(A,)``-stacked empty pools."""
        return jax.vmap(lambda p: init_pool(p, self.num_slots, self.dim, jnp.dtype(self.dtype)))(
            self.params()
        )

    def describe(self) -> list[dict[str, float]]:
        """One dict per arm with its varied hyperparameters and capacity (for reports)."""
        varied = ("perturbation", "gravity", "visibility", "pool_size_factor")
        return [
            {**{name: getattr(c, name) for name in varied}, "pool_size": c.capacity(self.dim)}
            for c in self.configs
        ]


# --- The optimiser: pure functions of (params, state) ---------------------------------------------
def init_pool(
    params: EagleParams, num_slots: int, dim: int, dtype: DTypeLike = jnp.float32
) -> EagleState:
    """An empty pool of ``num_slots`` slots (``params.pool_size <= num_slots`` are used)."""
    return EagleState(
        positions=jnp.zeros((num_slots, dim), dtype),
        values=jnp.full((num_slots,), jnp.inf, dtype),
        perturbations=jnp.broadcast_to(params.perturbation.astype(dtype), (num_slots,)),
        alive=jnp.zeros((num_slots,), bool),
        pointer=jnp.asarray(-1, jnp.int32),
        best_value=jnp.asarray(jnp.inf, dtype),
        num_seen=jnp.zeros((), jnp.int32),
        num_random=jnp.zeros((), jnp.int32),
    )


def suggest(
    params: EagleParams,
    state: EagleState,
    key: jax.Array,
    fill: str = "uniform",
    halton_key: jax.Array | None = None,
) -> Suggestion:
    """The optimiser's next point, from its pool.

    Args:
      params: one arm's :class:`EagleParams` (``()`` leaves).
      state: its pool, ``P`` slots in ``d`` dimensions.
      key: a PRNG key.
      fill: ``"uniform"`` or ``"halton"`` (static).
      halton_key: key of the pool's scrambling (:func:`halton_scramble`); ``None``: unscrambled.

    Returns:
      A :class:`Suggestion`: ``x`` ``(d,)`` and the moved slot (``-1``: random).
    """
    num_slots, dim = state.positions.shape
    dtype = state.positions.dtype
    # One block of uniforms for everything (one PRNG call).
    u = jax.random.uniform(key, (1 + 2 * dim + num_slots,), dtype)
    u_explore, u_random, u_noise, u_order = jnp.split(u, [1, 1 + dim, 1 + 2 * dim])
    size = jnp.sum(state.alive, dtype=jnp.int32)
    below = size < params.pool_size
    explore = below & ((size == 0) | (u_explore[0] < params.explore_rate))

    slot = next_moving_fly(state.alive, state.pointer)
    moved = mutate(params, state, slot, jnp.argsort(u_order))  # a uniform random order
    moved = jnp.clip(moved + state.perturbations[slot] * laplace_direction(u_noise), 0.0, 1.0)

    random_x = u_random
    if fill == "halton":
        scramble = None if halton_key is None else halton_scramble(halton_key, dim)
        random_x = halton(HALTON_SKIP + state.num_random, dim, dtype, scramble)
    return Suggestion(
        x=jnp.where(explore, random_x, moved), parent=jnp.where(explore, -1, slot).astype(jnp.int32)
    )


def mutate(params: EagleParams, state: EagleState, slot: jax.Array, order: jax.Array) -> jax.Array:
    """``(d,)`` the fly in ``slot`` after the pulls of every other live fly, in ``order``: each
    ``x <- clip(w x_j + (1 - w) x, 0, 1)``, ``w`` from :func:`pull_weight` at the current ``x``."""
    dim = state.positions.shape[-1]
    own_value = state.values[slot]

    def pull(x: jax.Array, j: jax.Array) -> tuple[jax.Array, None]:
        other = state.positions[j]
        weight = pull_weight(params, jnp.sum((other - x) ** 2), dim, state.values[j] < own_value)
        weight = jnp.where(state.alive[j] & (j != slot), weight, 0.0)
        return jnp.clip(weight * other + (1.0 - weight) * x, 0.0, 1.0), None

    x, _ = jax.lax.scan(pull, state.positions[slot], order)
    return x


def update(
    params: EagleParams,
    state: EagleState,
    x: jax.Array,
    f: jax.Array,
    parent: jax.Array,
    proposed: jax.Array | bool = False,
) -> EagleState:
    """Ingest one evaluation ``(x, f)`` into a pool.

    Args:
      params: one arm's :class:`EagleParams`.
      state: its pool.
      x: ``(d,)`` the evaluated point in ``[0, 1]^d``.
      f: ``()`` the observed value (lower is better).
      parent: ``()`` int32 slot of the fly that proposed ``x`` in this pool, or ``-1``.
      proposed: ``()`` bool, whether this pool proposed ``x`` (advances ``num_random``).

    Returns:
      The new pool.
    """
    num_slots = state.values.shape[0]
    dtype = state.values.dtype
    f = jnp.asarray(f, dtype)
    x = jnp.asarray(x, dtype)
    slots = jnp.arange(num_slots)
    size = jnp.sum(state.alive, dtype=jnp.int32)
    full = size >= params.pool_size

    has_parent = parent >= 0
    p = jnp.clip(parent, 0, num_slots - 1)
    parent_live = has_parent & state.alive[p]

    # Live parent: replace on improvement, else penalise (and maybe remove).
    improved = f < state.values[p]
    penalised, remove = _penalty(params, state, p, x, full)

    # No parent: a new fly in the first free slot below capacity, else the closest fly.
    free = ~state.alive & (slots < params.pool_size)
    first_free = jnp.argmax(free)
    dists = jnp.sum((state.positions - x[None, :]) ** 2, axis=-1)
    closest = jnp.argmin(jnp.where(state.alive, dists, jnp.inf))
    create = ~parent_live & ~full
    adopt = ~parent_live & full & (size > 0) & (f < state.values[closest])

    target = jnp.where(parent_live, p, jnp.where(create, first_free, closest))
    write = (parent_live & improved) | create | adopt
    hit = (slots == target) & write
    killed = (slots == p) & parent_live & ~improved & remove
    new_pert = jnp.where((slots == p) & parent_live & ~improved, penalised, state.perturbations)
    new_pert = jnp.where((slots == target) & create, params.perturbation, new_pert)

    return dataclasses.replace(
        state,
        positions=jnp.where(hit[:, None], x[None, :], state.positions),
        values=jnp.where(killed, jnp.inf, jnp.where(hit, f, state.values)),
        perturbations=new_pert.astype(dtype),
        alive=(state.alive | hit) & ~killed,
        pointer=jnp.where(has_parent, parent, state.pointer).astype(jnp.int32),
        best_value=jnp.minimum(state.best_value, f),
        num_seen=state.num_seen + 1,
        num_random=state.num_random + (proposed & ~has_parent).astype(jnp.int32),
    )


def _penalty(
    params: EagleParams, state: EagleState, p: jax.Array, x: jax.Array, full: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """The perturbation of fly ``p`` after an unsuccessful move to ``x``, and whether it is
    removed (below ``perturbation_lower_bound``, in a full pool, not the best fly)."""
    slots = jnp.arange(state.values.shape[0])
    stuck = jnp.all(x == state.positions[p])
    penalised = jnp.where(
        stuck,
        jnp.minimum(state.perturbations[p] * 10.0, params.max_perturbation),
        state.perturbations[p] * params.penalize_factor,
    )
    others_best = jnp.min(jnp.where(state.alive & (slots != p), state.values, jnp.inf))
    is_best = state.values[p] <= others_best
    return penalised, (penalised < params.perturbation_lower_bound) & full & ~is_best


def minimize(
    params: EagleParams,
    objective: Callable[[jax.Array], jax.Array],
    key: jax.Array,
    num_evaluations: int,
    num_slots: int | None = None,
    dim: int | None = None,
) -> jax.Array:
    """Run one Eagle optimiser alone on ``objective: (d,) -> ()`` over ``[0, 1]^d``.

    Args:
      params: the optimiser's numbers (``()`` leaves).
      objective: the function to minimise, jittable.
      key: a PRNG key; evaluation ``t`` uses ``fold_in(key, t)``.
      num_evaluations: the budget (static).
      num_slots: pool slots (default: ``params.pool_size``, then concrete).
      dim: ``d`` (required).

    Returns:
      ``(num_evaluations,)`` the observed values, in evaluation order.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> params = EagleConfig().params(dim=2)
      >>> values = minimize(params, lambda x: jnp.sum((x - 0.3) ** 2), jax.random.key(0), 200,
      ...                   dim=2)
      >>> bool(values.min() < 1e-3)
      True
    """
    if dim is None:
        raise ValueError("dim is required")
    slots = int(params.pool_size) if num_slots is None else num_slots
    state = init_pool(params, slots, dim, params.perturbation.dtype)

    def step(state: EagleState, t: jax.Array) -> tuple[EagleState, jax.Array]:
        s = suggest(params, state, jax.random.fold_in(key, t))
        f = objective(s.x)
        return update(params, state, s.x, f, s.parent, proposed=True), f

    _, values = jax.lax.scan(step, state, jnp.arange(num_evaluations))
    return values


# --- Small pure helpers ------------------------------------------------------------------------
def next_moving_fly(alive: jax.Array, pointer: jax.Array) -> jax.Array:
    """``()`` int32: the first live slot after ``pointer``, cyclically (``pointer`` if none)."""
    num_slots = alive.shape[0]
    order = (pointer + 1 + jnp.arange(num_slots)) % num_slots
    first = jnp.argmax(alive[order])
    return jnp.where(jnp.any(alive), order[first], jnp.maximum(pointer, 0)).astype(jnp.int32)


def pull_weight(params: EagleParams, sq_dist: jax.Array, dim: int, better: jax.Array) -> jax.Array:
    """``()`` Vizier's pull ``w = G exp(-10 visibility sq_dist / d)``, ``G = gravity`` if ``better``
    else ``-negative_gravity``; then ``rate w + (1 - rate)`` if ``w > 1/2``, else ``rate w``."""
    strength = jnp.where(better, params.gravity, -params.negative_gravity)
    w = strength * jnp.exp(-params.visibility * _DISTANCE_SCALE * sq_dist / dim)
    rate = params.explore_rate
    return jnp.where(w > 0.5, rate * w + (1.0 - rate), rate * w)


def laplace_direction(u: jax.Array) -> jax.Array:
    """``L / max |L|`` for ``L = -sign(u - 1/2) log(1 - 2 |u - 1/2|)``, standard Laplace for
    ``u ~ U[0, 1)``: Vizier's normalised direction, in ``[-1, 1]``."""
    c = u - 0.5
    tail = jnp.minimum(2.0 * jnp.abs(c), 1.0 - jnp.finfo(u.dtype).eps)  # u = 0 stays finite
    noise = -jnp.sign(c) * jnp.log1p(-tail)
    return noise / jnp.maximum(jnp.max(jnp.abs(noise)), jnp.finfo(u.dtype).tiny)


def primes(count: int) -> tuple[int, ...]:
    """The first ``count`` primes (the Halton bases).

    Example:
      >>> primes(6)
      (2, 3, 5, 7, 11, 13)
    """
    found: list[int] = []
    n = 2
    while len(found) < count:
        if all(n % p for p in found if p * p <= n):
            found.append(n)
        n += 1
    return tuple(found)


def halton_num_digits(base: int) -> int:
    """Digits of the radical inverse in ``base``: scipy's ``ceil(54 / log2 b) - 1`` (the
    digits that move a float64; 53 in base 2)."""
    return math.ceil(54 / math.log2(base)) - 1


def halton(
    index: jax.Array,
    dim: int,
    dtype: DTypeLike = jnp.float32,
    scramble: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """``(dim,)`` point ``index`` of the Halton sequence, optionally digit-scrambled.

    With ``a_k`` the digits of ``index`` in base ``b_j`` (the ``j``-th prime)::

        x_j = sum_k pi_{j,k}(a_k) b_j^{-(k+1)},   pi_{j,k}(a) = (m_{j,k} a + c_{j,k}) mod b_j,

    ``pi`` the identity when ``scramble`` is ``None``.

    Args:
      index: ``()`` int, the point's index.
      dim: ``d`` (static).
      dtype: float dtype of the result.
      scramble: ``(m, c)``, each ``(d, K)`` int32 (:func:`halton_scramble`), or ``None``.

    Example:
      >>> [halton(i, 2).tolist() for i in (1, 2, 3)]  # doctest: +ELLIPSIS
      [[0.5, 0.333...], [0.25, 0.666...], [0.75, 0.111...]]
    """
    bases = primes(dim)
    num = max(halton_num_digits(b) for b in bases)
    base = jnp.asarray(bases, jnp.int32)
    used = jnp.asarray([halton_num_digits(b) for b in bases], jnp.int32)
    if scramble is None:
        scramble = (jnp.ones((dim, num), jnp.int32), jnp.zeros((dim, num), jnp.int32))
    mult, add = scramble

    def digit(carry: tuple, k: jax.Array) -> tuple[tuple, None]:
        n, scale, value = carry
        permuted = (mult[:, k] * (n % base) + add[:, k]) % base
        value = value + jnp.where(k < used, permuted.astype(dtype) * scale, 0.0)
        return (n // base, scale / base.astype(dtype), value), None

    start = (
        jnp.broadcast_to(jnp.asarray(index, jnp.int32), (dim,)),
        1.0 / base.astype(dtype),
        jnp.zeros((dim,), dtype),
    )
    (_, _, value), _ = jax.lax.scan(digit, start, jnp.arange(num))
    return value


def halton_scramble(key: jax.Array, dim: int) -> tuple[jax.Array, jax.Array]:
    """Random affine digit permutations for :func:`halton`: ``(m, c)``, each ``(d, K)`` int32,
    ``m`` uniform in ``1..b_j - 1`` and ``c`` in ``0..b_j - 1`` (``K`` digits of base 2)."""
    bases = jnp.asarray(primes(dim), jnp.int32)[:, None]
    shape = (dim, halton_num_digits(2))
    k_mult, k_add = jax.random.split(key)
    mult = jax.random.randint(k_mult, shape, 1, bases, jnp.int32)
    return mult, jax.random.randint(k_add, shape, 0, bases, jnp.int32)
