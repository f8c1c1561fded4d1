"""Runs sharded over several devices give bitwise the unsharded results; padding and blocks.
The four-device run is a subprocess (``XLA_FLAGS`` is read before JAX starts); this process
(one device) runs the same calls and compares every bit (``test_multihost.run_both``)."""

from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import EXP3, ExpertAdvice, SimOptions, make, sharding, simulate
from tests.conftest import HORIZON, NUM_ARMS
from tests.test_multihost import run_both

# R = 10 runs padded to 12 (blocks of 3) sharded or not; then the Pallas kernel (interpreted),
# then per-run params (a sweep) over R = 8 runs laid out by the default plan.
SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import jax, jax.numpy as jnp, numpy as np
    from stabl_jax import ExpertAdvice, SimOptions, make, simulate, sharding

    def main(pid, nproc, port, folder):
        env = ExpertAdvice(num_arms=5, horizon=64, change_points=(20, 41))
        res = simulate(make("stabl", num_arms=5, horizon=64), env, jax.random.key(3), 10,
                       options=SimOptions(chunk_size=32, runs_per_block=3))
        out = {f"stabl/{field}": trace for field, trace in res.traces().items()}
        for i, leaf in enumerate(jax.tree.leaves(res.carry.state)):
            out[f"stabl/state{i}"] = np.asarray(leaf)
        res = simulate(make("stabl", num_arms=5, horizon=64), env, jax.random.key(3), 10,
                       options=SimOptions(chunk_size=32, runs_per_block=3, kernel="pallas"))
        out.update({f"pallas/{field}": trace for field, trace in res.traces().items()})
        out["pallas/weights"] = np.asarray(res.carry.state.expert_log_probs)
        learner = make("exp3", num_arms=5, horizon=64)
        params = learner.default_params.replace(lr_scale=jnp.linspace(0.5, 8.0, 8))
        res = simulate(learner, env, jax.random.key(4), 8, params=params,
                       options=SimOptions(chunk_size=32))
        out["sweep/played"] = res.played
        out["sweep/weights"] = np.asarray(res.carry.state.log_weights)
        out["devices"] = np.asarray(len(jax.devices()))
        out["plan_devices"] = np.asarray(sharding.plan_runs(10, 3).num_devices)
        np.savez(folder / "arrays.npz", **out)

    if __name__ == "__main__":
        main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4]))
    """
)


def test_sharded_over_four_devices_equals_unsharded_bitwise(tmp_path):
    sharded, unsharded = run_both(SCRIPT, tmp_path, 1, 4, timeout=600)
    assert int(sharded["devices"]) == 4 and int(sharded["plan_devices"]) == 4
    assert int(unsharded["devices"]) == 1 and int(unsharded["plan_devices"]) == 1
    names = [k for k in unsharded if "/" in k]
    assert {"stabl/played", "stabl/expected_loss", "stabl/prob_best", "sweep/played"} <= set(names)
    assert {"pallas/played", "pallas/expected_loss", "pallas/weights"} <= set(names)
    for name in names:
        assert sharded[name].shape == unsharded[name].shape, name
        np.testing.assert_array_equal(sharded[name], unsharded[name], err_msg=name)


def test_plan_pads_to_devices_times_block_and_names_bad_values():
    plan = sharding.plan_runs(10, 3, mesh=None)
    assert (plan.padded_runs, plan.block, plan.num_devices) == (12, 3, 1)
    # Chosen blocks on a CPU: at most CPU_MAX_BLOCK runs, split evenly to keep padding small.
    plan = sharding.plan_runs(300, mesh=None)
    assert jax.default_backend() != "cpu" or (plan.block, plan.padded_runs) == (150, 300)
    plan = sharding.plan_runs(1, mesh=None)
    assert (plan.block, plan.padded_runs) == (1, 1)
    assert sharding.plan_runs(10, mesh="auto").num_runs == 10
    cores = sharding.usable_cores()  # automatic threads divide the blocks, within the cores
    for runs in (1, 10, 300, 1024, 4096):
        plan = sharding.plan_runs(runs, mesh=None)
        blocks = plan.padded_runs // plan.block
        assert 1 <= plan.host_threads <= cores and blocks % plan.host_threads == 0
    assert sharding.plan_runs(12, 3, mesh=None, host_threads=4).host_threads == 4
    # any string used to mean "auto": mesh="none" sharded over every device
    with pytest.raises(ValueError, match=r"mesh must be one of \('auto',\), got 'none'"):
        sharding.plan_runs(10, mesh="none")
    with pytest.raises(TypeError, match=r"mesh must be 'auto', None or a jax\.sharding\.Mesh"):
        sharding.plan_runs(10, mesh=jax.devices())
    with pytest.raises(ValueError, match="host_threads=3 must divide the number of blocks"):
        sharding.plan_runs(12, 3, mesh=None, host_threads=3)
    with pytest.raises(ValueError, match="host_threads must be >= 1"):
        sharding.plan_runs(12, 3, mesh=None, host_threads=0)
    with pytest.raises(ValueError, match="runs_per_block"):
        sharding.plan_runs(10, 0, mesh=None)


def test_padding_runs_are_dropped_and_do_not_change_the_others():
    env, learner = ExpertAdvice(NUM_ARMS, HORIZON), EXP3(NUM_ARMS, HORIZON)
    options = SimOptions(runs_per_block=4)
    padded = simulate(learner, env, jax.random.key(0), 5, options=options)  # 8 simulated
    plain = simulate(learner, env, jax.random.key(0), 8, options=options)
    assert padded.played.shape == (5, HORIZON)
    assert jax.tree.leaves(padded.carry)[0].shape[0] == 5
    np.testing.assert_array_equal(padded.played, plain.played[:5])
    # Per-run params are padded too (with their last row), each kept with its own run.
    rates = jnp.linspace(0.5, 8.0, 5)
    params = learner.default_params.replace(lr_scale=rates)
    swept = simulate(learner, env, jax.random.key(0), 5, params=params, options=options)
    whole = params.replace(lr_scale=jnp.concatenate([rates, jnp.repeat(rates[-1:], 3)]))
    plain = simulate(learner, env, jax.random.key(0), 8, params=whole, options=options)
    np.testing.assert_array_equal(swept.played, plain.played[:5])


def test_host_threads_give_the_same_bits():
    """Blocks stepped from host threads, checked or not: the traces and final state of one
    unchecked thread, bit for bit (chunked, with per-run params)."""
    env = ExpertAdvice(NUM_ARMS, HORIZON, random_change_points=True)
    learner = make("stabl", num_arms=NUM_ARMS, horizon=HORIZON)
    params = learner.default_params.replace(expert_lr_scale=jnp.linspace(0.5, 4.0, 12))

    def run(threads: int, validate: bool):
        opts = SimOptions(runs_per_block=3, chunk_size=32, host_threads=threads)
        return simulate(
            learner, env, jax.random.key(2), 12, params=params, validate=validate, options=opts
        )

    one = run(1, False)
    for threads, validate in [(2, False), (4, False), (2, True), (4, True)]:
        many = run(threads, validate)
        for field, trace in one.traces().items():
            np.testing.assert_array_equal(many.traces()[field], trace, err_msg=field)
        for a, b in zip(jax.tree.leaves(one.carry), jax.tree.leaves(many.carry), strict=True):
            if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
                a, b = jax.random.key_data(a), jax.random.key_data(b)
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
