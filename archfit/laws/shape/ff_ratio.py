"""The best MLP expansion ratio d_ff / d_model per size class, and its trend with size."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from archfit.errors import FitError
from archfit.laws.base import Constraints, Data, Estimate, FFRatioLaw, derived_name, register

if TYPE_CHECKING:
    import numpy as np


@register
class FFRatio(FFRatioLaw):
    name = "ff-ratio"
    formula = ("ln r* = a + b * ln N,  r* = the best d_ff / d_model per size class "
               "(quadratic fit of loss vs ln r)")
    description = "The best MLP expansion ratio per size class and its trend with size."
    columns = ("loss", "params", "d_model", "d_ff")
    param_names = ("a", "b")
    min_points = 6
    default_targets = (1e9, 1e12)

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.shape.optima import best_per_shape, class_optima
        from archfit.laws.inference.regression import linear_map, ols

        if len(np.unique(np.round(data["d_ff"] / data["d_model"], 3))) < 3:
            raise FitError("ff-ratio needs at least 3 different d_ff/d_model ratios")
        optima, notes = class_optima(best_per_shape(data, self.classes(data), "ff_ratio"),
                                     "ff_ratio")
        if not optima:
            raise FitError("ff-ratio found no size class with an interior optimum ratio"
                           + (f" ({notes[0]})" if notes else ""))
        N = np.array([o["params"] for o in optima])
        y = np.array([o["log_opt"] for o in optima])
        extra: dict[str, Any] = {"notes": notes, "residual_space": "ln ff_ratio*"}
        X = np.stack([np.ones_like(N), np.log(N)], axis=1)
        if constraints:  # the posterior of the line under --fix/--prior
            coef, cov = linear_map(X, y, None, self.param_names, constraints)
        elif len(optima) == 1:
            coef, cov = np.array([y[0], 0.0]), None
            notes.append("one size class: the ratio is taken as constant (b = 0)")
        else:
            coef, cov, _ = ols(X, y, None, full and len(optima) > 2)
        if full:
            extra["classes"] = optima
        return Estimate(coef, cov, extra)

    def ff_ratio(self, params: Mapping[str, float], N: float) -> float:
        return math.exp(params["a"] + params["b"] * math.log(N))

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        cl = extra.get("classes") or []
        return (np.array([c["log_opt"] for c in cl]),
                np.array([params["a"] + params["b"] * math.log(c["params"]) for c in cl]))

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        return np.exp(params["a"] + params["b"] * np.log(np.asarray(data["params"], float)))

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        return {derived_name("ff_ratio_opt", N): self.ff_ratio(params, N) for N in targets}

    def heldout(self, data: Data, constraints: Any = None) -> dict[str, Any] | None:
        return {}  # not defined: one optimum per class, nothing to hold out
