"""Adaptive StABL: Algorithm 1 of Lu et al. ("Adaptive Regret for Bandits Made Possible: Two
Queries Suffice", ICLR 2024) with *data-dependent* step sizes, two queries per round, no tuned
constant.

:class:`~stabl_jax.learners.stabl_anytime.StABLAnytime` sets every rate from ``tau_k + 1``, the
rounds since expert ``k``'s restart, times the Lemma's worst-case per-round variance bound
(``n C`` for the experts, ``n`` for the meta-learner). This variant keeps everything else of
anytime StABL (the observation distribution ``P(t)`` over the ``B_t`` active experts, the
restarts, ML-Prod's pseudo-weights, the powers ``rate(t+1) / rate(t)``) and replaces the
worst-case bound by the second moment *observed* since the restart:

==============================  =================================================================
anytime                         adaptive
==============================  =================================================================
expert rate                     ``eta'_k(t) = sqrt(ln n / (1 + V_k(t)))``,
``sqrt(ln n / ((tau+1) n C))``  ``V_k(t) = sum_{s<t} sum_i v(s,k)_i l_hat_s(i)^2
                                = sum_{s<t} v(s,k)_{x'_s} l_hat_s(x'_s)^2`` (sum since the
                                restart; ``g_hat`` for rewards). The self-confident rate of
                                exponential weights: the anytime bound ``ln n / eta'_T + (1/2)
                                sum_t eta'_t sum_i v_i l_hat_i^2`` (Bubeck & Cesa-Bianchi 2012,
                                Thm 3.1 proof, ``l_hat >= 0``) with ``sum_t a_t / sqrt(sum_{s<=t}
                                a_s) <= 2 sqrt(V_T)`` (Auer, Cesa-Bianchi & Gentile 2002, Lemma
                                3.5) is minimised by numerator ``ln n`` (no factor 2); the ``1 +``
                                is theirs (losses in [0, 1]: ``1 + L*``), keeping ``eta'`` finite
                                before the first observation.
meta rate                       ML-Prod with per-expert adaptive rates (Gaillard, Stoltz & van
``min(1/(2 sqrt n),             Erven, COLT 2014, Thm 3 / eq. (7)) on the normalised regrets
1/sqrt(n (tau+1)))``            ``r~ / E_t``, ``E_t = 2 B_t``: ``eta_k(t) = min(1/(2 E_t),
                                1/sqrt(E_t^2 + R_k(t)))``, ``R_k(t) = sum_{s<t} r~_s(k)^2`` since
                                the restart. ML-Prod's ``min(1/2, sqrt(ln K / (1 + sum r^2)))``
                                with ``ln K -> 1``: pseudo-weights restart at 1 (not ``1/K``) and
                                StABL's line 6 has numerator 1 for the same reason.
==============================  =================================================================

Range and muting. ``P(t)_i >= sum_{j in A_t} v(t,j)_i / (2 B_t)`` (line 9) and ``mix``, ``v(t,k)``
are both at most that sum, so ``|r~_t(k)| <= 2 B_t l(x'_t) <= E_t``: the cap ``eta <= 1/(2 E_t)``
(ML-Prod's ``eta <= 1/2``) gives ``1 + eta r~ >= 1/2``, so at ``meta_lr_scale <= 1`` no expert is
ever muted and every pseudo-weight stays finite (``state.num_muted`` still counts events at
larger scales). Both rates are non-increasing between restarts (``V``, ``R`` and ``B_t`` only
grow), which ML-Prod's and the anytime EXP3 analysis need; the powers are therefore ``<= 1``.

What the analysis does not cover (stated, not fixed). ACG's lemma is for ``sum_{s<=t}``; a
rate set before the round sees ``sum_{s<t}``, and the ``1 +`` closes that lag only when every
increment ``a_t = v(t,k)_{x'} l_hat(x')^2 <= 1``. Importance-weighted increments are not bounded
by 1 (``a_t <= 4 B_t^2 l^2 / v(t,k)_{x'}``), so the experts' self-confident bound is a heuristic
here, not a theorem; ML-Prod's meta bound holds as stated (its increments are normalised by
``E_t``). Reward feedback inherits StABL's convention (``exp(+eta' g_hat)`` with unbounded
``g_hat``), for which the second-order step of the exponential-weights bound fails as well.

The data-dependent sums are computed from the same one-sparse estimate that drives the updates:
``V_k`` and ``R_k`` see only the observed arm ``x'_t`` (two queries per round, as StABL). Every
expert that has not restarted has seen the same data with the same rates, so the inactive
copies of :class:`~stabl_jax.learners.stabl_anytime.StABLAnytime` stay exact copies here.

Shapes: ``V``, ``R``, ``eta``, ``eta'``: ``(B,)``; experts ``(B, n)``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax.learners.stabl_anytime import StABLAnytime, StABLAnytimeParams

#: Sweepable numbers (1 by default: nothing is tuned), as anytime StABL's.
StABLAdaptiveParams = StABLAnytimeParams


@chex.dataclass(frozen=True)
class StABLAdaptiveState:
    t: jax.Array  # () int32, rounds played so far
    expert_log_probs: jax.Array  # (B, num_arms) float, log v(t, k), each row normalised
    meta_log_pseudo: jax.Array  # (B,) float, log w~_t(k) (ML-Prod pseudo-weight); -inf = muted
    expert_second_moment: jax.Array  # (B,) float, V_k(t) since the restart
    meta_second_moment: jax.Array  # (B,) float, R_k(t) = sum r~^2 since the restart
    num_muted: jax.Array  # () int32, active experts' updates with 1 + eta r~ <= 0 so far
    params: StABLAnytimeParams


@dataclasses.dataclass(frozen=True)
class StABLAdaptive(StABLAnytime):
    """StABL with data-dependent step sizes (module docstring): two queries per round.

    Per round ``t``, with ``A_t``, ``B_t`` and ``P(t)`` as in
    :class:`~stabl_jax.learners.stabl_anytime.StABLAnytime` and ``E_t = 2 B_t``:

    - rates ``eta'_k(t) = sqrt(ln n / (1 + V_k))``, ``eta_k(t) = min(1/(2 E_t),
      1/sqrt(E_t^2 + R_k))`` (each times its scale);
    - (8-11) ``p(t)_k ∝ eta_k(t) w~_t(k)`` on ``A_t``, ``x_t ~ mix`` played, ``x'_t ~ P(t)``
      observed, ``l_hat`` as StABL;
    - (12) ``log v <- a'_k (log v - eta'_k(t) l_hat)`` normalised, ``a'_k = eta'_k(t+1) /
      eta'_k(t)``, after ``V_k += v(t,k)_{x'} l_hat(x')^2``;
    - (13) ``r~_t(k) = l_hat^T mix - l_hat^T v(t,k)``; ``log w~ <- a_k (log w~ + log(1 +
      eta_k(t) r~))``, ``a_k = eta_k(t+1) / eta_k(t)`` after ``R_k += r~^2``;
    - restarts at ``(t + 1) % L_k == 0``: ``v = 1/n``, ``w~ = 1``, ``V = R = 0``.

    Attributes are :class:`~stabl_jax.learners.stabl_anytime.StABLAnytime`'s.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> learner = StABLAdaptive(num_arms=5, horizon=64)
      >>> state = learner.init(jax.random.key(0))
      >>> [round(float(x), 4) for x in learner.rates(state)[0]]  # sqrt(ln 5), V = 0
      [1.2686, 1.2686]
      >>> state, info = learner.step(state, jnp.linspace(0, 1, 5), jax.random.key(1))
      >>> info.arms.shape, int(state.num_muted)
      ((2,), 0)
    """

    name: ClassVar[str] = "stabl_adaptive"

    def smallest_base_meta_step_size(self) -> float:
        """A lower bound of every meta rate any round can use, for the ensemble's underflow
        check: ``min(1/(2 E), 1/(E sqrt m))`` with ``E = 2 B`` (the largest ``E_t``) and ``m =
        min(L_B, T)``. The rates depend on the observed regrets, but ``|r~_s(k)| <= E_s <= E``
        (module docstring) and ``R_k(t)`` sums at most ``m - 1`` of them since the restart, so
        ``E_t^2 + R_k(t) <= m E^2``. Realised rates are larger (the worst case needs every
        regret at its bound), so the check refuses scales a few times above the smallest that
        would run finite; such scales (below 4e-34 up to T = 2^20) are not tuning values."""
        e = 2.0 * self.num_experts
        return min(0.5 / e, 1.0 / (e * math.sqrt(self._longest_block())))

    # --- data-dependent rates ---------------------------------------------------------------
    def _expert_rate_from(self, second_moment: jax.Array) -> jax.Array:
        """``(B,)`` ``sqrt(ln n / (1 + V))``, before scaling."""
        return math.sqrt(math.log(self.num_arms)) * jax.lax.rsqrt(1.0 + second_moment)

    def _meta_rate_from(self, second_moment: jax.Array, t: jax.Array) -> jax.Array:
        """``(B,)`` ``min(1/(2 E_t), 1/sqrt(E_t^2 + R))``, ``E_t = 2 B_t``, before scaling."""
        e = 2.0 * jnp.sum(self.active(t)).astype(self.float_dtype)
        return jnp.minimum(0.5 / e, jax.lax.rsqrt(e * e + second_moment))

    def rates(self, state: StABLAdaptiveState) -> tuple[jax.Array, jax.Array]:
        """``(eta', eta)``, each ``(B,)``: the scaled expert and meta rates of round ``state.t``."""
        p = state.params
        expert = p.expert_lr_scale * self._expert_rate_from(state.expert_second_moment)
        meta = p.meta_lr_scale * self._meta_rate_from(state.meta_second_moment, state.t)
        return expert, meta

    # --- the contract -----------------------------------------------------------------------
    def _init(self, key: jax.Array, params: StABLAnytimeParams) -> StABLAdaptiveState:
        zeros = jnp.zeros((self.num_experts,), self.float_dtype)
        return StABLAdaptiveState(
            **super()._init(key, params),
            expert_second_moment=zeros,
            meta_second_moment=zeros,
        )

    def meta_rates(self, state: StABLAdaptiveState) -> jax.Array:
        """``(B,)`` the data-dependent meta rates of :meth:`rates` (used by the inherited
        :meth:`~stabl_jax.learners.stabl_anytime.StABLAnytime.distributions`)."""
        return self.rates(state)[1]

    def _round_rates(
        self, state: Any, v_at_arm: jax.Array, value: jax.Array, regret_gain: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        """The rates of :meth:`rates` at the sums before the round; the powers from the sums
        after it, ``V_k += v(t,k)_{x'} l_hat(x')^2`` and ``R_k += r~_t(k)^2`` (self-confident
        EXP3 and ML-Prod), which are returned as the new sums."""
        t, t_next = state.t, state.t + 1
        expert_rate, eta = self.rates(state)
        meta_moment = state.meta_second_moment + regret_gain * regret_gain
        base = self._meta_rate_from(state.meta_second_moment, t)
        meta_power = self._meta_rate_from(meta_moment, t_next) / base
        old = state.expert_second_moment
        expert_moment = old + v_at_arm * value * value
        expert_power = self._expert_rate_from(expert_moment) / self._expert_rate_from(old)
        sums = {"expert_second_moment": expert_moment, "meta_second_moment": meta_moment}
        return expert_rate, expert_power, eta, meta_power, sums
