"""Farseer's loss surface (Li et al. 2025, "Predictable Scale: Part II, Farseer: A Refined
Scaling Law in Large Language Models", arXiv 2506.10972): a data term whose coefficient and
exponent both move with model size, and a size-dependent floor,

    L(N, D) = exp(a3 N^gamma + b3) + exp(a2 N^beta + b2) D^(-exp(a1 N^alpha + b1)).

Chinchilla's law holds the data exponent fixed across sizes; on dense N x D grids the exponent
measured at each size drifts with N, which is what this form lets it do. N is scaled by
``N_SCALE`` inside the law (a1, a2 and a3 multiply (N / 1e9)^exponent), so every constant is of
order one. The compute-optimal split has no closed form: a bounded scalar search over ln N."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import (HUBER_DELTA, Constraints, Data, Estimate, ComputeLaw, derived_name,
                              register)

if TYPE_CHECKING:
    import numpy as np

N_SCALE = 1e9  # N enters as N / 1e9: a_i (N / N_SCALE)^exponent
# the stretching exponents alpha, beta, gamma stay within +-1: the form is a smooth drift of
# Chinchilla's terms with size
EXPONENT_BOUND = 1.0
# each stretched term a n^e + b is fitted as (u, c, e): u = a + b its value at n = 1, c = a e
# its slope in ln n there. As e -> 0 the public form trades a against b without end
# (a n^e + b -> (a + b) + a e ln n); in (u, c, e) that valley is straight, and the fit takes
# about a fifth of the steps. |e| is kept at least MIN_EXPONENT when mapped back (a = c / e)
MIN_EXPONENT = 1e-9
SLOPE_BOUND = 30.0  # |c| and |u|: exp() of the terms stays finite on any plausible grid


def _terms(p: Mapping[str, float], n: Any, exp: Any = math.exp) -> tuple[Any, Any, Any]:
    """(floor, coefficient, data exponent) at n = N / N_SCALE."""
    floor = exp(p["a3"] * n ** p["gamma"] + p["b3"])
    coef = exp(p["a2"] * n ** p["beta"] + p["b2"])
    expo = exp(p["a1"] * n ** p["alpha"] + p["b1"])
    return floor, coef, expo


def loss(p: Mapping[str, float], N: float, D: float) -> float:
    floor, coef, expo = _terms(p, N / N_SCALE)
    return floor + coef * D ** -expo


@register
class Farseer(ComputeLaw):
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
    default_targets = (1e21, 1e24)
    bounds = {"alpha": (-EXPONENT_BOUND, EXPONENT_BOUND), "beta": (-EXPONENT_BOUND, EXPONENT_BOUND),
              "gamma": (-EXPONENT_BOUND, EXPONENT_BOUND)}

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        n = np.asarray(data["params"], float) / N_SCALE
        D = np.asarray(data["tokens"], float)
        floor, coef, expo = _terms(params, n, exp=np.exp)
        return floor + coef * D ** -expo

    def loss_at(self, params: Mapping[str, float], N: float, D: float, **conditions: Any
                ) -> float | None:
        return loss(params, N, D)

    def more_derived(self, params: Mapping[str, float]) -> dict[str, float]:
        """The data exponent at 1e8, 1e9 and 1e10 parameters."""
        return {derived_name("data_exponent", N): _terms(params, N / N_SCALE)[2]
                for N in (1e8, 1e9, 1e10)}

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.columns import varies

        if not varies(data["params"]) or not varies(data["tokens"]):
            raise FitError(f"{self.name} needs runs of different sizes N and token counts D")
        if start is not None:
            starts = [np.asarray(start, float)]
        else:
            starts = [*staged_starts(data), *chinchilla_starts(data)]
        if constraints:
            th = self._fit_public(data, starts, constraints)
        else:
            th = _fit_stable(data, starts)
        return Estimate(np.asarray(th, float), extra={"objective": "huber(delta=1e-3) on log loss"})

    def _fit_public(self, data: Data, starts: list[np.ndarray],
                    constraints: Constraints) -> np.ndarray:
        """The fit in the public parameters, where --fix, --tie and --prior name them."""
        import numpy as np

        from archfit.laws.inference.optimize import Reparam, huber_lsq

        n, D, logL = data["params"] / N_SCALE, data["tokens"], np.log(data["loss"])
        rp = Reparam(tuple((name, False) for name in self.param_names), constraints)

        def resid(th: np.ndarray) -> np.ndarray:
            p = dict(zip(self.param_names, th))
            with np.errstate(all="ignore"):
                floor, coef, expo = _terms(p, n, exp=np.exp)
                r = np.log(floor + coef * D ** -expo) - logL
            return np.where(np.isfinite(r), r, 1e3)

        e = EXPONENT_BOUND
        bounds = [(-SLOPE_BOUND, SLOPE_BOUND), (-SLOPE_BOUND, SLOPE_BOUND), (-e, e)] * 3
        return huber_lsq(resid, starts, rp, HUBER_DELTA, constraints.scale, bounds=bounds)


def _to_stable(th: np.ndarray) -> np.ndarray:
    """Public (a, b, e) x 3 -> fitted (u, c, e) x 3."""
    import numpy as np

    a, b, e = np.asarray(th, float).reshape(3, 3).T
    return np.stack([a + b, a * e, e], 1).ravel()


def _to_public(z: np.ndarray) -> np.ndarray:
    import numpy as np

    u, c, e = np.asarray(z, float).reshape(3, 3).T
    e = np.where(np.abs(e) < MIN_EXPONENT, np.copysign(MIN_EXPONENT, e), e)
    return np.stack([c / e, u - c / e, e], 1).ravel()


def _fit_stable(data: Data, starts: list[np.ndarray]) -> np.ndarray:
    """Huber (δ = HUBER_DELTA) least squares on log loss in the (u, c, e) coordinates, with
    the analytic Jacobian, from each start; the best in the public parameters."""
    import numpy as np
    from scipy.optimize import least_squares

    from archfit.laws.inference.optimize import best_start

    L = np.log(data["params"] / N_SCALE)
    lnD, logL = np.log(data["tokens"]), np.log(data["loss"])

    def parts(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per term: h = u + c q(e), q = (n^e - 1) / e (ln n at e = 0), and dq/de."""
        u, c, e = z.reshape(3, 3).T
        q, dq, h = [], [], []
        for k in range(3):
            if abs(e[k]) < 1e-6:  # the series: q = L + e L^2 / 2, dq/de = L^2 / 2 + e L^3 / 3
                qk, dqk = L + e[k] * L * L / 2, L * L / 2 + e[k] * L ** 3 / 3
            else:
                qk = np.expm1(e[k] * L) / e[k]
                dqk = (L * np.exp(e[k] * L) - qk) / e[k]
            q.append(qk)
            dq.append(dqk)
            h.append(u[k] + c[k] * qk)
        return np.array(q), np.array(dq), np.array(h), c

    last: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def both(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The residuals and their Jacobian at z: least_squares asks for one, then the other
        at the same point, and one evaluation of the terms serves both."""
        if z.tobytes() in last:
            return last[z.tobytes()]
        with np.errstate(all="ignore"):
            (q1, q2, q3), (d1, d2, d3), (h1, h2, h3), c = parts(z)
            floor, expo = np.exp(h3), np.exp(h1)
            data_term = np.exp(h2 - expo * lnD)
            total = floor + data_term
            r = np.log(total) - logL
            de = -data_term * lnD * expo  # d total / d h1
            J = np.stack([de, de * q1, de * c[0] * d1, data_term, data_term * q2,
                          data_term * c[1] * d2, floor, floor * q3, floor * c[2] * d3], 1)
            J = J / total[:, None]
        last.clear()
        last[z.tobytes()] = (np.where(np.isfinite(r), r, 1e3), np.where(np.isfinite(J), J, 0.0))
        return last[z.tobytes()]

    def resid(z: np.ndarray) -> np.ndarray:
        return both(z)[0]

    def jac(z: np.ndarray) -> np.ndarray:
        return both(z)[1]

    e, s = EXPONENT_BOUND, SLOPE_BOUND
    lo = np.array([-s, -s, -e] * 3)
    hi = -lo
    def solve(start: np.ndarray) -> Any:
        z0 = np.clip(_to_stable(start), lo + 1e-9, hi - 1e-9)
        return least_squares(resid, z0, jac=jac, bounds=(lo, hi), loss="huber",  # type: ignore[arg-type]
                             f_scale=HUBER_DELTA, method="trf", x_scale="jac", max_nfev=2000)

    return _to_public(best_start(starts, solve, "the Farseer fit").x)


def chinchilla_starts(data: Data) -> list[np.ndarray]:
    """Chinchilla's fit read into the form: E + A N^-a = E (1 + (A/E) N^-a), about
    exp(ln E + (A/E) N^-a); B D^-b with no drift in size."""
    import numpy as np

    from archfit.laws.inference.optimize import HuberLSE

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

    from archfit.laws.columns import class_labels

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
