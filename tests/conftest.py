"""Test configuration: strict rank promotion, tiny sizes, shared fixtures."""

from __future__ import annotations

import os

import jax
import pytest

jax.config.update("jax_numpy_rank_promotion", "raise")
# The command line's persistent compilation cache stays off in tests (it is a process-wide
# JAX setting and would write to the user's cache folder); tests/test_compile_cache.py
# exercises it with a folder of its own.
os.environ.setdefault("STABL_JAX_COMPILE_CACHE", "off")

from stabl_jax import LEARNERS, ExpertAdvice, make  # noqa: E402

NUM_ARMS = 5
HORIZON = 64


def small_learner(name: str, **kwargs):
    """Registry entry ``name`` at a tiny size (Single Scale gets a length that fits T)."""
    if name == "stabl_single_scale":
        kwargs.setdefault("history_lengths", (16,))
    return make(
        name,
        num_arms=kwargs.pop("num_arms", NUM_ARMS),
        horizon=kwargs.pop("horizon", HORIZON),
        **kwargs,
    )


def write_config_variant(tmp_path, good: str, cases: dict, case: str, filename: str = "bad.toml"):
    """Write ``good`` config text with ``cases[case] = (anchor, new, ...)`` applied: ``new``
    replaces ``anchor`` (or is appended when ``anchor`` is None). Returns the file's path."""
    anchor, new = cases[case][:2]
    text = good + new if anchor is None else good.replace(anchor, new, 1)
    assert text != good
    path = tmp_path / filename
    path.write_text(text)
    return path


@pytest.fixture(params=sorted(LEARNERS))
def learner_name(request) -> str:
    return request.param


@pytest.fixture
def learner(learner_name):
    return small_learner(learner_name)


@pytest.fixture
def env():
    return ExpertAdvice(num_arms=NUM_ARMS, horizon=HORIZON, change_points=(20, 41))
