"""An isoFLOP sweep to run: at each FLOP budget, sizes log-spaced about the budget's predicted
optimum, each trained on D = C / (6 N) tokens (N non-embedding, Kaplan's), each a shape of the
aspect-ratio family; as a sweep spec ``archfit sweep plan`` reads (``grid.shapes`` entries that
name their own ``flops``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from archfit.errors import ShapeError
from archfit.shapes import Shape
from archfit.shapes.families import aspect_ratio_family

# Hoffmann et al. 2022's compute-optimal ratio, the default centre: N_opt = sqrt(C / (6 * 20))
TOKENS_PER_PARAM = 20.0
DEFAULT_SIZES = 7
DEFAULT_SPREAD = 4.0  # sizes from N_opt / 4 to 4 N_opt (Marin: 1.6e8 to 1.2e10 at 1e20)
DEFAULT_ASPECT = 128.0  # d_model / n_layer: Llama 2 7B's 4096 / 32


@dataclass(frozen=True)
class IsoRun:
    """One run of the plan: its budget, the size it was planned at, its shape and tokens."""

    flops: float
    planned: float
    shape: Shape

    @property
    def tokens(self) -> float:
        return self.flops / (6.0 * self.shape.params_non_embedding)

    def row(self) -> dict[str, Any]:
        s = self.shape
        return {"budget_flops": self.flops, "planned_params": self.planned,
                "params_non_embedding": s.params_non_embedding, "n_layer": s.n_layer,
                "d_model": s.d_model, "n_head": s.n_head, "d_ff": s.d_ff,
                "tokens": self.tokens, "tokens_per_param": self.tokens / s.params_non_embedding}


def centre_by_ratio(C: float) -> float:
    """N_opt at 20 tokens per parameter under C = 6 N D (assumed, Hoffmann et al. 2022)."""
    return math.sqrt(C / (6.0 * TOKENS_PER_PARAM))


def plan_isoflop(budgets: Sequence[float], sizes: int = DEFAULT_SIZES,
                 spread: float = DEFAULT_SPREAD, *, centre: Callable[[float], float] | None = None,
                 aspect_ratio: float = DEFAULT_ASPECT, ff_ratio: float = 4.0,
                 head_dim: int | None = 64, n_head: int | None = None, multiple: int = 64,
                 **base: Any) -> list[IsoRun]:
    """At each budget, ``sizes`` sizes log-spaced from N_opt / ``spread`` to N_opt x
    ``spread`` about ``centre(C)`` (default: 20 tokens per parameter), each the nearest shape of
    the aspect-ratio family; a size whose shape repeats another's at that budget is dropped."""
    if len(budgets) < 2:
        raise ShapeError("an isoFLOP sweep needs 2 or more budgets (--compute 1e18,3e18,1e19): "
                         "the power law N_opt(C) is fitted across them")
    if sizes < 3:
        raise ShapeError(f"--sizes {sizes}: a profile needs 3 or more sizes at each budget")
    if not spread > 1:
        raise ShapeError(f"--spread {spread:g}: give a factor above 1 (sizes from N_opt / "
                         "spread to N_opt x spread)")
    if any(not (c > 0 and math.isfinite(c)) for c in budgets):
        raise ShapeError("--compute: budgets are positive FLOP counts, e.g. 1e18,3e18,1e19")
    out: list[IsoRun] = []
    for C in sorted(set(float(c) for c in budgets)):
        mid = (centre or centre_by_ratio)(C)
        seen: set[tuple[int, int]] = set()
        for k in range(sizes):
            N = mid * spread ** (2 * k / (sizes - 1) - 1)
            m = aspect_ratio_family(N, [aspect_ratio], ff_ratio, head_dim=head_dim,
                                    n_head=n_head, multiple=multiple, tolerance=math.inf,
                                    **base)[0]
            if m.shape is None:
                raise ShapeError(f"no shape of d_model / n_layer {aspect_ratio:g} near "
                                 f"{N:.3g} parameters: {m.note}")
            key = (m.shape.n_layer, m.shape.d_model)
            if key not in seen:
                seen.add(key)
                out.append(IsoRun(C, N, m.shape))
        if len(seen) < 3:
            raise ShapeError(f"at {C:.3g} FLOPs the sizes give {len(seen)} distinct shape(s) "
                             "(too small for width steps of --multiple): raise --spread or "
                             "the budget")
    return out


def isoflop_spec(runs: Sequence[IsoRun], name: str, description: str,
                 model: dict[str, Any] | None = None) -> dict[str, Any]:
    """The sweep spec (a dict, as TOML reads) that trains ``runs``: each a ``grid.shapes``
    entry with its dimensions and budget."""
    from archfit.sweep.spec import MODEL

    shapes = [{"n_layer": r.shape.n_layer, "d_model": r.shape.d_model,
               "n_head": r.shape.n_head, "d_ff": r.shape.d_ff, "flops": r.flops} for r in runs]
    model = dict(model or {})
    train = {"ctx": model.pop("n_ctx")} if "n_ctx" in model else {}
    if model.pop("qkv_bias", False):
        raise ShapeError("a sweep spec sets biases with bias = true (all of them); q/k/v-only "
                         "biases are not a spec's")
    unknown = sorted(set(model) - set(MODEL))
    if unknown:
        raise ShapeError(f"a sweep spec has no model key {unknown[0]!r}")
    raw: dict[str, Any] = {"name": name, "description": description, "seeds": [0],
                           "lrs": ["auto"], "model": model, "grid": {"shapes": shapes}}
    if train:
        raw["train"] = train
    return raw
