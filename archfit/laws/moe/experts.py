"""``moe-experts``: a joint law in the number of experts E (the form Ludziejewski et al. 2025,
'Joint MoE Scaling Laws', arXiv 2502.05172, and Clark et al. 2022 use: exponents that move with
ln E): ``L(N, D, E) = c + a E^delta / N^(alpha + gamma ln E) + b E^omega / D^(beta + zeta ln
E)``, N the active non-embedding parameters, E the routed experts (a dense run is E = 1, where
the law is Chinchilla's). Fitted from a user's sweep; archfit ships no published fit of it (see
docs/concepts/moe.md for why).

At one token budget (Clark et al. 2022's design) E enters through Clark et al.'s saturating
transform (their eq. 9), ``Ê = 1 / (1 / (E - 1 + (1/E_start - 1/E_max)^-1) + 1/E_max)``: Ê
is E_start for a dense run and tends to E_max as E grows, so the benefit of more experts can
level off. ``E_start`` 1 and ``inv_E_max`` (1/E_max) 0 make Ê = E, the unsaturated law; the
joint fit over several token budgets holds them there."""

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
    formula = ("L(N, D, E) = c + a Ê^delta / N^(alpha + gamma ln Ê) + b Ê^omega / "
               "D^(beta + zeta ln Ê)   [the joint form of Ludziejewski et al. 2025; "
               "N active non-embedding, E routed experts, a dense run E = 1; Ê = E, or at one "
               "token budget Clark et al. 2022's saturating Ê(E; E_start, 1/E_max)]")
    description = ("Loss over active parameters, tokens and the expert count, with exponents "
                   "that move with ln E (at one token budget, a saturating expert count); "
                   "exponents searched (Nelder-Mead, NNLS coefficients), then Huber on log "
                   "loss.")
    # tokens are read where the table has them; a sweep at one token count (Clark et al. 2022's
    # design) folds the data term into the constant (b, omega, beta, zeta held at 0)
    columns = ("loss", "params_active", "n_experts")
    folded_without_tokens = ("b", "omega", "beta", "zeta")
    optional_columns = ("tokens",)
    # the reach E_enough is sought up to where a fit records none (the largest count run)
    E_REACH = 512.0
    optimum_of = ("E_opt", "n_experts")
    param_names = ("a", "delta", "alpha", "gamma", "b", "omega", "beta", "zeta", "c",
                   "E_start", "inv_E_max")
    min_points = 12
    domains = {"a": (0.0, None, False), "alpha": (0.0, None, True), "b": (0.0, None, False),
               "beta": (0.0, None, True), "c": (0.0, None, False),
               "E_start": (1.0, None, False), "inv_E_max": (0.0, 1.0, False)}
    bounds = {"c": (0.0, None), "E_start": (1.0, None), "inv_E_max": (0.0, None)}
    # the saturation the joint fit (several token budgets) holds: Ê = E
    UNSATURATED = {"E_start": 1.0, "inv_E_max": 0.0}
    # the share of the loss one doubling of the experts must gain to be worth naming: past the
    # count where it gains less, the fit says the benefit has levelled off (E_enough)
    GAIN_SHARE = 0.01

    def prepare(self, frame: Any) -> Data:
        """The table's columns, a dense run (``n_experts`` 0, as archfit records it) read as
        one expert: the dense baseline the law's E = 1 needs."""
        import polars as pl

        if "n_experts" in frame.columns:
            frame = frame.with_columns(pl.when(pl.col("n_experts") == 0).then(1.0)
                                       .otherwise(pl.col("n_experts")).alias("n_experts"))
        data = super().prepare(frame)
        if "tokens" in data:
            from archfit.laws.columns import finite_positive

            finite_positive("tokens", data["tokens"])
        return data

    @staticmethod
    def effective(E: Any, E_start: float, inv_E_max: float) -> Any:
        """Clark et al. 2022's saturating expert count Ê (their eq. 9): E_start at E = 1,
        tending to 1 / inv_E_max; Ê = E where E_start is 1 and inv_E_max 0. An inv_E_max at
        or past 1/E_start (no room between start and end) reads as Ê = E_max throughout."""
        import numpy as np

        gap = max(1.0 / E_start - inv_E_max, 1e-12)
        return 1.0 / (1.0 / (np.asarray(E, float) - 1.0 + 1.0 / gap) + inv_E_max)

    @staticmethod
    def _terms(p: Mapping[str, Any], N: Any, D: Any, E: Any) -> tuple[Any, Any]:
        import numpy as np

        E = Experts.effective(E, p.get("E_start", 1.0), p.get("inv_E_max", 0.0))
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
        p = params
        E = float(self.effective(max(E, 1.0), p.get("E_start", 1.0), p.get("inv_E_max", 0.0)))
        lnE = math.log(E)
        return (p["c"] + p["a"] * E ** p["delta"] * N ** -(p["alpha"] + p["gamma"] * lnE)
                + p["b"] * E ** p["omega"] * D ** -(p["beta"] + p["zeta"] * lnE))

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.inference.regression import nnls_relative

        from archfit.laws.columns import varies

        if "tokens" not in data or not varies(data["tokens"]):
            return self._fit_folded(data, constraints, start)
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
        return Estimate(np.array([a, *theta[1:4], b, *theta[5:8], theta[8], 1.0, 0.0]),
                        extra={"objective": "Huber (delta 1e-3) on log loss (exponents searched "
                                            "on relative error, then all nine polished)",
                               "residual_space": "log loss", "fixed": dict(self.UNSATURATED)})

    def _fit_folded(self, data: Data, constraints: Constraints | None,
                    start: np.ndarray | None = None) -> Estimate:
        """Every run at one token count (or none recorded): L = c + a Ê^delta /
        N^(alpha + gamma ln Ê), the data term folded into c (the form of Clark et al. 2022 at
        fixed tokens, with their saturating Ê); b, omega, beta and zeta held at 0. The
        unsaturated law (Ê = E) is searched first; its answer, with saturations from none to
        strong, starts the Huber fit on log loss of all seven; a ``start`` (a resample's: the
        fit's own answer) starts it alone. Long because the search, the starts, the fit and
        the notes it states are one reading of the runs."""
        import numpy as np

        from archfit.laws.base import HUBER_DELTA
        from archfit.laws.columns import varies
        from archfit.laws.inference.optimize import Reparam, huber_lsq
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

        e_top = float(E.max())
        if start is None:
            grid = [np.array([0.0, a, 0.0]) for a in (0.05, 0.1, 0.2, 0.3, 0.6)]
            e = self._search(f, grid, None)
            _, (c, a) = nnls_relative(np.stack([np.ones_like(N), term(e)], 1), L)
            if a <= 0:
                raise FitError(f"{self.name}: the size term collapsed to zero; the runs do not "
                               "constrain how the loss falls with N")
            starts = [np.array([math.log(a), *e, c, s, inv]) for s in (1.0, 2.0)
                      for inv in (0.0, 1 / (4 * e_top), 1 / e_top, 4 / e_top)]
        else:
            s0 = np.asarray(start, float)
            starts = [np.array([math.log(max(s0[0], 1e-300)), *s0[1:4], s0[8], s0[9], s0[10]])]
        names = ("a", "delta", "alpha", "gamma", "c", "E_start", "inv_E_max")
        lnL = np.log(L)

        def resid(th: np.ndarray) -> np.ndarray:
            p = dict(zip(names, th))
            Eh = self.effective(E, p["E_start"], p["inv_E_max"])
            with np.errstate(all="ignore"):
                pred = p["c"] + np.exp(p["a"]) * Eh ** p["delta"] * N ** -(
                    p["alpha"] + p["gamma"] * np.log(Eh))
                r = np.log(pred) - lnL
            return np.where(np.isfinite(r), r, 1e3)

        bounds = [(-math.inf, math.inf), (-3.0, 3.0), (0.0, 3.0), (-1.0, 1.0),
                  (0.0, float(L.min())), (1.0, 1e3), (0.0, 1.0)]
        th = huber_lsq(resid, starts, Reparam([(n, False) for n in names]), HUBER_DELTA,
                       None, bounds=bounds, keep=4)
        p = dict(zip(names, th))
        D = data.get("tokens")
        at = (f" at its {float(D[0]):.3g} tokens" if D is not None else "")
        reach = (f"E {E.min():g} to {e_top:g} experts (a dense run is E = 1), N "
                 f"{N.min():.3g} to {N.max():.3g} active parameters")
        e_max = 1 / p["inv_E_max"] if p["inv_E_max"] > 0 else math.inf
        return Estimate(
            np.array([math.exp(p["a"]), p["delta"], p["alpha"], p["gamma"], 0.0, 0.0, 0.0, 0.0,
                      p["c"], p["E_start"], p["inv_E_max"]]),
            extra={"objective": "Huber (delta 1e-3) on log loss (the unsaturated law searched "
                                "first on relative error)", "residual_space": "log loss",
                   "uses_tokens": False, "n_max": float(N.max()), "e_max": e_top,
                   "reach": reach,
                   "notes": [f"every run shares one token count{at}: the data term is folded "
                             "into the constant (b, omega, beta and zeta held at 0), so the "
                             "law predicts at those tokens only (Clark et al. 2022's design)",
                             f"reach: {reach}; past it the law extrapolates, so the expert count "
                             f"past which a doubling gains under {self.GAIN_SHARE:.0%} of the "
                             f"loss (E_enough) is sought among 1 to {e_top:g} experts",
                             f"saturation: E_start {p['E_start']:.3g}, E_max "
                             f"{e_max:.3g} (Clark et al.'s transform; E_max inf: none seen)"]})

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        """The compute-optimal expert count at each FLOP budget; with the data term folded
        (one token count), at the table's largest active size and 10x it, ``E_enough``: the
        expert count past which one more doubling gains under :attr:`GAIN_SHARE` of the loss,
        sought up to the largest count the runs covered (the reach: a value there means more
        experts still help at the reach, not that it is best), at those tokens."""
        import numpy as np

        if (extra or {}).get("uses_tokens", True):
            return super().derived(params, targets, extra)
        n_max = float((extra or {}).get("n_max") or 1e9)
        e_max = float((extra or {}).get("e_max") or self.E_REACH)
        grid = np.exp(np.linspace(0.0, math.log(e_max), 400))
        out: dict[str, float] = {}
        for N in (n_max, 10 * n_max):
            at = {"params": np.full(grid.size, N), "n_experts": grid}
            loss = self.predict(params, at)
            twice = self.predict(params, {**at, "n_experts": 2 * grid})
            small = (loss - twice) < self.GAIN_SHARE * loss
            # the first count from which every further doubling gains under the share
            tail = np.flatnonzero(~small)
            k = 0 if tail.size == 0 else int(tail[-1]) + 1
            out[derived_name("E_enough", N)] = float(grid[k]) if k < grid.size else e_max
        return out

    def derived_notes(self, derived: Mapping[str, float],
                      extra: Mapping[str, Any] | None = None) -> list[str]:
        """An ``E_enough`` at the runs' largest count is no optimum: more experts still gain
        at least :attr:`GAIN_SHARE` a doubling there, as far as the runs reach."""
        notes = super().derived_notes(derived, extra)
        e_max = (extra or {}).get("e_max")
        for k, v in derived.items():
            if k.startswith("E_enough@") and e_max and v >= 0.999 * e_max:
                notes.append(f"{k}: more experts help up to the runs' reach (E <= {e_max:g}): "
                             f"each doubling still gains at least {self.GAIN_SHARE:.0%} of the "
                             "loss there, so no count is best within the runs")
        return notes

    def _polish(self, theta: np.ndarray, N: np.ndarray, D: np.ndarray, E: np.ndarray,
                L: np.ndarray) -> np.ndarray:
        """Least squares over all nine parameters from the projected search's answer (nine
        exponents and coefficients in one trust-region solve; the search alone can stop short
        in six dimensions), Huber (delta 1e-3) on log loss as every loss law. θ = (ln a,
        delta, alpha, gamma, ln b, omega, beta, zeta, c)."""
        import numpy as np
        from scipy.optimize import least_squares
        from scipy.special import huber

        from archfit.laws.base import HUBER_DELTA

        names = EXPONENTS

        def resid(th: np.ndarray) -> np.ndarray:
            p = dict(zip(names, (*th[1:4], *th[5:8])))
            tn, td = self._terms(p, N, D, E)
            with np.errstate(all="ignore"):
                r = np.log(th[8] + np.exp(th[0]) * tn + np.exp(th[4]) * td) - np.log(L)
            return np.where(np.isfinite(r), r, 1e3)

        r = least_squares(resid, theta, method="trf", loss="huber", f_scale=HUBER_DELTA,
                          max_nfev=4000)
        def cost(th: np.ndarray) -> float:
            return float(huber(HUBER_DELTA, resid(th)).sum())

        better = np.all(np.isfinite(r.x)) and cost(r.x) <= cost(theta)
        return r.x if better else theta

    def compute_optimal_sparse(self, params: Mapping[str, float], C: float,
                               experts: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
                               ) -> dict[str, float]:
        """The (N, D, E) of least loss for ``C = 6 N D`` FLOPs (routing not counted), E among
        ``experts``."""
        E, N, D, loss = self._least_loss(params, experts, lambda N, E: C / (6 * N))
        return {"N_active": N, "tokens": D, "n_experts": E, "loss": loss}
