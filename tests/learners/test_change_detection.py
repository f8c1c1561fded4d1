"""CUSUM-UCB, M-UCB, GLR-klUCB and Rexp3 against the float64 NumPy loops of
``reference_change_detection.py`` (written from the papers), step by step, and a
detection test on a Bernoulli change.

The learners run in float32; the randomised ones get the reference the same per-round uniforms
(recomputed from the learner's keys). Arms, sample counts and restarts must match exactly,
indices and play distributions to float32 precision.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import CUSUMUCB, MUCB, GLRklUCB, Rexp3, sampling
from tests.learners import reference_change_detection as ref

T, K = 300, 4
RTOL = 2e-5


def _losses(seed: int) -> np.ndarray:
    """A best arm that changes twice (by 0.6 in mean), uniform noise, in [0, 1]."""
    rng = np.random.default_rng(seed)
    losses = rng.uniform(0.5, 1.0, size=(T, K))
    for start, best in ((0, 1), (100, 3), (200, 0)):
        losses[start : start + 100, best] = rng.uniform(0.0, 0.3, size=100)
    return losses


def _uniforms(keys) -> np.ndarray:
    return np.asarray(jax.vmap(lambda k: sampling.uniforms(k, 1, "float32"))(keys), np.float64)


def _run(learner, params, losses, keys):
    """Per round: the index (UCB policies) or play distribution before the round, the played
    arm, and the counts after the round."""
    step = jax.jit(learner.step)
    state = learner.init(jax.random.key(0), params)
    index = jax.jit(learner.index) if hasattr(learner, "index") else None
    restarted = jax.jit(learner.restarted)
    rows = {"played": [], "stat": [], "counts": [], "restarted": []}
    for t in range(T):
        if index is not None:
            rows["stat"].append(np.asarray(index(state), np.float64))
        new_state, info = step(state, jnp.asarray(losses[t], jnp.float32), keys[t])
        rows["restarted"].append(bool(restarted(state, new_state)))
        state = new_state
        rows["played"].append(int(info.arms[0]))
        if index is None:
            rows["stat"].append(np.asarray(info.play_probs, np.float64))
        rows["counts"].append(np.asarray(getattr(state, "counts", np.zeros(K))))
    return {k: np.asarray(v) for k, v in rows.items()}


def _compare(got, expected, stat: str) -> None:
    for t in range(T):
        assert got["played"][t] == expected["played"][t], t
        np.testing.assert_allclose(got["stat"][t], expected[stat][t], rtol=RTOL, err_msg=str(t))
        if "counts" in expected:
            np.testing.assert_array_equal(got["counts"][t], expected["counts"][t + 1], str(t))
    assert expected["restarts"]  # the case exercises the restarts
    assert np.flatnonzero(got["restarted"]).tolist() == expected["restarts"]


@pytest.mark.parametrize(
    ("test_every", "values"),
    [
        (1, {"threshold": 3.0, "drift": 0.05, "alpha": 0.1, "warmup": 10.0}),
        (1, {}),
        (7, {"threshold": 3.0, "drift": 0.05, "alpha": 0.1, "warmup": 10.0}),
    ],
    ids=str,
)
def test_cusum_ucb_matches_reference(test_every, values):
    learner = CUSUMUCB(
        num_arms=K, horizon=T, warmup=10 if not values else 50, test_every=test_every
    )
    params = learner.default_params.replace(**{k: jnp.float32(v) for k, v in values.items()})
    if not values:
        params = params.replace(threshold=jnp.float32(3.0))
    losses, keys = _losses(1), jax.random.split(jax.random.key(2), T)
    expected = ref.cusum_ucb_reference(
        losses,
        _uniforms(keys),
        threshold=float(params.threshold),
        drift=float(params.drift),
        alpha=float(params.alpha),
        warmup=int(params.warmup),
        test_every=test_every,
    )
    _compare(_run(learner, params, losses, keys), expected, "index")


@pytest.mark.parametrize(
    ("options", "values"),
    [({"window": 20}, {"threshold": 4.0, "gamma": 0.15}), ({"window": 40}, {})],
    ids=str,
)
def test_m_ucb_matches_reference(options, values):
    learner = MUCB(num_arms=K, horizon=T, **options)
    params = learner.default_params.replace(**{k: jnp.float32(v) for k, v in values.items()})
    if not values:
        params = params.replace(threshold=jnp.float32(8.0))
    losses, keys = _losses(3), jax.random.split(jax.random.key(4), T)
    expected = ref.m_ucb_reference(
        losses,
        window=learner.window,
        threshold=float(params.threshold),
        gamma=float(params.gamma),
    )
    _compare(_run(learner, params, losses, keys), expected, "index")


THESIS_F = {"log_scale": 1.0, "loglog_scale": 3.0}
GLR_CASES = [
    # The experiments' f(x) = 3 log x and beta = log(3 n^1.5 / delta).
    ({"restart": "local"}, {"delta": 0.3, "alpha": 0.35}),
    # Besson's thesis reading: f(x) = log x + 3 log log x.
    ({"restart": "local"}, THESIS_F),
    ({"restart": "global"}, THESIS_F),
    # f(x) = log x, beta = log(n^1.5 / delta), alpha_k = alpha sqrt(1 + k): the restarts
    # differ from those of b = 3 and of a constant alpha.
    (
        {"restart": "global", "alpha_schedule": "sqrt_detections"},
        {"log_scale": 1.0, "threshold_scale": 1.0, "alpha": 0.3},
    ),
    # The exact test (every split, every sample) with every split kept.
    ({"restart": "local", "subsample": 1, "test_every": 1, "max_splits": T}, THESIS_F),
]


@pytest.mark.parametrize(("options", "values"), GLR_CASES, ids=str)
def test_glr_klucb_matches_reference(options, values):
    sizes = {"subsample": 5, "test_every": 5, "max_splits": 8}
    learner = GLRklUCB(num_arms=K, horizon=T, **{**sizes, **options})
    values = {"alpha": 0.07, "delta": 0.05, **values}
    params = learner.default_params.replace(**{k: jnp.float32(v) for k, v in values.items()})
    losses, keys = _losses(5), jax.random.split(jax.random.key(6), T)
    numbers = ("delta", "alpha", "log_scale", "loglog_scale", "threshold_scale")
    expected = ref.glr_klucb_reference(
        losses,
        **{name: float(getattr(params, name)) for name in numbers},
        subsample=learner.subsample,
        test_every=learner.test_every,
        max_splits=learner.max_splits,
        restart=learner.restart,
        alpha_schedule=learner.alpha_schedule,
    )
    _compare(_run(learner, params, losses, keys), expected, "index")


def test_glr_klucb_exact_test_keeps_every_split_or_refuses():
    """``subsample=1`` keeps ``T`` splits by default and refuses fewer, naming the remedy."""
    assert GLRklUCB(num_arms=K, horizon=T, subsample=1).max_splits == T
    assert GLRklUCB(num_arms=K, horizon=5000).max_splits == 500
    with pytest.raises(
        ValueError, match=f"max_splits=1024 is below the horizon T={2 * 1024}.*set max_splits=2048"
    ):
        GLRklUCB(num_arms=K, horizon=2048, subsample=1, max_splits=1024)


@pytest.mark.parametrize("count", ["segments", "breakpoints"])
def test_m_ucb_default_gamma_counts_segments_or_breakpoints(count):
    """Remark 1's ``gamma`` with ``M = Upsilon_T + 1`` (Cao et al.) or ``max(1, Upsilon_T)``
    (Besson et al.'s code), against the reference's formula. On Besson et al.'s Problem 1
    (K = 3, T = 5000, Upsilon_T = 4) with their experiments' window ``w = K ceil(T / 100)``
    the forced period ``floor(K / gamma)`` is 7 or 8 rounds."""
    learner = MUCB(num_arms=3, horizon=5000, num_changes=4, window=150, gamma_count=count)
    gamma = ref.m_ucb_gamma(3, 5000, 4, 150, count)
    assert learner.gamma == pytest.approx(gamma, rel=1e-12)
    assert int(3 // learner.gamma) == (7 if count == "segments" else 8)


@pytest.mark.parametrize("values", [{"gamma": 0.2, "batch": 37.0}, {}], ids=str)
def test_rexp3_matches_reference(values):
    learner = Rexp3(num_arms=K, horizon=T)
    params = learner.default_params.replace(**{k: jnp.float32(v) for k, v in values.items()})
    losses, keys = _losses(7), jax.random.split(jax.random.key(8), T)
    expected = ref.rexp3_reference(
        losses, _uniforms(keys), gamma=float(params.gamma), batch=int(params.batch)
    )
    _compare(_run(learner, params, losses, keys), expected, "play_probs")


DETECTORS = [
    (CUSUMUCB, {}),
    (MUCB, {"window": 100}),  # Remark 1's window for delta = 0.1 exceeds the horizon
    (GLRklUCB, {}),
]


@pytest.mark.parametrize(("cls", "options"), DETECTORS, ids=lambda x: getattr(x, "__name__", x))
def test_a_bernoulli_change_is_detected_within_50_rounds(cls, options):
    """Arm 0's loss mean moves from 0.1 to 0.9 at round 1000 of 2000 (arm 1 stays at 0.5):
    with its defaults for one change, each detector restarts for the first time within 50
    rounds after it, and never before it (fixed draws)."""
    horizon, change = 2000, 1000
    rng = np.random.default_rng(0)
    means = np.where(np.arange(horizon)[:, None] < change, [0.1, 0.5], [0.9, 0.5])
    losses = jnp.asarray((rng.uniform(size=(horizon, 2)) < means).astype(np.float32))
    keys = jax.random.split(jax.random.key(0), horizon)
    learner = cls(num_arms=2, horizon=horizon, num_changes=1, **options)

    def body(state, xs):
        new_state, _ = learner.step(state, *xs)
        return new_state, jnp.any(new_state.counts < state.counts)

    run = jax.jit(lambda state: jax.lax.scan(body, state, (losses, keys))[1])
    restarts = np.flatnonzero(np.asarray(run(learner.init(jax.random.key(1)))))
    assert restarts.size and change <= restarts[0] < change + 50, restarts[:5]


def test_simulate_records_the_restart_trace_of_restarting_learners_only():
    """``traces=("restart",)`` gives ``(R, T)`` bool equal to ``learner.restarted`` round by
    round (here Rexp3's scheduled restarts, every ``Delta_T`` rounds); a learner without
    restarts refuses the name."""
    from stabl_jax import EXP3, simulate
    from stabl_jax.envs.piecewise_table import PiecewiseBernoulliTable

    env = PiecewiseBernoulliTable(
        num_arms=2, horizon=64, change_points=(32,), means=((0.1, 0.5), (0.9, 0.5))
    )
    learner = Rexp3(num_arms=2, horizon=64, batch=10)
    result = simulate(learner, env, jax.random.key(0), 2, traces=("restart",))
    assert result.restart.dtype == bool and result.restart.shape == (2, 64)
    np.testing.assert_array_equal(np.flatnonzero(result.restart[0]), [9, 19, 29, 39, 49, 59])
    with pytest.raises(ValueError, match="restart"):
        simulate(EXP3(num_arms=2, horizon=64), env, jax.random.key(0), 2, traces=("restart",))
