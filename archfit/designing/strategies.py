"""How ``archfit design`` picks the next runs: its own criterion and the baselines it is judged
against (Li et al. 2026, "Spend Less, Fit Better", arXiv 2604.22753, compare the same five).

**archfit** (the default): the expected shrink of the target's variance per square root of
cost. The parameters' uncertainty at the runs so far is the variance the fit will have: the
inverse Fisher information (the runs' scatter about the law as noise) where every row is its
own run, and where the rows of one training run (one shape at several token counts, as the fit
groups them) share that run's offset, the sandwich covariance of a fit that weighs rows alike;
the bootstrap draws' covariance where the fit carries no runs, e.g. a published prior. It is
carried to the target and to each candidate's log loss by the law's gradients (a linear
Gaussian shortcut, :class:`archfit.designing.ensemble.Ensemble`), which says how much running a
candidate would shrink the target's variance. A batch is picked greedily, updating the
variance on each pick before the next (fantasized outcomes), so a near-duplicate of a chosen
run gains little, and one within 2% of it (size and tokens, same depth) is not taken into the
same batch at all. Why the square root of cost and not cost itself: :func:`archfit_criterion`.
For a target table (held-out runs to predict) 80% of each batch goes nearest the target, the
criterion picks among the nearer half only, and a budget nothing there can use goes nearest the
target too; why: :func:`archfit_criterion`.

Baselines: ``random``; ``cheapest`` (ascending cost); ``cost-weighted`` (random, probability
∝ 1/cost); ``nearest`` (closest to the target first, in log size, tokens and depth);
``d-optimal`` (greedy log-determinant of the Fisher information of the law's parameters,
linearized at the point estimate); ``v-optimal`` (greedy shrink of the target's linearized
variance, cost ignored); ``variance`` (archfit's criterion as it was before the public-sweep
replays: the parameters' variance alone, no near-target share, no discrepancy term). Each adds
runs while the budget allows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from archfit.designing.ensemble import Ensemble, finite, information, noise_var, shrink

# for a target table: this share of a batch's budget nearest the target first (None: the
# cost check sets it, as until 2026-11-26; only scripts/design_variants.py sets None)
TABLE_SHARE: float | None = 0.8
TRUST_REGION = 0.5  # for a target table: the criterion picks among this nearest share
# for a target table: from this many runs, a round whose residuals show no lack of fit (the
# F test of :func:`lack_of_fit` at p >= LACK_OF_FIT_LEVEL) is picked as ``variance`` picks
LACK_OF_FIT_RUNS = 16
LACK_OF_FIT_LEVEL = 0.1


CRITERION = ("a share of the budget on the candidates nearest the target first: for a target "
             f"table {TABLE_SHARE:g}, otherwise as far as the law missed its own costliest runs "
             "(refit without them; 1 - 1/widen^2); the rest (for a target table among the nearer "
             f"{TRUST_REGION:.0%} of the candidates, and once none there is affordable, "
             f"nearest the target first; from {LACK_OF_FIT_RUNS} runs, a round whose residuals "
             f"show no lack of fit, F test p >= {LACK_OF_FIT_LEVEL:g}, as the variance criterion "
             "alone, paced) by "
             "the expected shrink of the target's error variance per square root of cost "
             "(picks ranked by shrink / cost^0.5, a batch updated on each pick in turn: "
             "fantasized outcomes, so it holds no near-duplicates), the variance being the "
             "parameters' (inverse Fisher information; the sandwich of a fit weighing rows "
             "alike where a training run's rows share its offset; the bootstrap draws' "
             "covariance without runs) carried by the law's gradients (a linear Gaussian "
             "shortcut), plus for a target table the law's discrepancy (a smooth residual over "
             "the log features)")
MAX_DRAWS = 400  # parameter draws the ensemble uses (the fit's bootstrap, thinned)
MIN_DRAWS = 10  # fewer: no ensemble, a space-filling batch


@dataclass
class Step:
    """What a strategy sees: the law, the current fit (None before the first), the pool's
    columns, each candidate's cost, which are still open, the target and the randomness."""

    law: Any
    fit: Any
    pool: dict[str, np.ndarray]
    cost: np.ndarray
    open: np.ndarray  # bool mask: not yet chosen
    target: Any
    rng: np.random.Generator
    data: dict[str, np.ndarray] | None = None  # the runs the fit was made on
    near_share: float = 0.0  # of archfit's batch budget, nearest the target first
    notes: list[str] = field(default_factory=list)  # what the criterion had to paper over


def _affordable(step: Step, left: float) -> np.ndarray:
    return step.open & (step.cost <= left * (1 + 1e-12))


def _greedy(step: Step, k: int, left: float, score: Callable[[np.ndarray], np.ndarray],
            update: Callable[[int], None] | None = None, taken: list[int] | None = None
            ) -> list[int]:
    picks: list[int] = []
    mask = step.open.copy()
    mask[taken or []] = False
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


# ------------------------------------------------------------------ baselines without a fit
def random(step: Step, k: int, left: float) -> list[int]:
    return _greedy(step, k, left, lambda ok: step.rng.random(len(ok)))


def cheapest(step: Step, k: int, left: float) -> list[int]:
    return _greedy(step, k, left, lambda ok: -step.cost)


def cost_weighted(step: Step, k: int, left: float) -> list[int]:
    # Efraimidis-Spirakis keys: sampling without replacement with probability ∝ 1/cost
    return _greedy(step, k, left, lambda ok: np.log(step.rng.random(len(ok))) * step.cost)


def distance_to_target(step: Step) -> np.ndarray:
    """Each candidate's distance to the target: in the standardized log features (size,
    tokens, depth) to the nearest target row; for an optimal-depth target, in log size to its
    N; for an N_opt target, in log compute (C = 6 N D) to its budget."""
    t = step.target
    if t.kind == "params":
        return np.abs(np.log(step.pool["params"] / t.value))
    if t.kind == "compute":
        return np.abs(np.log(6.0 * step.pool["params"] * step.pool["tokens"] / t.value))
    cols = [c for c in ("params", "tokens", "n_layer") if c in step.pool and c in t.rows]
    X = np.stack([np.log(np.asarray(step.pool[c], float)) for c in cols], axis=1)
    T = np.stack([np.log(np.asarray(t.rows[c], float)) for c in cols], axis=1)
    sd = np.where(X.std(0) > 0, X.std(0), 1.0)
    d = np.linalg.norm((X[:, None, :] - T[None, :, :]) / sd, axis=2)
    return d.min(1)


def nearest(step: Step, k: int, left: float) -> list[int]:
    """The trivial rule a design must beat: the candidates closest to the target first."""
    d = distance_to_target(step)
    return _greedy(step, k, left, lambda ok: -d)


def space_filling(step: Step, k: int, left: float) -> list[int]:
    """A first batch with no fit: greedy maximin distance in the standardized log features
    (size, tokens, depth) among the cheaper half of the pool, from its cheapest run."""
    feats = [np.log(step.pool[c]) for c in ("params", "tokens", "n_layer") if c in step.pool]
    X = np.stack(feats, axis=1)
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1.0)
    cheap = step.cost <= np.median(step.cost[step.open]) if step.open.any() else step.open
    dist = np.full(len(X), np.inf)

    def score(ok: np.ndarray) -> np.ndarray:
        if np.isinf(dist).all():
            return np.where(cheap, -step.cost, -np.inf)
        return np.where(cheap, dist, -np.inf)

    def update(j: int) -> None:
        np.minimum(dist, np.linalg.norm(X - X[j], axis=1), out=dist)

    return _greedy(step, k, left, score, update)


# ------------------------------------------------------------------ the ensemble criterion
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


COST_EXPONENT = 0.5  # picks rank by shrink / cost**COST_EXPONENT: see archfit_criterion


def table_share(target: Any) -> float | None:
    """The near-target share for ``target`` where it is fixed: ``TABLE_SHARE`` for a target
    table (held-out runs to predict), whatever the law's own extrapolation check says; None for
    an optimal-depth or N_opt target, whose share :func:`near_share` sets from that check. Why
    fixed, and why 0.8: :func:`archfit_criterion`."""
    return TABLE_SHARE if target.kind == "table" else None


def near_share(widen: float | None) -> float:
    """The share of a batch's budget spent on the candidates nearest an optimal-depth or N_opt
    target first, from how far the law missed when it extrapolated in the runs so far:
    ``widen``, the factor its 95% intervals needed to cover its own costliest runs held out
    (``design.calibrated_fit``). A law that holds there (1) leaves the whole batch to the
    variance criterion; one that missed by twice its intervals sends 3/4 of it near the
    target: 1 - 1/widen². Without the check (too few runs to hold any out), none."""
    if widen is None or not math.isfinite(widen):
        return 0.0
    return float(min(max(1.0 - 1.0 / widen ** 2, 0.0), 1.0))


def paced(open_: np.ndarray, cost: np.ndarray, left: float) -> float:
    """What a paced round may spend of the ``left`` budget: half of it while an open candidate
    costs that little, all of it once none does (so later rounds see what earlier ones
    taught)."""
    return left / 2 if bool((open_ & (cost <= left / 2)).any()) else left


def lack_of_fit(fit: Any, data: dict[str, np.ndarray] | None,
                min_runs: int | None = None) -> float | None:
    """The p-value of an F test of the runs' log residuals under ``fit`` (centred) on the
    standardized log features (size, tokens, depth: those that vary), their squares and their
    products: small where the residuals trend over the features the law is fitted on (a law
    that misses smoothly), about uniform where they are noise. None with fewer than
    ``min_runs`` runs (``LACK_OF_FIT_RUNS``), or too few for the test (3 residual degrees of
    freedom)."""
    least = LACK_OF_FIT_RUNS if min_runs is None else min_runs
    if fit is None or data is None or len(data["loss"]) < least:
        return None
    from itertools import combinations_with_replacement

    from scipy import stats

    with np.errstate(all="ignore"):
        r = np.log(np.asarray(data["loss"], float)) - np.log(
            np.asarray(fit.law_obj.predict(fit.params, data), float))
    if not np.isfinite(r).all():
        return None
    r = r - r.mean()
    logs = [np.log(np.asarray(data[c], float)) for c in ("params", "tokens", "n_layer")
            if c in data]
    varying = [x for x in logs if np.ptp(x) > 0]
    if not varying:  # every run at one size, token count and depth: nothing to trend over
        return None
    X = np.stack(varying, axis=1)
    X = (X - X.mean(0)) / X.std(0)
    m = X.shape[1]
    A = np.column_stack([np.ones(len(r))] + [X[:, i] for i in range(m)]
                        + [X[:, i] * X[:, j]
                           for i, j in combinations_with_replacement(range(m), 2)])
    n, q = len(r), A.shape[1] - 1
    if n - q - 1 < 3:
        return None
    beta = np.linalg.lstsq(A, r, rcond=None)[0]
    rss, tss = float(((r - A @ beta) ** 2).sum()), float((r ** 2).sum())
    if rss <= 0:
        return 0.0 if tss > 0 else 1.0
    return float(stats.f.sf(((tss - rss) / q) / (rss / (n - q - 1)), q, n - q - 1))


def archfit_criterion(step: Step, k: int, left: float, trace: list | None = None
                      ) -> list[int]:
    """One greedy batch on the ensemble, ranked by the target's expected shrink per square
    root of cost (``COST_EXPONENT``), each pick conditioning the next. ``trace`` receives (gain
    per unit cost, the target's remaining sd as a share of today's) per pick. The exponent 1/2
    tempers the cost, as cost-cooled acquisition does (Lee et al. 2020, arXiv 2003.10870).

    For a target table, ``TABLE_SHARE`` of each batch's budget goes to the candidates nearest
    the target first, and the rest is picked by the criterion among the nearer
    ``TRUST_REGION`` of the open candidates; once nothing affordable is left there, the rest
    goes to the nearest affordable candidates. From ``LACK_OF_FIT_RUNS`` runs on, a round whose
    residuals show no lack of fit (:func:`lack_of_fit` at p >= ``LACK_OF_FIT_LEVEL``) is
    picked as ``variance`` picks it, paced to half of what is left. How these constants were
    chosen is in docs/benchmarks/design.md."""
    if step.target.kind != "table":
        return _criterion(step, k, left, trace, step.near_share, discrepancy=True)
    p = lack_of_fit(step.fit, step.data)
    if p is not None and p >= LACK_OF_FIT_LEVEL:
        step.notes.append(f"the law shows no lack of fit in the {len(step.data['loss'])} runs "  # type: ignore[index]
                          f"so far (F test of the residuals on the log features, p = {p:.2g}):"
                          " the batch is picked by the variance criterion alone, paced to half"
                          " of what is left")
        return variance_criterion(step, k, paced(step.open, step.cost, left), trace)
    dist = distance_to_target(step)
    everything = step.open
    if not everything.any():
        return []
    step.open = everything & (dist <= np.quantile(dist[everything], TRUST_REGION))
    try:
        picks = _criterion(step, k, left, trace, step.near_share, discrepancy=True)
    finally:
        step.open = everything
    # nothing affordable inside the trust region: what is left goes nearest the target first,
    # never to the criterion over the whole pool (see the docstring)
    return picks or nearest(step, k, left)


def _criterion(step: Step, k: int, left: float, trace: list | None, share: float,
               discrepancy: bool) -> list[int]:
    ds = draws(step.fit)
    if len(ds) < MIN_DRAWS:
        return space_filling(step, k, left)
    ens = Ensemble(step, ds, discrepancy)
    near = np.zeros(len(step.cost), bool)
    tr: list = []
    gains = np.zeros(len(step.cost))  # this pick's, from score to update: computed once

    def score(ok: np.ndarray) -> np.ndarray:
        gains[:] = ens.gain()
        # a candidate expected to shrink nothing ranks after every one that helps, cheapest
        # first (with the rows of runs so far, the fit's variance can grow, Ensemble)
        score = np.where(gains > 0, gains / step.cost ** COST_EXPONENT, -step.cost)
        return np.where(near, -np.inf, score)

    def update(j: int) -> None:
        g = float(gains[j]) / ens.var0 if ens.var0 > 0 else 0.0
        ens.condition(j)
        near[near_duplicates(step.pool, j)] = True
        tr.append((g / step.cost[j], math.sqrt(ens.var / ens.var0) if ens.var0 else 1.0))

    # where the law missed its own costliest runs, a share of the budget goes to the
    # candidates nearest the target first (near_share; each still conditions the ensemble)
    dist = distance_to_target(step)

    def by_distance(ok: np.ndarray) -> np.ndarray:
        gains[:] = ens.gain()
        return np.where(near, -np.inf, -dist)

    picks = _greedy(step, k, share * left, by_distance, update) if share > 0 else []
    left -= float(step.cost[picks].sum())
    picks += _greedy(step, k - len(picks), left, score, update, taken=picks)
    if trace is not None:
        trace.extend(tr)
    return picks


def variance_criterion(step: Step, k: int, left: float, trace: list | None = None
                       ) -> list[int]:
    """archfit's criterion as it was before the public-sweep replays, kept as a baseline: the
    expected shrink of the parameters' part of the target's variance per square root of cost,
    without the near-target share or the discrepancy term."""
    return _criterion(step, k, left, trace, 0.0, discrepancy=False)


# ------------------------------------------------------------------ linearized optimal designs
def _jacobians(step: Step) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(J_pool, J_data, G): d log-loss / d θ at the pool and at the fit's data, and d target /
    d θ, by central differences in the law's parameters at the point estimate."""
    if step.fit is None:
        return None
    law, p0 = step.law, dict(step.fit.params)
    data = step.data
    names = [n for n in law.param_names if abs(p0[n]) > 0]

    def at(p: dict[str, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.log(np.asarray(law.predict(p, step.pool), float)),
                np.log(np.asarray(law.predict(p, data), float)) if data else np.zeros(0),
                step.target.values(law, p))

    cols: list[list[np.ndarray]] = [[], [], []]
    with np.errstate(all="ignore"):
        for n in names:
            h = 1e-4 * max(abs(p0[n]), 1e-3)
            up, dn = at({**p0, n: p0[n] + h}), at({**p0, n: p0[n] - h})
            for i in range(3):
                cols[i].append((up[i] - dn[i]) / (2 * h))
    J, Jd, G = (finite(step, np.stack(c, axis=1), "derivatives of the prediction")
                for c in cols)
    return J, Jd, G


def _linearized(step: Step, k: int, left: float,
                score: Callable[[np.ndarray, np.ndarray, np.ndarray, float], np.ndarray]
                ) -> list[int]:
    """The classical optimal designs: the law linearized at the point estimate, the parameters'
    covariance the inverse of the data's Fisher information, updated by each pick
    (Sherman-Morrison); ``score(J, G, cov, noise²)`` ranks the candidates."""
    jac = _jacobians(step)
    if jac is None:
        return space_filling(step, k, left)
    J, Jd, G = jac
    s2 = noise_var(step.fit)
    cov = np.linalg.pinv(information(step, J, Jd))

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
    "archfit": archfit_criterion, "random": random, "cheapest": cheapest,
    "cost-weighted": cost_weighted, "d-optimal": d_optimal, "v-optimal": v_optimal,
    "nearest": nearest, "variance": variance_criterion,
}
# the strategies that read a fit (the others pick without one)
ADAPTIVE = ("archfit", "variance", "d-optimal", "v-optimal")
CRITERIA = ("archfit", "variance")  # the ensemble's criterion: they trace their picks
