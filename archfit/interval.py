"""One interval type: its ends, its level, and where it comes from.

Every interval archfit prints or returns is an :class:`Interval` of one of four kinds:

``fitted``
    computed from your runs: bootstrap percentiles over resamples of the runs, or draws from a
    fit's Wald covariance (``method`` says which, and how many).
``published``
    the source's own interval, as the paper states it (``source`` cites it).
``assumed``
    archfit's reading where no interval is published (``method`` says what was read and how).
    An assumed range has no level and is never called a confidence interval.
``given``
    a range you stated (an option, a spec), passed through as it is.

:meth:`Interval.text` is the one way an interval is printed and :meth:`Interval.to_json` its one
JSON shape: ``{"low", "high", "level", "kind", "what", "method", "source"}``. Where the ends are
computed in bulk (a fit's parameters, the rows of a prediction), the code that computes them
keeps plain numbers and makes an ``Interval`` where it hands them to a person or a script; the
kind and the method of such a group are a :func:`record`, ``{"provenance", "method",
"source"}``, and :func:`describe` is its words."""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any, Iterator, Mapping

from archfit.errors import IntervalError

FITTED, PUBLISHED, ASSUMED, GIVEN = "fitted", "published", "assumed", "given"
KINDS = (FITTED, PUBLISHED, ASSUMED, GIVEN)
WHATS = ("CI", "prediction interval")


@dataclass(frozen=True)
class Interval:
    """An interval and its provenance. ``what`` is ``CI`` (for a quantity) or ``prediction
    interval`` (for a new run's value); ``level`` is None for an assumed or given range."""

    low: float | None
    high: float | None
    kind: str
    method: str
    level: float | None = 0.95
    source: str | None = None
    what: str = "CI"

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise IntervalError(f"an interval's kind is one of {', '.join(KINDS)}, got "
                                f"{self.kind!r}")
        if self.what not in WHATS:
            raise IntervalError(f"an interval is a {' or a '.join(WHATS)}, got {self.what!r}")
        if not isinstance(self.method, str):
            raise IntervalError(f"an interval's method is text, got {self.method!r}")
        if any(x is not None and not (_number(x) and math.isfinite(x))
               for x in (self.low, self.high)):
            raise IntervalError(f"an interval's ends are finite numbers or unbounded (None), "
                                f"got [{self.low!r}, {self.high!r}]")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise IntervalError(f"an interval's low end {self.low:g} is above its high end "
                                f"{self.high:g}")
        if self.kind in (ASSUMED, GIVEN) and self.level is not None:
            raise IntervalError(f"an {self.kind} range has no confidence level")
        if self.kind in (FITTED, PUBLISHED) and not (
                _number(self.level) and 0 < self.level < 1):  # type: ignore[operator]
            raise IntervalError(f"a {self.kind} interval has a level in (0, 1), got "
                                f"{self.level!r}")

    def __iter__(self) -> Iterator[float | None]:
        """The ends, so ``low, high = interval`` reads as for a pair."""
        return iter((self.low, self.high))

    def __getitem__(self, i: int) -> float | None:
        return (self.low, self.high)[i]

    def finite_ends(self) -> tuple[float, float]:
        """(low, high) of an interval bounded on both sides; ValueError where it is not."""
        if self.low is None or self.high is None:
            raise ValueError(f"the interval {self.text()} is unbounded on one side")
        return self.low, self.high

    def ratio(self) -> float | None:
        """high / low for a bounded interval of positive ends (how many-fold it spans)."""
        if self.low is None or self.high is None or not self.low > 0:
            return None
        return self.high / self.low

    @classmethod
    def of(cls, ends: Any, prov: Mapping[str, Any] | None, level: float | None = 0.95,
           what: str = "CI") -> Interval | None:
        """The interval with ``ends`` (a pair, or None) and a :func:`record`'s provenance;
        None when there are no ends or no provenance."""
        if not ends or not prov:
            return None
        if not isinstance(prov, Mapping) or prov.get("provenance") not in KINDS:
            raise IntervalError(f"an interval's provenance is a record with 'provenance' one "
                                f"of {', '.join(KINDS)} (interval.record makes one), got "
                                f"{prov!r}"[:200])
        kind = prov["provenance"]
        try:
            lo, hi = (None if x is None else float(x) for x in ends)
        except (TypeError, ValueError, OverflowError):
            raise IntervalError(f"an interval's ends are two numbers (or None for unbounded), "
                                f"got {ends!r}"[:200]) from None
        return cls(lo, hi, kind, str(prov.get("method") or ""),
                   level if kind in (FITTED, PUBLISHED) else None, prov.get("source"), what)

    def short(self) -> str:
        """The kind in a few words: '95% CI, fitted', '90% prediction interval, fitted',
        'assumed range', 'given range'."""
        if self.level is None:
            return f"{self.kind} range"
        return f"{self.level:.0%} {self.what}, {self.kind}"

    def name(self) -> str:
        """The kind with its method and source: '95% CI, fitted: percentiles over ...'."""
        return describe({"provenance": self.kind, "method": self.method, "source": self.source},
                        self.level or 0.95, self.what)

    def text(self, spec: str = ".3g", named: bool = True) -> str:
        """'[low, high] (95% CI, fitted)', the ends in the format ``spec``; ``named=False``
        leaves the kind to a line nearby that prints :meth:`name`."""
        ends = "[" + ", ".join("unbounded" if x is None else format(x, spec)
                               for x in (self.low, self.high)) + "]"
        return f"{ends} ({self.short()})" if named else ends

    def to_json(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "level": self.level, "kind": self.kind,
                "what": self.what, "method": self.method, "source": self.source}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Interval:
        """The interval of :meth:`to_json`'s shape; :class:`IntervalError` names what is
        missing or wrong."""
        if not isinstance(d, Mapping) or "kind" not in d:
            raise IntervalError(f"an interval's JSON has its ends and a kind ({', '.join(KINDS)})"
                                f", got {d!r}")
        return cls(d.get("low"), d.get("high"), d["kind"], d.get("method") or "",
                   d.get("level"), d.get("source"), d.get("what") or "CI")


def _number(x: Any) -> bool:
    """A real number (numpy's scalars too), not a bool or a string."""
    return isinstance(x, Real) and not isinstance(x, bool)


def banded_rows(rows: list[dict[str, Any]], level: float, prov: Mapping[str, Any]
                ) -> list[dict[str, Any]]:
    """Rows with ``low`` and ``high`` columns (a prediction table) as rows with one
    ``interval`` each: a ``level`` prediction interval of the kind ``prov`` records."""
    out = []
    for r in rows:
        r = dict(r)
        ends = (r.pop("low", None), r.pop("high", None))
        r["interval"] = Interval.of(ends, prov, level, "prediction interval") \
            if None not in ends else None
        out.append(r)
    return out


def banded_json(low: Any, high: Any, level: float, prov: Mapping[str, Any]) -> list[str]:
    """The JSON text of each row's ``level`` prediction interval with ends ``low[i]``,
    ``high[i]`` (arrays), as :func:`banded_rows` writes one, without building an
    :class:`Interval` a row: the kind is checked once and the ends all at once, so a million
    rows take seconds. :class:`IntervalError` where an end is not finite or low > high."""
    import json

    import numpy as np

    lo, hi = np.asarray(low, float), np.asarray(high, float)
    if lo.size == 0:
        return []
    bad = ~(np.isfinite(lo) & np.isfinite(hi)) | (lo > hi)
    if bad.any():  # the row's own error, as building its Interval raises it
        i = int(np.argmax(bad))
        Interval.of((float(lo[i]), float(hi[i])), prov, level, "prediction interval")
    first = Interval.of((float(lo[0]), float(hi[0])), prov, level, "prediction interval")
    assert first is not None
    rest = first.to_json()
    del rest["low"], rest["high"]
    tail = ", " + json.dumps(rest, allow_nan=False)[1:]
    return [f'{{"low": {a!r}, "high": {b!r}{tail}' for a, b in zip(lo.tolist(), hi.tolist())]


def to_json(iv: Interval | None) -> dict[str, Any] | None:
    """An interval's JSON, None for none."""
    return None if iv is None else iv.to_json()


def record(kind: str, method: str, source: str | None = None,
           why: str | None = None) -> dict[str, Any]:
    """The provenance shared by a group of intervals (a fit's, a set's ends)."""
    if kind not in KINDS:
        raise IntervalError(f"provenance must be one of {', '.join(KINDS)}, got {kind!r}")
    out: dict[str, Any] = {"provenance": kind, "method": why or method}
    if source:
        out["source"] = source
    return out


def describe(p: Mapping[str, Any] | None, level: float = 0.95, what: str = "CI") -> str:
    """A provenance in words: "95% CI, fitted: METHOD", "95% CI, published: METHOD (SOURCE)",
    "assumed range, not a confidence interval: METHOD", "given range: METHOD"."""
    if not p:
        return "no interval"
    kind, method = p.get("provenance"), p.get("method")
    if kind == ASSUMED:
        return f"assumed range, not a confidence interval: {method}"
    if kind == GIVEN:
        return f"given range: {method}"
    words = f"{level:.0%} {what}, {kind}: {method}"
    return words + (f" ({p['source']})" if kind == PUBLISHED and p.get("source") else "")
