"""The design's model of what a run would teach: the parameters' uncertainty at the runs so
far, carried to the target and to each candidate's log loss by the law's gradients (a linear
Gaussian shortcut), and how it shrinks when a candidate is run (:class:`Ensemble`). Rows of one
training run share its offset, as the fit counts them (:func:`run_units`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from archfit.designing.strategies import Step


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


class Ensemble:
    """The target's uncertainty and each candidate's, on the parameters of the law (each on a
    log scale where every draw is positive; the parameters the draws leave fixed are out),
    carried to the target quantities and to each candidate's log loss by the law's gradients
    at the point estimate (a linear Gaussian shortcut). A candidate adds the scatter of runs
    about the law as its noise. Three cases:

    - **Rows that are runs' checkpoints, with runs so far** (the fit counts a shape's rows at
      several token counts as one training run, :func:`run_units`): the variance the fit
      itself will have. The fit weighs every row alike, and a run's rows share its offset
      (variance: the fit's between-run scatter; only the within-run part is a row's own
      noise), so its estimate's covariance is the sandwich A⁻¹ B A⁻¹: A = Σ J Jᵀ over the
      rows, B = within² A + between² Σ_runs s sᵀ, s a run's summed gradient. A run's second
      token count gains less than a new run, and a row whose run's offset would weigh more
      than it teaches can gain nothing or less (README, "The fit's own variance").
    - **Every row its own run, with runs so far** (a chinchilla grid): the inverse Fisher
      information, S; conditioning on a fantasized run, S <- S - S j jᵀ S / (jᵀ S j + noise²).
    - **No runs yet** (a published prior): the draws' covariance, clipped to its 5-95% range so
      a few degenerate resamples do not own it; where rows share runs, each run's offset joins
      the parameters as a coordinate of S, with the between-run scatter as its variance.

    For a target table, the law's own discrepancy (:class:`Discrepancy`) adds to the target's
    variance and to each candidate's gain (``discrepancy=False``: the parameters alone)."""

    def __init__(self, step: Step, ds: list[dict[str, float]], discrepancy: bool = True):
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
        # a row's log loss is J θ + b[its run] + noise, b the run's shared offset (sd: the
        # between-run scatter); J and G hold the law's part, self.unit each row's run
        self.J, self.G, self.unit, self.noise2 = J, G, u_pool, within2
        P = self.P = len(th0)
        self.A: np.ndarray | None = None
        if len(Jd) >= P and units:
            # the variance the fit will have: rows weighed alike, a run's rows sharing its
            # offset (the sandwich A⁻¹ B A⁻¹, :meth:`_meat` its B)
            self.between2, self.A = between2, _ridged(Jd.T @ Jd)
            self.sums = np.zeros((n_units, P))  # each run's summed gradient
            assert u_data is not None  # units were given
            np.add.at(self.sums, u_data, Jd)
        elif len(Jd) >= P:
            # the Laplace approximation at the runs so far: with tens of draws of 5-8
            # parameters the draws' covariance is noisy and heavy-tailed, and on the
            # benchmark's replays it picked worse runs (8 paired seeds: 0.51% -> 0.46% target
            # error on chinchilla, 1.06% -> 0.95% on depth-joint)
            self.S = np.linalg.pinv(information(step, J, Jd, within2))
        else:
            Th = np.where(self.logs, np.log(np.where(V > 0, V, 1.0)), V)
            lo, hi = np.percentile(Th, [5, 95], axis=0)
            # each run's offset joins the parameters as a coordinate of S
            self.S = np.zeros((P + n_units, P + n_units))
            self.S[:P, :P] = np.atleast_2d(np.cov(np.clip(Th, lo, hi).T))
            self.S[P:, P:] = between2 * np.eye(n_units)
        self.disc = (Discrepancy(step, between2 + within2)
                     if discrepancy and Discrepancy.applies(step) else None)
        self.var0 = self.var = self._total_var()

    def _total_var(self) -> float:
        return self._target_var() + (self.disc.var if self.disc is not None else 0.0)

    def _target_var(self) -> float:
        if self.A is not None:
            H = self.G @ np.linalg.pinv(self.A)
            return max(float(np.einsum("tp,pq,tq->", H, self._meat(), H)), 0.0)
        S = self.S[:self.P, :self.P]
        return max(float(np.trace(self.G @ S @ self.G.T)), 0.0)

    def _meat(self) -> np.ndarray:
        """B of the sandwich: the rows' summed gradient products at their own noise, plus
        each run's summed gradient at its offset's."""
        assert self.A is not None
        return self.noise2 * self.A + self.between2 * self.sums.T @ self.sums

    def _sandwich_gain(self, block: int = 512) -> np.ndarray:
        """Shrink of the sandwich's target variance by each candidate (none where it would
        widen it): A gains J Jᵀ (A⁻¹ by Sherman-Morrison), B gains J Jᵀ at the row's own
        noise and its run's sum s -> s + J; in blocks of candidates, so memory stays
        (block x targets x parameters)."""
        assert self.A is not None
        Ai = np.linalg.pinv(self.A)
        GAi, meat, now = self.G @ Ai, self._meat(), self._target_var()
        out = np.empty(len(self.J))
        assert self.unit is not None  # a sandwich needs each row's run
        for lo in range(0, len(self.J), block):
            J = self.J[lo:lo + block]
            s = self.sums[self.unit[lo:lo + block]]
            U = J @ Ai
            H = GAi[None] - (U @ self.G.T)[:, :, None] * (
                U / (1 + np.einsum("ij,ij->i", U, J))[:, None])[:, None, :]
            hJ, hs = np.einsum("mtp,mp->mt", H, J), np.einsum("mtp,mp->mt", H, s)
            after = (np.einsum("mtp,pq,mtq->m", H, meat, H) + self.noise2 * (hJ ** 2).sum(1)
                     + self.between2 * (((hs + hJ) ** 2).sum(1) - (hs ** 2).sum(1)))
            out[lo:lo + block] = now - after
        return np.maximum(out, 0.0)  # a row that would widen it: no shrink

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
        what = "derivatives of the prediction"
        return (finite(step, np.array(J).T, what), finite(step, np.array(G).T, what),
                finite(step, np.array(Jd).T, what))

    def gain(self) -> np.ndarray:
        """Shrink of the target's summed variance if each candidate were run next: the
        parameters' part, plus the law's discrepancy's where it applies."""
        g = self._param_gain()
        return g + self.disc.gain() if self.disc is not None else g

    def _param_gain(self) -> np.ndarray:
        if self.A is not None:
            return self._sandwich_gain()
        if self.unit is None:
            return shrink(self.J, self.G, self.S, self.noise2)
        # a row is (J, its run's one-hot): the covariances in pieces, never M x (P + runs)
        P, u = self.P, self.P + self.unit
        SG = self.S[:, :P] @ self.G.T  # (P + runs) x targets
        cov = self.J @ SG[:P] + SG[u]
        var = (np.einsum("ij,ij->i", self.J @ self.S[:P, :P], self.J)
               + 2 * np.einsum("ij,ij->i", self.J, self.S[u, :P]) + self.S[u, u])
        return (cov ** 2).sum(1) / (var + self.noise2)

    def condition(self, j: int) -> None:
        if self.disc is not None:
            self.disc.condition(j)
        if self.A is not None and self.unit is not None:
            self.A = self.A + np.outer(self.J[j], self.J[j])
            self.sums[self.unit[j]] += self.J[j]
        else:
            a = self.row(j)
            u = self.S @ a
            self.S = self.S - np.outer(u, u) / (float(a @ u) + self.noise2)
        self.var = self._total_var()


def information(step: Step, J: np.ndarray, Jd: np.ndarray, s2: float | None = None
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


def shrink(J: np.ndarray, G: np.ndarray, cov: np.ndarray, s2: float) -> np.ndarray:
    """How much observing each candidate (rows of J) would shrink the target's linearized
    variance trace(G cov Gᵀ), at noise variance ``s2``."""
    U = J @ cov  # M x P
    return ((U @ G.T) ** 2).sum(1) / (s2 + np.einsum("ij,ij->i", U, J))


def _ridged(info: np.ndarray) -> np.ndarray:
    """``info`` with a ridge of 1e-9 of each coordinate's own information (1 where none)."""
    own = np.diag(info).copy()
    own[~(own > 0)] = 1.0  # a parameter no run informs: a unit ridge, its variance stays huge
    return info + 1e-9 * np.diag(own)


DISCREPANCY_SD = 0.02  # the law's own miss at a point far from every run (log loss, ~2%)
DISCREPANCY_SCALE = 1.0  # how far it reaches: in standard deviations of the pool's log features
MAX_DISCREPANCY_ROWS = 4000  # candidates + targets + runs: past it, no discrepancy term


class Discrepancy:
    """The law's own error, which no parameter fixes: a smooth residual over the log features
    (size, tokens, depth) with a squared-exponential covariance of sd ``DISCREPANCY_SD`` and
    length ``DISCREPANCY_SCALE`` (Kennedy and O'Hagan 2001's model discrepancy). The runs so
    far pin it near themselves; far from them it is the prior's. Running a candidate pins it
    near that candidate, so a target far from every run gains from runs near it, which the
    parameters' variance alone never asks for (a law fitted where it holds only
    approximately misses most where it extrapolates furthest)."""

    def __init__(self, step: Step, noise2: float):
        cols = [c for c in ("params", "tokens", "n_layer") if c in step.law.columns
                and c in step.pool and c in step.target.rows]
        data = step.data or {}
        n_data = len(data.get(cols[0], ())) if cols and all(c in data for c in cols) else 0
        pool = np.stack([np.log(np.asarray(step.pool[c], float)) for c in cols], axis=1)
        tgt = np.stack([np.log(np.asarray(step.target.rows[c], float)) for c in cols], axis=1)
        X = np.concatenate([pool, tgt] + ([np.stack([np.log(np.asarray(data[c], float))
                                                     for c in cols], axis=1)] if n_data else []))
        sd = pool.std(0)
        X = X / np.where(sd > 0, sd, 1.0) / DISCREPANCY_SCALE
        d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
        K = DISCREPANCY_SD ** 2 * np.exp(-0.5 * d2)
        M, T = len(pool), len(tgt)
        self.noise2 = max(noise2, 1e-8)
        C = K[:M + T, :M + T]
        if n_data:  # what the runs so far already pin down
            Kd = K[:M + T, M + T:]
            C = C - Kd @ np.linalg.solve(K[M + T:, M + T:] + self.noise2 * np.eye(n_data), Kd.T)
        self.C, self.M = C, M
        self.var = self._var()

    def _var(self) -> float:
        return max(float(np.trace(self.C[self.M:, self.M:])), 0.0)

    def gain(self) -> np.ndarray:
        """Shrink of the targets' summed discrepancy variance by each candidate."""
        cross = self.C[self.M:, :self.M]  # targets x candidates
        return (cross ** 2).sum(0) / (np.diag(self.C)[:self.M] + self.noise2)

    def condition(self, j: int) -> None:
        c = self.C[:, j].copy()
        self.C = self.C - np.outer(c, c) / (c[j] + self.noise2)
        self.var = self._var()

    @staticmethod
    def applies(step: Step) -> bool:
        if step.target.kind != "table" or not step.target.rows:
            return False
        n = len(step.cost) + len(next(iter(step.target.rows.values())))
        n += len(next(iter(step.data.values()))) if step.data else 0
        return n <= MAX_DISCREPANCY_ROWS


def finite(step: Any, a: np.ndarray, what: str) -> np.ndarray:
    """``a`` with its non-finite entries set to 0, and a note on ``step`` when there were
    any: a derivative that overflowed near the fit makes its candidates count as uninformative,
    which the reader should know."""
    bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
    if bad:
        note = (f"{bad} of {np.size(a)} {what} were not finite at the fit (a prediction "
                "overflowed near the point estimate); set to 0, so those candidates count as "
                "uninformative")
        if note not in step.notes:
            step.notes.append(note)
    return np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
