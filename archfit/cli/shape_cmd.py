"""``archfit shape`` and ``archfit grid``."""

from __future__ import annotations

import click

from archfit.cli.common import (FF_RATIO, INT, INT_LIST, NUMBER, NUMBER_LIST, PLAN_FLAGS,
                                SHAPE_FLAGS, emit_json, fmt, perf_options, pick, print_table,
                                shape_options)
from archfit.cli.emit import (check_emit_args, emit_options, explicit, refuse_inexpressible,
                              refuse_unused_vocab_multiple, write_export)
from archfit.formats import family_fields, read_file
from archfit.errors import ShapeError
from archfit.shapes.families import (aspect_ratio_family, fixed_width_family, iso_param_family,
                               require_a_fit)
from archfit.shapes import ARCH_FIELDS, FLOP_CONVENTIONS, MLA_FIELDS, Shape
from archfit.text import wrap


@click.command()
@shape_options("n_layer", "d_model", "n_head", "ff_ratio", "d_ff", "n_kv_head", "d_head",
               "d_expert", *ARCH_FIELDS, *PLAN_FLAGS, *MLA_FIELDS, ff_ratio={"type": FF_RATIO, "help": "d_ff / d_model (default 4), or 'llama' "
                         "(Meta's rule: 8/3 d_model rounded up to a multiple of 256)."})
@click.option("--from", "from_file", default=None, metavar="FILE",
              help="Read the shape from any file --emit writes (HF config.json or its folder, "
                   "nanoGPT or torchtitan .py, Megatron .sh, LitGPT .yaml), a nanoGPT "
                   "checkpoint (.pt) or its model_args JSON, instead of the shape flags. Read "
                   "as text: nothing in it is run.")
@perf_options
@emit_options
@click.option("--tp", type=INT, default=None,
              help="--emit megatron: the tensor-parallel degree its vocab padding uses (1).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def shape(ctx, from_file, gpu, perf_file, gpu_batch_tokens, emit, out_dir, force,
          vocab_divisible_by, tp, as_json, **fields):
    """Count a shape's parameters (each convention named) and FLOPs per token; read one from a
    framework config (--from) or export it to one (--emit).

    \b
    Examples:
      archfit shape --layers 12 --width 768 --heads 12 --vocab 50257 --ctx 1024
      archfit shape --from path/to/config.json
      archfit shape --layers 12 --width 768 --heads 12 --no-mlp 0 --no-attn 7
      archfit shape --layers 12 --width 768 --heads 12 --emit megatron -o out/
      archfit shape --layers 32 --width 4096 --heads 32 --kv-heads 8 --mlp swiglu --rope \\
        --rmsnorm --no-bias --untied --ff-ratio llama --emit hf-llama -o out/
      archfit shape --layers 32 --width 4096 --heads 32 --kv-heads 8 --mlp swiglu --rope \\
        --rmsnorm --no-bias --untied --d-ff 14336 --experts 8 --top-k 2 --vocab 32000

    --emit writes the shape as given (flags or --from) and exits 2 naming the field a
    format cannot express; it never swaps the MLP, norm or positions for the format's family.
    """
    import os

    source = () if from_file is None else (
        os.path.join(from_file, "config.json") if os.path.isdir(from_file) else from_file,)
    check_emit_args(emit, out_dir, force, as_json, inputs=source)
    imported = None
    if from_file is not None:
        given = [SHAPE_FLAGS[k][0] for k in fields if explicit(ctx, k)]
        if given:
            raise click.UsageError(f"give --from or shape flags ({', '.join(given)}), not both")
        imported = read_file(from_file)
        s = imported.shape
    else:
        missing = [SHAPE_FLAGS[k][0] for k in ("n_layer", "d_model", "n_head")
                   if fields[k] is None]
        if missing:
            raise click.UsageError(f"Missing option {', '.join(missing)} (or read a config "
                                   "with --from)")
        if fields["ff_ratio"] is not None and fields["d_ff"] is not None:
            raise click.UsageError("give --ff-ratio or --d-ff, not both")
        s = Shape(**family_fields(fields))  # --ff-ratio llama: Llama's d_ff rule
    refuse_unused_vocab_multiple(ctx, emit)
    if emit is not None:
        refuse_inexpressible(ctx, s, emit, suggest_family=imported is None)
        write_export(s, emit, out_dir, force, tp, vocab_divisible_by,
                     kept=imported.routing if imported is not None else None)
        return
    if tp is not None:
        raise click.UsageError("--tp goes with --emit megatron")
    d = s.to_dict()
    perf = _perf(s, gpu, perf_file, gpu_batch_tokens) if (
        gpu or perf_file or gpu_batch_tokens) else None
    if as_json:
        if imported is not None:
            d["import"] = {"file": from_file, **imported.to_dict()}
        if perf is not None:
            d["perf"] = perf
        d["notes"] = s.notes
        emit_json(d)
        return
    if imported is not None:
        _print_import(from_file, imported)
    _print_shape(s)
    if perf is not None:
        _print_perf(perf)


def _print_perf(perf):  # type: ignore[no-untyped-def]
    t, lat, mem = perf["training"], perf["decode"], perf["memory"]
    gpu = perf["gpu"]
    if t["tokens_per_s"] is None:
        click.echo(wrap(f"training on {gpu}: no speed: {t['why_none']}"))
    else:
        click.echo(wrap(f"training on {gpu}: {t['tokens_per_s']:,.0f} tokens/s per GPU "
                        f"compiled, {t['tokens_per_s_eager']:,.0f} eager, at "
                        f"{t['batch_tokens']:,.0f} tokens per step ({t['kind']}: {t['source']})"))
    if mem["fits"]:
        click.echo(wrap(f"memory on {gpu}: {mem['gib']:.1f} GiB per GPU compiled, "
                        f"{mem['gib_eager']:.1f} eager, at a micro-batch of "
                        f"{mem['micro_batch']} sequences ({mem['grad_accum']} pass(es) per step of "
                        f"{mem['sequences']}; {mem['convention']})"
                        + ("" if mem["eager_fits"] else
                           f"; eager, that micro-batch needs more than the {mem['device_gib']:g} "
                           "GiB less headroom: run compiled, or halve the micro-batch")))
    else:
        click.echo(wrap(f"memory on {gpu}: {mem['note']}"))
    click.echo(wrap(f"decode on {gpu}: {lat['ms_per_token']:.3g} ms/token at batch 1, "
                    f"context {lat['context']:,} ({lat['bound']}-bound, "
                    f"{lat['layer_overhead_ms']:.2g} ms of it per-layer overhead; modelled: "
                    f"{lat['assumptions']})"))
    a2a = perf["all_to_all"]
    if a2a is not None:
        click.echo(wrap(f"expert all-to-all on {gpu} at expert parallelism "
                        f"{a2a['expert_parallel']}: {a2a['bytes_per_step'] / 2**30:.3g} GiB, "
                        f"{a2a['s_per_step'] * 1e3:.3g} ms per step of {t['batch_tokens']:,.0f} "
                        f"tokens (modelled: {a2a['assumptions']})"))


def _perf(s, gpu, perf_file, batch_tokens):  # type: ignore[no-untyped-def]
    """Training speed (calibrated or modelled), peak memory (estimated) and decode latency
    (modelled) of a shape."""
    from archfit.recommending.objectives import DEFAULT_BATCH_TOKENS, DEFAULT_GPU
    from archfit.train.perf import (decode_latency, device, expert_all_to_all, load_step_model,
                                    modelled)

    gpu = gpu or DEFAULT_GPU
    device(gpu)
    model = load_step_model(perf_file) if perf_file else modelled(gpu)
    bt = batch_tokens or DEFAULT_BATCH_TOKENS
    mem = _memory(s, gpu, bt)
    training: dict = {"tokens_per_s": None, "tokens_per_s_eager": None, "batch_tokens": bt,
                      "kind": model.kind, "device": model.device, "source": model.source}
    if not mem["sequences"]:  # a speed is only for a step that can run
        training["why_none"] = mem["note"]
    elif not mem["fits"]:
        training["why_none"] = "one sequence does not fit the GPU's memory (the memory line)"
    else:
        training.update(tokens_per_s=model.tokens_per_s(s, bt),
                        tokens_per_s_eager=model.tokens_per_s(s, bt, compiled=False))
    return {"gpu": gpu, "training": training, "memory": mem,
            "decode": decode_latency(s, gpu), "all_to_all": expert_all_to_all(s, bt, gpu)}


def _memory(s, gpu, batch_tokens):  # type: ignore[no-untyped-def]
    """Peak memory of one GPU training the shape on ``batch_tokens`` per step: at the largest
    micro-batch that fits the device with 10% headroom (archfit.train.memory)."""
    from archfit.errors import ArchfitError
    from archfit.train import memory
    from archfit.train.perf import calibration
    from archfit.train.configure import overhead_gib

    dev = memory.device(gpu)
    if batch_tokens < s.n_ctx:
        return {"fits": False, "sequences": 0, "note": f"a step of {int(batch_tokens):,} tokens is "
                f"less than one sequence of {s.n_ctx:,}: give --gpu-batch-tokens of at least "
                f"{s.n_ctx:,}"}
    seqs = int(batch_tokens) // s.n_ctx
    over = overhead_gib(gpu)
    cal = calibration(dev.key)
    share = cal.activation_share if cal else {}
    conv = (f"estimated: bf16 autocast, fp32 master weights, grads and AdamW states, "
            f"activations, {over:.3g} GiB overhead; "
            + (f"activations at the share measured compiled and eager ({cal.source})"
               if cal else "every activation counted (assumed)"))
    try:
        m, accum, e = memory.choose_micro_batch(
            s, seqs, dev.memory_gib * memory.GIB, precision="bf16", overhead_gib=over,
            compiled=True, activation_share=share.get("compiled") or 1.0)
    except ArchfitError as err:
        return {"fits": False, "note": str(err), "sequences": seqs, "convention": conv}
    eager = memory.estimate(s, m, precision="bf16", overhead_gib=over, compiled=False,
                            activation_share=share.get("eager") or 1.0)
    return {"fits": True, "gib": e.total / memory.GIB, "gib_eager": eager.total / memory.GIB,
            "eager_fits": eager.total <= dev.memory_gib * memory.GIB * (1 - memory.HEADROOM),
            "micro_batch": m, "grad_accum": accum, "sequences": seqs,
            "device_gib": dev.memory_gib, "convention": conv,
            "kind": "calibrated" if cal else "estimated"}


def _say(line: str) -> None:
    click.echo(wrap(line))


def _print_import(path, imp):  # type: ignore[no-untyped-def]
    _say(f"read {path}: {imp.family} config")
    for n in imp.notes:
        _say(f"  note: {n}")
    if imp.unknown:
        _say(f"  unknown fields (not used; check they do not change the shape): "
                   f"{', '.join(imp.unknown)}")
    if imp.ignored:
        _say(f"  fields that do not change the counts: {', '.join(imp.ignored)}")


def _print_shape(s: Shape) -> None:
    rows = [{"component": k, "params": v} for k, v in s.breakdown().items()]
    arch = ", ".join([s.mlp, s.position, s.norm,
                      "biases" if s.bias else ("q/k/v biases" if s.qkv_bias else "no biases")]
                     + (["qk-norm"] if s.qk_norm else []))
    print_table(rows, [("component", "component"), ("params", "parameters")],
                title=f"{s.n_layer} layers x d_model {s.d_model}, {s.n_head} heads "
                      f"(kv {s.n_kv_head}), d_ff {s.d_ff}, {arch}, vocab {s.vocab_size}, "
                      f"ctx {s.n_ctx}, {'tied' if s.tied_embeddings else 'untied'}")
    _say(f"params_total          {fmt(s.params_total)}  (every trainable parameter)")
    _say(f"params_non_embedding  {fmt(s.params_non_embedding)}  "
               "(Kaplan's N: excludes token/position embeddings and an untied head)")
    _say(f"params_embedding      {fmt(s.params_embedding)}")
    if s.moe:
        _say(f"params_active         {fmt(s.params_active)}  (what one token uses: "
                   f"{s.top_k} of {s.n_experts} routed experts"
                   f"{f' and {s.n_shared_experts} shared' if s.n_shared_experts else ''} in "
                   f"{s.n_sparse_layers} sparse layers)")
        _say(f"params_active_non_embedding {fmt(s.params_active_non_embedding)}  (the N "
                   "of its FLOPs and of the MoE laws)")
        _say(f"experts: d_expert {s.d_expert:,} (granularity {s.granularity:.3g} = d_ff "
                   f"{s.d_ff:,} / d_expert), router {s.d_model:,} x {s.n_experts} per sparse "
                   "layer")
    if s.mla:
        _say(f"latent attention (MLA): query latent {s.q_lora_rank or 'none (full)'}, key/value "
             f"latent {s.kv_lora_rank:,}, heads {s.head_dim} wide ({s.qk_rope_head_dim} rotary), "
             f"values {s.value_head_dim} wide; KV cache {s.kv_cache_width(s.n_head):,} numbers a "
             "token and layer")
    for conv in FLOP_CONVENTIONS:
        _say(f"FLOPs/token {conv:<15} {s.flops_per_token(conv):.4g}  "
                   f"({FLOP_CONVENTIONS[conv]})")
    for n in s.notes:
        click.echo(f"note: {n}")
    if not s.uniform:
        click.echo(f"layer plan: {s.plan}")
        print_table([{"layer": lay.index, "attn": lay.attn, "mlp": lay.mlp, "heads": lay.heads,
                      "kv": lay.kv_heads, "params": sum(s.layer_breakdown(lay.index).values()),
                      "flops": s.layer_flops(lay)} for lay in s.layers()],
                    [("layer", "layer"), ("attn", "attention"), ("mlp", "MLP"),
                     ("heads", "heads"), ("kv", "kv heads"), ("params", "parameters"),
                     ("flops", "fwd matmul FLOPs/token")])


@click.command()
@click.option("--params", "target", type=NUMBER, default=None,
              help="Target non-embedding parameters (Kaplan's N), e.g. 50M or 1e8.")
@click.option("--compute", type=NUMBER_LIST, default=None,
              help="An isoFLOP sweep instead: FLOP budgets (C = 6 N D), e.g. 1e18,3e18,1e19; "
                   "at each, --sizes sizes about its predicted optimum, on C / (6 N) tokens.")
@click.option("--sizes", type=INT, default=7, show_default=True,
              help="With --compute: sizes per budget.")
@click.option("--spread", type=NUMBER, default=4.0, show_default=True,
              help="With --compute: sizes from N_opt / SPREAD to N_opt x SPREAD.")
@click.option("--fit", "fit_file", default=None, metavar="FIT",
              help="With --compute: centre each budget on this compute-law fit's N_opt "
                   "(default: 20 tokens per parameter, Hoffmann et al.'s ratio).")
@click.option("--out", "out", default=None, metavar="SPEC.toml",
              help="With --compute: write the sweep spec here (atomically) for 'archfit sweep "
                   "plan' and 'sweep run'.")
@click.option("--force", is_flag=True, help="With --out: replace an existing file.")
@click.option("--depths", type=INT_LIST, default=None, help="Depths, e.g. 1,2,4,8,16.")
@click.option("--ff-ratios", type=NUMBER_LIST, default="4", show_default=True,
              help="d_ff/d_model ratios, e.g. 2,4,8.")
@click.option("--aspect-ratios", type=NUMBER_LIST, default=None,
              help="Kaplan family: d_model/n_layer ratios instead of depths.")
@click.option("--fixed-width", type=INT, default=None,
              help="Petty family: hold d_model, vary d_ff to stay at the target.")
@click.option("--head-dim", type=INT, default=None, help="Fixed head size (default 64).")
@click.option("--n-head", "n_head", type=INT, default=None, help="Fixed head count instead.")
@click.option("--multiple", type=INT, default=64, show_default=True,
              help="Widths are multiples of this.")
@click.option("--tolerance", type=NUMBER, default=0.05, show_default=True,
              help="Largest relative error accepted.")
@shape_options(*ARCH_FIELDS)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def grid(target, compute, sizes, spread, fit_file, out, force, depths, ff_ratios, aspect_ratios,
         fixed_width, head_dim, n_head, multiple, tolerance, as_json, **arch):
    """Iso-parameter family: for each depth, the width closest to the target size; or, with
    --compute, an isoFLOP sweep written as a sweep spec.

    \b
    Examples:
      archfit grid --params 50e6 --depths 1,2,4,8,16 --ff-ratios 2,4,8
      archfit grid --compute 1e18,3e18,1e19 --sizes 7 --out sweeps/isoflop.toml
    """
    if head_dim is not None and n_head is not None:
        raise click.UsageError("give --head-dim or --n-head, not both")
    if head_dim is None and n_head is None:
        head_dim = 64
    if compute is not None:
        if target is not None or depths is not None or fixed_width is not None:
            raise click.UsageError("--compute plans an isoFLOP sweep: drop --params, --depths "
                                   "and --fixed-width")
        _isoflop_grid(compute, sizes, spread, fit_file, out, force, ff_ratios, aspect_ratios,
                      head_dim, n_head, multiple, as_json, pick(arch, ARCH_FIELDS))
        return
    if target is None:
        raise click.UsageError("give --params (an iso-parameter family) or --compute (an "
                               "isoFLOP sweep)")
    if out or fit_file or force:
        raise click.UsageError("--out, --force and --fit go with --compute")
    chosen = [x is not None for x in (depths, aspect_ratios)].count(True)
    if chosen == 0:
        raise click.UsageError("give --depths (e.g. 2,4,8,16) or --aspect-ratios (e.g. 32,64,128)")
    if aspect_ratios is not None and (depths is not None or fixed_width is not None):
        raise click.UsageError("--aspect-ratios replaces --depths and --fixed-width")
    base = pick(arch, ARCH_FIELDS)
    depths = depths or ()  # given unless --aspect-ratios is (checked above)
    if fixed_width is not None:
        members = fixed_width_family(target, fixed_width, depths, head_dim=head_dim,
                                     n_head=n_head, tolerance=tolerance, **base)
        family = f"Petty family, d_model fixed at {fixed_width}"
    elif aspect_ratios is not None:
        members = []
        for ff in ff_ratios:
            members += aspect_ratio_family(target, aspect_ratios, ff, head_dim=head_dim,
                                           n_head=n_head, multiple=multiple,
                                           tolerance=tolerance, **base)
        family = "Kaplan aspect-ratio family"
    else:
        members = iso_param_family(target, depths, ff_ratios, head_dim=head_dim, n_head=n_head,
                                   multiple=multiple, tolerance=tolerance, **base)
        family = "iso-parameter family"
    if not members:
        raise ShapeError("the family is empty; give at least one depth")
    require_a_fit(members, target, tolerance)
    rows = [m.to_dict() for m in members]
    if as_json:
        emit_json(rows)
        return
    print_table(
        rows,
        [("n_layer", "layers"), ("d_model", "d_model"), ("n_head", "heads"), ("d_ff", "d_ff"),
         ("aspect_ratio", "d/L"), ("params_non_embedding", "non-emb params"),
         ("rel_error", "rel err"), ("within_tolerance", "ok")],
        title=f"{family}: target {target:.4g} non-embedding parameters (Kaplan's N)",
    )
    for m in members:
        if not m.within_tolerance:
            click.echo(f"note: depth {m.n_layer}: {m.note}")


def _isoflop_grid(compute, sizes, spread, fit_file, out, force, ff_ratios, aspect_ratios,
                  head_dim, n_head, multiple, as_json, base) -> None:  # type: ignore[no-untyped-def]
    """``grid --compute``: the plan as a table (or JSON), and the spec written to ``out``."""
    from archfit.sweep.isoflop_plan import DEFAULT_ASPECT, isoflop_spec, plan_isoflop

    if len(ff_ratios) != 1 or (aspect_ratios and len(aspect_ratios) != 1):
        raise click.UsageError("--compute takes one --ff-ratios and one --aspect-ratios value")
    centre, where = None, "20 tokens per parameter (Hoffmann et al. 2022; assumed)"
    if fit_file:
        from archfit.laws import load_fit

        f = load_fit(fit_file)
        if f.law_obj.target_kind != "compute":
            raise click.BadParameter(f"{fit_file}: a {f.law} fit answers no FLOP budget; give "
                                     "a compute-law fit (chinchilla, isoflop)",
                                     param_hint="--fit")
        centre = lambda C: f.law_obj.compute_optimal(f.params, C)[0]  # noqa: E731
        where = f"N_opt of {f.label} (fitted)"
    aspect = aspect_ratios[0] if aspect_ratios else DEFAULT_ASPECT
    runs = plan_isoflop(compute, sizes, spread, centre=centre, aspect_ratio=aspect,
                        ff_ratio=ff_ratios[0], head_dim=head_dim, n_head=n_head,
                        multiple=multiple, **base)
    desc = (f"isoFLOP sweep: {len(compute)} budgets, {sizes} sizes each from N_opt / "
            f"{spread:g} to N_opt x {spread:g} about {where}; D = C / (6 N), N non-embedding")
    if out:
        import tomli_w

        from archfit.io import atomic_write, check_output

        check_output(out, "sweep spec", force=force)
        model = {k: v for k, v in base.items() if v is not None}
        raw = isoflop_spec(runs, "isoflop", desc, model)
        atomic_write(out, tomli_w.dumps(raw))
    rows = [r.row() for r in runs]
    if as_json:
        emit_json({"description": desc, "runs": rows, "spec": out})
        return
    print_table(rows, [("budget_flops", "C (FLOPs)"), ("n_layer", "layers"),
                       ("d_model", "d_model"), ("n_head", "heads"), ("d_ff", "d_ff"),
                       ("params_non_embedding", "non-emb params"), ("tokens", "tokens"),
                       ("tokens_per_param", "D / N")],
                title=wrap(desc))
    if out:
        click.echo(f"wrote {out}: archfit sweep plan {out}")
