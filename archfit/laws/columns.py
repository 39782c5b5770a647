"""A run table's columns as the laws read them: the checks on their values, a law's data
(:func:`prepare`), size classes, subsets, what varies, and the runs (bootstrap units) rows
belong to. It imports nothing from the laws, so a law module and the fitting driver can both
use it without a cycle."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from archfit.errors import FitError, FitInputError

Data = dict[str, Any]  # column name -> numpy array (as in archfit.laws.base)


# columns that name *what* was trained (a run is one value of these, seen at several token counts)
RUN_IDENTITY = ("params", "n_layer", "d_model", "d_ff", "n_head", "target_params", "lr", "seed")


def finite_positive(name: str, values: Any, positive: bool = True) -> None:
    """Refuse a column with a missing or non-finite value (or, where ``positive``, one at or
    below 0), in one line naming it."""
    v = np.asarray(values, dtype=float)
    bad = ~np.isfinite(v) | ((v <= 0) if positive else False)
    if bad.any():
        what = "missing, non-finite or non-positive" if positive else "missing or non-finite"
        raise FitInputError(f"column {name!r} has {int(bad.sum())} {what} value(s); drop or "
                            "fix those rows")


def columns(frame: Any) -> Data:
    """A polars frame's columns as numpy arrays: numbers as floats, text as it is."""
    out: Data = {}
    for c in frame.columns:
        arr = frame[c].to_numpy()
        out[c] = arr if arr.dtype.kind in "OUS" else arr.astype(float)
    return out


def require_columns(law: Any, frame: Any) -> None:
    """Refuse a table that lacks a column ``law`` reads (fitting, predicting or drawing it)."""
    missing = [c for c in law.columns if c not in frame.columns]
    if missing:
        raise FitInputError(
            f"law {law.name!r} needs column(s) {', '.join(missing)}; have "
            f"{', '.join(frame.columns)}; map foreign names with --map {missing[0]}=COLUMN")


def prepare(law: Any, frame: Any) -> Data:
    """The frame's columns as numpy arrays, checked for what ``law`` needs."""
    require_columns(law, frame)
    data = columns(frame)
    for c in law.columns:
        finite_positive(c, data[c], positive=not (c == "loss" and law.signed_loss))
    if law.params_column != "params":  # the size the law reads (the MoE laws: active)
        data["params"] = data[law.params_column]
    n = len(data["loss"])
    if n < law.min_points:
        raise FitError(f"law {law.name!r} needs at least {law.min_points} runs, got {n}; "
                       "add runs or choose a simpler law")
    return data


# sizes within this fraction of a class's smallest run are "the same size" (one size class);
# anchored at the class's first member, so sizes 1.19x apart never chain into one class
# runs within 2% of a class's smallest run are one size: a planned size lands within a width
# step of its target (~1-2% for widths in multiples of 64), while real grids space sizes >= 10%
SIZE_TOLERANCE = 0.02


def size_classes(params: Any, target: Any = None, tol: float = SIZE_TOLERANCE) -> np.ndarray:
    """Integer size-class labels (0 = smallest). Uses ``target`` (the planned size) when given,
    else sorted parameter counts: a run joins the current class when it is within ``tol`` of
    the class's *smallest* run (not of its neighbour, so a dense ladder of sizes stays a ladder
    of classes), and opens a new one otherwise."""
    params = np.asarray(params, dtype=float)
    if target is not None:
        t = np.asarray(target, dtype=float)
        if np.all(np.isfinite(t)):
            _, labels = np.unique(t, return_inverse=True)
            return labels.ravel()
    order = np.argsort(params, kind="stable")
    labels = np.empty(len(params), dtype=int)
    cls, anchor = -1, None
    for i in order:
        if anchor is None or params[i] > anchor * (1 + tol):
            cls, anchor = cls + 1, params[i]
        labels[i] = cls
    return labels


def class_labels(data: Data) -> np.ndarray:
    """The size classes the fit fixed once for its table (column ``size_class``), else the
    default ones; every check (size count, held-out split, span) reads the same labels."""
    if "size_class" in data:
        return np.asarray(data["size_class"]).astype(int)
    return size_classes(data["params"], data.get("target_params"))


def heldout_split(data: Data, frac: float = 0.2) -> tuple[np.ndarray, list[float]]:
    """The rows of the largest ~``frac`` of the size classes (at least 2, never more than a
    third of them), as (test mask, the held-out sizes: each class's median N)."""
    N = np.asarray(data["params"], float)
    key = class_labels(data)
    sizes = np.unique(key)  # labels grow with size
    # at least 2 classes (one held-out size says nothing of a trend), at most a third (the
    # fit keeps two thirds of the sizes to extrapolate from)
    k = min(max(2, int(round(frac * len(sizes)))), len(sizes) // 3)
    if k < 1:
        return np.zeros(len(N), bool), []
    top = sizes[-k:]
    mask = np.isin(key, top)
    return mask, sorted({float(np.median(N[key == t])) for t in top})


def subset(data: Data, mask: np.ndarray) -> Data:
    return {k: v[mask] for k, v in data.items()}


def varies(x: np.ndarray, rel: float = 0.05) -> bool:
    return bool(np.max(x) > np.min(x) * (1 + rel))


def require_spread(law: Any, data: Data, columns: Sequence[tuple[str, str]],
                   constraints: Any = None) -> None:
    """Refuse a fit of ``law`` whose runs do not vary in each ``(column, what)`` of
    ``columns`` (what: the plural the message names), or that was given constraints the law
    does not take."""
    from archfit.errors import FitError

    if constraints:
        raise FitError(f"{law.name} takes no --fix, --prior or --tie")
    for col, what in columns:
        if not varies(data[col]):
            raise FitError(f"{law.name} needs runs at several {what}")


def log_cols(data: Data, names: Sequence[str]) -> np.ndarray:
    return np.stack([np.log(data[n]) for n in names], axis=1)


def run_groups(data: Data, by: Sequence[str] | None = None) -> tuple[np.ndarray, str]:
    """Bootstrap units, as (integer label per row, what a unit is). Rows that are checkpoints
    of one training run belong together: a unit is one ``run_id`` when the table has that
    column; else one shape (and seed, lr), so that the rows of one shape at several token
    counts stay together; rows with no shape columns are one separately trained model each.
    ``by`` (``--group COL ...``) overrides both."""
    n = len(data["loss"])
    if by:
        missing = [c for c in by if c not in data]
        if missing:
            raise FitInputError(f"--group {missing[0]}: no such column; columns are "
                                f"{', '.join(sorted(data))}")
        cols, unit = list(by), "group (rows sharing " + ", ".join(by) + ")"
    elif "run_id" in data:
        cols, unit = ["run_id"], "training run (run_id)"
    elif "n_layer" in data and ("d_model" in data or "params" in data):
        cols = [c for c in RUN_IDENTITY if c in data]
        unit = "training run (rows of one " + ", ".join(cols) + " at several token counts)"
    else:
        return np.arange(n), "row (each row a separately trained model)"
    keys: dict[tuple, int] = {}
    labels = np.empty(n, dtype=int)
    for i in range(n):
        k = tuple(_key(data[c][i]) for c in cols)
        labels[i] = keys.setdefault(k, len(keys))
    if len(keys) == n and not by and "run_id" not in data:
        return labels, "row (each row a separately trained model)"
    return labels, unit


def _key(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(v) else round(float(v), 9)
    return v


# ---------------------------------------------------------------- the loss's space
def to_space(space: str, loss: Any) -> np.ndarray:
    """A loss in a law's residual space (:attr:`archfit.laws.base.Law.loss_space`): its log,
    or the loss itself for a law whose loss may be negative."""
    with np.errstate(all="ignore"):
        return np.log(np.asarray(loss, float)) if space == "log" else np.asarray(loss, float)


def from_space(space: str, v: Any) -> np.ndarray:
    return np.exp(v) if space == "log" else np.asarray(v, float)
