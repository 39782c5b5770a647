"""How ``archfit design`` picks the next runs: its own criterion and the baselines it is judged
against (Li et al. 2026, "Spend Less, Fit Better", arXiv 2604.22753, compare the same five).

**archfit** (the default): the expected shrink of the target's variance per unit cost, from the
fit's parameter draws (its bootstrap). Over the draws, each candidate's predicted log loss and
the target's log quantity have a joint covariance. Observing a run (with the scatter of runs
about the law as noise) shrinks the target's variance by Cov(target, run)² / (Var(run) +
noise²): a linear-Bayes (Gaussian) update of the *ensemble's* covariance, no linearization of
the law. A batch is picked greedily, conditioning that covariance on each pick before the next
(fantasized outcomes), so a near-duplicate of a chosen run gains almost nothing.

Baselines: ``random``; ``cheapest`` (ascending cost); ``cost-weighted`` (random, probability
∝ 1/cost); ``d-optimal`` (greedy log-determinant of the Fisher information of the law's
parameters, linearized at the point estimate); ``v-optimal`` (greedy shrink of the target's
linearized variance, cost ignored). Each adds runs while the budget allows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

CRITERION = ("expected shrink of the target's variance per unit cost: a linear-Bayes "
             "(Gaussian) update of the bootstrap ensemble's covariance, conditioned on each pick "
             "in turn (fantasized outcomes) so a batch holds no near-duplicates")
MAX_DRAWS = 400  # parameter draws the ensemble uses (the fit's bootstrap, thinned)


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


def noise_var(fit: Any) -> float:
    """A new run's scatter about the law (log loss): between runs and within one."""
    sc = (fit.diagnostics or {}).get("scatter") or {}
    s2 = sc.get("between", 0.0) ** 2 + sc.get("within", 0.0) ** 2
    return s2 if s2 > 0 else max(float((fit.diagnostics or {}).get("rmse_log") or 0.01) ** 2,
                                 1e-8)


def _winsor(A: np.ndarray) -> np.ndarray:
    """Columns clipped to their 2.5-97.5% range: a few degenerate resamples (an exponent on
    its bound) must not own the covariance."""
    lo, hi = np.nanpercentile(A, [2.5, 97.5], axis=0)
    return np.clip(A, lo, hi)


def ensemble(step: Step) -> tuple[np.ndarray, np.ndarray] | None:
    """(Y, T): each draw's log loss at every candidate and its target quantities."""
    ds = draws(step.fit)
    Y, T = [], []
    with np.errstate(all="ignore"):
        for p in ds:
            try:
                y = np.log(np.asarray(step.law.predict(p, step.pool), float))
                t = step.target.values(step.law, p)
            except (ValueError, OverflowError, ZeroDivisionError):
                continue
            if np.all(np.isfinite(t)) and np.isfinite(y).mean() > 0.9:
                Y.append(y)
                T.append(t)
    if len(Y) < 10:
        return None
    Y, T = np.array(Y), np.array(T)
    Y = np.where(np.isfinite(Y), Y, np.nanmedian(Y, axis=0))
    return _winsor(Y), _winsor(T)


class Ensemble:
    """The joint covariance of the target and the candidates over the draws, conditioned on
    fantasized observations one at a time (rank-one updates; nothing of size pool²)."""

    def __init__(self, Y: np.ndarray, T: np.ndarray, noise2: float):
        n = max(len(Y) - 1, 1)
        self.Z = np.concatenate([T - T.mean(0), Y - Y.mean(0)], axis=1) / math.sqrt(n)
        self.K = T.shape[1]
        self.noise2 = noise2
        self.V: list[np.ndarray] = []
        self.diag = (self.Z[:, self.K:] ** 2).sum(0)
        self.cross = self.Z[:, :self.K].T @ self.Z[:, self.K:]  # K x M
        self.var0 = self.var = float((self.Z[:, :self.K] ** 2).sum())

    def gain(self) -> np.ndarray:
        """Shrink of the target's summed variance if each candidate were run next."""
        return (self.cross ** 2).sum(0) / (self.diag + self.noise2)

    def condition(self, j: int) -> None:
        col = self.Z.T @ self.Z[:, self.K + j]
        for v in self.V:
            col -= v * v[self.K + j]
        v = col / math.sqrt(max(col[self.K + j], 0.0) + self.noise2)
        self.V.append(v)
        self.diag = np.maximum(self.diag - v[self.K:] ** 2, 0.0)
        self.cross -= np.outer(v[:self.K], v[self.K:])
        self.var = max(self.var - float(v[:self.K] @ v[:self.K]), 0.0)


def archfit_criterion(step: Step, k: int, left: float, trace: list | None = None
                      ) -> list[int]:
    """Greedy variance shrink per unit cost; ``trace`` receives (gain per cost, the target's
    remaining sd as a share of today's) per pick."""
    e = ensemble(step)
    if e is None:
        return space_filling(step, k, left)
    ens = Ensemble(*e, noise_var(step.fit))

    def score(ok: np.ndarray) -> np.ndarray:
        return ens.gain() / step.cost

    def update(j: int) -> None:
        g = float(ens.gain()[j]) / ens.var0 if ens.var0 > 0 else 0.0
        ens.condition(j)
        if trace is not None:
            trace.append((g / step.cost[j], math.sqrt(ens.var / ens.var0) if ens.var0 else 1.0))

    return _greedy(step, k, left, score, update)


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


def _information(step: Step, J: np.ndarray, Jd: np.ndarray) -> np.ndarray:
    s2 = noise_var(step.fit)
    info = Jd.T @ Jd / s2 if len(Jd) else np.zeros((J.shape[1], J.shape[1]))
    return info + 1e-9 * (np.trace(info) + 1.0) * np.eye(J.shape[1])


def d_optimal(step: Step, k: int, left: float) -> list[int]:
    jac = _jacobians(step)
    if jac is None:
        return space_filling(step, k, left)
    J, Jd, _ = jac
    s2 = noise_var(step.fit)
    cov = np.linalg.pinv(_information(step, J, Jd))

    def score(ok: np.ndarray) -> np.ndarray:  # log det grows by log(1 + leverage)
        return np.einsum("ij,jk,ik->i", J, cov, J) / s2

    def update(j: int) -> None:
        nonlocal cov
        u = cov @ J[j]
        cov = cov - np.outer(u, u) / (s2 + J[j] @ u)

    return _greedy(step, k, left, score, update)


def v_optimal(step: Step, k: int, left: float) -> list[int]:
    jac = _jacobians(step)
    if jac is None:
        return space_filling(step, k, left)
    J, Jd, G = jac
    s2 = noise_var(step.fit)
    cov = np.linalg.pinv(_information(step, J, Jd))

    def score(ok: np.ndarray) -> np.ndarray:  # shrink of trace(G cov Gᵀ), cost ignored
        U = J @ cov  # M x P
        return ((U @ G.T) ** 2).sum(1) / (s2 + np.einsum("ij,ij->i", U, J))

    def update(j: int) -> None:
        nonlocal cov
        u = cov @ J[j]
        cov = cov - np.outer(u, u) / (s2 + J[j] @ u)

    return _greedy(step, k, left, score, update)


STRATEGIES: dict[str, Callable[..., list[int]]] = {
    "archfit": archfit_criterion, "random": random, "cheapest": cheapest,
    "cost-weighted": cost_weighted, "d-optimal": d_optimal, "v-optimal": v_optimal,
}
# the strategies that read a fit (the others pick without one)
ADAPTIVE = ("archfit", "d-optimal", "v-optimal")
