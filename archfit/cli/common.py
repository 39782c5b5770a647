"""Shared pieces of the CLI: number options, JSON output, tables."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Iterable, Sequence

import click

from archfit.errors import ArchfitError
from archfit.numbers import parse_list, parse_number


class NumberType(click.ParamType):
    """Accepts 1e12, 50e6, 50M, 1.3B, 1T."""

    name = "NUMBER"

    def __init__(self, integer: bool = False, positive: bool = True):
        self.integer = integer
        self.positive = positive

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            v = float(value)
        else:
            try:
                v = parse_number(value)
            except ArchfitError as e:
                self.fail(str(e).removeprefix("number: "), param, ctx)
        if self.positive and not v > 0:
            self.fail(f"{value!r} must be greater than zero", param, ctx)
        if self.integer:
            if v != int(v):
                self.fail(f"{value!r} must be a whole number", param, ctx)
            return int(v)
        return v


class NumberListType(click.ParamType):
    """A comma-separated list of numbers: 1,2,4,8 or 25M,50M."""

    name = "LIST"

    def __init__(self, integer: bool = False):
        self.integer = integer

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, list):
            return value
        try:
            items = parse_list(value, integer=self.integer)
        except ArchfitError as e:
            self.fail(str(e).replace("list: ", ""), param, ctx)
        if any(not x > 0 for x in items):
            self.fail(f"{value!r}: every value must be greater than zero", param, ctx)
        return items


NUMBER = NumberType()
INT = NumberType(integer=True)
COUNT = NumberType(integer=True, positive=False)
INT_LIST = NumberListType(integer=True)
NUMBER_LIST = NumberListType()


def jsonable(obj: Any) -> Any:
    """Make ``obj`` JSON-safe: NaN/inf become null, numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if hasattr(obj, "item") and callable(obj.item) and not isinstance(obj, (str, bytes)):
        try:
            return jsonable(obj.item())
        except (TypeError, ValueError):
            pass
    if hasattr(obj, "tolist"):
        return jsonable(obj.tolist())
    return obj


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(jsonable(obj), indent=2, allow_nan=False))


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:.4g}"
    return str(v)


def print_table(rows: Sequence[dict[str, Any]], columns: Iterable[tuple[str, str]],
                title: str | None = None, caption: str | None = None) -> None:
    """Print rows as a table (rich on a terminal, aligned plain text otherwise)."""
    cols = list(columns)
    cells = [[fmt(r.get(key)) for key, _ in cols] for r in rows]
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title, caption=caption)
        for _, header in cols:
            t.add_column(header, justify="right")
        for row in cells:
            t.add_row(*row)
        Console().print(t)
        return
    headers = [h for _, h in cols]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    if title:
        click.echo(title)
    click.echo("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    for r in cells:
        click.echo("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    if caption:
        click.echo(caption)
