"""The expert ensemble shared by StABL (Algorithm 1 of Lu et al., ICLR 2024), its variants, SAOL
(Daniely et al., ICML 2015) and the BCO ensembles (Algorithm 3 and Appendix D): ``B`` experts
on the history lengths ``L_1 < ... < L_B``, expert ``k`` restarted every ``L_k`` rounds, under a
restarted multiplicative-weights meta-learner (``docs/design.md``).

What this module owns, once for every ensemble:

- the history lengths (:func:`stabl_jax.intervals.resolve_history_lengths`) and the restarts
  for round ``t`` (``(t + round_offset) % L_k == 0``, :func:`stabl_jax.intervals.restart_mask`);
- the sweepable scales ``expert_lr_scale`` and ``meta_lr_scale`` (:class:`EnsembleParams`),
  their bounds (:data:`SCALE_BOUNDS`) and the check that no meta step size ``eta_k`` underflows;
- the state's round counter ``t``, meta log-weights ``log w_t(k)`` (``log eta_k`` at a
  (re)start) and ``num_muted``, and line 13's update ``w_{t+1}(k) = w_t(k) (1 + eta_k r~_t(k))``
  with muting (:func:`stabl_jax.estimators.meta_log_update`) and restarts
  (:meth:`Ensemble._advance`).

A learner supplies the rest (:class:`Ensemble`); its ``_tell`` ends with
``self._advance(state, experts, regret_gain)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, estimators, intervals
from stabl_jax.learners.base import Learner


@chex.dataclass(frozen=True)
class EnsembleParams:
    """Sweepable numbers of an ensemble (1 by default).

    Attributes:
      expert_lr_scale: ``()`` multiplies every expert's learning rate.
      meta_lr_scale: ``()`` multiplies every meta step size ``eta_k`` (also the restart
        weight ``w(k) = eta_k``).
    """

    expert_lr_scale: jax.Array
    meta_lr_scale: jax.Array


#: Ranges of the scales: every ensemble's ``param_bounds`` (a member with more params adds
#: theirs); :meth:`Ensemble.check_params` also rejects a ``meta_lr_scale`` under which a meta
#: step size underflows.
SCALE_BOUNDS: Mapping[str, checks.Interval] = {
    "expert_lr_scale": checks.Interval(0.0),
    # 0 would make every meta weight log(0) = -inf: no distribution over experts.
    "meta_lr_scale": checks.Interval(0.0, low_open=True),
}


@chex.dataclass(frozen=True)
class EnsembleState:
    """State of a bandit ensemble of exponential-weights experts (StABL, SAOL)."""

    t: jax.Array  # () int32, rounds played so far
    expert_log_probs: jax.Array  # (B, num_arms) float, log v(t, k), each row normalised
    meta_log_weights: jax.Array  # (B,) float, log w_t(k), unnormalised; -inf = muted
    num_muted: jax.Array  # () int32, meta updates that hit 1 + eta_k r~ <= 0 so far
    params: EnsembleParams


def tree_select(mask: jax.Array, fresh: Any, old: Any) -> Any:
    """``where(mask, fresh, old)`` leafwise for pytrees stacked on a leading ``(B,)`` axis."""

    def pick(a: jax.Array, b: jax.Array) -> jax.Array:
        m = mask.reshape(mask.shape + (1,) * (jnp.ndim(b) - 1))
        return jnp.where(m, a, b)

    return jax.tree.map(pick, fresh, old)


class HistoryExperts:
    """One expert per history length ``L_1 < ... < L_B``, mixed into the play distribution:
    what :class:`Ensemble` and Vizier's StABL (:mod:`stabl_jax.learners.stabl_vizier`) share.
    Mixed in before the learner's base; the learner has the fields ``history_lengths`` and
    ``horizon`` and calls :meth:`_resolve_history_lengths` in ``__post_init__``."""

    if TYPE_CHECKING:

        @property
        def history_lengths(self) -> tuple[int, ...] | None: ...
        @property
        def horizon(self) -> int: ...

    def _resolve_history_lengths(self) -> None:
        """Replace ``history_lengths`` by the resolved lengths (``None``: the paper's
        ``2^k``; :func:`stabl_jax.intervals.resolve_history_lengths`)."""
        lengths = intervals.resolve_history_lengths(self.history_lengths, self.horizon)
        object.__setattr__(self, "history_lengths", lengths)

    @property
    def _history_lengths(self) -> tuple[int, ...]:
        """:attr:`history_lengths` as the constructor resolved it (never ``None``)."""
        return cast(tuple[int, ...], self.history_lengths)

    @property
    def num_experts(self) -> int:
        """``B``, the number of history lengths."""
        return len(self._history_lengths)

    @property
    def num_mixed(self) -> int:
        """``B``: the play distribution mixes the experts' rows (the play-distribution check's
        tolerance, :func:`stabl_jax.checks.distribution_tolerance`)."""
        return self.num_experts


@dataclasses.dataclass(frozen=True)
class Ensemble(HistoryExperts, Learner):
    """Base class of the expert ensembles (module docstring); mixed in before a family base,
    e.g. ``class StABL(Ensemble, BanditLearner)``.

    Subclasses set ``Params`` and ``State`` (classes with :class:`EnsembleParams`'s and
    :class:`EnsembleState`'s fields; ``experts_field`` names the experts), provide
    ``round_offset`` (a field, or a class constant 0), the step sizes
    (``base_meta_step_sizes``, ``base_expert_learning_rates``), ``fresh_experts`` and the
    ``_ask`` and ``_tell`` maths.

    Attributes:
      history_lengths: ``L_1 < ... < L_B``; ``None`` gives the paper's ``2^k`` (see
        :func:`stabl_jax.intervals.geometric_history_lengths`). Lengths need not be powers of
        two (the paper's hyperparameter experiment uses 20, 40, ..., 2560).
    """

    history_lengths: tuple[int, ...] | None = None

    Params: ClassVar[type] = EnsembleParams
    State: ClassVar[type] = EnsembleState
    experts_field: ClassVar[str] = "expert_log_probs"
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = SCALE_BOUNDS

    if TYPE_CHECKING:
        # What the concrete learner provides (its fields, or a class constant ``round_offset``;
        # ``uniform_log_probs`` is BanditLearner's). Read-only properties to type checkers, so
        # that they are no dataclass fields of this mixin.
        @property
        def dtype(self) -> str: ...
        @property
        def round_offset(self) -> int: ...
        def uniform_log_probs(self, *lead: int) -> jax.Array: ...

    def __post_init__(self) -> None:
        super().__post_init__()
        self._resolve_history_lengths()
        checks.check_choice("round_offset", self.round_offset, (0, 1))

    # --- static quantities --------------------------------------------------------------------
    def _lengths(self) -> np.ndarray:
        return np.asarray(self.history_lengths, dtype=np.float64)

    def base_meta_step_sizes(self) -> np.ndarray:
        """``(B,)`` meta step sizes ``eta_k`` before scaling."""
        raise NotImplementedError

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B,)`` expert learning rates before scaling."""
        raise NotImplementedError

    def fresh_experts(self) -> Any:
        """The ``B`` experts at a (re)start, stacked on a leading ``(B,)`` axis; by default
        ``(B, num_arms)`` uniform log-probabilities ``log v(t, k) = -log n``."""
        return self.uniform_log_probs(self.num_experts)

    def smallest_base_meta_step_size(self) -> float | None:
        """``min_k eta_k`` before scaling, for :meth:`check_params`' underflow check. A member
        whose meta rates change with the round or the data returns the smallest rate it can
        reach (anytime and adaptive StABL), or ``None`` for no check."""
        return float(np.min(self.base_meta_step_sizes()))

    # --- params -------------------------------------------------------------------------------
    def check_params(self, params: Any, batch: int | None = None) -> None:
        """The base checks (:attr:`param_bounds`, :data:`SCALE_BOUNDS` by default), and, for
        fixed meta step sizes: every ``eta_k = meta_lr_scale * base_k`` is a normal number of
        the state's dtype (a scale so small that ``eta_k`` underflows makes every
        ``log w(k) = log eta_k`` -inf and the mixture NaN)."""
        super().check_params(params, batch)
        scale = params.meta_lr_scale
        smallest = self.smallest_base_meta_step_size()
        if smallest is None or not checks.is_concrete(scale):
            return
        tiny = float(np.finfo(self.dtype).tiny)
        low = float(np.min(np.asarray(scale, np.float64)))
        if low * smallest < tiny:
            raise ValueError(
                f"params.meta_lr_scale={low:.3g} makes the smallest meta step size "
                f"eta_k = {low * smallest:.3g} underflow in {self.dtype} (below {tiny:.3g}); "
                f"allowed: meta_lr_scale >= {tiny / smallest:.3g}"
            )

    def meta_step_sizes(self, params: Any) -> jax.Array:
        """``(B,)`` ``meta_lr_scale * eta_k``."""
        return params.meta_lr_scale * jnp.asarray(self.base_meta_step_sizes(), self.float_dtype)

    def expert_learning_rates(self, params: Any) -> jax.Array:
        """``(B,)`` ``expert_lr_scale`` times :meth:`base_expert_learning_rates`."""
        base = jnp.asarray(self.base_expert_learning_rates(), self.float_dtype)
        return params.expert_lr_scale * base

    # --- state --------------------------------------------------------------------------------
    def restarts(self, t: jax.Array) -> jax.Array:
        """``(B,)`` bool: the experts that (re)start at round ``t``."""
        return intervals.restart_mask(t, self._history_lengths, self.round_offset)

    def _init(self, key: jax.Array, params: Any) -> Any:
        del key
        return self.State(
            t=jnp.zeros((), jnp.int32),
            meta_log_weights=jnp.log(self.meta_step_sizes(params)),
            num_muted=jnp.zeros((), jnp.int32),
            params=params,
            **{self.experts_field: self.fresh_experts()},
        )

    def _advance(self, state: Any, experts: Any, regret_gain: jax.Array) -> Any:
        """Line 13 and the restarts: ``w_{t+1}(k) = w_t(k) (1 + eta_k r~_t(k))`` (muted when
        the factor is ``<= 0``), then every expert restarting at ``t + 1`` becomes fresh with
        weight ``eta_k``.

        Args:
          state: the round's state.
          experts: the experts after this round's update, stacked on ``(B, ...)``.
          regret_gain: ``(B,)`` ``r~_t(k)``, expert ``k``'s estimated gain over the mixture.
        """
        eta = self.meta_step_sizes(state.params)
        meta, muted = estimators.meta_log_update(state.meta_log_weights, eta, regret_gain)
        t_next = state.t + 1
        restart = self.restarts(t_next)
        experts = tree_select(restart, self.fresh_experts(), experts)
        old = getattr(state, self.experts_field)
        meta = jnp.where(restart, jnp.log(eta), meta)
        return dataclasses.replace(
            state,
            t=t_next,
            meta_log_weights=meta.astype(self.float_dtype),
            num_muted=state.num_muted + muted,
            **{self.experts_field: jax.tree.map(lambda x, y: x.astype(y.dtype), experts, old)},
        )
