"""The algorithm-selection experiment (Section "Experiments") and its metrics: log
best-objective curves and Dolan-More performance profiles.

Profiles: problems ``p`` are (function, repeat) pairs, cost ``c_{p,s}`` the best gap (floored
at :data:`GAP_FLOOR`), ``r_{p,s} = c_{p,s} / min_s c_{p,s}``, and the score
``mean_p max(0, 1 - log r_{p,s} / log tau_max)`` in ``[0, 1]``, the normalised area under
``rho_s(tau) = #{p : r_{p,s} <= tau} / P``; against a baseline (Uniform), the difference of the
two scores in the two-solver profile.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks, metrics, registry
from stabl_jax.envs.bbob import BBOBSuite
from stabl_jax.envs.hpo import HPOEnv
from stabl_jax.simulate import SimResult, run_keys, simulate

HPO_LEARNERS: tuple[str, ...] = ("uniform", "exp3", "exp3_uniform", "stabl", "stabl_naive")
PAPER_HISTORY_LENGTHS: tuple[int, ...] = (20, 40, 80, 160, 320, 640, 1280, 2560)
BASELINE = "uniform"
GAP_FLOOR = 1e-12  # gaps below it count as solved: floor for logs and ratios
DEFAULT_TAU_MAX = 10.0


def num_rounds(num_evaluations: int, num_queries: int) -> int:
    """``ceil(N / Q)``: rounds a ``Q``-query learner plays for a budget of ``N`` evaluations."""
    n = checks.check_int("num_evaluations", num_evaluations)
    return math.ceil(n / checks.check_int("num_queries", num_queries))


def _gaps(name: str, values: Any, ndim: int = 2) -> np.ndarray:
    """``values`` as a finite, non-empty float64 array of ``ndim`` dimensions, else
    ``ValueError`` naming ``name``."""
    a = np.asarray(values, np.float64)
    if a.ndim != ndim or 0 in a.shape:
        raise ValueError(f"{name} must be a non-empty {ndim}-D array, got shape {a.shape}")
    return checks.check_finite(name, a)


def check_tau_max(tau_max: object) -> float:
    """``tau_max`` as a finite float ``> 1``, else ``ValueError`` naming it."""
    v = checks.check_real("tau_max", tau_max)
    if not (math.isfinite(v) and v > 1.0):
        raise ValueError(f"tau_max must be a finite number > 1, got {tau_max!r}")
    return v


def simulate_selection(
    learner: Any, env: HPOEnv, key: jax.Array, num_runs: int, num_evaluations: int, **kwargs: Any
) -> SimResult:
    """:func:`~stabl_jax.simulate.simulate` of algorithm selection, ``N`` evaluations per run.

    A ``Q``-query learner plays ``ceil(N / Q)`` rounds; best-so-far traces are by evaluation.

    Args:
      learner: a bandit learner, ``horizon >= num_rounds(N, Q)`` (:func:`make_hpo_learner`).
      env: the algorithm-selection environment.
      key: a typed PRNG key (the same for every learner: paired repeats).
      num_runs: ``R`` (>= 1).
      num_evaluations: ``N`` (>= 1).
      **kwargs: ``simulate``'s other options.

    Returns:
      A :class:`~stabl_jax.simulate.SimResult`: ``best_gap`` and ``best_value`` ``(R, N)``
      float64 by evaluation count; ``arms``, ``observed``, ``reward`` ``(R, T, Q)``.

    Example:
      >>> from stabl_jax import make
      >>> from stabl_jax.envs.bbob import BBOBFunction
      >>> env = HPOEnv(BBOBFunction(function_id=1, dim=4, normalize=True))
      >>> learner = make("stabl", num_arms=env.num_arms, horizon=10, feedback="reward",
      ...                history_lengths=(4, 8))
      >>> res = simulate_selection(learner, env, jax.random.key(0), 2, num_evaluations=20)
      >>> res.best_gap.shape, res.arms.shape
      ((2, 20), (2, 10, 2))
    """
    num_evaluations = checks.check_int("num_evaluations", num_evaluations, minimum=1)
    rounds = num_rounds(num_evaluations, int(learner.num_queries))
    res = simulate(learner, env, key, num_runs, horizon=rounds, **kwargs)
    for name in ("best_gap", "best_value"):
        if name in res.arrays:
            by_evaluation = np.asarray(res.arrays[name], np.float64).reshape(res.num_runs, -1)
            res.arrays[name] = by_evaluation[:, :num_evaluations]
    return res


def simulate_suite(
    learner: Any, env: HPOEnv, key: jax.Array, num_runs: int, num_evaluations: int, **kwargs: Any
) -> list[SimResult]:
    """:func:`simulate_selection` of every function of a ``BBOBSuite`` env in one program.

    Run ``j = i R + r`` (key ``fold_in(key, j)``) is repeat ``r`` of function ``i``.

    Returns:
      One :class:`~stabl_jax.simulate.SimResult` of ``R`` runs per function, in order.
    """
    num_runs = checks.check_int("num_runs", num_runs, minimum=1)
    suite = getattr(env, "function", None)
    if not isinstance(suite, BBOBSuite):
        raise TypeError(
            f"simulate_suite runs an HPOEnv of a BBOBSuite, got {env!r}: use simulate_selection "
            "for one function"
        )
    count = len(suite.function_ids)
    total = count * num_runs
    env_params = _suite_params(env, run_keys(key, total), num_runs, env.default_params)
    res = simulate_selection(
        learner, env, key, total, num_evaluations, env_params=env_params, **kwargs
    )
    return [
        dataclasses.replace(
            res,
            arrays={name: value[part] for name, value in res.arrays.items()},
            carry=jax.tree.map(lambda x, part=part: x[part], res.carry),
            compile_seconds=res.compile_seconds / count,
            run_seconds=res.run_seconds / count,
        )
        for part in (slice(i * num_runs, (i + 1) * num_runs) for i in range(count))
    ]


@functools.partial(jax.jit, static_argnames=("env", "num_runs"))
def _suite_params(env: HPOEnv, keys: jax.Array, num_runs: int, defaults: Any) -> Any:
    """``(F R, ...)`` run ``j``'s parameters: function ``j // num_runs``, ``fold_in(key_j, 0)``,
    the numbers ``defaults`` (``env.default_params``, traced)."""
    index = jnp.arange(keys.shape[0], dtype=jnp.int32) // num_runs
    return jax.vmap(lambda i, k: env.problem_params(i, jax.random.fold_in(k, 0), defaults))(
        index, keys
    )


def make_hpo_learner(
    name: str,
    num_arms: int,
    num_evaluations: int,
    *,
    history_lengths: tuple[int, ...] = PAPER_HISTORY_LENGTHS,
    feedback: str = "reward",
    **kwargs: Any,
) -> Any:
    """The registry's learner ``name`` with ``horizon = ceil(num_evaluations / num_queries)``;
    ``feedback`` and ``history_lengths`` go to learners that take them and do not fix them.

    Example:
      >>> make_hpo_learner("stabl", 24, 1000).horizon
      500
      >>> make_hpo_learner("exp3", 24, 1000).horizon
      1000
    """
    checks.check_int("num_evaluations", num_evaluations)
    entry = registry.LEARNERS.entry(name)
    for option, value in (("feedback", feedback), ("history_lengths", tuple(history_lengths))):
        if option in entry.hints and option not in entry.defaults:
            kwargs.setdefault(option, value)
    queries = (
        entry.num_queries or entry(num_arms=num_arms, horizon=num_evaluations, **kwargs).num_queries
    )
    return entry(num_arms=num_arms, horizon=num_rounds(num_evaluations, queries), **kwargs)


def arm_counts(result: SimResult, num_arms: int) -> np.ndarray:
    """``(A,)`` mean number of queries of each arm per run of a :func:`simulate_selection`."""
    arms = result.arms.reshape(result.num_runs, -1)
    return np.stack([np.bincount(a, minlength=num_arms) for a in arms]).mean(axis=0)


def log10_gap(best_gap: np.ndarray) -> np.ndarray:
    """``log10(max(gap, GAP_FLOOR))`` in float64, same shape."""
    return np.log10(np.maximum(np.asarray(best_gap, np.float64), GAP_FLOOR))


def log_curve(best_gap: np.ndarray) -> dict[str, np.ndarray]:
    """``{"mean", "lo", "hi", "median"}`` ``(N,)`` of :func:`log10_gap` of ``(R, N)`` best
    gaps over repeats, ``lo``/``hi`` the :func:`stabl_jax.metrics.mean_ci` band."""
    logs = log10_gap(_gaps("best_gap", best_gap))
    mean, half = metrics.mean_ci(logs, axis=0)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "median": np.median(logs, 0)}


def performance_ratios(costs: np.ndarray) -> np.ndarray:
    """``(S, P)`` ratios ``r_{p,s} = c_{p,s} / min_s c_{p,s} >= 1`` of ``(S, P)`` costs,
    floored at :data:`GAP_FLOOR`."""
    return _ratios(_gaps("costs", costs))


def _ratios(costs: np.ndarray) -> np.ndarray:
    """:func:`performance_ratios` of checked costs, solvers on axis 0 (any more axes)."""
    c = np.maximum(costs, GAP_FLOOR)
    return c / c.min(axis=0, keepdims=True)


def performance_profile(costs: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """``(S, len(taus))`` Dolan-More profile ``rho_s(tau) = #{p : r_{p,s} <= tau} / P``."""
    ratios = performance_ratios(costs)
    return (ratios[:, :, None] <= np.asarray(taus)[None, None, :]).mean(axis=1)


def profile_scores(costs: np.ndarray, tau_max: float = DEFAULT_TAU_MAX) -> np.ndarray:
    """``(S,)`` ``mean_p max(0, 1 - log r_{p,s} / log tau_max)`` (module docstring).

    Example:
      >>> profile_scores(np.array([[1.0, 1.0], [10.0, 1.0]])).tolist()
      [1.0, 0.5]
    """
    log_r = np.log(performance_ratios(costs))
    return np.maximum(0.0, 1.0 - log_r / np.log(check_tau_max(tau_max))).mean(axis=1)


def score_vs_baseline(
    costs: np.ndarray, baseline_costs: np.ndarray, tau_max: float = DEFAULT_TAU_MAX
) -> float:
    """Two-solver profile score of ``costs`` ``(P,)`` minus ``baseline_costs``', in [-1, 1]."""
    return float(_score_difference(costs, baseline_costs, 1, tau_max))


def score_vs_baseline_curve(
    best_gap: np.ndarray, baseline_gap: np.ndarray, tau_max: float = DEFAULT_TAU_MAX
) -> np.ndarray:
    """``(N,)`` :func:`score_vs_baseline` of paired ``(P, N)`` best gaps at every count."""
    return _score_difference(best_gap, baseline_gap, 2, tau_max)


def _score_difference(costs: Any, baseline: Any, ndim: int, tau_max: float) -> Any:
    """Two-solver profile score of ``costs`` minus ``baseline``'s, both ``(P, ...)``: ``(...)``."""
    a, b = _gaps("costs", costs, ndim), _gaps("baseline costs", baseline, ndim)
    if a.shape != b.shape:
        raise ValueError(
            f"costs and baseline costs must be of the same problems, got shapes {a.shape} and "
            f"{b.shape}"
        )
    log_r = np.log(_ratios(np.stack([a, b])))  # (2, P, ...)
    s = np.maximum(0.0, 1.0 - log_r / np.log(check_tau_max(tau_max))).mean(axis=1)
    return s[0] - s[1]


def profiles_across(
    results: Sequence[Mapping[str, Any]],
    *,
    at: int | None = None,
    taus: np.ndarray | None = None,
    tau_max: float = DEFAULT_TAU_MAX,
) -> dict[str, Any]:
    """Dolan-More profiles over every (function, repeat) of results
    ``{"learners": {name: {"best_gap": (R, N)}}}``, cost the gap after ``at`` evaluations.

    Returns:
      ``{"learners": [...], "taus": (K,), "profile": (S, K), "scores": {name: score},
      "score_vs_baseline": {name: score}}`` (the last against Uniform when present).
    """
    if not results:
        raise ValueError("results must not be empty")
    names = list(results[0]["learners"])
    if any(list(r["learners"]) != names for r in results):
        raise ValueError("every result must have the same learners, in the same order")
    index = -1
    if at is not None:
        budget = min(np.shape(r["learners"][n]["best_gap"])[-1] for r in results for n in names)
        if checks.check_int("at", at) > budget:
            raise ValueError(f"at must be <= {budget} (the shortest best_gap), got {at}")
        index = at - 1
    costs = np.stack(
        [np.concatenate([r["learners"][n]["best_gap"][:, index] for r in results]) for n in names]
    )  # (S, P)
    if taus is None:
        taus = np.logspace(0.0, np.log10(tau_max), 50)
    scores = profile_scores(costs, tau_max=tau_max)
    vs: dict[str, float] = {}
    if BASELINE in names:
        base = costs[names.index(BASELINE)]
        vs = {n: score_vs_baseline(c, base, tau_max) for n, c in zip(names, costs, strict=True)}
    return {
        "learners": names,
        "taus": np.asarray(taus),
        "profile": performance_profile(costs, taus),
        "scores": dict(zip(names, scores.tolist(), strict=True)),
        "score_vs_baseline": vs,
    }
