"""Figures of a fit: optimal shape against size, known models on the law's map, residuals and
the law's own figures. Each is titled with the law and the data it came from, with axis units
and parameter conventions in the labels. Which figures a fit has is the law's answer
(:meth:`archfit.laws.Law.figures`): the generic ones named in
:data:`archfit.laws.base.GENERIC_FIGURES` are drawn here, law-specific ones by the law's own
``Figure.draw``. This module names no law."""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Sequence

import numpy as np

from archfit.errors import ArchfitError
from archfit.laws import Figure, Fit
from archfit.plots.base import FIGSIZE, FORMATS, fit_title, pyplot, save_figure


def optimal_shape_vs_size(fit: Fit, target: float | None = None,
                          recommended: Any = None, references: Sequence[Fit] = (),
                          data: Any = None) -> Any:
    """Any shape law: optimal depth (and width) against size, both on log axes, the fitted law
    with its bootstrap band, the runs (``data``: depth against size, as points) and the optima
    measured in them, the extrapolation shaded beyond the largest run, other shape laws
    (``references``) for comparison, extrapolated to ``target`` with the recommended shape
    marked. The x-axis spans the runs (from half the smallest) to the target, or 10x past the
    largest run."""
    law = fit.law_obj
    measured = law.measured_optima(fit.extra)
    span = fit.diagnostics.get("span") or {}
    top = span.get("params_max")
    runs = _runs_depth(data)
    smallest = [m.params for m in measured] + ([span["params_min"]] if span.get("params_min")
                                               else []) + [n for n, _ in runs]
    lo_n = min(smallest, default=1e6) / 2
    hi_n = max([target or 0, (top or 1e8) * 10] + [m.params * 2 for m in measured])
    Ns = np.logspace(math.log10(lo_n), math.log10(hi_n), 80)
    opt = np.array([law.optimum(fit.params, n) for n in Ns])
    fig, ax = pyplot().subplots(figsize=FIGSIZE)
    ax.plot(Ns, opt[:, 0], "-", color="C0", label=f"optimal depth ({fit.label})")
    band = _bootstrap_band(fit, Ns)
    if band is not None:
        ax.fill_between(Ns, np.maximum(band[0], 1e-3), band[1], color="C0", alpha=0.2,
                        label="95% bootstrap band")
    if runs:
        ax.plot([n for n, _ in runs], [d for _, d in runs], ".", color="0.3", ms=6, gid="run",
                label=f"runs trained ({len(runs)}: depth at size)")
    if measured:
        ax.errorbar([m.params for m in measured], [m.value for m in measured],
                    yerr=[[m.value - m.low for m in measured],
                          [m.high - m.value for m in measured]],
                    fmt="o", color="C0", label="measured optimum per size class (±1 SE)")
    for i, ref in enumerate(references):
        ax.plot(Ns, [ref.law_obj.optimum(ref.params, n)[0] for n in Ns], "-.",
                color=f"C{4 + i}", label=f"optimal depth ({ref.label}, for comparison)")
    if top:
        ax.axvline(top, color="0.4", ls="--", lw=0.8, label=f"largest run in the data ({top:.3g})")
        ax.axvspan(top, Ns[-1], color="0.9", zorder=0, label="extrapolation")
    ax2 = ax.twinx()
    ax2.plot(Ns, opt[:, 1], "--", color="C1", label="optimal width d_model")
    ax2.set_yscale("log")
    ax2.set_ylabel("optimal width d_model (log scale)", color="C1")
    if recommended is not None:
        s = recommended.shape
        ax.plot([recommended.target_params], [s.n_layer], "*", ms=16, color="C3",
                label=f"recommended: {s.n_layer} x {s.d_model:,} at "
                      f"N={recommended.target_params:.3g}")
    elif target:
        ax.axvline(target, color="C3", ls=":", label=f"target N = {target:.3g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(Ns[0], Ns[-1])
    ax.set_xlabel(f"{law.target_convention}, N (log scale)")
    ax.set_ylabel("optimal depth n_layer (log scale)")
    ax.set_title(fit_title(fit, "Optimal depth and width vs size"), fontsize=10)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def _runs_depth(data: Any) -> list[tuple[float, float]]:
    """(size, depth) of each run in ``data`` (prepared columns or a frame), where it has both."""
    if data is None or "params" not in data or "n_layer" not in data:
        return []
    N = np.asarray(data["params"], float)
    L = np.asarray(data["n_layer"], float)
    keep = np.isfinite(N) & np.isfinite(L) & (N > 0) & (L > 0)
    return list(zip(N[keep].tolist(), L[keep].tolist()))


def known_models_map(fit: Fit, placements: Sequence[Any]) -> Any:
    """Depth against size (Kaplan's N, log-log) for known models, one labelled marker per model
    (coloured by family), over the law's optimal depth and its bootstrap band."""
    law = fit.law_obj
    Ns_m = [p.N for p in placements]
    Ns = np.logspace(math.log10(min(Ns_m) / 2), math.log10(max(Ns_m) * 2), 120)
    fig, ax = pyplot().subplots(figsize=(12.0, 8.0))
    ax.plot(Ns, [law.optimum(fit.params, n)[0] for n in Ns], "-", color="k",
            label=f"optimal depth ({fit.label})")
    band = _bootstrap_band(fit, Ns)
    if band is not None:
        ax.fill_between(Ns, band[0], band[1], color="0.6", alpha=0.3, label="95% bootstrap band")
    families = list(dict.fromkeys(p.model.family for p in placements))
    cmap, markers = pyplot().get_cmap("tab20"), "osD^v<>pPXh*"
    seen: set[str] = set()
    for p in placements:
        i = families.index(p.model.family)
        ax.plot([p.N], [p.model.shape.n_layer], markers[i % len(markers)],
                color=cmap((2 * i) % 20 + (i // 10) % 2), ms=7, alpha=0.85, gid="known-model",
                label=None if p.model.family in seen else p.model.family)
        seen.add(p.model.family)
    # one label per spot: models of the same depth and (within 3%) the same size share it
    spots: dict[tuple[int, int], list[str]] = {}
    for p in placements:
        spots.setdefault((p.model.shape.n_layer, round(math.log10(p.N) * 80)), []).append(
            p.model.name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("non-embedding parameters, Kaplan's N (log scale; counted from each model's "
                  "published shape)")
    ax.set_ylabel("depth n_layer (log scale)")
    ax.set_title(f"Known models against the optimal depth of {fit.label} (verdict at these "
                 f"sizes: {placements[-1].verdict})\n{law.formula.split('[')[0].strip()}",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    _place_labels(fig, ax, [(", ".join(names) if len(names) < 3 else "\n".join(names),
                             10 ** (key / 80), L)
                            for (L, key), names in sorted(spots.items(), key=lambda kv: kv[0][1])])
    return fig


LABEL_PT = 8  # known-model labels: no smaller, and never overlapping one another
_OFFSETS = [(dx, dy) for dy in (3, -11, *(s * 14 * k + (3 if s > 0 else -11)
                                          for k in range(1, 16) for s in (1, -1)))
            for dx in (6, -6, 40, -40, 90, -90)]


def label_box(annotation: Any, renderer: Any) -> Any:
    """The box of an annotation's text alone (matplotlib's own includes its leader line)."""
    from matplotlib.text import Text

    annotation.update_positions(renderer)
    return Text.get_window_extent(annotation, renderer)


def _place_labels(fig: Any, ax: Any, labels: list[tuple[str, float, float]]) -> None:
    """Greedy placement: each label at the first offset around its marker (right, then left,
    then further up or down with a leader line) whose box overlaps no label placed before and
    stays inside the axes; the last offset tried when none is free."""
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    placed: list[Any] = []
    for text, x, y in labels:
        for i, (dx, dy) in enumerate(_OFFSETS):
            far = i >= 2
            a = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy),
                            fontsize=LABEL_PT, color="0.25", gid="known-model-label",
                            ha="left" if dx > 0 else "right",
                            arrowprops=dict(arrowstyle="-", color="0.6", lw=0.5) if far
                            else None)
            box = label_box(a, renderer)
            inside = (box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0
                      and box.y1 <= frame.y1)
            if (inside and not any(box.overlaps(b) for b in placed)) or i == len(_OFFSETS) - 1:
                placed.append(box)
                break
            a.remove()


def draw_known_models(fit: Fit, placements: Sequence[Any], out_dir: str,
                      fmt: str = "png") -> str:
    """Write :func:`known_models_map` as ``known_models.FMT`` in ``out_dir``; returns its path."""
    if fmt not in FORMATS:
        raise ArchfitError(f"unknown figure format {fmt!r}; use {', '.join(FORMATS)}")
    if not placements:
        raise ArchfitError("no known models to draw")
    os.makedirs(out_dir, exist_ok=True)
    return save_figure(known_models_map(fit, placements), out_dir, "known_models", fmt)


def _bootstrap_band(fit: Fit, Ns: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    law = fit.law_obj
    curves = []
    for p in fit.bootstrap_params(limit=300):
        try:
            curves.append([law.optimum(p, n)[0] for n in Ns])
        except (ValueError, OverflowError, ZeroDivisionError):
            continue
    if not curves:
        return None
    from archfit.numbers import draw_percentiles

    lo, hi = draw_percentiles(np.array(curves), [2.5, 97.5], axis=0, skip_nan=True)
    return lo, hi


def residuals(fit: Fit) -> Any:
    """Any fit: residuals (observed - fitted, in the law's residual space) against the fit."""
    r = np.asarray(fit.diagnostics.get("residuals") or [], float)
    f = np.asarray(fit.diagnostics.get("fitted_log") or [], float)
    space = fit.diagnostics.get("residual_space", "log loss")
    fig, ax = pyplot().subplots(figsize=FIGSIZE)
    if len(r):
        ax.scatter(f, r, s=12, alpha=0.7)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel(f"fitted value ({space})")
    ax.set_ylabel(f"residual: observed - fitted ({space})")
    rm = fit.diagnostics.get("rmse_log")
    ax.set_title(fit_title(fit, f"Residuals (RMSE {rm:.3g})" if rm is not None else "Residuals"),
                 fontsize=10)
    fig.tight_layout()
    return fig


def law_figure(fit: Fit, spec: Figure, data: Any = None, references: Sequence[Fit] = ()
               ) -> Any:
    """A law's own figure: its ``draw`` on one axis, titled and sized like the rest (with the
    ``references`` beside it, for a figure that draws them)."""
    fig, ax = pyplot().subplots(figsize=FIGSIZE)
    if spec.references:
        spec.draw(fit, ax, data, references=references)
    else:
        spec.draw(fit, ax, data)
    ax.set_title(fit_title(fit, spec.title), fontsize=10)
    fig.tight_layout()
    return fig


def draw_all(fit: Fit, out_dir: str, fmt: str = "png", data: Any = None,
             target: float | None = None, recommended: Any = None,
             references: Sequence[Fit] = ()) -> list[str]:
    """Write every figure the fit's law lists; returns their paths. ``references``: other
    fits of its kind drawn beside this one (shape laws: on the optimal-depth figure; compute
    laws: on a figure of N_opt against the budget)."""
    if fmt not in FORMATS:
        raise ArchfitError(f"unknown figure format {fmt!r}; use {', '.join(FORMATS)}")
    generic: dict[str, Callable[[], Any]] = {
        "optimal_depth_vs_size": lambda: optimal_shape_vs_size(fit, target, recommended,
                                                               references, data),
        "residuals": lambda: residuals(fit),
    }
    paths = []
    for name, spec in _figure_specs(fit):
        if isinstance(spec, Figure):
            fig = law_figure(fit, spec, data, references)
        elif spec in generic:
            fig = generic[spec]()
        else:
            raise ArchfitError(f"law {fit.law!r} lists an unknown figure {spec!r}; name one of "
                               f"{', '.join(generic)} or give a Figure")
        paths.append(save_figure(fig, out_dir, name, fmt))
    return paths


def _figure_specs(fit: Fit) -> list[tuple[str, Any]]:
    prefix = fit.label.replace("/", "_")
    return [(f"{prefix}-{spec.name if isinstance(spec, Figure) else spec}", spec)
            for spec in fit.figures()]


def figure_files(fit: Fit, fmt: str = "png") -> list[str]:
    """The file names :func:`draw_all` writes for ``fit`` (checked before drawing)."""
    return [f"{name}.{fmt}" for name, _ in _figure_specs(fit)]
