"""Bandit learners sharing the contract of :mod:`stabl_jax.learners.base`."""

from stabl_jax.learners.adswitch import AdSwitch, AdSwitchParams, AdSwitchQuery, AdSwitchState
from stabl_jax.learners.base import (
    BanditLearner,
    BanditQuery,
    StepInfo,
    WeightsLearner,
    WeightsState,
)
from stabl_jax.learners.cusum_ucb import CUSUMUCB, CUSUMUCBParams, CUSUMUCBState
from stabl_jax.learners.d_klucb import DklUCB, DklUCBParams
from stabl_jax.learners.d_ucb import DUCB, DUCBParams, DUCBState
from stabl_jax.learners.discounted_thompson import DiscountedThompson, DiscountedThompsonParams
from stabl_jax.learners.eflh import EFLH
from stabl_jax.learners.exp3 import EXP3, EXP3Params, auer_gamma
from stabl_jax.learners.exp3_ix import Exp3IX, Exp3IXParams
from stabl_jax.learners.exp3_ix_vizier import EXP3IXVizier
from stabl_jax.learners.exp3_vizier import EXP3Vizier, EXP3VizierParams, EXP3VizierState
from stabl_jax.learners.exp3s import Exp3S, Exp3SParams, exp3s_gamma
from stabl_jax.learners.flh import FLH, FLHParams, FLHQuery, FLHState
from stabl_jax.learners.glr_klucb import GLRklUCB, GLRklUCBParams, GLRklUCBState
from stabl_jax.learners.hedge import Hedge, HedgeParams
from stabl_jax.learners.klucb import KLUCB, KLUCBParams
from stabl_jax.learners.m_ucb import MUCB, MUCBParams, MUCBState
from stabl_jax.learners.master import MASTER, MASTERParams, MASTERQuery, MASTERState
from stabl_jax.learners.rexp3 import Rexp3, Rexp3Params
from stabl_jax.learners.saol import SAOL, SAOLHedge, SAOLParams, SAOLState
from stabl_jax.learners.stabl import StABL, StABLParams, StABLState
from stabl_jax.learners.stabl_adaptive import (
    StABLAdaptive,
    StABLAdaptiveParams,
    StABLAdaptiveState,
)
from stabl_jax.learners.stabl_anytime import StABLAnytime, StABLAnytimeParams, StABLAnytimeState
from stabl_jax.learners.stabl_one_query import StABLOneQuery
from stabl_jax.learners.stabl_rate_grid import StABLRateGrid
from stabl_jax.learners.stabl_vizier import StABLVizier, StABLVizierParams, StABLVizierState
from stabl_jax.learners.sw_klucb import SWklUCB, SWklUCBParams
from stabl_jax.learners.sw_thompson import SWThompson, SWThompsonState
from stabl_jax.learners.sw_ucb import SWUCB, SWUCBParams, SWUCBState
from stabl_jax.learners.thompson import Thompson, ThompsonParams, ThompsonQuery, ThompsonState
from stabl_jax.learners.tsallis_inf import TsallisINF, TsallisINFParams, TsallisINFState
from stabl_jax.learners.ucb1 import UCB1, UCB1Params
from stabl_jax.learners.uniform import Uniform, UniformParams, UniformState

__all__ = [
    "CUSUMUCB",
    "DUCB",
    "EFLH",
    "EXP3",
    "FLH",
    "KLUCB",
    "MASTER",
    "MUCB",
    "SAOL",
    "SWUCB",
    "UCB1",
    "AdSwitch",
    "AdSwitchParams",
    "AdSwitchQuery",
    "AdSwitchState",
    "BanditLearner",
    "BanditQuery",
    "CUSUMUCBParams",
    "CUSUMUCBState",
    "DUCBParams",
    "DUCBState",
    "DiscountedThompson",
    "DiscountedThompsonParams",
    "DklUCB",
    "DklUCBParams",
    "EXP3IXVizier",
    "EXP3Params",
    "EXP3Vizier",
    "EXP3VizierParams",
    "EXP3VizierState",
    "Exp3IX",
    "Exp3IXParams",
    "Exp3S",
    "Exp3SParams",
    "FLHParams",
    "FLHQuery",
    "FLHState",
    "GLRklUCB",
    "GLRklUCBParams",
    "GLRklUCBState",
    "Hedge",
    "HedgeParams",
    "KLUCBParams",
    "MASTERParams",
    "MASTERQuery",
    "MASTERState",
    "MUCBParams",
    "MUCBState",
    "Rexp3",
    "Rexp3Params",
    "SAOLHedge",
    "SAOLParams",
    "SAOLState",
    "SWThompson",
    "SWThompsonState",
    "SWUCBParams",
    "SWUCBState",
    "SWklUCB",
    "SWklUCBParams",
    "StABL",
    "StABLAdaptive",
    "StABLAdaptiveParams",
    "StABLAdaptiveState",
    "StABLAnytime",
    "StABLAnytimeParams",
    "StABLAnytimeState",
    "StABLOneQuery",
    "StABLParams",
    "StABLRateGrid",
    "StABLState",
    "StABLVizier",
    "StABLVizierParams",
    "StABLVizierState",
    "StepInfo",
    "Thompson",
    "ThompsonParams",
    "ThompsonQuery",
    "ThompsonState",
    "TsallisINF",
    "TsallisINFParams",
    "TsallisINFState",
    "UCB1Params",
    "Uniform",
    "UniformParams",
    "UniformState",
    "WeightsLearner",
    "WeightsState",
    "auer_gamma",
    "exp3s_gamma",
]
