"""``archfit shape`` and ``archfit grid``."""

from __future__ import annotations

import click

from archfit.cli.common import INT, INT_LIST, NUMBER, NUMBER_LIST, emit_json, fmt, print_table
from archfit.errors import ShapeError
from archfit.shapes import FLOP_CONVENTIONS, MLP_KINDS, Shape, aspect_ratio_family, \
    fixed_width_family, iso_param_family


def shape_options(f):  # type: ignore[no-untyped-def]
    """Options that describe the parts of a shape that are not depth/width/heads."""
    opts = [
        click.option("--vocab", "vocab_size", type=INT, default=50257, show_default=True,
                     help="Vocabulary size."),
        click.option("--ctx", "n_ctx", type=INT, default=1024, show_default=True,
                     help="Context length (tokens)."),
        click.option("--mlp", type=click.Choice(MLP_KINDS), default="gelu", show_default=True,
                     help="MLP kind (swiglu has three matrices)."),
        click.option("--untied", is_flag=True, help="Untied output head (counted as embedding)."),
        click.option("--rope", is_flag=True, help="Rotary positions (no position embedding)."),
        click.option("--no-bias", is_flag=True, help="No biases in linears and norms."),
        click.option("--rmsnorm", is_flag=True, help="RMSNorm instead of LayerNorm."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def base_from(vocab_size: int, n_ctx: int, mlp: str, untied: bool, rope: bool, no_bias: bool,
              rmsnorm: bool) -> dict:
    return dict(vocab_size=vocab_size, n_ctx=n_ctx, mlp=mlp, tied_embeddings=not untied,
                position="rope" if rope else "learned", bias=not no_bias,
                norm="rmsnorm" if rmsnorm else "layernorm")


@click.command()
@click.option("--layers", "n_layer", type=INT, required=True, help="Number of blocks.")
@click.option("--width", "d_model", type=INT, required=True, help="d_model.")
@click.option("--heads", "n_head", type=INT, required=True, help="Attention (query) heads.")
@click.option("--ff-ratio", type=NUMBER, default=None, help="d_ff / d_model (default 4).")
@click.option("--d-ff", type=INT, default=None, help="MLP hidden size (instead of --ff-ratio).")
@click.option("--kv-heads", "n_kv_head", type=INT, default=None, help="Key/value heads (GQA/MQA).")
@click.option("--qk-norm", is_flag=True, help="Normalize queries and keys per head.")
@shape_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def shape(n_layer, d_model, n_head, ff_ratio, d_ff, n_kv_head, qk_norm, vocab_size, n_ctx, mlp,
          untied, rope, no_bias, rmsnorm, as_json):
    """Count a shape's parameters (each convention named) and FLOPs per token.

    Example: archfit shape --layers 12 --width 768 --heads 12 --vocab 50257 --ctx 1024
    """
    if ff_ratio is not None and d_ff is not None:
        raise click.UsageError("give --ff-ratio or --d-ff, not both")
    s = Shape(n_layer=n_layer, d_model=d_model, n_head=n_head, d_ff=d_ff, ff_ratio=ff_ratio,
              n_kv_head=n_kv_head, qk_norm=qk_norm,
              **base_from(vocab_size, n_ctx, mlp, untied, rope, no_bias, rmsnorm))
    d = s.to_dict()
    if as_json:
        emit_json(d)
        return
    rows = [{"component": k, "params": v} for k, v in d["breakdown"].items()]
    print_table(rows, [("component", "component"), ("params", "parameters")],
                title=f"{s.n_layer} layers x d_model {s.d_model}, {s.n_head} heads "
                      f"(kv {s.n_kv_head}), d_ff {s.d_ff}, {s.mlp}, vocab {s.vocab_size}, "
                      f"ctx {s.n_ctx}, {'tied' if s.tied_embeddings else 'untied'}")
    click.echo(f"params_total          {fmt(s.params_total)}  (every trainable parameter)")
    click.echo(f"params_non_embedding  {fmt(s.params_non_embedding)}  "
               "(Kaplan's N: excludes token/position embeddings and an untied head)")
    click.echo(f"params_embedding      {fmt(s.params_embedding)}")
    for conv in FLOP_CONVENTIONS:
        click.echo(f"FLOPs/token {conv:<15} {s.flops_per_token(conv):.4g}  "
                   f"({FLOP_CONVENTIONS[conv]})")


@click.command()
@click.option("--params", "target", type=NUMBER, required=True,
              help="Target non-embedding parameters (Kaplan's N), e.g. 50M or 1e8.")
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
@shape_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def grid(target, depths, ff_ratios, aspect_ratios, fixed_width, head_dim, n_head, multiple,
         tolerance, vocab_size, n_ctx, mlp, untied, rope, no_bias, rmsnorm, as_json):
    """Iso-parameter family: for each depth, the width closest to the target size.

    Example: archfit grid --params 50e6 --depths 1,2,4,8,16 --ff-ratios 2,4,8
    """
    if head_dim is not None and n_head is not None:
        raise click.UsageError("give --head-dim or --n-head, not both")
    if head_dim is None and n_head is None:
        head_dim = 64
    chosen = [x is not None for x in (depths, aspect_ratios)].count(True)
    if chosen == 0:
        raise click.UsageError("give --depths (e.g. 2,4,8,16) or --aspect-ratios (e.g. 32,64,128)")
    if aspect_ratios is not None and (depths is not None or fixed_width is not None):
        raise click.UsageError("--aspect-ratios replaces --depths and --fixed-width")
    base = base_from(vocab_size, n_ctx, mlp, untied, rope, no_bias, rmsnorm)
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
