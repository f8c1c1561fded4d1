"""Algorithm selection for black-box optimisation: a reactive bandit environment whose arms
are Eagle-strategy optimisers sharing their data (Lu et al., ICLR 2024).

Reward: with ``best`` the smallest observation before the round (1 before any) and ``f_j``
query ``j``'s observation on the normalised objective (clipped to ``[0, 1]``)::

    r_j = max(best - f_j, 0) - lambda f_j  in [-lambda, 1],    lambda = 0.01,
    loss_j = (1 - r_j) / (1 + lambda)      in [0, 1].

``reward="vizier"``: OSS Vizier's ``ObjectiveRewardGenerator`` (the authors' code), against
the previous observation only, loss ``1 - min(r, 1)`` (:func:`vizier_reward`).

Query ``q`` with round key ``k`` uses ``k_q = fold_in(k, q)``: suggestion ``fold_in(k_q, 0)``,
noise ``fold_in(k_q, 1)``; every query costs one evaluation.

Static and traced: the function's identity (``function_id``, ``dim``, ``instance``, ``rotate``,
``normalize`` and whether each number is zero), the arms and ``reward`` set shapes or code
paths; ``reward_lambda`` and the function's ``shift_radius``, ``noise_std`` and ``norm_scale``
are numbers, declared ``dataclasses.field(compare=False)``: defaults of :class:`HPONumbers`
(:attr:`HPOEnv.default_params`), which ``simulate`` passes to ``sample_params(key, defaults)``
traced, so environments that differ in numbers alone share one compiled program. Programs read
the numbers from :class:`HPOParams` alone.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import chex
import jax
import jax.numpy as jnp

from stabl_jax import checks
from stabl_jax.envs import eagle
from stabl_jax.envs.base import Environment
from stabl_jax.envs.bbob import BBOBFunction, BBOBNumbers, BBOBSuite, normalize_gap

REWARD_LAMBDA = 0.01
#: ``HPOEnv.reward``: the paper's reward, or that of the authors' code (module docstring).
REWARDS: tuple[str, ...] = ("paper", "vizier")

# BBOB's search domain [-5, 5]^d (COCO's region of interest).
DOMAIN_LOWER = -5.0
DOMAIN_UPPER = 5.0


@chex.dataclass(frozen=True)
class HPONumbers:
    """The numbers of an :class:`HPOEnv` (:attr:`HPOEnv.default_params`), ``()`` arrays.

    Attributes:
      function: the function's :class:`~stabl_jax.envs.bbob.BBOBNumbers`.
      reward_lambda: ``lambda`` of the reward.
      reward_width: ``1 + lambda``, the loss's divisor, rounded once from the exact sum (as
        the static number was; ``1 + lambda`` summed in float32 can differ in the last bit).
    """

    function: BBOBNumbers
    reward_lambda: jax.Array
    reward_width: jax.Array


@chex.dataclass(frozen=True)
class HPOParams:
    """A run's parameters.

    Attributes:
      function: the run's function (:meth:`BBOBFunction.sample_params`).
      halton_key: ``()`` key of the arms' Halton scrambling (arm ``i`` uses
        ``fold_in(halton_key, i)``; read only with ``fill="halton"``).
      reward_lambda: ``()`` ``lambda`` of the reward (:class:`HPONumbers`).
      reward_width: ``()`` ``1 + lambda`` (:class:`HPONumbers`).
    """

    function: Any
    halton_key: jax.Array
    reward_lambda: jax.Array
    reward_width: jax.Array


@chex.dataclass(frozen=True)
class HPOState:
    """The environment's state for one run.

    Attributes:
      arms: the arms' pools, :class:`stabl_jax.envs.eagle.EagleState` with ``(A, ...)`` leaves.
      best_observed: ``()`` the reward's ``best`` (``1`` before any).
      best_gap: ``()`` the smallest true gap ``f~(x) - f_opt`` (``+inf`` before any).
      best_value: ``()`` the smallest true normalised value (``1`` before any).
      num_evaluations: ``()`` int32, evaluations so far.
      evaluations_per_arm: ``(A,)`` int32, evaluations of each arm's suggestions.
      last_observed: ``()`` the last observation (``1`` before any), for ``reward="vizier"``.
    """

    arms: eagle.EagleState
    best_observed: jax.Array
    best_gap: jax.Array
    best_value: jax.Array
    num_evaluations: jax.Array
    evaluations_per_arm: jax.Array
    last_observed: jax.Array


@chex.dataclass(frozen=True)
class HPOInfo:
    """What one :meth:`HPOEnv.evaluate` call did (``Q`` = number of queries).

    Attributes:
      arms: ``(Q,)`` int32, the queried arms, in evaluation order.
      x: ``(Q, d)`` the evaluated points in ``[-5, 5]^d``.
      parents: ``(Q,)`` int32, each suggestion's moved fly (``-1``: a random point).
      observed: ``(Q,)`` the observations (normalised value plus noise).
      gap: ``(Q,)`` the true gaps ``f~(x) - f_opt``.
      value: ``(Q,)`` the true normalised values.
      reward: ``(Q,)`` ``r_j``.
      loss: ``(Q,)`` the learners' loss, in ``[0, 1]``.
      best_gap: ``(Q,)`` the best true gap after each evaluation.
      best_value: ``(Q,)`` the best true normalised value after each evaluation.
    """

    arms: jax.Array
    x: jax.Array
    parents: jax.Array
    observed: jax.Array
    gap: jax.Array
    value: jax.Array
    reward: jax.Array
    loss: jax.Array
    best_gap: jax.Array
    best_value: jax.Array


@dataclasses.dataclass(frozen=True)
class HPOEnv(Environment):
    """Algorithm selection among Eagle optimisers on one BBOB function (reactive).

    Attributes:
      function: the BBOB problem, with ``normalize=True``; its extra shift and rotation are
        drawn per run. A :class:`~stabl_jax.envs.bbob.BBOBSuite` gives one program for all of
        its functions.
      ensemble: the arms (default: :func:`stabl_jax.envs.eagle.eagle_grid`).
      reward_lambda: ``lambda`` of the reward (0.01, the paper's). Traced: the default of
        ``params.reward_lambda``, not part of the environment's identity.
      reward: ``"paper"`` or ``"vizier"`` (module docstring).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> env = HPOEnv(BBOBFunction(function_id=1, dim=4, normalize=True))
      >>> params = env.sample_params(jax.random.key(0))
      >>> evaluate = jax.jit(env.evaluate)  # compiled once, not run op by op
      >>> state, loss, info = evaluate(params, env.init(params), 0, jnp.array([3, 7]),
      ...                              jax.random.key(1))
      >>> loss.shape, int(state.num_evaluations)
      ((2,), 2)
    """

    function: BBOBFunction | BBOBSuite
    ensemble: eagle.EagleEnsemble | None = None
    reward_lambda: float = dataclasses.field(default=REWARD_LAMBDA, compare=False)
    reward: str = "paper"

    traced_defaults: ClassVar[bool] = True

    trace_names: ClassVar[tuple[str, ...]] = (
        "arms",
        "observed",
        "reward",
        "best_gap",
        "best_value",
    )

    def __post_init__(self) -> None:
        if not isinstance(self.function, BBOBFunction | BBOBSuite):
            raise TypeError(f"function must be a BBOBFunction or BBOBSuite, got {self.function!r}")
        if not self.function.normalize:
            raise ValueError("function must have normalize=True (rewards live on [0, 1])")
        if self.ensemble is None:
            object.__setattr__(self, "ensemble", eagle.EagleEnsemble(dim=self.function.dim))
        if self.arms.dim != self.dim:
            raise ValueError(f"ensemble.dim={self.arms.dim} does not match function.dim={self.dim}")
        check_reward_lambda(self.reward_lambda)
        checks.check_choice("reward", self.reward, REWARDS)

    @property
    def arms(self) -> eagle.EagleEnsemble:
        return self.ensemble  # type: ignore[return-value]

    @property
    def num_arms(self) -> int:
        return self.arms.num_arms

    @property
    def dim(self) -> int:
        return self.function.dim

    # --- parameters and state -----------------------------------------------------------------
    @property
    def default_params(self) -> HPONumbers:
        """The numbers of the dataclass and of its function as ``()`` arrays (call it outside
        any program): the only reader of the fields declared ``compare=False``."""
        dtype = jnp.zeros(()).dtype  # float32, or float64 under jax_enable_x64
        return HPONumbers(
            function=self.function.numbers,
            reward_lambda=jnp.asarray(self.reward_lambda, dtype),
            reward_width=jnp.asarray(1.0 + self.reward_lambda, dtype),
        )

    def sample_params(self, key: jax.Array, defaults: HPONumbers | None = None) -> HPOParams:
        """The run's function, the COCO instance shifted and rotated from ``key``, the Halton
        key ``fold_in(key, 2)`` and the numbers.

        Args:
          key: the run's key.
          defaults: :attr:`default_params`; a program passes them as a traced argument
            (:func:`stabl_jax.envs.base.sample_params`). ``None``: ``self.default_params``,
            constants of the program being traced.
        """
        numbers = self.default_params if defaults is None else defaults
        return self._run_params(self.function.sample_params(key, numbers.function), key, numbers)

    def problem_params(
        self, index: jax.Array | int, key: jax.Array, defaults: HPONumbers | None = None
    ) -> HPOParams:
        """:meth:`sample_params` with the suite's function ``index`` (a ``BBOBSuite`` only):
        equal to ``HPOEnv(suite.members[index], ...).sample_params(key)`` up to padding."""
        if not isinstance(self.function, BBOBSuite):
            raise TypeError("problem_params needs a BBOBSuite function; use sample_params")
        numbers = self.default_params if defaults is None else defaults
        function = self.function.problem_params(index, key, numbers.function)
        return self._run_params(function, key, numbers)

    def _run_params(self, function: Any, key: jax.Array, numbers: HPONumbers) -> HPOParams:
        return HPOParams(
            function=function,
            halton_key=jax.random.fold_in(key, 2),
            reward_lambda=numbers.reward_lambda,
            reward_width=numbers.reward_width,
        )

    def init(self, params: HPOParams) -> HPOState:
        """Empty pools, no evaluations."""
        dtype = params.function.coco.f_opt.dtype
        return HPOState(
            arms=self.arms.init(),
            best_observed=jnp.ones((), dtype),
            best_gap=jnp.asarray(jnp.inf, dtype),
            best_value=jnp.ones((), dtype),
            num_evaluations=jnp.zeros((), jnp.int32),
            evaluations_per_arm=jnp.zeros((self.num_arms,), jnp.int32),
            last_observed=jnp.ones((), dtype),
        )

    # --- one round ----------------------------------------------------------------------------
    def suggest(
        self, state: HPOState, arms: jax.Array, key: jax.Array, halton_key: jax.Array | None = None
    ) -> eagle.Suggestion:
        """The queried arms' suggestions only, ``x`` ``(Q, d)`` in the unit cube."""
        arms = jnp.asarray(arms, jnp.int32)
        params, pools = jax.tree.map(lambda a: a[arms], (self.arms.params(), state.arms))
        keys = _query_keys(key, arms.shape[0], 0)
        scramble_keys = None  # a pytree without leaves: vmap passes None to every query
        if halton_key is not None:
            scramble_keys = jax.vmap(lambda a: jax.random.fold_in(halton_key, a))(arms)
        return jax.vmap(lambda p, s, k, h: eagle.suggest(p, s, k, self.arms.fill, h))(
            params, pools, keys, scramble_keys
        )

    # HPOInfo is a Mapping at run time (chex's default), which its typing cannot express.
    def evaluate(  # type: ignore[override]
        self, params: HPOParams, state: HPOState, t: Any, query: Any, key: jax.Array
    ) -> tuple[HPOState, jax.Array, HPOInfo]:
        """Evaluate the queried arms' suggestions and record them in the shared state."""
        del t
        arms = jnp.asarray(getattr(query, "arms", query), jnp.int32)
        sug = self.suggest(state, arms, key, params.halton_key)
        x = to_domain(sug.x)
        gap, value, observed = self._observe(params.function, x, key)
        clipped = jnp.clip(observed, 0.0, 1.0)
        reward, loss = self._reward(params, state, observed, clipped)
        pools = self._record(state.arms, arms, sug, observed)
        best_gap = jnp.minimum(state.best_gap, jax.lax.cummin(gap))
        best_value = jnp.minimum(state.best_value, jax.lax.cummin(value))
        new_state = dataclasses.replace(
            state,
            arms=pools,
            best_observed=jnp.minimum(state.best_observed, jnp.min(clipped)),
            best_gap=best_gap[-1],
            best_value=best_value[-1],
            num_evaluations=state.num_evaluations + arms.shape[0],
            evaluations_per_arm=state.evaluations_per_arm.at[arms].add(1),
            last_observed=observed[-1],
        )
        info = HPOInfo(
            arms=arms,
            x=x,
            parents=sug.parent,
            observed=observed,
            gap=gap,
            value=value,
            reward=reward,
            loss=loss,
            best_gap=best_gap,
            best_value=best_value,
        )
        return new_state, loss, info

    def _observe(
        self, fn_params: Any, x: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(Q,)`` gaps, normalised values and noisy observations at ``x`` ``(Q, d)``."""
        gap = self.function.gap(fn_params, x)
        value = normalize_gap(gap, fn_params.norm_scale)  # = function.value(fn_params, x)
        if not self.function.noisy:
            return gap, value, value
        dtype = fn_params.coco.f_opt.dtype
        noise_keys = _query_keys(key, x.shape[0], 1)  # = function.observe, reusing the gap
        xi = jax.vmap(lambda k: jax.random.normal(k, (), dtype))(noise_keys)
        return gap, value, value + fn_params.noise_std * xi

    def _reward(
        self, params: HPOParams, state: HPOState, observed: jax.Array, clipped: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        """``(Q,)`` rewards and losses of the round's observations (module docstring)."""
        lam = params.reward_lambda
        if self.reward == "vizier":
            previous = jnp.concatenate([state.last_observed[None], observed[:-1]])
            trial = state.num_evaluations + jnp.arange(observed.shape[0])
            reward = vizier_reward(previous, observed, trial, lam)
            return reward, 1.0 - jnp.minimum(reward, 1.0)
        reward = jnp.maximum(state.best_observed - clipped, 0.0) - lam * clipped
        return reward, _width_loss(reward, params.reward_width)

    def _record(
        self, pools: eagle.EagleState, arms: jax.Array, sug: eagle.Suggestion, observed: jax.Array
    ) -> eagle.EagleState:
        """Every arm's pool after ingesting every evaluation, in query order."""
        ens_params = self.arms.params()
        arm_ids = jnp.arange(self.num_arms)

        def record(pools: eagle.EagleState, q: jax.Array) -> tuple[eagle.EagleState, None]:
            own = arm_ids == arms[q]
            parents = jnp.where(own, sug.parent[q], -1)
            pools = jax.vmap(eagle.update, in_axes=(0, 0, None, None, 0, 0))(
                ens_params, pools, sug.x[q], observed[q], parents, own
            )
            return pools, None

        return jax.lax.scan(record, pools, jnp.arange(arms.shape[0]))[0]


# --- Small pure helpers ---------------------------------------------------------------------------
def regularized_reward_to_loss(
    reward: jax.Array, reward_lambda: float = REWARD_LAMBDA
) -> jax.Array:
    """The learners' loss ``(1 - r) / (1 + lambda)``, mapping ``[-lambda, 1]`` onto ``[0, 1]``.

    Example:
      >>> import jax.numpy as jnp
      >>> regularized_reward_to_loss(jnp.array([1.0, -0.01, 0.0])).tolist()
      [0.0, 1.0, 0.9900990128517151]
    """
    return _width_loss(reward, 1.0 + reward_lambda)


def _width_loss(reward: jax.Array, width: jax.Array | float) -> jax.Array:
    """``(1 - r) / width`` clipped to ``[0, 1]``, ``width = 1 + lambda``."""
    return jnp.clip((1.0 - reward) / width, 0.0, 1.0)


def vizier_reward(
    previous: jax.Array, observed: jax.Array, trial: jax.Array, reward_lambda: Any = 0.0
) -> jax.Array:
    """The reward of Vizier's ``ObjectiveRewardGenerator`` fed one trial at a time.

    With ``m = min(f_prev, f)``: ``max(0, (f_prev - m) - lambda m)`` for ``trial >= 2``, else 0
    (also for a non-finite value).

    Args:
      previous: ``(...)`` the previous trial's observation ``f_prev``.
      observed: ``(...)`` this trial's observation ``f`` (lower is better).
      trial: ``(...)`` int, the trial's index in the run, from 0.
      reward_lambda: Vizier's ``reward_regularization`` (default 0; a float or ``()``).

    Returns:
      ``(...)`` the rewards, ``>= 0`` (not capped).

    Example:
      >>> import jax.numpy as jnp
      >>> f = jnp.array([0.5, 0.4, 0.6, 0.3, 0.35])
      >>> prev = jnp.concatenate([jnp.ones(1), f[:-1]])
      >>> [round(r, 6) for r in vizier_reward(prev, f, jnp.arange(5)).tolist()]
      [0.0, 0.0, 0.0, 0.3, 0.0]
    """
    best = jnp.minimum(previous, observed)
    reward = (previous - best) - reward_lambda * best
    ok = jnp.isfinite(reward) & (trial >= 2)
    return jnp.where(ok, jnp.maximum(reward, 0.0), 0.0)


def loss_to_regularized_reward(loss: jax.Array, reward_lambda: float = REWARD_LAMBDA) -> jax.Array:
    """The inverse of :func:`regularized_reward_to_loss`: ``r = 1 - (1 + lambda) loss``."""
    return 1.0 - (1.0 + reward_lambda) * loss


def to_domain(u: jax.Array) -> jax.Array:
    """Unit cube -> BBOB domain: ``x = -5 + 10 u``."""
    return DOMAIN_LOWER + (DOMAIN_UPPER - DOMAIN_LOWER) * u


def _query_keys(key: jax.Array, num_queries: int, stream: int) -> jax.Array:
    """``(Q,)`` keys ``fold_in(fold_in(key, q), stream)``."""
    return jax.vmap(lambda q: jax.random.fold_in(jax.random.fold_in(key, q), stream))(
        jnp.arange(num_queries, dtype=jnp.uint32)
    )


def check_reward_lambda(value: float) -> float:
    """``reward_lambda`` validation shared with configs: a float in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ValueError(f"reward_lambda must be a number in [0, 1), got {value!r}")
    return float(value)
