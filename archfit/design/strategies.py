"""How ``archfit design`` picks the next runs: its own criterion and the baselines it is judged
against (Li et al. 2026, "Spend Less, Fit Better", arXiv 2604.22753, compare the same five).

**archfit** (the default): the expected shrink of the target's variance per square root of
cost. The parameters' posterior is the Laplace approximation at the runs so far (inverse Fisher
information, the runs' scatter about the law as noise; the bootstrap draws' covariance where the
fit carries no runs, e.g. a published prior). It is carried to the target and to each
candidate's log loss by the law's gradients (a linear Gaussian shortcut, :class:`Ensemble`), and
says how much observing a run shrinks the target's variance: Cov(target, run)² / (Var(run) +
noise²). Rows of one training run (one shape at several token counts, as the fit groups them)
share that run's offset, so a second token count of a run says less about the law than a new
run does. A batch is picked greedily, conditioning the covariance on each pick before the
next (fantasized outcomes), so a near-duplicate of a chosen run gains little, and one within
2% of it (size and tokens, same depth) is not taken into the same batch at all. Why the square
root of cost and not cost itself: :func:`archfit_criterion`.

Baselines: ``random``; ``cheapest`` (ascending cost); ``cost-weighted`` (random, probability
∝ 1/cost); ``d-optimal`` (greedy log-determinant of the Fisher information of the law's
parameters, linearized at the point estimate); ``v-optimal`` (greedy shrink of the target's
linearized variance, cost ignored). Each adds runs while the budget allows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

CRITERION = ("expected shrink of the target's variance per square root of cost (picks ranked "
             "by shrink / cost^0.5, a batch conditioned on each pick in turn: fantasized "
             "outcomes, so it holds no near-duplicates), from the parameters' Laplace posterior "
             "at the runs so far (the bootstrap draws' covariance without runs) carried by the "
             "law's gradients (a linear Gaussian shortcut); the rows of one training run share "
             "its offset (the fit's between-run scatter)")
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


def _affordable(step: Step, left: float) -> np.ndarray:
    return step.open & (step.cost <= left * (1 + 1e-12))


def _greedy(step: Step, k: int, left: float, score: Callable[[np.ndarray], np.ndarray],
            update: Callable[[int], None] | None = None) -> list[int]:
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


# ------------------------------------------------------------------ baselines without a fit
def random(step: Step, k: int, left: float) -> list[int]:
    return _greedy(step, k, left, lambda ok: step.rng.random(len(ok)))


def cheapest(step: Step, k: int, left: float) -> list[int]:
    return _greedy(step, k, left, lambda ok: -step.cost)


def cost_weighted(step: Step, k: int, left: float) -> list[int]:
    # Efraimidis-Spirakis keys: sampling without replacement with probability ∝ 1/cost
    return _greedy(step, k, left, lambda ok: np.log(step.rng.random(len(ok))) * step.cost)


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


def scatter2(fit: Any) -> tuple[float, float]:
    """A new row's scatter about the law (log loss), as variances: (between runs: the offset
    that the rows of one training run share, within a run). Without the fit's scatter, its
    RMSE as the between part (each row its own run)."""
    sc = (fit.diagnostics or {}).get("scatter") or {}
    b2, w2 = sc.get("between", 0.0) ** 2, sc.get("within", 0.0) ** 2
    if b2 + w2 > 0:
        return b2, w2
    return max(float((fit.diagnostics or {}).get("rmse_log") or 0.01) ** 2, 1e-8), 0.0


def noise_var(fit: Any) -> float:
    """A new run's scatter about the law (log loss): between runs and within one."""
    return sum(scatter2(fit))


WITHIN_FLOOR = 0.01  # within-run variance, at least this share of a row's whole scatter
# more runs than this in the pool and the data: each row its own run (the covariance of the
# runs' offsets, (parameters + runs)², would pass 32 MB)
MAX_RUNS = 2000


def run_units(step: Step) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Which training run each pool row and each data row belongs to, as the fit groups
    them (:func:`archfit.laws.numeric.run_groups`: one shape's rows at several token counts
    are one run): (pool labels, data labels, runs). None where every row is its own run, or
    past ``MAX_RUNS`` runs."""
    from archfit.laws.numeric import RUN_IDENTITY, run_groups

    data = step.data or {}
    cols = [c for c in RUN_IDENTITY if c in step.pool and (not data or c in data)]
    if "n_layer" not in cols:
        return None
    n_pool = len(step.cost)
    both = {c: np.concatenate([np.asarray(step.pool[c]), np.asarray(data[c])]) if data
            else np.asarray(step.pool[c]) for c in cols}
    # run_groups numbers the runs 0, 1, 2, ... in order of first appearance
    labels, _ = run_groups({**both, "loss": np.zeros(len(both[cols[0]]))})
    n_runs = int(labels.max()) + 1
    if n_runs == len(labels) or n_runs > MAX_RUNS:
        return None
    return labels[:n_pool], labels[n_pool:], n_runs


def _run_information(Jd: np.ndarray, labels: np.ndarray, n: int, s2: float) -> np.ndarray:
    """The information of the data rows about (θ, each run's offset): a row's gradient is
    (Jd, its run's one-hot), at noise variance ``s2``; built without the rows x runs matrix."""
    P = Jd.shape[1]
    info = np.zeros((P + n, P + n))
    info[:P, :P] = Jd.T @ Jd
    by_run = np.zeros((n, P))
    np.add.at(by_run, labels, Jd)
    info[P:, :P], info[:P, P:] = by_run, by_run.T
    info[P:, P:] = np.diag(np.bincount(labels, minlength=n).astype(float))
    return info / s2


class Ensemble:
    """The target's uncertainty and each candidate's: the parameters' covariance S (each on a
    log scale where every draw is positive; the parameters the draws leave fixed are out), the
    inverse Fisher information of the runs so far, or without runs the draws' covariance,
    clipped to its 5-95% range so a few degenerate resamples do not own it; carried to the
    target quantities and to each candidate's log loss by the law's gradients at the point
    estimate (a linear Gaussian shortcut). A candidate adds the scatter of runs about the law
    as its noise. Where the fit counts a shape's rows at several token counts as one training
    run (:func:`run_units`), that scatter is split as the fit splits it: each run's offset,
    shared by its rows (variance: the between-run scatter), joins the parameters as one more
    coordinate, and only the within-run part is a row's own noise. So the runs so far inform
    the law as runs, not as independent rows, and a run's second token count gains less than
    a new run. (On bench_design's depth-joint truth, whose noise is one offset per run, it
    lowered the target's error at 10% of the cost from 0.967% to 0.903%, lower on 63 of 100
    paired seeds; README, "Runs, not rows". Tables without shape columns, such as a
    chinchilla grid, are unchanged.)
    Conditioning on a fantasized run, one at a time: S <- S - S j j' S / (j' S j + noise²)."""

    def __init__(self, step: Step, ds: list[dict[str, float]]):
        law, p0 = step.law, dict(step.fit.params)
        self.names = [n for n in law.param_names
                      if np.ptp([d[n] for d in ds]) > 0]  # fixed or folded: not uncertain
        V = np.array([[d[n] for n in self.names] for d in ds])
        self.logs = np.array([bool(np.all(V[:, i] > 0) and p0[n] > 0)
                              for i, n in enumerate(self.names)])
        th0 = np.array([math.log(p0[n]) if lg else p0[n]
                        for n, lg in zip(self.names, self.logs)])
        J, G, Jd = self._gradients(step, p0, th0)
        units = run_units(step)
        between2, within2 = scatter2(step.fit)
        if units is None or between2 <= 0:
            # each row its own run: its whole scatter is its own noise
            units, between2, within2 = None, 0.0, between2 + within2
        else:  # a floor on the within part: a run's rows never pin the law exactly
            within2 = max(within2, WITHIN_FLOOR * (between2 + within2))
        u_pool, u_data, n_units = units if units else (None, None, 0)
        # the runs' shared offsets b (one per run, prior sd: the between-run scatter) join
        # the law's parameters as coordinates: a row's log loss is J θ + b[its run] + noise.
        # J and G hold the law's part; a row's offset is its label in self.unit.
        self.J, self.G, self.unit, self.noise2 = J, G, u_pool, within2
        P = self.P = len(th0)
        if len(Jd) >= P:
            # the Laplace approximation at the runs so far: with tens of draws of 5-8
            # parameters the draws' covariance is noisy and heavy-tailed, and on the
            # benchmark's replays it picked worse runs (8 paired seeds: 0.51% -> 0.46% target
            # error on chinchilla, 1.06% -> 0.95% on depth-joint)
            if units:
                info = _ridged(_run_information(Jd, u_data, n_units, within2))
                info[P:, P:] += np.eye(n_units) / between2
            else:
                info = _information(step, J, Jd, within2)
            self.S = np.linalg.pinv(info)
        else:
            Th = np.where(self.logs, np.log(np.where(V > 0, V, 1.0)), V)
            lo, hi = np.percentile(Th, [5, 95], axis=0)
            self.S = np.zeros((P + n_units, P + n_units))
            self.S[:P, :P] = np.atleast_2d(np.cov(np.clip(Th, lo, hi).T))
            self.S[P:, P:] = between2 * np.eye(n_units)
        self.var0 = self.var = self._target_var()

    def _target_var(self) -> float:
        S = self.S[:self.P, :self.P]
        return max(float(np.trace(self.G @ S @ self.G.T)), 0.0)

    def row(self, j: int) -> np.ndarray:
        """Candidate ``j``'s gradient in all coordinates: the law's, then its run's offset."""
        a = np.zeros(len(self.S))
        a[:self.P] = self.J[j]
        if self.unit is not None:
            a[self.P + self.unit[j]] = 1.0
        return a

    def _gradients(self, step: Step, p0: dict[str, float], th0: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """d log-loss / dθ at the pool, d target / dθ, and d log-loss / dθ at the fit's data
        (empty without it), by central differences at the point estimate."""
        def at(th: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            p = dict(p0)
            p.update({n: float(math.exp(v) if lg else v)
                      for n, lg, v in zip(self.names, self.logs, th)})
            return (np.log(np.asarray(step.law.predict(p, step.pool), float)),
                    step.target.values(step.law, p),
                    np.log(np.asarray(step.law.predict(p, step.data), float)) if step.data
                    else np.zeros(0))

        J, G, Jd = [], [], []
        with np.errstate(all="ignore"):
            for i in range(len(th0)):
                h = 1e-4 * max(abs(th0[i]), 1.0)
                e = np.zeros_like(th0)
                e[i] = h
                (yu, tu, du), (yd, td, dd) = at(th0 + e), at(th0 - e)
                J.append((yu - yd) / (2 * h))
                G.append((tu - td) / (2 * h))
                Jd.append((du - dd) / (2 * h))
        return (np.nan_to_num(np.array(J).T), np.nan_to_num(np.array(G).T),
                np.nan_to_num(np.array(Jd).T))

    def gain(self) -> np.ndarray:
        """Shrink of the target's summed variance if each candidate were run next."""
        if self.unit is None:
            U = self.J @ self.S  # M x P
            return ((U @ self.G.T) ** 2).sum(1) / (np.einsum("ij,ij->i", U, self.J)
                                                   + self.noise2)
        # a row is (J, its run's one-hot): the covariances in pieces, never M x (P + runs)
        P, u = self.P, self.P + self.unit
        SG = self.S[:, :P] @ self.G.T  # (P + runs) x targets
        cov = self.J @ SG[:P] + SG[u]
        var = (np.einsum("ij,ij->i", self.J @ self.S[:P, :P], self.J)
               + 2 * np.einsum("ij,ij->i", self.J, self.S[u, :P]) + self.S[u, u])
        return (cov ** 2).sum(1) / (var + self.noise2)

    def condition(self, j: int) -> None:
        a = self.row(j)
        u = self.S @ a
        self.S = self.S - np.outer(u, u) / (float(a @ u) + self.noise2)
        self.var = self._target_var()


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


def archfit_criterion(step: Step, k: int, left: float, trace: list | None = None
                      ) -> list[int]:
    """One greedy batch on the ensemble, ranked by the target's expected shrink per square
    root of cost (``COST_EXPONENT``), each pick conditioning the next. ``trace`` receives (gain
    per unit cost, the target's remaining sd as a share of today's) per pick.

    The exponent is measured, not assumed. Shrink per unit cost (exponent 1) trusts the
    ensemble's gains fully and fills a batch with cheap runs; shrink alone (0) ignores cost.
    The gains come from a fit of the runs so far, often a poor one early on, and on
    bench_design each end loses one planted truth. The exponent ½ tempers the cost (as
    cost-cooled acquisition does, Lee et al. 2020, arXiv 2003.10870, with a fixed exponent
    instead of their schedule). The README's "What to run next" gives the rules tried and
    their figures."""
    ds = draws(step.fit)
    if len(ds) < MIN_DRAWS:
        return space_filling(step, k, left)
    ens = Ensemble(step, ds)
    near = np.zeros(len(step.cost), bool)
    tr: list = []
    gains = np.zeros(len(step.cost))  # this pick's, from score to update: computed once

    def score(ok: np.ndarray) -> np.ndarray:
        gains[:] = ens.gain()
        return np.where(near, -np.inf, gains) / step.cost ** COST_EXPONENT

    def update(j: int) -> None:
        g = float(gains[j]) / ens.var0 if ens.var0 > 0 else 0.0
        ens.condition(j)
        near[near_duplicates(step.pool, j)] = True
        tr.append((g / step.cost[j], math.sqrt(ens.var / ens.var0) if ens.var0 else 1.0))

    picks = _greedy(step, k, left, score, update)
    if trace is not None:
        trace.extend(tr)
    return picks


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
    J, Jd, G = (np.nan_to_num(np.stack(c, axis=1)) for c in cols)
    return J, Jd, G


def _information(step: Step, J: np.ndarray, Jd: np.ndarray, s2: float | None = None
                 ) -> np.ndarray:
    """The Fisher information of the runs so far (Jd: d log-loss / dθ at them), with a
    vanishing ridge so that its inverse exists where the runs leave a direction free.

    The ridge is 1e-9 of each parameter's own information, not of the trace, so it does not
    depend on the parameters' units. On the raw scale that d-optimal and v-optimal use,
    Chinchilla's A and B sit near 10³ and its exponents near 0.3; a ridge of the trace's size
    acted as a prior on A and B (at the planted Chinchilla truth it halved the target's
    predicted sd). On the Ensemble's log scale it weighed on the nearly free directions."""
    s2 = noise_var(step.fit) if s2 is None else s2
    return _ridged(Jd.T @ Jd / s2 if len(Jd) else np.zeros((J.shape[1], J.shape[1])))


def _ridged(info: np.ndarray) -> np.ndarray:
    """``info`` with a ridge of 1e-9 of each coordinate's own information (1 where none)."""
    own = np.diag(info).copy()
    own[~(own > 0)] = 1.0  # a parameter no run informs: a unit ridge, its variance stays huge
    return info + 1e-9 * np.diag(own)


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
    cov = np.linalg.pinv(_information(step, J, Jd))

    def update(j: int) -> None:
        nonlocal cov
        u = cov @ J[j]
        cov = cov - np.outer(u, u) / (s2 + J[j] @ u)

    return _greedy(step, k, left, lambda ok: score(J, G, cov, s2), update)


def d_optimal(step: Step, k: int, left: float) -> list[int]:
    """Greedy log-determinant: it grows by log(1 + leverage) per run."""
    return _linearized(step, k, left,
                       lambda J, G, cov, s2: np.einsum("ij,jk,ik->i", J, cov, J) / s2)


def shrink(J: np.ndarray, G: np.ndarray, cov: np.ndarray, s2: float) -> np.ndarray:
    """How much observing each candidate (rows of J) would shrink the target's linearized
    variance trace(G cov Gᵀ), at noise variance ``s2``."""
    U = J @ cov  # M x P
    return ((U @ G.T) ** 2).sum(1) / (s2 + np.einsum("ij,ij->i", U, J))


def v_optimal(step: Step, k: int, left: float) -> list[int]:
    """Greedy shrink of the target's linearized variance trace(G cov Gᵀ), cost ignored."""
    return _linearized(step, k, left, shrink)


STRATEGIES: dict[str, Callable[..., list[int]]] = {
    "archfit": archfit_criterion, "random": random, "cheapest": cheapest,
    "cost-weighted": cost_weighted, "d-optimal": d_optimal, "v-optimal": v_optimal,
}
# the strategies that read a fit (the others pick without one)
ADAPTIVE = ("archfit", "d-optimal", "v-optimal")
