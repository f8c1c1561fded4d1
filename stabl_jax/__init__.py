"""stabl_jax: strongly adaptive online learning under limited feedback, in JAX.

Implements StABL (Lu et al., "Adaptive Regret for Bandits Made Possible: Two Queries Suffice",
ICLR 2024) and its baselines behind one contract (``init``/``ask``/``tell``/``step``), with
environments behind one call (``evaluate``, ``docs/environments.md``) and one ``simulate`` that
runs thousands of independent runs as one compiled program.
"""

from stabl_jax import bco, domains, gradients, metrics
from stabl_jax.bco import (
    BCO_LEARNERS,
    FKM,
    FullInfoOGD,
    StABLBCO,
    StABLBCOTwoQuery,
    TwoPointOGD,
    make_bco,
)
from stabl_jax.bco.simulate import bco_adaptive_regret
from stabl_jax.envs import Environment, ExpertAdvice, PiecewiseBernoulli
from stabl_jax.envs.bbob import BBOBFunction
from stabl_jax.envs.convex import (
    CONVEX_ENVS,
    AbsoluteLinear,
    CustomConvex,
    HuberTarget,
    MovingTarget,
)
from stabl_jax.envs.eagle import EagleConfig, EagleEnsemble, eagle_grid
from stabl_jax.envs.hpo import HPOEnv
from stabl_jax.hpo_metrics import run_hpo, simulate_selection
from stabl_jax.learners import (
    DUCB,
    EXP3,
    SWUCB,
    BanditQuery,
    Exp3IX,
    Exp3S,
    StABL,
    StepInfo,
    Uniform,
)
from stabl_jax.registry import ENVS, LEARNERS, make, make_env
from stabl_jax.simulate import SimResult, simulate

__version__ = "0.1.0"

__all__ = [
    "BCO_LEARNERS",
    "CONVEX_ENVS",
    "DUCB",
    "ENVS",
    "EXP3",
    "FKM",
    "LEARNERS",
    "SWUCB",
    "AbsoluteLinear",
    "BBOBFunction",
    "BanditQuery",
    "CustomConvex",
    "EagleConfig",
    "EagleEnsemble",
    "Environment",
    "Exp3IX",
    "Exp3S",
    "ExpertAdvice",
    "FullInfoOGD",
    "HPOEnv",
    "HuberTarget",
    "MovingTarget",
    "PiecewiseBernoulli",
    "SimResult",
    "StABL",
    "StABLBCO",
    "StABLBCOTwoQuery",
    "StepInfo",
    "TwoPointOGD",
    "Uniform",
    "__version__",
    "bco",
    "bco_adaptive_regret",
    "domains",
    "eagle_grid",
    "gradients",
    "make",
    "make_bco",
    "make_env",
    "metrics",
    "run_hpo",
    "simulate",
    "simulate_selection",
]
