"""``data-overfit``: Chinchilla's L(N, D) plus a cost of overfitting repeated data,

    L(N, D, U) = E + A / N^alpha + B / D^beta + O (N / U)^omega (D / U)^rho,

with U the unique tokens among the D seen (D / U the epochs). archfit's own form, for sweeps
that repeat data far enough to hurt. Muennighoff et al. 2023's data-constrained law discounts
repeated tokens (its effective data only ever grows with the epochs), so it cannot say what
their own runs show: past some tens of epochs the loss rises again, and the more so the larger
the model per unique token (their Figure 3; Xue et al. 2023, "To Repeat or Not To Repeat",
find that larger models degrade sooner under repeated epochs; Hernandez et al. 2022 measure
the harm of repeated data). The added term is the simplest that grows with both: a power of
the capacity per unique token N / U times a power of the epochs D / U. At one epoch it is
O (N / D)^omega, a cost to large models trained on few tokens per parameter, which vanishes as
the tokens per parameter grow; O = 0 is Chinchilla's law.

Fitted to ScaleBench's training split of Muennighoff et al.'s runs, Muennighoff et al.'s decays
(R_D*, R_N*) added to this form fit to infinity (no decay) on each of three held-out regions:
the overfitting term does their work there, so they are not in it (docs/benchmarks/index.md).

At a size N on U unique tokens the loss is least at D* = (beta B U^rho (U/N)^omega /
(rho O))^(1 / (beta + rho)) tokens: more epochs than D*/U raise it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import HUBER_DELTA, ComputeLaw, Constraints, Data, Estimate, register
from archfit.laws.compute.data_constrained import TERM_DOMAINS

if TYPE_CHECKING:
    import numpy as np

# the overfitting term's starts (ln O, omega, rho): small, moderate and large, with exponents
# about linear in the capacity and sub-linear in the epochs; each beside Chinchilla's three
# best starts on the runs that do not repeat
OVERFIT_STARTS = ((-6.0, 1.0, 0.5), (-3.0, 0.7, 0.4), (-1.0, 0.5, 1.0))


def overfit_cost(p: Mapping[str, float], N: Any, D: Any, U: Any) -> Any:
    """The added term O (N/U)^omega (D/U)^rho (numbers, or numpy arrays)."""
    return p["O"] * (N / U) ** p["omega"] * (D / U) ** p["rho"]


def loss(p: Mapping[str, float], N: float, D: float, U: float | None = None) -> float:
    """L(N, D) on ``U`` unique tokens (None: every token unique)."""
    U = D if U is None or U >= D else U
    return (p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"]
            + overfit_cost(p, N, D, U))


def least_loss_tokens(p: Mapping[str, float], N: float, U: float) -> float:
    """D*: the tokens of least loss for a model of N parameters on U unique tokens, where the
    data term's fall meets the overfitting term's rise (d L / d D = 0; infinite where the
    term does not grow with the epochs)."""
    if not (p["O"] > 0 and p["rho"] > 0):
        return math.inf
    x = p["beta"] * p["B"] * U ** p["rho"] * (U / N) ** p["omega"] / (p["rho"] * p["O"])
    return x ** (1.0 / (p["beta"] + p["rho"]))


@register
class DataOverfit(ComputeLaw):
    name = "data-overfit"
    formula = ("L(N, D, U) = E + A / N^alpha + B / D^beta + O (N/U)^omega (D/U)^rho,  "
               "U unique tokens (the last term overfitting repeated data)   [archfit]")
    description = ("Chinchilla's law plus a cost of overfitting that grows with the "
                   "parameters per unique token and the epochs (archfit's form, after "
                   "Muennighoff et al. 2023 and Xue et al. 2023): Huber (δ=1e-3) on log loss.")
    columns = ("loss", "params", "tokens", "unique_tokens")
    param_names = ("E", "A", "B", "alpha", "beta", "O", "omega", "rho")
    conditions = ("unique_tokens",)
    min_points = 12
    min_sizes = 3
    default_targets = (1e21, 1e24)
    bounds = {"E": (0.0, None)}
    domains = {**TERM_DOMAINS, "O": (0.0, None, True), "omega": (None, None, False),
               "rho": (None, None, False)}
    supports_ties = True
    # the internal vector: (ln A, ln B, alpha, beta, ln E, ln O, omega, rho)
    SPEC = (("A", True), ("B", True), ("alpha", False), ("beta", False), ("E", True),
            ("O", True), ("omega", False), ("rho", False))

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N = np.asarray(data["params"], float)
        D = np.asarray(data["tokens"], float)
        U = np.minimum(np.asarray(data.get("unique_tokens", D), float), D)
        return (params["E"] + params["A"] / N ** params["alpha"]
                + params["B"] / D ** params["beta"] + overfit_cost(params, N, D, U))

    def loss_at(self, params: Mapping[str, float], N: float, D: float,
                unique_tokens: float | None = None) -> float | None:
        """The loss on ``unique_tokens`` unique tokens (None: every token unique)."""
        return loss(params, N, D, unique_tokens)

    def condition_report(self, params: Mapping[str, float], D: float, N: float | None = None,
                         unique_tokens: float | None = None) -> dict[str, Any]:
        """The epochs, the overfitting term's cost at the split, and the epochs past which more
        of them raise the loss at that size."""
        if not unique_tokens or N is None:
            return {}
        U = min(float(unique_tokens), D)
        best = least_loss_tokens(params, N, U)
        cost = float(overfit_cost(params, N, D, U))
        return {"unique_tokens": U, "epochs": D / U, "overfit_cost_nats": cost,
                "least_loss_epochs": best / U,
                "epochs_pay": (f"{D / U:.3g} epochs; the loss at this size is least at "
                               f"{best / U:.3g} epochs (more raise it); overfitting costs "
                               f"{cost:.3g} nats here" if math.isfinite(best) else
                               f"{D / U:.3g} epochs; the fit finds no rise with more epochs")}

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.columns import varies
        from archfit.laws.compute.data_constrained import fresh_starts, sizes_tokens_unique
        from archfit.laws.inference.optimize import Reparam, huber_lsq, log_sum_exp

        N, D, U = sizes_tokens_unique(self.name, data)
        if not varies(D / U):
            raise FitError(f"{self.name} needs runs that repeat data different numbers of "
                           "times (tokens / unique_tokens) to fit its overfitting term; with "
                           "every token unique use chinchilla")
        logL = np.log(data["loss"])
        lnN, lnD, lnNU, lnDU = np.log(N), np.log(D), np.log(N / U), np.log(D / U)
        rp = Reparam(self.SPEC, constraints)

        def terms(th: np.ndarray) -> np.ndarray:
            return np.stack([th[0] - th[2] * lnN, th[1] - th[3] * lnD,
                             np.full_like(lnN, th[4]), th[5] + th[6] * lnNU + th[7] * lnDU])

        def resid(th: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                r = log_sum_exp(terms(th), axis=0) - logL
            return np.where(np.isfinite(r), r, 1e3)

        def jac(th: np.ndarray) -> np.ndarray:  # d ln L / d th: each term's softmax weight
            with np.errstate(all="ignore"):
                _, w = log_sum_exp(terms(th), axis=0, weights=True)
            return np.nan_to_num(np.stack([w[0], w[1], -w[0] * lnN, -w[1] * lnD, w[2], w[3],
                                           w[3] * lnNU, w[3] * lnDU], axis=1))

        if start is not None:
            v = dict(zip(self.param_names, start))
            starts = [np.array([math.log(max(v[n], 1e-12)) if lg else v[n]
                                for n, lg in self.SPEC])]
        else:  # Chinchilla's starts on the runs that do not repeat, times the term's starts
            starts = [np.concatenate([b, o]) for b in fresh_starts(N, D, U, logL)
                      for o in OVERFIT_STARTS]
        th = huber_lsq(resid, starts, rp, HUBER_DELTA, constraints.scale if constraints else None,
                       jac=jac)
        p = rp.public(th)
        return Estimate(np.array([p[n] for n in self.param_names]),
                        extra={"objective": "huber(delta=1e-3) on log loss"})
