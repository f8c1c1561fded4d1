"""Bandit learners sharing the contract of :mod:`stabl_jax.learners.base`."""

from stabl_jax.learners.base import BanditLearner, BanditQuery, StepInfo
from stabl_jax.learners.exp3 import EXP3, EXP3Params, EXP3State, auer_gamma
from stabl_jax.learners.hedge import Hedge, HedgeParams, HedgeState
from stabl_jax.learners.saol import SAOL, SAOLHedge, SAOLParams, SAOLState
from stabl_jax.learners.stabl import StABL, StABLParams, StABLState
from stabl_jax.learners.stabl_anytime import StABLAnytime, StABLAnytimeParams, StABLAnytimeState
from stabl_jax.learners.stabl_one_query import StABLOneQuery
from stabl_jax.learners.uniform import Uniform, UniformParams, UniformState

__all__ = [
    "EXP3",
    "SAOL",
    "BanditLearner",
    "BanditQuery",
    "EXP3Params",
    "EXP3State",
    "Hedge",
    "HedgeParams",
    "HedgeState",
    "SAOLHedge",
    "SAOLParams",
    "SAOLState",
    "StABL",
    "StABLAnytime",
    "StABLAnytimeParams",
    "StABLAnytimeState",
    "StABLOneQuery",
    "StABLParams",
    "StABLState",
    "StepInfo",
    "Uniform",
    "UniformParams",
    "UniformState",
    "auer_gamma",
]
