"""``archfit demo``: the README's first command: sweep -> collect -> fit -> recommend -> plots."""

from __future__ import annotations

import os

import click

from archfit.cli.common import NUMBER


@click.command()
@click.option("--spec", "spec_path", default=None,
              help="Sweep spec (default: sweeps/demo.toml beside this checkout).")
@click.option("--out", "out_dir", default="demo-out", show_default=True,
              help="Folder for runs, the collected parquet, the fit and the figures.")
@click.option("--params", "target", type=NUMBER, default=1e9, show_default=True,
              help="Size to recommend a shape for.")
@click.option("--bootstrap", type=int, default=200, show_default=True)
@click.option("--concurrency", type=int, default=None)
def demo(spec_path, out_dir, target, bootstrap, concurrency):
    """Run the demo sweep on the embedded corpus, fit Levine's law, recommend a shape, draw."""
    from archfit import store
    from archfit import sweep as sw
    from archfit.errors import ArchfitError
    from archfit.laws import load_fit
    from archfit.laws.fitting import fit as fit_law
    from archfit.plots import draw_all
    from archfit.recommender import recommend

    if spec_path is None:
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        spec_path = os.path.join(here, "sweeps", "demo.toml")
    spec = sw.load_spec(spec_path)
    runs = os.path.join(out_dir, "runs")
    dirs = sw.prepare_dirs(spec, runs)
    c = sw.counts(spec, runs)
    click.echo(f"[1/5] sweep {spec.name}: {c['planned']} runs ({c['done']} already done) on the "
               "embedded stdlib corpus", err=True)

    def tick(d: str, st: str) -> None:
        k = sw.counts(spec, runs)
        click.echo(f"      {k['done']}/{k['planned']} runs done ({st})", err=True)

    sw.run_local(dirs, concurrency or spec.executor.get("concurrency"),
                 spec.executor.get("threads_per_run"), on_done=tick)
    table = os.path.join(out_dir, f"{spec.name}.parquet")
    path, _, n = store.collect(spec, runs, table)
    click.echo(f"[2/5] collected {n} runs -> {path}", err=True)
    fit_path = os.path.join(out_dir, f"{spec.name}-levine.json")
    try:
        f = fit_law(paths=[path], law="levine", bootstrap=bootstrap)
        f.to_json(fit_path)
        click.echo(f"[3/5] fitted Levine's law -> {fit_path}", err=True)
        click.echo(f.summary())
    except ArchfitError as e:
        click.echo(f"[3/5] the Levine fit failed on this data: {e}; using the published "
                   "levine2020 law for the recommendation", err=True)
        f = load_fit("levine2020")
    click.echo("")
    click.echo(f"[4/5] recommendation for {target:.3g} non-embedding parameters:", err=True)
    rec = recommend(target, fit=f, n_ctx=spec.runs[0].shape.n_ctx)
    click.echo(rec.text())
    click.echo("")
    click.echo("      and from the published Levine et al. 2020 law at 1e12:")
    click.echo(recommend(1e12).text())
    figs = draw_all(f, os.path.join(out_dir, "plots"), target=target, recommended=rec)
    click.echo("[5/5] figures:", err=True)
    for p in figs:
        click.echo(f"  {p}")
