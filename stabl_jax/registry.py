"""Registries of learners and environments, with metadata and a gymnax-style ``make``.

``LEARNERS``, ``ENVS``, ``BCO_LEARNERS`` and ``CONVEX_ENVS`` map names to :class:`Entry`; a
name ``"package.module:Class"`` is an import path, checked against the registry's contract.

Example:
  >>> make("stabl_single_scale", num_arms=30, horizon=4096).history_lengths
  (1024,)
  >>> LEARNERS["stabl_naive"].defaults, LEARNERS["stabl"].num_queries
  (mappingproxy({'observation': 'uniform'}), 2)
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib
import re
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any

from stabl_jax import bco, learners
from stabl_jax.envs import (
    DriftingBernoulli,
    ExpertAdvice,
    PiecewiseBernoulli,
    PiecewiseBernoulliTable,
    convex,
)

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


def check_name(what: str, name: Any) -> None:
    """``ValueError`` unless ``name`` is letters, digits, ``_`` or ``-``, starting with a letter
    (a config value and a folder name); ``what`` names it (``"learner"``)."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"{what} name {name!r} must be letters, digits, '_' or '-', starting "
            "with a letter (a config key and a folder name)"
        )


def import_path(what: str, path: str) -> Any:
    """The object at ``"package.module:Name"`` (``Name`` may be dotted), else ``ValueError``
    saying why: the module is not found, fails to import, or lacks the name."""
    module_name, _, qualname = path.partition(":")
    failed = f"cannot import {what} {path!r}"
    if not module_name or not qualname:
        raise ValueError(f"{failed}: give it as 'package.module:Name'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # any failure of the user's module is reported, never raised
        missing = getattr(exc, "name", None) if isinstance(exc, ModuleNotFoundError) else None
        if missing is not None and (module_name + ".").startswith(missing + "."):
            hint = "is the module's folder on PYTHONPATH?"
        else:  # the module was found, and importing it failed
            hint = f"raised while importing {module_name}"
        raise ValueError(f"{failed}: {type(exc).__name__}: {exc} ({hint})") from exc
    try:
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # AttributeError, or whatever a module's __getattr__ raises
        raise ValueError(
            f"{failed}: {type(exc).__name__}: {exc} (is {qualname!r} spelled as in the module?)"
        ) from exc
    return obj


def did_you_mean(name: str, known: typing.Iterable[str]) -> str:
    """``" (did you mean 'stabl'?)"`` for the closest of ``known`` to ``name``, else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclasses.dataclass(frozen=True)
class Entry:
    """A registered class and what defines it.

    Attributes:
      name: the registry name (``"stabl_naive"``), or the import path it was found by.
      cls: a frozen dataclass obeying the registry's contract.
      description: one line for ``stabl-jax list``.
      defaults: constructor arguments the caller's override; a callable value is
        ``value(**kwargs)`` of the other arguments.
      kind: what the registry holds, for messages (``"learner"``).
    """

    name: str
    cls: type
    description: str = ""
    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    kind: str = "class"

    def __post_init__(self) -> None:
        """Raises ``ValueError`` for a ``defaults`` key the class does not take."""
        object.__setattr__(self, "defaults", types.MappingProxyType(dict(self.defaults)))
        unknown = [k for k in self.defaults if k not in self.arguments]
        if unknown:
            raise ValueError(
                f"{self.kind} {self.name!r}: defaults {unknown} are not arguments of "
                f"{self.cls.__name__}{did_you_mean(unknown[0], self.arguments)}; its arguments "
                f"are {', '.join(self.hints)}"
            )

    @functools.cached_property
    def arguments(self) -> dict[str, dataclasses.Field]:
        """The class's constructor arguments (its ``init`` fields), by name."""
        return {f.name: f for f in dataclasses.fields(self.cls) if f.init}

    def __call__(self, **kwargs: Any) -> Any:
        """``cls(**defaults, **kwargs)``, with callable defaults computed from ``kwargs``; a
        ``TypeError`` for an argument the class does not take or a missing one it needs."""
        fields = self.arguments
        unknown = [k for k in kwargs if k not in fields]
        needed = [
            name
            for name, f in fields.items()
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        absent = [k for k in needed if k not in kwargs and k not in self.defaults]
        if unknown or absent:
            what = f"{self.kind} {self.name!r} ({self.cls.__name__})"
            if unknown:
                problem = f"takes no argument {unknown[0]!r}{did_you_mean(unknown[0], fields)}"
            else:
                problem = f"needs {', '.join(absent)}"
            raise TypeError(f"{what} {problem}; its arguments are {', '.join(self.hints)}")
        missing = {k: v for k, v in self.defaults.items() if k not in kwargs}
        fixed = {k: v(**kwargs) if callable(v) else v for k, v in missing.items()}
        return self.cls(**fixed, **kwargs)

    @functools.cached_property
    def hints(self) -> dict[str, Any]:
        """``{argument: type hint}`` of the class's constructor (its ``init`` fields)."""
        resolved = typing.get_type_hints(self.cls)
        return {
            f.name: resolved.get(f.name, Any)
            for f in dataclasses.fields(self.cls)
            if f.init and f.repr  # not a learner's validate switch, which the run sets
        }

    @property
    def num_queries(self) -> int | None:
        """Queries per round when the class fixes it; ``None`` when its options do (Hedge)."""
        count = getattr(self.cls, "num_queries", None)
        return count if isinstance(count, int) else None


class Registry(Mapping[str, Entry]):
    """Named :class:`Entry` objects of one kind, with a contract every class must obey.

    Args:
      kind: what the entries are, for messages (``"learner"``).
      fields: constructor arguments every class must take (the config fills them in).
      attributes: methods and properties every class must have.
      guide: the page that lists them, named in every refusal.
    """

    def __init__(
        self, kind: str, fields: tuple[str, ...], attributes: tuple[str, ...], guide: str = ""
    ) -> None:
        self.kind = kind
        self.fields = fields
        self.attributes = attributes
        self.guide = guide
        self._entries: dict[str, Entry] = {}

    def __getitem__(self, name: str) -> Entry:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def register(
        self,
        name: str,
        cls: type,
        description: str = "",
        *,
        defaults: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> Entry:
        """Add ``cls`` as ``name`` (see :class:`Entry`); ``replace`` allows a known name."""
        check_name(self.kind, name)
        if name in self._entries and not replace:
            raise ValueError(f"{self.kind} {name!r} is already registered; pass replace=True")
        self.check(cls, name)
        entry = Entry(name, cls, description, defaults or {}, self.kind)
        self._entries[name] = entry
        return entry

    def check(self, cls: Any, name: str) -> None:
        """Raise ``ValueError`` naming what ``cls`` lacks to obey this registry's contract."""
        problem = ""
        if not isinstance(cls, type):
            problem = f"is not a class, got {cls!r}"
        elif (
            not dataclasses.is_dataclass(cls)
            # typeshed's DataclassInstance declares __dataclass_fields__ only
            or not cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        ):
            problem = (
                "must be a frozen dataclass (@dataclasses.dataclass(frozen=True)): JAX hashes "
                "it as a static argument"
            )
        else:
            fields = {f.name for f in dataclasses.fields(cls) if f.init}
            missing = [f for f in self.fields if f not in fields]
            missing += [a for a in self.attributes if a not in fields and not hasattr(cls, a)]
            if missing:
                article = "an" if self.kind[0] in "aeiou" else "a"
                problem = (
                    f"lacks {missing}: {article} {self.kind} takes {list(self.fields)} and has "
                )
                problem += f"{list(self.attributes)}"
        if problem:
            see = f" (see {self.guide})" if self.guide else ""
            raise ValueError(
                f"{self.kind} {name!r}: {getattr(cls, '__name__', cls)} {problem}{see}"
            )

    def entry(self, name: str) -> Entry:
        """The entry ``name``, or the class at import path ``"module:Class"`` (else
        ``ValueError``)."""
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        if not isinstance(name, str) or ":" not in name:
            raise ValueError(
                f"unknown {self.kind} {name!r}{did_you_mean(str(name), self)}; choose one of "
                f"{sorted(self)} or give an import path 'package.module:Class'"
            )
        obj = import_path(self.kind, name)
        self.check(obj, name)
        return Entry(name, obj, (obj.__doc__ or "").strip().split("\n")[0], kind=self.kind)

    def make(self, name: str, **kwargs: Any) -> Any:
        """Construct ``name`` (a registered name or an import path) from ``kwargs``
        (:meth:`Entry.__call__`)."""
        return self.entry(name)(**kwargs)


# What the rollout, the experiment runner and the config call on each kind of class: the
# pages named are where they are listed. Change points are optional (without them a run is one
# segment); an environment that declares them is checked by the command line.
_LEARNER = ("default_params", "init", "ask", "tell", "step", "num_queries")
_LEARNER_GUIDE = "docs/learners.md, 'What the command line needs'"
_ENV_GUIDE = "docs/environments.md, 'What the command line needs'"
LEARNERS = Registry("learner", ("num_arms", "horizon"), _LEARNER, _LEARNER_GUIDE)
ENVS = Registry(
    "environment", ("num_arms", "horizon"), ("sample_params", "loss", "best_arm"), _ENV_GUIDE
)
BCO_LEARNERS = Registry(
    "BCO learner", ("dim", "horizon", "domain", "lipschitz"), _LEARNER, _LEARNER_GUIDE
)
CONVEX_ENVS = Registry(
    "convex environment",
    ("dim", "horizon"),
    ("sample_params", "loss_fn", "lipschitz"),
    _ENV_GUIDE,
)

_BY_KIND = {"bandit": (LEARNERS, ENVS), "bco": (BCO_LEARNERS, CONVEX_ENVS)}


def register_learner(
    name: str, cls: type, description: str = "", *, kind: str = "bandit", **options: Any
) -> Entry:
    """Register a learner class so that ``make``, configs and the CLI know it by ``name``.

    Args:
      name: the registry name (letters, digits, ``_``, ``-``).
      cls: a frozen dataclass with the learner contract (:mod:`stabl_jax.learners.base`).
      description: one line for ``stabl-jax list``.
      kind: ``"bandit"`` (:data:`LEARNERS`) or ``"bco"`` (:data:`BCO_LEARNERS`).
      **options: ``defaults`` and ``replace`` of :meth:`Registry.register`.
    """
    return _by_kind(kind)[0].register(name, cls, description, **options)


def register_env(
    name: str, cls: type, description: str = "", *, kind: str = "bandit", **options: Any
) -> Entry:
    """Register an environment class (:data:`ENVS`, or :data:`CONVEX_ENVS` for
    ``kind="bco"``); the arguments are those of :func:`register_learner`."""
    return _by_kind(kind)[1].register(name, cls, description, **options)


def _by_kind(kind: str) -> tuple[Registry, Registry]:
    if kind not in _BY_KIND:
        raise ValueError(f"kind must be one of {sorted(_BY_KIND)}, got {kind!r}")
    return _BY_KIND[kind]


def make(name: str, **kwargs: Any) -> Any:
    """Construct the learner ``name`` (:data:`LEARNERS`, or ``"module:Class"``).

    Example:
      >>> make("stabl", num_arms=30, horizon=4096).history_lengths
      (64, 128, 256, 512, 1024, 2048, 4096)
    """
    return LEARNERS.make(name, **kwargs)


def make_env(name: str, **kwargs: Any) -> Any:
    """Construct the environment ``name`` (:data:`ENVS`, or ``"module:Class"``)."""
    return ENVS.make(name, **kwargs)


def _with_variants(
    name: str, cls: type, naive: dict[str, Any], descriptions: tuple[str, ...]
) -> None:
    """Register ``name``, ``name_naive`` (``naive`` defaults) and ``name_single_scale`` (one
    history length, 1024), described by ``descriptions`` in that order."""
    variants = (("", None), ("_naive", naive), ("_single_scale", {"history_lengths": (1024,)}))
    for (suffix, defaults), description in zip(variants, descriptions, strict=True):
        LEARNERS.register(name + suffix, cls, description, defaults=defaults)


# The shipped components: name, class, description (and the arguments that define it).
_AUER_GAMMA = {"gamma": lambda num_arms, horizon, **_: learners.auer_gamma(num_arms, horizon)}
# fmt: off
LEARNERS.register("uniform", learners.Uniform,
    "plays uniformly at random, never learns (1 query)")
LEARNERS.register("exp3", learners.EXP3,
    "EXP3, Algorithm 2, learning rate from the Lemma (1 query)")
LEARNERS.register("exp3_uniform", learners.EXP3,
    "EXP3 mixed with uniform exploration, gamma of Auer et al. 2002 (1 query)",
    defaults=_AUER_GAMMA)
_with_variants("stabl", learners.StABL, {"observation": "uniform"}, (
    "StABL, Algorithm 1: geometric EXP3 experts + importance query P(t) (2 queries)",
    "StABL with the observed arm drawn uniformly ('StABL Naive') (2 queries)",
    "StABL with one history length, 1024 ('Single Scale') (2 queries)"))
LEARNERS.register("exp3s", learners.Exp3S,
    "Exp3.S, Exp3 with weight sharing for switching arms (Auer et al. 2002) (1 query)")
LEARNERS.register("exp3_ix", learners.Exp3IX,
    "Exp3-IX, Exp3 with implicit exploration (Neu 2015) (1 query)")
LEARNERS.register("sw_ucb", learners.SWUCB,
    "sliding-window UCB (Garivier & Moulines 2011), deterministic (1 query)")
LEARNERS.register("d_ucb", learners.DUCB,
    "discounted UCB (Garivier & Moulines 2011), deterministic (1 query)")
LEARNERS.register("ucb1", learners.UCB1,
    "UCB1 (Auer, Cesa-Bianchi & Fischer 2002), stationary, deterministic (1 query)")
LEARNERS.register("klucb", learners.KLUCB,
    "kl-UCB (Garivier & Cappe 2011), Bernoulli kl, stationary, deterministic (1 query)")
LEARNERS.register("sw_klucb", learners.SWklUCB,
    "sliding-window kl-UCB: SW-UCB's window, the kl-UCB index, deterministic (1 query)")
LEARNERS.register("d_klucb", learners.DklUCB,
    "discounted kl-UCB: D-UCB's discount, the kl-UCB index, deterministic (1 query)")
LEARNERS.register("hedge", learners.Hedge,
    "Hedge, full information, eta = sqrt(8 ln n / T) (n queries)")
LEARNERS.register("saol_hedge", learners.SAOLHedge,
    "SAOL (Daniely et al. 2015) over geometric Hedge experts, full info (n queries)")
LEARNERS.register("saol", learners.SAOL,
    "SAOL-style bandit: every geometric EXP3 expert queries its own arm (1 + B queries)")
LEARNERS.register("stabl_one_query", learners.StABLOneQuery,
    "StABL observing only the played arm; meta weights get muted (1 query)")
LEARNERS.register("stabl_anytime", learners.StABLAnytime,
    "StABL, anytime rates set from the time since each restart (2 queries)")
LEARNERS.register("stabl_adaptive", learners.StABLAdaptive,
    "StABL, data-dependent rates (self-confident EXP3, ML-Prod) (2 queries)")
LEARNERS.register("stabl_rate_grid", learners.StABLRateGrid,
    "StABL over (history length, rate scale 1..1024) experts: no rate tuning (2 queries)")
LEARNERS.register("stabl_tuned", learners.StABL,
    "StABL again, so a config can run tuned [params] beside the printed (2 queries)")
LEARNERS.register("exp3_tuned", learners.EXP3,
    "EXP3 with uniform exploration again, so a config can run tuned [params] beside the "
    "printed (1 query)",
    defaults=_AUER_GAMMA)
_with_variants("stabl_vizier", learners.StABLVizier, {"naive_sampling": True}, (
    "the authors' StABL (Vizier): alternating play/observation trials (1 query)",
    "the authors' StABL with uniform observation trials (1 query)",
    "the authors' StABL with one history length, 1024 (1 query)"))
LEARNERS.register("exp3_vizier", learners.EXP3Vizier,
    "the authors' EXP3 (Vizier): anytime rate and uniform mix 1/sqrt(1+t) (1 query)")
LEARNERS.register("exp3_ix_vizier", learners.EXP3IXVizier,
    "the authors' Exp3-IX (Vizier): step 1, IX gamma 1/sqrt(1+t) (1 query)")
LEARNERS.register("flh", learners.FLH,
    "FLH (Hazan & Seshadhri 2009): EXP3 experts started every round, pruned (O(log T) queries)")
LEARNERS.register("eflh", learners.EFLH,
    "EFLH-style (Lu & Hazan 2022): FLH on a doubly exponential lookback, FLH's meta "
    "(O(log log T / eps) queries)")
LEARNERS.register("eflh_saol", learners.SAOL,
    "EFLH-style lengths under SAOL's interval-adaptive meta (saol, scales='eflh') "
    "(1 + O(log log T / eps) queries)",
    defaults={"scales": "eflh"})
LEARNERS.register("cusum_ucb", learners.CUSUMUCB,
    "CUSUM-UCB (Liu et al. 2018): UCB, per-arm CUSUM restarts, alpha-uniform (1 query)")
LEARNERS.register("m_ucb", learners.MUCB,
    "M-UCB (Cao et al. 2019): UCB, forced exploration, window test, global restart (1 query)")
LEARNERS.register("glr_klucb", learners.GLRklUCB,
    "GLR-klUCB (Besson et al. 2022): kl-UCB, Bernoulli GLR test, local restarts (1 query)")
LEARNERS.register("adswitch", learners.AdSwitch,
    "AdSwitch (Auer et al. 2019): episodes, elimination, scheduled bad-arm checks (1 query)")
LEARNERS.register("master", learners.MASTER,
    "MASTER (Wei & Luo 2021) over UCB1: multi-scale instances, two tests, restarts (1 query)")
LEARNERS.register("rexp3", learners.Rexp3,
    "Rexp3 (Besbes et al. 2014): Exp3 restarted every Delta_T rounds (1 query)")
LEARNERS.register("thompson", learners.Thompson,
    "Beta-Bernoulli Thompson sampling, Bernoulli trials of 1 - l (Agrawal & Goyal) (1 query)")
LEARNERS.register("discounted_thompson", learners.DiscountedThompson,
    "discounted Thompson sampling (Raj & Kalyani 2017), gamma = 0.95 (1 query)")
LEARNERS.register("sw_thompson", learners.SWThompson,
    "sliding-window Thompson sampling (Trovo et al. 2020), SW-UCB's window (1 query)")
LEARNERS.register("tsallis_inf", learners.TsallisINF,
    "Tsallis-INF (Zimmert & Seldin 2021): 1/2-Tsallis FTRL, reduced-variance (1 query)")

ENVS.register("expert_advice", ExpertAdvice,
    "the paper's piecewise expert advice: U[0,0.5) rewards, +0.5 on the best arm")
ENVS.register("bernoulli", PiecewiseBernoulli,
    "Bernoulli losses; the best arm's mean is lower by `gap`, changing per segment")
ENVS.register("bernoulli_table", PiecewiseBernoulliTable,
    "Bernoulli losses with a given (segments x arms) table of means, changing per segment")
ENVS.register("drifting_bernoulli", DriftingBernoulli,
    "Bernoulli losses with smoothly drifting means b + A sin(2 pi t / P + phi_i), no change points")

BCO_LEARNERS.register("stabl_bco", bco.StABLBCO,
    "Algorithm 3: geometric projected-OGD experts, k_t ~ U[B], factor B (3 queries)")
BCO_LEARNERS.register("stabl_bco_log_t", bco.StABLBCO,
    "Algorithm 3 with the printed factor log2 T instead of B (3 queries)",
    defaults={"scale_factor": "log_T"})
BCO_LEARNERS.register("stabl_bco_two_query", bco.StABLBCOTwoQuery,
    "Appendix D: Algorithm 3 with one linear surrogate g_hat (2 queries)")
BCO_LEARNERS.register("fkm", bco.FKM,
    "one-point bandit gradient descent, Flaxman-Kalai-McMahan 2005 (1 query)")
BCO_LEARNERS.register("two_point_ogd", bco.TwoPointOGD,
    "two-point OGD, Agarwal-Dekel-Xiao 2010, loss at played point (2 queries)")
BCO_LEARNERS.register("ogd_full_info", bco.FullInfoOGD,
    "projected OGD with exact gradients: a reference line, not a bandit (1 query)")

CONVEX_ENVS.register("moving_target", convex.MovingTarget,
    "distance to a target that jumps / alternates / drifts, ||x - c_t|| (G = 1)")
CONVEX_ENVS.register("abs_linear", convex.AbsoluteLinear,
    "|a_t^T (x - c_t)| with a fresh random direction a_t each round (G = a_scale)")
CONVEX_ENVS.register("huber", convex.HuberTarget,
    "Huber-smoothed quadratic h_mu(||x - c_t||) (G = min(mu, D + rho r), 1-smooth)")
# fmt: on
