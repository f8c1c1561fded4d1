"""``validate=True`` on the fused kernel: each chunk's outputs are checked (the observed
losses, and the play distribution at the chunk's end), with the bits of an unchecked run."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from stabl_jax import EXP3, ExpertAdvice, SimOptions, StABL, simulate
from stabl_jax.simulate import _checked_chunks, init_runs, run_keys

T = 64
OPTIONS = SimOptions(kernel="pallas", chunk_size=32)


@pytest.mark.parametrize("learner", [EXP3(num_arms=5, horizon=T), StABL(num_arms=5, horizon=T)])
def test_a_validated_kernel_run_is_the_unchecked_one(learner):
    env = ExpertAdvice(num_arms=5, horizon=T)
    plain = simulate(learner, env, jax.random.key(0), 4, options=OPTIONS)
    checked = simulate(learner, env, jax.random.key(0), 4, validate=True, options=OPTIONS)
    assert checked.kernel == "pallas"
    assert sorted(checked.arrays) == sorted(plain.arrays)  # observed is checked, not kept
    for name, trace in plain.arrays.items():
        np.testing.assert_array_equal(checked.arrays[name], trace, err_msg=name)


@dataclasses.dataclass(frozen=True)
class LossAboveOne(ExpertAdvice):
    """Every arm's loss is 2 more than ExpertAdvice's at round 40."""

    def loss(self, params, t, key):
        loss = super().loss(params, t, key)
        return jnp.where(t == 40, loss + 2.0, loss)


def test_a_loss_out_of_range_is_named_with_its_round():
    env, learner = LossAboveOne(num_arms=5, horizon=T), EXP3(num_arms=5, horizon=T)
    with pytest.raises(checkify.JaxRuntimeError, match=r"observed loss at round 40 must be"):
        simulate(learner, env, jax.random.key(0), 4, validate=True, options=OPTIONS)


def test_a_play_distribution_that_is_none_is_named_after_the_chunk():
    """A step whose state leaves the simplex (NaN weights) fails the check at ``t0 + L``."""
    learner = EXP3(num_arms=5, horizon=T)
    keys = run_keys(jax.random.key(0), 2)  # the runs' first carry: the check reads no history
    carry = init_runs(learner, ExpertAdvice(num_arms=5, horizon=T), keys, learner.default_params)

    def broken(carry, t0):
        state = dataclasses.replace(carry.state, log_weights=carry.state.log_weights * jnp.nan)
        observed = jnp.zeros((2, 16, 1), jnp.float32)
        return dataclasses.replace(carry, state=state), {"observed": observed}

    step = checkify.checkify(_checked_chunks(broken, learner, (), 16), errors=checkify.user_checks)
    error, _ = jax.jit(step)(carry, jnp.int32(16))
    with pytest.raises(checkify.JaxRuntimeError, match=r"play distribution at round 32 is not"):
        error.throw()
