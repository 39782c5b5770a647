"""Figures of a fit and its evidence (matplotlib, Agg backend: no display needed).

Every figure is ``FIGSIZE`` inches at ``DPI`` (800 x 500 pixels for PNG), titled with the law
and the data it came from, with axis units and parameter conventions in the labels. Which
figures a fit has is the law's answer (:meth:`archfit.laws.Law.figures`): the generic ones
named in :data:`archfit.laws.base.GENERIC_FIGURES` are drawn here, law-specific ones by the
law's own ``Figure.draw``. This module names no law.
"""

from __future__ import annotations

import math
import os
import textwrap
from typing import Any, Callable, Sequence

import numpy as np

from archfit.errors import ArchfitError
from archfit.io import atomic_path
from archfit.laws import Figure, Fit

FIGSIZE = (8.0, 5.0)
DPI = 100
FORMATS = ("png", "svg", "pdf")


def _plt() -> Any:
    import sys

    import matplotlib

    if "ipykernel" not in sys.modules:  # a notebook keeps its inline backend; elsewhere files
        matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _title(fit: Fit, what: str) -> str:
    data = ", ".join(os.path.basename(i.get("path", "")) for i in fit.inputs) or (
        fit.source.split(",")[0] if fit.source else "in-memory data")
    return f"{what}\nlaw: {fit.label} · data: {data} · verdict: {fit.trust['verdict']}"


def _save(fig: Any, out_dir: str, name: str, fmt: str) -> str:
    path = os.path.join(out_dir, f"{name}.{fmt}")
    with atomic_path(path) as tmp:  # marked as archfit's, so a later plot may replace it
        fig.savefig(tmp, dpi=DPI, format=fmt, metadata=(
            {"Software": PNG_SOFTWARE} if fmt == "png" else {"Creator": PNG_SOFTWARE}))
    _plt().close(fig)
    return path


def optimal_shape_vs_size(fit: Fit, target: float | None = None,
                          recommended: Any = None, references: Sequence[Fit] = ()) -> Any:
    """Any shape law: optimal depth (and width) against size, the fitted law with its bootstrap
    band, the optima measured in the data and where the data end, other shape laws
    (``references``) for comparison, extrapolated to ``target`` with the recommended shape
    marked."""
    law = fit.law_obj
    measured = law.measured_optima(fit.extra)
    lo_n = min([m.params for m in measured], default=1e6) / 2
    hi_n = max([target or 0] + [m.params * 2 for m in measured] + [1e9])
    Ns = np.logspace(math.log10(lo_n), math.log10(hi_n), 80)
    opt = np.array([law.optimum(fit.params, n) for n in Ns])
    fig, ax = _plt().subplots(figsize=FIGSIZE)
    ax.plot(Ns, opt[:, 0], "-", color="C0", label=f"optimal depth ({fit.label})")
    band = _bootstrap_band(fit, Ns)
    if band is not None:
        ax.fill_between(Ns, band[0], band[1], color="C0", alpha=0.2, label="95% bootstrap band")
    if measured:
        ax.errorbar([m.params for m in measured], [m.value for m in measured],
                    yerr=[[m.value - m.low for m in measured],
                          [m.high - m.value for m in measured]],
                    fmt="o", color="C0", label="measured optimum per size class (±1 SE)")
    for i, ref in enumerate(references):
        ax.plot(Ns, [ref.law_obj.optimum(ref.params, n)[0] for n in Ns], "-.",
                color=f"C{4 + i}", label=f"optimal depth ({ref.label}, for comparison)")
    top = (fit.diagnostics.get("span") or {}).get("params_max")
    if top:
        ax.axvline(top, color="0.4", ls="--", lw=0.8, label=f"largest run in the data ({top:.3g})")
        ax.axvspan(top, Ns[-1], color="0.9", zorder=0)
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
    ax.set_xlabel(f"{law.target_convention}, N (log scale)")
    ax.set_ylabel("optimal depth n_layer")
    ax.set_title(_title(fit, "Optimal depth and width vs size"), fontsize=10)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def known_models_map(fit: Fit, placements: Sequence[Any]) -> Any:
    """Depth against size (Kaplan's N, log-log) for known models, one labelled marker per model
    (coloured by family), over the law's optimal depth and its bootstrap band."""
    law = fit.law_obj
    Ns_m = [p.N for p in placements]
    Ns = np.logspace(math.log10(min(Ns_m) / 2), math.log10(max(Ns_m) * 2), 120)
    fig, ax = _plt().subplots(figsize=(12.0, 8.0))
    ax.plot(Ns, [law.optimum(fit.params, n)[0] for n in Ns], "-", color="k",
            label=f"optimal depth ({fit.label})")
    band = _bootstrap_band(fit, Ns)
    if band is not None:
        ax.fill_between(Ns, band[0], band[1], color="0.6", alpha=0.3, label="95% bootstrap band")
    families = list(dict.fromkeys(p.model.family for p in placements))
    cmap, markers = _plt().get_cmap("tab20"), "osD^v<>pPXh*"
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
    return _save(known_models_map(fit, placements), out_dir, "known_models", fmt)


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
    lo, hi = np.nanpercentile(np.array(curves), [2.5, 97.5], axis=0)
    return lo, hi


def residuals(fit: Fit) -> Any:
    """Any fit: residuals (observed - fitted, in the law's residual space) against the fit."""
    r = np.asarray(fit.diagnostics.get("residuals") or [], float)
    f = np.asarray(fit.diagnostics.get("fitted_log") or [], float)
    space = fit.diagnostics.get("residual_space", "log loss")
    fig, ax = _plt().subplots(figsize=FIGSIZE)
    if len(r):
        ax.scatter(f, r, s=12, alpha=0.7)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel(f"fitted value ({space})")
    ax.set_ylabel(f"residual: observed - fitted ({space})")
    rm = fit.diagnostics.get("rmse_log")
    ax.set_title(_title(fit, f"Residuals (RMSE {rm:.3g})" if rm is not None else "Residuals"),
                 fontsize=10)
    fig.tight_layout()
    return fig


def law_figure(fit: Fit, spec: Figure, data: Any = None) -> Any:
    """A law's own figure: its ``draw`` on one axis, titled and sized like the rest."""
    fig, ax = _plt().subplots(figsize=FIGSIZE)
    spec.draw(fit, ax, data)
    ax.set_title(_title(fit, spec.title), fontsize=10)
    fig.tight_layout()
    return fig


def draw_all(fit: Fit, out_dir: str, fmt: str = "png", data: Any = None,
             target: float | None = None, recommended: Any = None,
             references: Sequence[Fit] = ()) -> list[str]:
    """Write every figure the fit's law lists; returns their paths. ``references``: other
    shape-law fits drawn beside this one on the optimal-depth figure."""
    if fmt not in FORMATS:
        raise ArchfitError(f"unknown figure format {fmt!r}; use {', '.join(FORMATS)}")
    generic: dict[str, Callable[[], Any]] = {
        "optimal_depth_vs_size": lambda: optimal_shape_vs_size(fit, target, recommended,
                                                               references),
        "residuals": lambda: residuals(fit),
    }
    paths = []
    for name, spec in _figure_specs(fit):
        if isinstance(spec, Figure):
            fig = law_figure(fit, spec, data)
        elif spec in generic:
            fig = generic[spec]()
        else:
            raise ArchfitError(f"law {fit.law!r} lists an unknown figure {spec!r}; name one of "
                               f"{', '.join(generic)} or give a Figure")
        paths.append(_save(fig, out_dir, name, fmt))
    return paths


def _figure_specs(fit: Fit) -> list[tuple[str, Any]]:
    prefix = fit.label.replace("/", "_")
    return [(f"{prefix}-{spec.name if isinstance(spec, Figure) else spec}", spec)
            for spec in fit.figures()]


def figure_files(fit: Fit, fmt: str = "png") -> list[str]:
    """The file names :func:`draw_all` writes for ``fit`` (checked before drawing)."""
    return [f"{name}.{fmt}" for name, _ in _figure_specs(fit)]


def is_archfit_figure(path: str) -> bool:
    """Whether ``path`` is a figure archfit drew (PNG: its Software chunk; SVG and PDF: the
    Creator archfit wrote), so that a later plot may replace it without --force."""
    if path.endswith(".png"):
        return is_archfit_png(path)
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return False
    return PNG_SOFTWARE.encode() in data and (b"<svg" in data[:4096] or data.startswith(b"%PDF"))


PNG_SOFTWARE = "archfit"  # the PNG text chunk that marks a figure as archfit's own


def is_archfit_png(path: str) -> bool:
    """Whether ``path`` is a PNG archfit drew (its Software text chunk): such a file may be
    replaced without --force."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(b"\x89PNG") and b"Software\x00" + PNG_SOFTWARE.encode() in head


def draw_pareto(choice: Any, path: str) -> str:
    """Predicted loss against GPU-hours (time/cost) or decode latency (latency) for every
    candidate shape of an objective (:class:`archfit.objectives.Choice`): the Pareto front,
    the pick and the loss-optimal shape marked, depth labelled."""
    plt = _plt()
    rows = [dict(r) for r in choice.rows]
    for r in rows:
        r["s_per_mtok"] = 1e6 / r["tokens_per_s"]
    hours = {r.get("gpu_hours") for r in rows}
    if choice.objective == "latency":
        xkey, xlabel, what = "latency_ms", "decode latency, ms per token at batch 1 (modelled)", \
            "latency"
    elif len(hours) > 1 and None not in hours:  # the same loss, in different GPU-hours
        xkey, xlabel, what = "gpu_hours", "GPU-hours to reach the loss-optimal shape's loss", \
            "training time"
    else:  # one budget: loss against speed
        xkey, xlabel, what = "s_per_mtok", "GPU-seconds per million training tokens " \
            "(throughput model)", "training speed"
    ykey = "predicted_loss" if all(r.get("predicted_loss") is not None for r in rows) \
        else "shape_penalty"
    pts = [r for r in rows if r.get(xkey) is not None and r.get(ykey) is not None
           and math.isfinite(r[xkey]) and math.isfinite(r[ykey])]
    if not pts:
        raise ArchfitError("no candidate has both numbers the Pareto figure needs")
    fig, ax = plt.subplots(figsize=FIGSIZE)
    ax.scatter([r[xkey] for r in pts], [r[ykey] for r in pts], color="0.6", s=18,
               label="candidate shapes (same size)", zorder=2)
    front, best = [], math.inf
    for r in sorted(pts, key=lambda r: (r[xkey], r[ykey])):
        if r[ykey] < best:
            front.append(r)
            best = r[ykey]
    ax.plot([r[xkey] for r in front], [r[ykey] for r in front], "-o", color="tab:blue", ms=4,
            label="Pareto front", zorder=3)
    for r in pts:
        ax.annotate(f"{r['n_layer']}", (r[xkey], r[ykey]), textcoords="offset points",
                    xytext=(3, 3), fontsize=8, color="0.35")
    for key, style, label in (("loss_optimal", dict(marker="s", color="tab:green"),
                               "loss-optimal"),
                              ("chosen", dict(marker="*", color="tab:red", s=180),
                               f"{choice.objective} pick")):
        r = next(x for x in pts if x.get(key))
        ax.scatter([r[xkey]], [r[ykey]], zorder=4, s=style.pop("s", 70),
                   label=f"{label}: {r['n_layer']} x {r['d_model']:,}", **style)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("predicted loss (nats/token)" if ykey == "predicted_loss" else
                  "predicted shape penalty (nats/token)")
    ax.set_title(f"objective {choice.objective}: loss against {what} (labels: depth)\n"
                 f"{choice.tradeoff}", fontsize=9)
    return _finish_png(fig, ax, path)


def write_png(fig: Any, path: str) -> str:
    """The figure as a PNG at ``path``, written atomically with archfit's marker (so a later
    run may replace it), then closed."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png", metadata={"Software": PNG_SOFTWARE})
    _plt().close(fig)
    return path


def _finish_png(fig: Any, ax: Any, path: str) -> str:
    """Grid, legend and layout, then :func:`write_png`."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return write_png(fig, path)


def draw_backtest(results: Sequence[dict[str, Any]], path: str) -> str:
    """Predicted against actual loss for every held-out run of one or more backtests
    (:func:`archfit.laws.backtest.backtest`), each with its prediction interval; points on the
    diagonal were predicted exactly, bars that cross it covered the truth."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    lo_all, hi_all = math.inf, -math.inf
    for k, r in enumerate(results):
        rows = r["rows"]
        a = np.array([x["actual"] for x in rows])
        p = np.array([x["predicted"] for x in rows])
        lo = np.array([x["low"] for x in rows])
        hi = np.array([x["high"] for x in rows])
        ax.errorbar(a, p, yerr=[p - lo, hi - p], fmt="o", ms=3, alpha=0.6, elinewidth=0.8,
                    color=f"C{k}", label=f"cut {r['cut']:.3g}: coverage {r['coverage']:.0%}, "
                    f"mean error {r['mean_rel_error']:+.1%} (verdict {r['verdict']})")
        lo_all, hi_all = min(lo_all, a.min(), lo.min()), max(hi_all, a.max(), hi.max())
    ax.plot([lo_all, hi_all], [lo_all, hi_all], "k--", lw=1, label="predicted = actual")
    law = results[0]["law"] if results else "?"
    level = results[0]["interval"] if results else 0.95
    ax.set_xlabel("actual loss (nats/token)")
    ax.set_ylabel(f"predicted loss, {level:.0%} prediction interval (nats/token)")
    ax.set_title(f"backtest of {law}: fitted on runs up to the cut, predicting the larger ones",
                 fontsize=10)
    return _finish_png(fig, ax, path)


def draw_validation(v: dict[str, Any], path: str) -> str:
    """Predicted and measured loss against depth for a validation
    (:meth:`archfit.validation.Validation.to_dict`): each seed's loss, the shape's mean, the
    fit's 95% prediction interval, the recommended shape marked, the verdict in the title."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=FIGSIZE)
    rows = sorted(v["shapes"], key=lambda r: r["n_layer"])
    L = np.array([r["n_layer"] for r in rows], float)
    banded = [r for r in rows if r.get("low") is not None]
    if banded:
        ax.fill_between([r["n_layer"] for r in banded], [r["low"] for r in banded],
                        [r["high"] for r in banded], color="C0", alpha=0.15,
                        label="fit: 95% prediction interval")
    predicted = [r for r in rows if r.get("predicted") is not None]
    if predicted:
        ax.plot([r["n_layer"] for r in predicted], [r["predicted"] for r in predicted], "-o",
                color="C0", ms=4, label=f"predicted by {v['fit']}")
    for r in rows:
        ax.plot([r["n_layer"]] * len(r["losses"]), r["losses"], "x", color="C1", ms=6)
    meas = [r for r in rows if r.get("measured") is not None]
    ax.errorbar([r["n_layer"] for r in meas], [r["measured"] for r in meas],
                yerr=[r.get("sd") or 0 for r in meas], fmt="s", color="C1", ms=6, capsize=3,
                label="measured: each seed (x), mean ± sd")
    rec = v["shapes"][0]
    ax.axvline(rec["n_layer"], color="C3", ls="--", lw=1,
               label=f"recommended: {rec['n_layer']} x {rec['d_model']:,}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(L, [f"{int(x)}\n{r['d_model']:,}" for x, r in zip(L, rows)])
    ax.set_xlabel("depth (n_layer) and width (d_model), same non-embedding size")
    ax.set_ylabel("final validation loss (nats/token)")
    ax.set_title(f"validation at N = {v['target']:.3g} non-embedding parameters: "
                 f"{v['verdict'].upper()}\n" + "\n".join(textwrap.wrap(v["reason"], 120)),
                 fontsize=8)
    return _finish_png(fig, ax, path)
