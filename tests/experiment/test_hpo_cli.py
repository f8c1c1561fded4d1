"""``kind = "hpo"``: configs, command line, checkpoints and results folder (d = 2, 24 evals)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import runpy
from pathlib import Path

import jax
import numpy as np
import pytest

from stabl_jax.experiment import cli
from stabl_jax.experiment.checkpoints import STATE, CheckpointMismatch, load_arrays
from stabl_jax.experiment.identity import ExperimentCheckpoints, experiment_identity
from stabl_jax.experiment.kinds import load_config, write_results
from stabl_jax.experiment.kinds import selection as hpo_experiment
from stabl_jax.experiment.kinds.base import tree_bytes
from stabl_jax.experiment.kinds.selection import run_hpo_experiment
from stabl_jax.experiment.outputs import COMPLETE
from stabl_jax.experiment.results import ResultsFolder
from stabl_jax.experiment.tables import byte_size, read_summary, read_traces
from stabl_jax.hpo_metrics import simulate_selection
from tests.experiment.runs import fail_when, ran, sets

TINY = ["runs=2", "bbob.dims=[2]", "bbob.evaluations=[24]", 'learners=["uniform","stabl"]']


def test_shipped_hpo_configs_are_the_papers_setting():
    sphere = load_config("hpo_bbob_sphere")
    assert sphere.kind == "hpo" and sphere.feedback == "reward"
    problems = {(1, d, e) for d in (32, 64) for e in (1000, 2000)}
    assert {(p.function_id, p.dim, p.evaluations) for p in sphere.problems} == problems
    assert sphere.learners == ("uniform", "exp3", "exp3_uniform", "stabl", "stabl_naive")
    assert sphere.history_lengths == (20, 40, 80, 160, 320, 640, 1280, 2560)
    assert sphere.reward_lambda == 0.01
    suite = load_config("hpo_bbob_suite")
    assert sorted({p.function_id for p in suite.problems}) == list(range(1, 25))
    authors = load_config("hpo_bbob_vizier")  # the authors' setting, the same problems
    assert authors.problems == sphere.problems and authors.seed == sphere.seed
    assert (authors.reward, authors.reward_lambda) == ("vizier", 0.0)
    assert (authors.eagle_grid, authors.eagle_fill) == ("vizier", "halton")
    assert set(sphere.learners) < set(authors.learners) and "stabl_vizier" in authors.learners
    assert authors.history_lengths == sphere.history_lengths


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    """One tiny experiment with a checkpoint folder, shared by the tests below."""
    folder = tmp_path_factory.mktemp("hpo") / "checkpoint"
    config = load_config("hpo_bbob_sphere", TINY)
    checkpoints = ExperimentCheckpoints(folder, experiment_identity(config))
    # validated, as the command line runs it: its runs reuse these programs
    return config, folder, run_hpo_experiment(config, checkpoints=checkpoints, validate=True)


def test_checkpoint_is_read_back_identically(experiment):
    config, folder, result = experiment
    key = config.problems[0].key
    names = config.learners
    assert {p.name for p in folder.iterdir() if p.is_dir()} == {f"{key}-{n}" for n in names}
    checkpoints = ExperimentCheckpoints(folder, experiment_identity(config))
    horizon = {f"{key}-{n}": hpo_experiment.make_learner(config, n, 24).horizon for n in names}
    assert checkpoints.verify() == horizon  # every learner finished: 24 or 12 rounds
    again = run_hpo_experiment(config, checkpoints=checkpoints, validate=True)  # none recomputed
    outcome = again.problems[key]
    for name in config.learners:
        assert outcome.seconds[name]["compile"] == 0.0
        np.testing.assert_array_equal(outcome.best_gap[name], result.problems[key].best_gap[name])
    # a checkpoint made with other settings is never reused
    for change in ({"seed": config.seed + 1}, {"learners": ("uniform",)}):
        other = dataclasses.replace(config, **change)
        with pytest.raises(CheckpointMismatch, match="different run"):
            ExperimentCheckpoints(folder, experiment_identity(other))


def test_results_folder_has_curves_profiles_and_scores(experiment, tmp_path):
    config, _, result = experiment
    with ResultsFolder.prepare(tmp_path / "out") as folder:
        final = write_results(result, folder)
    names = {p.name for p in final.iterdir()}
    plots = hpo_experiment.HPO_PLOT_FILES.values()
    assert {COMPLETE, "summary.json", "traces.npz", *plots} <= names
    for png in plots:
        assert (final / png).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    summary = read_summary(final)
    json.dumps(summary, allow_nan=False)
    assert summary["kind"] == "hpo" and summary["config"]["runs"] == 2
    assert summary["score_vs_uniform"]["uniform"] == 0.0
    for name in config.learners:
        assert 0.0 <= summary["profile_scores"][name] <= 1.0
    traces = read_traces(final)
    key = config.problems[0].key
    gap = traces[f"{key}/stabl/best_gap"]
    assert gap.shape == (2, 24) and np.all(np.diff(gap, axis=1) <= 0)  # best so far
    np.testing.assert_allclose(traces[f"{key}/stabl/arm_counts"].sum(), 24)  # one arm each
    table = hpo_experiment.format_hpo_table(result)
    assert "profile score" in table and key in table
    # the folder alone gives the result back; experiments/report.py makes its tables
    back = hpo_experiment.read_hpo_result(final)
    assert back.config == dataclasses.replace(config, source=back.config.source)
    np.testing.assert_array_equal(back.problems[key].best_gap["stabl"], gap)
    assert hpo_experiment.build_hpo_summary(back)["profile_scores"] == summary["profile_scores"]
    report = runpy.run_path(str(Path(__file__).parents[2] / "experiments" / "report.py"))
    markdown = report["table"](final, (256,))
    assert f"| {key} |" in markdown and "| stabl |" in markdown


def tiny_args(out) -> list[str]:
    return ["run", "hpo_bbob_sphere", "--out", str(out), "--no-progress", *sets(TINY)]


def test_an_hpo_run_that_does_not_fit_is_refused_before_it_runs(
    experiment, tmp_path, capsys, monkeypatch
):
    """With no memory to spare a run is refused (exit 2) naming its size, the memory and the
    remedies, before anything runs; ``--allow-large`` runs it, the header saying its needs."""
    monkeypatch.setattr(cli, "available_memory_bytes", lambda: 1)
    monkeypatch.setattr(hpo_experiment, "run_hpo_experiment", ran)
    args = tiny_args(tmp_path / "run")
    assert cli.main(args) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "does not fit (1 problems x 2 repeats x 2 learners)" in err, err
    assert "of memory" in err and "--runs" in err and "--allow-large" in err, err
    assert not (tmp_path / "run").exists()
    assert cli.main([*args, "--allow-large"]) == cli.EXIT_FAILURE
    out, err = capsys.readouterr()
    assert "the experiment ran" in err
    needs = hpo_experiment.KIND.estimate(experiment[0])
    assert f"needs about {byte_size(needs.memory_bytes)} of memory" in out, out
    assert "roughly" not in out, out  # no time: none was measured


def test_the_hpo_estimate_counts_the_loop_state_every_run_holds(experiment):
    """The estimate's loop state per run (from shapes alone) is a run's, byte for byte."""
    config = experiment[0]
    group = hpo_experiment.problem_groups(config)[0]
    env = hpo_experiment.problem_env(config, group)
    learner = hpo_experiment.make_learner(config, "stabl", group[0].evaluations)
    key, runs = jax.random.key(config.seed), config.runs  # the programs the runs above made
    traces = hpo_experiment.RECORDED_TRACES
    res = simulate_selection(
        learner, env, key, runs, group[0].evaluations, traces=traces, validate=True
    )
    assert tree_bytes(res.carry) == runs * hpo_experiment.run_state_bytes(learner, env)


def test_a_resumed_hpo_run_says_what_it_took_over(experiment, tmp_path, capsys, monkeypatch):
    """Interrupted after the first program (its checkpoint: traces, no loop state), the same
    command resumes into the uninterrupted results; a second run is refused without --force."""
    args = tiny_args(tmp_path / "run")
    metrics, calls = hpo_experiment.hpo_metrics, itertools.count(1)
    simulate = metrics.simulate_selection
    fail_when(monkeypatch, metrics, "simulate_selection", lambda *a: next(calls) == 2)
    assert cli.main(args) == cli.EXIT_INTERRUPTED
    config = experiment[0]
    key = config.problems[0].key
    (state,) = tmp_path.glob(f"run.partial*/checkpoint/{key}-uniform/{STATE}")
    stored = load_arrays(state)
    assert int(stored["t0"]) == 24 and not [n for n in stored if n.startswith("carry/")]
    monkeypatch.setattr(metrics, "simulate_selection", simulate)
    capsys.readouterr()
    assert cli.main([*args, "--dry-run"]) == cli.EXIT_OK  # says what the run will take over
    assert "  would resume: 1 of 2 learner programs complete\n" in capsys.readouterr().out
    assert cli.main(args) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "resuming run.partial" in out and ": 1 of 2 learner programs complete" in out, out
    assert "profile score" in out and f"results: {tmp_path / 'run'}" in out
    assert (tmp_path / "run" / COMPLETE).is_file()
    assert not (tmp_path / "run" / "checkpoint").exists()  # removed once the folder is complete
    whole = experiment[2].problems[key].best_gap  # the uninterrupted run
    for name in ("uniform", "stabl"):
        resumed = read_traces(tmp_path / "run")[f"{key}/{name}/best_gap"]
        np.testing.assert_array_equal(resumed, whole[name])
    assert cli.main(args) == cli.EXIT_USAGE  # complete folder, no --force
    # a program stopped inside: its rounds
    line = hpo_experiment.KIND.describe_resumed(config, {f"{key}-uniform": 24, f"{key}-stabl": 5})
    assert line == f"1 of 2 learner programs complete, {key}-stabl at 5/12 rounds"
