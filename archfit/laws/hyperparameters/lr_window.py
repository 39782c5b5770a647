"""One (size, tokens) cell of a learning-rate sweep (or a learning-rate x batch grid): its best
peak learning rate and batch, read from a local fit around the run that measured lowest, with a
95% interval from a residual bootstrap.

The window, a stated rule: the :data:`RATES_IN_WINDOW` rates nearest the best run's (two either
side of it, shifted inward at the grid's edges) and, where the batch varies, the
:data:`BATCHES_IN_WINDOW` batches nearest the best run's. The minimum must lie within the
window's rates and batches: a best run at an edge of the grid still gives one where the loss
turns up within the window (two batches nearly tied at the smallest, say), and says "widen the
sweep" where it does not. A real loss-vs-rate curve is steeper
above its optimum than below, so a parabola over a wide range of rates reads its minimum low;
over five rates a cubic in ln lr follows the asymmetry (``benchmarks/bench_lr_window.py``: median
bias under 7% on a grid of rates a factor of sqrt(2) apart). The batch enters as a quadratic in
ln B with an ln lr x ln B interaction, since the best rate moves with the batch.

The surface, in x = ln lr and z = ln B (both centred on the best run):
``loss = b0 + b1 x + b2 x^2 + b3 x^3 + b4 z + b5 z^2 + b6 x z``, least squares over the window's
runs (every seed its own row). Its minimum in closed form: for each x the best z is
``-(b4 + b6 x) / (2 b5)``; along that profile the slope is a quadratic in x whose root with
positive curvature is the minimum.

The interval: a residual bootstrap (Davison & Hinkley 1997, 'Bootstrap Methods and their
Application', Algorithm 6.3): the residuals rescaled by their leverage and centred, drawn with
replacement onto the fitted values, the surface refitted and its minimum found again. A window
has few residual degrees of freedom, and a plain percentile interval then covers less than its
level (its spread ignores that the noise itself is estimated), so the percentiles are expanded as
Hesterberg (2015, 'What Teachers Should Know About the Bootstrap', The American Statistician
69(4), Sec. 5.2) expands them: taken at the normal tail that Student's t at the window's residual
degrees of freedom puts at 2.5% (with 6 degrees of freedom, the 0.7th and 99.3rd percentiles). A
window with fewer than :data:`MIN_RESIDUAL_DF` residual degrees of freedom has no interval, and
says so."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import stats

from archfit.numbers import draw_percentiles

RATES_IN_WINDOW = 5
BATCHES_IN_WINDOW = 3
# the residuals stand for the noise only with a few degrees of freedom to spare
MIN_RESIDUAL_DF = 3
DRAWS = 999  # the residual bootstrap's resamples per cell
# an interval end this far from the window's centre (in ln units) is past what a float holds
# once exponentiated (e^709): no number, so no end; the loss is too flat to bound the optimum
MAX_INTERVAL_REACH = 700.0
TERMS = ("1", "x", "x^2", "x^3", "z", "z^2", "x z")


@dataclass
class Window:
    """The runs of one cell that the local fit reads."""

    x: np.ndarray  # ln lr, centred on the best run's
    z: np.ndarray  # ln batch, centred on the best run's (zeros where the batch does not vary)
    y: np.ndarray  # loss
    x0: float  # the best run's ln lr
    z0: float  # the best run's ln batch (nan where unknown)
    rates: list[float]
    batches: list[float]
    tried_rates: tuple[float, float]  # the lowest and highest rate the cell tried
    tried_batches: tuple[float, float] | None
    cubic: bool
    batch: bool

    @property
    def terms(self) -> list[int]:
        """The indices (in :data:`TERMS`) of the terms the surface fits: no cubic below 5 rates
        or without the runs to spare for it, no batch terms where the batch does not vary."""
        return [0, 1, 2] + [3] * self.cubic + [4, 5, 6] * self.batch

    def design(self) -> np.ndarray:
        """The columns of the fitted terms, in the order of :attr:`terms`."""
        x, z = self.x, self.z
        every = (np.ones_like(x), x, x ** 2, x ** 3, z, z ** 2, x * z)
        return np.stack([every[i] for i in self.terms], axis=1)


def grid_points(lr: np.ndarray, batch: np.ndarray | None, loss: np.ndarray
                ) -> dict[tuple[float, float | None], list[float]]:
    """The losses at each (rate, batch) the cell tried (batch None where it does not vary):
    a point's seeds together."""
    points: dict[tuple[float, float | None], list[float]] = {}
    bs = batch.tolist() if batch is not None else [None] * len(lr)
    for r, b, y in zip(lr.tolist(), bs, loss.tolist()):
        points.setdefault((r, b), []).append(y)
    return points


def choose(lr: np.ndarray, batch: np.ndarray | None, loss: np.ndarray
           ) -> tuple[Window | None, str | None]:
    """The window around the lowest mean loss (seeds averaged at each rate and batch), or why
    there is none: fewer than 3 rates, or 2 batches (a best batch cannot be placed between
    two)."""
    rates = sorted(set(lr.tolist()))
    if len(rates) < 3:
        return None, f"{len(rates)} learning rate(s), fewer than 3"
    batches = sorted(set(batch.tolist())) if batch is not None else []
    if len(batches) == 2:
        return None, ("2 batch sizes: the best batch cannot be placed between two; sweep 3 or "
                      "more, or fit one batch at a time (fit --by batch_tokens)")
    points = grid_points(lr, batch, loss)
    best_r, best_b = min(points, key=lambda p: float(np.mean(points[p])))
    w_rates = _around(rates, best_r, RATES_IN_WINDOW)
    w_batches = (_around(batches, best_b, BATCHES_IN_WINDOW)
                 if len(batches) > 2 and best_b is not None else batches)
    keep = np.isin(lr, w_rates) & (np.isin(batch, w_batches) if batch is not None and w_batches
                                   else True)
    x0 = math.log(best_r)
    z0 = math.log(best_b) if best_b is not None else math.nan
    batched = len(w_batches) > 2
    z = np.log(batch[keep]) - z0 if batched and batch is not None else np.zeros(int(keep.sum()))
    # the cubic where five rates and the runs leave it MIN_RESIDUAL_DF to spare; else a
    # parabola in ln lr (a cubic through five runs would chase their noise)
    spare = int(keep.sum()) - (4 + 3 * batched)
    return Window(x=np.log(lr[keep]) - x0, z=z, y=loss[keep], x0=x0, z0=z0, rates=w_rates,
                  batches=w_batches, tried_rates=(rates[0], rates[-1]),
                  tried_batches=(batches[0], batches[-1]) if batches else None,
                  cubic=len(w_rates) >= 5 and spare >= MIN_RESIDUAL_DF, batch=batched), None


def _around(values: list[float], best: float, k: int) -> list[float]:
    """The ``k`` values nearest ``best`` in rank: as many either side, shifted inward at the
    edges (all of them where there are ``k`` or fewer)."""
    i = values.index(best)
    start = min(max(0, i - k // 2), max(0, len(values) - k))
    return values[start:start + k]


def minimum(coef: np.ndarray, batch: bool) -> tuple[np.ndarray, np.ndarray]:
    """The surface's minimum (x, z) for each row of ``coef`` (:data:`TERMS`' coefficients), nan
    where it has none (a batch curve not convex, or no rate with positive curvature)."""
    coef = np.atleast_2d(coef)
    b1, b2, b3, b4, b5, b6 = (coef[:, i] for i in range(1, 7))
    with np.errstate(divide="ignore", invalid="ignore"):
        if batch:  # the profile over z: z(x) = -(b4 + b6 x) / (2 b5), convex in z needs b5 > 0
            k = np.where(b5 > 0, b6 / (2 * b5), np.nan)
            A, B, C = 3 * b3, 2 * b2 - b6 * k, b1 - b4 * k
        else:
            A, B, C = 3 * b3, 2 * b2, b1
        root = np.sqrt(B ** 2 - 4 * A * C)  # nan where the slope never crosses zero
        # the root where the profile's curvature (2 A x + B = root) is positive, in the form
        # that stays finite as A goes to 0 (the parabola's -C / B)
        x = np.where(B + root > 0, -2 * C / (B + root), np.nan)
        z = -(b4 + b6 * x) / (2 * b5) if batch else np.zeros_like(x)
    return x, z


def _outside(w: Window, x: float, z: float) -> str | None:
    """Why the local minimum (x, z), centred as the window is, cannot be taken, or None: it
    lies past the window's rates or batches (past the grid, where the window sits at its edge:
    widen the sweep)."""
    for v, lo, hi, tried, what, whats, unit in (
            (x, w.x.min(), w.x.max(), w.tried_rates, "rate", "rates", ""),
            (z, w.z.min(), w.z.max(), w.tried_batches, "batch", "batches", " tokens")):
        if what == "batch" and not w.batch or lo <= v <= hi or tried is None:
            continue
        edge = math.exp((w.x0 if what == "rate" else w.z0) + (hi if v > hi else lo))
        side = "above" if v > hi else "below"
        if math.isclose(edge, tried[1] if v > hi else tried[0], rel_tol=1e-9):
            return (f"the best {what} lies {side} the {whats} tried ({tried[0]:.4g}-"
                    f"{tried[1]:.4g}{unit}); widen the sweep")
        return (f"the local fit's minimum lies {side} the window of {whats} around the best run "
                "(the loss is too noisy or too flat there to place it)")
    return None


@dataclass
class Optimum:
    x: float  # ln lr*, absolute
    z: float  # ln B*, absolute (nan where the batch is not fitted)
    x_ci: tuple[float, float] | None
    z_ci: tuple[float, float] | None
    x_sd: float  # the bootstrap's standard deviation of ln lr* (nan without an interval)
    z_sd: float
    residual_df: int
    why_no_interval: str | None


def fit(w: Window, rng: np.random.Generator, draws: int = DRAWS
        ) -> tuple[Optimum | None, str | None]:
    """The window's minimum and its residual-bootstrap interval (or why it has none), or None
    and why there is no minimum (none, or one outside the window)."""
    X, cols = w.design(), w.terms
    pinv = np.linalg.pinv(X)
    coef = np.zeros(len(TERMS))
    coef[cols] = pinv @ w.y
    x, z = (float(v[0]) for v in minimum(coef, w.batch))
    if not math.isfinite(x) or (w.batch and not math.isfinite(z)):
        return None, "the local fit has no minimum (the loss is not convex around the best run)"
    why = _outside(w, x, z)
    if why:
        return None, why
    df = len(w.y) - len(cols)
    point = Optimum(w.x0 + x, w.z0 + z if w.batch else math.nan, None, None, math.nan,
                    math.nan, df, None)
    if df < MIN_RESIDUAL_DF:
        return replace(point, why_no_interval=(
            f"{len(w.y)} runs in the window fit its {len(cols)} terms with {df} residual "
            f"degree(s) of freedom (fewer than {MIN_RESIDUAL_DF}): this cell's best rate has "
            "no interval (sweep more rates, batches or seeds)")), None
    fitted = X @ coef[cols]
    leverage = np.einsum("ij,ji->i", X, pinv)
    resid = (w.y - fitted) / np.sqrt(np.clip(1 - leverage, 1e-12, None))
    resid -= resid.mean()
    ystar = fitted[:, None] + rng.choice(resid, size=(len(w.y), draws))
    cstar = np.zeros((draws, len(TERMS)))
    cstar[:, cols] = (pinv @ ystar).T
    xs, zs = minimum(cstar, w.batch)
    ok = np.isfinite(xs) & (np.isfinite(zs) if w.batch else True)
    tail = float(stats.norm.cdf(-stats.t.ppf(0.975, df)))  # Hesterberg's expanded percentile
    # draws without a minimum fill a tail that cannot be placed: more of them than the tail
    # holds, and the interval has no end
    if 1 - ok.mean() > tail:
        return replace(point, why_no_interval=(
            f"{1 - ok.mean():.0%} of the bootstrap's refits have no minimum: the loss is too "
            "flat or too noisy around the best run to bound its best rate")), None
    q = [100 * tail, 100 * (1 - tail)]
    xq = w.x0 + draw_percentiles(xs[ok], q)
    zq = w.z0 + draw_percentiles(zs[ok], q) if w.batch else None
    reach = np.abs(np.concatenate([xq - w.x0] + ([zq - w.z0] if zq is not None else [])))
    if not np.all(reach <= MAX_INTERVAL_REACH):
        return replace(point, why_no_interval=(
            "the bootstrap's refits place the minimum past what a number holds: the loss is too "
            "flat or too noisy around the best run to bound its best rate")), None
    if not w.batch:
        return replace(point, x_ci=(float(xq[0]), float(xq[1])),
                       x_sd=float(np.std(xs[ok]))), None
    assert zq is not None
    return replace(point, x_ci=(float(xq[0]), float(xq[1])), z_ci=(float(zq[0]), float(zq[1])),
                   x_sd=float(np.std(xs[ok])), z_sd=float(np.std(zs[ok]))), None


def summary(w: Window, o: Optimum) -> dict[str, Any]:
    """The cell's optimum as the lr-batch law's cells list it."""
    return {"log_opt": o.x, "opt": math.exp(o.x), "log_opt_se": o.x_sd,
            "opt_ci": [math.exp(v) for v in o.x_ci] if o.x_ci else None,
            "batch_opt": math.exp(o.z) if w.batch else None, "log_batch_opt": o.z,
            "log_batch_se": o.z_sd,
            "batch_ci": [math.exp(v) for v in o.z_ci] if o.z_ci else None,
            "window_rates": w.rates, "window_batches": w.batches,
            "terms": [TERMS[i] for i in w.terms],
            "residual_df": o.residual_df, "no_interval": o.why_no_interval}
