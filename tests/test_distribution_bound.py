"""The runs that set the play-distribution check's bound (``checks.distribution_tolerance``).

``expert_advice_random_tuned``'s ``stabl_naive`` (scales 1024, 64; 500 runs, seed 0) once
aborted its validated run at round 740, its play distribution summing to 1 + 62 eps against
the then bound of ``2 n eps`` (60 eps at n = 30). Replaying the 500 runs without validation
and taking ``|sum p_t - 1|`` every round (the replay's played arms equal the stored 500-run
traces bit for bit) gives five runs above 60 eps and none above 63: run 246 is the one that
crosses first, at round 740 (62 eps); run 497 reaches the largest deviation, 63 eps at round
1513. Each is replayed alone here (``simulate(first_run=...)`` derives its keys as in the
500-run simulation) with the check in the program: it passes at ``4 n eps`` and, at the old
``2 n eps``, fails at that round with a sum within ``4 n eps``.

A mixture of more experts than arms errs by more than ``4 n eps``: StABL over a rate grid at
n = 2 (B = 6 experts, T = 16) summed to 1 + 12 eps at round 7 and was refused until the bound
became ``4 max(n, B) eps``.
"""

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
    scales = {"expert_lr_scale": 1024.0, "meta_lr_scale": 64.0}
    params = learner.default_params.replace(
        **{k: jnp.asarray(v, jnp.float32) for k, v in scales.items()}
    )
    env, options = config.make_env(), SimOptions(first_run=run, chunk_size=rounds)
    key = jax.random.key(config.seed)
    return simulate(
        learner, env, key, 1, horizon=rounds, params=params, validate=True, options=options
    )


@pytest.mark.parametrize(
    ("run", "round_", "ulps"),
    [(246, 740, 62), pytest.param(497, 1513, 63, marks=pytest.mark.slow)],
)
def test_deviation_exceeds_the_old_bound_and_stays_within_the_new(monkeypatch, run, round_, ulps):
    num_arms = 30
    assert checks.distribution_tolerance(num_arms, jnp.float32) == 4 * num_arms * EPS
    result = _replay(run, round_ + 20)  # the check at 4 n eps passes every round
    assert np.isfinite(result.loss).all()

    failure = _refused_under(
        monkeypatch, lambda n, dtype, b=1: 2.0 * n * EPS, _replay, run, round_ + 20, True
    )
    assert failure[0] == round_
    assert 2 * num_arms < failure[1] <= 4 * num_arms
    assert round(failure[1]) == ulps


def _refused_under(monkeypatch, bound, simulate_fn, *args) -> tuple[int, float]:
    """``simulate_fn(*args)`` with :func:`checks.distribution_tolerance` replaced by ``bound``:
    the round it is refused at and the sum's deviation from 1 in eps. The bound is read when
    a program is traced, so ``simulate_fn`` runs a learner of its own (``recompiled``): its
    programs hold the patched bound, and no other program is compiled with it or dropped."""
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
    """The message names the normaliser's rounding, both remedies (a lower scale; from Python,
    ``validate=False``: the command line always validates) and a section of
    docs/reliability.md that exists."""
    probs = jnp.asarray([0.5, 0.5 + 1e-4], jnp.float32)
    # Under jit, as every caller runs the checks (JAX before 0.9.2 formats an eager check's
    # round as "TypedNdArray(3, dtype=int32)")
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
