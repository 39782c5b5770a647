"""Each of the verdict's thresholds (archfit.laws.inference.trust) pinned by a case on each side of it,
written as literal values: moving a threshold past one of its cases fails here. (Pinned, not
calibrated: their calibration on public sweeps is still to come.) The cases go
through the functions the verdict itself calls, with the smallest stand-ins for a law and a
fit."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from archfit.laws.inference import trust
from archfit.laws.base import ComputeLaw, Law, ShapeLaw


def _law(role: str = "shape", bounds: dict | None = None) -> Law:
    """A law of the kind ``role`` with only what the verdict reads: its bounds, and (a compute
    law) an N_opt of C itself."""
    base = {"shape": ShapeLaw, "compute": ComputeLaw}[role]
    cls = type("Planted", (base,), {"name": "planted", "bounds": bounds or {},
                                    "compute_optimal": lambda self, p, C, **k: (C, C)})
    return cls()


def _fit(span: dict | None = None, **kw) -> SimpleNamespace:
    base = dict(diagnostics={"span": span or {}}, prior=None, params={}, bootstrap={}, ci={},
                extra={})
    return SimpleNamespace(**{**base, **kw})


def _span(target: float | None, top: float = 1e9, bottom: float = 1e7, classes: int = 6,
          role: str = "shape") -> trust.Trust:
    t = trust.Trust(checks={"span": {"params_max": top, "params_min": bottom,
                                     "n_size_classes": classes}})
    trust.span_reasons(_law(role), t, target, None, {})
    return t


@pytest.mark.parametrize("factor, verdict", [(9.5, "informative"), (10.5, "weak"),
                                             (950, "weak"), (1050, "uninformative")])
def test_extrapolation_10x_weak_1000x_uninformative(factor, verdict):
    """EXTRAPOLATION = (10, 1000): target N over the largest N seen."""
    assert _span(factor * 1e9).verdict == verdict


@pytest.mark.parametrize("span, verdict", [(3.2, "informative"), (2.8, "weak")])
def test_sizes_spanning_under_3x_are_weak(span, verdict):
    """MIN_SIZE_SPAN = 3: largest over smallest N."""
    assert _span(None, top=1e9, bottom=1e9 / span).verdict == verdict


@pytest.mark.parametrize("classes, verdict", [(3, "informative"), (2, "weak")])
def test_fewer_than_3_size_classes_are_weak(classes, verdict):
    """MIN_SIZE_CLASSES = 3: through two sizes any two-parameter curve in N passes exactly."""
    assert _span(None, classes=classes).verdict == verdict


@pytest.mark.parametrize("ratio, limits, verdict", [
    (1.9, "OPTIMUM_CI_RATIO", "informative"), (2.1, "OPTIMUM_CI_RATIO", "weak"),
    (9.5, "OPTIMUM_CI_RATIO", "weak"), (10.5, "OPTIMUM_CI_RATIO", "uninformative"),
    (2.9, "COMPUTE_CI_RATIO", "informative"), (3.1, "COMPUTE_CI_RATIO", "weak"),
    (9.5, "COMPUTE_CI_RATIO", "weak"), (10.5, "COMPUTE_CI_RATIO", "uninformative")])
def test_the_optimums_interval_ratio(ratio, limits, verdict):
    """OPTIMUM_CI_RATIO = (2, 10) on the optimal depth's 95% range (high / low): the ends of a
    2x range sit a factor sqrt(2) from its centre, 0.03 / ln(8)^2 * ln(sqrt 2)^2 = 0.08% of the
    loss at Kaplan et al. 2020's curvature. COMPUTE_CI_RATIO = (3, 10) on N_opt's."""
    t = trust.Trust()
    t.grade_band(ratio, None, getattr(trust, limits), "ratio")
    assert t.verdict == verdict


@pytest.mark.parametrize("ratio, band, verdict", [(1.9, (1.8, 2.2), "weak"),
                                                  (9.0, (8.0, 11.0), "uninformative")])
def test_a_threshold_inside_the_draws_band_takes_the_cautious_side(ratio, band, verdict):
    t = trust.Trust()
    t.grade_band(ratio, band, trust.OPTIMUM_CI_RATIO, "ratio")
    assert t.verdict == verdict and "the cautious side is taken" in t.reasons[0]


@pytest.mark.parametrize("coverage, verdict", [(0.82, "informative"), (0.78, "weak")])
def test_heldout_coverage_under_80_percent_is_weak(coverage, verdict):
    """HELDOUT_COVERAGE = 0.8: 95% intervals that hold cover 8 or more of 10 held-out runs
    with probability 0.988 (binomial), so fewer says they are too narrow."""
    h = {"ok": True, "mean_rel_error": 0.01, "mean_halfwidth_rel": 0.03, "coverage": coverage,
         "within_interval": True}
    t = trust.Trust()
    trust.heldout_reason(_law(), t, _fit(diagnostics={"heldout": h}))
    assert t.verdict == verdict


@pytest.mark.parametrize("err, verdict", [(0.045, "informative"), (0.055, "weak"),
                                          (0.145, "weak"), (0.155, "uninformative")])
def test_heldout_error_limits_of_a_loss_law(err, verdict):
    """Law.heldout_limits = (5%, 15%): the held-out runs' mean relative error in the loss."""
    h = {"ok": True, "mean_rel_error": err, "mean_halfwidth_rel": 0.5, "coverage": 1.0,
         "within_interval": True}
    t = trust.Trust()
    trust.heldout_reason(_law(), t, _fit(diagnostics={"heldout": h}))
    assert t.verdict == verdict


@pytest.mark.parametrize("failed, verdict", [(0, "informative"), (200, "weak"),
                                             (600, "uninformative")])
def test_bootstrap_failures_10_and_50_percent(failed, verdict):
    """BOOTSTRAP_FAILURES = (0.1, 0.5): the share of resamples whose fit failed (1,000 here,
    so another seed's band is narrow)."""
    t = trust.Trust()
    trust.bootstrap_reason(t, _fit(bootstrap={"n": 1000, "n_failed": failed}))
    assert t.verdict == verdict


@pytest.mark.parametrize("on, named", [(9, False), (11, True)])
def test_a_parameter_on_a_bound_in_over_10_percent_of_draws_is_named(on, named):
    """BOUND_SHARE = 0.1: the share of draws in which a parameter sits on a bound."""
    draws = [0.0] * on + [0.5] * (100 - on)
    f = _fit(params={"E": 0.5}, bootstrap={"samples": {"E": draws}})
    reasons = trust.bound_reasons(_law(bounds={"E": (0.0, None)}), f)
    assert bool(reasons) == named


@pytest.mark.parametrize("factor, verdict", [(95, "weak"), (105, "uninformative")])
def test_a_point_estimate_reaches_100x(factor, verdict):
    """POINT_ESTIMATE_REACH = 100: a fit without draws, past this factor beyond its runs."""
    f = _fit(span={"params_max": 1e9, "params_min": 1e7, "n_size_classes": 6},
             optimum=lambda *a, **k: {})
    t = trust.verdict(_law(), f, target=factor * 1e9)
    assert t.verdict == verdict
