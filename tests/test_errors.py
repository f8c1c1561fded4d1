"""Bad input to the core gets a clear error naming the argument and the value."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from stabl_jax import EXP3, StABL, make, make_env
from stabl_jax.intervals import geometric_history_lengths


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"horizon": 8}, ValueError, "horizon=8 is too small for the geometric intervals"),
        ({"history_lengths": (64, 32)}, ValueError, "strictly increasing"),
        ({"history_lengths": (0, 4)}, ValueError, "positive ints"),
        ({"history_lengths": ()}, ValueError, "must not be empty"),
        ({"history_lengths": 3.5}, TypeError, "must be a tuple of ints, got 3.5"),
        ({"num_arms": 1}, ValueError, "num_arms must be >= 2, got 1"),
        ({"num_arms": 2.0}, TypeError, "num_arms must be an int"),
        ({"observation": "gumbel"}, ValueError, "observation must be one of"),
        ({"feedback": "regret"}, ValueError, "feedback must be one of"),
        ({"expert_c": "3"}, ValueError, "expert_c must be one of"),
        ({"round_offset": 2}, ValueError, "round_offset must be one of"),
        ({"dtype": "float16"}, ValueError, "dtype must be one of"),
    ],
)
def test_bad_stabl_config(kwargs, error, match):
    base = {"num_arms": 5, "horizon": 64}
    with pytest.raises(error, match=match):
        StABL(**{**base, **kwargs})


def test_geometric_lengths_boundary():
    assert geometric_history_lengths(16) == (16,)
    with pytest.raises(ValueError, match="horizon=15"):
        geometric_history_lengths(15)
    with pytest.raises(ValueError, match="horizon must be >= 2 for geometric intervals, got 1"):
        geometric_history_lengths(1)
    for bad in (True, 64.0, "64"):
        with pytest.raises(TypeError, match=f"horizon must be an int, got {bad!r}"):
            geometric_history_lengths(bad)


def test_one_history_length_may_be_given_as_an_int():
    assert StABL(num_arms=5, horizon=64, history_lengths=32).history_lengths == (32,)


def test_tell_checks_the_query_it_is_given():
    """A query of another shape than the learner asks (``num_queries`` arms, ``num_arms``
    play probabilities) is refused by ``tell``, naming the field."""
    learner = StABL(num_arms=5, horizon=64)
    state = learner.init(jax.random.key(0))
    query = learner.ask(state, jax.random.key(1))
    observed = jnp.full((2,), 0.5)
    for field, bad, size in (
        ("arms", jnp.zeros(3, jnp.int32), 2),
        ("play_probs", query.play_probs[:4], 5),
    ):
        wrong = dataclasses.replace(query, **{field: bad})
        with pytest.raises(ValueError, match=rf"query\.{field} must have shape \({size},\)"):
            learner.tell(state, wrong, observed)


def test_exp3_gamma_range():
    with pytest.raises(ValueError, match="gamma must be in"):
        EXP3(num_arms=3, horizon=10, gamma=1.5)


def test_unknown_registry_names():
    with pytest.raises(ValueError, match="unknown learner 'stable'"):
        make("stable", num_arms=3, horizon=10)
    with pytest.raises(ValueError, match="unknown environment"):
        make_env("casino", num_arms=3, horizon=10)


@pytest.mark.parametrize(
    ("loss", "match"),
    [
        (jnp.array([0.1, jnp.nan, 0.3]), "nan"),
        (jnp.array([0.1, 1.5, 0.3]), "1.5"),
        (jnp.array([0.1, -0.2, 0.3]), "-0.2"),
        (jnp.array([0.1, jnp.inf, 0.3]), "inf"),
        (jnp.array([0.1, 0.2]), "shape \\(3,\\)"),
    ],
)
@pytest.mark.parametrize("name", ["exp3", "stabl", "uniform"])
def test_eager_step_rejects_bad_losses(name, loss, match):
    learner = make(name, num_arms=3, horizon=16)
    state = learner.init(jax.random.key(0))
    with pytest.raises(ValueError, match=match):
        learner.step(state, loss, jax.random.key(1))


def test_tell_rejects_wrong_number_of_observations():
    learner = StABL(num_arms=3, horizon=16)
    state = learner.init(jax.random.key(0))
    query = learner.ask(state, jax.random.key(1))
    with pytest.raises(ValueError, match="observed must have shape \\(2,\\)"):
        learner.tell(state, query, jnp.array([0.5]))
