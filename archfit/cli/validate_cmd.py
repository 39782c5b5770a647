"""``archfit validate``: train the recommendation and its rivals at the target (see
:mod:`archfit.recommending.validation`)."""

from __future__ import annotations

import os

import click

from archfit.cli.common import FILE_PATH, PATH, INT, NUMBER, emit_json


@click.command()
@click.argument("fit_file", metavar="FIT")
@click.option("--params", "target", type=NUMBER, required=True,
              help="Size to validate at (non-embedding parameters, e.g. 7e5 or 1B).")
@click.option("--spec", "spec_path", required=True,
              help="The sweep spec the fit's runs came from: its recipe (data, context, "
                   "vocab, head size, optimiser, budget, executor) trains the shapes.")
@click.option("--alternatives", type=INT, default=4, show_default=True,
              help="Rival shapes of the same size, half shallower (/2, /4, ...), half deeper "
                   "(x2, x4, ...).")
@click.option("--seeds", type=INT, default=2, show_default=True,
              help="Seeds per shape; 2 or more measure the noise the verdict is judged by.")
@click.option("--tokens", type=NUMBER, default=None,
              help="Training tokens per run (default: the spec's budget).")
@click.option("--lr", type=NUMBER, default=None,
              help="Learning rate (default: the spec's first).")
@click.option("--executor", type=click.Choice(["local", "slurm", "ray"]), default="local",
              show_default=True, help="Where the runs train (the spec's executor settings apply).")
@click.option("--concurrency", type=INT, default=None, help="Local: runs at a time.")
@click.option("--threads", type=INT, default=None, help="Local CPU: torch threads per run.")
@click.option("--out", "out_dir", type=PATH, default=None,
              help="Folder for the spec, runs, table and figure (default: NAME-validate-N). "
                   "Finished runs in it are not trained again.")
@click.option("--plan-only", is_flag=True,
              help="Write the validation sweep spec (-o) and stop, e.g. to run on a cluster.")
@click.option("-o", "--output", type=FILE_PATH, default=None,
              help="With --plan-only: the spec file to write.")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Draw predicted and measured loss against depth (OUT/validation.png).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def validate(fit_file, target, spec_path, alternatives, seeds, tokens, lr, executor,
             concurrency, threads, out_dir, plan_only, output, plot, as_json):
    """Train the shape FIT recommends at --params beside rival shapes of the same size, and
    say whether the recommendation held.

    Each shape trains --seeds times with the recipe of --spec. The verdict: held (the
    recommended shape is best, or within the seed noise of the best), missed (a rival beats
    it beyond the noise) or inconclusive (the noise is larger than the differences). It also
    says how many measured losses fell inside the fit's 95% prediction intervals.

    \b
    Example:
      archfit validate demo-out/demo-depth-joint.json --params 7e5 --spec sweeps/demo.toml
      archfit validate fits/joint.json --params 1e9 --spec sweeps/levine-small.toml \\
          --plan-only -o validate-1e9.toml
    """
    from archfit.recommending import validation as va
    from archfit.io import check_output

    p = va.plan(fit_file, target, spec_path, alternatives=alternatives, seeds=seeds,
                tokens=tokens, lr=lr)
    if plan_only:
        if not output:
            raise click.UsageError("--plan-only needs -o FILE, the spec to write")
        check_output(output, "validation spec", inputs=[fit_file, spec_path])
        p.write(output)
        click.echo(f"wrote {output}: {len(p.candidates)} shapes x {seeds} seeds; train it with "
                   f"'archfit sweep run {output} --out DIR', then judge with 'archfit validate "
                   f"{fit_file} --params {target:g} --spec {spec_path} --out DIR'")
        for n in p.notes:
            click.echo(f"note: {n}", err=True)
        return
    out_dir = out_dir or p.raw["name"]
    check_output(out_dir, "validation folder", inputs=[fit_file, spec_path], folder=True)
    n = len(p.candidates) * seeds
    click.echo(f"validating {p.fit.label} at {target:.3g}: {len(p.candidates)} shapes x {seeds} "
               f"seeds = {n} runs on {executor}, in {out_dir}", err=True)
    left = [n]

    def done(d: str, st: str) -> None:
        left[0] -= 1
        click.echo(f"  run {os.path.basename(d)}: {st} ({n - left[0]} of {n})", err=True)

    v = va.run(p, out_dir, executor, concurrency=concurrency, threads=threads, on_done=done)
    fig = None
    if plot:
        from archfit.plots import draw_validation

        fig = draw_validation(v.to_dict(), os.path.join(out_dir, "validation.png"))
    if as_json:
        emit_json({**v.to_dict(), "figure": fig, "out": out_dir})
        return
    click.echo(v.text())
    if fig:
        click.echo(f"figure: {fig}")
