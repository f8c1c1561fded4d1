"""``examples/custom_environment.py``: a user's reactive environment runs through ``simulate``
with StABL and EXP3, and its state, info and traces are the ones it defines."""

from __future__ import annotations

import runpy
from pathlib import Path

import jax
import numpy as np

from stabl_jax import EXP3, simulate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "custom_environment.py"


def test_custom_environment_example_runs(capsys):
    example = runpy.run_path(str(EXAMPLE))
    out = example["main"](["--runs", "4", "--horizon", "64", "--arms", "4"])
    printed = capsys.readouterr().out
    assert set(out) == {"stabl", "exp3"} and "stabl" in printed and "exp3" in printed
    for row in out.values():
        assert 0.0 <= row["mean_loss"] <= 1.0 and 0.0 <= row["prob_best"] <= 1.0
        assert row["max_play_average"] > 0.0  # the adversary's state followed the plays

    # The state is the play average the class defines: replay run 0's plays by hand.
    env = example["PunishingAdversary"](num_arms=4, horizon=64)
    res = simulate(EXP3(num_arms=4, horizon=64), env, jax.random.key(1), 2)
    average = np.zeros(4)
    for arm in res.played[0]:
        average = env.memory * average + (1.0 - env.memory) * np.eye(4)[arm]
    np.testing.assert_allclose(res.carry.env_state[0], average, rtol=1e-5, atol=1e-7)
    assert res.expected_loss.shape == res.prob_best.shape == (2, 64)
