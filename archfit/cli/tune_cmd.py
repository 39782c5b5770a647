"""``archfit tune``: write the learning-rate x batch sweep at small proxy sizes that finds a
model's recipe (:mod:`archfit.recommending.tuning`)."""

from __future__ import annotations

import os

import click

from archfit.cli.common import FILE_PATH, INT, NUMBER, NumberListType, emit_json
from archfit.text import wrap


@click.command()
@click.option("--params", type=NUMBER, required=True,
              help="The target: non-embedding parameters (Kaplan's N), e.g. 7e9.")
@click.option("--sizes", type=NumberListType(), required=True,
              help="Proxy sizes (non-embedding parameters), 3 or more, e.g. 3e4,6e4,1.2e5.")
@click.option("--tokens-per-param", type=NUMBER, default=None,
              help="Training tokens per parameter at each proxy (default 20, Hoffmann et al. "
                   "2022's compute-optimal ratio).")
@click.option("--depth", type=INT, default=None,
              help="The proxies' depth (default: the default shape law's optimum at their "
                   "middle size, at least 2).")
@click.option("--ctx", type=INT, default=128, show_default=True,
              help="The proxies' context length (tokens per sequence).")
@click.option("--family", type=click.Choice(["llama", "gpt2"]), default="llama",
              show_default=True, help="The proxies' block, the target's.")
@click.option("--rates", type=NumberListType(), default=None,
              help="Your own learning rates (5 or more) instead of the grid around the "
                   "published laws, e.g. after a first pass found its best runs at an edge.")
@click.option("--batch-sizes", type=NumberListType(integer=True), default=None,
              help="Your own batches in sequences per step (3 or more), likewise.")
@click.option("--name", default=None, help="The sweep's name (default tune-<params>).")
@click.option("-o", "--output", type=FILE_PATH, required=True,
              help="The sweep spec to write (TOML); an existing file is not overwritten.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
def tune(params, sizes, tokens_per_param, depth, ctx, family, rates, batch_sizes, name, output,
         as_json):
    """Write the tuning sweep: every proxy at every learning rate and batch, the grid reaching
    a factor 2 past the published laws' values at each proxy. Train it with 'archfit sweep run',
    fit it with 'archfit fit --law lr-batch' and pass the fit to 'archfit recommend --fit': the
    recipe's rate and batch are then your sweep's, with their intervals, and the verdict says
    how far past the largest proxy the target lies.

    \b
      archfit tune --params 7e9 --sizes 3e4,6e4,1.2e5 -o tune.toml
      archfit sweep run tune.toml && archfit sweep collect tune.toml -o tune.parquet
      archfit fit tune.parquet --law lr-batch --out lr.json
      archfit recommend --params 7e9 --fit lr.json
    """
    from archfit.recommending.tuning import plan

    if os.path.exists(output):
        raise click.UsageError(f"-o {output}: the file exists; archfit does not overwrite it "
                               "(name another, or remove it first)")
    p = plan(params, sizes, tokens_per_param=tokens_per_param, depth=depth, ctx=ctx,
             name=name, family=family, rates=rates, batch_sizes=batch_sizes)
    p.write(output)
    if as_json:
        emit_json({**p.to_json(), "output": output})
        return
    click.echo(f"wrote {output}: {p.n_runs} runs ({len(p.sizes)} proxy sizes x "
               f"{len(p.rates)} learning rates x {len(p.batches)} batches, one seed)")
    step = "as given" if rates else "a factor of sqrt(2) apart"
    click.echo(wrap(f"rates {p.rates[0]:.3g} to {p.rates[-1]:.3g} ({step}); batches "
                    f"{p.batches[0]} to {p.batches[-1]} sequences of "
                    f"{p.ctx} tokens; {p.tokens_per_param:g} tokens per parameter, depth "
                    f"{p.depth}, {family} block"))
    for n in p.notes:
        click.echo(wrap(f"note: {n}"))
    click.echo(wrap(f"next: archfit sweep run {output}, then 'archfit sweep collect', 'archfit "
                    f"fit RUNS --law lr-batch --out lr.json' and 'archfit recommend --params "
                    f"{params:g} --fit lr.json'"))
