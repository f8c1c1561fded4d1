"""The algorithm-selection experiment ("Algorithm Selection for Hyperparameter Optimization",
Section "Experiments" of Lu et al., ICLR 2024) and its metrics: log best-objective curves and
Dolan-More performance profiles.

:func:`simulate_selection` runs one learner on one BBOB problem, many repeats vmapped in one
program, and :func:`simulate_suite` on several problems of one dimension and budget at once;
the algorithm-selection experiment (:mod:`stabl_jax.experiment.kinds.selection`) runs every compared
learner with the same key, so repeat ``i`` has the same shift and rotation for every learner.
Learners (the paper's four plus StABL Naive), built by :func:`make_hpo_learner` from the
registry with ``feedback="reward"`` (the paper's setting; Uniform has no feedback) and
``horizon`` = the learner's number of rounds ``ceil(N / num_queries)``; StABL's history
lengths are the paper's ``(20, 40, ..., 2560)``.

Performance profiles (Dolan and More, "Benchmarking optimization software with performance
profiles", Math. Program. 2002). Problems ``p`` are (function, repeat) pairs, solvers ``s`` the
learners, and the cost ``c_{p,s}`` the best gap ``f - f_opt`` reached within a budget (floored
at :data:`GAP_FLOOR`). With ``r_{p,s} = c_{p,s} / min_s c_{p,s}``, the profile is
``rho_s(tau) = #{p : r_{p,s} <= tau} / #problems``, and its score the normalised area over
``log tau`` in ``[0, log tau_max]``::

    score_s = (1 / log tau_max) int_0^{log tau_max} rho_s(e^u) du
            = mean_p max(0, 1 - log r_{p,s} / log tau_max)     in [0, 1], higher is better.

The score against a baseline (the paper's "performance profile score against the Uniform
baseline") is the difference of the two scores in the two-solver profile {s, baseline}, in
``[-1, 1]``, positive when ``s`` does better; computed at every evaluation count it is a curve.

No plotting here (``stabl_jax.experiment.plots`` draws); everything returns NumPy arrays.
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
    """``values`` as a float64 array of ``ndim`` dimensions, none empty, every entry finite;
    else ``ValueError`` naming ``name``: a NaN gap would make every score NaN, and an empty
    axis a NumPy reduction error."""
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
    """:func:`~stabl_jax.simulate.simulate` of algorithm selection with a budget of
    ``num_evaluations`` objective evaluations per run.

    Every query is one evaluation (a trial), so a learner with ``num_queries = Q`` plays
    ``ceil(N / Q)`` rounds and its best-so-far traces are indexed by evaluation count, not by
    round: a two-query learner is never compared with a one-query learner on a cheaper
    budget. When ``Q`` does not divide ``N`` the last round's extra evaluations are dropped
    from those traces (they happen after the budget).

    Args:
      learner: a bandit learner with ``env.num_arms`` arms and ``horizon`` at least
        :func:`num_rounds` ``(N, learner.num_queries)`` (:func:`make_hpo_learner`).
      env: the algorithm-selection environment.
      key: a typed PRNG key (the same for every learner: paired repeats).
      num_runs: ``R`` (>= 1).
      num_evaluations: ``N`` (>= 1).
      **kwargs: ``simulate``'s other options (``params``, ``checkpoint``, ``validate``...).

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
    """:func:`simulate_selection` of every function of ``env``'s
    :class:`~stabl_jax.envs.bbob.BBOBSuite` in one compiled program, ``num_runs`` runs each.

    The program runs ``F x R`` runs; run ``j = i R + r`` is repeat ``r`` of function ``i``,
    with the run key ``fold_in(key, j)`` and the function's parameters
    ``env.problem_params(i, fold_in(fold_in(key, j), 0))``: exactly the runs
    ``simulate_selection(learner, HPOEnv(suite.members[i], ...), key, R, N, first_run=i R)``
    makes, so the two agree up to float rounding (``tests/test_hpo.py``).

    Args:
      learner, key, num_evaluations, **kwargs: as :func:`simulate_selection`.
      env: an :class:`~stabl_jax.envs.hpo.HPOEnv` whose ``function`` is a ``BBOBSuite``.
      num_runs: ``R``, repeats per function.

    Returns:
      One :class:`~stabl_jax.simulate.SimResult` per function, in ``function_ids`` order,
      each with ``R`` runs; the shared program's compile and run seconds are split evenly.
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
    env_params = _suite_params(env, run_keys(key, total), num_runs)
    res = simulate_selection(
        learner, env, key, total, num_evaluations, env_params=env_params, **kwargs
    )
    parts = [slice(i * num_runs, (i + 1) * num_runs) for i in range(count)]
    return [
        dataclasses.replace(
            res,
            arrays={name: value[part] for name, value in res.arrays.items()},
            carry=jax.tree.map(lambda x, part=part: x[part], res.carry),
            compile_seconds=res.compile_seconds / count,
            run_seconds=res.run_seconds / count,
        )
        for part in parts
    ]


@functools.partial(jax.jit, static_argnames=("env", "num_runs"))
def _suite_params(env: HPOEnv, keys: jax.Array, num_runs: int) -> Any:
    """``(F R, ...)`` run ``j``'s parameters: function ``j // num_runs``, ``fold_in(key_j, 0)``."""
    index = jnp.arange(keys.shape[0], dtype=jnp.int32) // num_runs
    return jax.vmap(lambda i, k: env.problem_params(i, jax.random.fold_in(k, 0)))(index, keys)


def make_hpo_learner(
    name: str,
    num_arms: int,
    num_evaluations: int,
    *,
    history_lengths: tuple[int, ...] = PAPER_HISTORY_LENGTHS,
    feedback: str = "reward",
    **kwargs: Any,
) -> Any:
    """The registry's learner ``name`` for a budget of ``num_evaluations`` evaluations.

    ``horizon = ceil(num_evaluations / num_queries)`` (its number of rounds), with
    ``num_queries`` from the registry entry, or, where the learner's options set it (Hedge,
    SAOL), from the learner built for the whole budget. ``feedback`` and ``history_lengths``
    are passed to the learners that take them, unless the entry fixes them
    (``stabl_single_scale``'s one history length).

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
    """``(A,)`` float64: the mean number of times each arm was queried per run (every query is
    one evaluation) of one :func:`simulate_selection`, from its ``arms`` trace."""
    arms = result.arms.reshape(result.num_runs, -1)
    return np.stack([np.bincount(a, minlength=num_arms) for a in arms]).mean(axis=0)


def log10_gap(best_gap: np.ndarray) -> np.ndarray:
    """``log10(max(gap, GAP_FLOOR))`` in float64, same shape: the "log10 gap" of every table
    and curve (a gap below :data:`GAP_FLOOR` counts as solved)."""
    return np.log10(np.maximum(np.asarray(best_gap, np.float64), GAP_FLOOR))


def log_curve(best_gap: np.ndarray) -> dict[str, np.ndarray]:
    """``log10`` best-objective curve over repeats: mean and 95% band.

    Args:
      best_gap: ``(R, N)`` best gaps after each evaluation.

    Returns:
      ``{"mean", "lo", "hi", "median"}``, each ``(N,)``: the mean of ``log10(max(gap,
      GAP_FLOOR))`` over repeats, ``mean -/+ 1.96 sd / sqrt(R)`` (the normal interval of
      :func:`stabl_jax.metrics.mean_ci`; with the paper's 5 repeats Student's t would be
      about 40% wider; NaN when ``R = 1``), and the median.
    """
    logs = log10_gap(_gaps("best_gap", best_gap))
    mean, half = metrics.mean_ci(logs, axis=0)
    return {"mean": mean, "lo": mean - half, "hi": mean + half, "median": np.median(logs, 0)}


def performance_ratios(costs: np.ndarray) -> np.ndarray:
    """``(S, P)`` ratios ``r_{p,s} = c_{p,s} / min_s c_{p,s}`` of ``(S, P)`` costs (>= 1).

    Costs are floored at :data:`GAP_FLOOR`, so problems every solver solved give ratio 1.
    ``ValueError`` for costs that are not 2-D, empty or not finite.
    """
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
    """``(S,)`` normalised area under each profile over ``log tau`` in ``[0, log tau_max]``.

    Exactly ``mean_p max(0, 1 - log r_{p,s} / log tau_max)`` (module docstring).

    Example:
      >>> profile_scores(np.array([[1.0, 1.0], [10.0, 1.0]])).tolist()
      [1.0, 0.5]
    """
    log_r = np.log(performance_ratios(costs))
    return np.maximum(0.0, 1.0 - log_r / np.log(check_tau_max(tau_max))).mean(axis=1)


def score_vs_baseline(
    costs: np.ndarray, baseline_costs: np.ndarray, tau_max: float = DEFAULT_TAU_MAX
) -> float:
    """Two-solver profile score of ``costs`` ``(P,)`` minus that of ``baseline_costs`` ``(P,)``.

    In ``[-1, 1]``; positive when the solver beats the baseline. 0 against itself.
    """
    s = profile_scores(_paired(costs, baseline_costs, ndim=1), tau_max=tau_max)
    return float(s[0] - s[1])


def score_vs_baseline_curve(
    best_gap: np.ndarray, baseline_gap: np.ndarray, tau_max: float = DEFAULT_TAU_MAX
) -> np.ndarray:
    """``(N,)`` :func:`score_vs_baseline` at every evaluation count, problems = repeats.

    Args:
      best_gap, baseline_gap: ``(P, N)`` best gaps of the solver and of the baseline on the
        same problems (paired repeats).
    """
    log_r = np.log(_ratios(_paired(best_gap, baseline_gap, ndim=2)))  # (2, P, N)
    s = np.maximum(0.0, 1.0 - log_r / np.log(check_tau_max(tau_max))).mean(axis=1)  # (2, N)
    return s[0] - s[1]


def _paired(costs: Any, baseline: Any, ndim: int) -> np.ndarray:
    """``(2, ...)``: a solver's and the baseline's costs on the same problems, stacked, each
    checked by :func:`_gaps` and of the same shape."""
    a, b = _gaps("costs", costs, ndim), _gaps("baseline costs", baseline, ndim)
    if a.shape != b.shape:
        raise ValueError(
            f"costs and baseline costs must be of the same problems, got shapes {a.shape} and "
            f"{b.shape}"
        )
    return np.stack([a, b])


def profiles_across(
    results: Sequence[Mapping[str, Any]],
    *,
    at: int | None = None,
    taus: np.ndarray | None = None,
    tau_max: float = DEFAULT_TAU_MAX,
) -> dict[str, Any]:
    """Dolan-More profiles over the problems of several results
    (``{"learners": {name: {"best_gap": (R, N)}}}``: per learner, the best gaps of a
    :func:`simulate_selection`).

    Problems are every (function, repeat) pair of ``results`` (learners must be the same in
    all of them); the cost is the best gap after ``at`` evaluations (default: the budget).

    Returns:
      ``{"learners": [...], "taus": (K,), "profile": (S, K), "scores": {name: score},
      "score_vs_baseline": {name: score}}`` (the last against Uniform when present).
    """
    if not results:
        raise ValueError("results must not be empty")
    names = list(results[0]["learners"])
    for r in results:
        if list(r["learners"]) != names:
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
        vs = {n: score_vs_baseline(costs[i], base, tau_max) for i, n in enumerate(names)}
    return {
        "learners": names,
        "taus": np.asarray(taus),
        "profile": performance_profile(costs, taus),
        "scores": dict(zip(names, scores.tolist(), strict=True)),
        "score_vs_baseline": vs,
    }
