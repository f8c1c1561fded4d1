"""History lengths (``stabl_jax.intervals``): the geometric lengths' boundary and the checks of
lengths a user gives. (The other bad StABL options are rows of tests/test_input_table.py.)"""

from __future__ import annotations

import pytest

from stabl_jax import StABL
from stabl_jax.intervals import geometric_history_lengths


def test_geometric_lengths_boundary():
    assert geometric_history_lengths(16) == (16,)
    with pytest.raises(ValueError, match="horizon=15"):
        geometric_history_lengths(15)
    with pytest.raises(ValueError, match="horizon must be >= 2 for geometric intervals, got 1"):
        geometric_history_lengths(1)
    for bad in (True, 64.0, "64"):
        with pytest.raises(TypeError, match=f"horizon must be an int, got {bad!r}"):
            geometric_history_lengths(bad)
    with pytest.raises(ValueError, match="horizon=8 is too small for the geometric intervals"):
        StABL(num_arms=5, horizon=8)


def test_one_history_length_may_be_given_as_an_int():
    assert StABL(num_arms=5, horizon=64, history_lengths=32).history_lengths == (32,)
    with pytest.raises(TypeError, match=r"must be a tuple of ints, got 3\.5"):
        StABL(num_arms=5, horizon=64, history_lengths=3.5)
