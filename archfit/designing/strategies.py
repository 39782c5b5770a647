"""How ``archfit design`` picks the next runs: the default rule, :data:`RULE`, with its fit test
(:func:`check_fit`), and the baselines it is judged against (:data:`STRATEGIES`; Li et al.
2026, "Spend Less, Fit Better", arXiv 2604.22753, compare the first five). Each strategy adds
runs while the budget allows."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from archfit.designing.ensemble import Ensemble, gradients, information, scatter2, shrink
from archfit.designing.pool import DesignError
from archfit.designing.step import Step
from archfit.laws.inference.trust import LACK_OF_FIT_LEVEL  # the fit test's level
# the variance criterion ranks picks by shrink per cost**COST_EXPONENT: cost-cooled acquisition
# (Lee et al. 2020, arXiv 2003.10870), since a fit of few runs overstates what a cheap run teaches
COST_EXPONENT = 0.5
RULE = ("after a first batch spread over the cheaper half of the candidates, each batch is "
        "the affordable candidates nearest the target (in the law's log size, tokens and depth; "
        "for N_opt, nearest the fit's optimum; for an optimal depth, nearest the target size "
        "at the ends and middle of the optimum's 95% CI, in turn). A law is only approximately "
        "true of a real sweep and its error grows with how far it extrapolates, so under model "
        "bias the runs belong where the prediction is needed (Box and Draper 1959); a minimum "
        "is placed by runs on both sides of it (de la Garza 1954)")
MAX_DRAWS = 400  # parameter draws the ensemble uses (the fit's bootstrap, thinned)
MIN_DRAWS = 10  # fewer: no ensemble, a spread batch


def _greedy(step: Step, k: int, left: float, score: Callable[[np.ndarray], np.ndarray],
            update: Callable[[int], None] | None = None) -> list[int]:
    """Up to ``k`` open candidates within ``left``, each the best by ``score`` (-inf: never),
    ``update`` told of each pick before the next."""
    picks: list[int] = []
    mask = step.open.copy()
    for _ in range(k):
        ok = mask & (step.cost <= left * (1 + 1e-12))
        if not ok.any():
            break
        s = np.where(ok, score(ok), -np.inf)
        j = int(np.argmax(s))
        if not np.isfinite(s[j]):
            break
        picks.append(j)
        mask[j] = False
        left -= step.cost[j]
        if update is not None:
            update(j)
    return picks


def random(step: Step, k: int, left: float) -> list[int]:
    return _greedy(step, k, left, lambda ok: step.rng.random(len(ok)))


def cheapest(step: Step, k: int, left: float) -> list[int]:
    return _greedy(step, k, left, lambda ok: -step.cost)


def cost_weighted(step: Step, k: int, left: float) -> list[int]:
    # Efraimidis-Spirakis keys: sampling without replacement with probability ∝ 1/cost
    return _greedy(step, k, left, lambda ok: np.log(step.rng.random(len(ok))) * step.cost)


def target_points(step: Step) -> dict[str, np.ndarray] | None:
    """Where the prediction is needed, in the law's columns: the target rows; for an N_opt
    target, the fit's (N_opt, D_opt) at its budget (None without a fit: log compute alone);
    for an optimal-depth target, the target size at the ends and middle of the optimal depth's
    95% CI (:func:`depth_bracket`; the target size alone without a fit)."""
    t, pool, fit = step.target, step.pool, step.fit
    if t.kind == "params":
        if fit is None or "n_layer" not in pool:
            return {"params": np.array([t.value], float)}
        depths = np.array(depth_bracket(step), float)
        return {"params": np.full(len(depths), float(t.value)), "n_layer": depths}
    if t.kind == "compute":
        if fit is None or "tokens" not in pool:
            return None
        N, D = step.law.compute_optimal(fit.params, t.value)
        return {"params": np.array([N]), "tokens": np.array([D])}
    return {c: v for c, v in t.rows.items() if c in step.law.columns}


def depth_bracket(step: Step) -> tuple[float, float, float]:
    """(low end, estimate, high end) of the optimal depth at the target size: its 95% CI as
    :meth:`archfit.laws.Fit.optimum` gives it (the pool's depth range without one), within the
    pool's depths. A quadratic in log depth (the depth-joint law at one size) is placed best by
    runs at the two ends and the middle of the interval it may lie in: the D-optimal design for
    a quadratic on an interval (de la Garza 1954; Kiefer 1959)."""
    pool = step.pool["n_layer"]
    lo_pool, hi_pool = float(np.min(pool)), float(np.max(pool))
    opt = step.fit.optimum(float(step.target.value))
    best = float(opt["n_layer"])
    lo, hi = opt.get("n_layer_ci") or (lo_pool, hi_pool)
    lo, hi = min(max(lo, lo_pool), hi_pool), min(max(hi, lo_pool), hi_pool)
    mid = (min(max(best, lo_pool), hi_pool) if math.isfinite(best) and best > 0
           else math.sqrt(lo * hi))
    return lo, mid, hi


def target_distances(step: Step) -> np.ndarray:
    """Each candidate's distance (rows) to each of :func:`target_points` (columns), in the log
    features both have, each scaled by its spread over the pool; a feature the pool varies by
    less than :data:`NEAR` (within which candidates are one run) is not scaled up. Without
    points, the distance in log compute (C = 6 N D) to the target's budget."""
    pts, pool, t = target_points(step), step.pool, step.target
    if pts is None:
        return np.abs(np.log(6.0 * pool["params"] * pool["tokens"] / t.value))[:, None]
    cols = [c for c in ("params", "tokens", "n_layer") if c in pool and c in pts]
    X, T = _logs(pool, cols), _logs(pts, cols)
    sd = np.where(X.std(0) > math.log1p(NEAR), X.std(0), 1.0)
    return np.linalg.norm((X[:, None, :] - T[None, :, :]) / sd, axis=2)


def nearest(step: Step, k: int, left: float) -> list[int]:
    """The trivial rule a design must beat: the candidates closest to the target first."""
    d = target_distances(step).min(1)
    return _greedy(step, k, left, lambda ok: -d)


def _features(step: Step) -> tuple[np.ndarray, np.ndarray | None]:
    """The pool's and the runs' log size, log tokens and depth (those the law reads),
    standardized on the pool."""
    cols = [c for c in ("params", "tokens", "n_layer") if c in step.pool and c in step.law.columns]
    X = _logs(step.pool, cols)
    mu, sd = X.mean(0), np.where(X.std(0) > 0, X.std(0), 1.0)
    data = step.data or {}
    R = _logs(data, cols) if data and all(c in data for c in cols) else None
    return (X - mu) / sd, None if R is None else (R - mu) / sd


def _logs(table: dict[str, np.ndarray], cols: list[str]) -> np.ndarray:
    """The log of ``table``'s columns ``cols``, one row per entry."""
    return np.stack([np.log(np.asarray(table[c], float)) for c in cols], axis=1)


def spread(step: Step, k: int, left: float) -> list[int]:
    """Greedy maximin over the pool in the law's standardized log features, from the runs so
    far and the batch's picks; without runs, from the cheapest, among the cheaper half (a
    first batch leaves the budget to the rounds that can learn from it)."""
    X, R = _features(step)
    dist = (np.full(len(X), np.inf) if R is None else
            np.min(np.linalg.norm(X[:, None, :] - R[None, :, :], axis=2), axis=1))
    cheap = (step.cost <= np.median(step.cost[step.open]) if R is None and step.open.any()
             else np.ones(len(X), bool))

    def score(ok: np.ndarray) -> np.ndarray:
        if np.isinf(dist).all():
            return np.where(cheap, -step.cost, -np.inf)
        return np.where(cheap, dist, -np.inf)

    def update(j: int) -> None:
        np.minimum(dist, np.linalg.norm(X - X[j], axis=1), out=dist)

    return _greedy(step, k, left, score, update)


def draws(fit: Any) -> list[dict[str, float]]:
    d = fit.draws() if fit is not None else []
    if len(d) > MAX_DRAWS:
        d = d[:: int(math.ceil(len(d) / MAX_DRAWS))]
    return d


NEAR = 0.02  # candidates within 2% in size and tokens, at one depth, are one run


def near_duplicates(pool: dict[str, np.ndarray], j: int) -> np.ndarray:
    """The candidates that are near-duplicates of candidate ``j`` (``j`` included)."""
    m = np.abs(np.log(pool["params"] / pool["params"][j])) <= math.log1p(NEAR)
    if "tokens" in pool:
        m &= np.abs(np.log(pool["tokens"] / pool["tokens"][j])) <= math.log1p(NEAR)
    for c in ("n_layer", "d_model"):
        if c in pool:
            m &= pool[c] == pool[c][j]
    return m


def check_fit(step: Step) -> dict[str, Any]:
    """The round's fit test and what it means: where the law fails, no interval is predicted
    after the batch (its variance is not the target's uncertainty when its form misses)."""
    test = ((step.fit.diagnostics or {}).get("lack_of_fit") or {}) if step.fit else {}
    p, n = test.get("p"), test.get("runs", 0)
    if p is None:
        return {"runs": n, "p": None, "fits": None,
                "why": "no test: " + ("no fit of the runs so far" if step.fit is None else
                                      "too few runs to test the law, or a fit without them")}
    if p < LACK_OF_FIT_LEVEL:
        return {"runs": n, "p": p, "fits": False,
                "why": f"the law does not fit the {n} runs so far (F test of the log residuals, "
                       f"p = {p:.2g} < {LACK_OF_FIT_LEVEL:g}): the runs nearest the target still "
                       "go first, but no interval after them is predicted; try --law auto"}
    return {"runs": n, "p": p, "fits": True,
            "why": f"no lack of fit in the {n} runs so far (F test p = {p:.2g} >= "
                   f"{LACK_OF_FIT_LEVEL:g})"}


def near_target(step: Step, k: int, left: float) -> list[int]:
    """The default rule past its first batch: the affordable candidates nearest the target, no
    two near-duplicates; for an optimal depth each pick takes the nearest point of the depth
    bracket not yet taken (all taken: all open again). ``step.test`` records the fit test."""
    step.test = check_fit(step)
    D = target_distances(step)
    in_turn = step.target.kind == "params" and step.fit is not None
    taken = np.zeros(D.shape[1], bool)
    near = np.zeros(len(D), bool)

    def score(ok: np.ndarray) -> np.ndarray:
        return np.where(near, -np.inf, -D[:, ~taken].min(1))

    def update(j: int) -> None:
        near[near_duplicates(step.pool, j)] = True
        if in_turn:
            taken[np.flatnonzero(~taken)[np.argmin(D[j, ~taken])]] = True
            if taken.all():
                taken[:] = False

    return _greedy(step, k, left, score, update)


def variance_criterion(step: Step, k: int, left: float) -> list[int]:
    """The greedy variance criterion: each pick the largest shrink of the target's variance per
    cost**``COST_EXPONENT``, the ensemble conditioned on it before the next."""
    ds = draws(step.fit)
    if len(ds) < MIN_DRAWS:
        return spread(step, k, left)
    ens = Ensemble(step, ds)
    near = np.zeros(len(step.cost), bool)
    gains = np.zeros(len(step.cost))  # this pick's, from score to update: computed once

    def score(ok: np.ndarray) -> np.ndarray:
        gains[:] = ens.gain()
        # a candidate expected to shrink nothing ranks after every one that helps, cheapest
        # first (with the rows of runs so far, the fit's variance can grow, Ensemble)
        s = np.where(gains > 0, gains / step.cost ** COST_EXPONENT, -step.cost)
        return np.where(near, -np.inf, s)

    def update(j: int) -> None:
        ens.condition(j)
        near[near_duplicates(step.pool, j)] = True

    return _greedy(step, k, left, score, update)


def predicted(step: Step, picks: list[int]) -> list[tuple[float, float]]:
    """Each of ``picks``, run in order: (its shrink of the target's variance per cost, the
    target's sd after it), both as shares of today's; empty without parameter draws."""
    ds = draws(step.fit)
    if len(ds) < MIN_DRAWS or not picks:
        return []
    ens, out = Ensemble(step, ds), []
    for j in picks:
        g = float(ens.gain()[j]) / ens.var0 if ens.var0 > 0 else 0.0
        ens.condition(j)
        out.append((g / step.cost[j], math.sqrt(ens.var / ens.var0) if ens.var0 else 1.0))
    return out


def _linearized(step: Step, k: int, left: float,
                score: Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]
                ) -> list[int]:
    """The classical optimal designs, the law linearized at the point estimate (covariance:
    the inverse Fisher information, updated per pick); ``score(J, G, cov, noise²)`` ranks."""
    if step.fit is None:
        return spread(step, k, left)
    names = [n for n in step.law.param_names if abs(step.fit.params[n]) > 0]
    J, G, Jd = gradients(step, names, np.zeros(len(names), bool))
    s2 = sum(scatter2(step.fit))  # a new run's noise: between runs and within one
    cov = np.linalg.pinv(information(Jd, s2))

    def update(j: int) -> None:
        nonlocal cov
        u = cov @ J[j]
        cov = cov - np.outer(u, u) / (s2 + J[j] @ u)

    return _greedy(step, k, left, lambda ok: score(J, G, cov, s2), update)


def d_optimal(step: Step, k: int, left: float) -> list[int]:
    """Greedy log-determinant: it grows by log(1 + leverage) per run."""
    return _linearized(step, k, left,
                       lambda J, G, cov, s2: np.einsum("ij,jk,ik->i", J, cov, J) / s2)


def v_optimal(step: Step, k: int, left: float) -> list[int]:
    """Greedy shrink of the target's linearized variance trace(G cov Gᵀ), cost ignored."""
    return _linearized(step, k, left, shrink)


STRATEGIES: dict[str, Callable[..., list[int]]] = {
    "near-target": near_target, "random": random, "cheapest": cheapest,
    "cost-weighted": cost_weighted, "d-optimal": d_optimal, "v-optimal": v_optimal,
    "nearest": nearest, "variance": variance_criterion, "spread": spread,
}
# the strategies that read a fit (the others pick without one)
ADAPTIVE = ("near-target", "variance", "d-optimal", "v-optimal")
DEFAULT_STRATEGY = "near-target"
# the default's earlier name, which specs and scripts written before may still give
STRATEGY_ALIASES = {"archfit": "near-target"}


def strategy_name(strategy: str) -> str:
    """The strategy a name stands for: itself, or the one an earlier name now has."""
    return STRATEGY_ALIASES.get(strategy, strategy)
CRITERIA = ("variance",)  # the ensemble's criterion: it needs the fit's parameter draws


def check_request(law: Any, strategy: str, batch: int, seed: int) -> None:
    """Refuse, in one line each, a law without a loss model, an unknown strategy, a seed numpy
    does not take (a whole number, 0 or more) and a batch below 1."""
    if not law.predicts_loss:
        raise DesignError(f"{law.name} has no loss model, so a run's outcome cannot be "
                          "predicted; design with depth-joint or depth-width (shape), chinchilla "
                          "(compute)")
    if strategy_name(strategy) not in STRATEGIES:
        raise DesignError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise DesignError(f"--seed must be a whole number, 0 or more, got {seed!r}")
    if batch < 1:
        raise DesignError(f"--batch must be 1 or more, got {batch}")
