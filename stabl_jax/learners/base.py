"""The contract every learner obeys (``docs/design.md``; how to write one: ``docs/learners.md``).

::

    learner = SomeLearner(num_arms=30, horizon=4096)   # frozen dataclass: static under jit
    state = learner.init(key, params)                  # params default to learner.default_params
    query = learner.ask(state, key)                    # every queried arm, before any loss
    state = learner.tell(state, query, observed)       # observed = loss[query.arms] only
    state, info = learner.step(state, loss, key)       # ask + evaluate + tell, pure

The public methods check and cast their arguments, then call ``_init``/``_ask``/``_tell``, which
hold only a learner's maths (as evosax's ``algorithms/base.py``). ``query.arms[0]`` is played;
``query.arms[1:]`` are only observed; ``num_queries`` counts all of them, as the paper does.

Static and traced options: a learner is a static argument of the programs that run it, hashed
and compared by the fields that set a shape, a schedule or a code path. An option that only
sets the default of a ``Params`` entry (or a default computed from such) is declared
``dataclasses.field(compare=False)``: it is read by :attr:`Learner.default_params` and
``__post_init__`` alone, outside the program, never by ``_init``/``_ask``/``_tell``, so
learners that differ only in it share one compiled program. A program that takes a learner as
a static argument therefore takes its params as an argument too (``init(key, params)``, with
``default_params`` computed outside), as :func:`stabl_jax.simulate` does.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, numerics, sampling

Query = TypeVar("Query")


@dataclasses.dataclass(frozen=True)
class Learner(Generic[Query]):
    """Base class of every learner: the public contract over the private maths.

    A learner (a frozen dataclass, hashed by value) sets ``Params`` and implements ``_init``,
    ``_ask`` and ``_tell``; a family (bandit, BCO) implements ``step``, ``_queried`` and
    ``_checked_observed``. Every state has a round counter ``t`` (``() int32``).

    Attributes:
      validate: check in-program (:mod:`jax.experimental.checkify`) that revealed losses are
        valid and the play distribution is a distribution; results are bitwise those without
        checks. Keyword-only and left out of the ``repr``.
    """

    validate: bool = dataclasses.field(default=False, kw_only=True, repr=False)

    num_queries: ClassVar[int] = 1
    name: ClassVar[str] = "base"
    #: The sweepable numbers: a chex dataclass of ``()`` arrays (see :attr:`default_params`).
    Params: ClassVar[type]
    #: Allowed ranges of ``Params`` fields (checked when concrete); every field must be finite.
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {}

    def __post_init__(self) -> None:
        """Check the options; family bases and mixins add theirs through ``super()``."""
        checks.check_bool("validate", self.validate)

    @property
    def float_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.dtype)  # type: ignore[attr-defined]

    @property
    def default_params(self) -> Any:
        """``Params`` with each field set to the option of the same name, else to 1."""
        if not hasattr(type(self), "Params"):
            raise NotImplementedError(
                f"{type(self).__name__} declares no Params: set Params = YourParams (a chex "
                "dataclass of the sweepable numbers) or override default_params"
            )
        checks.check_x64(type(self).__name__, self.float_dtype)
        fields = dataclasses.fields(self.Params)
        return self.Params(
            **{p.name: jnp.asarray(getattr(self, p.name, 1.0), self.float_dtype) for p in fields}
        )

    def init(self, key: jax.Array, params: Any = None) -> Any:
        """The initial state; ``params`` (default :attr:`default_params`) are checked and cast
        to the state's dtype (float64 needs ``jax_enable_x64``)."""
        if params is None:
            params = self.default_params  # which checks the dtype
        else:
            checks.check_x64(type(self).__name__, self.float_dtype)
            self.check_params(params)
            params = jax.tree.map(lambda x: jnp.asarray(x, dtype=self.float_dtype), params)
        return self._init(key, params)

    def ask(self, state: Any, key: jax.Array) -> Query:
        """What to query this round (``key``: one PRNG key; ``state``: from :meth:`init`)."""
        checks.check_key("key", key)
        checks.check_state(self, state)
        return self._ask(state, key)

    def tell(self, state: Any, query: Query, observed: jax.Array) -> Any:
        """The state after observing ``observed``, the ``(num_queries,)`` losses at the
        queried arms or points (checked, and cast to the state's dtype)."""
        checks.check_state(self, state)
        return self._tell(state, query, self._checked_observed(observed, query))

    def play(
        self, state: Any, reveal: Callable[[jax.Array], jax.Array], key: jax.Array
    ) -> tuple[Any, Query, jax.Array]:
        """One round: ask, ``reveal`` the losses at the query only, tell.

        Args:
          state: the learner's state.
          reveal: maps the queried arms ``(num_queries,)`` (or points ``(num_queries, dim)``)
            to their losses ``(num_queries,)``.
          key: a PRNG key for this round.

        Returns:
          ``(new_state, query, observed losses)``.
        """
        if self.validate:
            unchecked, t = reveal, state.t

            def reveal(where: jax.Array) -> jax.Array:
                observed = unchecked(where)
                self._traced_check_observed("observed loss", observed, t)
                return observed

        return self._round(state, reveal, key)

    def _round(
        self, state: Any, reveal: Callable[[jax.Array], jax.Array], key: jax.Array
    ) -> tuple[Any, Query, jax.Array]:
        query = self.ask(state, key)
        observed = reveal(self._queried(query))
        new_state = self._tell(state, query, self._checked_observed(observed, query))
        if self.validate:
            self._traced_check_query(query, state.t)
        return new_state, query, observed

    def check_params(self, params: Any, batch: int | None = None) -> None:
        """Raise unless ``params`` are this learner's ``Params`` with ``()`` (or ``(batch,)``)
        finite leaves in :attr:`param_bounds`."""
        expected = type(self.default_params)
        if type(params) is not expected:
            raise TypeError(
                f"params must be a {expected.__name__} (learner.default_params.replace(...)), "
                f"got {type(params).__name__}"
            )
        checks.check_param_values(params, self.param_bounds, batch=batch)

    def _init(self, key: jax.Array, params: Any) -> Any:
        raise NotImplementedError

    def _ask(self, state: Any, key: jax.Array) -> Query:
        raise NotImplementedError

    def _tell(self, state: Any, query: Query, observed: jax.Array) -> Any:
        raise NotImplementedError

    def _queried(self, query: Query) -> jax.Array:
        """What ``reveal`` is given: the queried arms or points."""
        raise NotImplementedError

    def _checked_observed(self, observed: jax.Array, query: Query) -> jax.Array:
        """Check the observed losses (and the query) on the host; cast to the state's dtype."""
        raise NotImplementedError

    def _traced_check_observed(self, name: str, observed: jax.Array, t: jax.Array) -> None:
        """In-program checks of revealed losses (``validate``); none by default."""

    def _traced_check_query(self, query: Query, t: jax.Array) -> None:
        """In-program checks of a query (``validate``); none by default."""


@chex.dataclass(frozen=True)
class BanditQuery:
    """What a bandit learner asks for in one round, chosen before any loss is revealed.

    Attributes:
      arms: ``(num_queries,)`` int32. ``arms[0]`` is played, the rest are only observed.
      play_probs: ``(num_arms,)`` float, the distribution ``arms[0]`` was drawn from.
      query_probs: ``(num_queries,)`` float, the probability with which each queried arm was
        drawn from its own distribution (what importance weights divide by).
    """

    arms: jax.Array
    play_probs: jax.Array
    query_probs: jax.Array


def sample_query(key: jax.Array, play_probs: jax.Array, *observe_probs: jax.Array) -> BanditQuery:
    """Play ``arms[0] ~ play_probs`` and observe ``arms[i] ~ observe_probs[i - 1]``, arm ``i``
    drawn with ``u_i`` of ``u = sampling.uniforms(key, 1 + len(observe_probs))``.

    Args:
      key: the round's PRNG key.
      play_probs: ``(num_arms,)`` the play distribution.
      *observe_probs: ``(num_arms,)`` each, the distributions of the observed arms.

    Returns:
      The :class:`BanditQuery`; ``query_probs[i]`` is the probability of ``arms[i]`` under its
      own distribution.
    """
    dists = (play_probs, *observe_probs)
    u = sampling.uniforms(key, len(dists), play_probs.dtype)
    arms = [sampling.sample_index(p, u[i]) for i, p in enumerate(dists)]
    return BanditQuery(
        arms=jnp.stack(arms),
        play_probs=play_probs,
        query_probs=jnp.stack([p[a] for p, a in zip(dists, arms, strict=True)]),
    )


@chex.dataclass(frozen=True)
class StepInfo:
    """Per-round record returned by :meth:`BanditLearner.step` (all small).

    Attributes:
      arms: ``(num_queries,)`` int32 queried arms, ``arms[0]`` played.
      observed: ``(num_queries,)`` float losses at the queried arms.
      loss: ``()`` float, the suffered loss ``l_t(x_t)``.
      expected_loss: ``()`` float, ``<play_probs, l_t>`` in a fixed summation order
        (:func:`stabl_jax.numerics.fixed_order_dot`); a metric, never fed back.
      play_probs: ``(num_arms,)`` float, for in-scan reductions.
    """

    arms: jax.Array
    observed: jax.Array
    loss: jax.Array
    expected_loss: jax.Array
    play_probs: jax.Array


@dataclasses.dataclass(frozen=True)
class BanditLearner(Learner[BanditQuery]):
    """Base class of the multi-armed bandit learners: losses in [0, 1], a :class:`BanditQuery`.

    Attributes:
      num_arms: ``n``, number of arms (>= 2).
      horizon: ``T``, number of rounds the step sizes are tuned for (>= 1).
      dtype: float dtype of the state, ``"float32"`` (default) or ``"float64"`` (needs
        ``jax_enable_x64``).
    """

    num_arms: int
    horizon: int
    dtype: str = "float32"

    #: Whether :meth:`restarted` says which rounds end in a restart (the ``restart`` trace).
    records_restarts: ClassVar[bool] = False

    def __post_init__(self) -> None:
        super().__post_init__()
        checks.check_int("num_arms", self.num_arms, minimum=2)
        checks.check_horizon(self.horizon, minimum=1)
        checks.check_choice("dtype", self.dtype, ("float32", "float64"))

    @property
    def num_mixed(self) -> int:
        """Probability rows the play distribution mixes (the check's tolerance): 1."""
        return 1

    def step(self, state: Any, loss: jax.Array, key: jax.Array) -> tuple[Any, StepInfo]:
        """One round: ask, reveal ``loss`` at the queried arms only, tell.

        Args:
          state: the learner's state.
          loss: ``(num_arms,)`` the round's loss vector in [0, 1]; only the queried entries
            are read.
          key: a PRNG key for this round (``jax.random.fold_in(run_key, t)``).

        Returns:
          ``(new_state, info)``.
        """
        checks.check_losses("loss", loss, shape=(self.num_arms,))
        loss = jnp.asarray(loss)
        if self.validate:
            checks.traced_check_losses("loss", loss, state.t)
        new_state, query, observed = self._round(state, lambda arms: loss[arms], key)
        info = StepInfo(
            arms=query.arms,
            observed=observed,
            loss=observed[0],
            expected_loss=numerics.fixed_order_dot(
                query.play_probs, loss.astype(query.play_probs.dtype)
            ),
            play_probs=query.play_probs,
        )
        return new_state, info

    def restarted(self, state: Any, new_state: Any) -> jax.Array:
        """``()`` bool: whether the round that took ``state`` to ``new_state`` ended in a
        restart (a detected change, or a scheduled reset); learners with
        :attr:`records_restarts` implement it."""
        raise NotImplementedError(f"{type(self).__name__} records no restarts")

    def uniform_log_probs(self, *lead: int) -> jax.Array:
        """``(*lead, num_arms)`` uniform log-probabilities ``-log n`` in the state's dtype."""
        n = self.num_arms
        return jnp.full((*lead, n), -math.log(n), self.float_dtype)

    def _queried(self, query: BanditQuery) -> jax.Array:
        return query.arms

    def _checked_observed(self, observed: jax.Array, query: BanditQuery) -> jax.Array:
        checks.check_losses("observed", observed, shape=(self.num_queries,))
        checks.check_query(query, self.num_arms, self.num_queries)
        return jnp.asarray(observed).astype(self.float_dtype)

    def _traced_check_observed(self, name: str, observed: jax.Array, t: jax.Array) -> None:
        checks.traced_check_losses(name, observed, t)

    def _traced_check_query(self, query: BanditQuery, t: jax.Array) -> None:
        checks.traced_check_distribution("play distribution", query.play_probs, t, self.num_mixed)


@chex.dataclass(frozen=True)
class WeightsState:
    """State of a learner that keeps one distribution over the arms (:class:`WeightsLearner`).

    Attributes:
      t: ``()`` int32, rounds played so far.
      log_weights: ``(num_arms,)`` float, normalised log-probabilities ``log w_t``.
      params: the learner's ``Params``.
    """

    t: jax.Array
    log_weights: jax.Array
    params: Any


@dataclasses.dataclass(frozen=True)
class WeightsLearner(BanditLearner):
    """Base class of EXP3, Exp3-IX, Exp3.S and Hedge: one :class:`WeightsState`, uniform at 0."""

    def _init(self, key: jax.Array, params: Any) -> WeightsState:
        del key
        return WeightsState(
            t=jnp.zeros((), jnp.int32), log_weights=self.uniform_log_probs(), params=params
        )
