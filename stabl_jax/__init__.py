"""stabl_jax: strongly adaptive online learning under limited feedback, in JAX.

Implements StABL (Lu et al., "Adaptive Regret for Bandits Made Possible: Two Queries Suffice",
ICLR 2024) and its baselines behind one contract (``init``/``ask``/``tell``/``step``), with
environments that are pure functions of ``(params, t, key)`` and a ``simulate`` that runs
thousands of independent runs as one compiled program.
"""

from stabl_jax import metrics
from stabl_jax.envs import ExpertAdvice, PiecewiseBernoulli
from stabl_jax.learners import EXP3, BanditQuery, StABL, StepInfo, Uniform
from stabl_jax.registry import ENVS, LEARNERS, make, make_env
from stabl_jax.simulate import SimResult, simulate

__version__ = "0.1.0"

__all__ = [
    "ENVS",
    "EXP3",
    "LEARNERS",
    "BanditQuery",
    "ExpertAdvice",
    "PiecewiseBernoulli",
    "SimResult",
    "StABL",
    "StepInfo",
    "Uniform",
    "__version__",
    "make",
    "make_env",
    "metrics",
    "simulate",
]
