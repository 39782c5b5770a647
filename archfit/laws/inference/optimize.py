"""The optimizers the laws share (numpy at the top; never on a cold path): Huber on log-sum-exp
with scale-free starts (:class:`HuberLSE`), one affine reparametrization for --fix, --tie and
--prior (:class:`Reparam`), and least squares under it (:func:`lsq_fit`). Like
:mod:`archfit.laws.columns`, it imports nothing from the laws."""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable, Sequence

import numpy as np
from scipy.special import huber

from archfit.errors import FitError, FitInputError

# exponents tried for each power-law term when projecting out the coefficients (Chinchilla-style
# fits find α, β in 0.05-1.5; the polish moves freely from there)
EXPONENT_GRID = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0, 1.5)

def log_sum_exp(U: np.ndarray, axis: int = -1, weights: bool = False) -> Any:
    """ln sum_j e^U_j along ``axis``, shifted by the largest term (the stable form, as
    ``scipy.special.logsumexp``, which costs 0.2-0.3 ms a call in its array-API wrappers where
    this costs 10 us on a fit's arrays); with ``weights`` also the softmax e^(U_j - lse). An
    infinite or NaN term gives an infinite or NaN result, as there."""
    m = np.max(U, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):  # every term -inf: -inf, as there
        e = np.exp(U - m)
        total = np.sum(e, axis=axis, keepdims=True)
        lse = np.log(total) + m
    if weights:
        return np.squeeze(lse, axis), e / total
    return np.squeeze(lse, axis)


def evaluated_once(both: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
                   ) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``both`` (residuals and Jacobian at a point) remembering its last point:
    ``least_squares`` asks for the residuals, then the Jacobian at the same point, and one
    evaluation serves both."""
    last: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def rj(th: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = np.asarray(th).tobytes()
        if key not in last:
            last.clear()
            last[key] = both(th)
        return last[key]

    return rj


def prior_weight(scale: float | None, n: int, delta: float) -> float:
    """How much a Gaussian prior's ½z² weighs against a mean-Huber/δ² data term over ``n``
    rows whose residual scale (log loss) is ``scale``: as the likelihood it replaces would, in
    Huber's quadratic regime (s ≤ δ: a residual's term is r²/2δ²) or its linear one."""
    s = scale or delta
    tau = delta * s if s > delta else s * s
    return tau / (delta ** 2 * n)


class Reparam:
    """A law's internal parameter vector θ (each coordinate one public parameter, as it is or
    as its log) under --fix, --tie and --prior: fixed coordinates and ties make θ = T φ + c
    with φ the free coordinates (an affine map, so gradients pass through as Tᵀ g); priors are
    Gaussian on the public values. ``spec`` lists (public name, held as log) per coordinate."""

    def __init__(self, spec: Sequence[tuple[str, bool]], cons: Any = None):
        self.names = [n for n, _ in spec]
        self.logs = [bool(lg) for _, lg in spec]
        k = len(spec)
        fixed = dict(getattr(cons, "fixed", None) or {})
        tied = dict(getattr(cons, "tied", None) or {})
        self.prior = dict(getattr(cons, "prior", None) or {})
        for name in [*fixed, *tied, *tied.values(), *self.prior]:
            if name not in self.names:
                raise FitInputError(f"{name!r} is not a fitted parameter here "
                                    f"({', '.join(self.names)})")
        for a, b in tied.items():
            if a == b or b in tied:
                raise FitInputError(f"--tie {a}={b}: tie a parameter to a free one, once")
            if a in fixed:
                raise FitInputError(f"{a} is both fixed and tied; give one")
            if self.logs[self.names.index(a)] != self.logs[self.names.index(b)]:
                raise FitInputError(f"--tie {a}={b}: {a} and {b} are not the same kind of "
                                    "parameter (a coefficient and an exponent)")
        self.free = [i for i, n in enumerate(self.names) if n not in fixed and n not in tied]
        self.T = np.zeros((k, len(self.free)))
        self.c = np.zeros(k)
        for j, i in enumerate(self.free):
            self.T[i, j] = 1.0
        for n, v in fixed.items():
            i = self.names.index(n)
            if self.logs[i] and not v > 0:
                raise FitInputError(f"--fix {n}={v:g}: {n} is positive in this law")
            self.c[i] = math.log(v) if self.logs[i] else v
        for a, b in tied.items():
            ia, ib = self.names.index(a), self.names.index(b)
            self.T[ia], self.c[ia] = self.T[ib], self.c[ib]
        self.active = bool(fixed or tied or self.prior)

    def expand(self, phi: np.ndarray) -> np.ndarray:
        return self.T @ phi + self.c

    def reduce(self, theta: np.ndarray) -> np.ndarray:
        """φ for an internal θ (a start): its free coordinates."""
        return np.asarray(theta, float)[..., self.free]

    def constrain(self, theta: np.ndarray) -> np.ndarray:
        """θ with its fixed and tied coordinates set as the constraints say."""
        return self.reduce(theta) @ self.T.T + self.c

    def prior_z(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(z, dz/dθ) of each prior: z = (value - mean) / sd."""
        z, dz = np.zeros(len(self.prior)), np.zeros((len(self.prior), len(self.names)))
        for r, (n, (m, sd)) in enumerate(self.prior.items()):
            i = self.names.index(n)
            v = math.exp(theta[i]) if self.logs[i] else theta[i]
            z[r] = (v - m) / sd
            dz[r, i] = (v if self.logs[i] else 1.0) / sd
        return z, dz

    def public(self, theta: np.ndarray) -> dict[str, float]:
        return {n: float(math.exp(v) if lg else v)
                for n, lg, v in zip(self.names, self.logs, theta)}


def lsq_fit(resid: Any, starts: Sequence[np.ndarray], rp: Reparam, scale: float | None = None
            ) -> np.ndarray:
    """Least squares over the free coordinates of ``rp`` from each start (``resid(θ)`` gives
    the data residuals); priors enter as rows ``scale · z`` (the data residuals' scale times the
    prior's z, so a prior weighs as one more observation would). Returns the best internal θ."""
    from scipy.optimize import least_squares

    s = scale or 0.05

    def rows(phi: np.ndarray) -> np.ndarray:
        th = rp.expand(phi)
        r = resid(th)
        return np.concatenate([r, s * rp.prior_z(th)[0]]) if rp.prior else r

    best = best_start(starts, lambda s0: least_squares(rows, rp.reduce(s0), method="trf",
                                                       max_nfev=4000),
                      "the constrained least-squares fit")
    return rp.expand(best.x)


def best_start(starts: Sequence[np.ndarray], solve: Callable[[np.ndarray], Any],
               what: str) -> Any:
    """The least-cost finite result of ``solve(start)`` (a scipy least-squares result) over
    ``starts``; a start ``solve`` refuses (ValueError) is skipped. ``what`` names the fit in the
    error when no start converges."""
    best = None
    for s0 in starts:
        try:
            res = solve(s0)
        except ValueError:
            continue
        if np.all(np.isfinite(res.x)) and np.isfinite(res.cost) and (
                best is None or res.cost < best.cost):
            best = res
    if best is None:
        raise FitError(f"{what} did not converge from any start")
    return best


# The one stopping rule of every L-BFGS fit: relative objective change 1e-15 and projected
# gradient 1e-11, both far below what a bootstrap's spread resolves (the objectives are scaled to
# O(1)); 3000 iterations are never reached from a projected start.
LBFGS_OPTIONS = {"maxiter": 3000, "ftol": 1e-15, "gtol": 1e-11}


def multistart(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], starts: Any,
               bounds: Sequence[tuple[float | None, float | None]] | None = None,
               what: str = "the fit", notes: list[str] | None = None,
               maxiter: int | None = None) -> np.ndarray:
    """The best L-BFGS-B optimum of ``fun`` (value and gradient) over ``starts``: the one
    multi-start loop of the Huber laws and depth-joint (``maxiter`` in place of
    :data:`LBFGS_OPTIONS`' where given). When the best start stopped without converging,
    ``notes`` (the fit's) says so rather than passing the point off as an optimum."""
    from scipy.optimize import minimize

    options = LBFGS_OPTIONS if maxiter is None else {**LBFGS_OPTIONS, "maxiter": maxiter}
    best, start = None, None
    for s0 in starts:
        res = minimize(fun, s0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options=options)
        if np.all(np.isfinite(res.x)) and (best is None or res.fun < best.fun):
            best, start = res, np.asarray(s0, float)
    if best is None:
        raise FitError(f"{what} did not converge from any starting point")
    stalled = best.success and _stalled(fun, best.x, start, bounds)
    if (not best.success or stalled) and notes is not None:
        msg = best.message.decode() if isinstance(best.message, bytes) else str(best.message)
        if stalled:
            msg = "no step from its start reduced the loss"
        notes.append(f"{what}: the optimizer stopped before converging ({msg.lower()}); the "
                     "estimate is its best point, and the bootstrap's spread shows how far "
                     "to trust it")
    return best.x


def _stalled(fun: Callable[[np.ndarray], tuple[float, np.ndarray]], x: np.ndarray,
             start: np.ndarray | None, bounds: Sequence[tuple[float | None, float | None]] | None
             ) -> bool:
    """L-BFGS-B reported convergence without moving from its start while its own projected
    gradient there exceeds ``gtol``: its line search found no descent (a gradient that points
    uphill), which some builds report as a relative reduction of zero, i.e. as converged."""
    if start is None or not np.array_equal(x, start):
        return False
    g = np.asarray(fun(x)[1], float)
    lo = np.array([-np.inf if b is None or b[0] is None else b[0] for b in bounds]) \
        if bounds is not None else np.full(len(x), -np.inf)
    hi = np.array([np.inf if b is None or b[1] is None else b[1] for b in bounds]) \
        if bounds is not None else np.full(len(x), np.inf)
    return bool(np.max(np.abs(np.clip(x - g, lo, hi) - x)) > LBFGS_OPTIONS["gtol"])


class HuberLSE:
    """log L̂ = LSE(a_1 - α_1 x_1, ..., a_k - α_k x_k, e), fitted with the Huber loss on
    log L̂ - log L (Hoffmann et al. 2022, App. D.2; Besiroglu et al. 2024). Parameter vector
    θ = (a_1..a_k, α_1..α_k, e)."""

    def __init__(self, X: np.ndarray, t: np.ndarray, delta: float):
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
        r = log_sum_exp(self._terms(theta), axis=-1) - self.t
        return huber(self.delta, r).mean(-1) / (self.delta ** 2)

    def value_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        d = self.delta
        r, J = self.residuals_and_jacobian(theta)
        scale = 1.0 / (self.n * d * d)
        dr = np.clip(r, -d, d)  # the Huber loss's derivative in r
        return float(huber(d, r).sum() * scale), (dr @ J) * scale

    def residuals_and_jacobian(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """r = log L̂ - log L per row, and dr/dθ (rows: the softmax weights of the LSE terms)."""
        k = self.k
        lse, P = log_sum_exp(self._terms(theta), axis=1, weights=True)
        J = np.empty((self.n, 2 * k + 1))
        J[:, :k] = P[:, :k]
        J[:, k:2 * k] = -P[:, :k] * self.X
        J[:, 2 * k] = P[:, k]
        return lse - self.t, J

    def polish(self, start: np.ndarray, rp: Reparam | None = None,
               scale: float | None = None) -> np.ndarray:
        """The Huber optimum near ``start`` (a bootstrap resample, warm-started at the point
        estimate): trust-region least squares with scipy's own Huber loss at ``delta`` (the
        same objective: ½r² inside δ, δ(|r| - ½δ) outside). Near the optimum its Gauss-Newton
        steps converge in a handful of Jacobians, twice as fast as L-BFGS from there
        (``benchmarks/bench_fit.py``); from far starts :meth:`minimize` keeps L-BFGS, which is
        robust there. Priors are not Huber rows, so a fit with priors uses :meth:`minimize`."""
        from scipy.optimize import least_squares

        if rp is not None and rp.prior:
            return self.minimize(np.atleast_2d(start), rp=rp, scale=scale)
        rj = evaluated_once(self.residuals_and_jacobian)
        if rp is None:
            res = least_squares(lambda th: rj(th)[0], start,
                                jac=lambda th: rj(th)[1],  # type: ignore[arg-type]  # scipy's stub: jac as str; a callable is documented
                                loss="huber", f_scale=self.delta, method="trf",
                                xtol=1e-12, ftol=1e-12, gtol=1e-12)
            return res.x
        start = rp.constrain(np.atleast_2d(start))[0]
        res = least_squares(lambda phi: rj(rp.expand(phi))[0], rp.reduce(start),
                            jac=lambda phi: rj(rp.expand(phi))[1] @ rp.T,  # type: ignore[arg-type]  # as above
                            loss="huber", f_scale=self.delta, method="trf",
                            xtol=1e-12, ftol=1e-12, gtol=1e-12)
        return rp.expand(res.x)

    def projected_starts(self, exponents: Sequence[float] = EXPONENT_GRID,
                         rp: Reparam | None = None) -> np.ndarray:
        """Starting points that follow the data's scale: for each combination of exponents on
        ``exponents`` (those fixed or tied by ``rp`` held as it says), the coefficients e^a_i
        and e^e are solved exactly (non-negative least squares on relative error: the model is
        linear in them), so no grid of raw magnitudes has to guess the loss's units or the
        sizes' (variable projection, as Golub & Pereyra 1973)."""
        from scipy.optimize import nnls

        k = self.k
        L = np.exp(self.t)
        starts = []
        for ex in itertools.product(exponents, repeat=k):
            ex = list(ex)
            if rp is not None:
                th = rp.constrain(np.array([0.0] * k + ex + [0.0]))
                ex = list(th[k:2 * k])
            cols = [np.ones_like(L)] + [np.exp(-ex[j] * self.X[:, j]) for j in range(k)]
            M = np.stack(cols, axis=1) / L[:, None]
            sc = np.abs(M).max(0)
            sc[sc == 0] = 1
            coef = nnls(M / sc, np.ones_like(L))[0] / sc
            floor = 1e-12 * float(np.median(L))
            a = [math.log(max(coef[1 + j], floor)) for j in range(k)]
            starts.append(a + ex + [math.log(max(coef[0], floor))])
        out = np.unique(np.round(np.array(starts), 12), axis=0)
        return rp.constrain(out) if rp is not None else out

    def minimize(self, starts: np.ndarray, n_polish: int = 4, rp: Reparam | None = None,
                 scale: float | None = None) -> np.ndarray:
        """The Huber optimum: the ``n_polish`` best of ``starts`` polished with L-BFGS over the
        free coordinates of ``rp`` (all of θ without one), priors added as ½z² weighed by
        :func:`prior_weight`."""

        starts = np.atleast_2d(starts)
        if rp is not None:
            starts = rp.constrain(starts)
        if len(starts) > n_polish:
            vals = np.concatenate([np.atleast_1d(self.objective(c))
                                   for c in np.array_split(starts, max(1, len(starts) // 256))])
            starts = starts[np.argsort(vals)[:n_polish]]
        if rp is None:
            fun: Any = self.value_and_grad
            x0s: Any = starts
        else:
            w = prior_weight(scale, self.n, self.delta)

            def reduced(phi: np.ndarray) -> tuple[float, np.ndarray]:
                th = rp.expand(phi)
                v, g = self.value_and_grad(th)
                if rp.prior:
                    z, dz = rp.prior_z(th)
                    v, g = v + w * 0.5 * float(z @ z), g + w * (z @ dz)
                return v, rp.T.T @ g

            fun = reduced
            x0s = [rp.reduce(s0) for s0 in starts]
        self.notes: list[str] = []
        best = multistart(fun, x0s, what="the Huber fit", notes=self.notes)
        return best if rp is None else rp.expand(best)


def huber_lsq(resid: Callable[[np.ndarray], np.ndarray], starts: Sequence[np.ndarray],
              rp: Reparam, delta: float, scale: float | None = None,
              bounds: Sequence[tuple[float, float]] | None = None,
              jac: Callable[[np.ndarray], np.ndarray] | None = None,
              keep: int | None = None, max_nfev: int = 2000) -> np.ndarray:
    """The Huber (``delta``) least-squares optimum of ``resid(θ)`` (log-loss residuals) over the
    free coordinates of ``rp`` from each start (trust-region least squares with scipy's Huber
    loss; ``jac(θ)``, the residuals' derivatives in θ's coordinates, where the law gives it,
    else a numeric Jacobian), within ``bounds`` on θ's coordinates where given; priors enter as
    rows ``scale · z``, as in :func:`lsq_fit`. With ``keep``, only that many starts are
    solved: those of least Huber cost where they start (as :meth:`HuberLSE.minimize` polishes
    its best starts). ``max_nfev``: the evaluations each start may take (scipy's count).
    Returns the best internal θ: for laws whose terms are not :class:`HuberLSE`'s power
    laws."""
    from scipy.optimize import least_squares

    s = scale or 0.05
    lo = np.array([b[0] for b in bounds])[rp.free] if bounds else -np.inf
    hi = np.array([b[1] for b in bounds])[rp.free] if bounds else np.inf
    if keep is not None and len(starts) > keep:
        cost = [float(huber(delta, resid(rp.constrain(np.atleast_2d(s0))[0])).sum())
                for s0 in starts]
        starts = [starts[i] for i in np.argsort(cost)[:keep]]

    def rows(phi: np.ndarray) -> np.ndarray:
        th = rp.expand(phi)
        r = resid(th)
        return np.concatenate([r, s * rp.prior_z(th)[0]]) if rp.prior else r

    def rows_jac(phi: np.ndarray) -> np.ndarray:
        assert jac is not None
        th = rp.expand(phi)
        J = jac(th) @ rp.T
        return np.concatenate([J, s * rp.prior_z(th)[1] @ rp.T]) if rp.prior else J

    def solve(s0: np.ndarray) -> Any:
        x0 = rp.reduce(rp.constrain(np.atleast_2d(s0))[0])
        if bounds:
            x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
        return least_squares(rows, x0, jac=rows_jac if jac else "2-point",  # type: ignore[arg-type]  # scipy's stub: jac as str; a callable is documented
                             bounds=(lo, hi), loss="huber", f_scale=delta,
                             method="trf", x_scale="jac", max_nfev=max_nfev)

    return rp.expand(best_start(starts, solve, "the Huber fit").x)
