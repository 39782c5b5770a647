"""Which law a table of runs supports (``archfit fit DATA --law auto``): every law with a loss
model whose columns the table has is fitted on all but its costliest runs and scored on those
(the held-out split a user cares about: the runs nearest the target, by compute C = 6 N D, or
by size without tokens), and by an information criterion on the runs it was fitted to. The law with the
least held-out error is picked; where no law beats every other on a paired bootstrap over the
held-out runs, the laws are also stacked (non-negative weights that sum to 1, fitted to the
held-out runs' log loss; Breiman 1996, "Stacked regressions"), and the weights are reported.

A checkpoint of a run is not a run: the split, the paired bootstrap and the errors count runs
(:meth:`archfit.laws.base.Law.groups`), each run's error the mean over its rows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from archfit.errors import FitError, FitInputError
from archfit.laws.inference import fitting
from archfit.laws.inference.artifact import Fit
from archfit.laws.base import AUTO, LAWS, Law, get_law  # noqa: F401 (AUTO: the name users give)
from archfit.sweep.store import positive_losses

HELDOUT_SHARE = 0.2  # the costliest ~20% of runs (at least 2, at most a third), as backtests
PAIRED_RESAMPLES = 2000  # bootstrap resamples of the held-out runs for the paired comparison
DOMINANCE = 0.95  # the best law "dominates" when it beats each other in this share of them
SELECTION_BOOTSTRAP = 0  # the candidate fits are point fits: the held-out error is the score


@dataclass
class Selection:
    """The comparison: one row per candidate law (``law``, ``n_params``, held-out
    ``mean_abs_rel_error`` and ``rms_rel_error`` over the held-out runs, ``aic`` and ``bic`` of
    its fit on the other runs in log-loss space, or ``error`` where it could not be fitted), the
    ``pick``, whether it ``dominates`` every other law on the held-out runs, and the stacking
    ``weights`` (None where the pick dominates)."""

    rows: list[dict[str, Any]]
    pick: str
    dominates: bool
    weights: dict[str, float] | None
    heldout: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "pick": self.pick, "dominates": self.dominates,
                "weights": self.weights, "heldout": self.heldout}

    def text(self) -> str:
        h = self.heldout
        lines = [f"laws compared on {h.get('n_test_runs')} held-out runs (the costliest by "
                 f"{h.get('by')}: {h.get('from'):.3g} and up), fitted on the other "
                 f"{h.get('n_train_runs')}",
                 f"  {'law':<20}{'params':>7}{'held-out |err|':>16}{'rms':>9}{'AIC':>11}"
                 f"{'BIC':>11}  {'weight' if self.weights else ''}"]
        for r in self.rows:
            if r.get("error"):
                lines.append(f"  {r['law']:<20}{'':>7}  not fitted: {r['error']}")
                continue
            w = f"  {self.weights.get(r['law'], 0.0):.2f}" if self.weights else ""
            lines.append(f"  {r['law']:<20}{r['n_params']:>7}{r['mean_abs_rel_error']:>16.3%}"
                         f"{r['rms_rel_error']:>9.3%}{r['aic']:>11.1f}{r['bic']:>11.1f}{w}")
        lines.append(f"picked: {self.pick} (least held-out error" + (
            ", ahead of every other law in " f"{DOMINANCE:.0%} of paired resamples of the "
            "held-out runs)" if self.dominates else
            "; no law is ahead of every other on the held-out runs, so the stacking weights "
            "are shown: a prediction can average the laws with them)"))
        return "\n".join(lines)


def candidates(columns: Sequence[str], role: str | None = None, frame: Any = None
               ) -> list[str]:
    """The registered laws with a loss model whose columns ``columns`` hold (and of ``role``,
    when given), and that apply to ``frame`` where one is given (:meth:`Law.applies`)."""
    out = []
    for name in sorted(LAWS):
        law = LAWS[name]
        if law.predicts_loss and all(c in columns for c in law.columns) and (
                role is None or law.role == role) and (frame is None or law.applies(frame)):
            out.append(name)
    return out


def _cost(data: dict[str, np.ndarray]) -> tuple[np.ndarray, str]:
    if "tokens" in data:
        return 6.0 * data["params"] * data["tokens"], "compute C = 6 N D"
    return np.asarray(data["params"], float), "size N"


def split(law: Law, data: dict[str, np.ndarray], share: float = HELDOUT_SHARE
          ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(held-out mask, run label per row, what was held out): the runs whose costliest row is
    among the costliest ``share`` of runs (at least 2, at most a third)."""
    groups, _ = law.groups(data)
    cost, by = _cost(data)
    runs = np.unique(groups)
    top = np.array([cost[groups == g].max() for g in runs])
    k = min(max(2, int(round(share * len(runs)))), len(runs) // 3)
    if k < 1:
        raise FitError(f"{len(runs)} runs: too few to hold the costliest out and compare laws")
    held = runs[np.argsort(top)[-k:]]
    mask = np.isin(groups, held)
    return mask, groups, {"by": by, "from": float(np.sort(top)[-k]),
                          "n_test_runs": int(k), "n_train_runs": int(len(runs) - k)}


def _per_run(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    return np.array([values[groups == g].mean() for g in np.unique(groups)])


def fit(frame: Any = None, law: str = "chinchilla", *,
        formula: str | Sequence[str] | None = None, starts: dict[str, float] | None = None,
        bounds: dict[str, tuple[float, float]] | None = None, **kw: Any) -> Fit:
    """:func:`archfit.laws.inference.fitting.fit` (every option as it takes them), and ``law="auto"``:
    the law :func:`compare` picks on held-out runs, fitted as asked, with the comparison in its
    diagnostics (``selection``) and a note. This is ``archfit.fit``.

    ``formula``: a law of your own (``"loss ~ E + A / params^alpha"``; the names that are
    columns of the table its variables, the rest its parameters; :mod:`archfit.laws.user`),
    fitted instead of ``law``; or several, weighed beside the built-in laws with
    ``law="auto"``; ``starts`` and ``bounds`` (name -> value, name -> (low, high)) for its
    parameters."""
    if formula is not None and not isinstance(formula, str) and not (
            isinstance(formula, Sequence) and all(isinstance(t, str) for t in formula)):
        raise FitInputError(f"formula is a text ('loss ~ E + A / params^alpha') or a list of "
                            f"them, got {type(formula).__name__} {formula!r}"[:200])
    texts = [formula] if isinstance(formula, str) else list(formula or [])
    texts = list({" ".join(t.split()): t for t in texts}.values())  # the same law weighed once
    if texts:
        from archfit.laws.base import formula_source

        formula_names, formula_law = formula_source().names, formula_source().make

        frame = fitting.run_table(frame, kw.pop("paths", None), kw.pop("mapping", None),
                                  kw.get("group"), optional=formula_names(texts))
        numeric = [c for c in frame.frame.columns if frame.frame[c].dtype.is_numeric()]
        text = [c for c in frame.frame.columns if c not in numeric]
        names = [formula_law(t, numeric, starts, bounds, text_columns=text).name for t in texts]
        if law != AUTO:
            if len(names) != 1:
                raise FitInputError("give one formula to fit, or several with law='auto' "
                                    "(--law auto) to weigh them beside the built-in laws")
            law = names[0]
    if law != AUTO:
        return fitting.fit(frame, law, **kw)
    table = fitting.run_table(frame, kw.pop("paths", None), kw.pop("mapping", None),
                              kw.get("group"), signed_loss=True)
    only = candidates(table.frame.columns, None, table.frame)
    signed = [n for n in only if get_law(n).signed_loss]
    unigram = bool(signed) and "loss" in table.frame.columns and bool(
        (table.frame["loss"] <= 0).any())
    if unigram:
        only = signed  # a loss at or below 0 is unigram-normalized: only its laws read it
    if len(only) == 1 and not texts:  # nothing to weigh it against
        f = fitting.fit(table, law=only[0], **kw)
        f.notes.append(f"law chosen by --law auto: {only[0]}, the one law with a loss model "
                       "these columns (and losses) allow")
        return f
    if not unigram:
        table = positive_losses(table)
    fitting.check_rows(table.frame, ("params", "tokens"))
    opts = {k: kw[k] for k in ("fix", "prior", "prior_widths", "tie", "dedupe", "group", "arch",
                               "size_tolerance", "pool_groups") if kw.get(k) is not None}
    seed = kw.get("seed", 0)
    laws = (candidates(table.frame.columns, None, table.frame) + names) if texts else (
        only if unigram else None)
    sel = compare(table, laws, seed=seed, fit_kw=opts)
    rest = {k: kw[k] for k in ("bootstrap", "seed", "targets", "heldout", "progress")
            if k in kw}
    f = fitting.fit(table, law=sel.pick, **rest, **opts)
    f.diagnostics["selection"] = sel.to_dict()
    f.notes.append(f"law chosen by --law auto: {sel.pick}, the least error on the "
                   f"{sel.heldout['n_test_runs']} costliest runs among "
                   f"{sum(1 for r in sel.rows if 'error' not in r)} laws")
    return f


def compare(table: Any, laws: Sequence[str] | None = None, *, role: str | None = None,
            seed: int = 0, fit_kw: dict[str, Any] | None = None,
            progress: Callable[[str], None] | None = None) -> Selection:
    """Fit each candidate law (``laws``, default every applicable one, of ``role`` when given)
    on the table's cheaper runs, score it on the costliest, and pick (see the module)."""
    from archfit.laws.columns import subset

    fit_kw = dict(fit_kw or {})
    frame = table.frame
    names = list(laws) if laws else candidates(frame.columns, role, frame)
    if not names:
        raise FitInputError("no law with a loss model can be fitted to these columns ("
                            f"{', '.join(frame.columns)}): map params, tokens and loss with --map")
    ref = get_law(names[0])
    data = ref.prepare(frame)
    test, groups, held = split(ref, data)
    import polars as pl

    train_frame = frame.filter(pl.Series(~test))
    test_data = subset(data, test)
    test_groups = groups[test]
    rows, preds = [], {}
    for name in names:
        law = get_law(name)
        if progress:
            progress(name)
        row: dict[str, Any] = {"law": name, "n_params": law.n_fitted}
        try:
            f_tr = fitting.fit(train_frame, law=name, bootstrap=SELECTION_BOOTSTRAP,
                               seed=seed, heldout=False, **fit_kw)
            p = np.asarray(law.predict(f_tr.params, test_data), float)
            if not np.all(np.isfinite(p)) or (law.loss_space == "log" and np.any(p <= 0)):
                raise FitError("it predicts no finite loss for some held-out runs")
        except (FitError, FitInputError) as e:
            row["error"] = str(e)
            rows.append(row)
            continue
        rel = np.abs(p / test_data["loss"] - 1)
        run_err = _per_run(rel, test_groups)
        row.update(mean_abs_rel_error=float(run_err.mean()),
                   rms_rel_error=float(math.sqrt(np.mean(_per_run(rel ** 2, test_groups)))),
                   **_criteria(law, f_tr, subset(data, ~test)))
        preds[name] = p
        rows.append(row)
    ok = [r for r in rows if "error" not in r]
    if not ok:
        raise FitError("no candidate law could be fitted: " + "; ".join(
            f"{r['law']}: {r['error']}" for r in rows))
    ok.sort(key=lambda r: r["mean_abs_rel_error"])
    rows = ok + [r for r in rows if "error" in r]
    best = ok[0]["law"]
    dominates = all(_ahead(preds[best], preds[r["law"]], test_data["loss"], test_groups, seed)
                    for r in ok[1:])
    weights = None if dominates or len(ok) == 1 else _stack(
        {r["law"]: preds[r["law"]] for r in ok}, test_data["loss"], ref.loss_space)
    return Selection(rows, best, dominates, weights, held)


def _criteria(law: Law, f: Any, data: dict[str, np.ndarray]) -> dict[str, float]:
    """AIC and BIC of the fit on the cheaper runs, Gaussian in the law's loss space (log loss;
    a unigram-normalized loss itself) (rows as the sample:
    rows of one run are correlated, so both favour larger laws; the held-out error is the
    score)."""
    pred = np.asarray(law.predict(f.params, data), float)
    r = (pred - data["loss"] if law.loss_space == "linear" else
         np.log(pred) - np.log(data["loss"]))
    n, k = len(r), law.n_fitted
    rss = float(np.sum(r * r)) or 1e-300
    return {"aic": n * math.log(rss / n) + 2 * k, "bic": n * math.log(rss / n) + k * math.log(n)}


def _ahead(a: np.ndarray, b: np.ndarray, actual: np.ndarray, groups: np.ndarray,
           seed: int) -> bool:
    """Whether predictions ``a`` beat ``b`` on the held-out runs in at least ``DOMINANCE`` of
    paired bootstrap resamples of the runs."""
    ea = _per_run(np.abs(a / actual - 1), groups)
    eb = _per_run(np.abs(b / actual - 1), groups)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ea), size=(PAIRED_RESAMPLES, len(ea)))
    return float(np.mean(ea[idx].mean(1) < eb[idx].mean(1))) >= DOMINANCE


def _stack(preds: dict[str, np.ndarray], actual: np.ndarray, space: str = "log"
           ) -> dict[str, float]:
    """Non-negative weights summing to 1 that make the weighted mean of the laws' predictions
    (of log loss; of the loss itself in ``space`` "linear") closest to the held-out runs'
    (least squares on the simplex)."""
    from scipy.optimize import minimize

    names = list(preds)
    X = np.stack([preds[n] for n in names], 1)
    y = np.asarray(actual, float)
    if space == "log":
        X, y = np.log(X), np.log(y)
    k = len(names)
    res = minimize(lambda w: float(np.sum((X @ w - y) ** 2)), np.full(k, 1.0 / k),
                   method="SLSQP", bounds=[(0.0, 1.0)] * k,
                   constraints=[{"type": "eq", "fun": lambda w: float(np.sum(w) - 1.0)}])
    w = np.clip(res.x, 0.0, None)
    w = w / w.sum()
    return {n: float(v) for n, v in zip(names, w)}


# what --law auto starts from before any run can be compared (a role's first choice)
FIRST_CHOICE = {"shape": "depth-joint", "compute": "chinchilla"}
MIN_RUNS_TO_COMPARE = 12  # below this, a held-out fifth is a run or two: no comparison


def resolve(law: str, role: str | None, columns: Sequence[str], results: Any = None,
            seed: int = 0) -> tuple[str, str | None]:
    """``law``, or for ``auto`` the law the runs so far support: among the laws with a loss
    model of ``role`` (any role where None) whose columns ``columns`` hold, the one
    :func:`compare` picks on ``results`` (a polars frame of runs), or the role's first choice
    while there are too few runs to compare. Returns (the law, a note saying why, for auto)."""
    if law != AUTO:
        return law, None
    names = candidates([*columns, "loss"], role)  # a pool has no loss yet
    if not names:
        raise FitInputError(f"--law auto: no law with a loss model{' of role ' + role if role else ''}"
                            f" fits these columns ({', '.join(columns)})")
    first = FIRST_CHOICE.get(role or "", names[0])
    first = first if first in names else names[0]
    if results is None or results.height < MIN_RUNS_TO_COMPARE or len(names) == 1:
        n = 0 if results is None else results.height
        return first, (f"--law auto: {first} ({n} runs are too few to compare laws on held-out "
                       f"runs; from {MIN_RUNS_TO_COMPARE} on they are compared)"
                       if len(names) > 1 else None)
    from archfit.sweep.store import read_runs

    try:
        sel = compare(read_runs([], frame=results), names, seed=seed)
    except (FitError, FitInputError) as e:
        return first, f"--law auto: {first} (the laws could not be compared: {e})"
    return sel.pick, (f"--law auto: {sel.pick}, the least error on the "
                      f"{sel.heldout['n_test_runs']} costliest runs so far")
