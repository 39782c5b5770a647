"""``moe-experts``: a joint law in the number of experts E (the form Ludziejewski et al. 2025,
'Joint MoE Scaling Laws', arXiv 2502.05172, and Clark et al. 2022 use: exponents that move with
ln E): ``L(N, D, E) = c + a E^delta / N^(alpha + gamma ln E) + b E^omega / D^(beta + zeta ln
E)``, N the active non-embedding parameters, E the routed experts (a dense run is E = 1, where
the law is Chinchilla's). Fitted from a user's sweep; archfit ships no published fit of it (see
docs/concepts/moe.md for why)."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from archfit.errors import FitError
from archfit.laws.base import Constraints, Data, Estimate, register
from archfit.laws.moe.common import EXPONENTS, SparseLossLaw

if TYPE_CHECKING:
    import numpy as np


@register
class Experts(SparseLossLaw):
    name = "moe-experts"
    formula = ("L(N, D, E) = c + a E^delta / N^(alpha + gamma ln E) + b E^omega / "
               "D^(beta + zeta ln E)   [the joint form of Ludziejewski et al. 2025; "
               "N active non-embedding, E routed experts, a dense run E = 1]")
    description = ("Loss over active parameters, tokens and the expert count, with exponents "
                   "that move with ln E; exponents searched (Nelder-Mead), coefficients solved "
                   "exactly (NNLS on relative error).")
    columns = ("loss", "params_active", "tokens", "n_experts")
    optimum_of = ("E_opt", "n_experts")
    param_names = ("a", "delta", "alpha", "gamma", "b", "omega", "beta", "zeta", "c")
    min_points = 12
    domains = {"a": (0.0, None, False), "alpha": (0.0, None, True), "b": (0.0, None, False),
               "beta": (0.0, None, True), "c": (0.0, None, False)}

    def prepare(self, frame: Any) -> Data:
        """The table's columns, a dense run (``n_experts`` 0, as archfit records it) read as
        one expert: the dense baseline the law's E = 1 needs."""
        import polars as pl

        if "n_experts" in frame.columns:
            frame = frame.with_columns(pl.when(pl.col("n_experts") == 0).then(1.0)
                                       .otherwise(pl.col("n_experts")).alias("n_experts"))
        return super().prepare(frame)

    @staticmethod
    def _terms(p: Mapping[str, Any], N: Any, D: Any, E: Any) -> tuple[Any, Any]:
        import numpy as np

        lnE = np.log(E)
        return (E ** p["delta"] * N ** -(p["alpha"] + p["gamma"] * lnE),
                E ** p["omega"] * D ** -(p["beta"] + p["zeta"] * lnE))

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N, D = self.size(data), np.asarray(data["tokens"], float)
        E = np.maximum(np.asarray(data["n_experts"], float), 1.0)
        tn, td = self._terms(params, N, D, E)
        return params["c"] + params["a"] * tn + params["b"] * td

    def loss(self, params: Mapping[str, float], N: float, D: float, E: float) -> float:
        """The law at one (N, D, E) (plain math); N, D and E positive."""
        self._domain(N=N, D=D, E=E)
        p, lnE = params, math.log(max(E, 1.0))
        return (p["c"] + p["a"] * E ** p["delta"] * N ** -(p["alpha"] + p["gamma"] * lnE)
                + p["b"] * E ** p["omega"] * D ** -(p["beta"] + p["zeta"] * lnE))

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.inference.regression import nnls_relative

        N, D, E, L = self._arrays(data, constraints, "n_experts", "expert counts E")
        names = EXPONENTS

        def cols(e: np.ndarray) -> np.ndarray:
            tn, td = self._terms(dict(zip(names, e)), N, D, E)
            return np.stack([np.ones_like(N), tn, td], 1)

        def f(e: np.ndarray) -> float:
            ex = dict(zip(names, e))
            if not (0.01 < ex["alpha"] < 3 and 0.01 < ex["beta"] < 3) or np.any(np.abs(e) > 3):
                return 1e10
            lnE = np.log(E.max())  # the exponents stay positive over the data's experts
            if ex["alpha"] + ex["gamma"] * lnE <= 0 or ex["beta"] + ex["zeta"] * lnE <= 0:
                return 1e10
            return nnls_relative(cols(e), L)[0]

        if start is None:  # Chinchilla's exponents first, then the expert terms from zero
            base = self._search(lambda ab: f(np.array([0, ab[0], 0, 0, ab[1], 0])),
                                [np.array(p) for p in itertools.product((0.1, 0.3, 0.6),
                                                                        repeat=2)], None)
            e0 = np.array([0.0, base[0], 0.0, 0.0, base[1], 0.0])
        else:
            e0 = np.asarray(start, float)[[1, 2, 3, 5, 6, 7]]
        e = self._search(f, [], e0)
        _, (c, a, b) = nnls_relative(cols(e), L)
        if a <= 0 or b <= 0:
            raise FitError(f"{self.name}: a coefficient collapsed to zero; the data do not "
                           "constrain both the N and D terms")
        theta = self._polish(np.array([math.log(a), *e[:3], math.log(b), *e[3:], c]), N, D, E, L)
        a, b = math.exp(theta[0]), math.exp(theta[4])
        return Estimate(np.array([a, *theta[1:4], b, *theta[5:8], theta[8]]),
                        extra={"objective": "squared relative error on loss (NNLS inner solve, "
                                            "then all nine by least squares)"})

    def _polish(self, theta: np.ndarray, N: np.ndarray, D: np.ndarray, E: np.ndarray,
                L: np.ndarray) -> np.ndarray:
        """Least squares over all nine parameters from the projected search's answer (nine
        exponents and coefficients in one trust-region solve; the search alone can stop short
        in six dimensions). θ = (ln a, delta, alpha, gamma, ln b, omega, beta, zeta, c)."""
        import numpy as np
        from scipy.optimize import least_squares

        names = EXPONENTS

        def resid(th: np.ndarray) -> np.ndarray:
            p = dict(zip(names, (*th[1:4], *th[5:8])))
            tn, td = self._terms(p, N, D, E)
            return (th[8] + np.exp(th[0]) * tn + np.exp(th[4]) * td) / L - 1

        r = least_squares(resid, theta, method="trf", max_nfev=4000)
        better = np.all(np.isfinite(r.x)) and r.cost <= 0.5 * float(resid(theta) @ resid(theta))
        return r.x if better else theta

    def compute_optimal_sparse(self, params: Mapping[str, float], C: float,
                               experts: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
                               ) -> dict[str, float]:
        """The (N, D, E) of least loss for ``C = 6 N D`` FLOPs (routing not counted), E among
        ``experts``."""
        E, N, D, loss = self._least_loss(params, experts, lambda N, E: C / (6 * N))
        return {"N_active": N, "tokens": D, "n_experts": E, "loss": loss}
