"""Where a campaign stands (:func:`status`), and its progress and summary as text."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from archfit.campaign import ledger as lg
from archfit.campaign.ledger import Ledger, Round
from archfit.campaign.spec import CampaignError
from archfit.interval import FITTED, Interval, record, to_json


@dataclass
class Status:
    """A campaign's ledger, with its rounds and runs as polars frames (``rounds``: one row per
    round, ``runs``: one per run with its round and state)."""

    ledger: Ledger
    rounds: Any
    runs: Any

    def to_dict(self) -> dict[str, Any]:
        """The totals, the last fit's verdict and CI, every round (its chosen runs as objects)
        and every run: what ``campaign status --json`` prints."""
        led = self.ledger
        last = led.last_fitted()
        rounds = [{"round": r.round, "state": r.state.value, "runs": len(r.chosen),
                   "spend": r.spend, "verdict": r.verdict, "target_ci": to_json(target_ci(r)),
                   "notes": r.notes, "chosen": r.chosen} for r in led.rounds]
        return {"name": led.name, "budget": led.budget, "spent": led.spent, "unit": led.unit,
                "verdict": last.verdict if last else None,
                "target_ci": to_json(target_ci(last)) if last else None,
                "stopped_because": led.stopped_because, "rounds": rounds,
                "runs": self.runs.to_dicts(), "validation": led.validation,
                "changes": [{"round": c.round, "changes": c.changes, "at": c.at}
                            for c in led.changes]}


def status(out: str | os.PathLike[str]) -> Status:
    """The campaign in ``out``: its rounds (chosen runs, spend, verdict, target CI) and every
    run with its round and state, as frames."""
    import polars as pl

    if not isinstance(out, (str, os.PathLike)):
        raise CampaignError(f"a campaign folder is a path, not {type(out).__name__}")
    out = os.fspath(out)
    led = lg.read(out) if os.path.isdir(out) else None
    if led is None:
        raise CampaignError(f"{out}: no campaign ledger here (run 'archfit campaign run SPEC "
                            f"--out {out}' first)")
    rounds = pl.DataFrame([{"round": r.round, "state": r.state.value, "runs": len(r.chosen),
                            "spend": r.spend, "verdict": r.verdict,
                            "target_ci_low": (r.target_ci or [None, None])[0],
                            "target_ci_high": (r.target_ci or [None, None])[1]}
                           for r in led.rounds],
                          schema={"round": pl.Int64, "state": pl.String, "runs": pl.Int64,
                                  "spend": pl.Float64, "verdict": pl.String,
                                  "target_ci_low": pl.Float64, "target_ci_high": pl.Float64})
    runs = pl.DataFrame([{"run_id": rid, "round": r.round, "state": st}
                         for r in led.rounds for rid, st in r.runs.items()],
                        schema={"run_id": pl.String, "round": pl.Int64, "state": pl.String})
    return Status(led, rounds, runs)


def target_ci(r: Round) -> Interval | None:
    """A fitted round's interval on the target: percentiles over its fit's bootstrap draws."""
    return Interval.of(r.target_ci, record(FITTED, "percentiles over the bootstrap resamples "
                                                   f"of {r.dir}/fit.json"))


def _ci(ci: Any) -> str:
    return f"{ci.text()}, {ci[1] / ci[0]:.3g}x" if ci and ci[0] > 0 else "no interval"


def describe(e: dict[str, Any]) -> str:
    """One progress line for an event of :func:`archfit.campaign.run`."""
    k = e.get("round")
    if e["event"] == "designed":
        return (f"round {k}: designed {e['runs']} runs costing {e['spend']:.3g}; spent "
                f"{e['spent']:.3g} of {e['budget']:.3g} {e['unit']}")
    if e["event"] == "run":
        return f"round {k}: {e['done']}/{e['of']} runs done ({e['run']} {e['state']})"
    if e["event"] == "fitting":
        return f"round {k}: fitting every run so far"
    if e["event"] == "fitted":  # why the verdict is not better: the fit's error or reasons
        why = e.get("error") or "; ".join(e.get("reasons") or [])
        ci = Interval.from_json(e["target_ci"]) if e.get("target_ci") else None
        return (f"round {k}: fitted: verdict {e['verdict']}, target {_ci(ci)}"
                + (f" ({why})" if why else ""))
    if e["event"] == "stopped":
        return f"stopped: {e['because']}"
    return f"{e['event']}: round {k}"


def summary(st: Status) -> str:
    """The status as text: one line per round, the totals, the spec changes and why it
    stopped."""
    d = st.to_dict()
    lines = [f"campaign {d['name']}: spent {d['spent']:.4g} of {d['budget']:.4g} {d['unit']}",
             "  round  state     runs      spend  verdict         target"]
    for r in d["rounds"]:
        ci = Interval.from_json(r["target_ci"]) if r["target_ci"] else None
        lines.append(f"  {r['round']:>5}  {r['state']:<8} {r['runs']:>5}  {r['spend']:>9.3g}  "
                     f"{r['verdict'] or '-':<14}  {_ci(ci)}")
    for c in d["changes"]:
        lines.append(f"  continued before round {c['round']} ({c['at']}): "
                     + "; ".join(c["changes"]))
    lines.append(f"  stopped: {d['stopped_because']}" if d["stopped_because"] else
                 "  running (or interrupted: run it again to resume)")
    return "\n".join(lines)
