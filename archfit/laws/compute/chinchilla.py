"""Chinchilla's L(N, D) = E + A/N^α + B/D^β, fitted two ways (Huber on log-sum-exp as Hoffmann
et al. and Epoch; variable projection), and the compute-optimal split of a FLOP budget."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import (HUBER_DELTA, Constraints, Data, Estimate, Figure, ComputeLaw,
                              register)

if TYPE_CHECKING:
    import numpy as np

    from archfit.laws.inference.artifact import Fit


def compute_optimal(params: Mapping[str, float], C: float) -> tuple[float, float]:
    """N_opt(C), D_opt(C) for L = E + A/N^α + B/D^β under C = 6 N D (Hoffmann et al. eq. 4)."""
    A, B, a, b = params["A"], params["B"], params["alpha"], params["beta"]
    G = (a * A / (b * B)) ** (1.0 / (a + b))
    c6 = float(C) / 6.0
    return G * c6 ** (b / (a + b)), c6 ** (a / (a + b)) / G


def draw_isoloss(fit: Fit, ax: Any, data: Any) -> None:
    """Iso-loss contours over (N, D) and the compute-optimal frontier, with the runs."""
    import numpy as np

    N, D = np.logspace(7, 12, 200), np.logspace(8, 13.5, 200)
    NN, DD = np.meshgrid(N, D)
    p = fit.params
    L = p["E"] + p["A"] / NN ** p["alpha"] + p["B"] / DD ** p["beta"]
    cs = ax.contour(NN, DD, L, levels=np.quantile(L, np.linspace(0.02, 0.9, 12)),
                    cmap="viridis", linewidths=0.8)
    ax.clabel(cs, fontsize=7, fmt="%.2f")
    frontier = np.array([compute_optimal(p, c) for c in np.logspace(17, 26, 50)])
    ax.plot(frontier[:, 0], frontier[:, 1], "r-", lw=2,
            label="compute-optimal frontier (C = 6 N D)")
    if data is not None and {"params", "tokens"} <= set(data.columns):
        ax.scatter(data["params"].to_numpy(), data["tokens"].to_numpy(), s=8, c="k", alpha=0.5,
                   label="runs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(N[0], N[-1])
    ax.set_ylim(D[0], D[-1])
    ax.set_xlabel(f"parameters N ({fit.conventions.get('params', 'parameters')}, log scale)")
    ax.set_ylabel("training tokens D (log scale)")
    ax.legend(fontsize=8, loc="lower right")


class _ChinchillaBase(ComputeLaw):
    formula = "L(N, D) = E + A / N^alpha + B / D^beta   [Hoffmann et al. 2022, eq. 2]"
    columns = ("loss", "params", "tokens")
    param_names = ("E", "A", "B", "alpha", "beta")
    min_points = 6
    min_sizes = 3
    default_targets = (1e21, 1e24)
    bounds = {"E": (0.0, None)}
    domains = {"E": (0.0, None, True), "A": (0.0, None, True), "B": (0.0, None, True),
               "alpha": (0.0, None, True), "beta": (0.0, None, True)}
    supports_ties = True
    own_figures = (Figure("isoloss_contours", "Iso-loss contours (nats/token) and "
                          "compute-optimal frontier", draw_isoloss),)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N = np.asarray(data["params"], float)
        D = np.asarray(data["tokens"], float)
        return params["E"] + params["A"] / N ** params["alpha"] + params["B"] / D ** params["beta"]

    def loss_at(self, params: Mapping[str, float], N: float, D: float) -> float | None:
        """E + A / N^alpha + B / D^beta"""
        p = params
        return p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"]

    def compute_optimal(self, params: Mapping[str, float], C: float, **conditions: Any
                        ) -> tuple[float, float]:
        """Hoffmann et al.'s closed form (:func:`compute_optimal`)."""
        return compute_optimal(params, C)

    def more_derived(self, params: Mapping[str, float]) -> dict[str, float]:
        return {"a=beta/(alpha+beta)": params["beta"] / (params["alpha"] + params["beta"])}

    def _check(self, data: Data) -> None:
        from archfit.laws.columns import varies

        if not varies(data["params"]):
            raise FitError(f"{self.name} needs runs of different sizes N")
        if not varies(data["tokens"]):
            raise FitError(f"{self.name} needs runs with different token counts D")


@register
class Chinchilla(_ChinchillaBase):
    name = "chinchilla"
    description = ("Huber loss (δ=1e-3) on log loss, log-sum-exp parametrization (Hoffmann et al. "
                   "2022 App. D.2; Besiroglu et al. 2024), L-BFGS from starts whose "
                   "coefficients are solved for each pair of exponents (scale-free).")
    # the internal vector θ = (ln A, ln B, α, β, ln E), as HuberLSE holds it
    SPEC = (("A", True), ("B", True), ("alpha", False), ("beta", False), ("E", True))

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.columns import log_cols
        from archfit.laws.inference.optimize import HuberLSE, Reparam

        self._check(data)
        h = HuberLSE(log_cols(data, ["params", "tokens"]), np.log(data["loss"]), HUBER_DELTA)
        rp = Reparam(self.SPEC, constraints) if constraints else None
        if start is not None:  # a resample, warm-started at the point estimate
            E, A, B, al, be = start
            a, b, al, be, e = h.polish(np.array([np.log(A), np.log(B), al, be, np.log(E)]), rp,
                                       constraints.scale if constraints else None)
        else:
            a, b, al, be, e = h.minimize(h.projected_starts(rp=rp), rp=rp,
                                         scale=constraints.scale if constraints else None)
        extra: dict[str, Any] = {"objective": "huber(delta=1e-3) on log loss"}
        if getattr(h, "notes", None):
            extra["notes"] = list(h.notes)
        return Estimate(np.array([np.exp(e), np.exp(a), np.exp(b), al, be]), extra=extra)


@register
class ChinchillaVarPro(_ChinchillaBase):
    name = "chinchilla-varpro"
    description = ("Variable projection: for given (alpha, beta) the coefficients E, A, B >= 0 "
                   "are solved exactly (non-negative least squares on loss); only the two "
                   "exponents are searched. Far better conditioned than the 5-parameter fit.")

    @staticmethod
    def _inner(ab: np.ndarray, N: np.ndarray, D: np.ndarray, L: np.ndarray
               ) -> tuple[float, np.ndarray]:
        import numpy as np

        from archfit.laws.inference.regression import nnls_relative

        al, be = ab
        return nnls_relative(np.stack([np.ones_like(N), N ** -al, D ** -be], axis=1), L)

    supports_ties = True
    # under --fix/--tie/--prior: θ = (E, ln A, ln B, α, β), squared relative error
    SPEC = (("E", False), ("A", True), ("B", True), ("alpha", False), ("beta", False))

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np
        from scipy.optimize import minimize

        self._check(data)
        N, D, L = data["params"], data["tokens"], data["loss"]
        if constraints:
            from archfit.laws.inference.optimize import Reparam, lsq_fit

            rp = Reparam(self.SPEC, constraints)
            if start is None:
                start = self.fit_point(data, full=False).params
            E0, A0, B0, a0, b0 = start
            th = lsq_fit(lambda th: (th[0] + np.exp(th[1]) * N ** -th[3]
                                     + np.exp(th[2]) * D ** -th[4]) / L - 1,
                         [np.array([E0, np.log(max(A0, 1e-12)), np.log(max(B0, 1e-12)),
                                    a0, b0])], rp, constraints.scale)
            return Estimate(np.array([th[0], np.exp(th[1]), np.exp(th[2]), th[3], th[4]]),
                            extra={"objective": "squared relative error on loss, constrained"})

        def f(ab: np.ndarray) -> float:
            if ab[0] <= 0.01 or ab[1] <= 0.01 or ab[0] > 3 or ab[1] > 3:
                return 1e10
            return self._inner(ab, N, D, L)[0]

        if start is not None:
            starts = [np.array(start[3:5])]
        else:
            grid = [np.array(p) for p in itertools.product(np.arange(0.1, 1.21, 0.1), repeat=2)]
            vals = [f(p) for p in grid]
            starts = [grid[i] for i in np.argsort(vals)[:3]]
        best = min((minimize(f, s0, method="Nelder-Mead",
                             options={"xatol": 1e-7, "fatol": 1e-14, "maxiter": 4000})
                    for s0 in starts), key=lambda r: r.fun)
        _, (E, A, B) = self._inner(best.x, N, D, L)
        if A <= 0 or B <= 0:
            raise FitError("chinchilla-varpro: a coefficient collapsed to zero; the data do not "
                           "constrain both the N and D terms")
        if not math.isfinite(E):
            raise FitError("chinchilla-varpro: no finite fit")
        return Estimate(np.array([E, A, B, best.x[0], best.x[1]]),
                        extra={"objective": "squared relative error on loss, NNLS inner solve"})
