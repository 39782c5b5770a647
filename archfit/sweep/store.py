"""Parquet storage of runs: the run table's schema, its write (``archfit sweep collect``) and its
read into archfit's canonical columns (``archfit fit``, ``archfit plot``).

Canonical columns (what laws read):

``loss``      final validation loss (nats/token); default source ``loss`` then ``final_val_loss``
``params``    parameter count N; default source ``params`` then ``params_non_embedding``
              (Kaplan's convention). The convention actually used is recorded in the fit.
``tokens``    training tokens D; when absent but ``flops`` and ``params`` are present,
              D = flops / (6 N) and a note says so
``flops``     training FLOPs
``n_layer``, ``d_model``, ``d_ff``, ``n_head``, ``lr``, ``seed``, ``status``, ``run_id``,
``target_params`` (the size class a sweep planned the run for)

A foreign table is read through a column map (``--map params='Model Size'``); the map travels
with the fit (:attr:`RunTable.mapping`), so a plot of the fit reads its data the same way.

``mlp`` (text, read per row by the count check) and ``cost`` (a run's cost, in the unit of a
design's budget) are read when present; other text columns with 2-20 values are reported as
groupings (:func:`grouping_columns`).

The run table's schema, its writer and its reader are one module because they must agree column
for column.
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from archfit.errors import ArchfitError, FitInputError
from archfit.io import atomic_path, file_sha256

if TYPE_CHECKING:  # pragma: no cover
    from archfit.sweep import Run, Spec

# 2: a column per Shape field and per TrainConfig field of the run id (bias, qk_norm, schedule...)
SCHEMA_VERSION = 2

# ---------------------------------------------------------------------------- the run table
# The columns derive from the dataclasses: the run's state, one column per Shape field, one per
# TrainConfig field that is part of the run id and changes its numbers (not EXECUTION_KEYS: how
# a run is executed), the planned budget, the counts and the result. A field added to Shape or
# TrainConfig is a column with no edit here.
_META = ("run_id", "sweep", "status", "error")
_COUNTS = ("params_total", "params_non_embedding", "target_params")
# a mixture of experts' active counts (equal to the two above for a dense shape)
_ACTIVE = ("params_active", "params_active_non_embedding")
_BUDGET_COLUMNS = ("budget_tokens", "budget_tokens_per_param", "budget_steps")
_RESULT_KEYS = ("tokens", "steps", "flops", "final_val_loss", "best_val_loss",
                "final_train_loss", "wall_s", "train_s", "tokens_per_s", "first_step_s",
                "compile_s", "mfu",
                "peak_memory_bytes", "device", "data_hash", "archfit_version",
                "expert_load_max", "expert_load")
# expert_load: each sparse layer's share of routed tokens per expert, as JSON text
_RESULT_TYPES = {"tokens": int, "steps": int, "peak_memory_bytes": int, "device": str,
                 "data_hash": str, "archfit_version": str, "expert_load": str}
CURVE_COLUMNS = ("run_id", "step", "tokens", "train_loss", "val_loss", "lr")


def _config_fields(config_cls: Any) -> list[Any]:
    from dataclasses import fields

    from archfit.train.config import _NESTED, EXECUTION_KEYS

    return [f for f in fields(config_cls) if f.name not in _NESTED + EXECUTION_KEYS]


def run_columns(shape_cls: Any = None, config_cls: Any = None) -> dict[str, type]:
    """The run table's columns and their Python types (int, float, bool or str; tuples are
    written as text, e.g. ``"0,11"``), derived from ``Shape`` and ``TrainConfig``."""
    import typing
    from dataclasses import fields

    from archfit.shapes import Shape
    from archfit.train.config import TrainConfig

    shape_cls, config_cls = shape_cls or Shape, config_cls or TrainConfig
    cols: dict[str, type] = {k: str for k in _META}
    for cls, flds in ((shape_cls, fields(shape_cls)), (config_cls, _config_fields(config_cls))):
        hints = typing.get_type_hints(cls)
        for f in flds:
            cols[f.name] = _python_type(hints[f.name])
        if cls is shape_cls:  # the per-layer plan as one text ("uniform", "no-mlp:0") and the
            cols.update(plan=str, variant=str)  # spec's variant it was made as ("no-mlp:-1")
    cols.update({k: int for k in _COUNTS[:2] + _ACTIVE}, target_params=float)
    cols.update(budget_tokens=float, budget_tokens_per_param=float, budget_steps=int)
    cols.update({k: _RESULT_TYPES.get(k, float) for k in _RESULT_KEYS})
    cols["schema_version"] = int
    return cols


def _python_type(hint: Any) -> type:
    import typing

    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Literal:
        return str
    if args and typing.get_origin(hint) is not tuple:  # Optional[X] / X | None
        return _python_type(args[0])
    if hint in (bool, int, float):
        return hint
    return str  # str, tuples (written as text)


RUN_COLUMNS = tuple(run_columns())


def _run_schema(columns: dict[str, type] | None = None) -> dict[str, Any]:
    import polars as pl

    types = {bool: pl.Boolean, int: pl.Int64, float: pl.Float64, str: pl.Utf8}
    return {k: types[t] for k, t in (columns or run_columns()).items()}


def _cell(value: Any) -> Any:
    if isinstance(value, (tuple, list)):  # a plan's layers: "0,11" (none: null)
        return ",".join(str(v) for v in value) or None
    return value


def run_row(run: Run, sweep: str, res: Mapping[str, Any]) -> dict[str, Any]:
    """One row of the run table from a run of a spec and its ``result.json``."""
    from dataclasses import fields

    s = run.shape
    row: dict[str, Any] = {k: None for k in run_columns(type(s))}
    row.update(run_id=run.run_id, sweep=sweep, status=res.get("status"), error=res.get("error"))
    row.update({f.name: _cell(getattr(s, f.name)) for f in fields(s)})
    row.update(plan=s.plan, variant=run.meta.get("variant"))
    row["vocab_size"] = (res.get("shape") or {}).get("vocab_size", s.vocab_size)
    cfg = run.config
    from archfit.train.config import TrainConfig

    row.update({f.name: _cell(cfg.get(f.name, f.default)) for f in _config_fields(TrainConfig)})
    row.update({"budget_" + k: cfg.get(k) for k in ("tokens", "tokens_per_param", "steps")})
    row.update(params_total=res.get("params_total"),
               params_non_embedding=res.get("params_non_embedding"),
               target_params=run.meta.get("target_params"), schema_version=SCHEMA_VERSION)
    if res.get("params_total") is not None:  # the active counts of the shape that trained
        trained = s.with_(vocab_size=row["vocab_size"]) if row["vocab_size"] else s
        row.update({k: getattr(trained, k) for k in _ACTIVE})
    row.update({k: res.get(k) for k in _RESULT_KEYS})
    if row["expert_load"] is not None:
        import json

        row["expert_load"] = json.dumps(row["expert_load"])
    return row


def curve_rows(run_id: str, res: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"run_id": run_id, **{k: p.get(k) for k in CURVE_COLUMNS[1:]}}
            for p in res.get("curve") or []]


def curves_path(path: str) -> str:
    return (path[:-8] if path.endswith(".parquet") else path) + ".curves.parquet"


def write_runs(rows: list[dict[str, Any]], curves: list[dict[str, Any]], path: str
               ) -> tuple[str, str]:
    """Write the run table to ``path`` and the loss curves beside it, both atomically."""
    import polars as pl

    columns = run_columns()
    for r in rows:  # a field of a Shape or TrainConfig subclass: a column of its value's type
        columns.update({k: type(v) if type(v) in (bool, int, float) else str
                        for k, v in r.items() if k not in columns and v is not None})
    df = pl.DataFrame(rows, schema=_run_schema(columns))
    cdf = pl.DataFrame(curves, schema={"run_id": pl.Utf8, "step": pl.Int64, "tokens": pl.Int64,
                                       "train_loss": pl.Float64, "val_loss": pl.Float64,
                                       "lr": pl.Float64})
    cpath = curves_path(path)
    for frame, p in ((df, path), (cdf, cpath)):
        with atomic_path(p) as tmp:
            frame.write_parquet(tmp)
    return path, cpath


def is_run_table(path: str) -> bool:
    """Whether ``path`` is a run table (or curves table) archfit wrote (so it may be replaced)."""
    try:
        import pyarrow.parquet as pq

        names = set(pq.read_schema(path).names)
    except Exception:  # not parquet, unreadable: not ours
        return False
    return "run_id" in names and ("schema_version" in names or "step" in names)


def _rows_in(path: str) -> int | None:
    """The rows of the parquet table at ``path``; None when it cannot be read but is not
    empty (what it held is unknown, so it is protected as a table that holds rows)."""
    try:
        import pyarrow.parquet as pq

        return int(pq.read_metadata(path).num_rows)
    except Exception:
        return None if os.path.getsize(path) else 0


def collect(spec: Spec, out: str, path: str) -> tuple[str, str, int]:
    """Gather every finished run of ``spec`` in the sweep directory ``out`` into ``path`` (one
    row per run) and the loss curves into ``NAME.curves.parquet``. Returns the paths and the
    row count. A result whose run id or config does not match its directory is left out (and
    set aside by the next ``sweep run``). A non-empty table is never replaced by an empty one."""
    from archfit.errors import OutputError
    from archfit.sweep.rundir import check_result

    rows, curves = [], []
    for r in spec.runs:
        res, _ = check_result(os.path.join(out, r.run_id), r)
        if res is None:
            continue
        rows.append(run_row(r, spec.name, res))
        curves.extend(curve_rows(r.run_id, res))
    held = _rows_in(path) if not rows and os.path.exists(path) else 0
    if held is None or held:
        what = (f"the {held}-row table {path}" if held else
                f"{path} ({os.path.getsize(path):,} bytes that cannot be read as a table)")
        raise OutputError(f"no finished runs in {out} (is --out the sweep's folder?); refusing "
                          f"to replace {what} with an empty one")
    p, cp = write_runs(rows, curves, path)
    return p, cp, len(rows)


def check_schema_version(df: Any, path: str) -> None:
    """Accept files of this schema or older (every version so far is readable); refuse newer."""
    if "schema_version" not in df.columns:
        return
    versions = set(int(v) for v in df["schema_version"].drop_nulls().unique().to_list())
    newer = [v for v in versions if v > SCHEMA_VERSION]
    if newer:
        raise FitInputError(f"{path}: written with archfit schema {max(newer)}, newer than this "
                            f"archfit reads ({SCHEMA_VERSION}); upgrade archfit")


# ---------------------------------------------------------------------------- reading
CANONICAL = ("loss", "params", "tokens", "flops", "n_layer", "d_model", "d_ff", "n_head", "lr",
             "seed", "status", "run_id", "target_params", "mlp", "cost", "unique_tokens",
             "params_active", "n_experts", "top_k", "granularity", "vocab_size", "n_ctx",
             "batch_tokens", "position", "norm", "bias", "tied_embeddings", "ff_ratio",
             "characters")
# canonical columns that hold text (the rest are cast to numbers)
CANONICAL_TEXT = ("status", "run_id", "mlp", "position", "norm")
# each archfit column and the names it goes by elsewhere (nanoGPT, HF configs, W&B exports),
# tried in this order when no --map names the source
DEFAULT_SOURCES: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "final_val_loss", "val_loss"),
    "batch_tokens": ("batch_tokens", "tokens_per_step"),
    "params": ("params", "params_non_embedding", "num_params", "n_params"),
    "n_layer": ("n_layer", "num_hidden_layers", "num_layers"),
    "d_model": ("d_model", "n_embd", "hidden_size"),
    "n_head": ("n_head", "num_attention_heads"),
    "d_ff": ("d_ff", "intermediate_size"),
    # a mixture of experts: its active size (the MoE laws' N: non-embedding, as Kaplan's N;
    # archfit's own tables also hold 'params_active', embeddings included) and sparsity
    "params_active": ("params_active_non_embedding", "params_active"),
    "n_experts": ("n_experts", "num_experts", "num_local_experts"),
    "top_k": ("top_k", "num_experts_per_tok"),
    # a vocabulary sweep (Tao et al. 2024's table names them so)
    "characters": ("characters", "num_characters"),
}
# the columns archfit itself writes under other names (no note when they are read)
OWN_SOURCES = ("final_val_loss", "params_non_embedding", "params_active_non_embedding",
               "batch_size x grad_accum x n_ctx")
# run states that mean a finished run (archfit's own, W&B's, MLflow's)
OK_STATES = ("ok", "finished", "completed", "success", "succeeded")


@dataclass
class RunTable:
    """Runs in canonical columns, plus what was done to get them."""

    frame: Any  # polars.DataFrame
    inputs: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    n_dropped: int = 0
    mapping: dict[str, str] = field(default_factory=dict)  # the --map the table was read with
    # text columns that look like groupings (dataset, schedule, ...): name -> its values
    groupings: dict[str, list[str]] = field(default_factory=dict)


def expand_paths(paths: Iterable[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        matches = [p] if os.path.exists(p) else sorted(glob.glob(p))
        if not matches:
            raise FitInputError(f"{p}: no such file (nor any file matching it as a glob)")
        for m in matches:
            if os.path.isdir(m):
                raise FitInputError(f"{m}: is a directory; give the table files in it (e.g. "
                                    f"{os.path.join(m, '*.parquet')})")
        out.extend(matches)
    if not out:
        raise FitInputError("no input files given; pass parquet, CSV or JSONL files of runs")
    return out


TEXT_TABLES = ("csv", "tsv", "jsonl", "ndjson", "json")


def _binary(path: str) -> bool:
    """Whether a file meant to be text holds a NUL byte in its first 64 KiB."""
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(1 << 16)
    except OSError:
        return False  # the reader says what is wrong


def _read_one(path: str) -> Any:
    import polars as pl

    ext = path.lower().rsplit(".", 1)[-1] if "." in os.path.basename(path) else ""
    readers = {"parquet": pl.read_parquet, "pq": pl.read_parquet,
               "csv": lambda p: pl.read_csv(p, infer_schema_length=10000),
               "tsv": lambda p: pl.read_csv(p, separator="\t", infer_schema_length=10000),
               "jsonl": lambda p: pl.read_ndjson(p, infer_schema_length=10000),
               "ndjson": lambda p: pl.read_ndjson(p, infer_schema_length=10000),
               "json": pl.read_json}
    if ext not in readers:
        raise FitInputError(f"{path}: unknown file type '.{ext}'; give .parquet, .csv, .tsv "
                            "or .jsonl")
    if ext in TEXT_TABLES and _binary(path):
        raise FitInputError(f"{path}: not text (it holds NUL bytes), so not a {ext} table; give "
                            "the table as text, or a .parquet file")
    try:
        df = readers[ext](path)
    except Exception as e:  # polars raises many kinds
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise FitInputError(f"{path}: cannot read as {ext}: {first}") from None
    if df.height == 0:
        raise FitInputError(f"{path}: the file holds no rows")
    return df


def _numeric(df: Any, col: str) -> Any:
    """Column ``col`` as numbers, or one line naming the first row that is not a number."""
    import polars as pl

    try:
        return df[col].cast(pl.Float64, strict=True)
    except Exception:
        text = df[col].cast(pl.Utf8)
        row = next((i for i, v in enumerate(text.to_list())
                    if v is None or not _parses(v)), 0)
        raise FitInputError(f"column {col!r} is not numeric (row {row}: "
                            f"{df[col][row]!r}); fix or drop that row") from None


def _parses(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def _canonical_columns(df: Any, mapping: Mapping[str, str], keep: Iterable[str] = (),
                       flags: Mapping[str, str] | None = None) -> tuple[Any, dict[str, str]]:
    flags = dict(flags or {})  # keep column -> the option that named it (default --group)
    import polars as pl

    sources: dict[str, str] = {}
    cols: dict[str, Any] = {}
    for name in CANONICAL:
        candidates = (mapping[name],) if name in mapping else DEFAULT_SOURCES.get(name, (name,))
        if name in mapping and (scaled := _scaled(df, mapping[name])) is not None:
            cols[name], sources[name] = scaled
            continue
        for src in candidates:
            if src in df.columns:
                cols[name] = df[src]
                sources[name] = src
                break
        else:
            if name in mapping:
                raise FitInputError(f"--map {name}={mapping[name]}: no column {mapping[name]!r} "
                                    f"in the input; columns are: {', '.join(df.columns)}")
    for name, src in mapping.items():  # one column, one role: a mapped column read twice is
        other = next((k for k, v in sources.items() if v == src and k != name), None)  # wrong
        if name in sources and other is not None:
            raise FitInputError(f"--map {name}={src}: column {src!r} is also read as {other}; "
                                "one column fills one role (map each role to its own column)")
    if "batch_tokens" not in cols and "batch_size" in df.columns and "n_ctx" in df.columns \
            and "batch_tokens" not in mapping:  # an archfit run table: tokens per optimizer step
        parts = [_numeric(df, c) for c in ("batch_size", "grad_accum", "n_ctx")
                 if c in df.columns]
        cols["batch_tokens"] = parts[0] * parts[1] * parts[2] if len(parts) == 3 \
            else parts[0] * parts[1]
        sources["batch_tokens"] = "batch_size x grad_accum x n_ctx"
    extra = []
    for c in keep:
        if c not in df.columns:
            raise FitInputError(f"{flags.get(c, '--group')} {c}: no column {c!r} in the input; "
                                f"columns are: {', '.join(df.columns)}")
        if c not in cols:
            cols[c] = df[c]
            extra.append(c)
    out = pl.DataFrame(cols)
    for c in out.columns:
        if c in CANONICAL_TEXT or c in extra:
            continue
        try:
            out = out.with_columns(pl.col(c).cast(pl.Float64, strict=True))
        except Exception:
            raise FitInputError(f"column {sources[c]!r} (archfit {c!r}) is not numeric") from None
    return out, sources


def _scaled(df: Any, source: str) -> tuple[Any, str] | None:
    """``COLUMN*FACTOR`` (``--map flops='total_gflops*1e9'``: a column in another unit) as
    (the column times the factor, what was read), when COLUMN is in ``df`` and the whole text
    is not; None otherwise."""
    import polars as pl

    base, star, factor = source.rpartition("*")
    if not star or source in df.columns or base not in df.columns:
        return None
    try:
        k = float(factor)
    except ValueError:
        return None
    if not math.isfinite(k) or k <= 0:
        raise FitInputError(f"--map ...={source}: the factor {factor!r} must be a positive "
                            "number")
    try:
        col = df[base].cast(pl.Float64, strict=True)
    except Exception:
        raise FitInputError(f"--map ...={source}: column {base!r} is not numeric") from None
    return col * k, f"{base} x {k:g}"


def exclude_rows(df: Any, exclude: Mapping[str, str], notes: list[str]) -> Any:
    """``df`` less the rows whose column matches a pattern (``{column: regular expression}``,
    ``fit --exclude COLUMN=PATTERN``), each with a note of how many it left out."""
    import re

    import polars as pl

    for col, pattern in exclude.items():
        if col not in df.columns:
            raise FitInputError(f"--exclude {col}={pattern}: no column {col!r} in the input; "
                                f"columns are: {', '.join(df.columns)}")
        try:
            re.compile(pattern)
        except re.error as e:
            raise FitInputError(f"--exclude {col}={pattern}: not a regular expression "
                                f"({e})") from None
        hit = df[col].cast(pl.Utf8).fill_null("").str.contains(pattern)
        n = int(hit.sum())
        if n == df.height:
            raise FitInputError(f"--exclude {col}={pattern} matches every row ({n}); nothing "
                                "is left to fit")
        df = df.filter(~hit)
        notes.append(f"left out {n} row(s) whose {col!r} matches {pattern!r} (--exclude)")
    return df


def _drop_unusable(out: Any, notes: list[str], signed_loss: bool = False) -> Any:
    import polars as pl

    n0 = out.height
    why = []
    if "status" in out.columns and out.height and out["status"].null_count() == out.height:
        raise FitInputError(f"the status column is empty on all {out.height} rows: no run is "
                            "known to have finished, so none is counted; drop the column if "
                            "every row is a finished run")
    if "status" in out.columns:
        state = out["status"].cast(pl.Utf8).fill_null("ok").str.to_lowercase()
        ok = state.is_in(list(OK_STATES))
        if int((~ok).sum()):
            counts = state.filter(~ok).value_counts(sort=True)
            states = ", ".join(f"{r[0]} {r[1]}" for r in counts.iter_rows())
            why.append(f"{int((~ok).sum())} whose status is not a finished state ({states}; "
                       f"finished: {', '.join(OK_STATES)})")
        out = out.filter(ok)
    n1 = out.height
    usable = pl.col("loss").is_finite() & pl.col("loss").is_not_null()
    out = out.filter(usable if signed_loss else usable & (pl.col("loss") > 0))
    if n1 - out.height:
        why.append(f"{n1 - out.height} whose loss is missing, not finite"
                   + ("" if signed_loss else " or <= 0"))
    notes += [f"dropped {w.split(' ', 1)[0]} run(s) {w.split(' ', 1)[1]}" for w in why]
    if out.height == 0:
        raise FitInputError(f"no usable runs: all {n0} rows were dropped ({'; '.join(why)})")
    return out


def read_tables(paths: Iterable[str]) -> Any:
    """Run tables (parquet, CSV, JSONL; globs expanded) concatenated as they are, columns
    unrenamed: for readers that want a run table's own columns (``archfit throughput``)."""
    import polars as pl

    frames = []
    for p in expand_paths(paths):
        df = _read_one(p)
        check_schema_version(df, p)
        frames.append(df)
    try:
        return pl.concat(frames, how="diagonal_relaxed")
    except Exception as e:  # noqa: BLE001 - polars raises several types
        raise FitInputError(f"the input files do not share compatible columns: {e}") from None


def read_runs(paths: Iterable[str] | str, mapping: Mapping[str, str] | None = None,
              *, frame: Any = None, keep: Iterable[str] | None = None,
              require_loss: bool = True, keep_flags: Mapping[str, str] | None = None,
              every_row: bool = False, signed_loss: bool = False,
              optional: Iterable[str] = (), exclude: Mapping[str, str] | None = None
              ) -> RunTable:
    """Read and concatenate tables of runs into canonical columns.

    ``mapping`` maps archfit column -> source column (``{"params": "Model Size"}``).
    Pass ``frame`` (polars or pandas) instead of paths to convert an in-memory table.
    ``keep`` names further columns to carry as they are (``fit --group``, or the option
    ``keep_flags`` names for a column, e.g. ``--by``, in the error for a missing one); without
    ``require_loss`` a table with no loss column is read as it is; ``every_row`` (rows to
    predict) keeps every row, a missing loss left missing. ``signed_loss`` keeps losses at or
    below 0 (a unigram-normalized loss, negative for a good model; :func:`positive_losses`
    drops them later for a law of log loss); without it they are dropped with a note.
    ``optional``: columns to carry where the input has them (a formula's variables).
    ``exclude``: rows to leave out, by a regular expression on a column (:func:`exclude_rows`).
    A mapped source ``COLUMN*FACTOR`` reads a column in another unit (GFLOPs as FLOPs).

    Long because reading is one sequence of checks over every input (its kind, its schema, the
    rows left out, the columns mapped, aliased and derived), each of which names its file."""
    import polars as pl

    mapping = dict(mapping or {})
    for key in mapping:
        if key not in CANONICAL:
            raise FitInputError(f"--map {key}=...: unknown archfit column {key!r}; "
                                f"known: {', '.join(CANONICAL)}")
    frames: list[Any] = []
    inputs: list[dict[str, str]] = []
    notes: list[str] = []
    if frame is not None:
        frames.append(to_polars(frame))
    else:
        skipped = []
        for p in expand_paths([os.fspath(paths)] if isinstance(paths, (str, os.PathLike))
                              else paths):
            df = _read_one(p)
            if _is_curves(p, df):  # sweep collect's loss curves, beside its run table
                skipped.append(p)
                continue
            check_schema_version(df, p)
            frames.append(df)
            inputs.append({"path": p, "sha256": file_sha256(p)})
        if skipped and not frames:
            raise FitInputError(f"{', '.join(skipped)}: loss curves (one row per logged step), "
                                "not a table of runs; give the run table 'sweep collect' wrote "
                                "beside them (NAME.parquet)")
        if skipped:
            notes.append(f"skipped {len(skipped)} loss-curve table(s) ({', '.join(skipped)}): "
                         "a fit reads run tables")
    try:
        df = pl.concat(frames, how="diagonal_relaxed")
    except Exception as e:
        raise FitInputError(f"the input files do not share compatible columns: {e}") from None
    if exclude:
        df = exclude_rows(df, exclude, notes)
    keep = [*(keep or ()), *(c for c in optional if c in df.columns and c not in (keep or ()))]
    out, sources = _canonical_columns(df, mapping, keep, keep_flags)
    groupings = grouping_columns(df, set(sources.values()) | set(keep or ()))
    aliased = [f"{src} -> {name}" for name, src in sources.items()
               if name not in mapping and src != name and src not in OWN_SOURCES]
    if aliased:
        notes.append(f"read columns by their common names: {', '.join(aliased)} (--map to "
                     "choose others)")
    for c in ("n_layer",):  # a count of layers is whole
        if c in out.columns and out[c].dtype.is_numeric():
            frac = out.filter(pl.col(c).is_finite() & (pl.col(c) != pl.col(c).round(0)))[c]
            if frac.len():
                notes.append(f"column {sources.get(c, c)!r} (archfit {c!r}) has {frac.len()} "
                             f"fractional value(s), e.g. {frac[0]:g}: a whole number is "
                             "expected; fitted as given (check the column)")
    if "tokens" not in out.columns and {"flops", "params"} <= set(out.columns):
        out = out.with_columns((pl.col("flops") / (6.0 * pl.col("params"))).alias("tokens"))
        sources["tokens"] = "flops / (6 * params)"
        notes.append("tokens were missing: computed as D = FLOPs / (6 N)")
    if "loss" not in out.columns or every_row:
        if not require_loss or every_row:  # rows to predict
            return RunTable(frame=out, inputs=inputs, notes=notes, sources=sources,
                            mapping=mapping, groupings=groupings)
        raise FitInputError("no loss column: expected 'loss' or 'final_val_loss'; map one with "
                            "--map loss=COLUMN")
    n0 = out.height
    out = _drop_unusable(out, notes, signed_loss)
    return RunTable(frame=out, inputs=inputs, notes=notes, sources=sources,
                    n_dropped=n0 - out.height, mapping=mapping, groupings=groupings)


def positive_losses(table: RunTable) -> RunTable:
    """``table`` without the rows whose loss is at or below 0 (read with ``signed_loss``), with
    a note; every law but a unigram-normalized one fits the log of a positive loss."""
    import polars as pl

    if "loss" not in table.frame.columns:
        return table
    kept = table.frame.filter(pl.col("loss") > 0)
    gone = table.frame.height - kept.height
    if not gone:
        return table
    if kept.height == 0:
        raise FitInputError(f"no usable runs: all {gone} rows have a loss <= 0; a "
                            "unigram-normalized loss is fitted by --law vocab")
    return replace(table, frame=kept, n_dropped=table.n_dropped + gone,
                   notes=[*table.notes, f"dropped {gone} run(s) whose loss is <= 0"])


# columns that never group runs: identities and messages
_NOT_GROUPINGS = ("run_id", "status", "error", "state", "name", "path", "id")
GROUPING_VALUES = (2, 20)  # a grouping has this many distinct values


def grouping_columns(df: Any, used: set[str]) -> dict[str, list[str]]:
    """Text (or categorical / boolean) columns the fit does not read that split the runs into
    2-20 groups, each of several runs: a dataset, a schedule, a tokenizer, a run group. A law
    fitted across them pools runs that may follow different laws."""
    import polars as pl

    out: dict[str, list[str]] = {}
    for c in df.columns:
        if c in used or c.lower() in _NOT_GROUPINGS:
            continue
        if not (df[c].dtype in (pl.Utf8, pl.Categorical, pl.Boolean)
                or isinstance(df[c].dtype, pl.Enum)):
            continue
        vals = df[c].drop_nulls().cast(pl.Utf8).unique().sort().to_list()
        if GROUPING_VALUES[0] <= len(vals) <= GROUPING_VALUES[1] and len(vals) * 2 <= df.height:
            out[c] = vals
    return out


def _is_curves(path: str, df: Any) -> bool:
    """A loss-curves table as :func:`write_runs` writes it (named ``*.curves.parquet``, one
    row per logged step, no parameter count)."""
    return (os.path.basename(path).endswith(".curves.parquet")
            and {"run_id", "step", "train_loss"} <= set(df.columns) and "params" not in df.columns)


def without_duplicates(frame: Any) -> tuple[Any, int]:
    """A polars ``frame`` without its exact duplicate rows (the first of each kept), and how
    many rows were dropped."""
    unique = frame.unique(maintain_order=True)
    return unique, frame.height - unique.height


def to_polars(frame: Any) -> Any:
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


def runs_frame(path: str | os.PathLike[str]) -> Any:
    """``archfit.read_runs``: a polars frame of runs for a notebook. A run table (``.parquet``
    from ``sweep collect``) is read as written; a sweep directory is read in place, without
    collecting: one row per run folder (its ``config.json``), finished or not (status
    ``pending`` until its ``result.json`` exists), in the run table's columns."""
    import json

    import polars as pl

    from archfit.sweep.rundir import check_result
    from archfit.sweep.spec import Run

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FitInputError(f"{path}: no such file or directory; give a sweep directory or a "
                            "run table (.parquet)")
    if not os.path.isdir(path):
        df = _read_one(path)
        check_schema_version(df, path)
        return df
    rows = []
    for name in sorted(os.listdir(path)):
        cfg_path = os.path.join(path, name, "config.json")
        if not os.path.isfile(cfg_path):
            continue
        try:
            with open(cfg_path, encoding="utf-8") as f:
                d = json.load(f)
            run = Run(d["run_id"], d["config"], d.get("meta") or {})
            run.shape  # noqa: B018 - a config that is not a run's is skipped, not guessed at
        except (OSError, ValueError, KeyError, TypeError, ArchfitError):
            continue
        res, problem = check_result(os.path.join(path, name), run)
        row = run_row(run, run.meta.get("sweep") or os.path.basename(os.path.abspath(path)),
                      res or {"status": "pending", "error": problem})
        rows.append(row)
    if not rows:
        raise FitInputError(f"{path}: no run folders (NAME/config.json) here; give the sweep's "
                            "directory (sweep run --out) or its run table")
    return pl.DataFrame(rows, schema=_run_schema())


# the envelope's loss: the validation loss where each run logged at least this many, else the
# training loss smoothed by a trailing mean over this many logged steps (Hoffmann et al. 2022
# smooth the training curves of their approach 1)
MIN_EVALS = 5
SMOOTH_STEPS = 10


def read_checkpoints(paths: Iterable[str] | str, mapping: Mapping[str, str] | None = None
                     ) -> RunTable:
    """Every logged point of every run's loss curve, as rows (``params`` from the run table,
    ``tokens`` and ``loss`` from its curves, ``run_id``): what ``--law envelope`` reads. Each
    path is a run table with ``NAME.curves.parquet`` beside it, or those curves."""
    import polars as pl

    frames, notes, inputs = [], [], []
    for p in expand_paths([os.fspath(paths)] if isinstance(paths, (str, os.PathLike))
                          else paths):
        if p.endswith(".curves.parquet"):
            run_path, cpath = p[:-len(".curves.parquet")] + ".parquet", p
        else:
            run_path, cpath = p, curves_path(p)
        if not os.path.exists(cpath):
            raise FitInputError(f"{p}: no loss curves beside it ({cpath}); the envelope reads "
                                "every run's curve, which 'archfit sweep collect' writes there")
        if not os.path.exists(run_path):
            raise FitInputError(f"{cpath}: no run table beside it ({run_path}) to give each "
                                "curve its size")
        runs = read_runs([run_path], mapping)
        if "run_id" not in runs.frame.columns:
            raise FitInputError(f"{run_path}: no run_id column to join its curves by")
        cur = _read_one(cpath)
        if "tokens" not in cur.columns and "flops" not in cur.columns:
            raise FitInputError(f"{cpath}: the curves have no tokens or flops column (have "
                                f"{', '.join(cur.columns)}): the envelope needs each point's "
                                "tokens, or its FLOPs, to place it")
        if "run_id" not in cur.columns or not ({"val_loss", "train_loss"} & set(cur.columns)):
            raise FitInputError(f"{cpath}: loss curves need run_id and val_loss or train_loss "
                                f"columns; have {', '.join(cur.columns)}")
        pts, loss_col = _curve_points(cur, runs.frame.select("run_id", "params"), notes, cpath)
        frames.append(pts)
        inputs += runs.inputs + [{"path": cpath, "sha256": file_sha256(cpath)}]
    if not frames:
        raise FitInputError("no input files")
    out = pl.concat(frames, how="vertical_relaxed")
    return RunTable(frame=out, inputs=inputs, notes=notes,
                    sources={"params": runs.sources.get("params", "params"), "tokens": "tokens",
                             "loss": loss_col})


def _curve_points(cur: Any, sizes: Any, notes: list[str], cpath: str) -> tuple[Any, str]:
    import polars as pl

    cur = cur.join(sizes, on="run_id", how="inner")
    if "tokens" not in cur.columns:  # D = C / (6 N) at each point
        cur = cur.with_columns(tokens=pl.col("flops") / (6.0 * pl.col("params")))
        notes.append("tokens from the curves' flops: D = C / (6 N)")
    cur = cur.sort("run_id", "tokens")
    if not cur.height:
        raise FitInputError(f"{cpath}: no curve's run_id is in the run table beside it")
    evals = (cur.filter(pl.col("val_loss").is_not_null()).group_by("run_id").len()["len"]
             if "val_loss" in cur.columns else pl.Series([0]))
    if "val_loss" in cur.columns and evals.len() == sizes.height and int(
            evals.min() or 0) >= MIN_EVALS:  # type: ignore[arg-type]
        pts = cur.filter(pl.col("val_loss").is_not_null()).with_columns(loss=pl.col("val_loss"))
        notes.append("val_loss: each run's validation loss at each evaluation")
        col = "val_loss"
    else:
        pts = cur.filter(pl.col("train_loss").is_not_null()).with_columns(
            loss=pl.col("train_loss").rolling_mean(SMOOTH_STEPS, min_samples=1).over("run_id"))
        notes.append(f"train_loss, a trailing mean over {SMOOTH_STEPS} logged steps: the "
                     f"curves hold fewer than {MIN_EVALS} evaluations of some run")
        col = f"train_loss (trailing mean of {SMOOTH_STEPS})"
    return pts.select(pl.col("params").cast(pl.Float64), pl.col("tokens").cast(pl.Float64),
                      pl.col("loss").cast(pl.Float64), "run_id"), col
