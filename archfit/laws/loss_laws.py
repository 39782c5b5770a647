"""Laws that predict loss: Kaplan L(N) and L(N, D), Chinchilla L(N, D) (Huber/LSE and
variable projection), and the joint depth-width law."""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from archfit._lazy import lazy

np = lazy("numpy")

from archfit.errors import FitError
from archfit.laws.base import Data, Estimate, Law, derived_name, register

HUBER_DELTA = 1e-3


# ============================================================================ Huber on log loss
class HuberLSE:
    """log L̂ = LSE(a_1 - α_1 x_1, ..., a_k - α_k x_k, e), fitted with the Huber loss on
    log L̂ - log L (Hoffmann et al. 2022, App. D.2; Besiroglu et al. 2024). Parameter vector
    θ = (a_1..a_k, α_1..α_k, e)."""

    def __init__(self, X: np.ndarray, t: np.ndarray, delta: float = HUBER_DELTA):
        self.X, self.t, self.delta = X, t, delta
        self.n, self.k = X.shape

    def _terms(self, theta: np.ndarray) -> np.ndarray:
        k = self.k
        a, al, e = theta[..., :k], theta[..., k:2 * k], theta[..., 2 * k:2 * k + 1]
        U = a[..., None, :] - self.X * al[..., None, :]
        E = np.broadcast_to(e[..., None, :], U.shape[:-1] + (1,))
        return np.concatenate([U, E], axis=-1)

    def objective(self, theta: np.ndarray) -> float | np.ndarray:
        """Mean Huber loss / δ² (scaled so optimizers see O(1) numbers); vectorized over θ rows."""
        U = self._terms(theta)
        m = U.max(-1)
        lse = m + np.log(np.exp(U - m[..., None]).sum(-1))
        r = lse - self.t
        d = self.delta
        a = np.abs(r)
        h = np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))
        return h.mean(-1) / (d * d)

    def value_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        U = self._terms(theta)
        m = U.max(-1)
        w = np.exp(U - m[:, None])
        s = w.sum(-1)
        lse = m + np.log(s)
        p = w / s[:, None]
        r = lse - self.t
        d = self.delta
        a = np.abs(r)
        h = np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))
        psi = np.clip(r, -d, d)
        scale = 1.0 / (self.n * d * d)
        k = self.k
        wp = psi[:, None] * p
        g = np.empty(2 * k + 1)
        g[:k] = wp[:, :k].sum(0)
        g[k:2 * k] = -(wp[:, :k] * self.X).sum(0)
        g[2 * k] = wp[:, k].sum()
        return float(h.sum() * scale), g * scale

    def minimize(self, starts: np.ndarray, n_polish: int = 4) -> np.ndarray:
        from scipy.optimize import minimize

        starts = np.atleast_2d(starts)
        if len(starts) > n_polish:
            vals = np.concatenate([np.atleast_1d(self.objective(c))
                                   for c in np.array_split(starts, max(1, len(starts) // 256))])
            starts = starts[np.argsort(vals)[:n_polish]]
        best = None
        for s0 in starts:
            res = minimize(self.value_and_grad, s0, jac=True, method="L-BFGS-B",
                           options={"maxiter": 2000, "ftol": 1e-14, "gtol": 1e-10})
            if np.all(np.isfinite(res.x)) and (best is None or res.fun < best.fun):
                best = res
        if best is None:
            raise FitError("the Huber fit did not converge from any starting point")
        return best.x


def _log_cols(data: Data, names: Sequence[str]) -> np.ndarray:
    return np.stack([np.log(data[n]) for n in names], axis=1)


def _varies(x: np.ndarray, rel: float = 0.05) -> bool:
    return bool(np.max(x) > np.min(x) * (1 + rel))


# ============================================================================ Kaplan
@register
class KaplanN(Law):
    name = "kaplan-n"
    formula = "L(N) = (N_c / N)^alpha_N   [Kaplan et al. 2020, eq. 1.1]"
    description = "Loss vs parameters, data not limiting; OLS of log L on log N."
    columns = ("loss", "params")
    param_names = ("N_c", "alpha_N")
    min_points = 3

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        x, t = np.log(data["params"]), np.log(data["loss"])
        if not _varies(data["params"]):
            raise FitError("kaplan-n needs runs of different sizes; all have about the same N")
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
            import statsmodels.api as sm

            res = sm.OLS(t, X).fit()
            V = res.cov_params()
            # delta method to (N_c, alpha): N_c = exp(c0 / -c1)
            J = np.array([[np.exp(log_nc) / alpha, np.exp(log_nc) * c0 / alpha**2], [0.0, -1.0]])
            cov = J @ V @ J.T
        return Estimate(np.array([np.exp(log_nc), alpha]), cov)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        return (params["N_c"] / np.asarray(data["params"], float)) ** params["alpha_N"]


@register
class KaplanND(Law):
    name = "kaplan-nd"
    formula = ("L(N, D) = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D   "
               "[Kaplan et al. 2020, eq. 1.5]")
    description = "Loss vs parameters and tokens; least squares on log loss."
    columns = ("loss", "params", "tokens")
    param_names = ("N_c", "D_c", "alpha_N", "alpha_D")
    min_points = 5

    @staticmethod
    def _log_pred(theta: np.ndarray, lx: np.ndarray, ly: np.ndarray) -> np.ndarray:
        lnc, ldc, an, ad = theta
        return ad * np.logaddexp((an / ad) * (lnc - lx), ldc - ly)

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        from scipy.optimize import least_squares

        if not (_varies(data["params"]) and _varies(data["tokens"])):
            raise FitError("kaplan-nd needs runs that vary both N and D")
        lx, ly, t = np.log(data["params"]), np.log(data["tokens"]), np.log(data["loss"])

        def resid(th: np.ndarray) -> np.ndarray:
            return self._log_pred(th, lx, ly) - t

        if start is not None:
            starts = [np.array([np.log(start[0]), np.log(start[1]), start[2], start[3]])]
        else:
            starts = [np.array([np.log(nc), np.log(dc), an, ad])
                      for nc, dc, an, ad in itertools.product(
                          [1e10, 1e14], [1e9, 1e13], [0.07, 0.3], [0.1, 0.3])]
        best = None
        for s0 in starts:
            try:
                r = least_squares(resid, s0, method="lm", max_nfev=4000)
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
            dof = max(1, len(t) - 4)
            s2 = 2 * best.cost / dof
            try:
                Vt = s2 * np.linalg.inv(J.T @ J)
                T = np.diag([np.exp(lnc), np.exp(ldc), 1.0, 1.0])
                cov = T @ Vt @ T.T
            except np.linalg.LinAlgError:
                cov = None
        return Estimate(np.array([np.exp(lnc), np.exp(ldc), an, ad]), cov)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        th = np.array([np.log(params["N_c"]), np.log(params["D_c"]), params["alpha_N"],
                       params["alpha_D"]])
        return np.exp(self._log_pred(th, np.log(np.asarray(data["params"], float)),
                                     np.log(np.asarray(data["tokens"], float))))


# ============================================================================ Chinchilla
def compute_optimal(params: Mapping[str, float], C: float | np.ndarray) -> tuple[Any, Any]:
    """N_opt(C), D_opt(C) for L = E + A/N^α + B/D^β under C = 6 N D (Hoffmann et al. eq. 4)."""
    A, B, a, b = params["A"], params["B"], params["alpha"], params["beta"]
    G = (a * A / (b * B)) ** (1.0 / (a + b))
    c6 = np.asarray(C, dtype=float) / 6.0
    return G * c6 ** (b / (a + b)), c6 ** (a / (a + b)) / G


class _ChinchillaBase(Law):
    formula = "L(N, D) = E + A / N^alpha + B / D^beta   [Hoffmann et al. 2022, eq. 2]"
    columns = ("loss", "params", "tokens")
    param_names = ("E", "A", "B", "alpha", "beta")
    min_points = 6
    default_targets = (1e21, 1e24)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        N = np.asarray(data["params"], float)
        D = np.asarray(data["tokens"], float)
        return params["E"] + params["A"] / N ** params["alpha"] + params["B"] / D ** params["beta"]

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        for C in targets:
            n, d = compute_optimal(params, C)
            out[derived_name("N_opt", C)] = float(n)
            out[derived_name("D_opt", C)] = float(d)
        out["a=beta/(alpha+beta)"] = params["beta"] / (params["alpha"] + params["beta"])
        return out

    def _check(self, data: Data) -> None:
        if not _varies(data["params"]):
            raise FitError(f"{self.name} needs runs of different sizes N")
        if not _varies(data["tokens"]):
            raise FitError(f"{self.name} needs runs with different token counts D")


@register
class Chinchilla(_ChinchillaBase):
    name = "chinchilla"
    description = ("Huber loss (δ=1e-3) on log loss, log-sum-exp parametrization, L-BFGS from a "
                   "grid of starts (Hoffmann et al. 2022 App. D.2; Besiroglu et al. 2024).")

    # Hoffmann et al. App. D.2's grid of starting points
    GRID = dict(alpha=[0.0, 0.5, 1.0, 1.5, 2.0], beta=[0.0, 0.5, 1.0, 1.5, 2.0],
                e=[-1.0, -0.5, 0.0, 0.5, 1.0], a=[0, 5, 10, 15, 20, 25], b=[0, 5, 10, 15, 20, 25])

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        self._check(data)
        X = _log_cols(data, ["params", "tokens"])
        h = HuberLSE(X, np.log(data["loss"]))
        if start is not None:
            E, A, B, al, be = start
            starts = np.array([[np.log(A), np.log(B), al, be, np.log(E)]])
        else:
            g = self.GRID
            starts = np.array([[a, b, al, be, e] for a, b, al, be, e in itertools.product(
                g["a"], g["b"], g["alpha"], g["beta"], g["e"])])
        th = h.minimize(starts)
        a, b, al, be, e = th
        return Estimate(np.array([np.exp(e), np.exp(a), np.exp(b), al, be]),
                        extra={"objective": "huber(delta=1e-3) on log loss"})


@register
class ChinchillaVarPro(_ChinchillaBase):
    name = "chinchilla-varpro"
    description = ("Variable projection: for given (alpha, beta) the coefficients E, A, B >= 0 "
                   "are solved exactly (non-negative least squares on loss); only the two "
                   "exponents are searched. Far better conditioned than the 5-parameter fit.")

    def _inner(self, ab: np.ndarray, N: np.ndarray, D: np.ndarray,
               L: np.ndarray) -> tuple[float, np.ndarray]:
        from scipy.optimize import nnls

        al, be = ab
        M = np.stack([np.ones_like(N), N ** -al, D ** -be], axis=1)
        # columns scaled for conditioning, solved in relative-error form (rows / L)
        sc = np.abs(M).max(0)
        sc[sc == 0] = 1
        coef, _ = nnls(M / sc / L[:, None], np.ones_like(L))
        coef = coef / sc
        r = (M @ coef - L) / L
        return float(r @ r), coef

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        from scipy.optimize import minimize

        self._check(data)
        N, D, L = data["params"], data["tokens"], data["loss"]

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
        best = None
        for s0 in starts:
            r = minimize(f, s0, method="Nelder-Mead",
                         options={"xatol": 1e-7, "fatol": 1e-14, "maxiter": 4000})
            if best is None or r.fun < best.fun:
                best = r
        assert best is not None
        _, coef = self._inner(best.x, N, D, L)
        E, A, B = coef
        if A <= 0 or B <= 0:
            raise FitError("chinchilla-varpro: a coefficient collapsed to zero; the data do not "
                           "constrain both the N and D terms")
        return Estimate(np.array([E, A, B, best.x[0], best.x[1]]),
                        extra={"objective": "squared relative error on loss, NNLS inner solve"})


# ============================================================================ depth-width
@register
class DepthWidth(Law):
    name = "depth-width"
    formula = ("L(w, d, D) = E + A / w^alpha + B / d^beta + C / D^gamma   "
               "(w = d_model, d = n_layer; the Gemstones form, McLeish et al. 2025)")
    description = ("Joint law in width, depth and tokens, Huber on log loss. When all runs "
                   "share one token count the D term folds into E (C = 0). Also a Kaplan-style "
                   "shape penalty: relative loss vs log aspect ratio at fixed N.")
    columns = ("loss", "params", "d_model", "n_layer")
    param_names = ("E", "A", "alpha", "B", "beta", "C", "gamma")
    min_points = 8
    default_targets = (1e9, 1e12)

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        if not _varies(data["d_model"]) or not _varies(data["n_layer"]):
            raise FitError("depth-width needs runs that vary both d_model and n_layer")
        use_d = "tokens" in data and _varies(data["tokens"], 0.2)
        names = ["d_model", "n_layer"] + (["tokens"] if use_d else [])
        X = _log_cols(data, names)
        h = HuberLSE(X, np.log(data["loss"]))
        k = len(names)
        if start is not None:
            E, A, al, B, be, C, ga = start
            a_s = [np.log(A), np.log(B)] + ([np.log(max(C, 1e-30))] if use_d else [])
            e_s = [al, be] + ([ga] if use_d else [])
            starts = np.array([a_s + e_s + [np.log(E)]])
        else:
            coef = np.arange(0, 13, 3.0)
            expo = np.array([0.2, 0.5, 1.0, 1.5])
            es = np.arange(-1, 1.01, 0.5)
            starts = np.array([list(a) + list(x) + [e] for a in itertools.product(coef, repeat=k)
                               for x in itertools.product(expo, repeat=k) for e in es])
        th = h.minimize(starts)
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
        w = np.asarray(data["d_model"], float)
        d = np.asarray(data["n_layer"], float)
        out = params["E"] + params["A"] / w ** params["alpha"] + params["B"] / d ** params["beta"]
        if params.get("C", 0) > 0 and "tokens" in data:
            out = out + params["C"] / np.asarray(data["tokens"], float) ** params["gamma"]
        return out

    @staticmethod
    def optimal_depth(params: Mapping[str, float], N: float | np.ndarray) -> Any:
        """argmin over depth of A/w^α + B/d^β with w = sqrt(N / (12 d)) (Kaplan's N ≈ 12 d w²)."""
        A, al, B, be = params["A"], params["alpha"], params["B"], params["beta"]
        N = np.asarray(N, float)
        return (2 * be * B / (al * A) * (N / 12.0) ** (al / 2)) ** (1.0 / (al / 2 + be))

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        out = {}
        for N in targets:
            d = float(self.optimal_depth(params, N))
            out[derived_name("n_layer_opt", N)] = d
            out[derived_name("d_model_opt", N)] = float(np.sqrt(N / (12 * d)))
        return out


def shape_penalty(data: Data) -> dict[str, Any] | None:
    """Kaplan et al. 2020 Fig. 5: loss relative to the best shape of the same size, against
    log aspect ratio d_model / n_layer; a pooled quadratic gives the best ratio."""
    from archfit.tables import size_classes

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
    best = float(np.exp(-c1 / (2 * c2))) if c2 > 0 else None
    return {"coef_quadratic": [float(c2), float(c1), float(c0)],
            "best_aspect_ratio": best,
            "points": {"log_aspect_ratio": x.tolist(), "rel_loss": y.tolist()}}
