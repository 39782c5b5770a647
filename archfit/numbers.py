"""Human-friendly numbers (``1e12``, ``50e6``, ``50M``, ``1.3B``, ``1T``, ``2k``) and the few
plain-float helpers the cold paths (``archfit recommend``) need."""

from __future__ import annotations

import math
import re
from numbers import Integral, Real
from typing import Any, Sequence

from archfit.errors import NumberError

_SUFFIX = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_PATTERN = re.compile(r"^\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMbBgGtTpP]?)\s*$")
# a comma is a thousands separator only in groups of three after 1-3 leading digits
_THOUSANDS = re.compile(r"^\s*[+-]?[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?"
                        r"\s*[kKmMbBgGtTpP]?\s*$")


def shown(value: Any, width: int = 40) -> str:
    """``repr(value)`` for a message, cut to about ``width`` characters with its length said
    (a 401-digit number is not echoed whole)."""
    r = repr(value)
    return r if len(r) <= width else f"{r[:width - 10]}... ({len(r):,} characters)"


def parse_number(text: str | float | int, *, what: str = "number") -> float:
    """Parse ``text`` into a finite float.

    Accepts plain and scientific notation (``1e12``, ``50e6``) and the suffixes
    k/K (1e3), M (1e6), B/G (1e9), T (1e12), P (1e15), e.g. ``1.3B``.
    Underscores as digit separators are allowed (``1_000_000``), and commas as thousands
    separators in groups of three (``1,000,000``); any other comma (``7,5e9``, ``1,2``) is
    refused rather than guessed.
    """
    if isinstance(text, bool):
        raise NumberError(f"{what}: expected a number, got {shown(text)}")
    if isinstance(text, (int, float)):
        try:
            value = float(text)
        except OverflowError:  # an int past a float's range
            value = math.inf
    else:
        if "," in str(text) and not _THOUSANDS.match(str(text).replace("_", "")):
            raise NumberError(
                f"{what}: cannot read {shown(text)}: a comma separates thousands only in groups of "
                "three (1,000,000); write a decimal point (7.5e9), or one value")
        cleaned = str(text).replace("_", "").replace(",", "")
        m = _PATTERN.match(cleaned)
        if not m:
            raise NumberError(
                f"{what}: cannot read {shown(text)} as a number; write e.g. 1e12, 50e6, 50M, 1.3B or 1T"
            )
        if m.group(2) and re.search(r"[eE]", m.group(1)):
            raise NumberError(f"{what}: {shown(text)} mixes an exponent and a suffix; write one "
                              f"(e.g. {m.group(1)} or a plain number with {m.group(2)})")
        try:
            value = float(m.group(1)) * _SUFFIX[m.group(2).upper()]
        except OverflowError:
            value = math.inf
    if not math.isfinite(value):
        raise NumberError(f"{what}: {shown(text)} is not finite; give a finite number")
    return value


def plain(v: Any) -> Any:
    """A number as Python holds it: numpy's integer and float scalars (and any other
    :class:`numbers.Integral` or :class:`numbers.Real`) as ``int`` and ``float``, so they pass
    the checks and serialize as the Python numbers do; anything else as it is."""
    if isinstance(v, bool) or isinstance(v, (int, float)):
        return v
    if isinstance(v, Integral):
        return int(v)
    if isinstance(v, Real):
        return float(v)
    return v


# the largest model size archfit plans for (a quadrillion parameters): beyond it a target is a
# typo, and the shape searches that scale with it would not be bounded
MAX_PARAMS = 1e15


def check_params_domain(value: float, what: str = "--params") -> float:
    """``value`` if it is a size archfit plans for (0 < value <= :data:`MAX_PARAMS`)."""
    if not (value > 0 and math.isfinite(value)):
        raise NumberError(f"{what}: {value:g} is not a positive finite size")
    if value > MAX_PARAMS:
        raise NumberError(f"{what}: {value:.3g} parameters is beyond {MAX_PARAMS:.0e}, the "
                          "largest size archfit plans for; check the exponent")
    return value


def parse_int(text: str | float | int, *, what: str = "number") -> int:
    """Parse like :func:`parse_number` and require an integral value."""
    value = parse_number(text, what=what)
    if value != int(value):
        raise NumberError(f"{what}: {text!r} is not a whole number")
    return int(value)


def parse_list(text: str, *, what: str = "list", integer: bool = False) -> list[float] | list[int]:
    """Parse a comma-separated list such as ``1,2,4,8`` or ``25M,50M``."""
    parts = [p for p in str(text).replace(" ", "").split(",") if p]
    if not parts:
        raise NumberError(f"{what}: empty list; give comma-separated values such as 1,2,4")
    parse = parse_int if integer else parse_number
    return [parse(p, what=what) for p in parts]  # type: ignore[return-value]


def fmt_sci(x: float) -> str:
    """1e9 -> '1e9', 1.3e9 -> '1.3e9' (used in derived-quantity names)."""
    if x == 0 or not math.isfinite(x):
        return str(x)
    e = int(math.floor(math.log10(abs(x))))
    m = x / 10**e
    ms = f"{m:.3g}"
    if ms == "10":
        ms, e = "1", e + 1
    return f"{ms}e{e}"


# how many standard deviations of an order statistic's rank the Monte-Carlo band spans: 4 keeps
# a verdict that is settled at one seed settled at (nearly) every other
MC_BAND_Z = 4.0


# a percentile interval over fewer draws than this is noise: no interval
MIN_DRAWS = 10


def draw_percentiles(values: Any, percents: Any, axis: int | None = None,
                     skip_nan: bool = False) -> Any:
    """Percentiles (0-100) of draws (bootstrap or posterior samples): the one convention every
    interval over draws uses, numpy's default linear interpolation between order statistics
    (Hyndman & Fan 1996, type 7). ``skip_nan``: NaN draws are left out (per column with
    ``axis``)."""
    import numpy as np

    return (np.nanpercentile if skip_nan else np.percentile)(values, percents, axis=axis)


def draw_ends(values: Any, level: float = 0.95, min_count: int = MIN_DRAWS
              ) -> list[float] | None:
    """The equal-tailed ``level`` percentile interval [low, high] of the finite draws in
    ``values``; None with fewer than ``min_count`` of them."""
    import numpy as np

    v = np.asarray(values, float).ravel()
    v = v[np.isfinite(v)]
    if len(v) < min_count:
        return None
    # rounded: 50 (1 - 0.95) is 2.500000000000002 in floating point, not the 2.5th percentile
    lo, hi = draw_percentiles(v, [round(50 * (1 - level), 10), round(50 * (1 + level), 10)])
    return [float(lo), float(hi)]


def order_statistic(v: Sequence[float], q: float, z: float) -> float:
    """The value of sorted ``v`` at percentile ``q`` (0-100), its rank moved by ``z`` binomial
    standard deviations sqrt(n p (1 - p)) (how far another sample of the draws moves it;
    distribution-free), clipped to the sample."""
    n, p = len(v), q / 100.0
    r = (n - 1) * p + z * math.sqrt(n * p * (1 - p))
    return v[min(n - 1, max(0, int(round(r))))]


def quantile_band(values: Sequence[float], q_lo: float, q_hi: float
                  ) -> tuple[float, float] | None:
    """The Monte-Carlo range of the ratio percentile(q_hi) / percentile(q_lo) of positive
    ``values`` (parameter draws): each percentile's rank moves by about sqrt(n q (1 - q))
    between seeds (the binomial sd of an order statistic's rank, distribution-free), so the
    ratio lies between the inner and the outer order statistics ±MC_BAND_Z of those sds."""
    v = sorted(x for x in values if x > 0 and math.isfinite(x))
    if len(v) < MIN_DRAWS:
        return None
    z = MC_BAND_Z
    return (order_statistic(v, q_hi, -z) / order_statistic(v, q_lo, z),
            order_statistic(v, q_hi, z) / order_statistic(v, q_lo, -z))
