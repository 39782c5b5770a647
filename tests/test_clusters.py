"""Too few clusters for a cluster bootstrap: rows are resampled and the draws widened by the
design effect 1 + (m - 1) rho (Kish 1965; Scott & Holt 1982), said in the interval's method."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import archfit
from archfit.laws.inference.clusters import MIN_CLUSTERS, fallback, intra_cluster_correlation


def test_the_intra_cluster_correlation_is_the_anova_estimator():
    """Against statsmodels' one-way ANOVA of the same residuals (the independent answer):
    rho = (MSB - MSW) / (MSB + (n0 - 1) MSW)."""
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(6), [5, 7, 6, 9, 4, 8])
    r = rng.normal(0, 1, 6)[g] + rng.normal(0, 0.8, len(g))
    import pandas as pd

    table = sm.stats.anova_lm(ols("r ~ C(g)", pd.DataFrame({"r": r, "g": g})).fit())
    msb, msw = table["mean_sq"].iloc[0], table["mean_sq"].iloc[1]
    n, k = len(g), 6
    n0 = (n - np.sum(np.bincount(g) ** 2) / n) / (k - 1)
    assert intra_cluster_correlation(r, g) == pytest.approx((msb - msw) / (msb + (n0 - 1) * msw))
    assert intra_cluster_correlation(rng.normal(0, 1, len(g)), g) < 0.2  # no clusters: ~0


def test_enough_clusters_or_single_rows_keep_the_cluster_bootstrap():
    enough = np.repeat(np.arange(MIN_CLUSTERS), 3)
    assert fallback(enough, "run", np.zeros(len(enough))) is None
    assert fallback(np.arange(40), "run", np.zeros(40)) is None


def test_a_fit_of_few_clusters_resamples_rows_widened_and_says_so():
    """Four sizes of 30 checkpoints each, a shared offset per size: the fit resamples rows,
    widens by sqrt(1 + 29 rho) with rho its residuals' intra-cluster correlation, and its
    interval's method says so; the widened 95% interval on E is wider than the rows' own by
    about that factor."""
    rng = np.random.default_rng(1)
    rows = []
    for N, off in zip((1e7, 3e7, 1e8, 3e8), rng.normal(0, 0.01, 4)):
        for D in np.geomspace(1e9, 1e11, 30):
            L = (1.7 + 400 / N ** 0.34 + 410 / D ** 0.28) * np.exp(off + rng.normal(0, 0.004))
            rows.append({"run_id": f"n{N:g}", "params": N, "tokens": D, "loss": L})
    frame = pl.DataFrame(rows)
    f = archfit.fit(frame, law="chinchilla", bootstrap=60, heldout=False)
    w = f.bootstrap["widened"]
    rho = intra_cluster_correlation(f.diagnostics["residuals"], frame["run_id"].to_numpy())
    assert f.bootstrap["clusters"] == 4 and w == pytest.approx(np.sqrt(1 + 29 * rho)) and w > 1.3
    assert "widened" in f.interval_provenance()["method"]
    assert any("too few for a 95% interval" in n for n in f.notes)
    plain = archfit.fit(frame, law="chinchilla", bootstrap=60, heldout=False,
                        group=["run_id", "tokens"])  # every row its own unit: not widened
    assert "widened" not in plain.bootstrap
    lo, hi = f.ci["E"]
    plo, phi = plain.ci["E"]
    assert (hi - lo) == pytest.approx(w * (phi - plo), rel=0.35)
