"""Bandit convex optimisation learners (Section 5 and Appendix A of Lu et al., ICLR 2024)
sharing the contract of :mod:`stabl_jax.bco.base`, and their registry.

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

import functools
from collections.abc import Callable
from typing import Any

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

BCO_LEARNERS: dict[str, Callable[..., Any]] = {
    "stabl_bco": StABLBCO,
    "stabl_bco_log_t": functools.partial(StABLBCO, scale_factor="log_T"),
    "stabl_bco_two_query": StABLBCOTwoQuery,
    "fkm": FKM,
    "two_point_ogd": TwoPointOGD,
    "ogd_full_info": FullInfoOGD,
}

BCO_LEARNER_DESCRIPTIONS: dict[str, str] = {
    "stabl_bco": "Algorithm 3: geometric projected-OGD experts, k_t ~ U[B], factor B (3 queries)",
    "stabl_bco_log_t": "Algorithm 3 with the printed factor log2 T instead of B (3 queries)",
    "stabl_bco_two_query": "Appendix D: Algorithm 3 with one linear surrogate g_hat (2 queries)",
    "fkm": "one-point bandit gradient descent, Flaxman-Kalai-McMahan 2005 (1 query)",
    "two_point_ogd": "two-point OGD, Agarwal-Dekel-Xiao 2010, loss at played point (2 queries)",
    "ogd_full_info": "projected OGD with exact gradients: a reference line, not a bandit (1 query)",
}


def make_bco(name: str, **kwargs: Any) -> BCOLearner:
    """Construct the BCO learner registered as ``name``.

    Example:
      >>> make_bco("stabl_bco", dim=2, horizon=4096).history_lengths
      (64, 128, 256, 512, 1024, 2048, 4096)
    """
    try:
        ctor = BCO_LEARNERS[name]
    except KeyError:
        raise ValueError(
            f"unknown BCO learner {name!r}; choose one of {sorted(BCO_LEARNERS)}"
        ) from None
    return ctor(**kwargs)


__all__ = [
    "BCO_LEARNERS",
    "BCO_LEARNER_DESCRIPTIONS",
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
    "make_bco",
    "safe_softmax",
]
