"""Zeroth-order gradient estimators (``stabl_jax.gradients``): Monte Carlo truths with fixed keys
(``|mean - truth| <= Z SE`` per coordinate, ``SE = std / sqrt(N)``, ``Z = 5``: a false alarm
has probability about 6e-7 under the CLT) and deterministic limits."""

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
    """The mean of ``samples`` ``(N, d)`` is within ``Z`` standard errors of ``truth``; returns
    the standard errors."""
    x = np.asarray(samples, np.float64)
    mean, se = x.mean(axis=0), x.std(axis=0, ddof=1) / np.sqrt(x.shape[0])
    assert np.all(np.abs(mean - truth) <= Z * se), (mean, truth, se)
    return se


LOSSES = {
    "linear": lambda y: jnp.dot(A, y) + 3.0,
    "quadratic": lambda y: jnp.sum((y - C) ** 2),
    "quartic": lambda y: jnp.sum(y * y) ** 2,
}


@jax.jit
def _monte_carlo() -> dict:
    """Every Monte Carlo sample in one program: ``4 N`` directions ``u``, and ``(N, d)``
    estimates at ``X`` from disjoint slices of them (all ``4 N`` for the one-point estimate)."""
    keys = jax.random.split(jax.random.key(42), 4 * N)
    u = jax.vmap(lambda k: gradients.sphere_uniform(k, 3))(keys)

    def two_point(loss, us):
        return jax.vmap(
            lambda v: gradients.two_point_estimate(loss(X + DELTA * v), loss(X), v, DELTA)
        )(us)

    quartic = LOSSES["quartic"]
    return {
        "sphere": u[:N],
        "linear": two_point(LOSSES["linear"], u[:N]),
        "quadratic": two_point(LOSSES["quadratic"], u[N : 2 * N]),
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


def test_smoothing_linear_quadratic_and_quartic_closed_forms():
    """Both estimates are unbiased for ``grad l_hat``, ``l_hat(x) = E_{v ~ U(B)} l(x + delta v)``:
    ``a`` for ``a^T x + b`` (the estimate is ``d u u^T a`` for every ``delta``); ``2 (x - c)``
    for ``||x - c||^2``; ``4 (||x||^2 + delta^2) x`` for ``||x||^4`` (``E||v||^2 = d/(d+2)``,
    ``E (x^T v)^2 = ||x||^2 / (d+2)``), not the gradient ``4 ||x||^2 x``."""
    _assert_mean(samples()["linear"], np.asarray(A))
    x = np.asarray(X, np.float64)
    _assert_mean(samples()["quadratic"], 2.0 * (x - np.asarray(C)))
    smoothed = 4.0 * (float(x @ x) + DELTA**2) * x
    se = _assert_mean(samples()["quartic"], smoothed)
    true_grad = 4.0 * float(x @ x) * x
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
    estimate = lambda d: gradients.two_point_estimate(smooth(X + d * u), smooth(X), u, d)  # noqa: E731
    errors = jax.vmap(lambda d: jnp.linalg.norm(estimate(d) - limit))(deltas)

    def absolute(y):
        return jnp.sum(jnp.abs(y - 0.1))

    wrappers = (
        gradients.one_point_gradient(absolute, X, key, 0.05),
        gradients.one_point_estimate(absolute(X + 0.05 * u), u, 0.05),
        gradients.two_point_gradient(absolute, X, key, 0.05),
        (3 / 0.05) * (absolute(X + 0.05 * u) - absolute(X)) * u,
    )
    sphere_1d, ball = gradients.sphere_uniform(key, 1), gradients.ball_uniform(key, 3)
    return dict(cubic=cubic, errors=errors, wrappers=wrappers, sphere_1d=sphere_1d, ball=ball)


def test_deterministic_limits_and_wrappers():
    """1-D cubic: the two-point estimate over ``u = ±1`` averages to ``3 x^2 + delta^2``, the
    derivative of ``l_hat(x) = x^3 + delta^2 x``; as ``delta -> 0`` it tends to
    ``d (u^T grad l(x)) u`` at rate ``O(delta)``; the estimators equal their wrappers."""
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
