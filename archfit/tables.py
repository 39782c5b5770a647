"""Reading tables of runs (parquet, CSV, JSONL) into archfit's column names for fitting.

Canonical columns (what laws read):

``loss``      final validation loss (nats/token); default source ``loss`` then ``final_val_loss``
``params``    parameter count N; default source ``params`` then ``params_non_embedding``
              (Kaplan's convention). The convention actually used is recorded in the fit.
``tokens``    training tokens D; when absent but ``flops`` and ``params`` are present,
              D = flops / (6 N) and a note says so
``flops``     training FLOPs
``n_layer``, ``d_model``, ``d_ff``, ``n_head``, ``lr``, ``seed``, ``status``, ``run_id``,
``target_params`` (the size class a sweep planned the run for)
"""

from __future__ import annotations

import glob
import hashlib
import math
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from archfit.errors import FitInputError

CANONICAL = ("loss", "params", "tokens", "flops", "n_layer", "d_model", "d_ff", "n_head", "lr",
             "seed", "status", "run_id", "target_params")
DEFAULT_SOURCES: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "final_val_loss"),
    "params": ("params", "params_non_embedding"),
}


@dataclass
class RunTable:
    """Runs in canonical columns, plus what was done to get them."""

    frame: Any  # polars.DataFrame
    inputs: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    n_dropped: int = 0


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def expand_paths(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.exists(p):
            out.append(p)
            continue
        matches = sorted(glob.glob(p))
        if not matches:
            raise FitInputError(f"{p}: no such file (nor any file matching it as a glob)")
        out.extend(matches)
    if not out:
        raise FitInputError("no input files given; pass parquet, CSV or JSONL files of runs")
    return out


def _read_one(path: str):  # type: ignore[no-untyped-def]
    import polars as pl

    ext = path.lower().rsplit(".", 1)[-1] if "." in os.path.basename(path) else ""
    try:
        if ext in ("parquet", "pq"):
            df = pl.read_parquet(path)
        elif ext in ("csv", "tsv"):
            df = pl.read_csv(path, separator="\t" if ext == "tsv" else ",",
                             infer_schema_length=10000)
        elif ext in ("jsonl", "ndjson"):
            df = pl.read_ndjson(path, infer_schema_length=10000)
        elif ext == "json":
            df = pl.read_json(path)
        else:
            raise FitInputError(f"{path}: unknown file type '.{ext}'; give .parquet, .csv, .tsv "
                                "or .jsonl")
    except FitInputError:
        raise
    except Exception as e:  # polars raises many kinds
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FitInputError(f"{path}: cannot read as {ext or 'table'}: {first}") from None
    if df.height == 0:
        raise FitInputError(f"{path}: the file holds no rows")
    return df


def _check_schema(df: Any, path: str) -> None:
    from archfit.store import check_schema_version

    if "schema_version" in df.columns:
        check_schema_version(df, path)


def read_runs(paths: Iterable[str] | str, mapping: Mapping[str, str] | None = None,
              *, frame: Any = None) -> RunTable:
    """Read and concatenate tables of runs into canonical columns.

    ``mapping`` maps archfit column -> source column (``{"params": "Model Size"}``).
    Pass ``frame`` (polars or pandas) instead of paths to convert an in-memory table.
    """
    import polars as pl

    mapping = dict(mapping or {})
    for key in mapping:
        if key not in CANONICAL:
            raise FitInputError(f"--map {key}=...: unknown archfit column {key!r}; "
                                f"known: {', '.join(CANONICAL)}")
    frames: list[Any] = []
    inputs: list[dict[str, str]] = []
    if frame is not None:
        frames.append(to_polars(frame))
    else:
        if isinstance(paths, (str, os.PathLike)):
            paths = [os.fspath(paths)]
        for p in expand_paths(paths):
            df = _read_one(p)
            _check_schema(df, p)
            frames.append(df)
            inputs.append({"path": p, "sha256": file_sha256(p)})
    try:
        df = pl.concat(frames, how="diagonal_relaxed")
    except Exception as e:
        raise FitInputError(f"the input files do not share compatible columns: {e}") from None

    notes: list[str] = []
    sources: dict[str, str] = {}
    cols: dict[str, Any] = {}
    for name in CANONICAL:
        candidates = (mapping[name],) if name in mapping else DEFAULT_SOURCES.get(name, (name,))
        for src in candidates:
            if src in df.columns:
                cols[name] = df[src]
                sources[name] = src
                break
        else:
            if name in mapping:
                raise FitInputError(f"--map {name}={mapping[name]}: no column {mapping[name]!r} "
                                    f"in the input; columns are: {', '.join(df.columns)}")
    out = pl.DataFrame({k: v for k, v in cols.items()})
    numeric = [c for c in out.columns if c not in ("status", "run_id")]
    for c in numeric:
        try:
            out = out.with_columns(pl.col(c).cast(pl.Float64, strict=True))
        except Exception:
            raise FitInputError(f"column {sources[c]!r} (archfit {c!r}) is not numeric") from None
    if "tokens" not in out.columns and {"flops", "params"} <= set(out.columns):
        out = out.with_columns((pl.col("flops") / (6.0 * pl.col("params"))).alias("tokens"))
        sources["tokens"] = "flops / (6 * params)"
        notes.append("tokens were missing: computed as D = FLOPs / (6 N)")
    if "loss" not in out.columns:
        raise FitInputError("no loss column: expected 'loss' or 'final_val_loss'; map one with "
                            "--map loss=COLUMN")

    n0 = out.height
    dropped_status = 0
    if "status" in out.columns:
        ok = out["status"].cast(pl.Utf8).fill_null("ok") == "ok"
        dropped_status = int((~ok).sum())
        out = out.filter(ok)
    finite = pl.col("loss").is_finite() & pl.col("loss").is_not_null() & (pl.col("loss") > 0)
    n1 = out.height
    out = out.filter(finite)
    dropped_loss = n1 - out.height
    if dropped_status:
        notes.append(f"dropped {dropped_status} run(s) whose status is not ok")
    if dropped_loss:
        notes.append(f"dropped {dropped_loss} run(s) whose loss is missing, not finite or <= 0")
    if out.height == 0:
        raise FitInputError(f"no usable runs: all {n0} rows were dropped")
    return RunTable(frame=out, inputs=inputs, notes=notes, sources=sources,
                    n_dropped=n0 - out.height)


def to_polars(frame: Any):  # type: ignore[no-untyped-def]
    import polars as pl

    if isinstance(frame, pl.DataFrame):
        return frame
    if type(frame).__module__.startswith("pandas"):
        return pl.from_pandas(frame)
    if isinstance(frame, Mapping):
        return pl.DataFrame(dict(frame))
    if isinstance(frame, list):
        return pl.DataFrame(frame)
    raise FitInputError(f"cannot use a {type(frame).__name__} as a table of runs; pass a polars "
                        "or pandas DataFrame")


def size_classes(params: Any, target: Any = None, rel_gap: float = 0.25) -> Any:
    """Integer size-class labels (0 = smallest). Uses ``target`` (the planned size) when given,
    else groups sorted parameter counts, starting a new class at every gap above ``rel_gap``."""
    import numpy as np

    params = np.asarray(params, dtype=float)
    if target is not None:
        t = np.asarray(target, dtype=float)
        if np.all(np.isfinite(t)):
            _, labels = np.unique(t, return_inverse=True)
            return labels
    order = np.argsort(params)
    labels = np.empty(len(params), dtype=int)
    cls = 0
    prev = None
    for i in order:
        if prev is not None and params[i] > prev * (1 + rel_gap):
            cls += 1
        labels[i] = cls
        prev = params[i]
    return labels


def finite_positive(name: str, values: Any) -> None:
    import numpy as np

    v = np.asarray(values, dtype=float)
    bad = ~np.isfinite(v) | (v <= 0)
    if bad.any():
        raise FitInputError(f"column {name!r} has {int(bad.sum())} missing, non-finite or "
                            "non-positive value(s); drop or fix those rows")


def fmt_sci(x: float) -> str:
    """1e9 -> '1e9', 1.3e9 -> '1.3e9' (used in derived-quantity names)."""
    if x == 0 or not math.isfinite(x):
        return str(x)
    e = int(math.floor(math.log10(abs(x))))
    m = x / 10**e
    ms = f"{m:.3g}"
    if ms == "10":
        ms, e = "1", e + 1
    return f"{ms}e{e}"
