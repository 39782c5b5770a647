"""The joint depth-width law L(w, d, D) = E + A/w^α + B/d^β + C/D^γ (the Gemstones form,
McLeish et al. 2025) and Kaplan et al.'s shape penalty at fixed N."""

from __future__ import annotations
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import HUBER_DELTA, Constraints, Data, Estimate, Figure, ShapeLaw, register
from archfit.shapes import kaplan_width

if TYPE_CHECKING:
    import numpy as np

    from archfit.laws.inference.artifact import Fit
    from archfit.shapes import Shape


def shape_penalty(data: Data) -> dict[str, Any] | None:
    """Kaplan et al. 2020 Fig. 5: loss relative to the best shape of the same size, against
    log aspect ratio d_model / n_layer; a pooled quadratic gives the best ratio."""
    import numpy as np

    from archfit.laws.columns import size_classes

    cls = size_classes(data["params"], data.get("target_params"))
    xs, ys = [], []
    for c in np.unique(cls):
        m = cls == c
        if m.sum() < 3:
            continue
        L = data["loss"][m]
        xs.append(np.log(data["d_model"][m] / data["n_layer"][m]))
        ys.append(L / L.min() - 1)
    if not xs:
        return None
    x, y = np.concatenate(xs), np.concatenate(ys)
    if len(np.unique(np.round(x, 6))) < 3:
        return None
    c2, c1, c0 = np.polyfit(x, y, 2)
    return {"coef_quadratic": [float(c2), float(c1), float(c0)],
            "best_aspect_ratio": float(np.exp(-c1 / (2 * c2))) if c2 > 0 else None,
            "points": {"log_aspect_ratio": x.tolist(), "rel_loss": y.tolist()}}


def draw_shape_penalty(fit: Fit, ax: Any, data: Any) -> None:
    import numpy as np

    sp = fit.extra.get("shape_penalty") or {}
    pts = sp.get("points") or {}
    if pts:
        x = np.exp(np.asarray(pts["log_aspect_ratio"]))
        ax.scatter(x, np.asarray(pts["rel_loss"]) * 100, s=14, label="runs")
        c2, c1, c0 = sp["coef_quadratic"]
        xs = np.linspace(np.log(x.min()), np.log(x.max()), 100)
        ax.plot(np.exp(xs), (c0 + c1 * xs + c2 * xs * xs) * 100, "r-", label="quadratic fit")
        ax.legend(fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("aspect ratio d_model / n_layer (log scale)")
    ax.set_ylabel("loss above the best shape of the same size (%)")


@register
class DepthWidth(ShapeLaw):
    name = "depth-width"
    formula = ("L(w, d, D) = E + A / w^alpha + B / d^beta + C / D^gamma   "
               "(w = d_model, d = n_layer; the Gemstones form, McLeish et al. 2025)")
    description = ("Joint law in width, depth and tokens, Huber on log loss. When all runs "
                   "share one token count the D term folds into E (C = 0). Also a Kaplan-style "
                   "shape penalty: relative loss vs log aspect ratio at fixed N.")
    columns = ("loss", "params", "d_model", "n_layer")
    param_names = ("E", "A", "alpha", "B", "beta", "C", "gamma")
    min_points = 8
    predicts_loss = True
    default_targets = (1e9, 1e12)
    bounds = {"E": (0.0, None)}
    domains = {"E": (0.0, None, False), "A": (0.0, None, True), "alpha": (0.0, None, True),
               "B": (0.0, None, True), "beta": (0.0, None, True), "C": (0.0, None, False),
               "gamma": (0.0, None, False)}
    folded_without_tokens = ("C", "gamma")
    supports_ties = True
    own_figures = (Figure("shape_penalty", "Shape penalty at fixed N (Kaplan et al. 2020, "
                          "Fig. 5)", draw_shape_penalty,
                          when=lambda fit: bool(fit.extra.get("shape_penalty"))),)

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.columns import log_cols, varies
        from archfit.laws.inference.optimize import HuberLSE, Reparam

        if not varies(data["d_model"]) or not varies(data["n_layer"]):
            raise FitError("depth-width needs runs that vary both d_model and n_layer")
        use_d = "tokens" in data and varies(data["tokens"], 0.2)
        names = ["d_model", "n_layer"] + (["tokens"] if use_d else [])
        h = HuberLSE(log_cols(data, names), np.log(data["loss"]), HUBER_DELTA)
        k = len(names)
        rp = None
        if constraints:
            spec = [("A", True), ("B", True)] + ([("C", True)] if use_d else []) + [
                ("alpha", False), ("beta", False)] + ([("gamma", False)] if use_d else []) + [
                ("E", True)]
            folded = [n for n in [*constraints.fixed, *constraints.tied, *constraints.prior]
                      if n in ("C", "gamma") and not use_d]
            if folded:
                raise FitError(f"depth-width: {folded[0]} is not fitted (all runs share one "
                               "token count, so the D term is folded into E)")
            rp = Reparam(spec, constraints)
        if start is not None:
            E, A, al, B, be, C, ga = start
            a_s = [np.log(A), np.log(B)] + ([np.log(max(C, 1e-30))] if use_d else [])
            e_s = [al, be] + ([ga] if use_d else [])
            th = h.polish(np.array(a_s + e_s + [np.log(E)]), rp,
                          constraints.scale if constraints else None)
        else:
            th = h.minimize(h.projected_starts(rp=rp), rp=rp,
                            scale=constraints.scale if constraints else None)
        a, ex, e = th[:k], th[k:2 * k], th[2 * k]
        C, gamma = (float(np.exp(a[2])), float(ex[2])) if use_d else (0.0, 0.0)
        params = np.array([np.exp(e), np.exp(a[0]), ex[0], np.exp(a[1]), ex[1], C, gamma])
        extra: dict[str, Any] = {"uses_tokens": use_d}
        if not use_d:
            extra["notes"] = ["all runs share one token count: the D term is folded into E "
                              "(C = gamma = 0)"]
        if full:
            extra["shape_penalty"] = shape_penalty(data)
        return Estimate(params, extra=extra)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        w = np.asarray(data["d_model"], float)
        d = np.asarray(data["n_layer"], float)
        out = params["E"] + params["A"] / w ** params["alpha"] + params["B"] / d ** params["beta"]
        if params.get("C", 0) > 0 and "tokens" in data:
            out = out + params["C"] / np.asarray(data["tokens"], float) ** params["gamma"]
        return out

    def optimum(self, params: Mapping[str, float], N: float) -> tuple[float, float]:
        """argmin over depth of A/w^α + B/d^β with w = sqrt(N / (12 d)) (Kaplan's N ≈ 12 d w²)."""
        A, al, B, be = params["A"], params["alpha"], params["B"], params["beta"]
        if not (A > 0 and B > 0 and al > 0 and be > 0):
            raise FitError(f"this depth-width fit has no optimal depth: its loss must fall with "
                           f"both width and depth (A, B, alpha, beta > 0), got A={A:.3g}, "
                           f"alpha={al:.3g}, B={B:.3g}, beta={be:.3g}; add runs that vary "
                           "depth at each size")
        L = (2 * be * B / (al * A) * (N / 12.0) ** (al / 2)) ** (1.0 / (al / 2 + be))
        return L, kaplan_width(N, L)

    def shape_loss(self, params: Mapping[str, float], extra: Mapping[str, Any], shape: Shape,
                   N: float) -> float | None:
        """A/w^α + B/d^β at the shape's depth d, with the width w = sqrt(N / (12 d)) that makes
        it exactly N (E and the data term are the same for every shape of size N)."""
        return self.depth_loss(params, extra, N, shape.n_layer)

    def depth_loss(self, params: Mapping[str, float], extra: Mapping[str, Any], N: float,
                   n_layer: float) -> float | None:
        p, d = params, n_layer
        return p["A"] / kaplan_width(N, d) ** p["alpha"] + p["B"] / d ** p["beta"]

    def loss_level(self, params: Mapping[str, float], extra: Mapping[str, Any], N: float
                   ) -> float | None:
        """E + the shape terms at the optimal depth + C / (20 N)^gamma"""
        p = params
        at = self.depth_loss(p, extra, N, self.optimum(p, N)[0])
        data = p["C"] / (20.0 * N) ** p["gamma"] if p.get("C", 0) > 0 else 0.0
        return None if at is None else p["E"] + at + data
