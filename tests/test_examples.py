"""The examples of ``examples/`` run, and the learner of ``docs/learners.md`` keeps the
contract: jit, vmap over a params sweep, the in-program checks, state dtypes."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import checkify

from stabl_jax import EXP3, ExpertAdvice, simulate
from stabl_jax.checks import checked_step
from stabl_jax.experiment import cli
from tests.scripts.load import load_script

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _load(name: str):  # registered: dataclasses resolve annotations through sys.modules
    return load_script(EXAMPLES / f"{name}.py", register=True)


def test_custom_learner_runs_and_keeps_the_contract():
    """``main`` simulates with the in-program checks, which change no bit of the result; jit,
    vmap over a params sweep, the checks and the state dtypes hold."""
    example = _load("custom_learner")
    env = ExpertAdvice(num_arms=5, horizon=64)
    plain = simulate(example.EpsilonGreedy(num_arms=5, horizon=64), env, jax.random.key(0), 4)
    assert example.main(num_runs=4, horizon=64) == float(plain.loss.mean())
    learner = example.EpsilonGreedy(num_arms=4, horizon=32)
    loss = jnp.array([0.9, 0.1, 0.5, 0.7])
    # A sweep of epsilon in one program; epsilon = 0 plays greedily after the untried arms.
    params = learner.default_params.replace(epsilon=jnp.array([0.0, 1.0]))
    keys = jax.random.split(jax.random.key(0), 2)
    states = jax.vmap(learner.init)(keys, params)
    step = jax.jit(jax.vmap(learner.step, in_axes=(0, None, 0)))
    for t in range(12):
        states, info = step(states, loss, jax.vmap(jax.random.fold_in, (0, None))(keys, t))
    assert int(info.arms[0, 0]) == 1  # the greedy run settled on the smallest loss
    np.testing.assert_allclose(np.asarray(info.play_probs[1]), 0.25)  # epsilon = 1: uniform
    assert states.counts.dtype == jnp.float32 and states.t.dtype == jnp.int32
    with pytest.raises(ValueError, match=r"params.epsilon must be finite and in \[0, 1\]"):
        learner.init(keys[0], learner.default_params.replace(epsilon=jnp.float32(1.5)))
    checked = checked_step(learner)
    state, _ = checked(learner.init(keys[0]), loss, keys[1])
    with pytest.raises(checkify.JaxRuntimeError, match="loss at round 1 must be finite"):
        checked(state, loss.at[2].set(jnp.nan), keys[1])


def test_paired_sweep_example_pairs_the_points(capsys):
    """Each grid point's runs see the same draws: equal points give equal rewards."""
    example = _load("paired_sweep")
    points, reward = example.sweep((2.0, 2.0), runs_per_point=4, horizon=64, num_arms=4)
    assert reward.shape == (4, 4) and len(points) == 4
    np.testing.assert_array_equal(reward[0], reward[3])  # (2, 2) twice: the same runs
    best = example.main(["--runs", "4", "--horizon", "64"])
    assert best["best_expert"] in (1.0, 4.0, 16.0) and 0.0 <= best["best"] <= 1.0
    assert "diff to best" in capsys.readouterr().out


def test_custom_environment_example_runs(capsys):
    """A user's reactive environment runs with StABL and EXP3; its state is the one it defines."""
    example = _load("custom_environment")
    out = example.main(["--runs", "4", "--horizon", "64", "--arms", "4"])
    printed = capsys.readouterr().out
    assert set(out) == {"stabl", "exp3"} and "stabl" in printed and "exp3" in printed
    for row in out.values():
        assert 0.0 <= row["mean_loss"] <= 1.0 and 0.0 <= row["prob_best"] <= 1.0
        assert row["max_play_average"] > 0.0  # the adversary's state followed the plays
    # The state is the play average the class defines: replay run 0's plays by hand.
    env = example.PunishingAdversary(num_arms=4, horizon=64)
    res = simulate(EXP3(num_arms=4, horizon=64), env, jax.random.key(1), 2)
    average = np.zeros(4)
    for arm in res.played[0]:
        average = env.memory * average + (1.0 - env.memory) * np.eye(4)[arm]
    np.testing.assert_allclose(res.carry.env_state[0], average, rtol=1e-5, atol=1e-7)
    assert res.expected_loss.shape == res.prob_best.shape == (2, 64)


@pytest.mark.parametrize(
    ("name", "args", "message"),
    [
        ("paired_sweep", ["--runs", "1"], "give an int >= 2 (a 95% interval needs two runs)"),
        ("paired_sweep", ["--horizon", "0"], "argument --horizon: give an int >= 1, got '0'"),
        ("paired_sweep", ["--horizon", "3"], "horizon=3 is too small for the geometric"),
        ("custom_environment", ["--arms", "1"], "num_arms must be >= 2, got 1"),
        ("custom_environment", ["--horizon", "0"], "argument --horizon: give an int >= 1"),
    ],
)
def test_the_examples_refuse_bad_sizes_in_one_line(capsys, name, args, message):
    """Exit status 2 and one line, not ``± nan`` intervals nor the library's traceback."""
    with pytest.raises(SystemExit) as stop:
        _load(name).main(args)
    captured = capsys.readouterr()
    assert stop.value.code == 2 and message in captured.err and captured.out == ""


def test_load_results_example_reads_a_folder(tmp_path, capsys):
    example = _load("load_results")
    rewards = example.main(tmp_path / "results")
    assert set(rewards) == {"exp3", "stabl"}
    assert all(0.0 <= r <= 1.0 for r in rewards.values())
    assert "stabl/played: shape (8, 512), dtype uint8" in capsys.readouterr().out


def test_load_results_example_on_a_folder_of_the_users_or_of_one_run(tmp_path, capfd):
    """A user's folder: the command line's refusal and exit status, no traceback; a folder of
    one run without StABL: no interval and no trace to show, exit 0."""
    example = _load("load_results")
    (mine := tmp_path / "mine").mkdir()
    (mine / "notes.txt").write_text("the user's")
    with pytest.raises(SystemExit) as stop:
        example.main(mine)
    assert stop.value.code == 2 and "is not a stabl_jax results folder" in capfd.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    one = tmp_path / "one"
    command = ["run", "expert_advice_equal", "--runs", "1", "--set", "horizon=64"]
    command += ["--set", "env.change_points=[32]", "--set", 'learners=["exp3"]']
    assert cli.main([*command, "--set", "sa_windows=[16]", "--out", str(one), "--no-progress"]) == 0
    capfd.readouterr()
    rewards = example.main(one)
    assert list(rewards) == ["exp3"] and 0.0 <= rewards["exp3"] <= 1.0
    out = capfd.readouterr().out
    assert "exp3 mean reward" in out and "(one run: no interval)" in out
    assert "no stabl/played trace" in out and "exp3/played" in out
