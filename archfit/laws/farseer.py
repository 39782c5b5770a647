"""Farseer's loss surface (Li et al. 2025, "Predictable Scale: Part II, Farseer: A Refined
Scaling Law in Large Language Models", arXiv 2506.10972): a data term whose coefficient and
exponent both move with model size, and a size-dependent floor,

    L(N, D) = exp(a3 N^gamma + b3) + exp(a2 N^beta + b2) D^(-exp(a1 N^alpha + b1)).

Chinchilla's law holds the data exponent fixed across sizes; on dense N x D grids the exponent
measured at each size drifts with N, which is what this form lets it do. N is scaled by
``N_SCALE`` inside the law (a1, a2 and a3 multiply (N / 1e9)^exponent), so every constant is of
order one. The compute-optimal split has no closed form: a golden-section search over ln N, in
plain math (``archfit recommend`` imports no numpy)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from archfit.errors import FitError
from archfit.laws.base import HUBER_DELTA, Constraints, Data, Estimate, Law, derived_name, register

if TYPE_CHECKING:
    import numpy as np

N_SCALE = 1e9  # N enters as N / 1e9: a_i (N / N_SCALE)^exponent
SEARCH_STEPS = 90  # golden-section halvings over ln N (as the data-constrained law's)
# the stretching exponents alpha, beta, gamma stay within +-1, and the data exponent's log
# within +-5: the form is a smooth drift of Chinchilla's terms with size, and unbounded it
# trades a1 against b1 without end (alpha -> 0 makes a1 n^alpha + b1 linear in ln n)
EXPONENT_BOUND = 1.0
COEF_BOUND = 5.0


def _terms(p: Mapping[str, float], n: Any, exp: Any = math.exp) -> tuple[Any, Any, Any]:
    """(floor, coefficient, data exponent) at n = N / N_SCALE."""
    floor = exp(p["a3"] * n ** p["gamma"] + p["b3"])
    coef = exp(p["a2"] * n ** p["beta"] + p["b2"])
    expo = exp(p["a1"] * n ** p["alpha"] + p["b1"])
    return floor, coef, expo


def loss(p: Mapping[str, float], N: float, D: float) -> float:
    floor, coef, expo = _terms(p, N / N_SCALE)
    return floor + coef * D ** -expo


def compute_optimal(p: Mapping[str, float], C: float) -> tuple[float, float]:
    """(N_opt, D_opt) under C = 6 N D: the size of least loss on the budget (golden-section
    search over ln N between 1e-4 and 1e4 of the size at 20 tokens per parameter)."""
    c6 = float(C) / 6.0
    n20 = math.sqrt(c6 / 20.0)

    def f(x: float) -> float:
        N = math.exp(x)
        try:
            return loss(p, N, c6 / N)
        except (OverflowError, ZeroDivisionError, ValueError):
            return math.inf

    a, b = math.log(n20) - 9.2, math.log(n20) + 9.2
    r = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = b - r * (b - a), a + r * (b - a)
    f1, f2 = f(x1), f(x2)
    for _ in range(SEARCH_STEPS):
        if f1 <= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - r * (b - a)
            f1 = f(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + r * (b - a)
            f2 = f(x2)
    N = math.exp(0.5 * (a + b))
    return N, c6 / N


@register
class Farseer(Law):
    name = "farseer"
    formula = ("L(N, D) = exp(a3 n^gamma + b3) + exp(a2 n^beta + b2) D^(-exp(a1 n^alpha + b1)),"
               " n = N / 1e9   [Li et al. 2025, Farseer]")
    description = ("A data exponent, a data coefficient and a floor that each move with model "
                   "size (Li et al. 2025): Huber (δ=1e-3) on log loss, least squares from "
                   "Chinchilla's fit read into the form.")
    columns = ("loss", "params", "tokens")
    param_names = ("a1", "b1", "alpha", "a2", "b2", "beta", "a3", "b3", "gamma")
    min_points = 12
    min_sizes = 4
    role = "compute"
    predicts_loss = True
    default_targets = (1e21, 1e24)
    bounds = {"alpha": (-EXPONENT_BOUND, EXPONENT_BOUND), "beta": (-EXPONENT_BOUND, EXPONENT_BOUND),
              "gamma": (-EXPONENT_BOUND, EXPONENT_BOUND), "a1": (-COEF_BOUND, COEF_BOUND),
              "b1": (-COEF_BOUND, COEF_BOUND)}

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        n = np.asarray(data["params"], float) / N_SCALE
        D = np.asarray(data["tokens"], float)
        floor, coef, expo = _terms(params, n, exp=np.exp)
        return floor + coef * D ** -expo

    def loss_at(self, params: Mapping[str, float], N: float, D: float) -> float | None:
        return loss(params, N, D)

    def compute_optimal(self, params: Mapping[str, float], C: float) -> tuple[float, float]:
        return compute_optimal(params, C)

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        for C in targets:
            n, d = compute_optimal(params, C)
            out[derived_name("N_opt", C)] = float(n)
            out[derived_name("D_opt", C)] = float(d)
        for N in (1e8, 1e9, 1e10):
            out[derived_name("data_exponent", N)] = _terms(params, N / N_SCALE)[2]
        return out

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.numeric import varies
        from archfit.laws.optimize import Reparam, huber_lsq

        if not varies(data["params"]) or not varies(data["tokens"]):
            raise FitError(f"{self.name} needs runs of different sizes N and token counts D")
        n = data["params"] / N_SCALE
        D = data["tokens"]
        logL = np.log(data["loss"])
        spec = tuple((name, False) for name in self.param_names)
        rp = Reparam(spec, constraints)

        def resid(th: np.ndarray) -> np.ndarray:
            p = dict(zip(self.param_names, th))
            with np.errstate(all="ignore"):
                floor, coef, expo = _terms(p, n, exp=np.exp)
                r = np.log(floor + coef * D ** -expo) - logL
            return np.where(np.isfinite(r), r, 1e3)

        if start is not None:
            starts = [np.asarray(start, float)]
        else:
            starts = [*staged_starts(data), *chinchilla_starts(data)]
        e, c = EXPONENT_BOUND, COEF_BOUND
        bounds = [(-c, c), (-c, c), (-e, e), (-30.0, 30.0), (-30.0, 30.0), (-e, e),
                  (-30.0, 30.0), (-10.0, 10.0), (-e, e)]
        th = huber_lsq(resid, starts, rp, HUBER_DELTA, constraints.scale if constraints else None,
                       bounds=bounds)
        return Estimate(np.asarray(th, float), extra={"objective": "huber(delta=1e-3) on log loss"})


def chinchilla_starts(data: Data) -> list[np.ndarray]:
    """Chinchilla's fit read into the form: E + A N^-a = E (1 + (A/E) N^-a), about
    exp(ln E + (A/E) N^-a); B D^-b with no drift in size."""
    import numpy as np

    from archfit.laws.optimize import HuberLSE

    h = HuberLSE(np.log(np.stack([data["params"], data["tokens"]], 1)), np.log(data["loss"]),
                 HUBER_DELTA)
    lA, lB, al, be, lE = h.minimize(h.projected_starts())
    a3 = math.exp(lA - lE) * N_SCALE ** -al
    return [np.array([a1, math.log(be), ex, 0.0, lB, 0.3, a3, lE, -al])
            for a1 in (-0.1, 0.1) for ex in (-0.3, 0.3)]


def staged_starts(data: Data) -> list[np.ndarray]:
    """Li et al.'s staged fit, as a start: at each size with at least four token counts,
    L = c + B D^-A (the data term's coefficient and exponent at that size, and its floor);
    then each of ln A, ln B and ln c as a stretched exponential a n^e + b across the sizes.
    None where fewer than four sizes have four token counts (a grid too sparse for it)."""
    import numpy as np
    from scipy.optimize import least_squares

    from archfit.laws.numeric import class_labels

    key = class_labels(data)
    rows = []
    for k in np.unique(key):
        m = key == k
        D, L = data["tokens"][m], data["loss"][m]
        if len(np.unique(np.round(np.log(D), 6))) < 4:
            continue

        def r(th: np.ndarray, D: np.ndarray = D, L: np.ndarray = L) -> np.ndarray:
            return np.log(np.exp(th[0]) + np.exp(th[1]) * D ** -np.exp(th[2])) - np.log(L)

        th0 = np.array([np.log(0.8 * L.min()), np.log(L.max()) + 0.3 * np.log(D.min()),
                        np.log(0.3)])
        try:
            res = least_squares(r, th0, method="trf", max_nfev=2000)
        except ValueError:
            continue
        if np.all(np.isfinite(res.x)):
            rows.append((float(np.median(data["params"][m])) / N_SCALE, *res.x))
    if len(rows) < 4:
        return []
    n, log_c, log_b, log_a = (np.array(c) for c in zip(*rows))

    def across(y: np.ndarray) -> tuple[float, float, float]:
        def r(th: np.ndarray) -> np.ndarray:
            return th[0] * n ** th[2] + th[1] - y

        best = min((least_squares(r, np.array([a, y.mean(), e]),
                                  bounds=([-50, -50, -EXPONENT_BOUND], [50, 50, EXPONENT_BOUND]))
                    for a in (-1.0, 1.0) for e in (-0.3, 0.3)), key=lambda x: x.cost)
        return float(best.x[0]), float(best.x[1]), float(best.x[2])

    a1, b1, al = across(log_a)
    a2, b2, be = across(log_b)
    a3, b3, ga = across(log_c)
    return [np.array([a1, b1, al, a2, b2, be, a3, b3, ga])]
