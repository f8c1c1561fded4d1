"""Experiment kinds: the table :data:`KINDS` that the command line dispatches through.

A config's ``kind`` (default ``"bandit"``) names a :class:`~stabl_jax.kinds.base.Kind` built by
one module: ``"bandit"`` (:mod:`~stabl_jax.kinds.bandit`), ``"bco"``
(:mod:`~stabl_jax.kinds.bco`), ``"hpo"`` (algorithm selection, :mod:`~stabl_jax.kinds.selection`).

Example:
  >>> cfg = load_config("expert_advice_equal", ["runs=8", "env.num_arms=5"])
  >>> cfg.kind, cfg.runs, cfg.env.num_arms, cfg.horizon
  ('bandit', 8, 5, 4096)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stabl_jax.io.configs import Checker, read_config
from stabl_jax.io.results import ResultsFolder, clean
from stabl_jax.kinds import bandit, bco, selection
from stabl_jax.kinds.base import Kind
from stabl_jax.registry import did_you_mean

#: Every experiment kind by its config name.
KINDS: dict[str, Kind] = {kind.name: kind for kind in (bandit.KIND, bco.KIND, selection.KIND)}
#: The kind of a config without a ``kind`` key.
DEFAULT_KIND = "bandit"


def lookup(check: Checker, name: Any) -> Kind:
    """The kind named ``name``, else a config error naming the known ones."""
    name = check.string("kind", name)
    if name not in KINDS:
        check.fail("kind", f"must be one of {list(KINDS)}, got {name!r}{did_you_mean(name, KINDS)}")
    return KINDS[name]


def validate(
    raw: Mapping[str, Any],
    source: str = "<config>",
    *,
    default_name: str = "experiment",
    overrides: tuple[str, ...] = (),
    overridden: Iterable[str] = (),
) -> Any:
    """Validate a parsed TOML document against its kind's schema (a ``BanditConfig``,
    ``BCOConfig`` or ``HPOConfig``); raises ``ConfigError`` naming the key and ``source``."""
    check = Checker(source, overridden)
    kind = lookup(check, raw.get("kind", DEFAULT_KIND))
    return kind.validate(
        raw, check, source=source, default_name=default_name, overrides=tuple(overrides)
    )


def load_config(name_or_path: str | Path, overrides: Sequence[str] = (), **sets: Any) -> Any:
    """Read and override a config (:func:`stabl_jax.io.configs.read_config`, same arguments)
    and :func:`validate` it; raises ``ConfigError`` on any problem."""
    doc = read_config(name_or_path, overrides, **sets)
    return validate(
        doc.raw,
        doc.source,
        default_name=doc.default_name,
        overrides=doc.overrides,
        overridden=doc.overridden,
    )


def write_results(
    result: Any,
    folder: ResultsFolder,
    *,
    started: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write the summary, traces and plots of ``result`` (from its kind's run) into
    ``folder`` and commit it; ``extra`` adds top-level entries to ``summary.json`` (the command
    line adds ``command`` and ``resumed``), ``started`` is the ISO start time."""
    kind = KINDS[result.config.kind]
    summary = kind.summary(result, started=started)
    summary.update(clean(dict(extra or {})))
    return folder.write(summary, kind.traces(result), lambda path: kind.plots(result, path))
