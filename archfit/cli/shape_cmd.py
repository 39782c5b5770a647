"""``archfit shape`` and ``archfit grid``."""

from __future__ import annotations

import click

from archfit.cli.common import (ARCH_FIELDS, INT, INT_LIST, NUMBER, NUMBER_LIST, emit_json, fmt,
                                pick, print_table, shape_options)
from archfit.errors import ShapeError
from archfit.shapes import FLOP_CONVENTIONS, Shape, aspect_ratio_family, fixed_width_family, \
    iso_param_family


@click.command()
@shape_options("n_layer", "d_model", "n_head", "ff_ratio", "d_ff", "n_kv_head", "qk_norm",
               *ARCH_FIELDS, n_layer={"required": True}, d_model={"required": True},
               n_head={"required": True})
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def shape(as_json, **fields):
    """Count a shape's parameters (each convention named) and FLOPs per token.

    Example: archfit shape --layers 12 --width 768 --heads 12 --vocab 50257 --ctx 1024
    """
    if fields["ff_ratio"] is not None and fields["d_ff"] is not None:
        raise click.UsageError("give --ff-ratio or --d-ff, not both")
    s = Shape(**fields)
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
@shape_options(*ARCH_FIELDS)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def grid(target, depths, ff_ratios, aspect_ratios, fixed_width, head_dim, n_head, multiple,
         tolerance, as_json, **arch):
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
    base = pick(arch, ARCH_FIELDS)
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
