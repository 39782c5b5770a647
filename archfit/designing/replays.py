"""The design's replay on a finished sweep (:func:`replay`: "how much of my last sweep did I
need?"), scored with intervals widened by what extrapolating in cost needed
(:func:`archfit.laws.inference.backtest.calibrated_fit`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from archfit.designing.pool import (DesignError, Target, as_runs, check_budget, check_pool,
                                   costs, not_among)
from archfit.designing.strategies import (ADAPTIVE, CRITERIA, DEFAULT_STRATEGY, MIN_DRAWS,
                                          STRATEGIES, strategy_name,
                                          check_request, draws, spread)
from archfit.designing.step import Step
from archfit.errors import FitError, FitInputError
from archfit.laws.inference.backtest import calibrated_fit, metrics
from archfit.laws.columns import columns
from archfit.sweep.store import without_duplicates

_PACED = ("variance", "d-optimal", "v-optimal")  # at most half of what is left per round


def fit_runs(frame: Any, law: str, bootstrap: int, seed: int, prior: Any = None,
             prior_widths: dict[str, float] | None = None, strict: bool = False,
             dedupe: bool = False) -> tuple[Any, str | None]:
    """(a fit of the runs so far, with ``prior`` as ``archfit fit --prior``, or None, why not).
    ``strict`` (the user's ``--results``): a table ``fit`` refuses is refused here too."""
    from archfit.laws.inference.selection import fit

    if frame is None or frame.height == 0:
        return None, "no runs yet"
    try:
        return fit(frame, law, bootstrap=bootstrap, seed=seed, heldout=False, prior=prior,
                   prior_widths=prior_widths, dedupe=dedupe), None
    except FitInputError as e:
        if strict:
            raise FitInputError(f"--results: {e}") from None
        return None, str(e)
    except FitError as e:
        return None, str(e)


def replay(done: Any, target_rows: Any, *, law: str, budget_frac: float,
           strategy: str = "near-target", seed: int = 0, batch: int = 5, bootstrap: int = 64,
           final_bootstrap: int = 60, all_rows: dict[str, Any] | None = None,
           dedupe: bool = False) -> dict[str, Any]:
    """The sequential design on a finished sweep: a spread first batch, then rounds of
    ``batch`` runs (or half the runs in hand, if more) picked by ``strategy``, their losses
    revealed from ``done``, until ``budget_frac`` of the pool's cost is spent; the chosen runs'
    fit scored on ``target_rows`` beside the fit on every row (``all_rows``, if computed).
    Returns what ``--json`` prints: each chosen row with its ``round``, ``fallbacks`` (rounds
    that fell back to a spread pick, and why) and ``tests`` (the default rule's fit tests).
    ``dedupe``: drop the replay table's exact duplicate rows (as ``fit --dedupe``); without it
    they are refused."""
    from archfit.laws import get_law

    lw = get_law(law)
    check_request(lw, strategy, batch, seed)
    strategy = strategy_name(strategy)
    done, target_rows = as_runs(done, "the replay table"), as_runs(target_rows, "the target table")
    for name, frame in (("the replay table", done), ("the target table", target_rows)):
        if frame is None or "loss" not in frame.columns:
            raise DesignError(f"{name} has no loss column: a replay reveals the losses of runs "
                              "already trained (map one with --map loss=COLUMN)")
        check_pool(frame, lw, name)
    notes = []
    unique, n_dup = without_duplicates(done)
    if n_dup and not dedupe:
        raise DesignError(f"{n_dup} of {done.height} rows of the replay table are exact "
                          "duplicates of other rows: each would be a candidate twice; pass "
                          "--dedupe to drop them")
    if n_dup:
        done = unique
        notes.append(f"dropped {n_dup} duplicate row(s) of the replay table (--dedupe)")
    outside = not_among(done, target_rows)
    if not outside.all():  # a target row in the pool would be scored in sample
        done = done.filter(outside)
        notes.append(f"{int((~outside).sum())} row(s) of the replay table are also target "
                     "rows: dropped from the pool, so the target is scored out of sample")
        if done.height == 0:
            raise DesignError("every row of the replay table is a target row: give the runs "
                              "to replay and the target runs as two tables")
    cost, unit = costs(done)
    budget = check_budget(None, budget_frac, cost, np.ones(done.height, bool), unit)
    trows = columns(target_rows)
    step = Step(lw, None, columns(done), cost, np.ones(done.height, bool),
                Target("table", rows=trows), np.random.default_rng(seed))
    chosen = spread(step, max(lw.min_points, 2 * len(lw.param_names)), budget)
    step.open[chosen] = False
    round_of = [0] * len(chosen)  # 0: the spread start
    fallbacks: list[dict[str, Any]] = []  # rounds that fell back to a spread pick
    tests: list[dict[str, Any]] = []  # the default rule's test, round by round
    while True:
        left = budget - float(cost[chosen].sum())
        if not (step.open & (cost <= left * (1 + 1e-12))).any():
            break
        why = _refit(step, done[sorted(chosen)], law, strategy, bootstrap, seed + round_of[-1])
        k = max(batch, len(chosen) // 2)  # batches grow with the runs in hand: ~log rounds
        pace = round_budget(strategy, step.open, cost, left)
        step.test = None
        picks = STRATEGIES[strategy](step, k, pace)  # without a fit, each spreads
        if not picks:
            break
        if step.test is not None:
            tests.append({"round": round_of[-1] + 1, **step.test})
        if why is not None and strategy != DEFAULT_STRATEGY:  # its picks need no fit
            fallbacks.append({"round": round_of[-1] + 1, "why": why})
        chosen += picks
        step.open[picks] = False
        round_of += [round_of[-1] + 1] * len(picks)
    spent = float(cost[chosen].sum())
    return {"strategy": strategy, "law": law, "seed": seed, "budget_frac": budget_frac,
            "budget_frac_spent": spent / cost.sum(), "cost_unit": unit,
            "n_chosen": len(chosen), "rounds": round_of[-1], "fallbacks": fallbacks,
            "tests": tests, "notes": notes + step.notes,
            "chosen": [{**row, "round": k} for row, k in zip(done[chosen].to_dicts(), round_of)],
            "target": _score(done, chosen, trows, law, final_bootstrap, seed, all_rows)}


def round_budget(strategy: str, open_: np.ndarray, cost: np.ndarray, left: float) -> float:
    """What a round may spend of the ``left`` budget: for variance, d- and v-optimal half of it
    while an open candidate costs that little, so later rounds see what earlier ones taught."""
    if strategy in _PACED and bool((open_ & (cost <= left / 2)).any()):
        return left / 2
    return left


def _refit(step: Step, sub: Any, law: str, strategy: str, bootstrap: int, seed: int
           ) -> str | None:
    """Before a round: an adaptive strategy's fit of the runs so far. Returns why the round
    will fall back to a spread pick, or None."""
    if strategy not in ADAPTIVE:
        return None
    step.fit, why = fit_runs(sub, law, bootstrap if strategy in CRITERIA else 0, seed)
    step.data = columns(sub)
    if why is None and strategy in CRITERIA and len(draws(step.fit)) < MIN_DRAWS:
        why = f"the refit kept {len(draws(step.fit))} bootstrap draws, fewer than {MIN_DRAWS}"
    return why


def _score(done: Any, chosen: list[int], trows: dict[str, np.ndarray], law: str,
           bootstrap: int, seed: int, all_rows: dict[str, Any] | None) -> dict[str, Any]:
    """The target's metrics for the fit on the chosen runs and the fit on every row (each
    ``{"error": why}`` where it cannot be fitted)."""
    out: dict[str, Any] = {}
    for who, frame in (("design", done[sorted(chosen)]), ("all_rows", done)):
        if who == "all_rows" and all_rows is not None:
            out[who] = all_rows
            continue
        try:
            out[who] = metrics(calibrated_fit(frame, law, bootstrap, seed), trows)
        except (FitError, FitInputError) as e:
            out[who] = {"error": str(e)}
    return out
