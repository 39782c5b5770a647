"""From a law to a buildable shape: ``recommend(params=1e12)`` or ``recommend(compute=1e24)``.

Conventions: the target is Kaplan's N (non-embedding parameters) for shape laws; with
``compute=C`` the compute-optimal N_opt(C) of a compute law is in that fit's own convention
(total parameters for Hoffmann et al. and Epoch), and the shape is sized so its
``params_total`` lands on N_opt.

This module names no law: it asks each fit's law object for its role and its optimum.
Objectives beyond loss live apart (:mod:`archfit.recommending.objectives`)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Callable

from archfit.errors import RecommendError, ShapeError, UninformativeWarning
from archfit.interval import Interval
from archfit.laws import ComputeLaw, Fit, MoELaw, ShapeLaw, VocabularyLaw, kinds, load_fit
from archfit.laws.published import DEFAULT_COMPUTE_LAW, DEFAULT_SHAPE_LAW
from archfit.recommending.candidates import candidates, optimum, rank
from archfit.recommending.fits import Fits
from archfit.recommending.options import (Plan, Size, ff_rule, given_fits, options_for,
                                          resolve_target)
from archfit.recommending.recipe import recipe_for
from archfit.recommending.request import KEYWORDS, WIDTH_STEP, RecommendRequest
from archfit.recommending.result import Recommendation
from archfit.shapes import Shape, kaplan_width
from archfit.shapes.architectures import (ARCHITECTURES, DEFAULT_ARCHITECTURE, LLAMA,
                                          Architecture, get_architecture)


def recommend(params: float | RecommendRequest | None = None, **options: Any) -> Recommendation:
    """Recommend a buildable shape for a :class:`RecommendRequest`, or for ``params``
    non-embedding parameters and the flat options :meth:`RecommendRequest.of` reads (a
    notebook's ``recommend(7e9, fit="levine2020", family="gpt2")``; ``compute=1e24`` instead of
    a size). See :mod:`archfit.recommending.request` for every option.

    The shape law's optimum at the size (or at a compute law's N_opt for a budget), its
    near-optimal set (:mod:`archfit.recommending.near_optimal`), whose centre in log depth is
    the pick, the buildable candidates around it in the family's block (the family's head split
    and a width step of 128 kept where the size allows, finer ones otherwise, with a note), the
    optimum's interval, the verdict and a recipe. When the verdict is ``uninformative`` this
    warns (:class:`UninformativeWarning`) or, with ``strict``, raises
    :class:`RecommendError`: the evidence does not support the shape."""
    if isinstance(params, RecommendRequest):
        if options:
            raise RecommendError(f"give a RecommendRequest or options, not both "
                                 f"({', '.join(options)})")
        req = params
    else:
        req = RecommendRequest.of(params, **options)
    if req.experts is not None:
        raise RecommendError("a request with experts (active_params) is a mixture of experts: "
                             "archfit.recommend_sparse(request) answers it")
    if req.objective.on_hardware:
        raise RecommendError("a request with an objective beyond loss (or a GPU) weighs the "
                             "candidates on hardware: archfit.recommending.recommend_for(request) "
                             "answers it")
    if req.grid.vocab_size == "auto":
        return _vocabulary_auto(req)
    fits = _fits(req)
    notes: list[str] = []
    # a vocabulary fit given, and nothing here reads it (_vocabulary_auto drops this note)
    if (vf := fits.of(VocabularyLaw)) is not None:
        notes.append(f"the vocabulary fit {vf.label}{UNREAD_VOCAB_FIT}")
    arch = _architecture(req.block.family, fits.shape, notes)
    plans = _plans(req, arch, fits.shape, notes)
    target = resolve_target(req.target, fits)
    first = plans[0]
    opts = options_for(first.heads(first.head_dim, first.multiple_of, None, None))  # heads aside
    ff, rule = ff_rule(arch.ff_ratio if req.block.ff_ratio is None else req.block.ff_ratio,
                       req.block.d_ff_rule, fits, N=target.value, opts=opts, notes=notes)
    shape_fit = fits.shape
    L_opt, d_opt, N_ne = optimum(shape_fit, target, opts)
    near, priced = _near(shape_fit, N_ne, req.grid.tolerance, notes)
    if near is not None and near["centre_from"] != shape_fit.label:  # the set's centre
        L_opt, d_opt = near["centre"], kaplan_width(N_ne, near["centre"])
    try:
        best, rows, pen, plan = _build(N_ne, L_opt, ff, rule, plans=plans, req=req,
                                       target=target, shape_fit=shape_fit, notes=notes,
                                       priced=priced)
    except RecommendError as e:
        raise RecommendError(_unbuildable(e, req, target, first)) from None
    if plan != plans[0]:
        notes.append(_plan_note(arch, plans[0], plan))
    ci = _optimum_ci(shape_fit, N_ne, notes)
    _penalty_cis(rows, near, shape_fit, N_ne, best)
    notes += [w] if (w := _below_data(shape_fit, N_ne)) else []
    t = req.target
    verdict = _verdict(shape_fit, N_ne, fits, compute=t.compute, strict=req.strict,
                       conditions={"unique_tokens": t.unique_tokens}
                       if t.unique_tokens is not None else None)
    law = shape_fit.law_obj
    src = shape_fit.source or (", ".join(i.get("path", "") for i in shape_fit.inputs)
                               or "fitted by archfit")
    compute = target.compute
    if t.params is not None and t.tokens is not None:
        compute = _tokens_priced(best, fits, t.tokens, notes)
    return _kind_stages(req, fits, Recommendation(
        shape=best, family=arch.name, family_text=arch.describe(), target_params=target.value,
        target_convention=target.convention,
        law=shape_fit.label, law_formula=law.formula, law_source=src, n_layer_opt=L_opt,
        d_model_opt=d_opt, rel_error=rows[0]["rel_error"], ci=ci, alternatives_records=rows,
        compute=compute, notes=notes, trust=verdict.to_dict(), candidates=pen,
        shape_fit=shape_fit, fits=fits, **next_runs(shape_fit, N_ne, verdict.verdict),
        near_optimal=near, loss_model=(near or {}).get("loss_model"),
        recipe=recipe_for(best, fits, t.tokens, target.compute, asked=N_ne),
    )._with_vocabulary_note())


@dataclass(frozen=True)
class StageContext:
    """What a kind's stage reads: the request, its fits, the kind's own fit, and the
    recommendation the built-in stages made."""

    request: RecommendRequest
    fits: Fits
    fit: Fit
    recommendation: Recommendation


def _kind_stages(req: RecommendRequest, fits: Fits, rec: Recommendation) -> Recommendation:
    """The stage of each kind registered with one (:class:`archfit.laws.Kind`), applied to its
    fit where the request gives one; its record kept in ``rec.extras`` under the kind's role."""
    for kind in kinds():
        if kind.stage is None or (f := fits.of(kind.base)) is None:
            continue
        record = kind.stage(StageContext(req, fits, f, rec))
        if not isinstance(record, Mapping):
            raise RecommendError(f"the {kind.role} kind's stage answered "
                                 f"{type(record).__name__}, not a record (a mapping)")
        rec.extras[kind.role] = dict(record)
    return rec


# the note of a vocabulary fit given without --vocab auto
UNREAD_VOCAB_FIT = (" is read only with --vocab auto (vocab_size='auto'); this shape keeps the "
                    "vocabulary it was given")


def _vocabulary_auto(req: RecommendRequest) -> Recommendation:
    """The recommendation trained with the vocabulary law's pick (a fitted ``vocab`` law among
    the request's fits, else the published one): the shape at the family's
    (or the runs') vocabulary first, the pick at its recipe's training compute, then the
    recommendation again with it (the non-embedding shape does not move; the embeddings, the
    total and the recipe's tokens do), the pick and its predicted gain recorded."""
    from dataclasses import replace

    from archfit.recommending.vocabulary import (kept_vocabulary, law_of, vocabulary_note,
                                                 vocabulary_record)

    first = recommend(req.with_(grid=replace(req.grid, vocab_size=None)))
    tokens = (first.recipe or {}).get("tokens", {}).get("value") or 20.0 * first.target_params
    rec = vocabulary_record(first.shape, tokens, req.grid.vocab_multiple,
                            law_of(first.fits.of(VocabularyLaw) if first.fits else None))
    out = (recommend(req.with_(grid=replace(req.grid, vocab_size=rec["value"])))
           if rec["usable"] else first)
    out.notes = [n for n in out.notes
                 if not n.startswith("vocabulary (") and UNREAD_VOCAB_FIT not in n]
    out.notes.append(vocabulary_note(rec) + " (--vocab auto)")
    out.vocabulary = rec if rec["usable"] else kept_vocabulary(rec, tokens)
    return out


def _unbuildable(e: RecommendError, req: RecommendRequest, target: Size, plan: Plan) -> str:
    """Why no shape could be built, with the flags the size came from: a total size below the
    narrowest shape's embeddings says so (no width step is to blame), else the error as it
    was."""
    t = req.target
    if t.origin is not None:
        origin = t.origin
    elif t.params is not None:
        origin = f"--params {t.params:g}"
    else:
        flag = ("--tokens-per-param", t.tokens_per_param) if t.tokens_per_param is not None \
            else ("--inference-tokens", t.inference_tokens) if t.inference_tokens is not None \
            else ("--unique-tokens", t.unique_tokens) if t.unique_tokens is not None else None
        law = (target.compute or {}).get("law", "the compute law")
        origin = (f"{flag[0]} {flag[1]:g} with --compute {t.compute:g}" if flag else
                  f"--compute {t.compute:g}") + f" ({law})"
    vocab, narrow = plan.vocab_size, FINER_WIDTHS[-1][1]
    embeddings = vocab * narrow * (1 if plan.block["tied_embeddings"] else 2)
    if target.total and target.value <= embeddings:
        return (f"{target.value:.3g} parameters (embeddings counted) is less than the "
                f"embeddings alone of the narrowest shape ({embeddings:,}: vocab {vocab:,} x "
                f"width {narrow}); the size comes from {origin}: give a larger budget or fewer "
                "tokens per parameter, or a smaller --vocab")
    block = {k: plan.block[k] for k in ("mlp", "position", "norm", "bias", "tied_embeddings")}
    smallest = Shape(n_layer=1, d_model=narrow, n_head=1, vocab_size=vocab, n_ctx=plan.n_ctx,
                     **block).params_non_embedding
    if not target.total and target.value < smallest:
        return (f"{target.value:.3g} non-embedding parameters is below the smallest shape "
                f"archfit builds ({smallest:,}: one layer {narrow} wide); the size comes from "
                f"{origin}")
    return f"{e} (the size, {target.value:.3g} parameters, comes from {origin})"


def _tokens_priced(shape: Shape, fits: Fits, tokens: float, notes: list[str]
                   ) -> dict[str, Any] | None:
    """A size trained on the tokens given, priced as a FLOP budget spent that way: the compute
    law's split of C = 6 N D (N in its convention), and the predicted loss against the
    compute-optimal model of the same C (over-training, as ``--tokens-per-param`` prices it).
    None, with a note, where the law cannot price it."""
    from archfit.errors import ArchfitError
    from archfit.recommending.request import Target

    cf = fits.of(ComputeLaw) or load_fit(DEFAULT_COMPUTE_LAW)
    N = shape.params_total if "total" in cf.conventions.get("params", "total") else \
        shape.params_non_embedding
    try:
        return resolve_target(Target(compute=6.0 * N * tokens, tokens_per_param=tokens / N),
                              fits.with_fit(cf)).compute
    except ArchfitError as e:
        notes.append(f"{tokens:.3g} tokens cannot be priced against the compute-optimal model of "
                     f"the same FLOPs: {e}")
        return None


def _fits(req: RecommendRequest) -> Fits:
    """The request's fits by kind (a shape law by default), refusing a compute law alone for
    a size: it answers a budget."""
    given = [load_fit(f) for f in given_fits(list(req.fits) or None)]
    fits = Fits.given(given, DEFAULT_SHAPE_LAW)
    if (mf := fits.of(MoELaw)) is not None:
        raise RecommendError(f"{mf.label} is a {mf.law} fit: it weighs a mixture of experts' "
                             "granularity; give --active-params with it (or drop it for a "
                             "dense model)")
    cf = fits.of(ComputeLaw)
    if req.target.params is not None and cf is not None and not any(
            isinstance(f.law_obj, ShapeLaw) for f in given):
        raise RecommendError(
            f"a {cf.law} fit answers --compute (a FLOP budget), not --params; for "
            "--params give a shape-law fit (levine, depth-joint, depth-width) or drop --fit to "
            f"use {DEFAULT_SHAPE_LAW}")
    return fits


def _plans(req: RecommendRequest, arch: Architecture, fit: Fit | None, notes: list[str]
           ) -> list[Plan]:
    """The plans to try in turn, sharing the block, vocabulary and context (given, else the
    runs', else the family's): the family's head split and the default width step, then finer
    ones (or the heads and widths given)."""
    g = req.grid
    given = g.vocab_size if isinstance(g.vocab_size, int) else None  # "auto": resolved above
    vocab_size, n_ctx = runs_vocab_and_context(fit, given, g.n_ctx, notes, arch)
    block = {k: arch.fields[k] if v is None else v for k, v in req.block.overrides().items()}
    shared = Plan(block=block, vocab_size=vocab_size, n_ctx=n_ctx, top=g.top,
                  ff_multiple=req.block.ff_multiple)
    heads = (arch.head_plans() if g.tp is None and g.n_kv_head is None else
             [_given_heads(arch, g.tp, g.n_kv_head)])
    widths = ([(g.head_dim or WIDTH_STEP, g.multiple_of or WIDTH_STEP)]
              if g.head_dim is not None or g.multiple_of is not None else FINER_WIDTHS)
    plans = [shared.heads(h, m, t, k) for h, m in widths for t, k in heads]
    options_for(plans[0])  # what was given, with the family's rest: one line if wrong
    return plans


def _build(N_ne: float, L_opt: float, ff: float, rule: Callable[[int], int] | None, *,
           plans: list[Plan], req: RecommendRequest, target: Size, shape_fit: Fit,
           notes: list[str], priced: Callable[[Shape], float | None] | None
           ) -> tuple[Shape, list[dict[str, Any]], Any, Plan]:
    """The pick, the ranked alternatives and the priced candidates of the first plan (the
    family's head split, and widths) the size allows; and that plan."""
    for i, plan in enumerate(plans):
        opts = options_for(plan)
        try:
            cands = candidates(N_ne, L_opt, ff, opts, span=req.grid.depth_span, d_ff_rule=rule)
            best, rows, pen = rank(cands, target, shape_fit, L_opt=L_opt, N_ne=N_ne, opts=opts,
                                   notes=notes, priced=priced)
            return best, rows, pen, plan
        except RecommendError:
            if i == len(plans) - 1:
                raise
    raise AssertionError("no plan")  # plans is never empty


def _named(family: str | Architecture) -> Architecture:
    try:
        return get_architecture(family)
    except ShapeError as e:
        raise RecommendError(str(e)) from None


def _architecture(family: str | Architecture | None, fit: Fit, notes: list[str]
                  ) -> Architecture:
    """The family asked for; else the block the fit's runs shared (the law was fitted on it:
    a family of archfit's when the fields match, else that block as it is; a note says so);
    else the default, llama."""
    if family is not None:
        return _named(family)
    block = ((fit.diagnostics or {}).get("span") or {}).get("block")
    if not block:
        return get_architecture(DEFAULT_ARCHITECTURE)
    fields = {k: block[k] for k in ("mlp", "position", "norm", "bias", "tied_embeddings")}
    arch = next((a for a in ARCHITECTURES.values() if a.fields == fields), None)
    if arch is None:
        arch = Architecture("runs", fields, ff_ratio=4.0, vocab_size=LLAMA.vocab_size,
                            n_ctx=LLAMA.n_ctx, tp=None, n_kv_head=None,
                            text="the block of the runs", short=", ".join(
                                f"{k} {v}" for k, v in fields.items()))
    if block.get("ff_ratio"):
        arch = replace(arch, ff_ratio=block["ff_ratio"])
    notes.append(f"built in the {arch.name} family ({arch.short}, ff ratio {arch.ff_ratio:.3g}): "
                 f"the block of the runs {fit.label} was fitted on (--family to build another)")
    return arch


def _given_heads(arch: Architecture, tp: int | None, kv: int | None
                 ) -> tuple[int | None, int | None]:
    """(tp, kv heads) with one or both given: both as given (options checks them together);
    one alone, with the family's other where the two fit together (kv heads a multiple of tp,
    or tp of them), else without it."""
    if tp is not None and kv is not None:
        return tp, kv
    fam_tp, fam_kv = (arch.tp, kv) if tp is None else (tp, arch.n_kv_head)
    if fam_tp and fam_kv and fam_kv % fam_tp and fam_tp % fam_kv:
        return (tp, None) if tp is not None else (None, kv)
    return fam_tp, fam_kv


# left at their default, head_dim and the width step halve for sizes whose widths need a finer
# step (a 1e7-parameter model is a few hundred wide)
FINER_WIDTHS = [(128, 128), (64, 64), (32, 32), (16, 16)]


def _plan_note(arch: Architecture, wanted: Plan, got: Plan) -> str:
    """Why the family's head split (or the default width step) was not kept: the widths it
    needs are too coarse for a shape within 2% near the optimum at this size."""
    def split(p: Plan) -> str:
        heads = (f"heads a multiple of {p.tp} (--tp {p.tp}) and {p.n_kv_head} kv heads"
                 if p.tp else "one kv head per head, no tensor-parallel constraint")
        return f"head_dim {p.head_dim}, {heads}"

    step = wanted.head_dim * (wanted.tp or 1)
    return (f"the {arch.name} family's {split(wanted)} need widths in steps of {step:,}, which "
            f"leave no shape within 2% near the optimum at this size: built with {split(got)} "
            "(give --head-dim, --tp and --kv-heads to choose)")


def runs_vocab_and_context(fit: Fit | None, vocab_size: int | None, n_ctx: int | None,
                           notes: list[str], arch: Architecture = LLAMA) -> tuple[int, int]:
    """The vocabulary and context to build at: as given, else the ones the fit's runs shared
    (recorded in its span; a note says so), else the family's (``arch``)."""
    span = (fit.diagnostics.get("span") if fit is not None else None) or {}
    taken = []
    vocab: int = vocab_size if vocab_size is not None else span.get("vocab_size") or arch.vocab_size
    ctx: int = n_ctx if n_ctx is not None else span.get("n_ctx") or arch.n_ctx
    taken += [f"vocab {vocab:,}"] if vocab_size is None and span.get("vocab_size") else []
    taken += [f"context {ctx:,}"] if n_ctx is None and span.get("n_ctx") else []
    if taken:
        assert fit is not None  # a span is a fit's
        notes.append(f"{' and '.join(taken)} as in the runs {fit.label} was fitted on (give "
                     "--vocab / --ctx to build at others)")
    return vocab, ctx


def check_recommend_options(**options: Any) -> None:
    """Check what :func:`recommend` would be given, before any fit exists (a campaign spec's
    ``[recommend]``): the request it makes (:class:`RecommendRequest`: each option named and
    checked) and its first plan with the family's defaults. :class:`RecommendError` names the
    first that is wrong."""
    unknown = sorted(set(options) - set(KEYWORDS) - {"params", "compute", "fit", "strict"})
    if unknown:
        raise RecommendError(f"recommend takes no option {', '.join(unknown)}")
    options.pop("params", None)
    options.pop("compute", None)
    req = RecommendRequest.of(1.0, **options)
    arch = _named(req.block.family or DEFAULT_ARCHITECTURE)
    _plans(req, arch, None, [])


def _optimum_ci(fit: Fit, N: float, notes: list[str]) -> dict[str, Interval | None] | None:
    """The optimum's depth and width intervals over the fit's draws; a note without them."""
    ci = fit.optimum_ci(N)
    if ci is None:
        notes.append(f"{fit.name or 'this fit'} carries no bootstrap samples: no CI on the "
                     "optimum (fit your own with --bootstrap to get one)")
        return None
    prov = fit.interval_provenance()
    return {k: Interval.of(v, prov) for k, v in ci.items()}


def _near(fit: Fit, N: float, tol: float, notes: list[str]
          ) -> tuple[dict[str, Any] | None, Callable[[Shape], float | None] | None]:
    """The near-optimal set (archfit.recommending.near_optimal) and, when its centre or its prices are
    not the fit's own, what prices a shape instead: the pricing fit's penalty at the same
    distance in log depth from the set's centre as from that fit's optimum."""
    from archfit.recommending.near_optimal import near_optimal, pricing

    try:
        near = near_optimal(fit, N, tol)
    except ValueError as e:
        raise RecommendError(str(e)) from None
    if near is None:
        return None, None
    src = pricing(fit, near)
    if src is fit and near["centre_from"] == fit.label:
        return near, None
    law, L0, c = src.law_obj, src.law_obj.optimum(src.params, N)[0], near["centre"]
    notes.append(f"the near-optimal set's basis: {near['basis']}")

    def priced(s: Shape) -> float | None:
        return law.depth_loss(src.params, src.extra, N, L0 * s.n_layer / c)

    return near, priced


def _penalty_cis(rows: list[dict[str, Any]], near: dict[str, Any] | None, fit: Fit, N: float,
                 best: Shape) -> None:
    """Each alternative's ``loss_penalty_ci`` (95%, over the draws of what priced it)."""
    if near is None or any(r["loss_penalty"] is None for r in rows):
        return
    from archfit.recommending.near_optimal import penalty_ci, pricing

    src = pricing(fit, near)
    scale = src.law_obj.optimum(src.params, N)[0] / near["centre"]
    for r in rows:
        r["loss_penalty_ci"] = penalty_ci(src, N, r["n_layer"] * scale, best.n_layer * scale)


def _below_data(fit: Fit, N: float) -> str | None:
    """A note when N is more than 10x below the fit's smallest run (above its largest, the
    verdict grades the extrapolation)."""
    lo = (fit.diagnostics or {}).get("span", {}).get("params_min")
    return fit.outside_span(N) if lo and N * 10 < lo else None


def next_runs(fit: Fit, N: float, verdict: str) -> dict[str, Any]:
    """Under a weak or uninformative answer, the Recommendation's ``next_runs`` (one line: what
    'archfit design' would run first, its cost and the interval it predicts after) and
    ``next_design`` (the design it came from). numpy is loaded only then, and only for a fit
    with bootstrap draws: an informative answer stays on the cold path."""
    if verdict == "informative":
        return {}
    if not (fit.bootstrap or {}).get("samples"):
        return {"next_runs": "this fit carries no parameter draws, so no interval after new runs "
                             "can be predicted from it: fit your own sweep ('archfit fit ... --law depth-joint') "
                             "and run 'archfit design'"}
    d, why = suggest(fit, N)
    if d is None:
        return {"next_runs": f"no runs planned: {why}"}
    return {"next_runs": d.first_line(), "next_design": d}


def suggest(fit: Any, N: float, batch: int = 4, budget_frac: float = 0.3
            ) -> tuple[Any, str | None]:
    """What ``recommend`` prints under a weak or uninformative answer at ``N``: the design's
    first batch from a default pool (2x, 4x and 8x the largest run, capped at N; depths from
    half to twice the law's optimum there; the data's tokens per parameter), costed in FLOPs.
    Returns (the design, None), or (None, why no runs could be planned): no loss model, no
    draws, N inside the data, or the design's own refusal."""
    import polars as pl

    from archfit.designing import DesignError, Target, design
    from archfit.errors import FitError, FitInputError

    law = fit.law_obj
    span = (fit.diagnostics or {}).get("span") or {}
    top = span.get("params_max")
    if not isinstance(law, ShapeLaw) or not law.predicts_loss:
        return None, f"{law.name} has no loss model over shapes to plan runs with"
    if not top or N <= top:
        return None, "the target is inside the data: no runs beyond it to plan"
    if not (fit.bootstrap or {}).get("samples"):
        return None, "the fit carries no bootstrap draws to predict an interval after new runs"
    tpp = (span["tokens_max"] / top) if span.get("tokens_max") else 20.0
    rows = []
    for n in sorted({min(top * f, N) for f in (2.0, 4.0, 8.0)}):
        L0 = law.optimum(fit.params, n)[0]
        for L in sorted({max(1, int(round(L0 * f))) for f in (0.5, 0.71, 1.0, 1.41, 2.0)}):
            rows.append({"params": float(n), "n_layer": L,
                         "d_model": round(kaplan_width(n, L)), "tokens": tpp * n})
    try:
        d = design(pl.DataFrame(rows), law=law.name, target=Target("params", N), fit=fit,
                   budget_frac=budget_frac, batch=batch, n_counts="non-embedding")
    except (DesignError, FitError, FitInputError) as e:
        return None, f"the design could not run ({e})"
    if not d.chosen:
        return None, d.stop or "no candidate fits the budget"
    return d, None


def _verdict(shape_fit: Fit, N: float, fits: Fits, *, compute: float | None,
             strict: bool, conditions: dict[str, Any] | None = None) -> Any:
    """The shape law's verdict at N, merged with the compute law's at the budget (under its
    ``conditions``); an uninformative one warns (or, ``strict``, raises)."""
    verdict = shape_fit.verdict(N)
    if compute is not None:
        cf = fits.require(ComputeLaw, "a FLOP budget needs a compute law")
        verdict.merge(cf.verdict(compute, conditions), f"compute law {cf.label}")
    if verdict.verdict == "uninformative":
        why = f"the verdict is uninformative: {'; '.join(verdict.reasons)}"
        if strict:
            raise RecommendError(f"{why} (--strict)")
        warnings.warn(f"{why}; the evidence does not support this shape", UninformativeWarning,
                      stacklevel=3)
    return verdict
