"""FLH's and EFLH's schedules against the papers' set rules (their step-by-step references,
and SAOL's on EFLH's lengths, are rows of ``test_reference.py``)."""

from __future__ import annotations

import math

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


def test_lengths_follow_the_papers_rules():
    """EFLH's lengths and SAOL's on EFLH's (``eps = 1``) or every dyadic scale, against the
    reference's rules (the default ``eps = 0.25`` is checked step by step in
    ``test_reference.py``, where a learner runs on these lengths)."""
    assert list(EFLH(num_arms=N, horizon=T, epsilon=1.0).lengths) == ref.eflh_lengths(T, 1.0)
    eflh_saol = make("eflh_saol", num_arms=N, horizon=T, epsilon=1.0)
    assert list(eflh_saol.history_lengths) == ref.eflh_saol_lengths(T, 1.0)
    dyadic = make("saol", num_arms=N, horizon=T, scales="all")
    assert list(dyadic.history_lengths) == ref.dyadic_lengths(T)
