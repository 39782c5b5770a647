"""The optimal peak learning rate as a power law in size and tokens, fitted from a learning-rate
sweep: each (N, D) cell's best rate is the minimum of a quadratic fit of loss against ln lr
(not the best run), and ln lr* = a + b ln N + c ln D across the cells, weighted by each cell
optimum's standard error. Step Law (Li et al. 2025) and DeepSeek LLM (2024) are published fits
of this form (:mod:`archfit.train.recipe`, ``archfit laws``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import Constraints, Data, Estimate, Law, register

if TYPE_CHECKING:
    import numpy as np

MARGIN = math.log(2)  # a cell optimum more than a factor of 2 beyond the rates tried: skipped
# a cell with repeated seeds whose losses differ across rates no more than between seeds at this
# level (one-way analysis of variance, rates as groups) has no measurable best rate
RATE_MATTERS_LEVEL = 0.05


@register
class LRBatch(Law):
    name = "lr-batch"
    formula = ("ln lr* = a + b * ln N + c * ln D,  lr* = each (N, D) cell's best peak learning "
               "rate (minimum of a quadratic fit of loss vs ln lr)")
    description = "The optimal peak learning rate per (size, tokens) cell and its power law."
    columns = ("loss", "params", "tokens", "lr")
    param_names = ("a", "b", "c")
    min_points = 9  # three cells of three rates
    role = "hparam"

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.numeric import linear_map, ols

        check_one_batch(data)
        cells, notes = cell_optima(data)
        if len(cells) < 2:
            raise FitError(f"lr-batch found {len(cells)} (size, tokens) cell(s) with an interior "
                           "best learning rate; it needs 2 or more (3 or more rates each)"
                           + (f" ({notes[0]})" if notes else ""))
        lnN = np.log([c["params"] for c in cells])
        lnD = np.log([c["tokens"] for c in cells])
        y = np.array([c["log_opt"] for c in cells])
        se = np.array([c["log_opt_se"] for c in cells])
        w = 1.0 / se ** 2 if np.all(np.isfinite(se) & (se > 0)) else None
        fixed = dict(constraints.fixed) if constraints else {}
        for name, x, what in (("b", lnN, "size"), ("c", lnD, "tokens")):
            if np.ptp(x) == 0 and name not in fixed:
                fixed[name] = 0.0
                notes.append(f"every cell at one {what}: {name} = 0")
        if "b" not in fixed and "c" not in fixed and abs(np.corrcoef(lnN, lnD)[0, 1]) > 0.999:
            fixed["c"] = 0.0
            notes.append("size and tokens move together across the cells (one tokens per "
                         "parameter), so c cannot be told from b: c = 0, and b carries both")
        X = np.stack([np.ones_like(lnN), lnN, lnD], axis=1)
        cons = Constraints(fixed=fixed, prior=dict(constraints.prior) if constraints else {},
                           source=constraints.source if constraints else "",
                           scale=constraints.scale if constraints else None)
        if cons:
            coef, cov = linear_map(X, y, w, self.param_names, cons)
        else:
            coef, cov, _ = ols(X, y, w, full and len(cells) > 3)
        extra: dict[str, Any] = {"notes": notes, "residual_space": "ln lr*"}
        if full:
            extra["cells"] = cells
        return Estimate(coef, cov, extra)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        """The optimal peak learning rate at each row's size and tokens."""
        import numpy as np

        N = np.asarray(data["params"], float)
        D = np.asarray(data["tokens"], float)
        return np.exp(params["a"] + params["b"] * np.log(N) + params["c"] * np.log(D))

    def lr_at(self, params: Mapping[str, float], N: float, D: float) -> float:
        return math.exp(params["a"] + params["b"] * math.log(N) + params["c"] * math.log(D))

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        cl = extra.get("cells") or []
        return (np.array([c["log_opt"] for c in cl]),
                np.array([math.log(self.lr_at(params, c["params"], c["tokens"])) for c in cl]))

    def heldout(self, data: Data, constraints: Any = None) -> dict[str, Any] | None:
        """Fit the cells of all but the largest size, predict the largest size's best rates
        with 95% intervals (the line's uncertainty and each cell optimum's own)."""
        import numpy as np

        from archfit.laws.numeric import band_report, conformal_factor

        cells, _ = cell_optima(data)
        if not cells:
            return {"ok": False, "reason": "no cell with an interior best learning rate"}
        top = max(c["params"] for c in cells)
        test = [c for c in cells if c["params"] >= top * (1 - 1e-9)]
        keep = np.concatenate([_cell_mask(data, c) for c in cells if c not in test])
        train = {k: np.asarray(v)[keep] for k, v in data.items()}
        try:
            est = self.fit_point(train, full=True, constraints=constraints)
        except FitError as e:
            return {"ok": False, "reason": f"the cells below the largest size: {e}"}
        p = dict(zip(self.param_names, est.params))
        x = np.array([[1.0, math.log(c["params"]), math.log(c["tokens"])] for c in test])
        line = (np.einsum("ij,jk,ik->i", x, est.cov, x) if est.cov is not None
                else np.zeros(len(test)))
        own = np.array([c["log_opt_half95"] if math.isfinite(c["log_opt_half95"]) else 0.0
                        for c in test]) ** 2
        half = np.sqrt(1.96 ** 2 * line + own)
        pred = np.array([self.lr_at(p, c["params"], c["tokens"]) for c in test])
        actual = np.array([c["opt"] for c in test])
        lo, hi = pred * np.exp(-half), pred * np.exp(half)
        return {"ok": True, "split": "largest size", "n_test": len(test),
                "n_train": len(cells) - len(test), "held_out_sizes": [top], "level": 0.95,
                **band_report(pred, lo, hi, actual),
                "widen": conformal_factor(pred, lo, hi, actual, 0.95)}


def check_one_batch(data: Data) -> None:
    """Refuse a table whose batch size varies within a (size, tokens) cell: each cell's best
    rate is read from one curve of loss against the rate, and averaging curves of several
    batch sizes as if they were seeds moves it (and can flip the data exponent's sign)."""
    import numpy as np

    if "batch_tokens" not in data:
        return
    by_cell: dict[tuple[float, float], set[float]] = {}
    for N, D, b in zip(data["params"], data["tokens"], data["batch_tokens"]):
        if np.isfinite(b):
            by_cell.setdefault(_cell_key(float(N), float(D)), set()).add(float(b))
    for (lnN, lnD), batches in sorted(by_cell.items()):
        if len(batches) > 1:
            N, D, vals = math.exp(lnN), math.exp(lnD), sorted(batches)
            raise FitError(f"lr-batch: the batch varies within the cell N {N:.3g}, D {D:.3g} "
                           f"({', '.join(f'{v:.4g}' for v in vals[:4])} tokens per step); the "
                           "rate's optimum is read per batch, never averaged over them: fit "
                           "one batch size at a time (fit --by batch_tokens, or filter the "
                           "table)")


def _cell_key(N: float, D: float) -> tuple[float, float]:
    return (round(math.log(N), 3), round(math.log(D), 3))


def _cell_mask(data: Data, cell: dict[str, Any]) -> np.ndarray:
    import numpy as np

    keys = [_cell_key(n, d) for n, d in zip(data["params"], data["tokens"])]
    return np.flatnonzero([k == cell["key"] for k in keys])


def cell_optima(data: Data) -> tuple[list[dict[str, Any]], list[str]]:
    """Per (size, tokens) cell: the loss averaged over seeds at each rate, a quadratic fit of
    it against ln lr, and its minimum with a delta-method standard error and a 95% interval
    (Student's t at the fit's residual degrees of freedom); cells with fewer than
    3 rates, no interior minimum, losses that differ across rates no more than across seeds
    (where seeds repeat: the loss does not measurably depend on the rate), or a minimum far
    beyond the rates tried are skipped,
    and the notes say so."""
    import numpy as np
    from scipy import stats

    from archfit.laws.numeric import log_minimum

    by_cell: dict[tuple[float, float], dict[float, list[float]]] = {}
    sizes: dict[tuple[float, float], tuple[float, float]] = {}
    for N, D, lr, loss in zip(data["params"], data["tokens"], data["lr"], data["loss"]):
        key = _cell_key(float(N), float(D))
        by_cell.setdefault(key, {}).setdefault(float(lr), []).append(float(loss))
        sizes[key] = (float(N), float(D))
    cells, notes = [], []
    for key in sorted(by_cell):
        N, D = sizes[key]
        rates = sorted(by_cell[key])
        where = f"cell N {N:.3g}, D {D:.3g}"
        if len(rates) < 3:
            notes.append(f"{where}: {len(rates)} learning rate(s), fewer than 3: skipped")
            continue
        x = np.log(rates)
        y = np.array([np.mean(by_cell[key][r]) for r in rates])
        (xs, se, c2, _), why = log_minimum(x, y, MARGIN)
        if why == "none":
            notes.append(f"{where}: the loss has no interior minimum over the rates tried: "
                         "skipped")
            continue
        groups = [by_cell[key][r] for r in rates]
        if any(len(g) > 1 for g in groups):
            p_rate = float(stats.f_oneway(*groups).pvalue)
            if not p_rate <= RATE_MATTERS_LEVEL:
                notes.append(f"{where}: the loss does not measurably depend on the rate (its "
                             f"spread across rates against that across seeds: p = {p_rate:.2g}"
                             "): skipped")
                continue
        if why == "beyond":
            side = "above" if xs > x.max() else "below"
            notes.append(f"{where}: the best rate lies {side} the rates tried "
                         f"({rates[0]:.3g}-{rates[-1]:.3g}): skipped; widen the sweep")
            continue
        # the 95% half-width from Student's t at the parabola's residual degrees of freedom
        # (a few rates: the normal quantile would be far too narrow)
        half = float(stats.t.ppf(0.975, len(x) - 3)) * se if len(x) > 3 else math.nan
        if not math.isfinite(half):
            notes.append(f"{where}: {len(x)} rates fit the parabola exactly, leaving nothing to "
                         "measure its error: this cell's best rate has no interval (sweep 4 or "
                         "more rates)")
        cells.append({"key": key, "params": N, "tokens": D, "log_opt": xs, "log_opt_se": se,
                      "log_opt_half95": half, "opt": math.exp(xs),
                      "opt_ci": ([math.exp(xs - half), math.exp(xs + half)]
                                 if math.isfinite(half) else None),
                      "curvature": c2, "best_run_lr": rates[int(np.argmin(y))],
                      "loss_min": float(y.min()), "rates": rates})
    return cells, notes
