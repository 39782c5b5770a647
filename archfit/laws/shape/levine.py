"""Levine et al. 2020's depth-width relation: per size class the optimal depth from a quadratic
in ln depth, then ln d_model* = a + b·n_layer* across classes, with N = 12·n_layer·d_model²."""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import (Constraints, Data, Estimate, Figure, MeasuredOptimum, ShapeLaw,
                              register)
from archfit.shapes import SHAPE_LAW_N, kaplan_width

if TYPE_CHECKING:
    import numpy as np

    from archfit.laws.inference.artifact import Fit
    from archfit.shapes import Shape


@functools.lru_cache(maxsize=4096)  # recommend prices each candidate at one (a, b, N)
def optimal_depth(a: float, b: float, N: float) -> float:
    """Solve 0.5 ln(N / (12 L)) = a + b L for L (monotone in L) by Newton's method from L=10."""
    L = 10.0
    for _ in range(100):
        f = math.log(kaplan_width(N, L)) - a - b * L
        step = f / (-0.5 / L - b)
        L = max(L - step, 1e-6)
        if abs(step) < 1e-10 * max(1.0, L):
            break
    return L


def depth_crossovers(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """For each pair of depths seen in >= 2 size classes: fit ln loss = u + v ln N per depth and
    report the N where the deeper line drops below the shallower one."""
    import numpy as np

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
    out: list[dict[str, Any]] = []
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
            out.append({"shallow": L1, "deep": L2, "crossover_params": N,
                        "extrapolated": not (max(lo1, lo2) <= N <= min(hi1, hi2))})
    return out


def draw_loss_vs_depth(fit: Fit, ax: Any, data: Any) -> None:
    """Loss against depth for each size class, the quadratic in ln depth, the optimum marked."""
    import numpy as np

    classes = fit.extra.get("classes") or []
    for i, c in enumerate(classes):
        col = f"C{i % 10}"
        pts = c["points"]
        ax.plot(pts["n_layer"], pts["loss"], "o", color=col,
                label=f"N ≈ {c['params']:.3g}: optimum depth {c['opt']:.1f}")
        x = np.linspace(c["min"] - 0.2, c["max"] + 0.2, 100)
        c0, c1, c2 = c["coef"]
        ax.plot(np.exp(x), c0 + c1 * x + c2 * x * x, "-", color=col, alpha=0.7)
        ax.axvline(c["opt"], color=col, ls=":", alpha=0.8)
    ax.set_xscale("log")
    depths = sorted({d for c in classes for d in c["points"]["n_layer"]})
    if depths:
        ax.set_xticks(depths, labels=[f"{d:g}" for d in depths])
        ax.set_xticks([], minor=True)
    ax.set_xlabel("depth n_layer (log scale)")
    ax.set_ylabel("validation loss (nats/token), best LR per shape")
    if classes:
        ax.legend(fontsize=8)


@register
class Levine(ShapeLaw):
    name = "levine"
    formula = (f"ln d_model* = a + b * n_layer*,  with {SHAPE_LAW_N}  "
               "[Levine et al. 2020, 'Limits to Depth Efficiencies of Self-Attention']")
    description = ("Per size class, the optimal depth from a quadratic fit of loss against ln "
                   "depth (best LR per shape, mean over seeds); then the Levine relation between "
                   "optimal depth and width, fitted with statsmodels (WLS by the optima's "
                   "variance when every class has one, else OLS). Also depth-efficiency "
                   "crossovers: the size at which a deeper model starts to win.")
    columns = ("loss", "params", "n_layer")
    param_names = ("a", "b")
    min_points = 6
    default_targets = (1e9, 175e9, 1e12)
    bounds = {"b": (0.0, None)}  # b <= 0: the optimal depth would not grow with width
    domains = {"b": (0.0, None, True)}
    heldout_limits = (0.25, 0.5)  # relative error of the largest class's optimal depth
    own_figures = (Figure("loss_vs_depth", "Loss vs depth per size class (N = non-embedding "
                          "params)", draw_loss_vs_depth,
                          when=lambda fit: bool(fit.extra.get("classes"))),)

    @staticmethod
    def optimal_depth(params: Mapping[str, float], N: Any) -> np.ndarray:
        """Vectorized optimal depth at N (kept for notebooks; :meth:`optimum` is plain math)."""
        import numpy as np

        Ns = np.atleast_1d(np.asarray(N, float))
        return np.array([optimal_depth(params["a"], params["b"], float(n)) for n in Ns])

    def optimum(self, params: Mapping[str, float], N: float) -> tuple[float, float]:
        L = optimal_depth(params["a"], params["b"], N)
        return L, math.exp(params["a"] + params["b"] * L)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        """The optimal (real-valued) depth at ``params`` = N (non-embedding)."""
        return self.optimal_depth(params, data["params"])

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        """Per-class optimal depths, then the relation between them: OLS/WLS, or its posterior
        under --fix/--prior (one size class is then enough)."""
        import numpy as np

        from archfit.laws.shape.optima import best_per_shape, class_optima
        from archfit.laws.inference.regression import linear_map, ols

        if len(np.unique(data["n_layer"])) < 3:
            raise FitError("levine needs at least 3 different depths per size class; all runs "
                           f"have depths {sorted(set(data['n_layer'].astype(int).tolist()))}")
        cls = self.classes(data)
        need = 1 if constraints else 2  # a prior or a fixed b calibrates from one class
        if len(np.unique(cls)) < need:
            raise FitError("levine needs at least 2 size classes (parameter budgets); the runs "
                           "form only one")
        points = best_per_shape(data, cls, "n_layer")
        optima, notes = class_optima(points, "n_layer")
        if len(optima) < need:
            raise FitError(f"levine needs an interior optimum depth in at least {need} size "
                           f"class(es), found {len(optima)}" + (f" ({notes[0]})" if notes else ""))
        N = np.array([o["params"] for o in optima])
        Ls = np.array([o["opt"] for o in optima])
        ln_d = np.log(kaplan_width(N, Ls))
        se = np.array([o["log_opt_se"] for o in optima])
        w = None
        if np.all(np.isfinite(se)) and np.all(se > 0):
            # var(ln d*) = var(x*)/4 to first order (ln d* = ln(N/12)/2 - x*/2)
            w = 1.0 / (0.25 * se**2)
        X = np.stack([np.ones_like(Ls), Ls], axis=1)
        if constraints:
            (coef, cov), res = linear_map(X, ln_d, w, self.param_names, constraints), None
        else:
            coef, cov, res = ols(X, ln_d, w, full and len(optima) > 2)
        extra: dict[str, Any] = {"notes": notes}
        if full:
            extra.update(self._extra(optima, points, N, Ls, ln_d, w, cov, res))
        return Estimate(coef, cov, extra)

    @staticmethod
    def _extra(optima: list[dict[str, Any]], points: list[dict[str, Any]], N: np.ndarray,
               Ls: np.ndarray, ln_d: np.ndarray, w: Any, cov: Any, res: Any) -> dict[str, Any]:
        import numpy as np

        for o, d in zip(optima, np.exp(ln_d)):
            o["d_model_opt"] = float(d)
        q = np.polyfit(np.log(N), Ls, 1)
        extra: dict[str, Any] = {
            "classes": optima,
            "curvature": float(np.mean([o["curvature"] for o in optima])),
            "weighted": w is not None, "crossovers": depth_crossovers(points),
            "depth_vs_logN": {"formula": "n_layer* = p + q ln N", "p": float(q[1]),
                              "q": float(q[0])},
            "residual_space": "ln d_model*"}
        if res is not None:
            extra["statsmodels"] = {"se": np.sqrt(np.diag(cov)).tolist()
                                    if cov is not None else None,
                                    "rsquared": float(res.rsquared) if len(N) > 2 else None}
        return extra

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        cl = extra.get("classes") or []
        obs = np.array([math.log(c["d_model_opt"]) for c in cl])
        fit = np.array([params["a"] + params["b"] * c["opt"] for c in cl])
        return obs, fit

    def heldout(self, data: Data, constraints: Constraints | None = None) -> dict[str, Any]:
        import numpy as np

        from archfit.laws.columns import subset
        from archfit.laws.shape.optima import best_per_shape, class_optima

        cls = self.classes(data)
        top = cls.max()
        test = subset(data, cls == top)
        try:
            est = self.fit_point(subset(data, cls != top), full=False, constraints=constraints)
            opt, _ = class_optima(best_per_shape(test, np.zeros(len(test["loss"]), int),
                                                 "n_layer"), "n_layer")
            if not opt:
                raise FitError("the largest size class has no interior optimum depth")
        except FitError as e:
            return {"ok": False, "reason": f"held-out fit failed: {e}"}
        pred = optimal_depth(est.params[0], est.params[1], opt[0]["params"])
        return {"ok": True, "held_out_class_params": opt[0]["params"],
                "n_layer_opt_measured": opt[0]["opt"], "n_layer_opt_predicted": pred,
                "rel_error": pred / opt[0]["opt"] - 1}

    def shape_loss(self, params: Mapping[str, float], extra: Mapping[str, Any], shape: Shape,
                   N: float) -> float | None:
        """The mean curvature of loss in ln depth times the squared distance of ln depth from
        the optimum at N (the quadratic each size class was fitted with)."""
        return self.depth_loss(params, extra, N, shape.n_layer)

    def depth_loss(self, params: Mapping[str, float], extra: Mapping[str, Any], N: float,
                   n_layer: float) -> float | None:
        """A fitted curvature (nats per squared ln depth), else a published relative one
        (``curvature_rel``: a fraction of the loss; :meth:`loss_level` is then 1)."""
        c = extra.get("curvature") or (extra.get("curvature_rel") or {}).get("value")
        if not c:
            return None
        return float(c) * math.log(n_layer / self.optimum(params, N)[0]) ** 2

    def loss_level(self, params: Mapping[str, float], extra: Mapping[str, Any], N: float
                   ) -> float | None:
        """1 for a published relative curvature; the mean of the size classes' best losses
        (the scale the fitted curvature was measured at) for a fit."""
        if not extra.get("curvature") and extra.get("curvature_rel"):
            return 1.0
        best = [c["loss_min"] for c in extra.get("classes") or [] if c.get("loss_min")]
        return sum(best) / len(best) if best else None

    def measured_optima(self, extra: Mapping[str, Any]) -> list[MeasuredOptimum]:
        out = []
        for c in extra.get("classes") or []:
            se = c.get("log_opt_se") or 0.0
            se = se if math.isfinite(se) else 0.0
            out.append(MeasuredOptimum(c["params"], c["opt"], math.exp(c["log_opt"] - se),
                                       math.exp(c["log_opt"] + se)))
        return out
