"""Zeroth-order gradient estimators (``stabl_jax.gradients``): Monte Carlo truths with fixed keys
and deterministic limits.

Tolerance of every Monte Carlo check: ``|mean - truth| <= Z * SE`` per coordinate with
``SE = sample std / sqrt(N)`` and ``Z = 5``. Under the central limit theorem a correct
estimator fails this with probability about ``6e-7`` per coordinate, so a failure means bias,
not bad luck; the keys are fixed, so the outcome is reproducible.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import gradients

Z = 5.0
N = 20000
DELTA = 0.5
X = jnp.array([0.4, -0.2, 0.3])
A = jnp.array([0.5, -1.0, 2.0])
C = jnp.array([-0.1, 0.3, 0.2])


def _assert_mean(samples, truth) -> np.ndarray:
    """Assert the Monte Carlo mean of ``samples`` ``(N, d)`` is within ``Z`` standard errors
    of ``truth``; returns the standard errors."""
    x = np.asarray(samples, np.float64)
    mean, se = x.mean(axis=0), x.std(axis=0, ddof=1) / np.sqrt(x.shape[0])
    assert np.all(np.abs(mean - truth) <= Z * se), (mean, truth, se)
    return se


def linear(y):
    return jnp.dot(A, y) + 3.0


def quadratic(y):
    return jnp.sum((y - C) ** 2)


def quartic(y):
    return jnp.sum(y * y) ** 2


@jax.jit
def _monte_carlo() -> dict:
    """Every Monte Carlo sample of this module in one compiled program: ``4 N`` directions
    ``u`` from :func:`gradients.sphere_uniform` and ``(N, d)`` estimates at ``X`` built from
    disjoint slices of them (all ``4 N`` for the one-point estimate, whose variance is
    larger)."""
    keys = jax.random.split(jax.random.key(42), 4 * N)
    u = jax.vmap(lambda k: gradients.sphere_uniform(k, 3))(keys)

    def two_point(loss, us):
        return jax.vmap(
            lambda v: gradients.two_point_estimate(loss(X + DELTA * v), loss(X), v, DELTA)
        )(us)

    return {
        "sphere": u[:N],
        "linear": two_point(linear, u[:N]),
        "quadratic": two_point(quadratic, u[N : 2 * N]),
        "quartic": two_point(quartic, u[2 * N : 3 * N]),
        "quartic_one_point": jax.vmap(
            lambda v: gradients.one_point_estimate(quartic(X + DELTA * v), v, DELTA)
        )(u),
    }


@functools.cache
def samples() -> dict:
    return jax.device_get(_monte_carlo())


def test_sphere_uniform_is_unit_centred_and_isotropic():
    u = samples()["sphere"]
    np.testing.assert_allclose(np.linalg.norm(u, axis=1), 1.0, rtol=1e-5)
    _assert_mean(u, np.zeros(3))
    # E[u u^T] = I / d: the diagonal second moments and one off-diagonal product.
    _assert_mean(u**2, np.full(3, 1.0 / 3.0))
    _assert_mean(u[:, :1] * u[:, 1:2], np.zeros(1))


def test_two_point_is_unbiased_for_a_linear_loss():
    """For ``l(x) = a^T x + b`` the estimate is ``d u u^T a`` for every ``delta``: mean ``a``."""
    _assert_mean(samples()["linear"], np.asarray(A))


def test_smoothing_quadratic_and_quartic_closed_forms():
    """Two-point and one-point estimates are unbiased for ``grad l_hat`` of the smoothed loss
    ``l_hat(x) = E_{v ~ U(B)} l(x + delta v)``:

    - quadratic ``||x - c||^2``: smoothing adds a constant, ``grad l_hat = 2 (x - c)``;
    - quartic ``||x||^4``: ``l_hat = ||x||^4 + 2 delta^2 ||x||^2 + const`` (with
      ``E||v||^2 = d/(d+2)``, ``E (x^T v)^2 = ||x||^2 / (d+2)``), so
      ``grad l_hat = 4 (||x||^2 + delta^2) x`` — not the true gradient ``4 ||x||^2 x``.
    """
    x = np.asarray(X, np.float64)
    _assert_mean(samples()["quadratic"], 2.0 * (x - np.asarray(C)))
    sq = float(x @ x)
    smoothed = 4.0 * (sq + DELTA**2) * x
    se = _assert_mean(samples()["quartic"], smoothed)
    true_grad = 4.0 * sq * x
    assert np.any(np.abs(smoothed - true_grad) > 2 * Z * se)  # the test can tell them apart
    # FKM's one-point estimate has the same mean (Stokes' theorem; E[u] = 0), larger variance.
    _assert_mean(samples()["quartic_one_point"], smoothed)


@jax.jit
def _deterministic_cases(deltas: jax.Array) -> dict:
    def cube(y):
        return y[0] ** 3

    x1 = jnp.array([0.7])
    cubic = jax.vmap(lambda u: gradients.two_point_estimate(cube(x1 + 0.2 * u), cube(x1), u, 0.2))(
        jnp.array([[1.0], [-1.0]])
    )

    def smooth(y):
        return jnp.sum(jnp.sin(y)) + jnp.sum(y**2) ** 1.5

    key = jax.random.key(5)
    u = gradients.sphere_uniform(key, 3)
    limit = 3 * jnp.dot(u, jax.grad(smooth)(X)) * u
    errors = jax.vmap(
        lambda d: jnp.linalg.norm(
            gradients.two_point_estimate(smooth(X + d * u), smooth(X), u, d) - limit
        )
    )(deltas)

    def absolute(y):
        return jnp.sum(jnp.abs(y - 0.1))

    wrappers = (
        gradients.one_point_gradient(absolute, X, key, 0.05),
        gradients.one_point_estimate(absolute(X + 0.05 * u), u, 0.05),
        gradients.two_point_gradient(absolute, X, key, 0.05),
        (3 / 0.05) * (absolute(X + 0.05 * u) - absolute(X)) * u,
    )
    return {
        "cubic": cubic,
        "errors": errors,
        "wrappers": wrappers,
        "sphere_1d": gradients.sphere_uniform(key, 1),
        "ball": gradients.ball_uniform(key, 3),
    }


def test_deterministic_limits_and_wrappers():
    """- 1-D cubic, exactly: the sphere is ``{-1, +1}`` and the mean over both directions of
      the two-point estimate of ``x^3`` is ``((x+delta)^3 - (x-delta)^3) / (2 delta) =
      3 x^2 + delta^2``, the derivative of ``l_hat(x) = x^3 + delta^2 x`` (``E v^2 = 1/3``).
    - ``delta -> 0``: for a fixed direction ``(d/delta)(l(x + delta u) - l(x)) u ->
      d (u^T grad l(x)) u`` at rate ``O(delta)``; averaged over ``u`` (``E[d u u^T] = I``)
      that is the true gradient.
    - the value-based estimators equal the wrappers that draw ``u`` and evaluate the loss;
      a 1-D direction is ``±1``; ``ball_uniform`` stays in the unit ball.
    """
    out = jax.device_get(_deterministic_cases(jnp.array([1e-1, 1e-2, 1e-3])))
    np.testing.assert_allclose(out["cubic"].mean(), 3 * 0.7**2 + 0.2**2, rtol=1e-5)
    errors = out["errors"]
    assert errors[0] > errors[1] > errors[2], errors
    assert errors[2] < 5e-3 and errors[1] < 0.2 * errors[0], errors
    one_w, one_v, two_w, two_v = out["wrappers"]
    np.testing.assert_allclose(one_w, one_v, rtol=1e-6)
    np.testing.assert_allclose(two_w, two_v, rtol=1e-5)
    assert abs(float(out["sphere_1d"][0])) == 1.0
    assert float(np.linalg.norm(out["ball"])) <= 1.0
