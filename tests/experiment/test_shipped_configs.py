"""Every shipped config's learners run cleanly at their configured scales and at the edges of
the tuning grid (:data:`GRIDS`, the grids of the ``stabl-jax sweep`` commands in docs/usage.md),
with validation on.

A few hundred rounds at the config's own horizon (the step sizes depend on it) are enough to
reach the regime where a large tuned learning rate drives an arm's probability to the
float32 underflow and back: a learner whose update is not safe at every scale in
``param_bounds`` aborts here ("play distribution at round ... is not a distribution") or
returns a non-finite number. The algorithm-selection configs' learners are run in
tests/envs/test_hpo.py, beside the programs they share.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import ExpertAdvice, SimOptions, make, simulate
from stabl_jax.experiment.configs import shipped_configs
from stabl_jax.experiment.kinds import load_config
from stabl_jax.simulate import init_runs, regenerate_losses, run_keys

#: The tuning grids' ends, per ``Params`` field: ``expert_lr_scale`` and ``lr_scale``
#: ``2**0..2**10``, ``meta_lr_scale`` ``2**0..2**7``, ``gamma`` ``0,...,0.3`` (docs/usage.md).
GRIDS: dict[str, tuple[float, float]] = {
    "expert_lr_scale": (1.0, 2.0**10),
    "meta_lr_scale": (1.0, 2.0**7),
    "lr_scale": (1.0, 2.0**10),
    "gamma": (0.0, 0.3),
}

ROUNDS = 256
RUNS_PER_POINT = 2
#: Points per group, the last repeated up to it: every group runs ``POINTS * RUNS_PER_POINT``
#: runs, so the programs that depend on the run count alone (run keys, environment draws)
#: are compiled once for the file, not once per group.
POINTS = 8


@functools.cache
def _config(name: str):
    """Shipped config ``name`` at one run (loading validates it, which traces its environment:
    once per name and process)."""
    return load_config(name, ["runs=1"])


def _configs_of_kind(kind: str) -> list[str]:
    return sorted(
        name for name in shipped_configs() if getattr(_config(name), "kind", "hpo") == kind
    )


def grid_edges(default) -> list[dict[str, float]]:
    """Every corner of the tuning grid over ``default``'s sweepable fields."""
    fields = [f for f in default.__dataclass_fields__ if f in GRIDS]
    corners = itertools.product(*[GRIDS[f] for f in fields])
    return [dict(zip(fields, corner, strict=True)) for corner in corners]


def stacked_params(learner, points: list[dict[str, float]]):
    """``points`` (each repeated :data:`RUNS_PER_POINT` times, the last repeated up to
    :data:`POINTS` points) as the params of ``POINTS * RUNS_PER_POINT`` runs."""
    default = learner.default_params
    if not points or not points[0]:
        return default
    assert len(points) <= POINTS, points
    points = points + points[-1:] * (POINTS - len(points))
    columns = {
        f: jnp.repeat(jnp.asarray([p[f] for p in points], learner.float_dtype), RUNS_PER_POINT)
        for f in points[0]
    }
    return default.replace(**columns)


def test_the_grid_edges_cover_every_corner():
    """The helper enumerates 2^F corners with the grid's extreme values."""
    default = make("stabl", num_arms=5, horizon=64).default_params
    corners = grid_edges(default)
    assert len(corners) == 4
    assert {c["expert_lr_scale"] for c in corners} == {1.0, 1024.0}
    assert {c["meta_lr_scale"] for c in corners} == {1.0, 128.0}


def _env_within_rounds(env) -> tuple:
    """What the first :data:`ROUNDS` rounds of ``env`` depend on: its static fields, with the
    change points at or past :data:`ROUNDS` left out (they are never reached). Where the
    change points are fixed, ``num_segments`` is their count plus one and goes with them:
    the segments reached, and their best arms (``PiecewiseEnv._segment_params``: segment
    ``j``'s is arm ``j mod n``, or drawn by a step independent of the count), are the same."""
    fields = {f.name: getattr(env, f.name) for f in dataclasses.fields(env)}
    points = fields.pop("change_points", None)
    reached = None if points is None else tuple(c for c in points if c < ROUNDS)
    if points is not None and not fields.get("random_change_points", True):
        fields.pop("num_segments")
    return type(env), tuple(sorted((k, repr(v)) for k, v in fields.items())), reached


def _has_params(config, name: str) -> bool:
    """Whether learner ``name`` of ``config`` has a number to tune (``uniform`` has none: it
    plays the same distribution at every scale, so only its environment could fail, and every
    config runs that environment with a learner that has)."""
    return bool(dataclasses.fields(config.make_learner(name).default_params))


def _bandit_groups() -> dict[str, list[tuple[str, str]]]:
    """Every ``(config, learner name)`` of the shipped bandit configs whose learner has a
    number to tune, grouped by what a :data:`ROUNDS`-round simulation compiles: the same
    learner (static fields) on the same environment within those rounds. Each group is one
    compiled program whose runs hold every member's tuned point and grid corners."""
    groups: dict[tuple, list[tuple[str, str]]] = {}
    for config_name in _configs_of_kind("bandit"):
        config = _config(config_name)
        env_key = _env_within_rounds(config.make_env())
        for name in filter(functools.partial(_has_params, config), config.learners):
            groups.setdefault((repr(config.make_learner(name)), env_key), []).append(
                (config_name, name)
            )
    return {f"{members[0][0]}-{members[0][1]}": members for members in groups.values()}


BANDIT_GROUPS = _bandit_groups()


def test_the_groups_hold_every_config_learner_once():
    """Grouping drops no (config, learner) pair with a number to tune, leaves every config's
    environment to at least one of them, and never merges two programs."""
    pairs = [pair for members in BANDIT_GROUPS.values() for pair in members]
    configs = {c: _config(c) for c in _configs_of_kind("bandit")}
    expected = [(c, n) for c, config in configs.items() for n in config.learners]
    untuned = [(c, n) for c, n in expected if not _has_params(configs[c], n)]
    assert {n for _, n in untuned} == {"uniform"}
    assert sorted(pairs) == sorted(set(expected) - set(untuned))
    assert {c for c, _ in pairs} == set(configs)
    for members in BANDIT_GROUPS.values():
        learners = {repr(_config(c).make_learner(n)) for c, n in members}
        assert len(learners) == 1, members


def _losses_within_rounds(env, seed: int) -> np.ndarray:
    """``(2, ROUNDS, n)`` every arm's loss in the first :data:`ROUNDS` rounds of two runs of
    ``env`` from ``seed``: what a learner of a group sees there."""
    learner = make("uniform", num_arms=env.num_arms, horizon=env.horizon)
    # simulate's carry before its first round: the losses depend on nothing a round changes.
    carry = init_runs(learner, env, run_keys(jax.random.key(seed), 2), learner.default_params)
    return np.asarray(regenerate_losses(env, carry, 0, ROUNDS))


def test_a_group_s_environments_give_the_same_losses_within_the_rounds():
    """Where a group's members run different environments, each gives its first member's
    losses over :data:`ROUNDS` rounds (the group runs that member's), and an environment
    whose change point falls inside them does not."""
    for members in BANDIT_GROUPS.values():
        configs = [_config(config_name) for config_name, _ in members]
        envs = {repr(env): env for env in (config.make_env() for config in configs)}
        if len(envs) > 1:
            first, *others = envs.values()
            want = _losses_within_rounds(first, configs[0].seed)
            for env in others:
                np.testing.assert_array_equal(
                    _losses_within_rounds(env, configs[0].seed), want, err_msg=repr(env)
                )
    env = ExpertAdvice(num_arms=5, horizon=1024)  # change points 256, 512, 768
    early = ExpertAdvice(num_arms=5, horizon=1024, num_segments=8)  # 128, 256, ...
    assert _env_within_rounds(env) != _env_within_rounds(early)
    assert not np.array_equal(_losses_within_rounds(env, 0), _losses_within_rounds(early, 0))


@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(BANDIT_GROUPS))
def test_bandit_config_learners_stay_valid_at_tuned_scales_and_grid_edges(group: str) -> None:
    members = BANDIT_GROUPS[group]
    points: list[dict[str, float]] = []
    for config_name, name in members:
        config = _config(config_name)
        learner = config.make_learner(name)
        corners = grid_edges(learner.default_params)
        if corners:
            tuned = config.learner_params(learner, name)
            tuned_point = {f: float(getattr(tuned, f)) for f in corners[0]}
            points += [p for p in (tuned_point, *corners) if p not in points]
    config_name, name = members[0]
    config = _config(config_name)
    learner = config.make_learner(name)
    res = simulate(
        learner,
        config.make_env(),
        jax.random.key(config.seed),
        POINTS * RUNS_PER_POINT,
        horizon=ROUNDS,
        params=stacked_params(learner, points),
        validate=True,
        options=SimOptions(chunk_size=ROUNDS),
    )
    for trace_name, trace in res.traces().items():
        assert np.all(np.isfinite(trace)), (members, trace_name)


@pytest.mark.slow
@pytest.mark.parametrize("config_name", _configs_of_kind("bco"))
def test_bco_config_learners_stay_finite(config_name):
    config = load_config(config_name, ["runs=2"])
    env = config.make_env()
    for name in config.learners:
        learner = config.make_learner(name)
        params = config.learner_params(learner, name)
        res = simulate(learner, env, jax.random.key(config.seed), 2, horizon=ROUNDS, params=params)
        assert np.all(np.isfinite(res.loss)), (config_name, name)
        assert np.all(np.isfinite(res.best_loss)), (config_name, name)
