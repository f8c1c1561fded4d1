"""Discounted kl-UCB (D-klUCB): D-UCB's discounted statistics (Garivier and Moulines, "On
upper-confidence bound policies for switching bandit problems", ALT 2011, Algorithm 1) read by
the kl-UCB index for Bernoulli rewards (Garivier and Cappé, COLT 2011), the variant Besson,
Kaufmann, Maillard and Seznec compare against ("Efficient change-point detection for tackling
piecewise-stationary bandits", JMLR 23, 2022; SMPyBandits' ``DiscountedklUCB``).
Deterministic, one query per round, rewards ``X = 1 - l`` in [0, 1].

After ``t`` rounds (D-UCB's symbols):

- ``N_t(gamma, i) = sum_{s<=t} gamma^{t-s} 1{I_s = i}`` (state ``counts``);
- ``X-bar_t(gamma, i) = sum_{s<=t} gamma^{t-s} X_s 1{I_s = i} / N_t(gamma, i)``;
- ``n_t(gamma) = sum_i N_t(gamma, i)``;
- ``U_t(gamma, i) = max {q in [X-bar_t(gamma, i), 1] : N_t(gamma, i) kl(X-bar_t(gamma, i), q)
  <= explore_scale * log n_t(gamma)}``.

Round ``t + 1`` plays ``argmax_i U_t(gamma, i)`` (``+inf`` at ``N_t(gamma, i) = 0``, lowest
index on ties). ``explore_scale`` is SMPyBandits' ``c`` (default 1); ``gamma`` defaults to
D-UCB's ``1 - (1/4) sqrt(Upsilon_T / T)``. The statistics and their update are
:class:`~stabl_jax.learners.d_ucb.Discounted`'s, the index
:class:`~stabl_jax.learners._ucb.SwitchingKLUCB`'s. With ``gamma = 1`` it is kl-UCB
(:class:`~stabl_jax.learners.klucb.KLUCB`) at ``c = 0``.

Memory: ``8 K + 12`` bytes per run (float32).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax

from stabl_jax import checks
from stabl_jax.learners import _ucb
from stabl_jax.learners.d_ucb import Discounted


@chex.dataclass(frozen=True)
class DklUCBParams:
    """Sweepable numbers of :class:`DklUCB`.

    Attributes:
      explore_scale: ``()`` multiplies the exploration term ``log n_t(gamma)`` (``>= 0``;
        1 is SMPyBandits' default).
      discount: ``()`` the discount factor ``gamma`` in (0, 1]; 1 is kl-UCB.
    """

    explore_scale: jax.Array
    discount: jax.Array


@dataclasses.dataclass(frozen=True)
class DklUCB(Discounted, _ucb.SwitchingKLUCB):
    """Discounted kl-UCB (D-UCB's statistics, the kl-UCB index), one query per round.

    The state is a :class:`~stabl_jax.learners.d_ucb.DUCBState`.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes``, ``discount``.

    Attributes:
      num_changes: ``Upsilon_T``, the breakpoints the default discount is tuned for.
      discount: default ``gamma`` in (0, 1]; ``None`` gives D-UCB's default.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = DklUCB(num_arms=3, horizon=400, num_changes=4)
      >>> learner.discount  # D-UCB's default
      0.975
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> arms = []
      >>> for t in range(4):
      ...     state, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(t))
      ...     arms.append(int(info.arms[0]))
      >>> arms  # untried arms first, in index order, then the largest index
      [0, 1, 2, 0]
    """

    name: ClassVar[str] = "d_klucb"
    Params: ClassVar[type] = DklUCBParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {
        "explore_scale": checks.Interval(0.0),
        "discount": checks.Interval(0.0, 1.0, low_open=True),
    }
