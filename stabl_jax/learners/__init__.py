"""Bandit learners sharing the contract of :mod:`stabl_jax.learners.base`."""

from stabl_jax.learners.base import BanditLearner, BanditQuery, StepInfo
from stabl_jax.learners.exp3 import EXP3, EXP3Params, EXP3State, auer_gamma
from stabl_jax.learners.stabl import StABL, StABLParams, StABLState
from stabl_jax.learners.uniform import Uniform, UniformParams, UniformState

__all__ = [
    "EXP3",
    "BanditLearner",
    "BanditQuery",
    "EXP3Params",
    "EXP3State",
    "StABL",
    "StABLParams",
    "StABLState",
    "StepInfo",
    "Uniform",
    "UniformParams",
    "UniformState",
    "auer_gamma",
]
