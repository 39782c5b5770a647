"""The optimal peak learning rate and batch as power laws in size and tokens, fitted from a
learning-rate sweep or a learning-rate x batch grid: each (N, D) cell's best rate (and batch,
where the batch varies) is the minimum of a local fit around its lowest run
(:mod:`archfit.laws.hyperparameters.lr_window`), then ln lr* = a + b ln N + c ln D and
ln B* = a_B + b_B ln N + c_B ln D across the cells, each weighted by its optimum's bootstrap
spread. Step Law (Li et al. 2025) and DeepSeek LLM (2024) are published fits of this form
(:mod:`archfit.train.hyperparameters`, ``archfit laws``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import Constraints, Data, Estimate, HyperparameterLaw, register

if TYPE_CHECKING:
    import numpy as np

# a cell with repeated seeds whose losses differ across its grid points no more than between
# seeds at this level (one-way analysis of variance, the points as groups) has no measurable
# best rate
RATE_MATTERS_LEVEL = 0.05
# the draws behind each cell's spread (its weight in the law) in the law's bootstrap refits
REFIT_DRAWS = 99
LR_TERMS = ("a", "b", "c")
BATCH_TERMS = ("a_B", "b_B", "c_B")


@register
class LRBatch(HyperparameterLaw):
    name = "lr-batch"
    formula = ("ln lr* = a + b * ln N + c * ln D,  ln B* = a_B + b_B * ln N + c_B * ln D;  "
               "lr*, B* = each (N, D) cell's best peak learning rate and batch (tokens), the "
               "minimum of a local fit around its lowest run")
    description = ("The optimal peak learning rate and batch per (size, tokens) cell and their "
                   "power laws.")
    columns = ("loss", "params", "tokens", "lr")
    param_names = LR_TERMS + BATCH_TERMS
    min_points = 9  # three cells of three rates

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        """Each cell's optimum (its spread from :data:`REFIT_DRAWS` draws where not ``full``: the
        law's own bootstrap refits weigh the cells as the point fit does, without their 95%
        intervals), then the rate's and the batch's power laws across the cells. Where the batch
        does not vary within the cells it is not fitted: a_B is the one batch used (0 where the
        table has none), b_B = c_B = 0."""
        import numpy as np

        cells, notes = cell_optima(data, draws=None if full else REFIT_DRAWS)
        if len(cells) < 2:
            raise FitError(f"lr-batch found {len(cells)} (size, tokens) cell(s) with an interior "
                           "best learning rate; it needs 2 or more (3 or more rates each)"
                           + (f" ({notes[0]})" if notes else ""))
        cons = constraints or Constraints()
        held: dict[str, float] = {}
        coef_lr, cov_lr = _power_law(cells, "log_opt", "log_opt_se", LR_TERMS, cons, full,
                                     notes, held)
        batched = all(c["batch_opt"] is not None for c in cells)
        if batched:
            coef_b, cov_b = _power_law(cells, "log_batch_opt", "log_batch_se", BATCH_TERMS,
                                       cons, full, notes, held)
        else:
            used = sorted({float(b) for b in data.get("batch_tokens", []) if np.isfinite(b)})
            coef_b, cov_b = np.array([math.log(used[0]) if len(used) == 1 else 0.0, 0, 0]), None
            held.update(zip(BATCH_TERMS, coef_b.tolist()))
            notes.append(f"every run at one batch ({used[0]:,.0f} tokens): the best batch is "
                         "not fitted; a_B is that batch, b_B = c_B = 0" if len(used) == 1 else
                         "the batch is not fitted (it does not vary within the cells, or the "
                         "table has none): a_B = b_B = c_B = 0")
        coef = np.concatenate([coef_lr, coef_b])
        cov = None
        if cov_lr is not None:
            cov = np.zeros((6, 6))
            cov[:3, :3] = cov_lr
            if cov_b is not None:
                cov[3:, 3:] = cov_b
        extra: dict[str, Any] = {"notes": notes, "residual_space": "ln lr*",
                                 "batch_fitted": batched, "fixed": held}
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

    def batch_at(self, params: Mapping[str, float], N: float, D: float) -> float:
        """The best batch in tokens (meaningful only where the fit's ``batch_fitted``)."""
        return math.exp(params["a_B"] + params["b_B"] * math.log(N)
                        + params["c_B"] * math.log(D))

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        cl = extra.get("cells") or []
        return (np.array([c["log_opt"] for c in cl]),
                np.array([math.log(self.lr_at(params, c["params"], c["tokens"])) for c in cl]))

    def heldout(self, data: Data, constraints: Any = None) -> dict[str, Any] | None:
        """Fit the cells of all but the largest size, predict the largest size's best rates
        (and batches, where fitted) with 95% intervals (the line's uncertainty and each cell
        optimum's own)."""
        import numpy as np

        from archfit.laws.inference.bands import band_report, conformal_factor

        cells, _ = cell_optima(data)
        if not cells:
            return {"ok": False, "reason": "no cell with an interior best learning rate"}
        top = max(c["params"] for c in cells)
        test = [c for c in cells if c["params"] >= top * (1 - 1e-9)]
        held_keys = {c["key"] for c in test}
        keep = np.flatnonzero([k not in held_keys for k in cell_keys(data)])
        train = {k: np.asarray(v)[keep] for k, v in data.items()}
        try:
            est = self.fit_point(train, full=True, constraints=constraints)
        except FitError as e:
            return {"ok": False, "reason": f"the cells below the largest size: {e}"}
        out: dict[str, Any] = {"ok": True, "split": "largest size", "unit": "cells",
                               "n_test": len(test),
                               "n_train": len(cells) - len(test), "held_out_sizes": [top],
                               "level": 0.95}
        for what, key, names in (("rate", "opt", LR_TERMS), ("batch", "batch_opt", BATCH_TERMS)):
            if what == "batch" and not est.extra["batch_fitted"]:
                continue
            band = _line_prediction(est.extra["cells"], test, key, est.extra["fixed"], names)
            if band is None:
                return {"ok": False, "reason": f"{len(cells) - len(test)} cells below the "
                        "largest size leave the line no residual degrees of freedom to "
                        "bound a prediction: sweep more sizes or token counts"}
            pred, lo, hi = band
            actual = np.array([c[key] for c in test])
            report = {**band_report(pred, lo, hi, actual),
                      "widen": conformal_factor(pred, lo, hi, actual, 0.95),
                      "predicted": pred.tolist(), "measured": actual.tolist(),
                      "low": lo.tolist(), "high": hi.tolist()}
            if what == "rate":
                out.update(report)
            else:
                out["batch"] = report
        return out


def _line_prediction(train: list[dict[str, Any]], test: list[dict[str, Any]], key: str,
                     fixed: Mapping[str, float], names: tuple[str, ...]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The 95% prediction interval of the test cells' optima ``key`` from the power law over
    the train cells, its coefficients in ``fixed`` held; None where no degree of freedom is
    left to bound it.

    Where every cell has a bootstrap spread, the line is weighted least squares with those
    spreads as known errors, a new cell's own spread added, the normal quantile; when the cells
    scatter about the line more than their spreads allow, every error is scaled up by the Birge
    ratio sqrt(chi^2 / dof) (the Particle Data Group's scale factor). Without spreads, ordinary
    least squares with Student's t at the line's residual degrees of freedom (statsmodels)."""
    import numpy as np
    import statsmodels.regression.linear_model as sm

    def columns(cells: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
        X = np.array([[1.0, math.log(c["params"]), math.log(c["tokens"])] for c in cells])
        free = [i for i, n in enumerate(names) if n not in fixed]
        offset = sum(X[:, i] * fixed[n] for i, n in enumerate(names) if n in fixed)
        return X[:, free], np.asarray(offset, float) * np.ones(len(cells))

    se_key = "log_opt_se" if key == "opt" else "log_batch_se"
    se = np.array([c[se_key] for c in train + test])
    weighted = bool(np.all(np.isfinite(se) & (se > 0)))
    Xtr, off_tr = columns(train)
    Xte, off_te = columns(test)
    y = np.log([c[key] for c in train]) - off_tr
    if weighted and len(train) >= Xtr.shape[1]:
        res = sm.WLS(y, Xtr, weights=1 / se[:len(train)] ** 2).fit()  # type: ignore[arg-type]
        dof = len(train) - Xtr.shape[1]
        birge2 = max(1.0, float(res.ssr) / dof) if dof > 0 else 1.0
        line = np.einsum("ij,jk,ik->i", Xte, res.normalized_cov_params, Xte)
        half = 1.96 * np.sqrt(birge2 * (line + se[len(train):] ** 2))
        mid = Xte @ res.params + off_te
        return np.exp(mid), np.exp(mid - half), np.exp(mid + half)
    if len(train) <= Xtr.shape[1]:
        return None
    frame = sm.OLS(y, Xtr).fit().get_prediction(Xte).summary_frame(alpha=0.05)
    mid = np.asarray(frame["mean"]) + off_te
    lo = np.asarray(frame["obs_ci_lower"]) + off_te
    hi = np.asarray(frame["obs_ci_upper"]) + off_te
    return np.exp(mid), np.exp(lo), np.exp(hi)


def _power_law(cells: list[dict[str, Any]], key: str, se_key: str, names: tuple[str, ...],
               cons: Constraints, full: bool, notes: list[str], fixed_out: dict[str, float]
               ) -> tuple[np.ndarray, np.ndarray | None]:
    """ln y = names[0] + names[1] ln N + names[2] ln D over the cells' optima ``key``, weighted
    by 1 / se^2 where every cell has a spread; a coefficient with no spread in its variable (one
    size, one token count) or that cannot be told from the other (tokens per parameter fixed) is
    held at 0, and ``notes`` says so; ``fixed_out`` gets the coefficients held."""
    import numpy as np

    from archfit.laws.inference.regression import linear_map, ols

    lnN = np.log([c["params"] for c in cells])
    lnD = np.log([c["tokens"] for c in cells])
    y = np.array([c[key] for c in cells])
    se = np.array([c[se_key] for c in cells])
    w = 1.0 / se ** 2 if np.all(np.isfinite(se) & (se > 0)) else None
    a, b, c = names
    fixed = {k: v for k, v in cons.fixed.items() if k in names}
    for name, x, what in ((b, lnN, "size"), (c, lnD, "tokens")):
        if np.ptp(x) == 0 and name not in fixed:
            fixed[name] = 0.0
            notes.append(f"every cell at one {what}: {name} = 0")
    if b not in fixed and c not in fixed and abs(np.corrcoef(lnN, lnD)[0, 1]) > 0.999:
        fixed[c] = 0.0
        notes.append(f"size and tokens move together across the cells (one tokens per "
                     f"parameter), so {c} cannot be told from {b}: {c} = 0, and {b} carries "
                     "both")
    X = np.stack([np.ones_like(lnN), lnN, lnD], axis=1)
    sub = Constraints(fixed=fixed, prior={k: v for k, v in cons.prior.items() if k in names},
                      source=cons.source, scale=cons.scale)
    fixed_out.update(fixed)
    if sub:
        return linear_map(X, y, w, names, sub)
    coef, cov, _ = ols(X, y, w, full and len(cells) > 3)
    return coef, cov


TOKENS_TOLERANCE = 0.02  # runs of one size whose tokens differ less than this share one cell


def cell_keys(data: Data) -> list[tuple[float, float]]:
    """Each row's cell: its size, and its tokens grouped with those of the same size within
    :data:`TOKENS_TOLERANCE` (a run's tokens land within a step of its budget, and a step is
    longer at a larger batch); a cell is named by its size and its smallest tokens."""
    import numpy as np

    lnN = np.round(np.log(np.asarray(data["params"], float)), 3)
    lnD = np.log(np.asarray(data["tokens"], float))
    keys: list[tuple[float, float]] = [(0.0, 0.0)] * len(lnN)
    for size in np.unique(lnN):
        rows = np.flatnonzero(lnN == size)
        start = -math.inf
        for i in rows[np.argsort(lnD[rows])]:
            if lnD[i] - start > TOKENS_TOLERANCE:
                start = float(lnD[i])
            keys[i] = (float(size), round(start, 3))
    return keys


def cell_optima(data: Data, draws: int | None = None, seed: int = 0
                ) -> tuple[list[dict[str, Any]], list[str]]:
    """Per (size, tokens) cell: the best rate (and batch, where it varies) from the local fit
    of :mod:`archfit.laws.hyperparameters.lr_window`, with its residual-bootstrap 95% interval from ``draws``
    draws (default :data:`~archfit.laws.hyperparameters.lr_window.DRAWS`; ``seed`` seeds them). Cells with no
    window (too few rates, two batches), no minimum within their window, or losses that differ
    across the grid no more than across seeds are skipped; the notes say which and why, and
    name each cell left without an interval."""
    import numpy as np
    from scipy import stats

    from archfit.laws.hyperparameters import lr_window

    rng = np.random.default_rng(seed)
    batch_all = (np.asarray(data["batch_tokens"], float) if "batch_tokens" in data else None)
    rows: dict[tuple[float, float], list[int]] = {}
    for i, key in enumerate(cell_keys(data)):
        rows.setdefault(key, []).append(i)
    cells, notes = [], []
    for key in sorted(rows):
        idx = np.array(rows[key])
        N, D = float(np.median(data["params"][idx])), float(np.median(data["tokens"][idx]))
        lr = np.asarray(data["lr"], float)[idx]
        loss = np.asarray(data["loss"], float)[idx]
        batch = batch_all[idx] if batch_all is not None else None
        if batch is not None and not np.all(np.isfinite(batch)):
            batch = None
        where = f"cell N {N:.3g}, D {D:.3g}"
        window, why = lr_window.choose(lr, batch, loss)
        if window is None:
            notes.append(f"{where}: {why}: skipped")
            continue
        groups = list(lr_window.grid_points(lr, batch, loss).values())
        if any(len(g) > 1 for g in groups) and len(groups) > 1:
            p_rate = float(stats.f_oneway(*groups).pvalue)
            if not p_rate <= RATE_MATTERS_LEVEL:
                notes.append(f"{where}: the loss does not measurably depend on the rate (its "
                             f"spread across rates against that across seeds: p = {p_rate:.2g}"
                             "): skipped")
                continue
        opt, why = lr_window.fit(window, rng, draws=draws or lr_window.DRAWS)
        if opt is None:
            notes.append(f"{where}: {why}: skipped")
            continue
        if opt.why_no_interval:
            notes.append(f"{where}: {opt.why_no_interval}")
        try:
            optimum = lr_window.summary(window, opt)
        except ArithmeticError:  # an end past what a float holds: not a number to weigh
            notes.append(f"{where}: its optimum's interval reaches past what a number holds "
                         "(the loss is too flat around the best run): skipped")
            continue
        best = int(np.argmin(loss))
        cells.append({"key": key, "params": N, "tokens": D, **optimum,
                      "best_run_lr": float(lr[best]),
                      "best_run_batch": float(batch[best]) if batch is not None else None,
                      "loss_min": float(loss.min()), "rates": sorted(set(lr.tolist()))})
    return cells, notes
