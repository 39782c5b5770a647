"""The design's replay on a finished sweep (:func:`replay`: "how much of my last sweep did I
need?"), the intervals it scores with (:func:`calibrated_fit`: widened by what extrapolating in
cost needed), and the check that sets archfit's near-target share for an optimal-depth or N_opt
target (:func:`extrapolation_widen`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from archfit.designing.pool import (DesignError, Target, as_runs, check_pool, check_seed, columns,
                                 costs, not_among)
from archfit.designing.strategies import (ADAPTIVE, CRITERIA, MIN_DRAWS, STRATEGIES, Step, draws,
                                       near_share, paced, space_filling, table_share)
from archfit.errors import FitError, FitInputError

_PACED = ("variance", "d-optimal", "v-optimal")  # at most half of what is left per round


def fit_runs(frame: Any, law: str, bootstrap: int, seed: int, prior: Any = None,
             prior_widths: dict[str, float] | None = None, strict: bool = False,
             dedupe: bool = False) -> tuple[Any, str | None]:
    """A fit of the runs so far (with ``prior``: a Gaussian prior on the parameters it shares
    with the law, as ``archfit fit --prior``), or (None, why not). ``strict`` (the user's
    ``--results``): a table ``fit`` refuses is refused here too, not replaced by a first batch;
    only too few runs for the law falls back."""
    from archfit.laws.fitting import fit

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


def metrics(fit: Any, rows: dict[str, np.ndarray], level: float = 0.95) -> dict[str, Any]:
    """How a fit predicts the target rows: mean and max |relative error|, R² of loss, and the
    coverage of its ``level`` prediction intervals; with a ``true_loss`` column (a planted
    truth's noiseless loss) also the mean |relative error| against it. ``predicted`` holds
    each row's predicted loss and ``interval`` its prediction interval, in the rows' order."""
    pred, lo, hi = fit.band(rows, level)
    a = np.asarray(rows["loss"], float)
    rel = np.abs(pred / a - 1)
    ss = float(np.sum((a - a.mean()) ** 2))
    out = {"mean_abs_rel_error": float(rel.mean()), "max_abs_rel_error": float(rel.max()),
           "r2": float(1 - np.sum((pred - a) ** 2) / ss) if ss > 0 else None,
           "coverage": float(np.mean((lo <= a) & (a <= hi))),
           "predicted": [float(v) for v in pred],
           "interval": [[float(x), float(y)] for x, y in zip(lo, hi)]}
    if "true_loss" in rows:  # a planted truth: the law's own miss, without the rows' noise
        out["mean_abs_rel_error_vs_truth"] = float(np.mean(np.abs(pred / rows["true_loss"] - 1)))
    return out


def replay(done: Any, target_rows: Any, *, law: str, budget_frac: float,
           strategy: str = "archfit", seed: int = 0, batch: int = 5, bootstrap: int = 64,
           final_bootstrap: int = 60, all_rows: dict[str, Any] | None = None
           ) -> dict[str, Any]:
    """The sequential design on a finished sweep: start from a space-filling batch, fit, pick
    the next batch by ``strategy`` (``batch`` runs, or half the runs in hand when that is more,
    so the rounds grow geometrically), reveal their losses from ``done``, refit, until
    ``budget_frac`` of the pool's cost is spent; then fit the chosen runs and score them on
    ``target_rows`` beside the fit on every row (``all_rows``: its metrics, when already
    computed), both with intervals calibrated by :func:`calibrated_fit`. Returns the keys the
    CLI's --json prints; each chosen row carries its ``round`` (0 for the space-filling start),
    ``fallbacks`` the rounds that fell back to a space-filling pick and why, ``near_shares``
    archfit's near-target share round by round."""
    from archfit.laws import get_law

    lw = get_law(law)
    if strategy not in STRATEGIES:
        raise DesignError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    done, target_rows = as_runs(done, "the replay table"), as_runs(target_rows, "the target table")
    for name, frame in (("the replay table", done), ("the target table", target_rows)):
        if frame is None or "loss" not in frame.columns:
            raise DesignError(f"{name} has no loss column: a replay reveals the losses of runs "
                              "already trained (map one with --map loss=COLUMN)")
        check_pool(frame, lw, name)
    if not 0 < budget_frac <= 1:
        raise DesignError(f"--budget-frac must be in (0, 1], got {budget_frac}")
    check_seed(seed)
    notes = []
    outside = not_among(done, target_rows)
    if not outside.all():  # a target row in the pool would be scored in sample
        done = done.filter(outside)
        notes.append(f"{int((~outside).sum())} row(s) of the replay table are also target "
                     "rows: dropped from the pool, so the target is scored out of sample")
        if done.height == 0:
            raise DesignError("every row of the replay table is a target row: give the runs "
                              "to replay and the target runs as two tables")
    cost, unit = costs(done)
    budget = budget_frac * float(cost.sum())
    if budget < float(cost.min()):
        raise DesignError(f"{budget_frac:g} of the pool's cost ({budget:.4g}) is below its "
                          f"cheapest run ({float(cost.min()):.4g}); raise --budget-frac")
    trows = columns(target_rows)
    step = Step(lw, None, columns(done), cost, np.ones(done.height, bool),
                Target("table", rows=trows), np.random.default_rng(seed))
    chosen = space_filling(step, max(lw.min_points, 2 * len(lw.param_names)), budget)
    step.open[chosen] = False
    round_of = [0] * len(chosen)  # 0: the space-filling start
    fallbacks: list[dict[str, Any]] = []  # rounds that fell back to a space-filling pick
    shares: list[float] = []  # archfit's near-target share, round by round
    while True:
        left = budget - float(cost[chosen].sum())
        if not (step.open & (cost <= left * (1 + 1e-12))).any():
            break
        why = _refit(step, done[sorted(chosen)], law, strategy, bootstrap,
                     seed + round_of[-1], shares)
        k = max(batch, len(chosen) // 2)  # batches grow with the runs in hand: ~log rounds
        pace = round_budget(strategy, step.open, cost, left)
        picks = (space_filling(step, k, pace) if step.fit is None and strategy in ADAPTIVE
                 else STRATEGIES[strategy](step, k, pace))
        if not picks:
            break
        if why is not None:
            fallbacks.append({"round": round_of[-1] + 1, "why": why})
        chosen += picks
        step.open[picks] = False
        round_of += [round_of[-1] + 1] * len(picks)
    spent = float(cost[chosen].sum())
    return {"strategy": strategy, "law": law, "seed": seed, "budget_frac": budget_frac,
            "budget_frac_spent": spent / cost.sum(), "cost_unit": unit,
            "n_chosen": len(chosen), "rounds": round_of[-1], "fallbacks": fallbacks,
            "near_shares": shares, "notes": notes + step.notes,
            "chosen": [{**row, "round": k} for row, k in zip(done[chosen].to_dicts(), round_of)],
            "target": _score(done, chosen, trows, law, final_bootstrap, seed, all_rows)}


def round_budget(strategy: str, open_: np.ndarray, cost: np.ndarray, left: float) -> float:
    """What a round may spend of the ``left`` budget. variance, d- and v-optimal pace their
    spending: at most half of what is left (all of it once no open candidate costs half or
    less), so later rounds see what earlier ones taught; archfit spends its near-target share
    first and is not paced, its batch size alone spreads it over rounds."""
    return paced(open_, cost, left) if strategy in _PACED else left


def _refit(step: Step, sub: Any, law: str, strategy: str, bootstrap: int, seed: int,
           shares: list[float]) -> str | None:
    """Before a round: an adaptive strategy's fit of the runs so far (archfit's also its
    near-target share, appended to ``shares``). Returns why the round will fall back to a
    space-filling pick, or None."""
    if strategy not in ADAPTIVE:
        return None
    step.fit, why = fit_runs(sub, law, bootstrap if strategy in CRITERIA else 0, seed)
    step.data = columns(sub)
    if why is None and strategy in CRITERIA and len(draws(step.fit)) < MIN_DRAWS:
        why = f"the refit kept {len(draws(step.fit))} bootstrap draws, fewer than {MIN_DRAWS}"
    if strategy == "archfit":
        step.near_share, _ = archfit_share(step.target, sub, law, bootstrap, seed)
        shares.append(step.near_share)
    return why


def archfit_share(target: Target, runs: Any, law: str, bootstrap: int, seed: int
                  ) -> tuple[float, float | None]:
    """(archfit's near-target share, the widen factor it came from): a target table's fixed
    share (:func:`table_share`, no check made), otherwise :func:`near_share` of how far the law
    missed the costliest of ``runs`` (None where there are no runs or the check cannot be
    made)."""
    fixed = table_share(target)
    if fixed is not None:
        return fixed, None
    w = extrapolation_widen(runs, law, bootstrap, seed) if runs is not None and runs.height \
        else None
    return near_share(w), w


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


EXTRAPOLATION_SHARE = 0.2  # the costliest share of the runs held out to calibrate intervals


def extrapolation_widen(frame: Any, law: str, bootstrap: int, seed: int) -> float | None:
    """How far the law missed when it extrapolated in ``frame``'s runs (the widen factor of
    :func:`cost_check`), or None where the check could not be made."""
    held = cost_check(frame, law, bootstrap, seed)
    return held.get("widen") if held.get("ok") else None


def calibrated_fit(frame: Any, law: str, bootstrap: int, seed: int) -> Any:
    """A fit of ``frame`` whose prediction intervals are widened by what extrapolating in cost
    needed (:func:`cost_check`), recorded as the fit's ``diagnostics["heldout"]`` with
    ``split = "cost"``, which :meth:`Fit.band` reads. A design's target lies beyond its runs in
    cost, so this is the check that resembles the use; the fit's own held-out check holds out
    the largest sizes instead."""
    from archfit.laws.fitting import fit as fit_law

    f = fit_law(frame, law, bootstrap=bootstrap, seed=seed, heldout=False)
    f.diagnostics["heldout"] = cost_check(frame, law, bootstrap, seed)
    return f


def cost_check(frame: Any, law: str, bootstrap: int, seed: int) -> dict[str, Any]:
    """Refit ``frame`` without its costliest ``EXTRAPOLATION_SHARE`` of runs (at least 2),
    predict them, and report the split-conformal factor by which the 95% intervals must widen
    to cover them (``widen``, :func:`archfit.laws.numeric.conformal_factor`; never below 1),
    with the coverage and errors (``ok`` False, and why, where it cannot be made)."""
    from archfit.laws import get_law
    from archfit.laws.fitting import fit as fit_law
    from archfit.laws.numeric import band_report, conformal_factor

    try:
        c, _ = costs(frame)
    except DesignError as e:
        return {"ok": False, "split": "cost", "reason": str(e)}
    k = max(2, int(round(EXTRAPOLATION_SHARE * frame.height)))
    order = np.argsort(c, kind="stable")
    if frame.height - k < get_law(law).min_points:
        return {"ok": False, "split": "cost",
                "reason": f"{frame.height} runs: too few to hold the costliest out"}
    train, test = frame[np.sort(order[:-k])], frame[np.sort(order[-k:])]
    try:
        tf = fit_law(train, law, bootstrap=bootstrap, seed=seed, heldout=False)
        cols = columns(test)
        pred, lo, hi = tf.band(cols, 0.95)
    except (FitError, FitInputError) as e:
        return {"ok": False, "split": "cost", "reason": str(e)}
    return {"ok": True, "split": "cost", "n_train": train.height, "n_test": k, "level": 0.95,
            **band_report(pred, lo, hi, cols["loss"]),
            "widen": conformal_factor(pred, lo, hi, cols["loss"], 0.95)}


def split_most_expensive(frame: Any, share: float = 0.1) -> tuple[Any, Any]:
    """(pool, target): the most expensive ``share`` of a table's runs held out as the target
    (cost column, else C = 6 N D)."""
    c, _ = costs(frame)
    order = np.argsort(c)
    k = max(1, int(round(share * frame.height)))
    return frame[np.sort(order[:-k])], frame[np.sort(order[-k:])]


