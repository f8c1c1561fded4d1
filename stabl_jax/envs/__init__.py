"""Environments: one call, ``evaluate`` (``docs/environments.md``); they never import learners."""

from stabl_jax.envs.base import (
    BanditEnv,
    Environment,
    ObliviousBandit,
    PiecewiseEnv,
    SegmentParams,
    as_environment,
    equal_change_points,
    geometric_segment_lengths,
    validate_change_points,
)
from stabl_jax.envs.bernoulli import PiecewiseBernoulli
from stabl_jax.envs.drifting import DriftingBernoulli, DriftParams
from stabl_jax.envs.expert_advice import ExpertAdvice
from stabl_jax.envs.piecewise_table import PiecewiseBernoulliTable

__all__ = [
    "BanditEnv",
    "DriftParams",
    "DriftingBernoulli",
    "Environment",
    "ExpertAdvice",
    "ObliviousBandit",
    "PiecewiseBernoulli",
    "PiecewiseBernoulliTable",
    "PiecewiseEnv",
    "SegmentParams",
    "as_environment",
    "equal_change_points",
    "geometric_segment_lengths",
    "validate_change_points",
]
