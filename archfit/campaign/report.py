"""``archfit campaign report``: one self-contained HTML page (figures inlined as PNG data) of a
campaign's folder: the target's 95% CI against the spend, round by round; each round's design
figure; the final recommendation with its near-optimal set and verdict; the validation figure,
if any; and the ledger as a table."""

from __future__ import annotations

import base64
import html
import io
import os
from typing import Any

from archfit.campaign.ledger import Ledger
from archfit.campaign.spec import CampaignError
from archfit.plots.base import pyplot

MARK = '<meta name="generator" content="archfit campaign report">'


def is_report(path: str) -> bool:
    """A page this module wrote (what -o may replace without --force)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return MARK in f.read(2048)
    except OSError:
        return False


def ci_figure(led: Ledger) -> Any:
    """The target's 95% CI (bars) and point against the cumulative spend, one per round."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    spent, xs = 0.0, []
    for r in led.rounds:
        spent += r.spend
        ci = r.target_ci
        if not ci:
            continue
        xs.append(spent)
        mid = r.point or (ci[0] * ci[1]) ** 0.5
        ax.errorbar([spent], [mid], yerr=[[mid - ci[0]], [ci[1] - mid]], fmt="o", capsize=4,
                    color="C0")
        ax.annotate(f"round {r.round}: {r.verdict}", (spent, ci[1]), fontsize=8,
                    xytext=(3, 3), textcoords="offset points")
    if led.budget is not None:
        ax.axvline(led.budget, color="grey", ls="--", lw=1, label="budget")
    ax.set_yscale("log")
    ax.set_xlabel(f"spent ({led.unit})")
    t = led.spec["target"]
    what = (f"optimal depth at N = {t['params']:.3g}" if "params" in t
            else f"N_opt at C = {t['compute']:.3g} FLOPs")
    ax.set_ylabel(f"{what}: 95% CI, fitted (each round's bootstrap)")
    ax.set_title(f"campaign {led.name}: the target's interval against the spend", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _img(data: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _file_img(path: str, alt: str) -> str:
    with open(path, "rb") as f:
        return _img(base64.b64encode(f.read()).decode(), alt)


def write_report(out: str, path: str, *, force: bool = False) -> str:
    """Write the report of the campaign in ``out`` to ``path`` (atomically); returns ``path``.
    ``path`` is never a file of the campaign (its ledger, rounds or validation), even with
    ``force``; another file archfit did not write is replaced only with ``force``."""
    from archfit.campaign.ledger import files
    from archfit.campaign.status import status, summary
    from archfit.io import atomic_write, check_output

    st = status(out)
    check_output(path, "campaign report", inputs=files(out), ours=is_report, force=force)
    if not str(path).lower().endswith((".html", ".htm")):
        raise CampaignError(f"-o {path}: the report is one HTML page; name it FILE.html "
                            "('archfit campaign status DIR --json' gives the campaign as JSON)")
    led = st.ledger
    parts = [f"<!doctype html><html><head><meta charset='utf-8'>{MARK}",
             f"<title>archfit campaign {html.escape(led.name)}</title>",
             "<style>body{font-family:sans-serif;max-width:980px;margin:2em auto}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;"
             "font-size:12px}img{max-width:100%}pre{background:#f6f6f6;padding:8px}</style>",
             f"</head><body><h1>Campaign {html.escape(led.name)}</h1>",
             f"<pre>{html.escape(summary(st))}</pre>",
             "<h2>The target's 95% CI against the spend</h2>",
             _img(_png(ci_figure(led)), "the target's 95% CI against the spend")]
    last = next((r for r in reversed(led.rounds) if r.recommendation), None)
    if last and last.recommendation:
        rec = last.recommendation
        near = rec.get("near_optimal") or {}
        parts += ["<h2>The recommendation</h2>",
                  f"<p>Round {last.round}: n_layer <b>{rec['n_layer']}</b>, d_model "
                  f"<b>{rec['d_model']}</b>, d_ff {rec['d_ff']}, "
                  f"{rec['params_non_embedding']:,} non-embedding parameters; verdict "
                  f"<b>{html.escape(str(rec['trust']['verdict']))}</b>.</p>"]
        if near.get("n_layer"):
            lo, hi = near["n_layer"]
            top = "no upper end" if hi is None else f"{hi:.3g}"
            parts.append(f"<p>Near-optimal set: any depth from {lo:.3g} to {top} within "
                         f"{near['tolerance']:.1%} of the optimum's predicted loss "
                         f"({html.escape(near.get('basis', ''))}).</p>")
        parts.append("<ul>" + "".join(f"<li>{html.escape(x)}</li>"
                                      for x in rec["trust"].get("reasons", [])) + "</ul>")
    parts.append("<h2>Each round's design</h2>")
    for r in led.rounds:
        fig = os.path.join(out, r.dir, "design.png")
        if os.path.exists(fig):
            parts += [f"<h3>Round {r.round}</h3>",
                      _file_img(fig, f"round {r.round}: the runs the design chose")]
    val = os.path.join(out, "validation", "validation.png")
    if os.path.exists(val):
        v = led.validation or {}
        parts += ["<h2>Validation</h2>", f"<p>{html.escape(str(v.get('verdict', '')))}: "
                  f"{html.escape(str(v.get('reason', '')))}</p>", _file_img(val, "validation")]
    parts += ["<h2>The ledger</h2>", st.runs.to_pandas().to_html(index=False),
              st.rounds.to_pandas().to_html(index=False), "</body></html>"]
    atomic_write(path, "\n".join(parts))
    return path
