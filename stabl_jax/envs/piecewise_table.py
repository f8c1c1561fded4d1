"""Stochastic Bernoulli arms with any table of mean losses, one row per segment.

Segment ``j`` has mean losses ``mu_j = means[j] in [0, 1]^n``; round ``t``'s losses are
independent ``Bernoulli(mu_{j(t)})`` draws. For the benchmarks of Besson, Kaufmann,
Maillard & Seznec (JMLR 2022), given as reward means ``r``, pass ``means = 1 - r``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks
from stabl_jax.envs.base import SegmentParams
from stabl_jax.envs.bernoulli import BernoulliLosses


def check_means(means: object) -> tuple[tuple[float, ...], ...]:
    """``means`` as a tuple of equal-length tuples of floats in [0, 1], else an error naming
    the offending row or entry and what is allowed."""
    if isinstance(means, np.ndarray):
        means = means.tolist()
    if not isinstance(means, Sequence) or isinstance(means, str) or len(means) == 0:
        raise ValueError(
            f"means must be a non-empty (segments x arms) table of mean losses, one row per "
            f"segment (e.g. means=((0.1, 0.5), (0.5, 0.1))), got {means!r}"
        )
    rows = []
    for j, row in enumerate(means):
        if not isinstance(row, Sequence) or isinstance(row, str):
            raise ValueError(f"means[{j}] must be a row of mean losses (one per arm), got {row!r}")
        values = []
        for i, value in enumerate(row):
            mean = checks.check_real(f"means[{j}][{i}]", value)
            if not math.isfinite(mean) or not 0.0 <= mean <= 1.0:
                raise ValueError(
                    f"means[{j}][{i}] = {value!r} is not a mean loss in [0, 1]; for reward "
                    "means r pass 1 - r"
                )
            values.append(mean)
        rows.append(tuple(values))
    widths = sorted({len(row) for row in rows})
    if len(widths) > 1:
        raise ValueError(f"means must have rows of one length (one entry per arm), got {widths}")
    return tuple(rows)


@chex.dataclass(frozen=True)
class TableParams(SegmentParams):
    """:class:`PiecewiseBernoulliTable`'s per-run parameters (traced).

    Attributes:
      means: ``(S, n)`` float32 mean losses, row ``j`` for segment ``j``; ``best_arms`` is
        their row-wise argmin.
    """

    means: jax.Array


@dataclasses.dataclass(frozen=True)
class PiecewiseBernoulliTable(BernoulliLosses):
    """Bernoulli losses whose means are a given ``(S, n)`` table, changing at change points.

    Attributes:
      means: ``(S, n)`` mean losses in [0, 1], row ``j`` for segment ``j``; ``n = num_arms``,
        ``S`` the number of segments. The default of :class:`TableParams`' traced ``means``,
        not part of the environment's identity (``compare=False``; its shape is, through
        ``num_arms`` and ``num_segments``).
      num_segments: ``S`` when ``change_points`` is ``None``; ``0`` takes it from ``means``.

    Example:
      >>> env = PiecewiseBernoulliTable(
      ...     num_arms=3, horizon=100, change_points=(40,),
      ...     means=((0.5, 0.25, 0.75), (0.0, 0.5, 1.0)),
      ... )
      >>> int(env.best_arm(env.default_params, 10)), int(env.best_arm(env.default_params, 40))
      (1, 0)
    """

    num_segments: int = 0
    means: tuple[tuple[float, ...], ...] = dataclasses.field(default=(), compare=False)

    name = "bernoulli_table"

    def __post_init__(self) -> None:
        means = check_means(self.means)
        object.__setattr__(self, "means", means)
        checks.check_int("num_segments", self.num_segments, minimum=0)
        if self.num_segments == 0:
            object.__setattr__(self, "num_segments", len(means))
        super().__post_init__()
        if len(means[0]) != self.num_arms:
            raise ValueError(
                f"means has {len(means[0])} columns but num_arms={self.num_arms}: give one "
                "mean per arm in every row, or num_arms equal to the row length"
            )
        if len(means) != self.num_segments:
            raise ValueError(
                f"means has {len(means)} rows but the change points {self.change_points} make "
                f"{self.num_segments} segments: give len(means) - 1 = {len(means) - 1} change "
                "points (or none, for equal segments), or one row per segment"
            )
        if self.best_arm_order != "sequential":
            raise ValueError(
                f"best_arm_order={self.best_arm_order!r}: the means table fixes each segment's "
                "best arm; leave best_arm_order at 'sequential'"
            )

    @property
    def default_params(self) -> TableParams:
        means = jnp.asarray(self.means, jnp.float32)
        segments = super().default_params
        return TableParams(
            change_points=segments.change_points,
            best_arms=jnp.argmin(means, axis=1).astype(jnp.int32),
            means=means,
        )

    def _segment_params(self, key: jax.Array, defaults: TableParams) -> TableParams:
        params = super()._segment_params(key, defaults)
        return params.replace(best_arms=jnp.argmin(params.means, axis=1).astype(jnp.int32))

    def mean_loss(self, params: TableParams, t: jax.Array) -> jax.Array:
        return params.means[self.segment(params, t)]
