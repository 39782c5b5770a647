"""The figure of a design (``archfit design --plot``): where the next runs sit among the
candidates and the runs so far, and what they are for.

x is the size N (log scale, the fit's parameter convention); y is depth (shape laws, log 2) or
training tokens D (laws of size and tokens alone, log). Grey rings are the open candidates,
black dots the runs so far, red dots the batch, numbered in the order chosen. The target is
drawn as what it is: a size (a vertical line, with the optimal depth's 95% CI now and the one
predicted after the batch), a compute budget (the iso-FLOP line C = 6 N D, with N_opt's CI now
and after along it) or a table of configurations (stars).

The figure of a replay (``archfit design --replay ... --plot``) answers "how much of my last
sweep did I need?": on the left the finished sweep, the runs the design chose coloured by the
round that chose them (a colour bar) and the target rows as stars; on the right each target
row's loss as measured against the loss predicted by the fit on the chosen runs (with its 95%
interval) and by the fit on every row.
"""

from __future__ import annotations

import textwrap
from collections import defaultdict
from typing import Any

import numpy as np

from archfit.errors import ArchfitError
from archfit.plots.base import FIGSIZE, pyplot, write_png


def _axes(d: Any) -> tuple[str, str, str]:
    """(y column, y label, x label) for a design's pool."""
    pool = d.context.get("pool") or {}
    if "params" not in pool:
        raise ArchfitError("this design carries no pool to draw (a Design from archfit.design() "
                           "has one); draw the figure from the design itself")
    conv = (d.context.get("params") or "as the pool counts them").split(" (")[0].split(";")[0]
    return (*_yaxis(pool, "the pool", d.law), f"parameters N ({conv}; log scale)")


def _yaxis(cols: Any, what: str, law: str | None = None) -> tuple[str, str]:
    """(y column, y label): depth where the table has it and the law reads it, else training
    tokens (a law of size and tokens is drawn against tokens even where shapes are known)."""
    from archfit.laws import get_law

    reads_depth = law is None or "n_layer" in get_law(law).columns
    if "n_layer" in cols and (reads_depth or "tokens" not in cols):
        return "n_layer", "depth (n_layer, log scale)"
    if "tokens" in cols:
        return "tokens", "training tokens D (log scale)"
    raise ArchfitError(f"{what} has neither depths (n_layer) nor token counts to draw against")


def _log_axes(ax: Any, ykey: str) -> None:
    """Log N; log depth (base 2, as plain numbers: 1, 2, 4, ...) or log tokens."""
    ax.set_xscale("log")
    ax.set_yscale("log", base=2 if ykey == "n_layer" else 10)
    if ykey == "n_layer":
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())


def _at_points(xs: Any, ys: Any) -> str:
    """How many runs a scatter draws, and at how many points where token counts overlap."""
    at = len(set(zip(xs, ys)))
    return f"{len(xs)}" + (f", at {at} points: the others differ in tokens" if at < len(xs)
                           else "")


def _target(ax: Any, d: Any, xs: np.ndarray, ykey: str) -> None:
    t, point = d.context["target"], d.context.get("point")
    now, after = d.ci_now, d.ci_after
    if t.kind == "table":
        rows = t.rows
        if ykey in rows:
            ax.scatter(rows["params"], rows[ykey], marker="*", s=110, color="tab:blue", zorder=5,
                       label=f"target configurations ({len(rows['params'])})")
        return
    if t.kind == "params":
        ax.axvline(t.value, ls="--", lw=1, color="tab:blue",
                   label=f"target N = {t.value:.3g}")
        # beside the line, behind the points: candidates at N itself stay visible
        for ci, x, style, what in ((now, t.value / 1.1, dict(color="0.45", lw=4, alpha=0.6),
                                    "now"),
                                   (after, t.value * 1.1, dict(color="tab:red", lw=2),
                                    "after the batch (Gaussian shortcut)")):
            if ci and point:
                ax.errorbar([x], [point], yerr=[[point - ci[0]], [ci[1] - point]], fmt="o",
                            ms=4, capsize=4, zorder=1.5, **style,
                            label=f"optimal depth there {what}: {ci.text()}")
        return
    C = float(t.value)  # compute: the iso-FLOP line, and N_opt's interval along it
    # the drawn span: the candidates and the point estimate, widened; an interval wider than
    # that runs off the axes (the legend gives its ends)
    lo, hi = xs.min() / 3, max(xs.max(), point or 0) * 30
    ends = [v for v in (*(now or ()), *(after or ())) if v]
    Ns = np.geomspace(max(lo, min([xs.min() / 2, *ends])), min(hi, max([xs.max() * 2, *ends])),
                      64)
    ax.plot(Ns, C / (6 * Ns), "--", lw=1, color="tab:blue",
            label=f"target C = {C:.3g} FLOPs (D = C / 6N)")
    for ci, style, what in ((now, dict(color="0.45", lw=7, alpha=0.6), "now"),
                            (after, dict(color="tab:red", lw=2.5),
                             "after the batch (Gaussian shortcut)")):
        if ci:
            seg = np.geomspace(max(ci[0], lo), min(ci[1], hi), 16)
            ax.plot(seg, C / (6 * seg), solid_capstyle="butt", zorder=4, **style,
                    label=f"N_opt there {what}: {ci.text()}")
    if point:
        ax.scatter([point], [C / (6 * point)], color="tab:blue", s=30, zorder=5)


def design_figure(d: Any, runs: Any = None) -> Any:
    """(figure, axes) of a :class:`archfit.designing.Design`, drawn and not saved; ``runs`` (a
    frame) are drawn as the runs so far where the design was made from a fit alone."""
    ykey, ylabel, xlabel = _axes(d)
    plt = pyplot()
    pool, is_open = d.context["pool"], np.asarray(d.context["open"], bool)
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], FIGSIZE[1] + 1.5), layout="constrained")
    px, py = np.asarray(pool["params"], float), np.asarray(pool[ykey], float)
    ax.scatter(px[is_open], py[is_open], facecolors="none", edgecolors="0.6", s=24, zorder=2,
               label=f"open candidates ({int(is_open.sum())})")
    res = d.context.get("results")
    if not res and runs is not None:
        res = {c: runs[c].to_numpy() for c in ("params", ykey) if c in runs.columns}
    if res and ykey in res and len(res["params"]):
        ax.scatter(res["params"], res[ykey], color="k", s=14, zorder=3,
                   label=f"runs so far ({_at_points(res['params'], res[ykey])})")
    unit = d.cost_unit.split(" (")[0]
    if d.chosen:
        cx = np.array([c["params"] for c in d.chosen], float)
        cy = np.array([c[ykey] for c in d.chosen], float)
        order: dict[tuple[float, float], list[str]] = defaultdict(list)
        for i, (x, y) in enumerate(zip(cx, cy), 1):
            order[(x, y)].append(str(i))
        ax.scatter(cx, cy, color="tab:red", s=60, zorder=4,
                   label=f"the batch, in order: {len(d.chosen)} run(s), {d.spent:.3g} of "
                         f"{d.budget:.3g} {unit}" + ("; runs at one point differ in tokens"
                                                     if len(order) < len(d.chosen) else ""))
        for (x, y), ks in order.items():  # runs at one point (other token counts) share a label
            ax.annotate(",".join(ks), (x, y), textcoords="offset points", xytext=(5, 4),
                        fontsize=9, color="tab:red", weight="bold")
    _target(ax, d, px, ykey)
    _log_axes(ax, ykey)
    if ykey == "n_layer":  # a wild interval runs off the axes (the legend gives its ends)
        # rather than squeezing the runs into a strip
        ys = [py, *([np.asarray(res[ykey], float)] if res and ykey in res else []),
              np.array([d.context.get("point") or py.min()])]
        ax.set_ylim(max(0.7, min(v.min() for v in ys) / 1.6), max(v.max() for v in ys) * 1.6)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    head = (f"the next {len(d.chosen)} run(s)" if d.chosen else
            f"nothing to run ({d.stop or 'no affordable candidate'})")
    ax.set_title(f"archfit design: {d.law}, strategy {d.strategy}: {head}\n"
                 + "\n".join(textwrap.wrap(f"target: {d.target}", 110)), fontsize=9)
    return fig, ax


def draw_design(d: Any, path: str, runs: Any = None) -> str:
    """The design's figure (:func:`design_figure`) as a PNG at ``path`` (atomic, marked as
    archfit's)."""
    fig, ax = design_figure(d, runs)
    ax.grid(alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), loc="outside lower center", fontsize=8)
    return write_png(fig, path)


def replay_figure(r: dict[str, Any], done: dict[str, np.ndarray],
                  target: dict[str, np.ndarray]) -> Any:
    """The figure of :func:`archfit.designing.replay`'s result ``r`` on the finished sweep
    ``done`` and the ``target`` rows (columns as arrays), drawn and not saved."""
    if "params" not in done or "params" not in target:
        raise ArchfitError("the replay's tables carry no params column to draw against")
    ykey, ylabel = _yaxis(done, "the replay's table", r.get("law"))
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(FIGSIZE[0] * 1.6, FIGSIZE[1] + 1),
                                 layout="constrained")
    ax.scatter(done["params"], done[ykey], facecolors="none", edgecolors="0.6", s=22, zorder=2,
               label=f"the finished sweep ({len(done['params'])} rows)")
    rounds = np.array([c["round"] for c in r["chosen"]], float)
    cx = np.array([c["params"] for c in r["chosen"]], float)
    cy = np.array([c[ykey] for c in r["chosen"]], float)
    dots = ax.scatter(cx, cy, c=rounds, cmap="viridis", vmin=0, vmax=max(rounds.max(), 1),
                      s=34, zorder=3, label=f"chosen runs ({_at_points(cx, cy)})")
    fig.colorbar(dots, ax=ax, pad=0.01).set_label("round that chose the run (0: the "
                                                  "spread start)")
    ax.scatter(target["params"], target[ykey], marker="*", s=110, color="tab:red", zorder=4,
               label=f"target rows ({len(target['params'])})")
    _log_axes(ax, ykey)
    ax.set_xlabel("parameters N (as the table counts them; log scale)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"replay of {r['strategy']} on {r['law']}: {r['n_chosen']} runs in "
                 f"{r['rounds']} round{'' if r['rounds'] == 1 else 's'}, "
                 f"{r['budget_frac_spent']:.1%} of the sweep's cost", fontsize=9)
    ax.legend(fontsize=7)
    _replay_target(bx, r, np.asarray(target["loss"], float))
    for a in (ax, bx):
        a.grid(alpha=0.3)
    return fig


def _replay_target(ax: Any, r: dict[str, Any], loss: np.ndarray) -> None:
    """Each target row's measured loss against the losses the two fits predict."""
    for who, style, name in (("all_rows", dict(color="0.5", ms=4, fmt="s"), "fit on every row"),
                             ("design", dict(color="tab:red", ms=5, fmt="o", capsize=3),
                              "fit on the chosen runs, 95% PI")):
        m = r["target"].get(who) or {}
        if "predicted" not in m:
            continue
        pred = np.asarray(m["predicted"], float)
        yerr = None
        if who == "design":
            from archfit.interval import Interval

            iv = np.asarray([list(Interval.from_json(i) if isinstance(i, dict) else i)
                             for i in m["interval"]], float)
            yerr = [pred - iv[:, 0], iv[:, 1] - pred]
        ax.errorbar(loss, pred, yerr=yerr, ls="none", zorder=3 if who == "design" else 2,
                    label=f"{name}: mean |error| {m['mean_abs_rel_error']:.2%}", **style)
    lo, hi = loss.min(), loss.max()
    pad = 0.05 * (hi - lo or hi)
    ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", lw=1, label="prediction = measured")
    if "predicted" not in (r["target"].get("design") or {}):
        ax.text(0.5, 0.5, f"no fit on the chosen runs: {r['target']['design'].get('error', '')}",
                transform=ax.transAxes, ha="center", wrap=True, fontsize=8)
    ax.set_xlabel("target row's measured loss")
    ax.set_ylabel("predicted loss")
    ax.set_title("the target rows: measured against predicted", fontsize=9)
    ax.legend(fontsize=7)


def draw_replay(r: dict[str, Any], done: dict[str, np.ndarray], target: dict[str, np.ndarray],
                path: str) -> str:
    """The replay's figure (:func:`replay_figure`) as a PNG at ``path`` (atomic, marked)."""
    return write_png(replay_figure(r, done, target), path)
