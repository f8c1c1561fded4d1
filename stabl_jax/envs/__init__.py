"""Environments: pure functions of ``(params, t, key)``; they never import learners."""

from stabl_jax.envs.base import (
    PiecewiseEnv,
    SegmentParams,
    equal_change_points,
    geometric_segment_lengths,
    validate_change_points,
)
from stabl_jax.envs.bernoulli import PiecewiseBernoulli
from stabl_jax.envs.expert_advice import ExpertAdvice

__all__ = [
    "ExpertAdvice",
    "PiecewiseBernoulli",
    "PiecewiseEnv",
    "SegmentParams",
    "equal_change_points",
    "geometric_segment_lengths",
    "validate_change_points",
]
