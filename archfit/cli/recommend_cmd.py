"""``archfit recommend``: no torch, no matplotlib, no polars on this path (cold start matters)."""

from __future__ import annotations

from typing import Any

import click

from archfit.recommending import recommend as recommend_shape
from archfit.recommending.request import (Block, Experts, Grid, Objective, RecommendRequest,
                                          Target)
from archfit.shapes.architectures import ARCHITECTURES
from archfit.text import wrap

from archfit.cli.common import (FILE_PATH, COUNT, INT, NUMBER, SHAPE_FLAGS, VOCAB, emit_json, perf_options,
                                shape_options)
from archfit.cli.emit import (apply_family, check_emit_args, emit_options, explicit,
                              refuse_inexpressible, refuse_unused_vocab_multiple, write_export)


@click.command()
@click.option("--params", type=NUMBER, default=None,
              help="Target size: non-embedding parameters (Kaplan's N), e.g. 1e12 or 175B.")
@click.option("--compute", type=NUMBER, default=None,
              help="Instead of --params: a training budget in FLOPs (C = 6 N D).")
@click.option("--active-params", type=NUMBER, default=None,
              help="With --params (then the total): a mixture of experts of this many active "
                   "non-embedding parameters per token; its experts, top-k and granularity by "
                   "--moe-law.")
@click.option("--moe-law", default=None, metavar="FILE|NAME",
              help="With --active-params: the law that picks the granularity (default "
                   "krajewski2024, or a moe-granularity fit of your own).")
@click.option("--experts", "n_experts", type=INT, default=None,
              help="With --active-params: fix the number of routed experts.")
@click.option("--top-k", "top_k", type=INT, default=None,
              help="With --active-params: fix the experts each token uses.")
@click.option("--granularity", type=NUMBER, default=None,
              help="With --active-params: fix the dense MLP's width over one expert's.")
@click.option("--shared-experts", "n_shared_experts", type=COUNT, default=None,
              help="With --active-params: experts every token uses (DeepSeek).")
@click.option("--inference-tokens", type=NUMBER, default=None,
              help="With --compute: tokens the model will serve; size it for the least "
                   "training + inference FLOPs (6ND + 2NT) at the compute-optimal loss "
                   "(Sardana et al. 2024): smaller, trained longer. Both budgets are shown.")
@click.option("--tokens-per-param", type=NUMBER, default=None,
              help="With --compute: over-train at this many tokens per parameter (N = "
                   "sqrt(C / 6R)); the predicted loss penalty against the compute-optimal "
                   "model of the same compute is shown.")
@click.option("--unique-tokens", type=NUMBER, default=None,
              help="With --compute: the unique tokens the data may repeat; the budget is split "
                   "by a data-constrained law (default muennighoff2023) into size, tokens and "
                   "epochs.")
@click.option("--fit", "fits", multiple=True, metavar="FILE|NAME",
              help="Fit artifact or published fit name (repeatable: shape, compute, ff-ratio).")
@click.option("--law", "laws", multiple=True, metavar="NAME",
              help="Published fit by name (levine2020, epoch2024, hoffmann2022; see 'archfit "
                   "laws'), or auto. Default: levine2020; epoch2024 for --compute; "
                   "muennighoff2023 with --unique-tokens.")
@shape_options("vocab_size", "n_ctx",
               vocab_size={"default": None, "show_default": False, "type": VOCAB,
                           "help": "Vocabulary size (default: the one the --fit's runs share, "
                                   "else the family's), or auto: the vocabulary law's pick "
                                   "(a vocab fit given with --fit, else Tao et al. 2024's "
                                   "published law) at the shape and its training compute, "
                                   "rounded to --make-vocab-size-divisible-by, with its "
                                   "predicted gain."},
               n_ctx={"default": None, "show_default": False,
                      "help": "Context length (default: the one the --fit's runs share, else "
                              "2,048)."})
@click.option("--family", type=click.Choice(list(ARCHITECTURES), case_sensitive=False),
              default=None,
              help="The block to build (default: the --fit's runs' block, else llama): llama "
                   "(SwiGLU, RoPE, RMSNorm, no biases, untied, 8 kv heads and heads a multiple "
                   "of 8 where the size allows; vocab 128,256, context 8,192) or gpt2.")
@click.option("--head-dim", type=INT, default=None,
              help="Attention head size: heads = d_model / head_dim (default 128; halved for "
                   "sizes whose widths need a finer step, with a note).")
@click.option("--multiple-of", type=INT, default=None,
              help="d_model (and d_ff) are multiples of this (default 128, as --head-dim).")
@click.option("--ff-ratio", default=None,
              help="d_ff/d_model (default: the family's, 8/3 or 4), 'auto' (needs an ff-ratio "
                   "--fit), or 'llama' (Meta's rule: 8/3 d_model rounded up to --ff-multiple).")
@click.option("--ff-multiple", type=INT, default=None,
              help="d_ff is a multiple of this (default: --multiple-of).")
@shape_options("mlp", "n_kv_head", mlp={"default": None, "show_default": False,
                                       "help": "MLP kind (default: the family's)."},
               n_kv_head={"help": "Key/value heads (default: the family's)."})
@click.option("--tp", type=INT, default=None,
              help="Tensor-parallel degree: heads divisible by it (default: the family's, 8 "
                   "for llama where the size allows).")
@shape_options("tied_embeddings", "position", "bias", "norm")
@click.option("--top", type=INT, default=5, show_default=True, help="Alternatives to list.")
@click.option("--tolerance", type=NUMBER, default=0.005, show_default=True,
              help="The near-optimal set: depths whose predicted loss is within this fraction "
                   "of the optimum's (0.005 = 0.5%).")
@click.option("--compare", is_flag=True,
              help="One row per applicable shape law (your fits and every published one).")
@click.option("--strict", is_flag=True,
              help="Exit with status 2 when the verdict is uninformative.")
@click.option("--objective", type=click.Choice(["loss", "time", "cost", "latency"]),
              default=None,
              help="loss (the default): the law's optimum; time/cost: the lowest loss in "
                   "--gpu-hours (or --tokens' loss soonest); latency: the lowest loss within "
                   "--max-latency-ms. A mixture of experts: time (its default), the lowest "
                   "loss per GPU-hour, or loss, the law's FLOPs pick.")
@perf_options
@click.option("--gpu-hours", type=NUMBER, default=None, help="--objective time/cost: budget.")
@click.option("--tokens", type=NUMBER, default=None,
              help="Training tokens of the recipe (default: compute-optimal for the size); "
                   "--objective time/cost: the run length whose loss to reach soonest; "
                   "latency: the tokens the loss is predicted at.")
@click.option("--max-latency-ms", type=NUMBER, default=None,
              help="--objective latency: decode ms per token at batch 1.")
@click.option("--usd-per-gpu-hour", type=NUMBER, default=None, help="--objective cost: price.")
@click.option("--pareto", type=FILE_PATH, default=None, metavar="PNG",
              help="With --objective: draw predicted loss against GPU-hours or latency per "
                   "candidate, the Pareto front and the pick.")
@emit_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def recommend(ctx, **p):  # type: ignore[no-untyped-def]
    """Recommend a buildable shape (depth, width, heads, d_ff) for a size or a FLOP budget,
    with a recipe to train it (peak learning rate, batch, tokens, warmup, decay).

    \b
    Examples:
      archfit recommend --params 1e12
      archfit recommend --params 7.2e5 --fit demo-out/demo-depth-joint.json
      archfit recommend --compute 1e24 --law hoffmann2022
      archfit recommend --compute 1e22 --unique-tokens 1e10
      archfit recommend --compute 1e23 --inference-tokens 1e13
      archfit recommend --params 7e9 --emit hf-llama -o out/
      archfit recommend --params 1e12 --active-params 3.2e10 --compare
    """
    if (p["params"] is None) == (p["compute"] is None):
        raise click.UsageError("give --params (a size) or --compute (a FLOP budget)")
    emit, as_json = p["emit"], p["as_json"]
    check_emit_args(emit, p["out_dir"], p["force"], as_json)
    req, design = _request(ctx, p)
    refuse_unused_vocab_multiple(ctx, emit, vocab_auto=p["vocab_size"] == "auto")
    if req.experts is not None:
        _sparse(ctx, req, p)
        return
    if emit is not None and p["compare"]:
        raise click.UsageError("--emit exports one shape; drop --compare")
    if p["compare"]:
        _compare(req, as_json)
        return
    if req.objective.on_hardware or p["pareto"]:
        from archfit.cli.objective_view import run_objective

        if emit is not None:
            raise click.UsageError("--objective shows the trade-off; export its pick with "
                                   "archfit shape --emit")
        run_objective(req, p["pareto"], as_json)
        return
    r = recommend_shape(req)
    if as_json:
        emit_json(r.to_dict())
        return
    if emit is not None:
        _export(ctx, r, emit, design, p["out_dir"], p["force"], p["tp"], p["vocab_divisible_by"])
        return
    click.echo(r.text())
    click.echo("")
    click.echo(r.alternatives_text())


MOE_FLAGS = {"moe_law": "--moe-law", "n_experts": "--experts", "top_k": "--top-k",
             "granularity": "--granularity", "n_shared_experts": "--shared-experts"}


def _request(ctx: click.Context, p: dict) -> tuple[RecommendRequest, str | None]:
    """The one request the flags make, and with ``--emit`` the line that says which family
    the format builds in. A block flag not given is left to the family (None)."""
    if p["active_params"] is None:
        given = [MOE_FLAGS[k] for k in MOE_FLAGS if p[k] is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)} go with --active-params (a mixture of "
                                   "experts)")
    ff = p["ff_ratio"]
    block: dict[str, Any] = dict(family=p["family"] and p["family"].lower(),
                 ff_ratio=ff if ff in ("auto", "llama", None) else NUMBER.convert(ff, None, None),
                 ff_multiple=p["ff_multiple"],
                 **{k: p[k] if explicit(ctx, k) else None
                    for k in ("mlp", "position", "bias", "norm", "tied_embeddings")})
    design = None
    if p["emit"] is not None and p["active_params"] is None:
        changes, design = _emit_family(ctx, p["emit"], block["family"])
        block.update(changes)
    experts = None if p["active_params"] is None else Experts(
        active_params=p["active_params"], moe_law=p["moe_law"], n_experts=p["n_experts"],
        top_k=p["top_k"], granularity=p["granularity"],
        n_shared_experts=p["n_shared_experts"] or 0)
    req = RecommendRequest(
        target=Target(params=p["params"], compute=p["compute"], tokens=p["tokens"],
                      unique_tokens=p["unique_tokens"], inference_tokens=p["inference_tokens"],
                      tokens_per_param=p["tokens_per_param"]),
        block=Block(**block),
        grid=Grid(head_dim=p["head_dim"], multiple_of=p["multiple_of"], tp=p["tp"],
                  n_kv_head=p["n_kv_head"], vocab_size=p["vocab_size"], n_ctx=p["n_ctx"],
                  vocab_multiple=p["vocab_divisible_by"],
                  top=p["top"], tolerance=p["tolerance"]),
        experts=experts,
        objective=Objective(kind=p["objective"], gpu=p["gpu"], step_model=p["perf_file"],
                            gpu_hours=p["gpu_hours"], max_latency_ms=p["max_latency_ms"],
                            batch_tokens=p["gpu_batch_tokens"],
                            usd_per_gpu_hour=p["usd_per_gpu_hour"]),
        fits=tuple(p["fits"]) + tuple(p["laws"]), strict=p["strict"])
    return req, design


def _emit_family(ctx: click.Context, emit: str, family: str | None) -> tuple[dict, str]:
    """With ``--emit``, the format's family (the line returned says so); a ``--family`` the
    format cannot hold is refused."""
    from archfit.formats import get_format

    style = get_format(emit).style
    if family not in (None, style):
        raise click.UsageError(f"--emit {emit} writes a {style}-family model, not --family "
                               f"{family}; drop --family or choose a {family}-family format")
    return apply_family(ctx, emit)


def _export(ctx, r, emit, design, out_dir, force, tp, vocab_divisible_by):  # type: ignore[no-untyped-def]
    """The recommendation exported: the config on stdout and the rest on stderr, or the text
    and the config written into ``out_dir``."""
    refuse_inexpressible(ctx, r.shape, emit)
    if out_dir is None:
        click.echo(wrap(design), err=True)
        click.echo(wrap(r.summary_line()), err=True)
        from archfit.recommending import CONSTRAINT_NOTE

        for n in r.notes:
            if n.startswith(CONSTRAINT_NOTE):
                click.echo(wrap(f"note: {n}"), err=True)
        write_export(r.shape, emit, None, force, tp, vocab_divisible_by, r.recipe)
        return
    click.echo(wrap(design))
    click.echo(r.text())
    click.echo("")
    write_export(r.shape, emit, out_dir, force, tp, vocab_divisible_by, r.recipe)


def _sparse(ctx: click.Context, req: RecommendRequest, p: dict) -> None:
    """recommend --params TOTAL --active-params ACTIVE: a mixture of experts."""
    from archfit.recommending.sparse import recommend_sparse

    if req.target.params is None:
        raise click.UsageError("--active-params goes with --params (the total non-embedding "
                               "parameters); a FLOP budget for a mixture of experts is not "
                               "supported yet")
    flags = {k: SHAPE_FLAGS[k][0] for k in ("mlp", "position", "norm", "bias",
                                            "tied_embeddings", "n_kv_head")}
    set_here = [flag for k, flag in {**flags, "family": "--family"}.items()
                if explicit(ctx, k) and p.get(k) != "llama"]
    set_here += [flag for k, flag in (("ff_ratio", "--ff-ratio"), ("ff_multiple", "--ff-multiple"))
                 if p.get(k) is not None]
    if set_here:
        raise click.UsageError(f"a mixture of experts is recommended in the Llama-style family "
                               f"(SwiGLU, RoPE, RMSNorm, no biases, untied, 8 kv heads, Llama's "
                               f"d_ff rule); drop {', '.join(set_here)}")
    if p["pareto"]:
        raise click.UsageError("--pareto draws a dense model's loss against GPU time; a mixture "
                               "of experts prints its granularities priced in GPU time instead: "
                               "drop --pareto")
    if p["emit"] is not None and p["compare"]:
        raise click.UsageError("--emit exports one shape; drop --compare")
    r = recommend_sparse(req, compare=p["compare"])
    emit, out_dir = p["emit"], p["out_dir"]
    if p["as_json"]:
        emit_json(r.to_dict())
        return
    if emit is not None:
        from archfit.formats import problems

        why = problems(r.shape, emit)
        if why:
            raise click.UsageError(
                f"--emit {emit} cannot express the mixture recommend builds (the Llama-style "
                f"block): {'; '.join(why)}; export it with --emit hf-mixtral or hf-deepseek-v3, "
                f"or build the format's own block with archfit shape ... --emit {emit}")
        if out_dir is None:
            click.echo(r.summary_line(), err=True)
            write_export(r.shape, emit, None, p["force"], p["tp"], p["vocab_divisible_by"],
                         r.recipe)
            return
    click.echo(r.text())
    if emit is not None:
        click.echo("")
        write_export(r.shape, emit, out_dir, p["force"], p["tp"], p["vocab_divisible_by"],
                     r.recipe)


def _compare(req: RecommendRequest, as_json: bool) -> None:
    from archfit.recommending import compare

    rows = compare(req.with_(strict=False))  # --strict judges the table, after it is shown
    t = req.target
    _compare_table(t.params, t.compute, rows, as_json)
    weak = [r["law"] for r in rows if r.get("verdict") == "uninformative"]
    if req.strict and weak:  # after the table, so the reader sees which rows
        from archfit.errors import RecommendError

        raise RecommendError(f"--strict: the verdict of {', '.join(weak)} is uninformative; "
                             "drop that fit, or --strict")


def _compare_table(params, compute, rows, as_json):  # type: ignore[no-untyped-def]
    if as_json:
        emit_json({"target": params or compute, "target_kind": "params" if compute is None
                   else "compute (FLOPs, C = 6 N D)", "rows": rows})
        return
    crows = [r for r in rows if r.get("role") == "compute"]
    if crows:
        click.echo(wrap(f"compute laws at {compute:.3g} FLOPs (C = 6 N D, or the FLOP column a "
                        "fit read); 95% CI, fitted: percentiles over each fit's parameter draws, "
                        "'-' where a fit has none"))
        click.echo(f"{'law':<21}{'N_opt':>10}{'95% CI':>21}{'D_opt':>10}{'D/N':>7}{'95% CI':>14}"
                   "  verdict")
        for r in crows:  # D/N: tokens per parameter
            if "error" in r:
                click.echo(wrap(f"{r['law']:<21}{'-':>10}{'-':>21}{'-':>10}{'-':>7}{'-':>14}  "
                                f"{r['error']}"))
                continue
            nci, tci = r["N_opt_ci"], r["tokens_per_param_ci"]
            nci = nci.text(named=False) if nci else "-"
            tci = tci.text(named=False) if tci else "-"
            click.echo(f"{_law_cell(r['law'])}{r['N_opt']:>10.3g}{nci:>21}{r['D_opt']:>10.3g}"
                       f"{r['tokens_per_param']:>7.3g}{tci:>14}  {_mark(r['verdict'])}")
        click.echo("D/N: training tokens per parameter")
        click.echo(wrap("\nexponent a = d ln N_opt / d ln C there (95% CI over each fit's "
                        "draws), and which of Hoffmann et al. 2022's approaches each law is:"))
        for r in crows:
            if "error" in r:
                continue
            aci = r["exponent_ci"].text(".3f", named=False) if r.get("exponent_ci") else "-"
            click.echo(f"{_law_cell(r['law'])}  a {r['exponent']:.3f} {aci:<16}  approach "
                       f"{r['approach']}")
        used = next((r for r in crows if r.get("used")), None)
        if used is not None:
            click.echo(wrap(f"the answer (recommend --compute without --compare) uses "
                            f"{used['law']}: {used['why']}; give another first with --fit to "
                            "build from it"))
        click.echo("\nshape laws, at N_opt of the compute law given (default epoch2024):")
    click.echo(f"{'law':<22}{'layers':>7}{'d_model':>9}{'optimum':>9}{'95% CI':>18}"
               f"{'near-optimal':>14}  verdict")
    for r in rows:
        if r.get("role") == "compute":
            continue
        if "error" in r:
            click.echo(wrap(f"{r['law']:<22}{'-':>7}{'-':>9}{'-':>9}{'-':>18}{'-':>14}  "
                            f"{r['error']}"))
            continue
        ci = r["ci"].text(".3g", named=False) if r["ci"] else "-"
        near = r.get("near_optimal")
        near = (f"{near[0]:.0f}-" + ("any" if near[1] is None else f"{near[1]:.0f}")
                if near else "-")
        click.echo(f"{r['law']:<22}{r['n_layer']:>7}{r['d_model']:>9,}{r['n_layer_opt']:>9.1f}"
                   f"{ci:>18}{near:>14}  {_mark(r['verdict'])}")
    click.echo("95% CI: the optimum's, fitted: percentiles over each fit's draws ('-' where a "
               "fit has none)")
    if any(r.get("near_optimal") for r in rows):
        click.echo(wrap("near-optimal: the depths whose predicted loss is within the tolerance "
                        "(default 0.5%) of each law's optimum; laws disagree where these do not "
                        "overlap"))
    if any(r.get("verdict") == "uninformative" for r in rows):
        click.echo("* uninformative: the evidence does not support that row's answer; "
                   "--json gives the reasons")


def _law_cell(label: str, width: int = 21) -> str:
    """A law's label in its column: on a line of its own when longer than the column."""
    if len(label) < width:
        return f"{label:<{width}}"
    click.echo(label)
    return " " * width


def _mark(verdict: str) -> str:
    return f"{verdict.upper()} *" if verdict == "uninformative" else verdict

