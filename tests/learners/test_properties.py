"""Property-based tests (hypothesis) of the learner contract: random registry learners (both
feedback modes), n in [2, 40], T in [16, 2^20], params anywhere in their ranges (scales up to
10^3, where StABL mutes) and losses anywhere in [0, 1], through ``jit(scan(learner.step))``:
the state stays finite (a muted expert's meta log-weight may be -inf, never NaN, +inf or all
-inf); every play distribution and StABL's P(t) is a distribution within
:func:`stabl_jax.checks.distribution_tolerance` plus ``eps M``, the rounding of the normaliser
``x - logsumexp(x)`` of rows with ``|max x| <= M`` (docs/reliability.md); and query honesty:
unqueried losses changed leave arms, distributions and final state unchanged, bitwise.
Examples are derandomized; each compiles one scan, which bounds ``max_examples``.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from stabl_jax import LEARNERS, make
from stabl_jax.checks import distribution_tolerance
from stabl_jax.learners import Hedge, SAOLHedge

SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large]
DERANDOMIZED = settings(deadline=None, derandomize=True, database=None)  # the same in every run
SETTINGS = settings(DERANDOMIZED, max_examples=30, suppress_health_check=SLOW)
# StABL's geometric intervals exist for T = 16 and T >= 32 (docs/reliability.md, row L4).
HORIZONS = st.one_of(st.just(16), st.integers(32, 2**20))
MAX_SCALE = 1024.0
MIN_SCALE = 2.0**-20  # exactly representable in float32 (hypothesis needs that)


def _state_ok(state: Any) -> jax.Array:
    """``()`` bool: every float leaf finite; meta log-weights may be -inf (weight 0), not
    NaN or +inf, and not all -inf."""
    ok = jnp.asarray(True)
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            continue
        if jax.tree_util.keystr(path).endswith("meta_log_weights"):
            ok &= ~jnp.any(jnp.isnan(leaf)) & ~jnp.any(leaf == jnp.inf)
            ok &= jnp.any(jnp.isfinite(leaf))
        else:
            ok &= jnp.all(jnp.isfinite(leaf))
    return ok


def _log_magnitude(state: Any) -> jax.Array:
    """``()`` the largest finite ``|x|`` of the state's log-domain leaves (``*log_*``)."""
    largest = jnp.asarray(0.0, jnp.float32)
    for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
        if "log_" in jax.tree_util.keystr(path) and jnp.issubdtype(leaf.dtype, jnp.floating):
            finite = jnp.where(jnp.isfinite(leaf), jnp.abs(leaf), 0.0)
            largest = jnp.maximum(largest, jnp.max(finite).astype(jnp.float32))
    return largest


@partial(jax.jit, static_argnums=0)
def play(learner: Any, params: Any, losses: jax.Array, key: jax.Array):
    """Scan ``learner.step`` over ``losses`` ``(rounds, n)``; per round the queried arms, the
    play and observation distributions, whether the new state is finite, and the largest
    finite log-domain ``|x|`` of the round's state and the state before it."""
    state = learner.init(jax.random.fold_in(key, 0), params)

    def body(carry: tuple, xs: tuple) -> tuple:
        state, before = carry
        loss, t = xs
        obs = learner.distributions(state)[2] if hasattr(learner, "distributions") else None
        new, info = learner.step(state, loss, jax.random.fold_in(key, t + 1))
        obs = info.play_probs if obs is None else obs
        now = _log_magnitude(state)
        magnitude = jnp.maximum(before, now)
        return (new, now), (info.arms, info.play_probs, obs, _state_ok(new), magnitude)

    rounds = jnp.arange(losses.shape[0], dtype=jnp.int32)
    per_round: tuple
    carry, per_round = jax.lax.scan(body, (state, _log_magnitude(state)), (losses, rounds))
    return carry[0], per_round


@st.composite
def cases(draw: st.DrawFn) -> tuple[Any, Any, np.ndarray, np.ndarray, int]:
    name = draw(st.sampled_from(sorted(LEARNERS)))
    n = draw(st.integers(2, 40))
    horizon = draw(HORIZONS)
    kwargs: dict[str, Any] = {}
    learner = make(name, num_arms=n, horizon=horizon)
    options = {f.name for f in dataclasses.fields(learner)}
    if "feedback" in options:  # only the learners that have both feedback modes
        kwargs["feedback"] = draw(st.sampled_from(["loss", "reward"]))
    if "round_offset" in options:
        kwargs["round_offset"] = draw(st.sampled_from([0, 1]))
    learner = make(name, num_arms=n, horizon=horizon, **kwargs)
    values = {}
    for field, interval in learner.param_bounds.items():
        low = max(interval.low, MIN_SCALE if interval.low_open else interval.low)
        high = min(interval.high, MAX_SCALE)
        values[field] = jnp.float32(draw(st.floats(low, high, width=32)))
    params = learner.default_params.replace(**values) if values else learner.default_params
    rounds = draw(st.integers(1, 24))
    unit = st.floats(0.0, 1.0, width=32)
    losses = draw(hnp.arrays(np.float32, (rounds, n), elements=unit))
    others = draw(hnp.arrays(np.float32, (rounds, n), elements=unit))
    seed = draw(st.integers(0, 2**31 - 1))
    return learner, params, losses, others, seed


def _ones_on_two_arms(name: str, rounds: int, **scales: float) -> tuple:
    """``name`` at n = 2, T = 16, every loss 1, where the play distribution sums to 1 + 12 eps
    (> 4 n eps): SAOL at ``expert_lr_scale = 223`` steps an expert's row to ``max x = -32.8``;
    Hedge at ``lr_scale = 55`` moves both entries of the row by ``eta = 32.4`` to ``max x =
    -33.07`` while the state's rows stay at ``-0.69``."""
    learner = make(name, num_arms=2, horizon=16)
    params = learner.default_params.replace(**{k: jnp.float32(v) for k, v in scales.items()})
    return learner, params, np.ones((rounds, 2), np.float32), np.zeros((rounds, 2), np.float32), 0


def _full_information_rate(learner: Any, params: Any) -> float:
    """The largest rate by which an update moves every entry of a normalised row (times the
    loss): Hedge's ``eta``, SAOL-Hedge's largest expert rate; 0 for a learner whose update
    moves only the entries of the arms it queried."""
    if isinstance(learner, Hedge):
        return float(learner.learning_rate(params))
    if isinstance(learner, SAOLHedge):
        return float(jnp.max(learner.expert_learning_rates(params)))
    return 0.0


@pytest.mark.slow  # one compilation per example (CI runs it)
@SETTINGS
@given(cases())
@example(_ones_on_two_arms("saol", 4, expert_lr_scale=223.0, meta_lr_scale=1.0))
@example(_ones_on_two_arms("hedge", 3, lr_scale=55.0))
def test_contract_properties(case):
    learner, params, losses, others, seed = case
    key = jax.random.key(seed)
    final, (arms, play_probs, obs_probs, state_ok, magnitude) = play(learner, params, losses, key)
    arms, play_probs, obs_probs = np.asarray(arms), np.asarray(play_probs), np.asarray(obs_probs)

    assert np.asarray(state_ok).all(), f"non-finite state at round {np.argmin(state_ok)}"
    # Distributions within the check's tolerance plus ``eps M``: ``M`` the largest finite
    # ``|log v|`` of the state before and after the update that made the round's rows, plus
    # ``eta max l`` where that update moves every entry (full information).
    tol = distribution_tolerance(learner.num_arms, np.float32, learner.num_mixed)
    step = np.zeros(len(losses))
    step[1:] = _full_information_rate(learner, params) * losses[:-1].max(axis=1)
    magnitude = np.asarray(magnitude, np.float64) + step
    tol = tol + float(np.finfo(np.float32).eps) * magnitude
    for probs in (play_probs, obs_probs):
        assert np.isfinite(probs).all() and (probs >= 0.0).all()
        deviation = np.abs(probs.astype(np.float64).sum(axis=1) - 1.0)
        assert (deviation <= tol).all(), (deviation.max(), tol[np.argmax(deviation - tol)])
    assert ((arms >= 0) & (arms < learner.num_arms)).all()

    # Query honesty: unqueried losses replaced by anything in [0, 1] change nothing.
    queried = np.zeros(losses.shape, bool)
    np.put_along_axis(queried, arms, True, axis=1)
    changed = np.where(queried, losses, others)
    final_b, (arms_b, play_b, obs_b, _, _) = play(learner, params, changed, key)
    np.testing.assert_array_equal(np.asarray(arms_b), arms)
    np.testing.assert_array_equal(np.asarray(play_b), play_probs)
    np.testing.assert_array_equal(np.asarray(obs_b), obs_probs)
    for a, b in zip(jax.tree.leaves(final), jax.tree.leaves(final_b), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@SETTINGS
@given(
    st.integers(2, 40),
    HORIZONS,
    st.floats(MIN_SCALE, MAX_SCALE, width=32),
    st.floats(0.0, MAX_SCALE, width=32),
)
def test_stabl_weights_at_extreme_scales(n, horizon, meta_scale, expert_scale):
    """StABL's initial meta weights log(eta_k) are finite for every allowed scale, and the
    restart schedule covers every expert (each L_k divides into the horizon's blocks)."""
    learner = make("stabl", num_arms=n, horizon=horizon)
    params = learner.default_params.replace(
        meta_lr_scale=jnp.float32(meta_scale), expert_lr_scale=jnp.float32(expert_scale)
    )
    state = learner.init(jax.random.key(0), params)
    assert np.isfinite(np.asarray(state.meta_log_weights)).all()
    assert len(learner.history_lengths) == learner.num_experts >= 1
    assert learner.history_lengths[-1] <= horizon
    assert all(math.log2(length).is_integer() for length in learner.history_lengths)
