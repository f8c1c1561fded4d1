"""FLH and EFLH against the float64 NumPy loops of ``reference_flh.py`` (written from the
papers), step by step on shared draws, and their schedules against the papers' set rules; SAOL
on EFLH's lengths (``eflh_saol``) and on every dyadic scale against the SAOL loop of
``reference_stabl_family.py`` on the lengths of ``reference_flh.py``.

Float64 on both sides, the same per-round uniforms: the played arm, the played expert and every
alive expert's arm must match exactly; the slots' start rounds exactly; the meta weights and the
experts' distributions to 1e-9 relative (each is a product of at most T factors computed in
float64, so the two differ by about T * 1e-16).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import EFLH, FLH, make, sampling
from stabl_jax.learners.eflh import eflh_capacity
from stabl_jax.learners.flh import flh_capacity
from tests.learners import reference_flh as ref
from tests.learners import reference_stabl_family as ref_family

T, N = 80, 4
RTOL = 1e-9


def _losses(seed: int) -> np.ndarray:
    """Uniform losses with a best arm that changes at rounds 30 and 55."""
    rng = np.random.default_rng(seed)
    losses = rng.uniform(0.3, 1.0, size=(T, N))
    for start, stop, best in ((0, 30, 1), (30, 55, 3), (55, T, 0)):
        losses[start:stop, best] = rng.uniform(0.0, 0.3, size=stop - start)
    return losses


def _flh_rate(i: int) -> float:
    return math.sqrt(math.log(N) / (T * N))


def _eflh_rate(lengths: list[int]):
    def rate(i: int) -> float:
        span = max(length for length in lengths if (i - 1) % length == 0)
        return math.sqrt(math.log(N) / (min(span, T) * N))

    return rate


def _run(learner, params, losses, expected) -> None:
    """Ask/tell round by round, checking the state before every round and the query."""
    ask, tell = jax.jit(learner.ask), jax.jit(learner.tell)
    state = learner.init(jax.random.key(0), params)
    keys = jax.random.split(jax.random.key(1), T)
    for t in range(T + 1):
        alive = expected["start"][t] > 0
        np.testing.assert_array_equal(np.asarray(state.start), expected["start"][t], err_msg=t)
        meta = np.exp(np.asarray(state.meta_log_weights))
        np.testing.assert_allclose(meta, expected["meta"][t], rtol=RTOL, err_msg=str(t))
        experts = np.exp(np.asarray(state.expert_log_probs))[alive]
        np.testing.assert_allclose(experts, expected["experts"][t][alive], rtol=RTOL)
        if t == T:
            break
        query = ask(state, keys[t])
        j = int(query.expert)
        assert j == expected["expert"][t] and int(query.arms[0]) == expected["played"][t], t
        by_slot = np.roll(np.asarray(query.arms), j)  # arms[i] is slot (j + i) % M's
        np.testing.assert_array_equal(by_slot[alive], expected["arms"][t][alive], err_msg=t)
        state = tell(state, query, losses[t][np.asarray(query.arms)])


def _uniforms(learner, count: int | None = None) -> np.ndarray:
    """Each round's uniforms: ``1 + M`` (FLH's ask), or ``count``."""
    count = 1 + learner.num_queries if count is None else count
    keys = jax.random.split(jax.random.key(1), T)
    draws = jax.vmap(lambda k: sampling.uniforms(k, count, "float64"))
    return np.asarray(draws(keys))


@pytest.mark.parametrize("values", [{}, {"meta_lr_scale": 4.0, "expert_lr_scale": 3.0}], ids=str)
def test_flh_matches_reference(values):
    losses = _losses(0)
    with jax.enable_x64(True):
        learner = FLH(num_arms=N, horizon=T, dtype="float64")
        params = learner.default_params.replace(**{k: np.float64(v) for k, v in values.items()})
        alpha = float(learner.meta_learning_rate(params))
        meta_scale = values.get("meta_lr_scale", 1.0)
        assert alpha == pytest.approx(meta_scale * math.sqrt(8 * math.log(T) / T), rel=1e-15)
        scale = values.get("expert_lr_scale", 1.0)
        expected = ref.flh_reference(
            losses,
            _uniforms(learner),
            capacity=learner.num_queries,
            alpha=alpha,
            rate=lambda i: scale * _flh_rate(i),
        )
        _run(learner, params, losses, expected)
    assert len(set(expected["played"].tolist())) > 1
    assert (expected["start"] > 0).sum(axis=1).max() == learner.num_queries  # every slot used


@pytest.mark.parametrize("epsilon", [0.25, 1.0])
def test_eflh_matches_reference(epsilon):
    losses = _losses(1)
    with jax.enable_x64(True):
        options = {} if epsilon == 0.25 else {"epsilon": epsilon}  # 0.25: the default
        learner = EFLH(num_arms=N, horizon=T, dtype="float64", **options)
        lengths = ref.eflh_lengths(T, epsilon)
        assert list(learner.lengths) == lengths
        params = learner.default_params
        expected = ref.flh_reference(
            losses,
            _uniforms(learner),
            capacity=learner.num_queries,
            alpha=float(learner.meta_learning_rate(params)),
            rate=_eflh_rate(lengths),
            working_set=ref.eflh_working_set(lengths),
        )
        _run(learner, params, losses, expected)
    assert (expected["start"] > 0).sum(axis=1).max() == learner.num_queries


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


@pytest.mark.parametrize(
    ("name", "options", "lengths"),
    [
        ("eflh_saol", {}, lambda: ref.eflh_saol_lengths(T, 0.25)),
        ("eflh_saol", {"epsilon": 1.0}, lambda: ref.eflh_saol_lengths(T, 1.0)),
        ("saol", {"scales": "all"}, lambda: ref.dyadic_lengths(T)),
    ],
    ids=["eflh_saol", "eflh_saol-eps1", "saol-all"],
)
def test_saol_meta_on_new_lengths_matches_reference(name, options, lengths):
    """SAOL's restarted multiplicative weights (meta scale 4: some factors ``1 + eta r`` hit
    0 at the short lengths, so muting is exercised) on EFLH's and on every dyadic length."""
    losses = _losses(2)
    with jax.enable_x64(True):
        learner = make(name, num_arms=N, horizon=T, dtype="float64", **options)
        assert list(learner.history_lengths) == lengths()
        u = _uniforms(learner, learner.num_queries)  # SAOL's ask draws 1 + B
        expected = ref_family.saol_reference(losses, u, lengths(), meta_lr_scale=4.0)
        arms, w, v = _saol_trajectory(learner, losses)
    np.testing.assert_array_equal(arms, expected["arms"])
    np.testing.assert_allclose(w, expected["meta_weights"], rtol=RTOL, atol=1e-300)
    np.testing.assert_allclose(v, expected["expert_probs"], rtol=RTOL)
    assert expected["muted"] > 0
