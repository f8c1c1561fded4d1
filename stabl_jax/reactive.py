"""Run a bandit learner against an environment that reacts to it (the paper's algorithm
selection for black-box optimisation, :mod:`stabl_jax.envs.hpo`): ``lax.scan`` over rounds
inside ``vmap`` over runs, one compiled program.

Each round: ``query = learner.ask(state, key)`` -> the environment evaluates *only* the queried
arms (``env.evaluate(params, env_state, query.arms, key)``, which also records the evaluations
in its shared state) -> ``learner.tell(state, query, losses)``.

Budget. Every query is one evaluation of the objective (a trial), so a learner with
``num_queries = Q`` plays ``ceil(N / Q)`` rounds for a budget of ``N`` evaluations and its
traces are indexed by evaluation count, not by round: a two-query learner is never compared
with a one-query learner on a cheaper budget. When ``Q`` does not divide ``N`` the last
round's extra evaluations are dropped from the traces (they happen after the budget).

Randomness (typed keys, never reused), mirroring :func:`stabl_jax.simulate.simulate`:
run ``i`` has ``run_key = fold_in(key, i)``; ``fold_in(run_key, 0)`` draws the environment's
parameters (the function's shift and rotation), ``fold_in(run_key, 1)`` is the environment's
key, ``fold_in(run_key, 2)`` the learner's and ``fold_in(run_key, 3)`` initialises the
learner; round ``t`` uses ``fold_in(env_key, t)`` and ``fold_in(learner_key, t)``. Two learners
simulated with the same ``key`` therefore face the same functions in every run.
"""

from __future__ import annotations

import dataclasses
import math
import time
from functools import partial
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from stabl_jax import checks
from stabl_jax.simulate import params_axes, run_keys


@chex.dataclass(frozen=True)
class ReactiveCarry:
    """Per-run loop state (stacked on a leading runs axis)."""

    state: Any  # the learner's state
    env_params: Any  # the environment's per-run parameters
    env_state: Any  # the environment's reactive state
    env_key: jax.Array  # () key, round t uses fold_in(env_key, t)
    learner_key: jax.Array  # () key, round t uses fold_in(learner_key, t)


@dataclasses.dataclass
class ReactiveResult:
    """Traces of a reactive simulation, on the host (``R`` runs, ``N`` evaluations,
    ``T = ceil(N / Q)`` rounds, ``Q`` queries per round).

    Attributes:
      best_gap: ``(R, N)`` float64, best true ``f - f_opt`` after each evaluation.
      best_value: ``(R, N)`` float64, best true normalised value after each evaluation.
      arms: ``(R, T, Q)`` int32, the queried arms (``arms[..., 0]`` played).
      loss: ``(R, T, Q)`` float32, the losses handed to ``tell``.
      reward: ``(R, T, Q)`` float32, the rewards they encode.
      carry: the final :class:`ReactiveCarry` (runs-leading).
      num_queries: ``Q``.
      compile_seconds, run_seconds: timings.
    """

    best_gap: np.ndarray
    best_value: np.ndarray
    arms: np.ndarray
    loss: np.ndarray
    reward: np.ndarray
    carry: ReactiveCarry
    num_queries: int
    compile_seconds: float
    run_seconds: float

    @property
    def num_runs(self) -> int:
        return int(self.best_gap.shape[0])

    @property
    def num_evaluations(self) -> int:
        return int(self.best_gap.shape[1])


def num_rounds(num_evaluations: int, num_queries: int) -> int:
    """``ceil(N / Q)``: rounds a ``Q``-query learner plays for a budget of ``N`` evaluations."""
    return math.ceil(num_evaluations / num_queries)


@partial(jax.jit, static_argnames=("env",))
def sample_env_params(env: Any, keys: jax.Array) -> Any:
    """``(R, ...)`` the runs' environment parameters, ``env.sample_params(fold_in(key_i, 0))``.

    Compiled apart from the rounds, once per environment: every learner simulated on the same
    ``env`` reuses it (drawing a Haar rotation is a large part of a small program).
    """
    return jax.vmap(lambda k: env.sample_params(jax.random.fold_in(k, 0)))(keys)


def _init_one(
    learner: Any, env: Any, run_key: jax.Array, env_params: Any, params: Any
) -> ReactiveCarry:
    return ReactiveCarry(
        state=learner.init(jax.random.fold_in(run_key, 3), params),
        env_params=env_params,
        env_state=env.init(env_params),
        env_key=jax.random.fold_in(run_key, 1),
        learner_key=jax.random.fold_in(run_key, 2),
    )


def reactive_round(
    learner: Any, env: Any, carry: ReactiveCarry, t: jax.Array
) -> tuple[ReactiveCarry, dict[str, jax.Array]]:
    """One round of one run: ask -> evaluate the queried arms only -> tell.

    Returns the new carry and small per-round outputs (``(Q,)`` each).
    """
    query = learner.ask(carry.state, jax.random.fold_in(carry.learner_key, t))
    env_state, loss, info = env.evaluate(
        carry.env_params, carry.env_state, query.arms, jax.random.fold_in(carry.env_key, t)
    )
    state = learner.tell(carry.state, query, loss)
    out = {
        "arms": query.arms.astype(jnp.int32),
        "loss": loss.astype(jnp.float32),
        "reward": info.reward.astype(jnp.float32),
        "best_gap": info.best_gap,
        "best_value": info.best_value,
    }
    return carry.replace(state=state, env_state=env_state), out


@partial(jax.jit, static_argnames=("learner", "env", "rounds"))
def run_reactive(
    learner: Any, env: Any, keys: jax.Array, env_params: Any, params: Any, rounds: int
) -> tuple[ReactiveCarry, dict[str, jax.Array]]:
    """Initialise runs from ``keys`` ``(R,)`` and ``env_params`` (:func:`sample_env_params`)
    and play ``rounds`` rounds of each.

    Returns ``(carry, outputs)``; outputs have shape ``(R, rounds, Q)``.
    """

    def one_run(key: jax.Array, env_p: Any, p: Any) -> tuple[ReactiveCarry, dict[str, jax.Array]]:
        carry = _init_one(learner, env, key, env_p, p)
        ts = jnp.arange(rounds, dtype=jnp.int32)
        return jax.lax.scan(partial(reactive_round, learner, env), carry, ts)

    return jax.vmap(one_run, in_axes=(0, 0, params_axes(params)))(keys, env_params, params)


def simulate_reactive(
    learner: Any,
    env: Any,
    key: jax.Array,
    num_runs: int,
    num_evaluations: int,
    *,
    params: Any = None,
) -> ReactiveResult:
    """Simulate ``num_runs`` independent runs of ``learner`` selecting ``env``'s arms.

    Args:
      learner: a bandit learner (:mod:`stabl_jax.learners.base`) with ``env.num_arms`` arms;
        its ``horizon`` should be :func:`num_rounds` ``(N, learner.num_queries)``.
      env: a reactive environment (``sample_params``, ``init``, ``evaluate``), e.g.
        :class:`stabl_jax.envs.hpo.HPOEnv`.
      key: a typed PRNG key.
      num_runs: ``R`` (>= 1).
      num_evaluations: ``N``, the budget of objective evaluations per run (>= 1).
      params: learner params (``None``: defaults); leaves with a leading axis ``R`` are per
        run, scalars shared.

    Returns:
      A :class:`ReactiveResult` with ``(R, N)`` best-so-far traces by evaluation count.

    Example:
      >>> import jax
      >>> from stabl_jax import make
      >>> from stabl_jax.envs.bbob import BBOBFunction
      >>> from stabl_jax.envs.hpo import HPOEnv
      >>> env = HPOEnv(BBOBFunction(function_id=1, dim=4, normalize=True))
      >>> learner = make("stabl", num_arms=env.num_arms, horizon=10, feedback="reward",
      ...                history_lengths=(4, 8))
      >>> res = simulate_reactive(learner, env, jax.random.key(0), num_runs=2,
      ...                         num_evaluations=20)
      >>> res.best_gap.shape, res.arms.shape
      ((2, 20), (2, 10, 2))
    """
    num_runs = checks.check_int("num_runs", num_runs, minimum=1)
    num_evaluations = checks.check_int("num_evaluations", num_evaluations, minimum=1)
    if learner.num_arms != env.num_arms:
        raise ValueError(
            f"learner.num_arms={learner.num_arms} does not match env.num_arms={env.num_arms}"
        )
    if params is None:
        params = learner.default_params
    for leaf in jax.tree.leaves(params):
        if jnp.ndim(leaf) > 0 and jnp.shape(leaf)[0] != num_runs:
            raise ValueError(
                f"per-run params must have leading axis num_runs={num_runs}, got shape "
                f"{jnp.shape(leaf)}"
            )
    queries = int(learner.num_queries)
    rounds = num_rounds(num_evaluations, queries)
    keys = run_keys(key, num_runs)

    env_params = sample_env_params(env, keys)
    start = time.perf_counter()
    compiled = run_reactive.lower(learner, env, keys, env_params, params, rounds).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    carry, out = compiled(keys, env_params, params)
    out = jax.device_get(out)
    run_s = time.perf_counter() - start

    def by_evaluation(a: np.ndarray) -> np.ndarray:
        return np.asarray(a, np.float64).reshape(num_runs, rounds * queries)[:, :num_evaluations]

    return ReactiveResult(
        best_gap=by_evaluation(out["best_gap"]),
        best_value=by_evaluation(out["best_value"]),
        arms=np.asarray(out["arms"]),
        loss=np.asarray(out["loss"]),
        reward=np.asarray(out["reward"]),
        carry=carry,
        num_queries=queries,
        compile_seconds=compile_s,
        run_seconds=run_s,
    )
