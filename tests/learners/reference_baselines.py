"""Independent float64 NumPy loops of the one-query baselines, written from their papers
(conventions of :mod:`tests.learners.reference`; nothing from ``stabl_jax``):

- :func:`exp3s_reference` — Exp3.S, Auer, Cesa-Bianchi, Freund and Schapire, SIAM J. Comput.
  32(1), 2002, Section 8 (rewards ``x = 1 - l``); :func:`exp3_ix_reference` — Exp3-IX, Neu,
  NeurIPS 2015, Algorithm 1 and Theorem 1.
- Six deterministic index policies (rewards ``x = 1 - l``), the statistics recomputed from the
  whole history every round, the kl-UCB index bisected to the last bit; an arm never played
  (in the window) has index ``+inf`` (the first ``K`` rounds play every arm once); ties go to
  the lowest index: :func:`ucb1_reference` — Auer, Cesa-Bianchi and Fischer, Machine Learning
  47, 2002, Fig. 1; :func:`klucb_reference` — Garivier and Cappé, COLT 2011, Algorithm 1
  (Bernoulli); :func:`d_ucb_reference`, :func:`sw_ucb_reference` — Garivier and Moulines, ALT
  2011, Algorithms 1 and 2 (``B = 1``), their tunings :func:`default_discount`,
  :func:`default_window`; :func:`d_klucb_reference`, :func:`sw_klucb_reference` — their
  statistics read by the kl-UCB index (the variants compared by Besson et al., JMLR 2022).
- :func:`tsallis_inf_reference` — Tsallis-INF, Zimmert and Seldin, JMLR 2021, Algorithm 1
  (1/2-Tsallis entropy, reduced-variance estimator), normalised by Brent's method.
- :func:`thompson_reference` — Agrawal and Goyal, COLT 2012, Algorithm 2 (Bernoulli trials),
  discounted (Raj and Kalyani, arXiv 2017) or over a sliding window (Trovò, Paladino, Restelli
  and Gatti, JAIR 2020), fed the learner's samples ``theta[t]`` and coins ``coins[t]``;
  :func:`argmax_probabilities_reference` — ``P(i = argmax_j theta_j)`` by adaptive quadrature
  of ``int_0^1 prod_{j != i} F_j(F_i^{-1}(u)) du``.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from scipy import integrate, optimize, stats

from tests.learners.reference import draw, record, stack


def exp3s_gamma(num_arms: int, horizon: int, hardness: int) -> float:
    """Section 8's ``gamma = min(1, sqrt(K (S ln(K T) + e) / ((e - 1) T)))``, ``S`` bounding the
    hardness ``1 + #switches`` of the compared action sequence."""
    k, t, s = num_arms, horizon, hardness
    return min(1.0, math.sqrt(k * (s * math.log(k * t) + math.e) / ((math.e - 1.0) * t)))


def exp3s_reference(losses, u, *, gamma, alpha, lr_scale=1.0):
    """Exp3.S from ``w_i(1) = 1``: ``p_i(t) = (1 - gamma) w_i(t) / W(t) + gamma / K``; draw
    ``i_t ~ p(t)``; ``x^_j(t) = x_j(t) / p_j(t)`` for ``j = i_t``, else 0; ``w_j(t+1) = w_j(t)
    exp(lr_scale gamma x^_j(t) / K) + (e alpha / K) W(t)``. Returns ``played`` (T,),
    ``play_probs`` (T, K) and the normalised ``weights`` (T+1, K)."""
    (T, K), w, rec = losses.shape, np.ones(losses.shape[1]), defaultdict(list)
    for t in range(T):
        W = w.sum()
        p = (1.0 - gamma) * w / W + gamma / K
        i = draw(p, u[t, 0])
        record(rec, weights=w / W, play_probs=p, played=i)
        x_hat = np.zeros(K)
        x_hat[i] = (1.0 - losses[t, i]) / p[i]
        w = w * np.exp(lr_scale * gamma * x_hat / K) + math.e * alpha / K * W
    rec["weights"].append(w / w.sum())
    return stack(rec)


def exp3_ix_rates(num_arms: int, horizon: int) -> tuple[float, float]:
    """Theorem 1's ``(eta, gamma)``: ``eta = 2 gamma = sqrt(2 ln K / (K T))``."""
    eta = math.sqrt(2.0 * math.log(num_arms) / (num_arms * horizon))
    return eta, eta / 2.0


def exp3_ix_reference(losses, u, *, eta, gamma):
    """Exp3-IX from ``w_{1,i} = 1``: ``p_t = w_t / W_t``; draw ``I_t ~ p_t``; ``l~_{t,i} =
    l_{t,i} 1{I_t = i} / (p_{t,i} + gamma)``; ``w_{t+1,i} = w_{t,i} exp(-eta l~_{t,i})``.
    Returns ``played`` (T,), ``play_probs`` (T, K) and ``weights`` (T+1, K), normalised."""
    (T, K), w, rec = losses.shape, np.ones(losses.shape[1]), defaultdict(list)
    for t in range(T):
        p = w / w.sum()
        i = draw(p, u[t, 0])
        record(rec, weights=p, play_probs=p, played=i)
        l_tilde = np.zeros(K)
        l_tilde[i] = losses[t, i] / (p[i] + gamma)
        w = w * np.exp(-eta * l_tilde)
    rec["weights"].append(w / w.sum())
    return stack(rec)


def default_discount(horizon: int, num_changes: int) -> float:
    """D-UCB's ``gamma = 1 - (4 B)^{-1} sqrt(Upsilon_T / T)`` with ``B = 1``."""
    return 1.0 - 0.25 * math.sqrt(num_changes / horizon)


def default_window(horizon: int, num_changes: int) -> int:
    """SW-UCB's ``tau = 2 B sqrt(T log T / Upsilon_T)``, ``B = 1``, rounded down, at most ``T``."""
    tau = 2.0 * math.sqrt(horizon * math.log(horizon) / num_changes)
    return min(horizon, max(1, math.floor(tau)))


def tsallis_weights_reference(cum_loss: np.ndarray, eta: float) -> np.ndarray:
    """``(K,)`` ``w_i = 4 (eta (L^_i - x))^{-2}`` with ``sum_i w_i = 1``: the root ``x`` lies
    in ``[min L^ - 2 sqrt(K) / eta, min L^ - 2 / eta]`` (the best arm's ``w`` between ``1/K``
    and 1)."""
    cum_loss = np.asarray(cum_loss, np.float64)
    K, low = cum_loss.shape[0], float(cum_loss.min())

    def excess(x: float) -> float:
        return float(np.sum(4.0 / (eta * (cum_loss - x)) ** 2) - 1.0)

    a, b = low - 2.0 * math.sqrt(K) / eta, low - 2.0 / eta
    if excess(a) >= 0.0:  # equal L^: the bracket's end is the root (up to rounding)
        x = a
    elif excess(b) <= 0.0:
        x = b
    else:
        x = optimize.brentq(excess, a, b, xtol=1e-300, rtol=1e-15)
    return 4.0 / (eta * (cum_loss - x)) ** 2


def tsallis_inf_reference(losses, u, *, lr_scale):
    """Tsallis-INF from ``L^_0 = 0`` (unshifted). Round ``t = 1, 2, ...``: ``eta_t = lr_scale 2 /
    sqrt(t)``; ``w_t`` from ``L^_{t-1}``; ``I_t = draw(w_t, u[t-1, 0])``; ``B_t(i) = 1/2 1{w_{t,i}
    >= eta_t^2}``; ``l^_{t,i} = 1{I_t = i} (l_{t,i} - B_t(i)) / w_{t,i} + B_t(i)``; ``L^_t =
    L^_{t-1} + l^_t``. Returns ``played`` (T,), ``weights``, ``estimates`` (T, K) (``w_t``,
    ``l^_t``) and ``cum_loss`` (T+1, K) before each round."""
    T, K = losses.shape
    cum = np.zeros((T + 1, K))
    played = np.zeros(T, np.int64)
    weights, estimates = np.zeros((T, K)), np.zeros((T, K))
    for t in range(T):
        eta = lr_scale * 2.0 / math.sqrt(t + 1)
        w = tsallis_weights_reference(cum[t], eta)
        i = draw(w, u[t, 0])
        baseline = np.where(w >= eta**2, 0.5, 0.0)
        estimate = baseline.copy()
        estimate[i] += (losses[t, i] - baseline[i]) / w[i]
        weights[t], estimates[t], played[t] = w, estimate, i
        cum[t + 1] = cum[t] + estimate
    return {"played": played, "weights": weights, "estimates": estimates, "cum_loss": cum}


def thompson_reference(losses, theta, coins, *, prior_alpha, prior_beta, discount, window):
    """Round ``t``: arm ``i``'s posterior ``Beta(S_i + alpha_0, F_i + beta_0)``; play ``i_t =
    argmax_i theta[t, i]``; the trial ``r~_t = 1{coins[t] < 1 - l_t(i_t)}``; then ``S_i <-
    discount S_i + 1{i = i_t} r~_t``, ``F_i <- discount F_i + 1{i = i_t} (1 - r~_t)`` (``discount
    = 1``: Thompson sampling), or with ``window=tau`` the trials of the last ``tau`` rounds.
    Returns ``played`` (T,), ``alpha``, ``beta`` (T+1, K): the posterior before round ``t``."""
    T, K = losses.shape
    S, F, played = np.zeros(K), np.zeros(K), np.zeros(T, np.int64)
    alpha, beta, history = np.zeros((T + 1, K)), np.zeros((T + 1, K)), []
    for t in range(T + 1):
        if window is not None:
            S, F = np.zeros(K), np.zeros(K)
            for arm, trial in history[-window:]:
                S[arm] += trial
                F[arm] += 1.0 - trial
        alpha[t], beta[t] = S + prior_alpha, F + prior_beta
        if t == T:
            break
        i = int(np.argmax(theta[t]))
        played[t] = i
        trial = 1.0 if coins[t] < 1.0 - losses[t, i] else 0.0
        history.append((i, trial))
        if window is None:
            S, F = discount * S, discount * F
            S[i] += trial
            F[i] += 1.0 - trial
    return {"played": played, "alpha": alpha, "beta": beta}


def argmax_probabilities_reference(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """``(K,)`` ``P(i = argmax_j theta_j)``, ``theta_j ~ Beta(alpha_j, beta_j)`` independent,
    to about 1e-10: ``P_i = int_0^1 prod_{j != i} F_j(F_i^{-1}(u)) du`` by ``quad``, split at
    where the other arms' CDFs pass their quantiles 1e-6 .. 1 - 1e-6."""
    alpha, beta = np.asarray(alpha, np.float64), np.asarray(beta, np.float64)
    K = alpha.shape[0]
    out = np.zeros(K)
    for i in range(K):
        others = [j for j in range(K) if j != i]

        def integrand(u: float, i: int = i, others: list[int] = others) -> float:
            x = stats.beta.ppf(u, alpha[i], beta[i])
            return float(np.prod([stats.beta.cdf(x, alpha[j], beta[j]) for j in others]))

        quantiles = (1e-6, 1e-3, 0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1 - 1e-6)
        ends = [stats.beta.ppf(q, alpha[j], beta[j]) for j in others for q in quantiles]
        cuts = {float(stats.beta.cdf(x, alpha[i], beta[i])) for x in ends}
        breaks = sorted(b for b in cuts if 0.0 < b < 1.0)
        out[i] = integrate.quad(
            integrand, 0.0, 1.0, points=breaks, limit=1000, epsabs=1e-12, epsrel=1e-10
        )[0]
    return out


def bernoulli_kl(p: float, q: float) -> float:
    """``kl(p, q) = p log(p/q) + (1-p) log((1-p)/(1-q))``, ``0 log 0 = 0``, ``+inf`` where
    ``q`` is 0 or 1 and ``p`` is not."""
    out = 0.0
    if p > 0:
        out += math.inf if q <= 0 else p * math.log(p / q)
    if p < 1:
        out += math.inf if q >= 1 else (1 - p) * math.log((1 - p) / (1 - q))
    return out


def klucb_upper(mean: float, count: float, budget: float) -> float:
    """``max {q in [mean, 1] : count kl(mean, q) <= budget}``, bisected until the bracket is
    two adjacent floats."""
    lo, hi = mean, 1.0
    if budget <= 0:  # kl(mean, q) > 0 for every q != mean
        return mean
    if count * bernoulli_kl(mean, hi) <= budget:
        return hi
    while True:
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            return lo
        if count * bernoulli_kl(mean, mid) <= budget:
            lo = mid
        else:
            hi = mid


def argmax_first(values: np.ndarray) -> int:
    """Lowest index among the maxima (``+inf`` included)."""
    return int(np.flatnonzero(values == np.max(values))[0])


def _run(losses, weight, index) -> dict:
    """The policy's loop: after ``t`` rounds, counts ``N_i`` and reward sums ``S_i`` with round
    ``s``'s play weighted ``weight(s, t)``, and arm ``i``'s index ``index(N_i, S_i, t, N)``
    (``+inf`` if ``N_i = 0``). Returns ``played`` (T,), ``index`` (T, K) used at round t and
    ``counts`` (T+1, K) before round t."""
    (T, K), rec = losses.shape, defaultdict[str, list](list)
    arms: list[int] = []
    for t in range(T + 1):
        n, s = np.zeros(K), np.zeros(K)
        for r, a in enumerate(arms):
            n[a] += weight(r, t)
            s[a] += weight(r, t) * (1.0 - losses[r, a])
        rec["counts"].append(n)
        if t == T:
            break
        idx = np.array([index(n[i], s[i], t, n) if n[i] > 0 else np.inf for i in range(K)])
        arms.append(argmax_first(idx))
        record(rec, index=idx, played=arms[-1])
    return stack(rec)


def ucb1_reference(losses, *, explore_scale):
    """UCB1: after ``n`` plays, arm ``j`` (``n_j`` plays, mean ``x-bar_j``) has the index
    ``x-bar_j + explore_scale sqrt(2 ln n / n_j)`` (``explore_scale = 1``: Figure 1)."""

    def index(n_j, s_j, n, counts):
        return s_j / n_j + explore_scale * math.sqrt(2.0 * math.log(n) / n_j)

    return _run(losses, lambda s, t: 1.0, index)


def klucb_reference(losses, *, c):
    """kl-UCB: ``max {q : N_a kl(mu_a, q) <= log t + c log log t}`` after ``t`` plays, the
    ``log log t`` term 0 where ``log t < 1``."""

    def index(n_a, s_a, t, counts):
        log_t = math.log(t)
        return klucb_upper(s_a / n_a, n_a, log_t + (c * math.log(log_t) if log_t >= 1.0 else 0.0))

    return _run(losses, lambda s, t: 1.0, index)


def d_ucb_reference(losses, *, discount, xi, explore_scale):
    """D-UCB (Algorithm 1): ``N_t(gamma, i) = sum_{s<=t} gamma^{t-s} 1{I_s = i}``, ``X-bar_t(gamma,
    i)`` the same weights' mean reward, index ``X-bar_t(gamma, i) + explore_scale 2 sqrt(xi log
    n_t(gamma) / N_t(gamma, i))``, ``n_t(gamma) = sum_i N_t(gamma, i)``."""

    def index(n_i, s_i, t, counts):
        return s_i / n_i + explore_scale * 2.0 * math.sqrt(xi * math.log(counts.sum()) / n_i)

    return _run(losses, lambda s, t: discount ** (t - 1 - s), index)


def sw_ucb_reference(losses, *, window, xi, explore_scale):
    """SW-UCB (Algorithm 2): counts ``N_t(tau, i)`` and means ``X-bar_t(tau, i)`` of the last
    ``tau = window`` rounds, index ``X-bar_t(tau, i) + explore_scale sqrt(xi log min(t, tau) /
    N_t(tau, i))``."""

    def index(n_i, s_i, t, counts):
        return s_i / n_i + explore_scale * math.sqrt(xi * math.log(min(t, window)) / n_i)

    return _run(losses, lambda s, t: 1.0 if s >= t - window else 0.0, index)


def sw_klucb_reference(losses, *, window, explore_scale):
    """SW-klUCB: SW-UCB's statistics, index ``max {q : N_t(tau, i) kl(X-bar_t(tau, i), q) <=
    explore_scale log min(t, tau)}``."""

    def index(n_i, s_i, t, counts):
        return klucb_upper(s_i / n_i, n_i, explore_scale * math.log(min(t, window)))

    return _run(losses, lambda s, t: 1.0 if s >= t - window else 0.0, index)


def d_klucb_reference(losses, *, discount, explore_scale):
    """D-klUCB: D-UCB's statistics (the last round weighs 1), index ``max {q : N_t(gamma, i)
    kl(X-bar_t(gamma, i), q) <= explore_scale log n_t(gamma)}``."""

    def index(n_i, s_i, t, counts):
        return klucb_upper(s_i / n_i, n_i, explore_scale * math.log(counts.sum()))

    return _run(losses, lambda s, t: discount ** (t - 1 - s), index)
