"""Experiment kinds: the table :data:`KINDS` that the command line dispatches through.

Example:
  >>> cfg = load_config("expert_advice_equal", ["runs=8", "env.num_arms=5"])
  >>> cfg.kind, cfg.runs, cfg.env.num_arms, cfg.horizon
  ('bandit', 8, 5, 4096)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from stabl_jax.experiment.configs import Checker, read_config
from stabl_jax.experiment.kinds import bandit, bco, selection
from stabl_jax.experiment.kinds.base import Kind
from stabl_jax.experiment.results import ResultsFolder
from stabl_jax.experiment.tables import clean
from stabl_jax.registry import check_name, did_you_mean, import_path

#: Every experiment kind by its config name.
KINDS: dict[str, Kind] = {kind.name: kind for kind in (bandit.KIND, bco.KIND, selection.KIND)}
#: The kind of a config without a ``kind`` key.
DEFAULT_KIND = "bandit"


def register_kind(kind: Kind, *, replace: bool = False) -> Kind:
    """Add ``kind`` to :data:`KINDS`, so that ``kind = "<kind.name>"`` runs it; returns ``kind``.

    Args:
      kind: a :class:`~stabl_jax.experiment.kinds.base.Kind` whose ``name`` is letters,
        digits, ``_`` or ``-``, starting with a letter.
      replace: allow a name taken by another kind.

    Raises:
      TypeError: ``kind`` is not a ``Kind``.
      ValueError: the name is not valid, or it is another kind's.
    """
    if not isinstance(kind, Kind):
        raise TypeError(
            f"register_kind takes a stabl_jax.experiment.kinds.base.Kind, got {type(kind).__name__}"
        )
    check_name("kind", kind.name)
    if KINDS.get(kind.name, kind) is not kind and not replace:
        raise ValueError(
            f"kind {kind.name!r} is already registered (another Kind of that name); give this "
            "one another name, or pass replace=True"
        )
    KINDS[kind.name] = kind
    return kind


def lookup(check: Checker, name: Any) -> Kind:
    """The kind named ``name`` or imported from ``"package.module:KIND"``, else a config error."""
    name = check.string("kind", name)
    if name in KINDS:
        return KINDS[name]
    if ":" not in name:
        check.fail(
            "kind",
            f"must be one of {list(KINDS)} or an import path 'package.module:KIND', got "
            f"{name!r}{did_you_mean(name, KINDS)}",
        )
    try:
        return register_kind(import_path("kind", name))
    except (TypeError, ValueError) as exc:
        check.fail("kind", str(exc))


def validate(
    raw: Mapping[str, Any],
    source: str = "<config>",
    *,
    default_name: str = "experiment",
    overrides: tuple[str, ...] = (),
    overridden: Iterable[str] = (),
) -> Any:
    """Validate a parsed TOML document against its kind's schema.

    Raises:
      ConfigError: a problem, naming the key and ``source``.
      TypeError: the kind's ``validate`` gave a config of another kind.
    """
    check = Checker(source, overridden)
    kind = lookup(check, raw.get("kind", DEFAULT_KIND))
    config = kind.validate(
        raw, check, source=source, default_name=default_name, overrides=tuple(overrides)
    )
    if getattr(config, "kind", None) != kind.name:  # what the command line looks it up by
        raise TypeError(
            f"kind {kind.name!r}: its validate gave a config whose kind is "
            f"{getattr(config, 'kind', None)!r}; it must be {kind.name!r}"
        )
    return config


def load_config(name_or_path: str | Path, overrides: Sequence[str] = (), **sets: Any) -> Any:
    """:func:`~stabl_jax.experiment.configs.read_config` (same arguments), then :func:`validate`."""
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
    """Write ``result``'s summary, traces and plots into ``folder`` and commit it.

    ``extra`` adds top-level entries to ``summary.json``; ``started`` is the ISO start time.
    """
    kind = KINDS[result.config.kind]
    summary = kind.summary(result, started=started)
    summary.update(clean(dict(extra or {})))
    return folder.write(summary, kind.traces(result), lambda path: kind.plots(result, path))
