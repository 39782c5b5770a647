"""Where an interval comes from. Every interval archfit prints or returns is one of:

``fitted``
    computed from your runs: bootstrap percentiles over resamples of the runs, or draws from a
    fit's Wald covariance (``method`` says which, and how many).
``published``
    the source's own interval, as the paper states it (``source`` cites it).
``assumed``
    archfit's reading where no interval is published (``why`` says what was read and how). An
    assumed range is never called a confidence interval.

An interval's record is a dict ``{"provenance", "method", "source", "why"}``
(:func:`record`); :func:`describe` is its words."""

from __future__ import annotations

from typing import Any

FITTED, PUBLISHED, ASSUMED = "fitted", "published", "assumed"
KINDS = (FITTED, PUBLISHED, ASSUMED)


def record(kind: str, method: str, source: str | None = None,
           why: str | None = None) -> dict[str, Any]:
    """An interval's provenance."""
    if kind not in KINDS:
        raise ValueError(f"provenance must be one of {', '.join(KINDS)}, got {kind!r}")
    out: dict[str, Any] = {"provenance": kind, "method": method}
    if source:
        out["source"] = source
    if why:
        out["why"] = why
    return out


def describe(p: dict[str, Any] | None, level: float = 0.95) -> str:
    """The interval's name in words: "95% CI, fitted: METHOD", "95% CI, published: SOURCE",
    or "assumed range (not a confidence interval): WHY"."""
    if not p:
        return "no interval"
    kind = p.get("provenance")
    if kind == ASSUMED:
        return f"assumed range, not a confidence interval: {p.get('why') or p.get('method')}"
    what = f"{level:.0%} CI, {kind}"
    if kind == PUBLISHED:
        return f"{what}: {p.get('method')}" + (f" ({p['source']})" if p.get("source") else "")
    return f"{what}: {p.get('method')}"
