"""The fused Pallas kernel (``SimOptions(kernel="pallas")``) runs the XLA rollout's runs: in
interpret mode on the CPU, the same arms and losses, every probability within 1e-6 (other
orders of summation); it lowers for a GPU through Triton, and on a GPU matches the XLA path."""

from __future__ import annotations

import dataclasses
import functools
import inspect

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import EXP3, ExpertAdvice, SimOptions, StABL, simulate
from stabl_jax import kernels as kernels_pkg
from stabl_jax.envs import PiecewiseBernoulli, PiecewiseBernoulliTable
from stabl_jax.envs.base import as_environment
from stabl_jax.experiment.checkpoints import ChunkCheckpoint
from stabl_jax.kernels import bandit
from stabl_jax.learners import StABLOneQuery
from stabl_jax.sampling import sample_index

TRACES = ("played", "arms", "loss", "observed", "expected_loss", "prob_best")
TOL = 1e-6  # probabilities: float32 sums in another order
GPUS = [d for d in jax.devices() if d.platform == "gpu"]


@pytest.fixture(autouse=True)
def on_the_cpu(request):
    if "gpu_device" in request.node.name:
        yield
        return
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def both(learner, env, num_runs, horizon, seed=0, **kwargs):
    """The XLA and the Pallas path of the same call."""
    kwargs = dict(horizon=horizon, traces=kwargs.pop("traces", TRACES), **kwargs)
    run = functools.partial(simulate, learner, env, jax.random.key(seed), num_runs, **kwargs)
    return run(options=SimOptions(kernel="xla")), run(options=SimOptions(kernel="pallas"))


def assert_same_runs(xla, fused):
    """Arms and losses bit for bit, probabilities and final distributions within :data:`TOL`."""
    for name in ("played", "arms", "loss", "observed"):
        if name in xla.arrays:
            np.testing.assert_array_equal(fused.arrays[name], xla.arrays[name], err_msg=name)
    for name in ("expected_loss", "prob_best"):
        if name in xla.arrays:
            np.testing.assert_allclose(fused.arrays[name], xla.arrays[name], rtol=0, atol=TOL)
    a, b = xla.carry.state, fused.carry.state
    np.testing.assert_array_equal(np.asarray(b.t), np.asarray(a.t))
    if hasattr(a, "log_weights"):  # EXP3
        pairs = [(a.log_weights, b.log_weights)]
    else:
        np.testing.assert_array_equal(np.asarray(b.num_muted), np.asarray(a.num_muted))
        pairs = [(a.expert_log_probs, b.expert_log_probs)]
        pairs.append((jax.nn.softmax(a.meta_log_weights), jax.nn.softmax(b.meta_log_weights)))
        finite = np.isfinite(np.asarray(a.meta_log_weights))
        np.testing.assert_array_equal(np.isfinite(np.asarray(b.meta_log_weights)), finite)
    for x, y in pairs:
        np.testing.assert_allclose(np.exp(np.asarray(y)), np.exp(np.asarray(x)), rtol=0, atol=TOL)


def test_stabl_variants_and_muting_same_runs_as_xla():
    """StABL Naive, reward feedback, 1-based restarts, per-run meta step sizes that mute."""
    learner = StABL(
        num_arms=5, horizon=64, observation="uniform", feedback="reward", round_offset=1,
        history_lengths=(8, 16, 64),
    )  # fmt: skip
    params = learner.default_params.replace(meta_lr_scale=jnp.linspace(10.0, 40.0, 4))
    xla, fused = both(learner, ExpertAdvice(num_arms=5, horizon=64), 4, 64, params=params)
    assert int(np.sum(xla.carry.state.num_muted)) > 0
    assert_same_runs(xla, fused)


@pytest.mark.parametrize("name", ["exp3", "stabl_naive"])
def test_tiny_probability_recovers_on_both_paths(name):
    """Exact log domain: at a large rate the arm best from round 192 of 512 has probability
    exactly 0 after the change and over 1/2 at the end, in some run. StABL (Naive, one expert,
    no restart) draws the same arms on both paths; EXP3's paths part (a one-ulp difference
    flips a draw at 40 times its rate), so only its recovery is checked."""
    horizon, change, runs = 512, 192, 8
    env = ExpertAdvice(num_arms=3, horizon=horizon, change_points=(change,))
    if name == "exp3":
        learner = EXP3(num_arms=3, horizon=horizon)
        params = learner.default_params.replace(lr_scale=jnp.float32(40.0))
    else:
        learner = StABL(
            num_arms=3, horizon=horizon, history_lengths=(horizon,), observation="uniform"
        )
        params = learner.default_params.replace(expert_lr_scale=jnp.float32(85.0))
    xla, fused = both(learner, env, runs, horizon, params=params, traces=("played", "prob_best"))
    if name != "exp3":
        assert_same_runs(xla, fused)
    for res in (xla, fused):
        after = res.prob_best[:, change:]
        assert ((after == 0.0).any(axis=1) & (after[:, -1] > 0.5)).any(), name


def test_chunks_host_threads_and_resume_give_the_same_bits(tmp_path):
    """Chunk size, host threads and a resume change nothing, bit for bit (5 runs in 3 blocks)."""
    learner = StABL(num_arms=5, horizon=48, history_lengths=(16, 48))
    env = ExpertAdvice(num_arms=5, horizon=48)
    opts = SimOptions(kernel="pallas", runs_per_block=2, chunk_size=48, host_threads=1)
    one = simulate(learner, env, jax.random.key(1), 5, traces=TRACES, options=opts)
    opts = dataclasses.replace(opts, chunk_size=24, host_threads=3)
    ckpt = ChunkCheckpoint(tmp_path, {})

    def stop(done: int, total: int) -> None:  # called after each chunk's checkpoint
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # stopped after the first chunk ...
        stopped = dataclasses.replace(opts, checkpoint=ckpt, progress=stop)
        simulate(learner, env, jax.random.key(1), 5, traces=TRACES, options=stopped)
    assert ckpt.progress() == 24
    resumed = dataclasses.replace(opts, checkpoint=ckpt)
    many = simulate(learner, env, jax.random.key(1), 5, traces=TRACES, options=resumed)
    for name in TRACES:
        np.testing.assert_array_equal(many.arrays[name], one.arrays[name], err_msg=name)
    chex.assert_trees_all_equal(many.carry.state, one.carry.state)


@functools.cache
def _block(learner, env, runs):
    """A block's carry and rollout environment, as ``simulate`` builds them."""
    import sys

    rollout = sys.modules["stabl_jax.simulate"]
    renv = as_environment(env)
    keys = rollout.run_keys(jax.random.key(0), runs)
    return rollout.init_runs(learner, renv, keys, learner.default_params), renv


PIECES = StABL(num_arms=5, horizon=64, history_lengths=(4, 12, 64))


@functools.cache
def _chunk(fields=TRACES, rows=None, max_rounds=None):
    """``(carry, outputs)`` of the interpreted kernel, rounds 8 to 40 of 3 StABL runs."""
    carry, renv = _block(PIECES, ExpertAdvice(num_arms=5, horizon=64), 3)
    step = bandit.chunk_step(
        PIECES, renv, fields, 32, interpret=True, rows=rows, max_rounds=max_rounds
    )
    return jax.jit(step)(carry, jnp.int32(8))


@pytest.mark.parametrize(("rows", "max_rounds"), [(2, None), (None, 5), (None, 31)])
def test_programs_of_fewer_runs_and_pieces_of_a_chunk_give_the_same_bits(rows, max_rounds):
    """``rows`` runs a program (2 programs of 2 for 3 runs, padded); ``max_rounds`` steps a
    chunk in pieces (4 and 16 of 32: the largest divisors not above 5 and 31). Either gives the
    bits of one program over the chunk, StABL's restarts inside and between pieces."""
    assert bandit.largest_divisor(32, max_rounds or 32) == {5: 4, 31: 16}.get(max_rounds, 32)
    whole, parts = _chunk(), _chunk(rows=rows, max_rounds=max_rounds)
    assert jax.tree.structure(parts) == jax.tree.structure(whole)
    for a, b in zip(jax.tree.leaves(whole), jax.tree.leaves(parts), strict=True):
        if not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


@pytest.mark.parametrize(
    ("learner", "rows"),
    [
        (EXP3(num_arms=30, horizon=4096), 64),  # 32 floats a run: 16 a thread
        (StABL(num_arms=30, horizon=4096), 16),  # 7 experts: 232 floats a run, 29 a thread
        (StABL(num_arms=300, horizon=4096), 16),  # 11 experts of 512 arms: never fewer than 16
    ],
)
def test_a_program_holds_at_most_32_state_floats_a_thread(learner, rows):
    """Runs per program keep each of 128 threads' state within 32 floats (docs/gpu.md), >= 16."""
    carry, _ = _block(learner, ExpertAdvice(num_arms=learner.num_arms, horizon=4096), 2)
    spec = bandit._KERNELS[type(learner)](learner, bandit._padded_arms(learner.num_arms))
    states, _ = spec.pack(carry.state)
    assert bandit.gpu_rows(states) == rows


@pytest.mark.parametrize(
    "learner", [EXP3(num_arms=30, horizon=256), StABL(num_arms=30, horizon=256)]
)
def test_lowers_for_a_gpu_with_triton(learner):
    """The compiled kernel lowers to Triton for CUDA without a GPU."""
    env = ExpertAdvice(num_arms=30, horizon=256)
    carry, renv = _block(learner, env, 20)  # 20 runs: padded to a program of 64
    step = bandit.chunk_step(learner, renv, TRACES, 16, interpret=False)
    t0 = jnp.int32(0)  # made outside the abstract mesh, which has no device to compute on
    # the GPU compiled for: from the abstract mesh (an H100) when the default device is the CPU
    if "platform" not in inspect.signature(jax.sharding.AbstractDevice).parameters:
        pytest.skip(f"JAX {jax.__version__}'s AbstractDevice takes no platform: no GPU to target")
    h100 = jax.sharding.AbstractDevice(
        device_kind="NVIDIA H100 80GB HBM3", num_cores=132, platform="gpu"
    )
    mesh = jax.sharding.AbstractMesh((1,), ("runs",), abstract_device=h100)
    try:
        with jax.sharding.use_abstract_mesh(mesh):
            lowered = jax.jit(step).trace(carry, t0).lower(lowering_platforms=("cuda",))
    except (ImportError, NotImplementedError) as err:  # a jaxlib without the Triton dialect
        pytest.skip(f"no Triton lowering here: {err}")
    assert "triton" in lowered.as_text()


@pytest.mark.skipif(not GPUS, reason="needs a GPU")
@pytest.mark.parametrize("name", ["exp3", "stabl"])
def test_compiled_kernel_on_a_gpu_device_same_runs_as_xla(name):
    """The Triton-compiled kernel against the XLA path on a GPU: 64 runs of 256 rounds, n = 30."""
    learner = (EXP3 if name == "exp3" else StABL)(num_arms=30, horizon=4096)
    with jax.default_device(GPUS[0]):
        assert_same_runs(*both(learner, ExpertAdvice(num_arms=30, horizon=4096), 64, 256))


@functools.cache
def _draws(n):
    """One program per ``n``: the kernel's CDF and draws, and ``sample_index``'s draws."""

    def draws(probs, u):
        padded = jnp.pad(probs, ((0, 0), (0, bandit._padded_arms(n) - n)))
        return bandit.cdf(padded), bandit.sample(padded, u, n), jax.vmap(sample_index)(probs, u)

    return jax.jit(draws)


@pytest.mark.parametrize("n", [5, 30, 300])
def test_the_cdf_never_decreases_and_no_zero_probability_arm_is_drawn(n):
    """The kernel's integer inverse-CDF draw picks ``sample_index``'s arm, never a null one;
    its CDF never decreases."""
    key = jax.random.key(n)
    probs = (jax.random.uniform(key, (512, n)) ** 8).at[:, 1].set(0.0)  # skewed rows
    u = jax.random.uniform(jax.random.fold_in(key, 1), (512,))
    sums, drawn, reference = _draws(n)(probs, u)
    np.testing.assert_array_equal(drawn, reference)
    assert not np.any(np.asarray(drawn) == 1)
    total = np.asarray(probs, np.float64).sum(axis=1, keepdims=True)
    sums = np.asarray(sums)[:, :n] * bandit.CDF_UNIT * total  # each unit truncated
    exact = np.cumsum(np.asarray(probs, np.float64), axis=1)
    lost = np.arange(1, n + 1) * bandit.CDF_UNIT * total  # under a unit an entry, and rounding
    assert np.all(np.abs(sums - exact) <= lost + 1e-6 * exact)
    # Zero-probability arms (first and last too), a one-arm row, uniforms 0 to 1 - 2^-24:
    # the CDF never decreases and no zero-probability arm is drawn.
    rng, rows = np.random.default_rng(n), 512
    probs = rng.uniform(size=(rows, n)).astype(np.float32) ** 8
    probs[rng.uniform(size=(rows, n)) < 0.5] = 0.0
    probs[:, [0, n - 1]] = 0.0
    probs[probs.sum(axis=1) == 0, 1] = 1.0
    probs[0] = 0.0
    probs[0, n // 2] = 1e-30  # one arm, of a tiny mass
    u = rng.uniform(size=rows).astype(np.float32)
    u[:3] = [0.0, 0.5, 1 - 2**-24]
    sums, drawn, _ = _draws(n)(probs, u)
    assert np.all(np.diff(np.asarray(sums), axis=1) >= 0)
    assert np.all(probs[np.arange(rows), np.asarray(drawn)] > 0)


def test_the_cdf_is_exact_whatever_order_its_sums_take():
    """The CDF is the integer sum of the truncated units: the same in any order of addition."""
    probs = np.random.default_rng(0).dirichlet(np.full(300, 0.1), 64).astype(np.float32)
    padded = jnp.pad(jnp.asarray(probs), ((0, 0), (0, 212)))
    scale = (1.0 / bandit.CDF_UNIT) / np.asarray(jnp.sum(padded, axis=1))  # float32, as there
    units = (np.asarray(padded) * scale[:, None]).astype(np.int64)
    np.testing.assert_array_equal(np.asarray(bandit.cdf(padded)), np.cumsum(units, axis=1))


def test_unsupported_calls_name_what_is_supported():
    env = ExpertAdvice(num_arms=5, horizon=64)
    key = jax.random.key(0)
    exp3, pallas = EXP3(num_arms=5, horizon=64), SimOptions(kernel="pallas")
    with pytest.raises(ValueError, match=r"does not run StABLOneQuery .*EXP3 or StABL"):
        simulate(StABLOneQuery(num_arms=5, horizon=64), env, key, 2, options=pallas)
    with pytest.raises(ValueError, match=r"records only the traces .*\['points'\]"):
        simulate(exp3, env, key, 2, traces=("points",), options=pallas)
    with pytest.raises(ValueError, match="kernel must be one of"):
        simulate(exp3, env, key, 2, options=SimOptions(kernel="triton"))
    with pytest.raises(ValueError, match=r"does not run on Reactive .*oblivious bandit"):
        kernels_pkg.check_supported(exp3, Reactive(), ("played",), False)


class Reactive:
    """Stands for an environment with its own ``evaluate`` (not an oblivious one)."""


def test_auto_picks_the_kernel_where_it_is_compiled_and_supported(monkeypatch):
    """``kernel="auto"``: XLA where the kernel would be interpreted; where compiled (stood in
    for by ``interpreted() -> False``), the kernel for EXP3 and StABL up to 128 padded arms."""
    env = as_environment(ExpertAdvice(num_arms=30, horizon=64))
    fields = ("played", "loss")
    assert bandit.auto_kernel(EXP3(num_arms=30, horizon=64), env, fields, False) == "xla"
    monkeypatch.setattr(bandit, "interpreted", lambda mesh=None: False)
    for learner, validate, expected in [
        (EXP3(num_arms=30, horizon=64), False, "pallas"),
        (StABL(num_arms=30, horizon=64), False, "pallas"),
        (StABL(num_arms=128, horizon=64), False, "pallas"),
        (StABL(num_arms=129, horizon=64), False, "xla"),  # pads to 256: two-level CDF
        (StABL(num_arms=30, horizon=64), True, "pallas"),  # checked on each chunk's outputs
        (StABLOneQuery(num_arms=30, horizon=64), False, "xla"),
        (EXP3(num_arms=30, horizon=64, dtype="float64"), False, "xla"),
    ]:
        assert bandit.auto_kernel(learner, env, fields, validate) == expected, learner
    assert bandit.auto_kernel(EXP3(num_arms=30, horizon=64), env, ("points",), False) == "xla"


def test_auto_runs_the_xla_path_with_one_warning_without_triton(monkeypatch):
    """Compiled but without Pallas's Triton backend, ``kernel="auto"`` warns once, runs XLA."""
    env = as_environment(ExpertAdvice(num_arms=30, horizon=64))
    learner = EXP3(num_arms=30, horizon=64)
    monkeypatch.setattr(bandit, "interpreted", lambda mesh=None: False)
    monkeypatch.setattr(bandit, "triton_available", lambda: False)
    bandit._warn_no_triton.cache_clear()
    with pytest.warns(RuntimeWarning, match="no Pallas Triton backend") as record:
        assert bandit.auto_kernel(learner, env, ("played",), False) == "xla"
        assert bandit.auto_kernel(learner, env, ("played",), False) == "xla"
    assert len([w for w in record if "Triton" in str(w.message)]) == 1
    monkeypatch.setattr(bandit, "triton_available", lambda: True)
    assert bandit.auto_kernel(learner, env, ("played",), False) == "pallas"


def test_the_result_names_the_path_that_ran():
    """``SimResult.kernel``: the path asked for, or what ``kernel="auto"`` picked (XLA here)."""
    xla, fused = _same_runs(EXP3_REWARD, "expert_advice", 64)
    assert (xla.kernel, fused.kernel) == ("xla", "pallas")
    env = ExpertAdvice(num_arms=5, horizon=64)  # the XLA path's program: nothing compiled
    assert simulate(EXP3_REWARD, env, jax.random.key(0), 3, traces=TRACES).kernel == "xla"


def _pallas_operands(step, carry, t0, results=False):
    """``(shape, dtype)`` of the operands (or results) of each ``pallas_call`` in ``step``."""
    found = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "pallas_call":
                values = eqn.outvars if results else eqn.invars
                found.append([(tuple(v.aval.shape), v.aval.dtype) for v in values])
            for param in eqn.params.values():  # the bodies of jit, scan, ...
                for inner in param if isinstance(param, tuple | list) else [param]:
                    inner = getattr(inner, "jaxpr", inner)  # a ClosedJaxpr's Jaxpr
                    if hasattr(inner, "eqns"):
                        walk(inner)

    walk(jax.make_jaxpr(step)(carry, t0).jaxpr)
    return found


# (learner, rounds, environment): EXP3 (exploration, rewards) on each; StABL at n = 30 (B = 7
# experts, restarts of L = 64 at rounds 64 and 128) on ExpertAdvice, n = 5 on the others.
EXP3_REWARD = EXP3(num_arms=5, horizon=64, gamma=0.2, feedback="reward")
STABL_30 = StABL(num_arms=30, horizon=4096)
ENV_NAMES = ("expert_advice", "bernoulli", "bernoulli_table")
SAME_RUNS = [(EXP3_REWARD, 64, name) for name in ENV_NAMES] + [(STABL_30, 160, ENV_NAMES[0])]
SAME_RUNS += [(StABL(num_arms=5, horizon=64), 64, name) for name in ENV_NAMES[1:]]


def _env(name, n, horizon):
    """ExpertAdvice, PiecewiseBernoulli or PiecewiseBernoulliTable (2 segments) of ``n`` arms."""
    if name == "bernoulli_table":
        means = tuple(tuple(0.2 if i == j else 0.5 for i in range(n)) for j in (0, 2))
        return PiecewiseBernoulliTable(num_arms=n, horizon=horizon, means=means)
    env = {"expert_advice": ExpertAdvice, "bernoulli": PiecewiseBernoulli}[name]
    return env(num_arms=n, horizon=horizon)


@functools.cache
def _same_runs(learner, env_name, rounds):
    """Both paths of 3 runs of ``rounds`` rounds on environment ``env_name``, every trace."""
    return both(learner, _env(env_name, learner.num_arms, learner.horizon), 3, rounds)


@pytest.mark.parametrize(
    ("learner", "length", "env_name"),
    SAME_RUNS,
    ids=[f"{type(c[0]).__name__}-{c[0].num_arms}-{c[2]}" for c in SAME_RUNS],
)
def test_draws_inside_the_kernel_and_the_xla_runs(learner, length, env_name):
    """With ``losses_of_words`` the ``pallas_call`` reads key words and the best arm, no loss
    tensor or float uniforms; PiecewiseBernoulliTable reads its losses. Runs are XLA's."""
    runs, n_pad = 3, bandit._padded_arms(learner.num_arms)
    assert learner is not STABL_30 or learner.num_experts == 7
    env = _env(env_name, learner.num_arms, learner.horizon)
    carry, renv = _block(learner, env, runs)
    step = bandit.chunk_step(learner, renv, TRACES, length, interpret=True)
    (operands,) = _pallas_operands(step, carry, jnp.int32(0))
    floats = [shape for shape, dtype in operands if dtype == jnp.float32]
    per_round = [shape for shape in floats if shape[:2] == (length, runs)]
    keys = (carry.env_key, carry.learner_key)
    read = bandit.input_bytes_per_round(learner, TRACES, renv, keys)
    if env_name == "bernoulli_table":
        assert (length, runs, n_pad) in per_round
        assert read == bandit.input_bytes_per_round(learner, TRACES) > 8
    else:
        assert per_round == [], operands
        assert ((2, runs), jnp.uint32) in operands and ((length, runs), jnp.int32) in operands
        assert read == 8  # the best arm, drawn and laid out
        rbg = jax.random.key(0, impl="rbg")  # not hashed by threefry: drawn outside
        assert not bandit.draws_inside(renv, (rbg,)) and bandit.draws_inside(renv, keys)
    assert_same_runs(*_same_runs(learner, env_name, length))


@pytest.mark.parametrize(
    ("fields", "written"),
    [(("loss",), 1), (("played", "loss"), 2), (("arms",), 2), (("prob_best",), 1), (TRACES, 6)],
)
def test_the_kernel_writes_only_the_traces_asked_for(fields, written):
    """The ``pallas_call`` stores only what ``fields`` needs; it returns the full call's bits."""
    carry, renv = _block(PIECES, ExpertAdvice(num_arms=5, horizon=64), 3)
    step = bandit.chunk_step(PIECES, renv, fields, 32, interpret=True)
    (results,) = _pallas_operands(step, carry, jnp.int32(8), results=True)
    assert sum(shape == (32, 3) for shape, _ in results) == written, results
    (_, full), (_, some) = _chunk(), _chunk(fields)
    assert set(some) == set(fields)
    for name in fields:
        np.testing.assert_array_equal(np.asarray(some[name]), np.asarray(full[name]), name)
