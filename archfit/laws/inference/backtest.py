"""Backtests: fit a law on the runs up to a size (or without its costliest runs), predict the
runs held out with prediction intervals, and report how the predictions did (the check an
interval is only as good as).

For each cut: the coverage of the intervals, the mean and RMS relative error, per held-out size
class the shape the fit would have picked against the shape that won (and the regret: the loss
of the picked one minus the best), and the verdict the fit gave."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from archfit.errors import FitError, FitInputError
from archfit.laws.base import ShapeLaw, get_law
from archfit.laws.inference.bands import band_report
from archfit.laws.columns import size_classes
from archfit.sweep.store import RunTable, read_runs, without_duplicates

DEFAULT_LAW = "depth-joint"  # the law a backtest fits when none is named


def backtest(frame: Any = None, law: str = DEFAULT_LAW, *, cut: float,
             paths: Sequence[str] | None = None, mapping: dict[str, str] | None = None,
             bootstrap: int = 200, seed: int = 0, interval: float = 0.95,
             group: Sequence[str] | None = None, arch: dict[str, Any] | None = None,
             progress: Callable[[int, int], None] | None = None,
             dedupe: bool = False) -> dict[str, Any]:
    """Fit ``law`` on the runs with params <= ``cut``; predict the rest. Returns a dict with
    ``coverage``, ``mean_rel_error``, ``rms_rel_error``, ``rows`` (``predicted``, ``low``,
    ``high``, ``actual`` and the run's columns), ``classes`` and ``verdict``. ``dedupe``: drop
    exact duplicate rows first (as ``fit --dedupe``); without it they are refused."""
    from archfit.laws.inference.selection import fit

    lw = get_law(law)
    if not lw.predicts_loss:
        raise FitInputError(f"{law} has no loss model to backtest; choose one of "
                            "chinchilla, kaplan-n, kaplan-nd, depth-width, depth-joint")
    table = frame if isinstance(frame, RunTable) else read_runs(
        paths or [], mapping, frame=frame, keep=group, signed_loss=lw.signed_loss)
    from archfit.laws.inference.conventions import check_params

    conventions: dict[str, str] = {}
    table = replace(table, frame=check_params(table.frame, table.sources, arch, [], conventions))
    if "params" not in table.frame.columns:
        raise FitInputError("a backtest cuts by size: the table needs a params column (map one "
                            "with --map params=COLUMN)")
    import polars as pl

    df = table.frame
    if dedupe:
        df, n_dup = without_duplicates(df)
        if n_dup:
            table = replace(table, frame=df, notes=[
                *table.notes, f"dropped {n_dup} duplicate row(s) (--dedupe)"])
    train = df.filter(pl.col("params") <= cut)
    test, screened = lw.screen(df.filter(pl.col("params") > cut))
    if test.height == 0:
        raise FitInputError(f"no run is larger than the cut {cut:.3g} (largest "
                            f"{df['params'].max():.3g}); cut lower")
    if train.height == 0:
        raise FitInputError(f"no run is at or below the cut {cut:.3g} (smallest "
                            f"{df['params'].min():.3g}); cut higher")
    # the answer the fit is asked for at the held-out runs: the largest size, or for a compute
    # law the largest held-out run's compute (C = 6 N D)
    top = float((6.0 * test["params"] * test["tokens"]).max()) if lw.target_kind == "compute" \
        else float(test["params"].max())
    f = fit(replace(table, frame=train, notes=list(table.notes)), law, bootstrap=bootstrap,
            seed=seed, group=group, arch=arch, progress=progress, targets=[top])
    cols = {c: test[c].to_numpy().astype(float) for c in test.columns
            if test[c].dtype.is_numeric()}
    pred, lo, hi = f.band(cols, interval)
    actual = cols["loss"]
    rep = band_report(pred, lo, hi, actual, lw.loss_space)
    rows = []
    keep = [c for c in ("run_id", "params", "n_layer", "d_model", "tokens") if c in test.columns]
    for i in range(test.height):
        r = {c: test[c][i] for c in keep}
        r.update(predicted=float(pred[i]), low=float(lo[i]), high=float(hi[i]),
                 actual=float(actual[i]))
        rows.append(r)
    return {"law": law, "cut": float(cut), "interval": interval,
            "n_train": train.height, "n_test": test.height,
            "notes": [f"held-out runs: {n}" for n in screened],
            **rep, "rows": rows,
            # which depth wins a size class is a question for a law that ranks depths
            "classes": _classes(test, pred, hi, actual) if isinstance(lw, ShapeLaw) else [],
            "verdict": f.verdict().verdict, "verdict_reasons": f.verdict().reasons,
            "verdict_at_largest": f.verdict(top).verdict,
            "fit": {"params": f.params, "unit": f.bootstrap.get("unit"),
                    "scatter": f.diagnostics.get("scatter")},
            "band_provenance": f.band_provenance()}


def _classes(test: Any, pred: np.ndarray, hi: np.ndarray, actual: np.ndarray
             ) -> list[dict[str, Any]]:
    """Per held-out size class with several shapes: the shape the fit ranks first against the
    one that won, each run read at its last row (most tokens)."""
    if not {"n_layer"} <= set(test.columns):
        return []
    N = test["params"].to_numpy()
    cls = size_classes(N)
    L = test["n_layer"].to_numpy()
    D = test["tokens"].to_numpy() if "tokens" in test.columns else np.ones(len(N))
    run = test["run_id"].to_numpy() if "run_id" in test.columns else np.array(
        [f"{a}:{b}" for a, b in zip(N, L)])
    out = []
    for c in np.unique(cls):
        idx = np.flatnonzero(cls == c)
        last: dict[Any, int] = {}
        for i in idx:
            if run[i] not in last or D[i] > D[last[run[i]]]:
                last[run[i]] = int(i)
        picks = list(last.values())
        if len(picks) < 2:
            continue
        p_best = min(picks, key=lambda i: pred[i])
        a_best = min(picks, key=lambda i: actual[i])
        out.append({"params": float(np.median(N[picks])), "n_runs": len(picks),
                    "predicted_best": {"n_layer": float(L[p_best]), "actual": float(actual[p_best]),
                                       "predicted": float(pred[p_best])},
                    "actual_best": {"n_layer": float(L[a_best]), "actual": float(actual[a_best]),
                                    "high": float(hi[a_best])},
                    "regret": float(actual[p_best] - actual[a_best]),
                    "within_interval": bool(actual[p_best] <= hi[a_best])})
    return out


def backtests(cuts: Sequence[float], **kw: Any) -> list[dict[str, Any]]:
    """:func:`backtest` at several cuts (the table read once). Each cut stands alone: one that
    cannot be fitted (too few sizes below it, nothing above it) gives ``{"cut", "law",
    "error"}`` with its one-line reason, and the others still run (their ``error`` is None).
    Raises only when no cut ran, with the first cut's reason."""
    if not cuts:
        raise FitError("give at least one cut")
    frame = kw.pop("frame", None)
    on_split = kw.pop("on_split", None)  # (i, n): the i-th of n distinct splits starts
    if not isinstance(frame, RunTable):
        frame = read_runs(kw.pop("paths", None) or [], kw.pop("mapping", None), frame=frame,
                          keep=kw.get("group"),
                          signed_loss=get_law(kw.get("law", DEFAULT_LAW)).signed_loss)
    # cuts between the same two sizes split the runs alike: each split is fitted once
    sizes = np.sort(frame.frame["params"].to_numpy()) if "params" in frame.frame.columns \
        else np.array([])
    split_of = {float(c): int(np.searchsorted(sizes, c, side="right")) for c in cuts}
    splits = sorted(set(split_of.values()))
    done: dict[int, dict[str, Any]] = {}
    out = []
    for c in cuts:
        k = split_of[float(c)]
        if k not in done:
            if on_split:
                on_split(len(done) + 1, len(splits))
            try:
                done[k] = {**backtest(frame, cut=c, **kw), "error": None}
            except (FitError, FitInputError) as e:
                if isinstance(e, FitInputError) and "no loss model" in str(e):
                    raise  # the law, not the cut: no cut can run
                done[k] = {"cut": float(c), "law": kw.get("law", "depth-joint"),
                           "error": str(e)}
        # the same split's result, under this cut (and the cut it was computed at)
        out.append({**done[k], "cut": float(c), "split_of_cut": done[k]["cut"]})
    if all(r["error"] for r in out):
        first = out[0]["error"]
        raise FitError(f"no cut could be backtested; at {out[0]['cut']:.3g}: {first}"
                       if len(out) > 1 else first)
    return out


class Predictions:
    """``archfit predict``'s answer for every row of a run table: the band of each (a row
    without a loss yet is predicted too, its ``actual`` None), and the coverage over the rows
    that have one. Sizes, tokens and shapes are checked as ``fit`` checks them."""

    KEYS = ("params", "n_layer", "d_model", "tokens")

    def __init__(self, fit: Any, table: RunTable, level: float) -> None:
        from archfit.laws.columns import finite_positive

        frame = table.frame
        self.cols = {c: frame[c].to_numpy().astype(float) for c in frame.columns
                     if frame[c].dtype.is_numeric()}
        for c in self.KEYS:  # what fit refuses, predict refuses
            if c in self.cols:
                finite_positive(table.sources.get(c, c), self.cols[c])
        self.pred, self.lo, self.hi = fit.band(self.cols, level)
        self.n = frame.height
        self.keys = [k for k in self.KEYS if k in self.cols]
        self.actual = self.cols.get("loss")
        a = self.actual
        # a unigram-normalized loss (a vocabulary law's) is below 0 for a good model
        signed = getattr(fit.law_obj, "signed_loss", False)
        self.has = (np.isfinite(a) & (True if signed else a > 0)) if a is not None \
            else np.zeros(self.n, bool)
        h = self.has
        self.summary = (band_report(self.pred[h], self.lo[h], self.hi[h], a[h])
                        if a is not None and h.any() else {})
        if h.any() and not h.all():
            self.summary["n_with_loss"] = int(h.sum())
        self.outside_span = fit.outside_span(self.cols["params"]) if "params" in self.cols \
            else None

    def row(self, i: int) -> dict[str, Any]:
        r: dict[str, Any] = {c: float(self.cols[c][i]) for c in self.keys}
        r.update(predicted=float(self.pred[i]), low=float(self.lo[i]), high=float(self.hi[i]))
        if self.actual is not None:  # None where the run has no loss (yet)
            r["actual"] = float(self.actual[i]) if self.has[i] else None
        return r


    def json_rows(self, level: float, prov: Mapping[str, Any], chunk: int = 20_000
                  ) -> Iterator[list[str]]:
        """Each row as the JSON text :meth:`row` with its interval (:func:`banded_rows`)
        would give, ``chunk`` rows a list: the columns are formatted an array at a time, so
        a million rows stream in seconds. NaN and inf are written as null."""
        from archfit.interval import banded_json

        def texts(x: np.ndarray) -> list[str]:
            ok = np.isfinite(x)
            return [repr(v) if f else "null" for v, f in zip(x.tolist(), ok.tolist())]

        for a in range(0, self.n, chunk):
            b = min(self.n, a + chunk)
            cols = [(f'"{c}": ', texts(self.cols[c][a:b])) for c in self.keys]
            cols.append(('"predicted": ', texts(self.pred[a:b])))
            if self.actual is not None:
                act = texts(self.actual[a:b])
                cols.append(('"actual": ', [t if h else "null"
                                            for t, h in zip(act, self.has[a:b].tolist())]))
            cols.append(('"interval": ', banded_json(self.lo[a:b], self.hi[a:b], level, prov)))
            named = [[k + t for t in v] for k, v in cols]
            yield ["{" + ", ".join(parts) + "}" for parts in zip(*named)]


def metrics(fit: Any, rows: dict[str, np.ndarray], level: float = 0.95) -> dict[str, Any]:
    """How a fit predicts the target rows: mean and max |relative error|, R² of loss, and the
    coverage of its ``level`` prediction intervals; with a ``true_loss`` column (a planted
    truth's noiseless loss) also the mean |relative error| against it. ``predicted`` holds
    each row's predicted loss and ``interval`` its prediction interval, in the rows' order."""
    from archfit.interval import Interval

    pred, lo, hi = fit.band(rows, level)
    prov = fit.band_provenance()
    a = np.asarray(rows["loss"], float)
    rel = np.abs(pred / a - 1)
    ss = float(np.sum((a - a.mean()) ** 2))
    out = {"mean_abs_rel_error": float(rel.mean()), "max_abs_rel_error": float(rel.max()),
           "r2": float(1 - np.sum((pred - a) ** 2) / ss) if ss > 0 else None,
           "coverage": float(np.mean((lo <= a) & (a <= hi))),
           "predicted": [float(v) for v in pred],
           "interval": [Interval.of((x, y), prov, level, "prediction interval")
                        for x, y in zip(lo, hi)]}
    if "true_loss" in rows:  # a planted truth: the law's own miss, without the rows' noise
        out["mean_abs_rel_error_vs_truth"] = float(np.mean(np.abs(pred / rows["true_loss"] - 1)))
    return out


EXTRAPOLATION_SHARE = 0.2  # the costliest share of the runs held out to calibrate intervals


def calibrated_fit(frame: Any, law: str, bootstrap: int, seed: int) -> Any:
    """A fit of ``frame`` whose prediction intervals are widened by what extrapolating in cost
    needed (:func:`cost_check`), recorded as the fit's ``diagnostics["heldout"]`` with
    ``split = "cost"``, which :meth:`Fit.band` reads. A design's target lies beyond its runs in
    cost, so this is the check that resembles the use; the fit's own held-out check holds out
    the largest sizes instead."""
    from archfit.laws.inference.selection import fit as fit_law

    f = fit_law(frame, law, bootstrap=bootstrap, seed=seed, heldout=False)
    f.diagnostics["heldout"] = cost_check(frame, law, bootstrap, seed)
    return f


def cost_check(frame: Any, law: str, bootstrap: int, seed: int) -> dict[str, Any]:
    """Refit ``frame`` without its costliest ``EXTRAPOLATION_SHARE`` of runs (at least 2),
    predict them, and report the split-conformal factor by which the 95% intervals must widen
    to cover them (``widen``, :func:`archfit.laws.inference.bands.conformal_factor`; never below 1),
    with the coverage and errors (``ok`` False, and why, where it cannot be made)."""
    from archfit.laws.inference.selection import fit as fit_law
    from archfit.laws.inference.bands import conformal_factor

    try:
        c = run_costs(frame)
    except FitInputError as e:
        return {"ok": False, "split": "cost", "reason": str(e)}
    k = max(2, int(round(EXTRAPOLATION_SHARE * frame.height)))
    order = np.argsort(c, kind="stable")
    if frame.height - k < get_law(law).min_points:
        return {"ok": False, "split": "cost",
                "reason": f"{frame.height} runs: too few to hold the costliest out"}
    train, test = frame[np.sort(order[:-k])], frame[np.sort(order[-k:])]
    try:
        tf = fit_law(train, law, bootstrap=bootstrap, seed=seed, heldout=False)
        cols = {name: test[name].to_numpy() for name in test.columns}
        pred, lo, hi = tf.band(cols, 0.95)
    except (FitError, FitInputError) as e:
        return {"ok": False, "split": "cost", "reason": str(e)}
    return {"ok": True, "split": "cost", "n_train": train.height, "n_test": k, "level": 0.95,
            **band_report(pred, lo, hi, cols["loss"]),
            "widen": conformal_factor(pred, lo, hi, cols["loss"], 0.95)}


def split_most_expensive(frame: Any, share: float = 0.1) -> tuple[Any, Any]:
    """(pool, target): the most expensive ``share`` of a table's runs held out as the target
    (:func:`run_costs`)."""
    c = run_costs(frame)
    order = np.argsort(c)
    k = max(1, int(round(share * frame.height)))
    return frame[np.sort(order[:-k])], frame[np.sort(order[-k:])]


def run_costs(frame: Any) -> np.ndarray:
    """Each run's cost: the table's ``cost`` column, else its training FLOPs, C = 6 N D."""
    if "cost" not in frame.columns and "tokens" not in frame.columns:
        raise FitInputError("the table has no tokens column and no cost column: a run's cost "
                            "needs its token count (or give a cost column)")
    if "cost" in frame.columns:
        return frame["cost"].cast(float).to_numpy()
    return 6.0 * frame["params"].cast(float).to_numpy() * frame["tokens"].cast(float).to_numpy()
