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
def test_a_tolerance_the_cap_cannot_meet_stops_early_with_the_count_that_would(
        chinchilla_synthetic, monkeypatch):
    """A 2% tolerance on the fit that settles at 10%: the error of the first draws it trusts
    for this (AUTO_HOPELESS_FROM, two rounds), falling as 1 / sqrt(B), needs more than four
    caps, so the rule stops there and names the count, B (err / 2%)^2 in hundreds."""
    from archfit.laws.inference import fitting

    monkeypatch.setattr(fitting, "AUTO_MC_ERROR", 0.02)
    f = fit(chinchilla_synthetic(n=120, noise=0.004)[0], law="chinchilla", bootstrap="auto",
            heldout=False)
    b = f.bootstrap
    need = fitting.AUTO_HOPELESS_FROM * (b["mc_error"] / 0.02) ** 2
    assert b["n"] == fitting.AUTO_HOPELESS_FROM == 2 * AUTO_ROUND
    assert not b["settled"] and need > 4 * AUTO_MAX
    assert b["to_settle"] == pytest.approx(need, abs=100) and b["to_settle"] % 100 == 0
    assert f"about {b['to_settle']:,} would settle it: --bootstrap {b['to_settle']}" in \
        f.summary().replace("\n      ", " ")


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
    monkeypatch.setattr(fitting, "AUTO_HOPELESS", float("inf"))  # draw to the cap
    f = fit(pl.DataFrame(rows), law="chinchilla", bootstrap="auto", heldout=False)
    b = f.bootstrap
    assert not b["settled"] and b["n"] == 100 and b["mc_error"] > AUTO_MC_ERROR
    assert "not settled at 100" in f.summary() and "rounds of 50" in b["rule"]
    # the error at 100 draws says how many would settle it, B (err / tolerance)^2: here more
    # than --bootstrap takes
    need = 100 * (b["mc_error"] / AUTO_MC_ERROR) ** 2
    assert need > fitting.MAX_BOOTSTRAP and b["to_settle"] == fitting.MAX_BOOTSTRAP + 1
    assert "more than 100,000 resamples would be needed" in f.summary()
    # where that is beyond AUTO_HOPELESS caps (here of 200) from AUTO_HOPELESS_FROM draws
    # on, the rule stops there (50 draws have no finite error yet: it goes on to 100)
    monkeypatch.setattr(fitting, "AUTO_HOPELESS", 4.0)
    monkeypatch.setattr(fitting, "AUTO_MAX", 200)
    monkeypatch.setattr(fitting, "AUTO_HOPELESS_FROM", 50)
    early = fit(pl.DataFrame(rows), law="chinchilla", bootstrap="auto", heldout=False)
    e = early.bootstrap
    assert e["n"] == 100 and not e["settled"] and e["to_settle"] > 4 * 200
    first = e["samples"]["alpha"]
    assert first == b["samples"]["alpha"][:len(first)]  # the same first draws


def test_the_fits_log_sum_exp_is_scipys():
    """The optimizers' log-sum-exp (numpy, without scipy's per-call wrappers) against
    scipy.special.logsumexp and softmax, with terms of 1e3 and -inf, inf and NaN ones."""
    from scipy.special import logsumexp, softmax

    from archfit.laws.inference.optimize import log_sum_exp

    U = np.random.default_rng(0).normal(0, 30, (50, 4))
    U[3, :] = [1e3, 999.0, -np.inf, 0.0]
    assert log_sum_exp(U, axis=1) == pytest.approx(logsumexp(U, axis=1), rel=1e-14)
    lse, P = log_sum_exp(U, axis=1, weights=True)
    assert P == pytest.approx(softmax(U, axis=1), rel=1e-12, abs=1e-300)
    assert log_sum_exp(U.T, axis=0) == pytest.approx(logsumexp(U.T, axis=0), rel=1e-14)
    odd = np.array([[np.inf, 1.0], [-np.inf, -np.inf], [np.nan, 1.0]])
    for got, want in zip(log_sum_exp(odd, axis=1), logsumexp(odd, axis=1)):
        assert got == want or (np.isnan(got) and np.isnan(want))


def test_draw_ends_are_the_type_7_percentiles_of_the_finite_draws():
    """On 0, 1, ..., 100 the type-7 percentile p is p itself (Hyndman & Fan 1996), so the 95%
    ends are 2.5 and 97.5, the 90% ends 5 and 95; non-finite draws are left out; fewer than
    ten finite draws give no interval."""
    from archfit.numbers import MIN_DRAWS, draw_ends

    v = list(range(101))
    assert draw_ends(v) == [2.5, 97.5] and draw_ends(v, 0.9) == pytest.approx([5.0, 95.0])
    assert draw_ends(v + [float("nan"), float("inf")]) == [2.5, 97.5]
    assert MIN_DRAWS == 10 and draw_ends(list(range(9)) + [float("nan")] * 5) is None
    assert draw_ends(list(range(10))) == pytest.approx([0.225, 8.775])
