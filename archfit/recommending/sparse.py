"""A mixture of experts for a total and an active size: :func:`recommend_sparse`.

Sizes are non-embedding counts (archfit's convention): ``total`` sets the memory (every
expert's weights), ``active`` the FLOPs (what one token uses). The answer is built in three
steps, each with its source:

1. **The backbone** (depth, width, heads) is the dense recommendation at the active size
   (:func:`archfit.recommending.recommend`, the shape law's optimum, near-optimal set and
   verdict), in the Llama-style family MoE models are built in (SwiGLU, RoPE, RMSNorm, no
   biases, untied, 8 key/value heads). That depth and width carry over from a dense model to
   a mixture of experts of the same active size is archfit's assumption.
2. **The granularity** G (the dense MLP's width over one expert's) by the MoE law
   (``krajewski2024`` by default): each token goes to G experts of width d_ff / G, so the
   active MLP matches the dense one (Krajewski et al.'s setting), and G is the one of least
   predicted loss for the FLOPs of the dense model on the same tokens, router FLOPs counted
   (their eq. 7). Given ``granularity`` or ``top_k``, that stands instead.
3. **The expert count**: as many experts as bring the total to ``total`` (routers counted),
   each sparse layer alike.

The recommendation says where it lands against both targets (within 2% where the rounding of
widths allows; a note otherwise), and with ``compare`` the dense model of the same training
compute beside it, with what each costs in memory and FLOPs per token.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Any

from archfit.errors import RecommendError
from archfit.laws import Fit, MoELaw, load_fit
from archfit.recommending.options import given_fits
from archfit.recommending.moe_pricing import (DEFAULT_BATCH_TOKENS, DEFAULT_GPU, EXPERT_MULTIPLE,
                                              candidate_granularities, choose, edge_note,
                                              pick_intervals, price, reach, reach_trust,
                                              tokens_for, tokens_reach)
from archfit.recommending.request import (WIDTH_STEP, Block, Objective, RecommendRequest,
                                          Target)
from archfit.recommending.result import _verdict_line
from archfit.shapes import TRAIN_FLOPS_CONVENTION, Shape
from archfit.shapes.architectures import LLAMA
from archfit.train.perf import TRAIN_BYTES_PER_PARAM

DEFAULT_MOE_LAW = "krajewski2024"
# how close the rounded shape should land on each target before a note says it does not
COUNT_TOLERANCE = 0.02
# how far a shape built with fixed expert options may land from either target before those
# options are refused: past the rounding of widths and counts, the options cannot meet it
FIXED_TOLERANCE = 0.10


@dataclass(repr=False)
class SparseRecommendation:
    """A mixture of experts: its shape, the dense backbone's recommendation it grew from, how
    its sparsity was chosen, and (``compare``) the dense model of the same compute."""

    shape: Shape
    backbone: Any  # archfit.recommending.Recommendation at the active size
    target_total: float
    target_active: float
    sparsity: dict[str, Any]
    dense: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def trust(self) -> dict[str, Any]:
        return self.sparsity["trust"]

    @property
    def recipe(self) -> dict[str, Any] | None:
        return self.backbone.recipe

    def to_dict(self) -> dict[str, Any]:
        s = self.shape
        out = self.backbone.to_dict()
        out.update({k: v for k, v in s.to_dict().items() if k not in ("breakdown", "layers")})
        out.update(
            target_params=self.target_total, target_active_params=self.target_active,
            target_convention="non-embedding parameters: total (memory) and active (FLOPs)",
            rel_error=s.params_non_embedding / self.target_total - 1,
            rel_error_active=s.params_active_non_embedding / self.target_active - 1,
            flops_per_token=s.flops_per_token("kaplan_train"),
            flops_per_token_convention=TRAIN_FLOPS_CONVENTION + " (N active)",
            sparsity=self.sparsity, trust=self.trust, dense=self.dense,
            notes=self.backbone.notes + self.notes, family="moe (swiglu, rope, rmsnorm)")
        return out

    def text(self) -> str:
        """The answer in one line, then its evidence; every line within 100 columns."""
        import textwrap

        out = []
        for line in self._lines():
            indent = " " * (len(line) - len(line.lstrip()))
            out += textwrap.wrap(line, 100, subsequent_indent=indent + "  ",
                                 break_on_hyphens=False, break_long_words=False) or [""]
        return "\n".join(out)

    def _lines(self) -> list[str]:
        s, sp, b = self.shape, self.sparsity, self.backbone
        r = b.recipe or {}
        law_D = sp.get("law_tokens")
        train = (f"; peak lr {r['lr']['value']:.3g}, batch {r['batch_tokens']['value']:.3g} "
                 f"tokens, {r['tokens']['value']:.3g} tokens"
                 + (f" ({r['tokens']['law']}, dense)" if law_D else "")
                 + (" (recipe unusable)" if r.get("verdict") == "uninformative" else "")
                 if r else "")
        lines = [
            f"answer: {s.n_layer} x {s.d_model:,}, {s.n_experts:,} experts of {s.d_expert:,}, "
            f"top-{s.top_k}{train}; verdict {self.trust['verdict']}", "",
            f"target: {self.target_total:.4g} total, {self.target_active:.4g} active "
            "non-embedding parameters (a mixture of experts)",
            f"backbone: {b.law} at the active size: depth {b.n_layer_opt:.1f}, width "
            f"{b.d_model_opt:,.0f} (real-valued optimum); {b.law_source}",
            f"experts: {sp['law']}: {sp['law_formula']}",
            f"  {sp['law_source']}",
            f"  granularity {s.granularity:.3g} ({sp['granularity_rule']})",
            f"  {s.n_experts:,} experts, top-{s.top_k}"
            + (f" and {s.n_shared_experts} shared" if s.n_shared_experts else "")
            + f", each {s.d_expert:,} wide ({sp['experts_rule']})",
            f"  tokens {r['tokens']['value']:.3g}"
            + ("" if r["tokens"].get("provenance") == "given" else
               _ci(r["tokens"].get("interval"))) + ": "
            f"{sp['tokens_rule']}" if r else "",
            *([f"  {law_D['law']}'s own tokens {law_D['value']:.3g} "
               f"({law_D['tokens_per_param']:.3g} per active parameter): an extrapolation, not "
               f"used: {law_D['why']}"] if law_D else []),
            f"  predicted loss {sp['loss']['value']:.4g}{_ci(sp['loss']['interval'])} "
            f"({sp['law']}, nats/token)",
            *_pricing_lines(sp),
            "", *_verdict_line(self.trust).split("\n"), "",
            f"recommended: n_layer {s.n_layer}, d_model {s.d_model:,}, n_head {s.n_head} "
            f"(head_dim {s.head_dim}, kv heads {s.n_kv_head}), {s.n_experts:,} experts of "
            f"d_expert {s.d_expert:,}, top-{s.top_k}, vocab {s.vocab_size:,}, ctx {s.n_ctx:,}",
            f"  params_non_embedding        {s.params_non_embedding:,} (total; "
            f"{s.params_non_embedding / self.target_total - 1:+.2%} from target)",
            f"  params_active_non_embedding {s.params_active_non_embedding:,} (active; "
            f"{s.params_active_non_embedding / self.target_active - 1:+.2%} from target)",
            f"  params_total                {s.params_total:,} (embeddings untied)",
            f"  training FLOPs/token        {s.flops_per_token('kaplan_train'):.4g} "
            f"({TRAIN_FLOPS_CONVENTION}, N active)"]
        if b.near_optimal:
            n = b.near_optimal
            hi = "unbounded" if n["n_layer"][1] is None else f"{n['n_layer'][1]:.3g}"
            lines.append(f"  near-optimal depths of the backbone: {n['n_layer'][0]:.3g} to {hi} "
                         f"(loss within {n['tolerance']:.1%} of the optimum's)")
        lines += [f"note: {n}" for n in b.notes + self.notes]
        if self.dense:
            lines += ["", *_dense_lines(self.dense)]
        if b.recipe:
            from archfit.recommending.recipe import recipe_lines

            lines += ["", *recipe_lines(b.recipe)]
        return lines

    def summary_line(self) -> str:
        s = self.shape
        return (f"recommended: {s.n_layer} x {s.d_model:,}, {s.n_experts} experts top-{s.top_k} "
                f"(d_expert {s.d_expert:,}), params_total {s.params_total:,}, active "
                f"{s.params_active:,}; laws {self.backbone.law} and {self.sparsity['law']}; "
                f"verdict {self.trust['verdict']}")

    def __repr__(self) -> str:
        return self.text()


def recommend_sparse(req: RecommendRequest, compare: bool = False) -> SparseRecommendation:
    """A mixture of experts for a request with :class:`~archfit.recommending.request.Experts`
    (see the module doc): ``req.target.params`` the total and ``req.experts.active_params``
    the active non-embedding parameters. Its fits are the dense shape law's (and the recipe's)
    for the backbone; ``req.experts.moe_law`` weighs the granularities; its fixed counts stand.
    ``compare``: the dense model of the same training compute beside it."""
    if not isinstance(req, RecommendRequest):
        raise RecommendError("recommend_sparse takes one RecommendRequest with its experts, e.g. "
                             "recommend_sparse(RecommendRequest(Target(params=1e12), experts="
                             f"Experts(active_params=3.2e10))); got {type(req).__name__}")
    e, t = _check_sparse(req)
    dense_fits, mf = _split_fits(req)
    req = req.with_(fits=dense_fits)
    objective = req.objective.kind or "time"
    gpu = req.objective.gpu or DEFAULT_GPU
    batch = req.objective.batch_tokens or DEFAULT_BATCH_TOKENS
    total, active = float(t.params), float(e.active_params)  # type: ignore[arg-type]
    base = _backbone_rec(req, active, None).shape
    searched = candidate_granularities(mf, base, e.granularity, e.top_k)
    exact = e.granularity is not None
    shapes = _candidates(base, total, searched, e, exact)
    tokens, extrapolated = _candidate_tokens(mf, shapes, t)
    law_tokens = t.tokens is None and t.tokens_per_param is None and extrapolated is None
    priced = price(mf, shapes, {G: d for G, (d, _) in tokens.items()}, gpu, batch)
    pick, flops_pick, rule = choose(mf, priced, objective, not law_tokens)
    if not (math.isfinite(pick.tokens) and pick.tokens > 0 and math.isfinite(pick.loss)):
        raise RecommendError(f"{mf.label} gives granularity {pick.granularity:g} no finite "
                             f"tokens or loss ({pick.tokens:.3g} tokens, loss {pick.loss:.3g}): "
                             "are the fit's constants the law's? Refit with 'archfit fit'")
    cis = pick_intervals(mf, pick, flops_pick, law_tokens)
    # the routers are active parameters: the backbone is sized without them, the pick rebuilt
    router = _routers(pick.shape, active, e.n_experts)
    rec = _backbone_rec(req, max(active - router, 1.0), pick.tokens)
    shape = _sparse(rec.shape, total, pick.granularity, n_experts=e.n_experts, top_k=e.top_k,
                    shared=e.n_shared_experts, exact=exact)
    notes = _count_notes(shape, total, active, e)
    its = tokens[flops_pick.granularity][1]  # how the FLOPs pick's tokens were set
    token_rule = tokens[pick.granularity][1] if objective == "loss" or len(priced) == 1 else (
        f"the GPU time of the law's FLOPs pick on its tokens ({its}), at this shape's modelled "
        "speed" if law_tokens else
        f"what this granularity needs to reach the FLOPs pick's loss on its tokens ({its})")
    if extrapolated is not None:
        extrapolated["figure"] = _law_figure(mf, extrapolated, pick)
    _name_tokens(rec, mf, token_rule, cis["tokens"], extrapolated)
    notes += [n for n in (edge_note(mf, pick, searched),) if n]
    if law_tokens or extrapolated is not None:
        ratio = pick.tokens / active
        notes.append(f"{ratio:.3g} tokens per active parameter; released mixtures train on "
                     "hundreds (DeepSeek-V3 394 on 14.8T tokens, Qwen3-235B-A22B about 1,600 on "
                     "36T): --tokens-per-param plans a budget like theirs")
    notes.append("the recipe's rate and batch are the dense laws' at the active size: that they "
                 "carry over to a mixture of experts is assumed (the published hyperparameter "
                 "laws are dense)")
    trust = _merged_trust(rec, mf, shape)
    if req.strict and trust["verdict"] == "uninformative":
        raise RecommendError("the verdict is uninformative (--strict): "
                             + "; ".join(trust["reasons"]))
    sparsity = {
        "n_experts": shape.n_experts, "top_k": shape.top_k,
        "n_shared_experts": shape.n_shared_experts, "granularity": shape.granularity,
        "d_expert": shape.d_expert, "law": mf.label, "law_formula": mf.law_obj.formula,
        "law_source": mf.source or "fitted by archfit",
        "provenance": "published" if mf.source and mf.name in _published() else "fitted",
        "objective": objective, "granularity_rule": rule, "tokens_rule": token_rule,
        "loss": {"value": pick.loss, "interval": cis["loss"],
                 "convention": "the MoE law's predicted loss (nats/token) on the pick's tokens"},
        "by_granularity": [p.row() for p in priced], "reach": reach(mf),
        "law_tokens": extrapolated and extrapolated["figure"],
        "pricing": {"gpu": gpu, "batch_tokens_per_gpu": batch, "kind": "modelled",
                    "layout": pick.layout, "tokens_per_s_per_gpu": pick.tokens_per_s,
                    "all_to_all_share": pick.all_to_all_share,
                    "gpu_hours": pick.gpu_hours},
        "experts_rule": "the count that brings the total to its target, routers counted",
        "trust": trust}
    out = SparseRecommendation(shape, rec, total, active, sparsity, notes=notes)
    if compare:
        out.dense = dense_beside(shape, rec)
    return out


def _candidates(base: Shape, total: float, searched: list[float], e: Any, exact: bool
                ) -> dict[float, Shape]:
    """Each granularity weighed as a shape of ``total`` parameters; a granularity whose whole
    active MLP the shared experts would take is left out (refused when it is every one)."""
    shapes, refused = {}, None
    for G in searched:
        try:
            shapes[G] = _sparse(base, total, G, n_experts=e.n_experts, top_k=e.top_k,
                                shared=e.n_shared_experts, exact=exact)
        except RecommendError as err:
            refused = err
    if not shapes:
        raise refused or RecommendError("no granularity to weigh")
    return shapes


def _candidate_tokens(mf: Fit, shapes: dict[float, Shape], t: Target
                      ) -> tuple[dict[float, tuple[float, str]], dict[str, Any] | None]:
    """Each candidate's tokens and their rule: given, per parameter, or the MoE law's own N-D
    trade-off where it lies within the law's reach; outside it, the dense compute law's at
    the active size, with the law's figures kept (the second value) as an extrapolation."""
    tokens = {G: tokens_for(mf, sh, t.tokens, t.tokens_per_param) for G, sh in shapes.items()}
    if t.tokens is not None or t.tokens_per_param is not None:
        return tokens, None
    extrapolated = _outside_reach(mf, shapes, tokens)
    if extrapolated is not None:
        tokens = {G: (extrapolated["dense_tokens"], extrapolated["rule"]) for G in shapes}
    return tokens, extrapolated


def _ci(interval: Any) -> str:
    """' [low, high] (95% CI, fitted)', or ' (no interval: the law states none)'."""
    return f" {interval.text('.3g')}" if interval else " (no interval: the law states none)"


def _check_sparse(req: RecommendRequest) -> tuple[Any, Any]:
    """The request's experts and target, once the options a mixture of experts does not read
    are refused in one line each."""
    e, t = req.experts, req.target
    b, g = req.block, req.grid
    unread = [name for name, v in (("family", b.family), *b.overrides().items(),
                                   ("ff_ratio", b.ff_ratio), ("ff_multiple", b.ff_multiple),
                                   ("d_ff_rule", b.d_ff_rule), ("n_kv_head", g.n_kv_head))
              if v is not None and not (name in ("family", "ff_ratio") and v == "llama")
              and not (name in LLAMA.fields and v == LLAMA.fields[name])
              and not (name == "n_kv_head" and v == LLAMA.n_kv_head)]
    if unread:
        raise RecommendError(f"a mixture of experts is built in the Llama-style family (SwiGLU, "
                             "RoPE, RMSNorm, no biases, untied, 8 kv heads, Llama's d_ff rule); "
                             f"{', '.join(unread)} would not be read: drop them")
    if e is None or t.params is None:
        raise RecommendError("a mixture of experts needs a total size (--params) and its active "
                             "parameters (--active-params); a FLOP budget for one is not "
                             "supported yet")
    if t.inference_tokens is not None:
        raise RecommendError("--inference-tokens sizes a dense model from a FLOP budget; this "
                             "mixture's sizes are given (--params, --active-params): give its "
                             "tokens with --tokens or --tokens-per-param")
    if req.objective.kind not in (None, "loss", "time"):
        raise RecommendError(f"--objective {req.objective.kind} is not modelled for a mixture "
                             "of experts; use loss (the law's FLOPs pick) or time (loss per "
                             "GPU-hour, the default)")
    o = req.objective
    unread = [f for f, v in (("--gpu-hours", o.gpu_hours), ("--max-latency-ms",
                                                              o.max_latency_ms),
                             ("--usd-per-gpu-hour", o.usd_per_gpu_hour),
                             ("--perf", o.step_model)) if v is not None]
    if unread:
        raise RecommendError(f"{', '.join(unread)}: not read for a mixture of experts (it is "
                             "priced on --gpu's modelled step time and all-to-all); drop them")
    return e, t


def _count_notes(shape: Shape, total: float, active: float, e: Any) -> list[str]:
    """Where the rounded shape lands against both targets: refused past
    :data:`FIXED_TOLERANCE` with fixed expert options, a note past :data:`COUNT_TOLERANCE`."""
    err_t = shape.params_non_embedding / total - 1
    err_a = shape.params_active_non_embedding / active - 1
    fixed = [f"{flag} {v:g}" for flag, v in (("--experts", e.n_experts), ("--top-k", e.top_k),
                                            ("--granularity", e.granularity),
                                            ("--shared-experts", e.n_shared_experts or None))
             if v is not None]
    if fixed and max(abs(err_t), abs(err_a)) > FIXED_TOLERANCE:
        raise RecommendError(f"{' '.join(fixed)} cannot meet {total:.4g} total and {active:.4g} "
                             f"active parameters: the shape lands {err_t:+.1%} from the total and "
                             f"{err_a:+.1%} from the active target (more than "
                             f"{FIXED_TOLERANCE:.0%}); drop {fixed[0].split()[0]} (archfit "
                             "then chooses it to meet both) or change the targets")
    if max(abs(err_t), abs(err_a)) > COUNT_TOLERANCE:
        return [f"the rounded shape lands {err_t:+.1%} from the total and {err_a:+.1%} from the "
                f"active target (over {COUNT_TOLERANCE:.0%}): the widths' and the expert "
                "count's steps are coarse at this size; --multiple-of or --granularity move "
                "them"]
    return []


def _name_tokens(rec: Any, mf: Fit, rule: str, interval: Any,
                 extrapolated: dict[str, Any] | None = None) -> None:
    """The recipe's tokens named by the sparse rule that chose them, with that rule's interval
    (or none); where the MoE law's own trade-off was outside its reach (``extrapolated``), the
    dense compute law's tokens, with the MoE law's figure beside them as an extrapolation."""
    if rec.recipe and "tokens" in rec.recipe:
        tok = rec.recipe["tokens"]
        if extrapolated is not None:
            tok.update(law=extrapolated["dense_law"], pick=rule, source=rule, interval=interval,
                       provenance="published",
                       law_tokens=extrapolated["figure"])
        else:
            tok.update(law=mf.label, pick=rule, source=rule, interval=interval, provenance=(
                "given" if rule.startswith(("as given", "--tokens")) else "published"
                if mf.name in _published() else "fitted"))
        tok.pop("each", None)


def _outside_reach(mf: Fit, shapes: dict[float, Shape],
                   tokens: dict[float, tuple[float, str]]) -> dict[str, Any] | None:
    """None where the MoE law's own N-D trade-off lies within its reach in tokens per active
    parameter for every candidate; else the dense compute law's tokens at the active size
    (what the headline trains on) and the law's own figure, marked an extrapolation."""
    from archfit.recommending.recipe import optimal_tokens

    why = [w for G, sh in shapes.items()
           if (w := tokens_reach(mf, tokens[G][0], float(sh.params_active_non_embedding)))]
    if not why:
        return None
    sh = next(iter(shapes.values()))  # every candidate has the same active size
    dense = optimal_tokens(float(sh.params_active))  # Chinchilla fits count every parameter
    return {"dense_tokens": float(dense["value"]), "dense_law": dense["law"],
            "rule": (f"{dense['law']}'s compute-optimal tokens at the active size, a dense law: "
                     f"{mf.label}'s own trade-off is outside its reach"),
            "by_granularity": {G: tokens[G][0] for G in shapes}, "why": why[0]}


def _law_figure(mf: Fit, extrapolated: dict[str, Any], pick: Any) -> dict[str, Any]:
    """The MoE law's own tokens for the pick's granularity, beside the headline's: an
    extrapolation, with why (a granularity within its reach is named by the first that
    is not)."""
    D = extrapolated["by_granularity"][pick.granularity]
    N = float(pick.shape.params_active_non_embedding)
    return {"value": D, "tokens_per_param": D / N, "law": mf.label, "kind": "extrapolation",
            "why": tokens_reach(mf, D, N) or extrapolated["why"], "used": False}


# the most of the active parameters the routers may take before the backbone left is no shape
ROUTER_SHARE = 0.5


def _routers(shape: Shape, active: float, given: int | None) -> int:
    """The routers' parameters (active: every token's router runs), refused where they take
    ROUTER_SHARE of the active size or more: what is left is no backbone, and the cause is the
    experts' count (``given``: --experts), not the active size."""
    router = shape.n_sparse_layers * shape.d_model * shape.n_experts
    if router >= ROUTER_SHARE * active:
        what = f"--experts {given:,}" if given is not None else f"{shape.n_experts:,} experts"
        raise RecommendError(
            f"{what}: the routers alone ({shape.n_sparse_layers} layers x {shape.d_model:,} wide"
            f" x {shape.n_experts:,} experts = {router:.3g} parameters) take "
            f"{router / active:.0%} of the {active:.3g} active parameters; use fewer experts "
            "(or drop --experts: archfit chooses them)")
    return router


def _backbone_rec(req: RecommendRequest, active: float, tokens: float | None) -> Any:
    """The dense recommendation at the active size (its verdict is reported with the
    mixture's), training on ``tokens`` where they are chosen."""
    from archfit.recommending.pipeline import recommend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return recommend(_backbone(req, active, tokens))


def _backbone(req: RecommendRequest, active: float, tokens: float | None = None
              ) -> RecommendRequest:
    """The dense request at the active size, in the family mixtures of experts are built in
    (what Mixtral, Qwen3-MoE and DeepSeek share: Llama's block and d_ff rule, 8 kv heads; 8-way
    tensor parallelism, a width step of 128, Llama 3's vocabulary and context unless given)."""
    g = req.grid
    origin = f"--active-params {req.experts.active_params:g}" if req.experts else None
    return req.with_(target=Target(params=active, tokens=tokens, origin=origin), experts=None,
                     objective=Objective(),
                     block=Block(family="llama", ff_ratio="llama", **LLAMA.fields),
                     grid=replace(g, head_dim=g.head_dim or WIDTH_STEP,
                                  multiple_of=g.multiple_of or WIDTH_STEP,
                                  tp=8 if g.tp is None else g.tp, n_kv_head=LLAMA.n_kv_head,
                                  vocab_size=g.vocab_size or LLAMA.vocab_size,
                                  n_ctx=g.n_ctx or LLAMA.n_ctx))


def _split_fits(req: RecommendRequest) -> tuple[tuple[Fit, ...], Fit]:
    """The request's fits for the dense backbone, and the MoE law's: a moe-granularity fit
    among ``req.fits`` or ``req.experts.moe_law`` (not both), else :data:`DEFAULT_MOE_LAW`."""
    fits = tuple(load_fit(f) for f in given_fits(list(req.fits) or None))
    moe = [f for f in fits if isinstance(f.law_obj, MoELaw)]
    law = req.experts.moe_law if req.experts is not None else None
    if len(moe) > 1 or (moe and law is not None):
        raise RecommendError("give one MoE law: a moe-granularity fit in --fit or --moe-law, "
                             "not both")
    return tuple(f for f in fits if not isinstance(f.law_obj, MoELaw)), _moe_law(moe[0] if moe else law)


def _moe_law(law: Fit | str | None) -> Fit:
    """The MoE law's fit (default :data:`DEFAULT_MOE_LAW`): one whose loss reads the
    granularity and the tokens (moe-granularity's does), which is what the choice weighs."""
    mf = load_fit(law or DEFAULT_MOE_LAW)
    if not {"granularity", "tokens"} <= set(mf.law_obj.columns):
        raise RecommendError(f"{mf.label} is a {mf.law_obj.name} fit; the granularity is chosen "
                             "by a moe-granularity fit (krajewski2024, or your own: archfit fit "
                             "RUNS --law moe-granularity)")
    return mf


def _merged_trust(rec: Any, mf: Fit, shape: Shape) -> dict[str, Any]:
    """The backbone's verdict, the MoE law's at the active size, and the choice against the
    law's reach (a granularity, expert count, top-k or expansion past what its runs covered,
    graded as a size extrapolation): the worst of them, with every reason naming its source."""
    mv = mf.verdict(shape.params_active_non_embedding).to_dict()
    rv, past = reach_trust(mf, shape)
    order = ("informative", "weak", "uninformative")
    return {"verdict": max(rec.trust.get("verdict", "weak"), mv["verdict"], rv,
                           key=order.index),
            "reasons": [f"backbone ({rec.law}): {r}" for r in rec.trust.get("reasons", [])]
            + [f"granularity ({mf.label}): {r}" for r in mv.get("reasons", [])]
            + [f"reach ({mf.label}): {r}" for r in past]}


def _published() -> set[str]:
    from archfit.laws.published import PUBLISHED

    return set(PUBLISHED)


def _sparse(base: Shape, total: float, G: float, *, n_experts: int | None, top_k: int | None,
            shared: int, exact: bool = False) -> Shape:
    """The backbone with its MLP split into experts of width d_ff / G (a multiple of
    :data:`EXPERT_MULTIPLE`, or with ``exact`` the nearest whole width: a granularity given
    stands), top-k = G (the active MLP the dense one's width) unless given, and the expert count
    that brings the total to ``total`` unless given."""
    f = int(base.d_ff or 0)
    de = max(1, round(f / G)) if exact else \
        max(EXPERT_MULTIPLE, round(f / G / EXPERT_MULTIPLE) * EXPERT_MULTIPLE)
    k = top_k or (max(1, round(G)) if exact else max(1, round(f / de)))
    if top_k is None and shared:  # shared experts take their share of the active MLP
        if k - shared < 1:
            raise RecommendError(f"{shared} shared experts of width {de:,} take the whole active "
                                 f"MLP at granularity {G:g} (top-{k} in all): give fewer "
                                 "--shared-experts or a finer --granularity")
        k -= shared
    probe = base.with_(n_experts=max(k + 1, 2), top_k=k, d_expert=de,
                       n_shared_experts=shared)
    if n_experts is None:
        per_expert = probe.n_sparse_layers * (probe.expert_params + probe.d_model)
        fixed = probe.params_non_embedding - probe.n_experts * per_expert
        n_experts = max(k + 1, round((total - fixed) / per_expert))
    if n_experts < k:
        raise RecommendError(f"{n_experts} experts cannot route each token to {k}; give more "
                             "experts or a smaller --top-k")
    return base.with_(n_experts=n_experts, top_k=k, d_expert=de, n_shared_experts=shared)


def _pricing_lines(sp: dict[str, Any]) -> list[str]:
    """Each granularity weighed (its experts, tokens, predicted loss and modelled speed), and
    the layout it was priced on."""
    p = sp["pricing"]
    lay = p["layout"]
    out = [f"  priced on {p['gpu']} (modelled): {lay['gpus']:,} GPUs in {lay['nodes']:,} nodes "
           f"hold the training state ({lay['assumptions']}); experts over every GPU, the "
           "all-to-all off the node over the network; "
           f"{p['batch_tokens_per_gpu']:,.0f} tokens per GPU and step",
           f"  {'G':>5}{'experts':>9}{'top-k':>7}{'width':>8}{'tokens':>11}{'pred. loss':>12}"
           f"{'tok/s/GPU':>11}{'all-to-all':>12}{'GPU-hours':>11}"]
    for r in sp["by_granularity"]:
        mark = "  <- pick" if r["granularity"] == sp["granularity"] or (
            r["n_experts"] == sp["n_experts"] and r["top_k"] == sp["top_k"]) else ""
        out.append(f"  {r['granularity']:>5g}{r['n_experts']:>9,}{r['top_k']:>7}"
                   f"{r['d_expert']:>8,}{r['tokens']:>11.3g}{r['loss']:>12.4f}"
                   f"{r['tokens_per_s_per_gpu']:>11,.0f}{r['all_to_all_share']:>11.0%} "
                   f"{r['gpu_hours']:>11.3g}{mark}")
    return out


def dense_beside(shape: Shape, rec: Any) -> dict[str, Any]:
    """The dense model of the same training compute (the compute law's N_opt for the sparse
    model's FLOPs on its tokens), and what each costs: memory to train (16 bytes a parameter)
    and FLOPs per token."""
    from archfit.laws.published import DEFAULT_COMPUTE_LAW

    D = rec.recipe["tokens"]["value"] if rec.recipe else 20.0 * shape.params_active
    C = shape.flops_per_token("kaplan_train") * D
    cf = load_fit(DEFAULT_COMPUTE_LAW)
    N_opt, D_opt = cf.law_obj.compute_optimal(cf.params, C)
    return {"compute": C, "compute_convention": TRAIN_FLOPS_CONVENTION + " (N active) x tokens",
            "law": cf.label, "provenance": "published",
            "dense": {"params_total": N_opt, "tokens": D_opt,
                      "flops_per_token": 6.0 * N_opt,
                      "train_memory_bytes": TRAIN_BYTES_PER_PARAM * N_opt},
            "moe": {"params_total": shape.params_total, "params_active": shape.params_active,
                    "tokens": D, "flops_per_token": shape.flops_per_token("kaplan_train"),
                    "train_memory_bytes": TRAIN_BYTES_PER_PARAM * shape.params_total},
            "memory_convention": f"{TRAIN_BYTES_PER_PARAM} bytes per parameter (bf16 weights and "
                                 "gradients, fp32 master weights and Adam's two moments); "
                                 "activations not counted"}


def _dense_lines(d: dict[str, Any]) -> list[str]:
    m, n = d["moe"], d["dense"]
    gib = 2.0 ** 30
    return [f"dense beside it ({d['law']}, {d['provenance']}: N_opt for the same "
            f"{d['compute']:.3g} training FLOPs):",
            f"  {'':<8}{'params_total':>14}{'tokens':>11}{'FLOPs/token':>13}"
            f"{'train memory':>16}",
            f"  {'MoE':<8}{m['params_total']:>14.3g}{m['tokens']:>11.3g}"
            f"{m['flops_per_token']:>13.3g}{m['train_memory_bytes'] / gib:>12,.0f} GiB",
            f"  {'dense':<8}{n['params_total']:>14.3g}{n['tokens']:>11.3g}"
            f"{n['flops_per_token']:>13.3g}{n['train_memory_bytes'] / gib:>12,.0f} GiB",
            f"  (memory: {d['memory_convention']})"]


__all__ = ["DEFAULT_MOE_LAW", "SparseRecommendation", "recommend_sparse"]
