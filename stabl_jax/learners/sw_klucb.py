"""Sliding-window kl-UCB (SW-klUCB): SW-UCB's window (Garivier and Moulines, "On
upper-confidence bound policies for switching bandit problems", ALT 2011, Algorithm 2) read by
the kl-UCB index for Bernoulli rewards (Garivier and Cappé, COLT 2011), the variant Besson,
Kaufmann, Maillard and Seznec compare against ("Efficient change-point detection for tackling
piecewise-stationary bandits", JMLR 23, 2022; SMPyBandits' ``SWklUCB``). Deterministic, one
query per round, rewards ``X = 1 - l`` in [0, 1].

After ``t`` rounds, over the last ``tau`` of them (SW-UCB's symbols):

- ``N_t(tau, i) = sum_{s=t-tau+1}^{t} 1{I_s = i}`` (state ``counts``);
- ``X-bar_t(tau, i) = sum_{s=t-tau+1}^{t} X_s 1{I_s = i} / N_t(tau, i)``;
- ``U_t(tau, i) = max {q in [X-bar_t(tau, i), 1] : N_t(tau, i) kl(X-bar_t(tau, i), q) <=
  explore_scale * log(min(t, tau))}``.

Round ``t + 1`` plays ``argmax_i U_t(tau, i)`` (``+inf`` at ``N_t(tau, i) = 0``, lowest index
on ties). ``explore_scale`` is SMPyBandits' ``c`` (default 1); ``tau`` defaults to SW-UCB's
``floor(2B sqrt(T log T / Upsilon_T))``. The window and its update are
:class:`~stabl_jax.learners.sw_ucb.SlidingWindow`'s, the index
:class:`~stabl_jax.learners._ucb.SwitchingKLUCB`'s. With ``tau = T`` it is kl-UCB
(:class:`~stabl_jax.learners.klucb.KLUCB`) at ``c = 0``.

Memory: ``8 (tau + K) + 8`` bytes per run (float32).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import ClassVar

import chex
import jax

from stabl_jax import checks
from stabl_jax.learners import _ucb
from stabl_jax.learners.sw_ucb import SlidingWindow


@chex.dataclass(frozen=True)
class SWklUCBParams:
    """Sweepable numbers of :class:`SWklUCB`.

    Attributes:
      explore_scale: ``()`` multiplies the exploration term ``log(min(t, tau))`` (``>= 0``;
        1 is SMPyBandits' default).
    """

    explore_scale: jax.Array


@dataclasses.dataclass(frozen=True)
class SWklUCB(SlidingWindow, _ucb.SwitchingKLUCB):
    """Sliding-window kl-UCB (SW-UCB's window, the kl-UCB index), one query per round.

    The state is a :class:`~stabl_jax.learners.sw_ucb.SWUCBState`.

    Traced options (defaults of the ``Params``, no part of the learner's identity: learners
    differing only in them share one compiled program): ``num_changes`` (through the default
    window only). Static: ``window`` (the ring buffer's size).

    Attributes:
      num_changes: ``Upsilon_T``, the breakpoints the default window is tuned for.
      window: ``tau`` in ``[1, horizon]`` (static); ``None`` gives SW-UCB's default.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = SWklUCB(num_arms=3, horizon=400, num_changes=4)
      >>> learner.window  # SW-UCB's default
      48
      >>> state = learner.init(jax.random.key(0))
      >>> step = jax.jit(learner.step)  # one compiled program for every round
      >>> arms = []
      >>> for t in range(4):
      ...     state, info = step(state, jnp.array([0.1, 0.5, 0.9]), jax.random.key(t))
      ...     arms.append(int(info.arms[0]))
      >>> arms  # untried arms first, in index order, then the largest index
      [0, 1, 2, 0]
    """

    name: ClassVar[str] = "sw_klucb"
    Params: ClassVar[type] = SWklUCBParams
    param_bounds: ClassVar[Mapping[str, checks.Interval]] = {"explore_scale": checks.Interval(0.0)}
