"""Experiment config files: TOML from a file or a shipped name, ``--set`` overrides, checks."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.resources
import itertools
import math
import re
import tomllib
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from stabl_jax.registry import did_you_mean

#: What a ``name`` may be: it names the default results folder.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ConfigError(ValueError):
    """An experiment config is malformed; the message names the key, the file and the fix."""


def jsonable(value: Any) -> Any:
    """``value`` with tuples turned into lists, in nested dicts too (for JSON)."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    return value


def config_dirs() -> list[Any]:
    """Shipped config folders in lookup order: ``./configs``, ``stabl_jax.configs``, the source."""
    dirs: list[Any] = [Path.cwd() / "configs"]
    with contextlib.suppress(ModuleNotFoundError):  # running from a source tree, not installed
        dirs.append(importlib.resources.files("stabl_jax.configs"))
    dirs.append(Path(__file__).resolve().parents[2] / "configs")
    return dirs


def shipped_configs() -> dict[str, Any]:
    """``{name: path}`` of every config found in the lookup directories (first one wins)."""
    found: dict[str, Any] = {}
    for folder in config_dirs():
        try:
            entries = sorted(folder.iterdir(), key=lambda p: p.name)
        except OSError:
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
        for folder in config_dirs():
            candidate = folder / f"{text}.toml"
            with contextlib.suppress(OSError):
                if candidate.is_file():
                    return candidate
    available = ", ".join(sorted(shipped_configs())) or "(none found)"
    if not text.strip():  # Path("") is the working folder
        raise ConfigError(f"the config is empty: give a .toml file or a config name ({available})")
    if path.is_dir():
        raise ConfigError(f"config path {text!r} is a folder; give a .toml file or a config name")
    if looks_like_path:
        raise ConfigError(f"config file {text!r} does not exist")
    raise ConfigError(
        f"no config named {text!r}: not a file, and not a shipped config (available: {available})"
    )


@dataclasses.dataclass(frozen=True)
class ConfigDocument:
    """A config file read and overridden, not yet validated (:func:`read_config`).

    Attributes:
      raw: the parsed TOML document with the overrides applied.
      source: the file it was read from.
      default_name: the file's stem, the experiment's name when it sets none.
      overrides: the overrides as given (``"runs=8"``), then the keyword ones (``runs=4``).
      overridden: the dotted keys the overrides set (error messages say so).
    """

    raw: dict[str, Any]
    source: str
    default_name: str
    overrides: tuple[str, ...]
    overridden: frozenset[str]


def read_config(
    name_or_path: str | Path, overrides: Sequence[str] = (), **sets: Any
) -> ConfigDocument:
    """Read a config file and apply overrides, without validation.

    Args:
      name_or_path: a ``.toml`` path or a shipped config name (``"expert_advice_equal"``).
      overrides: ``"key=value"`` strings; dotted keys reach into tables
        (``"env.num_arms=10"``); values are TOML (``learners=["stabl","exp3"]``), else strings.
      **sets: more overrides as Python values by top-level key (``runs=4``), applied after
        ``overrides``; ``None`` values are skipped.

    Raises:
      ConfigError: no such file or config, unreadable file, bad TOML, malformed override, or
        a key set twice (or a table and a key inside it).
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
    labels = tuple(overrides) + tuple(f"{k}={v!r}" for k, v in sets.items() if v is not None)
    _check_overrides_apart([keys for keys, _ in parsed], labels)
    for keys, value in parsed:
        _apply_override(raw, keys, value, source)
    overridden = frozenset(".".join(keys) for keys, _ in parsed)
    return ConfigDocument(raw, source, Path(path.name).stem, labels, overridden)


def _check_overrides_apart(keys: Sequence[tuple[str, ...]], labels: Sequence[str]) -> None:
    """Refuse two overrides of one key, or of a table and a key inside it.

    The later one would silently win, so the value run would depend on their order.
    """
    for (i, first), (j, second) in itertools.combinations(enumerate(keys), 2):
        shorter, longer = sorted((first, second), key=len)
        if longer[: len(shorter)] != shorter:
            continue
        pair = f"{labels[i]!r} and {labels[j]!r}"
        if first == second:
            raise ConfigError(
                f"{'.'.join(first)} is set twice ({pair}): the second would silently "
                "replace the first; give it once"
            )
        raise ConfigError(
            f"{'.'.join(shorter)} and {'.'.join(longer)} are both set ({pair}): the table "
            f"would replace the key or the key change the table; set {'.'.join(longer)} "
            f"inside the table, or give one of them"
        )


def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """``"env.num_arms=10"`` -> ``(("env", "num_arms"), 10)``."""
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
                f"--set {'.'.join(keys)}: key {dotted!r} in {source} is {child!r} "
                f"({type_name(child)}), not a table; set {dotted!r} itself, or a key of a table"
            )
        table = child
    table[keys[-1]] = value


class Checker:
    """Builds error messages naming the key, the file and (for overridden keys) the --set.

    Example:
      >>> check = Checker("a.toml", ())
      >>> with check.collect():
      ...     check.integer("runs", 0, minimum=1)
      >>> with check.collect():
      ...     check.string("feedback", "los", ("loss",))
      >>> check.done()
      Traceback (most recent call last):
      ...
      stabl_jax.experiment.configs.ConfigError: 2 errors in a.toml:
        key 'runs' in a.toml: must be an int >= 1, got 0
        key 'feedback' in a.toml: must be one of ['loss'], got 'los' (did you mean 'loss'?)
    """

    def __init__(self, source: str, overridden: Iterable[str]) -> None:
        self.source = source
        self.overridden = set(overridden)
        self.errors: list[str] = []

    @contextlib.contextmanager
    def collect(self) -> Iterator[None]:
        """Run a block of checks; its :class:`ConfigError` is recorded for :meth:`done`."""
        try:
            yield
        except ConfigError as exc:
            self.errors.append(str(exc))

    def keep(
        self, into: dict[str, Any], name: str, check_value: Callable[..., Any], *args: Any
    ) -> None:
        """``into[name] = check_value(*args)``, its :class:`ConfigError` collected."""
        with self.collect():
            into[name] = check_value(*args)

    def done(self) -> None:
        """Raise the collected errors as one :class:`ConfigError` (several: a count, one a line)."""
        errors, self.errors = self.errors, []
        if len(errors) == 1:
            raise ConfigError(errors[0])
        if errors:
            lines = "\n".join(f"  {e}" for e in errors)
            raise ConfigError(f"{len(errors)} errors in {self.source}:\n{lines}")

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
        hint = did_you_mean(key.rpartition(".")[2], allowed)
        raise ConfigError(f"unknown{label} {self.where(key)}{hint}; allowed keys: {names}")

    def integer(self, key: str, value: Any, minimum: int, maximum: int | None = None) -> int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        if not ok:
            self.fail(key, f"must be an int {bounds}, got {value!r} ({type_name(value)})")
        if value < minimum or (maximum is not None and value > maximum):
            self.fail(key, f"must be an int {bounds}, got {value}")
        return int(value)

    def string(self, key: str, value: Any, choices: Sequence[str] | None = None) -> str:
        if not isinstance(value, str):
            allowed = f"one of {list(choices)}" if choices else "a string"
            self.fail(key, f"must be {allowed}, got {value!r} ({type_name(value)})")
        if choices is not None and value not in choices:
            hint = did_you_mean(value, choices)
            self.fail(key, f"must be one of {list(choices)}, got {value!r}{hint}")
        return value

    def number(self, key: str, value: Any, minimum: float, strict: bool = False) -> float:
        """A finite number ``>= minimum`` (``> minimum`` when ``strict``), as a float."""
        number = isinstance(value, int | float) and not isinstance(value, bool)
        finite = number and math.isfinite(value)
        if not finite or value < minimum or (strict and value == minimum):
            relation = ">" if strict else ">="
            self.fail(key, f"must be a finite number {relation} {minimum}, got {value!r}")
        return float(value)

    def boolean(self, key: str, value: Any) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"must be a bool (true/false), got {value!r}")
        return value

    def table(self, key: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(key, f"must be a table ([{key}]), got {value!r} ({type_name(value)})")
        return value

    def folder_name(self, key: str, value: Any) -> str:
        """A string that can name a folder (:data:`NAME_PATTERN`)."""
        name = self.string(key, value)
        if not NAME_PATTERN.match(name):
            self.fail(
                key, f"must be letters, digits, '_', '.' or '-' (a folder name), got {name!r}"
            )
        return name

    def coerce(self, key: str, value: Any, hint: Any) -> Any:
        """``value`` as the type ``hint`` (arrays to tuples, ints to floats), else an error."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            for arg in args:
                if arg is not type(None):
                    with contextlib.suppress(ConfigError):
                        return self.coerce(key, value, arg)
        elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            if not isinstance(value, dict | str | bool):
                items = value if isinstance(value, list) else [value]
                with contextlib.suppress(ConfigError):
                    return tuple(self.coerce(key, item, args[0]) for item in items)
        elif origin is typing.Literal:
            if any(type(value) is type(arg) and value == arg for arg in args):
                return value
        elif hint is bool or hint is str:
            if isinstance(value, hint):
                return value
        elif hint is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        elif hint is float:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        else:  # Any, or a type TOML cannot check: arrays as tuples
            return tuple(value) if isinstance(value, list) else value
        self.fail(key, f"must be {_describe(hint)}, got {value!r} ({type_name(value)})")


def type_name(value: Any) -> str:
    names = {bool: "bool", int: "int", float: "float", str: "string", list: "array", dict: "table"}
    return names.get(type(value), type(value).__name__)


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args if a is not type(None))
    if origin is typing.Literal:
        choices = ", ".join(repr(a) for a in args)
        return f"a string, one of {choices}" if all(isinstance(a, str) for a in args) else choices
    if origin is tuple:
        return f"an array of {_describe(args[0]).removeprefix('an ').removeprefix('a ')}s"
    return {int: "an int", float: "a number", bool: "a bool (true/false)", str: "a string"}.get(
        hint, str(hint)
    )
