"""The runs that set the play-distribution check's bound (``checks.distribution_tolerance``).

``expert_advice_random_tuned``'s ``stabl_naive`` (scales 1024, 64; 500 runs, seed 0) aborted its
validated run at round 740, summing to 1 + 62 eps against the old ``2 n eps`` (60 eps at n = 30);
of the 500 runs, run 246 crosses first (round 740, 62 eps) and run 497 deviates most (round 1513,
63 eps). Each is replayed alone (``first_run``): it passes at ``4 n eps`` and fails at that round
under ``2 n eps``. StABL over a rate grid (n = 2, B = 6, T = 16) summed to 1 + 12 eps at round 7,
hence ``4 max(n, B) eps``."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from stabl_jax import ExpertAdvice, SimOptions, checks, make, simulate
from stabl_jax.experiment.kinds import load_config
from tests.conftest import recompiled

EPS = float(jnp.finfo(jnp.float32).eps)


def _replay(run: int, rounds: int, fresh: bool = False):
    config = load_config("expert_advice_random_tuned")
    learner = config.make_learner("stabl_naive")
    learner = recompiled(learner) if fresh else learner
    # the scales of that run, whatever the config holds later
    params = learner.default_params.replace(
        expert_lr_scale=np.float32(1024), meta_lr_scale=np.float32(64)
    )
    env, options = config.make_env(), SimOptions(first_run=run, chunk_size=rounds)
    kwargs = dict(horizon=rounds, params=params, validate=True, options=options)
    return simulate(learner, env, jax.random.key(config.seed), 1, **kwargs)


@pytest.mark.parametrize(
    ("run", "round_", "ulps"),
    [(246, 740, 62), pytest.param(497, 1513, 63, marks=pytest.mark.slow)],
)
def test_deviation_exceeds_the_old_bound_and_stays_within_the_new(monkeypatch, run, round_, ulps):
    num_arms = 30
    assert checks.distribution_tolerance(num_arms, jnp.float32) == 4 * num_arms * EPS
    assert np.isfinite(_replay(run, round_ + 20).loss).all()  # the check at 4 n eps passes
    old = lambda n, dtype, b=1: 2.0 * n * EPS  # noqa: E731
    failure = _refused_under(monkeypatch, old, _replay, run, round_ + 20, True)
    assert failure[0] == round_
    assert 2 * num_arms < failure[1] <= 4 * num_arms
    assert round(failure[1]) == ulps


def _refused_under(monkeypatch, bound, simulate_fn, *args) -> tuple[int, float]:
    """The round ``simulate_fn(*args)`` is refused at under ``bound``, and the sum's deviation
    from 1 in eps (``simulate_fn`` runs a ``recompiled`` learner: only its programs hold it)."""
    monkeypatch.setattr(checks, "distribution_tolerance", bound)
    try:
        with pytest.raises(checkify.JaxRuntimeError) as failure:
            simulate_fn(*args)
    finally:
        monkeypatch.undo()
    found = re.search(r"at round (\d+) is not a distribution: sum (\S+) ", str(failure.value))
    assert found is not None, str(failure.value)
    return int(found.group(1)), abs(float(found.group(2)) - 1.0) / EPS


def _rate_grid_run(fresh: bool = False):
    learner = make("stabl_rate_grid", num_arms=2, horizon=16)
    learner = recompiled(learner) if fresh else learner
    env, options = ExpertAdvice(num_arms=2, horizon=16), SimOptions(chunk_size=5)
    return simulate(learner, env, jax.random.key(0), 3, validate=True, options=options)


def test_a_mixture_of_more_experts_than_arms_is_bounded_by_its_experts(monkeypatch):
    """StABL over a rate grid at n = 2 mixes B = 6 rows: within ``4 B eps``, not ``4 n eps``."""
    learner = make("stabl_rate_grid", num_arms=2, horizon=16)
    assert learner.num_mixed == learner.num_experts == 6
    assert checks.distribution_tolerance(2, jnp.float32, 6) == 4 * 6 * EPS
    assert np.isfinite(_rate_grid_run().loss).all()
    old = lambda n, dtype, b=1: 4.0 * n * EPS  # noqa: E731 (the bound before B counted)
    round_, deviation = _refused_under(monkeypatch, old, _rate_grid_run, True)
    assert round_ == 7
    assert 4 * 2 < deviation <= 4 * 6


def test_a_refusal_names_its_likely_cause_and_a_remedy_the_reader_has():
    """The message names the normaliser's rounding, both remedies and a section of
    docs/reliability.md that exists."""
    probs = jnp.asarray([0.5, 0.5 + 1e-4], jnp.float32)
    # Under jit, as every caller runs the checks (JAX < 0.9.2 formats an eager round otherwise)
    check = jax.jit(lambda p: checks.traced_check_distribution("play", p, 3))
    err, _ = checkify.checkify(check)(probs)
    with pytest.raises(checkify.JaxRuntimeError) as failure:
        err.throw()
    message = str(failure.value)
    assert "play at round 3 is not a distribution" in message
    for part in ("log-domain normaliser", "lower the scale", "validate=False", "always validates"):
        assert part in message, part
    section = re.search(r"docs/reliability.md, '([^']+)'", message)
    assert section is not None, message
    reliability = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text()
    assert section.group(1) in reliability
