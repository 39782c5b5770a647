"""Optima measured in the data, beside a law's: each shape's best run, and per size class the
minimum of a quadratic in log depth (or log ff ratio) through the runs around the best."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


Data = dict[str, Any]  # column name -> numpy array (as in archfit.laws.base)


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
