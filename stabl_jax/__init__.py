"""stabl_jax: strongly adaptive online learning under limited feedback, in JAX.

StABL (Lu et al., "Adaptive Regret for Bandits Made Possible: Two Queries Suffice", ICLR 2024)
and its baselines behind one contract (``init``/``ask``/``tell``/``step``), and one
``simulate`` running thousands of runs as one compiled program. The top level holds what a
user calls; the rest is in its subpackage (:mod:`stabl_jax.bco`, :mod:`stabl_jax.metrics`,
:mod:`stabl_jax.registry`, ...).
"""

from typing import Any

# First: checks the installed JAX, chex and optax before any module uses them (versions.py)
from stabl_jax import versions
from stabl_jax.bco import BCOLearner
from stabl_jax.envs import (
    DriftingBernoulli,
    Environment,
    ExpertAdvice,
    PiecewiseBernoulli,
    PiecewiseBernoulliTable,
    PiecewiseEnv,
)
from stabl_jax.learners import (
    CUSUMUCB,
    DUCB,
    EFLH,
    EXP3,
    FLH,
    KLUCB,
    MASTER,
    MUCB,
    SAOL,
    SWUCB,
    UCB1,
    AdSwitch,
    BanditLearner,
    DiscountedThompson,
    DklUCB,
    Exp3IX,
    EXP3IXVizier,
    Exp3S,
    EXP3Vizier,
    GLRklUCB,
    Hedge,
    Rexp3,
    SAOLHedge,
    StABL,
    StABLAdaptive,
    StABLAnytime,
    StABLOneQuery,
    StABLVizier,
    SWklUCB,
    SWThompson,
    Thompson,
    TsallisINF,
    Uniform,
)
from stabl_jax.registry import ENVS, LEARNERS, make, make_env, register_env, register_learner
from stabl_jax.simulate import SimOptions, SimResult, env_params_grid, simulate

__version__ = versions.__version__


def __getattr__(name: str) -> Any:
    """``stabl_jax.load_results``: loaded on first use, so ``import stabl_jax`` stays the
    library and loads none of :mod:`stabl_jax.experiment`."""
    if name == "load_results":
        from stabl_jax.experiment.tables import load_results

        return load_results
    raise AttributeError(f"module 'stabl_jax' has no attribute {name!r}")


__all__ = [
    "CUSUMUCB",
    "DUCB",
    "EFLH",
    "ENVS",
    "EXP3",
    "FLH",
    "KLUCB",
    "LEARNERS",
    "MASTER",
    "MUCB",
    "SAOL",
    "SWUCB",
    "UCB1",
    "AdSwitch",
    "BCOLearner",
    "BanditLearner",
    "DiscountedThompson",
    "DklUCB",
    "DriftingBernoulli",
    "EXP3IXVizier",
    "EXP3Vizier",
    "Environment",
    "Exp3IX",
    "Exp3S",
    "ExpertAdvice",
    "GLRklUCB",
    "Hedge",
    "PiecewiseBernoulli",
    "PiecewiseBernoulliTable",
    "PiecewiseEnv",
    "Rexp3",
    "SAOLHedge",
    "SWThompson",
    "SWklUCB",
    "SimOptions",
    "SimResult",
    "StABL",
    "StABLAdaptive",
    "StABLAnytime",
    "StABLOneQuery",
    "StABLVizier",
    "Thompson",
    "TsallisINF",
    "Uniform",
    "__version__",
    "env_params_grid",
    "load_results",
    "make",
    "make_env",
    "register_env",
    "register_learner",
    "simulate",
]
