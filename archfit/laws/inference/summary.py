"""A fit's summary text, in plain Python (as :mod:`archfit.laws.inference.artifact`): the parameter and
derived tables with their 95% CIs, the prior / data-alone / posterior table of a constrained
fit, and the diagnostic lines (size classes, RMSE, the scatter of runs, the held-out check)."""

from __future__ import annotations

import math
from typing import Any, Mapping


def _g(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)) and math.isfinite(v):
        return f"{v:.4g}"
    return str(v)


def table(head: str, values: Mapping[str, float], cis: Mapping[str, Any], w: int, wv: int
           ) -> list[str]:
    lines = [f"  {head:<{w}}{'estimate':>{wv}}{'95% CI low':>14}{'95% CI high':>14}"]
    if head == "param":
        lines.append("  " + "-" * 56)
    for name, val in values.items():
        lo, hi = cis.get(name) or (None, None)
        lines.append(f"  {name:<{w}}{_g(val):>{wv}}{_g(lo):>14}{_g(hi):>14}")
    return lines


def prior_table(f: Any) -> list[str]:
    """Prior, data alone and posterior side by side (a fit made with --fix or --prior)."""
    pr, alone = f.prior, f.prior.get("data_only")
    lines = [f"  prior: {pr.get('source') or 'stated'}" + (
        f" (data residual scale {pr['residual_scale']:.3g} in log loss)"
        if pr.get("residual_scale") else ""),
        f"  {'param':<10}{'prior':>22}{'data alone':>14}{'posterior':>12}{'95% CI':>24}",
        "  " + "-" * 82]
    for name, val in f.params.items():
        if name in pr.get("fixed", {}):
            p = "fixed"
        elif name in (pr.get("tied") or {}):
            p = f"= {pr['tied'][name]}"
        elif name in pr.get("prior", {}):
            m, sd = pr["prior"][name]
            p = f"{_g(m)} ± {_g(sd)}"
        else:
            p = "-"
        a = _g(alone.get(name)) if isinstance(alone, dict) else "-"
        lo, hi = f.ci.get(name) or (None, None)
        lines.append(f"  {name:<10}{p:>22}{a:>14}{_g(val):>12}{'[' + _g(lo) + ', ' + _g(hi) + ']':>24}")
    if isinstance(alone, str):
        lines.append(f"  data alone: {alone}")
    return lines


def cell_lines(cells: list[Mapping[str, Any]]) -> list[str]:
    """The lr-batch law's cells: each (size, tokens) cell's best rate and batch with their 95%
    intervals (a residual bootstrap of the local fit; '-' where the cell has none)."""
    def ci(c: Mapping[str, Any], key: str) -> str:
        iv = c.get(key)
        return f"[{iv[0]:.3g}, {iv[1]:.3g}]" if iv else "-"

    lines = ["", "  each cell's optimum (95% CI: residual bootstrap of the local fit, fitted):",
             f"  {'N':>10}{'tokens':>10}{'best lr':>10}{'95% CI':>22}{'best batch':>12}"
             f"{'95% CI':>22}{'res. df':>8}"]
    for c in cells:
        b = c.get("batch_opt")
        lines.append(f"  {c['params']:>10.3g}{c['tokens']:>10.3g}{c['opt']:>10.3g}"
                     f"{ci(c, 'opt_ci'):>22}{(f'{b:,.0f}' if b else '-'):>12}"
                     f"{ci(c, 'batch_ci'):>22}{c.get('residual_df', '-'):>8}")
    return lines


def diagnostic_lines(d: Mapping[str, Any]) -> list[str]:
    if not d:
        return []
    lines = [""]
    sp = d.get("span") or {}
    if sp.get("n_size_classes") is not None:
        lines.append(f"  size classes: {sp['n_size_classes']} (N {sp['params_min']:.3g} to "
                     f"{sp['params_max']:.3g}; {sp.get('size_classes_by', 'by size')})")
    space = d.get("residual_space", "log loss")  # a law of a signed loss fits the loss itself
    where = "log space" if space.startswith(("log", "ln")) else space
    if "rmse_log" in d:
        lines.append(f"  RMSE ({where}) {d['rmse_log']:.4g}   R² ({where}) "
                     f"{_g(d.get('r2_log'))}")
    sc = d.get("scatter")
    of = "log loss" if where == "log space" else space
    if sc and sc["n_units"] < sc["n_rows"]:
        lines.append(f"  scatter of runs about the law ({of}): between runs "
                     f"{sc['between']:.3g}, within a run {sc['within']:.3g} "
                     f"({sc['n_units']} runs, {sc['n_rows']} rows)")
    elif sc:
        lines.append(f"  scatter of runs about the law ({of}): {sc['between']:.3g} "
                     f"({sc['n_units']} runs)")
    lof = d.get("lack_of_fit") or {}
    if lof.get("p") is not None:
        from archfit.laws.inference.trust import lack_of_fit_scope

        lines.append(f"  lack of fit: F test of the residuals on the logs of what the law reads "
                     f"(squares, products), p = {lof['p']:.2g} over {lack_of_fit_scope(lof)}"
                     + (": the law's form misses these runs" if lof["p"] < 0.05 else ""))
    h = d.get("heldout")
    if h and h.get("ok") and "coverage" in h:
        hs = h.get("held_out_sizes") or [0.0]
        axis = h.get("held_out_axis", "N")
        sizes = (f"{hs[0]:.3g}" if len(hs) == 1 else
                 f"{hs[0]:.3g} to {hs[-1]:.3g} ({len(hs)} {'sizes' if axis == 'N' else 'budgets'})")
        unit = h.get("unit", "rows")
        lines.append(f"  held-out check: fitted below, predicted the {h['n_test']} "
                     f"{unit if h['n_test'] != 1 else unit.removesuffix('s')} at {axis} "
                     f"{sizes}: mean error {h['mean_rel_error']:+.1%} (RMS "
                     f"{h['rms_rel_error']:.1%}), {h.get('level', 0.95):.0%} intervals "
                     f"±{h['mean_halfwidth_rel']:.1%} covered {h['coverage']:.0%}")
        for what, r in (("rate", h), ("batch", h.get("batch"))):
            if r and len(r.get("predicted", ())) == 1:
                lines.append(f"    best {what}: predicted {r['predicted'][0]:.3g}, "
                             f"{h.get('level', 0.95):.0%} interval [{r['low'][0]:.3g}, "
                             f"{r['high'][0]:.3g}] (fitted), measured {r['measured'][0]:.3g}")
        if h.get("widen", 1.0) > 1.0:
            lines.append(f"  prediction intervals widened x{h['widen']:.2f}: what the held-out "
                         f"sizes needed for {h.get('level', 0.95):.0%} coverage (split conformal)")
    elif h and h.get("ok"):
        lines.append("  held-out largest size class: " + ", ".join(
            f"{k}={_g(v)}" for k, v in h.items() if k != "ok"))
    elif h:
        lines.append(f"  held-out check: {h.get('reason')}")
    return lines


def fit_html(f: Any) -> str:
    """A fit as a notebook shows it: the law and its data, the parameters with their 95% CIs
    as a table, the verdict with its reasons, and the whole summary text folded beneath."""
    import html

    v = f.verdict()
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{_g(val)}</td>"
        + "".join(f"<td>{_g(x)}</td>" for x in ((f.ci or {}).get(k) or (None, None))[:2])
        + "</tr>" for k, val in f.params.items())
    reasons = "".join(f"<li>{html.escape(r)}</li>" for r in v.reasons)
    return (f"<p><b>{html.escape(f.label)}</b>: {f.n_points} rows; verdict "
            f"<b>{html.escape(v.verdict)}</b></p>"
            "<table><thead><tr><th>parameter</th><th>estimate</th><th>95% CI low</th>"
            f"<th>95% CI high</th></tr></thead><tbody>{rows}</tbody></table>"
            + (f"<ul>{reasons}</ul>" if reasons else "")
            + f"<details><summary>the whole summary</summary>{f.summary().as_html()}</details>")
