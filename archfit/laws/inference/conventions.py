"""What N means in a fit: the params column checked against the shape core's count.

When a table has depth and width, the shape core (:mod:`archfit.shapes`, the one place a
transformer is counted) counts each run's non-embedding parameters for the stated architecture
(``mlp``, ``vocab``, ``tie``, ``ff_ratio``: the flags of ``archfit shape``). A params column that
disagrees with that count by more than 5% (embeddings included, a different MLP) is named in one
line with the count it is closer to; a table without a params column gets the core's count."""

from __future__ import annotations

from typing import Any, Mapping

from archfit.errors import FitInputError, ShapeError

TOLERANCE = 0.05  # relative disagreement that is reported


def _shape(L: float, d: float, d_ff: float | None, arch: Mapping[str, Any]) -> Any:
    from archfit.shapes import Shape

    kw: dict[str, Any] = {"mlp": arch.get("mlp") or "gelu",
                          "vocab_size": int(arch.get("vocab", 50257)),
                          "tied_embeddings": bool(arch.get("tie", True))}
    if d_ff is not None:
        kw["d_ff"] = int(d_ff)
    elif arch.get("ff_ratio"):
        kw["ff_ratio"] = float(arch["ff_ratio"])
    return Shape(n_layer=int(L), d_model=int(d), n_head=1, **kw)


def describe(arch: Mapping[str, Any]) -> str:
    mlp = arch.get("mlp") or "gelu"
    ff = f", d_ff = {arch['ff_ratio']:g}·d_model" if arch.get("ff_ratio") else ""
    return f"{mlp} MLP{ff}, vocab {int(arch.get('vocab', 50257)):,}, " + (
        "tied" if arch.get("tie", True) else "untied") + " embeddings"


def check_params(df: Any, sources: Mapping[str, str], arch: Mapping[str, Any] | None,
                 notes: list[str], conventions: dict[str, str]) -> Any:
    """``df`` with a params column: the given one (checked) or the shape core's count."""
    import polars as pl

    if not {"n_layer", "d_model"} <= set(df.columns):
        return df
    arch = dict(arch or {})
    # the runs' own MLP column, unless a flag states one for the whole table
    per_row_mlp = "mlp" in df.columns and not arch.get("mlp")
    cols = (["n_layer", "d_model"] + (["d_ff"] if "d_ff" in df.columns else [])
            + (["mlp"] if per_row_mlp else []))
    shapes = df.select(cols).unique()
    counts: dict[tuple, tuple[int, int]] = {}
    try:
        for row in shapes.iter_rows(named=True):
            if any(v is None for v in row.values()):
                continue
            a = {**arch, "mlp": row["mlp"]} if per_row_mlp else arch
            s = _shape(row["n_layer"], row["d_model"], row.get("d_ff"), a)
            counts[tuple(row.values())] = (s.params_non_embedding, s.params_total)
    except (ShapeError, ValueError, TypeError) as e:
        raise FitInputError(f"cannot count the runs' shapes ({e}); check the n_layer, d_model "
                            "and d_ff columns") from None
    keys = [tuple(r) for r in df.select(cols).iter_rows()]
    core = [counts.get(k, (None, None))[0] for k in keys]
    what = describe(arch) if not per_row_mlp else describe(arch).replace(
        "gelu MLP", "MLP from the 'mlp' column")
    if "params" not in df.columns:
        conventions["params"] = (f"non-embedding parameters counted by the shape core "
                                 f"({what})")
        return df.with_columns(pl.Series("params", core, dtype=pl.Float64))
    total = [counts.get(k, (None, None))[1] for k in keys]
    given = df["params"].to_list()
    ratios = sorted(g / c for g, c in zip(given, core) if g and c)
    if not ratios:
        return df
    med = ratios[len(ratios) // 2]
    conventions["params_check"] = (f"column {sources.get('params', 'params')!r} vs the shape "
                                   f"core's non-embedding count ({what}): median ratio "
                                   f"{med:.3f}")
    if abs(med - 1) > TOLERANCE:
        col = sources.get("params", "params")
        c = _per_layer_d2(df)
        if c is not None:  # exactly c·L·d² on every row: a formula for non-embedding weights
            notes.append(f"N convention: column {col!r} is {c:.2f}·n_layer·d_model² on every "
                         f"row, a non-embedding count (an embedding share is not proportional "
                         f"to n_layer); the shape core counts {_core_c(counts):.2f}·"
                         f"n_layer·d_model² for {what} ({med - 1:+.1%}). {_implied(c)}The fit "
                         "uses the column as N")
            return df
        tr = sorted(g / t for g, t in zip(given, total) if g and t)
        closer = ("the total count with embeddings" if tr and abs(tr[len(tr) // 2] - 1) <
                  abs(med - 1) else "neither count")
        notes.append(f"N convention: column {col!r} differs from "
                     f"the shape core's non-embedding count ({what}) by {med - 1:+.1%} (median) "
                     f"and is closer to {closer}; the fit uses the column as N. State the "
                     "architecture (--mlp, --vocab, --untied) or map a non-embedding count")
    return df


def _per_layer_d2(df: Any) -> float | None:
    """c when the params column is c·n_layer·d_model² on every row (within 0.5%), else None."""
    ratios = [p / (L * d * d) for p, L, d in zip(df["params"].to_list(), df["n_layer"].to_list(),
                                                 df["d_model"].to_list()) if p and L and d]
    if len(ratios) < 2 or len({(L, d) for L, d in zip(df["n_layer"].to_list(),
                                                      df["d_model"].to_list())}) < 2:
        return None
    lo, hi = min(ratios), max(ratios)
    return (lo + hi) / 2 if hi <= lo * 1.005 else None


def _core_c(counts: Mapping[tuple, tuple[int, int]]) -> float:
    """The shape core's non-embedding count per n_layer·d_model² (median over the shapes)."""
    cs = sorted(ne / (k[0] * k[1] * k[1]) for k, (ne, _) in counts.items())
    return cs[len(cs) // 2] if cs else float("nan")


def _implied(c: float) -> str:
    """What d_ff a per-layer count of c·d² implies (attention 4·d², an MLP of 2 or 3 matrices)."""
    out = []
    for mlp, mats in (("gelu", 2), ("swiglu", 3)):
        r = (c - 4) / mats
        if r > 0:
            out.append(f"--mlp {mlp} --ff-ratio {r:.4g}")
    return ("It matches " + " or ".join(out) + " (d_ff = ratio·d_model); state it. ") if out else ""
