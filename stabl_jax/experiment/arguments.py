"""The command-line arguments shared by ``stabl-jax`` and the scripts of ``experiments/``: an
``ArgumentParser`` that refuses an option given twice, and argparse types for counts."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any


def count(text: str) -> int:
    """An argparse ``type=`` for a count (``--runs``, ``--horizon``): an int >= 1, else exit 2."""
    return _int_at_least(text, 1, "")


def interval_runs(text: str) -> int:
    """An argparse ``type=`` for runs with 95% intervals: an int >= 2 (one run gives ``nan``)."""
    return _int_at_least(text, 2, " (a 95% interval needs two runs)")


def distinct(name: str, values: Iterable[Any]) -> None:
    """``ValueError`` naming the first value of option ``name`` given twice."""
    seen: list[Any] = []
    for value in values:
        if value in seen:
            shown = ",".join(value) if isinstance(value, tuple) else value  # --diff a,b
            raise ValueError(f"{name} gives {shown} twice: give each value once")
        seen.append(value)


class _Once(argparse.Action):
    """argparse's ``store``, except that an option given twice stops the script (exit 2)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        values = self.checked(parser, values, option_string)
        given: list[argparse.Namespace] = self.__dict__.setdefault("_given_in", [])
        if any(seen is namespace for seen in given):
            first = getattr(namespace, self.dest)
            parser.error(
                f"{option_string or self.dest} is given twice ({_shown(first)} and "
                f"{_shown(values)}): the second would silently replace the first; give it once"
            )
        given.append(namespace)
        setattr(namespace, self.dest, values)

    def checked(self, parser: argparse.ArgumentParser, values: Any, option: str | None) -> Any:
        """The value to store; a subclass checks it here (``parser.error`` to refuse it)."""
        return values


def _shown(values: Any) -> str:
    return " ".join(map(str, values)) if isinstance(values, list) else str(values)


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` refusing a storing option given twice (exit 2); appends collect."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _Once)
        self.register("action", "store", _Once)


class Distinct(_Once):
    """argparse ``action=`` for a ``nargs="+"`` option: exit 2 on a repeated value (as parsed)."""

    def checked(self, parser: argparse.ArgumentParser, values: Any, option: str | None) -> Any:
        try:
            distinct(option or self.dest, values)
        except ValueError as exc:
            parser.error(str(exc))
        return list(values)


def _int_at_least(text: str, least: int, why: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise argparse.ArgumentTypeError(f"give an int >= {least}{why}, got {text!r}")
    return value
