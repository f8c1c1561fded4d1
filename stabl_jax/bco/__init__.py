"""Bandit convex optimisation learners (Section 5 and Appendix A of Lu et al., ICLR 2024)
sharing the contract of :mod:`stabl_jax.bco.base`, registered in
:data:`stabl_jax.registry.BCO_LEARNERS` under these names:

=======================  ==========================================  =======  ============
name                     learner                                     queries  file
=======================  ==========================================  =======  ============
``stabl_bco``            Algorithm 3, factor ``B`` (unbiased)        3        stabl_bco.py
``stabl_bco_log_t``      Algorithm 3, factor ``log2 T`` as printed   3        stabl_bco.py
``stabl_bco_two_query``  Appendix D: linear surrogate, no ``k_t``    2        two_query.py
``fkm``                  one-point descent (Flaxman et al. 2005)     1        ogd.py
``two_point_ogd``        two-point OGD (Agarwal et al. 2010)         2        ogd.py
``ogd_full_info``        exact gradients: a reference, not a bandit  1        ogd.py
=======================  ==========================================  =======  ============
"""

from __future__ import annotations

from stabl_jax.bco.base import (
    BCODraws,
    BCOLearner,
    BCOQuery,
    BCOStepInfo,
    evaluate,
    safe_softmax,
)
from stabl_jax.bco.ogd import (
    FKM,
    BanditOGDParams,
    FullInfoOGD,
    FullInfoOGDParams,
    OGDState,
    ProjectedOGD,
    SingleOGDState,
    TwoPointOGD,
)
from stabl_jax.bco.stabl_bco import ExpertEnsembleBCO, StABLBCO, StABLBCOParams, StABLBCOState
from stabl_jax.bco.two_query import StABLBCOTwoQuery

__all__ = [
    "FKM",
    "BCODraws",
    "BCOLearner",
    "BCOQuery",
    "BCOStepInfo",
    "BanditOGDParams",
    "ExpertEnsembleBCO",
    "FullInfoOGD",
    "FullInfoOGDParams",
    "OGDState",
    "ProjectedOGD",
    "SingleOGDState",
    "StABLBCO",
    "StABLBCOParams",
    "StABLBCOState",
    "StABLBCOTwoQuery",
    "TwoPointOGD",
    "evaluate",
    "safe_softmax",
]
