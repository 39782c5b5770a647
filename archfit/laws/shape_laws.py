"""Laws that predict an optimal shape: Levine et al.'s depth-width relation and the ff ratio."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from archfit._lazy import lazy

np = lazy("numpy")

from archfit.errors import FitError
from archfit.laws.base import Data, Estimate, Law, derived_name, register


def best_per_shape(data: Data, cls: np.ndarray, key: str) -> list[dict[str, Any]]:
    """One point per (size class, shape): mean over seeds, then the best learning rate."""
    cols = [c for c in ("n_layer", "d_model", "d_ff") if c in data]
    rows: dict[tuple, dict[tuple, list[float]]] = {}
    for i in range(len(data["loss"])):
        shape_key = (int(cls[i]),) + tuple(float(data[c][i]) for c in cols)
        lr = float(data["lr"][i]) if "lr" in data else 0.0
        rows.setdefault(shape_key, {}).setdefault((lr,), []).append(float(data["loss"][i]))
    out = []
    for shape_key, by_lr in rows.items():
        means = {lr: float(np.mean(v)) for lr, v in by_lr.items()}
        best_lr = min(means, key=means.get)  # type: ignore[arg-type]
        rec = {"cls": shape_key[0], "loss": means[best_lr], "lr": best_lr[0]}
        rec.update({c: shape_key[1 + j] for j, c in enumerate(cols)})
        m = (cls == shape_key[0])
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


def _ols(X: np.ndarray, y: np.ndarray, w: np.ndarray | None, full: bool
         ) -> tuple[np.ndarray, np.ndarray | None, Any]:
    if not full:
        if w is not None:
            sw = np.sqrt(w)
            coef, *_ = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)
        else:
            coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        return coef, None, None
    import statsmodels.api as sm

    res = sm.WLS(y, X, weights=w).fit() if w is not None else sm.OLS(y, X).fit()
    cov = np.asarray(res.cov_params()) if len(y) > X.shape[1] else None
    return np.asarray(res.params), cov, res


@register
class Levine(Law):
    name = "levine"
    formula = ("ln d_model* = a + b * n_layer*,  with N = 12 * n_layer * d_model^2  "
               "[Levine et al. 2020, 'Limits to Depth Efficiencies of Self-Attention']")
    description = ("Per size class, the optimal depth from a quadratic fit of loss against ln "
                   "depth (best LR per shape, mean over seeds); then the Levine relation between "
                   "optimal depth and width, fitted with statsmodels (WLS by the optima's "
                   "variance when every class has one, else OLS). Also depth-efficiency "
                   "crossovers: the size at which a deeper model starts to win.")
    columns = ("loss", "params", "n_layer")
    param_names = ("a", "b")
    min_points = 6
    kind = "shape"
    default_targets = (1e9, 175e9, 1e12)

    def classes(self, data: Data) -> np.ndarray:
        from archfit.tables import size_classes

        return size_classes(data["params"], data.get("target_params"))

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        if len(np.unique(data["n_layer"])) < 3:
            raise FitError("levine needs at least 3 different depths per size class; all runs "
                           f"have depths {sorted(set(data['n_layer'].astype(int).tolist()))}")
        cls = self.classes(data)
        if len(np.unique(cls)) < 2:
            raise FitError("levine needs at least 2 size classes (parameter budgets); the runs "
                           "form only one")
        points = best_per_shape(data, cls, "n_layer")
        optima, notes = class_optima(points, "n_layer")
        if len(optima) < 2:
            raise FitError(f"levine needs an interior optimum depth in at least 2 size classes, "
                           f"found {len(optima)}" + (f" ({notes[0]})" if notes else ""))
        N = np.array([o["params"] for o in optima])
        Ls = np.array([o["opt"] for o in optima])
        ln_d = 0.5 * np.log(N / (12 * Ls))
        se = np.array([o["log_opt_se"] for o in optima])
        X = np.stack([np.ones_like(Ls), Ls], axis=1)
        w = None
        if np.all(np.isfinite(se)) and np.all(se > 0):
            # var(ln d*) = var(x*)/4 to first order (ln d* = ln(N/12)/2 - x*/2)
            w = 1.0 / (0.25 * se**2)
        coef, cov, res = _ols(X, ln_d, w, full and len(optima) > 2)
        extra: dict[str, Any] = {"notes": notes}
        if full:
            for o, d in zip(optima, np.exp(ln_d)):
                o["d_model_opt"] = float(d)
            extra["classes"] = optima
            extra["curvature"] = float(np.mean([o["curvature"] for o in optima]))
            extra["weighted"] = w is not None
            extra["crossovers"] = depth_crossovers(points)
            q = np.polyfit(np.log(N), Ls, 1) if len(N) >= 2 else [math.nan, math.nan]
            extra["depth_vs_logN"] = {"formula": "n_layer* = p + q ln N", "p": float(q[1]),
                                      "q": float(q[0])}
            extra["residual_space"] = "ln d_model*"
            if res is not None:
                extra["statsmodels"] = {"se": np.sqrt(np.diag(cov)).tolist()
                                        if cov is not None else None,
                                        "rsquared": float(res.rsquared) if len(N) > 2 else None}
        return Estimate(coef, cov, extra)

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        cl = extra.get("classes") or []
        obs = np.array([math.log(c["d_model_opt"]) for c in cl])
        fit = np.array([params["a"] + params["b"] * c["opt"] for c in cl])
        return obs, fit

    @staticmethod
    def optimal_depth(params: Mapping[str, float], N: float | np.ndarray) -> np.ndarray:
        """Solve 0.5 ln(N / (12 L)) = a + b L for L (monotone in L; Newton from L=10)."""
        a, b = params["a"], params["b"]
        N = np.atleast_1d(np.asarray(N, float))
        L = np.full_like(N, 10.0)
        for _ in range(100):
            f = 0.5 * np.log(N / (12 * L)) - a - b * L
            fp = -0.5 / L - b
            step = f / fp
            L = np.clip(L - step, 1e-6, None)
            if np.all(np.abs(step) < 1e-10 * np.maximum(1, L)):
                break
        return L

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        """The optimal (real-valued) depth at ``params`` = N (non-embedding)."""
        return self.optimal_depth(params, np.asarray(data["params"], float))

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        out = {}
        for N in targets:
            L = float(self.optimal_depth(params, N)[0])
            out[derived_name("n_layer_opt", N)] = L
            out[derived_name("d_model_opt", N)] = math.exp(params["a"] + params["b"] * L)
        return out

    def heldout(self, data: Data) -> dict[str, Any]:
        cls = self.classes(data)
        top = cls.max()
        test = {k: v[cls == top] for k, v in data.items()}
        train = {k: v[cls != top] for k, v in data.items()}
        try:
            est = self.fit_point(train, full=False)
            opt, _ = class_optima(best_per_shape(test, np.zeros(len(test["loss"]), int),
                                                 "n_layer"), "n_layer")
            if not opt:
                raise FitError("the largest size class has no interior optimum depth")
        except FitError as e:
            return {"ok": False, "reason": f"held-out fit failed: {e}"}
        p = dict(zip(self.param_names, est.params))
        pred = float(self.optimal_depth(p, opt[0]["params"])[0])
        return {"ok": True, "held_out_class_params": opt[0]["params"],
                "n_layer_opt_measured": opt[0]["opt"], "n_layer_opt_predicted": pred,
                "rel_error": pred / opt[0]["opt"] - 1}


def depth_crossovers(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each pair of depths seen in >= 2 size classes: fit ln loss = u + v ln N per depth and
    report the N where the deeper line drops below the shallower one."""
    by_depth: dict[int, list[tuple[float, float]]] = {}
    for p in points:
        by_depth.setdefault(int(p["n_layer"]), []).append((p["params"], p["loss"]))
    lines = {}
    for L, pts in by_depth.items():
        Ns = np.array([q[0] for q in pts])
        if len(pts) < 2 or Ns.max() < Ns.min() * 1.25:
            continue
        v, u = np.polyfit(np.log(Ns), np.log([q[1] for q in pts]), 1)
        lines[L] = (u, v, float(Ns.min()), float(Ns.max()))
    out = []
    depths = sorted(lines)
    for i, L1 in enumerate(depths):
        for L2 in depths[i + 1:]:
            u1, v1, lo1, hi1 = lines[L1]
            u2, v2, lo2, hi2 = lines[L2]
            if v2 >= v1:  # the deeper model does not improve faster with size
                out.append({"shallow": L1, "deep": L2, "crossover_params": None,
                            "note": "deeper never overtakes in the fitted range of slopes"})
                continue
            lnN = (u2 - u1) / (v1 - v2)
            N = float(math.exp(lnN)) if lnN < 700 else math.inf
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            out.append({"shallow": L1, "deep": L2, "crossover_params": N,
                        "extrapolated": not (lo <= N <= hi)})
    return out


@register
class FFRatio(Law):
    name = "ff-ratio"
    formula = ("ln r* = a + b * ln N,  r* = the best d_ff / d_model per size class "
               "(quadratic fit of loss vs ln r)")
    description = "The best MLP expansion ratio per size class and its trend with size."
    columns = ("loss", "params", "d_model", "d_ff")
    param_names = ("a", "b")
    min_points = 6
    kind = "shape"
    default_targets = (1e9, 1e12)

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        cls = self.classes(data)
        if len(np.unique(np.round(data["d_ff"] / data["d_model"], 3))) < 3:
            raise FitError("ff-ratio needs at least 3 different d_ff/d_model ratios")
        points = best_per_shape(data, cls, "ff_ratio")
        optima, notes = class_optima(points, "ff_ratio")
        if not optima:
            raise FitError("ff-ratio found no size class with an interior optimum ratio"
                           + (f" ({notes[0]})" if notes else ""))
        N = np.array([o["params"] for o in optima])
        y = np.array([o["log_opt"] for o in optima])
        extra: dict[str, Any] = {"notes": notes, "residual_space": "ln ff_ratio*"}
        if len(optima) == 1:
            coef, cov = np.array([y[0], 0.0]), None
            notes.append("one size class: the ratio is taken as constant (b = 0)")
        else:
            X = np.stack([np.ones_like(N), np.log(N)], axis=1)
            coef, cov, _ = _ols(X, y, None, full and len(optima) > 2)
        if full:
            extra["classes"] = optima
        return Estimate(coef, cov, extra)

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        cl = extra.get("classes") or []
        obs = np.array([c["log_opt"] for c in cl])
        fit = np.array([params["a"] + params["b"] * math.log(c["params"]) for c in cl])
        return obs, fit

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        return np.exp(params["a"] + params["b"] * np.log(np.asarray(data["params"], float)))

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        return {derived_name("ff_ratio_opt", N): float(math.exp(params["a"] + params["b"]
                                                                * math.log(N)))
                for N in targets}

    def heldout(self, data: Data) -> dict[str, Any]:
        return {"ok": False, "reason": "not defined for ff-ratio (one optimum per class)"}
