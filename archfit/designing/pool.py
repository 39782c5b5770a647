"""What ``archfit design`` chooses from and toward: the candidate pool and its checks, each
candidate's cost (:func:`costs`) and the budget, the target, and the fit it starts from."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from archfit.errors import ArchfitError, FitInputError

# tokens per optimizer step assumed for GPU-hours when no spec states batch_size x ctx
DEFAULT_TOKENS_PER_STEP = 524_288  # 0.5M tokens, a common pretraining batch (stated, assumed)


class DesignError(ArchfitError):
    """A design that cannot be made as asked (one line: what is wrong, how to mend it)."""


@dataclass
class Target:
    """What the design shrinks the uncertainty of: the optimal depth at ``value`` parameters
    (``params``, shape laws), N_opt at ``value`` FLOPs (``compute``, compute laws), or the loss
    of each row of a ``table`` of configurations."""

    kind: str  # params | compute | table
    value: float | None = None
    rows: dict[str, np.ndarray] | None = None

    def describe(self) -> str:
        if self.kind == "params":
            return f"the optimal depth at N = {self.value:.3g} (non-embedding parameters)"
        if self.kind == "compute":
            return f"N_opt at C = {self.value:.3g} FLOPs (C = 6 N D)"
        n = len(next(iter(self.rows.values()))) if self.rows else 0
        return f"the loss of the {n} target configuration(s)"

    def check(self, law: Any) -> None:
        if self.kind == "params":
            from archfit.numbers import check_params_domain

            check_params_domain(float(self.need_value()))
        if self.kind == "params" and law.target_kind != "params":
            raise DesignError(f"--params targets the optimal depth, which {law.name} (a "
                              f"{law.role} law) does not give; use --target TABLE, or a shape "
                              "law with a loss model (depth-joint, depth-width)")
        if self.kind == "compute" and law.target_kind != "compute":
            raise DesignError(f"--compute targets N_opt, which {law.name} does not give; use "
                              "chinchilla (or --target TABLE)")
        if self.kind == "table":
            missing = [c for c in law.columns if c != "loss" and c not in (self.rows or {})]
            if missing:
                raise DesignError(f"the target table lacks column(s) {', '.join(missing)} that "
                                  f"{law.name} predicts from")

    def need_value(self) -> float:
        """The target's size or budget (a params or compute target has one)."""
        if self.value is None:
            raise DesignError(f"a {self.kind} target needs a value (the size or the budget)")
        return float(self.value)

    def need_rows(self) -> dict[str, np.ndarray]:
        """The target's configurations (a table target has them)."""
        if self.rows is None:
            raise DesignError("a table target needs its rows (a table of configurations)")
        return self.rows

    def values(self, law: Any, p: dict[str, float]) -> np.ndarray:
        """The target quantities under parameters ``p``, in log space."""
        if self.kind == "params":
            return np.array([math.log(law.optimum(p, self.need_value())[0])])
        if self.kind == "compute":
            return np.array([math.log(law.compute_optimal(p, self.need_value())[0])])
        return np.log(np.asarray(law.predict(p, self.need_rows()), float))

    def outside(self, data: dict[str, np.ndarray] | None) -> None:
        """Refuse a target inside the data: ``recommend`` answers that without new runs."""
        if not data or "params" not in data or not len(data["params"]):
            return
        if self.kind == "compute":  # compare budgets: C = 6 N D
            if "tokens" not in data:
                return
            reach, top, what = self.need_value(), float(np.max(6.0 * data["params"] *
                                                                 data["tokens"])), "FLOPs"
        else:  # compare sizes: the target's largest
            reach = (self.need_value() if self.kind == "params"
                     else float(np.max(self.need_rows()["params"])))
            top, what = float(np.max(data["params"])), "parameters"
        if reach <= top:
            raise DesignError(f"the target is inside the data ({reach:.3g} {what}, the largest "
                              f"run {top:.3g}): 'archfit recommend' answers it; design plans "
                              "runs toward a target beyond them")


def as_runs(table: Any, what: str = "--results") -> Any:
    """Finished runs as ``fit`` reads them: a polars frame whose columns have archfit's names
    (``final_val_loss`` -> ``loss``, ``num_params`` -> ``params``, ...), other columns kept;
    a table ``fit`` refuses raises the same typed error. None stays None."""
    if table is None:
        return None
    from archfit.sweep.store import read_runs, to_polars

    from archfit.laws.columns import finite_positive

    frame = to_polars(table)
    try:
        out = read_runs([], frame=frame, keep=list(frame.columns)).frame
        for c in ("params", "tokens"):  # what fit refuses, refused before any budget is weighed
            if c in out.columns and out[c].dtype.is_numeric():
                finite_positive(c, out[c])
    except FitInputError as e:
        raise FitInputError(f"{what}: {e}") from None
    return out


def check_pool(frame: Any, law: Any, where: str = "the candidate pool") -> None:
    if frame is None or frame.height == 0:
        raise DesignError(f"{where} is empty: give a table of candidate runs (--pool), a sweep "
                          "spec (--spec), or grid flags (--sizes, --depths, --tokens)")
    missing = [c for c in law.columns if c != "loss" and c not in frame.columns]
    if missing:
        raise DesignError(f"{where} lacks column(s) {', '.join(missing)} that {law.name} needs "
                          f"to predict a run; it has {', '.join(frame.columns)}")
    for c in (*law.columns, "tokens", "cost"):  # a size, depth, token count or cost <= 0
        if c != "loss" and c in frame.columns and not frame[c].dtype.is_numeric():
            first = frame[c].drop_nulls().head(1).to_list()
            raise DesignError(f"{where}'s column {c!r} holds {frame[c].dtype} values"
                              + (f" ({first[0]!r})" if first else "")
                              + "; it must hold numbers")
        if c != "loss" and c in frame.columns:
            bad = int((~(frame[c] > 0).fill_null(False)).sum())
            if bad:
                raise DesignError(f"{where}'s column {c!r} has {bad} missing, zero or negative "
                                  f"value(s) of {frame.height}; drop or fix those rows")


def costs(frame: Any, gpu: str | None = None, *, base: dict[str, Any] | None = None,
          tokens_per_step: float | None = None, n_counts: str | None = None
          ) -> tuple[np.ndarray, str]:
    """(cost per candidate, its unit): the pool's ``cost`` column, GPU-hours on ``gpu``, or
    FLOPs (C = 6 N D). ``n_counts``: what the params column counts (``"non-embedding"`` in
    the pools archfit builds), named in the unit; a table's own column is named as such."""
    if "cost" in frame.columns:
        c = frame["cost"].cast(float).to_numpy()
        if not np.all(np.isfinite(c)) or np.any(c <= 0):
            raise DesignError("the pool's cost column has missing, non-finite or non-positive "
                              "values; fix them or drop the column")
        return c, "the pool's cost column"
    if "tokens" not in frame.columns:
        raise DesignError("the pool has no tokens column and no cost column: a run's cost "
                          "needs its token count (or give a cost column)")
    N, D = frame["params"].cast(float).to_numpy(), frame["tokens"].cast(float).to_numpy()
    flops = 6.0 * N * D
    if gpu is None:
        return flops, "FLOPs (C = 6 N D, N " + (n_counts or "as the pool's params column "
                                                "counts it") + ")"
    from archfit.train.perf import gpu_hours

    return gpu_hours(frame.to_dicts(), gpu, base=base,
                     tokens_per_step=float(tokens_per_step or DEFAULT_TOKENS_PER_STEP))


def starting_fit(lw: Any, fit: Any, prior: Any, widths: dict[str, float] | None,
                 has_results: bool) -> tuple[Any, Any]:
    """(the starting fit or None, the prior's constraints or None): ``fit`` loaded and checked
    against the law; ``prior`` checked (FitInputError where it shares nothing with the law),
    and, with no results to weigh, the starting fit itself."""
    from archfit.laws import load_fit
    from archfit.laws.inference.constraints import constraints_for

    if fit is not None and prior is not None:
        raise DesignError("give --fit (a fit to start from) or --prior (a prior on the fit of "
                          "--results), not both")
    cons = None
    if prior is not None:
        cons = constraints_for(lw, None, prior, widths or {}, None)
        if not has_results:
            if isinstance(prior, dict):
                raise DesignError("a stated prior ({name: (mean, sd)}) weighs the fit of the "
                                  "results: give results, or a published name or fit file")
            fit = prior  # nothing to weigh it against: the prior is where the design starts
    if fit is not None:
        fit = load_fit(fit)
        if fit.law != lw.name:
            from archfit.laws import get_law

            able = get_law(fit.law).predicts_loss
            raise DesignError(
                f"the fit {fit.label} is a {fit.law} fit, but the design's law is {lw.name}: "
                + (f"pass --law {fit.law}, or start from a {lw.name} fit" if able else
                   f"{fit.law} has no loss model to design with; fit your runs with 'archfit "
                   f"fit ... --law {lw.name}' and pass that fit, or give --results"))
    return fit, cons


def check_budget(budget: float | None, frac: float | None, cost: np.ndarray,
                 is_open: np.ndarray, unit: str) -> float:
    """The budget in the cost's unit (given, or ``frac`` of the pool's cost), checked: positive,
    finite, and enough for the cheapest open candidate."""
    if (budget is None) == (frac is None):
        raise DesignError("give a budget: in the cost's unit, or as a fraction of the pool's "
                          "cost")
    if budget is None:
        assert frac is not None  # exactly one of the two is given
        if not 0 < float(frac) <= 1:
            raise DesignError(f"--budget-frac must be in (0, 1] (a share of the pool's cost), "
                              f"got {frac:g}; for more, give --budget in the cost's unit")
        budget = float(frac) * float(cost.sum())
    if not (budget > 0 and math.isfinite(budget)):
        raise DesignError(f"the budget must be a positive finite number, got {budget}")
    cheapest = float(cost[is_open].min())
    if budget < cheapest:
        raise DesignError(f"the budget {budget:.4g} is below the cheapest open candidate "
                          f"({cheapest:.4g} {unit.split(' (')[0]}): raise it or add cheaper runs")
    return float(budget)


def not_among(pool: Any, results: Any) -> np.ndarray:
    """Pool rows not already among the results (same run_id, or same size, depth, tokens)."""
    keep = np.ones(pool.height, bool)
    if results is None or results.height == 0:
        return keep
    if "run_id" in pool.columns and "run_id" in results.columns:
        done = set(results["run_id"].to_list())
        return np.array([r not in done for r in pool["run_id"].to_list()])
    cols = [c for c in ("params", "n_layer", "tokens") if c in pool.columns
            and c in results.columns]
    done = {tuple(round(float(v), 6) for v in r) for r in results.select(cols).iter_rows()}
    return np.array([tuple(round(float(v), 6) for v in r) not in done
                     for r in pool.select(cols).iter_rows()])
