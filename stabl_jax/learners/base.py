"""The contract every bandit learner obeys (``../DESIGN.md``, "One contract for every learner").

::

    learner = SomeLearner(num_arms=30, horizon=4096)   # frozen dataclass: static under jit
    state = learner.init(key, params)                  # a pytree; params default to
                                                       # learner.default_params
    query = learner.ask(state, key)                    # every queried arm, before any loss
    state = learner.tell(state, query, observed)       # observed = loss[query.arms] only
    state, info = learner.step(state, loss, key)       # ask + evaluate + tell, pure

``query.arms[0]`` is the played arm (its loss is suffered); ``query.arms[1:]`` are the extra
observations. ``num_queries`` counts all of them, as the paper does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, numerics


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


@chex.dataclass(frozen=True)
class StepInfo:
    """Per-round record returned by :meth:`BanditLearner.step` (all small).

    Attributes:
      arms: ``(num_queries,)`` int32 queried arms, ``arms[0]`` played.
      observed: ``(num_queries,)`` float losses at the queried arms.
      loss: ``()`` float, the suffered loss ``l_t(x_t)``.
      expected_loss: ``()`` float, ``<play_probs, l_t>``, the loss in expectation over the
        play draw (a metric; it never feeds back into the state). Summed in a fixed order
        (:func:`stabl_jax.numerics.fixed_order_dot`): the same bits for any batch of runs
        and any number of devices.
      play_probs: ``(num_arms,)`` float, for in-scan reductions; do not stack it over rounds.
    """

    arms: jax.Array
    observed: jax.Array
    loss: jax.Array
    expected_loss: jax.Array
    play_probs: jax.Array


@dataclasses.dataclass(frozen=True)
class BanditLearner:
    """Base class: static configuration shared by every multi-armed bandit learner.

    Subclasses are frozen dataclasses, hashed by value, so equal learners share one compiled
    program. They implement ``default_params``, ``init``, ``ask`` and ``tell``; ``step`` is
    defined here once for all of them.

    Attributes:
      num_arms: ``n``, number of arms (>= 2).
      horizon: ``T``, number of rounds the step sizes are tuned for (>= 1).
      dtype: float dtype of the state, ``"float32"`` (default) or ``"float64"`` (needs
        ``jax_enable_x64``).
    """

    num_arms: int
    horizon: int
    dtype: str = "float32"

    num_queries: ClassVar[int] = 1
    name: ClassVar[str] = "base"
    #: Allowed ranges of ``Params`` fields (checked when concrete); every field must be
    #: finite in any case.
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {}

    def __post_init__(self) -> None:
        checks.check_int("num_arms", self.num_arms, minimum=2)
        checks.check_int("horizon", self.horizon, minimum=1)
        checks.check_choice("dtype", self.dtype, ("float32", "float64"))

    @property
    def float_dtype(self) -> jnp.dtype:
        return jnp.dtype(self.dtype)

    # --- the contract -------------------------------------------------------------------
    @property
    def default_params(self) -> Any:
        raise NotImplementedError

    def init(self, key: jax.Array, params: Any = None) -> Any:
        raise NotImplementedError

    def ask(self, state: Any, key: jax.Array) -> BanditQuery:
        raise NotImplementedError

    def tell(self, state: Any, query: BanditQuery, observed: jax.Array) -> Any:
        raise NotImplementedError

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
        new_state, query, observed = self.play(state, lambda arms: loss[arms], key)
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

    def play(
        self, state: Any, reveal: Callable[[jax.Array], jax.Array], key: jax.Array
    ) -> tuple[Any, BanditQuery, jax.Array]:
        """One round with the losses revealed by the environment: ask, ``reveal(arms)``, tell.

        :meth:`step` is this with ``reveal = lambda arms: loss[arms]``; a simulator whose
        environment can compute single entries passes its own (``env.loss_at``), so no round's
        full loss vector need exist. Only the queried arms are ever revealed.

        Args:
          state: the learner's state.
          reveal: maps the ``(num_queries,)`` queried arms to their losses in [0, 1].
          key: a PRNG key for this round.

        Returns:
          ``(new_state, query, observed losses)``.
        """
        checks.check_key("key", key)
        checks.check_state(self, state)
        query = self.ask(state, key)
        observed = reveal(query.arms)
        return self.tell(state, query, observed), query, observed

    # --- helpers for subclasses -----------------------------------------------------------
    def check_params(self, params: Any, batch: int | None = None) -> None:
        """Raise ``TypeError``/``ValueError`` unless ``params`` are this learner's ``Params``
        with scalar (or, with ``batch``, ``(batch,)`` per-run) leaves that are finite and in
        :attr:`param_bounds` (values are checked when concrete)."""
        expected = type(self.default_params)
        if type(params) is not expected:
            raise TypeError(
                f"params must be a {expected.__name__} (learner.default_params.replace(...)), "
                f"got {type(params).__name__}"
            )
        checks.check_param_values(params, self.param_bounds, batch=batch)

    def _resolve_params(self, params: Any) -> Any:
        if params is None:
            return self.default_params
        self.check_params(params)
        return jax.tree.map(lambda x: jnp.asarray(x, dtype=self.float_dtype), params)

    def _observed(
        self, observed: jax.Array, state: Any = None, query: BanditQuery | None = None
    ) -> jax.Array:
        """Validate what ``tell`` receives (the observed losses; with them, when given, the
        state's shapes and the query) and cast the losses to the state's dtype."""
        checks.check_losses("observed", observed, shape=(self.num_queries,))
        if state is not None:
            checks.check_state(self, state)
        if query is not None:
            checks.check_query(query, self.num_arms, self.num_queries)
        return jnp.asarray(observed).astype(self.float_dtype)
