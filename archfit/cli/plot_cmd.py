"""``archfit plot``."""

from __future__ import annotations

import click

from archfit.text import wrap

from archfit.cli.common import PATH, NUMBER, emit_json
from archfit.cli.fit_cmd import parse_map
from archfit.laws import ShapeLaw


@click.command()
@click.argument("fit_file", required=False)
@click.argument("data", nargs=-1)
@click.option("-o", "--out", "out_dir", type=PATH, default="plots", show_default=True,
              help="Folder for the figures.")
@click.option("--format", "fmt", type=click.Choice(["png", "svg"]), default="png",
              show_default=True, help="Figure file format.")
@click.option("--map", "maps", multiple=True, metavar="COL=SOURCE",
              help="Map a foreign column of DATA (default: the map the fit was made with).")
@click.option("--target", type=NUMBER, default=None,
              help="Extrapolate to this size and mark the recommended shape there.")
@click.option("--reference", "references", multiple=True, metavar="FILE|NAME",
              help="Another shape-law fit to draw beside this one (e.g. levine2020).")
@click.option("--known-models", "known", is_flag=True,
              help="Draw the known models (datasets/known_models.csv) on the law's optimal-depth "
                   "map instead (FIT_FILE defaults to levine2020).")
@click.option("--force", is_flag=True,
              help="Replace figure files in the folder that archfit did not draw.")
@click.option("--json", "as_json", is_flag=True, help="Print the written paths as JSON.")
def plot(fit_file, data, out_dir, fmt, maps, target, references, known, force, as_json):
    """Draw a fit and its evidence: the figures its law lists (loss vs depth, optimal depth vs
    size with its CI band, iso-loss contours, shape penalty, residuals).

    FIT_FILE is a fit artifact or a published name; DATA (optional) are the runs, drawn as
    points where a figure can show them, read with the fit's own column map unless --map
    gives another. With --known-models: GPT-2/3, Llama, Qwen2.5, ... against the law.
    """
    from archfit.laws import load_fit
    from archfit.plots import draw_all

    from archfit.errors import ArchfitError
    from archfit.io import check_output

    if known:
        _known(fit_file, data, out_dir, fmt, maps, target, references, as_json)
        return
    if fit_file is None:
        raise click.UsageError("give FIT_FILE (a fit artifact or a published name such as "
                               "levine2020), or --known-models")
    fit = load_fit(fit_file)
    from archfit.plots import figure_files, is_archfit_figure

    if not fit.figures():
        raise ArchfitError(f"{fit.label} (law {fit.law}) has nothing archfit can draw: no "
                           "figure of its law applies to it (a published fit carries no runs "
                           "for the residuals); read it with 'archfit laws' or --json")
    check_output(out_dir, "figures", inputs=[fit_file, *data], folder=True, force=force,
                 files=figure_files(fit, fmt), file_ours=is_archfit_figure)
    if target is not None and not isinstance(fit.law_obj, ShapeLaw):
        raise ArchfitError(f"--target marks the recommended shape at a size: it needs a "
                           f"shape-law fit, and a {fit.law} fit has no optimal depth")
    frame = None
    if data:
        from archfit.laws.columns import require_columns
        from archfit.laws.inference.fitting import sane_frame
        from archfit.sweep.store import read_runs

        table = read_runs(data, parse_map(maps) if maps else fit.mapping,
                          signed_loss=fit.law_obj.signed_loss)
        frame = sane_frame(fit.law_obj, table, True, [])  # the checks fit makes (swapped columns)
        require_columns(fit.law_obj, frame)  # runs the law cannot place are not drawn silently
    rec = None
    if target is not None and isinstance(fit.law_obj, ShapeLaw):
        from archfit.recommending import recommend

        rec = recommend(target, fit=fit)
    refs = [load_fit(r) for r in references]
    for r in refs:
        if r.law_obj.target_kind != fit.law_obj.target_kind or r.law_obj.target_kind is None:
            raise ArchfitError(f"--reference {r.label}: a {r.law} fit answers another "
                               f"question than {fit.label}; give a fit of its kind (shape "
                               "laws: levine2020; compute laws: chinchilla, isoflop, envelope)")
    paths = draw_all(fit, out_dir, fmt, data=frame, target=target, recommended=rec,
                     references=refs)
    notes = [] if data or not fit.inputs else [
        "the runs are not drawn as points: give them after the fit (archfit plot "
        f"{fit_file} {' '.join(i.get('path', 'RUNS') for i in fit.inputs[:1])} -o {out_dir})"]
    if as_json:
        emit_json({"figures": paths, "notes": notes})
        return
    click.echo(f"wrote {len(paths)} figure(s):")
    for p in paths:
        click.echo(f"  {p}")
    for n in notes:
        click.echo(wrap(f"note: {n}"))


def _known(fit_file, data, out_dir, fmt, maps, target, references, as_json):  # type: ignore[no-untyped-def]
    from archfit.io import check_output
    from archfit.recommending.landscape import place_known_models
    from archfit.plots import draw_known_models

    if data or maps or target is not None or references:
        raise click.UsageError("--known-models draws the known models only: drop DATA, --map, "
                               "--target and --reference")
    f, rows = place_known_models(fit_file)
    from archfit.plots import is_archfit_figure

    check_output(out_dir, "figures", folder=True, files=[f"known_models.{fmt}"],
                 file_ours=is_archfit_figure)
    path = draw_known_models(f, rows, out_dir, fmt)
    if as_json:
        emit_json({"figures": [path], "models": len(rows)})
        return
    click.echo(f"wrote 1 figure ({len(rows)} models against {f.label}):")
    click.echo(f"  {path}")
