"""Fixed-order sums: the value of a sum, and the same bits whatever the batch around it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import numerics


@pytest.mark.parametrize("n", [1, 2, 3, 5, 30, 301])
def test_fixed_order_sum_is_the_sum(n):
    x = np.random.default_rng(n).random((4, n)).astype(np.float32)
    got = np.asarray(numerics.fixed_order_sum(jnp.asarray(x)))
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-6)


def test_fixed_order_dot_is_batch_invariant():
    """Rows summed alone, in a batch of 8, and in a batch of 256 give identical bits."""
    rng = np.random.default_rng(0)
    a, b = (jnp.asarray(rng.random((256, 30)), jnp.float32) for _ in range(2))
    dot = jax.jit(jax.vmap(numerics.fixed_order_dot))
    whole = np.asarray(dot(a, b))
    eights = np.concatenate([np.asarray(dot(a[i : i + 8], b[i : i + 8])) for i in range(0, 256, 8)])
    ones = np.concatenate([np.asarray(dot(a[i : i + 1], b[i : i + 1])) for i in range(256)])
    np.testing.assert_array_equal(whole, eights)
    np.testing.assert_array_equal(whole, ones)
