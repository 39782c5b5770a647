"""``archfit design``: which runs to train next for an informative answer at least cost.

Given a law, the runs so far (or a prior fit), a pool of runnable candidates with costs and a
target beyond the data, :func:`design` picks the next batch by the rule of
:mod:`archfit.designing.strategies` (a first batch spread over the cheaper half of the pool,
then the candidates nearest the target), tests the law on the runs so far, and says what the
batch costs and, where the law passes the test, the interval it predicts at the target after
it. Run it again with the new results for the next batch, until a stop rule holds
(``until_ci``) or the budget is spent.

:func:`replay` runs that loop on a finished sweep, revealing each chosen run's loss from the
table, then fits the chosen runs and scores them on a target table against the fit on every
row: "how much of my last sweep did I need?" (the benchmarks: ``bench_design_real.py`` on public
sweeps, ``bench_design.py`` on planted truths).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archfit.designing.pool import (DesignError, Target, as_runs, check_budget, check_pool,
                                   costs, not_among, starting_fit)
from archfit.designing.replays import fit_runs, replay
from archfit.laws.inference.backtest import calibrated_fit, metrics, split_most_expensive
from archfit.laws.columns import columns
from archfit.designing.strategies import (CRITERIA, DEFAULT_STRATEGY, MIN_DRAWS, RULE,
                                          STRATEGIES, strategy_name,
                                          check_request, draws, predicted, spread)
from archfit.designing.step import Step
from archfit.errors import SpecError
from archfit.interval import Interval
from archfit.text import wrap
from archfit.sweep.plan import pool_from_grid, pool_from_sizes, pool_from_spec

__all__ = ["Design", "DesignError", "Target", "design", "replay", "calibrated_fit", "metrics",
           "pool_from_grid", "pool_from_sizes", "pool_from_spec", "columns",
           "split_most_expensive", "STRATEGIES"]

SHOWN = ("run_id", "params", "n_layer", "d_model", "d_ff", "tokens")


@dataclass
class Design:
    """The next batch: ``chosen`` rows of the pool in order (each with its ``cost`` and, where
    predicted, ``gain_per_cost`` and ``sd_after``), its cost, the fit test, and the target's
    interval now and predicted after the batch."""

    law: str
    strategy: str
    target: str
    chosen: list[dict[str, Any]]
    cost_unit: str
    budget: float
    spent: float
    ci_now: Interval | None = None  # the target's 95% CI, fitted over the fit's draws
    ci_after: Interval | None = None  # predicted after the batch (the Gaussian shortcut)
    criterion: str = RULE
    test: dict[str, Any] | None = None  # the lack-of-fit test and what the rule did (archfit)
    stop: str | None = None
    notes: list[str] = field(default_factory=list)
    # what the figure draws (archfit.plots.design): the pool's columns and which rows are
    # open, the runs so far, the Target and its point estimate; not part of to_dict()
    context: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        from archfit.io import jsonable

        return jsonable({k: getattr(self, k) for k in (
            "law", "strategy", "target", "criterion", "test", "cost_unit", "budget", "spent",
            "ci_now", "ci_after", "stop", "notes", "chosen")})

    def to_frame(self) -> Any:
        import polars as pl

        if not self.chosen:
            return pl.DataFrame()  # the strategy's name marks the table as a design's batch
        return pl.DataFrame(self.chosen).with_columns(pl.lit(self.strategy).alias("strategy"))

    def first_line(self) -> str:
        """One line: what to run first, its cost, and the interval predicted after the batch."""
        if not self.chosen:
            return f"archfit design: nothing to run ({self.stop or 'no affordable candidate'})"
        c = self.chosen[0]
        shape = (f"{int(c['n_layer'])} x {int(c['d_model']):,}, " if "n_layer" in c else "")
        after = (f"; the batch of {len(self.chosen)} predicts {self.ci_after.text()} (now "
                 f"{self.ci_now.text(named=False)}, {self.ci_now.name()})"
                 if self.ci_after and self.ci_now else "")
        t = self.test or {}
        why = (f"the law does not fit the runs so far (F test p = {t['p']:.2g}), so no interval "
               "after the batch is predicted; " if t.get("fits") is False else "")
        return (f"{why}to narrow this, 'archfit design' would run first {shape}N "
                f"{c['params']:.3g}, {c.get('tokens', float('nan')):.3g} tokens ({c['cost']:.3g} "
                f"{_unit(self)})" + after)

    def summary(self) -> str:
        lines = [f"archfit design: {self.law}, strategy {self.strategy}",
                 f"  target: {self.target}",
                 f"  criterion: {self.criterion if self.strategy == DEFAULT_STRATEGY else self.strategy}",
                 f"  cost: {self.cost_unit}; budget {self.budget:.4g}, this batch "
                 f"{self.spent:.4g}"]
        if self.ci_now:
            lines.append(f"  target now {self.ci_now.text('.4g', named=False)} "
                         f"({self.ci_now.name()})"
                         + (f", after the batch {self.ci_after.text('.4g', named=False)} "
                            f"({self.ci_after.name()})" if self.ci_after else ""))
        if self.stop:
            lines.append(f"  stop: {self.stop}")
        if self.chosen:
            keys = [k for k in SHOWN if k in self.chosen[0]] + ["cost", "gain_per_cost",
                                                                 "sd_after"]
            rows = [[str(i)] + [_cell(c.get(k)) for k in keys]
                    for i, c in enumerate(self.chosen, 1)]
            heads = ["#"] + keys
            widths = [max([len(h), *(len(r[j]) for r in rows)]) for j, h in enumerate(heads)]
            lines += ["", "  " + "  ".join(h.rjust(w) for h, w in zip(heads, widths))]
            lines += ["  " + "  ".join(x.rjust(w) for x, w in zip(r, widths)) for r in rows]
        lines += [f"  note: {n}" for n in self.notes]
        return wrap("\n".join(lines))

    def write(self, path: str, spec: Any = None) -> str:
        """The chosen runs as a sweep spec (``.toml``, for ``archfit sweep run``; with ``spec``
        the recipe of that sweep: data, model, train, executor) or a table (``.csv``,
        ``.parquet``). Atomic."""
        from archfit.io import atomic_path, atomic_write

        if path.endswith((".csv", ".parquet")):
            with atomic_path(path) as tmp:
                (self.to_frame().write_csv if path.endswith(".csv")
                 else self.to_frame().write_parquet)(tmp)
            return path
        import tomli_w

        from archfit.sweep.spec import spec_for_runs

        try:
            raw = spec_for_runs(self.chosen, spec, f"archfit design: {len(self.chosen)} runs "
                                                   f"toward {self.target}")
        except SpecError as e:
            raise DesignError(str(e)) from None
        atomic_write(path, tomli_w.dumps(raw))
        return path


def _unit(d: Design) -> str:
    return d.cost_unit.split(" (")[0]


def _cell(v: Any) -> str:
    return "-" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)


def _optimum(fit: Any, target: Target) -> tuple[float | None, Interval | None]:
    """(the fit's estimate of the target, its 95% CI), or (None, None) where there is none."""
    if fit is None or target.kind == "table":
        return None, None
    key = "n_layer" if target.kind == "params" else "N_opt"
    opt = fit.optimum(target.need_value())
    ci = Interval.of(opt.get(f"{key}_ci"), fit.interval_provenance())
    return (opt[key], ci) if ci else (None, None)


def _chosen(pool: Any, picks: list[int], cost: np.ndarray, trace: list[tuple[float, float]]
            ) -> list[dict[str, Any]]:
    """The picked rows of the pool, each with its cost (and, from the criterion's trace, its
    gain per cost and the target's sd after it as a share of today's)."""
    rows = pool.to_dicts()
    chosen = []
    for i, j in enumerate(picks):
        r = {k: v for k, v in rows[j].items() if v is not None}
        r["cost"] = float(cost[j])
        if i < len(trace):
            r["gain_per_cost"], r["sd_after"] = trace[i]
        chosen.append(r)
    return chosen


def _pick(step: Step, strategy: str, batch: int, budget: float,
          trace: list[tuple[float, float]]) -> list[int]:
    """The batch: spread without a fit; otherwise the strategy's, with ``trace`` holding what
    the ensemble expects of each pick (none where the law fails the default rule's test)."""
    if step.fit is None:
        return spread(step, batch, budget)
    picks = STRATEGIES[strategy](step, batch, budget)
    if (step.test or {}).get("fits") is not False:
        trace += predicted(step, picks)
    return picks


def design(pool: Any, *, law: str, target: Target, budget: float | None = None,
           budget_frac: float | None = None, results: Any = None, fit: Any = None,
           batch: int = 4, strategy: str = "near-target", seed: int = 0, bootstrap: int = 200,
           gpu: str | None = None, base: dict[str, Any] | None = None,
           tokens_per_step: float | None = None, until_ci: float | None = None,
           prior: Any = None, prior_widths: dict[str, float] | None = None,
           dedupe: bool = False, n_counts: str | None = None) -> Design:
    """The next batch of at most ``batch`` runs from ``pool`` (the law's columns, optionally
    ``cost``) toward ``target``, within ``budget`` (the cost's unit) or ``budget_frac`` of the
    pool's cost. ``results`` are fitted (with ``prior``, a Gaussian prior as ``fit --prior``;
    without results the prior is the starting fit), or ``fit`` (a Fit, published name or fit
    file) is used as it is. Nothing to run once the target's 95% CI high/low is ``until_ci``
    or less. ``n_counts``: what the params count, named in the cost's unit."""
    from archfit.laws import get_law
    from archfit.laws.inference.selection import resolve

    from archfit.sweep.store import to_polars

    if not isinstance(target, Target):
        raise DesignError(f"target={target!r}: give a Target, e.g. Target('params', 7.2e5) for "
                          "the optimal depth at that size, Target('compute', 1e21) for N_opt, "
                          "or Target('table', rows={column: values}) for the rows to predict")
    pool, results = to_polars(pool), as_runs(results)
    role = {"params": "shape", "compute": "compute"}.get(target.kind)
    law, chosen_by = resolve(law, role, pool.columns, results, seed)  # --law auto
    lw = get_law(law)
    check_request(lw, strategy, batch, seed)
    strategy = strategy_name(strategy)
    check_pool(pool, lw)
    target.check(lw)
    has_results = results is not None and results.height > 0
    fit, cons = starting_fit(lw, fit, prior, prior_widths, has_results)
    notes: list[str] = [chosen_by] if chosen_by else []
    res_cols = columns(results) if has_results else None
    target.outside(res_cols)
    cost, unit = costs(pool, gpu, base=base, tokens_per_step=tokens_per_step, n_counts=n_counts)
    is_open = not_among(pool, results)
    if not is_open.any():
        raise DesignError("every candidate of the pool is already among the results: widen "
                          "the pool (more sizes, depths or token counts)")
    budget = check_budget(budget, budget_frac, cost, is_open, unit)
    if fit is None:
        # here a prior has results to weigh (without them it became the starting fit)
        fit, why = fit_runs(results, law, bootstrap, seed, prior, prior_widths, strict=True,
                            dedupe=dedupe)
        if fit is None:
            notes.append(f"no fit yet ({why}): a first batch spread over the pool")
        elif prior is not None:
            notes.append(f"the results are fitted with a Gaussian prior from {cons.source} on "
                         + ", ".join(f"{k} ({m:.4g} ± {sd:.2g})"
                                     for k, (m, sd) in cons.prior.items()))
    elif strategy in CRITERIA and len(draws(fit)) < MIN_DRAWS:
        notes.append(f"the fit {fit.label} carries no parameter draws (bootstrap or covariance) "
                     "to weigh runs by: a batch spread over the pool; start from a fit with a "
                     "bootstrap, or give --results")
    point, ci_now = _optimum(fit, target)
    ctx = {"pool": columns(pool), "open": is_open, "results": res_cols, "target": target,
           "point": point, "params": fit.conventions.get("params") if fit else None}
    span = ci_now.ratio() if ci_now else None
    if until_ci and span is not None and span <= until_ci:
        return Design(law, strategy, target.describe(), [], unit, budget, 0.0, ci_now, None,
                      stop=f"the target's 95% CI spans {span:.3g}x, within "
                           f"--until-ci {until_ci:g}x", notes=notes, context=ctx)
    step = Step(lw, fit, ctx["pool"], cost, is_open.copy(), target,
                np.random.default_rng(seed), res_cols)
    trace: list[tuple[float, float]] = []
    picks = _pick(step, strategy, batch, budget, trace)
    chosen = _chosen(pool, picks, cost, trace)
    ci_after = None
    if ci_now and trace and point is not None:  # each end moves toward the estimate
        ci_after = Interval(*(point * (end / point) ** trace[-1][1]
                              for end in ci_now.finite_ends()),
                            kind="fitted", method="predicted after the batch: today's interval "
                            "scaled by the ensemble's predicted sd (a Gaussian shortcut)")
    notes += [] if picks else ["no candidate fits the budget"]
    return Design(law, strategy, target.describe(), chosen, unit, budget,
                  float(sum(c["cost"] for c in chosen)), ci_now, ci_after,
                  test=step.test, notes=notes + ([step.test["why"]] if step.test else [])
                  + step.notes, context=ctx)
