"""StABL with experts over (history length, learning-rate scale): the meta-learner picks the
experts' step size as it picks the time scale.

One EXP3 expert per history length ``L_k`` and scale ``s_j``, rate ``s_j eta'_k``, index
``k S + j``: Algorithm 1 (Lu et al., ICLR 2024) with ``B' = B S`` for ``B``, two queries a round.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks
from stabl_jax.learners.stabl import StABL

#: The default grid of learning-rate scales: ``4^j``, ``j = 0..5``.
DEFAULT_RATE_GRID: tuple[float, ...] = (1.0, 4.0, 16.0, 64.0, 256.0, 1024.0)


@dataclasses.dataclass(frozen=True)
class StABLRateGrid(StABL):
    """StABL over ``B S`` experts, one per (history length, learning-rate scale).

    Attributes:
      rate_grid: the scales ``s_1 < ... < s_S`` (positive, finite, increasing) that multiply
        the experts' learning rates ``eta'_k``; ``params.expert_lr_scale`` still multiplies
        them all.
      scale_meta: also multiply expert ``(k, j)``'s meta step size (and restart weight) by
        ``s_j``, ``eta_{k,j} = s_j eta_k`` (default); ``False``: its length's ``eta_k``.

    Example:
      >>> learner = StABLRateGrid(num_arms=5, horizon=64, rate_grid=(1.0, 8.0))
      >>> learner.history_lengths, learner.num_experts
      ((32, 64), 4)
    """

    rate_grid: tuple[float, ...] = DEFAULT_RATE_GRID
    scale_meta: bool = True

    name: ClassVar[str] = "stabl_rate_grid"

    def __post_init__(self) -> None:
        grid = tuple(self.rate_grid)
        if not grid or not all(
            isinstance(s, int | float) and not isinstance(s, bool) and math.isfinite(s) and s > 0
            for s in grid
        ):
            raise ValueError(
                f"rate_grid must be a non-empty tuple of positive finite numbers, got {grid!r}"
            )
        if any(b <= a for a, b in itertools.pairwise(grid)):
            raise ValueError(f"rate_grid must be strictly increasing, got {grid!r}")
        object.__setattr__(self, "rate_grid", tuple(float(s) for s in grid))
        checks.check_bool("scale_meta", self.scale_meta)
        super().__post_init__()

    @property
    def num_experts(self) -> int:
        """``B' = B S``: one expert per history length and scale."""
        return len(self.history_lengths) * len(self.rate_grid)  # type: ignore[arg-type]

    def _lengths(self) -> np.ndarray:
        """``(B',)`` the history length of every expert (each ``L_k`` repeated ``S`` times)."""
        return np.repeat(np.asarray(self.history_lengths, np.float64), len(self.rate_grid))

    def _scales(self) -> np.ndarray:
        """``(B',)`` the scale ``s_j`` of every expert (the grid tiled over the lengths)."""
        return np.tile(np.asarray(self.rate_grid), len(self.history_lengths))  # type: ignore[arg-type]

    def base_expert_learning_rates(self) -> np.ndarray:
        """``(B',)`` ``s_j sqrt(ln n / (L_k n 2B'))``, before ``expert_lr_scale``."""
        return self._scales() * super().base_expert_learning_rates()

    def base_meta_step_sizes(self) -> np.ndarray:
        """``(B',)`` ``eta_k`` of expert ``(k, j)``'s length (times ``s_j`` with
        ``scale_meta``), before ``meta_lr_scale``."""
        base = super().base_meta_step_sizes()
        return self._scales() * base if self.scale_meta else base

    def restarts(self, t: jax.Array) -> jax.Array:
        """``(B',)`` bool: every scale of history length ``L_k`` restarts with it."""
        return jnp.repeat(super().restarts(t), len(self.rate_grid))
