"""Convex domains (``stabl_jax.domains``): geometry constants, projections (optimality by the
variational inequality), the shrunk set ``K_hat`` and its feasibility guarantee, support
functions and sampling."""

from __future__ import annotations

import dataclasses
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax.domains import Ball, Box, Domain, L1Ball, make_domain, paper_shrinkage

DOMAINS = {
    "ball": Ball(dim=3, radius=0.5),
    "box": Box(dim=3, half_width=2.0),
    "l1_ball": L1Ball(dim=3, radius=1.5),
}


def test_geometry_constants():
    ball, box, l1 = DOMAINS["ball"], DOMAINS["box"], DOMAINS["l1_ball"]
    assert (ball.r, ball.D, ball.kappa) == (0.5, 0.5, 1.0)
    assert box.r == 2.0 and math.isclose(box.D, 2.0 * math.sqrt(3))
    assert math.isclose(box.kappa, math.sqrt(3))
    assert math.isclose(l1.r, 1.5 / math.sqrt(3)) and l1.D == 1.5
    assert hash(make_domain("ball", 3, 0.5)) == hash(ball)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ball.radius = 2.0
    with pytest.raises(ValueError):
        make_domain("simplex", dim=2)


def _inputs(dim: int, scale: float) -> dict:
    """Host-side random inputs (NumPy, fixed seed): far points, directions, unit vectors."""
    rng = np.random.default_rng(0)
    us = rng.normal(size=(64, dim))
    return {
        "far": jnp.asarray(3.0 * scale * rng.normal(size=(64, dim)), jnp.float32),
        "dirs": jnp.asarray(rng.normal(size=(64, dim)), jnp.float32),
        "us": jnp.asarray(us / np.linalg.norm(us, axis=1, keepdims=True), jnp.float32),
        "keys": jax.random.split(jax.random.key(0), 64),
    }


@partial(jax.jit, static_argnums=0)
def _checks(domain, inputs):
    """Everything the domain tests need, in one compiled program per domain."""
    far, dirs, us = inputs["far"], inputs["dirs"], inputs["us"]
    inside = jax.vmap(domain.sample_interior)(inputs["keys"])
    proj = jax.vmap(domain.project)(far)
    # Variational inequality: (x - P(x))^T (y - P(x)) <= 0 for every y in K.
    vi = jnp.einsum("nd,nd->n", far - proj, inside - proj)
    support = jax.vmap(domain.support)(dirs)
    best_sampled = jnp.max(dirs @ inside.T, axis=1)
    # Shrunk set: projections onto (1 - alpha) K by scaling and by the shrunk domain.
    alpha = 0.3
    shrunk_proj = jax.vmap(lambda x: domain.project_shrunk(x, alpha))(far)
    shrunk = domain.shrunk(alpha)
    # Feasibility of K_hat: points of K_hat on its boundary, perturbed by delta u.
    delta = jnp.asarray([0.05, 0.2, 0.6]) * domain.r
    alphas = paper_shrinkage(delta, domain.r, domain.kappa)
    shrink_all = jax.vmap(lambda a: jax.vmap(lambda x: domain.project_shrunk(x, a))(far))
    hat_points = shrink_all(alphas)  # (3, 64, d)
    perturbed = hat_points + delta[:, None, None] * us[None]
    contains = jax.vmap(domain.contains)
    return {
        "proj": proj, "inside": inside, "vi": vi, "inside_proj": jax.vmap(domain.project)(inside),
        "proj_in": contains(proj), "inside_in": contains(inside), "support": support,
        "best_sampled": best_sampled, "shrunk_proj": shrunk_proj, "dirs": dirs,
        "shrunk_domain_proj": jax.vmap(shrunk.project)(far),
        "shrunk_proj_in": jax.vmap(shrunk.contains)(shrunk_proj),
        "perturbed_in": jax.vmap(contains)(perturbed),
        "zero_scale": domain.project_scaled(far[0], 0.0),
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_projection_support_sampling_and_shrinkage(name):
    domain = DOMAINS[name]
    out = jax.device_get(_checks(domain, _inputs(domain.dim, domain.D)))
    assert out["proj_in"].all() and out["inside_in"].all()
    # Points outside land on the boundary; points inside do not move.
    np.testing.assert_allclose(out["inside_proj"], out["inside"], atol=1e-6)
    assert np.all(out["vi"] <= 1e-4 * domain.D**2), out["vi"].max()
    # Support function: an upper bound on every sample, attained at a vertex / boundary point.
    assert np.all(out["support"] >= out["best_sampled"] - 1e-5)
    v = out["dirs"][0]
    if name == "ball":
        attained = domain.radius * np.linalg.norm(v)
    elif name == "box":
        attained = v @ (domain.half_width * np.sign(v))
    else:
        attained = domain.radius * np.abs(v).max()
    np.testing.assert_allclose(out["support"][0], attained, rtol=1e-5)
    # Projection onto (1 - alpha) K (scaled radius, traced alpha) equals the shrunk domain's.
    np.testing.assert_allclose(out["shrunk_proj"], out["shrunk_domain_proj"], atol=1e-5)
    assert out["shrunk_proj_in"].all()
    # K_hat = (1 - alpha) K with alpha = max(kappa delta, delta / r): x + delta u stays in K.
    assert out["perturbed_in"].all()
    np.testing.assert_array_equal(out["zero_scale"], 0.0)


def test_paper_shrinkage_needs_the_delta_over_r_floor_when_d_is_small():
    """Algorithm 4's ``K_hat = (1 - kappa delta) K`` is infeasible when ``D < 1`` (ball of radius
    0.5, ``delta = 0.1``: ``0.45 + 0.1 > 0.5``); ``max(kappa delta, delta / r) = 0.2`` is not."""
    ball, delta = Ball(dim=2, radius=0.5), 0.1
    assert (1 - ball.kappa * delta) * ball.radius + delta > ball.radius
    alpha = float(paper_shrinkage(delta, ball.r, ball.kappa))
    assert math.isclose(alpha, 0.2, rel_tol=1e-6)
    assert (1 - alpha) * ball.radius + delta <= ball.radius + 1e-7
    # With D >= 1 it is exactly the paper's kappa delta.
    box = Box(dim=4, half_width=1.0)
    alpha = float(paper_shrinkage(0.01, box.r, box.kappa))
    assert math.isclose(alpha, box.kappa * 0.01, rel_tol=1e-6)


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_the_base_checks_shrinks_and_builds_by_the_size_field(name):
    domain = DOMAINS[name]
    size = getattr(domain, domain.size_field)
    assert getattr(domain.shrunk(0.25), domain.size_field) == 0.75 * size
    for alpha in (-0.5, 1.0, math.nan):  # -0.5 grew the domain by half
        with pytest.raises(ValueError, match=rf"alpha must be in \[0, 1\), got {alpha}"):
            domain.shrunk(alpha)
    assert make_domain(name, 3, 0.5) == dataclasses.replace(domain, **{domain.size_field: 0.5})
    with pytest.raises(ValueError, match=f"{domain.size_field} must be a finite number > 0"):
        type(domain)(dim=3, **{domain.size_field: -1.0})
    for text_or_bool in ("1", True):  # float() would read both as 1.0
        with pytest.raises(TypeError, match=f"{domain.size_field} must be a real number"):
            type(domain)(dim=3, **{domain.size_field: text_or_bool})


def test_a_domain_without_a_size_field_says_how_to_shrink_it():
    @dataclasses.dataclass(frozen=True)
    class Simplex(Domain):  # no size field
        name = "simplex"

    with pytest.raises(NotImplementedError, match="names no size_field"):
        Simplex(dim=2).shrunk(0.5)
