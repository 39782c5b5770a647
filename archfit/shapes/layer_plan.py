"""A shape's per-layer plan as text and records: :class:`Layer` (one block: attention, MLP,
heads) and :func:`parse_plan` (``"no-mlp:0,-1 no-attn:mid heads:6,12,12,6"`` to the fields of
:class:`archfit.shapes.Shape`, which checks and counts them). Imports nothing from archfit but
its errors."""

from __future__ import annotations
from typing import Any, NamedTuple

from archfit.errors import ShapeError


class Layer(NamedTuple):
    """One block of a shape's per-layer plan: its ``index`` (from 0; the field is 'index' in
    the JSON plans, and tuple.index is not used), whether it has ``attn`` and an ``mlp``, and
    its query ``heads`` and key/value ``kv_heads``; ``sparse``: its MLP is a mixture of
    experts (the shape's ``n_experts``, ``top_k`` and shared experts), not one dense MLP."""

    index: int  # type: ignore[assignment]  # shadows tuple.index, which plans never use
    attn: bool
    mlp: bool
    heads: int
    kv_heads: int
    sparse: bool = False


def plan_indices(raw: Any, name: str, n_layer: int | None = None) -> list[int]:
    """A plan's whole numbers from a tuple, a list or text (``"0,-1"``; with ``n_layer``,
    ``"mid"`` is the middle layer, n_layer // 2)."""
    if isinstance(raw, str):
        raw = [p for p in raw.replace(" ", "").split(",") if p]
    out = []
    for v in raw:
        if isinstance(v, str) and v.lower() in ("mid", "middle"):  # a whole item, never a part
            if n_layer is None:
                raise ShapeError(f"{name}: {v!r} (the middle layer) needs the depth; give a "
                                 "layer index")
            v = n_layer // 2
        try:
            n = int(v)
        except (TypeError, ValueError):
            raise ShapeError(f"{name}: {v!r} is not a layer index; give whole numbers "
                             "(negative ones count from the end) or 'mid' for the middle "
                             "layer") from None
        if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
            raise ShapeError(f"{name}: {v!r} is not a whole number")
        out.append(n)
    return out


PLAN_SYNTAX = ("uniform | no-mlp:I,J | no-attn:I|mid | heads:H0,H1,... (several joined by "
               "spaces; negative layer indices count from the end)")


def parse_plan(text: str, n_layer: int) -> dict[str, tuple[int, ...]]:
    """The Shape fields of a plan written as text for ``n_layer`` layers: ``"uniform"``,
    ``"no-mlp:0"``, ``"no-mlp:0,-1"``, ``"no-attn:mid"`` (the middle layer, n_layer // 2),
    ``"heads:6,12,12,6"``, or several joined by spaces (as :attr:`Shape.plan` writes them)."""
    out: dict[str, tuple[int, ...]] = {}
    for part in str(text).split():
        if part == "uniform":
            continue
        key, _, arg = part.partition(":")
        name = {"no-mlp": "no_mlp", "no-attn": "no_attn", "heads": "heads_per_layer"}.get(key)
        if name is None or not arg:
            raise ShapeError(f"unknown layer plan {part!r}; write {PLAN_SYNTAX}")
        out[name] = tuple(plan_indices(arg, key, n_layer))
    return out
