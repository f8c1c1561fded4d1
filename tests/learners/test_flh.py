"""FLH's and EFLH's schedules against the papers' set rules (their step-by-step references,
and SAOL's on EFLH's lengths and every dyadic scale, are rows of ``test_reference.py``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import EFLH, make
from stabl_jax.learners.eflh import eflh_capacity
from stabl_jax.learners.flh import flh_capacity
from tests.learners import reference_flh as ref

T, N = 80, 4


@pytest.mark.parametrize("horizon", [1, 2, 3, 7, 64, 100, 1000])
def test_capacity_is_the_largest_working_set(horizon):
    """``num_queries`` is the largest ``|S_tau|``, ``tau <= T + 1``, of the papers' rules:
    O(log T) for FLH, O(log log T / eps) for EFLH."""
    sets, sizes = {1}, [1]
    for tau in range(2, horizon + 2):
        sets = ref.flh_working_set(sets, tau)
        sizes.append(len(sets))
    assert flh_capacity(horizon) == max(sizes) <= 3 * math.log2(horizon + 1) + 2
    for epsilon in (1.0, 0.5, 0.25):
        lookback = ref.eflh_working_set(ref.eflh_lengths(horizon, epsilon))
        most = max(len(lookback(set(), tau)) for tau in range(1, horizon + 2))
        assert eflh_capacity(horizon, epsilon) == most
        assert most <= math.log(math.log2(horizon + 2) + 1, 1 + epsilon) + 2


def test_flh_keeps_an_expert_in_every_first_half():
    """The pruning lemma: for every ``s <= tau``, ``S_tau`` holds an expert started in
    ``[s, (s + tau) / 2]``."""
    sets = {1}
    for tau in range(2, 300):
        sets = ref.flh_working_set(sets, tau)
        for s in range(1, tau + 1):
            assert any(s <= i <= (s + tau) / 2 for i in sets), (tau, s)


def test_eflh_rejects_a_nonpositive_epsilon():
    with pytest.raises(ValueError, match="epsilon"):
        EFLH(num_arms=N, horizon=T, epsilon=0.0)


@pytest.mark.parametrize(("horizon", "eflh", "eflh_saol"), [(4096, 9, 10), (65536, 11, 12)])
def test_default_epsilon_query_counts(horizon, eflh, eflh_saol):
    """At the default ``eps = 0.25`` (inside ``(0, 1/2)``): ``eflh`` queries the largest
    ``|S_tau|`` of the lookback rule, ``eflh_saol`` ``1 +`` its number of lengths."""
    learner = make("eflh", num_arms=N, horizon=horizon)
    assert learner.epsilon == 0.25
    lookback = ref.eflh_working_set(ref.eflh_lengths(horizon, 0.25))
    most = max(len(lookback(set(), tau)) for tau in range(1, horizon + 2))
    assert learner.num_queries == most == eflh
    adaptive = make("eflh_saol", num_arms=N, horizon=horizon)
    assert list(adaptive.history_lengths) == ref.eflh_saol_lengths(horizon, 0.25)
    assert adaptive.num_queries == 1 + len(adaptive.history_lengths) == eflh_saol


def _saol_trajectory(learner, losses):
    """``(arms (T, 1 + B), w (T + 1, B), v (T, B, n))`` of a ``lax.scan`` of ``learner.step``."""
    keys = jax.random.split(jax.random.key(1), T)

    def body(state, xs):
        before = (jnp.exp(state.meta_log_weights), jnp.exp(state.expert_log_probs))
        state, info = learner.step(state, *xs)
        return state, (before, info.arms)

    state = learner.init(jax.random.key(0), learner.default_params.replace(meta_lr_scale=4.0))
    final, ((w, v), arms) = jax.jit(lambda s: jax.lax.scan(body, s, (losses, keys)))(state)
    w = np.concatenate([np.asarray(w), np.exp(np.asarray(final.meta_log_weights))[None]])
    return np.asarray(arms), w, np.asarray(v)
