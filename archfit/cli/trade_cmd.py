"""``archfit trade``: what a per-layer plan buys against the uniform shape."""

from __future__ import annotations

import click

from archfit.cli.common import NUMBER, emit_json


@click.command()
@click.argument("table", metavar="TABLE")
@click.option("--by", default="variant", show_default=True, metavar="COL",
              help="The column that names each run's variant.")
@click.option("--baseline", default="uniform", show_default=True,
              help="The value of --by the others are compared with.")
@click.option("--target-loss", type=NUMBER, default=None,
              help="Time to this validation loss (default: the highest final loss among the "
                   "runs compared, which every run reaches).")
@click.option("--curves", default=None, metavar="FILE",
              help="The loss curves (default: TABLE's .curves.parquet beside it).")
@click.option("--gpu", default="h100", show_default=True,
              help="The accelerator the modelled step time is for.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def trade(table, by, baseline, target_loss, curves, gpu, as_json):
    """Each layer variant against the uniform shape at the same size, lr and seed: loss at
    equal tokens, step time (measured and modelled) and time to a target loss, with 95%
    intervals across seeds, and one verdict line per variant.

    \b
    Examples:
      archfit sweep run sweeps/layer-variants.toml
      archfit sweep collect sweeps/layer-variants.toml -o lv.parquet
      archfit trade lv.parquet
    """
    from archfit.recommending.trading import trade as run_trade

    report = run_trade(table, by=by, baseline=baseline, curves=curves,
                       target_loss=target_loss, gpu=gpu)
    if as_json:
        emit_json(report.to_dict())
        return
    click.echo(report.summary())
