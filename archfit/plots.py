"""Figures of a fit and its evidence (matplotlib, Agg backend: no display needed).

Every figure is ``FIGSIZE`` inches at ``DPI`` (800 x 500 pixels for PNG), titled with the law
and the data it came from, with axis units and parameter conventions in the labels.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from archfit.laws import Fit

FIGSIZE = (8.0, 5.0)
DPI = 100


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _title(fit: Fit, what: str) -> str:
    data = ", ".join(os.path.basename(i.get("path", "")) for i in fit.inputs) or (
        fit.source.split(",")[0] if fit.source else "in-memory data")
    return f"{what}\nlaw: {fit.name or fit.law} · data: {data}"


def _finish(fig: Any, ax: Any, fit: Fit, title: str, legend: bool, **legend_kw: Any) -> Any:
    ax.set_title(_title(fit, title), fontsize=10)
    if legend:
        ax.legend(fontsize=8, **legend_kw)
    fig.tight_layout()
    return fig


def _save(fig: Any, out_dir: str, name: str, fmt: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.{fmt}")
    tmp = os.path.join(out_dir, f".tmp-{name}.{fmt}")
    fig.savefig(tmp, dpi=DPI, format=fmt)
    os.replace(tmp, path)
    _plt().close(fig)
    return path


def loss_vs_depth(fit: Fit) -> Any:
    """Levine's figure: loss against depth for each size class, the quadratic fit in ln depth
    and the fitted optimum marked."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    classes = fit.extra.get("classes") or []
    cmap = plt.get_cmap("viridis")
    for i, c in enumerate(classes):
        col = cmap(i / max(1, len(classes) - 1))
        pts = c["points"]
        ax.plot(pts["n_layer"], pts["loss"], "o", color=col,
                label=f"N ≈ {c['params']:.3g}: optimum depth {c['opt']:.1f}")
        x = np.linspace(c["min"] - 0.2, c["max"] + 0.2, 100)
        c0, c1, c2 = c["coef"]
        ax.plot(np.exp(x), c0 + c1 * x + c2 * x * x, "-", color=col, alpha=0.7)
        ax.axvline(c["opt"], color=col, ls=":", alpha=0.8)
    ax.set_xscale("log")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    depths = sorted({d for c in classes for d in c["points"]["n_layer"]})
    if depths:
        ax.set_xticks(depths)
    ax.set_xlabel("depth n_layer (log scale)")
    ax.set_ylabel("validation loss (nats/token), best LR per shape")
    return _finish(fig, ax, fit, "Loss vs depth per size class (N = non-embedding params)",
                   bool(classes))


def optimal_shape_vs_size(fit: Fit, target: float | None = None,
                          recommended: Any = None) -> Any:
    """Optimal depth (and width) against size, the fitted law with its bootstrap band,
    extrapolated to ``target`` with the recommended shape marked."""
    from archfit.recommender import _optimum

    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    classes = fit.extra.get("classes") or []
    lo_n = min([c["params"] for c in classes], default=1e6) / 2
    hi_n = max([target or 0] + [c["params"] * 2 for c in classes] + [1e9])
    Ns = np.logspace(math.log10(lo_n), math.log10(hi_n), 80)
    depth = np.array([_optimum(fit, n)[0] for n in Ns])
    width = np.array([_optimum(fit, n)[1] for n in Ns])
    ax.plot(Ns, depth, "-", color="C0", label=f"optimal depth ({fit.name or fit.law})")
    samples = fit.samples()
    names = list(fit.law_obj.param_names)
    if samples and all(n in samples for n in names):
        k = min(300, len(samples[names[0]]))
        curves = []
        for i in range(k):
            p = {n: float(samples[n][i]) for n in names}
            try:
                curves.append([_optimum(Fit(law=fit.law, params=p), n)[0] for n in Ns])
            except (ValueError, OverflowError, ZeroDivisionError):
                continue
        if curves:
            lo, hi = np.nanpercentile(np.array(curves), [2.5, 97.5], axis=0)
            ax.fill_between(Ns, lo, hi, color="C0", alpha=0.2, label="95% bootstrap band")
    if classes:
        ax.errorbar([c["params"] for c in classes], [c["opt"] for c in classes],
                    yerr=[[c["opt"] - math.exp(c["log_opt"] - (c["log_opt_se"] or 0))
                           for c in classes],
                          [math.exp(c["log_opt"] + (c["log_opt_se"] or 0)) - c["opt"]
                           for c in classes]],
                    fmt="o", color="C0", label="measured optimum per size class (±1 SE)")
    ax2 = ax.twinx()
    ax2.plot(Ns, width, "--", color="C1", label="optimal width d_model")
    ax2.set_yscale("log")
    ax2.set_ylabel("optimal width d_model (log scale)", color="C1")
    if recommended is not None:
        s = recommended.shape
        ax.plot([recommended.target_params], [s.n_layer], "*", ms=16, color="C3",
                label=f"recommended: {s.n_layer} x {s.d_model:,} at N={recommended.target_params:.3g}")
    elif target:
        ax.axvline(target, color="C3", ls=":", label=f"target N = {target:.3g}")
    ax.set_xscale("log")
    ax.set_xlabel("non-embedding parameters N (Kaplan's convention, log scale)")
    ax.set_ylabel("optimal depth n_layer")
    ax.set_title(_title(fit, "Optimal depth and width vs size"), fontsize=10)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def isoloss_contours(fit: Fit, data: Any = None) -> Any:
    """Chinchilla fits: iso-loss contours over (N, D) and the compute-optimal frontier."""
    from archfit.laws.loss_laws import compute_optimal

    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    N = np.logspace(7, 12, 200)
    D = np.logspace(8, 13.5, 200)
    NN, DD = np.meshgrid(N, D)
    p = fit.params
    L = p["E"] + p["A"] / NN ** p["alpha"] + p["B"] / DD ** p["beta"]
    cs = ax.contour(NN, DD, L, levels=np.quantile(L, np.linspace(0.02, 0.9, 12)),
                    cmap="viridis", linewidths=0.8)
    ax.clabel(cs, fontsize=7, fmt="%.2f")
    C = np.logspace(17, 26, 50)
    n_opt, d_opt = compute_optimal(p, C)
    ax.plot(n_opt, d_opt, "r-", lw=2, label="compute-optimal frontier (C = 6 N D)")
    if data is not None and {"params", "tokens"} <= set(data.columns):
        ax.scatter(data["params"].to_numpy(), data["tokens"].to_numpy(), s=8, c="k", alpha=0.5,
                   label="runs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(N[0], N[-1])
    ax.set_ylim(D[0], D[-1])
    conv = fit.conventions.get("params", "parameters")
    ax.set_xlabel(f"parameters N ({conv}, log scale)")
    ax.set_ylabel("training tokens D (log scale)")
    return _finish(fig, ax, fit, "Iso-loss contours (nats/token) and compute-optimal frontier",
                   True, loc="lower right")


def residuals(fit: Fit) -> Any:
    """Residuals (observed - fitted, log space) against the fitted value."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    r = np.asarray(fit.diagnostics.get("residuals") or [], float)
    f = np.asarray(fit.diagnostics.get("fitted_log") or [], float)
    space = fit.diagnostics.get("residual_space", "log loss")
    if len(r):
        ax.scatter(f, r, s=12, alpha=0.7)
    ax.axhline(0, color="k", lw=0.8)
    rm = fit.diagnostics.get("rmse_log")
    ax.set_xlabel(f"fitted value ({space})")
    ax.set_ylabel(f"residual: observed - fitted ({space})")
    return _finish(fig, ax, fit, f"Residuals (RMSE {rm:.3g})" if rm is not None else
                   "Residuals", False)


def shape_penalty(fit: Fit) -> Any:
    """Depth-width fits: loss relative to the best shape of its size vs aspect ratio."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    sp = fit.extra.get("shape_penalty") or {}
    pts = sp.get("points") or {}
    if pts:
        x = np.exp(np.asarray(pts["log_aspect_ratio"]))
        ax.scatter(x, np.asarray(pts["rel_loss"]) * 100, s=14, label="runs")
        c2, c1, c0 = sp["coef_quadratic"]
        xs = np.linspace(np.log(x.min()), np.log(x.max()), 100)
        ax.plot(np.exp(xs), (c0 + c1 * xs + c2 * xs * xs) * 100, "r-", label="quadratic fit")
    ax.set_xscale("log")
    ax.set_xlabel("aspect ratio d_model / n_layer (log scale)")
    ax.set_ylabel("loss above the best shape of the same size (%)")
    return _finish(fig, ax, fit, "Shape penalty at fixed N (Kaplan et al. 2020, Fig. 5)",
                   bool(pts))


def draw_all(fit: Fit, out_dir: str, fmt: str = "png", data: Any = None,
             target: float | None = None, recommended: Any = None) -> list[str]:
    """Write every figure that applies to ``fit``; returns their paths."""
    if fmt not in ("png", "svg", "pdf"):
        from archfit.errors import ArchfitError

        raise ArchfitError(f"unknown figure format {fmt!r}; use png or svg")
    figs: list[tuple[str, Any]] = []
    if fit.law == "levine":
        if fit.extra.get("classes"):
            figs.append(("loss_vs_depth", loss_vs_depth(fit)))
        figs.append(("optimal_depth_vs_size", optimal_shape_vs_size(fit, target, recommended)))
    elif fit.law == "depth-width":
        figs.append(("optimal_depth_vs_size", optimal_shape_vs_size(fit, target, recommended)))
        if fit.extra.get("shape_penalty"):
            figs.append(("shape_penalty", shape_penalty(fit)))
    elif fit.law in ("chinchilla", "chinchilla-varpro"):
        figs.append(("isoloss_contours", isoloss_contours(fit, data)))
    if fit.diagnostics.get("residuals"):
        figs.append(("residuals", residuals(fit)))
    prefix = (fit.name or fit.law).replace("/", "_")
    return [_save(fig, out_dir, f"{prefix}-{name}", fmt) for name, fig in figs]


