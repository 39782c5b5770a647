"""Kaplan et al. 2020's loss laws: L(N) and L(N, D). Loss laws only: they say nothing about
depth or width."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import Constraints, Data, Estimate, LossCurveLaw, register

if TYPE_CHECKING:
    import numpy as np


@register
class KaplanN(LossCurveLaw):
    name = "kaplan-n"
    formula = "L(N) = (N_c / N)^alpha_N   [Kaplan et al. 2020, eq. 1.1]"
    description = "Loss vs parameters, data not limiting; OLS of log L on log N."
    columns = ("loss", "params")
    param_names = ("N_c", "alpha_N")
    domains = {"N_c": (0.0, None, True), "alpha_N": (0.0, None, True)}
    min_points = 3
    min_sizes = 3
    predicts_loss = True

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.columns import varies

        x, t = np.log(data["params"]), np.log(data["loss"])
        if not varies(data["params"]):
            raise FitError("kaplan-n needs runs of different sizes; all have about the same N")
        if constraints:  # least squares on log loss over θ = (ln N_c, alpha_N)
            from archfit.laws.inference.optimize import Reparam, lsq_fit

            s0 = (self.fit_point(data, full=False).params if start is None else start)
            th = lsq_fit(lambda th: th[1] * (th[0] - x) - t,
                         [np.array([np.log(s0[0]), s0[1]])],
                         Reparam((("N_c", True), ("alpha_N", False)), constraints),
                         constraints.scale)
            return Estimate(np.array([np.exp(th[0]), th[1]]))
        X = np.stack([np.ones_like(x), x], axis=1)
        coef, *_ = np.linalg.lstsq(X, t, rcond=None)
        c0, c1 = coef
        alpha = -c1
        if alpha <= 0:
            raise FitError(f"loss does not fall with N (slope {c1:.3g}); kaplan-n needs a "
                           "decreasing loss")
        log_nc = c0 / alpha
        cov = None
        if full and len(x) > 2:
            # OLS's covariance, s^2 (X'X)^-1 with s^2 the residual variance on n - 2 degrees
            # of freedom (what statsmodels' OLS(...).cov_params() gives; its import costs ~2 s
            # on the CLI's path, for a 2 x 2 matrix)
            res = t - X @ coef
            V = float(res @ res) / (len(x) - 2) * np.linalg.inv(X.T @ X)
            # delta method to (N_c, alpha): N_c = exp(c0 / -c1)
            J = np.array([[np.exp(log_nc) / alpha, np.exp(log_nc) * c0 / alpha**2], [0.0, -1.0]])
            cov = J @ V @ J.T
        return Estimate(np.array([np.exp(log_nc), alpha]), cov)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        return (params["N_c"] / np.asarray(data["params"], float)) ** params["alpha_N"]


@register
class KaplanND(LossCurveLaw):
    name = "kaplan-nd"
    formula = ("L(N, D) = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D   "
               "[Kaplan et al. 2020, eq. 1.5]")
    description = "Loss vs parameters and tokens; least squares on log loss."
    columns = ("loss", "params", "tokens")
    param_names = ("N_c", "D_c", "alpha_N", "alpha_D")
    domains = {"N_c": (0.0, None, True), "D_c": (0.0, None, True), "alpha_N": (0.0, None, True),
               "alpha_D": (0.0, None, True)}
    min_points = 5
    min_sizes = 3
    predicts_loss = True
    supports_ties = True
    SPEC = (("N_c", True), ("D_c", True), ("alpha_N", False), ("alpha_D", False))

    @staticmethod
    def _log_pred(theta: np.ndarray, lx: np.ndarray, ly: np.ndarray) -> np.ndarray:
        import numpy as np

        lnc, ldc, an, ad = theta
        return ad * np.logaddexp((an / ad) * (lnc - lx), ldc - ly)

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np
        from scipy.optimize import least_squares

        from archfit.laws.columns import varies

        if not (varies(data["params"]) and varies(data["tokens"])):
            raise FitError("kaplan-nd needs runs that vary both N and D")
        lx, ly, t = np.log(data["params"]), np.log(data["tokens"]), np.log(data["loss"])
        if constraints:  # least squares on log loss over θ = (ln N_c, ln D_c, α_N, α_D)
            from archfit.laws.inference.optimize import Reparam, lsq_fit

            s0 = self.fit_point(data, full=False).params if start is None else start
            th = lsq_fit(lambda th: self._log_pred(th, lx, ly) - t,
                         [np.array([np.log(s0[0]), np.log(s0[1]), s0[2], s0[3]])],
                         Reparam(self.SPEC, constraints), constraints.scale)
            return Estimate(np.array([np.exp(th[0]), np.exp(th[1]), th[2], th[3]]))
        if start is not None:
            starts = [np.array([np.log(start[0]), np.log(start[1]), start[2], start[3]])]
        else:
            starts = [np.array([np.log(nc), np.log(dc), an, ad])
                      for nc, dc, an, ad in itertools.product(
                          [1e10, 1e14], [1e9, 1e13], [0.07, 0.3], [0.1, 0.3])]
        best = None
        for s0 in starts:
            try:
                r = least_squares(lambda th: self._log_pred(th, lx, ly) - t, s0, method="lm",
                                  max_nfev=4000)
            except ValueError:
                continue
            if np.all(np.isfinite(r.x)) and r.x[2] > 0 and r.x[3] > 0 and (
                    best is None or r.cost < best.cost):
                best = r
        if best is None:
            raise FitError("kaplan-nd did not converge to positive exponents")
        lnc, ldc, an, ad = best.x
        cov = None
        if full:
            J = best.jac
            s2 = 2 * best.cost / max(1, len(t) - 4)
            try:
                T = np.diag([np.exp(lnc), np.exp(ldc), 1.0, 1.0])
                cov = T @ (s2 * np.linalg.inv(J.T @ J)) @ T.T
            except np.linalg.LinAlgError:
                cov = None
        return Estimate(np.array([np.exp(lnc), np.exp(ldc), an, ad]), cov)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        th = np.array([np.log(params["N_c"]), np.log(params["D_c"]), params["alpha_N"],
                       params["alpha_D"]])
        return np.exp(self._log_pred(th, np.log(np.asarray(data["params"], float)),
                                     np.log(np.asarray(data["tokens"], float))))
