"""The numeric toolbox the laws share (numpy at the top; never on a cold path): the data checks,
size classes and run groups, per-size-class quadratic optima, OLS/WLS and the constrained
linear solve, and the scatter of runs about a law (the optimizers are in
:mod:`archfit.laws.optimize`). It imports nothing from the
laws, so a law module and the fitting driver can both use it without a cycle."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from archfit.errors import FitError, FitInputError

Data = dict[str, Any]  # column name -> numpy array (as in archfit.laws.base)

# columns that name *what* was trained (a run is one value of these, seen at several token counts)
RUN_IDENTITY = ("params", "n_layer", "d_model", "d_ff", "n_head", "target_params", "lr", "seed")


def finite_positive(name: str, values: Any) -> None:
    v = np.asarray(values, dtype=float)
    bad = ~np.isfinite(v) | (v <= 0)
    if bad.any():
        raise FitInputError(f"column {name!r} has {int(bad.sum())} missing, non-finite or "
                            "non-positive value(s); drop or fix those rows")


def columns(frame: Any) -> Data:
    """A polars frame's columns as numpy arrays: numbers as floats, text as it is."""
    out: Data = {}
    for c in frame.columns:
        arr = frame[c].to_numpy()
        out[c] = arr if arr.dtype.kind in "OUS" else arr.astype(float)
    return out


def prepare(law: Any, frame: Any) -> Data:
    """The frame's columns as numpy arrays, checked for what ``law`` needs."""
    missing = [c for c in law.columns if c not in frame.columns]
    if missing:
        raise FitInputError(
            f"law {law.name!r} needs column(s) {', '.join(missing)}; have "
            f"{', '.join(frame.columns)}; map foreign names with --map {missing[0]}=COLUMN")
    data = columns(frame)
    for c in law.columns:
        finite_positive(c, data[c])
    if law.params_column != "params":  # the size the law reads (the MoE laws: active)
        data["params"] = data[law.params_column]
    n = len(data["loss"])
    if n < law.min_points:
        raise FitError(f"law {law.name!r} needs at least {law.min_points} runs, got {n}; "
                       "add runs or choose a simpler law")
    return data


# sizes within this fraction of a class's smallest run are "the same size" (one size class);
# anchored at the class's first member, so sizes 1.19x apart never chain into one class
# runs within 2% of a class's smallest run are one size: a planned size lands within a width
# step of its target (~1-2% for widths in multiples of 64), while real grids space sizes >= 10%
SIZE_TOLERANCE = 0.02


def size_classes(params: Any, target: Any = None, tol: float = SIZE_TOLERANCE) -> np.ndarray:
    """Integer size-class labels (0 = smallest). Uses ``target`` (the planned size) when given,
    else sorted parameter counts: a run joins the current class when it is within ``tol`` of
    the class's *smallest* run (not of its neighbour, so a dense ladder of sizes stays a ladder
    of classes), and opens a new one otherwise."""
    params = np.asarray(params, dtype=float)
    if target is not None:
        t = np.asarray(target, dtype=float)
        if np.all(np.isfinite(t)):
            _, labels = np.unique(t, return_inverse=True)
            return labels.ravel()
    order = np.argsort(params, kind="stable")
    labels = np.empty(len(params), dtype=int)
    cls, anchor = -1, None
    for i in order:
        if anchor is None or params[i] > anchor * (1 + tol):
            cls, anchor = cls + 1, params[i]
        labels[i] = cls
    return labels


def class_labels(data: Data) -> np.ndarray:
    """The size classes the fit fixed once for its table (column ``size_class``), else the
    default ones; every check (size count, held-out split, span) reads the same labels."""
    if "size_class" in data:
        return np.asarray(data["size_class"]).astype(int)
    return size_classes(data["params"], data.get("target_params"))


def subset(data: Data, mask: np.ndarray) -> Data:
    return {k: v[mask] for k, v in data.items()}


def varies(x: np.ndarray, rel: float = 0.05) -> bool:
    return bool(np.max(x) > np.min(x) * (1 + rel))


def nnls_relative(M: np.ndarray, L: np.ndarray) -> tuple[float, np.ndarray]:
    """The non-negative coefficients of the columns of ``M`` (one row per run) that fit ``L``
    in relative error, the columns scaled for conditioning (scipy's NNLS on the rows over L):
    (the sum of squared relative errors, the coefficients). The inner solve of every
    variable-projection fit (chinchilla-varpro, the MoE laws)."""
    from scipy.optimize import nnls

    sc = np.abs(M).max(0)
    sc[sc == 0] = 1
    coef, _ = nnls(M / sc / L[:, None], np.ones_like(L))
    coef = coef / sc
    r = (M @ coef - L) / L
    return float(r @ r), coef


def log_cols(data: Data, names: Sequence[str]) -> np.ndarray:
    return np.stack([np.log(data[n]) for n in names], axis=1)


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
    xs = -c1 / (2 * c2)  # the vertex: where dy/dx = c1 + 2 c2 x = 0
    dof = len(x) - 3
    se = math.nan
    if dof > 0:
        r = y - X @ coef
        s2 = float(r @ r) / dof
        try:
            V = s2 * np.linalg.inv(X.T @ X)  # OLS covariance of (c0, c1, c2)
            # delta method: the gradient of x* = -c1 / (2 c2) in (c0, c1, c2)
            g = np.array([0.0, -1 / (2 * c2), c1 / (2 * c2 * c2)])
            se = float(np.sqrt(max(g @ V @ g, 0.0)))
        except np.linalg.LinAlgError:
            pass
    return float(xs), se, float(c2), coef


def log_minimum(x: np.ndarray, y: np.ndarray, margin: float
                ) -> tuple[tuple[float, float, float, np.ndarray], str | None]:
    """(:func:`quadratic_optimum` of ``y`` against the log values ``x``, why it is not a
    usable minimum: ``"none"`` where the parabola has no interior minimum, ``"beyond"`` where
    its minimum lies more than ``margin`` outside the values tried, None where it is)."""
    fitted = quadratic_optimum(x, y)
    xs = fitted[0]
    if not math.isfinite(xs):
        return fitted, "none"
    if xs < x.min() - margin or xs > x.max() + margin:
        return fitted, "beyond"
    return fitted, None


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
        (xs, se, c2, coef), why = log_minimum(x, y, margin)
        if why == "none":
            notes.append(f"size class N≈{N:.3g}: loss has no interior minimum in {key} "
                         "(not convex), skipped")
            continue
        if why == "beyond":
            side = "above" if xs > x.max() else "below"
            notes.append(f"size class N≈{N:.3g}: the optimum {key} lies far {side} the values "
                         "tried, skipped; widen the grid")
            continue
        optima.append({"params": N, "log_opt": xs, "log_opt_se": se, "opt": math.exp(xs),
                       "curvature": c2, "loss_min": float(y.min()), "n_points": len(pts),
                       "coef": coef.tolist(),
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

    # statsmodels' annotation says a float weight; it takes an array (and documents one)
    res = (sm.WLS(y, X, weights=w).fit()  # type: ignore[arg-type]
           if w is not None else sm.OLS(y, X).fit())
    cov = np.asarray(res.cov_params()) if len(y) > X.shape[1] else None
    return np.asarray(res.params), cov, res


def linear_map(X: np.ndarray, y: np.ndarray, w: np.ndarray | None, names: Sequence[str],
               cons: Any) -> tuple[np.ndarray, np.ndarray]:
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
    sw = np.sqrt(np.asarray(w, float))
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

def run_groups(data: Data, by: Sequence[str] | None = None) -> tuple[np.ndarray, str]:
    """Bootstrap units, as (integer label per row, what a unit is). Rows that are checkpoints
    of one training run belong together: a unit is one ``run_id`` when the table has that
    column; else one shape (and seed, lr), so that the rows of one shape at several token
    counts stay together; rows with no shape columns are one separately trained model each.
    ``by`` (``--group COL ...``) overrides both."""
    n = len(data["loss"])
    if by:
        missing = [c for c in by if c not in data]
        if missing:
            raise FitInputError(f"--group {missing[0]}: no such column; columns are "
                                f"{', '.join(sorted(data))}")
        cols, unit = list(by), "group (rows sharing " + ", ".join(by) + ")"
    elif "run_id" in data:
        cols, unit = ["run_id"], "training run (run_id)"
    elif "n_layer" in data and ("d_model" in data or "params" in data):
        cols = [c for c in RUN_IDENTITY if c in data]
        unit = "training run (rows of one " + ", ".join(cols) + " at several token counts)"
    else:
        return np.arange(n), "row (each row a separately trained model)"
    keys: dict[tuple, int] = {}
    labels = np.empty(n, dtype=int)
    for i in range(n):
        k = tuple(_key(data[c][i]) for c in cols)
        labels[i] = keys.setdefault(k, len(keys))
    if len(keys) == n and not by and "run_id" not in data:
        return labels, "row (each row a separately trained model)"
    return labels, unit


def _key(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(v) else round(float(v), 9)
    return v


def run_scatter(resid: np.ndarray, groups: np.ndarray, n_params: int) -> dict[str, float]:
    """The scatter of runs about a law, from its residuals (log space): ``between`` (sd of a
    run's mean offset, estimated from one mean per run, the independent unit) and ``within``
    (sd of a checkpoint about its run's offset). Degrees of freedom are counted in runs: the
    fitted parameters use up ``n_params`` of them (at most half)."""
    resid = np.asarray(resid, float)
    uniq, inv, counts = np.unique(groups, return_inverse=True, return_counts=True)
    G, n = len(uniq), len(resid)
    means = np.bincount(inv, weights=resid) / counts  # each run's mean offset from the law
    within = resid - means[inv]
    s2_w = float(within @ within) / (n - G) if n > G else 0.0  # one-way ANOVA's within term
    # the law used up n_params of the runs' degrees of freedom (never more than half: a law
    # with as many parameters as runs would leave no scatter to estimate)
    dof = max(G - n_params, G / 2.0, 1.0)
    s2_means = float(means @ means) / dof
    # a run mean's variance is between + within / n_run: take the within part off
    s2_b = max(s2_means - s2_w * float(np.mean(1.0 / counts)), 0.0)
    return {"between": math.sqrt(s2_b), "within": math.sqrt(s2_w), "n_units": int(G),
            "n_rows": int(n), "dof": float(dof)}


def heldout_split(data: Data, frac: float = 0.2) -> tuple[np.ndarray, list[float]]:
    """The rows of the largest ~``frac`` of the size classes (at least 2, never more than a
    third of them), as (test mask, the held-out sizes: each class's median N)."""
    N = np.asarray(data["params"], float)
    key = class_labels(data)
    sizes = np.unique(key)  # labels grow with size
    # at least 2 classes (one held-out size says nothing of a trend), at most a third (the
    # fit keeps two thirds of the sizes to extrapolate from)
    k = min(max(2, int(round(frac * len(sizes)))), len(sizes) // 3)
    if k < 1:
        return np.zeros(len(N), bool), []
    top = sizes[-k:]
    mask = np.isin(key, top)
    return mask, sorted({float(np.median(N[key == t])) for t in top})


def prediction_band(law: Any, params: Any, draws: Sequence[Any], scatter: Any,
                    data: Mapping[str, Any], level: float, widen: float = 1.0, reach: Any = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(predicted, low, high) loss for the rows of ``data``: a ``level`` prediction interval
    for a *new run* there. It adds, in log space, the parameter uncertainty (the percentile band
    of the prediction over ``draws``, the bootstrap's parameter dicts) and the scatter of runs
    about the law (``scatter``: between-run and within-run sd, from :func:`run_scatter`; its
    quantile is Student's t with the scatter's degrees of freedom, counted in runs). ``widen``
    scales both half-widths (the held-out check's calibration, :func:`conformal_factor`).
    ``reach`` (:func:`extrapolation_rate`'s record) adds, beyond the sizes that calibration
    saw, the discrepancy it measured per unit of log size, growing linearly with the distance:
    a misfit exponent misses by an amount that grows with ln N."""
    from scipy.stats import t as student_t

    if not 0 < level < 1:
        raise FitInputError(f"interval must be between 0 and 1 (e.g. 0.95), got {level}")
    c = np.log(np.asarray(law.predict(params, data), float))
    # a new run's own deviation: between-run and within-run scatter add in quadrature, at
    # Student's t for the runs' degrees of freedom (no dof: the normal quantile)
    z = float(student_t.ppf(0.5 + level / 2, (scatter or {}).get("dof") or 1e6))
    s = math.hypot((scatter or {}).get("between", 0.0), (scatter or {}).get("within", 0.0))
    dlo = dhi = np.zeros_like(c)
    if len(draws):
        with np.errstate(all="ignore"):
            S = np.stack([np.log(np.asarray(law.predict(p, data), float)) for p in draws])
        S[~np.isfinite(S)] = np.nan
        ok = np.isfinite(S).sum(0) >= 10  # a percentile of fewer than 10 draws is noise
        q_lo, q_hi = np.nanpercentile(np.where(ok, S, 0.0), [50 * (1 - level),
                                                              50 * (1 + level)], axis=0)
        dlo = np.where(ok, np.clip(c - q_lo, 0, None), 0.0)
        dhi = np.where(ok, np.clip(q_hi - c, 0, None), 0.0)
    # parameter and run uncertainty are independent: half-widths add in quadrature, per side
    extra = np.zeros_like(c)
    if reach and reach.get("rate") and "params" in data:
        d = np.log(np.asarray(data["params"], float) / reach["params_max"]) - reach["distance"]
        extra = reach["rate"] * np.clip(d, 0, None)
    lo = c - widen * np.sqrt(dlo ** 2 + (z * s) ** 2) - extra
    hi = c + widen * np.sqrt(dhi ** 2 + (z * s) ** 2) + extra
    return np.exp(c), np.exp(lo), np.exp(hi)


def extrapolation_rate(pred: np.ndarray, lo: np.ndarray, hi: np.ndarray, actual: np.ndarray,
                       N: np.ndarray, N_fit_max: float, level: float) -> dict[str, float]:
    """How fast a law's miss grows beyond its data, from a held-out check: each held-out row's
    miss beyond its interval per unit of ln N past the largest size fitted, at the ``level``
    conformal rank (0 when the intervals covered); and the median distance the check reached.
    :func:`prediction_band` adds ``rate`` per unit of ln N beyond that distance past
    ``params_max``, which the caller sets: the largest size the fit it widens has seen."""
    c, a = np.log(pred), np.log(np.asarray(actual, float))
    half = np.where(a >= c, np.log(hi) - c, c - np.log(lo))
    d = np.log(np.asarray(N, float) / N_fit_max)
    ok = d > 0
    if not ok.any():
        return {}
    r = np.sort(np.clip(np.abs(a - c) - half, 0, None)[ok] / d[ok])
    k = min(len(r), int(math.ceil((len(r) + 1) * level)))
    return {"rate": float(r[k - 1]), "distance": float(np.median(d[ok]))}


def conformal_factor(pred: np.ndarray, lo: np.ndarray, hi: np.ndarray, actual: np.ndarray,
                     level: float, groups: np.ndarray | None = None) -> float:
    """How much the intervals must widen to cover ``level`` of the held-out runs (split
    conformal calibration in log space, on the side each row fell): the ``level`` quantile of
    |log actual - log predicted| / half-width, at least 1 (intervals are never narrowed). The
    exchangeable unit is a training run where ``groups`` labels the rows, scored by its worst
    checkpoint (a run is covered when all of it is; its checkpoints are not independent, and
    a quantile over them would count one run many times), else a row."""
    c, a = np.log(pred), np.log(np.asarray(actual, float))
    half = np.where(a >= c, np.log(hi) - c, c - np.log(lo))
    ok = half > 0
    if not ok.any():
        return 1.0
    score = np.abs(a - c)[ok] / half[ok]
    if groups is not None:
        g = np.asarray(groups)[ok]
        score = np.array([score[g == u].max() for u in np.unique(g)])
    r = np.sort(score)
    n = len(r)  # the finite-sample conformal quantile: rank ceil((n + 1) level)
    k = min(n, int(math.ceil((n + 1) * level)))
    return max(1.0, float(r[k - 1]))


def band_report(pred: np.ndarray, lo: np.ndarray, hi: np.ndarray, actual: np.ndarray
                ) -> dict[str, Any]:
    """How predictions with intervals did against what happened: coverage, mean and RMS
    relative error, the mean relative half-width of the intervals, and whether the mean error
    (in log space) lies inside the typical interval."""
    a = np.asarray(actual, float)
    rel = pred / a - 1
    log_err = float(np.mean(np.log(pred) - np.log(a)))
    half = float(np.mean((np.log(hi) - np.log(lo)) / 2))
    return {"coverage": float(np.mean((lo <= a) & (a <= hi))),
            "mean_rel_error": float(np.mean(rel)),
            "rms_rel_error": float(np.sqrt(np.mean(rel ** 2))),
            "mean_halfwidth_rel": math.expm1(half),
            "within_interval": bool(abs(log_err) <= half)}


def lack_of_fit(resid: np.ndarray, data: Mapping[str, Any]) -> float | None:
    """The p-value of an F test of a fit's log residuals (centred) on its rows' standardized
    log size, tokens and depth (those that vary), their squares and products (Ramsey's RESET
    test in spirit): small where the residuals trend over the features, about uniform where
    they are noise. None with fewer than 3 residual degrees of freedom or nothing that varies."""
    from itertools import combinations_with_replacement

    from scipy import stats

    r = np.asarray(resid, float)
    if not len(r) or not np.isfinite(r).all():
        return None
    r = r - r.mean()
    logs = [np.log(np.asarray(data[c], float)) for c in ("params", "tokens", "n_layer")
            if c in data]
    varying = [x for x in logs if np.ptp(x) > 0]
    if not varying:
        return None
    X = np.stack(varying, axis=1)
    X = (X - X.mean(0)) / X.std(0)
    m = X.shape[1]
    A = np.column_stack([np.ones(len(r))] + [X[:, i] for i in range(m)]
                        + [X[:, i] * X[:, j]
                           for i, j in combinations_with_replacement(range(m), 2)])
    n, q = len(r), A.shape[1] - 1
    if n - q - 1 < 3:
        return None
    beta = np.linalg.lstsq(A, r, rcond=None)[0]
    rss, tss = float(((r - A @ beta) ** 2).sum()), float((r ** 2).sum())
    if rss <= 0:
        return 0.0 if tss > 0 else 1.0
    return float(stats.f.sf(((tss - rss) / q) / (rss / (n - q - 1)), q, n - q - 1))
