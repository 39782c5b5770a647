"""A campaign's ledger (``DIR/ledger.json``): every round with its state, its chosen runs, its
spend and its fit, the budget and the spend so far, why it stopped, and every change of spec
that continued it. Written atomically after every step, so a campaign killed at any moment
resumes from it; read back with every field checked, so a damaged ledger is one line.

The folder's files archfit owns are the ledger, the round and validation folders, the lock and
temporary files (:func:`owned`); ``--restart`` removes those and nothing else."""

from __future__ import annotations

import enum
import json
import math
import os
import shutil
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any

from archfit.campaign.spec import CampaignError
from archfit.io import TMP_MARK, atomic_path, jsonable

LEDGER = "ledger.json"
LOCK = ".lock"
SCHEMA = "archfit.campaign/1"


class RoundState(str, enum.Enum):
    """Where a round is: its runs chosen and its spend counted (``designed``), its runs trained
    and collected (``trained``), the law refitted on every run so far (``fitted``)."""

    DESIGNED = "designed"
    TRAINED = "trained"
    FITTED = "fitted"


@dataclass
class Round:
    """One round: its runs (``chosen``, as the design chose them, and ``runs``, run id ->
    state), its ``spend``, the target's 95% CI before and as predicted after, the design's notes,
    and after the fit the ``verdict``, the target's CI and point, the recommendation (or why
    the runs could not be fitted)."""

    round: int
    state: RoundState
    dir: str
    chosen: list[dict[str, Any]]
    spend: float
    ci_before: list[float] | None = None
    ci_predicted: list[float] | None = None
    notes: list[str] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)
    verdict: str | None = None
    target_ci: list[float] | None = None
    point: float | None = None
    recommendation: dict[str, Any] | None = None
    fit_error: str | None = None


@dataclass
class Change:
    """A change of spec that continued the campaign: before which round, what changed, when."""

    round: int
    changes: list[str]
    at: str


@dataclass
class Ledger:
    """The campaign's record. ``spec`` is the spec as last run (the raw TOML)."""

    name: str
    spec: dict[str, Any]
    rounds: list[Round] = field(default_factory=list)
    budget: float | None = None
    spent: float = 0.0
    unit: str | None = None
    stopped_because: str | None = None
    validation: dict[str, Any] | None = None
    changes: list[Change] = field(default_factory=list)
    schema: str = SCHEMA

    def last_fitted(self) -> Round | None:
        return next((r for r in reversed(self.rounds) if r.state is RoundState.FITTED), None)

    def record_change(self, what: list[str]) -> None:
        self.changes.append(Change(round=len(self.rounds), changes=what,
                                   at=datetime.now(timezone.utc).isoformat(timespec="seconds")))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for r in d["rounds"]:
            r["state"] = r["state"].value
        return jsonable(d)

    @classmethod
    def from_dict(cls, d: Any, where: str) -> Ledger:
        """A ledger from its JSON, every field checked (:class:`CampaignError` names the first
        that is wrong)."""
        schema = d.get("schema") if isinstance(d, dict) else None
        if isinstance(schema, str) and schema.startswith("archfit.campaign/") and \
                schema != SCHEMA:
            raise CampaignError(f"{where}: a campaign ledger of schema {schema}, and this archfit "
                                f"reads {SCHEMA}: written by another archfit version; run it "
                                "with the archfit that wrote it (upgrade, if that is newer)")
        if schema != SCHEMA:
            raise CampaignError(f"{where}: not an archfit campaign ledger (no schema {SCHEMA}); "
                                "restore it from a copy, or pass --restart to start over")
        try:
            name, spec = _typed(d, "name", str), _typed(d, "spec", dict)
            rounds = [_round(r, i) for i, r in enumerate(_typed(d, "rounds", list))]
            changes = [Change(**{f.name: c[f.name] for f in fields(Change)})
                       for c in _typed(d, "changes", list, [])]
            led = cls(name=name, spec=spec,
                      rounds=rounds, budget=_number(d.get("budget"), "budget", none=True),
                      spent=_number(d.get("spent", 0.0), "spent"),
                      unit=_typed(d, "unit", str, None),
                      stopped_because=_typed(d, "stopped_because", str, None),
                      validation=_typed(d, "validation", dict, None), changes=changes)
        except (KeyError, TypeError, ValueError) as e:
            raise CampaignError(f"{where}: a damaged campaign ledger ({_why(e)}); restore it, or "
                                "pass --restart to start over") from None
        return led


def _why(e: Exception) -> str:
    return f"missing {e}" if isinstance(e, KeyError) else str(e)


def _typed(d: dict[str, Any], key: str, kind: type, default: Any = ...) -> Any:
    if key not in d or d[key] is None:
        if default is ...:
            raise KeyError(key)
        return default
    if not isinstance(d[key], kind):
        raise TypeError(f"{key} is {type(d[key]).__name__}, not {kind.__name__}")
    return d[key]


def _number(v: Any, what: str, none: bool = False) -> Any:
    """A spend or a budget: a finite number, 0 or more."""
    if v is None and none:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{what} is {v!r}, not a number")
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"{what} is {v!r}, not a finite number of 0 or more")
    return float(v)


def _round(r: Any, i: int) -> Round:
    if not isinstance(r, dict):
        raise TypeError(f"round {i} is not a table")
    known = {f.name for f in fields(Round)}
    kw = {k: v for k, v in r.items() if k in known}
    try:
        kw["state"] = RoundState(r["state"])
    except ValueError:
        raise ValueError(f"round {i} has state {r['state']!r}, not one of "
                         f"{', '.join(s.value for s in RoundState)}") from None
    kw["spend"] = _number(r["spend"], f"round {i}'s spend")
    for k, kind in (("chosen", list), ("runs", dict), ("dir", str), ("round", int)):
        _typed(r, k, kind)
    return Round(**kw)


def read(out: str) -> Ledger | None:
    """The ledger in ``out``, or None where there is none."""
    path = os.path.join(out, LEDGER)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise CampaignError(f"{path}: not a readable campaign ledger ({e}); restore it, or pass "
                            "--restart to start over") from None
    return Ledger.from_dict(d, path)


def write(out: str, led: Ledger) -> None:
    """Atomically: the old ledger or the new one, never half of either."""
    with atomic_path(os.path.join(out, LEDGER)) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(led.to_dict(), f, indent=1, sort_keys=True)


def is_owned(name: str) -> bool:
    """Whether a name in a campaign folder is archfit's: the ledger, a round or the validation
    folder, the lock, or a temporary file left by a killed write."""
    return (name in (LEDGER, LOCK, "validation") or name.startswith(TMP_MARK)
            or (name.startswith("round-") and name[6:].isdigit()))


def owned(out: str) -> list[str]:
    """The names in ``out`` that archfit wrote there."""
    return sorted(n for n in os.listdir(out) if is_owned(n))


def foreign(out: str) -> list[str]:
    """The names in ``out`` that archfit did not write."""
    return sorted(n for n in os.listdir(out) if not is_owned(n))


# what archfit writes inside a round's folder and the validation folder (runs/ is the sweep's)
ROUND_FILES = frozenset({"spec.toml", "design.png", "runs", "runs.parquet",
                         "runs.curves.parquet", "fit.json"})
VALIDATION_FILES = frozenset({"validate.toml", "runs", "validate.parquet",
                              "validate.curves.parquet", "validation.png"})


def strays(out: str) -> list[str]:
    """Files a user put inside archfit's folders of ``out`` (a round's or the validation
    folder's top level): what removing those folders would take with them."""
    found = []
    for n in owned(out):
        p = os.path.join(out, n)
        if not os.path.isdir(p) or os.path.islink(p):
            continue
        known = VALIDATION_FILES if n == "validation" else ROUND_FILES
        found += [os.path.join(n, m) for m in sorted(os.listdir(p))
                  if m not in known and TMP_MARK not in m]
    return found


def clear(out: str) -> None:
    """Remove what archfit wrote in ``out`` (not the lock, which the caller holds). Refused,
    with nothing removed, where a user's file sits inside one of archfit's folders."""
    stray = strays(out)
    if stray:
        shown = ", ".join(stray[:3]) + (f" and {len(stray) - 3} more" if len(stray) > 3 else "")
        raise CampaignError(f"--restart would remove files archfit did not write: {shown} (in "
                            f"{out}); move them out of the campaign folder, then restart")
    for n in owned(out):
        if n == LOCK:
            continue
        p = os.path.join(out, n)
        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)


def files(out: str) -> list[str]:
    """Every file archfit wrote in ``out`` (what a report reads: none may be overwritten)."""
    found = []
    for n in owned(out):
        p = os.path.join(out, n)
        if os.path.isdir(p):
            found += [os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs]
        else:
            found.append(p)
    return found
