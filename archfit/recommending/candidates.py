"""The buildable shapes near a law's optimum and their ranking: the optimum at the target size,
the iso-parameter candidates around it (within the width step, head and tensor-parallel
constraints), each ranked by the law's predicted loss, and a note when the constraints move the
depth."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Callable

from archfit.errors import RecommendError, ShapeError
from archfit.laws import Fit
from archfit.recommending.options import Options, Size
from archfit.shapes import Shape, kaplan_width
from archfit.shapes.families import iso_param_family


def optimum(shape_fit: Fit, target: Size, opts: Options) -> tuple[float, float, float]:
    """(n_layer*, d_model*, the non-embedding size they are for). With a total-parameter target
    the embedding share is taken off by fixed-point iteration on the optimal width."""
    law, N_ne = shape_fit.law_obj, target.value
    L_opt = d_opt = math.nan
    for _ in range(4 if target.total else 1):
        L_opt, d_opt = law.optimum(shape_fit.params, N_ne)
        if not (math.isfinite(L_opt) and L_opt > 0):
            raise RecommendError(f"the {shape_fit.law} fit gives no finite optimal depth at "
                                 f"{N_ne:.3g} parameters")
        if target.total:
            w = max(opts.step, int(round(d_opt / opts.step)) * opts.step)
            emb = Shape(n_layer=1, d_model=w, n_head=w // opts.head_dim,
                        **opts.base).params_embedding
            N_ne = max(target.value - emb, target.value * 0.05)
    return L_opt, d_opt, N_ne


DEPTH_SPAN = (0.75, 1.3)  # candidate depths around the optimum (recommend --objective: wider)


def candidates(N_ne: float, L_opt: float, ff: float, opts: Options, *,
                span: tuple[float, float] = DEPTH_SPAN,
                d_ff_rule: Callable[[int], int] | None = None) -> list[Shape]:
    if kaplan_width(N_ne, L_opt) < opts.step / 2:
        raise RecommendError(
            f"the law's optimal depth at {N_ne:.3g} parameters is {L_opt:.3g} layers, which "
            f"leaves a width below one step of {opts.step}: no buildable shape is near it "
            "(check the fit's verdict; the data may not constrain the optimum)")
    lo = max(1, int(math.floor(L_opt * span[0])))
    hi = max(lo + 1, int(math.ceil(L_opt * span[1])))
    if hi - lo + 1 > 64:  # very deep optima: ~64 depths spread over the range, and its centre
        depths = {round(lo + i * (hi - lo) / 63) for i in range(64)}  # never the whole range
        depths |= {max(1, math.floor(L_opt)), math.ceil(L_opt)}
    else:
        depths = set(range(lo, hi + 1))
    try:
        members = iso_param_family(N_ne, sorted(depths), [ff], head_dim=opts.head_dim,
                                   multiple=opts.step, ff_multiple=opts.ff_multiple,
                                   ff_slack=0.05, tolerance=0.02, n_kv_head=opts.n_kv_head,
                                   d_ff_rule=d_ff_rule,
                                   **opts.base)
    except ShapeError as e:
        raise RecommendError(str(e)) from None
    cands = [m.shape for m in members
             if m.shape is not None and not (opts.tp and m.shape.n_head % opts.tp)]
    if not cands:
        raise RecommendError("no buildable shape near the optimum: loosen --multiple-of, "
                             "--head-dim or --tp")
    return cands


# the finest width step archfit advises: head_dim 8 is the smallest any model family uses
FINEST_STEP = 8


def _finer(opts: Options, cands: list[Shape], err: Callable[[Shape], float]) -> str:
    """What to loosen for a size no shape lands near: the width knobs that can still go finer
    (above :data:`FINEST_STEP`, or a tensor-parallel constraint), else the buildable sizes on
    either side, since no finer step is worth advising."""
    knobs = ([f"--multiple-of (now {opts.multiple_of})"] if opts.multiple_of > FINEST_STEP
             else []) + ([f"--head-dim (now {opts.head_dim})"] if opts.head_dim > FINEST_STEP
                         else []) + ([f"--tp (now {opts.tp})"] if (opts.tp or 1) > 1 else [])
    if knobs:
        return "lower " + " or ".join(knobs)
    below = max((s for s in cands if err(s) < 0), key=err, default=None)
    above = min((s for s in cands if err(s) > 0), key=err, default=None)
    near = [f"{s.n_layer} x {s.d_model} ({s.params_non_embedding:,} non-embedding, "
            f"{err(s):+.0%})" for s in (below, above) if s is not None]
    return (f"the widths are already in the finest steps archfit advises ({opts.step}), so "
            "this size falls between buildable shapes: ask for one of "
            + " or ".join(near) + ", or count a shape of your own with 'archfit shape "
            "--layers L --width W'")


def rank(cands: list[Shape], target: Size, shape_fit: Fit, *, L_opt: float, N_ne: float,
          opts: Options, notes: list[str],
          priced: Callable[[Shape], float | None] | None = None,
          ) -> tuple[Shape, list[dict[str, Any]], list[tuple[Shape, float | None]]]:
    """Candidates within 2% of the target, compared at the same size. With a loss model the
    recommendation is the argmin of the law's predicted loss at the target size and every
    penalty is measured from it (so none is negative); without one, it is the integer depth
    nearest the optimum and the alternatives are ranked by distance from it."""
    def err(s: Shape) -> float:
        return ((s.params_total if target.total else s.params_non_embedding)
                - target.value) / target.value

    within = [s for s in cands if abs(err(s)) <= 0.02]
    if not within:
        closest = min(cands, key=lambda s: abs(err(s)))
        share = (closest.params_total - closest.params_non_embedding) / target.value
        if target.total and share > 0.5:  # the embeddings, not the width step, leave no room
            raise RecommendError(
                f"no shape lands within 2% of {target.value:.3g} parameters (embeddings "
                f"counted): the closest, {closest.n_layer} x {closest.d_model} "
                f"({err(closest):+.0%}), spends {share:.0%} of that size on its "
                f"{closest.vocab_size:,}-token embeddings alone; give a larger "
                "size or budget, fewer tokens per parameter, or a smaller --vocab")
        raise RecommendError(
            f"no shape near the optimal depth lands within 2% of {target.value:.3g} parameters "
            f"with widths in steps of {opts.step} (closest: {closest.n_layer} x "
            f"{closest.d_model}, {err(closest):+.0%}); " + _finer(opts, cands, err))
    law = shape_fit.law_obj
    loss = {s: (priced(s) if priced else law.shape_loss(shape_fit.params, shape_fit.extra, s,
                                                        N_ne)) for s in within}
    has_loss = all(v is not None and math.isfinite(v) for v in loss.values())
    if has_loss:
        best = min(within, key=lambda s: (loss[s], abs(err(s))))
    else:
        best = min(within, key=lambda s: (abs(math.log(s.n_layer / L_opt)), abs(err(s))))
        notes.append("alternatives are ranked by distance from the optimal depth: this fit has "
                     "no loss model to predict their loss penalty")
    rows = [{"n_layer": s.n_layer, "d_model": s.d_model, "n_head": s.n_head, "d_ff": s.d_ff,
             "params_non_embedding": s.params_non_embedding, "params_total": s.params_total,
             "rel_error": err(s),
             "loss_penalty": loss[s] - loss[best] if has_loss else None,  # type: ignore[operator]
             "aspect_ratio": s.aspect_ratio, "recommended": s == best} for s in within]
    rows.sort(key=lambda r: (not r["recommended"], r["loss_penalty"] if has_loss else
                             abs(math.log(r["n_layer"] / L_opt)), abs(r["rel_error"])))
    pen = [(s, loss[s] - loss[best] if has_loss else None) for s in within]  # type: ignore[operator]
    _price_constraints(best, L_opt=L_opt, N_ne=N_ne, shape_fit=shape_fit, opts=opts,
                       notes=notes, priced=priced)
    return best, rows[: opts.top + 1], pen


CONSTRAINT_NOTE = "the constraints"  # how the note on a depth moved by constraints begins


def _price_constraints(best: Shape, *, L_opt: float, N_ne: float, shape_fit: Fit,
                       opts: Options, notes: list[str],
                       priced: Callable[[Shape], float | None] | None = None) -> None:
    """A note when the width step (head_dim, --tp, --kv-heads, --multiple-of) moves the depth
    more than 10% from the law's optimum, with the predicted loss cost where the law has one."""
    move = best.n_layer / L_opt - 1
    if abs(move) <= 0.10:
        return
    why = [f"widths in steps of {opts.step:,}"] + ([f"--tp {opts.tp}"] if opts.tp else []) + (
        [f"{opts.n_kv_head} kv heads"] if opts.n_kv_head else [])
    law = shape_fit.law_obj
    cost = ""
    price = priced or (lambda s: law.shape_loss(shape_fit.params, shape_fit.extra, s, N_ne))
    rel = False
    try:  # shape_loss sizes each depth to exactly N: the cost is the depth's alone
        at_opt = price(replace(best, n_layer=max(1, round(L_opt))))
        here = price(best)
        rel = law.loss_level(shape_fit.params, shape_fit.extra, N_ne) == 1.0
    except (ArithmeticError, ValueError, ShapeError):
        at_opt = here = None
    if at_opt is not None and here is not None and math.isfinite(here - at_opt):
        cost = (f"; predicted loss cost {here - at_opt:+.3%} of the loss against the optimum "
                "(Kaplan et al. 2020's curvature)" if rel and not priced else
                f"; predicted loss cost {here - at_opt:+.4f} nats/token against the optimum")
    elif here is None:
        cost = ("; this law has no loss model to price it (a depth-joint or depth-width fit "
                "has one: archfit fit --law depth-joint)")
    notes.append(f"{CONSTRAINT_NOTE} ({', '.join(why)}) put the depth at {best.n_layer}, "
                 f"{move:+.0%} from the law's optimum {L_opt:.1f}{cost}"
                 + _nearer(best, L_opt, N_ne))


NEARER_SIZE = 0.10  # how far from the target size a shape nearer the optimum may be offered


def _nearer(best: Shape, L_opt: float, N: float) -> str:
    """The shape of the same width, heads and d_ff whose depth is nearest the optimum while its
    size stays within 10% of the target (a different size: offered, never chosen)."""
    far = max(1, round(L_opt))
    if far == best.n_layer:
        return ""
    if abs(best.params_non_embedding / N - 1) <= NEARER_SIZE:
        # size grows with depth, so the depths within 10% of N are one run about best's, and
        # the one nearest the optimum is that run's end toward it: found by bisection (an
        # optimum of thousands of layers would otherwise build a shape a layer)
        inside, outside = best.n_layer, far + (1 if far > best.n_layer else -1)
        while abs(outside - inside) > 1:
            mid = (inside + outside) // 2
            if abs(replace(best, n_layer=mid).params_non_embedding / N - 1) <= NEARER_SIZE:
                inside = mid
            else:
                outside = mid
        if inside == best.n_layer:
            return ""
        s = replace(best, n_layer=inside)
    else:  # best itself outside: every depth between, as the rule reads
        lo, hi = sorted((best.n_layer, far))
        fits = [replace(best, n_layer=L) for L in range(lo, hi + 1) if L != best.n_layer]
        fits = [s for s in fits if abs(s.params_non_embedding / N - 1) <= NEARER_SIZE]
        if not fits:
            return ""
        s = min(fits, key=lambda x: abs(math.log(x.n_layer / L_opt)))
    return (f"; nearer the optimum with the same constraints: {s.n_layer} x {s.d_model:,} "
            f"({s.n_layer / L_opt - 1:+.0%} from it) at {s.params_non_embedding:,} "
            f"non-embedding parameters ({s.params_non_embedding / N - 1:+.1%} from the target)")
