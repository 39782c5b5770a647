"""``archfit demo``: the README's first command, end to end and checked against reality:
sweep -> collect -> fit -> recommend a few times beyond the data -> validate that recommendation
by training it beside its rivals -> figures -> what the published law says at 1e9.

One vocab and one context run through all of it: the sweep's (bytes, 256; ctx 128)."""

from __future__ import annotations

import math
import os
from typing import Any

import click

from archfit.text import wrap

from archfit.cli.common import PATH, INT, NUMBER

PUBLISHED_LAW = "levine2020"
BEYOND = 3.0  # the default target: this many times the sweep's largest size
FAR = 1e9  # the size the closing section asks the published law about


def _say(step: str) -> None:
    click.echo(step, err=True)


def _print(text: str = "") -> None:
    """The demo's results, each line within 100 columns: stdout, or stderr when --json keeps
    stdout for the document."""
    click.echo(wrap(text), err=bool(click.get_current_context().params.get("as_json")))


def _spec_path(spec_path: str | None) -> str:
    if spec_path is not None:
        return spec_path
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(here, "sweeps", "demo.toml")


def _sweep(spec: Any, out_dir: str, concurrency: int | None) -> str:
    from archfit.sweep import store
    from archfit import sweep as sw

    runs = os.path.join(out_dir, "runs")
    dirs = sw.prepare_dirs(spec, runs)
    c = sw.counts(spec, runs)
    _say(f"[1/6] sweep {spec.name}: {c['planned']} runs ({c['done']} already done) on the "
         "embedded stdlib corpus")

    def tick(d: str, st: str) -> None:
        k = sw.counts(spec, runs)
        _say(f"      {k['done']}/{k['planned']} runs done ({st})")

    sw.execute(spec, runs, dirs, "local", concurrency=concurrency, on_done=tick)
    path, _, n = store.collect(spec, runs, os.path.join(out_dir, f"{spec.name}.parquet"))
    _say(f"[2/6] collected {n} runs -> {path}")
    return path


def _far_section(fit: Any, shape: Any, largest: float) -> None:
    """What the published law says at 1e9, and why this sweep cannot speak for that size."""
    import warnings

    from archfit.errors import UninformativeWarning
    from archfit.laws import load_fit
    from archfit.recommending import recommend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeWarning)
        # the sweep's block, vocab and context; heads of 64 (the sweep's 8 are a CPU-size
        # choice)
        pub = recommend(FAR, fit=load_fit(PUBLISHED_LAW), vocab_size=shape.vocab_size,
                        n_ctx=shape.n_ctx, head_dim=64, multiple_of=64, family="gpt2")
        own = fit.verdict(FAR)
    s, near = pub.shape, pub.near_optimal or {"n_layer": (math.nan, math.nan)}
    _print(f"At {FAR:.0e}: the published law ({PUBLISHED_LAW}) gives n_layer {s.n_layer}, "
               f"d_model {s.d_model:,}, n_head {s.n_head}, d_ff {s.d_ff:,} (vocab "
               f"{s.vocab_size}, ctx {s.n_ctx}; verdict {pub.trust['verdict']}; any depth "
               f"from {near['n_layer'][0]:.0f} to {near['n_layer'][1]:.0f}"
               f" within 0.5% of its optimum's loss at Kaplan et al.'s curvature). This sweep "
               f"cannot speak for that size: {FAR:.0e} is {FAR / largest:,.0f}x beyond its "
               f"largest run ({largest:.3g}); its own fit's verdict there is {own.verdict}"
               + (f" ({'; '.join(own.reasons)})" if own.reasons else "") + ".")


@click.command()
@click.option("--spec", "spec_path", default=None,
              help="Sweep spec (default: sweeps/demo.toml beside this checkout: 17 runs, "
                   "4 sizes 3e4-2.4e5 x depths 1-6, 3e5 tokens each).")
@click.option("--out", "out_dir", type=PATH, default="demo-out", show_default=True,
              help="Folder for runs, the collected parquet, the fit, the validation and the "
                   "figures.")
@click.option("--law", default="depth-joint", show_default=True,
              help="Shape law to fit (depth-joint suits a scattered sweep).")
@click.option("--params", "target", type=NUMBER, default=None,
              help=f"Size to recommend and validate at (non-embedding parameters; default "
                   f"{BEYOND:g}x the sweep's largest size: 7.2e5 for the demo spec).")
@click.option("--bootstrap", type=INT, default=200, show_default=True,
              help="Bootstrap resamples of the fit.")
@click.option("--alternatives", type=INT, default=4, show_default=True,
              help="Rival shapes trained beside the recommendation.")
@click.option("--seeds", type=INT, default=2, show_default=True,
              help="Seeds per validation shape.")
@click.option("--no-validate", is_flag=True, help="Skip training the recommendation's rivals.")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON document (fit, recommendation, validation, figures) on "
                   "stdout; the human report goes to stderr.")
@click.option("--concurrency", type=INT, default=None, help="Runs at a time (default: the "
              "spec's, 2).")
def demo(spec_path, out_dir, law, target, bootstrap, alternatives, seeds, no_validate,
         as_json, concurrency):
    """Sweep, fit, recommend, and check the recommendation by training it.

    With the defaults: 17 tiny runs on the embedded corpus (this Python's standard library,
    bytes, ctx 128), a depth-joint fit with 200 bootstrap resamples, a recommendation at 3x the
    largest run (7.2e5 non-embedding parameters) with its verdict, then 10 validation runs
    (the recommendation and 4 rivals, 2 seeds each) that say whether it held, the figures, and
    what the published Levine law says at 1e9. About 4 minutes on 2 idle cores."""
    from archfit import sweep as sw
    from archfit.recommending import validation as va
    from archfit.io import check_output
    from archfit.laws.inference.selection import fit as fit_law
    from archfit.plots import draw_all, draw_validation

    spec_path = _spec_path(spec_path)
    spec = sw.load_spec(spec_path)
    check_output(out_dir, "demo's output", inputs=[spec_path], folder=True)
    path = _sweep(spec, out_dir, concurrency)

    _say(f"[3/6] {law} fitted to these runs ({bootstrap} bootstrap resamples over runs):")
    fit = fit_law(paths=[path], law=law, bootstrap=bootstrap)
    fit_path = os.path.join(out_dir, f"{spec.name}-{law}.json")
    fit.to_json(fit_path)
    _print(fit.summary())
    _print("")

    largest = float(fit.diagnostics["span"]["params_max"])
    target = target or BEYOND * float(max(r.meta.get("target_params") or 0 for r in spec.runs)
                                      or largest)
    _say(f"[4/6] recommendation at {target:.3g} non-embedding parameters "
         f"({target / largest:.2g}x the largest run):")
    # the shape validate trains is the one printed: the plan holds the recommendation
    p = va.plan(fit, target, spec, alternatives=alternatives, seeds=seeds)
    rec = p.recommendation
    _print(rec.text())
    _print("")

    v = None if no_validate else _validate(p, out_dir, concurrency)
    from archfit.sweep.store import read_runs

    runs = read_runs([path]).frame  # the sweep's runs, drawn as points on every figure
    figs = draw_all(fit, os.path.join(out_dir, "plots"), data=runs, target=target,
                    recommended=rec)
    if v is not None:
        figs.append(draw_validation(v.to_dict(),
                                    os.path.join(out_dir, "plots", "validation.png")))
    if rec.next_design is not None:  # the batch its 'next:' line begins, among this sweep's runs
        from archfit.plots.design import draw_design

        figs.append(draw_design(rec.next_design, os.path.join(out_dir, "plots", "design.png"),
                                runs=runs))
    _say("[6/6] figures:")
    for f in figs:
        _print(f"  {f}")
    _print("")
    _far_section(fit, rec.shape, largest)
    s = rec.shape
    _print(f"recommended for {target:.3g} non-embedding parameters: n_layer {s.n_layer}, "
               f"d_model {s.d_model:,}, n_head {s.n_head}, d_ff {s.d_ff:,} (vocab "
               f"{s.vocab_size}, ctx {s.n_ctx}); {law} fitted to {spec.name}; verdict: "
               f"{rec.trust['verdict']}")
    n = rec.near_optimal
    if n:
        _print(f"near-optimal at {target:.3g}: depth {n['n_layer'][0]:.3g} to "
               f"{n['n_layer'][1]:.3g} (predicted loss within {n['tolerance']:.1%} of the "
               f"optimum's; {n['basis']})")
    if v is not None:
        _print(v.line())
    if as_json:
        from archfit.cli.common import emit_json

        emit_json({"sweep_table": path, "fit_file": fit_path, "fit_verdict":
                   fit.verdict().to_dict(), "recommendation": rec.to_dict(),
                   "validation": v.to_dict() if v is not None else None, "figures": figs})


def _validate(p: Any, out_dir: str, concurrency: int | None) -> Any:
    from archfit.recommending import validation as va

    n = len(p.candidates) * p.seeds
    _say(f"[5/6] validation: training the recommended shape and {len(p.candidates) - 1} rivals "
         f"at {p.target:.3g}, {p.seeds} seeds each ({n} runs)")
    left = [0]

    def done(d: str, st: str) -> None:
        left[0] += 1
        _say(f"      {left[0]}/{n} validation runs done ({st})")

    v = va.run(p, os.path.join(out_dir, "validate"), concurrency=concurrency, on_done=done)
    _print(v.text())
    _print("")
    return v
