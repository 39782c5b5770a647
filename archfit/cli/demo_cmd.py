"""``archfit demo``: the README's first command: sweep -> collect -> fit -> recommend -> plots.

The demo's sizes are tiny (CPU-sized), so the data alone cannot say much about a 1e9 model: the
demo says so (the verdict), then calibrates the published Levine et al. law with its runs
through a prior and recommends from that posterior, with its own verdict."""

from __future__ import annotations

import os
from typing import Any

import click

from archfit.cli.common import NUMBER

PUBLISHED_LAW = "levine2020"
# The prior's widths are archfit's choice for the demo (Levine et al. publish no standard
# errors): wide enough that a sweep of real models would move the posterior.
PRIOR_WIDTHS = {"a": 0.5, "b": 0.02}


def _say(step: str) -> None:
    click.echo(step, err=True)


def _fit_or_reason(path: str, bootstrap: int, **kw: Any) -> tuple[Any, str | None]:
    from archfit.errors import ArchfitError
    from archfit.laws.fitting import fit as fit_law

    try:
        return fit_law(paths=[path], law="levine", bootstrap=bootstrap, **kw), None
    except ArchfitError as e:
        return None, str(e)


@click.command()
@click.option("--spec", "spec_path", default=None,
              help="Sweep spec (default: sweeps/demo.toml beside this checkout).")
@click.option("--out", "out_dir", default="demo-out", show_default=True,
              help="Folder for runs, the collected parquet, the fits and the figures.")
@click.option("--params", "target", type=NUMBER, default=1e9, show_default=True,
              help="Size to recommend a shape for (non-embedding parameters).")
@click.option("--bootstrap", type=int, default=200, show_default=True)
@click.option("--concurrency", type=int, default=None)
def demo(spec_path, out_dir, target, bootstrap, concurrency):
    """Run the demo sweep on the embedded corpus, fit Levine's law, calibrate the published law
    with the runs, recommend a shape with its verdict, draw the figures."""
    from archfit import store
    from archfit import sweep as sw
    from archfit.laws import load_fit
    from archfit.plots import draw_all
    from archfit.recommender import recommend

    if spec_path is None:
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        spec_path = os.path.join(here, "sweeps", "demo.toml")
    from archfit.io import check_output

    spec = sw.load_spec(spec_path)
    check_output(out_dir, "demo's output", inputs=[spec_path], folder=True)
    runs = os.path.join(out_dir, "runs")
    dirs = sw.prepare_dirs(spec, runs)
    c = sw.counts(spec, runs)
    _say(f"[1/6] sweep {spec.name}: {c['planned']} runs ({c['done']} already done) on the "
         "embedded stdlib corpus")

    def tick(d: str, st: str) -> None:
        k = sw.counts(spec, runs)
        _say(f"      {k['done']}/{k['planned']} runs done ({st})")

    sw.run_local(dirs, concurrency or spec.executor.get("concurrency"),
                 spec.executor.get("threads_per_run"), on_done=tick)
    path, _, n = store.collect(spec, runs, os.path.join(out_dir, f"{spec.name}.parquet"))
    _say(f"[2/6] collected {n} runs -> {path}")

    alone, why = _fit_or_reason(path, bootstrap)
    _say("[3/6] Levine's law fitted to these runs alone:")
    if alone is not None:
        alone.to_json(os.path.join(out_dir, f"{spec.name}-levine.json"))
        click.echo(alone.summary())
    else:
        click.echo(f"the data alone cannot be fitted: {why}")
    click.echo("")

    widths = ",".join(f"{k}={v}" for k, v in PRIOR_WIDTHS.items())
    _say(f"[4/6] the published law ({PUBLISHED_LAW}) calibrated by these runs: prior widths "
         f"{widths} (archfit's choice; Levine et al. publish no errors)")
    cal, why = _fit_or_reason(path, bootstrap, prior=PUBLISHED_LAW, prior_widths=PRIOR_WIDTHS)
    if cal is not None:
        cal.to_json(os.path.join(out_dir, f"{spec.name}-levine-calibrated.json"))
        click.echo(cal.summary())
        basis = f"{PUBLISHED_LAW} calibrated by this sweep through a prior"
    else:
        click.echo(f"calibration failed ({why}); recommending from {PUBLISHED_LAW} alone")
        cal, basis = load_fit(PUBLISHED_LAW), f"{PUBLISHED_LAW} alone (calibration failed)"
    click.echo("")

    _say(f"[5/6] recommendation for {target:.3g} non-embedding parameters ({basis}):")
    ctx = spec.runs[0].shape.n_ctx
    rec = recommend(target, fit=cal, n_ctx=ctx)
    click.echo(rec.text())
    if alone is not None:
        t = recommend(target, fit=alone, n_ctx=ctx).trust
        click.echo(f"(from the data alone the verdict would be {t['verdict']}: "
                   + "; ".join(t["reasons"]) + ")")
    click.echo("")

    figs = draw_all(cal, os.path.join(out_dir, "plots"), target=target, recommended=rec,
                    references=[load_fit(PUBLISHED_LAW)])
    _say("[6/6] figures:")
    for p in figs:
        click.echo(f"  {p}")
    s, ci = rec.shape, (rec.ci or {}).get("n_layer")
    click.echo(f"recommended for {target:.3g} non-embedding parameters: n_layer {s.n_layer}, "
               f"d_model {s.d_model:,}, n_head {s.n_head}, d_ff {s.d_ff:,}"
               + (f" (optimal depth 95% CI [{ci[0]:.1f}, {ci[1]:.1f}])" if ci else "")
               + f"; {basis}; verdict: {rec.trust['verdict']}"
               + (f" ({len(rec.trust['reasons'])} reasons above)" if rec.trust["reasons"]
                  else ""))
