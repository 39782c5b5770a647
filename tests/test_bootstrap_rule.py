"""bootstrap="auto" (the CLI's default): rounds of resamples until each parameter's interval
ends are settled, checked against the order-statistic closed form, on a fit that settles and on
one that does not, and as a prefix of the fixed-count bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from archfit import fit
from archfit.laws.inference.fitting import AUTO_MAX, AUTO_MC_ERROR, AUTO_ROUND, interval_mc_error


def test_the_monte_carlo_error_of_a_normal_intervals_ends_is_the_order_statistics_closed_form():
    """For B normal draws the 2.5th percentile lies, with 95% confidence, between the order
    statistics of ranks B p -/+ 1.96 sqrt(B p (1 - p)): half that span over the interval's width
    3.92 is, at B = 1,000, (Phi^-1(0.0355) - Phi^-1(0.0155)) / 2 / 3.92 = 0.045."""
    expected = (norm.ppf(35.5 / 1000) - norm.ppf(15.5 / 1000)) / 2 / (2 * norm.ppf(0.975))
    assert expected == pytest.approx(0.045, abs=0.002)
    # the larger of the two ends' errors, over 40 samples of 1,000 draws: within 20%
    errs = [interval_mc_error(np.random.default_rng(s).standard_normal((1000, 1)))
            for s in range(40)]
    assert np.median(errs) == pytest.approx(expected, rel=0.2)
    # sixteen times the draws: a quarter of it (the error falls as 1 / sqrt(B))
    big = np.random.default_rng(1).standard_normal((16000, 1))
    assert interval_mc_error(big) == pytest.approx(expected / 4, rel=0.15)
    assert interval_mc_error(big[:10]) == float("inf")


@pytest.mark.slow
def test_a_well_determined_fit_stops_when_settled_before_the_cap(chinchilla_synthetic):
    f = fit(chinchilla_synthetic(n=120, noise=0.004)[0], law="chinchilla", bootstrap="auto",
            heldout=False)
    b = f.bootstrap
    assert b["n"] % AUTO_ROUND == 0 and b["n"] < AUTO_MAX  # 600 here
    assert b["settled"] and b["mc_error"] <= AUTO_MC_ERROR and "auto" in b["rule"]
    assert "bootstrap resamples drawn by the rule auto" in f.summary()
    # the draws are the first ones of the fixed-count bootstrap with the same seed
    fixed = fit(chinchilla_synthetic(n=120, noise=0.004)[0], law="chinchilla",
                bootstrap=b["n"], heldout=False)
    assert fixed.bootstrap["samples"]["alpha"] == b["samples"]["alpha"]


@pytest.mark.slow
def test_a_fit_whose_tails_do_not_settle_says_so_at_the_cap(monkeypatch):
    """Six noisy runs of a five-parameter law: the draws scatter and never settle (rounds of
    50 and a cap of 100 here, to keep the test short)."""
    import polars as pl

    from archfit.laws.inference import fitting

    monkeypatch.setattr(fitting, "AUTO_ROUND", 50)
    monkeypatch.setattr(fitting, "AUTO_MAX", 100)
    rng = np.random.default_rng(3)
    rows = [{"params": N, "tokens": D, "loss": 1.7 + 400 / N ** 0.34 + 800 / D ** 0.3
             + rng.normal(0, 0.05)} for N in (1e7, 2e7, 4e7) for D in (1e9, 3e9)]
    f = fit(pl.DataFrame(rows), law="chinchilla", bootstrap="auto", heldout=False)
    b = f.bootstrap
    assert not b["settled"] and b["n"] == 100 and b["mc_error"] > AUTO_MC_ERROR
    assert "not settled at 100" in f.summary() and "rounds of 50" in b["rule"]
