"""On-device summaries (stabl_jax.summaries) against the host's float64 metrics, and
simulate's traces kept on the device (SimOptions(traces_on_device=True))."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import SimOptions, StABL, metrics, simulate, summaries
from stabl_jax.envs import ExpertAdvice, PiecewiseBernoulli

RUNS, T = 6, 256
WINDOWS = (1, 16, 100, T)
ENVS = {
    "expert_advice": ExpertAdvice(num_arms=5, horizon=T, num_segments=3),
    "bernoulli": PiecewiseBernoulli(num_arms=5, horizon=T, random_change_points=True),
}
LEARNER = StABL(num_arms=5, horizon=T)


@pytest.fixture(scope="module", params=sorted(ENVS))
def run(request):
    env, options = ENVS[request.param], SimOptions(chunk_size=100, traces_on_device=True)
    return env, simulate(LEARNER, env, jax.random.key(3), RUNS, options=options)


@contextlib.contextmanager
def fetched_shapes():
    """Record the shape of every ``jax.Array`` whose value is read on the host."""
    impl = type(jnp.zeros(1))
    value = impl._value
    shapes: list[tuple[int, ...]] = []
    impl._value = property(lambda self: (shapes.append(self.shape), value.fget(self))[1])
    try:
        yield shapes
    finally:
        impl._value = value


def test_device_traces_are_the_host_traces(run):
    """The same bits as the default path, left on the device; the default path reads its
    chunks on the host (the spy of test_no_trace_leaves_the_device sees such reads)."""
    env, device = run
    with fetched_shapes() as shapes:
        host = simulate(LEARNER, env, jax.random.key(3), RUNS, options=SimOptions(chunk_size=100))
    assert (RUNS, 100) in shapes, "the spy sees the host path's chunks"
    assert set(device.arrays) == set(host.arrays)
    for name, trace in host.arrays.items():
        assert isinstance(device.arrays[name], jax.Array), name
        np.testing.assert_array_equal(np.asarray(device.arrays[name]), trace, err_msg=name)


def test_no_trace_leaves_the_device():
    """Simulating and summarising read no array of two or more axes on the host (neither a
    trace nor a chunk of one)."""
    env, learner = ENVS["expert_advice"], LEARNER
    options = SimOptions(chunk_size=100, traces_on_device=True)
    simulate(learner, env, jax.random.key(0), RUNS, options=options)  # compiled beforehand
    with fetched_shapes() as shapes:
        res = simulate(learner, env, jax.random.key(0), RUNS, options=options)
        sa = summaries.adaptive_regret(env, res.carry, {"loss": res.loss}, WINDOWS)
        regret = summaries.cumulative_regret(env, res.carry, {"loss": res.loss})["loss"]
        small = (sa["loss"], regret.mean(axis=0), regret[:, -1])
    assert not [s for s in shapes if len(s) >= 2], shapes
    assert jax.device_get(small)[0].shape == (RUNS, len(WINDOWS))


def test_summaries_equal_the_float64_metrics(run):
    """Adaptive regret, cumulative regret and segment means within the float32 bounds."""
    env, res = run
    carry = jax.device_get(res.carry)
    traces = {"loss": res.loss, "expected_loss": res.expected_loss}
    device = summaries.adaptive_regret(env, res.carry, traces, WINDOWS, runs_per_batch=4)
    host_traces = {k: np.asarray(v) for k, v in traces.items()}
    host = metrics.paired_adaptive_regret(env, carry, host_traces, WINDOWS)
    for name in traces:
        assert device[name].dtype == jnp.float32
        np.testing.assert_allclose(device[name], host[name], rtol=0, atol=summaries.sa_bound(T))
    device = summaries.cumulative_regret(env, res.carry, {"loss": res.loss})["loss"]
    regret = metrics.paired_cumulative_regret(env, carry, {"loss": host_traces["loss"]})
    mean, _, final = regret["loss"]
    bound = summaries.prefix_bound(T)
    np.testing.assert_allclose(device[:, -1], final, rtol=0, atol=bound)
    np.testing.assert_allclose(device.mean(axis=0), mean, rtol=0, atol=bound)
    num = int(np.shape(carry.env_params.change_points)[-1]) + 1
    segments = metrics.segment_ids(carry, T)
    host = metrics.per_segment_mean(host_traces["loss"], segments, num, lambda x: 1.0 - x)
    device = summaries.segment_means(1.0 - res.loss, res.carry.env_params.change_points, num)
    np.testing.assert_allclose(device, host, rtol=0, atol=T * summaries.EPS32)
    with pytest.raises(ValueError, match=r"traces\['short'\] must be \(R, T\) with R=6"):
        summaries.adaptive_regret(env, res.carry, {"short": res.loss[:2]}, (4,))


def test_the_bounds_are_float32_rounding():
    """``(ceil(log2 T) + 1) eps T``: 9 roundings of at most eps * 256 at T = 256."""
    assert summaries.prefix_bound(256) == pytest.approx(9 * 256 * 2.0**-23)
    assert summaries.sa_bound(256) == 4 * summaries.prefix_bound(256)


def test_traces_on_device_refuses_what_it_cannot_do():
    for options, message in [
        (dict(traces_on_device=True, host_threads=2), "leave host_threads at None or 1"),
        (dict(traces_on_device=True, checkpoint=object()), "give one of the two"),
        (dict(traces_on_device=1), "traces_on_device"),
    ]:
        with pytest.raises((TypeError, ValueError), match=message):
            SimOptions(**options)
