"""Every learner against its independent reference (a float64 NumPy loop of ``reference*.py``
written from the paper, or OSS Vizier's own classes), round by round on the same losses and
uniforms (:func:`run_row`): arms, counts, restarts exactly; values at the pair's ``rtol``
(``1e-9`` in float64, float32 precision for the float32 change detectors, ``1e-6`` to Vizier).
And the reward of the authors' algorithm-selection runs (``stabl_jax.envs.hpo.vizier_reward``,
``HPOEnv(reward="vizier")``) against Vizier's ``ObjectiveRewardGenerator``.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import math
import operator
import sys
import types
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stabl_jax import make, sampling
from stabl_jax.learners.tsallis_inf import reduced_variance_estimate
from tests.learners import reference, reference_baselines
from tests.learners import reference_nonstationary as ref_ns
from tests.learners import reference_stabl_family as ref_family
from tests.scripts.load import load_script

Probe = Callable[..., dict]
EXACT = 0  # an rtol of 0: compared exactly
FAINT = 1e-300  # an absolute floor for probabilities that underflow alike
QUERIES = operator.attrgetter("num_queries")  # a family drawing a uniform per query


def drifting_losses(T: int, N: int, seed: int, low: float = 0.2, best: float = 0.4):
    """``(T, N)`` losses uniform in ``[low, 1)``, but for a best arm (uniform in ``[0, best)``)
    that moves at ``T/3`` and ``2T/3`` (arms 1, ``N - 1``, 0); arm 2 loses exactly 0 every 7th
    round and arm 3 exactly 1 every 5th (the ends of [0, 1])."""
    rng = np.random.default_rng(seed)
    losses = rng.uniform(low, 1.0, size=(T, N))
    for i, arm in enumerate((1, N - 1, 0)):
        start, stop = i * T // 3, (i + 1) * T // 3 if i < 2 else T
        losses[start:stop, arm] = rng.uniform(0.0, best, size=stop - start)
    losses[::7, 2], losses[::5, 3] = 0.0, 1.0
    return losses


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _trajectory(learner, probe: Probe, num_uniforms: int, state, losses, keys):
    """Per round the step's info, ``probe(learner, state, key, (new_state, info))`` and the
    uniforms, stacked; ``probe(learner, final, key, None)``. The probe is vmapped after the
    scan, not in its body (a kl-UCB index beside the step's multiplies the compile time)."""

    def body(state, xs):
        new, info = learner.step(state, *xs)
        return new, (state, info)

    final, (before, info) = jax.lax.scan(body, state, (losses, keys))
    after = jax.tree.map(lambda b, f: jnp.concatenate([b[1:], f[None]]), before, final)
    probed = jax.vmap(lambda *a: probe(learner, *a[:2], a[2:]))(before, keys, after, info)
    names = ("arms", "play_probs", "loss", "expected_loss")
    record = {name: getattr(info, name) for name in names} | probed
    if num_uniforms:
        draw = functools.partial(sampling.uniforms, num=num_uniforms, dtype=learner.float_dtype)
        record["u"] = jax.vmap(draw)(keys)
    return record, probe(learner, final, keys[0], None)


@dataclasses.dataclass(frozen=True)
class Case:
    """What a reference reads: the learner, its params and options, the losses ``(T, n)``, the
    uniforms it drew ``(T, k)`` and its recorded trajectory ``got``."""

    learner: Any
    params: Any
    options: dict
    losses: np.ndarray
    u: np.ndarray
    got: dict

    def num(self, *names: str) -> dict:
        return {name: float(getattr(self.params, name)) for name in names}

    def statics(self, *names: str) -> dict:
        return {name: getattr(self.learner, name) for name in names}


@dataclasses.dataclass(frozen=True)
class Family:
    """A registry learner, its probe, its ``reference(case) -> dict``, the pairs ``(ours,
    theirs, rtol[, atol])`` compared, its uniforms per round (or ``uniforms(learner)``), sizes,
    whether a row mutes (``mutes(values)``: True, False or None) and ``also(case, expected)``."""

    learner: str
    probe: Probe
    reference: Callable[[Case], dict]
    pairs: tuple
    uniforms: int | Callable[[Any], int] = 0
    T: int = 150
    N: int = 6
    x64: bool = True
    losses: Callable[[int, int], np.ndarray] = lambda T, N: drifting_losses(T, N, 1)
    mutes: Callable[[dict], bool | None] = lambda values: None
    also: Callable[[Case, dict], None] | None = None


def run_row(family: Family, options: dict, values: dict) -> tuple[Case, dict]:
    """Run ``family``'s learner and its reference on shared draws; compare every pair."""
    kwargs = {"num_arms": family.N, "horizon": family.T} | options
    T, N = kwargs["horizon"], kwargs["num_arms"]
    with jax.enable_x64(family.x64):
        learner = make(family.learner, **kwargs, **({"dtype": "float64"} if family.x64 else {}))
        numbers = {k: jnp.asarray(v, learner.float_dtype) for k, v in values.items()}
        params = learner.default_params.replace(**numbers)
        losses, keys = family.losses(T, N), jax.random.split(jax.random.key(1), T)
        uniforms = family.uniforms
        args = (learner, family.probe, uniforms if isinstance(uniforms, int) else uniforms(learner))
        state = learner.init(jax.random.key(0), params)
        rounds, final = _trajectory(*args, state, jnp.asarray(losses, learner.float_dtype), keys)
        got = {k: np.asarray(v) for k, v in rounds.items()}
        for name, value in final.items():  # the state before every round and after the last
            got[name] = np.concatenate([got[name], np.asarray(value)[None]])
        got["played"], got["second"] = got["arms"][:, 0], got["arms"][:, -1]
        u = np.asarray(got.pop("u", np.zeros((T, 0))), np.float64)
        case = Case(learner, params, options, losses, u, got)
        expected = family.reference(case)
    for ours, theirs, rtol, *atol in family.pairs:
        want = np.asarray(expected[theirs])
        have = got[ours][-1] if want.ndim == 0 else got[ours][: len(want)]
        assert want.ndim == 0 or have.shape == want.shape, (ours, have.shape, want.shape)
        if rtol == EXACT:
            np.testing.assert_array_equal(have, want, err_msg=ours)
        else:
            tol = {"rtol": rtol, "atol": atol[0] if atol else 0.0}
            np.testing.assert_allclose(have, want, **tol, err_msg=ours)
    assert len(set(got["played"][N:].tolist())) > 1, "the case must leave one arm"
    if (mutes := family.mutes(values)) is not None:
        assert (expected["muted"] > 0) is mutes, expected["muted"]
    if family.also is not None:
        family.also(case, expected)
    return case, expected


# --- Probes: what a family records of the state before a round (and of the round's step) ---
def _rec_weights(learner, state, key, step):
    return {"weights": jnp.exp(state.log_weights)}


def _rec_stabl(learner, state, key, step):
    v, mix, obs = learner.distributions(state)
    w = jnp.exp(state.meta_log_weights)
    return {"v": v, "mix": mix, "obs": obs, "w": w, "muted": state.num_muted}


def _rec_saol(learner, state, key, step):
    v, _, mix = learner.distributions(state)
    return {"v": v, "mix": mix, "w": jnp.exp(state.meta_log_weights), "muted": state.num_muted}


def _rec_anytime(learner, state, key, step):
    v, p, mix, obs = learner.distributions(state)
    active = learner.active(state.t).sum()
    return {"v": v, "p": p, "mix": mix, "obs": obs, "active": active, "muted": state.num_muted}


def _rec_adaptive(learner, state, key, step):
    expert_rate, meta_rate = learner.rates(state)
    rates = {"eta'": expert_rate, "eta": meta_rate, "meta_log_pseudo": state.meta_log_pseudo}
    return _rec_anytime(learner, state, key, step) | rates


def _rec_ucb(learner, state, key, step):
    """The index (UCB policies), the counts, the ring buffer of a window, the restarts."""
    out = {"index": learner.index(state)} if hasattr(learner, "index") else {}
    if hasattr(state, "counts"):
        out["counts"] = state.counts.astype(learner.float_dtype)
    if hasattr(state, "window_arms"):
        out["window_arms"] = state.window_arms
    if step is not None and learner.records_restarts:
        out["restarted"] = learner.restarted(state, step[0])
    return out


def _rec_adswitch(learner, state, key, step):
    """After the step: episode, GOOD, pending obligations, bad arms' ``mu~`` and ``Delta~``."""
    if step is None:
        return {}
    new = step[0]
    out = {"episode": new.episode, "good": new.good, "pending": new.counts < new.due}
    return out | {k: jnp.where(new.good, 0.0, getattr(new, k)) for k in ("mean_bad", "gap_bad")}


def _rec_master(learner, state, key, step):
    if step is None:
        return {}
    new, optimistic = step[0], learner.ask(state, key).optimistic
    return {"optimistic": optimistic, "order": new.order, "block": new.block_start == state.t + 1}


def _rec_thompson(learner, state, key, step):
    """The posterior and the round's samples and coin, drawn as the learner draws them."""
    a, b = learner.posterior(state)
    beta_key, coin_key = jax.random.split(key)
    theta = jax.random.beta(beta_key, a, b, dtype=a.dtype)
    coin = sampling.uniforms(coin_key, 1, a.dtype)[0]
    return {"alpha": a, "beta": b, "theta": theta, "coin": coin}


def _rec_tsallis(learner, state, key, step):
    eta, cum = learner.learning_rate(state), state.loss_estimates
    if step is None:
        return {"cum": cum}
    info = step[1]
    estimate = reduced_variance_estimate(info.play_probs, info.arms[0], info.observed[0], eta)
    return {"eta": eta, "estimate": estimate, "cum": cum}


def _rec_flh(learner, state, key, step):
    """Slots' starts, meta weights, alive experts, the played expert, each alive slot's arm."""
    alive, query = state.start > 0, learner.ask(state, key)
    by_slot = jnp.roll(query.arms, query.expert)  # arms[i] is slot (j + i) % M's
    experts = jnp.where(alive[:, None], jnp.exp(state.expert_log_probs), 0.0)
    out = {"start": state.start, "meta": jnp.exp(state.meta_log_weights), "experts": experts}
    return out | {"expert": query.expert, "slot_arms": jnp.where(alive, by_slot, -1)}


def _rec_vizier(learner, state, key, step):
    if not hasattr(learner, "distributions"):
        return {}
    _, play, obs = learner.distributions(state)
    return {"play": play, "obs": obs}


def _stabl(c: Case, **forced) -> dict:
    """StABL; the rate grid as StABL over every (length, scale) pair, expert ``k S + j``;
    ``forced`` options (one query: ``observation="played"``)."""
    names = ("observation", "feedback", "round_offset", "expert_c")
    options = {k: c.options[k] for k in names if k in c.options}
    lengths = c.learner.history_lengths
    if "rate_grid" in c.options:
        grid = c.options["rate_grid"]
        lengths = [L for L in c.learner.history_lengths for _ in grid]
        options["rate_scales"] = list(grid) * len(c.learner.history_lengths)
        if c.options.get("scale_meta", True):  # expert (k, j)'s meta step s_j eta_k
            options["meta_scales"] = options["rate_scales"]
    options |= c.num("meta_lr_scale", "expert_lr_scale") | forced
    return reference.stabl_reference(c.losses, c.u, lengths, **options)


def _lengths(fn, statics=("feedback", "round_offset")):
    """A StABL-family loop on the learner's lengths, with its options ``statics`` and its
    meta and expert scales."""

    def ref(c: Case) -> dict:
        kwargs = c.num("meta_lr_scale", "expert_lr_scale") | c.statics(*statics)
        return fn(c.losses, c.u, list(c.learner.history_lengths), **kwargs)

    return ref


def _exp3_ix(c: Case) -> dict:
    """Theorem 1's rates ``eta = 2 gamma`` scaled: ``eta lr_scale``, ``ix_scale eta / 2``."""
    eta = reference_baselines.exp3_ix_rates(*c.losses.shape[::-1])[0] * float(c.params.lr_scale)
    gamma = float(c.params.ix_scale) * eta / 2.0
    rates = [float(r) for r in c.learner.rates(c.params)]
    np.testing.assert_allclose(rates, [eta, gamma], rtol=1e-14)
    return reference_baselines.exp3_ix_reference(c.losses, c.u, eta=eta, gamma=gamma)


def _numbers(fn, *numbers, statics=(), ints=(), uniforms=True):
    """``fn(losses[, u], **numbers of the params (``ints`` as ints), **statics of the learner)``."""

    def ref(c: Case) -> dict:
        kwargs = c.num(*numbers) | c.statics(*statics)
        kwargs |= {name: int(getattr(c.params, name)) for name in ints}
        return fn(c.losses, c.u, **kwargs) if uniforms else fn(c.losses, **kwargs)

    return ref


def _index_policy(fn, *numbers, statics=()):
    """A deterministic index policy's loop: its play distribution is the played arm's, and
    its first ``n`` rounds play every arm once, in index order (the papers' initialisation)."""

    def ref(c: Case) -> dict:
        out, n = _numbers(fn, *numbers, statics=statics, uniforms=False)(c), c.losses.shape[1]
        np.testing.assert_array_equal(out["played"][:n], np.arange(n))
        return out | {"one_hot": np.eye(n)[out["played"]]}

    return ref


def _detector(fn, *numbers, **options):
    """A change detector's float64 loop; its restarts (there must be some) as a mask."""

    def ref(c: Case) -> dict:
        out = _numbers(fn, *numbers, **options)(c)
        assert out["restarts"], "the case must restart"
        return out | {"restarted": np.isin(np.arange(len(c.losses)), out["restarts"])}

    return ref


def _adswitch(c: Case) -> dict:
    every, keep = c.learner.checkpoint_every, c.learner.max_checkpoints
    numbers = c.num("c1", "c2", "check_scale") | {"levels": c.learner.num_levels}
    out = ref_ns.adswitch_reference(c.losses, c.u, every=every, keep=keep, **numbers)
    return out | {k: np.where(out["good"], 0.0, out[k]) for k in ("mean_bad", "gap_bad")}


def _thompson(c: Case) -> dict:
    """Fed the learner's own posterior samples and coins."""
    T, window = len(c.losses), getattr(c.learner, "window", None)
    numbers = c.num("prior_alpha", "prior_beta")
    numbers["discount"] = float(getattr(c.params, "discount", 1.0))
    theta, coins = c.got["theta"][:T], c.got["coin"][:T]
    return RB.thompson_reference(c.losses, theta, coins, window=window, **numbers)


def _tsallis(c: Case) -> dict:
    lr_scale = float(c.params.lr_scale)
    out = reference_baselines.tsallis_inf_reference(c.losses, c.u, lr_scale=lr_scale)
    eta = lr_scale * 2.0 / np.sqrt(np.arange(len(c.losses)) + 1.0)
    cum = out["cum_loss"]
    return out | {"eta": eta, "cum": cum - cum.min(axis=1, keepdims=True)}


def _flh(c: Case) -> dict:
    """FLH (rate ``sqrt(ln n / (T n))``) or EFLH (rate from the span of the expert's length);
    every slot is used; dead slots are masked out."""
    (T, N), lengths = c.losses.shape, None
    extra: dict[str, Any] = {}
    scale = float(getattr(c.params, "expert_lr_scale", 1.0))
    if hasattr(c.learner, "epsilon"):  # EFLH
        lengths = ref_family.eflh_lengths(T, c.options.get("epsilon", 0.25))  # the default
        assert list(c.learner.lengths) == lengths
        extra["working_set"] = ref_family.eflh_working_set(lengths)

    def rate(i: int) -> float:
        spans = [L for L in lengths if (i - 1) % L == 0] if lengths else [T]
        return scale * math.sqrt(math.log(N) / (min(max(spans), T) * N))

    alpha, capacity = float(c.learner.meta_learning_rate(c.params)), c.learner.num_queries
    extra |= {"capacity": capacity, "alpha": alpha, "rate": rate}
    out = ref_family.flh_reference(c.losses, c.u, **extra)
    alive = out["start"] > 0
    assert alive.sum(axis=1).max() == capacity
    experts = np.where(alive[..., None], out["experts"], 0.0)
    return out | {"experts": experts, "arms": np.where(alive[:T], out["arms"], -1)}


def _eflh_saol(c: Case) -> dict:
    """SAOL's loop on EFLH's lengths (the learner's own, ``eps = 0.25``)."""
    assert list(c.learner.history_lengths) == ref_family.eflh_saol_lengths(len(c.losses), 0.25)
    return _lengths(ref_family.saol_reference)(c)


def _vizier_root() -> Path:
    """OSS Vizier's package folder (``google-vizier==0.1.24``, a test dependency), not imported."""
    spec = importlib.util.find_spec("vizier")
    if spec is None or spec.origin is None:
        pytest.skip("google-vizier is not installed (pip install '.[test]')")
    return Path(spec.origin).parent


@functools.cache
def vizier_ensemble_design():
    """Vizier's ``ensemble_design.py`` (it imports only ``attrs`` and ``numpy``), loaded by path
    without Vizier's ``__init__``."""
    path = _vizier_root() / "_src" / "algorithms" / "ensemble" / "ensemble_design.py"
    return load_script(path, "vizier_ensemble_design")


class FedRandomState(np.random.RandomState):
    """numpy's ``RandomState`` whose ``choice`` draws with the uniform ``u``."""

    u: float = 0.0

    def random_sample(self, size=None):  # choice's one uniform
        return self.u


def _vizier(design: Callable[[Any, Case], Any]):
    """Vizier's ``design(vizier, case)`` stepped through the trials, drawing the arm as
    ``EnsembleDesigner.suggest`` does (``RandomState.choice``) with the learner's uniform,
    updated with ``(arm, reward)``: ``1 - loss`` (gains), ``-loss`` for StABL's loss feedback."""

    def ref(c: Case) -> dict:
        ensemble, rng = design(vizier_ensemble_design(), c), FedRandomState(0)
        out: dict = {"probs": [], "play": [], "obs": [], "played": []}
        negate = c.options.get("feedback") == "loss" and hasattr(ensemble, "play_probs")
        for t, loss in enumerate(c.losses):
            out["probs"].append(np.asarray(ensemble.ensemble_probs))
            if hasattr(ensemble, "play_probs"):
                out["play"].append(ensemble.play_probs)
                out["obs"].append(ensemble.observation_probs)
            rng.u = float(c.u[t, 0])
            out["played"].append(arm := int(rng.choice(loss.shape[0], p=out["probs"][-1])))
            ensemble.update((arm, -loss[arm] if negate else 1.0 - loss[arm]))
        out = {k: np.asarray(v) for k, v in out.items()}
        moved = out["play"] if out["play"].size else out["probs"]
        assert moved.max() > 1.5 / c.losses.shape[1]  # the trials left uniform play
        return out

    return ref


def _adaptive_design(vizier, c: Case):
    lengths, steps = list(c.learner.history_lengths), c.num("base_stepsize", "meta_stepsize")
    arms, naive = list(range(c.learner.num_arms)), c.learner.naive_sampling
    design = vizier.AdaptiveEnsembleDesign
    return design(indices=arms, max_lengths=lengths, naive_sampling=naive, **steps)


def _exp3_design(vizier, c: Case):
    loss_form, arms = c.options.get("feedback") == "loss", list(range(c.learner.num_arms))
    step = float(c.params.stepsize)
    return vizier.EXP3UniformEnsembleDesign(arms, stepsize=step, use_loss_formulation=loss_form)


def _ix_design(vizier, c: Case):
    arms = list(range(c.learner.num_arms))
    return vizier.EXP3IXEnsembleDesign(indices=arms, stepsize=float(c.params.stepsize))


# --- Further checks of single families -------------------------------------------------------
def _final_window(c: Case, expected: dict) -> None:
    """SW-UCB's ring buffer holds exactly the last tau rounds' arms."""
    tail = np.sort(expected["played"][-c.learner.window :])
    np.testing.assert_array_equal(np.sort(c.got["window_arms"][-1]), tail)


def _uniform_at_full_exploration(c: Case, expected: dict) -> None:
    """EXP3 at ``gamma = 1`` plays uniformly, and its rate (``1 - gamma`` under the root) is 0:
    its weights stay uniform."""
    if float(c.params.gamma) == 1.0:
        for name in ("play_probs", "weights"):
            np.testing.assert_allclose(c.got[name], 1.0 / c.losses.shape[1], rtol=1e-12)


def _klucb_below_hoeffding(c: Case, expected: dict) -> None:
    """Pinsker (``kl(p, q) >= 2 (q - p)^2``): at ``c = 0`` the index is at most Hoeffding's,
    ``mean + sqrt(log t / (2 N))`` on the same counts, and below it in most rounds."""
    if float(c.params.c) != 0.0:
        return
    T, n = c.losses.shape
    played, counts = c.got["played"], c.got["counts"][n:T]
    rewards = np.zeros((T, n))
    rewards[np.arange(T), played] = 1.0 - c.losses[np.arange(T), played]
    sums = np.cumsum(rewards, axis=0)[n - 1 : T - 1]  # before rounds n, ..., T - 1
    t = np.arange(n, T)[:, None]
    hoeffding = sums / counts + np.sqrt(np.log(t) / (2.0 * counts))
    index = c.got["index"][n:T]
    assert np.all(index <= hoeffding + 1e-12)
    assert np.mean(index < hoeffding - 1e-3) > 0.5


def _obs_is_mix(c: Case, expected: dict) -> None:
    np.testing.assert_array_equal(c.got["obs"], c.got["mix"])  # one query: P(t) is the mix


def _adswitch_acts(c: Case, expected: dict) -> None:
    """Every step runs (the rows' constants are small enough to act within T = 150): evictions,
    checks of bad arms, new episodes."""
    assert expected["episode"][-1] > 1
    assert (~expected["good"]).any() and expected["pending"].any()


def _master_restarts(c: Case, expected: dict) -> None:
    """A failed test opens a block; the paper's rho-hat fails no test within 150 rounds."""
    assert np.all(c.got["block"] >= expected["restart"])
    assert expected["restart"].any() == (float(c.params.test_scale) < 1e-3)


def _tsallis_acts(c: Case, expected: dict) -> None:
    assert expected["estimates"].min() < 0.0 < expected["estimates"].max()  # B_t at work


def _thompson_learns(c: Case, expected: dict) -> None:
    assert expected["alpha"][-1].sum() > expected["alpha"][0].sum()


def _above(name: str, limit: float, below: bool | None = None):
    """``mutes``: a row with ``values[name] > limit`` mutes an expert; one at or below does
    not (``below=False``) or may (``None``)."""
    return lambda values: True if values.get(name, 1.0) > limit else below


PLAYED = ("played", "played", EXACT)
ARMS = ("arms", "arms", EXACT)
WEIGHTS = (PLAYED, ("play_probs", "play_probs", 1e-9), ("weights", "weights", 1e-9))
STABL: tuple = (PLAYED, ("second", "observed", EXACT), ("v", "expert_probs", 1e-9, FAINT))
STABL += (("mix", "play_probs", 1e-9), ("obs", "obs_probs", 1e-9), ("w", "meta_weights", 1e-9))
STABL += (("loss", "suffered", 1e-12), ("expected_loss", "expected", 1e-9))
STABL += (("muted", "muted", EXACT),)
SAOL: tuple = (("v", "expert_probs", 1e-9, FAINT), ("mix", "play_probs", 1e-9, FAINT))
SAOL += (("w", "meta_weights", 1e-9, FAINT), ("muted", "muted", EXACT))
ANYTIME: tuple = (PLAYED, ("second", "observed", EXACT), ("active", "num_active", EXACT))
ANYTIME += (("v", "expert_probs", 1e-9, FAINT), ("p", "meta_probs", 1e-9, FAINT))
ANYTIME += (("mix", "play_probs", 1e-9, FAINT), ("obs", "obs_probs", 1e-9, FAINT))
ANYTIME += (("muted", "muted", EXACT),)
RATES = (("eta'", "expert_rates", 1e-9, FAINT), ("eta", "meta_rates", 1e-9, FAINT))
UCB: tuple = (PLAYED, ("play_probs", "one_hot", EXACT), ("counts", "counts", 1e-9, FAINT))
UCB += (("index", "index", 1e-9),)
CD_RTOL = 2e-5  # the change detectors run in float32
DETECTOR: tuple = (PLAYED, ("counts", "counts", EXACT), ("restarted", "restarted", EXACT))
DETECTOR += (("index", "index", CD_RTOL),)
REXP3 = (PLAYED, ("play_probs", "play_probs", CD_RTOL), ("restarted", "restarted", EXACT))
ADSWITCH: tuple = (PLAYED, *((k, k, EXACT) for k in ("episode", "good", "pending")))
ADSWITCH += (("mean_bad", "mean_bad", 1e-9), ("gap_bad", "gap_bad", 1e-9))
MASTER = (PLAYED, ("order", "order", EXACT), ("optimistic", "optimistic", 1e-9))
THOMPSON = (PLAYED, ("alpha", "alpha", 1e-9), ("beta", "beta", 1e-9))
TSALLIS: tuple = (PLAYED, ("play_probs", "weights", 1e-9), ("estimate", "estimates", 1e-9))
TSALLIS += (("cum", "cum", 1e-9, 1e-9), ("eta", "eta", 1e-15))
FLH: tuple = (PLAYED, *((k, k, EXACT) for k in ("start", "expert")), ("slot_arms", "arms", EXACT))
FLH += (("meta", "meta", 1e-9), ("experts", "experts", 1e-9))
VIZIER = (PLAYED, ("play_probs", "probs", 1e-6))
FLOAT32: dict[str, Any] = {"T": 300, "N": 4, "x64": False, "uniforms": 1}
FLOAT32["losses"] = lambda T, N: drifting_losses(T, N, 5, low=0.5, best=0.3)  # changes of 0.6
SMALL: dict[str, Any] = {"T": 64, "N": 5}
NEW_LENGTHS: dict[str, Any] = {"T": 80, "N": 4, "uniforms": QUERIES, "mutes": lambda v: True}
NEW_LENGTHS["losses"] = lambda T, N: drifting_losses(T, N, 2, low=0.3, best=0.3)
ON_VIZIER: dict[str, Any] = {"uniforms": 1}
ON_VIZIER["losses"] = lambda T, N: drifting_losses(T, N, T, 0.5, 0.5)
MUTES_ABOVE_10 = _above("meta_lr_scale", 10)
F = Family
RB, RF = reference_baselines, ref_family
# fmt: off
FLH_QUERIES: dict[str, Any] = {"uniforms": lambda learner: 1 + learner.num_queries, "T": 80, "N": 4}
THOMPSONS = ("thompson", "discounted_thompson", "sw_thompson")
FAMILIES = {family.learner: family for family in [
    F("exp3", _rec_weights, _numbers(reference.exp3_reference, "gamma", "lr_scale",
                                     statics=("feedback",)),
      (PLAYED, ("play_probs", "play_probs", 1e-10), ("weights", "weights", 1e-10)), 1,
      also=_uniform_at_full_exploration),
    *(F(name, _rec_stabl, _stabl, STABL, 2, mutes=MUTES_ABOVE_10)
      for name in ("stabl", "stabl_rate_grid")),
    F("hedge", _rec_weights, _numbers(RF.hedge_reference, "lr_scale"),
      (ARMS, ("weights", "weights", 1e-9, FAINT)), 1),
    F("saol_hedge", _rec_saol, _lengths(RF.saol_hedge_reference, ("round_offset",)),
      (ARMS, *SAOL), 1, mutes=_above("meta_lr_scale", 2)),
    F("saol", _rec_saol, _lengths(RF.saol_reference), (ARMS, *SAOL), QUERIES,
      mutes=_above("meta_lr_scale", 2)),
    F("stabl_one_query", _rec_stabl, functools.partial(_stabl, observation="played"),
      (PLAYED, *SAOL), 1, mutes=MUTES_ABOVE_10, also=_obs_is_mix),
    F("stabl_anytime", _rec_anytime, _lengths(RF.stabl_anytime_reference, ("feedback",)),
      ANYTIME, 2, mutes=_above("meta_lr_scale", 5)),
    # the cap eta <= 1/(2 E_t) rules muting out at meta scale 1
    F("stabl_adaptive", _rec_adaptive, _lengths(RF.stabl_adaptive_reference, ("feedback",)),
      (*ANYTIME, *RATES), 2, mutes=_above("meta_lr_scale", 1, False)),
    F("exp3s", _rec_weights, _numbers(RB.exp3s_reference, "gamma", "alpha", "lr_scale"),
      WEIGHTS, 1),
    F("exp3_ix", _rec_weights, _exp3_ix, WEIGHTS, 1),
    F("d_ucb", _rec_ucb, _index_policy(RB.d_ucb_reference, "discount", "explore_scale",
                                       statics=("xi",)), UCB),
    F("sw_ucb", _rec_ucb, _index_policy(RB.sw_ucb_reference, "explore_scale",
                                        statics=("window", "xi")), UCB, also=_final_window),
    F("ucb1", _rec_ucb, _index_policy(RB.ucb1_reference, "explore_scale"), UCB),
    F("klucb", _rec_ucb, _index_policy(RB.klucb_reference, "c"), UCB,
      also=_klucb_below_hoeffding),
    F("sw_klucb", _rec_ucb, _index_policy(RB.sw_klucb_reference, "explore_scale",
                                          statics=("window",)), UCB),
    F("d_klucb", _rec_ucb, _index_policy(RB.d_klucb_reference, "discount", "explore_scale"), UCB),
    F("cusum_ucb", _rec_ucb, _detector(ref_ns.cusum_ucb_reference, "threshold", "drift", "alpha",
                                       ints=("warmup",), statics=("test_every",)),
      DETECTOR, **FLOAT32),
    F("m_ucb", _rec_ucb, _detector(ref_ns.m_ucb_reference, "threshold", "gamma",
                                   statics=("window",), uniforms=False), DETECTOR, **FLOAT32),
    F("glr_klucb", _rec_ucb, _detector(
        ref_ns.glr_klucb_reference, "delta", "alpha", "log_scale", "loglog_scale",
        "threshold_scale", uniforms=False,
        statics=("subsample", "test_every", "max_splits", "restart", "alpha_schedule"),
    ), DETECTOR, **FLOAT32),
    F("rexp3", _rec_ucb, _detector(ref_ns.rexp3_reference, "gamma", ints=("batch",)), REXP3,
      **FLOAT32),
    F("adswitch", _rec_adswitch, _adswitch, ADSWITCH,
      lambda learner: learner.num_arms * learner.num_levels,
      losses=lambda T, N: drifting_losses(T, N, 7), also=_adswitch_acts),
    F("master", _rec_master,
      _numbers(ref_ns.master_reference, "delta", "test_scale", "explore_scale"), MASTER, 8,
      also=_master_restarts),
    *(F(name, _rec_thompson, _thompson, THOMPSON, also=_thompson_learns, **SMALL)
      for name in THOMPSONS),
    F("tsallis_inf", _rec_tsallis, _tsallis, TSALLIS, 1, also=_tsallis_acts, **SMALL),
    *(F(name, _rec_flh, _flh, FLH, **FLH_QUERIES) for name in ("flh", "eflh")),
    F("eflh_saol", _rec_saol, _eflh_saol, (ARMS, *SAOL), **NEW_LENGTHS),
    F("stabl_vizier", _rec_vizier, _vizier(_adaptive_design),
      (*VIZIER, ("play", "play", 1e-6), ("obs", "obs", 1e-6)), **ON_VIZIER),
    F("exp3_vizier", _rec_vizier, _vizier(_exp3_design), VIZIER, T=600, N=7, **ON_VIZIER),
    # Exp3-IX's rounding grows with the trials (test_exp3_ix_vizier_from_its_state goes on)
    F("exp3_ix_vizier", _rec_vizier, _vizier(_ix_design), VIZIER, N=7, **ON_VIZIER),
]}
DOUBLED = tuple(20 * 2**k for k in range(8))  # 20, 40, ..., 2560: the authors' lengths
CUSUM = dict(threshold=3.0, drift=0.05, alpha=0.1, warmup=10.0)
GLR = dict(subsample=5, test_every=5, max_splits=8)
THESIS_F = dict(alpha=0.07, delta=0.05, log_scale=1.0, loglog_scale=3.0)  # log x + 3 log log x
EXP3S: tuple[dict, ...] = ({}, dict(gamma=0.3, alpha=0.02), dict(lr_scale=4.0, alpha=0.05))
EXP3S += (dict(alpha=0.0, gamma=0.1),)
# EXP3 at Exp3-IX's rate without implicit exploration (gamma = 0: l~ = l / p), EXP3's rate
# times sqrt(2); and with Exp3.S's gains, exploration gamma and rate gamma / K (alpha = 0)
EXP3_TWINS = [({}, dict(lr_scale=math.sqrt(2.0))), (dict(feedback="reward", gamma=0.1), dict(
    lr_scale=(0.1 / 6) / math.sqrt(math.log(6) * 0.9 / (150 * 6))))]
ROWS = [  # (family, options, values): one row per code path; rows of equal learners share
    # one compiled program (the values are traced params)
    *(("exp3", {}, v) for v in ({}, dict(gamma=0.3), dict(gamma=1.0))),  # gamma options traced
    ("exp3", dict(feedback="reward", gamma=0.1), {}),
    *(("exp3", o, v) for o, v in EXP3_TWINS),  # Exp3-IX's and Exp3.S's twins below
    ("stabl", {}, {}),
    ("stabl", dict(observation="uniform", round_offset=1, history_lengths=(3, 7, 20)), {}),
    ("stabl", dict(feedback="reward", expert_c="2logT", history_lengths=(4, 16, 64)),
     dict(expert_lr_scale=5.0)),
    ("stabl", dict(history_lengths=(2, 4, 8, 16)), dict(meta_lr_scale=40.0)),  # forces muting
    ("stabl_rate_grid", dict(rate_grid=(1.0, 16.0, 256.0), scale_meta=False,
                             history_lengths=(4, 16, 64)), {}),
    ("stabl_rate_grid", dict(rate_grid=(0.5, 30.0), feedback="reward"), dict(meta_lr_scale=20.0)),
    ("hedge", {}, dict(lr_scale=3.0)),
    # one length covering the horizon: p = 1, r = 0, the lone meta weight never moves and the
    # expert is EXP3 (Hedge for SAOL-Hedge) fed the observed arm(s)
    *((name, dict(history_lengths=(150,)), {}) for name in ("stabl", "saol", "saol_hedge")),
    # round_offset 1, and muting (eta = 8 on L = 2: 1 + eta r <= 0 once r <= -1/8)
    ("saol_hedge", dict(history_lengths=(2, 5, 16), round_offset=1),
     dict(meta_lr_scale=16.0, expert_lr_scale=10.0)),
    ("saol", dict(feedback="reward", history_lengths=(3, 7, 20), round_offset=1),
     dict(expert_lr_scale=4.0)),
    ("saol", dict(history_lengths=(2, 4, 16)), dict(meta_lr_scale=4.0)),  # eta = 2 on L <= 4
    ("stabl_one_query", dict(feedback="reward", history_lengths=(3, 7, 20), round_offset=1),
     dict(expert_lr_scale=5.0)),
    # muting: v_k(x)/mix(x) > 1 + 1/(eta_k l(x)) once experts disagree
    ("stabl_one_query", dict(history_lengths=(2, 4, 8, 16)),
     dict(meta_lr_scale=20.0, expert_lr_scale=10.0)),
    # the default lengths (32, 64, 128): B_t goes 1 -> 2 -> 3 at t = 32, 64
    ("stabl_anytime", dict(feedback="reward"), dict(expert_lr_scale=8.0, meta_lr_scale=0.5)),
    # muting: 2 B_t eta > 1 right after restarts
    ("stabl_anytime", dict(history_lengths=(2, 5, 11, 30)),
     dict(meta_lr_scale=10.0, expert_lr_scale=10.0)),
    ("stabl_adaptive", dict(feedback="reward"), dict(expert_lr_scale=3.0)),
    ("stabl_adaptive", dict(history_lengths=(2, 5, 11, 30)),
     dict(meta_lr_scale=50.0, expert_lr_scale=3.0)),
    ("stabl_adaptive", dict(history_lengths=(150,)), {}),  # one expert: self-confident EXP3
    # Exp3.S: Section 8's tuning, no switches, without sharing (alpha = 0: Exp3 with gains)
    *(("exp3s", {}, v) for v in EXP3S),
    ("exp3s", dict(num_switches=0), {}),
    *(("exp3_ix", {}, v) for v in ({}, dict(lr_scale=6.0, ix_scale=0.5), dict(ix_scale=0.0))),
    ("exp3_ix", {}, dict(lr_scale=3.0, ix_scale=0.0)),
    *(("d_ucb", {}, v) for v in ({}, dict(discount=1.0))),  # gamma = 1 - sqrt(3/T)/4, xi = 1/2
    ("d_ucb", dict(xi=0.3), dict(discount=0.8, explore_scale=0.4)),
    ("sw_ucb", {}, {}),  # tau = floor(2 sqrt(T log T / 3)) = 31, xi = 0.6
    ("sw_ucb", dict(xi=2.0), dict(explore_scale=0.5)),  # xi is traced: the default's program
    ("sw_ucb", dict(window=7), dict(explore_scale=0.3)),
    ("sw_ucb", dict(window=150, xi=2.0), {}),  # the whole horizon: D-UCB's twin below
    *(("ucb1", {}, v) for v in ({}, dict(explore_scale=0.3), dict(explore_scale=2.0))),
    *(("klucb", {}, v) for v in ({}, dict(c=3.0), dict(c=1.0))),
    # the window over the whole horizon (SW-UCB's rows slide it): kl-UCB's twin below
    *(("sw_klucb", dict(window=150), v) for v in ({}, dict(explore_scale=2.0),
                                                  dict(explore_scale=0.5))),
    ("d_klucb", {}, {}),
    *(("d_klucb", {}, dict(discount=d, explore_scale=e)) for d, e in [(0.8, 0.4), (1.0, 1.5)]),
    ("d_klucb", {}, dict(discount=1.0)),  # kl-UCB's twin below
    ("cusum_ucb", dict(warmup=50), CUSUM),
    ("cusum_ucb", dict(warmup=10), dict(threshold=3.0)),
    ("cusum_ucb", dict(warmup=50, test_every=7), CUSUM),
    ("m_ucb", dict(window=20), dict(threshold=4.0, gamma=0.15)),
    # the experiments' f(x) = 3 log x and beta = log(3 n^1.5 / delta); Besson's thesis reading
    # local restarts and the exact test (every split, every sample) with every split kept
    *(("glr_klucb", dict(restart="local", subsample=1, test_every=1, max_splits=300), v)
      for v in (dict(delta=0.3, alpha=0.35), THESIS_F)),
    # global restarts, subsampled; f(x) = log x, beta = log(n^1.5/delta), alpha_k = alpha sqrt(1+k)
    ("glr_klucb", dict(GLR, restart="global", alpha_schedule="sqrt_detections"),
     dict(delta=0.05, log_scale=1.0, threshold_scale=1.0, alpha=0.3)),
    *(("rexp3", {}, v) for v in (dict(gamma=0.2, batch=37.0), {})),
    ("adswitch", dict(checkpoint_every=1, max_checkpoints=150),
     dict(c1=0.1, c2=0.02, check_scale=30)),
    # evictions of old checkpoints; frequent checks at every level, some obligations never met
    *(("adswitch", dict(checkpoint_every=2, max_checkpoints=10),
       dict(c1=c1, c2=c2, check_scale=s)) for c1, c2, s in [(0.3, 0.05, 60), (0.1, 0.05, 500)]),
    *(("master", {}, v) for v in ({}, dict(test_scale=2e-4))),
    ("master", {}, dict(test_scale=1e-4, explore_scale=0.5, delta=0.1)),
    *(("thompson", {}, v) for v in ({}, dict(prior_alpha=0.5, prior_beta=2.0))),
    *(("discounted_thompson", {}, v) for v in ({}, dict(discount=0.7, prior_alpha=0.3))),
    *(("sw_thompson", dict(window=10), v) for v in ({}, dict(prior_beta=0.5))),
    *(("tsallis_inf", {}, dict(lr_scale=s)) for s in (1.0, 2.0, 0.3)),
    *(("flh", {}, v) for v in ({}, dict(meta_lr_scale=4.0, expert_lr_scale=3.0))),
    ("eflh", {}, {}),  # epsilon = 0.25, the default
    # SAOL's restarted weights at meta scale 4: some factors 1 + eta r hit 0 at short lengths
    ("eflh_saol", {}, dict(meta_lr_scale=4.0)),
    ("stabl_vizier", dict(history_lengths=DOUBLED, naive_sampling=True, horizon=700), {}),
    ("stabl_vizier", dict(history_lengths=(3, 7, 50), horizon=601),
     dict(base_stepsize=0.5, meta_stepsize=2.0)),
    ("stabl_vizier", dict(history_lengths=(1, 2, 5, 13, 40), feedback="loss", num_arms=5,
                          horizon=500), {}),
    ("stabl_vizier", dict(history_lengths=(16, 64, 256), naive_sampling=True, feedback="loss",
                          num_arms=8, horizon=530), dict(base_stepsize=0.2, meta_stepsize=5.0)),
    ("stabl_vizier", dict(history_lengths=(100,), num_arms=30, horizon=500),
     dict(base_stepsize=3.0)),
    *(("exp3_vizier", dict(feedback=f), dict(stepsize=s)) for f, s in [("reward", 1.0),
                                                                        ("loss", 1.0)]),
    ("exp3_vizier", dict(feedback="reward"), dict(stepsize=0.3)),
    *(("exp3_ix_vizier", {}, dict(stepsize=s)) for s in (1.0, 0.25)),
]
# fmt: on


def _id(row) -> str:
    family, options, values = row
    items = {k: v for k, v in {**options, **values}.items() if k not in ("num_arms", "horizon")}
    return ",".join([family, *(f"{k}={v}" for k, v in items.items())]).replace(" ", "")


_RUNS: dict[str, tuple[Case, dict]] = {}


def run_cached(row) -> tuple[Case, dict]:
    """:func:`run_row` of ``row`` once per session."""
    if (key := _id(row)) not in _RUNS:
        _RUNS[key] = run_row(FAMILIES[row[0]], *row[1:])
    return _RUNS[key]


@pytest.mark.parametrize("row", ROWS, ids=map(_id, ROWS))
def test_matches_reference(row):
    run_cached(row)


TWINS = [  # (row, twin row, records compared, rtol): limits that are another learner
    # kl-UCB at c = 0, bit for bit, without forgetting
    (("sw_klucb", dict(window=150), {}), ("klucb", {}, {}), ("index",), EXACT),
    (("d_klucb", {}, dict(discount=1.0)), ("klucb", {}, {}), ("index",), EXACT),
    # D-UCB with gamma = 1, xi = 1/2 is UCB1; and SW-UCB over the whole horizon: paddings
    # 2 sqrt(xi_D log t / N) and sqrt(xi_S log t / N) agree for xi_S = 4 xi_D
    (("d_ucb", {}, dict(discount=1.0)), ("ucb1", {}, {}), ("index",), 1e-15),
    (("d_ucb", {}, dict(discount=1.0)), ("sw_ucb", dict(window=150, xi=2.0), {}),
     ("index", "counts"), 1e-12),
    (("exp3_ix", {}, dict(ix_scale=0.0)), ("exp3", *EXP3_TWINS[0]), ("weights",), 1e-12),
    (("exp3s", {}, EXP3S[-1]), ("exp3", *EXP3_TWINS[1]), ("weights", "play_probs"), 1e-12),
]  # fmt: skip


@pytest.mark.parametrize("twins", TWINS, ids=lambda t: f"{_id(t[0])}={_id(t[1])}")
def test_a_limit_is_its_twin(twins):
    """The same arms every round and the compared records equal (``rtol`` 0) or to rounding,
    on the same draws (the rows of :func:`test_matches_reference`, run once)."""
    row, twin, compared, rtol = twins
    got, want = run_cached(row)[0].got, run_cached(twin)[0].got
    np.testing.assert_array_equal(got["arms"], want["arms"])
    for key in compared:
        np.testing.assert_allclose(got[key], want[key], rtol=rtol, atol=0.0, err_msg=key)
    if row[0] == "exp3_ix":  # the weights moved
        assert np.ptp(got["weights"][-1]) > 0.1


def test_exp3_ix_vizier_from_its_state():
    """Exp3-IX amplifies rounding at ``stepsize = 1`` (weights 1e-15 apart are O(1) apart after
    450 trials), so past the free-running rows' 150 trials each trial starts from Vizier's own
    state (``log_probs = log softmax(w)``): distribution, arm and update agree to 1e-6."""
    num_arms, trials = 7, 600
    losses = drifting_losses(trials, num_arms, 12, low=0.5, best=0.5)
    with jax.enable_x64(True):
        learner = make("exp3_ix_vizier", num_arms=num_arms, horizon=trials, dtype="float64")
        fresh = learner.init(jax.random.key(0))
        design = vizier_ensemble_design().EXP3IXEnsembleDesign(indices=list(range(num_arms)))
        step = jax.jit(learner.step)
        uniform = jax.jit(lambda k: sampling.uniforms(k, 1, jnp.float64)[0])
        rng = FedRandomState(0)
        for t, key in enumerate(jax.random.split(jax.random.key(5), trials)):
            w = np.asarray(design._log_weights)
            log_probs = jnp.asarray(w - np.logaddexp.reduce(w))
            state, info = step(fresh.replace(t=jnp.int32(t), log_probs=log_probs), losses[t], key)
            probs = np.asarray(design.ensemble_probs)
            np.testing.assert_allclose(info.play_probs, probs, rtol=1e-6, err_msg=f"trial {t}")
            rng.u = float(uniform(key))
            arm = int(rng.choice(num_arms, p=probs))
            assert arm == int(info.arms[0]), f"trial {t}: Vizier drew {arm}, ours {info.arms[0]}"
            design.update((arm, 1.0 - float(losses[t, arm])))
            np.testing.assert_allclose(np.exp(state.log_probs), design.ensemble_probs, rtol=1e-6)
    assert probs.max() > 1.5 / num_arms


@pytest.fixture(scope="module")
def vizier_reward():
    """Vizier's ``ObjectiveRewardGenerator`` and ``pyvizier``: ``ensemble_designer.py`` and its
    curve converters loaded by path, unmodified, their imports of absent packages (serving
    only designers and multi-objective curves) stubbed while they load."""
    root = _vizier_root()
    import vizier.pyvizier as vz

    stubs = {
        "vizier.pyvizier.converters": types.ModuleType("converters"),
        "vizier.pyvizier.multimetric.xla_pareto": types.ModuleType("xla_pareto"),
        "vizier.algorithms": types.SimpleNamespace(Designer=object),
    }
    saved = {name: sys.modules.get(name) for name in [*stubs, "vizier.benchmarks.analyzers"]}

    def load(name: str, relative: str) -> types.ModuleType:
        return load_script(root / relative, name)

    try:
        sys.modules.update(stubs)
        curves = load("vizier_convergence_curve", "_src/benchmarks/analyzers/convergence_curve.py")
        sys.modules["vizier.benchmarks.analyzers"] = curves
        designer = load("vizier_ensemble_designer", "_src/algorithms/ensemble/ensemble_designer.py")
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return designer.ObjectiveRewardGenerator, vz


def _vizier_rewards(vizier_reward, objectives: np.ndarray, reward_lambda: float) -> np.ndarray:
    """Vizier's generator fed one completed trial per call, as ``EnsembleDesigner.update``."""
    generator_cls, vz = vizier_reward
    problem = vz.ProblemStatement(
        metric_information=[vz.MetricInformation("f", goal=vz.ObjectiveMetricGoal.MINIMIZE)]
    )
    generator = generator_cls(problem, reward_regularization=float(reward_lambda))
    out = []
    for f in objectives:
        trial = vz.Trial(final_measurement=vz.Measurement(metrics={"f": float(f)}))
        out.extend(generator([trial]))
    return np.asarray(out)


@pytest.mark.parametrize("reward_lambda", [0.0, 0.01, 0.5])
def test_vizier_reward_matches_objective_reward_generator(vizier_reward, reward_lambda):
    """:func:`~stabl_jax.envs.hpo.vizier_reward` against Vizier's class on 300 objectives
    (noisy values below 0 and above 1, repeats, a NaN), in float64."""
    from stabl_jax.envs.hpo import vizier_reward as ours

    rng = np.random.default_rng(3)
    f = np.concatenate([rng.uniform(-0.05, 1.05, 150), np.repeat(rng.uniform(size=50), 2)])
    f[200] = np.nan
    with warnings.catch_warnings():  # Vizier's own curve code warns on the NaN (an all-NaN
        # slice in its ``convergence_curve.py``): its behaviour, silenced here alone
        warnings.filterwarnings("ignore", "All-NaN axis encountered", RuntimeWarning)
        expected = _vizier_rewards(vizier_reward, f, reward_lambda)
    with jax.enable_x64(True):
        previous = np.concatenate([[1.0], f[:-1]])
        got = np.asarray(ours(previous, f, np.arange(f.size), reward_lambda))
    assert np.count_nonzero(expected) > 50  # the comparison is not all zeros
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("num_queries", [1, 2])
def test_hpo_env_vizier_reward_matches_objective_reward_generator(vizier_reward, num_queries):
    """``HPOEnv(reward="vizier")`` over 40 rounds of random queries gives the rewards of Vizier's
    class fed the observations in order, and the loss ``1 - min(r, 1)``."""
    from stabl_jax.envs.bbob import BBOBFunction
    from stabl_jax.envs.hpo import HPOEnv

    env = HPOEnv(
        BBOBFunction(function_id=1, dim=3, normalize=True, noise_std=0.01),
        reward="vizier",
        reward_lambda=0.01,
    )
    params = env.sample_params(jax.random.key(0))
    state = env.init(params)
    evaluate = jax.jit(env.evaluate)
    rng = np.random.default_rng(0)
    observed, reward, loss = [], [], []
    for t in range(40):
        arms = jnp.asarray(rng.integers(env.num_arms, size=num_queries), jnp.int32)
        state, lt, info = evaluate(params, state, t, arms, jax.random.key(t))
        observed.append(np.asarray(info.observed, np.float64))
        reward.append(np.asarray(info.reward, np.float64))
        loss.append(np.asarray(lt, np.float64))
    observed, reward, loss = (np.concatenate(a) for a in (observed, reward, loss))
    expected = _vizier_rewards(vizier_reward, observed, 0.01)
    assert np.count_nonzero(expected) > 3
    np.testing.assert_allclose(reward, expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(loss, 1.0 - np.minimum(expected, 1.0), atol=1e-6)


def test_default_tunings_follow_the_papers():
    """The constructors' defaults, against the papers' formulas of the references."""
    T, N = 150, 6
    for switches in (3, 0):  # Exp3.S, Section 8: alpha = 1/T, gamma from S = num_switches + 1
        exp3s = make("exp3s", num_arms=N, horizon=T, num_switches=switches)
        assert exp3s.alpha == pytest.approx(1.0 / T)
        gamma = reference_baselines.exp3s_gamma(N, T, switches + 1)
        assert exp3s.gamma == pytest.approx(gamma, rel=1e-15)
    for name in ("d_ucb", "d_klucb"):  # gamma = 1 - sqrt(3/T)/4
        discount = reference_baselines.default_discount(T, 3)
        assert make(name, num_arms=N, horizon=T).discount == pytest.approx(discount, rel=1e-15)
    for name in ("sw_ucb", "sw_klucb"):  # tau = floor(2 sqrt(T log T / 3))
        window = make(name, num_arms=N, horizon=T).window
        assert window == reference_baselines.default_window(T, 3) == 31
    assert make("klucb", num_arms=N, horizon=T).c == 0.0  # the papers' simulations
    assert make("master", num_arms=N, horizon=T).num_orders == 8  # blocks 0..6: 127 rounds
    saol, one_query = (make(name, num_arms=N, horizon=T) for name in ("saol", "stabl_one_query"))
    assert saol.num_queries == 1 + saol.num_experts and one_query.num_queries == 1
    with jax.enable_x64(True):
        flh = make("flh", num_arms=4, horizon=80, dtype="float64")
        for scale in (1.0, 4.0):
            alpha = flh.meta_learning_rate(flh.default_params.replace(meta_lr_scale=scale))
            want = scale * math.sqrt(8 * math.log(80) / 80)
            assert float(alpha) == pytest.approx(want, rel=1e-15)
