"""The environment contract (``docs/environments.md``) and the piecewise-stationary bandit
environments, pure functions of ``(params, t, key)``, in the gymnax style.

Segments: change points ``c_1 < ... < c_{S-1}`` put round ``t`` in segment
``#{j : c_j <= t}``; they are given, equal, drawn per run (``S - 1`` distinct rounds of
``1..T-1``), or geometric, of lengths ``m, m, 2m, ..., 2^K m`` (:func:`geometric_segment_lengths`).

Static and traced: an environment's frozen dataclass is a static argument of the programs that
run it, compared and hashed by the fields that set a shape or a code path (``num_arms``,
``horizon``, ``num_segments``, ``random_change_points``, ...). Every other number (change points,
gaps, bonuses, tables of means) is a traced field of the params pytree: its dataclass field is
only its default, declared ``dataclasses.field(compare=False)``, and read by
:meth:`PiecewiseEnv.default_params` alone, outside the program; ``sample_params(key,
defaults)`` takes those defaults as traced arrays (:func:`sample_params`), so environments
that differ in numbers alone share one compiled program.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, numerics, threefry

BEST_ARM_ORDERS: tuple[str, ...] = ("sequential", "random")
#: Per-round traces an oblivious bandit environment offers to ``simulate`` (its default).
BANDIT_TRACES: tuple[str, ...] = ("played", "arms", "loss", "expected_loss", "prob_best")


class Environment:
    """Base class of every environment: one call, :meth:`evaluate` (``docs/environments.md``).

    Subclasses are frozen dataclasses implementing :meth:`sample_params` and :meth:`evaluate`.

    Attributes:
      trace_names: the ``info`` entries and query traces ``simulate`` records by default.
    """

    trace_names: ClassVar[tuple[str, ...]] = ("played", "loss")
    # Capabilities, declared by the class that adds them (never probed; the command line checks
    # that a declaration and its methods agree, docs/environments.md):
    #: ``sample_params(key, defaults)`` takes ``defaults = default_params``, computed outside
    #: the program, as traced arrays: the environment's numbers are not part of its identity.
    traced_defaults: ClassVar[bool] = False
    #: ``best_arm(params, t)`` names every round's best arm (``prob_best``, cumulative regret).
    has_best_arm: ClassVar[bool] = False
    #: ``num_segments``, ``change_points`` and per-run ``params.change_points``: segments.
    piecewise: ClassVar[bool] = False

    def sample_params(self, key: jax.Array) -> Any:
        """Per-run parameters drawn from ``key`` (a pytree)."""
        raise NotImplementedError

    def init(self, params: Any) -> Any:
        """The environment's state before round 0 (``None``: an oblivious environment)."""
        del params
        return None

    def evaluate(
        self, params: Any, state: Any, t: jax.Array, query: Any, key: jax.Array
    ) -> tuple[Any, jax.Array, Mapping[str, jax.Array]]:
        """Round ``t``: the losses at the learner's query, and the new state.

        Args:
          params: the run's parameters (:meth:`sample_params`).
          state: the environment's state (:meth:`init`, then what the last call returned).
          t: ``()`` int32 round index.
          query: what the learner asked for (``query.arms`` ``(Q,)`` for bandits,
            ``query.points`` ``(Q, d)`` for convex environments).
          key: the round's key, ``fold_in(env_key, t)``.

        Returns:
          ``(state, observed, info)``: ``observed`` ``(Q,)`` the losses at the query only;
          ``info`` a mapping of small per-round arrays metrics may record.
        """
        raise NotImplementedError


def _owner(cls: type, name: str) -> type | None:
    """The class of ``cls``'s MRO whose own namespace defines ``name`` (``None``: none)."""
    return next((c for c in cls.__mro__ if name in vars(c)), None)


def reveals_lazily(env: Any) -> bool:
    """Whether ``env.loss_at`` may stand for ``loss(params, t, key)[arms]``: only when it is
    defined by the class of the ``loss`` in effect or a subclass of it."""
    loss, loss_at = _owner(type(env), "loss"), _owner(type(env), "loss_at")
    return loss is not None and loss_at is not None and issubclass(loss_at, loss)


def draws_from_words(env: Any) -> bool:
    """Whether ``env.losses_of_words`` may stand for ``loss(params, t, key)[arms]`` (as
    :func:`reveals_lazily`, for a :class:`PiecewiseEnv` that defines its own)."""
    if not isinstance(env, PiecewiseEnv):
        return False
    loss, words = _owner(type(env), "loss"), _owner(type(env), "losses_of_words")
    if loss is None or words is None or words is PiecewiseEnv:
        return False
    return issubclass(words, loss)


@dataclasses.dataclass(frozen=True)
class ObliviousBandit(Environment):
    """An oblivious bandit environment (pure ``loss(params, t, key)``) as an
    :class:`Environment`, with no state.

    ``observed = loss(params, t, key)[query.arms]`` (or ``loss_at`` when
    :func:`reveals_lazily` and not ``reveal_all``). ``info``: ``best_arm`` where the environment
    has one and, with ``reveal_all``, ``expected_loss = <p_t, l_t>`` in a fixed summation order.

    Attributes:
      env: the environment (``sample_params``, ``loss``; optionally ``loss_at``, ``best_arm``).
      reveal_all: draw every arm's loss (what ``expected_loss`` needs).
      validate: check in the program (under ``checkify``) that losses are finite and in [0, 1].
    """

    env: Any
    reveal_all: bool = True
    validate: bool = False

    trace_names: ClassVar[tuple[str, ...]] = BANDIT_TRACES

    @property
    def traced_defaults(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.env, "traced_defaults", False))

    @property
    def has_best_arm(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.env, "has_best_arm", False))

    @property
    def default_params(self) -> Any:
        """The wrapped environment's :attr:`PiecewiseEnv.default_params`."""
        return self.env.default_params

    def sample_params(self, key: jax.Array, defaults: Any = None) -> Any:
        if defaults is None:
            return self.env.sample_params(key)
        return self.env.sample_params(key, defaults)

    def loss_fn(self, params: Any, t: jax.Array, key: jax.Array) -> jax.Array:
        """``(num_arms,)`` the round's whole loss vector (what a learner's ``step`` takes)."""
        return self.env.loss(params, t, key)

    def evaluate(
        self, params: Any, state: Any, t: jax.Array, query: Any, key: jax.Array
    ) -> tuple[Any, jax.Array, dict[str, jax.Array]]:
        info = {}
        if self.has_best_arm:
            info["best_arm"] = self.env.best_arm(params, t)
        if self.reveal_all:
            loss = self.env.loss(params, t, key)
            if self.validate:
                checks.traced_check_losses("loss", loss, t)
            probs = query.play_probs
            expected = numerics.fixed_order_dot(probs, loss.astype(probs.dtype))
            info["expected_loss"] = expected.astype(jnp.float32)
            return state, loss[query.arms], info
        if reveals_lazily(self.env):
            observed = self.env.loss_at(params, t, key, query.arms)
        else:
            observed = self.env.loss(params, t, key)[query.arms]
        # Materialised once, so every consumer reads the same bits.
        observed = jax.lax.optimization_barrier(observed)
        return state, observed, info


def as_environment(env: Any, *, reveal_all: bool = True, validate: bool = False) -> Any:
    """``env`` if it defines ``evaluate``, else an :class:`ObliviousBandit` over its ``loss``.

    Raises:
      TypeError: ``env`` has neither ``evaluate`` nor ``loss``.
    """
    evaluate = getattr(type(env), "evaluate", None)
    if evaluate is not None and evaluate is not BanditEnv.evaluate:
        return env
    if not callable(getattr(env, "loss", None)) or not hasattr(env, "sample_params"):
        raise TypeError(
            f"env must be an environment (evaluate, or sample_params and loss; see "
            f"docs/environments.md), got {env!r} ({type(env).__name__})"
        )
    return ObliviousBandit(env, reveal_all=reveal_all, validate=validate)


class BanditEnv(Environment):
    """Base class of oblivious bandit environments: a pure ``loss`` (optionally ``loss_at``),
    evaluated as :class:`ObliviousBandit`."""

    trace_names: ClassVar[tuple[str, ...]] = BANDIT_TRACES

    def loss(self, params: Any, t: jax.Array, key: jax.Array) -> jax.Array:
        """``(num_arms,)`` float32 losses in [0, 1] of round ``t``."""
        raise NotImplementedError

    def loss_at(self, params: Any, t: jax.Array, key: jax.Array, arms: jax.Array) -> jax.Array:
        """``(q,)`` float32 ``loss(params, t, key)[arms]`` bit for bit; ``arms`` ``(q,)`` int32."""
        return self.loss(params, t, key)[arms]

    def evaluate(
        self, params: Any, state: Any, t: jax.Array, query: Any, key: jax.Array
    ) -> tuple[Any, jax.Array, dict[str, jax.Array]]:
        """:meth:`ObliviousBandit.evaluate` with every arm's loss drawn (``info`` has
        ``best_arm`` and ``expected_loss``)."""
        return ObliviousBandit(self).evaluate(params, state, t, query, key)


def env_defaults(env: Any) -> Any:
    """``env.default_params`` where ``env`` declares :attr:`Environment.traced_defaults` (the
    numbers a program takes as traced arguments; call it outside the program), else ``None``."""
    return env.default_params if getattr(env, "traced_defaults", False) else None


def sample_params(env: Any, key: jax.Array, defaults: Any) -> Any:
    """``env.sample_params(key, defaults)``, or ``env.sample_params(key)`` when ``defaults`` is
    ``None`` (an environment whose numbers are static): the call a program makes, with
    ``defaults = env_defaults(env)`` passed in as a traced argument."""
    return env.sample_params(key) if defaults is None else env.sample_params(key, defaults)


def equal_change_points(horizon: int, num_segments: int) -> tuple[int, ...]:
    """Change points of ``num_segments`` equal segments (``T = 4096, S = 4``: 1024, 2048, 3072)."""
    checks.check_int("num_segments", num_segments, minimum=1)
    if num_segments > horizon:
        raise ValueError(
            f"num_segments={num_segments} exceeds horizon={horizon}: every segment needs a "
            f"round; pass num_segments <= {horizon}, or a longer horizon"
        )
    return tuple(round(j * horizon / num_segments) for j in range(1, num_segments))


def geometric_segment_lengths(horizon: int, min_length: int) -> tuple[int, ...]:
    """Segment lengths on every time scale from ``min_length`` up, filling ``horizon``.

    ``m, m, 2m, ..., 2^K m`` with ``K`` the largest such that ``2^(K+1) m <= T``; the remainder
    ``T - 2^(K+1) m`` goes to the longest segment.

    Args:
      horizon: ``T`` (>= 2).
      min_length: ``m`` (>= 1, ``2 m <= T``).

    Returns:
      ``(K + 2,)`` increasing lengths summing to ``T``.

    Example:
      >>> geometric_segment_lengths(100, 10)
      (10, 10, 20, 60)
    """
    checks.check_horizon(horizon, minimum=2)
    checks.check_int("geometric_min_length", min_length, minimum=1)
    if 2 * min_length > horizon:
        raise ValueError(
            f"geometric_min_length={min_length} is too long for horizon={horizon}: "
            f"two segments of it must fit, so it must be <= {horizon // 2}"
        )
    lengths = [min_length]
    total = min_length
    while total + total <= horizon:  # the next length equals the sum so far
        lengths.append(total)
        total += total
    lengths[-1] += horizon - total
    return tuple(lengths)


#: Up to this many change points, :func:`segment_of` compares ``t`` with each of them.
COMPARE_ALL_MAX = 1024


def segment_of(change_points: jax.Array, t: jax.Array) -> jax.Array:
    """``()`` int32 index of the segment containing round ``t``: ``#{j : c_j <= t}``.

    Args:
      change_points: ``(S - 1,)`` int32, strictly increasing.
      t: ``()`` int32 round.

    Example:
      >>> import jax.numpy as jnp
      >>> [int(segment_of(jnp.array([3, 7]), t)) for t in (0, 3, 6, 7, 9)]
      [0, 1, 1, 2, 2]
    """
    method = "compare_all" if change_points.shape[-1] <= COMPARE_ALL_MAX else "scan"
    index = jnp.searchsorted(change_points, t, side="right", method=method)
    return index.astype(jnp.int32)


def validate_change_points(change_points: object, horizon: int) -> tuple[int, ...]:
    """Strictly increasing ints in ``[1, horizon - 1]``; errors name the offending value."""
    points = checks.as_tuple("change_points", change_points, "a sequence of ints")
    for c in points:
        if isinstance(c, bool) or not isinstance(c, int | np.integer):
            raise TypeError(f"change_points must be ints, got {c!r} in {points!r}")
        if not 1 <= c <= horizon - 1:
            raise ValueError(
                f"change point {c} is out of range: change_points must lie in [1, {horizon - 1}]"
                f" for horizon={horizon}, got {points!r}"
            )
    if any(b <= a for a, b in itertools.pairwise(points)):
        raise ValueError(f"change_points must be strictly increasing, got {points!r}")
    return tuple(int(c) for c in points)


def resolve_change_points(
    horizon: int,
    change_points: tuple[int, ...] | None,
    num_segments: int,
    random_change_points: bool,
    geometric_min_length: int | None = None,
) -> tuple[int, ...]:
    """The change points of :class:`PiecewiseEnv`'s segment options of the same names:
    geometric, ``num_segments`` equal ones (``change_points=None``), or the given ones."""
    checks.check_bool("random_change_points", random_change_points)
    if geometric_min_length is not None:
        lengths = geometric_segment_lengths(horizon, geometric_min_length)
        points = tuple(int(c) for c in np.cumsum(lengths)[:-1])
        # (the derived points themselves are accepted, so dataclasses.replace works)
        if change_points is not None and tuple(change_points) != points:
            raise ValueError(
                f"change_points={change_points!r} and geometric_min_length="
                f"{geometric_min_length} both set the segments; give only one"
            )
        return points
    if change_points is None:
        return equal_change_points(horizon, num_segments)
    if random_change_points:
        raise ValueError(
            f"change_points={change_points!r} and random_change_points=True exclude "
            "each other: give the points, or num_segments with random_change_points"
        )
    return validate_change_points(change_points, horizon)


def set_segments(env: Any, geometric_min_length: int | None = None) -> None:
    """Sets a frozen ``env``'s ``change_points`` and ``num_segments`` from its segment options
    (:func:`resolve_change_points`), in its ``__post_init__``."""
    options = (env.change_points, env.num_segments, env.random_change_points)
    points = resolve_change_points(env.horizon, *options, geometric_min_length)
    object.__setattr__(env, "change_points", points)
    object.__setattr__(env, "num_segments", len(points) + 1)


@chex.dataclass(frozen=True)
class SegmentParams:
    """Per-run segment structure shared by the piecewise environments (traced).

    Subclasses add an environment's numbers (:class:`~stabl_jax.envs.ExpertAdvice`'s bonus,
    :class:`~stabl_jax.envs.PiecewiseBernoulli`'s gap, ...), ``()`` float32 each unless said.

    Attributes:
      change_points: ``(S - 1,)`` int32, sorted rounds where a new segment starts.
      best_arms: ``(S,)`` int32, the best arm of each segment.
    """

    change_points: jax.Array
    best_arms: jax.Array


@dataclasses.dataclass(frozen=True)
class PiecewiseEnv(BanditEnv):
    """Static configuration common to piecewise-stationary environments.

    Attributes:
      num_arms: ``n`` (>= 2).
      horizon: ``T`` (>= 2).
      change_points: the change points, or ``None`` for ``num_segments`` equal segments (with
        ``random_change_points``: the number of points to draw). Traced: the default of
        ``params.change_points``, not part of the environment's identity.
      num_segments: ``S`` when ``change_points`` is ``None``.
      random_change_points: draw ``S - 1`` change points per run (with
        ``geometric_min_length``: shuffle the segment lengths per run).
      best_arm_order: ``"sequential"`` (segment ``j``'s best arm is ``j mod n``, the paper's)
        or ``"random"`` (uniform per segment, never the previous one).
      geometric_min_length: ``m``: segments ``m, m, 2m, ..., 2^K m`` filling ``T``
        (:func:`geometric_segment_lengths`; ``change_points`` must be ``None``).
    """

    num_arms: int
    horizon: int
    change_points: tuple[int, ...] | None = dataclasses.field(default=None, compare=False)
    num_segments: int = 4
    random_change_points: bool = False
    best_arm_order: str = "sequential"
    geometric_min_length: int | None = None

    name = "piecewise"
    traced_defaults: ClassVar[bool] = True
    has_best_arm: ClassVar[bool] = True
    piecewise: ClassVar[bool] = True

    def __post_init__(self) -> None:
        checks.check_int("num_arms", self.num_arms, minimum=2)
        checks.check_horizon(self.horizon, minimum=2)
        set_segments(self, self.geometric_min_length)
        checks.check_choice("best_arm_order", self.best_arm_order, BEST_ARM_ORDERS)

    # --- segments ---------------------------------------------------------------------------
    def loss_at_words(
        self,
        params: SegmentParams,
        t: jax.Array,
        words: threefry.Words,
        arms: jax.Array,
        best: jax.Array | None = None,
    ) -> jax.Array:
        """``loss(params, t, key)[arms]`` bit for bit, from the key's ``uint32`` words.

        Args:
          params: the run's parameters (used only when ``best`` is not given).
          t: ``()`` int32 round.
          words: ``(k1, k2)``, ``jax.random.key_data(key)``'s words, broadcastable with ``arms``.
          arms: int32 queried arms, any shape.
          best: ``best_arm(params, t)``, broadcastable with ``arms``.

        Returns:
          float32 losses of ``arms``' shape.
        """
        best = self.best_arm(params, t) if best is None else best
        return self.losses_of_words(params, words, arms, arms == best)

    def losses_of_words(
        self, params: Any, words: threefry.Words, arms: jax.Array, is_best: jax.Array
    ) -> jax.Array:
        """The float32 losses of ``arms`` from the round key's ``words``, ``is_best`` marking
        the round's best arm: what :meth:`loss_at_words` draws, per environment.

        ``params`` is read by name alone (``params["gap"]``), for its ``()`` float32 fields
        only, broadcastable with ``arms``: the fused kernel passes a mapping of them."""
        raise NotImplementedError(
            f"{type(self).__name__} has no kernel-safe loss (losses_of_words); "
            "use loss_at, or the XLA path"
        )

    def _segment_params(self, key: jax.Array, defaults: Any) -> Any:
        """``defaults`` with the change points and best arms drawn from ``key`` where random."""
        s = self.num_segments
        points = defaults.change_points
        if self.random_change_points and self.geometric_min_length is not None:
            lengths = geometric_segment_lengths(self.horizon, self.geometric_min_length)
            order = jax.random.permutation(
                jax.random.fold_in(key, 3), jnp.asarray(lengths, jnp.int32)
            )
            points = jnp.cumsum(order)[:-1].astype(jnp.int32)
        elif self.random_change_points:
            draws = jax.random.choice(
                jax.random.fold_in(key, 0), self.horizon - 1, (s - 1,), replace=False
            )
            points = jnp.sort(draws + 1).astype(jnp.int32)
        best = defaults.best_arms
        if self.best_arm_order != "sequential":
            # Best arm differs from the previous segment's: shift by 1..n-1 each time.
            first = jax.random.randint(jax.random.fold_in(key, 1), (1,), 0, self.num_arms)
            steps = jax.random.randint(jax.random.fold_in(key, 2), (s - 1,), 1, self.num_arms)
            best = first[0] + jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(steps)])
            best = (best % self.num_arms).astype(jnp.int32)
        return defaults.replace(change_points=points, best_arms=best)

    def segment(self, params: Any, t: jax.Array) -> jax.Array:
        """``()`` int32 index of the segment containing round ``t`` (:func:`segment_of`)."""
        return segment_of(params.change_points, t)

    def best_arm(self, params: Any, t: jax.Array) -> jax.Array:
        """``()`` int32, the arm with the smallest mean loss at round ``t``."""
        return params.best_arms[self.segment(params, t)]

    # --- interface every environment implements ---------------------------------------------
    @property
    def default_params(self) -> Any:
        """Deterministic parameters (given change points, sequential best arms, the numbers
        of the dataclass): the only reader of the fields declared ``compare=False``.

        Subclasses return their :class:`SegmentParams` subclass with their numbers added."""
        s = self.num_segments
        return SegmentParams(
            change_points=jnp.asarray(self.change_points, jnp.int32).reshape(s - 1),
            best_arms=jnp.arange(s, dtype=jnp.int32) % self.num_arms,
        )

    def sample_params(self, key: jax.Array, defaults: Any = None) -> Any:
        """Per-run parameters drawn from ``key`` (random change points / best arms).

        Args:
          key: the run's key.
          defaults: :attr:`default_params`, the numbers not drawn; a program passes them as
            a traced argument (:func:`sample_params`). ``None``: ``self.default_params``,
            constants of the program being traced, so only outside a program that takes the
            environment as a static argument.
        """
        return self._segment_params(key, self.default_params if defaults is None else defaults)

    def mean_loss(self, params: Any, t: jax.Array) -> jax.Array:
        """``(num_arms,)`` expected losses of round ``t``."""
        raise NotImplementedError
