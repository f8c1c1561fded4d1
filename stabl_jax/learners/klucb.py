"""kl-UCB for Bernoulli rewards (Garivier and Cappé, "The KL-UCB algorithm for bounded
stochastic bandits and beyond", COLT 2011, Algorithm 1; Cappé, Garivier, Maillard, Munos and
Stoltz, "Kullback-Leibler upper confidence bounds for optimal sequential allocation", Annals of
Statistics 41(3), 2013): the stationary index policy, deterministic, one query per round,
rewards ``x = 1 - l`` in [0, 1].

Algorithm 1, with ``t`` the plays so far (state ``t``), ``N_a(t)`` those of arm ``a`` (state
``counts``), ``mu-hat_a(t)`` its mean reward (state ``sums / counts``) and ``d`` the
Bernoulli divergence ``kl(p, q) = p log(p/q) + (1-p) log((1-p)/(1-q))``:

1. ``t = 1..K``: play arm ``t`` (here: an untried arm has index ``+inf``, so rounds 1..K play
   arms 0..K-1 in index order);
2. ``t >= K``: play ``A_{t+1} = argmax_a max {q in [0, 1] : N_a(t) d(mu-hat_a(t), q) <=
   log t + c log log t}``, the lowest index on ties.

The inner maximum is :func:`~stabl_jax.learners._detect.klucb_index` (bisection on
``[mu-hat, 1]``, shared with GLR-klUCB), the budget
:func:`~stabl_jax.learners._detect.klucb_exploration` (the ``log log t`` term is taken as 0
where ``log t < 1``, which only matters for ``K <= 2``). ``c`` is a ``Params`` field: the
theorems hold for ``c = 3``; the default is ``c = 0``, the value the papers' simulations use,
and the budget ``log t`` of SMPyBandits' ``klUCB`` (the kl-UCB Besson et al., JMLR 2022,
compare against), so kl-UCB, SW-klUCB and D-klUCB explore alike by default. The algorithm box
could not be read here: the budget ``log t + c log log t`` and the two values of ``c`` are the
papers' as later work cites them; the ``log log`` convention is this code's reading.

Memory: ``8 K + 8`` bytes per run (float32).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks
from stabl_jax.learners import _detect, _ucb


@chex.dataclass(frozen=True)
class KLUCBParams:
    """Sweepable numbers of :class:`KLUCB`.

    Attributes:
      c: ``()`` the ``log log t`` term's constant ``c >= 0`` (0: the papers' simulations; 3:
        their theorems).
    """

    c: jax.Array


@dataclasses.dataclass(frozen=True)
class KLUCB(_ucb.CountingPolicy):
    """kl-UCB (Garivier and Cappé 2011, Algorithm 1) for Bernoulli rewards, one query per round.

    After ``t`` rounds, arm ``a`` played ``N_a`` times with mean reward ``mu-hat_a``
    (rewards ``1 - l``), round ``t + 1`` plays

    ``argmax_a max {q in [mu-hat_a, 1] : N_a kl(mu-hat_a, q) <= log t + c log log t}``

    (``+inf`` at ``N_a = 0``, so each arm is played once first; lowest index on ties). The
    state is a :class:`~stabl_jax.learners._ucb.CountsState`. By Pinsker's inequality its index
    is at most UCB1's at ``explore_scale = 1/2`` for ``c = 0``.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``c``.

    Attributes:
      c: the default of ``Params.c`` (``>= 0``; default 0).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = KLUCB(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> arms = []
      >>> for t in range(4):
      ...     state, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(t))
      ...     arms.append(int(info.arms[0]))
      >>> arms  # each arm once, in index order, then the largest index
      [0, 1, 2, 0]
    """

    c: float = dataclasses.field(default=0.0, compare=False)

    name: ClassVar[str] = "klucb"
    Params: ClassVar[type] = KLUCBParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {"c": checks.Interval(0.0)}

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "c", checks.check_nonnegative("c", self.c))

    def index(self, state: _ucb.CountsState) -> jax.Array:
        """``(num_arms,)`` the kl-UCB indices; ``+inf`` for untried arms."""
        log_t = jnp.log(jnp.maximum(state.t, 1).astype(self.float_dtype))
        budget = _detect.klucb_exploration(log_t, state.params.c)
        return _detect.klucb_index(state.counts, state.sums, budget, eps=0.0)
