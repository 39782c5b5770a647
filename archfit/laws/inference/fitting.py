"""The fitting driver (numpy at the top: this module is never on a cold path): :func:`fit`
reads and checks a table of runs, then :func:`fit_data` makes the point estimate, the
bootstrap over training runs, the scatter of runs about the law and the held-out check. The
numeric pieces the laws share live in :mod:`archfit.laws.columns`, :mod:`~archfit.laws.inference.regression`,
:mod:`~archfit.laws.shape.optima` and :mod:`~archfit.laws.inference.bands`."""

from __future__ import annotations

from dataclasses import replace
import math
import os
from typing import Any, Callable, Sequence

import numpy as np

from archfit.errors import FitError, FitInputError, WorkerError
from archfit.laws.inference.artifact import Fit
from archfit.laws.base import Constraints, Data, Estimate, Law, get_law
from archfit.laws.inference.constraints import constraints_for, point_estimate, prior_record
from archfit.numbers import draw_ends, draw_percentiles, order_statistic, plain
from archfit.laws.inference.conventions import check_params
from archfit.laws.inference.bands import run_scatter
from archfit.laws.columns import SIZE_TOLERANCE, finite_positive, subset
from archfit.laws.inference.clusters import Fallback, fallback, widen_draws
from archfit.laws.inference.regression import lack_of_fit_test
from archfit.laws.inference.threads import one_blas_thread
from archfit.sweep.store import RunTable, positive_losses, read_runs, without_duplicates

# the internal held-out check: its own resamples and seed, so that the verdict does not move
# with --seed (the check is a diagnostic of the data, not a draw)
HELDOUT_BOOTSTRAP, HELDOUT_SEED, HELDOUT_LEVEL = 100, 0, 0.95
# resamples are drawn up front: beyond this a count is a typo, not a wish for precision
MAX_BOOTSTRAP = 100_000
# bootstrap="auto" (the CLI's default): resamples in rounds of AUTO_ROUND, at most AUTO_MAX,
# until every parameter's 95% interval has both ends known to within AUTO_MC_ERROR of its width
# (the Monte-Carlo error of an end: half the distribution-free 95% interval of that percentile
# from the draws, by order statistics; Hahn & Meeker 1991, ch. 5). The draws are the first ones
# of a fixed-count bootstrap with the same seed. The error falls as 1 / sqrt(B) (an order
# statistic's spread; Andrews & Buchinsky 2000 choose B by the same asymptotics), so after a
# round B (err / AUTO_MC_ERROR)^2 resamples would settle it: where that is more than
# AUTO_HOPELESS times AUTO_MAX (the cap's error at least twice the tolerance), the rule stops
# there and says how many would do, rather than draw to a cap that cannot settle it. Not
# before AUTO_HOPELESS_FROM draws: at 200 the ends' bracketing order statistics are ranks 1-9,
# and one extreme draw puts the error at 100% where 1,000 draws measure 15% (the demo's sweep);
# from 400, ranks 4-16.
AUTO_BOOTSTRAP, AUTO_ROUND, AUTO_MAX, AUTO_MC_ERROR = "auto", 200, 1000, 0.10
AUTO_HOPELESS, AUTO_HOPELESS_FROM = 4.0, 400
# every step of the optimizer and of each resample reads every row: a table of more rows than
# this (each a trained run or checkpoint; the public sweeps archfit ships hold at most a few
# thousand) would take many minutes, so it is refused with what to do instead
MAX_FIT_ROWS = 100_000


def fit(
    frame: Any = None,
    law: str = "chinchilla",
    *,
    paths: Sequence[str] | None = None,
    mapping: dict[str, str] | None = None,
    bootstrap: int | str = 200,
    seed: int = 0,
    targets: Sequence[float] | None = None,
    heldout: bool = True,
    progress: Callable[[int, int], None] | None = None,
    fix: dict[str, float] | None = None,
    prior: Any = None,
    prior_widths: dict[str, float] | None = None,
    tie: dict[str, str] | None = None,
    dedupe: bool = False,
    group: Sequence[str] | None = None,
    arch: dict[str, Any] | None = None,
    size_tolerance: float | None = None,
    pool_groups: bool = False,
) -> Fit:
    """Fit ``law`` to a table of runs (polars or pandas ``frame``, a :class:`RunTable`, or
    files in ``paths``); for ``law="auto"`` (the law chosen on held-out runs) call
    :func:`archfit.laws.inference.selection.fit`, which is ``archfit.fit``.
    Returns a :class:`Fit` with parameters, 95% CIs (percentile bootstrap over training runs:
    the rows of one run at several token counts are resampled together, see ``group``; Wald
    intervals from the covariance when ``bootstrap=0`` and the law has one), derived quantities
    at ``targets``, and diagnostics (RMSE and R² in log space, the scatter of runs about the
    law, a held-out check on the largest ~20% of sizes with 95% prediction intervals, the data's
    span): ``conf_int``, ``predict(frame, interval=0.95)``, ``optimum``, ``verdict``.

    ``group`` names the columns whose rows form one bootstrap unit (default: ``run_id``, else
    one shape and seed at several token counts, else every row alone). ``arch`` states the
    architecture (``mlp``, ``vocab``, ``tie``, ``ff_ratio``: the flags of ``archfit shape``)
    for the check of the params column against the shape core's count.

    ``fix`` holds parameters at values (``{"b": 0.0555}``); ``prior`` adds Gaussian priors on
    the parameters this law shares with a published fit or fit artifact (a name, path or
    :class:`Fit`; sd from ``prior_widths`` or from its CI), or is a dict ``{name: (mean, sd)}``.
    ``tie`` holds one parameter equal to another (``{"beta": "alpha"}``; the compute laws and
    the other laws that list ``supports_ties``), as published constrained fits do.
    The fit records prior, data-only and posterior values side by side.

    ``size_tolerance`` (default :data:`~archfit.laws.columns.SIZE_TOLERANCE`, 2%) is what "the
    same size" means where the table has no planned size (``target_params``): runs within it
    of a class's smallest run are one size class. The classes are fixed once here; every check
    and the held-out split read them, and the fit's span records them.

    A text column that splits the runs into 2-20 groups (a dataset, a schedule, a tokenizer)
    is named in a warning: fit one law per group with :func:`fit_groups`, or acknowledge the
    pooling with ``pool_groups``.

    Sanity checks stop a fit that cannot be what it claims: exact duplicate rows (drop them
    with ``dedupe``), parameter counts below 1e3 or losses above 20 nats (swapped or mislabelled
    columns), fewer distinct sizes than the law needs; loss growing with N is noted loudly.
    """
    lw = get_law(law)
    table = run_table(frame, paths, mapping, group, lw.signed_loss, own_columns(lw))
    if not lw.signed_loss:
        table = positive_losses(table)
    seed, bootstrap = plain(seed), plain(bootstrap)  # numpy's integers as Python's
    _check_bootstrap(bootstrap)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise FitInputError(f"seed must be a whole number >= 0, got {seed!r}")
    cons = constraints_for(lw, fix, prior, prior_widths, tie)
    notes = list(table.notes) + grouping_notes(table, pool_groups)
    conventions = _conventions(table, lw)
    df = sane_frame(lw, table, dedupe, notes)
    df, screened = lw.screen(df)
    notes += screened
    if lw.params_column == "params":  # a MoE law's N is the active count, not this column
        df = check_params(df, table.sources, arch, notes, conventions)
    data = with_size_classes(lw, lw.prepare(df), size_tolerance)
    check_losses_vary(data)
    check_sizes(lw, data)
    f = fit_data(lw, data, cons=cons, bootstrap=bootstrap, seed=seed, targets=targets,
                 group=group, heldout=heldout, progress=progress, notes=notes)
    f.inputs, f.conventions, f.mapping = table.inputs, conventions, dict(table.mapping)
    f.diagnostics.setdefault("span", {}).update(runs_build(table))
    return f


def _check_bootstrap(bootstrap: Any) -> None:
    """``auto``, or a whole number of resamples from 0 to :data:`MAX_BOOTSTRAP`."""
    if bootstrap != AUTO_BOOTSTRAP and not (
            isinstance(bootstrap, int) and not isinstance(bootstrap, bool)
            and 0 <= bootstrap <= MAX_BOOTSTRAP):
        raise FitInputError(f"bootstrap must be 'auto' or between 0 and {MAX_BOOTSTRAP:,} "
                            f"resamples, got {bootstrap!r}")


# the block fields a recommendation from this fit builds with, where every run shares them (the
# ff ratio where it is shared too)
BLOCK_FIELDS = ("mlp", "position", "norm", "bias", "tied_embeddings", "ff_ratio")


def runs_build(table: RunTable) -> dict[str, Any]:
    """What the runs share, where the table records one value of it: the vocabulary and
    context (``vocab_size``, ``n_ctx``) and the block (:data:`BLOCK_FIELDS`). ``recommend
    --fit`` builds with them unless told otherwise: the law was fitted on that block."""
    out: dict[str, Any] = {}
    for col in ("vocab_size", "n_ctx"):
        if col in table.frame.columns:
            vals = table.frame[col].drop_nulls().unique().to_list()
            if len(vals) == 1 and isinstance(vals[0], (int, float)) and vals[0] > 0:
                out[col] = int(vals[0])
    block = {}
    for col in BLOCK_FIELDS:
        vals = (table.frame[col].drop_nulls().unique().to_list()
                if col in table.frame.columns else [])
        if len(vals) == 1:  # bias and tied_embeddings are read as numbers (1.0 / 0.0)
            v = vals[0]
            block[col] = (float(v) if col == "ff_ratio" else bool(v)
                          if col in ("bias", "tied_embeddings") else v)
    if set(BLOCK_FIELDS[:-1]) <= set(block):  # the ff ratio may vary (an ff-ratio sweep)
        out["block"] = block
    return out


def own_columns(lw: Law) -> list[str]:
    """The columns ``lw`` reads that archfit's run tables do not name (a law of a kind
    registered beyond the built-in ones may read its own): carried where the input has them."""
    from archfit.sweep.store import CANONICAL

    return [c for c in dict.fromkeys((*lw.columns, *lw.optional_columns)) if c not in CANONICAL]


def run_table(frame: Any, paths: Sequence[str] | None, mapping: dict[str, str] | None,
              group: Sequence[str] | None, signed_loss: bool = False,
              optional: Sequence[str] = ()) -> RunTable:
    """The runs to fit: ``frame`` as it is if a :class:`RunTable`, else read from the frame or
    the files in ``paths`` (columns renamed by ``mapping``, ``group``'s columns kept, and
    ``optional``'s where the input has them; losses at or below 0 kept with ``signed_loss``)."""
    if frame is None and paths is None:
        raise FitInputError("give a frame or paths to fit")
    return frame if isinstance(frame, RunTable) else read_runs(
        paths or [], mapping, frame=frame, keep=group, signed_loss=signed_loss,
        optional=optional)


def check_rows(df: Any, columns: Sequence[str]) -> None:
    """Refuse a table of more than :data:`MAX_FIT_ROWS` rows (every law, and ``auto`` before
    it fits any), saying how to shrink it: average the rows that repeat a configuration of
    ``columns``, or sample."""
    if df.height <= MAX_FIT_ROWS:
        return
    cols = [c for c in dict.fromkeys([*columns, "tokens"]) if c != "loss" and c in df.columns]
    k = df.select(cols).n_unique() if cols else df.height
    how = (f"they repeat {k:,} configurations of {', '.join(cols)}: average each one's rows "
           f"first (polars: df.group_by({cols}).agg(pl.col('loss').mean()))"
           if 10 * k <= df.height else
           "fit a sample of them (one row per run and token count) or split the table")
    raise FitInputError(f"{df.height:,} rows are more than a fit reads in minutes "
                        f"({MAX_FIT_ROWS:,}: each step of the fit and of each resample reads "
                        f"every row); {how}")


def grouping_notes(table: RunTable, pooled: bool) -> list[str]:
    """One line per grouping-like column of the table (:func:`archfit.sweep.store.grouping_columns`):
    a warning, or with ``pooled`` (``--pool-groups``) the acknowledgement."""
    out = []
    for col, vals in table.groupings.items():
        shown = ", ".join(vals[:5]) + (", ..." if len(vals) > 5 else "")
        out.append(f"pooled the {len(vals)} groups of column {col!r} ({shown}) into one law "
                   "(--pool-groups)" if pooled else
                   f"WARNING: column {col!r} splits the runs into {len(vals)} groups ({shown}); "
                   "one law across them pools runs that may follow different laws: fit one "
                   f"per group with --by {col}, or pass --pool-groups to fit them as one")
    return out


def with_size_classes(lw: Law, data: Data, tolerance: float | None) -> Data:
    """``data`` with its size classes fixed once (columns ``size_class`` and
    ``size_tolerance``), so every check, the held-out split and each resample read the same."""
    if "params" in data:
        tol = SIZE_TOLERANCE if tolerance is None else float(tolerance)
        if not 0 <= tol < 1:
            raise FitInputError(f"size tolerance must be between 0 and 1 (e.g. 0.02 for 2%), "
                                f"got {tol:g}")
        data["size_class"] = lw.classes(data, tol)
        data["size_tolerance"] = np.full(len(data["loss"]), tol)
    return data


def tolerance_of(data: Data) -> float:
    """The size tolerance :func:`with_size_classes` fixed for ``data`` (else the default)."""
    tol = data.get("size_tolerance")
    return float(tol[0]) if tol is not None and len(tol) else SIZE_TOLERANCE


def fit_groups(frame: Any = None, law: str = "chinchilla", *, by: str,
               paths: Sequence[str] | None = None, mapping: dict[str, str] | None = None,
               **kw: Any) -> dict[str, Fit]:
    """One :func:`fit` of ``law`` per value of the column ``by`` (a dataset, a schedule, ...),
    as {value: Fit} in the values' order; ``kw`` goes to each fit. A group that cannot be
    fitted raises with the group named."""
    import polars as pl

    from archfit.errors import FitError as _FitError
    from archfit.sweep.store import GROUPING_VALUES

    group = kw.get("group")
    table = frame if isinstance(frame, RunTable) else read_runs(
        paths or [], mapping, frame=frame, keep=[by, *(group or [])],
        signed_loss=get_law(law).signed_loss)
    if by not in table.frame.columns:
        raise FitInputError(f"--by {by}: no such column; the table has "
                            f"{', '.join(table.frame.columns)}")
    col = table.frame[by].cast(pl.Utf8)
    values = col.drop_nulls().unique().sort().to_list()
    if not GROUPING_VALUES[0] <= len(values) <= GROUPING_VALUES[1]:
        raise FitInputError(f"--by {by}: the column has {len(values)} distinct value(s); a "
                            f"grouping has {GROUPING_VALUES[0]} to {GROUPING_VALUES[1]}")
    out: dict[str, Fit] = {}
    for v in values:
        part = replace(table, frame=table.frame.filter(col == v).drop(by),
                       notes=list(table.notes), groupings={})
        try:
            out[v] = fit(part, law, **kw)
        except (_FitError, FitInputError) as e:
            raise type(e)(f"--by {by}, group {v!r} ({part.frame.height} rows): {e}") from None
    return out


def fit_data(lw: Law, data: Data, *, cons: Constraints | None = None,
             bootstrap: int | str = 200,
             seed: int = 0, targets: Sequence[float] | None = None,
             group: Sequence[str] | None = None, heldout: bool = True,
             progress: Callable[[int, int], None] | None = None,
             notes: list[str] | None = None) -> Fit:
    """:func:`fit` on prepared columns (``lw.prepare``): the point estimate, the bootstrap over
    runs, the scatter of runs about the law and the held-out check."""
    from archfit._version import __version__

    cons = cons or Constraints()
    notes = list(notes or [])
    targets = list(targets) if targets else list(lw.default_targets)
    groups, unit = lw.groups(data, group)
    with one_blas_thread(), np.errstate(all="ignore"):
        est, cons, data_only = point_estimate(lw, data, cons)
        params = {n: float(v) for n, v in zip(lw.param_names, est.params)}
        f = Fit(law=lw.name, params=params, cov=est.cov.tolist() if est.cov is not None else None,
                derived=lw.derived(params, targets, est.extra), n_points=int(len(data["loss"])),
                diagnostics=_diagnostics(lw, data, params, est, groups),
                extra={k: v for k, v in est.extra.items() if k not in ("notes",
                                                                         "residual_space")},
                archfit_version=__version__, prior=prior_record(cons, data_only))
        f.diagnostics["unit"] = {"unit": unit, "n_units": int(len(np.unique(groups)))}
        if group:  # a unit that splits one training run's checkpoints apart: they are not
            natural, run_unit = lw.groups(data, None)  # independent, the CIs come out narrow
            pairs = np.unique(np.stack([np.unique(natural, return_inverse=True)[1],
                                        np.unique(groups, return_inverse=True)[1]]), axis=1)
            if len(np.unique(pairs[0])) < pairs.shape[1]:
                f.diagnostics["unit"]["splits"] = run_unit
        fb = fallback(groups, unit, f.diagnostics.get("residuals")) if (
            bootstrap == AUTO_BOOTSTRAP or int(bootstrap) > 0) else None
        if fb is not None:  # too few clusters for a bootstrap of them: rows, widened
            notes.append(f"bootstrap unit: {fb.describe()}")
        _uncertainty(f, lw, data, est, bootstrap, seed, targets, progress, notes, cons,
                     groups if fb is None else np.arange(len(groups)),
                     unit if fb is None else fb.describe(), fb)
        for c in lw.constants:  # set, not fitted: no interval
            f.ci.pop(c, None)
        if heldout:
            f.diagnostics["heldout"] = _heldout(lw, data, cons, group, HELDOUT_BOOTSTRAP
                                                if bootstrap == AUTO_BOOTSTRAP else
                                                int(bootstrap))
        f.notes = (notes + list(est.extra.get("notes", []))
                   + lw.derived_notes(f.derived, est.extra))
    return f


def _heldout(lw: Law, data: Data, cons: Constraints, group: Sequence[str] | None,
             bootstrap: int) -> dict[str, Any]:
    """The law's own held-out check, else the generic one for laws with a loss model: fit on
    all but the largest ~20% of sizes (at least 2, at most a third), predict those runs with
    95% prediction intervals, and report the error, the interval and its coverage."""
    own = lw.heldout(data, constraints=cons) if cons else lw.heldout(data)
    if own is not None:
        return own
    if not lw.predicts_loss or "params" not in data:
        return {}
    from archfit.laws.inference.bands import band_report, conformal_factor, extrapolation_rate

    mask, sizes, axis = lw.heldout_split(data)
    if not mask.any():
        return {"ok": False, "reason": ("fewer than 3 distinct sizes" if axis == "N" else
                                        "fewer than 3 budgets") + ": nothing to hold out"}
    train, test = subset(data, ~mask), subset(data, mask)
    try:
        if len(train["loss"]) < lw.min_points:
            raise FitError(f"only {len(train['loss'])} runs below the held-out sizes")
        check_sizes(lw, train)
        tf = fit_data(lw, train, cons=cons, bootstrap=min(bootstrap, HELDOUT_BOOTSTRAP),
                      seed=HELDOUT_SEED, targets=None, group=group, heldout=False)
        pred, lo, hi = tf.band(test, HELDOUT_LEVEL, beyond=True)
    except FitError as e:
        return {"ok": False, "reason": f"held-out fit failed: {e}"}
    space = lw.loss_space
    rep = band_report(pred, lo, hi, test["loss"], space)
    # intervals that undercover the held-out runs are widened by what they needed there
    units, _ = lw.groups(test, group)
    widen = conformal_factor(pred, lo, hi, test["loss"], HELDOUT_LEVEL, units, space)
    # and how fast the miss grew past the sizes fitted, for predictions beyond the full fit's
    reach = extrapolation_rate(pred, lo, hi, test["loss"], test["params"],  # largest (band)
                               float(np.max(train["params"])), HELDOUT_LEVEL, space)
    reach = {**reach, "params_max": float(np.max(data["params"]))} if reach else reach
    return {"ok": True, "held_out_sizes": sizes, "held_out_axis": axis,
            "n_train": int(len(train["loss"])),
            "n_test": int(len(test["loss"])), "level": HELDOUT_LEVEL, "reach": reach,
            "param_uncertainty": bool(tf.bootstrap.get("n_ok")), **rep, "widen": widen}


def sane_frame(lw: Law, table: RunTable, dedupe: bool, notes: list[str]) -> Any:
    """The frame after the checks that stop a fit of data that cannot be what it claims."""
    df, src = table.frame, table.sources
    for c in ("params", "tokens"):  # before duplicates: all-zero tokens make rows look alike
        _ = c in df.columns and df[c].dtype.is_numeric() and finite_positive(src.get(c, c), df[c])
    unique, n_dup = without_duplicates(df)
    if n_dup:
        if not dedupe:
            raise FitInputError(f"{n_dup} of {df.height} rows are exact duplicates of other rows; "
                                "they would narrow the CIs without adding evidence; pass "
                                "--dedupe to drop them")
        df = unique
        notes.append(f"dropped {n_dup} duplicate row(s) (--dedupe)")
    check_rows(df, lw.columns)
    if why := lw.implausible(df):
        raise FitInputError(f"{lw.name}: {why}")
    if "params" in df.columns and df["params"].min() < 1e3:
        raise FitInputError(f"column {src.get('params', 'params')!r} (archfit 'params') has "
                            f"values as small as {df['params'].min():.3g}: not a parameter "
                            "count? Check for swapped columns and map them with --map")
    if "loss" in df.columns and df["loss"].max() > 20:
        raise FitInputError(f"column {src.get('loss', 'loss')!r} (archfit 'loss') has values up "
                            f"to {df['loss'].max():.3g} nats/token: not a loss? Check for "
                            "swapped columns and map them with --map")
    if {"params", "loss"} <= set(df.columns) and df["params"].n_unique() >= 5 and \
            df["loss"].n_unique() > 1:  # one loss: check_losses_vary refuses it, in one line
        rho = float(np.corrcoef(df["params"].rank().to_numpy(), df["loss"].rank().to_numpy())[0, 1])
        if rho > 0.5:
            notes.append(f"WARNING: loss grows with N (rank correlation {rho:+.2f}); scaling "
                         "laws expect the opposite: check the columns and the runs")
    return df


def check_losses_vary(data: Data) -> None:
    """Refuse a table whose every loss is the same: a law is fitted to how it changes."""
    loss = np.asarray(data["loss"], float)
    if len(loss) > 1 and np.ptp(loss) == 0:
        raise FitInputError(f"every row's loss is {loss[0]:.6g}: a law is fitted to how the loss "
                            "changes with size and tokens, and here it does not; check the "
                            "loss column (one loss per run)")


def check_sizes(lw: Law, data: Data) -> None:
    """Refuse a law whose parameters need more distinct sizes N than the runs have."""
    if lw.min_sizes and "params" in data:
        from archfit.laws.columns import size_classes

        # measured sizes: what a law in N is fitted across
        n = len(np.unique(size_classes(data["params"], None, tolerance_of(data))))
        if n < lw.min_sizes:
            raise FitError(f"{lw.name} needs runs at {lw.min_sizes} or more different sizes N to "
                           f"fit its {lw.n_fitted} parameters; these runs have {n}")


def _diagnostics(lw: Law, data: Data, params: dict[str, float], est: Estimate,
                 groups: np.ndarray) -> dict[str, Any]:
    obs, fitted = lw.residuals(params, data, est.extra)
    resid = obs - fitted
    ss_tot = float(np.sum((obs - obs.mean()) ** 2))
    d: dict[str, Any] = {
        "rmse_log": float(np.sqrt(np.mean(resid ** 2))),
        "r2_log": float(1 - np.sum(resid ** 2) / ss_tot) if ss_tot > 0 else None,
        "residuals": resid.tolist(),
        "fitted_log": fitted.tolist(),
        "residual_space": est.extra.get("residual_space", "log loss"),
        "span": _span(lw, data),
    }
    if lw.predicts_loss and len(resid) == len(groups):
        d["scatter"] = run_scatter(resid, groups, lw.n_fitted)
    if lw.predicts_loss and len(resid) == len(data["loss"]):
        read = [c for c in (*lw.columns, *lw.optional_columns) if c in data]
        test = lack_of_fit_test(resid, {c: data[c] for c in read}, groups)
        n_units = int(len(np.unique(groups)))
        d["lack_of_fit"] = {"p": None if test is None else test[0],
                            "trend_share": None if test is None else test[1],
                            "runs": int(len(resid)),
                            "clusters": n_units if n_units < len(resid) else None,
                            "test": f"F test of the residuals ({d['residual_space']}) on the "
                                    "standardized logs of the size, tokens, depth and "
                                    "vocabulary the law reads, squares and products"}
    return d


def _span(lw: Law, data: Data) -> dict[str, Any]:
    span: dict[str, Any] = {"n_points": int(len(data["loss"]))}
    if "params" in data:
        span.update(params_min=float(np.min(data["params"])),
                    params_max=float(np.max(data["params"])),
                    n_size_classes=int(len(np.unique(lw.classes(data)))))
        if "target_params" in data and np.all(np.isfinite(data["target_params"])):
            span["size_classes_by"] = "planned size (target_params)"
        else:
            span["size_classes_by"] = (f"sizes within {tolerance_of(data):.0%} of a class's "
                                       "smallest run")
    if "tokens" in data:
        span.update(tokens_min=float(np.min(data["tokens"])),
                    tokens_max=float(np.max(data["tokens"])))
        if "params" in data:  # the largest run's compute, C = 6 N D; the runs' D / N
            span["flops_max"] = float(np.max(6.0 * data["params"] * data["tokens"]))
            ratio = data["tokens"] / data["params"]
            span.update(tokens_per_param_min=float(np.min(ratio)),
                        tokens_per_param_max=float(np.max(ratio)))
    span.update(lw.span_extra(data))
    for col in lw.reach_columns:  # a mixture of experts' granularity, experts and top-k
        if col in data and np.all(np.isfinite(data[col])):
            span.update({f"{col}_min": float(np.min(data[col])),
                         f"{col}_max": float(np.max(data[col]))})
    return span


def _conventions(table: RunTable, lw: Law | None = None) -> dict[str, str]:
    col = lw.params_column if lw is not None else "params"
    conventions = {"params": f"column {table.sources.get(col, col)!r}"}
    if table.sources.get(col) == "params_non_embedding":
        conventions["params"] += " (Kaplan's N: non-embedding parameters)"
    if table.sources.get(col) == "params_active_non_embedding":
        conventions["params"] += " (active non-embedding parameters of a mixture of experts)"
    if "tokens" in table.sources:
        src = table.sources["tokens"]
        conventions["tokens"] = ("D = FLOPs / (6 N)" if src.startswith("flops") else
                                 f"column {src!r} (training tokens)")
    conventions["loss"] = f"column {table.sources.get('loss', 'loss')!r} (nats/token)"
    return conventions


def _uncertainty(f: Fit, lw: Law, data: Data, est: Estimate, bootstrap: int | str, seed: int,
                 targets: list[float], progress: Callable[[int, int], None] | None,
                 notes: list[str], cons: Constraints, groups: np.ndarray, unit: str,
                 fb: Fallback | None = None) -> None:
    """Fill ``f.ci``, ``f.derived_ci`` and ``f.bootstrap``: percentile bootstrap, else Wald.
    With ``fb`` (too few clusters: ``groups`` are then the rows), the draws are widened by its
    design effect and their derived values recomputed from them."""
    f.ci = {n: None for n in lw.param_names}
    f.derived_ci = {k: None for k in f.derived}
    if bootstrap == AUTO_BOOTSTRAP or int(bootstrap) > 0:
        rule: dict[str, Any] = {}
        if bootstrap == AUTO_BOOTSTRAP:
            samples, dsamples, n_failed, rule = _auto_bootstrap(lw, data, est, seed, targets,
                                                                progress, cons, groups)
        else:
            samples, dsamples, n_failed = bootstrap_fits(lw, data, est, int(bootstrap), seed,
                                                         targets, progress, cons=cons,
                                                         groups=groups)
        n_ok = len(samples)
        bootstrap = n_ok + n_failed
        if fb is not None and n_ok:
            samples = widen_draws(samples, est.params, fb.widen, lw.param_names, lw.domains)
            dsamples = [lw.derived(dict(zip(lw.param_names, row)), targets, est.extra)
                        for row in samples]
            rule = {**rule, "widened": fb.widen, "clusters": fb.n_clusters}
        f.bootstrap = {"n": bootstrap, "n_ok": n_ok, "n_failed": n_failed, "seed": seed,
                       "unit": unit, "n_units": int(len(np.unique(groups))), **rule,
                       "samples": {n: samples[:, i].tolist()
                                   for i, n in enumerate(lw.param_names)} if n_ok else {}}
        if n_ok >= max(10, bootstrap // 4):
            for i, n in enumerate(lw.param_names):
                f.ci[n] = draw_ends(samples[:, i])
            for k in f.derived:
                vals = np.asarray([d.get(k, np.nan) for d in dsamples], dtype=float)
                vals = vals[np.isfinite(vals)]
                if (ends := draw_ends(vals)) is not None:
                    f.derived_ci[k] = ends
                    f.bootstrap["samples"][k] = vals.tolist()
        elif bootstrap < 10:
            notes.append(f"{bootstrap} bootstrap resample(s) are too few for a 95% interval "
                         "(its ends need 10 or more): no bootstrap CIs; use --bootstrap 200 or "
                         "more, or auto")
        else:
            notes.append(f"only {n_ok} of {bootstrap} bootstrap resamples converged: no "
                         "bootstrap CIs (the fit is fragile; add runs)")
    if est.cov is not None and all(v is None for v in f.ci.values()):
        se = np.sqrt(np.clip(np.diag(est.cov), 0, None))
        for i, n in enumerate(lw.param_names):
            if np.isfinite(se[i]):
                f.ci[n] = [f.params[n] - 1.96 * float(se[i]), f.params[n] + 1.96 * float(se[i])]
        notes.append("CIs are Wald intervals (±1.96 SE from the covariance)")


def _auto_bootstrap(lw: Law, data: Data, est: Estimate, seed: int, targets: Sequence[float],
                    progress: Callable[[int, int], None] | None, cons: Constraints,
                    groups: np.ndarray) -> tuple[np.ndarray, list, int, dict[str, Any]]:
    """``bootstrap="auto"``: rounds of :data:`AUTO_ROUND` resamples until every parameter's
    interval ends are settled (:func:`interval_mc_error` at most :data:`AUTO_MC_ERROR`) or
    :data:`AUTO_MAX` are drawn. Returns the draws, the derived values, the failures and the
    rule's record (``rule``, ``mc_error``, ``settled``)."""
    parts: list[np.ndarray] = []
    dparts: list[dict[str, float]] = []
    failed, err = 0, math.inf
    for start in range(0, AUTO_MAX, AUTO_ROUND):
        def step(done: int, total: int, start: int = start) -> None:
            if progress is not None:
                progress(start + done, AUTO_MAX)

        p, d, nf = bootstrap_fits(lw, data, est, AUTO_ROUND, seed, targets, step, cons=cons,
                                  groups=groups, skip=start)
        parts.append(p)
        dparts += d
        failed += nf
        samples = np.concatenate(parts)
        err = interval_mc_error(samples)
        if err <= AUTO_MC_ERROR or math.isfinite(err) and len(samples) >= (
                AUTO_HOPELESS_FROM) and resamples_to_settle(len(samples), err) > (
                AUTO_HOPELESS * AUTO_MAX):
            break
    if progress is not None:
        progress(AUTO_MAX, AUTO_MAX)
    rule = (f"auto: rounds of {AUTO_ROUND} until each parameter's 95% interval ends are known "
            f"to within {AUTO_MC_ERROR:.0%} of its width, at most {AUTO_MAX:,}, or until "
            f"{AUTO_HOPELESS * AUTO_MAX:,.0f} would not")
    out: dict[str, Any] = {"rule": rule, "mc_error": float(err),
                           "settled": bool(err <= AUTO_MC_ERROR)}
    if not out["settled"] and math.isfinite(err):
        out["to_settle"] = resamples_to_settle(len(samples), err)
        out["bootstrap_max"] = MAX_BOOTSTRAP
    return samples, dparts, failed, out


def resamples_to_settle(n: int, err: float) -> int:
    """Resamples that would bring a finite Monte-Carlo error ``err`` at ``n`` draws to
    :data:`AUTO_MC_ERROR`, as the error falls (as 1 / sqrt(B)), in hundreds; at most
    :data:`MAX_BOOTSTRAP` + 1 (beyond what ``bootstrap`` takes)."""
    need = n * (err / AUTO_MC_ERROR) ** 2
    return MAX_BOOTSTRAP + 1 if need > MAX_BOOTSTRAP else int(math.ceil(need / 100) * 100)


def interval_mc_error(samples: np.ndarray, level: float = 0.95) -> float:
    """The largest Monte-Carlo error of a percentile interval's ends over the columns of
    ``samples``, as a fraction of that interval's width: for each end (the 2.5th and 97.5th
    percentiles), half the span of the order statistics that bracket it with 95% confidence
    (:func:`archfit.numbers.order_statistic` at -/+ 1.96 sds of the rank; distribution-free).
    inf with fewer than 20 draws."""
    if len(samples) < 20:
        return math.inf
    worst = 0.0
    q = 100 * (1 - level) / 2
    for col in np.sort(np.asarray(samples, dtype=float), axis=0).T:
        lo, hi = draw_percentiles(col, [q, 100 - q])
        if not hi > lo:
            continue
        for end in (q, 100 - q):
            spread = order_statistic(col, end, 1.96) - order_statistic(col, end, -1.96)
            worst = max(worst, spread / 2 / (hi - lo))
    return worst


def bootstrap_fits(lw: Law, data: Data, est: Estimate, n: int, seed: int,
                   targets: Sequence[float], progress: Callable[[int, int], None] | None,
                   workers: int | None = None, cons: Constraints | None = None,
                   groups: np.ndarray | None = None, skip: int = 0
                   ) -> tuple[np.ndarray, list, int]:
    """Refit on ``n`` resamples of the bootstrap units (``groups``: the training runs; every
    row of a drawn run comes along), warm-started at the point estimate. Resamples are drawn
    up front from ``seed``, so results do not depend on the worker count; with several cores
    they are spread over processes. ``skip``: start after that many of the seed's draws (a
    later round of the same sequence)."""
    rng = np.random.default_rng(seed)
    if groups is None:
        groups = lw.groups(data)[0]
    uniq = np.unique(groups)
    members = [np.flatnonzero(groups == g) for g in uniq]
    draws = rng.integers(0, len(uniq), (skip + n, len(uniq)))[skip:]
    picks = [np.concatenate([members[j] for j in row]) for row in draws]
    if workers is None:
        workers = min(_cores(), 8) if n >= 64 else 1
    chunks = [c for c in np.array_split(np.arange(n), min(n, max(1, workers) * 8)) if len(c)]
    jobs = [(lw, data, est.params, [picks[i] for i in c], list(targets), cons)
            for c in chunks]
    results: list[tuple[np.ndarray | None, dict[str, float]]] = []
    for part in _run_chunks(jobs, workers):
        results.extend(part)
        if progress is not None:
            progress(len(results), n)
    ok = [(p, d) for p, d in results if p is not None]
    params = np.asarray([p for p, _ in ok], dtype=float).reshape(-1, len(lw.param_names))
    return params, [d for _, d in ok], len(results) - len(ok)


def _cores() -> int:
    """The processes a bootstrap may spread over: the cores, capped by
    ``$ARCHFIT_MAX_CONCURRENCY`` where set (a machine whose cores other work already fills: the
    test suite's workers; the cap every local sweep also reads)."""
    from archfit.sweep.executors import MAX_CONCURRENCY_ENV

    cores = os.cpu_count() or 1
    cap = os.environ.get(MAX_CONCURRENCY_ENV, "")
    return max(1, min(cores, int(cap))) if cap.isdigit() else cores


def _run_chunks(jobs: list[tuple], workers: int) -> Any:
    """Yield each chunk's results in order: over a fork pool when ``workers`` > 1, else (or
    from wherever a broken pool left off) in this process."""
    done = 0
    if workers > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        # workers only run numpy/scipy: fork is safe for them and starts in milliseconds
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        try:
            with ProcessPoolExecutor(max_workers=workers,
                                     mp_context=mp.get_context(method)) as pool:
                for fut in [pool.submit(_boot_chunk, *j) for j in jobs]:
                    try:
                        part = fut.result()
                    except BrokenProcessPool:
                        raise
                    except Exception as e:  # the worker's own failure, with its traceback
                        raise WorkerError(
                            f"a bootstrap worker failed: {type(e).__name__}: "
                            f"{(str(e).splitlines() or [''])[0]}",
                            str(e.__cause__ or "")) from e
                    done += 1
                    yield part
        except (BrokenProcessPool, OSError):
            pass  # no usable process pool here: the rest in this process
    for j in jobs[done:]:
        yield _boot_chunk(*j)


def _boot_chunk(law: Law | str, data: Data, start: np.ndarray, picks: list[np.ndarray],
                targets: list[float], cons: Constraints | None = None
                ) -> list[tuple[np.ndarray | None, dict[str, float]]]:
    lw = law if isinstance(law, Law) else get_law(law)  # the law itself: a formula's too
    out: list[tuple[np.ndarray | None, dict[str, float]]] = []
    # the fits are tiny: BLAS threads only contend (3x slower with 2 threads on 2 cores)
    with np.errstate(all="ignore"), one_blas_thread():
        for idx in picks:
            try:
                kw = {"constraints": cons} if cons else {}
                e = lw.fit_point(subset(data, idx), start=start, full=False, **kw)
                if not np.all(np.isfinite(e.params)):
                    raise FitError("non-finite")
            except (FitError, np.linalg.LinAlgError, ValueError, ArithmeticError):
                out.append((None, {}))  # a resample that cannot be fitted: counted as failed
                continue
            p = dict(zip(lw.param_names, e.params))
            out.append((e.params, lw.derived(p, targets, e.extra)))
    return out
