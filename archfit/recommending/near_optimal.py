"""The near-optimal set: every depth at N whose predicted loss is within a tolerance of the
optimum's, with a CI on its ends, and the loss model that prices the alternatives.

A fit's loss over depth at fixed N is flat near its optimum. Where the curvature is small, a
wide range of depths costs almost nothing, and that range, not one extrapolated point, is
the answer a team planning a run can use. The set is the depths whose penalty over the
optimum (:meth:`Law.depth_loss`) is at most ``tolerance`` times the loss there
(:meth:`Law.loss_level`); each end's CI comes from the same computation on every bootstrap
draw. The centre is the fit's optimum, unless the fit cannot locate it
(:meth:`Law.centre_unidentified`, e.g. the depth-joint law's q on its bound): then the centre
is the named prior's optimum (Levine et al. 2020) and the width is the fit's own curvature.
When even the curvature is unknown (no loss model, or loss flat over the whole scan), the set
is the prior's, priced by Kaplan et al. 2020's curvature, and the record says so.

The recommended depth is the centre of the set in log depth, the rule the record names.
``archfit recommend`` is a cold path: numpy is imported where a law's draws are read.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from archfit.laws import Fit, ShapeLaw, load_fit
from archfit.interval import ASSUMED, FITTED, Interval, record
from archfit.laws.published import DEFAULT_SHAPE_LAW
from archfit.numbers import MIN_DRAWS, draw_ends, draw_percentiles
from archfit.shapes import kaplan_width

TOLERANCE = 0.005  # 0.5% of the loss (recommend --tolerance)
REACH = math.log(1000.0)  # the scan looks this far each way in ln depth: a flat law has no end
MAX_DRAWS = 200  # bootstrap draws the ends' CI reads
RULE = "the centre of the near-optimal set in log depth"
OWN_RULE = "the law's lowest predicted loss (for a bowl symmetric in log depth, the set's centre)"


def _end(penalty: Callable[[float], float | None], centre: float, thr: float, sign: int
         ) -> float | None:
    """The depth, on one side of ``centre``, where ``penalty`` first exceeds ``thr``: doubling
    steps in ln depth, then bisection. None: still within ``thr`` at the scan's reach. A depth
    below 1 layer ends the set at 1."""
    def over(x: float) -> bool:
        L = centre * math.exp(sign * x)
        v = penalty(L)
        return v is None or not math.isfinite(v) or v > thr

    lo, hi = 0.0, 0.01
    while not over(hi):
        lo, hi = hi, 2 * hi
        if hi > REACH:
            return None
        if sign < 0 and centre * math.exp(-hi) < 1:
            return 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if not over(mid) else (lo, mid)
    return max(1.0, centre * math.exp(sign * lo))


def widths(law: Any, params: dict[str, float], extra: dict[str, Any], N: float, tol: float
           ) -> tuple[float, float | None, float | None] | None:
    """(the law's optimal depth at N, the set's reach below and above it in ln depth; None
    where the loss stays within the tolerance over the whole scan), or None when the law has
    no loss model over depth here."""
    try:
        L_opt = law.optimum(params, N)[0]
        level = law.loss_level(params, extra, N)
        f0 = law.depth_loss(params, extra, N, L_opt)
    except (ArithmeticError, ValueError, KeyError):
        return None
    if (f0 is None or level is None or not (math.isfinite(L_opt) and L_opt > 0)
            or not (math.isfinite(level) and level > 0)):
        return None

    def penalty(L: float) -> float | None:
        try:
            v = law.depth_loss(params, extra, N, L)
        except (ArithmeticError, ValueError):
            return None
        return None if v is None else v - f0  # type: ignore[operator]

    thr = tol * level
    lo, hi = _end(penalty, L_opt, thr, -1), _end(penalty, L_opt, thr, +1)
    return (L_opt, None if lo is None else math.log(L_opt / lo),
            None if hi is None else math.log(hi / L_opt))


def _ci(values: list[float | None], flip: bool) -> list[float | None] | None:
    """The 95% percentile interval of one end over the draws; an unbounded draw counts as
    beyond every bounded one (None on that side when more than 2.5% are unbounded)."""
    if len(values) < 10:
        return None
    finite = [v for v in values if v is not None]
    unb = len(values) - len(finite)
    if not finite:
        return [None, None]
    inf = float("inf") if not flip else 0.0
    allv = sorted(finite + [inf] * unb)
    with np.errstate(invalid="ignore"):  # interpolating towards inf gives nan: unbounded
        ends = draw_percentiles(allv, [2.5, 97.5]).tolist()
    # an unbounded draw reached by the percentile (inf, or 0.0 below; an interpolation
    # between a finite end and inf is not a number): that side is unbounded
    return [None if unb and (not math.isfinite(v) or (flip and v == 0.0)) else v for v in ends]


def near_optimal(fit: Fit, N: float, tol: float = TOLERANCE) -> dict[str, Any] | None:
    """The near-optimal set of ``fit`` at N non-embedding parameters: ``{"tolerance",
    "n_layer": [lo, hi], "d_model": [at lo, at hi], "ci": {"n_layer_low": Interval,
    "n_layer_high": Interval}, "centre", "centre_from", "rule", "basis", "loss_model"}``; None
    when neither the fit nor the prior prices depth (never for a shape law's fit: the prior's
    set is the fallback)."""
    if not (isinstance(tol, (int, float)) and 0 < tol < 1):
        raise ValueError(f"tolerance must be a fraction of the loss between 0 and 1 (e.g. "
                         f"0.005 for 0.5%), got {tol!r}")
    law = fit.law_obj
    own = widths(law, fit.params, fit.extra, N, tol)
    unidentified = law.centre_unidentified(fit.params)
    basis, centre_from, source = "fit", fit.label, fit
    if own is not None and (own[1] is None or own[2] is None):
        own = None  # flat over the whole scan: the curvature is not measured
        basis = "prior: the fit's loss is flat over depth (curvature not measured)"
    elif own is None:
        basis = "prior: the fit has no loss model over depth"
    prior = load_fit(DEFAULT_SHAPE_LAW)
    try:
        centre = fit.law_obj.optimum(fit.params, N)[0]
    except (ArithmeticError, ValueError, KeyError, NotImplementedError):
        centre = float("nan")
    if not (math.isfinite(centre) and centre > 0):
        unidentified = unidentified or "no finite optimal depth"
    if own is None:  # the prior's curvature, about the fit's optimum where it has one
        source = prior
        own = widths(prior.law_obj, prior.params, prior.extra, N, tol)
        if own is None:
            return None
        basis += f"; {prior.label}'s curvature ({prior.extra['curvature_rel']['source']})"
    if unidentified:
        centre, centre_from = prior.law_obj.optimum(prior.params, N)[0], prior.label
        basis = (f"{'the fit' if source is fit else prior.label}'s curvature around "
                 f"{prior.label}'s optimum: the fit cannot locate the optimum ({unidentified})")
    # an end the scan never reaches (a tolerance so wide that depths 1000x from the optimum
    # stay within it): 1 layer below, unbounded (None) above
    lo = 1.0 if own[1] is None else max(1.0, centre * math.exp(-own[1]))
    hi = None if own[2] is None else centre * math.exp(own[2])
    if hi is None:
        basis += (f"; above the optimum the loss stays within {tol:.3g} of it beyond "
                  f"{math.exp(REACH):,.0f}x its depth: the set has no upper end")
    return {
        "tolerance": tol, "n_layer": [lo, hi],
        "d_model": [kaplan_width(N, lo), None if hi is None else kaplan_width(N, hi)],
        "centre": centre, "centre_from": centre_from,
        "rule": RULE if unidentified or source is not fit else OWN_RULE,
        "basis": basis if basis != "fit" else (
            f"{fit.label}'s optimum, Kaplan et al. 2020's curvature" if fit.extra.get(
                "curvature_rel") and not fit.extra.get("curvature") else
            f"{fit.label}'s own optimum and curvature"),
        "ci": _ends_ci(source, N, tol, centre if unidentified or source is not fit else None),
        "loss_model": loss_model(source)}


def _ends_ci(f: Fit, N: float, tol: float, centre: float | None
             ) -> dict[str, Interval | None]:
    """Each end's :class:`~archfit.interval.Interval`: the set recomputed on every bootstrap
    draw (about ``centre``, when the fit's own centre is not identified), a ``fitted`` 95% CI;
    or, for a published relative curvature, the ends at the ends of its stated range, with that
    range's provenance (``assumed`` for Kaplan et al.'s bound). None for a point estimate."""
    law = f.law_obj
    draws = f.bootstrap_params()[:MAX_DRAWS]
    rel = (f.extra or {}).get("curvature_rel")
    if not draws and not rel:
        return {"n_layer_low": None, "n_layer_high": None}
    if not draws and rel:  # a published curvature: its range
        draws = [dict(f.params)] * 2
        extras = [{"curvature_rel": {"value": v}} for v in rel["range"]]
    else:
        extras = [f.extra] * len(draws)
    los: list[float | None] = []
    his: list[float | None] = []
    for p, ex in zip(draws, extras):
        w = widths(law, p, ex, N, tol)
        if w is None:
            continue
        c = centre if centre is not None else w[0]
        los.append(None if w[1] is None else max(1.0, c * math.exp(-w[1])))
        his.append(None if w[2] is None else c * math.exp(w[2]))
    if rel and not f.bootstrap_params():
        prov = curvature_provenance(rel, "the ends at the curvature's stated range")
        return {"n_layer_low": Interval.of(_ends(los, below=True), prov),
                "n_layer_high": Interval.of(_ends(his, below=False), prov)}
    total = len(f.bootstrap_params())
    method = (f"percentiles over {len(los)} of the fit's {total:,} bootstrap draws"
              if total > len(los) else f"percentiles over {len(los)} bootstrap draws")
    prov = record(FITTED, method, source=f.label)
    return {"n_layer_low": Interval.of(_ci(los, True), prov),
            "n_layer_high": Interval.of(_ci(his, False), prov)}


def _ends(values: list[float | None], below: bool) -> list[float | None] | None:
    """An end's range over a published curvature's two values; an end the scan never reached
    (None) leaves that side unbounded: below for the set's low end, above for its high end."""
    finite = [v for v in values if v is not None]
    if not finite:
        return None
    open_side = len(finite) < len(values)
    return ([None if open_side and below else min(finite),
             None if open_side and not below else max(finite)])


def curvature_provenance(rel: dict[str, Any], method: str) -> dict[str, Any]:
    """The provenance of a published curvature's range: its own (``assumed`` where archfit read
    a bound, ``published`` where the source states the range)."""
    kind = rel.get("provenance", ASSUMED)
    return record(kind, method, source=rel.get("source"),
                  why=rel.get("why") if kind == ASSUMED else None)


def pricing(fit: Fit, near: dict[str, Any]) -> Fit:
    """The fit whose loss model priced the set ``near``: ``fit`` itself, or the prior."""
    lm = near.get("loss_model") or {}
    return fit if lm.get("law") == fit.label else load_fit(DEFAULT_SHAPE_LAW)


def loss_model(f: Fit) -> dict[str, Any] | None:
    """What prices the alternatives: the law, its source and the penalty's unit."""
    rel = (f.extra or {}).get("curvature_rel")
    if rel and not (f.extra or {}).get("curvature"):
        return {"law": f.label, "curvature": rel["value"], "unit": "fraction of the loss",
                "source": f"centre: {f.source}; curvature: {rel['source']}"}
    if f.law_obj.depth_loss(f.params, f.extra or {}, 1e9, 10.0) is None:
        return None
    return {"law": f.label, "unit": "nats/token",
            "source": f.source or "fitted by archfit"}


def penalty_ci(f: Fit, N: float, n_layer: float, ref: float) -> Interval | None:
    """The 95% CI of the loss penalty of ``n_layer`` over ``ref`` layers at N, over the fit's
    draws (or the penalty at the ends of a published curvature's range, of its kind)."""
    law = f.law_obj
    rel = (f.extra or {}).get("curvature_rel")
    draws = f.bootstrap_params()[:MAX_DRAWS]
    if not draws and rel:
        pairs = [(law.depth_loss(f.params, {"curvature_rel": {"value": v}}, N, n_layer),
                  law.depth_loss(f.params, {"curvature_rel": {"value": v}}, N, ref))
                 for v in rel["range"]]
        gaps = [a - b for a, b in pairs if a is not None and b is not None]
        prov = curvature_provenance(rel, "the penalty at the curvature's stated range")
        return Interval.of(sorted(gaps), prov) if len(gaps) == len(pairs) else None
    if len(draws) < 10:
        return None
    vals = []
    for p in draws:
        try:
            a, b = law.depth_loss(p, f.extra, N, n_layer), law.depth_loss(p, f.extra, N, ref)
        except (ArithmeticError, ValueError):
            continue
        if a is not None and b is not None and math.isfinite(a - b):
            vals.append(a - b)
    if len(vals) < MIN_DRAWS:
        return None
    prov = record(FITTED, f"percentiles over {len(vals)} bootstrap draws", source=f.label)
    return Interval.of(draw_ends(vals), prov)


def published_curvatures(N: float = 7e9) -> list[dict[str, Any]]:
    """Each published shape law's curvature of loss in ln depth at N (a fraction of the loss
    per squared ln depth, read from its set's lower reach at 0.5%), with its range where one is
    stated and its source: what ``archfit laws`` lists."""
    from archfit.laws.published import PUBLISHED

    out = []
    for name in PUBLISHED:
        f = load_fit(name)
        if not isinstance(f.law_obj, ShapeLaw):
            continue
        w = widths(f.law_obj, f.params, f.extra, N, TOLERANCE)
        if w is None or w[1] is None:
            continue
        rel = (f.extra or {}).get("curvature_rel")
        out.append({"name": name, "curvature_at_7e9": TOLERANCE / w[1] ** 2,
                    "range": Interval.of(rel["range"], curvature_provenance(
                        rel, "the curvature's stated range")) if rel else None,
                    "source": rel["source"] if rel else f.source})
    return out
