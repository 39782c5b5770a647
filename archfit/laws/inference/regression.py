"""The small regressions the laws share: non-negative least squares on relative error, weighted
least squares with its covariance, a constrained linear map, and the F test of a fit's
residuals for lack of fit (statsmodels)."""

from __future__ import annotations


from typing import Any, Mapping, Sequence

import numpy as np

from archfit.errors import FitError

Data = dict[str, Any]  # column name -> numpy array (as in archfit.laws.base)


def nnls_relative(M: np.ndarray, L: np.ndarray) -> tuple[float, np.ndarray]:
    """The non-negative coefficients of the columns of ``M`` (one row per run) that fit ``L``
    in relative error, the columns scaled for conditioning (scipy's NNLS on the rows over L):
    (the sum of squared relative errors, the coefficients). The inner solve of every
    variable-projection fit (chinchilla-varpro, the MoE laws)."""
    from scipy.optimize import nnls

    sc = np.abs(M).max(0)
    sc[sc == 0] = 1
    coef, _ = nnls(M / sc / L[:, None], np.ones_like(L))
    coef = coef / sc
    r = (M @ coef - L) / L
    return float(r @ r), coef


def ols(X: np.ndarray, y: np.ndarray, w: np.ndarray | None, full: bool
        ) -> tuple[np.ndarray, np.ndarray | None, Any]:
    """(coefficients, covariance, statsmodels result); plain lstsq when not ``full``."""
    if not full:
        sw = np.sqrt(w) if w is not None else np.ones_like(y)
        coef, *_ = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)
        return coef, None, None
    import statsmodels.regression.linear_model as sm

    # statsmodels' annotation says a float weight; it takes an array (and documents one)
    res = (sm.WLS(y, X, weights=w).fit()  # type: ignore[arg-type]
           if w is not None else sm.OLS(y, X).fit())
    cov = np.asarray(res.cov_params()) if len(y) > X.shape[1] else None
    return np.asarray(res.params), cov, res


def linear_map(X: np.ndarray, y: np.ndarray, w: np.ndarray | None, names: Sequence[str],
               cons: Any) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares with some coefficients fixed and Gaussian priors on others (the
    posterior mode and covariance). Without absolute weights the data's variance is taken from
    the residuals (or the data-only fit's residual scale when too few points are left)."""
    n, k = X.shape
    if w is None:
        if n > k:
            c, *_ = np.linalg.lstsq(X, y, rcond=None)
            s2 = float(np.sum((y - X @ c) ** 2)) / (n - k)
        else:
            s2 = (cons.scale or 0.05) ** 2
        w = np.full(n, 1.0 / max(s2, 1e-8))
    fixed = [i for i, nm in enumerate(names) if nm in cons.fixed]
    free = [i for i in range(k) if i not in fixed]
    y2 = y - X[:, fixed] @ np.array([cons.fixed[names[i]] for i in fixed]) if fixed else y
    sw = np.sqrt(np.asarray(w, float))
    A, b = [X[:, free] * sw[:, None]], [y2 * sw]
    for j, i in enumerate(free):
        if names[i] in cons.prior:
            m, sd = cons.prior[names[i]]
            row = np.zeros((1, len(free)))
            row[0, j] = 1.0 / sd
            A.append(row)
            b.append(np.array([m / sd]))
    Am, bm = np.concatenate(A), np.concatenate(b)
    if Am.shape[0] < len(free):
        raise FitError("too few size classes for the free parameters: fix or put a prior on "
                       "more of them")
    cf, *_ = np.linalg.lstsq(Am, bm, rcond=None)
    coef, cov = np.zeros(k), np.zeros((k, k))
    coef[free] = cf
    for i in fixed:
        coef[i] = cons.fixed[names[i]]
    try:
        cov[np.ix_(free, free)] = np.linalg.inv(Am.T @ Am)
    except np.linalg.LinAlgError:
        cov[:] = np.nan
    return coef, cov


# what the lack-of-fit test regresses a fit's residuals on, in logs, where the law reads them
LACK_OF_FIT_FEATURES = ("params", "tokens", "n_layer", "vocab_size", "characters")


def lack_of_fit(resid: np.ndarray, data: Mapping[str, Any]) -> float | None:
    """The p-value of :func:`lack_of_fit_test`, or None."""
    test = lack_of_fit_test(resid, data)
    return None if test is None else test[0]


def lack_of_fit_test(resid: np.ndarray, data: Mapping[str, Any], groups: Any = None
                     ) -> tuple[float, float] | None:
    """The p-value of an F test of a fit's log residuals (centred) on its rows' standardized
    log size, tokens and depth (those that vary), their squares and products (Ramsey's RESET
    test in spirit; the overall F test of an OLS fit of every term against the intercept, as
    statsmodels' ``OLS(...).fit().f_pvalue`` computes it: a pseudo-inverse fit, the design's
    rank for its degrees of freedom; tests/test_design_real.py checks it against statsmodels):
    small where the residuals trend over the features, about uniform where they are noise;
    with it the share of the residuals' sum of squares the trend explains (its R²). With
    ``groups`` whose units hold several rows (a run's checkpoints share its noise), the F test
    is the cluster-robust Wald test of the same slopes (CR1 covariance, G - 1 denominator
    degrees of freedom, as statsmodels' ``cov_type="cluster"``): rows of one run are not
    independent, and the classical test would read their shared offset as a trend. None with
    fewer than 3 residual degrees of freedom (or no more clusters than slopes) or nothing that
    varies. numpy and
    scipy.special only: every fit runs it, and statsmodels' import costs seconds."""
    from itertools import combinations_with_replacement

    from scipy.special import fdtrc

    r = np.asarray(resid, float)
    if not len(r) or not np.isfinite(r).all():
        return None
    r = r - r.mean()
    logs = [np.log(np.asarray(data[c], float)) for c in LACK_OF_FIT_FEATURES
            if c in data]
    varying = [x for x in logs if np.ptp(x) > 0]
    if not varying:
        return None
    X = np.stack(varying, axis=1)
    X = (X - X.mean(0)) / X.std(0)
    m = X.shape[1]
    A = np.column_stack([np.ones(len(r))] + [X[:, i] for i in range(m)]
                        + [X[:, i] * X[:, j]
                           for i, j in combinations_with_replacement(range(m), 2)])
    # a rank-deficient design (two token counts: D and D² alike) is fitted by pseudo-inverse,
    # its rank counted
    rank = int(np.linalg.matrix_rank(A))
    df_model, df_resid = rank - 1, len(r) - rank
    if df_resid < 3:
        return None
    ssr = float(np.sum((r - A @ (np.linalg.pinv(A, rcond=1e-15) @ r)) ** 2))
    tss = float((r ** 2).sum())  # r is centred: the total sum of squares about its mean
    if ssr <= 0:
        return (0.0, 1.0) if tss > 0 else (1.0, 0.0)
    if df_model < 1:
        return None
    share = float(1.0 - ssr / tss)
    if groups is not None and len(np.unique(groups)) < len(r):
        p = _cluster_wald(A, r, np.asarray(groups), rank)
        return None if p is None else (p, share)
    return (float(fdtrc(df_model, df_resid, ((tss - ssr) / df_model) / (ssr / df_resid))),
            share)


def _cluster_wald(A: np.ndarray, r: np.ndarray, groups: np.ndarray, rank: int
                  ) -> float | None:
    """The p-value of the cluster-robust Wald F test that every slope of the OLS of ``r`` on
    ``A`` (its first column the intercept) is 0: CR1 covariance (the G / (G - 1) (n - 1) /
    (n - k) correction), F(q, G - 1). None with no more clusters than slopes, or fewer than
    :data:`~archfit.laws.inference.clusters.MIN_CLUSTERS` (a robust covariance from a handful
    of clusters over-rejects: Cameron & Miller 2015, J. Human Resources 50)."""
    from scipy.special import fdtrc

    from archfit.laws.inference.clusters import MIN_CLUSTERS

    n, k = A.shape
    labels, inv = np.unique(groups, return_inverse=True)
    G = len(labels)
    q = rank - 1
    if G < MIN_CLUSTERS or G - 1 < q or q < 1 or rank < k:  # rank-deficient: no test
        return None
    bread = np.linalg.inv(A.T @ A)
    beta = bread @ (A.T @ r)
    u = r - A @ beta
    scores = np.zeros((G, k))
    np.add.at(scores, inv.ravel(), A * u[:, None])
    meat = scores.T @ scores
    V = bread @ meat @ bread * (G / (G - 1)) * ((n - 1) / (n - k))
    b, Vs = beta[1:], V[1:, 1:]
    try:
        W = float(b @ np.linalg.solve(Vs, b)) / q
    except np.linalg.LinAlgError:
        return None
    return float(fdtrc(q, G - 1, W)) if np.isfinite(W) else None
