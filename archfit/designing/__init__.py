"""``archfit design``: which runs to train next for an informative answer at least cost.

Given a law, the runs so far (or a prior fit), a pool of runnable candidates with costs and a
target beyond the data, :func:`design` picks the next batch: where the law missed its own
costliest runs, a share of the budget on the candidates nearest the target, the rest by the
expected shrink of the target's uncertainty per square root of its cost
(:mod:`archfit.designing.strategies`); it says what the batch costs and the interval it predicts
at the target after it. Run it again with
the new results for the next batch, until a stop rule holds (``until_ci``) or the budget is
spent.

:func:`replay` runs that loop on a finished sweep, revealing each chosen run's loss from the
table, then fits the chosen runs and scores them on a target table against the fit on every
row: "how much of my last sweep did I need?" (the benchmarks: ``bench_design_real.py`` on public
sweeps, ``bench_design.py`` on planted truths).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from archfit.designing.pool import (DesignError, Target, as_polars, as_runs, check_budget, check_pool,
                                 columns, costs, pool_from_grid, pool_from_sizes, pool_from_spec,
                                 check_seed, not_among, starting_fit)
from archfit.designing.replays import (archfit_share, calibrated_fit, fit_runs, metrics, replay,
                                    split_most_expensive)
from archfit.designing.strategies import (CRITERIA, CRITERION, MIN_DRAWS, STRATEGIES, Step, draws,
                                       TRUST_REGION, space_filling)
from archfit.errors import FitError, FitInputError

__all__ = ["Design", "DesignError", "Target", "design", "replay", "calibrated_fit", "metrics",
           "pool_from_grid", "pool_from_sizes", "pool_from_spec", "columns",
           "split_most_expensive", "STRATEGIES"]

SHOWN = ("run_id", "params", "n_layer", "d_model", "d_ff", "tokens")


@dataclass
class Design:
    """The next batch: ``chosen`` rows of the pool in order (each with its ``cost``, the
    ``gain_per_cost`` and the target's predicted ``sd_after`` as a share of today's), what they
    cost, and the target's interval now and predicted after the batch."""

    law: str
    strategy: str
    target: str
    chosen: list[dict[str, Any]]
    cost_unit: str
    budget: float
    spent: float
    ci_now: list[float] | None = None
    ci_after: list[float] | None = None
    criterion: str = CRITERION
    near_share: float = 0.0  # of the budget spent nearest the target first (archfit)
    stop: str | None = None
    notes: list[str] = field(default_factory=list)
    # what the figure draws (archfit.plots.design): the pool's columns and which rows are
    # open, the runs so far, the Target and its point estimate; not part of to_dict()
    context: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        from archfit.io import jsonable

        return jsonable({k: getattr(self, k) for k in (
            "law", "strategy", "target", "criterion", "near_share", "cost_unit", "budget",
            "spent",
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
        after = (f"; the batch of {len(self.chosen)} predicts the 95% CI "
                 f"[{self.ci_after[0]:.3g}, {self.ci_after[1]:.3g}] (now [{self.ci_now[0]:.3g}, "
                 f"{self.ci_now[1]:.3g}])" if self.ci_after and self.ci_now else "")
        return (f"to narrow this, 'archfit design' would run first {shape}N {c['params']:.3g}, "
                f"{c.get('tokens', float('nan')):.3g} tokens ({c['cost']:.3g} {_unit(self)})"
                + after)

    def summary(self) -> str:
        lines = [f"archfit design: {self.law}, strategy {self.strategy}",
                 f"  target: {self.target}",
                 f"  criterion: {self.criterion if self.strategy == 'archfit' else self.strategy}",
                 f"  cost: {self.cost_unit}; budget {self.budget:.4g}, this batch "
                 f"{self.spent:.4g}"]
        if self.ci_now:
            lines.append(f"  target 95% CI now [{self.ci_now[0]:.4g}, {self.ci_now[1]:.4g}]"
                         + (f", predicted after the batch [{self.ci_after[0]:.4g}, "
                            f"{self.ci_after[1]:.4g}] (Gaussian shortcut: today's interval "
                            "scaled by the ensemble's predicted sd)" if self.ci_after else ""))
        if self.stop:
            lines.append(f"  stop: {self.stop}")
        if self.chosen:
            keys = [k for k in SHOWN if k in self.chosen[0]] + ["cost", "gain_per_cost",
                                                                 "sd_after"]
            lines += ["", "  " + "  ".join(f"{k:>14}" for k in ["#"] + keys)]
            for i, c in enumerate(self.chosen, 1):
                cells = [str(i)] + [_cell(c.get(k)) for k in keys]
                lines.append("  " + "  ".join(f"{x:>14}" for x in cells))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

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

        atomic_write(path, tomli_w.dumps(sweep_spec(self.chosen, spec, str(self.target))))
        return path


def sweep_spec(chosen: list[dict[str, Any]], spec: Any = None, toward: str = "") -> dict[str, Any]:
    """The sweep spec (as a dict, what ``archfit sweep run`` reads from TOML) that trains the
    ``chosen`` runs with the recipe of ``spec`` (a sweep spec's ``raw`` sections: data, model,
    train, executor; its seeds and learning rates)."""
    if not chosen or "n_layer" not in chosen[0]:
        raise DesignError("a sweep spec needs shapes (n_layer, d_model); write the chosen "
                          "runs as a table instead (-o next.csv)")
    raw: dict[str, Any] = {k: dict(spec.raw[k]) for k in ("model", "train", "executor")
                           if spec is not None and k in spec.raw}
    if spec is not None and "data" in spec.raw:
        raw["data"] = spec.raw["data"]
    toks = {round(c["tokens"]) for c in chosen}
    tpp = {round(c["tokens"] / c["params"], 2) for c in chosen}
    if len(toks) == 1:
        budget = {"tokens": float(toks.pop())}
    elif len(tpp) == 1:
        budget = {"tokens_per_param": float(tpp.pop())}
    else:
        raise DesignError(f"the chosen runs train on {len(toks)} different token counts; a "
                          "sweep spec holds one budget: write them as a table (-o next.csv)")
    model = raw.setdefault("model", {})
    model.pop("n_head", None)
    shapes = [_spec_shape(c) for c in chosen]
    default_lr = ((spec.raw.get("lrs") if spec is not None else None) or [3e-3])[0]
    runs = {(repr(sh), float(c.get("lr") or default_lr), int(c.get("seed") or 0))
            for sh, c in zip(shapes, chosen)}
    lrs, seeds = {r[1] for r in runs}, {r[2] for r in runs}
    uniq = {r[0] for r in runs}
    if len(runs) != len(uniq) * len(lrs) * len(seeds):  # a spec trains shapes x lrs x seeds
        raise DesignError(f"the chosen runs are not every shape at every one of their "
                          f"{len(lrs)} learning rate(s) and {len(seeds)} seed(s), which is "
                          "what a sweep spec trains: write them as a table (-o next.csv)")
    shapes = [dict(t) for t in dict.fromkeys(tuple((k, tuple(v) if isinstance(v, list)
                                                     else v) for k, v in sh.items())
                                               for sh in shapes)]
    shapes = [{k: list(v) if isinstance(v, tuple) else v for k, v in sh.items()}
              for sh in shapes]
    raw.update(name=(spec.name + "-next") if spec is not None else "design-next",
               description=f"archfit design: {len(shapes)} runs toward {toward}",
               seeds=sorted(seeds), lrs=sorted(lrs), grid={"shapes": shapes}, budget=budget)
    return raw


def _spec_shape(c: dict[str, Any]) -> dict[str, Any]:
    """A chosen run as a grid.shapes entry: its dimensions and its per-layer plan (a layer
    variant written as a uniform shape would train a different model)."""
    from archfit.shapes import parse_plan

    out: dict[str, Any] = {k: int(c[k]) for k in ("n_layer", "d_model", "n_head", "d_ff")
                           if c.get(k)}
    plan = c.get("plan")
    if plan and plan != "uniform":
        out.update({k: list(v) for k, v in parse_plan(plan, out["n_layer"]).items()})
    return out


def _unit(d: Design) -> str:
    return d.cost_unit.split(" (")[0]


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _interval(fit: Any, target: Target) -> list[float] | None:
    if fit is None or target.kind == "table":
        return None
    key = "n_layer" if target.kind == "params" else "N_opt"
    return fit.optimum(target.value).get(f"{key}_ci")


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
    """The batch: space-filling without a fit; the criteria fill ``trace``."""
    if step.fit is None:
        return space_filling(step, batch, budget)
    if strategy in CRITERIA:
        return STRATEGIES[strategy](step, batch, budget, trace)
    return STRATEGIES[strategy](step, batch, budget)


def _set_near_share(step: Step, results: Any, law: str, bootstrap: int, seed: int,
                    notes: list[str]) -> None:
    """archfit's near-target share, with a note: fixed for a target table
    (:func:`table_share`), otherwise as far as the results' extrapolation check found the law
    missing (no results: none)."""
    step.near_share, w = archfit_share(step.target, results, law, bootstrap, seed)
    if step.target.kind == "table":
        notes.append(f"a target table: {step.near_share:.0%} of the batch's budget goes to the "
                     "candidates nearest the target first, the rest by the criterion among "
                     f"the nearer {TRUST_REGION:.0%} of the pool, and what none there can use "
                     "nearest the target (a law is only approximately true of a real sweep; "
                     "see the design how-to)")
    elif w is not None and step.near_share > 0:
        notes.append(f"the law missed its own costliest runs by {w:.3g}x its 95% intervals "
                     f"(refit without them): {step.near_share:.0%} of the batch's budget goes "
                     "to the candidates nearest the target first")


def _check_request(lw: Any, strategy: str, batch: int, seed: int) -> None:
    if not lw.predicts_loss:
        raise DesignError(f"{lw.name} has no loss model, so a run's outcome cannot be predicted; "
                          "design with depth-joint or depth-width (shape), chinchilla (compute)")
    if strategy not in STRATEGIES:
        raise DesignError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    check_seed(seed)
    if batch < 1:
        raise DesignError(f"--batch must be 1 or more, got {batch}")


def design(pool: Any, *, law: str, target: Target, budget: float | None = None,
           budget_frac: float | None = None, results: Any = None, fit: Any = None,
           batch: int = 4, strategy: str = "archfit", seed: int = 0, bootstrap: int = 200,
           gpu: str | None = None, base: dict[str, Any] | None = None,
           tokens_per_step: float | None = None, until_ci: float | None = None,
           prior: Any = None, prior_widths: dict[str, float] | None = None,
           dedupe: bool = False, n_counts: str | None = None) -> Design:
    """The next batch of at most ``batch`` runs from ``pool`` (a polars frame of candidates: the
    law's columns, optionally ``cost``) toward ``target``, within ``budget`` (in the cost's unit)
    or ``budget_frac`` of the pool's cost. ``results`` (finished runs) are fitted, or ``fit`` (a
    :class:`~archfit.laws.Fit` of the same law, or a published name or fit file) is used as it
    is; with neither, a space-filling first batch. ``prior`` (a published name, fit file or Fit;
    widths from its CIs or ``prior_widths``) puts a Gaussian prior on the parameters it shares
    with the law when ``results`` are fitted, else is the starting fit. Stop at a target 95% CI
    high/low of ``until_ci``. ``dedupe``: drop duplicate results (as ``fit``). ``n_counts``: what
    the params count, for the cost's unit (``"non-embedding"`` in the ``pool_from_*`` pools)."""
    from archfit.laws import get_law
    from archfit.laws.selection import resolve

    pool, results = as_polars(pool), as_runs(results)
    role = {"params": "shape", "compute": "compute"}.get(target.kind)
    law, chosen_by = resolve(law, role, pool.columns, results, seed)  # --law auto
    lw = get_law(law)
    _check_request(lw, strategy, batch, seed)
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
            notes.append(f"no fit yet ({why}): a space-filling first batch")
        elif prior is not None:
            notes.append(f"the results are fitted with a Gaussian prior from {cons.source} on "
                         + ", ".join(f"{k} ({m:.4g} ± {sd:.2g})"
                                     for k, (m, sd) in cons.prior.items()))
    elif strategy in CRITERIA and len(draws(fit)) < MIN_DRAWS:
        notes.append(f"the fit {fit.label} carries no parameter draws (bootstrap or covariance) "
                     "to weigh runs by: a space-filling first batch; start from a fit with a "
                     "bootstrap, or give --results")
    ci_now = _interval(fit, target) if fit is not None else None
    point = fit.optimum(target.need_value())["n_layer" if target.kind == "params" else "N_opt"] \
        if ci_now and fit is not None else None
    ctx = {"pool": columns(pool), "open": is_open, "results": res_cols, "target": target,
           "point": point, "params": fit.conventions.get("params") if fit else None}
    if until_ci and ci_now and ci_now[1] / ci_now[0] <= until_ci:
        return Design(law, strategy, target.describe(), [], unit, budget, 0.0, ci_now, None,
                      stop=f"the target's 95% CI spans {ci_now[1] / ci_now[0]:.3g}x, within "
                           f"--until-ci {until_ci:g}x", notes=notes, context=ctx)
    step = Step(lw, fit, ctx["pool"], cost, is_open.copy(), target,
                np.random.default_rng(seed), res_cols)
    if strategy == "archfit" and fit is not None:
        _set_near_share(step, results, law, min(bootstrap, 32), seed, notes)
    trace: list[tuple[float, float]] = []
    picks = _pick(step, strategy, batch, budget, trace)
    chosen = _chosen(pool, picks, cost, trace)
    ci_after = None
    if ci_now and trace and point is not None and target.kind != "table":
        r = trace[-1][1]
        ci_after = [point * (ci_now[0] / point) ** r, point * (ci_now[1] / point) ** r]
    notes += [] if picks else ["no candidate fits the budget"]
    return Design(law, strategy, target.describe(), chosen, unit, budget,
                  float(sum(c["cost"] for c in chosen)), ci_now, ci_after,
                  notes=notes + step.notes,
                  near_share=step.near_share, context=ctx)


def suggest(fit: Any, N: float, batch: int = 4, budget_frac: float = 0.3
            ) -> tuple[Design | None, str | None]:
    """What ``recommend`` prints under a weak or uninformative answer at ``N``: the design's
    first batch from a default pool (2x, 4x and 8x the largest run, capped at N; depths from
    half to twice the law's optimum there; the data's tokens per parameter), costed in FLOPs.
    Returns (the design, None), or (None, why no runs could be planned): no loss model, no
    draws, N inside the data, or the design's own refusal."""
    from archfit.shapes import kaplan_width
    import polars as pl

    law = fit.law_obj
    span = (fit.diagnostics or {}).get("span") or {}
    top = span.get("params_max")
    if law.role != "shape" or not law.predicts_loss:
        return None, f"{law.name} has no loss model over shapes to plan runs with"
    if not top or N <= top:
        return None, "the target is inside the data: no runs beyond it to plan"
    if not (fit.bootstrap or {}).get("samples"):
        return None, "the fit carries no bootstrap draws to weigh runs by"
    tpp = (span["tokens_max"] / top) if span.get("tokens_max") else 20.0
    rows = []
    for n in sorted({min(top * f, N) for f in (2.0, 4.0, 8.0)}):
        L0 = law.optimum(fit.params, n)[0]
        for L in sorted({max(1, int(round(L0 * f))) for f in (0.5, 0.71, 1.0, 1.41, 2.0)}):
            rows.append({"params": float(n), "n_layer": L,
                         "d_model": round(kaplan_width(n, L)), "tokens": tpp * n})
    try:
        d = design(pl.DataFrame(rows), law=law.name, target=Target("params", N), fit=fit,
                   budget_frac=budget_frac, batch=batch, n_counts="non-embedding")
    except (DesignError, FitError, FitInputError) as e:
        return None, f"the design could not run ({e})"
    if not d.chosen:
        return None, d.stop or "no candidate fits the budget"
    return d, None


BATCH_COLUMNS = {"cost", "strategy"}  # a table 'archfit design -o' wrote has these


def is_batch(path: str) -> bool:
    """A file ``Design.write`` wrote (what ``-o`` may replace without --force): a spec whose
    description says so, or a table with the batch's columns."""
    if not path.endswith((".toml", ".csv", ".parquet")):
        return False
    try:
        if path.endswith(".parquet"):
            import polars as pl

            return BATCH_COLUMNS <= set(pl.read_parquet_schema(path))
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except Exception:  # unreadable: not recognisably ours
        return False
    if path.endswith(".csv"):
        return bool(head) and BATCH_COLUMNS <= set(head.splitlines()[0].split(","))
    return "archfit design:" in head
