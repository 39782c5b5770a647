"""Families of shapes at one size: for each depth the width that lands on a parameter target
(iso-parameter, Kaplan's aspect ratios, Petty's fixed width). Built on the shape core
(:mod:`archfit.shapes`), which counts every shape."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, NamedTuple, Sequence

from archfit.errors import ShapeError
from archfit.shapes.shape import ARCH_FIELDS, Shape


class FamilyMember(NamedTuple):
    """One member of an iso-parameter family: the shape closest to the target, or why none is.
    ``target`` (non-embedding parameters) and ``n_layer``; ``shape`` (a Shape, or None when no
    width lands), its ``rel_error`` from the target (or None) and ``within_tolerance``; a
    ``note``; and, for a member without a shape, the ``ff_ratio`` and ``aspect_ratio`` it asked
    for."""

    target: float
    n_layer: int
    shape: Shape | None
    rel_error: float | None
    within_tolerance: bool
    note: str = ""
    ff_ratio: float | None = None
    aspect_ratio: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n_layer": self.n_layer,
            "target_params_non_embedding": self.target,
            "within_tolerance": self.within_tolerance,
            "rel_error": self.rel_error,
            "note": self.note,
        }
        if self.shape is not None:
            s = self.shape
            out.update(
                d_model=s.d_model, n_head=s.n_head, n_kv_head=s.n_kv_head, d_ff=s.d_ff,
                ff_ratio=s.ff_ratio, head_dim=s.head_dim, aspect_ratio=s.aspect_ratio,
                params_non_embedding=s.params_non_embedding, params_total=s.params_total,
                params_embedding=s.params_embedding,
            )
        else:
            out.update(d_model=None, n_head=None, d_ff=None, params_non_embedding=None,
                       ff_ratio=self.ff_ratio, aspect_ratio=self.aspect_ratio)
        return out


_BASE_FIELDS = ARCH_FIELDS


def _check_target(target: float) -> None:
    if not (target > 0 and math.isfinite(target)):
        raise ShapeError(f"target parameter count must be positive and finite, got {target}")


def _heads_for(d_model: int, head_dim: int | None, n_head: int | None) -> int | None:
    if n_head is not None:
        return n_head if d_model % n_head == 0 else None
    assert head_dim is not None
    return d_model // head_dim if d_model % head_dim == 0 else None


def _width_candidates(target: float, n_layer: int, ff_ratio: float, multiple: int,
                      mlp: str, kv_per_d: float = 1.0, kv_dim: int = 0, mlps: float = 1.0
                      ) -> list[int]:
    """Widths around the one whose count is ``target``: per layer Q and O take 2d², K and V take
    2d·kv_dim (``kv_per_d``·d when the kv width grows with d, MHA: 1), the MLP mats·ff·d²
    (``mlps`` times: a mixture of experts' counted experts over its granularity)."""
    mats = 3 if mlp == "swiglu" else 2
    a = n_layer * (2 + 2 * kv_per_d + mats * ff_ratio * mlps)
    b = 2 * n_layer * kv_dim
    d0 = (-b + math.sqrt(b * b + 4 * a * target)) / (2 * a)
    k = max(1, round(d0 / multiple))
    return sorted({m * multiple for m in range(max(1, k - 2), k + 3)})


def _kv_terms(head_dim: int | None, n_head: int | None, ratio: int,
              n_kv_head: int | None) -> dict[str, Any]:
    """How the key/value width depends on d: a fixed kv width (fixed kv heads of a fixed head
    size), or a fraction of d (MHA, a GQA ratio, or fixed heads of a growing size)."""
    if n_kv_head is None:
        return {"kv_per_d": 1.0 / ratio}
    if head_dim is not None:
        return {"kv_per_d": 0.0, "kv_dim": n_kv_head * head_dim}
    return {"kv_per_d": n_kv_head / n_head}  # type: ignore[operator]


def _ff_candidates(nominal_shape: Shape, ff_ratio: float, target: float, ff_multiple: int,
                   slack: float, line: tuple[float, float]) -> list[int]:
    """d_ff values worth trying: the nominal ratio (the nearest ``ff_multiple`` multiple when
    it is not a whole number), and the ``ff_multiple`` multiples on either
    side of the d_ff that would hit ``target`` exactly (the count is linear in d_ff: ``line``),
    kept within ``slack`` of the nominal ratio."""
    d_model = nominal_shape.d_model
    nominal = max(1, int(round(ff_ratio * d_model)))
    if slack <= 0:
        return [nominal]
    n0, slope = line
    exact = nominal + (target - n0) / slope
    lo = max(1, math.ceil(ff_ratio * d_model * (1 - slack) / ff_multiple)) * ff_multiple
    hi = math.floor(ff_ratio * d_model * (1 + slack) / ff_multiple) * ff_multiple
    # a whole ratio (4 d_model) is kept as is; a fractional one (8/3) lands on a multiple
    out = {nominal if float(ff_ratio * d_model).is_integer() else
           max(1, round(ff_ratio * d_model / ff_multiple)) * ff_multiple}
    for k in (math.floor(exact / ff_multiple), math.ceil(exact / ff_multiple)):
        v = min(max(k * ff_multiple, lo), max(lo, hi))
        if v > 0:
            out.add(v)
    return sorted(out)


_Blocks = dict[tuple[int, int], "tuple[Shape, int, int, float] | None"]


def _one_block(blocks: _Blocks, d: int, h: int, ff: float, n_kv: int, base: dict[str, Any],
               active: bool = False) -> tuple[Shape, int, int, float] | None:
    """The one-layer shape of width ``d`` with its count's lines, built once per width: a
    uniform count is linear in depth (:meth:`Shape.depth_line`) and in d_ff
    (:attr:`Shape.params_per_d_ff`), so a candidate depth and d_ff are scored without building
    their shape. None: no valid shape has this width."""
    if (d, h) not in blocks:
        try:
            one = Shape(n_layer=1, d_model=d, n_head=h, ff_ratio=ff, n_kv_head=n_kv, **base)
            blocks[d, h] = (one, *one.depth_line(active), one.d_ff_slope(active))
        except ShapeError:
            blocks[d, h] = None
    return blocks[d, h]


def _counted_mlps(base: dict[str, Any], count: str) -> tuple[bool, float]:
    """Whether the family counts active parameters, and how many dense MLPs' worth of
    parameters a block's counted MLP holds (a mixture of experts: its counted experts over
    its granularity; 1 for a dense block)."""
    if count not in ("total", "active"):
        raise ShapeError(f"count must be total or active, got {count!r}")
    active, E = count == "active", base.get("n_experts") or 0
    if not E:
        return active, 1.0
    experts = (base.get("top_k") or 0) if active else E
    return active, (experts + (base.get("n_shared_experts") or 0)) / (
        base.get("granularity") or 1.0)


def iso_param_family(
    target: float,
    depths: Iterable[int],
    ff_ratios: Sequence[float] = (4.0,),
    *,
    head_dim: int | None = 64,
    n_head: int | None = None,
    multiple: int = 64,
    n_kv_head_ratio: int = 1,
    n_kv_head: int | None = None,
    tolerance: float = 0.05,
    ff_multiple: int = 64,
    ff_slack: float = 0.15,
    d_ff_rule: Callable[[int], int] | None = None,
    count: str = "total",
    **base: Any,
) -> list[FamilyMember]:
    """For each depth (and ff ratio), the width whose non-embedding count lands closest to ``target``.
    A mixture of experts (``base`` with ``n_experts``) is sized by its total non-embedding
    count, or with ``count="active"`` by its active one.

    Widths are multiples of ``multiple``; heads follow from a fixed ``head_dim`` (default 64) or
    a fixed ``n_head``. ``n_kv_head_ratio`` groups query heads per key/value head (GQA), or
    ``n_kv_head`` fixes the number of key/value heads (as Llama-2-70B's 8); widths are sized with
    the kv heads the shape will have.
    ``d_ff`` is ``ff_ratio * d_model`` rounded to ``ff_multiple``; with ``ff_slack > 0`` it may move
    up to that fraction away from the nominal ratio (in ``ff_multiple`` steps) when that brings the
    count closer to the target: a width step of 64 is a coarse knob at small depth, and d_ff is the
    fine one. The achieved ``ff_ratio`` is reported; ``ff_slack=0`` keeps the ratio exact.
    ``d_ff_rule`` (Llama's, say) gives d_ff as a function of d_model instead. ``base`` sets the other shape fields (vocab_size, n_ctx, mlp, ...). Members whose relative
    error exceeds ``tolerance`` are returned with ``within_tolerance=False`` and a note.
    Long because the loops over ff ratio, depth, width and d_ff share one family's state.
    """
    _check_target(target)
    if (head_dim is None) == (n_head is None):
        raise ShapeError("give exactly one of head_dim or n_head to fix the attention heads")
    if multiple <= 0:
        raise ShapeError(f"multiple must be positive, got {multiple}")
    unknown = set(base) - set(_BASE_FIELDS)
    if unknown:
        raise ShapeError(f"unknown shape options {sorted(unknown)}; allowed: {', '.join(_BASE_FIELDS)}")
    active, mlps = _counted_mlps(base, count)
    members: list[FamilyMember] = []
    for ff in ff_ratios:
        if not ff > 0:
            raise ShapeError(f"ff ratios must be positive, got {ff}")
        blocks: _Blocks = {}  # one block per width, shared by the depths that try it
        for L in depths:
            if int(L) != L or L <= 0:
                raise ShapeError(f"depths must be positive whole numbers, got {L}")
            L = int(L)
            best: tuple[float, float, Shape, int] | None = None
            # with fixed kv heads of a fixed size, only widths whose head count they divide
            step = multiple if not (n_kv_head and head_dim) else math.lcm(
                multiple, head_dim * n_kv_head)
            for d in _width_candidates(target, L, ff, step, base.get("mlp", "gelu"),
                                       mlps=mlps, **_kv_terms(head_dim, n_head, n_kv_head_ratio,
                                                              n_kv_head)):
                h = _heads_for(d, head_dim, n_head)
                if h is None or h % n_kv_head_ratio or (n_kv_head and h % n_kv_head):
                    continue
                got = _one_block(blocks, d, h, ff, n_kv_head or h // n_kv_head_ratio, base,
                                 active)
                if got is None:
                    continue
                nominal, block, rest, per_ff = got
                n0, slope = line = L * block + rest, L * per_ff
                for d_ff in ([_ruled_width(d_ff_rule, d)] if d_ff_rule is not None else
                             _ff_candidates(nominal, ff, target, ff_multiple, ff_slack, line)):
                    err = (n0 + slope * (d_ff - int(nominal.d_ff or 0)) - target) / target
                    # parameter error first; a small price for leaving the nominal ff ratio
                    score = abs(err) + 0.1 * abs(math.log(d_ff / d / ff))
                    if best is None or score < best[0]:
                        best = (score, err, nominal, d_ff)
            if best is None:
                members.append(FamilyMember(target, L, None, None, False,
                                            note="no width is a multiple of both "
                                                 f"{multiple} and the head constraint",
                                            ff_ratio=ff))
                continue
            s, err = best[2].with_(n_layer=L, d_ff=best[3]), best[1]
            ok = abs(err) <= tolerance
            note = "" if ok else (f"closest width {s.d_model} misses the target by {err:+.1%} "
                                  f"(tolerance {tolerance:.0%}); depth {L} does not fit this size")
            members.append(FamilyMember(target, L, s, err, ok, note, ff_ratio=ff))
    return members


def fixed_width_family(
    target: float,
    d_model: int,
    depths: Iterable[int],
    *,
    head_dim: int | None = 64,
    n_head: int | None = None,
    ff_multiple: int = 64,
    tolerance: float = 0.05,
    **base: Any,
) -> list[FamilyMember]:
    """Petty et al. (2023)-style family: hold ``d_model``, vary depth, and pick ``d_ff``
    (a multiple of ``ff_multiple``) so the non-embedding count stays at ``target``."""
    _check_target(target)
    h = _heads_for(d_model, head_dim, n_head)
    if h is None:
        raise ShapeError(f"d_model {d_model} is not divisible by the head size/count asked for")
    members = []
    for L in depths:
        L = int(L)
        probe = Shape(n_layer=L, d_model=d_model, n_head=h, d_ff=ff_multiple, **base)
        per_ff = probe.params_non_embedding
        probe2 = probe.with_(d_ff=2 * ff_multiple)
        slope = (probe2.params_non_embedding - per_ff) / ff_multiple
        ff_exact = ff_multiple + (target - per_ff) / slope
        k = round(ff_exact / ff_multiple)
        if k < 1:
            members.append(FamilyMember(target, L, None, None, False,
                                        note=f"attention alone at depth {L} exceeds the target"))
            continue
        s = probe.with_(d_ff=k * ff_multiple)
        err = (s.params_non_embedding - target) / target
        ok = abs(err) <= tolerance
        members.append(FamilyMember(target, L, s, err, ok,
                                    "" if ok else f"misses the target by {err:+.1%}"))
    return members


def aspect_ratio_family(
    target: float,
    aspect_ratios: Iterable[float],
    ff_ratio: float = 4.0,
    *,
    head_dim: int | None = 64,
    n_head: int | None = None,
    multiple: int = 64,
    tolerance: float = 0.05,
    **base: Any,
) -> list[FamilyMember]:
    """Kaplan et al. (2020)-style family: for each aspect ratio d_model/n_layer, the
    (depth, width) pair closest to ``target`` non-embedding parameters."""
    _check_target(target)
    mats = 3 if base.get("mlp", "gelu") == "swiglu" else 2
    members = []
    for ar in aspect_ratios:
        if not ar > 0:
            raise ShapeError(f"aspect ratios must be positive, got {ar}")
        L0 = (target / ((4 + mats * ff_ratio) * ar * ar)) ** (1 / 3)
        best: tuple[float, Shape] | None = None
        for L in {max(1, math.floor(L0)), max(1, math.ceil(L0))}:
            for m in iso_param_family(target, [L], [ff_ratio], head_dim=head_dim, n_head=n_head,
                                      multiple=multiple, tolerance=math.inf, **base):
                if m.shape is None:
                    continue
                # score by both parameter error and aspect-ratio error
                score = abs(m.rel_error or 0) + abs(math.log(m.shape.aspect_ratio / ar))
                if best is None or score < best[0]:
                    best = (score, m.shape)
        if best is None:
            members.append(FamilyMember(target, round(L0), None, None, False,
                                        note="no shape fits", aspect_ratio=ar))
            continue
        s = best[1]
        err = (s.params_non_embedding - target) / target
        ok = abs(err) <= tolerance
        members.append(FamilyMember(target, s.n_layer, s, err, ok,
                                    "" if ok else f"misses the target by {err:+.1%}",
                                    aspect_ratio=ar))
    return members


# ---------------------------------------------------------------------------- layer variants
REINVEST = ("none", "width", "depth")  # where a variant's freed parameters go


def plan_variant(shape: Shape, variant: str, reinvest: str = "none") -> Shape:
    """``shape`` with the per-layer plan ``variant`` (``"uniform"``, ``"no-mlp:0"``,
    ``"no-attn:mid"``, ... :func:`archfit.shapes.parse_plan`), its freed parameters put back:

    ``none``  the same depth and width (a smaller model);
    ``width`` the MLP width d_ff of the layers that keep an MLP (d_model and heads kept: the
              finest step there is, so the variant lands on ``shape``'s non-embedding count
              within a multiple of 8 of d_ff);
    ``depth`` the depth (plan indices resolved for it: ``-1`` stays the last layer) whose count
              is closest to ``shape``'s.
    """
    from archfit.shapes.layer_plan import parse_plan

    if reinvest not in REINVEST:
        raise ShapeError(f"reinvest must be one of {', '.join(REINVEST)}, got {reinvest!r}")
    if variant.strip() == "uniform":
        return shape
    target = shape.params_non_embedding
    plan = parse_plan(variant, shape.n_layer)
    if reinvest == "none":
        return shape.with_(**plan)
    if plan.get("heads_per_layer"):
        raise ShapeError(f"variant {variant!r}: heads per layer are given for "
                         f"{shape.n_layer} layers at width {shape.d_model}; use reinvest = "
                         "\"none\" (the head counts fix the attention's size)")
    if reinvest == "depth":
        options = []
        for L in range(shape.n_layer, 2 * shape.n_layer + 2):
            try:
                options.append(shape.with_(n_layer=L, **parse_plan(variant, L)))
            except ShapeError:
                continue
    else:
        planned = shape.with_(**plan)
        if not planned.no_mlp or len(planned.no_mlp) < shape.n_layer:
            # the count is linear in d_ff: solve for the MLP width that restores it
            slope = planned.with_(d_ff=int(planned.d_ff or 0) + 1).params_non_embedding \
                - planned.params_non_embedding
            f = int(planned.d_ff or 0) + (target - planned.params_non_embedding) / max(slope, 1)
            step = 8 if f >= 64 else 1  # hardware-friendly where the width allows
            options = [planned.with_(d_ff=max(step, int(round(f / step)) * step))]
        else:
            options = []
    if not options:
        raise ShapeError(f"variant {variant!r} has no {reinvest} near {shape.n_layer} x "
                         f"{shape.d_model} that holds it")
    return min(options, key=lambda s: abs(s.params_non_embedding - target))


def require_a_fit(members: list[FamilyMember], target: float, tolerance: float) -> None:
    """Refuse a family in which no member lands within ``tolerance`` of ``target``, naming the
    closest: a table of misses is not an answer."""
    if any(m.within_tolerance for m in members):
        return
    best = min(members, key=lambda m: abs(m.rel_error) if m.rel_error is not None
               else float("inf"))
    raise ShapeError(
        f"no depth/width fits {target:.4g} non-embedding parameters within {tolerance:.0%}: "
        + (f"the closest, {best.n_layer} x {best.shape.d_model}, is {best.rel_error:+.0%} "
           "off; " if best.rel_error is not None and best.shape is not None else "")
        + "change --params, the depths, or the width step (--head-dim, --multiple-of)")


def _ruled_width(rule: Callable[[int], int], d_model: int) -> int:
    """A framework's d_ff for a width, checked: a positive whole number (a rule that raises or
    returns anything else is the caller's mistake, said in one line)."""
    try:
        v = rule(d_model)
    except Exception as e:  # the user's function: whatever it raises is named, not passed on
        raise ShapeError(f"d_ff_rule({d_model}) raised {type(e).__name__}: {e}"[:200]) from None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= 10 ** 9:
        raise ShapeError(f"d_ff_rule({d_model}) gave {str(v)[:40]}: a d_ff rule returns a "
                         "positive whole number (at most 1e9)")
    return v
