"""Too few clusters for a cluster bootstrap: resample rows, widened by the design effect.

A bootstrap over clusters (a surface's (size, tokens) cells, a sweep's training runs) has a
level only with enough of them: with k clusters it draws from at most C(2k-1, k) distinct
resamples, and its percentiles are those of a handful of refits (4 cells give 35). Below
:data:`MIN_CLUSTERS` the fit resamples rows instead, which treats correlated rows as
independent and so understates the spread; each draw's distance from the point estimate is
then stretched by the square root of the design effect, ``deff = 1 + (m - 1) rho`` (Kish 1965,
*Survey Sampling*, for a mean; Scott & Holt 1982, JASA 77, for least-squares coefficients whose
covariates are constant within a cluster, as a cell's size and tokens are), with ``m`` the mean
cluster size and ``rho`` the residuals' intra-cluster correlation, estimated by one-way
analysis of variance (the ANOVA estimator, clipped to [0, 1])."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

# fewer clusters than this cannot carry a 95% bootstrap interval: rows are resampled instead
MIN_CLUSTERS = 10


@dataclass(frozen=True)
class Fallback:
    """Rows resampled in place of ``n_clusters`` clusters of ``unit``, draws widened by
    ``sqrt(deff)``."""

    unit: str
    n_clusters: int
    rho: float
    mean_size: float

    @property
    def deff(self) -> float:
        return 1.0 + (self.mean_size - 1.0) * self.rho

    @property
    def widen(self) -> float:
        return math.sqrt(self.deff)

    def describe(self) -> str:
        return (f"row: resampled in place of {self.n_clusters} clusters (each a {self.unit}; too "
                f"few for a 95% interval, under {MIN_CLUSTERS}), each draw's distance from the "
                f"estimate widened x{self.widen:.2f}, the square root of the design effect "
                f"1 + (m - 1) rho (m {self.mean_size:.3g} rows a cluster, rho "
                f"{self.rho:.2f} their residuals' intra-cluster correlation)")


def intra_cluster_correlation(resid: Any, groups: Any) -> float:
    """The one-way ANOVA estimate of the residuals' intra-cluster correlation, in [0, 1]."""
    r, g = np.asarray(resid, float), np.asarray(groups)
    labels, inv, sizes = np.unique(g, return_inverse=True, return_counts=True)
    k, n = len(labels), len(r)
    if k < 2 or n <= k:
        return 0.0
    means = np.bincount(inv, weights=r) / sizes
    msb = float(np.sum(sizes * (means - r.mean()) ** 2) / (k - 1))
    msw = float(np.sum((r - means[inv]) ** 2) / (n - k))
    n0 = (n - float(np.sum(sizes ** 2)) / n) / (k - 1)
    denom = msb + (n0 - 1.0) * msw
    return float(min(1.0, max(0.0, (msb - msw) / denom))) if denom > 0 else 0.0


def fallback(groups: Any, unit: str, resid: Any) -> Fallback | None:
    """The fallback where ``groups`` has fewer than :data:`MIN_CLUSTERS` clusters of several
    rows each (and at least that many rows), else None."""
    g = np.asarray(groups)
    k, n = len(np.unique(g)), len(g)
    if k >= MIN_CLUSTERS or n < MIN_CLUSTERS or n <= k or resid is None or len(resid) != n:
        return None
    name = unit.split(":")[0].split(" (rows")[0].strip()
    return Fallback(name, k, intra_cluster_correlation(resid, g), n / k)


def widen_draws(samples: np.ndarray, estimate: Any, factor: float,
                names: Sequence[str], domains: Mapping[str, tuple[Any, Any, bool]]
                ) -> np.ndarray:
    """Each draw moved ``factor`` times as far from ``estimate``, held inside its parameter's
    domain (a coefficient stays >= 0, an exponent > 0)."""
    est = np.asarray(estimate, float)
    out = est + factor * (np.asarray(samples, float) - est)
    for j, name in enumerate(names):
        lo, hi, strict = domains.get(name, (None, None, False))
        if lo is not None:
            floor = lo if not strict else lo + 1e-12 * max(1.0, abs(float(est[j])))
            out[:, j] = np.maximum(out[:, j], floor)
        if hi is not None:
            out[:, j] = np.minimum(out[:, j], hi)
    return out
