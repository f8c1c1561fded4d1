"""Every row of the bad-input table in ``docs/reliability.md`` is a test here.

Each ``@row("ID")`` function feeds the bad input of its row (the row says what and why) to
its entry points and checks what the row says: an error naming the argument, the value and
what is allowed, or the documented behaviour. ``test_table_and_rows_match`` keeps the table
and the rows in step. Command-line rows fail before any computation (``_forbid_computation``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from stabl_jax import (
    EXP3,
    DriftingBernoulli,
    ExpertAdvice,
    PiecewiseBernoulli,
    StABL,
    Uniform,
    hpo_metrics,
    make,
    metrics,
)
from stabl_jax.bco.simulate import bco_adaptive_regret, paired_bco_adaptive_regret
from stabl_jax.checks import checked_step
from stabl_jax.domains import Ball
from stabl_jax.envs.bbob import BBOBFunction
from stabl_jax.envs.convex import CustomConvex, MovingTarget, distance_loss
from stabl_jax.envs.hpo import HPOEnv
from stabl_jax.experiment import bench as benchmark
from stabl_jax.experiment import cli
from stabl_jax.experiment.checkpoints import CheckpointMismatch, ChunkCheckpoint, save_arrays
from stabl_jax.experiment.configs import ConfigError
from stabl_jax.experiment.identity import experiment_identity
from stabl_jax.experiment.kinds import bandit as experiment_module
from stabl_jax.experiment.kinds import load_config
from stabl_jax.experiment.outputs import OutputError
from stabl_jax.experiment.results import ResultsFolder
from stabl_jax.experiment.tables import read_traces
from stabl_jax.intervals import geometric_history_lengths
from stabl_jax.registry import BCO_LEARNERS, CONVEX_ENVS, ENVS, LEARNERS
from stabl_jax.simulate import SimOptions, params_axes, regenerate_losses, simulate
from tests.conftest import mark_as_ours

REPO = Path(__file__).resolve().parent.parent
TABLE = REPO / "docs" / "reliability.md"
KEY = jax.random.key(0)
N, T = 3, 16

ROWS: dict[str, Callable[..., object]] = {}


def row(row_id: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
    def register(fn: Callable[..., object]) -> Callable[..., object]:
        assert row_id not in ROWS, row_id
        ROWS[row_id] = fn
        return fn

    return register


def raises(
    error: type[BaseException] | tuple, *fragments: str
) -> AbstractContextManager[pytest.ExceptionInfo[BaseException]]:
    """``pytest.raises`` whose message must contain every fragment (plain text, not regex)."""
    pattern = "".join(f"(?=[\\s\\S]*{re.escape(f)})" for f in fragments)
    return pytest.raises(error, match=pattern)


Fragments = str | tuple[str, ...]
call: Callable[..., Callable[[], object]] = functools.partial  # a call, made when its row runs


def refuses(error: type[BaseException], fragments: Fragments, fn: Callable, /, *args, **kw) -> None:
    """``fn(*args, **kw)`` raises ``error`` with every fragment in its message."""
    with raises(error, *((fragments,) if isinstance(fragments, str) else fragments)):
        fn(*args, **kw)


GOOD_CONFIG = """
name = "table"
runs = 2
horizon = 64
learners = ["uniform", "stabl"]
[env]
name = "expert_advice"
num_arms = 5
"""


def config_file(tmp_path: Path, text: str = GOOD_CONFIG, extra: str = "") -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text + extra)
    return path


def _forbid_computation(monkeypatch, module=experiment_module, name="run_experiment") -> None:
    def boom(*args, **kwargs):
        raise AssertionError(f"{name} ran although the command should have failed")

    monkeypatch.setattr(module, name, boom)


def cli_refuses(capsys, args: list[str], *fragments: str) -> str:
    """``stabl-jax ARGS`` exits with status 2, its error naming every fragment; returns it."""
    code, err = cli.main(args), capsys.readouterr().err
    assert code == 2 and all(fragment in err for fragment in fragments), err
    return err


# ==== Shared learners and environments ====
STABL = call(StABL, num_arms=3, horizon=64)
EXPERTS = call(ExpertAdvice, num_arms=3, horizon=64)
MOVING = call(MovingTarget, dim=2, horizon=64)
ENV = ExpertAdvice(num_arms=N, horizon=T)
LEARNER = EXP3(num_arms=N, horizon=T)
BERNOULLI = call(PiecewiseBernoulli, num_arms=3, horizon=64)
DRIFTING = DriftingBernoulli(num_arms=3, horizon=64)
CUSTOM = call(CustomConvex, dim=2, horizon=64, loss=distance_loss)


def simulate_with(num_runs: int, **options: Any) -> object:
    """``simulate(LEARNER, ENV, KEY, num_runs)`` with the ``SimOptions(**options)`` it builds."""
    return simulate(LEARNER, ENV, KEY, num_runs, options=SimOptions(**options))


# ==== Rows of refused calls ====
# Each row's checks: (error, fragments of its message, the call); ``call(f, ...)`` or a lambda
# makes the call when the row runs. The other rows are the functions below.
# fmt: off
REFUSED: dict[str, Sequence[tuple[type[BaseException], Fragments, Callable[[], object]]]] = {
    "L1": [(ValueError, ("num_arms", ">= 2", str(bad)), call(cls, num_arms=bad, horizon=64))
           for cls, bad in itertools.product((StABL, EXP3, Uniform), (1, 0, -3))],
    "L2": [(TypeError, ("num_arms must be an int", repr(bad)), call(STABL, num_arms=bad))
           for bad in (2.0, math.nan, "3", True)]
        + [(TypeError, ("horizon must be an int", repr(bad)), call(EXP3, num_arms=3, horizon=bad))
           for bad in (64.0, math.inf)],
    "L5": [(ValueError, ("history_lengths must be strictly increasing", str(bad)),
            call(STABL, history_lengths=bad)) for bad in ((64, 32), (16, 16))],
    "L7": [(ValueError, (f"{name} must be one of", repr(bad)), call(STABL, **{name: bad}))
           for name, bad in (("observation", "gumbel"), ("feedback", "regret"), ("expert_c", "3"),
                             ("round_offset", 2), ("dtype", "float16"))]
        + [(TypeError, "round_offset must be one of (0, 1), got True (bool)",  # == 1, refused
            call(STABL, round_offset=True))],
    "L8": [(ValueError, "gamma must be in [0, 1]", call(EXP3, num_arms=3, horizon=10, gamma=bad))
           for bad in (math.nan, math.inf, -0.1, 1.5)]
        + [(TypeError, ("gamma must be a real number", "'0.1'"),
            call(EXP3, num_arms=3, horizon=10, gamma="0.1"))],
    "L9": [(ValueError, "horizon must be >= 1, got 0",
            call(make, "exp3_uniform", num_arms=3, horizon=0))],
    "L10": [(ValueError, ("unknown learner 'stable' (did you mean 'stabl'?)", "stabl_naive"),
             call(make, "stable", num_arms=3, horizon=10)),
            (ValueError, "unknown learner 'zzz'; choose one of",
             call(make, "zzz", num_arms=3, horizon=10))],
    "P3": [(ValueError, ("params.lr_scale must be a scalar", "(3,)", "jax.vmap"),
            lambda: LEARNER.init(KEY, LEARNER.default_params.replace(lr_scale=jnp.ones(3))))],
    "P4": [(TypeError, ("params must be a StABLParams", "EXP3Params"),
            lambda: StABL(num_arms=N, horizon=T).init(KEY, LEARNER.default_params))],
    "E1": [(ValueError, "num_arms must be >= 2, got 1", call(cls, num_arms=1, horizon=64))
           for cls in (ExpertAdvice, PiecewiseBernoulli)],
    "E2": [(ValueError, ("horizon must be >= 2", str(bad)), call(EXPERTS, horizon=bad))
           for bad in (1, 0, -5)]
        + [(ValueError, ("horizon must be <= 2**31 - 1", "got 4294967296"),
            call(build, horizon=2**32)) for build in (EXPERTS, MOVING)],
    "E3": [(ValueError, ("change_points must be strictly increasing", str(bad)),
            call(EXPERTS, change_points=bad)) for bad in ((30, 10), (10, 10))]
        + [(ValueError, "strictly increasing", call(MOVING, change_points=(30, 10)))],
    "E4": [(ValueError, (f"change point {value} is out of range", "[1, 63]"),
            call(EXPERTS, change_points=bad))
           for bad, value in (((0, 10), "0"), ((10, 64), "64"), ((-3,), "-3"))],
    "E5": [(TypeError, ("change_points must be ints", "10.0"),
            call(EXPERTS, change_points=(10.0,))),
           (TypeError, ("change_points must be a sequence of ints", "7"),
            call(EXPERTS, change_points=7))],
    "E6": [(ValueError, "num_segments must be >= 1, got 0", call(EXPERTS, num_segments=0)),
           (ValueError, ("num_segments=65 exceeds horizon=64", "num_segments <= 64"),
            call(EXPERTS, num_segments=65, random_change_points=True))],
    "E7": [(ValueError, "change_points=(10,) and random_change_points=True exclude",
            call(build, change_points=(10,), random_change_points=True))
           for build in (EXPERTS, MOVING)],
    "E8": [(ValueError, name, call(EXPERTS, **kwargs)) for kwargs, name in (
               ({"baseline_high": math.nan}, "baseline_high"), ({"bonus": -1.0}, "bonus"),
               ({"baseline_high": 0.7}, "baseline_high + bonus must be <= 1"))]
        + [(ValueError, ("mean must be in [0, 1]", "inf"), call(BERNOULLI, mean=math.inf)),
           (ValueError, ("gap must be in (0, mean=0.5]", "0.0"), call(BERNOULLI, gap=0.0))]
        + [(ValueError, fragments, call(DRIFTING.make_params, **kwargs)) for kwargs, fragments in (
               ({"base": math.nan}, "base"), ({"amplitude": math.inf}, "amplitude"),
               ({"period": -1.0}, "period"), ({"phase_offset": math.inf}, "phase_offset"),
               ({"amplitude": 0.6}, ("amplitude=0.6 takes the means b +- A outside [0, 1]",
                                     "pass amplitude <= 0.5")),
               ({"base": 0.8, "amplitude": 0.3}, "base=0.8: pass amplitude <= 0.2"),
               ({"period": 0.0}, "period must be a finite number > 0, got 0.0"),
               ({"amplitude": -0.1}, "amplitude must be a finite number >= 0, got -0.1"))],
    "E9": [(ValueError, ("best_arm_order must be one of", "'x'"), call(build, best_arm_order="x"))
           for build in (BERNOULLI, EXPERTS)],
    "E12": [(TypeError, "random_change_points must be True or False, got 'false'",
             call(build, num_segments=2, random_change_points="false"))
            for build in (EXPERTS, MOVING)]
         + [(TypeError, f"{name} must be True or False, got 1 (int)",
             call(BBOBFunction, function_id=1, dim=2, **{name: 1}))
            for name in ("rotate", "normalize")]
         + [(ValueError, f"{field} must be a finite number > 0, got {bad}",
             call(CONVEX_ENVS.make, name, dim=2, horizon=64, **{field: bad}))
            for name, field in (("abs_linear", "a_scale"), ("huber", "huber_mu"))
            for bad in (math.inf, 0.0, -1.0)]
         + [(TypeError, f"{field} must be a real number, got '1'",
             call(CONVEX_ENVS.make, name, dim=2, horizon=64, **{field: "1"}))
            for name, field in (("abs_linear", "a_scale"), ("huber", "huber_mu"))]
         # A user's loss family and FKM's loss bound: the same rule (float() read "1" and inf).
         + [(ValueError, f"lipschitz_bound must be a finite number > 0, got {bad}",
             call(CUSTOM, lipschitz_bound=bad)) for bad in (math.inf, 0.0)]
         + [(TypeError, "loss_bound must be a real number, got '1'",
             call(BCO_LEARNERS.make, "fkm", dim=2, horizon=64, loss_bound="1")),
            (TypeError, "target_radius must be a real number, got '0.5'",  # was read
             call(MOVING, target_radius="0.5")),
            # A minimiser that is not a function failed only inside simulate.
            (TypeError, "minimizer_fn must be None or a callable theta -> (d,), got 'x'",
             call(CUSTOM, minimizer_fn="x"))],
    "M2": [(ValueError, "horizon must be >= 1, got 0",
            call(simulate, LEARNER, ENV, KEY, 1, horizon=0)),
           (ValueError, (f"horizon must be <= env.horizon={T}", "32"),
            call(simulate, LEARNER, ENV, KEY, 1, horizon=2 * T))],
    "M3": [(ValueError, ("chunk_size must be >= 1", str(bad), "(None picks one"),
            call(simulate_with, 1, chunk_size=bad)) for bad in (0, -5)]
        + [(TypeError, ("chunk_size must be an int", "2.5"),
            call(simulate_with, 1, chunk_size=2.5))],
    "M4": [(TypeError, ("key must be a PRNG key", "0"), call(simulate, LEARNER, ENV, 0, 1)),
           (ValueError, ("key must be a single PRNG key", "(2,)"),
            lambda: simulate(LEARNER, ENV, jax.random.split(KEY), 1)),
           (TypeError, ("key must be a PRNG key", "float32"),
            lambda: simulate(LEARNER, ENV, jnp.zeros(2), 1))],
    "M5": [(ValueError, "learner.num_arms=4 does not match env.num_arms=3",
            call(simulate, EXP3(num_arms=N + 1, horizon=T), ENV, KEY, 1))],
    "M6": [(ValueError, fragments,
            call(simulate, LEARNER, ENV, KEY, 2, params=LEARNER.default_params.replace(**bad)))
           for bad, fragments in (
               ({"gamma": jnp.float32(2.0)}, ("params.gamma", "[0, 1]", "2.0")),
               ({"lr_scale": jnp.array([1.0, jnp.nan])}, ("params.lr_scale", "nan")),
               ({"lr_scale": jnp.ones(3)}, ("leading axis num_runs=2", "(3,)")))],
    "M8": [(TypeError, ("env must be an environment, got 'expert_advice'", "make_env"),
            call(simulate, LEARNER, "expert_advice", KEY, 2)),
           (TypeError, "learner must be a learner, got None", call(simulate, None, ENV, KEY, 2))],
    "M9": [(TypeError, "traces must be a tuple of names, got the string 'loss'",
            call(simulate, LEARNER, ENV, KEY, 2, traces="loss")),
           (TypeError, ("traces must be a tuple of names from (", "got 3"),
            call(simulate, LEARNER, ENV, KEY, 2, traces=3)),
           (ValueError, ("traces must be one of", "'regret'"),
            call(simulate, LEARNER, ENV, KEY, 2, traces=("loss", "regret")))],
    "M10": [(TypeError, f"progress must be True or False, got {bad!r}",
             call(simulate_with, 2, progress=bad)) for bad in ("yes", 3)]
         + [(TypeError, "checkpoint must be a stabl_jax.experiment.checkpoints.ChunkCheckpoint",
             call(simulate_with, 2, checkpoint="run.npz"))],
}
# fmt: on


def _refused_row(row_id: str) -> None:
    for error, fragments, check in REFUSED[row_id]:
        refuses(error, fragments, check)


# ==== Learner constructors ====
@row("L3")
def _():
    for bad in (0, -1):
        refuses(ValueError, ("horizon must be >= 1", str(bad)), EXP3, num_arms=3, horizon=bad)
    # Rounds are int32: a longer horizon failed with an OverflowError only once simulated.
    int32 = "horizon must be <= 2**31 - 1 = 2147483647 (rounds are counted in int32)"
    too_long = (int32, "got 2147483648")
    refuses(ValueError, too_long, EXP3, num_arms=3, horizon=2**31)
    refuses(ValueError, too_long, make, "stabl", num_arms=3, horizon=2**31)
    refuses(ValueError, too_long, BCO_LEARNERS.make, "fkm", dim=2, horizon=2**31)
    assert StABL(num_arms=3, horizon=2**31 - 1).history_lengths[-1] == 2**30


@row("L4")
def _():
    # k runs from ceil(2 + log2 log2 T) to floor(log2 T): empty below 16 and for 17..31.
    for bad in (15, 8, 17, 20, 31):
        small = (f"horizon={bad}", "too small for the geometric intervals", "32")
        refuses(ValueError, small, StABL, num_arms=3, horizon=bad)
    assert StABL(num_arms=3, horizon=16).history_lengths == (16,)
    assert StABL(num_arms=3, horizon=32).history_lengths == (32,)
    assert geometric_history_lengths(16) == (16,)
    refuses(ValueError, "horizon=15", geometric_history_lengths, 15)
    one = "horizon must be >= 2 for geometric intervals, got 1"
    refuses(ValueError, one, geometric_history_lengths, 1)
    for bad in (True, 64.0, "64"):
        refuses(TypeError, f"horizon must be an int, got {bad!r}", geometric_history_lengths, bad)


@row("L6")
def _():
    refuses(ValueError, "history_lengths must not be empty", STABL, history_lengths=())
    for bad in ((0, 4), (-16, 32), (16.0, 32.0)):
        refuses(ValueError, "history_lengths must be positive ints", STABL, history_lengths=bad)
    assert STABL(history_lengths=32).history_lengths == (32,)  # an int
    refuses(TypeError, "must be a tuple of ints, got 3.5", STABL, history_lengths=3.5)
    too_long = ("history_lengths must be <= 2**31 - 1", "got 2147483648")
    refuses(ValueError, too_long, STABL, history_lengths=(32, 2**31))
    longest = STABL(history_lengths=(32, 2**31 - 1))
    env = ExpertAdvice(num_arms=3, horizon=64)
    assert simulate(longest, env, KEY, 1, traces=("loss",)).loss.shape == (1, 64)


@row("L11")
def _():
    for build, name in (
        (STABL, "validate"),
        (call(BCO_LEARNERS.make, "stabl_bco", dim=2, horizon=64), "validate"),
        (call(make, "stabl_rate_grid", num_arms=3, horizon=64), "scale_meta"),
        (call(make, "stabl_vizier", num_arms=3, horizon=64), "naive_sampling"),
    ):
        for bad in ("false", 1):
            refuses(TypeError, f"{name} must be True or False, got {bad!r}", build, **{name: bad})
    make("stabl_vizier", num_arms=3, horizon=64, naive_sampling=np.bool_(True))  # NumPy's bool
    no = "validate must be True or False, got 'no' (str)"
    refuses(TypeError, no, simulate, LEARNER, ENV, KEY, 1, validate="no")


@row("L12")
def _():
    typo = "learner 'stabl_naive' (StABL) takes no argument 'historylengths'"
    typo_hint = (typo, "did you mean 'history_lengths'?", "its arguments are num_arms, horizon")
    refuses(
        TypeError, typo_hint, make, "stabl_naive", num_arms=3, horizon=64, historylengths=(32, 64)
    )
    needs = ("learner 'stabl' (StABL) needs horizon", "its arguments are")
    refuses(TypeError, needs, make, "stabl", num_arms=3)
    segments = "environment 'expert_advice' (ExpertAdvice) takes no argument 'segments' (did you"
    refuses(TypeError, segments, ENVS.make, "expert_advice", num_arms=3, horizon=64, segments=2)
    refuses(TypeError, "BCO learner 'fkm' (FKM) needs horizon", BCO_LEARNERS.make, "fkm", dim=2)
    lr = "learner 'exp3' (EXP3) takes no argument 'lr'"
    refuses(TypeError, lr, LEARNERS["exp3"], num_arms=3, horizon=64, lr=0.1)  # called directly
    # An entry's defaults count as given, and the run's validate switch is still taken.
    assert make("stabl_naive", num_arms=3, horizon=64, validate=True).observation == "uniform"


# ==== Learner params ====
@row("L13")
def _():
    exp3 = EXP3(num_arms=N, horizon=T, dtype="float64")
    for learner in (exp3, BCO_LEARNERS.make("fkm", dim=2, horizon=T, dtype="float64")):
        needs_x64 = f"{type(learner).__name__} with dtype='float64' needs 64-bit JAX"
        refuses(ValueError, needs_x64, learner.init, KEY)
        with jax.enable_x64(True):
            state = learner.init(KEY)
            params = learner.default_params
        floats = {x.dtype for x in jax.tree.leaves(state) if x.dtype.kind == "f"}
        assert floats == {np.dtype("float64")}
        refuses(ValueError, needs_x64, learner.init, KEY, params)  # explicit params: the same
    refuses(ValueError, "EXP3 with dtype='float64' needs 64-bit JAX", simulate, exp3, ENV, KEY, 1)


def _init_with(learner, error: type[BaseException], fragments: tuple[str, ...], **params) -> None:
    """``learner.init`` of its default params with ``params`` replaced raises ``error``."""
    refuses(error, fragments, learner.init, KEY, learner.default_params.replace(**params))


@row("P1")
def _():
    learner = StABL(num_arms=N, horizon=T)
    for bad in (math.nan, math.inf, -math.inf):
        fragments = ("params.expert_lr_scale must be finite", str(bad))
        _init_with(learner, ValueError, fragments, expert_lr_scale=jnp.float32(bad))


@row("P2")
def _():
    exp3, stabl = EXP3(num_arms=N, horizon=T), StABL(num_arms=N, horizon=T)
    _init_with(exp3, ValueError, ("params.gamma", "[0, 1]", "2.0"), gamma=jnp.float32(2.0))
    _init_with(exp3, ValueError, ("params.lr_scale", "[0, inf)", "-1.0"), lr_scale=jnp.float32(-1))
    zero = ("params.meta_lr_scale", "(0, inf)", "0.0")
    _init_with(stabl, ValueError, zero, meta_lr_scale=jnp.float32(0.0))
    # Positive but so small that eta_k underflows: every meta weight would be log(0).
    tiny = ("params.meta_lr_scale=1e-40", "underflow in float32", "allowed")
    _init_with(stabl, ValueError, tiny, meta_lr_scale=jnp.float32(1e-40))
    # Anytime StABL's smallest meta rate is its last round's, 1/sqrt(n min(L_B, T)) = 1/sqrt(5
    # 64): 1e-37 times it is below float32's smallest normal, which the CPU flushes to 0 (a NaN
    # mixture when run); 1e-36 is not.
    anytime = make("stabl_anytime", num_arms=5, horizon=64)
    assert anytime.smallest_base_meta_step_size() == 1 / math.sqrt(5 * 64)
    tiny = ("params.meta_lr_scale=1e-37", "eta_k = 5.59e-39 underflow")
    _init_with(anytime, ValueError, tiny, meta_lr_scale=jnp.float32(1e-37))
    anytime.init(KEY, anytime.default_params.replace(meta_lr_scale=jnp.float32(1e-36)))
    # A BCO ensemble's eta_k is divided by params.lipschitz: a huge G underflows it too.
    bco = BCO_LEARNERS.make("stabl_bco", dim=2, horizon=T)
    huge = ("params.lipschitz=1e+38", "underflow in float32", "lipschitz <=")
    _init_with(bco, ValueError, huge, lipschitz=jnp.float32(1e38))
    # Adaptive StABL's rates depend on the data; its bound is the worst case's, 1/(E sqrt m)
    # with E = 2B = 4, m = 64: 1e-38 (a NaN mixture when run) is refused, 1e-36 is not.
    adaptive = make("stabl_adaptive", num_arms=5, horizon=64)
    assert adaptive.smallest_base_meta_step_size() == 1 / (4 * 8)
    tiny = ("params.meta_lr_scale=1e-38", "eta_k = 3.12e-40 underflow")
    _init_with(adaptive, ValueError, tiny, meta_lr_scale=jnp.float32(1e-38))
    adaptive.init(KEY, adaptive.default_params.replace(meta_lr_scale=jnp.float32(1e-36)))


@row("P5")
def _():
    learner = StABL(num_arms=N, horizon=T)
    params = learner.default_params.replace(meta_lr_scale=jnp.array([1.0, jnp.nan], jnp.float32))
    states = jax.vmap(learner.init, in_axes=(None, params_axes(params)))(KEY, params)
    assert np.isnan(np.asarray(states.meta_log_weights[1])).all()  # documented: not checked
    nan = ("params.meta_lr_scale", "nan")
    refuses(ValueError, nan, simulate, learner, ENV, KEY, 2, params=params)


# ==== step / tell / ask ====
BAD_LOSSES = {
    "S1": ([0.1, math.nan, 0.3], ("nan",)),
    "S2": ([0.1, math.inf, 0.3], ("inf",)),
    "S3": ([0.1, 1.5, -0.2], ("1.5", "clipped")),
}


def _bad_loss_row(row_id: str) -> None:
    values, fragments = BAD_LOSSES[row_id]
    for name in ("uniform", "exp3", "stabl"):
        learner = make(name, num_arms=N, horizon=T)
        state = learner.init(KEY)
        with raises(ValueError, "loss must be finite and in [0, 1]", *fragments):
            learner.step(state, jnp.asarray(values, jnp.float32), KEY)
        query = learner.ask(state, KEY)
        observed = jnp.asarray(values, jnp.float32)[query.arms] * 0 + values[1]
        with raises(ValueError, "observed must be finite and in [0, 1]"):
            learner.tell(state, query, observed)


def _initial(cls: type) -> tuple[Any, Any]:
    """A learner of ``cls`` with N arms and T rounds, and its initial state."""
    learner = cls(num_arms=N, horizon=T)
    return learner, learner.init(KEY)


@row("S4")
def _():
    learner, state = _initial(StABL)
    for bad in (jnp.full((N + 1,), 0.5), jnp.full((1, N), 0.5)):
        shape = (f"loss must have shape ({N},)", str(tuple(bad.shape)))
        refuses(ValueError, shape, learner.step, state, bad, KEY)
        refuses(ValueError, shape[0], jax.jit(learner.step), state, bad, KEY)  # static: jit too


@row("S5")
def _():
    learner, state = _initial(EXP3)
    for bad in (jnp.array([0, 1, 0]), jnp.array([False, True, False])):
        floating = ("loss must be floating point", str(bad.dtype))
        refuses(TypeError, floating, learner.step, state, bad, KEY)


@row("S6")
def _():
    learner, state = _initial(EXP3)
    a, _ = learner.step(state, [0.1, 0.5, 0.9], KEY)
    b, _ = learner.step(state, np.array([0.1, 0.5, 0.9]), KEY)
    c, _ = learner.step(state, jnp.array([0.1, 0.5, 0.9], jnp.float32), KEY)
    assert a.log_weights.dtype == jnp.float32
    np.testing.assert_array_equal(a.log_weights, c.log_weights)
    np.testing.assert_array_equal(b.log_weights, c.log_weights)


@row("S7")
def _():
    learner, state = _initial(StABL)
    observed = ("observed must have shape (2,)", "(1,)")
    refuses(ValueError, observed, learner.tell, state, learner.ask(state, KEY), jnp.array([0.5]))


@row("S8")
def _():
    learner, state = _initial(StABL)
    query = learner.ask(state, KEY)

    def tell(error: type[BaseException], fragments: str | tuple[str, ...], **bad: Any) -> None:
        refuses(error, fragments, learner.tell, state, query.replace(**bad), jnp.array([0.2, 0.3]))

    tell(ValueError, ("query.arms must lie in [0, 2]", "7"), arms=jnp.array([0, 7], jnp.int32))
    tell(ValueError, ("query.query_probs must be in (0, 1]", "0.0"), query_probs=jnp.zeros(2))
    tell(TypeError, "query.arms must be integers", arms=jnp.array([0.0, 1.0]))
    tell(ValueError, "query.arms must have shape (2,)", arms=jnp.zeros(3, jnp.int32))
    tell(ValueError, f"query.play_probs must have shape ({N},)", play_probs=query.play_probs[:-1])


@row("S9")
def _():
    small, large = StABL(num_arms=N, horizon=64), StABL(num_arms=N + 2, horizon=64)
    state = large.init(KEY)
    loss = jnp.full((N,), 0.5)
    shape = ("state.expert_log_probs has shape", str((2, N + 2)), str((2, N)))
    refuses(ValueError, shape, small.ask, state, KEY)
    for step in (small.step, jax.jit(small.step)):  # static shapes: also under jit
        refuses(ValueError, "state.expert_log_probs", step, state, loss, KEY)
    exp3 = EXP3(num_arms=N, horizon=64)
    refuses(ValueError, "does not come from EXP3.init", exp3.step, small.init(KEY), loss, KEY)


@row("S10")
def _():
    learner, state = _initial(StABL)
    bad = jnp.array([0.1, jnp.nan, 0.3])
    new_state, _ = jax.jit(learner.step)(state, bad, KEY)
    assert int(new_state.t) == 1  # no error: values of tracers cannot raise
    step = checked_step(learner)
    state, _ = step(state, jnp.array([0.1, 0.2, 0.3]), KEY)
    failed = checkify.JaxRuntimeError
    refuses(failed, ("loss at round 1", "nan", "index 1", "[0, 1]"), step, state, bad, KEY)
    too_high = jnp.array([0.1, 0.2, 1.5])
    refuses(failed, ("loss at round 1", "1.5", "index 2"), step, state, too_high, KEY)


@row("S11")
def _():
    learner, state = _initial(EXP3)
    loss = jnp.full((N,), 0.5)
    for bad in (None, 3):
        refuses(TypeError, ("key must be a PRNG key", repr(bad)), learner.step, state, loss, bad)
    two = ("key must be a single PRNG key", "(2,)")
    refuses(ValueError, two, learner.step, state, loss, jax.random.split(KEY))


# ==== Environments ====
@row("E10")
def _():
    env = EXPERTS(change_points=(32,))
    params = env.default_params
    assert int(env.best_arm(params, 1000)) == int(env.best_arm(params, 63)) == 1
    assert int(env.best_arm(params, -1)) == int(env.best_arm(params, 0)) == 0


@dataclasses.dataclass(frozen=True)
class _BrokenEnv(ExpertAdvice):
    """Emits a loss of 1.5 on arm 2 at round 9: a user's environment gone wrong."""

    def loss(self, params, t, key):
        loss = super().loss(params, t, key)
        return jnp.where(t == 9, loss.at[2].set(1.5), loss)


def _nan_loss(theta, x):
    """A user's loss family that is broken: NaN everywhere."""
    return jnp.nan * jnp.sum(jnp.abs(x - theta))


@row("E11")
def _():
    env, eight = _BrokenEnv(num_arms=N, horizon=T), SimOptions(chunk_size=8)
    plain = simulate(LEARNER, env, KEY, 2, options=eight)  # documented: not checked
    assert plain.loss.shape == (2, T)
    with raises(checkify.JaxRuntimeError, "loss at round 9", "1.5", "index 2", "[0, 1]"):
        simulate(LEARNER, env, KEY, 2, validate=True, options=eight)
    # A convex environment's NaN loss: checked after the run (a check inside the program
    # would change StABL-BCO's bits); it used to finish, its summary all NaN, with exit 0.
    convex = CustomConvex(dim=2, horizon=T, loss=_nan_loss, lipschitz_bound=1.0)
    fkm = BCO_LEARNERS.make("fkm", dim=2, horizon=T)
    assert np.isnan(simulate(fkm, convex, KEY, 2).loss).all()  # not checked
    with raises(ValueError, "loss of run 0 at round 0 is nan, not finite", "row E11"):
        simulate(fkm, convex, KEY, 2, validate=True)
    # Its best_loss is NaN by design (no minimiser given): that is not refused.
    no_minimiser = CustomConvex(dim=2, horizon=T, loss=distance_loss)
    assert np.isnan(simulate(fkm, no_minimiser, KEY, 1, validate=True).best_loss).all()


class _Constant(ExpertAdvice):
    """A user's subclass overriding ``loss`` alone: every arm loses 0.25 every round."""

    def loss(self, params, t, key):
        return jnp.full((self.num_arms,), 0.25)


@row("E11b")
def _():
    """The inherited ``loss_at`` draws ExpertAdvice's losses, not the override's: recording
    only the queried arms' losses (the path that calls ``loss_at``) still shows the override's."""
    result = simulate(LEARNER, _Constant(num_arms=N, horizon=T), KEY, 2, traces=("loss",))
    np.testing.assert_array_equal(result.loss, np.full((2, T), 0.25, np.float32))


# ==== simulate ====
A = {"experiment": "A"}


@row("M1")
def _():
    for bad in (0, -2):
        refuses(ValueError, ("num_runs must be >= 1", str(bad)), simulate, LEARNER, ENV, KEY, bad)
    refuses(TypeError, ("num_runs must be an int", "2.0"), simulate, LEARNER, ENV, KEY, 2.0)
    refuses(ValueError, "first_run must be >= 0, got -1", simulate_with, 1, first_run=-1)
    too_late = ("first_run must be <= 2**31 - 1 = 2147483647", "got 2147483648")
    refuses(ValueError, too_late, simulate_with, 1, first_run=2**31)
    last_runs = SimOptions(first_run=2**31 - 1)
    last = simulate(LEARNER, ENV, KEY, 2, traces=("played",), options=last_runs).played
    first = simulate(LEARNER, ENV, KEY, 1, traces=("played",)).played
    assert len({last[0].tobytes(), last[1].tobytes(), first[0].tobytes()}) == 3


@row("M2b")
def _():
    shorter = "learner.horizon=8 is shorter than the 16 rounds simulated"
    with raises(ValueError, shorter, "build the learner with horizon >= 16"):
        simulate(EXP3(num_arms=N, horizon=T // 2), ENV, KEY, 1)
    assert simulate(EXP3(num_arms=N, horizon=2 * T), ENV, KEY, 1).played.shape == (1, T)
    assert simulate(EXP3(num_arms=N, horizon=T // 2), ENV, KEY, 1, horizon=T // 2).horizon == 8


@row("M5b")
def _():
    fkm = BCO_LEARNERS.make("fkm", dim=2, horizon=T)
    selection = HPOEnv(BBOBFunction(function_id=1, dim=2, normalize=True))
    pair = "pair bandit learners (stabl_jax.make) with bandit environments"
    to_convex = "learner EXP3 is a bandit learner (num_arms=3) but env MovingTarget is a convex"
    bco = "learner FKM is a BCO learner (dim=2) but env"
    for learner, env, mismatch in (
        (LEARNER, MovingTarget(dim=2, horizon=T), f"{to_convex} environment (dim=2)"),
        (fkm, ENV, f"{bco} ExpertAdvice is a bandit environment (num_arms=3)"),
        (fkm, selection, f"{bco} HPOEnv is a bandit environment"),
    ):
        refuses(TypeError, (mismatch, pair), simulate, learner, env, KEY, 1)


@row("M7")
def _(tmp_path):
    def resume(fingerprint):
        return SimOptions(chunk_size=8, checkpoint=ChunkCheckpoint(tmp_path / "ckpt", fingerprint))

    simulate(LEARNER, ENV, KEY, 2, options=resume(A))
    with raises(CheckpointMismatch, "different run", "experiment", "'A'", "'B'"):
        simulate(LEARNER, ENV, KEY, 2, options=resume({"experiment": "B"}))
    # Same fingerprint but another simulation (4 runs, not 2): the loop state does not fit.
    with raises(CheckpointMismatch, "shape"):
        simulate(LEARNER, ENV, KEY, 4, options=resume(A))


@row("M10b")
def _(tmp_path: Path):
    path = tmp_path / "run"
    path.write_text("mine")
    with raises(NotADirectoryError, f"checkpoint folder {path} is a file: give a folder"):
        ChunkCheckpoint(path, {"run": 1})
    assert path.read_text() == "mine"


@row("M11")
def _():
    result = simulate(LEARNER, ENV, KEY, 2, traces=("loss",))
    assert result.env is ENV
    windows = [4]
    same = ExpertAdvice(num_arms=N, horizon=T)  # equal to ENV: the same losses
    sa = [metrics.adaptive_regret(result, env, windows)["sampled"] for env in (same, ENV)]
    np.testing.assert_array_equal(*sa)
    other_env = "give adaptive_regret the environment of the simulation (result.env)"
    other_env_fragments = ("result was simulated on ExpertAdvice(num_arms=3", other_env)
    for other in (ExpertAdvice(num_arms=N + 1, horizon=T), EXPERTS(horizon=T, change_points=(5,))):
        refuses(ValueError, other_env_fragments, metrics.adaptive_regret, result, other, windows)
    shorter = ExpertAdvice(num_arms=N, horizon=T // 2)
    with raises(ValueError, "cannot regenerate rounds up to 16 of ExpertAdvice with horizon=8"):
        metrics.paired_adaptive_regret(shorter, result.carry, {"l": result.loss}, windows)
    for start, stop, error in (
        (-4, 4, "t_start must be >= 0, got -4"),
        (8, 4, "t_stop must be >= 8"),
    ):
        refuses(ValueError, error, regenerate_losses, ENV, result.carry, start, stop)
    with raises(TypeError, "t_start must be an int, got 2.5 (float)"):
        regenerate_losses(ENV, result.carry, 2.5, 8)
    convex = MovingTarget(dim=2, horizon=T)
    bco_result = simulate(BCO_LEARNERS.make("fkm", dim=2, horizon=T), convex, KEY, 1)
    with raises(ValueError, "result was simulated on MovingTarget(dim=2", "bco_adaptive_regret"):
        bco_adaptive_regret(bco_result, MovingTarget(dim=2, horizon=T, target_radius=0.25), windows)


@row("M12")
def _():
    good = np.array([[1.0, 1.0], [10.0, 1.0]])
    np.testing.assert_allclose(hpo_metrics.profile_scores(good), [1.0, 0.5])
    with raises(ValueError, "costs must be finite, got nan at index (0, 0) (1 of 4 entries)"):
        hpo_metrics.profile_scores(np.array([[np.nan, 1.0], [10.0, 1.0]]))
    for bad in (np.zeros((2, 0)), np.ones(2)):
        with raises(ValueError, f"costs must be a non-empty 2-D array, got shape {bad.shape}"):
            hpo_metrics.performance_profile(bad, np.ones(3))
    for tau_max in (1.0, math.inf):
        with raises(ValueError, f"tau_max must be a finite number > 1, got {tau_max!r}"):
            hpo_metrics.score_vs_baseline_curve(good, good, tau_max=tau_max)
    with raises(ValueError, "costs and baseline costs must be of the same problems"):
        hpo_metrics.score_vs_baseline(np.ones(2), np.ones(3))
    with raises(ValueError, "best_gap must be a non-empty 2-D array, got shape (2,)"):
        hpo_metrics.log_curve(np.ones(2))
    gaps = np.arange(1.0, 7.0).reshape(2, 3)
    results = [{"learners": {"a": {"best_gap": gaps}, "uniform": {"best_gap": 2 * gaps[:, ::-1]}}}]
    at = [hpo_metrics.profiles_across(results, at=k)["scores"]["uniform"] for k in (1, 2, 3)]
    assert len(set(at)) == 3  # the three budgets score differently
    for bad, error in ((0, ">= 1, got 0"), (-2, ">= 1, got -2"), (4, "<= 3 (the shortest")):
        refuses(ValueError, f"at must be {error}", hpo_metrics.profiles_across, results, at=bad)
    with raises(TypeError, "num_evaluations must be an int, got 10.5 (float)"):
        hpo_metrics.make_hpo_learner("stabl", 24, 10.5)
    with raises(ValueError, "num_evaluations must be >= 1, got 0"):
        hpo_metrics.make_hpo_learner("stabl", 24, 0)


@row("M13")
def _():
    four = simulate(LEARNER, ENV, KEY, 4, traces=("loss",))
    two = simulate(LEARNER, ENV, KEY, 2, traces=("loss",))
    paired, windows = call(metrics.paired_adaptive_regret, ENV), [4]
    good = paired(four.carry, {"a": four.loss}, windows)["a"]
    assert good.shape == (4, 1) and np.isfinite(good).all()
    for carry, loss, runs in ((two.carry, four.loss, 2), (four.carry, two.loss, 4)):
        other_runs = f"traces['a'] must be (R, T) with R={runs}, the runs of carry"
        refuses(ValueError, other_runs, paired, carry, {"a": loss}, windows)
        refuses(ValueError, other_runs, metrics.paired_cumulative_regret, ENV, carry, {"a": loss})
    one_run = "traces['a'] must be (R, T), got shape (16,)"
    refuses(ValueError, one_run, metrics.CumulativeRegret, ENV, {"a": four.loss[0]})
    with raises(ValueError, "traces['b'] has shape (4, 8), traces['a'] (4, 16)"):
        paired(four.carry, {"a": four.loss, "b": four.loss[:, :8]}, [4])
    none = "traces must hold at least one (R, T) loss trace, got none"
    refuses(ValueError, none, paired, four.carry, {}, windows)
    broken = four.loss.copy()
    broken[1, 5] = np.nan
    with raises(ValueError, "traces['a'] must be finite, got nan at index (1, 5) (1 of 64"):
        paired(four.carry, {"a": broken}, windows)
    played, arm_losses = np.full(T, 0.5), np.full((T, N), 0.25)
    np.testing.assert_allclose(metrics.adaptive_regret_from_losses(played, arm_losses, [4]), [1.0])
    played[3] = np.inf
    with raises(ValueError, "played must be finite, got inf at index (3,) (1 of 16 entries)"):
        metrics.adaptive_regret_from_losses(played, arm_losses, [4])
    for bad in (arm_losses[:10], arm_losses[:, 0]):
        with raises(ValueError, f"arm_losses must be (T, n) with T={T}, the rounds of played"):
            metrics.adaptive_regret_from_losses(np.full(T, 0.5), bad, [4])


@row("M14")
def _():
    env = MovingTarget(dim=2, horizon=T)
    result = simulate(BCO_LEARNERS.make("fkm", dim=2, horizon=T), env, KEY, 2)
    good = bco_adaptive_regret(result, env, [4])["sa"]
    same = bco_adaptive_regret(result, env, [4], domain=Ball(dim=2))["sa"]
    np.testing.assert_array_equal(same, good)
    sa = call(bco_adaptive_regret, result, env)
    refuses(TypeError, "window length must be an int, got 4.5 (float)", sa, [4.5])
    refuses(TypeError, "stride must be an int, got 2.5 (float)", sa, [4], stride=2.5)
    for name in ("stride", "num_steps", "runs_per_block"):
        refuses(ValueError, f"{name} must be >= 1, got 0", sa, [4], **{name: 0})
    refuses(ValueError, "domain.dim=3 does not match env.dim=2", sa, [4], domain=Ball(dim=3))
    own = "MovingTarget solves its window comparators on its own domain"
    refuses(ValueError, own, sa, [4], domain=Ball(dim=2, radius=0.5))
    with raises(ValueError, "losses['a'] must be (R, T) with R=2, the runs of carry"):
        paired_bco_adaptive_regret(env, result.carry, {"a": result.loss[:1]}, [4])


# ==== Configs ====
SCALE = GOOD_CONFIG + "[params.stabl]\nmeta_lr_scale = {}\n"
# Each row's configs: (the file's text, fragments of its ConfigError besides the file's path).
# fmt: off
CONFIG_ERRORS: dict[str, Sequence[tuple[str, tuple[str, ...]]]] = {
    "C1": [(GOOD_CONFIG.replace("runs = 2", 'runs = 2\ncolour = "red"'),
            ("unknown key 'colour'", "allowed keys", "horizon")),
           (GOOD_CONFIG + "colour = 1\n", ("key 'env.colour'", "allowed keys", "num_arms"))],
    "C2": [(GOOD_CONFIG.replace("2", "'many'", 1), ("'runs'", "must be an int", "'many'"))],
    "C3": [(GOOD_CONFIG.replace(old, new), (key,)) for old, new, key in (
               ("runs = 2", "runs = 0", "'runs'"),
               ("runs = 2", "runs = -4", "'runs'"),
               ("horizon = 64", "horizon = 8", "'horizon'"),
               ("runs = 2", "runs = 2\nchunk_size = 0", "'chunk_size'"),
               ("runs = 2", "runs = 2\nwindow = 100", "'window'"),
               ("runs = 2", "runs = 2\nseed = -1", "'seed'"),
               # key(2**32) is key(0) without x64: the runs of seed 0 under another name.
               ("runs = 2", "runs = 2\nseed = 4294967296", "in [0, 4294967295], got 4294967296"))],
    "C4": [(SCALE.format(value), ("'params.stabl.meta_lr_scale'", "finite number >= 0"))
           for value in ("nan", "inf", "-inf", "-1.0")]
        + [(SCALE.format("0.0"),
            ("'params.stabl'", "meta_lr_scale must be finite and in (0, inf)"))],
    "C5": [(GOOD_CONFIG + "baseline_high = nan\n", ("'env'", "baseline_high must be in [0, 1]"))],
    "C6": [(GOOD_CONFIG + "change_points = [40, 20]\n", ("'env'", "strictly increasing")),
           (GOOD_CONFIG + "change_points = [20, 64]\n", ("'env'", "[1, 63]"))],
    "C7": [(GOOD_CONFIG + "[learner_options.stabl]\nhistory_lengths = [32, 16]\n",
            ("'learner_options.stabl'", "strictly increasing"))],
    "C8": [(GOOD_CONFIG.replace("= 5", "= 1"), ("'env'", "num_arms must be >= 2"))],
}
# fmt: on


def _config_row(row_id: str, tmp_path: Path) -> None:
    for text, fragments in CONFIG_ERRORS[row_id]:
        path = config_file(tmp_path, text)
        refuses(ConfigError, (str(path), *fragments), load_config, path)


# Each row's ``--set`` lists, given to GOOD_CONFIG's file, and the fragments of their ConfigError.
# fmt: off
SET_ERRORS: dict[str, Sequence[tuple[list[str], Fragments]]] = {
    "C10": [([bad], "key=value") for bad in ("runs", "=3", "env..x=1")]
         + [(["runs=0"], ("'runs' (set on the command line)", "must be an int >= 1"))],
    "C11": [([f"params.stabl.meta_lr_scale={written}"],
             ("'params.stabl.meta_lr_scale'", shown, f"stored as {becomes}"))
            for written, shown, becomes in (("1e300", "1e+300", "inf"),
                                            ("1e-300", "1e-300", "0.0"))],
    "C12": [(["horizon=20", "sa_windows=[4, 8]", "window=4"],
             ("key 'horizon' (set on the command line)", "cannot run 20 rounds")),
            (['learner_options.stabl.observation="psychic"'],
             ("key 'learner_options.stabl'", "rejects its options"))],
}
# fmt: on


def _set_row(row_id: str, tmp_path: Path) -> None:
    for overrides, fragments in SET_ERRORS[row_id]:
        refuses(ConfigError, fragments, load_config, config_file(tmp_path), overrides)


@row("C9")
def _(tmp_path):
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("runs = [\n")
    refuses(ConfigError, "not valid TOML", load_config, bad_toml)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    refuses(ConfigError, ("cannot read config", "utf-8"), load_config, binary)
    refuses(ConfigError, "is a folder", load_config, tmp_path)
    empty = "the config is empty: give a .toml file or a config name"
    refuses(ConfigError, empty, load_config, "")  # not the working folder, which Path("") is
    refuses(ConfigError, "does not exist", load_config, tmp_path / "missing.toml")


@row("C10b")
def _(capsys, config):
    twice = "runs is set twice ('runs=3' and 'runs=5')"
    refuses(ConfigError, (twice, "give it once"), load_config, config, ["runs=3", "runs=5"])
    refuses(ConfigError, twice, load_config, config, ["runs=3"], runs=5)
    with raises(ConfigError, "env and env.num_arms are both set", "inside the table"):
        load_config(config, ["env.num_arms=5", 'env={name="expert_advice", num_arms=3}'])
    load_config(config, ["env.num_arms=5", "env.num_segments=2"], runs=5)  # apart: fine
    cli_refuses(capsys, ["run", str(config), "--runs", "5", "--set", "runs=3"], twice)
    # An option given twice: argparse kept the last value (``--runs 5 --runs 3`` ran 3).
    for option, first, second in (("--runs", "5", "3"), ("--out", "a", "b"), ("--seed", "1", "1")):
        said = f"{option} is given twice ({first} and {second}): the second would"
        cli_refuses(capsys, ["run", str(config), option, first, option, second], said)


# ==== The command line ====
@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    """``GOOD_CONFIG``'s file in ``tmp_path``, with the experiment forbidden to run."""
    _forbid_computation(monkeypatch)
    return config_file(tmp_path)


@row("X1")
def _(tmp_path, capsys, monkeypatch):
    _forbid_computation(monkeypatch)
    path = config_file(tmp_path, GOOD_CONFIG.replace("horizon = 64", "horizon = 8"))
    err = cli_refuses(capsys, ["run", str(path), "--out", str(tmp_path / "out")], "'horizon'")
    assert err.startswith("error: ") and ">= 16" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@row("X2")
def _(tmp_path, capsys, config):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    for out in (blocker / "sub", blocker):
        err = cli_refuses(capsys, ["run", str(config), "--out", str(out)], "a_file")
        assert err.startswith("error: "), err
    proc = "/proc/stabl-jax-cannot-write/out"
    cli_refuses(capsys, ["run", str(config), "--out", proc], "error: ", "/proc")
    refuses(OutputError, "a_file", ResultsFolder.prepare, blocker / "x")  # what the CLI answers


@row("X3")
def _(tmp_path, capsys, config):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("keep")
    (precious / "summary.json").write_text("{}")  # a name of ours is not enough
    (precious / "COMPLETE").write_text("x")
    for force in ([], ["--force"]):
        args = ["run", str(config), "--out", str(precious), *force]
        cli_refuses(capsys, args, "not a stabl_jax results folder", str(precious), "never replaced")
    assert (precious / "thesis.tex").read_text() == "keep"
    done = tmp_path / "done"
    mark_as_ours(done)
    (done / "COMPLETE").write_text("x")
    args = ["run", str(config), "--out", str(done)]
    cli_refuses(capsys, args, "already holds a complete result", "--force")


def _dead_partial(tmp_path: Path, identity: dict) -> Path:
    """``out.partial``, left by a run that died, holding checkpoints of ``identity``."""
    dead = tmp_path / "out.partial"
    mark_as_ours(dead)
    (dead / "checkpoint").mkdir()
    (dead / "checkpoint" / "experiment.json").write_text(json.dumps(identity))
    return dead


@row("X4")
def _(tmp_path, capsys, config):
    out = tmp_path / "out"
    dead = _dead_partial(tmp_path, {"config": {"runs": 3}, "format": "x"})
    args = ["run", str(config), "--out", str(out)]
    cli_refuses(capsys, args, "different experiment", "--force", "config")
    assert dead.exists()
    assert cli.main(["run", str(config), "--out", str(out), "--force"]) == 1  # accepted: it
    assert "run_experiment ran although" in capsys.readouterr().err  # would have run
    assert not dead.exists()


@row("X4b")
def _(tmp_path, capsys, config):
    identity = experiment_identity(load_config(config))
    identity["versions"]["optax"] = "0.2.4-other"
    dead = _dead_partial(tmp_path, identity)
    args = ["run", str(config), "--out", str(tmp_path / "out")]
    other = ("this experiment under other versions", "versions.optax: '0.2.4-other' (checkpoint)")
    err = cli_refuses(capsys, args, *other, "install the versions it ran with", "--force")
    assert "rerun that exact command" not in err and dead.exists()


@row("X5")
def _(tmp_path, capsys, config):
    for flag, value in (("--runs", "0"), ("--seed", "-1")):
        args = ["run", str(config), flag, value, "--out", str(tmp_path / "o")]
        cli_refuses(capsys, args, "(set on the command line)")
    cli_refuses(capsys, ["run", str(config), "--runs", "many"], "invalid int value")


@row("X7")
def _(tmp_path, capsys, monkeypatch, config):
    monkeypatch.chdir(tmp_path)
    cli_refuses(capsys, ["run", str(config), "--out", ""], "--out is empty")
    assert not (tmp_path / "results").exists()


@row("X8")
def _(tmp_path, capsys, config):
    for size in ("runs=1000000000", "horizon=1000000000", "env.num_arms=100000000"):
        start = time.monotonic()
        out = str(tmp_path / "o")
        err = cli_refuses(capsys, ["run", str(config), "--out", out, "--set", size])
        assert time.monotonic() - start < 60
        assert "does not fit" in err and "--allow-large" in err, err
        assert "iB of memory" in err or "iB of disk" in err
        assert not list(tmp_path.glob("o*"))


@row("X9")
def _(tmp_path, capsys, monkeypatch):
    _forbid_computation(monkeypatch, benchmark, "run_benchmark")
    for name in ("benchmark.json", "benchmark.md"):
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        (folder / name).write_text("my own notes\n")
        mine = f"{folder / name} is there and is not a previous stabl-jax bench file"
        kept = "left as it is: give --out another folder"
        cli_refuses(capsys, ["bench", "--quick", "--out", str(folder)], mine, kept)
        assert (folder / name).read_text() == "my own notes\n"
    cli_refuses(capsys, ["bench", "--quick", "--out", str(folder / name)], "is a file: give a")
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "benchmark.json").write_text(json.dumps(dict.fromkeys(benchmark.RESULT_KEYS, 0)))
    (previous / "benchmark.md").write_text("Machine: ...\n")
    assert benchmark.check_out(previous) == (previous / "benchmark.json", previous / "benchmark.md")


@row("X6")
def _(tmp_path, capsys, monkeypatch):
    _forbid_computation(monkeypatch)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe")
    for config in (str(binary), str(tmp_path)):
        err = cli_refuses(capsys, ["run", config, "--out", str(tmp_path / "o")])
        assert err.startswith("error: ") and "Traceback" not in err


# ==== Files ====
def _finished_folder(tmp_path: Path, **traces: Any) -> Path:
    """A results folder, finished but for its ``traces.npz`` of ``traces``."""
    folder = tmp_path / "res"
    folder.mkdir()
    (folder / "summary.json").write_text("{}")
    np.savez(folder / "traces.npz", **traces)
    return folder


@row("F1")
def _(tmp_path):
    evil = np.array([{"a": 1}], dtype=object)
    refuses(ValueError, "allow_pickle=False", read_traces, _finished_folder(tmp_path, evil=evil))
    refuses(TypeError, "dtype object", save_arrays, tmp_path / "x.npz", {"evil": evil})


@row("F2")
def _(tmp_path):

    def options():
        return SimOptions(chunk_size=8, checkpoint=ChunkCheckpoint(tmp_path / "ckpt", A))

    simulate(LEARNER, ENV, KEY, 2, options=options())
    chunk = sorted((tmp_path / "ckpt").glob("chunk-*.npz"))[0]
    chunk.write_bytes(chunk.read_bytes()[:50])
    with raises(CheckpointMismatch, "is damaged", chunk.name, "delete"):
        simulate(LEARNER, ENV, KEY, 2, options=options())


@row("F3")
def _(tmp_path):
    """A results folder's traces cut short: an error naming the file, never a wrong array
    (experiment/test_tables.py and experiment/test_faults.py: a changed byte, a changed header)."""
    folder = _finished_folder(tmp_path, loss=np.zeros((2, 64), np.float32))
    (folder / "traces.npz").write_bytes((folder / "traces.npz").read_bytes()[:300])
    with raises(ValueError, f"{folder / 'traces.npz'} cannot be read", "damaged", "run what"):
        read_traces(folder)


# ==== The tests ====
for _table, _check in (
    (REFUSED, _refused_row),
    (BAD_LOSSES, _bad_loss_row),
    (CONFIG_ERRORS, _config_row),
    (SET_ERRORS, _set_row),
):
    for _id in _table:
        row(_id)(call(_check, _id))


def table_ids() -> list[str]:
    """The ids in the first column of the bad-input table of ``docs/reliability.md``."""
    text = TABLE.read_text(encoding="utf-8")
    return re.findall(r"^\| `([A-Z]\d+[a-z]?)` \|", text, flags=re.MULTILINE)


def test_table_and_rows_match():
    ids = table_ids()
    assert len(ids) == len(set(ids)), "an id appears twice in the table"
    assert set(ids) == set(ROWS), {"no test": set(ids) - set(ROWS), "no row": set(ROWS) - set(ids)}


def _row_order(row_id: str) -> tuple[str, int, str]:
    """``M2 < M2b < M3``: the letter, the number, then the suffix."""
    number = re.fullmatch(r"[A-Z](\d+)([a-z]?)", row_id)
    assert number, f"row id {row_id!r} is not a letter, a number and an optional letter"
    return row_id[0], int(number[1]), number[2]


ROW_IDS: list[str] = sorted(ROWS, key=_row_order)


@pytest.mark.parametrize("row_id", ROW_IDS)
def test_row(row_id, request):
    fn = ROWS[row_id]
    fn(**{name: request.getfixturevalue(name) for name in inspect.signature(fn).parameters})
