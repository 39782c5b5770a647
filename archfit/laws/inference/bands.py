"""How far runs scatter about a law and how wide its prediction bands are: the scatter between
and within runs, the held-out split by size, the bands over parameter draws and scatter, and
their coverage on runs past the data (the rate of misses, the widening that would cover them)."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from archfit.errors import FitInputError
from archfit.laws.columns import from_space, to_space  # noqa: F401  (bands' own, re-read)
from archfit.numbers import draw_percentiles
from archfit.laws.columns import heldout_split  # noqa: F401  (re-read by callers)

Data = dict[str, Any]  # column name -> numpy array (as in archfit.laws.base)


def run_scatter(resid: np.ndarray, groups: np.ndarray, n_params: int) -> dict[str, float]:
    """The scatter of runs about a law, from its residuals (log space): ``between`` (sd of a
    run's mean offset, estimated from one mean per run, the independent unit) and ``within``
    (sd of a checkpoint about its run's offset). Degrees of freedom are counted in runs: the
    fitted parameters use up ``n_params`` of them (at most half)."""
    resid = np.asarray(resid, float)
    uniq, inv, counts = np.unique(groups, return_inverse=True, return_counts=True)
    G, n = len(uniq), len(resid)
    means = np.bincount(inv, weights=resid) / counts  # each run's mean offset from the law
    within = resid - means[inv]
    s2_w = float(within @ within) / (n - G) if n > G else 0.0  # one-way ANOVA's within term
    # the law used up n_params of the runs' degrees of freedom (never more than half: a law
    # with as many parameters as runs would leave no scatter to estimate)
    dof = max(G - n_params, G / 2.0, 1.0)
    s2_means = float(means @ means) / dof
    # a run mean's variance is between + within / n_run: take the within part off
    s2_b = max(s2_means - s2_w * float(np.mean(1.0 / counts)), 0.0)
    return {"between": math.sqrt(s2_b), "within": math.sqrt(s2_w), "n_units": int(G),
            "n_rows": int(n), "dof": float(dof)}


def prediction_band(law: Any, params: Any, draws: Sequence[Any], scatter: Any,
                    data: Mapping[str, Any], level: float, widen: float = 1.0, reach: Any = None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(predicted, low, high) loss for the rows of ``data``: a ``level`` prediction interval
    for a *new run* there. It adds, in log space, the parameter uncertainty (the percentile band
    of the prediction over ``draws``, the bootstrap's parameter dicts) and the scatter of runs
    about the law (``scatter``: between-run and within-run sd, from :func:`run_scatter`; its
    quantile is Student's t with the scatter's degrees of freedom, counted in runs). ``widen``
    scales both half-widths (the held-out check's calibration, :func:`conformal_factor`).
    ``reach`` (:func:`extrapolation_rate`'s record) adds, beyond the sizes that calibration
    saw, the discrepancy it measured per unit of log size, growing linearly with the distance:
    a misfit exponent misses by an amount that grows with ln N."""
    from scipy.stats import t as student_t

    if not 0 < level < 1:
        raise FitInputError(f"interval must be between 0 and 1 (e.g. 0.95), got {level}")
    space = law.loss_space
    c = to_space(space, law.predict(params, data))
    # a new run's own deviation: between-run and within-run scatter add in quadrature, at
    # Student's t for the runs' degrees of freedom (no dof: the normal quantile)
    z = float(student_t.ppf(0.5 + level / 2, (scatter or {}).get("dof") or 1e6))
    s = math.hypot((scatter or {}).get("between", 0.0), (scatter or {}).get("within", 0.0))
    dlo = dhi = np.zeros_like(c)
    if len(draws):
        with np.errstate(all="ignore"):
            S = np.stack([to_space(space, law.predict(p, data)) for p in draws])
        S[~np.isfinite(S)] = np.nan
        ok = np.isfinite(S).sum(0) >= 10  # a percentile of fewer than 10 draws is noise
        q_lo, q_hi = draw_percentiles(np.where(ok, S, 0.0), [50 * (1 - level),
                                                             50 * (1 + level)], axis=0,
                                      skip_nan=True)
        dlo = np.where(ok, np.clip(c - q_lo, 0, None), 0.0)
        dhi = np.where(ok, np.clip(q_hi - c, 0, None), 0.0)
    # parameter and run uncertainty are independent: half-widths add in quadrature, per side
    extra = np.zeros_like(c)
    if reach and reach.get("rate") and "params" in data:
        d = np.log(np.asarray(data["params"], float) / reach["params_max"]) - reach["distance"]
        extra = reach["rate"] * np.clip(d, 0, None)
    lo = c - widen * np.sqrt(dlo ** 2 + (z * s) ** 2) - extra
    hi = c + widen * np.sqrt(dhi ** 2 + (z * s) ** 2) + extra
    return from_space(space, c), from_space(space, lo), from_space(space, hi)


def extrapolation_rate(pred: np.ndarray, lo: np.ndarray, hi: np.ndarray, actual: np.ndarray,
                       N: np.ndarray, N_fit_max: float, level: float, space: str = "log"
                       ) -> dict[str, float]:
    """How fast a law's miss grows beyond its data, from a held-out check: each held-out row's
    miss beyond its interval per unit of ln N past the largest size fitted, at the ``level``
    conformal rank (0 when the intervals covered); and the median distance the check reached.
    :func:`prediction_band` adds ``rate`` per unit of ln N beyond that distance past
    ``params_max``, which the caller sets: the largest size the fit it widens has seen."""
    c, a = to_space(space, pred), to_space(space, actual)
    half = np.where(a >= c, to_space(space, hi) - c, c - to_space(space, lo))
    d = np.log(np.asarray(N, float) / N_fit_max)
    ok = d > 0
    if not ok.any():
        return {}
    r = np.sort(np.clip(np.abs(a - c) - half, 0, None)[ok] / d[ok])
    k = min(len(r), int(math.ceil((len(r) + 1) * level)))
    return {"rate": float(r[k - 1]), "distance": float(np.median(d[ok]))}


def conformal_factor(pred: np.ndarray, lo: np.ndarray, hi: np.ndarray, actual: np.ndarray,
                     level: float, groups: np.ndarray | None = None, space: str = "log"
                     ) -> float:
    """How much the intervals must widen to cover ``level`` of the held-out runs (split
    conformal calibration in log space, on the side each row fell): the ``level`` quantile of
    |log actual - log predicted| / half-width, at least 1 (intervals are never narrowed). The
    exchangeable unit is a training run where ``groups`` labels the rows, scored by its worst
    checkpoint (a run is covered when all of it is; its checkpoints are not independent, and
    a quantile over them would count one run many times), else a row."""
    c, a = to_space(space, pred), to_space(space, actual)
    half = np.where(a >= c, to_space(space, hi) - c, c - to_space(space, lo))
    ok = half > 0
    if not ok.any():
        return 1.0
    score = np.abs(a - c)[ok] / half[ok]
    if groups is not None:
        g = np.asarray(groups)[ok]
        score = np.array([score[g == u].max() for u in np.unique(g)])
    r = np.sort(score)
    n = len(r)  # the finite-sample conformal quantile: rank ceil((n + 1) level)
    k = min(n, int(math.ceil((n + 1) * level)))
    return max(1.0, float(r[k - 1]))


def band_report(pred: np.ndarray, lo: np.ndarray, hi: np.ndarray, actual: np.ndarray,
                space: str = "log") -> dict[str, Any]:
    """How predictions with intervals did against what happened: coverage, mean and RMS
    relative error, the mean relative half-width of the intervals, and whether the mean error
    (in the law's residual space) lies inside the typical interval."""
    a = np.asarray(actual, float)
    rel = pred / a - 1
    err = float(np.mean(to_space(space, pred) - to_space(space, a)))
    half = float(np.mean((to_space(space, hi) - to_space(space, lo)) / 2))
    half_rel = (math.expm1(half) if space == "log" else
                float(np.mean((hi - lo) / 2 / np.abs(a))))
    return {"coverage": float(np.mean((lo <= a) & (a <= hi))),
            "mean_rel_error": float(np.mean(rel)),
            "rms_rel_error": float(np.sqrt(np.mean(rel ** 2))),
            "mean_halfwidth_rel": half_rel,
            "within_interval": bool(abs(err) <= half)}
