"""``archfit predict`` (loss with prediction intervals from a fit) and ``archfit backtest``
(fit below a size, predict above it, report coverage and error)."""

from __future__ import annotations

from typing import Any

import click

from archfit.cli.common import (FILE_PATH, SEED, COUNT, NUMBER, NUMBER_LIST, emit_json,
                                group_option, map_option, print_table)
from archfit.cli.fit_cmd import parse_map


def _interval(value: float) -> float:
    if not 0 < value < 1:
        raise click.BadParameter(f"{value:g} is not between 0 and 1 (e.g. 0.95)",
                                 param_hint="--interval")
    return value


@click.command()
@click.argument("fit_file", metavar="FIT")
@click.argument("files", nargs=-1, required=True)
@map_option
@click.option("--interval", type=float, default=0.95, show_default=True,
              help="Level of the prediction intervals.")
@click.option("--limit", type=COUNT, default=40, show_default=True,
              help="Rows to print (0: all); --json always has all.")
@click.option("--json", "as_json", is_flag=True, help="Print the predictions as JSON.")
def predict(fit_file, files, maps, interval, limit, as_json):
    """Predict the loss of runs with prediction intervals.

    FIT is a fit artifact (archfit fit --out) of a law with a loss model; FILES are tables of
    the runs to predict (parquet, CSV, JSONL). Each interval is for a new run: it holds the
    uncertainty of the law's parameters (the fit's bootstrap) and the scatter of runs about
    the law. When the rows have a loss, the actual loss and the coverage are printed too.

    \b
    Example:
      archfit predict fits/joint.json sweeps/bigger.parquet --interval 0.9
    """
    from archfit.interval import describe
    from archfit.laws import load_fit
    from archfit.laws.inference.backtest import Predictions
    from archfit.sweep.store import read_runs

    f = load_fit(fit_file)
    table = read_runs(files, parse_map(maps), require_loss=False, every_row=True,
                      optional=f.law_obj.columns)  # a formula's own variables too
    p = Predictions(f, table, _interval(interval))
    if w := p.outside_span:
        click.echo(f"warning: {w}", err=True)
    n, keys, actual, has, summary, row = p.n, p.keys, p.actual, p.has, p.summary, p.row
    prov = f.band_provenance()
    if as_json:  # streamed a row at a time: a million rows never sit in memory as one string
        import json

        from archfit.io import jsonable

        head = json.dumps(jsonable({"fit": f.label, "law": f.law, "level": interval,
                                    **summary}), allow_nan=False)
        click.echo(head[:-1] + ', "rows": [', nl=False)
        for k, rows in enumerate(p.json_rows(interval, prov)):
            click.echo(("," if k else "") + "\n" + ",\n".join(rows), nl=False)
        click.echo("\n]}")
        return
    shown = [row(i) for i in range(n if not limit else min(limit, n))]
    print_table(shown, [(k, k) for k in keys] + [("predicted", "predicted"),
                                                 ("low", f"{interval:.0%} low"),
                                                 ("high", f"{interval:.0%} high")]
                + ([("actual", "actual")] if actual is not None else []),
                title=f"loss (nats/token) predicted by {f.label}; low, high: "
                      + describe(prov, interval, "prediction interval"),
                caption=(f"{n - len(shown)} more rows: --limit 0 or --json"
                         if len(shown) < n else None))
    if summary:
        click.echo(f"coverage of the {interval:.0%} intervals: {summary['coverage']:.0%} of "
                   f"the {int(has.sum())} rows with a loss (of {n}); mean error "
                   f"{summary['mean_rel_error']:+.1%}, RMS {summary['rms_rel_error']:.1%}")


def _banded(r: dict[str, Any]) -> dict[str, Any]:
    """A backtest's JSON: each held-out row's prediction interval one ``interval``, the level
    ``level``."""
    from archfit.interval import banded_rows

    if r.get("error"):
        return r
    out = {k: v for k, v in r.items() if k not in ("interval", "band_provenance")}
    out["level"] = r["interval"]
    out["rows"] = banded_rows(r["rows"], r["interval"], r["band_provenance"])
    return out


def loss_laws() -> list[str]:
    """The registered laws that predict loss (what a backtest can check), from the registry."""
    from archfit.laws import LAWS

    return [n for n, law in LAWS.items() if law.predicts_loss]


@click.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--law", default="depth-joint", show_default=True,
              help=f"A law with a loss model: {', '.join(loss_laws())}.")
@click.option("--cut", type=NUMBER, default=None,
              help="Fit on runs with params <= this, predict the rest.")
@click.option("--cuts", type=NUMBER_LIST, default=None,
              help="Several cuts, e.g. --cuts 1e8,3e8 (one backtest each).")
@map_option
@group_option
@click.option("--bootstrap", type=COUNT, default=200, show_default=True,
              help="Bootstrap resamples of each fit.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--interval", type=float, default=0.95, show_default=True,
              help="Level of the prediction intervals.")
@click.option("--plot", "plot_path", type=FILE_PATH, default=None,
              help="Draw predicted vs actual with the intervals here (PNG).")
@click.option("--force", is_flag=True, help="Replace a --plot file archfit did not draw.")
@click.option("--dedupe", is_flag=True, help="Drop rows that are exact duplicates.")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: coverage, mean_rel_error, rms_rel_error, rows, classes, verdict.")
def backtest(files, law, cut, cuts, maps, group, bootstrap, seed, interval, plot_path, force,
             dedupe, as_json):
    """Fit a law on the smaller runs and predict the larger ones.

    Each cut stands alone: one that cannot be fitted prints its reason and the others run
    (exit status 0 when any ran; --json gives each cut an "error" field, null when it ran).
    For each cut: fit LAW on the runs with params <= CUT, predict every run above it with
    prediction intervals, and report the coverage of the intervals, the mean and RMS relative
    error, per held-out size class the shape the fit would pick against the one that won (and
    the regret, in nats/token), and the verdict the fit gave.

    \b
    Examples:
      archfit backtest sweeps/scattered.parquet --law depth-joint --cut 3e8
      archfit backtest datasets/chinchilla_epoch2024.csv --law chinchilla --cuts 1e9,3e9
    """
    from archfit.laws import get_law
    from archfit.laws.inference.backtest import backtests
    from archfit.sweep.store import expand_paths, read_runs

    all_cuts = list(cuts or []) + ([cut] if cut is not None else [])
    if not all_cuts:
        raise click.BadParameter("give --cut N or --cuts A,B,...", param_hint="--cut")
    if plot_path:
        from archfit.io import check_output
        from archfit.plots import is_archfit_png

        check_output(plot_path, "backtest figure", inputs=expand_paths(files), force=force,
                     ours=is_archfit_png)
    table = read_runs(files, parse_map(maps), keep=list(group) or None,
                      signed_loss=get_law(law).signed_loss)
    for n in table.notes:
        click.echo(f"note: {n}", err=True)
    uniq = sorted(set(all_cuts))

    def progress(i: int, n: int) -> None:
        if n > 1:
            click.echo(f"backtest: split {i} of {n} ({len(uniq)} cuts)", err=True)

    results = backtests(uniq, frame=table, law=law, bootstrap=bootstrap, seed=seed,
                        interval=_interval(interval), group=list(group) or None,
                        on_split=progress, dedupe=dedupe)
    ran = [r for r in results if not r["error"]]
    if plot_path:
        from archfit.plots import draw_backtest

        draw_backtest(ran, plot_path)
    if as_json:
        return emit_json(_banded(results[0]) if len(results) == 1 else
                         {"backtests": [_banded(r) for r in results]})
    groups: dict[float, list[float]] = {}  # cuts that split the runs alike, printed once
    for r in results:
        groups.setdefault(r["split_of_cut"], []).append(r["cut"])
    for r in results:
        cs = groups[r["split_of_cut"]]
        if r["cut"] != cs[0]:
            continue
        at = (f"cut {r['cut']:.3g}" if len(cs) == 1 else
              f"cuts {cs[0]:.3g} to {cs[-1]:.3g} ({len(cs)} cuts, one split of the runs)")
        if r["error"]:
            click.echo(f"backtest of {r['law']} at {at}: not run: {r['error']}")
            continue
        _report(r, at)
    if plot_path:
        click.echo(f"wrote {plot_path}")


def _report(r: dict, at: str) -> None:
    """One cut's backtest in text: what was fitted and predicted, the coverage and errors, the
    verdict, and per held-out size class the shape picked against the winner."""
    click.echo(f"backtest of {r['law']} at {at}: fitted on {r['n_train']} rows, "
               f"predicted {r['n_test']} (bootstrap unit: {r['fit']['unit']})")
    for n in r.get("notes", []):
        click.echo(f"  note: {n}")
    click.echo(f"  coverage of the {r['interval']:.0%} prediction intervals (fitted): "
               f"{r['coverage']:.0%}; "
               f"mean error {r['mean_rel_error']:+.1%}, RMS {r['rms_rel_error']:.1%}, "
               f"mean interval ±{r['mean_halfwidth_rel']:.1%}")
    click.echo(f"  the fit's verdict: {r['verdict']}" + (
        f" ({'; '.join(r['verdict_reasons'])})" if r["verdict_reasons"] else "")
        + f"; at the largest held-out size: {r['verdict_at_largest']}")
    if r["classes"]:
        print_table([{"params": c["params"], "runs": c["n_runs"],
                      "picked": c["predicted_best"]["n_layer"],
                      "best": c["actual_best"]["n_layer"], "regret": c["regret"],
                      "ok": c["within_interval"]} for c in r["classes"]],
                    [("params", "size N"), ("runs", "runs"), ("picked", "picked depth"),
                     ("best", "best depth"), ("regret", "regret (nats)"),
                     ("ok", "within interval")],
                    title="  per held-out size class: the shape the fit picks vs the winner")
