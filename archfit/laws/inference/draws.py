"""A fit's parameter draws as one object: :class:`Draws`, the draws behind every interval of a
fit (its bootstrap's resamples, or draws from its Wald covariance) and where they come from.
It is the one place that turns draws into an :class:`~archfit.interval.Interval`: one
percentile convention and one minimum count (:func:`archfit.numbers.draw_ends`), one refusal
(None, never a made-up interval) when too few draws give a finite value."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Callable, overload

from archfit.numbers import MIN_DRAWS, draw_ends


class Draws(Sequence[dict[str, float]]):
    """The parameter draws (each a dict of the law's parameters) and their provenance (an
    :mod:`archfit.interval` record, or None for a fit with no draws). A sequence of the draws,
    so ``for p in fit.draws()`` reads as before; :meth:`values` and :meth:`interval` are how a
    quantity computed from each draw becomes an interval."""

    def __init__(self, params: Sequence[dict[str, float]],
                 provenance: Mapping[str, Any] | None) -> None:
        self._params = list(params)
        self.provenance = dict(provenance) if provenance else None

    def __len__(self) -> int:
        return len(self._params)

    @overload
    def __getitem__(self, i: int) -> dict[str, float]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, float]]: ...

    def __getitem__(self, i: int | slice) -> Any:
        return self._params[i]

    def __iter__(self) -> Iterator[dict[str, float]]:
        return iter(self._params)

    def values(self, f: Callable[[dict[str, float]], Any], limit: int | None = None
               ) -> list[float]:
        """``f`` of each draw (the first ``limit``), keeping the finite numbers: a draw where
        the quantity does not exist (``f`` raises ValueError, OverflowError or ZeroDivisionError,
        or gives None or a non-finite value) is left out."""
        out: list[float] = []
        for p in self._params[:limit]:
            try:
                v = f(p)
            except (ValueError, OverflowError, ZeroDivisionError):
                continue
            if v is not None and math.isfinite(float(v)):
                out.append(float(v))
        return out

    def ends(self, values: Any, level: float = 0.95, min_count: int = MIN_DRAWS
             ) -> list[float] | None:
        """The central ``level`` interval of ``values`` (draws of one quantity), or None with
        fewer than ``min_count`` finite ones: the one convention."""
        return draw_ends(values, level, min_count)

    def interval(self, f: Callable[[dict[str, float]], Any] | Any, level: float = 0.95,
                 min_count: int = MIN_DRAWS, provenance: Mapping[str, Any] | None = None
                 ) -> Any:
        """The :class:`~archfit.interval.Interval` of a quantity over the draws: ``f`` of each
        draw (or the values already computed), with this fit's provenance (or
        ``provenance``); None where the draws give too few finite values."""
        from archfit.interval import Interval

        vals = self.values(f) if callable(f) else f
        ends = self.ends(vals, level, min_count)
        prov = provenance if provenance is not None else self.provenance
        return Interval.of(ends, prov, level) if ends is not None and prov else None
