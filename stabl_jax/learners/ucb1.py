"""UCB1 (Auer, Cesa-Bianchi and Fischer, "Finite-time analysis of the multiarmed bandit
problem", Machine Learning 47, 2002, Figure 1): the stationary index policy, deterministic, one
query per round, rewards ``x = 1 - l`` in [0, 1].

Figure 1's pseudo-code, with ``n`` the plays so far (state ``t``), ``n_j`` those of arm ``j``
(state ``counts``) and ``x-bar_j`` its mean reward (state ``sums / counts``):

1. Initialisation: play each machine once (here: an untried arm has index ``+inf``, so
   rounds 1..K play arms 0..K-1 in index order);
2. Loop: play the machine ``j`` that maximises ``x-bar_j + sqrt(2 ln n / n_j)``, the
   padding times ``explore_scale`` (1 is the paper), the lowest index on ties.

Memory: ``8 K + 8`` bytes per run (float32).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks
from stabl_jax.learners import _ucb


@chex.dataclass(frozen=True)
class UCB1Params:
    """Sweepable numbers of :class:`UCB1`.

    Attributes:
      explore_scale: ``()`` multiplies the padding ``sqrt(2 ln n / n_j)`` (``>= 0``; 1 is the
        paper, 0 plays the best mean).
    """

    explore_scale: jax.Array


@dataclasses.dataclass(frozen=True)
class UCB1(_ucb.CountingPolicy):
    """UCB1 (Auer et al. 2002, Figure 1), one query per round.

    After ``n`` rounds, arm ``j`` played ``n_j`` times with mean reward ``x-bar_j``
    (rewards ``1 - l``), round ``n + 1`` plays

    ``argmax_j x-bar_j + explore_scale sqrt(2 ln n / n_j)``

    (``+inf`` at ``n_j = 0``, so each arm is played once first; lowest index on ties). The
    state is a :class:`~stabl_jax.learners._ucb.CountsState`. It is D-UCB
    (:class:`~stabl_jax.learners.d_ucb.DUCB`) at ``gamma = 1``, ``xi = 1/2``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = UCB1(num_arms=3, horizon=100)
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> arms = []
      >>> for t in range(4):
      ...     state, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(t))
      ...     arms.append(int(info.arms[0]))
      >>> arms  # each arm once, in index order, then the largest index
      [0, 1, 2, 0]
    """

    name: ClassVar[str] = "ucb1"
    Params: ClassVar[type] = UCB1Params
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {"explore_scale": checks.Interval(0.0)}

    def index(self, state: _ucb.CountsState) -> jax.Array:
        """``(num_arms,)`` ``x-bar_j + explore_scale sqrt(2 ln n / n_j)``; ``+inf`` for untried
        arms."""
        f = self.float_dtype
        log_n = jnp.log(jnp.maximum(state.t, 1).astype(f))  # n >= 1 once any arm was played
        width = state.params.explore_scale * math.sqrt(2.0)
        return _ucb.ucb_index(state.counts.astype(f), state.sums, log_n, width)
