"""Every row of the bad-input table in ``docs/reliability.md`` is a test here.

Each ``@row("ID")`` function feeds one kind of bad input to one public entry point and checks
what the table says happens: an error that names the argument, the value and what is
allowed (never a silent wrong answer), or, for the few documented exceptions, the documented
behaviour. ``test_table_and_rows_match`` parses the table and fails if a row has no test or a
test no row, so the two cannot drift apart.

Sizes are tiny and nothing here compiles more than a few small programs; command-line rows
fail before any computation (``_forbid_computation``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import math
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

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

ROWS: dict[str, Callable[..., None]] = {}


def row(row_id: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(fn: Callable[..., None]) -> Callable[..., None]:
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


def _forbid_computation(monkeypatch) -> None:
    def boom(*args, **kwargs):
        raise AssertionError("the experiment ran although the command should have failed")

    monkeypatch.setattr(experiment_module, "run_experiment", boom)


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    code = cli.main(args)
    return code, capsys.readouterr().err


# ==== Learner constructors ====
@row("L1")
def _():
    for cls in (StABL, EXP3, Uniform):
        for bad in (1, 0, -3):
            with raises(ValueError, "num_arms", ">= 2", str(bad)):
                cls(num_arms=bad, horizon=64)


@row("L2")
def _():
    for bad in (2.0, math.nan, "3", True):
        with raises(TypeError, "num_arms must be an int", repr(bad)):
            StABL(num_arms=bad, horizon=64)
    for bad in (64.0, math.inf):
        with raises(TypeError, "horizon must be an int", repr(bad)):
            EXP3(num_arms=3, horizon=bad)


@row("L3")
def _():
    for bad in (0, -1):
        with raises(ValueError, "horizon must be >= 1", str(bad)):
            EXP3(num_arms=3, horizon=bad)
    # Rounds are int32: a longer horizon failed with an OverflowError only once simulated.
    too_long = "horizon must be <= 2**31 - 1 = 2147483647 (rounds are counted in int32)"
    for build in (
        lambda h: EXP3(num_arms=3, horizon=h),
        lambda h: make("stabl", num_arms=3, horizon=h),
        lambda h: BCO_LEARNERS.make("fkm", dim=2, horizon=h),
    ):
        with raises(ValueError, too_long, "got 2147483648"):
            build(2**31)
    assert StABL(num_arms=3, horizon=2**31 - 1).history_lengths[-1] == 2**30


@row("L4")
def _():
    # k runs from ceil(2 + log2 log2 T) to floor(log2 T): empty below 16 and for 17..31.
    for bad in (15, 8, 17, 20, 31):
        with raises(ValueError, f"horizon={bad}", "too small for the geometric intervals", "32"):
            StABL(num_arms=3, horizon=bad)
    assert StABL(num_arms=3, horizon=16).history_lengths == (16,)
    assert geometric_history_lengths(16) == (16,)
    with raises(ValueError, "horizon=15"):
        geometric_history_lengths(15)
    with raises(ValueError, "horizon must be >= 2 for geometric intervals, got 1"):
        geometric_history_lengths(1)
    for bad in (True, 64.0, "64"):
        with raises(TypeError, f"horizon must be an int, got {bad!r}"):
            geometric_history_lengths(bad)
    assert StABL(num_arms=3, horizon=32).history_lengths == (32,)


@row("L5")
def _():
    for bad in ((64, 32), (16, 16)):
        with raises(ValueError, "history_lengths must be strictly increasing", str(bad)):
            StABL(num_arms=3, horizon=64, history_lengths=bad)


@row("L6")
def _():
    with raises(ValueError, "history_lengths must not be empty"):
        StABL(num_arms=3, horizon=64, history_lengths=())
    for bad in ((0, 4), (-16, 32), (16.0, 32.0)):
        with raises(ValueError, "history_lengths must be positive ints"):
            StABL(num_arms=3, horizon=64, history_lengths=bad)
    assert StABL(num_arms=3, horizon=64, history_lengths=32).history_lengths == (32,)  # an int
    with raises(TypeError, "must be a tuple of ints, got 3.5"):
        StABL(num_arms=3, horizon=64, history_lengths=3.5)
    with raises(ValueError, "history_lengths must be <= 2**31 - 1", "got 2147483648"):
        StABL(num_arms=3, horizon=64, history_lengths=(32, 2**31))
    longest = StABL(num_arms=3, horizon=64, history_lengths=(32, 2**31 - 1))
    env = ExpertAdvice(num_arms=3, horizon=64)
    assert simulate(longest, env, KEY, 1, traces=("loss",)).loss.shape == (1, 64)


@row("L7")
def _():
    cases = {
        "observation": "gumbel",
        "feedback": "regret",
        "expert_c": "3",
        "round_offset": 2,
        "dtype": "float16",
    }
    for name, bad in cases.items():
        with raises(ValueError, f"{name} must be one of", repr(bad)):
            StABL(num_arms=3, horizon=64, **{name: bad})
    with raises(TypeError, "round_offset must be one of (0, 1), got True (bool)"):  # was 1
        StABL(num_arms=3, horizon=64, round_offset=True)


@row("L8")
def _():
    for bad in (math.nan, math.inf, -0.1, 1.5):
        with raises(ValueError, "gamma must be in [0, 1]"):
            EXP3(num_arms=3, horizon=10, gamma=bad)
    with raises(TypeError, "gamma must be a real number", "'0.1'"):
        EXP3(num_arms=3, horizon=10, gamma="0.1")


@row("L9")
def _():
    with raises(ValueError, "horizon must be >= 1, got 0"):
        make("exp3_uniform", num_arms=3, horizon=0)


@row("L10")
def _():
    with raises(ValueError, "unknown learner 'stable'", "stabl_naive"):
        make("stable", num_arms=3, horizon=10)


@row("L11")
def _():
    """A yes/no option given anything but a bool: ``"false"`` and 1 would count as true."""
    vizier = "stabl_vizier"
    for build, name in (
        (lambda v: StABL(num_arms=3, horizon=64, validate=v), "validate"),
        (lambda v: BCO_LEARNERS.make("stabl_bco", dim=2, horizon=64, validate=v), "validate"),
        (lambda v: make("stabl_rate_grid", num_arms=3, horizon=64, scale_meta=v), "scale_meta"),
        (
            lambda v: make(vizier, num_arms=3, horizon=64, naive_sampling=v),
            "naive_sampling",
        ),
    ):
        for bad in ("false", 1):
            with raises(TypeError, f"{name} must be True or False, got {bad!r}"):
                build(bad)
    build(np.bool_(True))  # NumPy's bool is a bool
    learner, env = Uniform(num_arms=3, horizon=8), ExpertAdvice(num_arms=3, horizon=8)
    with raises(TypeError, "validate must be True or False, got 'no' (str)"):
        simulate(learner, env, KEY, 1, validate="no")


@row("L12")
def _():
    """A misspelled or missing constructor argument of a registry entry: Python's own
    message named neither the entry nor the arguments it takes."""
    with raises(
        TypeError,
        "learner 'stabl_naive' (StABL) takes no argument 'historylengths'",
        "did you mean 'history_lengths'?",
        "its arguments are num_arms, horizon",
    ):
        make("stabl_naive", num_arms=3, horizon=64, historylengths=(32, 64))
    with raises(TypeError, "learner 'stabl' (StABL) needs horizon", "its arguments are"):
        make("stabl", num_arms=3)
    with raises(
        TypeError,
        "environment 'expert_advice' (ExpertAdvice) takes no argument "
        "'segments' (did you mean 'num_segments'?)",
    ):
        ENVS.make("expert_advice", num_arms=3, horizon=64, segments=2)
    with raises(TypeError, "BCO learner 'fkm' (FKM) needs horizon"):
        BCO_LEARNERS.make("fkm", dim=2)
    with raises(TypeError, "learner 'exp3' (EXP3) takes no argument 'lr'"):
        LEARNERS["exp3"](num_arms=3, horizon=64, lr=0.1)  # an entry called directly
    # An entry's defaults count as given, and the run's validate switch is still taken.
    assert make("stabl_naive", num_arms=3, horizon=64, validate=True).observation == "uniform"


# ==== Learner params ====
@row("L13")
def _():
    """A float64 learner without x64 ran in float32 (JAX only warned)."""
    for learner in (
        EXP3(num_arms=N, horizon=T, dtype="float64"),
        BCO_LEARNERS.make("fkm", dim=2, horizon=T, dtype="float64"),
    ):
        name = type(learner).__name__
        with raises(ValueError, f"{name} with dtype='float64' needs 64-bit JAX"):
            learner.init(KEY)
        with jax.enable_x64(True):
            state = learner.init(KEY)
            params = learner.default_params
        assert {x.dtype for x in jax.tree.leaves(state) if x.dtype.kind == "f"} == {
            np.dtype("float64")
        }
        with raises(ValueError, f"{name} with dtype='float64' needs 64-bit JAX"):
            learner.init(KEY, params)  # explicit params: the same check
    with raises(ValueError, "EXP3 with dtype='float64' needs 64-bit JAX"):
        simulate(EXP3(num_arms=N, horizon=T, dtype="float64"), ENV, KEY, 1)


@row("P1")
def _():
    learner = StABL(num_arms=N, horizon=T)
    for bad in (math.nan, math.inf, -math.inf):
        params = learner.default_params.replace(expert_lr_scale=jnp.float32(bad))
        with raises(ValueError, "params.expert_lr_scale must be finite", str(bad)):
            learner.init(KEY, params)


@row("P2")
def _():
    exp3 = EXP3(num_arms=N, horizon=T)
    with raises(ValueError, "params.gamma", "[0, 1]", "2.0"):
        exp3.init(KEY, exp3.default_params.replace(gamma=jnp.float32(2.0)))
    with raises(ValueError, "params.lr_scale", "[0, inf)", "-1.0"):
        exp3.init(KEY, exp3.default_params.replace(lr_scale=jnp.float32(-1.0)))
    stabl = StABL(num_arms=N, horizon=T)
    with raises(ValueError, "params.meta_lr_scale", "(0, inf)", "0.0"):
        stabl.init(KEY, stabl.default_params.replace(meta_lr_scale=jnp.float32(0.0)))
    # Positive but so small that eta_k underflows: every meta weight would be log(0).
    with raises(ValueError, "params.meta_lr_scale=1e-40", "underflow in float32", "allowed"):
        stabl.init(KEY, stabl.default_params.replace(meta_lr_scale=jnp.float32(1e-40)))
    # Anytime StABL's smallest meta rate is its last round's, 1/sqrt(n min(L_B, T)) = 1/sqrt(5
    # 64): 1e-37 times it is below float32's smallest normal, which the CPU flushes to 0 (a NaN
    # mixture when run); 1e-36 is not.
    anytime = make("stabl_anytime", num_arms=5, horizon=64)
    assert anytime.smallest_base_meta_step_size() == 1 / math.sqrt(5 * 64)
    with raises(ValueError, "params.meta_lr_scale=1e-37", "eta_k = 5.59e-39 underflow"):
        anytime.init(KEY, anytime.default_params.replace(meta_lr_scale=jnp.float32(1e-37)))
    anytime.init(KEY, anytime.default_params.replace(meta_lr_scale=jnp.float32(1e-36)))
    # A BCO ensemble's eta_k is divided by params.lipschitz: a huge G underflows it too.
    bco = BCO_LEARNERS.make("stabl_bco", dim=2, horizon=T)
    with raises(ValueError, "params.lipschitz=1e+38", "underflow in float32", "lipschitz <="):
        bco.init(KEY, bco.default_params.replace(lipschitz=jnp.float32(1e38)))
    # Adaptive StABL's rates depend on the data; its bound is the worst case's, 1/(E sqrt m)
    # with E = 2B = 4, m = 64: 1e-38 (a NaN mixture when run) is refused, 1e-36 is not.
    adaptive = make("stabl_adaptive", num_arms=5, horizon=64)
    assert adaptive.smallest_base_meta_step_size() == 1 / (4 * 8)
    with raises(ValueError, "params.meta_lr_scale=1e-38", "eta_k = 3.12e-40 underflow"):
        adaptive.init(KEY, adaptive.default_params.replace(meta_lr_scale=jnp.float32(1e-38)))
    adaptive.init(KEY, adaptive.default_params.replace(meta_lr_scale=jnp.float32(1e-36)))


@row("P3")
def _():
    exp3 = EXP3(num_arms=N, horizon=T)
    with raises(ValueError, "params.lr_scale must be a scalar", "(3,)", "jax.vmap"):
        exp3.init(KEY, exp3.default_params.replace(lr_scale=jnp.ones(3)))


@row("P4")
def _():
    with raises(TypeError, "params must be a StABLParams", "EXP3Params"):
        StABL(num_arms=N, horizon=T).init(KEY, EXP3(num_arms=N, horizon=T).default_params)


@row("P5")
def _():
    """Under vmap the values are tracers: shapes are checked, values are not, and simulate
    checks the values on the host before tracing."""
    learner = StABL(num_arms=N, horizon=T)
    env = ExpertAdvice(num_arms=N, horizon=T)
    scales = jnp.array([1.0, jnp.nan], jnp.float32)
    params = learner.default_params.replace(meta_lr_scale=scales)
    states = jax.vmap(learner.init, in_axes=(None, params_axes(params)))(KEY, params)
    assert np.isnan(np.asarray(states.meta_log_weights[1])).all()  # documented: not checked
    with raises(ValueError, "params.meta_lr_scale", "nan"):
        simulate(learner, env, KEY, 2, params=params)


# ==== step / tell / ask ====
BAD_LOSSES = {
    "S1": ([0.1, math.nan, 0.3], ValueError, ("loss must be finite and in [0, 1]", "nan")),
    "S2": ([0.1, math.inf, 0.3], ValueError, ("loss must be finite and in [0, 1]", "inf")),
    "S3": ([0.1, 1.5, -0.2], ValueError, ("loss must be finite and in [0, 1]", "1.5", "clipped")),
}


def _bad_loss_row(row_id: str) -> None:
    values, error, fragments = BAD_LOSSES[row_id]
    for name in ("uniform", "exp3", "stabl"):
        learner = make(name, num_arms=N, horizon=T)
        state = learner.init(KEY)
        with raises(error, *fragments):
            learner.step(state, jnp.asarray(values, jnp.float32), KEY)
        query = learner.ask(state, KEY)
        observed = jnp.asarray(values, jnp.float32)[query.arms] * 0 + values[1]
        with raises(error, "observed must be finite and in [0, 1]"):
            learner.tell(state, query, observed)


for _id in BAD_LOSSES:
    row(_id)(functools.partial(_bad_loss_row, _id))


@row("S4")
def _():
    learner = StABL(num_arms=N, horizon=T)
    state = learner.init(KEY)
    for bad in (jnp.full((N + 1,), 0.5), jnp.full((1, N), 0.5)):
        with raises(ValueError, f"loss must have shape ({N},)", str(tuple(bad.shape))):
            learner.step(state, bad, KEY)
        with raises(ValueError, f"loss must have shape ({N},)"):
            jax.jit(learner.step)(state, bad, KEY)  # shapes are static: checked under jit


@row("S5")
def _():
    learner = EXP3(num_arms=N, horizon=T)
    state = learner.init(KEY)
    for bad in (jnp.array([0, 1, 0]), jnp.array([False, True, False])):
        with raises(TypeError, "loss must be floating point", str(bad.dtype)):
            learner.step(state, bad, KEY)


@row("S6")
def _():
    """A Python list or a float64 NumPy array is accepted and cast to the state's dtype."""
    learner = EXP3(num_arms=N, horizon=T)
    state = learner.init(KEY)
    a, _ = learner.step(state, [0.1, 0.5, 0.9], KEY)
    b, _ = learner.step(state, np.array([0.1, 0.5, 0.9]), KEY)
    c, _ = learner.step(state, jnp.array([0.1, 0.5, 0.9], jnp.float32), KEY)
    assert a.log_weights.dtype == jnp.float32
    np.testing.assert_array_equal(a.log_weights, c.log_weights)
    np.testing.assert_array_equal(b.log_weights, c.log_weights)


@row("S7")
def _():
    learner = StABL(num_arms=N, horizon=T)
    state = learner.init(KEY)
    query = learner.ask(state, KEY)
    with raises(ValueError, "observed must have shape (2,)", "(1,)"):
        learner.tell(state, query, jnp.array([0.5]))


@row("S8")
def _():
    learner = StABL(num_arms=N, horizon=T)
    state = learner.init(KEY)
    query = learner.ask(state, KEY)
    observed = jnp.array([0.2, 0.3])
    with raises(ValueError, "query.arms must lie in [0, 2]", "7"):
        learner.tell(state, query.replace(arms=jnp.array([0, 7], jnp.int32)), observed)
    with raises(ValueError, "query.query_probs must be in (0, 1]", "0.0"):
        learner.tell(state, query.replace(query_probs=jnp.zeros(2)), observed)
    with raises(TypeError, "query.arms must be integers"):
        learner.tell(state, query.replace(arms=jnp.array([0.0, 1.0])), observed)
    with raises(ValueError, "query.arms must have shape (2,)"):
        learner.tell(state, query.replace(arms=jnp.zeros(3, jnp.int32)), observed)
    with raises(ValueError, f"query.play_probs must have shape ({N},)"):
        learner.tell(state, query.replace(play_probs=query.play_probs[:-1]), observed)


@row("S9")
def _():
    small, large = StABL(num_arms=N, horizon=64), StABL(num_arms=N + 2, horizon=64)
    state = large.init(KEY)
    loss = jnp.full((N,), 0.5)
    with raises(ValueError, "state.expert_log_probs has shape", str((2, N + 2)), str((2, N))):
        small.ask(state, KEY)
    with raises(ValueError, "state.expert_log_probs"):
        small.step(state, loss, KEY)
    with raises(ValueError, "state.expert_log_probs"):
        jax.jit(small.step)(state, loss, KEY)  # static shapes: also under jit
    with raises(ValueError, "does not come from EXP3.init"):
        EXP3(num_arms=N, horizon=64).step(small.init(KEY), loss, KEY)


@row("S10")
def _():
    """Traced losses: plain jit carries a NaN into the state silently (documented);
    checked_step raises naming the argument, the round and the value."""
    learner = StABL(num_arms=N, horizon=T)
    state = learner.init(KEY)
    bad = jnp.array([0.1, jnp.nan, 0.3])
    new_state, _ = jax.jit(learner.step)(state, bad, KEY)
    assert int(new_state.t) == 1  # no error: values of tracers cannot raise
    step = checked_step(learner)
    state, _ = step(state, jnp.array([0.1, 0.2, 0.3]), KEY)
    with raises(checkify.JaxRuntimeError, "loss at round 1", "nan", "index 1", "[0, 1]"):
        step(state, bad, KEY)
    with raises(checkify.JaxRuntimeError, "loss at round 1", "1.5", "index 2"):
        step(state, jnp.array([0.1, 0.2, 1.5]), KEY)


@row("S11")
def _():
    learner = EXP3(num_arms=N, horizon=T)
    state = learner.init(KEY)
    loss = jnp.full((N,), 0.5)
    for bad in (None, 3):
        with raises(TypeError, "key must be a PRNG key", repr(bad)):
            learner.step(state, loss, bad)
    with raises(ValueError, "key must be a single PRNG key", "(2,)"):
        learner.step(state, loss, jax.random.split(KEY))


# ==== Environments ====
@row("E1")
def _():
    for cls in (ExpertAdvice, PiecewiseBernoulli):
        with raises(ValueError, "num_arms must be >= 2, got 1"):
            cls(num_arms=1, horizon=64)


@row("E2")
def _():
    for bad in (1, 0, -5):
        with raises(ValueError, "horizon must be >= 2", str(bad)):
            ExpertAdvice(num_arms=3, horizon=bad)
    for build in (
        lambda h: ExpertAdvice(num_arms=3, horizon=h),
        lambda h: MovingTarget(dim=2, horizon=h),
    ):
        with raises(ValueError, "horizon must be <= 2**31 - 1", "got 4294967296"):
            build(2**32)


@row("E3")
def _():
    for bad in ((30, 10), (10, 10)):
        with raises(ValueError, "change_points must be strictly increasing", str(bad)):
            ExpertAdvice(num_arms=3, horizon=64, change_points=bad)
    with raises(ValueError, "strictly increasing"):
        MovingTarget(dim=2, horizon=64, change_points=(30, 10))


@row("E4")
def _():
    for bad, value in (((0, 10), "0"), ((10, 64), "64"), ((-3,), "-3")):
        with raises(ValueError, f"change point {value} is out of range", "[1, 63]"):
            ExpertAdvice(num_arms=3, horizon=64, change_points=bad)


@row("E5")
def _():
    with raises(TypeError, "change_points must be ints", "10.0"):
        ExpertAdvice(num_arms=3, horizon=64, change_points=(10.0,))
    with raises(TypeError, "change_points must be a sequence of ints", "7"):
        ExpertAdvice(num_arms=3, horizon=64, change_points=7)


@row("E6")
def _():
    with raises(ValueError, "num_segments must be >= 1, got 0"):
        ExpertAdvice(num_arms=3, horizon=64, num_segments=0)
    with raises(ValueError, "num_segments=65 exceeds horizon=64", "num_segments <= 64"):
        ExpertAdvice(num_arms=3, horizon=64, num_segments=65, random_change_points=True)


RANDOM = {"random_change_points": True}


@row("E7")
def _():
    for make_env in (
        lambda: ExpertAdvice(num_arms=3, horizon=64, change_points=(10,), **RANDOM),
        lambda: MovingTarget(dim=2, horizon=64, change_points=(10,), **RANDOM),
    ):
        with raises(ValueError, "change_points=(10,) and random_change_points=True exclude"):
            make_env()


@row("E8")
def _():
    for kwargs, name in (
        ({"baseline_high": math.nan}, "baseline_high"),
        ({"bonus": -1.0}, "bonus"),
        ({"baseline_high": 0.7}, "baseline_high + bonus must be <= 1"),
    ):
        with raises(ValueError, name):
            ExpertAdvice(num_arms=3, horizon=64, **kwargs)
    with raises(ValueError, "mean must be in [0, 1]", "inf"):
        PiecewiseBernoulli(num_arms=3, horizon=64, mean=math.inf)
    with raises(ValueError, "gap must be in (0, mean=0.5]", "0.0"):
        PiecewiseBernoulli(num_arms=3, horizon=64, gap=0.0)
    drifting = DriftingBernoulli(num_arms=3, horizon=64)
    for kwargs, *fragments in (
        ({"base": math.nan}, "base"),
        ({"amplitude": math.inf}, "amplitude"),
        ({"period": -1.0}, "period"),
        ({"phase_offset": math.inf}, "phase_offset"),
        (
            {"amplitude": 0.6},
            "amplitude=0.6 takes the means b +- A outside [0, 1]",
            "pass amplitude <= 0.5",
        ),
        ({"base": 0.8, "amplitude": 0.3}, "base=0.8: pass amplitude <= 0.2"),
        ({"period": 0.0}, "period must be a finite number > 0, got 0.0"),
        ({"amplitude": -0.1}, "amplitude must be a finite number >= 0, got -0.1"),
    ):
        with raises(ValueError, *fragments):
            drifting.make_params(**kwargs)


@row("E12")
def _():
    """Yes/no options of environments given anything but a bool, and the convex families'
    scales infinite (the Lipschitz constant the step sizes assume would be inf)."""
    for build in (
        lambda v: ExpertAdvice(num_arms=3, horizon=64, num_segments=2, random_change_points=v),
        lambda v: MovingTarget(dim=2, horizon=64, num_segments=2, random_change_points=v),
    ):
        with raises(TypeError, "random_change_points must be True or False, got 'false'"):
            build("false")
    for name in ("rotate", "normalize"):
        with raises(TypeError, f"{name} must be True or False, got 1 (int)"):
            BBOBFunction(function_id=1, dim=2, **{name: 1})
    for name, field in (("abs_linear", "a_scale"), ("huber", "huber_mu")):
        for bad in (math.inf, 0.0, -1.0):
            with raises(ValueError, f"{field} must be a finite number > 0, got {bad}"):
                CONVEX_ENVS.make(name, dim=2, horizon=64, **{field: bad})
        with raises(TypeError, f"{field} must be a real number, got '1'"):
            CONVEX_ENVS.make(name, dim=2, horizon=64, **{field: "1"})
    # A user's loss family and FKM's loss bound: the same rule (float() read "1" and inf).
    for bad in (math.inf, 0.0):
        with raises(ValueError, f"lipschitz_bound must be a finite number > 0, got {bad}"):
            CustomConvex(dim=2, horizon=64, loss=distance_loss, lipschitz_bound=bad)
    with raises(TypeError, "loss_bound must be a real number, got '1'"):
        BCO_LEARNERS.make("fkm", dim=2, horizon=64, loss_bound="1")
    with raises(TypeError, "target_radius must be a real number, got '0.5'"):  # was read
        MovingTarget(dim=2, horizon=64, target_radius="0.5")
    # A minimiser that is not a function failed only inside simulate ('str' is not callable).
    with raises(TypeError, "minimizer_fn must be None or a callable theta -> (d,), got 'x'"):
        CustomConvex(dim=2, horizon=64, loss=distance_loss, minimizer_fn="x")


@row("E9")
def _():
    for cls in (PiecewiseBernoulli, ExpertAdvice):
        with raises(ValueError, "best_arm_order must be one of", "'x'"):
            cls(num_arms=3, horizon=64, best_arm_order="x")


@row("E10")
def _():
    """Rounds outside [0, T): documented, the pure loss continues the first/last segment;
    simulate never asks for them (row M2)."""
    env = ExpertAdvice(num_arms=3, horizon=64, change_points=(32,))
    params = env.default_params
    assert int(env.best_arm(params, 1000)) == int(env.best_arm(params, 63)) == 1
    assert int(env.best_arm(params, -1)) == int(env.best_arm(params, 0)) == 0


@dataclasses.dataclass(frozen=True)
class _BrokenEnv(ExpertAdvice):
    """Emits a loss of 1.5 on arm 2 at round 9: a user's environment gone wrong."""

    def loss(self, params, t, key):
        loss = super().loss(params, t, key)
        return jnp.where(t == 9, loss.at[2].set(1.5), loss)


@row("E11")
def _():
    env, eight = _BrokenEnv(num_arms=N, horizon=T), SimOptions(chunk_size=8)
    learner = EXP3(num_arms=N, horizon=T)
    plain = simulate(learner, env, KEY, 2, options=eight)  # documented: not checked
    assert plain.loss.shape == (2, T)
    with raises(checkify.JaxRuntimeError, "loss at round 9", "1.5", "index 2", "[0, 1]"):
        simulate(learner, env, KEY, 2, validate=True, options=eight)
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


def _nan_loss(theta, x):
    """A user's loss family that is broken: NaN everywhere."""
    return jnp.nan * jnp.sum(jnp.abs(x - theta))


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
ENV = ExpertAdvice(num_arms=N, horizon=T)
LEARNER = EXP3(num_arms=N, horizon=T)
A = {"experiment": "A"}


@row("M1")
def _():
    for bad in (0, -2):
        with raises(ValueError, "num_runs must be >= 1", str(bad)):
            simulate(LEARNER, ENV, KEY, bad)
    with raises(TypeError, "num_runs must be an int", "2.0"):
        simulate(LEARNER, ENV, KEY, 2.0)
    with raises(ValueError, "first_run must be >= 0, got -1"):
        simulate(LEARNER, ENV, KEY, 1, options=SimOptions(first_run=-1))
    with raises(ValueError, "first_run must be <= 2**31 - 1 = 2147483647", "got 2147483648"):
        simulate(LEARNER, ENV, KEY, 1, options=SimOptions(first_run=2**31))
    last_runs = SimOptions(first_run=2**31 - 1)
    last = simulate(LEARNER, ENV, KEY, 2, traces=("played",), options=last_runs).played
    first = simulate(LEARNER, ENV, KEY, 1, traces=("played",)).played
    assert len({last[0].tobytes(), last[1].tobytes(), first[0].tobytes()}) == 3


@row("M2")
def _():
    with raises(ValueError, "horizon must be >= 1, got 0"):
        simulate(LEARNER, ENV, KEY, 1, horizon=0)
    with raises(ValueError, f"horizon must be <= env.horizon={T}", str(2 * T)):
        simulate(LEARNER, ENV, KEY, 1, horizon=2 * T)


@row("M2b")
def _():
    """A learner built for fewer rounds than simulated; a longer one plays the first T."""
    with raises(
        ValueError,
        "learner.horizon=8 is shorter than the 16 rounds simulated",
        "build the learner with horizon >= 16",
    ):
        simulate(EXP3(num_arms=N, horizon=T // 2), ENV, KEY, 1)
    assert simulate(EXP3(num_arms=N, horizon=2 * T), ENV, KEY, 1).played.shape == (1, T)
    assert simulate(EXP3(num_arms=N, horizon=T // 2), ENV, KEY, 1, horizon=T // 2).horizon == 8


@row("M3")
def _():
    for bad in (0, -5):
        with raises(ValueError, "chunk_size must be >= 1", str(bad), "(None picks one"):
            simulate(LEARNER, ENV, KEY, 1, options=SimOptions(chunk_size=bad))
    with raises(TypeError, "chunk_size must be an int", "2.5"):
        simulate(LEARNER, ENV, KEY, 1, options=SimOptions(chunk_size=2.5))


@row("M4")
def _():
    with raises(TypeError, "key must be a PRNG key", "0"):
        simulate(LEARNER, ENV, 0, 1)
    with raises(ValueError, "key must be a single PRNG key", "(2,)"):
        simulate(LEARNER, ENV, jax.random.split(KEY), 1)
    with raises(TypeError, "key must be a PRNG key", "float32"):
        simulate(LEARNER, ENV, jnp.zeros(2), 1)


@row("M5")
def _():
    with raises(ValueError, "learner.num_arms=4 does not match env.num_arms=3"):
        simulate(EXP3(num_arms=N + 1, horizon=T), ENV, KEY, 1)


@row("M5b")
def _():
    """A bandit learner on a convex environment, or a BCO learner on a bandit one (an
    algorithm-selection environment included, whose problem has a ``dim`` too): the rollout
    used to fail inside tracing (``AttributeError: 'BCOQuery' object has no attribute
    'play_probs'``)."""
    convex = MovingTarget(dim=2, horizon=T)
    fkm = BCO_LEARNERS.make("fkm", dim=2, horizon=T)
    selection = HPOEnv(BBOBFunction(function_id=1, dim=2, normalize=True))
    pair = "pair bandit learners (stabl_jax.make) with bandit environments"
    with raises(
        TypeError,
        "learner EXP3 is a bandit learner (num_arms=3) but env MovingTarget "
        "is a convex environment (dim=2)",
        pair,
    ):
        simulate(LEARNER, convex, KEY, 1)
    with raises(
        TypeError,
        "learner FKM is a BCO learner (dim=2) but env ExpertAdvice is a "
        "bandit environment (num_arms=3)",
        pair,
    ):
        simulate(fkm, ENV, KEY, 1)
    with raises(
        TypeError,
        "learner FKM is a BCO learner (dim=2) but env HPOEnv is a bandit environment",
        pair,
    ):
        simulate(fkm, selection, KEY, 1)


@row("M6")
def _():
    params = LEARNER.default_params
    with raises(ValueError, "params.gamma", "[0, 1]", "2.0"):
        simulate(LEARNER, ENV, KEY, 2, params=params.replace(gamma=jnp.float32(2.0)))
    with raises(ValueError, "params.lr_scale", "nan"):
        simulate(LEARNER, ENV, KEY, 2, params=params.replace(lr_scale=jnp.array([1.0, jnp.nan])))
    with raises(ValueError, "leading axis num_runs=2", "(3,)"):
        simulate(LEARNER, ENV, KEY, 2, params=params.replace(lr_scale=jnp.ones(3)))


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


@row("M8")
def _():
    with raises(TypeError, "env must be an environment, got 'expert_advice'", "make_env"):
        simulate(LEARNER, "expert_advice", KEY, 2)
    with raises(TypeError, "learner must be a learner, got None"):
        simulate(None, ENV, KEY, 2)


@row("M9")
def _():
    with raises(TypeError, "traces must be a tuple of names, got the string 'loss'"):
        simulate(LEARNER, ENV, KEY, 2, traces="loss")
    with raises(TypeError, "traces must be a tuple of names from (", "got 3"):
        simulate(LEARNER, ENV, KEY, 2, traces=3)
    with raises(ValueError, "traces must be one of", "'regret'"):
        simulate(LEARNER, ENV, KEY, 2, traces=("loss", "regret"))


@row("M10")
def _():
    """``progress`` is a bool or a callback; ``checkpoint`` a ChunkCheckpoint (a path is not)."""
    for bad in ("yes", 3):
        with raises(TypeError, f"progress must be True or False, got {bad!r}"):
            simulate(LEARNER, ENV, KEY, 2, options=SimOptions(progress=bad))
    with raises(TypeError, "checkpoint must be a stabl_jax.experiment.checkpoints.ChunkCheckpoint"):
        simulate(LEARNER, ENV, KEY, 2, options=SimOptions(checkpoint="run.npz"))


@row("M10b")
def _(tmp_path: Path):
    """A checkpoint folder that is a file failed at the first save, after a chunk's work."""
    path = tmp_path / "run"
    path.write_text("mine")
    with raises(NotADirectoryError, f"checkpoint folder {path} is a file: give a folder"):
        ChunkCheckpoint(path, {"run": 1})
    assert path.read_text() == "mine"


@row("M11")
def _():
    """SA(L) against another environment's losses: a wrong number, returned without a word."""
    result = simulate(LEARNER, ENV, KEY, 2, traces=("loss",))
    assert result.env is ENV
    windows = [4]
    same = ExpertAdvice(num_arms=N, horizon=T)  # equal to ENV: the same losses
    np.testing.assert_array_equal(
        metrics.adaptive_regret(result, same, windows)["sampled"],
        metrics.adaptive_regret(result, ENV, windows)["sampled"],
    )
    for other in (
        ExpertAdvice(num_arms=N + 1, horizon=T),
        ExpertAdvice(num_arms=N, horizon=T, change_points=(5,)),
    ):
        with raises(
            ValueError,
            "result was simulated on ExpertAdvice(num_arms=3",
            "give adaptive_regret the environment of the simulation (result.env)",
        ):
            metrics.adaptive_regret(result, other, windows)
    shorter = ExpertAdvice(num_arms=N, horizon=T // 2)
    with raises(ValueError, "cannot regenerate rounds up to 16 of ExpertAdvice with horizon=8"):
        metrics.paired_adaptive_regret(shorter, result.carry, {"l": result.loss}, windows)
    for start, stop, error in (
        (-4, 4, "t_start must be >= 0, got -4"),
        (8, 4, "t_stop must be >= 8"),
    ):
        with raises(ValueError, error):
            regenerate_losses(ENV, result.carry, start, stop)
    with raises(TypeError, "t_start must be an int, got 2.5 (float)"):
        regenerate_losses(ENV, result.carry, 2.5, 8)
    convex = MovingTarget(dim=2, horizon=T)
    bco_result = simulate(BCO_LEARNERS.make("fkm", dim=2, horizon=T), convex, KEY, 1)
    with raises(ValueError, "result was simulated on MovingTarget(dim=2", "bco_adaptive_regret"):
        bco_adaptive_regret(bco_result, MovingTarget(dim=2, horizon=T, target_radius=0.25), windows)


@row("M12")
def _():
    """The selection metrics score only finite gaps, of the documented shapes."""
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
        with raises(ValueError, f"at must be {error}"):
            hpo_metrics.profiles_across(results, at=bad)
    with raises(TypeError, "num_evaluations must be an int, got 10.5 (float)"):
        hpo_metrics.make_hpo_learner("stabl", 24, 10.5)
    with raises(ValueError, "num_evaluations must be >= 1, got 0"):
        hpo_metrics.make_hpo_learner("stabl", 24, 0)


@row("M13")
def _():
    """SA(L) of traces that are not the carry's runs: rows of uninitialised memory."""
    four = simulate(LEARNER, ENV, KEY, 4, traces=("loss",))
    two = simulate(LEARNER, ENV, KEY, 2, traces=("loss",))
    windows = [4]
    good = metrics.paired_adaptive_regret(ENV, four.carry, {"a": four.loss}, windows)["a"]
    assert good.shape == (4, 1) and np.isfinite(good).all()
    for carry, loss, runs in ((two.carry, four.loss, 2), (four.carry, two.loss, 4)):
        with raises(ValueError, f"traces['a'] must be (R, T) with R={runs}, the runs of carry"):
            metrics.paired_adaptive_regret(ENV, carry, {"a": loss}, windows)
        with raises(ValueError, f"traces['a'] must be (R, T) with R={runs}, the runs of carry"):
            metrics.paired_cumulative_regret(ENV, carry, {"a": loss})
    with raises(ValueError, "traces['a'] must be (R, T), got shape (16,)"):
        metrics.CumulativeRegret(ENV, {"a": four.loss[0]})
    with raises(ValueError, "traces['b'] has shape (4, 8), traces['a'] (4, 16)"):
        metrics.paired_adaptive_regret(
            ENV, four.carry, {"a": four.loss, "b": four.loss[:, :8]}, [4]
        )
    with raises(ValueError, "traces must hold at least one (R, T) loss trace, got none"):
        metrics.paired_adaptive_regret(ENV, four.carry, {}, windows)
    broken = four.loss.copy()
    broken[1, 5] = np.nan
    with raises(ValueError, "traces['a'] must be finite, got nan at index (1, 5) (1 of 64"):
        metrics.paired_adaptive_regret(ENV, four.carry, {"a": broken}, windows)
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
    """BCO SA(L): sizes are ints, and the comparator's domain is the one it is solved on."""
    env = MovingTarget(dim=2, horizon=T)
    result = simulate(BCO_LEARNERS.make("fkm", dim=2, horizon=T), env, KEY, 2)
    good = bco_adaptive_regret(result, env, [4])["sa"]
    same = bco_adaptive_regret(result, env, [4], domain=Ball(dim=2))["sa"]
    np.testing.assert_array_equal(same, good)
    with raises(TypeError, "window length must be an int, got 4.5 (float)"):
        bco_adaptive_regret(result, env, [4.5])
    with raises(TypeError, "stride must be an int, got 2.5 (float)"):
        bco_adaptive_regret(result, env, [4], stride=2.5)
    for name in ("stride", "num_steps", "runs_per_block"):
        with raises(ValueError, f"{name} must be >= 1, got 0"):
            bco_adaptive_regret(result, env, [4], **{name: 0})
    with raises(ValueError, "domain.dim=3 does not match env.dim=2"):
        bco_adaptive_regret(result, env, [4], domain=Ball(dim=3))
    with raises(ValueError, "MovingTarget solves its window comparators on its own domain"):
        bco_adaptive_regret(result, env, [4], domain=Ball(dim=2, radius=0.5))
    with raises(ValueError, "losses['a'] must be (R, T) with R=2, the runs of carry"):
        paired_bco_adaptive_regret(env, result.carry, {"a": result.loss[:1]}, [4])


# ==== Configs ====
def _config_error(tmp_path: Path, extra: str, *fragments: str, text: str = GOOD_CONFIG) -> None:
    path = config_file(tmp_path, text, extra)
    with raises(ConfigError, str(path), *fragments):
        load_config(path)


@row("C1")
def _(tmp_path):
    top = GOOD_CONFIG.replace("runs = 2", 'runs = 2\ncolour = "red"')
    _config_error(tmp_path, "", "unknown key 'colour'", "allowed keys", "horizon", text=top)
    _config_error(tmp_path, "colour = 1\n", "key 'env.colour'", "allowed keys", "num_arms")


@row("C2")
def _(tmp_path):
    many = GOOD_CONFIG.replace("2", "'many'", 1)
    _config_error(tmp_path, "", "'runs'", "must be an int", "'many'", text=many)


@row("C3")
def _(tmp_path):
    for old, new, key in (
        ("runs = 2", "runs = 0", "'runs'"),
        ("runs = 2", "runs = -4", "'runs'"),
        ("horizon = 64", "horizon = 8", "'horizon'"),
        ("runs = 2", "runs = 2\nchunk_size = 0", "'chunk_size'"),
        ("runs = 2", "runs = 2\nwindow = 100", "'window'"),
        ("runs = 2", "runs = 2\nseed = -1", "'seed'"),
        # key(2**32) is key(0) without x64: the runs of seed 0 under another name.
        ("runs = 2", "runs = 2\nseed = 4294967296", "in [0, 4294967295], got 4294967296"),
    ):
        _config_error(tmp_path, "", key, text=GOOD_CONFIG.replace(old, new))


@row("C4")
def _(tmp_path):
    scale = "[params.stabl]\nmeta_lr_scale = {}\n"
    for value in ("nan", "inf", "-inf", "-1.0"):
        key = "'params.stabl.meta_lr_scale'"
        _config_error(tmp_path, scale.format(value), key, "finite number >= 0")
    within = "meta_lr_scale must be finite and in (0, inf)"
    _config_error(tmp_path, scale.format("0.0"), "'params.stabl'", within)


@row("C5")
def _(tmp_path):
    _config_error(tmp_path, "baseline_high = nan\n", "'env'", "baseline_high must be in [0, 1]")


@row("C6")
def _(tmp_path):
    _config_error(tmp_path, "change_points = [40, 20]\n", "'env'", "strictly increasing")
    _config_error(tmp_path, "change_points = [20, 64]\n", "'env'", "[1, 63]")


@row("C7")
def _(tmp_path):
    lengths = "[learner_options.stabl]\nhistory_lengths = [32, 16]\n"
    _config_error(tmp_path, lengths, "'learner_options.stabl'", "strictly increasing")


@row("C8")
def _(tmp_path):
    one_arm = GOOD_CONFIG.replace("= 5", "= 1")
    _config_error(tmp_path, "", "'env'", "num_arms must be >= 2", text=one_arm)


@row("C9")
def _(tmp_path):
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("runs = [\n")
    with raises(ConfigError, "not valid TOML"):
        load_config(bad_toml)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00")
    with raises(ConfigError, "cannot read config", "utf-8"):
        load_config(binary)
    with raises(ConfigError, "is a folder"):
        load_config(tmp_path)
    with raises(ConfigError, "the config is empty: give a .toml file or a config name"):
        load_config("")  # not the working folder, which Path("") is
    with raises(ConfigError, "does not exist"):
        load_config(tmp_path / "missing.toml")


@row("C10")
def _(tmp_path):
    path = config_file(tmp_path)
    for bad in ("runs", "=3", "env..x=1"):
        with raises(ConfigError, "key=value"):
            load_config(path, [bad])
    with raises(ConfigError, "'runs' (set on the command line)", "must be an int >= 1"):
        load_config(path, ["runs=0"])


@row("C10b")
def _(tmp_path, capsys, monkeypatch):
    """A key overridden twice, or a table and a key inside it: the later override replaced the
    earlier one silently (``--runs 5`` beside ``--set runs=3`` ran 5 runs)."""
    path = config_file(tmp_path)
    with raises(ConfigError, "runs is set twice ('runs=3' and 'runs=5')", "give it once"):
        load_config(path, ["runs=3", "runs=5"])
    with raises(ConfigError, "runs is set twice ('runs=3' and 'runs=5')"):
        load_config(path, ["runs=3"], runs=5)
    with raises(ConfigError, "env and env.num_arms are both set", "inside the table"):
        load_config(path, ["env.num_arms=5", 'env={name="expert_advice", num_arms=3}'])
    load_config(path, ["env.num_arms=5", "env.num_segments=2"], runs=5)  # apart: fine
    _forbid_computation(monkeypatch)
    code, err = run_cli(["run", str(path), "--runs", "5", "--set", "runs=3"], capsys)
    assert code == 2 and "runs is set twice ('runs=3' and 'runs=5')" in err
    # An option given twice: argparse kept the last value (``--runs 5 --runs 3`` ran 3).
    for option, first, second in (("--runs", "5", "3"), ("--out", "a", "b"), ("--seed", "1", "1")):
        code, err = run_cli(["run", str(path), option, first, option, second], capsys)
        assert code == 2, err
        assert f"{option} is given twice ({first} and {second}): the second would" in err, err


@row("C11")
def _(tmp_path):
    """A value float32 cannot hold is reported as written, not as the inf or 0 it becomes."""
    path = config_file(tmp_path)
    for written, shown, becomes in (("1e300", "1e+300", "inf"), ("1e-300", "1e-300", "0.0")):
        with raises(ConfigError, "'params.stabl.meta_lr_scale'", shown, f"stored as {becomes}"):
            load_config(path, [f"params.stabl.meta_lr_scale={written}"])


@row("C12")
def _(tmp_path):
    """A horizon a learner cannot run is reported under ``horizon``, not ``learner_options``;
    a learner option it rejects under ``learner_options``."""
    path = config_file(tmp_path)
    with raises(ConfigError, "key 'horizon' (set on the command line)", "cannot run 20 rounds"):
        load_config(path, ["horizon=20", "sa_windows=[4, 8]", "window=4"])
    with raises(ConfigError, "key 'learner_options.stabl'", "rejects its options"):
        load_config(path, ['learner_options.stabl.observation="psychic"'])


# ==== The command line ====
@row("X1")
def _(tmp_path, capsys, monkeypatch):
    _forbid_computation(monkeypatch)
    path = config_file(tmp_path, GOOD_CONFIG.replace("horizon = 64", "horizon = 8"))
    code, err = run_cli(["run", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and err.startswith("error: ") and "'horizon'" in err and ">= 16" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


@row("X2")
def _(tmp_path, capsys, monkeypatch):
    _forbid_computation(monkeypatch)
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    path = config_file(tmp_path)
    for out in (blocker / "sub", blocker):
        code, err = run_cli(["run", str(path), "--out", str(out)], capsys)
        assert code == 2 and err.startswith("error: ") and "a_file" in err, err
    code, err = run_cli(["run", str(path), "--out", "/proc/stabl-jax-cannot-write/out"], capsys)
    assert code == 2 and "error: " in err and "/proc" in err


@row("X3")
def _(tmp_path, capsys, monkeypatch):
    _forbid_computation(monkeypatch)
    path = config_file(tmp_path)
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("keep")
    (precious / "summary.json").write_text("{}")  # a name of ours is not enough
    (precious / "COMPLETE").write_text("x")
    for force in ([], ["--force"]):
        code, err = run_cli(["run", str(path), "--out", str(precious), *force], capsys)
        assert code == 2 and "not a stabl_jax results folder" in err and str(precious) in err
        assert "never replaced" in err
    assert (precious / "thesis.tex").read_text() == "keep"
    done = tmp_path / "done"
    mark_as_ours(done)
    (done / "COMPLETE").write_text("x")
    code, err = run_cli(["run", str(path), "--out", str(done)], capsys)
    assert code == 2 and "already holds a complete result" in err and "--force" in err


@row("X4")
def _(tmp_path, capsys, monkeypatch):
    """An interrupted run of another config left checkpoints in the output's partial folder:
    refused (exit 2) naming the difference, unless --force discards them."""
    _forbid_computation(monkeypatch)
    out = tmp_path / "out"
    dead = tmp_path / "out.partial"  # created by a run that died
    mark_as_ours(dead)
    (dead / "checkpoint").mkdir()
    other = {"config": {"runs": 3}, "format": "x"}
    (dead / "checkpoint" / "experiment.json").write_text(json.dumps(other))
    path = config_file(tmp_path)
    code, err = run_cli(["run", str(path), "--out", str(out)], capsys)
    assert code == 2 and "different experiment" in err and "--force" in err and "config" in err
    assert dead.exists()
    code, err = run_cli(["run", str(path), "--out", str(out), "--force"], capsys)
    assert code == 1 and "the experiment ran although" in err  # accepted: it would have run
    assert not dead.exists()


@row("X4b")
def _(tmp_path, capsys, monkeypatch):
    """An interrupted run of the same config under another optax left checkpoints: refused
    (exit 2) naming the version and the remedy (those versions, or --force), not "rerun that
    exact command", which would meet the same refusal."""
    _forbid_computation(monkeypatch)
    path = config_file(tmp_path)
    identity = experiment_identity(load_config(path))
    identity["versions"]["optax"] = "0.2.4-other"
    dead = tmp_path / "out.partial"
    mark_as_ours(dead)
    (dead / "checkpoint").mkdir()
    (dead / "checkpoint" / "experiment.json").write_text(json.dumps(identity))
    code, err = run_cli(["run", str(path), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "this experiment under other versions" in err
    assert "versions.optax: '0.2.4-other' (checkpoint)" in err
    assert "install the versions it ran with" in err and "--force" in err
    assert "rerun that exact command" not in err and dead.exists()


@row("X5")
def _(tmp_path, capsys, monkeypatch):
    _forbid_computation(monkeypatch)
    path = config_file(tmp_path)
    for flag, value in (("--runs", "0"), ("--seed", "-1")):
        code, err = run_cli(["run", str(path), flag, value, "--out", str(tmp_path / "o")], capsys)
        assert code == 2 and "(set on the command line)" in err
    code, err = run_cli(["run", str(path), "--runs", "many"], capsys)
    assert code == 2 and "invalid int value" in err


@row("X7")
def _(tmp_path, capsys, monkeypatch):
    _forbid_computation(monkeypatch)
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(["run", str(config_file(tmp_path)), "--out", ""], capsys)
    assert code == 2 and "--out is empty" in err and not (tmp_path / "results").exists()


@row("X8")
def _(tmp_path, capsys, monkeypatch):
    """Runs, horizons or arms too large for this machine: refused at once, naming the sizes
    and --allow-large; nothing written."""
    _forbid_computation(monkeypatch)
    path = config_file(tmp_path)
    for size in ("runs=1000000000", "horizon=1000000000", "env.num_arms=100000000"):
        start = time.monotonic()
        code, err = run_cli(["run", str(path), "--out", str(tmp_path / "o"), "--set", size], capsys)
        assert time.monotonic() - start < 60
        assert code == 2 and "does not fit" in err and "--allow-large" in err, err
        assert "iB of memory" in err or "iB of disk" in err
        assert not list(tmp_path.glob("o*"))


@row("X9")
def _(tmp_path, capsys, monkeypatch):
    """``stabl-jax bench --out`` a folder of the user's: its benchmark.json or benchmark.md
    used to be overwritten after the timing. Refused at once now, the file untouched; a
    previous benchmark's files may be replaced."""

    def boom(*args, **kwargs):
        raise AssertionError("the benchmark ran although the command should have failed")

    monkeypatch.setattr(benchmark, "run_benchmark", boom)
    for name in ("benchmark.json", "benchmark.md"):
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        (folder / name).write_text("my own notes\n")
        code, err = run_cli(["bench", "--quick", "--out", str(folder)], capsys)
        assert code == 2, err
        assert f"{folder / name} is there and is not a previous stabl-jax bench file" in err
        assert "left as it is: give --out another folder" in err
        assert (folder / name).read_text() == "my own notes\n"
    code, err = run_cli(["bench", "--quick", "--out", str(folder / name)], capsys)
    assert code == 2 and "is a file: give a folder" in err
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
        code, err = run_cli(["run", config, "--out", str(tmp_path / "o")], capsys)
        assert code == 2 and err.startswith("error: ") and "Traceback" not in err


# ==== Files ====
@row("F1")
def _(tmp_path):
    """An object array (which only pickle can load) in traces.npz or a checkpoint is refused
    on load; and cannot be written by the checkpoint writer."""
    folder = tmp_path / "res"
    folder.mkdir()
    (folder / "summary.json").write_text("{}")  # a finished folder, but for its traces
    np.savez(folder / "traces.npz", evil=np.array([{"a": 1}], dtype=object))
    with raises(ValueError, "allow_pickle=False"):
        read_traces(folder)
    with raises(TypeError, "dtype object"):
        save_arrays(tmp_path / "x.npz", {"evil": np.array([{"a": 1}], dtype=object)})


@row("F2")
def _(tmp_path):
    """A truncated or corrupted checkpoint is an error naming the file, never a wrong resume."""

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
    folder = tmp_path / "res"
    folder.mkdir()
    (folder / "summary.json").write_text("{}")
    np.savez(folder / "traces.npz", loss=np.zeros((2, 64), np.float32))
    (folder / "traces.npz").write_bytes((folder / "traces.npz").read_bytes()[:300])
    with raises(ValueError, f"{folder / 'traces.npz'} cannot be read", "damaged", "run what"):
        read_traces(folder)


# ==== The tests ====
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


def test_results_folder_error_is_output_error(tmp_path):
    blocker = tmp_path / "f"
    blocker.write_text("")
    with pytest.raises(OutputError):
        ResultsFolder.prepare(blocker / "x")
