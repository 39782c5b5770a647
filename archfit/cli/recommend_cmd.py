"""``archfit recommend``: no torch, no matplotlib, no polars on this path (cold start matters)."""

from __future__ import annotations

import click

from archfit.cli.common import INT, NUMBER, emit_json, fmt


@click.command()
@click.option("--params", type=NUMBER, default=None,
              help="Target size: non-embedding parameters (Kaplan's N), e.g. 1e12 or 175B.")
@click.option("--compute", type=NUMBER, default=None,
              help="Instead of --params: a training budget in FLOPs (C = 6 N D).")
@click.option("--fit", "fits", multiple=True, metavar="FILE|NAME",
              help="Fit artifact or published fit name (repeatable: shape, compute, ff-ratio).")
@click.option("--law", "laws", multiple=True, metavar="NAME",
              help="Published fit by name (levine2020, epoch2024, hoffmann2022; see 'archfit "
                   "laws'). Default: levine2020, and epoch2024 for --compute.")
@click.option("--vocab", type=INT, default=50257, show_default=True)
@click.option("--ctx", type=INT, default=2048, show_default=True)
@click.option("--head-dim", type=INT, default=128, show_default=True)
@click.option("--multiple-of", type=INT, default=128, show_default=True,
              help="d_model (and d_ff) are multiples of this.")
@click.option("--ff-ratio", default="4", show_default=True,
              help="d_ff/d_model, or 'auto' (needs an ff-ratio --fit).")
@click.option("--mlp", type=click.Choice(["gelu", "relu2", "swiglu"]), default="gelu",
              show_default=True)
@click.option("--kv-heads", type=INT, default=None, help="Key/value heads (GQA).")
@click.option("--tp", type=INT, default=None, help="Tensor-parallel degree: heads divisible by it.")
@click.option("--untied", is_flag=True, help="Untied output head.")
@click.option("--rope", is_flag=True, help="Rotary positions (no position embedding).")
@click.option("--top", type=INT, default=5, show_default=True, help="Alternatives to list.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def recommend(params, compute, fits, laws, vocab, ctx, head_dim, multiple_of, ff_ratio, mlp,
              kv_heads, tp, untied, rope, top, as_json):
    """Recommend a buildable shape (depth, width, heads, d_ff) for a size or a FLOP budget.

    \b
    Examples:
      archfit recommend --params 1e12
      archfit recommend --params 7B --fit fits/demo-levine.json --tp 8
      archfit recommend --compute 1e24 --law hoffmann2022
    """
    from archfit.recommender import recommend as rec

    if (params is None) == (compute is None):
        raise click.UsageError("give --params (a size) or --compute (a FLOP budget)")
    if ff_ratio != "auto":
        ff_ratio = NUMBER.convert(ff_ratio, None, None)
    r = rec(params, compute=compute, fit=list(fits) + list(laws) or None, vocab=vocab, ctx=ctx,
            head_dim=head_dim, multiple_of=multiple_of, ff_ratio=ff_ratio, mlp=mlp,
            kv_heads=kv_heads, tp=tp, top=top, tied=not untied, rope=rope)
    if as_json:
        emit_json(r.to_dict())
        return
    click.echo(r.text())
    click.echo("")
    cols = [("n_layer", "layers"), ("d_model", "d_model"), ("n_head", "heads"), ("d_ff", "d_ff"),
            ("params_non_embedding", "non-emb params"), ("rel_error", "vs target"),
            ("loss_penalty", "loss penalty")]
    click.echo("alternatives (first row = recommended):")
    click.echo("  ".join(f"{h:>15}" for _, h in cols))
    for row in r.alternatives_records:
        cells = []
        for k, _ in cols:
            v = row[k]
            cells.append(f"{v:+.2%}" if k == "rel_error" else
                         (f"{v:.4f}" if k == "loss_penalty" and v is not None else fmt(v)))
        click.echo("  ".join(f"{c:>15}" for c in cells))
