"""The fitting machinery (numpy at the top: this module is never on a cold path): the driver
:func:`fit` (point estimate, bootstrap, diagnostics), the shared numerical pieces the laws use
(Huber on log-sum-exp, per-size-class quadratic optima, OLS/WLS) and the data checks.

Long (over 600 lines) because it holds both the driver and the numeric toolbox the laws share;
the Fit/Law split of issue 17 moves the toolbox into a module that imports nothing from the
laws, which also ends the base <-> fitting import cycle."""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Sequence

import numpy as np

from archfit.errors import FitError, FitInputError
from archfit.laws.artifact import Fit
from dataclasses import replace

from archfit.laws.base import HUBER_DELTA, Constraints, Data, Estimate, Law, get_law
from archfit.store import RunTable, read_runs



# ============================================================================ data
def finite_positive(name: str, values: Any) -> None:
    v = np.asarray(values, dtype=float)
    bad = ~np.isfinite(v) | (v <= 0)
    if bad.any():
        raise FitInputError(f"column {name!r} has {int(bad.sum())} missing, non-finite or "
                            "non-positive value(s); drop or fix those rows")


def prepare(law: Law, frame: Any) -> Data:
    """The frame's columns as numpy arrays, checked for what ``law`` needs."""
    missing = [c for c in law.columns if c not in frame.columns]
    if missing:
        raise FitInputError(
            f"law {law.name!r} needs column(s) {', '.join(missing)}; have "
            f"{', '.join(frame.columns)}; map foreign names with --map {missing[0]}=COLUMN")
    data: Data = {}
    for c in frame.columns:
        arr = frame[c].to_numpy()
        data[c] = arr if arr.dtype.kind in "OUS" else arr.astype(float)
    for c in law.columns:
        finite_positive(c, data[c])
    n = len(data["loss"])
    if n < law.min_points:
        raise FitError(f"law {law.name!r} needs at least {law.min_points} runs, got {n}; "
                       "add runs or choose a simpler law")
    return data


def size_classes(params: Any, target: Any = None, rel_gap: float = 0.25) -> np.ndarray:
    """Integer size-class labels (0 = smallest). Uses ``target`` (the planned size) when given,
    else groups sorted parameter counts, starting a new class at every gap above ``rel_gap``."""
    params = np.asarray(params, dtype=float)
    if target is not None:
        t = np.asarray(target, dtype=float)
        if np.all(np.isfinite(t)):
            _, labels = np.unique(t, return_inverse=True)
            return labels.ravel()
    order = np.argsort(params)
    labels = np.empty(len(params), dtype=int)
    cls, prev = 0, None
    for i in order:
        if prev is not None and params[i] > prev * (1 + rel_gap):
            cls += 1
        labels[i] = cls
        prev = params[i]
    return labels


def bootstrap_groups(data: Data) -> np.ndarray:
    """Bootstrap units: one per shape when several seeds share a shape, else one per run."""
    keys = [k for k in ("params", "n_layer", "d_model", "d_ff", "tokens", "lr") if k in data]
    if "seed" in data and len(np.unique(data["seed"])) > 1 and keys:
        stacked = np.stack([data[k] for k in keys], axis=1)
        _, g = np.unique(stacked, axis=0, return_inverse=True)
        return g.ravel()
    return np.arange(len(data["loss"]))


def subset(data: Data, mask: np.ndarray) -> Data:
    return {k: v[mask] for k, v in data.items()}


def varies(x: np.ndarray, rel: float = 0.05) -> bool:
    return bool(np.max(x) > np.min(x) * (1 + rel))


def log_cols(data: Data, names: Sequence[str]) -> np.ndarray:
    return np.stack([np.log(data[n]) for n in names], axis=1)


def heldout_largest_class(law: Law, data: Data, constraints: Any = None) -> dict[str, Any]:
    """Fit on all but the largest size class, report the error on the largest."""
    cls = law.classes(data)
    top = cls.max()
    train, test = subset(data, cls != top), subset(data, cls == top)
    try:
        if len(train["loss"]) < law.min_points:
            raise FitError("too few runs below the largest size class")
        kw = {"constraints": constraints} if constraints else {}
        est = law.fit_point(train, full=False, **kw)
    except FitError as e:
        return {"ok": False, "reason": f"held-out fit failed: {e}"}
    p = dict(zip(law.param_names, est.params))
    obs = np.log(test["loss"])
    pred = np.log(law.predict(p, test))
    return {"ok": True, "held_out_class_params": float(np.median(test["params"])),
            "n_train": int(len(train["loss"])), "n_test": int(len(obs)),
            "rmse_log": float(np.sqrt(np.mean((obs - pred) ** 2))),
            "mean_rel_error": float(np.mean(np.exp(pred - obs) - 1))}


# ============================================================================ Huber on log loss
class HuberLSE:
    """log L̂ = LSE(a_1 - α_1 x_1, ..., a_k - α_k x_k, e), fitted with the Huber loss on
    log L̂ - log L (Hoffmann et al. 2022, App. D.2; Besiroglu et al. 2024). Parameter vector
    θ = (a_1..a_k, α_1..α_k, e)."""

    def __init__(self, X: np.ndarray, t: np.ndarray, delta: float = HUBER_DELTA):
        self.X, self.t, self.delta = X, t, delta
        self.n, self.k = X.shape

    def _terms(self, theta: np.ndarray) -> np.ndarray:
        k = self.k
        a, al, e = theta[..., :k], theta[..., k:2 * k], theta[..., 2 * k:2 * k + 1]
        U = a[..., None, :] - self.X * al[..., None, :]
        E = np.broadcast_to(e[..., None, :], U.shape[:-1] + (1,))
        return np.concatenate([U, E], axis=-1)

    def _huber(self, r: np.ndarray) -> np.ndarray:
        d = self.delta
        a = np.abs(r)
        return np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))

    def objective(self, theta: np.ndarray) -> float | np.ndarray:
        """Mean Huber loss / δ² (scaled so optimizers see O(1) numbers); vectorized over θ rows."""
        U = self._terms(theta)
        m = U.max(-1)
        lse = m + np.log(np.exp(U - m[..., None]).sum(-1))
        return self._huber(lse - self.t).mean(-1) / (self.delta ** 2)

    def value_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        U = self._terms(theta)
        m = U.max(-1)
        w = np.exp(U - m[:, None])
        s = w.sum(-1)
        p = w / s[:, None]
        r = m + np.log(s) - self.t
        d = self.delta
        scale = 1.0 / (self.n * d * d)
        k = self.k
        wp = np.clip(r, -d, d)[:, None] * p
        g = np.empty(2 * k + 1)
        g[:k] = wp[:, :k].sum(0)
        g[k:2 * k] = -(wp[:, :k] * self.X).sum(0)
        g[2 * k] = wp[:, k].sum()
        return float(self._huber(r).sum() * scale), g * scale

    def minimize(self, starts: np.ndarray, n_polish: int = 4) -> np.ndarray:
        from scipy.optimize import minimize

        starts = np.atleast_2d(starts)
        if len(starts) > n_polish:
            vals = np.concatenate([np.atleast_1d(self.objective(c))
                                   for c in np.array_split(starts, max(1, len(starts) // 256))])
            starts = starts[np.argsort(vals)[:n_polish]]
        best = None
        for s0 in starts:
            res = minimize(self.value_and_grad, s0, jac=True, method="L-BFGS-B",
                           options={"maxiter": 2000, "ftol": 1e-14, "gtol": 1e-10})
            if np.all(np.isfinite(res.x)) and (best is None or res.fun < best.fun):
                best = res
        if best is None:
            raise FitError("the Huber fit did not converge from any starting point")
        return best.x


# ============================================================================ optima per class
def best_per_shape(data: Data, cls: np.ndarray, key: str) -> list[dict[str, Any]]:
    """One point per (size class, shape): mean over seeds, then the best learning rate."""
    cols = [c for c in ("n_layer", "d_model", "d_ff") if c in data]
    rows: dict[tuple, dict[float, list[float]]] = {}
    for i in range(len(data["loss"])):
        shape_key = (int(cls[i]),) + tuple(float(data[c][i]) for c in cols)
        lr = float(data["lr"][i]) if "lr" in data else 0.0
        rows.setdefault(shape_key, {}).setdefault(lr, []).append(float(data["loss"][i]))
    out = []
    for shape_key, by_lr in rows.items():
        means = {lr: float(np.mean(v)) for lr, v in by_lr.items()}
        best_lr = min(means, key=means.__getitem__)
        rec = {"cls": shape_key[0], "loss": means[best_lr], "lr": best_lr}
        rec.update({c: shape_key[1 + j] for j, c in enumerate(cols)})
        m = cls == shape_key[0]
        for j, c in enumerate(cols):
            m &= data[c] == shape_key[1 + j]
        rec["params"] = float(np.mean(data["params"][m]))
        if key == "ff_ratio":
            rec["ff_ratio"] = rec["d_ff"] / rec["d_model"]
        out.append(rec)
    return out


def quadratic_optimum(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, np.ndarray]:
    """Fit y = c0 + c1 x + c2 x²; return (x*, se(x*), c2, coefficients). se by the delta method."""
    X = np.stack([np.ones_like(x), x, x * x], axis=1)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    c0, c1, c2 = coef
    if not c2 > 0:
        return math.nan, math.nan, float(c2), coef
    xs = -c1 / (2 * c2)
    dof = len(x) - 3
    se = math.nan
    if dof > 0:
        r = y - X @ coef
        s2 = float(r @ r) / dof
        try:
            V = s2 * np.linalg.inv(X.T @ X)
            g = np.array([0.0, -1 / (2 * c2), c1 / (2 * c2 * c2)])
            se = float(np.sqrt(max(g @ V @ g, 0.0)))
        except np.linalg.LinAlgError:
            pass
    return float(xs), se, float(c2), coef


def class_optima(points: list[dict[str, Any]], key: str, margin: float = math.log(2)
                 ) -> tuple[list[dict[str, Any]], list[str]]:
    """Per size class: the optimum of loss vs log(``key``) from a quadratic fit."""
    by_cls: dict[int, list[dict[str, Any]]] = {}
    for p in points:
        by_cls.setdefault(p["cls"], []).append(p)
    optima, notes = [], []
    for c in sorted(by_cls):
        pts = by_cls[c]
        N = float(np.median([p["params"] for p in pts]))
        x = np.log([p[key] for p in pts])
        y = np.array([p["loss"] for p in pts])
        if len(np.unique(np.round(x, 9))) < 3:
            notes.append(f"size class N≈{N:.3g}: fewer than 3 distinct {key} values, skipped")
            continue
        xs, se, c2, coef = quadratic_optimum(x, y)
        if not math.isfinite(xs):
            notes.append(f"size class N≈{N:.3g}: loss has no interior minimum in {key} "
                         "(not convex), skipped")
            continue
        if xs < x.min() - margin or xs > x.max() + margin:
            notes.append(f"size class N≈{N:.3g}: the optimum {key} {math.exp(xs):.3g} lies far "
                         "outside the values tried, skipped; widen the grid")
            continue
        optima.append({"params": N, "log_opt": xs, "log_opt_se": se, "opt": math.exp(xs),
                       "curvature": c2, "n_points": len(pts), "coef": coef.tolist(),
                       "min": float(x.min()), "max": float(x.max()),
                       "points": {key: [float(v) for v in np.exp(x)], "loss": y.tolist()}})
    return optima, notes


def ols(X: np.ndarray, y: np.ndarray, w: np.ndarray | None, full: bool
        ) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """(coefficients, covariance, statsmodels result); plain lstsq when not ``full``."""
    if not full:
        sw = np.sqrt(w) if w is not None else np.ones_like(y)
        coef, *_ = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)
        return coef, None, None
    import statsmodels.api as sm

    res = sm.WLS(y, X, weights=w).fit() if w is not None else sm.OLS(y, X).fit()
    cov = np.asarray(res.cov_params()) if len(y) > X.shape[1] else None
    return np.asarray(res.params), cov, res


def linear_map(X: np.ndarray, y: np.ndarray, w: np.ndarray | None, names: Sequence[str],
               cons: Constraints) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares with some coefficients fixed and Gaussian priors on others (the
    posterior mode and covariance). Without absolute weights the data's variance is taken from
    the residuals (or the data-only fit's residual scale when too few points are left)."""
    n, k = X.shape
    if w is None:
        if n > k:
            c, *_ = np.linalg.lstsq(X, y, rcond=None)
            s2 = float(np.sum((y - X @ c) ** 2)) / (n - k)
        else:
            s2 = (cons.scale or 0.05) ** 2
        w = np.full(n, 1.0 / max(s2, 1e-8))
    fixed = [i for i, nm in enumerate(names) if nm in cons.fixed]
    free = [i for i in range(k) if i not in fixed]
    y2 = y - X[:, fixed] @ np.array([cons.fixed[names[i]] for i in fixed]) if fixed else y
    sw = np.sqrt(w)
    A, b = [X[:, free] * sw[:, None]], [y2 * sw]
    for j, i in enumerate(free):
        if names[i] in cons.prior:
            m, sd = cons.prior[names[i]]
            row = np.zeros((1, len(free)))
            row[0, j] = 1.0 / sd
            A.append(row)
            b.append(np.array([m / sd]))
    Am, bm = np.concatenate(A), np.concatenate(b)
    if Am.shape[0] < len(free):
        raise FitError("too few size classes for the free parameters: fix or put a prior on "
                       "more of them")
    cf, *_ = np.linalg.lstsq(Am, bm, rcond=None)
    coef, cov = np.zeros(k), np.zeros((k, k))
    coef[free] = cf
    for i in fixed:
        coef[i] = cons.fixed[names[i]]
    try:
        cov[np.ix_(free, free)] = np.linalg.inv(Am.T @ Am)
    except np.linalg.LinAlgError:
        cov[:] = np.nan
    return coef, cov


# ============================================================================ the driver
def fit(
    frame: Any = None,
    law: str = "chinchilla",
    *,
    paths: Sequence[str] | None = None,
    mapping: dict[str, str] | None = None,
    bootstrap: int = 200,
    seed: int = 0,
    targets: Sequence[float] | None = None,
    heldout: bool = True,
    progress: Callable[[int, int], None] | None = None,
    fix: dict[str, float] | None = None,
    prior: Any = None,
    prior_widths: dict[str, float] | None = None,
    dedupe: bool = False,
) -> Fit:
    """Fit ``law`` to a table of runs (polars or pandas ``frame``, a :class:`RunTable`, or
    files in ``paths``).

    Returns a :class:`Fit` with parameters, 95% CIs (percentile bootstrap over runs, or over
    shapes when several seeds or token counts share one; Wald intervals from the covariance when
    ``bootstrap=0`` and the law has one), derived quantities at ``targets``, and diagnostics
    (RMSE and R² in log space, held-out check on the largest size class, the data's span).

    ``fix`` holds parameters at values (``{"b": 0.0555}``); ``prior`` adds Gaussian priors on
    the parameters this law shares with a published fit or fit artifact (a name, path or
    :class:`Fit`; sd from ``prior_widths`` or from its CI), or is a dict ``{name: (mean, sd)}``.
    The fit records prior, data-only and posterior values side by side.

    Sanity checks stop a fit that cannot be what it claims: exact duplicate rows (drop them
    with ``dedupe``), parameter counts below 1e3 or losses above 20 nats (swapped or mislabelled
    columns), fewer distinct sizes than the law needs; loss growing with N is noted loudly.
    """
    import archfit

    if frame is None and paths is None:
        raise FitInputError("give a frame or paths to fit")
    table = frame if isinstance(frame, RunTable) else read_runs(paths or [], mapping,
                                                                 frame=frame)
    lw = get_law(law)
    if bootstrap < 0:
        raise FitInputError(f"bootstrap must be >= 0, got {bootstrap}")
    cons = constraints_for(lw, fix, prior, prior_widths)
    notes = list(table.notes)
    data = lw.prepare(sane_frame(lw, table, dedupe, notes))
    check_sizes(lw, data)
    targets = list(targets) if targets else list(lw.default_targets)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1), np.errstate(all="ignore"):
        est, cons, data_only = _point(lw, data, cons)
        params = {n: float(v) for n, v in zip(lw.param_names, est.params)}
        f = Fit(law=lw.name, params=params, cov=est.cov.tolist() if est.cov is not None else None,
                derived=lw.derived(params, targets, est.extra), n_points=int(len(data["loss"])),
                diagnostics=_diagnostics(lw, data, params, est, heldout, cons),
                inputs=table.inputs, conventions=_conventions(table), mapping=dict(table.mapping),
                extra={k: v for k, v in est.extra.items() if k not in ("notes",
                                                                         "residual_space")},
                archfit_version=archfit.__version__, prior=_prior_record(cons, data_only))
        _uncertainty(f, lw, data, est, bootstrap, seed, targets, progress, notes, cons)
        f.notes = notes + list(est.extra.get("notes", []))
    return f


def sane_frame(lw: Law, table: RunTable, dedupe: bool, notes: list[str]) -> Any:
    """The table's frame after the checks that stop a fit of data that cannot be what it
    claims (see :func:`fit`); notes what it did."""
    df, src = table.frame, table.sources
    n_dup = df.height - df.unique(maintain_order=True).height
    if n_dup:
        if not dedupe:
            raise FitInputError(f"{n_dup} of {df.height} rows are exact duplicates of other rows; "
                                "they would narrow the CIs without adding evidence; pass "
                                "--dedupe to drop them")
        df = df.unique(maintain_order=True)
        notes.append(f"dropped {n_dup} duplicate row(s) (--dedupe)")
    if "params" in df.columns and df["params"].min() < 1e3:
        raise FitInputError(f"column {src.get('params', 'params')!r} (archfit 'params') has "
                            f"values as small as {df['params'].min():.3g}: not a parameter "
                            "count? Check for swapped columns and map them with --map")
    if "loss" in df.columns and df["loss"].max() > 20:
        raise FitInputError(f"column {src.get('loss', 'loss')!r} (archfit 'loss') has values up "
                            f"to {df['loss'].max():.3g} nats/token: not a loss? Check for "
                            "swapped columns and map them with --map")
    if {"params", "loss"} <= set(df.columns) and df["params"].n_unique() >= 5:
        rho = float(np.corrcoef(df["params"].rank().to_numpy(), df["loss"].rank().to_numpy())[0, 1])
        if rho > 0.5:
            notes.append(f"WARNING: loss grows with N (rank correlation {rho:+.2f}); scaling "
                         "laws expect the opposite: check the columns and the runs")
    return df


def check_sizes(lw: Law, data: Data) -> None:
    """Refuse a law whose parameters need more distinct sizes N than the runs have."""
    if lw.min_sizes and "params" in data:
        n = len(np.unique(np.round(np.log(data["params"]), 2)))  # sizes equal within 1%
        if n < lw.min_sizes:
            raise FitError(f"{lw.name} needs runs at {lw.min_sizes} or more different sizes N to "
                           f"fit its {len(lw.param_names)} parameters; these runs have {n}")


def constraints_for(lw: Law, fix: dict[str, float] | None, prior: Any,
                    widths: dict[str, float] | None) -> Constraints:
    """Check and resolve ``fix`` and ``prior`` into the law's :class:`Constraints`."""
    fix, widths = dict(fix or {}), dict(widths or {})
    if not fix and prior is None:
        return Constraints()
    if not lw.supports_constraints:
        from archfit.laws.base import LAWS

        able = [n for n, x in sorted(LAWS.items()) if x.supports_constraints]
        raise FitInputError(f"law {lw.name!r} takes no --fix/--prior; laws that do: "
                            f"{', '.join(able)}")
    for name in [*fix, *widths]:
        if name not in lw.param_names:
            raise FitInputError(f"{name!r} is not a parameter of {lw.name} "
                                f"({', '.join(lw.param_names)})")
    source, means = "", {}
    if isinstance(prior, dict):
        means = {k: tuple(v) for k, v in prior.items()}
        source = "stated"
    elif prior is not None:
        from archfit.laws.artifact import load_fit

        pf = load_fit(prior)
        source = pf.label
        shared = [n for n in lw.param_names if n in pf.params and n not in fix]
        if not shared:
            raise FitInputError(f"the prior {source} shares no free parameter with {lw.name} "
                                f"({', '.join(lw.param_names)})")
        for n in shared:
            ci = (pf.ci or {}).get(n)
            sd = widths.get(n, (ci[1] - ci[0]) / 3.92 if ci else None)
            if sd is None:
                raise FitInputError(
                    f"the prior {source} carries no uncertainty for {n!r}: state its width, "
                    f"e.g. --prior {source}:" + ",".join(f"{m}=SD" for m in shared))
            means[n] = (pf.params[n], sd)
    for n, (_, sd) in means.items():
        if n not in lw.param_names:
            raise FitInputError(f"{n!r} is not a parameter of {lw.name}")
        if not sd > 0:
            raise FitInputError(f"the prior width of {n!r} must be positive, got {sd}")
    return Constraints(fixed={k: float(v) for k, v in fix.items()},
                       prior={k: (float(m), float(sd)) for k, (m, sd) in means.items()},
                       source=source)


def _point(lw: Law, data: Data, cons: Constraints) -> tuple[Estimate, Constraints, Any]:
    """The point estimate; with constraints, also the data-only fit (None when the data alone
    cannot be fitted) whose residual scale weighs the prior."""
    if not cons:
        return lw.fit_point(data), cons, None
    try:
        alone = lw.fit_point(data, full=False)
        p = dict(zip(lw.param_names, alone.params))
        obs, fitted = lw.residuals(p, data, alone.extra)
        r = obs - fitted
        scale = float(1.4826 * np.median(np.abs(r - np.median(r)))) if len(r) > 2 else None
        cons = replace(cons, scale=scale if scale and scale > 0 else None)
        data_only: Any = p
    except FitError as e:
        data_only = f"the data alone cannot be fitted: {e}"
    return lw.fit_point(data, constraints=cons), cons, data_only


def _prior_record(cons: Constraints, data_only: Any) -> dict[str, Any]:
    if not cons:
        return {}
    return {"source": cons.source, "fixed": cons.fixed,
            "prior": {k: list(v) for k, v in cons.prior.items()},
            "data_only": data_only, "residual_scale": cons.scale}


def _diagnostics(lw: Law, data: Data, params: dict[str, float], est: Estimate,
                 heldout: bool, cons: Constraints) -> dict[str, Any]:
    obs, fitted = lw.residuals(params, data, est.extra)
    resid = obs - fitted
    ss_tot = float(np.sum((obs - obs.mean()) ** 2))
    d: dict[str, Any] = {
        "rmse_log": float(np.sqrt(np.mean(resid ** 2))),
        "r2_log": float(1 - np.sum(resid ** 2) / ss_tot) if ss_tot > 0 else None,
        "residuals": resid.tolist(),
        "fitted_log": fitted.tolist(),
        "residual_space": est.extra.get("residual_space", "log loss"),
        "span": _span(lw, data),
    }
    if heldout:
        d["heldout"] = lw.heldout(data, constraints=cons) if cons else lw.heldout(data)
    return d


def _span(lw: Law, data: Data) -> dict[str, Any]:
    span: dict[str, Any] = {"n_points": int(len(data["loss"]))}
    if "params" in data:
        span.update(params_min=float(np.min(data["params"])),
                    params_max=float(np.max(data["params"])),
                    n_size_classes=int(len(np.unique(lw.classes(data)))))
    if "tokens" in data:
        span.update(tokens_min=float(np.min(data["tokens"])),
                    tokens_max=float(np.max(data["tokens"])))
    return span


def _conventions(table: RunTable) -> dict[str, str]:
    conventions = {"params": f"column {table.sources.get('params', 'params')!r}"}
    if table.sources.get("params") == "params_non_embedding":
        conventions["params"] += " (Kaplan's N: non-embedding parameters)"
    if "tokens" in table.sources:
        src = table.sources["tokens"]
        conventions["tokens"] = ("D = FLOPs / (6 N)" if src.startswith("flops") else
                                 f"column {src!r} (training tokens)")
    conventions["loss"] = f"column {table.sources.get('loss', 'loss')!r} (nats/token)"
    return conventions


def _uncertainty(f: Fit, lw: Law, data: Data, est: Estimate, bootstrap: int, seed: int,
                 targets: list[float], progress: Callable[[int, int], None] | None,
                 notes: list[str], cons: Constraints) -> None:
    """Fill ``f.ci``, ``f.derived_ci`` and ``f.bootstrap``: percentile bootstrap, else Wald."""
    f.ci = {n: None for n in lw.param_names}
    f.derived_ci = {k: None for k in f.derived}
    if bootstrap > 0:
        samples, dsamples, n_failed = bootstrap_fits(lw, data, est, bootstrap, seed, targets,
                                                     progress, cons=cons)
        n_ok = len(samples)
        f.bootstrap = {"n": bootstrap, "n_ok": n_ok, "n_failed": n_failed, "seed": seed,
                       "unit": "shape" if len(np.unique(lw.groups(data))) < len(data["loss"])
                       else "run",
                       "samples": {n: samples[:, i].tolist()
                                   for i, n in enumerate(lw.param_names)} if n_ok else {}}
        if n_ok >= max(10, bootstrap // 4):
            for i, n in enumerate(lw.param_names):
                f.ci[n] = np.percentile(samples[:, i], [2.5, 97.5]).tolist()
            for k in f.derived:
                vals = np.asarray([d.get(k, np.nan) for d in dsamples], dtype=float)
                vals = vals[np.isfinite(vals)]
                if len(vals) >= 10:
                    f.derived_ci[k] = np.percentile(vals, [2.5, 97.5]).tolist()
                    f.bootstrap["samples"][k] = vals.tolist()
        else:
            notes.append(f"only {n_ok} of {bootstrap} bootstrap resamples converged: no "
                         "bootstrap CIs (the fit is fragile; add runs)")
    if est.cov is not None and all(v is None for v in f.ci.values()):
        se = np.sqrt(np.clip(np.diag(est.cov), 0, None))
        for i, n in enumerate(lw.param_names):
            if np.isfinite(se[i]):
                f.ci[n] = [f.params[n] - 1.96 * float(se[i]), f.params[n] + 1.96 * float(se[i])]
        notes.append("CIs are Wald intervals (±1.96 SE from the covariance)")


def bootstrap_fits(lw: Law, data: Data, est: Estimate, n: int, seed: int,
                   targets: Sequence[float], progress: Callable[[int, int], None] | None,
                   workers: int | None = None, cons: Constraints | None = None
                   ) -> tuple[np.ndarray, list, int]:
    """Refit on ``n`` resamples of the bootstrap units (warm-started at the point estimate).
    Resamples are drawn up front from ``seed``, so results do not depend on the worker count;
    with several cores they are spread over processes."""
    rng = np.random.default_rng(seed)
    groups = lw.groups(data)
    uniq = np.unique(groups)
    members = [np.flatnonzero(groups == g) for g in uniq]
    picks = [np.concatenate([members[j] for j in rng.integers(0, len(uniq), len(uniq))])
             for _ in range(n)]
    if workers is None:
        workers = min(os.cpu_count() or 1, 8) if n >= 64 else 1
    chunks = [c for c in np.array_split(np.arange(n), min(n, max(1, workers) * 8)) if len(c)]
    jobs = [(lw.name, data, est.params, [picks[i] for i in c], list(targets), cons)
            for c in chunks]
    results: list[tuple[np.ndarray | None, dict[str, float]]] = []
    for part in _run_chunks(jobs, workers):
        results.extend(part)
        if progress is not None:
            progress(len(results), n)
    ok = [(p, d) for p, d in results if p is not None]
    params = np.asarray([p for p, _ in ok], dtype=float).reshape(-1, len(lw.param_names))
    return params, [d for _, d in ok], len(results) - len(ok)


def _run_chunks(jobs: list[tuple], workers: int) -> Any:
    """Yield each chunk's results in order: over a fork pool when ``workers`` > 1, else (or
    from wherever a broken pool left off) in this process."""
    done = 0
    if workers > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        # workers only run numpy/scipy: fork is safe for them and starts in milliseconds
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        try:
            with ProcessPoolExecutor(max_workers=workers,
                                     mp_context=mp.get_context(method)) as pool:
                for fut in [pool.submit(_boot_chunk, *j) for j in jobs]:
                    part = fut.result()
                    done += 1
                    yield part
        except (BrokenProcessPool, OSError):
            pass  # no usable process pool here: the rest in this process
    for j in jobs[done:]:
        yield _boot_chunk(*j)


def _boot_chunk(law_name: str, data: Data, start: np.ndarray, picks: list[np.ndarray],
                targets: list[float], cons: Constraints | None = None
                ) -> list[tuple[np.ndarray | None, dict[str, float]]]:
    from threadpoolctl import threadpool_limits

    lw = get_law(law_name)
    out: list[tuple[np.ndarray | None, dict[str, float]]] = []
    # the fits are tiny: BLAS threads only contend (3x slower with 2 threads on 2 cores)
    with np.errstate(all="ignore"), threadpool_limits(1):
        for idx in picks:
            try:
                kw = {"constraints": cons} if cons else {}
                e = lw.fit_point(subset(data, idx), start=start, full=False, **kw)
                if not np.all(np.isfinite(e.params)):
                    raise FitError("non-finite")
            except (FitError, np.linalg.LinAlgError, ValueError, FloatingPointError):
                out.append((None, {}))
                continue
            p = dict(zip(lw.param_names, e.params))
            out.append((e.params, lw.derived(p, targets, e.extra)))
    return out
