"""``experiments/tune.py``'s grids: the default ones and a field's grid replaced by ``--grid``."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from stabl_jax import make

TUNE = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "tune.py"))


def test_a_wider_grid_replaces_one_field():
    field, grid = TUNE["parse_grid"]("expert_lr_scale=2**0..2**14")
    assert field == "expert_lr_scale" and grid == [2.0**k for k in range(15)]
    assert TUNE["parse_grid"]("gamma=0,0.5") == ("gamma", [0.0, 0.5])
    params = make("stabl", num_arms=5, horizon=64).default_params
    fields, points = TUNE["grid_for"](params, False, {field: grid})
    assert fields == ["expert_lr_scale", "meta_lr_scale"]
    assert len(points) == 15 * len(TUNE["GRIDS"]["meta_lr_scale"])
    assert max(p[0] for p in points) == 2.0**14


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("expert_lr=1,2", "FIELD one of"),
        ("expert_lr_scale", "FIELD one of"),
        ("gamma=a,b", "numbers or 2\\*\\*A..2\\*\\*B"),
    ],
)
def test_a_bad_grid_names_itself(text, message):
    with pytest.raises(ValueError, match=message):
        TUNE["parse_grid"](text)
