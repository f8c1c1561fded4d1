"""Bernoulli arms whose means drift smoothly: a slowly-varying bandit, with no change points.

Arm ``i``'s mean loss at round ``t`` is the sinusoid

``mu_i(t) = b + A sin(2 pi t / P + phi_i)``,   ``0 <= b - A``, ``b + A <= 1``,

and round ``t``'s losses are independent ``Bernoulli(mu_i(t))`` draws. Every mean moves by at
most ``|mu_i(t + 1) - mu_i(t)| <= 2 pi A / P`` a round: the *slowly-varying* setting of Wei &
Srivatsva ("On abruptly-changing and slowly-varying multiarmed bandit problems", ACC 2018),
whose means change by a bounded amount each round, and a sequence of the variation budget
``V_T = sum_t max_i |mu_i(t + 1) - mu_i(t)| <= 2 pi A T / P`` of Besbes, Gur & Zeevi
("Stochastic multi-armed-bandit problem with non-stationary rewards", NeurIPS 2014), whose
regret is measured against the dynamic oracle ``i*_t = argmin_i mu_i(t)``. Sinusoidal means
are how Besbes et al. illustrate their setting; only the papers' abstracts were read here, so
the form above, the equally spaced phases ``phi_i = 2 pi i / n + u`` (``u ~ U[0, 2 pi)`` per
run: the best arm rotates through all arms once per period, each arm best for ``P / n``
rounds) and the defaults ``b = 0.5``, ``A = 0.3``, ``P = T / 2`` are this library's reading,
not either paper's numbers.

Memory: the params are ``3 + n`` float32 numbers a run; the environment has no state.

Every number (``b``, ``A``, ``P``, the phases) is a traced parameter (:class:`DriftParams`);
the object holds only the shapes, so runs of any amplitude or period share one program.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks, prng
from stabl_jax.envs.base import BanditEnv


@chex.dataclass(frozen=True)
class DriftParams:
    """Per-run parameters of :class:`DriftingBernoulli` (float32).

    Attributes:
      base: ``()`` ``b``, the mean loss the sinusoids oscillate around.
      amplitude: ``()`` ``A``, with ``0 <= b - A`` and ``b + A <= 1``.
      period: ``()`` ``P`` > 0, in rounds.
      phases: ``(num_arms,)`` ``phi_i``, in radians.
    """

    base: jax.Array
    amplitude: jax.Array
    period: jax.Array
    phases: jax.Array


@dataclasses.dataclass(frozen=True)
class DriftingBernoulli(BanditEnv):
    """Bernoulli losses with sinusoidally drifting means ``b + A sin(2 pi t / P + phi_i)``.

    Attributes:
      num_arms: ``n`` (>= 2).
      horizon: ``T`` (>= 2).

    Example:
      >>> env = DriftingBernoulli(num_arms=4, horizon=400)
      >>> params = env.make_params(amplitude=0.5, period=100.0)
      >>> [round(float(x), 3) for x in env.mean_loss(params, 25)]
      [1.0, 0.5, 0.0, 0.5]
      >>> int(env.best_arm(params, 25))
      2
    """

    num_arms: int
    horizon: int

    name = "drifting_bernoulli"
    has_best_arm: ClassVar[bool] = True

    def __post_init__(self) -> None:
        checks.check_int("num_arms", self.num_arms, minimum=2)
        checks.check_horizon(self.horizon, minimum=2)

    def make_params(
        self,
        *,
        base: float = 0.5,
        amplitude: float = 0.3,
        period: float | None = None,
        phase_offset: float = 0.0,
    ) -> DriftParams:
        """Checked parameters with phases ``phi_i = 2 pi i / n + phase_offset``.

        Args:
          base: ``b`` in [0, 1].
          amplitude: ``A >= 0`` with ``b - A >= 0`` and ``b + A <= 1``.
          period: ``P > 0`` rounds; ``None``: ``T / 2``.
          phase_offset: ``u``, added to every phase (radians).

        Returns:
          A :class:`DriftParams` (``simulate(..., env_params=...)`` takes it stacked per run).
        """
        b = checks.check_probability("base", base)
        a = checks.check_positive("amplitude", amplitude, zero=True)
        if b - a < 0.0 or b + a > 1.0:
            raise ValueError(
                f"amplitude={amplitude!r} takes the means b +- A outside [0, 1] around "
                f"base={base!r}: pass amplitude <= {min(b, 1.0 - b):.6g}"
            )
        p = checks.check_positive("period", self.horizon / 2 if period is None else period)
        u = checks.check_real("phase_offset", phase_offset)
        if not math.isfinite(u):
            raise ValueError(f"phase_offset must be a finite number of radians, got {u!r}")
        spaced = 2.0 * math.pi * jnp.arange(self.num_arms, dtype=jnp.float32) / self.num_arms
        return DriftParams(
            base=jnp.float32(b),
            amplitude=jnp.float32(a),
            period=jnp.float32(p),
            phases=spaced + jnp.float32(u),
        )

    @property
    def default_params(self) -> DriftParams:
        """``b = 0.5``, ``A = 0.3``, ``P = T / 2``, phases ``2 pi i / n``."""
        return self.make_params()

    def sample_params(self, key: jax.Array) -> DriftParams:
        """:attr:`default_params` with every phase shifted by one ``u ~ U[0, 2 pi)`` per run."""
        params = self.default_params
        offset = jax.random.uniform(jax.random.fold_in(key, 0), (), jnp.float32, 0.0, 2 * math.pi)
        return dataclasses.replace(params, phases=params.phases + offset)

    def mean_at(self, params: DriftParams, t: jax.Array, arms: jax.Array) -> jax.Array:
        """``mu_i(t)`` of ``arms`` only (int32, any shape), float32.

        The angle is ``2 pi frac(t / P) + phi_i``: the fractional part keeps it in float32's
        precise range at any ``t``.
        """
        cycles = jnp.asarray(t, jnp.float32) / params.period
        angle = 2 * math.pi * (cycles - jnp.floor(cycles)) + params.phases[arms]
        return params.base + params.amplitude * jnp.sin(angle)

    def mean_loss(self, params: DriftParams, t: jax.Array) -> jax.Array:
        """``(num_arms,)`` the expected losses ``mu(t)`` of round ``t``."""
        return self.mean_at(params, t, jnp.arange(self.num_arms, dtype=jnp.int32))

    def best_arm(self, params: DriftParams, t: jax.Array) -> jax.Array:
        """``()`` int32 ``argmin_i mu_i(t)`` (the smallest index on a tie)."""
        return jnp.argmin(self.mean_loss(params, t)).astype(jnp.int32)

    def loss(self, params: DriftParams, t: jax.Array, key: jax.Array) -> jax.Array:
        """``(num_arms,)`` float32 ``1[U_i < mu_i(t)]``, ``U = uniform(key, (n,))``."""
        draws = prng.uniform(key, self.num_arms) < self.mean_loss(params, t)
        return draws.astype(jnp.float32)

    def loss_at(
        self, params: DriftParams, t: jax.Array, key: jax.Array, arms: jax.Array
    ) -> jax.Array:
        """``loss(params, t, key)[arms]`` bit for bit, drawing and evaluating only ``arms``."""
        draws = prng.uniform_at(key, self.num_arms, arms) < self.mean_at(params, t, arms)
        return draws.astype(jnp.float32)
