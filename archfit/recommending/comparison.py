"""Every applicable law side by side (:func:`compare`): each shape law's recommended depth and
width at the target with its CI and verdict, and for a FLOP budget each compute law's split, so
that disagreement between laws is visible at a glance."""

from __future__ import annotations

import os
import warnings
from typing import Any

from archfit.errors import RecommendError, UninformativeWarning
from archfit.interval import Interval
from archfit.laws import ComputeLaw, Fit, ShapeLaw, load_fit
from archfit.recommending.options import given_fits
from archfit.recommending.pipeline import recommend
from archfit.recommending.request import RecommendRequest


def compare(params: float | RecommendRequest | None = None, **options: Any
            ) -> list[dict[str, Any]]:
    """One row per applicable shape law (the request's fits, then every bundled published
    one): its recommended depth and width at the target, the optimum's CI and the verdict, so
    that disagreement between laws is visible at a glance. A law that cannot answer gets a row
    with its reason. Takes a :class:`RecommendRequest`, or what :func:`recommend` takes."""
    from archfit.laws.published import PUBLISHED

    req = params if isinstance(params, RecommendRequest) else RecommendRequest.of(params,
                                                                               **options)
    compute = req.target.compute
    labelled = []
    for g in given_fits(list(req.fits) or None):
        f = load_fit(g)
        src = g if isinstance(g, str) and g not in PUBLISHED else None
        labelled.append((f, f"{f.label} ({os.path.basename(src)})" if src else f.label))
    others = [f for f, _ in labelled if not isinstance(f.law_obj, ShapeLaw)]
    shape_fits = [(f, lab) for f, lab in labelled if isinstance(f.law_obj, ShapeLaw)]
    names = {f.label for f, _ in shape_fits}
    published = [(load_fit(n), n) for n in PUBLISHED if n not in names]
    shape_fits += [(f, n) for f, n in published if isinstance(f.law_obj, ShapeLaw)]
    rows = []
    if compute is not None:  # one row per compute law: its split of the budget
        rows += _compute_rows(compute, [(f, lab) for f, lab in labelled
                                        if isinstance(f.law_obj, ComputeLaw)])
    for f, label in shape_fits:
        row: dict[str, Any] = {"law": label, "role": "shape", "formula": f.law_obj.formula}
        try:
            with warnings.catch_warnings():  # the row carries the verdict
                warnings.simplefilter("ignore", UninformativeWarning)
                r = recommend(req.with_(fits=(f, *others)))
        except RecommendError as e:
            row.update(error=str(e), verdict="-")
        else:
            row.update(n_layer=r.shape.n_layer, d_model=r.shape.d_model,
                       n_layer_opt=r.n_layer_opt, ci=(r.ci or {}).get("n_layer"),
                       near_optimal=(r.near_optimal or {}).get("n_layer"),
                       verdict=r.trust["verdict"], reasons=r.trust["reasons"])
        rows.append(row)
    return rows


def _compute_rows(C: float, given: list[tuple[Fit, str]]) -> list[dict[str, Any]]:
    """Each compute law's N_opt, D_opt and tokens per parameter at ``C`` FLOPs with their CIs
    and its verdict there: the given fits, then every bundled published compute law."""
    from archfit.laws.published import PUBLISHED

    names = {f.label for f, _ in given}
    laws = given + [(f, n) for n in PUBLISHED if n not in names
                    for f in [load_fit(n)] if isinstance(f.law_obj, ComputeLaw)]
    rows = []
    for i, (f, label) in enumerate(laws):
        # what recommend builds from: the first compute fit given, else the default
        used = i == 0
        row: dict[str, Any] = {"law": label, "role": "compute", "formula": f.law_obj.formula,
                               "N_convention": f.conventions.get("params", "as fitted"),
                               "approach": f.law_obj.approach, "used": used,
                               "why": ("" if not used else "the first compute fit given" if
                                       given else "the default compute law: no compute fit "
                                       "given")}
        try:
            opt = f.optimum(C)
        except (ArithmeticError, ValueError) as e:
            row.update(error=f"no compute-optimal split at {C:.3g} FLOPs: {e}", verdict="-")
        else:
            row.update({k: opt[k] for k in ("N_opt", "D_opt", "tokens_per_param")})
            row.update({f"{k}_ci": Interval.of(opt[f"{k}_ci"], f.interval_provenance())
                        for k in ("N_opt", "D_opt", "tokens_per_param")})
            t = f.verdict(C)
            row.update(verdict=t.verdict, reasons=t.reasons, **_exponent(f, C))
        rows.append(row)
    return rows


def _exponent(f: Fit, C: float, step: float = 0.05) -> dict[str, Any]:
    """The law's a = d ln N_opt / d ln C at ``C`` (a central difference over ``step`` in ln C),
    with its 95% interval over the fit's draws."""
    import math

    law = f.law_obj

    def slope(p: Any) -> float:
        lo = law.compute_optimal(p, C * math.exp(-step))[0]
        hi = law.compute_optimal(p, C * math.exp(step))[0]
        return math.log(hi / lo) / (2 * step)

    vals = []
    draws = f.draws()
    for p in draws:
        try:
            v = slope(p)
        except (ArithmeticError, ValueError):
            continue
        if math.isfinite(v):
            vals.append(v)
    ends = draws.ends(vals, 0.95)
    return {"exponent": slope(f.params),
            "exponent_ci": Interval.of(ends, f.interval_provenance()) if ends else None}
