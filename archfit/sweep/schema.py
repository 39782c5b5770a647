"""A small declarative schema for TOML specs: each key's kind, allowed values and range. One
walk reports every problem at once, each as ``where.key: what is wrong``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from archfit.errors import ArchfitError
from archfit.numbers import parse_number


@dataclass(frozen=True)
class Key:
    """One key: ``kind`` is str, int, number (a float or a string like "50M"), bool, list or
    table; ``item`` the kind of a list's items; ``table`` a table's own schema (None: any)."""

    kind: str
    item: str | None = None
    choices: tuple[str, ...] = ()
    positive: bool = False
    nonempty: bool = False
    nonnegative: bool = False  # a seed: 0 or more (numpy's generators take no negative seed)
    table: dict[str, Key] | None = field(default=None, hash=False)


def _is(kind: str, v: Any) -> bool:
    if kind == "lr":  # a learning rate, or "auto" (the published recipe's, archfit.train.hyperparameters)
        return v == "auto" or _is("number", v)
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "number":
        if isinstance(v, str):
            try:
                parse_number(v)
                return True
            except ArchfitError:
                return False
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, {"str": str, "bool": bool, "list": list, "table": dict}[kind])


def number(v: Any) -> float:
    """A value that passed a ``number`` key, as a float."""
    return parse_number(v) if isinstance(v, str) else float(v)


_NAMES = {"int": "int", "number": "float", "str": "str", "bool": "bool", "list": "list",
          "table": "a table", "lr": 'a float or "auto"'}


def _check_value(key: Key, v: Any, where: str, problems: list[str]) -> None:
    if not _is(key.kind, v):
        problems.append(f"{where}: expected {_NAMES[key.kind]}, got {type(v).__name__} {v!r}")
        return
    if key.choices and v not in key.choices:
        problems.append(f"{where}: must be {', '.join(key.choices)}, got {v!r}")
    if key.positive and key.kind in ("int", "number", "lr") and v != "auto" and not number(v) > 0:
        problems.append(f"{where}: must be greater than zero, got {v!r}")
    if key.nonnegative and key.kind in ("int", "number") and not number(v) >= 0:
        problems.append(f"{where}: must be 0 or more (a seed), got {v!r}")
    if key.kind == "list":
        if key.nonempty and not v:
            problems.append(f"{where}: expected a non-empty list")
        if key.item:
            for i, x in enumerate(v):
                _check_value(Key(key.item, positive=key.positive, table=key.table,
                                 nonnegative=key.nonnegative), x, f"{where}[{i}]", problems)
    elif key.kind == "table" and key.table is not None:
        check(v, key.table, where, problems)


def check(d: Any, schema: dict[str, Key], where: str, problems: list[str]) -> None:
    """Append a line to ``problems`` for every unknown key or bad value in ``d``."""
    if not isinstance(d, dict):
        problems.append(f"{where}: expected a table, got {type(d).__name__}")
        return
    for k, v in d.items():
        if k not in schema:
            problems.append(f"{where}.{k}: unknown key (known: {', '.join(sorted(schema))})")
        else:
            _check_value(schema[k], v, f"{where}.{k}" if where != "spec" else k, problems)
