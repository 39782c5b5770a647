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

    kw: dict[str, Any] = {"mlp": arch.get("mlp", "gelu"),
                          "vocab_size": int(arch.get("vocab", 50257)),
                          "tied_embeddings": bool(arch.get("tie", True))}
    if d_ff is not None:
        kw["d_ff"] = int(d_ff)
    elif arch.get("ff_ratio"):
        kw["ff_ratio"] = float(arch["ff_ratio"])
    return Shape(n_layer=int(L), d_model=int(d), n_head=1, **kw)


def describe(arch: Mapping[str, Any]) -> str:
    mlp = arch.get("mlp", "gelu")
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
    cols = ["n_layer", "d_model"] + (["d_ff"] if "d_ff" in df.columns else [])
    shapes = df.select(cols).unique()
    counts: dict[tuple, tuple[int, int]] = {}
    try:
        for row in shapes.iter_rows():
            if any(v is None for v in row):
                continue
            s = _shape(row[0], row[1], row[2] if len(row) > 2 else None, arch)
            counts[tuple(row)] = (s.params_non_embedding, s.params_total)
    except (ShapeError, ValueError, TypeError) as e:
        raise FitInputError(f"cannot count the runs' shapes ({e}); check the n_layer, d_model "
                            "and d_ff columns") from None
    keys = [tuple(r) for r in df.select(cols).iter_rows()]
    core = [counts.get(k, (None, None))[0] for k in keys]
    what = describe(arch)
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
        tr = sorted(g / t for g, t in zip(given, total) if g and t)
        closer = ("the total count with embeddings" if tr and abs(tr[len(tr) // 2] - 1) <
                  abs(med - 1) else "neither count")
        notes.append(f"N convention: column {sources.get('params', 'params')!r} differs from "
                     f"the shape core's non-embedding count ({what}) by {med - 1:+.1%} (median) "
                     f"and is closer to {closer}; the fit uses the column as N. State the "
                     "architecture (--mlp, --vocab, --untied) or map a non-embedding count")
    return df
