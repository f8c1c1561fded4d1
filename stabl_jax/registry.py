"""Registries of learners and environments, with gymnax-style ``make``.

Entries are constructors (classes or ``functools.partial`` of one) keyed by name. Learner
entries take ``num_arms`` and ``horizon`` plus their own options; the named variants fix the
options that define them in the paper.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from stabl_jax.envs import ExpertAdvice, PiecewiseBernoulli
from stabl_jax.learners import DUCB, EXP3, SWUCB, Exp3IX, Exp3S, StABL, Uniform, auer_gamma
from stabl_jax.learners.exp3_ix_vizier import EXP3IXVizier
from stabl_jax.learners.exp3_vizier import EXP3Vizier
from stabl_jax.learners.hedge import Hedge
from stabl_jax.learners.saol import SAOL, SAOLHedge
from stabl_jax.learners.stabl_adaptive import StABLAdaptive
from stabl_jax.learners.stabl_anytime import StABLAnytime
from stabl_jax.learners.stabl_one_query import StABLOneQuery
from stabl_jax.learners.stabl_vizier import StABLVizier


def _exp3_uniform(num_arms: int, horizon: int, gamma: float | None = None, **kwargs: Any) -> EXP3:
    """EXP3 with uniform exploration; ``gamma`` defaults to Auer et al.'s rate."""
    if gamma is None:
        gamma = auer_gamma(num_arms, horizon)
    return EXP3(num_arms=num_arms, horizon=horizon, gamma=gamma, **kwargs)


LEARNERS: dict[str, Callable[..., Any]] = {
    "uniform": Uniform,
    "exp3": EXP3,
    "exp3_uniform": _exp3_uniform,
    "stabl": StABL,
    "stabl_naive": functools.partial(StABL, observation="uniform"),
    "stabl_single_scale": functools.partial(StABL, history_lengths=(1024,)),
    "exp3s": Exp3S,
    "exp3_ix": Exp3IX,
    "sw_ucb": SWUCB,
    "d_ucb": DUCB,
    "hedge": Hedge,
    "saol_hedge": SAOLHedge,
    "saol": SAOL,
    "stabl_one_query": StABLOneQuery,
    "stabl_anytime": StABLAnytime,
    "stabl_adaptive": StABLAdaptive,
    "stabl_tuned": StABL,
    "stabl_vizier": StABLVizier,
    "stabl_vizier_naive": functools.partial(StABLVizier, naive_sampling=True),
    "stabl_vizier_single_scale": functools.partial(StABLVizier, history_lengths=(1024,)),
    "exp3_vizier": EXP3Vizier,
    "exp3_ix_vizier": EXP3IXVizier,
}

LEARNER_DESCRIPTIONS: dict[str, str] = {
    "uniform": "plays uniformly at random, never learns (1 query)",
    "exp3": "EXP3, Algorithm 2, learning rate from the Lemma (1 query)",
    "exp3_uniform": "EXP3 mixed with uniform exploration, gamma of Auer et al. 2002 (1 query)",
    "stabl": "StABL, Algorithm 1: geometric EXP3 experts + importance query P(t) (2 queries)",
    "stabl_naive": "StABL with the observed arm drawn uniformly ('StABL Naive') (2 queries)",
    "stabl_single_scale": "StABL with one history length, 1024 ('Single Scale') (2 queries)",
    "exp3s": "Exp3.S, Exp3 with weight sharing for switching arms (Auer et al. 2002) (1 query)",
    "exp3_ix": "Exp3-IX, Exp3 with implicit exploration (Neu 2015) (1 query)",
    "sw_ucb": "sliding-window UCB (Garivier & Moulines 2011), deterministic (1 query)",
    "d_ucb": "discounted UCB (Garivier & Moulines 2011), deterministic (1 query)",
    "hedge": "Hedge, full information, eta = sqrt(8 ln n / T) (n queries)",
    "saol_hedge": "SAOL (Daniely et al. 2015) over geometric Hedge experts, full info (n queries)",
    "saol": "SAOL-style bandit: every geometric EXP3 expert queries its own arm (1 + B queries)",
    "stabl_one_query": "StABL observing only the played arm; meta weights get muted (1 query)",
    "stabl_anytime": "StABL, anytime rates set from the time since each restart (2 queries)",
    "stabl_adaptive": "StABL, data-dependent rates (self-confident EXP3, ML-Prod) (2 queries)",
    "stabl_tuned": "StABL again, so a config can run tuned [params] beside the printed (2 queries)",
    "stabl_vizier": "the authors' StABL (Vizier): alternating play/observation trials (1 query)",
    "stabl_vizier_naive": "the authors' StABL with uniform observation trials (1 query)",
    "stabl_vizier_single_scale": "the authors' StABL with one history length, 1024 (1 query)",
    "exp3_vizier": "the authors' EXP3 (Vizier): anytime rate and uniform mix 1/sqrt(1+t) (1 query)",
    "exp3_ix_vizier": "the authors' Exp3-IX (Vizier): step 1, IX gamma 1/sqrt(1+t) (1 query)",
}

ENVS: dict[str, Callable[..., Any]] = {
    "expert_advice": ExpertAdvice,
    "bernoulli": PiecewiseBernoulli,
}

ENV_DESCRIPTIONS: dict[str, str] = {
    "expert_advice": "the paper's piecewise expert advice: U[0,0.5) rewards, +0.5 on the best arm",
    "bernoulli": "Bernoulli losses; the best arm's mean is lower by `gap`, changing per segment",
}


def _lookup(registry: dict[str, Callable[..., Any]], kind: str, name: str) -> Callable[..., Any]:
    try:
        return registry[name]
    except KeyError:
        raise ValueError(f"unknown {kind} {name!r}; choose one of {sorted(registry)}") from None


def make(name: str, **kwargs: Any) -> Any:
    """Construct the learner registered as ``name``.

    Example:
      >>> make("stabl", num_arms=30, horizon=4096).history_lengths
      (64, 128, 256, 512, 1024, 2048, 4096)
    """
    return _lookup(LEARNERS, "learner", name)(**kwargs)


def make_env(name: str, **kwargs: Any) -> Any:
    """Construct the environment registered as ``name``."""
    return _lookup(ENVS, "environment", name)(**kwargs)
