"""What a run would teach (:class:`Ensemble`): the parameters' uncertainty carried to the target
by the law's gradients (a linear Gaussian shortcut), and how it shrinks when a candidate is run."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from archfit.designing.step import Step
from archfit.numbers import draw_percentiles


def scatter2(fit: Any) -> tuple[float, float]:
    """A new row's scatter about the law (log loss) as variances: (between runs, within one);
    without the fit's scatter, its RMSE as the between part (each row its own run)."""
    sc = (fit.diagnostics or {}).get("scatter") or {}
    b2, w2 = sc.get("between", 0.0) ** 2, sc.get("within", 0.0) ** 2
    if b2 + w2 > 0:
        return b2, w2
    return max(float((fit.diagnostics or {}).get("rmse_log") or 0.01) ** 2, 1e-8), 0.0


WITHIN_FLOOR = 0.01  # within-run variance, at least this share of a row's whole scatter
# more runs than this in the pool and the data: each row its own run (the covariance of the
# runs' offsets, (parameters + runs)², would pass 32 MB)
MAX_RUNS = 2000


def run_units(step: Step) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(pool labels, data labels, runs): each row's training run as the fit groups them
    (:func:`archfit.laws.columns.run_groups`); None where every row is its own run, or past
    ``MAX_RUNS`` runs."""
    from archfit.laws.columns import RUN_IDENTITY, run_groups

    data = step.data or {}
    cols = [c for c in RUN_IDENTITY if c in step.pool and (not data or c in data)]
    if "n_layer" not in cols:
        return None
    n_pool = len(step.cost)
    both = {c: np.concatenate([np.asarray(step.pool[c]), np.asarray(data[c])]) if data
            else np.asarray(step.pool[c]) for c in cols}
    labels, _ = run_groups({**both, "loss": np.zeros(len(both[cols[0]]))})
    n_runs = int(labels.max()) + 1
    if n_runs == len(labels) or n_runs > MAX_RUNS:
        return None
    return labels[:n_pool], labels[n_pool:], n_runs


class Ensemble:
    """The target's variance under the law's parameters (log scale where every draw is
    positive), carried to the target and to each candidate's log loss by the law's gradients
    at the point estimate (a linear Gaussian shortcut), and its shrink when a candidate is run:

    - rows that share training runs (:func:`run_units`), with runs so far: the sandwich
      A⁻¹ B A⁻¹ the fit will have (A = Σ J Jᵀ; B = within² A + between² Σ_runs s sᵀ, s a run's
      summed gradient), so a run's second token count gains less than a new run;
    - every row its own run, with runs so far: the inverse Fisher information S, conditioned
      on a fantasized run as S - S j jᵀ S / (jᵀ S j + noise²);
    - no runs (a published prior): the draws' covariance, clipped to its 5-95% range, each
      run's offset a coordinate of S at the between-run scatter."""

    def __init__(self, step: Step, ds: list[dict[str, float]]):
        law, p0 = step.law, dict(step.fit.params)
        self.names = [n for n in law.param_names
                      if np.ptp([d[n] for d in ds]) > 0]  # fixed or folded: not uncertain
        V = np.array([[d[n] for n in self.names] for d in ds])
        self.logs = np.array([bool(np.all(V[:, i] > 0) and p0[n] > 0)
                              for i, n in enumerate(self.names)])
        J, G, Jd = gradients(step, self.names, self.logs)
        units = run_units(step)
        between2, within2 = scatter2(step.fit)
        if units is None or between2 <= 0:
            # each row its own run: its whole scatter is its own noise
            units, between2, within2 = None, 0.0, between2 + within2
        else:  # a floor on the within part: a run's rows never pin the law exactly
            within2 = max(within2, WITHIN_FLOOR * (between2 + within2))
        u_pool, _, n_units = units if units else (None, None, 0)
        # a row's log loss is J θ + b[its run] + noise, b the run's shared offset (sd: the
        # between-run scatter); J and G hold the law's part, self.unit each row's run
        self.J, self.G, self.unit, self.noise2 = J, G, u_pool, within2
        P = self.P = len(self.names)
        self.A: np.ndarray | None = None
        if len(Jd) >= P and units:
            # the variance the fit will have: rows weighed alike, a run's rows sharing its
            # offset (the sandwich A⁻¹ B A⁻¹, :meth:`_meat` its B)
            self.between2, self.A = between2, _ridged(Jd.T @ Jd)
            self.sums = np.zeros((n_units, P))  # each run's summed gradient
            np.add.at(self.sums, units[1], Jd)  # the data rows' runs
        elif len(Jd) >= P:  # the Laplace approximation at the runs so far
            self.S = np.linalg.pinv(information(Jd, within2))
        else:
            Th = np.where(self.logs, np.log(np.where(V > 0, V, 1.0)), V)
            lo, hi = draw_percentiles(Th, [5, 95], axis=0)
            # each run's offset joins the parameters as a coordinate of S
            self.S = np.zeros((P + n_units, P + n_units))
            self.S[:P, :P] = np.atleast_2d(np.cov(np.clip(Th, lo, hi).T))
            self.S[P:, P:] = between2 * np.eye(n_units)
        self.var0 = self.var = self._target_var()

    def _target_var(self) -> float:
        if self.A is not None:
            H = self.G @ np.linalg.pinv(self.A)
            return max(float(np.einsum("tp,pq,tq->", H, self._meat(), H)), 0.0)
        S = self.S[:self.P, :self.P]
        return max(float(np.trace(self.G @ S @ self.G.T)), 0.0)

    def _meat(self) -> np.ndarray:
        """B of the sandwich: the rows' gradients at their noise, each run's sum at its offset's."""
        assert self.A is not None
        return self.noise2 * self.A + self.between2 * self.sums.T @ self.sums

    def _sandwich_gain(self, block: int = 512) -> np.ndarray:
        """Shrink of the sandwich's target variance by each candidate (at least 0): A gains
        J Jᵀ (Sherman-Morrison), B gains J Jᵀ at the row's noise and its run's sum s -> s + J."""
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

    def gain(self) -> np.ndarray:
        """Shrink of the target's summed variance if each candidate were run next."""
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
        if self.A is not None and self.unit is not None:
            self.A = self.A + np.outer(self.J[j], self.J[j])
            self.sums[self.unit[j]] += self.J[j]
        else:
            a = self.row(j)
            u = self.S @ a
            self.S = self.S - np.outer(u, u) / (float(a @ u) + self.noise2)
        self.var = self._target_var()


def gradients(step: Step, names: list[str], logs: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """d log-loss / dθ at the pool, d target / dθ, and d log-loss / dθ at the fit's data
    (empty without it), by central differences at the point estimate; θ the parameters
    ``names``, each on a log scale where ``logs`` says so."""
    p0 = dict(step.fit.params)
    th0 = np.array([math.log(p0[n]) if lg else p0[n] for n, lg in zip(names, logs)])

    def at(th: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        p = {**p0, **{n: float(math.exp(v) if lg else v) for n, lg, v in zip(names, logs, th)}}
        return (np.log(np.asarray(step.law.predict(p, step.pool), float)),
                step.target.values(step.law, p),
                np.log(np.asarray(step.law.predict(p, step.data), float)) if step.data
                else np.zeros(0))

    cols: list[list[np.ndarray]] = [[], [], []]
    with np.errstate(all="ignore"):
        for i in range(len(th0)):
            h = 1e-4 * max(abs(th0[i]), 1.0)
            e = np.zeros_like(th0)
            e[i] = h
            for c, up, dn in zip(cols, at(th0 + e), at(th0 - e)):
                c.append((up - dn) / (2 * h))
    return tuple(finite(step, np.array(c).T) for c in cols)  # type: ignore[return-value]


def information(Jd: np.ndarray, s2: float) -> np.ndarray:
    """The Fisher information of the runs so far (Jd: d log-loss / dθ at them, no rows without
    runs; s2: a run's noise variance), with a ridge of 1e-9 of each parameter's own information
    (not of the trace, so it does not depend on the parameters' units), so that its inverse
    exists where the runs leave a direction free."""
    return _ridged(Jd.T @ Jd / s2)


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


def finite(step: Any, a: np.ndarray) -> np.ndarray:
    """``a`` with its non-finite entries set to 0, and a note on ``step`` when there were
    any: a derivative that overflowed near the fit makes its candidates count as uninformative,
    which the reader should know."""
    bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
    if bad:
        note = (f"{bad} of {np.size(a)} derivatives of the prediction were not finite at the "
                "fit (a prediction overflowed near the point estimate); set to 0, so those "
                "candidates count as uninformative")
        if note not in step.notes:
            step.notes.append(note)
    return np.nan_to_num(a, nan=0.0, posinf=0.0, neginf=0.0)
