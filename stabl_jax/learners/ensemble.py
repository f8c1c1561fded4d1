"""The expert ensemble of StABL (Algorithm 1 of Lu et al., ICLR 2024), its variants, SAOL
(Daniely et al., ICML 2015) and the BCO ensembles (Algorithm 3, Appendix D).

``B`` experts on history lengths ``L_1 < ... < L_B``, expert ``k`` restarted when
``(t + round_offset) % L_k == 0``, under the restarted multiplicative weights of line 13:
``w_{t+1}(k) = w_t(k) (1 + eta_k r~_t(k))`` (muted when the factor is ``<= 0``), and
``w(k) = eta_k`` at a (re)start. A learner's ``_tell`` ends with
``self._advance(state, experts, regret_gain)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
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


#: Ranges of the scales (``meta_lr_scale = 0`` would make every ``log w(k)`` -inf).
SCALE_BOUNDS: Mapping[str, checks.Interval] = {
    "expert_lr_scale": checks.Interval(0.0),
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
    """One expert per history length ``L_1 < ... < L_B`` (:class:`Ensemble`, Vizier's StABL)."""

    if TYPE_CHECKING:

        @property
        def history_lengths(self) -> tuple[int, ...] | None: ...
        @property
        def horizon(self) -> int: ...

    def default_history_lengths(self) -> tuple[int, ...]:
        """What ``history_lengths=None`` stands for: the paper's ``2^k``."""
        return intervals.geometric_history_lengths(self.horizon)

    def _resolve_history_lengths(self) -> None:
        """Resolve ``history_lengths`` (``None``: :meth:`default_history_lengths`)."""
        given = self.history_lengths
        lengths = self.default_history_lengths() if given is None else given
        object.__setattr__(self, "history_lengths", intervals.validate_history_lengths(lengths))

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
        """``B``: the play distribution mixes the experts' rows."""
        return self.num_experts


def check_meta_step(eta: float, dtype: str, what: str, allowed: Callable[[float], str]) -> None:
    """``ValueError`` unless ``eta``, the smallest meta step size ``eta_k`` that ``what`` gives,
    is a normal number of ``dtype`` (an underflowing ``eta_k`` makes the mixture NaN); the
    message names ``allowed(tiny)``, ``tiny`` the dtype's smallest normal number."""
    tiny = float(np.finfo(dtype).tiny)
    if eta < tiny:
        raise ValueError(
            f"{what} makes the smallest meta step size eta_k = {eta:.3g} underflow in {dtype} "
            f"(below {tiny:.3g}); allowed: {allowed(tiny)}"
        )


@dataclasses.dataclass(frozen=True)
class Ensemble(HistoryExperts, Learner):
    """Base class of the expert ensembles, mixed in before a family base
    (``class StABL(Ensemble, BanditLearner)``).

    Attributes:
      history_lengths: ``L_1 < ... < L_B`` (any increasing positive ints); ``None`` gives the
        paper's ``2^k`` (:func:`stabl_jax.intervals.geometric_history_lengths`).
    """

    history_lengths: tuple[int, ...] | None = None

    Params: ClassVar[type] = EnsembleParams
    State: ClassVar[type] = EnsembleState
    experts_field: ClassVar[str] = "expert_log_probs"
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = SCALE_BOUNDS

    if TYPE_CHECKING:
        # Provided by the concrete learner (no dataclass fields of this mixin).
        @property
        def dtype(self) -> str: ...
        @property
        def round_offset(self) -> int: ...
        def uniform_log_probs(self, *lead: int) -> jax.Array: ...

    def __post_init__(self) -> None:
        super().__post_init__()
        self._resolve_history_lengths()
        checks.check_choice("round_offset", self.round_offset, (0, 1))

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
        """``min_k eta_k`` before scaling (the smallest reachable rate; ``None``: no check)."""
        return float(np.min(self.base_meta_step_sizes()))

    def check_params(self, params: Any, batch: int | None = None) -> None:
        """The base checks, and every ``eta_k = meta_lr_scale * base_k`` a normal number of
        the state's dtype (an underflowing ``eta_k`` makes the mixture NaN)."""
        super().check_params(params, batch)
        scale = params.meta_lr_scale
        smallest = self.smallest_base_meta_step_size()
        if smallest is None or not checks.is_concrete(scale):
            return
        low = float(np.min(np.asarray(scale, np.float64)))
        check_meta_step(
            low * smallest, self.dtype, f"params.meta_lr_scale={low:.3g}",
            lambda tiny: f"meta_lr_scale >= {tiny / smallest:.3g}",
        )  # fmt: skip

    def meta_step_sizes(self, params: Any) -> jax.Array:
        """``(B,)`` ``meta_lr_scale * eta_k``."""
        return params.meta_lr_scale * jnp.asarray(self.base_meta_step_sizes(), self.float_dtype)

    def expert_learning_rates(self, params: Any) -> jax.Array:
        """``(B,)`` ``expert_lr_scale`` times :meth:`base_expert_learning_rates`."""
        base = jnp.asarray(self.base_expert_learning_rates(), self.float_dtype)
        return params.expert_lr_scale * base

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
        """Line 13, then the restarts at ``t + 1`` (fresh experts, weight ``eta_k``).

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
