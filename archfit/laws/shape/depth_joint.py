"""A joint shape law for scattered sweeps: every run at once, no iso-parameter grid needed.

    L(N, n_layer, D) = E + A / N^alpha + B / D^beta + kappa * (ln n_layer - ln n_layer*(N))^2
    ln n_layer*(N) = p + q ln N

Chinchilla's L(N, D) (Hoffmann et al. 2022, eq. 2) plus a quadratic penalty in log depth around
an optimum that moves with size as a power law: the log-depth quadratic is the shape of loss vs
depth at fixed N seen by Kaplan et al. 2020 (Fig. 5) and Levine et al. 2020, and a power law in
N is the simplest optimum that grows with size. Fitted like ``chinchilla`` (Huber δ=1e-3 on log
loss, multi-start, L-BFGS with an analytic gradient); bootstrapped over shapes, since the rows of
one shape at several token counts are not independent. The optimizer holds the floor
E + A / N^alpha in level coordinates about the runs' mean log size (its level there, the share
of it that falls with size, the exponent: see :class:`JointObjective`), where a sweep of little
size range does not leave a curved valley to walk. A resample starts at the point estimate
(and at the valley's end, E = 0), takes trust-region Gauss-Newton steps on the same Huber
objective before L-BFGS finishes where the runs' tokens vary (``JointObjective.polish``), and
keeps the better of that and :data:`PLAIN_STEPS` L-BFGS steps in the plain coordinates (some
resamples hold several optima): on the demo's 17-run sweep 1.7x faster a resample than the
plain coordinates alone, and in 40 resamples checked against 20,000 plain steps never a worse
optimum (4 better).
N is the non-embedding count (Kaplan's); without a params column, N = 12 · n_layer · d_model².
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError, FitInputError
from archfit.laws.base import HUBER_DELTA, Constraints, Data, Estimate, ShapeLaw, register
from archfit.shapes import kaplan_width

if TYPE_CHECKING:
    import numpy as np

    from archfit.shapes import Shape

# a resample's L-BFGS steps in the plain coordinates, beside the level ones (JointObjective):
# those that converge there take 70-250 on the demo's sweep; the rest walk a valley for 3,000
PLAIN_STEPS = 300
LN_N_REF = math.log(1e8)  # the optimizer sees p at N = 1e8 (p_ref = p + q ln 1e8): better conditioned


class JointObjective:
    """Mean Huber loss of log L̂ - log L over internal θ = (ln E, ln A, α, ln B, β, ln κ,
    p_ref, q), with its gradient; optionally with Gaussian priors on the public parameters.

    With ``n0`` (a centre of ln N) the floor's three coordinates are its level there, the
    share of that level that falls with size, and the exponent, each as a log: (ln ℓ, ln φ,
    ln α) with E = (1 - φ) ℓ and A = φ ℓ e^(α n0). Where a sweep spans little size its losses
    fix the floor's level and slope at the centre and barely its curvature, so (E, A, α) trade
    off along a curved valley that ends at E = 0; in these coordinates the valley is the line
    ln φ + ln α = const and its end the bound ln φ = 0."""

    def __init__(self, lnN: np.ndarray, lnL: np.ndarray, lnD: np.ndarray | None, t: np.ndarray,
                 prior: Any = None, delta: float = HUBER_DELTA, n0: float | None = None):
        self.lnN, self.lnL, self.lnD, self.t, self.delta = lnN, lnL, lnD, t, delta
        self.prior = prior  # (index, mean, sd, scale of data term) or None
        self.n0 = n0

    def _model(self, th: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """L̂ per row and d L̂ / dθ, one array per parameter."""
        import numpy as np

        e, a, al, b, be, k, pr, q = th
        K = np.exp(k)  # log-held: positive without bounds
        # distance of ln depth from the optimal ln L* = p_ref + q (ln N - ln 1e8)
        z = self.lnL - pr - q * (self.lnN - LN_N_REF)
        if self.n0 is None:
            E, A = np.exp(e), np.exp(a)
            x = A * np.exp(-al * self.lnN)  # the size term A N^-alpha
            pred = E + x + K * z * z
            # d pred / d theta, one row per parameter (d/d ln E = E, d/d ln A = x, ...)
            J = [np.full_like(pred, E), x, -x * self.lnN]
        else:  # e, a, al = ln level, ln share, ln alpha
            lev, phi, alpha = np.exp(e), np.exp(a), np.exp(al)
            g = np.exp(-alpha * (self.lnN - self.n0))  # (N / N0)^-alpha
            floor = lev * (1 - phi + phi * g)
            pred = floor + K * z * z
            J = [floor, lev * phi * (g - 1), -lev * phi * g * (self.lnN - self.n0) * alpha]
        if self.lnD is not None:
            y = np.exp(b - be * self.lnD)
            pred = pred + y
            J += [y, -y * self.lnD]
        else:
            J += [np.zeros_like(pred)] * 2
        J += [K * z * z, -2 * K * z, -2 * K * z * (self.lnN - LN_N_REF)]
        return pred, J

    def value_and_grad(self, th: np.ndarray) -> tuple[float, np.ndarray]:
        import numpy as np
        from scipy.special import huber

        pred, J = self._model(th)
        r = np.log(pred) - self.t  # residuals in log loss: relative errors, scale-free
        d, n = self.delta, len(r)
        h = huber(d, r)  # quadratic inside d, linear outside
        # dHuber/dr is r clipped to [-d, d]; dr/dpred = 1/pred; scaled like the value
        w = np.clip(r, -d, d) / pred / (n * d * d)
        val = float(h.sum() / (n * d * d))
        grad = np.array([float(w @ j) for j in J])
        if self.prior is not None:
            pv, pg = self.prior(th)
            val, grad = val + pv, grad + pg
        return val, grad

    def objective(self, th: np.ndarray) -> float:
        return self.value_and_grad(th)[0]

    def residuals_and_jacobian(self, th: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """r = log L̂ - log L per row and dr/dθ (n x 8), for the least-squares polish."""
        import numpy as np

        pred, J = self._model(th)
        return np.log(pred) - self.t, np.stack(J, axis=1) / pred[:, None]

    def polish(self, start: np.ndarray, bounds: list[tuple[Any, Any]]) -> np.ndarray:
        """The Huber optimum near ``start`` (a resample warm-started at the point estimate):
        trust-region least squares with scipy's Huber loss at δ, the same objective as
        :meth:`value_and_grad` (½r² inside δ, δ(|r| - ½δ) outside). Gauss-Newton steps from a
        near start converge in a few Jacobians where L-BFGS takes tens of gradients; it needs
        the D term and no prior (Huber rows only) and open boxes (no --fix)."""
        import numpy as np
        from scipy.optimize import least_squares

        from archfit.laws.inference.optimize import evaluated_once

        lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
        hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
        x0 = np.clip(start, lo, hi)
        rj = evaluated_once(self.residuals_and_jacobian)
        res = least_squares(lambda th: rj(th)[0], x0, jac=lambda th: rj(th)[1],  # type: ignore[arg-type]  # scipy's stub types jac as str; a callable is documented
                            bounds=(lo, hi),
                            loss="huber", f_scale=self.delta, method="trf",
                            xtol=1e-10, ftol=1e-10, gtol=1e-10)
        return res.x


def _plain_bounds(bounds: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """The plain coordinates' box, from the level coordinates' (which differ in the floor's)."""
    return [(None, None), (None, None), (0.0, 3.0), *bounds[3:]]


def _levels(th: np.ndarray, n0: float | None) -> np.ndarray:
    """Plain internal coordinates (ln E, ln A, alpha, ...) in :class:`JointObjective`'s level
    coordinates (ln level, ln share, ln alpha, ...) about ``n0``; unchanged without it."""
    import numpy as np

    if n0 is None:
        return np.asarray(th, float)
    out = np.array(th, float)
    E, A, al = math.exp(th[0]), math.exp(th[1]), max(float(th[2]), 1e-12)
    size = max(A * math.exp(-al * n0), 1e-300)
    out[:3] = math.log(E + size), math.log(size / (E + size)), math.log(al)
    return out


def _plain(th: np.ndarray, n0: float | None) -> np.ndarray:
    """:func:`_levels`' inverse (E = 0 held as ln E = -inf's stand-in, -700)."""
    import numpy as np

    if n0 is None:
        return np.asarray(th, float)
    out = np.array(th, float)
    lev, phi, al = math.exp(th[0]), math.exp(th[1]), math.exp(th[2])
    E, size = (1 - phi) * lev, phi * lev
    out[:3] = (math.log(E) if E > 0 else -700.0), \
        (math.log(size) if size > 0 else -700.0) + al * n0, al
    return out


_INTERNAL = ("E", "A", "alpha", "B", "beta", "kappa", "p_ref", "q")
_LOG = {"E", "A", "B", "kappa"}  # held in log space internally


def _fixed_bounds(bounds: list[tuple[Any, Any]], c: Constraints) -> list[tuple[Any, Any]]:
    """--fix as equal bounds on the internal parameters (p only together with q)."""
    out = list(bounds)
    for name, v in c.fixed.items():
        if name == "p":
            if "q" not in c.fixed:
                raise FitError("depth-joint: fix p together with q (the optimizer holds p at "
                               "N = 1e8, which moves with q)")
            name, v = "p_ref", v + c.fixed["q"] * LN_N_REF
        i = _INTERNAL.index(name)
        x = math.log(v) if name in _LOG else v
        out[i] = (x, x)
    return out


def _prior_term(c: Constraints, n: int) -> Any:
    """Gaussian priors on public parameters, weighed against the Huber data term as a
    likelihood whose residual scale is ``c.scale`` (the data-only fit's)."""
    import numpy as np

    s = c.scale or HUBER_DELTA
    tau = HUBER_DELTA * s if s > HUBER_DELTA else s * s  # Huber's linear / quadratic regime
    weight = tau / (HUBER_DELTA ** 2 * n)

    def term(th: np.ndarray) -> tuple[float, np.ndarray]:
        val, g = 0.0, np.zeros_like(th)
        for name, (m, sd) in c.prior.items():
            if name == "p":
                v, dv = th[6] - th[7] * LN_N_REF, {6: 1.0, 7: -LN_N_REF}
            else:
                i = _INTERNAL.index(name)
                v = math.exp(th[i]) if name in _LOG else th[i]
                dv = {i: v if name in _LOG else 1.0}
            z = (v - m) / sd
            val += 0.5 * z * z
            for i, d in dv.items():
                g[i] += z / sd * d
        return weight * val, weight * g

    return term


@register
class DepthJoint(ShapeLaw):
    name = "depth-joint"
    formula = ("L(N, n_layer, D) = E + A / N^alpha + B / D^beta + kappa * (ln n_layer - p - "
               "q ln N)^2   (n_layer*(N) = e^p N^q; N non-embedding)")
    description = ("Joint shape law fitted to every run at once (scattered shapes, many token "
                   "counts): Chinchilla's L(N, D) plus a quadratic penalty in log depth around a "
                   "power-law optimum. Huber on log loss, bootstrap over shapes.")
    columns = ("loss", "params", "n_layer")
    param_names = ("E", "A", "alpha", "B", "beta", "kappa", "p", "q")
    min_points = 10
    min_sizes = 3
    predicts_loss = True
    default_targets = (1e9, 1e12)
    # the optimizer's box (fit_point) and the positive coefficients
    bounds = {"E": (0.0, None), "kappa": (0.0, None), "alpha": (0.0, 3.0), "beta": (0.0, 3.0),
              "q": (-1.0, 2.0)}
    domains = {"E": (0.0, None, True), "A": (0.0, None, True), "alpha": (0.0, 3.0, True),
               "B": (0.0, None, True), "beta": (0.0, 3.0, True), "kappa": (0.0, None, True),
               "q": (-1.0, 2.0, False)}
    folded_without_tokens = ("B", "beta")

    def prepare(self, frame: Any) -> Data:
        # without a params column, fit() has counted N with the shape core (laws.conventions)
        if "n_layer" not in frame.columns:
            raise FitInputError("depth-joint needs a depth column; map one with --map "
                                "n_layer=COLUMN")
        return super().prepare(frame)

    def classes(self, data: Data, tol: float | None = None) -> np.ndarray:
        # by measured size (the planned size is not what the law's N means)
        import numpy as np

        from archfit.laws.columns import SIZE_TOLERANCE, size_classes

        if tol is None and "size_class" in data:
            return np.asarray(data["size_class"]).astype(int)
        return size_classes(data["params"], None, SIZE_TOLERANCE if tol is None else tol)

    # ---------------------------------------------------------------- fitting
    def _arrays(self, data: Data) -> tuple[Any, Any, Any, Any]:
        import numpy as np

        from archfit.laws.columns import varies

        if len(np.unique(data["n_layer"])) < 3:
            raise FitError("depth-joint needs at least 3 different depths")
        if not varies(data["params"], 0.25):
            raise FitError("depth-joint needs runs of different sizes N")
        use_d = "tokens" in data and varies(data["tokens"], 0.2)
        return (np.log(data["params"]), np.log(data["n_layer"]),
                np.log(data["tokens"]) if use_d else None, np.log(data["loss"]))

    def _starts(self, lnN: np.ndarray, lnL: np.ndarray, lnD: Any, t: np.ndarray) -> np.ndarray:
        """A grid over the exponents and the optimum's line; E, A, B, kappa from a non-negative
        least-squares solve of each (the model is linear in them)."""
        import numpy as np
        from scipy.optimize import nnls

        L = np.exp(t)
        starts = []
        p0 = float(np.median(lnL))
        for al, be, q, dp in itertools.product((0.1, 0.3, 0.6), (0.1, 0.3, 0.6),
                                               (0.0, 0.2, 0.4), (-0.5, 0.0, 0.5)):
            z = lnL - (p0 + dp) - q * (lnN - LN_N_REF)
            cols = [np.ones_like(L), np.exp(-al * lnN), z * z]
            if lnD is not None:
                cols.insert(2, np.exp(-be * lnD))
            M = np.stack(cols, axis=1) / L[:, None]
            sc = np.abs(M).max(0)
            sc[sc == 0] = 1
            coef = nnls(M / sc, np.ones_like(L))[0] / sc
            E, A = coef[0], coef[1]
            B, K = (coef[2], coef[3]) if lnD is not None else (1e-30, coef[2])
            starts.append([math.log(max(E, 1e-3)), math.log(max(A, 1e-6)), al,
                           math.log(max(B, 1e-30)), be, math.log(max(K, 1e-6)), p0 + dp, q])
        return np.array(starts)

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.inference.optimize import multistart

        lnN, lnL, lnD, t = self._arrays(data)
        # the floor in its level coordinates where nothing is fixed or given a prior (those
        # name the plain ones)
        n0 = None if constraints else float(lnN.mean())
        obj = JointObjective(lnN, lnL, lnD, t,
                             prior=_prior_term(constraints, len(t)) if constraints else None,
                             n0=n0)
        if start is not None:
            starts = np.atleast_2d(_levels(self._to_internal(start), n0))
            if n0 is not None:  # and at the valley's end, the floor all size term (E = 0)
                starts = np.vstack([starts, starts])
                starts[1, 1] = 0.0
        else:
            cand = np.array([_levels(c, n0) for c in self._starts(lnN, lnL, lnD, t)])
            starts = cand[np.argsort([obj.objective(c) for c in cand])[:4]]
        # exponents alpha, beta in [0, 3] (a loss that falls with size and data, no faster than
        # cubically); q, the growth of ln L* per ln N, in [-1, 2] (depth that shrinks as fast as
        # 1/N to depth that grows as N^2: far beyond any published fit's 0.1-0.5)
        bounds = [(None, None), (None, None), (0.0, 3.0), (None, None), (0.0, 3.0),
                  (None, None), (None, None), (-1.0, 2.0)]
        if n0 is not None:  # ln phi <= 0 (E >= 0), ln alpha <= ln 3
            bounds[1], bounds[2] = (None, 0.0), (None, math.log(3.0))
        if lnD is None:
            bounds[3] = bounds[4] = (None, None)
        if constraints:
            bounds = _fixed_bounds(bounds, constraints)
            starts = np.array([[min(max(v, lo if lo is not None else v), hi if hi is not None
                                    else v) for v, (lo, hi) in zip(s0, bounds)] for s0 in starts])
        if lnD is None:  # no D term: B = e^-70 (nothing), beta = 0
            starts = np.array(starts, dtype=float)
            starts[:, 3], starts[:, 4] = -70.0, 0.0
        if start is not None and lnD is not None and not constraints:
            # Gauss-Newton first, then L-BFGS from there (a few steps where the two agree; it
            # leaves a trust region stalled against a bound, ~1 resample in 50)
            starts = np.atleast_2d(obj.polish(starts[0], bounds))
        stopped: list[str] = []
        best = multistart(obj.value_and_grad, starts, bounds, what="depth-joint", notes=stopped)
        if start is not None and n0 is not None:
            # a resample's losses can hold several optima; from the point estimate the plain
            # coordinates reach some the level ones miss, and where they walk the valley
            # instead, the level coordinates have its end: the better of the two, the plain
            # walk cut at PLAIN_STEPS
            plain = JointObjective(lnN, lnL, lnD, t)
            x0 = _plain(starts[0], n0)
            other = multistart(plain.value_and_grad, [x0], _plain_bounds(bounds),
                               maxiter=PLAIN_STEPS)
            if plain.objective(other) < obj.objective(best):
                best = _levels(other, n0)
        extra: dict[str, Any] = {"uses_tokens": lnD is not None, "residual_space": "log loss",
                                 "objective": "huber(delta=1e-3) on log loss"}
        extra["notes"] = stopped + (["all runs share one token count: the D term is folded "
                                     "into E (B = beta = 0)"] if lnD is None else [])
        return Estimate(self._to_public(_plain(best, n0), lnD is not None), extra=extra)

    @staticmethod
    def _to_public(th: np.ndarray, use_d: bool = True) -> np.ndarray:
        import numpy as np

        e, a, al, b, be, k, pr, q = th
        B, beta = (math.exp(b), be) if use_d else (0.0, 0.0)
        return np.array([math.exp(e), math.exp(a), al, B, beta, math.exp(k),
                         pr - q * LN_N_REF, q])

    @staticmethod
    def _to_internal(params: np.ndarray) -> np.ndarray:
        import numpy as np

        E, A, al, B, be, K, p, q = params
        return np.array([math.log(max(E, 1e-300)), math.log(max(A, 1e-300)), al,
                         math.log(max(B, 1e-30)), be, math.log(max(K, 1e-300)),
                         p + q * LN_N_REF, q])

    def loss_at(self, params: Mapping[str, float], N: float, D: float) -> float | None:
        """E + A / N^alpha + B / D^beta"""
        p = params
        return p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"]

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N = np.asarray(data["params"], float)
        L = np.asarray(data["n_layer"], float)
        out = params["E"] + params["A"] / N ** params["alpha"] + params["kappa"] * (
            np.log(L) - params["p"] - params["q"] * np.log(N)) ** 2
        if params.get("B", 0) > 0 and "tokens" in data:
            out = out + params["B"] / np.asarray(data["tokens"], float) ** params["beta"]
        return out

    # ---------------------------------------------------------------- plain math
    def optimum(self, params: Mapping[str, float], N: float) -> tuple[float, float]:
        L = math.exp(params["p"] + params["q"] * math.log(N))
        return L, kaplan_width(N, L)

    def shape_loss(self, params: Mapping[str, float], extra: Mapping[str, Any], shape: Shape,
                   N: float) -> float | None:
        """kappa · (ln n_layer − ln n_layer*(N))²: the only term that differs between shapes
        of the same size N trained on the same tokens."""
        return self.depth_loss(params, extra, N, shape.n_layer)

    def depth_loss(self, params: Mapping[str, float], extra: Mapping[str, Any], N: float,
                   n_layer: float) -> float | None:
        p = params
        return p["kappa"] * (math.log(n_layer) - p["p"] - p["q"] * math.log(N)) ** 2

    def loss_level(self, params: Mapping[str, float], extra: Mapping[str, Any], N: float
                   ) -> float | None:
        """E + A / N^alpha + B / (20 N)^beta"""
        return self.loss_at(params, N, 20.0 * N)

    def centre_unidentified(self, params: Mapping[str, float]) -> str | None:
        lo, hi = self.bounds["q"]
        for b in (lo, hi):
            if b is not None and abs(params["q"] - b) < 1e-3:
                return f"q is at its bound {b:g}"
        return None
