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
from archfit.laws.base import Constraints, Data, Estimate, derived_name, register
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
    # tokens are read where the table has them; a sweep at one token count (Clark et al. 2022's
    # design) folds the data term into the constant (b, omega, beta, zeta held at 0)
    columns = ("loss", "params_active", "n_experts")
    folded_without_tokens = ("b", "omega", "beta", "zeta")
    optional_columns = ("tokens",)
    # experts weighed for the best count at a size, when the data term is folded
    EXPERT_COUNTS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
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
        data = super().prepare(frame)
        if "tokens" in data:
            from archfit.laws.inference.columns import finite_positive

            finite_positive("tokens", data["tokens"])
        return data

    @staticmethod
    def _terms(p: Mapping[str, Any], N: Any, D: Any, E: Any) -> tuple[Any, Any]:
        import numpy as np

        lnE = np.log(E)
        return (E ** p["delta"] * N ** -(p["alpha"] + p["gamma"] * lnE),
                E ** p["omega"] * D ** -(p["beta"] + p["zeta"] * lnE))

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N = self.size(data)
        if params["b"] == 0 and "tokens" not in data:  # the data term folded: no D to read
            D = np.ones_like(N)
        else:
            D = np.asarray(data["tokens"], float)
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

        from archfit.laws.inference.columns import varies

        if "tokens" not in data or not varies(data["tokens"]):
            return self._fit_folded(data, constraints)
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

    def _fit_folded(self, data: Data, constraints: Constraints | None) -> Estimate:
        """Every run at one token count (or none recorded): L = c + a E^delta /
        N^(alpha + gamma ln E), the data term folded into c (the form of Clark et al. 2022 at
        fixed tokens); b, omega, beta and zeta held at 0."""
        import numpy as np
        from scipy.optimize import least_squares

        from archfit.laws.inference.columns import varies
        from archfit.laws.inference.regression import nnls_relative

        if constraints:
            raise FitError(f"{self.name} takes no --fix, --prior or --tie")
        N, E, L = data["params"], np.maximum(data["n_experts"], 1.0), data["loss"]
        if not varies(N):
            raise FitError(f"{self.name} needs runs of different active sizes N")
        if not varies(E):
            raise FitError(f"{self.name} needs runs of different expert counts E")

        def term(e: np.ndarray) -> np.ndarray:
            delta, alpha, gamma = e
            return E ** delta * N ** -(alpha + gamma * np.log(E))

        def f(e: np.ndarray) -> float:
            if not 0.01 < e[1] < 3 or np.any(np.abs(e) > 3) or \
                    e[1] + e[2] * np.log(E.max()) <= 0:
                return 1e10
            return nnls_relative(np.stack([np.ones_like(N), term(e)], 1), L)[0]

        grid = [np.array([0.0, a, 0.0]) for a in (0.05, 0.1, 0.2, 0.3, 0.6)]
        e = self._search(f, grid, None)
        _, (c, a) = nnls_relative(np.stack([np.ones_like(N), term(e)], 1), L)
        if a <= 0:
            raise FitError(f"{self.name}: the size term collapsed to zero; the runs do not "
                           "constrain how the loss falls with N")

        def resid(th: np.ndarray) -> np.ndarray:
            return (th[4] + np.exp(th[0]) * term(th[1:4])) / L - 1

        th0 = np.array([math.log(a), *e, c])
        r = least_squares(resid, th0, method="trf", max_nfev=4000)
        th = r.x if np.all(np.isfinite(r.x)) and r.cost <= 0.5 * float(
            resid(th0) @ resid(th0)) else th0
        D = data.get("tokens")
        at = (f" at its {float(D[0]):.3g} tokens" if D is not None else "")
        reach = (f"E {E.min():g} to {E.max():g} experts (a dense run is E = 1), N "
                 f"{N.min():.3g} to {N.max():.3g} active parameters")
        return Estimate(
            np.array([math.exp(th[0]), th[1], th[2], th[3], 0.0, 0.0, 0.0, 0.0, th[4]]),
            extra={"objective": "squared relative error on loss (NNLS inner solve, then the "
                                "five by least squares)", "uses_tokens": False,
                   "n_max": float(N.max()), "e_max": float(E.max()), "reach": reach,
                   "notes": [f"every run shares one token count{at}: the data term is folded "
                             "into the constant (b, omega, beta and zeta held at 0), so the "
                             "law predicts at those tokens only (Clark et al. 2022's design)",
                             f"reach: {reach}; past it the law extrapolates, so the best expert count "
                   f"at a size (E_best) is weighed among 1 to {E.max():g} experts"]})

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        """The compute-optimal expert count at each FLOP budget; with the data term folded
        (one token count), the best expert count at the table's largest active size and 10x
        it, among :attr:`EXPERT_COUNTS` up to the largest count the runs covered (its reach),
        at those tokens."""
        if (extra or {}).get("uses_tokens", True):
            return super().derived(params, targets, extra)
        n_max = float((extra or {}).get("n_max") or 1e9)
        e_max = float((extra or {}).get("e_max") or max(self.EXPERT_COUNTS))
        counts = sorted({E for E in self.EXPERT_COUNTS if E <= e_max} | {e_max})
        out: dict[str, float] = {}
        for N in (n_max, 10 * n_max):
            losses = {E: self.loss(params, N, 1.0, E) for E in counts}
            out[derived_name("E_best", N)] = float(min(losses, key=losses.__getitem__))
        return out

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
