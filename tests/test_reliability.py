"""Reproducibility and safety: validation changes nothing, any chunk size and resume point
give the same bits (devices: tests/test_sharding.py), the summary is enough to rerun, and no
user-supplied file is ever unpickled or evaluated."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jax
import numpy as np
import pytest

from stabl_jax import ExpertAdvice, SimOptions, StABL, simulate
from stabl_jax.bco import FKM
from stabl_jax.envs.convex import MovingTarget
from stabl_jax.experiment.checkpoints import ChunkCheckpoint
from stabl_jax.experiment.kinds import load_config, validate

REPO = Path(__file__).resolve().parent.parent
N, T, R = 5, 48, 4
ENV = ExpertAdvice(num_arms=N, horizon=T, change_points=(17, 30))
LEARNER = StABL(num_arms=N, horizon=T)


@pytest.fixture(scope="module")
def whole():
    """One unchunked validated run (what the CLI runs): the reference every other way of
    running, unchecked, must equal bitwise."""
    options = SimOptions(chunk_size=T)
    return simulate(LEARNER, ENV, jax.random.key(7), R, validate=True, options=options)


def assert_bitwise(result, reference) -> None:
    for name, trace in reference.traces().items():
        np.testing.assert_array_equal(getattr(result, name), trace, err_msg=name)
    for a, b in zip(*(jax.tree.leaves(r.carry.state) for r in (result, reference)), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def _stop_at(rounds: int):
    """A progress callback that crashes the run once ``rounds`` rounds are checkpointed."""

    def progress(done: int, _: int) -> None:
        if done == rounds:
            raise KeyboardInterrupt

    return progress


@pytest.mark.parametrize(("first_chunk", "stop_after", "second_chunk"), [(16, 2, 7), (1, 16, 16)])
def test_any_chunk_size_and_resume_point_is_bitwise_identical(
    whole, tmp_path, first_chunk, stop_after, second_chunk
):
    """Interrupted after ``stop_after`` chunks, resumed with chunks of another size (7 does not
    divide T; 1 is a round): the bits of one unchunked scan; the progress starts where it
    resumed; a finished checkpoint restores everything without running a chunk."""
    fingerprint = {"test": "resume"}
    checkpoint, stop = ChunkCheckpoint(tmp_path, fingerprint), _stop_at(first_chunk * stop_after)
    with pytest.raises(KeyboardInterrupt):
        options = SimOptions(chunk_size=first_chunk, checkpoint=checkpoint, progress=stop)
        simulate(LEARNER, ENV, jax.random.key(7), R, options=options)
    resumed_from = ChunkCheckpoint(tmp_path, fingerprint)
    assert resumed_from.progress() == first_chunk * stop_after
    seen: list[int] = []
    options = SimOptions(
        chunk_size=second_chunk, checkpoint=resumed_from, progress=lambda done, _: seen.append(done)
    )
    result = simulate(LEARNER, ENV, jax.random.key(7), R, options=options)
    assert seen[0] == first_chunk * stop_after  # the progress starts where it resumed
    assert_bitwise(result, whole)
    options = SimOptions(checkpoint=ChunkCheckpoint(tmp_path, fingerprint))
    again = simulate(LEARNER, ENV, jax.random.key(7), R, options=options)
    assert again.compile_seconds == 0.0
    assert_bitwise(again, whole)


def test_bco_resume_is_bitwise_identical(tmp_path):
    env, learner = MovingTarget(dim=2, horizon=32), FKM(dim=2, horizon=32)

    def run(chunk_size, checkpoint=None, progress=False):
        options = SimOptions(chunk_size=chunk_size, checkpoint=checkpoint, progress=progress)
        return simulate(learner, env, jax.random.key(3), 2, options=options)

    whole = run(32)
    with pytest.raises(KeyboardInterrupt):
        run(16, ChunkCheckpoint(tmp_path, {"bco": 1}), _stop_at(16))
    checkpoint = ChunkCheckpoint(tmp_path, {"bco": 1})
    assert checkpoint.progress() == 16
    resumed = run(16, checkpoint)
    np.testing.assert_array_equal(resumed.loss, whole.loss)
    np.testing.assert_array_equal(resumed.best_loss, whole.best_loss)


FIELDS = "name seed runs horizon learners env window sa_windows chunk_size feedback kind sa_stride"
FIELDS += " save_traces learner_options params"


def test_summary_config_reruns_the_experiment():
    """``summary.json``'s ``config`` (``ExperimentConfig.to_dict``) validates to the same config,
    defaults included."""
    for name in ("expert_advice_equal", "expert_advice_random_tuned", "bco_d2"):
        config = load_config(name, ["runs=3", "chunk_size=64"], seed=9)
        recorded = json.loads(json.dumps(config.to_dict()))  # what summary.json holds
        raw = {k: v for k, v in recorded.items() if k not in ("source", "overrides")}
        rebuilt = validate(raw, "summary.json", default_name=recorded["name"])
        for field in FIELDS.split():
            assert getattr(rebuilt, field) == getattr(config, field), (name, field)
        for learner_name in config.learners:
            assert rebuilt.make_learner(learner_name) == config.make_learner(learner_name)


FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "dill", "cloudpickle", "marshal", "shelve", "yaml"}


def _sources() -> list[Path]:
    return sorted((REPO / "stabl_jax").rglob("*.py")) + sorted((REPO / "experiments").glob("*.py"))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_pickle_or_eval(path):
    """No pickle-family module, no eval/exec/compile, every np.load passes allow_pickle=False."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            assert not {n.split(".")[0] for n in names} & FORBIDDEN_MODULES, ast.dump(node)
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            builtin = isinstance(func, ast.Name)  # eval(...), not re.compile / lowered.compile
            assert not (builtin and name in FORBIDDEN_CALLS), f"{path}:{node.lineno} {name}"
            if name == "load" and ast.unparse(func).endswith(("np.load", "numpy.load")):
                flags = {k.arg: ast.unparse(k.value) for k in node.keywords}
                assert flags.get("allow_pickle") == "False", f"{path}:{node.lineno}"
            for keyword in node.keywords:
                if keyword.arg == "allow_pickle":
                    assert ast.unparse(keyword.value) == "False", f"{path}:{node.lineno}"
