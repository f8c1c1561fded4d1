"""What bandit and BCO experiments share: learners compared on one environment, paired."""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
import time
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from stabl_jax import metrics, registry
from stabl_jax.experiment import plots, provenance, results, tables
from stabl_jax.experiment.configs import Checker, jsonable
from stabl_jax.experiment.identity import ExperimentCheckpoints
from stabl_jax.experiment.kinds import base
from stabl_jax.simulate import RunCarry, SimOptions, SimResult, auto_chunk_size, simulate

MIN_HORIZON = 16  # StABL's geometric intervals need T = 16 or T >= 32 (its own check)
DEFAULT_WINDOW = 50
# Keys of the top level, in the order they are documented.
TOP_LEVEL_KEYS: tuple[str, ...] = tuple(
    "kind name description seed runs horizon learners reference window sa_windows sa_stride "
    "chunk_size feedback save_traces env learner_options params".split()
)
# Keys of the top level that only one kind of experiment takes.
KIND_ONLY = {"feedback": "bandit", "sa_stride": "bco", "save_traces": "bandit"}
# Constructor arguments a config may not pass: they come from elsewhere in the config.
ENV_RESERVED = {"horizon": "set `horizon` at the top level"}
LEARNER_RESERVED = {
    **ENV_RESERVED,
    "dtype": "float64 states need jax_enable_x64, which the command line does not turn on",
}
#: The default ``reference``: the first of these a config runs, else its first learner.
DEFAULT_REFERENCES: tuple[str, ...] = ("stabl_tuned", "stabl")
#: With ``chunk_size`` absent, at least this many chunks per run (so a progress bar moves).
AUTO_MIN_CHUNKS = 16
#: Printed when a learner's meta-learner zeroed weights (``num_muted > 0``).
MUTED_WARNING = (
    "warning: {name} muted a meta weight {count} times over all runs and rounds: a factor "
    "1 + eta_k r~ <= 0 of Algorithm 1, line 13 set w(k) to 0 until expert k restarts. The "
    "paper's bound eta_k * 2B <= 1 that prevents it does not hold at these step sizes (tuned "
    "scales above the printed ones do this; the results are still valid runs of the learner)."
)

ProgressFactory = Callable[[str], Callable[[int, int], None] | bool]


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """The ``[env]`` table.

    Attributes:
      name: a name in the kind's environment registry, or an import path ``"module:Class"``.
      kwargs: the constructor arguments besides ``horizon``, TOML arrays as tuples (a BCO
        ``domain`` as ``{"name": ..., "size": ...}``).
    """

    name: str
    kwargs: Mapping[str, Any]

    @property
    def num_arms(self) -> int:
        return int(self.kwargs["num_arms"])


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """A validated config of learners compared on one environment; a kind subclasses it.

    Attributes:
      name: short name, used in titles and the default output folder.
      description: one line shown by ``stabl-jax list``.
      seed: ``jax.random.key(seed)`` drives every run of every learner.
      runs, horizon: independent runs ``R`` and rounds ``T`` (>= 16).
      learners: registry names or import paths, simulated in this order.
      reference: the learner every other one is compared with, run by run (one of
        ``learners``; :func:`default_reference` when the config leaves it out).
      env: the environment.
      window: moving-average window of the plots, in ``[1, T]``.
      sa_windows: increasing window lengths ``L`` of SA(L), each in ``[1, T]``.
      chunk_size: rounds per compiled chunk, or ``None`` for automatic.
      learner_options, params: per learner, constructor arguments and ``Params`` fields.
      source, overrides: the file read and the ``key=value`` overrides applied.
      feedback: bandit: ``"loss"`` or ``"reward"`` for learners whose option is unset.
      sa_stride: BCO: distance between SA(L) window starts (``None``: ``max(1, L // 4)``).
      save_traces: bandit: the ``(R, T)`` traces ``traces.npz`` keeps.
    """

    #: The config's ``kind``.
    kind: ClassVar[str]
    #: Where ``learners`` and ``[env] name`` are looked up.
    LEARNERS: ClassVar[registry.Registry]
    ENVS: ClassVar[registry.Registry]
    #: The ``[env]`` key the learners are sized by, and its smallest value.
    SIZE: ClassVar[tuple[str, int]]
    #: Learner constructor arguments a config may not pass, with the reason.
    RESERVED: ClassVar[Mapping[str, str]]

    name: str
    description: str
    seed: int
    runs: int
    horizon: int
    learners: tuple[str, ...]
    env: EnvConfig
    window: int
    sa_windows: tuple[int, ...]
    chunk_size: int | None
    learner_options: Mapping[str, Mapping[str, Any]]
    params: Mapping[str, Mapping[str, float]]
    source: str
    overrides: tuple[str, ...] = ()
    feedback: str = "loss"
    sa_stride: int | None = None
    save_traces: tuple[str, ...] = ("played",)
    reference: str = ""
    #: The environment and learners this config describes, each built once (by validation).
    built: dict[str, Any] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def reference_learner(self) -> str:
        """:attr:`reference`, or :func:`default_reference` of ``learners`` when it is empty."""
        return self.reference or default_reference(self.learners)

    # --- what a kind says ----------------------------------------------------------------------
    @classmethod
    def check_own(cls, check: Checker, raw: Mapping[str, Any], horizon: int) -> dict[str, Any]:
        """The kind's own top-level keys (of :data:`KIND_ONLY`), checked."""
        raise NotImplementedError

    @classmethod
    def check_env_value(cls, check: Checker, key: str, value: Any, hint: Any) -> Any:
        """The ``[env]`` value ``key`` checked against the constructor's type ``hint``."""
        return check.coerce(f"env.{key}", value, hint)

    def learner_sizes(self) -> dict[str, Any]:
        """The constructor arguments every learner gets from the environment."""
        raise NotImplementedError

    def header_details(self) -> tuple[str, str]:
        """What :func:`header` says of the environment's size and of the kind's own keys."""
        raise NotImplementedError

    def unused_settings(self) -> list[str]:
        """``[learner_options.X]`` and ``[params.X]`` tables of a learner not in ``learners``."""
        tables = {"learner_options": self.learner_options, "params": self.params}
        return [
            f"{table}.{name}"
            for table, settings in tables.items()
            for name in settings
            if name not in self.learners
        ]

    def learner_kwargs(self, name: str) -> dict[str, Any]:
        """Learner ``name``'s ``learner_options``."""
        return dict(self.learner_options.get(name, {}))

    #: The traces every learner's simulation records (``None``: the environment's).
    RECORDED: ClassVar[tuple[str, ...] | None] = None

    def recorded(self, learner: Any) -> tuple[str, ...] | None:
        """The traces ``learner``'s simulation records: :attr:`RECORDED`."""
        del learner
        return self.RECORDED

    def trace_bytes(self, learner: Any, width: int) -> tuple[int, int]:
        """Bytes per run and round ``learner`` records in memory and ``traces.npz`` keeps."""
        raise NotImplementedError

    def metrics_bytes(self, env: Any, width: int) -> int:
        """The most memory the metrics take at once beside the traces."""
        return max(metrics.SA_BLOCK_BYTES, int(self.horizon) * width * 12)

    # --- building the objects it describes ----------------------------------------------------
    @classmethod
    def build_env(cls, name: str, horizon: int, kwargs: Mapping[str, Any]) -> Any:
        """``ENVS.make(name, horizon=horizon, **kwargs)`` of the ``[env]`` values ``kwargs``."""
        return cls.ENVS.make(name, horizon=horizon, **kwargs)

    def make_env(self) -> Any:
        """The environment, ``ENVS.make(env.name, horizon=horizon, **env.kwargs)``, built once."""
        if "env" not in self.built:
            self.built["env"] = self.build_env(self.env.name, self.horizon, self.env.kwargs)
        return self.built["env"]

    def make_learner(self, name: str) -> Any:
        """Learner ``name`` for this config's environment and ``horizon``, built once."""
        if f"learner:{name}" not in self.built:
            self.built[f"learner:{name}"] = self.build_learner(name)
        return self.built[f"learner:{name}"]

    def build_learner(self, name: str, **options: Any) -> Any:
        """Learner ``name`` built anew with the config's options, ``options`` replacing them
        (so the defaults an option sets, ``d_ucb``'s discount from ``num_changes``, follow it)."""
        kwargs = {**self.learner_sizes(), **self.learner_kwargs(name), **options}
        return self.LEARNERS.make(name, horizon=self.horizon, **kwargs)

    def learner_params(self, learner: Any, name: str) -> Any:
        """``learner.default_params`` with the fields set in ``[params.name]`` replaced."""
        default = learner.default_params
        values = self.params.get(name, {})
        if not values:
            return default
        dtype = getattr(learner, "float_dtype", jnp.float32)
        return dataclasses.replace(default, **{k: jnp.asarray(v, dtype) for k, v in values.items()})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the resolved config (defaults filled in)."""
        return {
            **base.identity_dict(self),
            "horizon": self.horizon,
            "learners": list(self.learners),
            "reference": self.reference_learner,
            "window": self.window,
            "sa_windows": list(self.sa_windows),
            "chunk_size": self.chunk_size,
            **{k: jsonable(getattr(self, k)) for k, kind in KIND_ONLY.items() if kind == self.kind},
            "env": {"name": self.env.name, **jsonable(dict(self.env.kwargs))},
            "learner_options": jsonable({k: dict(v) for k, v in self.learner_options.items()}),
            "params": {k: dict(v) for k, v in self.params.items()},
            "source": self.source,
            "overrides": list(self.overrides),
        }

    # --- validation -----------------------------------------------------------------------------
    @classmethod
    def validate(
        cls,
        raw: Mapping[str, Any],
        check: Checker,
        *,
        source: str,
        default_name: str,
        overrides: tuple[str, ...],
    ) -> ExperimentConfig:
        """Validate a parsed TOML document of this kind; every learner is built once to check it."""
        # Independent keys are checked together; building the learners needs them all.
        base.check_keys(check, raw, TOP_LEVEL_KEYS, ())
        for key, only in KIND_ONLY.items():
            if key in raw and cls.kind != only:
                with check.collect():
                    check.fail(
                        key, f"is only for kind = {only!r} experiments (this one is {cls.kind!r})"
                    )
        for key in ("horizon", "learners", "env"):
            if key not in raw:
                with check.collect():
                    check.fail(key, "is required")
        checked: dict[str, Any] = {}

        keep = functools.partial(check.keep, checked)
        keep("identity", base.check_identity, check, raw, default_name)
        if "horizon" in raw:
            keep("horizon", check.integer, "horizon", raw["horizon"], MIN_HORIZON)
        if "learners" in raw:
            keep("learners", base.check_learners, check, raw["learners"], cls.LEARNERS)
        horizon = checked.get("horizon")
        if "learners" in checked:
            keep("reference", _check_reference, check, raw.get("reference"), checked["learners"])
        if horizon is not None:
            keep("window", _check_window, check, raw.get("window", DEFAULT_WINDOW), horizon)
            keep("sa_windows", _check_sa_windows, check, raw.get("sa_windows"), horizon)
            keep("own", cls.check_own, check, raw, horizon)
            if "env" in raw:
                keep("env", cls._check_env, check, raw["env"], horizon)
        checked["chunk_size"] = None
        if raw.get("chunk_size") is not None:
            keep("chunk_size", check.integer, "chunk_size", raw["chunk_size"], 1)
        options = raw.get("learner_options", {})
        keep("learner_options", _check_learner_options, check, options, cls.LEARNERS, cls.RESERVED)
        keep("params", _check_params, check, raw.get("params", {}), cls.LEARNERS)
        check.done()
        identity, own = checked.pop("identity"), checked.pop("own")
        checked["env"], env = checked["env"]
        config = cls(**identity, **own, **checked, source=source, overrides=tuple(overrides))
        config.built["env"] = env
        for learner_name in checked["learners"]:
            with check.collect():
                _check_learner(check, config, learner_name)
        check.done()
        return config

    @classmethod
    def _check_env(cls, check: Checker, value: Any, horizon: int) -> tuple[EnvConfig, Any]:
        table = check.table("env", value)
        if "name" not in table:
            check.fail("env.name", f"is required; choose from {sorted(cls.ENVS)}")
        name = check.string("env.name", table["name"])
        hints = base.entry(check, "env.name", cls.ENVS, name).hints
        size, smallest = cls.SIZE
        if size not in table:
            check.fail(f"env.{size}", f"is required (an int >= {smallest})")
        kwargs: dict[str, Any] = {}
        for key, item in table.items():
            if key == "name":
                continue
            if key in ENV_RESERVED:
                check.fail(f"env.{key}", f"cannot be set here: {ENV_RESERVED[key]}")
            if key not in hints:
                allowed = ["name", *(k for k in hints if k not in ENV_RESERVED)]
                check.unknown(f"env.{key}", allowed, f"{name!r} environment")
            kwargs[key] = cls.check_env_value(check, key, item, hints[key])
        try:
            env = cls.build_env(name, horizon, kwargs)
        except (TypeError, ValueError) as exc:
            check.fail("env", f"invalid {name!r} environment: {exc}")
        problem = cls.env_problem(env)
        if problem:
            check.fail("env.name", f"environment {name!r}: {type(env).__name__} {problem}")
        return EnvConfig(name=name, kwargs=types.MappingProxyType(kwargs)), env

    @classmethod
    def env_problem(cls, env: Any) -> str:
        """What ``env`` lacks that an experiment reads, with the remedy; ``""`` when nothing.

        An environment with ``num_segments`` declares change points: it needs ``change_points``
        (its fixed points, or ``random_change_points = True``) and params whose
        ``change_points`` are ``(num_segments - 1,)``. One without is one segment. A declared
        capability (``has_best_arm``, ``piecewise``) and its members agree.
        """
        for flag, member in (("has_best_arm", "best_arm"), ("piecewise", "num_segments")):
            if bool(getattr(env, flag, False)) != hasattr(env, member):
                said = (
                    f"declares {flag} = True but has no {member}"
                    if getattr(env, flag, False)
                    else f"has {member} but does not declare {flag} = True (a class attribute)"
                )
                return f"{said}: capabilities are declared (see {cls.ENVS.guide})"
        if not has_segments(env):
            return ""
        remedy = (
            "; an environment without change points has no num_segments and is one segment "
            f"(see {cls.ENVS.guide})"
        )
        if not (hasattr(env, "change_points") or getattr(env, "random_change_points", False)):
            return f"has num_segments but no change_points (its fixed change points){remedy}"
        params, failed = traced(env.sample_params, "sample_params")
        if failed:
            return f"{failed} (see {cls.ENVS.guide})"
        points = getattr(params, "change_points", None)
        want = (int(env.num_segments) - 1,)
        if points is None or tuple(points.shape) != want:
            got = "none" if points is None else f"shape {tuple(points.shape)}"
            return (
                f"has num_segments = {env.num_segments}, but sample_params returns params "
                f"whose change_points are {got}, not {want} int32 (a field change_points of "
                f"the params pytree: the rounds each run's segments start){remedy}"
            )
        return ""


def traced(fn: Callable[[jax.Array], Any], what: str) -> tuple[Any, str]:
    """``(jax.eval_shape(fn, key), "")``, or ``(None, why)`` when tracing ``fn`` raises."""
    try:
        return jax.eval_shape(fn, jax.random.key(0)), ""
    except Exception as exc:  # a user's code: reported with the class, never a traceback
        return None, f"{what} fails when traced: {type(exc).__name__}: {exc}"


def default_reference(learners: Sequence[str]) -> str:
    """The learner others are compared with when a config names none: the first of
    :data:`DEFAULT_REFERENCES` in ``learners``, else the first learner."""
    return next((name for name in DEFAULT_REFERENCES if name in learners), learners[0])


def _check_reference(check: Checker, value: Any, learners: tuple[str, ...]) -> str:
    """``reference``: one of ``learners`` (absent: :func:`default_reference`)."""
    if value is None:
        return default_reference(learners)
    name = check.string("reference", value)
    if name not in learners:
        check.fail(
            "reference",
            f"is {name!r}, which is not among learners = {list(learners)}: the paired "
            "differences subtract a learner the experiment runs; name one of them (--set "
            f"reference=NAME) or leave reference out (default: {default_reference(learners)!r})",
        )
    return name


def _check_window(check: Checker, window: Any, horizon: int) -> int:
    """``window``: the moving average's length, in ``[1, horizon]``."""
    if isinstance(window, int) and not isinstance(window, bool) and window > horizon:
        check.fail(
            "window",
            f"is {window}, longer than horizon = {horizon}: the moving-average window must "
            f"be in [1, horizon]; set it with the horizon (--set window=N, N <= {horizon})",
        )
    return check.integer("window", window, 1, horizon)


def default_sa_windows(horizon: int) -> tuple[int, ...]:
    """Powers of two ``2^4, 2^5, ...`` up to ``horizon``."""
    return tuple(2**k for k in range(4, int(math.log2(horizon)) + 1))


def _check_learner(check: Checker, config: ExperimentConfig, name: str) -> None:
    """Build learner ``name`` (its own checks catch bad values) and check its ``[params]``."""
    try:
        learner = config.make_learner(name)
    except (TypeError, ValueError) as exc:
        _blame_learner(check, config, name, exc)
    default = learner.default_params
    fields = dataclasses.fields(default) if dataclasses.is_dataclass(default) else ()
    allowed = [f.name for f in fields]
    dtype = np.dtype(getattr(learner, "float_dtype", np.float32))
    for field, number in config.params.get(name, {}).items():
        if field not in allowed:
            check.unknown(f"params.{name}.{field}", allowed, "param")
        with np.errstate(over="ignore", under="ignore"):
            stored = np.asarray(number).astype(dtype)
        if not np.isfinite(stored) or (stored == 0) != (number == 0):
            check.fail(
                f"params.{name}.{field}",
                f"{number!r} is outside the range of the learner's {dtype} (it would be "
                f"stored as {stored}); use a value between {np.finfo(dtype).tiny:g} and "
                f"{np.finfo(dtype).max:g}",
            )
    if config.params.get(name) and hasattr(learner, "check_params"):
        try:  # the learner's own ranges (e.g. gamma <= 1, meta_lr_scale > 0)
            learner.check_params(config.learner_params(learner, name))
        except (TypeError, ValueError) as exc:
            check.fail(f"params.{name}", f"learner {name!r} rejects: {exc}")


def _blame_learner(
    check: Checker, config: ExperimentConfig, name: str, exc: Exception
) -> typing.NoReturn:
    """Report a learner that cannot be built under the key that caused it.

    That is its ``learner_options`` when it builds without them, else ``horizon`` or ``env``.
    """
    if name in config.learner_options:
        rest = {k: v for k, v in config.learner_options.items() if k != name}
        try:
            dataclasses.replace(config, learner_options=rest).make_learner(name)
        except (TypeError, ValueError):
            pass
        else:
            check.fail(f"learner_options.{name}", f"learner {name!r} rejects its options: {exc}")
    if "horizon" in str(exc):
        check.fail("horizon", f"learner {name!r} cannot run {config.horizon} rounds: {exc}")
    check.fail("env", f"learner {name!r} rejects the environment: {exc}")


def _check_sa_windows(check: Checker, value: Any, horizon: int) -> tuple[int, ...]:
    if value is None:
        return default_sa_windows(horizon)
    windows = base.check_ints(check, "sa_windows", value, 1, horizon)
    return tuple(sorted(base.check_distinct(check, "sa_windows", windows)))


def _check_learner_options(
    check: Checker, value: Any, known: registry.Registry, reserved: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for learner_name, options in check.table("learner_options", value).items():
        key = f"learner_options.{learner_name}"
        hints = base.entry(check, key, known, learner_name).hints
        accepted = [k for k in hints if k not in reserved]
        out[learner_name] = {}
        for option, item in check.table(key, options).items():
            if option in reserved:
                check.fail(f"{key}.{option}", f"cannot be set here: {reserved[option]}")
            if option not in hints:
                check.unknown(f"{key}.{option}", accepted, "option")
            out[learner_name][option] = check.coerce(f"{key}.{option}", item, hints[option])
    return out


def _check_params(
    check: Checker, value: Any, known: registry.Registry
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for learner_name, values in check.table("params", value).items():
        key = f"params.{learner_name}"
        base.entry(check, key, known, learner_name)
        out[learner_name] = {}
        for field, item in check.table(key, values).items():
            if isinstance(item, list):
                check.fail(
                    f"{key}.{field}",
                    f"must be one number, got the array {item!r}; to sweep values run "
                    f"`stabl-jax sweep CONFIG --grid {learner_name}.{field}="
                    f"{','.join(map(str, item))}`",
                )
            out[learner_name][field] = check.number(f"{key}.{field}", item, 0)
    return out


@dataclasses.dataclass
class Outcome:
    """One learner's simulation; a kind's outcome adds its metrics.

    Attributes:
      name, learner, params: its registry name, the learner object and the params it ran with.
      result: its :class:`~stabl_jax.simulate.SimResult` (``(R, T)`` traces).
      num_muted: meta-weight muting events over all runs, or ``None``.
      wall_seconds: simulation wall time (compile, run and transfers).
    """

    name: str
    learner: Any
    params: Any
    result: SimResult
    num_muted: int | None
    wall_seconds: float


@dataclasses.dataclass
class Result:
    """Everything one experiment produced, in memory; a kind's result adds its metrics.

    Attributes:
      config, env: the validated config and the environment.
      outcomes: per learner, in config order.
      change_points: ``(R, S - 1)`` change points of every run.
      chunk_size: rounds per compiled chunk.
      wall_seconds, metrics_seconds: total wall time, and the metrics' part.
    """

    config: ExperimentConfig
    env: Any
    outcomes: dict[str, Any]
    change_points: np.ndarray
    chunk_size: int
    wall_seconds: float
    metrics_seconds: float

    @property
    def num_segments(self) -> int:
        return num_segments(self.env)


#: A kind's :class:`Result` subclass.
ResultT = TypeVar("ResultT", bound=Result)


def env_width(env: Any) -> int:
    """The arms (bandit) or the dimension (BCO) of ``env``."""
    return int(getattr(env, "num_arms", 0) or getattr(env, "dim", 1))


def recorded_bytes(config: ExperimentConfig) -> int:
    """The most bytes per run and round a learner of ``config`` records in memory."""
    width = env_width(config.make_env())
    return max(config.trace_bytes(config.make_learner(n), width)[0] for n in config.learners)


def resolve_chunk_size(config: ExperimentConfig, recorded: int | None = None) -> int:
    """Rounds per chunk: ``config.chunk_size`` (at most ``T``), else automatic.

    The automatic size fits ``recorded`` bytes per run and round (``None``:
    :func:`recorded_bytes`) in :func:`~stabl_jax.simulate.auto_chunk_size`'s budget, with at
    least :data:`AUTO_MIN_CHUNKS` chunks a run.
    """
    if config.chunk_size is not None:
        return min(config.chunk_size, config.horizon)
    per_round = max(1, recorded_bytes(config) if recorded is None else recorded)
    budget = auto_chunk_size(config.runs, config.horizon, bytes_per_round=per_round)
    return max(1, min(budget, math.ceil(config.horizon / AUTO_MIN_CHUNKS)))


def simulate_learners(
    config: ExperimentConfig,
    env: Any,
    *,
    progress: ProgressFactory | None = None,
    checkpoints: ExperimentCheckpoints | None = None,
    validate: bool,
) -> Iterator[tuple[str, Any, Any, SimResult, float]]:
    """``(name, learner, params, result, seconds)`` of every learner in turn, with one key."""
    key = jax.random.key(config.seed)
    chunk = resolve_chunk_size(config)
    for name in config.learners:
        learner = config.make_learner(name)
        params = config.learner_params(learner, name)
        start = time.perf_counter()
        options = SimOptions(
            chunk_size=chunk,
            progress=progress(name) if progress is not None else False,
            checkpoint=checkpoints.for_learner(name) if checkpoints is not None else None,
        )
        try:
            result = simulate(
                learner,
                env,
                key,
                config.runs,
                horizon=config.horizon,
                params=params,
                traces=config.recorded(learner),
                validate=validate,
                options=options,
            )
        except checkify.JaxRuntimeError as exc:
            raise validation_failed(config, name, exc) from None
        yield name, learner, params, result, time.perf_counter() - start


def validation_failed(
    config: ExperimentConfig, name: str, exc: checkify.JaxRuntimeError
) -> base.RunFailed:
    """One line for a failed in-program check of learner ``name``'s run (``validate=True``):
    the check's own message (the round, the value and the remedy), with the learner named."""
    what = " ".join(str(exc).replace("(`check` failed)", "").split())
    return base.RunFailed(
        f"learner {name!r} on environment {config.env.name!r} failed validation: {what} "
        "(docs/environments.md, 'Validation')"
    )


def run_learners(
    config: ExperimentConfig,
    outcome_type: type[Outcome],
    measure: Callable[[Any, SimResult], dict[str, Any]],
    measure_all: Callable[[Any, RunCarry, dict[str, Any]], dict[str, Any]],
    result_type: type[ResultT],
    on_learner_done: Callable[[Any], None] | None = None,
    **options: Any,
) -> ResultT:
    """Simulate every learner of ``config`` into an ``outcome_type``."""
    start = time.perf_counter()
    env = config.make_env()
    outcomes: dict[str, Any] = {}
    metrics_s = 0.0
    for name, learner, params, result, sim_s in simulate_learners(config, env, **options):
        metric_start = time.perf_counter()
        outcome = outcome_type(
            name=name,
            learner=learner,
            params=params,
            result=result,
            num_muted=num_muted(result.final_carry("the muting count")),
            wall_seconds=sim_s,
            **measure(env, result),
        )
        metrics_s += time.perf_counter() - metric_start
        outcomes[name] = outcome
        if on_learner_done is not None:
            on_learner_done(outcome)
    metric_start = time.perf_counter()
    carry = next(iter(outcomes.values())).result.final_carry("the paired metrics")
    fields = measure_all(env, carry, outcomes)
    metrics_s += time.perf_counter() - metric_start
    points = getattr(carry.env_params, "change_points", np.zeros((config.runs, 0)))  # every run's
    return result_type(
        config=config,
        env=env,
        outcomes=outcomes,
        change_points=np.reshape(points, (config.runs, num_segments(env) - 1)).astype(np.int32),
        chunk_size=resolve_chunk_size(config),
        wall_seconds=time.perf_counter() - start,
        metrics_seconds=metrics_s,
        **fields,
    )


def num_muted(carry: RunCarry) -> int | None:
    """Meta-weight muting events summed over runs, or ``None`` for a learner without them."""
    muted = getattr(carry.state, "num_muted", None)
    if muted is None:
        return None
    return int(np.asarray(muted, dtype=np.int64).sum())


def estimate(config: ExperimentConfig) -> base.Resources:
    """An experiment's memory and disk from its config alone (shapes by :func:`jax.eval_shape`)."""
    runs, horizon = int(config.runs), int(config.horizon)
    env = config.make_env()
    key = jax.random.key(0)
    width = env_width(env)
    env_bytes = base.tree_bytes(jax.eval_shape(env.sample_params, key))
    learners = [config.make_learner(name) for name in config.learners]
    sizes = [config.trace_bytes(learner, width) for learner in learners]
    widest = max(recorded for recorded, _ in sizes)
    chunk = runs * resolve_chunk_size(config, recorded=widest) * widest
    state = runs * max(base.tree_bytes(jax.eval_shape(x.init, key)) + env_bytes for x in learners)
    programs = [
        base.Program(
            state, chunk, 0, runs * horizon * recorded, runs * horizon * (recorded + saved)
        )
        for recorded, saved in sizes
    ]
    kept = sum(runs * horizon * saved for _, saved in sizes)
    plan = base.Plan(
        tuple(programs),
        size=f"{runs} runs x {horizon} rounds x {len(learners)} learners",
        remedy="lower runs or horizon (--runs, --set horizon=...)",
        state_copies=3,
        end_bytes=2 * kept + config.metrics_bytes(env, width),
        keeps_states=True,
    )
    return base.estimate_resources(plan)


def learner_header(outcome: Outcome) -> dict[str, Any]:
    """What every learner's summary starts with: names, constructor, params, timings."""
    learner = outcome.learner
    return {
        "label": plots.label(outcome.name),
        "class": type(learner).__name__,
        "num_queries": int(learner.num_queries),
        "constructor": provenance.static_fields(learner),
        "params": provenance.params_dict(outcome.params),
        "compile_seconds": outcome.result.compile_seconds,
        "run_seconds": outcome.result.run_seconds,
        "simulate_seconds": outcome.wall_seconds,
        # The path that stepped the runs: "pallas" (fused kernel) or "xla" (BCO's only).
        "kernel": getattr(outcome.result, "kernel", "xla"),
    }


def has_segments(env: Any) -> bool:
    """Whether ``env`` declares segments (:attr:`~stabl_jax.envs.base.Environment.piecewise`:
    ``num_segments`` and change points); see :meth:`env_problem`."""
    return bool(getattr(env, "piecewise", False))


def num_segments(env: Any) -> int:
    """``env.num_segments``, or 1 for an environment without change points (the whole run)."""
    return int(env.num_segments) if has_segments(env) else 1


def fixed_change_points(env: Any) -> tuple[int, ...] | None:
    """The environment's change points (none without segments), or ``None`` when they are
    drawn per run."""
    if not has_segments(env):
        return ()
    if getattr(env, "random_change_points", False):
        return None
    return tuple(int(t) for t in env.change_points)


def build_summary(
    result: Result,
    started: str | None,
    notes: Mapping[str, str],
    learner_summary: Callable[[Any, tuple[int, ...]], dict[str, Any]],
    plot_files: Mapping[str, str],
    per_run: PerRun,
    **entries: Any,
) -> dict[str, Any]:
    """The ``summary.json`` of a bandit or BCO experiment (:func:`learner_entries`)."""
    config = result.config
    points = fixed_change_points(result.env)
    summary = {
        "format": tables.FORMAT,
        "kind": config.kind,
        "name": config.name,
        "description": config.description,
        "started": started,
        "seed": config.seed,
        "runs": config.runs,
        "horizon": config.horizon,
        "config": config.to_dict(),
        "env": {  # every field of the environment, and its change points
            "name": config.env.name,
            "class": type(result.env).__name__,
            **provenance.static_fields(result.env),
            "change_points": None if points is None else list(points),
        },
        **provenance.environment_info(),
        "timings": {
            "wall_seconds": result.wall_seconds,
            "metrics_seconds": result.metrics_seconds,
            "chunk_size": result.chunk_size,
            "learners": {
                name: {
                    "compile_seconds": o.result.compile_seconds,
                    "run_seconds": o.result.run_seconds,
                }
                for name, o in result.outcomes.items()
            },
        },
        **entries,
        "notes": {
            "ci95": "half-width of the Student-t 95% interval over runs, "
            "t_{0.975, runs - 1} sd / sqrt(runs) (stabl_jax.metrics.mean_ci)",
            **notes,
            "paired": "every learner was simulated with the same key: identical environment "
            "draws in every run; a learner's 'paired' entry holds its metrics minus those of "
            f"the reference learner ({config.reference_learner}), run by run, with the "
            "Student-t 95% half-width of those differences",
        },
        "learners": learner_entries(result, learner_summary, per_run),
        "files": {
            "summary": tables.SUMMARY,
            "traces": tables.TRACES,
            "plots": dict(plot_files),
            "curves": plots.CURVES,
        },
    }
    return tables.clean(summary)


def learner_entries(
    result: Result,
    learner_summary: Callable[[Any, tuple[int, ...]], dict[str, Any]],
    per_run: PerRun,
) -> dict[str, dict[str, Any]]:
    """``summary.json``'s ``learners``: ``learner_summary`` of every learner, and for every
    one but the reference a ``paired`` entry, :func:`paired_differences` of ``per_run``."""
    config = result.config
    learners = {
        name: learner_summary(outcome, config.sa_windows)
        for name, outcome in result.outcomes.items()
    }
    for name, difference in paired_differences(result, per_run).items():
        learners[name]["paired"] = {"reference": config.reference_learner, **difference}
    return learners


#: Per-run metrics of a learner's outcome (and the SA(L) window lengths): ``(R,)`` or
#: ``(R, k)`` arrays, nested in dicts, other values (window lengths) kept as they are.
PerRun = Callable[[Any, tuple[int, ...]], dict[str, Any]]


def paired_differences(result: Result, per_run: PerRun) -> dict[str, dict[str, Any]]:
    """Per learner but the reference, ``per_run(outcome)`` minus the reference's, run by run
    (every learner faces the same draws), as :func:`~stabl_jax.experiment.tables.stat`: the
    mean difference and its Student-t 95% half-width over runs."""
    reference, windows = result.config.reference_learner, result.config.sa_windows
    base = per_run(result.outcomes[reference], windows)

    def minus(mine: Any, theirs: Any) -> Any:
        if isinstance(mine, Mapping):
            return {key: minus(value, theirs[key]) for key, value in mine.items()}
        if isinstance(mine, np.ndarray):
            return tables.stat(mine - theirs)
        return mine

    return {
        name: minus(per_run(outcome, windows), base)
        for name, outcome in result.outcomes.items()
        if name != reference
    }


def difference_table(
    result: Result, cells: Callable[[Any], list[tuple[np.ndarray, int]]], header: list[str]
) -> str:
    """The printed table of paired differences: per learner but the reference, each of
    ``cells(outcome)`` (an ``(R,)`` per-run value and its digits) minus the reference's."""
    reference = result.config.reference_learner
    base = cells(result.outcomes[reference])
    rows = [["learner", *header]]
    for name, outcome in result.outcomes.items():
        if name != reference:
            row = [name]
            for (mine, digits), (theirs, _) in zip(cells(outcome), base, strict=True):
                row.append(tables.plus_minus(*metrics.mean_ci(mine - theirs), digits))
            rows.append(row)
    return tables.text_table(
        rows,
        f"minus {reference}, paired by run: {over(result.config.runs)} of the differences",
    )


def trace_arrays(
    result: Result, traces: Mapping[str, np.dtype], measured: Sequence[str], **extra: np.ndarray
) -> dict[str, np.ndarray]:
    """Arrays of ``traces.npz``: ``env/change_points``, ``sa_window_lengths``, ``extra``, then
    per learner ``name/trace`` (of its result, ``traces``' dtype) and ``measured`` (float64)."""
    arrays: dict[str, np.ndarray] = {
        "env/change_points": result.change_points.astype(np.int32),
        "sa_window_lengths": np.asarray(result.config.sa_windows, np.int64),
        **extra,
    }
    for name, outcome in result.outcomes.items():
        for trace, dtype in traces.items():
            arrays[f"{name}/{trace}"] = getattr(outcome.result, trace).astype(dtype)
        for field in measured:
            arrays[f"{name}/{field}"] = getattr(outcome, field).astype(np.float64)
    return arrays


def moving_band(
    name: str, values: np.ndarray, window: int, of: metrics.Transform | None = None
) -> plots.Band:
    """The moving average of ``of(values)`` (``(R, T)``) over runs, with its 95% band."""
    mean, half = metrics.moving_mean_ci(values, window, of)
    return plots.Band(name, plots.label(name), np.arange(values.shape[1]), mean, half)


def regret_band(outcome: Outcome, sa: np.ndarray, window_lengths: Any) -> plots.Band:
    """SA(L) against L over runs, with the queries per round in the legend."""
    mean, half = metrics.mean_ci(sa, axis=0)
    label = f"{plots.label(outcome.name)} ({per_round(outcome.learner.num_queries)})"
    return plots.Band(outcome.name, label, np.asarray(window_lengths), mean, half)


def per_round(queries: int) -> str:
    """``"1 query/round"``, ``"3 queries/round"``."""
    return f"{queries} {'query' if queries == 1 else 'queries'}/round"


def header(config: ExperimentConfig, out: Path, needs: base.Resources | None) -> str:
    """The lines ``stabl-jax run`` prints first (:meth:`ExperimentConfig.header_details`)."""
    size, detail = config.header_details()
    env = config.make_env()
    fixed = fixed_change_points(env)
    points = "random per run" if fixed is None else ", ".join(map(str, fixed)) or "none"
    segments = (
        f"{num_segments(env)} segments (change points: {points})"
        if num_segments(env) > 1 or fixed is None
        else "one segment (no change points)"
    )
    setting = [
        f"  env: {config.env.name}, {size}, T={config.horizon} rounds, {segments}",
        f"  {config.runs} runs, seed {config.seed}, {detail}, "
        f"chunks of {resolve_chunk_size(config)} rounds; same key for every learner (paired)",
    ]
    unused = config.unused_settings()
    notes = [f"  not used (no such learner in learners): {', '.join(unused)}"] if unused else []
    return base.header(config, out, needs, setting, notes)


def resumed_rounds(config: ExperimentConfig, progress: Mapping[str, int]) -> str:
    """The rounds each learner of a resumed run has done (:func:`.base.resumed_line`)."""
    totals = {name: config.horizon for name in [*config.learners, *progress]}
    return base.resumed_line(totals, progress)


def run(
    run_experiment: Callable[..., ResultT],
    config: ExperimentConfig,
    *,
    checkpoints: ExperimentCheckpoints,
    resumed: results.Resumed | None,
    progress: bool,
    log: Callable[[str], None],
    metrics_label: str,
) -> ResultT:
    """``run_experiment(config, ...)`` as ``stabl-jax run`` shows it, with progress bars."""
    if resumed is not None:
        log(f"  resuming {resumed.source.name}: {resumed_rounds(config, resumed.progress)}")

    def learner_done(outcome: Outcome) -> None:
        queries = per_round(int(outcome.learner.num_queries))
        muted = "" if outcome.num_muted is None else f", muted {outcome.num_muted}"
        log(
            f"  {outcome.name:<20} {queries:<16} compile "
            f"{outcome.result.compile_seconds:5.1f} s  run {outcome.result.run_seconds:6.1f} s"
            f"{muted}"
        )
        if outcome.num_muted:
            log(f"  {MUTED_WARNING.format(name=outcome.name, count=outcome.num_muted)}")

    result = run_experiment(
        config,
        progress=progress_bars(config.horizon) if progress else None,
        on_learner_done=learner_done,
        checkpoints=checkpoints,
        validate=True,
    )
    log(f"  metrics ({metrics_label}): {result.metrics_seconds:.1f} s")
    return result


def progress_bars(horizon: int) -> ProgressFactory:
    """Per learner, a tqdm bar driven by ``simulate``'s per-chunk progress callback.

    The bars are drawn only when stderr is a terminal.
    """
    from tqdm import tqdm  # only when bars are shown

    def for_learner(name: str) -> Callable[[int, int], None]:
        bar = tqdm(
            total=horizon,
            desc=f"  {name}",
            unit="round",
            leave=False,
            file=sys.stderr,
            disable=None,  # drawn only when stderr is a terminal, not into a log
        )

        def update(done: int, total: int) -> None:
            bar.update(done - bar.n)
            if done >= total:
                bar.close()

        return update

    return for_learner


def pick_windows(windows: Sequence[int]) -> dict[int, int]:
    """Up to three window lengths to print (the first, the middle, the last): ``{L: column}``."""
    picked = range(len(windows)) if len(windows) <= 3 else (0, len(windows) // 2, len(windows) - 1)
    return {windows[column]: column for column in picked}


def over(runs: int) -> str:
    """What a table's ``±`` means."""
    return f"mean ± 95% CI over {runs} runs" if runs > 1 else "one run (no CI)"
