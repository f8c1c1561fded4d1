"""The environment reveals only the queried arms' losses when ``expected_loss`` is not
recorded (``simulate(..., traces=...)``): the same runs as drawing every arm's loss."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify
from numpy.testing import assert_array_equal

from stabl_jax import ExpertAdvice, PiecewiseBernoulli, metrics, simulate
from stabl_jax.envs.base import BanditEnv
from stabl_jax.simulate import reveals_queried_only
from tests.conftest import HORIZON, NUM_ARMS, small_learner

FIELDS = ("played", "arms", "loss", "prob_best")


@pytest.mark.parametrize("name", ["exp3", "stabl", "hedge"])
def test_revealing_only_queried_losses_gives_the_same_runs(name):
    """1, 2 and every arm queried: the revealed losses are the full draw's at the queried arms
    and a learner reads nothing else (query honesty), so the runs are the same bit for bit; so
    are they when StABL's lazy run is validated (what is revealed is checked)."""
    env = ExpertAdvice(num_arms=NUM_ARMS, horizon=HORIZON, random_change_points=True)
    assert reveals_queried_only(env, FIELDS)
    assert not reveals_queried_only(env, (*FIELDS, "expected_loss"))
    learner, checked = small_learner(name), name == "stabl"
    full = simulate(learner, env, jax.random.key(1), 6)
    lazy = simulate(learner, env, jax.random.key(1), 6, traces=FIELDS, validate=checked)
    assert lazy.expected_loss is None
    for field in FIELDS:
        assert_array_equal(getattr(lazy, field), getattr(full, field), err_msg=field)


@dataclasses.dataclass(frozen=True)
class _LossOnly(BanditEnv):  # a user's environment with a loss alone: BanditEnv's loss_at
    num_arms: int = 30

    def sample_params(self, key):
        return jax.random.uniform(key, (self.num_arms,))

    def loss(self, params, t, key):
        return params * jax.random.uniform(key, (self.num_arms,))


ENVS = [
    ExpertAdvice(num_arms=30, horizon=128, random_change_points=True),
    PiecewiseBernoulli(num_arms=30, horizon=128),
    _LossOnly(),
]


@pytest.mark.parametrize("env", ENVS, ids=["expert_advice", "bernoulli", "default"])
def test_loss_at_is_the_loss_vector_indexed(env):
    """The environments' own loss_at (a counter-based draw per arm) and BanditEnv's default."""
    arms = jnp.asarray([0, 7, 29, 7], jnp.int32)
    keys = jax.random.split(jax.random.key(3), 50)
    params = env.sample_params(jax.random.key(4))
    ts = jnp.arange(50, dtype=jnp.int32) * 2
    at = jax.jit(jax.vmap(lambda t, k: env.loss_at(params, t, k, arms)))(ts, keys)
    full = jax.jit(jax.vmap(lambda t, k: env.loss(params, t, k)))(ts, keys)
    assert_array_equal(np.asarray(at), np.asarray(full)[:, arms])


class _NaNAtRound5(ExpertAdvice):  # a broken environment: revealed losses NaN at round 5
    def loss_at(self, params, t, key, arms):
        return jnp.where(t == 5, jnp.nan, super().loss_at(params, t, key, arms))


def test_validation_checks_what_is_revealed():
    """With validate=True a NaN revealed loss is named with its round instead of flowing into
    the state."""
    learner, env = small_learner("stabl"), _NaNAtRound5(num_arms=NUM_ARMS, horizon=HORIZON)
    with pytest.raises(checkify.JaxRuntimeError, match=r"observed loss at round 5 must be finite"):
        simulate(learner, env, jax.random.key(0), 2, traces=FIELDS, validate=True)


class _Inverted(ExpertAdvice):  # a user's expert advice overriding loss alone
    def loss(self, params, t, key):
        return 1.0 - super().loss(params, t, key)


class _OutOfRange(ExpertAdvice):
    def loss(self, params, t, key):
        return super().loss(params, t, key) + 1.0


@pytest.mark.parametrize("traces", [FIELDS, None], ids=["queried only", "every arm"])
def test_a_subclass_overriding_loss_alone_is_simulated_with_its_loss(traces):
    """The inherited loss_at was written for ExpertAdvice's loss: the override is what the
    learner sees, on the lazy path too."""
    env = _Inverted(num_arms=5, horizon=64, random_change_points=True)
    plain = ExpertAdvice(num_arms=5, horizon=64, random_change_points=True)
    learner = small_learner("stabl")
    assert not reveals_queried_only(env, FIELDS) and reveals_queried_only(plain, FIELDS)
    res = simulate(learner, env, jax.random.key(0), 6, traces=traces)
    losses = np.asarray(metrics.regenerate_losses(env, res.carry, 0, 64))  # the override's
    assert_array_equal(res.loss, np.take_along_axis(losses, res.played[..., None], 2)[..., 0])
    base = simulate(learner, plain, jax.random.key(0), 6, traces=traces)
    assert not np.array_equal(res.loss, base.loss)
    with pytest.raises(checkify.JaxRuntimeError, match="loss at round 0 must be finite and in"):
        bad = _OutOfRange(num_arms=5, horizon=64)
        simulate(learner, bad, jax.random.key(0), 2, traces=traces, validate=True)
