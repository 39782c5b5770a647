"""How far a fit's evidence reaches: a verdict (``informative`` / ``weak`` / ``uninformative``)
with one line per reason and the numbers behind it, in plain ``math`` (``archfit recommend``
prints it). :meth:`archfit.laws.Fit.verdict` reads it: the reasons (span, bounds, the optimum's
interval, held-out error, failed resamples) and their thresholds live here, stated once; a law
supplies only what it declares (``bounds``, ``heldout_limits``, its role)."""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any, Mapping

from archfit.numbers import MC_BAND_Z, fmt_sci

VERDICTS = ("informative", "weak", "uninformative")

# thresholds: (weak above, uninformative above)
EXTRAPOLATION = (10.0, 1000.0)  # target N / largest N seen
# a fit without parameter draws (most published fits) has no interval at the target to grade, so
# its reach is graded alone: assumed, the published laws were checked about one decade past their
# runs (Hoffmann et al. 2022: Chinchilla, 70B, after runs to 16B); two decades out, uninformative
POINT_ESTIMATE_REACH = 100.0
# 95% range high / low limits of the optimal depth (shape laws) and N_opt (compute laws)
from archfit.laws.base import COMPUTE_CI_RATIO, OPTIMUM_CI_RATIO  # noqa: E402,F401
HELDOUT_COVERAGE = 0.8  # share of held-out runs inside their 95% intervals: weak below
BOOTSTRAP_FAILURES = (0.1, 0.5)  # failed resamples / resamples
MIN_SIZE_SPAN = 3.0  # largest / smallest N: below this the sizes barely vary
MIN_SIZE_CLASSES = 3  # a law in N seen at fewer sizes than this is not tested by them


@dataclass
class Trust:
    verdict: str = "informative"
    reasons: list[str] = field(default_factory=list)
    extrapolation_factor: float | None = None
    checks: dict[str, Any] = field(default_factory=dict)  # the numbers behind the reasons

    def weak(self, reason: str) -> None:
        self.reasons.append(reason)
        if self.verdict == "informative":
            self.verdict = "weak"

    def bad(self, reason: str) -> None:
        self.reasons.append(reason)
        self.verdict = "uninformative"

    def grade(self, value: float, limits: tuple[float, float], reason: str) -> None:
        """``reason`` as weak above ``limits[0]``, as uninformative above ``limits[1]``."""
        if value > limits[1]:
            self.bad(reason)
        elif value > limits[0]:
            self.weak(reason)

    def grade_band(self, value: float, band: tuple[float, float] | None,
                   limits: tuple[float, float], reason: str, share: bool = False) -> None:
        """:meth:`grade` for a value that another bootstrap seed could move within ``band``
        (its Monte-Carlo range): a threshold inside the band is not settled by this seed, so the
        verdict takes the cautious side and says so. The verdict then reads the same at (nearly)
        every seed. ``share``: the value is a share (read in %), not a ratio (read as 3x)."""
        lo, hi = (min(value, band[0]), max(value, band[1])) if band else (value, value)

        def read(v: float) -> str:
            return f"{v:.0%}" if share else f"{v:.3g}x"

        for limit, act in ((limits[1], self.bad), (limits[0], self.weak)):
            if hi > limit:
                if lo <= limit:
                    reason += (f" (over the draws it could read {read(lo)} to {read(hi)}, "
                               f"across the {read(limit)} threshold: the cautious side is taken; "
                               "more --bootstrap resamples settle it)")
                act(reason)
                return

    def merge(self, other: Trust, prefix: str) -> None:
        for r in other.reasons:
            self.reasons.append(f"{prefix}: {r}")
        if VERDICTS.index(other.verdict) > VERDICTS.index(self.verdict):
            self.verdict = other.verdict
        self.checks[prefix] = other.checks

    def line(self) -> str:
        return f"verdict: {self.verdict}" + (f" ({'; '.join(self.reasons)})"
                                              if self.reasons else "")

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": list(self.reasons),
                "extrapolation_factor": self.extrapolation_factor, **self.checks}


# ------------------------------------------------------------------ the reasons
def verdict(law: Any, fit: Any, target: float | None = None,
            conditions: Mapping[str, Any] | None = None) -> Trust:
    """``law``'s verdict on ``fit`` (and on answering at ``target``, under the law's
    ``conditions`` such as unique tokens): each check below adds its reason with the thresholds
    above."""
    t = Trust(checks={"span": dict(fit.diagnostics.get("span") or {})})
    span_reasons(law, t, target, (fit.prior or {}).get("source") if (
        fit.prior or {}).get("prior") else None, fit.params, conditions)
    for r in bound_reasons(law, fit):
        t.weak(r)
    sp = spread(law, fit, target, conditions)
    if sp is not None:
        t.checks.update(optimum_ci_ratio=sp["ratio"], optimum_ci=sp["ci"],
                        optimum_ci_ratio_band=sp["ratio_band"])
        t.grade_band(sp["ratio"], sp["ratio_band"], law.spread_limits(),
                     f"{sp['what']} spans {sp['ratio']:.3g}x")
    elif law.answer_names:
        f = t.extrapolation_factor
        if f is not None and f > POINT_ESTIMATE_REACH:
            t.bad(f"no CI on the optimum (no bootstrap samples), {f:.3g}x beyond the largest "
                  "run: nothing bounds a point estimate's error that far out "
                  f"(more than {POINT_ESTIMATE_REACH:g}x)")
        else:
            t.weak("no CI on the optimum (no bootstrap samples)")
    heldout_reason(law, t, fit)
    bootstrap_reason(t, fit)
    unit_reason(t, fit)
    r2 = fit.diagnostics.get("r2_log")
    if r2 is not None and r2 < 0:
        t.weak(f"R² {r2:.2g}: the law fits its points worse than their mean")
    lack_reason(t, fit)
    return t


LACK_OF_FIT_LEVEL = 0.05  # the level of the fit's own lack-of-fit F test


def lack_of_fit_scope(lof: Mapping[str, Any]) -> str:
    """What a fit's lack-of-fit test ran over: its rows, and its units where it was
    cluster-robust."""
    return f"{lof.get('runs')} rows" + (f", cluster-robust over their {lof['clusters']} "
                                        "bootstrap units" if lof.get("clusters") else "")


def lack_reason(t: Trust, fit: Any) -> None:
    """A form the fit's own lack-of-fit test rejects (its residuals trend over the size,
    tokens, depth or vocabulary it reads: archfit.laws.inference.regression.lack_of_fit_test)
    is at best weak: what it answers carries the trend it misses."""
    lof = fit.diagnostics.get("lack_of_fit") or {}
    p = lof.get("p")
    if p is None:
        return
    t.checks["lack_of_fit_p"] = p
    if p < LACK_OF_FIT_LEVEL:
        share = lof.get("trend_share")
        held = (f"; the trend holds {share:.0%} of the residuals' variance"
                if share is not None else "")
        t.weak(f"its own lack-of-fit test rejects the form on its runs (F test of the "
               f"residuals on the logs of what it reads: p = {p:.2g} over "
               f"{lack_of_fit_scope(lof)}{held}): the residuals trend where the law says none")


# a parameter on a bound in more than this share of the bootstrap resamples is named
BOUND_SHARE = 0.1


def bound_reasons(law: Any, fit: Any) -> list[str]:
    """One line per free parameter on (or within 1e-4 of) a bound of the fit, or whose
    bootstrap CI has zero width (every resample landed on one value: a bound the optimizer
    holds, not a measurement). Fixed and tied parameters, and those the law holds itself
    (``extra["fixed"]``), are not free and are skipped."""
    held = set((fit.prior or {}).get("fixed") or {}) | set((fit.prior or {}).get("tied")
                                                            or {})
    if fit.extra.get("uses_tokens") is False:
        held |= set(law.folded_without_tokens)
    held |= set(fit.extra.get("fixed") or {})  # held by the law itself (lr-batch: no spread)
    out = []
    for name, (lo, hi) in law.bounds.items():
        v = fit.params.get(name)
        if v is None or name in held:
            continue
        if lo is not None and v <= lo + 1e-4 * max(1.0, abs(lo)):
            out.append(f"{name} is at its lower bound {lo:g}")
        elif hi is not None and v >= hi - 1e-4 * max(1.0, abs(hi)):
            out.append(f"{name} is at its upper bound {hi:g}")
    samples = (fit.bootstrap or {}).get("samples") or {}
    for name, (lo, hi) in law.bounds.items():
        vals = samples.get(name) or []
        if name in held or len(vals) < 10 or any(r.split()[0] == name for r in out):
            continue
        on = sum(1 for x in vals if (lo is not None and x <= lo + 1e-4 * max(1.0, abs(lo)))
                 or (hi is not None and x >= hi - 1e-4 * max(1.0, abs(hi))))
        if on > BOUND_SHARE * len(vals):
            out.append(f"{name} sits on a bound in {on / len(vals):.0%} of the bootstrap "
                       "resamples: the data do not pin it, and intervals that depend on it "
                       "are wide")
    for name, ci in (fit.ci or {}).items():
        v = fit.params.get(name)
        if not ci or v is None or name in held or any(name in r.split()[0] for r in out):
            continue
        if abs(ci[1] - ci[0]) <= 1e-9 * max(1.0, abs(v)):
            out.append(f"{name}'s 95% CI has zero width ({ci[0]:.4g}): every resample "
                       "landed on one value, a bound rather than a measurement")
    return out


def spread(law: Any, fit: Any, target: float | None,
           conditions: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """How wide the law's answer is: the optimal depth for shape laws, N_opt for compute
    laws, at ``target`` or, for the fit-level verdict, at a reference inside the data (the
    largest run's N, or its compute 6 N D), so the fit's verdict does not depend on the
    targets asked for. The interval is the one :meth:`Fit.optimum` gives (95% percentile
    over the parameter draws); ``ratio`` is its high / low. ``ratio_band`` is that ratio's
    Monte-Carlo range over the draws (:func:`archfit.numbers.quantile_band`): how far another
    bootstrap seed could move it, so a verdict is only as settled as that range allows."""
    from archfit.interval import FITTED, Interval, record
    from archfit.numbers import quantile_band

    span = (fit.diagnostics or {}).get("span") or {}
    if law.spread_of is None:
        return None
    key, what, reference, unit = law.spread_of
    at = target if target is not None else span.get(reference)
    if at is None:
        return None
    opt = fit.optimum(at, values=True, conditions=conditions if target is not None else None)
    ci, vals = opt.get(f"{key}_ci"), opt.get("_values", {}).get(key) or []
    if ci is None or not ci[0] > 0:
        return None
    band = quantile_band(vals, 2.5, 97.5)
    where = (f"at {fmt_sci(at)}" if target is not None else
             f"at the largest run ({fmt_sci(at)}{unit})")
    iv = Interval.of(ci, fit.interval_provenance()
                     or record(FITTED, f"percentiles over {len(vals)} draws"))
    return {"what": f"{what} {where}: {iv.text() if iv else ''}", "ratio": ci[1] / ci[0],
            "ratio_band": band, "ci": iv, "n_draws": len(vals)}


def span_reasons(law: Any, t: Trust, target: float | None, prior: str | None,
                 params: Mapping[str, float], conditions: Mapping[str, Any] | None = None
                 ) -> None:
    span = t.checks["span"]
    top, bottom = span.get("params_max"), span.get("params_min")
    if not top:
        t.weak("no record of the data's span (a published fit without one): how far it "
               "extrapolates cannot be checked")
        return
    if bottom and top / bottom < MIN_SIZE_SPAN:
        t.weak(f"the sizes span only {top / bottom:.2g}x ({bottom:.3g} to {top:.3g})")
    n_cls = span.get("n_size_classes")
    if n_cls is not None and n_cls < MIN_SIZE_CLASSES:
        t.weak(f"only {n_cls} size classes: a law in N through fewer than {MIN_SIZE_CLASSES} "
               "sizes is not tested by them")
    if target is not None:
        f, line = law.extrapolation(params, span, target, conditions)
        t.extrapolation_factor = f
        if prior and f > EXTRAPOLATION[0]:  # the prior's evidence reaches further
            t.weak(f"{line}; the prior {prior} carries the answer there")
        else:
            t.grade(f, EXTRAPOLATION, line)


def heldout_reason(law: Any, t: Trust, fit: Any) -> None:
    h = fit.diagnostics.get("heldout")
    if not h:
        return
    if not h.get("ok"):
        t.weak(f"no held-out check ({h.get('reason')})")
        return
    if "coverage" in h:  # predictions with intervals (laws with a loss model)
        err, half, cov = h["mean_rel_error"], h["mean_halfwidth_rel"], h["coverage"]
        t.checks.update(heldout_rel_error=err, heldout_coverage=cov, heldout_halfwidth=half)
        line = (f"held-out sizes: error {err:+.1%}, intervals ±{half:.1%}, coverage {cov:.0%}")
        if not h["within_interval"]:
            t.bad(f"{line}: the error exceeds the interval")
        elif cov < HELDOUT_COVERAGE:
            t.weak(f"{line}: the intervals cover fewer held-out runs than "
                   f"{HELDOUT_COVERAGE:.0%}")
        else:
            t.grade(abs(err), law.heldout_limits, line)
        return
    err = h.get("rel_error", h.get("mean_rel_error"))
    if err is not None:
        t.checks["heldout_rel_error"] = err
        t.grade(abs(err), law.heldout_limits, f"held-out error on the largest size class "
                f"{err:+.1%}")


def bootstrap_reason(t: Trust, fit: Any) -> None:
    b = fit.bootstrap or {}
    if b.get("n"):
        n = b["n"]
        rate = (b.get("n_failed") or 0) / n
        t.checks["bootstrap_failure_rate"] = rate
        sd = math.sqrt(max(rate * (1 - rate), 1.0 / n) / n)  # binomial: another seed's rate
        t.grade_band(rate, (max(0.0, rate - MC_BAND_Z * sd), rate + MC_BAND_Z * sd),
                     BOOTSTRAP_FAILURES, f"{rate:.0%} of the bootstrap resamples failed",
                     share=True)


def unit_reason(t: Trust, fit: Any) -> None:
    u = fit.diagnostics.get("unit") or {}
    if u.get("splits"):
        t.weak(f"the bootstrap unit ({u['unit']}) splits the rows of one {u['splits']} apart: "
               "correlated rows resampled as independent give intervals too narrow")
