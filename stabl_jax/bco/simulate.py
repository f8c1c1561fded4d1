"""Strongly adaptive regret of BCO learners (Section 2 and Section 5 of Lu et al., ICLR 2024;
Algorithms 3-4): the window comparators; the simulation is :func:`stabl_jax.simulate.simulate`.

For each window length ``L`` (:func:`bco_adaptive_regret`),

``SA(L) = max_{j ∈ J_L} [ sum_{t=j}^{j+L-1} l_t(x_t) - min_{x ∈ K} sum_{t=j}^{j+L-1} l_t(x) ]``

with ``J_L = {0, s, 2s, ...} ∪ {T - L}``, ``s = stride`` (``stride=1``: the paper's every
window). The comparator is the environment's own ``window_minimum`` where it has one, else
:func:`minimize_window`; each comes with a Frank-Wolfe certificate
``gap = g^T x - min_{y ∈ K} g^T y >= f(x) - f*``, so the exact ``SA`` lies in
``[SA, SA + max gap]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, metrics
from stabl_jax.domains import Domain
from stabl_jax.simulate import RunCarry, SimResult


@partial(jax.jit, static_argnames=("env", "horizon"))
def regenerate_thetas(env: Any, env_params: Any, env_keys: jax.Array, horizon: int) -> jax.Array:
    """``(R, T, p)`` every round's ``theta_t`` for stacked runs, regenerated from the pure
    environment (identical to what the learners faced)."""
    ts = jnp.arange(horizon, dtype=jnp.int32)

    def one_run(p: Any, k: jax.Array) -> jax.Array:
        return jax.vmap(lambda t: env.theta(p, t, jax.random.fold_in(k, t)))(ts)

    return jax.vmap(one_run)(env_params, env_keys)


def frank_wolfe_gap(grad: jax.Array, x: jax.Array, domain: Domain) -> jax.Array:
    """``()`` ``g^T x - min_{y ∈ K} g^T y``: for a subgradient ``g`` of a convex ``f`` at
    ``x ∈ K`` it bounds ``f(x) - min_K f`` from above."""
    return jnp.maximum(jnp.dot(grad, x) + domain.support(-grad), 0.0)


def minimize_window(
    family: Callable[[jax.Array, jax.Array], jax.Array],
    thetas: jax.Array,
    domain: Domain,
    lipschitz: float | jax.Array,
    smoothness: float | None = None,
    num_steps: int = 1000,
) -> tuple[jax.Array, jax.Array]:
    """``min_{x ∈ K} sum_t family(theta_t, x)`` for one window ``thetas`` ``(L, p)``.

    From ``K``'s centre: projected gradient descent with step ``1 / beta`` if ``f`` is
    ``beta``-smooth, else projected subgradient steps ``2D / (G sqrt(i + 1))``, best iterate kept.

    Returns:
      ``(x, value)``: ``(d,)`` the best point and ``()`` the window *sum* there.
    """
    length = thetas.shape[0]

    def mean_loss(x: jax.Array) -> jax.Array:
        return jnp.mean(jax.vmap(family, in_axes=(0, None))(thetas, x))

    value_and_grad = jax.value_and_grad(mean_loss)
    x0 = domain.center(thetas.dtype)
    f0 = mean_loss(x0)

    def body(carry: tuple, i: jax.Array) -> tuple[tuple, None]:
        x, best_x, best_f = carry
        f, g = value_and_grad(x)
        better = f < best_f
        best_x = jnp.where(better, x, best_x)
        best_f = jnp.minimum(f, best_f)
        step: float | jax.Array
        if smoothness is not None:
            step = 1.0 / smoothness
        else:
            step = domain.diameter / (lipschitz * jnp.sqrt(i + 1.0))
        return (domain.project(x - step * g), best_x, best_f), None

    steps = jnp.arange(num_steps, dtype=thetas.dtype)
    (x, best_x, best_f), _ = jax.lax.scan(body, (x0, x0, f0), steps)
    f_last = mean_loss(x)
    best_x = jnp.where(f_last < best_f, x, best_x)
    return best_x, length * jnp.minimum(f_last, best_f)


@partial(jax.jit, static_argnames=("env", "domain", "length", "num_steps"))
def window_comparators(
    env: Any,
    domain: Domain,
    thetas: jax.Array,
    lipschitz: jax.Array,
    starts: jax.Array,
    length: int,
    num_steps: int = 1000,
) -> tuple[jax.Array, jax.Array]:
    """Comparator values and Frank-Wolfe gaps ``(R, W)`` of the windows
    ``[starts_w, starts_w + length)`` of ``thetas`` ``(R, T, p)``; ``lipschitz`` ``(R,)`` is
    each run's ``G`` (``env_params.lipschitz``), the step sizes of :func:`minimize_window`."""

    def one(th: jax.Array, g: jax.Array, s: jax.Array) -> tuple[jax.Array, jax.Array]:
        window = jax.lax.dynamic_slice_in_dim(th, s, length, axis=0)
        if getattr(env, "exact_windows", False):
            x, value = env.window_minimum(window)
            grad = env.window_subgradient(window, x)
        else:
            x, value = minimize_window(env.family, window, domain, g, env.smoothness, num_steps)
            family = jax.vmap(env.family, in_axes=(0, None))
            grad = jax.grad(lambda y: jnp.sum(family(window, y)))(x)
        return value, frank_wolfe_gap(grad, x, domain)

    per_run = jax.vmap(one, in_axes=(None, None, 0))
    return jax.vmap(per_run, in_axes=(0, 0, None))(thetas, lipschitz, starts)


def window_starts(horizon: int, length: int, stride: int | None = None) -> np.ndarray:
    """``{0, stride, 2 stride, ...} ∪ {T - L}``: window starts of :func:`bco_adaptive_regret`
    (``stride`` ``None``: ``max(1, L // 4)``, the default grid)."""
    metrics.check_windows((length,), horizon)
    if stride is None:
        stride = max(1, length // 4)
    starts = np.arange(0, horizon - length + 1, stride)
    if starts[-1] != horizon - length:
        starts = np.append(starts, horizon - length)
    return starts.astype(np.int32)


#: The most memory a block of window comparators may take (:func:`sa_run_bytes` a run):
#: :func:`sa_runs_per_block` cuts a block to it.
SA_BLOCK_MAX_BYTES = 4 * metrics.SA_BLOCK_BYTES


def sa_run_bytes(horizon: int, length: int, num_starts: int, size: int) -> int:
    """A run's memory in a block of window comparators: ``4 (T + W L) p 4`` bytes (``W``
    starts, ``p`` the size of ``theta_t``) plus its float64 losses and prefix sums."""
    return 4 * (horizon + num_starts * length) * size * 4 + 2 * (horizon + 1) * 8


def sa_runs_per_block(
    horizon: int, length: int, num_starts: int, num_runs: int, *, size: int
) -> int:
    """Runs per default block for windows of ``length`` at ``num_starts`` starts:
    :data:`stabl_jax.metrics.SA_BLOCK_BYTES` over ``4 (T + W L) 8`` bytes a run, cut to
    :data:`SA_BLOCK_MAX_BYTES` of :func:`sa_run_bytes`. The first count leaves out ``p``
    because float32 comparators depend on the block size in their last digits."""
    per_run = 4 * (horizon * 8 + num_starts * length * 8)
    runs = max(1, min(num_runs, metrics.SA_BLOCK_BYTES // per_run))
    most = SA_BLOCK_MAX_BYTES // sa_run_bytes(horizon, length, num_starts, size)
    return max(1, min(runs, most))


def theta_size(env: Any) -> int:
    """``p``: the number of coordinates of ``env``'s ``theta_t`` (at least 1; from shapes,
    nothing is computed)."""
    theta = jax.eval_shape(
        lambda key: env.theta(env.sample_params(key), jnp.int32(0), key), jax.random.key(0)
    )
    return max(1, int(np.prod(theta.shape)))


def sa_memory_bytes(
    env: Any, num_runs: int, window_lengths: Any, *, stride: int | None = None
) -> int:
    """The most memory :func:`paired_bco_adaptive_regret` (default blocks) takes at once: over
    the window lengths, a block's runs (:func:`sa_runs_per_block`) times
    :func:`sa_run_bytes`."""
    horizon, size = int(env.horizon), theta_size(env)
    most = 0
    for length in metrics.check_windows(window_lengths, horizon):
        num_starts = len(window_starts(horizon, length, stride))
        runs = sa_runs_per_block(horizon, length, num_starts, num_runs, size=size)
        most = max(most, runs * sa_run_bytes(horizon, length, num_starts, size))
    return most


def bco_adaptive_regret(
    result: SimResult,
    env: Any,
    window_lengths: Any,
    *,
    stride: int | None = None,
    domain: Domain | None = None,
    num_steps: int = 1000,
    runs_per_block: int | None = None,
) -> dict[str, np.ndarray]:
    """Strongly adaptive regret ``SA(L)`` of every run (module docstring for the exact
    definition, the window grid and the comparator solver).

    Args:
      result: the :class:`~stabl_jax.simulate.SimResult` of a simulation on ``env``.
      env: the environment simulated (its ``theta_t`` are regenerated from each run's params,
        and ``G``, the generic comparator's step sizes, is each run's ``params.lipschitz``).
      window_lengths: window lengths ``L``, each in ``1..T``.
      stride: distance between window starts, an int >= 1; ``None`` is ``max(1, L // 4)``;
        1 is every window.
      domain: ``K`` (default ``env.domain``), of ``env``'s dimension; an environment with
        its own solver (``window_minimum``) takes only its own domain.
      num_steps: iterations of :func:`minimize_window` (generic families only), >= 1.
      runs_per_block: runs solved together (memory); ``None``: :func:`sa_runs_per_block`.

    Returns:
      ``{"sa": (R, len(L)) float64, "comparator_gap": (R, len(L)) float64}``; the exact ``SA``
      on the grid lies in ``[sa, sa + comparator_gap]``.

    Raises:
      ValueError: ``result`` is from another environment or not finite, or an argument is
        out of range; ``TypeError`` for a wrongly typed argument.
    """
    result.check_env(env, "bco_adaptive_regret")
    paired = paired_bco_adaptive_regret(
        env,
        result.final_carry("bco_adaptive_regret"),
        {"learner": result.loss},
        window_lengths,
        stride=stride,
        domain=domain,
        num_steps=num_steps,
        runs_per_block=runs_per_block,
    )
    return {"sa": paired["sa"]["learner"], "comparator_gap": paired["comparator_gap"]}


def paired_bco_adaptive_regret(
    env: Any,
    carry: RunCarry,
    losses: Mapping[str, np.ndarray],
    window_lengths: Any,
    *,
    stride: int | None = None,
    domain: Domain | None = None,
    num_steps: int = 1000,
    runs_per_block: int | None = None,
) -> dict[str, Any]:
    """:func:`bco_adaptive_regret` of several learners simulated with the same key, the
    window comparators solved once and shared.

    Args:
      env: the environment simulated.
      carry: the final :class:`~stabl_jax.simulate.RunCarry` of any of the simulations.
      losses: per name, the ``(R, T)`` suffered losses ``l_t(x_t)``.
      window_lengths, stride, domain, num_steps, runs_per_block: as in
        :func:`bco_adaptive_regret`.

    Returns:
      ``{"sa": {name: (R, len(L)) float64}, "comparator_gap": (R, len(L)) float64}``.
    """
    domain = _check_domain(env, domain)
    names = list(losses)
    num_runs, horizon = metrics.check_traces(losses, carry, "losses")
    lengths = metrics.check_windows(window_lengths, horizon)
    if stride is not None:
        checks.check_int("stride", stride)
    checks.check_int("num_steps", num_steps)
    if runs_per_block is not None:
        checks.check_int("runs_per_block", runs_per_block)
    sa = {name: np.empty((num_runs, len(lengths))) for name in names}
    gap = np.empty((num_runs, len(lengths)))
    size = theta_size(env)
    for j, length in enumerate(lengths):
        starts = window_starts(horizon, length, stride)
        block = runs_per_block
        if block is None:
            block = sa_runs_per_block(horizon, length, len(starts), num_runs, size=size)
        for lo in range(0, num_runs, block):
            hi = min(num_runs, lo + block)
            sub = jax.tree.map(lambda x, a=lo, b=hi: x[a:b], carry)
            thetas = regenerate_thetas(env, sub.env_params, sub.env_key, horizon)
            lipschitz = sub.env_params.lipschitz  # (b,): each run's own G
            comp, gaps = window_comparators(
                env, domain, thetas, lipschitz, jnp.asarray(starts), length, num_steps
            )
            comp, gaps = np.asarray(comp, np.float64), np.asarray(gaps, np.float64)
            for name in names:  # prefix sums of this block only: (b, T + 1) float64
                played = np.asarray(losses[name][lo:hi], np.float64)
                prefix = metrics.prefix_sums(played.T).T
                sa[name][lo:hi, j] = metrics.window_regret(prefix, comp, starts, length)
            gap[lo:hi, j] = np.max(gaps, axis=1)
    return {"sa": sa, "comparator_gap": gap}


def _check_domain(env: Any, domain: object) -> Domain:
    """``domain`` (default ``env.domain``) when it is a :class:`Domain` of ``env``'s
    dimension, and ``env.domain`` itself where ``env`` solves its windows on its own domain
    (``window_minimum``); else ``TypeError``/``ValueError`` naming it."""
    if domain is None:
        return env.domain
    if not isinstance(domain, Domain):
        raise TypeError(f"domain must be a stabl_jax.domains.Domain, got {domain!r}")
    if domain.dim != env.dim:
        raise ValueError(f"domain.dim={domain.dim} does not match env.dim={env.dim}")
    if getattr(env, "exact_windows", False) and domain != env.domain:
        raise ValueError(
            f"{type(env).__name__} solves its window comparators on its own domain "
            f"({env.domain!r}), not on domain={domain!r}: leave domain out, or give the "
            "environment that domain"
        )
    return domain


def comparator_solver(env: Any) -> str:
    """How :func:`bco_adaptive_regret` solves ``env``'s window comparators (for reports)."""
    if getattr(env, "exact_windows", False):
        solver = f"{type(env).__name__}.window_minimum (exact for piecewise-constant targets)"
    elif env.smoothness is not None:
        solver = f"projected gradient descent, step 1/beta = {1.0 / env.smoothness:g}"
    else:
        solver = "projected subgradient method, steps 2D / (G sqrt(i + 1)), best iterate"
    return solver + "; Frank-Wolfe certificate g^T x - min_K g^T y per window"
