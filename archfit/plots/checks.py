"""Figures of the checks on a fit: a backtest's predicted against actual loss, a validation's
measured against predicted loss by depth, and an objective's Pareto front."""

from __future__ import annotations

import math
import textwrap
from typing import Any, Sequence

import numpy as np

from archfit.errors import ArchfitError
from archfit.plots.base import FIGSIZE, finish_png, pyplot


def draw_pareto(choice: Any, path: str) -> str:
    """Predicted loss against GPU-hours (time/cost) or decode latency (latency) for every
    candidate shape of an objective (:class:`archfit.recommending.objectives.Choice`): the Pareto front,
    the pick and the loss-optimal shape marked, depth labelled."""
    plt = pyplot()
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
    return finish_png(fig, ax, path)


def draw_backtest(results: Sequence[dict[str, Any]], path: str) -> str:
    """Predicted against actual loss for every held-out run of one or more backtests
    (:func:`archfit.laws.inference.backtest.backtest`), each with its prediction interval; points on the
    diagonal were predicted exactly, bars that cross it covered the truth."""
    plt = pyplot()
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
    return finish_png(fig, ax, path)


def draw_validation(v: dict[str, Any], path: str) -> str:
    """Predicted and measured loss against depth for a validation
    (:meth:`archfit.recommending.validation.Validation.to_dict`): each seed's loss, the shape's mean, the
    fit's 95% prediction interval, the recommended shape marked, the verdict in the title."""
    plt = pyplot()
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
    return finish_png(fig, ax, path)
