"""Experiment configs: TOML files validated on load, with ``--set key=value`` overrides.

A config names an environment, the learners to compare on it (all simulated with the same key,
so every learner faces the same environment draws: a paired comparison), and the sizes of the
Monte Carlo study. Example (``configs/expert_advice_equal.toml``)::

    name = "expert_advice_equal"
    description = "Fig. 1 (left): N=30, T=4096, four equal segments"
    seed = 0
    runs = 500
    horizon = 4096
    learners = ["uniform", "exp3_uniform", "stabl", "stabl_naive", "stabl_single_scale"]
    window = 50                      # moving-average window of the reward plot
    feedback = "loss"                # or "reward"; for learners that accept it
    # sa_windows = [16, 32, ...]     # SA(L) window lengths; default 2^4 .. horizon
    # chunk_size = 256               # rounds per compiled chunk; absent = auto
    # save_traces = ["played"]       # (R, T) traces kept in traces.npz; "all" or "none"

    [env]
    name = "expert_advice"           # a name in stabl_jax.registry.ENVS, or "package.module:Class"
    num_arms = 30                    # ... and that environment's constructor arguments
    num_segments = 4

    [learner_options.stabl_single_scale]   # extra constructor arguments of one learner
    history_lengths = [1024]

    [params.stabl]                   # values of that learner's Params fields
    meta_lr_scale = 1.0

A BCO experiment (``kind = "bco"``, see ``configs/bco_d2.toml``) has the same keys, with
``[env]`` naming a :data:`stabl_jax.registry.CONVEX_ENVS` entry (``dim`` required; the
domain as ``domain = "ball"`` or ``domain = {name = "box", size = 0.5}``), ``learners`` from
:data:`stabl_jax.registry.BCO_LEARNERS`, no ``feedback``, and an optional ``sa_stride`` (distance
between SA(L) window starts; absent is ``max(1, L // 4)``)::

    kind = "bco"
    horizon = 4096
    learners = ["stabl_bco", "stabl_bco_two_query", "fkm", "two_point_ogd", "ogd_full_info"]

    [env]
    name = "moving_target"
    dim = 2
    domain = "ball"
    change_points = [400, 1100, 1300, 2600, 3500]

    [params.fkm]
    lr_scale = 1.0

Learner and environment names are registry names (:mod:`stabl_jax.registry`) or import paths
of your own classes, ``"package.module:Class"`` (the module importable, e.g. on ``PYTHONPATH``);
their tables are then quoted keys (``[params."mypkg.mod:MyLearner"]``).

Every problem found on load raises :class:`ConfigError` naming the key, the file and what is
allowed. Environment and learner keyword arguments are checked against the constructor's
dataclass fields and type hints, then by constructing the object (its own checks).
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import math
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stabl_jax import registry
from stabl_jax.domains import DOMAINS, make_domain

if typing.TYPE_CHECKING:
    from stabl_jax.hpo_experiment import HPOConfig

KINDS: tuple[str, ...] = ("bandit", "bco", "hpo")
FEEDBACKS: tuple[str, ...] = ("loss", "reward")
MIN_HORIZON = 16  # StABL's geometric intervals need T = 16 or T >= 32 (its own check)
DEFAULT_WINDOW = 50
DEFAULT_RUNS = 100
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# Keys of the top level, in the order they are documented.
TOP_LEVEL_KEYS: tuple[str, ...] = (
    "kind",
    "name",
    "description",
    "seed",
    "runs",
    "horizon",
    "learners",
    "window",
    "sa_windows",
    "sa_stride",
    "chunk_size",
    "feedback",
    "save_traces",
    "env",
    "learner_options",
    "params",
)
# Constructor arguments a config may not pass: they come from elsewhere in the config.
_ENV_RESERVED = {"horizon": "set `horizon` at the top level"}
_LEARNER_RESERVED = {
    "num_arms": "it is `env.num_arms`",
    "horizon": "set `horizon` at the top level",
    "dtype": "float64 states need jax_enable_x64, which the command line does not turn on",
}
_BCO_LEARNER_RESERVED = {
    "dim": "it is `env.dim`",
    "domain": "it is `env.domain`",
    "horizon": "set `horizon` at the top level",
    "dtype": "float64 states need jax_enable_x64, which the command line does not turn on",
    "optimizer": "an optax transformation cannot be written in TOML",
}
# Keys of the top level that only one kind of experiment takes.
_KIND_ONLY = {"feedback": "bandit", "sa_stride": "bco", "save_traces": "bandit"}
#: The ``(R, T)`` per-learner traces a bandit experiment can keep in ``traces.npz``.
SAVABLE_TRACES: tuple[str, ...] = ("loss", "expected_loss", "played", "prob_best")
#: Kept unless ``save_traces`` says otherwise: the played arms as ``uint8`` (for up to 256
#: arms) cost one byte per run and round, 10 MB for the default job; ``loss`` would add 41 MB.
DEFAULT_SAVE_TRACES: tuple[str, ...] = ("played",)


def arm_dtype(num_arms: int) -> np.dtype:
    """The smallest unsigned integer dtype holding the arms ``0 .. num_arms - 1``: ``uint8``
    up to 256 arms, ``uint16`` up to 65536."""
    return np.min_scalar_type(max(num_arms - 1, 0))


def saved_dtype(trace: str, num_arms: int) -> np.dtype:
    """The dtype trace ``trace`` of :data:`SAVABLE_TRACES` is saved with: :func:`arm_dtype`
    for ``played``, float32 (the simulated values, exactly) for the losses and ``prob_best``."""
    return arm_dtype(num_arms) if trace == "played" else np.dtype(np.float32)


def _learner_registry(kind: str) -> registry.Registry:
    return registry.BCO_LEARNERS if kind == "bco" else registry.LEARNERS


def _env_registry(kind: str) -> registry.Registry:
    return registry.CONVEX_ENVS if kind == "bco" else registry.ENVS


def _learner_reserved(kind: str) -> dict[str, str]:
    return _BCO_LEARNER_RESERVED if kind == "bco" else _LEARNER_RESERVED


def _make_env(kind: str, name: str, horizon: int, kwargs: Mapping[str, Any]) -> Any:
    """``env registry[name](horizon=horizon, **kwargs)``; a BCO ``domain`` spec
    ``{"name", "size"}`` becomes a :class:`~stabl_jax.domains.Domain`."""
    kwargs = dict(kwargs)
    spec = kwargs.pop("domain", None) if kind == "bco" else None
    if spec is not None:
        kwargs["domain"] = make_domain(spec["name"], int(kwargs["dim"]), spec["size"])
    return _env_registry(kind).make(name, horizon=horizon, **kwargs)


class ConfigError(ValueError):
    """An experiment config is malformed; the message names the key, the file and the fix."""


# --------------------------------------------------------------------------------------------
# The validated config
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    """The ``[env]`` table.

    Attributes:
      name: a name in :data:`stabl_jax.registry.ENVS` (bandit) or
        :data:`stabl_jax.registry.CONVEX_ENVS` (BCO), or an import path ``"module:Class"``.
      kwargs: the constructor arguments besides ``horizon`` (``num_arms`` or ``dim``
        included), with TOML arrays turned into tuples; a BCO ``domain`` is the spec
        ``{"name": ..., "size": ...}`` of :func:`stabl_jax.domains.make_domain`.
    """

    name: str
    kwargs: Mapping[str, Any]

    @property
    def num_arms(self) -> int:
        return int(self.kwargs["num_arms"])


@dataclasses.dataclass(frozen=True)
class ExperimentConfig:
    """A validated experiment config (see the module docstring for the file format).

    Attributes:
      name: short name, used in titles and the default output folder.
      description: one line shown by ``stabl-jax list``.
      seed: ``jax.random.key(seed)`` drives every run of every learner (>= 0).
      runs: independent runs ``R`` (>= 1).
      horizon: rounds ``T`` (>= 16).
      learners: registry names or import paths, simulated in this order.
      env: the environment.
      window: moving-average window of the plots, in ``[1, T]``.
      sa_windows: window lengths ``L`` of the SA(L) table, increasing, each in ``[1, T]``.
      chunk_size: rounds per compiled chunk, or ``None`` for automatic.
      feedback: ``"loss"`` or ``"reward"``, given to every learner that has a ``feedback``
        option (EXP3 and StABL variants) unless ``learner_options`` sets it.
      learner_options: per learner, extra constructor arguments.
      params: per learner, values of fields of its ``Params`` pytree.
      source: the file it was read from.
      overrides: the ``key=value`` overrides applied on top of the file.
      kind: ``"bandit"`` (default) or ``"bco"`` (bandit convex optimisation).
      sa_stride: BCO only: distance between SA(L) window starts, ``None`` for
        ``max(1, L // 4)`` (:func:`stabl_jax.bco.simulate.bco_adaptive_regret`).
      save_traces: bandit only: which ``(R, T)`` traces of :data:`SAVABLE_TRACES` every
        learner keeps in ``traces.npz`` (the metrics and plots use all of them in memory).
    """

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
    feedback: str
    learner_options: Mapping[str, Mapping[str, Any]]
    params: Mapping[str, Mapping[str, float]]
    source: str
    overrides: tuple[str, ...] = ()
    kind: str = "bandit"
    sa_stride: int | None = None
    save_traces: tuple[str, ...] = DEFAULT_SAVE_TRACES

    # --- building the objects it describes ----------------------------------------------------
    def make_env(self) -> Any:
        """The environment, ``ENVS.make(env.name, horizon=horizon, **env.kwargs)``
        (``CONVEX_ENVS`` for a BCO config)."""
        return _make_env(self.kind, self.env.name, self.horizon, self.env.kwargs)

    def learner_kwargs(self, name: str) -> dict[str, Any]:
        """Constructor arguments of learner ``name`` besides ``num_arms`` (``dim`` and
        ``domain`` for BCO) and ``horizon``. A BCO learner's ``lipschitz`` defaults to the
        environment's ``G``."""
        kwargs = dict(self.learner_options.get(name, {}))
        if self.kind == "bco":
            kwargs.setdefault("lipschitz", float(self.make_env().lipschitz))
        elif "feedback" in _learner_registry(self.kind).entry(name).hints:
            kwargs.setdefault("feedback", self.feedback)
        return kwargs

    def make_learner(self, name: str) -> Any:
        """Learner ``name`` for this config's environment and ``horizon``."""
        if self.kind == "bco":
            env = self.make_env()
            sizes = {"dim": env.dim, "domain": env.domain}
        else:
            sizes = {"num_arms": self.env.num_arms}
        return _learner_registry(self.kind).make(
            name, horizon=self.horizon, **sizes, **self.learner_kwargs(name)
        )

    def learner_params(self, learner: Any, name: str) -> Any:
        """``learner.default_params`` with the fields set in ``[params.name]`` replaced."""
        import jax.numpy as jnp

        default = learner.default_params
        values = self.params.get(name, {})
        if not values:
            return default
        dtype = getattr(learner, "float_dtype", jnp.float32)
        return default.replace(**{k: jnp.asarray(v, dtype) for k, v in values.items()})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of the resolved config (defaults filled in)."""
        return {
            "kind": self.kind,
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "runs": self.runs,
            "horizon": self.horizon,
            "learners": list(self.learners),
            "window": self.window,
            "sa_windows": list(self.sa_windows),
            "chunk_size": self.chunk_size,
            **({"sa_stride": self.sa_stride} if self.kind == "bco" else {}),
            **({"feedback": self.feedback} if self.kind == "bandit" else {}),
            **({"save_traces": list(self.save_traces)} if self.kind == "bandit" else {}),
            "env": {"name": self.env.name, **_jsonable(dict(self.env.kwargs))},
            "learner_options": _jsonable({k: dict(v) for k, v in self.learner_options.items()}),
            "params": {k: dict(v) for k, v in self.params.items()},
            "source": self.source,
            "overrides": list(self.overrides),
        }


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def default_sa_windows(horizon: int) -> tuple[int, ...]:
    """Powers of two ``2^4, 2^5, ...`` up to ``horizon``."""
    return tuple(2**k for k in range(4, int(math.log2(horizon)) + 1))


# --------------------------------------------------------------------------------------------
# Finding and loading configs
# --------------------------------------------------------------------------------------------


def _config_dirs() -> list[Any]:
    """Where shipped configs live, in lookup order: ``./configs``, the installed resource
    package ``stabl_jax.configs``, then ``configs/`` next to the package source."""
    dirs: list[Any] = [Path.cwd() / "configs"]
    try:
        dirs.append(importlib.resources.files("stabl_jax.configs"))
    except ModuleNotFoundError:  # running from a source tree, not installed
        pass
    dirs.append(Path(__file__).resolve().parent.parent / "configs")
    return dirs


def shipped_configs() -> dict[str, Any]:
    """``{name: path}`` of every config found in the lookup directories (first one wins)."""
    found: dict[str, Any] = {}
    for folder in _config_dirs():
        try:
            entries = sorted(folder.iterdir(), key=lambda p: p.name)
        except (FileNotFoundError, NotADirectoryError, OSError):
            continue
        for entry in entries:
            if entry.name.endswith(".toml") and entry.is_file():
                found.setdefault(entry.name[: -len(".toml")], entry)
    return found


def resolve_config(name_or_path: str | Path) -> Any:
    """A config file path, or the name of a shipped config (see :func:`shipped_configs`)."""
    text = str(name_or_path)
    path = Path(text)
    if path.is_file():
        return path
    looks_like_path = text.endswith(".toml") or "/" in text or "\\" in text
    if not looks_like_path:
        for folder in _config_dirs():
            candidate = folder / f"{text}.toml"
            try:
                if candidate.is_file():
                    return candidate
            except OSError:
                continue
    available = ", ".join(sorted(shipped_configs())) or "(none found)"
    if path.is_dir():
        raise ConfigError(f"config path {text!r} is a folder; give a .toml file or a config name")
    if looks_like_path:
        raise ConfigError(f"config file {text!r} does not exist")
    raise ConfigError(
        f"no config named {text!r}: not a file, and not a shipped config (available: {available})"
    )


def load_config(
    name_or_path: str | Path, overrides: Sequence[str] = (), **sets: Any
) -> ExperimentConfig | HPOConfig:
    """Read, override and validate an experiment config.

    Args:
      name_or_path: a ``.toml`` path or a shipped config name (``"expert_advice_equal"``).
      overrides: ``"key=value"`` strings; dotted keys reach into tables
        (``"env.num_arms=10"``); values are TOML (``learners=["stabl","exp3"]``), else strings.
      **sets: more overrides as Python values, keyed by top-level name (``runs=4``); applied
        after ``overrides``.

    Returns:
      The validated :class:`ExperimentConfig` (an
      :class:`~stabl_jax.hpo_experiment.HPOConfig` for ``kind = "hpo"``).

    Raises:
      ConfigError: unreadable file, bad TOML, unknown key, wrong type or out-of-range value.

    Example:
      >>> cfg = load_config("expert_advice_equal", ["runs=8", "env.num_arms=5"])
      >>> cfg.runs, cfg.env.num_arms, cfg.horizon
      (8, 5, 4096)
    """
    path = resolve_config(name_or_path)
    source = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read config: {exc}") from None
    parsed = [parse_override(text) for text in overrides]
    parsed += [((key,), value) for key, value in sets.items() if value is not None]
    for keys, value in parsed:
        _apply_override(raw, keys, value, source)
    labels = tuple(overrides) + tuple(f"{k}={v!r}" for k, v in sets.items() if v is not None)
    overridden = {".".join(keys) for keys, _ in parsed}
    return validate(
        raw, source, default_name=Path(path.name).stem, overrides=labels, overridden=overridden
    )


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """``"env.num_arms=10"`` -> ``(("env", "num_arms"), 10)``.

    The value is parsed as a TOML value (number, bool, string, array, inline table); anything
    that is not valid TOML is taken as a plain string (``feedback=reward``).
    """
    key, sep, value_text = text.partition("=")
    keys = tuple(part.strip() for part in key.strip().split("."))
    if not sep or not all(keys):
        raise ConfigError(f"--set expects key=value with a (dotted) key, got {text!r}")
    value_text = value_text.strip()
    try:
        doc = tomllib.loads(f"value = {value_text}")
        value = doc["value"] if set(doc) == {"value"} else value_text
    except tomllib.TOMLDecodeError:
        value = value_text
    return keys, value


def _apply_override(raw: dict[str, Any], keys: tuple[str, ...], value: Any, source: str) -> None:
    table = raw
    for depth, key in enumerate(keys[:-1]):
        child = table.setdefault(key, {})
        if not isinstance(child, dict):
            dotted = ".".join(keys[: depth + 1])
            raise ConfigError(
                f"--set {'.'.join(keys)}: key {dotted!r} in {source} is a "
                f"{type(child).__name__}, not a table"
            )
        table = child
    table[keys[-1]] = value


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


class Checker:
    """Builds error messages naming the key, the file and (for overridden keys) the --set."""

    def __init__(self, source: str, overridden: Iterable[str]) -> None:
        self.source = source
        self.overridden = set(overridden)

    def where(self, key: str) -> str:
        if key in self.overridden:
            note = " (set on the command line)"
        else:
            inner = sorted(k for k in self.overridden if k.startswith(f"{key}."))
            note = f" ({', '.join(inner)} set on the command line)" if inner else ""
        return f"key {key!r}{note} in {self.source}"

    def fail(self, key: str, problem: str) -> typing.NoReturn:
        raise ConfigError(f"{self.where(key)}: {problem}")

    def unknown(self, key: str, allowed: Iterable[str], what: str = "") -> typing.NoReturn:
        names = ", ".join(sorted(allowed)) or "(none)"
        label = f" {what}" if what else ""
        hint = registry.did_you_mean(key.rpartition(".")[2], allowed)
        raise ConfigError(f"unknown{label} {self.where(key)}{hint}; allowed keys: {names}")

    def integer(self, key: str, value: Any, minimum: int, maximum: int | None = None) -> int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        if not ok:
            self.fail(key, f"must be an int {bounds}, got {value!r} ({_type_name(value)})")
        if value < minimum or (maximum is not None and value > maximum):
            self.fail(key, f"must be an int {bounds}, got {value}")
        return int(value)

    def string(self, key: str, value: Any, choices: Sequence[str] | None = None) -> str:
        if not isinstance(value, str):
            allowed = f"one of {list(choices)}" if choices else "a string"
            self.fail(key, f"must be {allowed}, got {value!r} ({_type_name(value)})")
        if choices is not None and value not in choices:
            self.fail(key, f"must be one of {list(choices)}, got {value!r}")
        return value

    def table(self, key: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, f"must be a table ([{key}]), got {value!r} ({_type_name(value)})")
        return value


def _type_name(value: Any) -> str:
    names = {bool: "bool", int: "int", float: "float", str: "string", list: "array", dict: "table"}
    return names.get(type(value), type(value).__name__)


def validate(
    raw: Mapping[str, Any],
    source: str = "<config>",
    *,
    default_name: str = "experiment",
    overrides: tuple[str, ...] = (),
    overridden: Iterable[str] = (),
) -> ExperimentConfig | HPOConfig:
    """Validate a parsed TOML document (see :func:`load_config`): an
    :class:`ExperimentConfig`, or for ``kind = "hpo"`` an
    :class:`~stabl_jax.hpo_experiment.HPOConfig`."""
    check = Checker(source, overridden)
    kind = check.string("kind", raw.get("kind", "bandit"), KINDS)
    if kind == "hpo":  # algorithm selection on BBOB: its own keys (stabl_jax.hpo_experiment)
        from stabl_jax.hpo_experiment import validate_hpo

        return validate_hpo(
            raw, check, source=source, default_name=default_name, overrides=overrides
        )
    for key in raw:
        if key not in TOP_LEVEL_KEYS:
            check.unknown(key, TOP_LEVEL_KEYS)
    for key, only in _KIND_ONLY.items():
        if key in raw and kind != only:
            check.fail(key, f"is only for kind = {only!r} experiments (this one is {kind!r})")
    for key in ("horizon", "learners", "env"):
        if key not in raw:
            check.fail(key, "is required")

    name = check.string("name", raw.get("name", default_name))
    if not _NAME_PATTERN.match(name):
        check.fail(
            "name", f"must be letters, digits, '_', '.' or '-' (a folder name), got {name!r}"
        )
    description = check.string("description", raw.get("description", ""))
    seed = check.integer("seed", raw.get("seed", 0), minimum=0, maximum=2**63 - 1)
    runs = check.integer("runs", raw.get("runs", DEFAULT_RUNS), minimum=1)
    horizon = check.integer("horizon", raw["horizon"], minimum=MIN_HORIZON)
    learners = _check_learners(check, raw["learners"], kind)
    window = raw.get("window", DEFAULT_WINDOW)
    if isinstance(window, int) and not isinstance(window, bool) and window > horizon:
        check.fail(
            "window",
            f"is {window}, longer than horizon = {horizon}: the moving-average window must be "
            f"in [1, horizon]; set it with the horizon (--set window=N, N <= {horizon})",
        )
    window = check.integer("window", window, 1, horizon)
    sa_windows = _check_sa_windows(check, raw.get("sa_windows"), horizon)
    chunk_size = raw.get("chunk_size")
    if chunk_size is not None:
        chunk_size = check.integer("chunk_size", chunk_size, minimum=1)
    feedback = check.string("feedback", raw.get("feedback", "loss"), FEEDBACKS)
    sa_stride = raw.get("sa_stride")
    if sa_stride is not None:
        sa_stride = check.integer("sa_stride", sa_stride, 1, horizon)
    save_traces = _check_save_traces(check, raw.get("save_traces", list(DEFAULT_SAVE_TRACES)))
    env = _check_env(check, raw["env"], horizon, kind)
    options = _check_learner_options(check, raw.get("learner_options", {}), kind)
    params = _check_params(check, raw.get("params", {}), kind)

    config = ExperimentConfig(
        name=name,
        description=description,
        seed=seed,
        runs=runs,
        horizon=horizon,
        learners=learners,
        env=env,
        window=window,
        sa_windows=sa_windows,
        chunk_size=chunk_size,
        feedback=feedback,
        learner_options=options,
        params=params,
        source=source,
        overrides=tuple(overrides),
        kind=kind,
        sa_stride=sa_stride,
        save_traces=save_traces,
    )
    # Construct every learner the experiment will run: their own checks catch bad values.
    for learner_name in learners:
        try:
            learner = config.make_learner(learner_name)
        except (TypeError, ValueError) as exc:
            _blame_learner(check, config, learner_name, exc)
        allowed = _params_fields(learner)
        dtype = np.dtype(getattr(learner, "float_dtype", np.float32))
        for field, number in params.get(learner_name, {}).items():
            if field not in allowed:
                check.unknown(f"params.{learner_name}.{field}", allowed, "param")
            with np.errstate(over="ignore", under="ignore"):
                stored = np.asarray(number).astype(dtype)
            if not np.isfinite(stored) or (stored == 0) != (number == 0):
                check.fail(
                    f"params.{learner_name}.{field}",
                    f"{number!r} is outside the range of the learner's {dtype} (it would be "
                    f"stored as {stored}); use a value between {np.finfo(dtype).tiny:g} and "
                    f"{np.finfo(dtype).max:g}",
                )
        if params.get(learner_name) and hasattr(learner, "check_params"):
            try:  # the learner's own ranges (e.g. gamma <= 1, meta_lr_scale > 0)
                learner.check_params(config.learner_params(learner, learner_name))
            except (TypeError, ValueError) as exc:
                check.fail(f"params.{learner_name}", f"learner {learner_name!r} rejects: {exc}")
    return config


def _entry(check: Checker, key: str, known: registry.Registry, name: Any) -> registry.Entry:
    """``known.entry(name)`` (a registered name or an import path), else a config error."""
    try:
        return known.entry(name)
    except ValueError as exc:
        check.fail(key, str(exc))


def _blame_learner(
    check: Checker, config: ExperimentConfig, name: str, exc: Exception
) -> typing.NoReturn:
    """Report a learner that cannot be built under the key that caused it: its
    ``learner_options`` when it builds without them, else ``horizon`` or ``env``."""
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


def _check_learners(check: Checker, value: Any, kind: str) -> tuple[str, ...]:
    known = _learner_registry(kind)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        check.fail(
            "learners",
            f"must be a non-empty array of learner names from {sorted(known)}, got {value!r}",
        )
    for item in value:
        _entry(check, "learners", known, item)
    if len(set(value)) != len(value):
        check.fail("learners", f"lists a learner twice: {value!r}")
    return tuple(value)


def _check_sa_windows(check: Checker, value: Any, horizon: int) -> tuple[int, ...]:
    if value is None:
        return default_sa_windows(horizon)
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        check.fail(
            "sa_windows", f"must be a non-empty array of ints in [1, {horizon}], got {value!r}"
        )
    out = [check.integer("sa_windows", v, 1, horizon) for v in value]
    return tuple(sorted(set(out)))


def _check_save_traces(check: Checker, value: Any) -> tuple[str, ...]:
    """``"all"``, ``"none"`` or an array of :data:`SAVABLE_TRACES` names, in that order."""
    if value in ("all", "none"):
        return SAVABLE_TRACES if value == "all" else ()
    allowed = f'"all", "none" or an array of names from {list(SAVABLE_TRACES)}'
    if not isinstance(value, list):
        check.fail("save_traces", f"must be {allowed}, got {value!r} ({_type_name(value)})")
    for name in value:
        if name not in SAVABLE_TRACES:
            hint = registry.did_you_mean(name, SAVABLE_TRACES) if isinstance(name, str) else ""
            check.fail("save_traces", f"unknown trace {name!r}{hint}; must be {allowed}")
    return tuple(name for name in SAVABLE_TRACES if name in value)


def _check_env(check: Checker, value: Any, horizon: int, kind: str = "bandit") -> EnvConfig:
    table = check.table("env", value)
    envs = _env_registry(kind)
    if "name" not in table:
        check.fail("env.name", f"is required; choose from {sorted(envs)}")
    name = check.string("env.name", table["name"])
    hints = _entry(check, "env.name", envs, name).hints
    size_key = "dim" if kind == "bco" else "num_arms"
    if size_key not in table:
        check.fail(f"env.{size_key}", f"is required (an int >= {1 if kind == 'bco' else 2})")
    kwargs: dict[str, Any] = {}
    for key, item in table.items():
        if key == "name":
            continue
        if key in _ENV_RESERVED:
            check.fail(f"env.{key}", f"cannot be set here: {_ENV_RESERVED[key]}")
        if key not in hints:
            allowed = ["name", *(k for k in hints if k not in _ENV_RESERVED)]
            check.unknown(f"env.{key}", allowed, f"{name!r} environment")
        if kind == "bco" and key == "domain":
            kwargs[key] = _check_domain(check, item)
        else:
            kwargs[key] = _coerce(check, f"env.{key}", item, hints[key])
    try:
        _make_env(kind, name, horizon, kwargs)
    except (TypeError, ValueError) as exc:
        check.fail("env", f"invalid {name!r} environment: {exc}")
    return EnvConfig(name=name, kwargs=types.MappingProxyType(kwargs))


def _check_domain(check: Checker, value: Any) -> dict[str, Any]:
    """``"ball"`` or ``{name = "box", size = 0.5}`` -> ``{"name": ..., "size": ...}``."""
    allowed = sorted(DOMAINS)
    spec = {"name": value} if isinstance(value, str) else value
    if not isinstance(spec, dict):
        check.fail(
            "env.domain",
            f"must be a domain name from {allowed} or a table {{name = ..., size = ...}}, "
            f"got {value!r} ({_type_name(value)})",
        )
    for key in spec:
        if key not in ("name", "size"):
            check.unknown(f"env.domain.{key}", ["name", "size"])
    name = check.string("env.domain.name", spec.get("name"), allowed)
    size = spec.get("size", 1.0)
    number = isinstance(size, int | float) and not isinstance(size, bool)
    if not number or not math.isfinite(size) or size <= 0:
        check.fail("env.domain.size", f"must be a finite number > 0, got {size!r}")
    return {"name": name, "size": float(size)}


def _check_learner_options(
    check: Checker, value: Any, kind: str = "bandit"
) -> dict[str, dict[str, Any]]:
    tables = check.table("learner_options", value)
    known = _learner_registry(kind)
    reserved = _learner_reserved(kind)
    out: dict[str, dict[str, Any]] = {}
    for learner_name, options in tables.items():
        key = f"learner_options.{learner_name}"
        hints = _entry(check, key, known, learner_name).hints
        options = check.table(key, options)
        accepted = [k for k in hints if k not in reserved]
        out[learner_name] = {}
        for option, item in options.items():
            if option in reserved:
                check.fail(f"{key}.{option}", f"cannot be set here: {reserved[option]}")
            if option not in hints:
                check.unknown(f"{key}.{option}", accepted, "option")
            out[learner_name][option] = _coerce(check, f"{key}.{option}", item, hints[option])
    return out


def _check_params(check: Checker, value: Any, kind: str = "bandit") -> dict[str, dict[str, float]]:
    tables = check.table("params", value)
    known = _learner_registry(kind)
    out: dict[str, dict[str, float]] = {}
    for learner_name, values in tables.items():
        key = f"params.{learner_name}"
        _entry(check, key, known, learner_name)
        values = check.table(key, values)
        out[learner_name] = {}
        for field, item in values.items():
            number = isinstance(item, int | float) and not isinstance(item, bool)
            if not number or not math.isfinite(item) or item < 0:
                check.fail(f"{key}.{field}", f"must be a finite number >= 0, got {item!r}")
            out[learner_name][field] = float(item)
    return out


# --- introspection -------------------------------------------------------------------------


def _params_fields(learner: Any) -> list[str]:
    default = learner.default_params
    if dataclasses.is_dataclass(default):
        return [f.name for f in dataclasses.fields(default)]
    return []


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args if a is not type(None))
    if origin is tuple:
        return f"an array of {_describe(args[0]).removeprefix('an ').removeprefix('a ')}s"
    return {int: "an int", float: "a number", bool: "a bool (true/false)", str: "a string"}.get(
        hint, str(hint)
    )


def _coerce(check: Checker, key: str, value: Any, hint: Any) -> Any:
    """``value`` converted to ``hint`` (TOML arrays -> tuples, ints -> floats), else an error."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return tuple(value) if isinstance(value, list) else value
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(check, key, value, arg)
            except ConfigError:
                continue
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        items = value if isinstance(value, list) else [value]
        if isinstance(value, dict | str | bool):
            items = None
        if items is not None:
            try:
                return tuple(_coerce(check, key, item, args[0]) for item in items)
            except ConfigError:
                pass
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    else:
        return tuple(value) if isinstance(value, list) else value
    check.fail(key, f"must be {_describe(hint)}, got {value!r} ({_type_name(value)})")
