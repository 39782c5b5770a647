"""``archfit fit`` and ``archfit laws``."""

from __future__ import annotations

import math
import sys
from typing import Any

import click

from archfit.text import wrap

from archfit.cli.common import (FILE_PATH, SEED, BOOTSTRAP, NUMBER_LIST, emit_json, group_option,
                                map_option, print_table, shape_options)
from archfit.errors import ArchfitError
from archfit.numbers import parse_number


def parse_pairs(items: tuple[str, ...] | list[str], flag: str, example: str,
                form: str = "KEY=VALUE") -> dict[str, str]:
    """``KEY=VALUE`` items of a repeatable option as a dict."""
    out = {}
    for it in items:
        if "=" not in it:
            raise click.BadParameter(f"{it!r}: write {form}, e.g. {example}", param_hint=flag)
        k, v = it.split("=", 1)
        k = k.strip()
        if k in out and out[k] != v.strip():
            raise click.BadParameter(f"{k} is given twice ({k}={out[k]} and {k}={v.strip()}); "
                                     "give it once", param_hint=flag)
        out[k] = v.strip()
    return out


def parse_map(items: tuple[str, ...]) -> dict[str, str]:
    """``--map params='Model Size'`` items as {archfit column: source column}."""
    return parse_pairs(items, "--map", "params='Model Size'", "archfit_column=source_column")


def _value(key: str, text: str, flag: str) -> float:
    try:
        return float(parse_number(text))
    except ArchfitError:
        raise click.BadParameter(f"{key}={text!r}: not a number", param_hint=flag) from None


def parse_fix(lw, fixes: tuple[str, ...], ties: tuple[str, ...]  # type: ignore[no-untyped-def]
              ) -> tuple[dict[str, float], dict[str, str]]:
    """``--fix`` and ``--tie`` as (fixed values, ties): ``--fix beta=alpha`` names a parameter
    of the law, so it is a tie like ``--tie beta=alpha``."""
    fix, tie = {}, parse_pairs(ties, "--tie", "alpha=beta", "PARAM=OTHER")
    for k, v in parse_pairs(fixes, "--fix", "b=0.0555").items():
        if v in lw.param_names:
            tie[k] = v
        else:
            fix[k] = _value(k, v, "--fix")
    return fix, tie


def parse_prior(text: str | None) -> tuple[str | None, dict[str, float]]:
    """``NAME|FILE[:PARAM=SD,...]`` as (source, widths)."""
    if not text:
        return None, {}
    src, _, rest = text.partition(":")
    if not src:
        raise click.BadParameter(f"{text!r}: name a published fit or a fit file first, e.g. "
                                 "levine2020:a=0.5,b=0.02", param_hint="--prior")
    pairs = parse_pairs([p for p in rest.split(",") if p], "--prior", "levine2020:a=0.5,b=0.02")
    return src, {k: _value(k, v, "--prior") for k, v in pairs.items()}


@click.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--law", default="levine", show_default=True,
              help="Law to fit (see 'archfit laws'), or auto: every law the columns allow, "
                   "scored on the costliest runs held out; the best is fitted and the table "
                   "printed.")
@map_option
@click.option("--out", "out", type=FILE_PATH, default=None,
              help="Write the fit artifact (JSON) here, atomically.")
@click.option("--bootstrap", type=BOOTSTRAP, default="auto", show_default=True,
              help="Bootstrap resamples for CIs: a count (0 for none), or auto: rounds of 200 "
                   "until each parameter's 95% interval ends are known to within 10% of its "
                   "width, at most 1,000, stopping early where the error shows 4,000 would "
                   "not do (the fit says how many it drew, and how many would settle it).")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--targets", type=NUMBER_LIST, default=None,
              help="Sizes (or compute budgets for chinchilla) for derived quantities.")
@click.option("--drop-highest-loss", type=int, default=0, show_default=True,
              help="Drop the K highest-loss runs first (Epoch's protocol drops 5).")
@click.option("--fix", "fixes", multiple=True, metavar="PARAM=VALUE",
              help="Hold a parameter at a value, e.g. --fix b=0.0555, or equal to another, "
                   "e.g. --fix beta=alpha (repeatable).")
@click.option("--tie", "ties", multiple=True, metavar="PARAM=OTHER",
              help="Hold a parameter equal to another, e.g. --tie alpha=beta (Chinchilla-style "
                   "constrained fits; repeatable).")
@click.option("--prior", default=None, metavar="NAME|FILE[:PARAM=SD,...]",
              help="Gaussian prior on the parameters shared with a published fit or fit file; "
                   "widths from its CI or stated, e.g. --prior levine2020:a=0.5,b=0.02.")
@click.option("--formula", "formulas", multiple=True, metavar="TEXT",
              help="A law of your own, e.g. \"loss ~ E + A / params^alpha + B / tokens^beta\": "
                   "the names that are columns are its variables, the rest its parameters "
                   "(+ - * / ^, parentheses, exp, log, sqrt, min, max). Fitted instead of "
                   "--law; repeat it with --law auto to weigh each beside the built-in laws.")
@click.option("--start", "starts", multiple=True, metavar="PARAM=VALUE",
              help="With --formula: a parameter's start (repeatable; default: a grid of "
                   "starts, its coefficients solved for each).")
@click.option("--bounds", "bounds", multiple=True, metavar="PARAM=LOW:HIGH",
              help="With --formula: a parameter's bounds (repeatable; default: none).")
@click.option("--exclude", "excludes", multiple=True, metavar="COLUMN=PATTERN",
              help="Leave out the rows whose COLUMN matches the regular expression PATTERN, "
                   "e.g. --exclude Name=validation-optimal (repeatable).")
@click.option("--dedupe", is_flag=True, help="Drop rows that are exact duplicates.")
@click.option("--size-tolerance", type=float, default=None,
              help="Runs within this fraction of a size class's smallest run are one size "
                   "(default 0.02; tables with a target_params column use it instead).")
@click.option("--by", "by", default=None, metavar="COLUMN",
              help="Fit one law per value of COLUMN (a dataset, a schedule) and print them side "
                   "by side; --out gets one file per group (NAME-VALUE.json).")
@click.option("--pool-groups", is_flag=True,
              help="Fit one law across the groups of a dataset/schedule-like column (silences "
                   "the warning).")
@group_option
@shape_options("mlp", "vocab_size", "tied_embeddings", "ff_ratio",
               mlp={"help": "The runs' MLP kind, for counting N from depth and width."},
               vocab_size={"help": "The runs' vocabulary, for the embedding share of a "
                                   "params column."},
               tied_embeddings={"help": "The runs' output head is untied (counted as "
                                        "embedding)."},
               ff_ratio={"help": "The runs' d_ff / d_model when the table has no d_ff column "
                                 "(default 4; 8/3 for SwiGLU)."})
@click.option("--force", is_flag=True, help="Replace an existing --out that is not a fit.")
@click.option("--json", "as_json", is_flag=True, help="Print the artifact as JSON.")
def fit(files, law, maps, out, bootstrap, seed, targets, drop_highest_loss, fixes, ties, prior,
        formulas, starts, bounds, excludes, dedupe, size_tolerance, by, pool_groups, group, mlp,
        vocab_size, tied_embeddings, ff_ratio, force, as_json):
    """Fit a scaling law to tables of runs (parquet, CSV or JSONL; globs allowed).

    \b
    Examples:
      archfit fit sweeps/demo.parquet --law levine --out fits/demo-levine.json
      archfit fit datasets/chinchilla_epoch2024.csv --law chinchilla --drop-highest-loss 5
      archfit fit raw.csv --law chinchilla --map params="Model Size" --map flops="Training FLOP"
      archfit fit demo.parquet --law levine --prior levine2020:a=0.5,b=0.02
      archfit fit llama-sweep.csv --law depth-joint --mlp swiglu --untied --group run
      archfit fit grid.csv --law chinchilla --tie alpha=beta
      archfit fit mixed.csv --law chinchilla --by dataset
      archfit fit datasets/chinchilla_epoch2024.csv --law auto
      archfit fit datasets/chinchilla_epoch2024.csv \\
        --formula "loss ~ E + A / params^alpha + B / tokens^beta"

    When the table has depth and width, N is counted by the shape core for the architecture
    the flags state (--mlp, --vocab, --untied, --ff-ratio), and a params column that disagrees
    by more than 5% is named in a note.
    """
    from archfit.laws import get_law
    from archfit.laws.inference.selection import fit as fit_law

    from archfit.laws.inference.selection import AUTO

    if law == AUTO and (fixes or ties):
        raise click.UsageError("--fix and --tie name one law's parameters; choose the law "
                               "instead of --law auto")
    start_values, bound_values = _check_formulas(formulas, law, starts, bounds, fixes, ties)
    fix, tie = (parse_fix(get_law(law), fixes, ties) if law != AUTO and not formulas
                else ({}, {}))
    prior_src, widths = parse_prior(prior)
    if by and pool_groups:
        raise click.UsageError("--by fits one law per group and --pool-groups one across them; "
                               "give one")
    if out:
        from archfit.io import check_output
        from archfit.laws.inference.artifact import is_fit_artifact
        from archfit.sweep.store import expand_paths

        check_output(out, "fit artifact", inputs=expand_paths(files), force=force,
                     ours=is_fit_artifact)
    table = _runs(files, maps, group, by, law, formulas, drop_highest_loss, excludes)
    for n in table.notes:
        click.echo(f"note: {n}", err=True)

    progress, prog = _progress(bootstrap, as_json)
    kw = dict(bootstrap=bootstrap, seed=seed, targets=targets, progress=progress, fix=fix,
              prior=prior_src, prior_widths=widths, tie=tie, dedupe=dedupe,
              group=list(group) or None, size_tolerance=size_tolerance, pool_groups=pool_groups,
              arch={"mlp": mlp, "vocab": vocab_size, "tie": tied_embeddings,
                    "ff_ratio": ff_ratio})
    try:
        if by:
            from archfit.laws.inference.fitting import fit_groups

            kw.pop("pool_groups")
            _by(fit_groups(table, law, by=by, **kw), by, out, as_json)
            return
        if formulas:
            kw.update(formula=list(formulas), starts=start_values, bounds=bound_values)
        result = fit_law(table, law, **kw)
    finally:
        if prog is not None:
            prog.stop()
    if out:
        result.to_json(out)
    _show(result, out, as_json)


def _runs(files: tuple[str, ...], maps: tuple[str, ...], group: tuple[str, ...], by: str | None,
          law: str, formulas: tuple[str, ...], drop_highest_loss: int,
          excludes: tuple[str, ...] = ()) -> Any:
    """The runs to fit, read from ``files``, less the ``drop_highest_loss`` highest-loss ones.
    A unigram-normalized loss is negative for a good model: kept for a law that reads one (or
    for --law auto to weigh); the fit drops it, with a note, for every other law."""
    from archfit.laws import LAWS, get_law
    from archfit.laws.inference.fitting import own_columns
    from archfit.laws.inference.selection import AUTO
    from archfit.laws.user import formula_names
    from archfit.sweep.store import read_runs

    if law != AUTO and not formulas and get_law(law).reads_curves:
        from archfit.sweep.store import read_checkpoints

        if group or by or drop_highest_loss or excludes:
            raise click.UsageError(f"--law {law} reads loss curves: --group, --by, "
                                   "--drop-highest-loss and --exclude take run tables")
        return read_checkpoints(files, parse_map(maps))
    signed = not formulas and (law == AUTO or get_law(law).signed_loss)
    laws = LAWS.values() if law == AUTO or formulas else [get_law(law)]
    own = [c for lw in laws for c in own_columns(lw)]  # a registered kind's law's columns
    table = read_runs(files, parse_map(maps), keep=[*group, *([by] if by else [])] or None,
                      keep_flags={by: "--by"} if by else None, signed_loss=signed,
                      optional=[*formula_names(formulas), *dict.fromkeys(own)],
                      exclude=parse_pairs(excludes, "--exclude", "Name=validation",
                                          "COLUMN=PATTERN"))
    if drop_highest_loss:
        if drop_highest_loss < 0 or drop_highest_loss >= table.frame.height:
            raise click.BadParameter(f"{drop_highest_loss} is not between 0 and the number of "
                                     f"runs ({table.frame.height})",
                                     param_hint="--drop-highest-loss")
        table.frame = table.frame.sort("loss").head(table.frame.height - drop_highest_loss)
        table.notes.append(f"dropped the {drop_highest_loss} highest-loss run(s) as asked")
    return table


def _check_formulas(formulas: tuple[str, ...], law: str, starts: tuple[str, ...],
                    bounds: tuple[str, ...], fixes: tuple[str, ...], ties: tuple[str, ...]
                    ) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """--formula and the options that go with it, refused in one line before any file is
    read; the starts and bounds as dicts."""
    from archfit.laws.inference.selection import AUTO

    if (starts or bounds) and not formulas:
        raise click.UsageError("--start and --bounds go with --formula")
    if not formulas:
        return {}, {}
    from archfit.laws.user.expression import parse

    for text in formulas:
        parse(text)
    if law != AUTO and len(formulas) > 1:
        raise click.UsageError("give one --formula, or several with --law auto")
    source = click.get_current_context().get_parameter_source("law")
    if law != AUTO and source is not None and source.name != "DEFAULT":
        raise click.UsageError("--formula is the law to fit: drop --law, or give --law "
                               "auto to weigh it beside the built-in laws")
    if fixes or ties:
        raise click.UsageError("--fix and --tie do not take a --formula's parameters; use "
                               "--start and --bounds")
    return _starts_and_bounds(starts, bounds)


def _starts_and_bounds(starts: tuple[str, ...], bounds: tuple[str, ...]
                       ) -> tuple[dict[str, float], dict[str, tuple[float, float]]]:
    """--start PARAM=VALUE and --bounds PARAM=LOW:HIGH as dicts; one line for a bad item.
    A parameter's value may be 0 or negative (an offset, an exponent's bound); a bound may be
    -inf or inf (one open side)."""
    s, b = {}, {}
    for item in starts:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{item!r}: give PARAM=VALUE", param_hint="--start")
        s[name.strip()] = _value(name.strip(), value, "--start")
    for item in bounds:
        name, sep, value = item.partition("=")
        lo, colon, hi = value.partition(":")
        if not sep or not colon or not name.strip():
            raise click.BadParameter(f"{item!r}: give PARAM=LOW:HIGH (e.g. alpha=0:2)",
                                     param_hint="--bounds")
        b[name.strip()] = (_bound(name.strip(), lo), _bound(name.strip(), hi))
    return s, b


def _bound(key: str, text: str) -> float:
    """A --bounds end: a number, or -inf / inf."""
    word = text.strip().lower()
    if word in ("inf", "+inf", "-inf"):
        return -math.inf if word.startswith("-") else math.inf
    return _value(key, text, "--bounds")


def _show(result: Any, out: str | None, as_json: bool) -> None:
    """The fit as JSON, or as text (after the laws' comparison, for --law auto)."""
    if as_json:
        emit_json(result.to_dict())
        return
    sel = result.diagnostics.get("selection")
    if sel:
        from archfit.laws.inference.selection import Selection

        click.echo(wrap(Selection(**sel).text()) + "\n")
    click.echo(wrap(str(result.summary())))
    if out:
        click.echo(f"\nwrote {out}")


PROGRESS_EVERY_S = 10.0  # off a terminal: a progress line on stderr at most this often


def _progress(bootstrap: int | str, as_json: bool) -> tuple[Any, Any]:
    """(a progress callback for the bootstrap, the bar to stop): a bar on a terminal; off one
    (a log, CI, --json), a line on stderr every ``PROGRESS_EVERY_S`` seconds with the ETA."""
    if not bootstrap:
        return None, None
    if as_json or not sys.stderr.isatty():
        import time

        t0 = last = time.monotonic()

        def line(done: int, total: int) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last < PROGRESS_EVERY_S or done >= total:
                return
            last = now
            eta = (now - t0) / max(done, 1) * (total - done)
            click.echo(f"bootstrap: {done} of {total} resamples, {now - t0:.0f} s so far, about "
                       f"{eta:.0f} s to go", err=True)

        return line, None
    from rich.progress import Progress

    prog = Progress(transient=True)
    from archfit.laws.inference.fitting import AUTO_MAX

    cap = AUTO_MAX if bootstrap == "auto" else int(bootstrap)
    what = f"until settled, at most {cap:,}" if bootstrap == "auto" else f"{cap:,}"
    task = prog.add_task(f"bootstrap ({what} resamples)", total=cap)
    prog.start()
    return (lambda done, total: prog.update(task, completed=done)), prog


def _group_path(out: str, value: str) -> str:
    import os
    import re

    stem, ext = os.path.splitext(out)
    return f"{stem}-{re.sub(r'[^A-Za-z0-9._-]+', '_', value)}{ext or '.json'}"


def _by(fits: dict, by: str, out: str | None, as_json: bool) -> None:
    """One fit per group of ``by``: side by side (estimate and 95% CI per parameter, verdict),
    or as JSON; with --out, one artifact per group."""
    from archfit.io import check_output
    from archfit.laws.inference.artifact import is_fit_artifact

    paths = {}
    if out:
        for v in fits:
            paths[v] = _group_path(out, v)
            check_output(paths[v], "fit artifact", force=False, ours=is_fit_artifact)
        for v, f in fits.items():
            f.to_json(paths[v])
    if as_json:
        emit_json({"by": by, "fits": {v: f.to_dict() for v, f in fits.items()},
                   "files": paths or None})
        return
    first = next(iter(fits.values()))
    click.echo(f"archfit fit: {first.law}, one fit per value of {by!r} (95% CIs)")
    click.echo(wrap(f"  {first.formula}"))
    rows = []
    for name in first.params:
        row = {"param": name}
        for v, f in fits.items():
            lo, hi = (f.ci.get(name) or (None, None))
            row[v] = (f"{f.params[name]:.4g}" + (f" [{lo:.3g}, {hi:.3g}]"
                                                 if lo is not None else ""))
        rows.append(row)
    rows.append({"param": "rows", **{v: str(f.n_points) for v, f in fits.items()}})
    rows.append({"param": "verdict", **{v: f.verdict().verdict for v, f in fits.items()}})
    print_table(rows, [("param", "param")] + [(v, f"{by}={v}") for v in fits])
    for v, f in fits.items():
        for n in f.notes:
            click.echo(f"note ({by}={v}): {n}")
        for r in f.verdict().reasons:
            click.echo(f"verdict ({by}={v}): {r}")
    for p in paths.values():
        click.echo(f"wrote {p}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the laws as JSON.")
def laws(as_json):
    """List the laws archfit fits and the published fits it ships."""
    from archfit.laws import PUBLISHED, list_laws

    rows = list_laws()
    pub = [{"name": k, "law": v["law"], "params": ", ".join(f"{p}={x:g}" for p, x in
                                                               v["params"].items()),
            "source": v["source"], "link": v.get("link")} for k, v in PUBLISHED.items()]
    from archfit.laws.published import constants
    from archfit.recommending.near_optimal import published_curvatures

    shapes = published_curvatures()
    consts = constants()
    if as_json:
        emit_json({"laws": rows, "published": pub, "constants": consts, "shape_loss": shapes})
        return
    print_table(rows, [("law", "law"), ("role", "role"), ("formula", "formula")], title="Laws",
                fit_width=True)
    click.echo("")
    print_table(pub, [("name", "published fit"), ("law", "law"), ("params", "parameters"),
                      ("link", "source")],
                title="Published fits (use by name: --fit NAME or --law NAME)", fit_width=True)
    click.echo("")
    print_table([{**c, "value": f"{c['value']:.6g}",
                  "interval": c["interval"].text(".4g") if c["interval"] else "-",
                  "from": c["provenance"]} for c in consts],
                [("fit", "published fit"), ("constant", "constant"), ("value", "value"),
                 ("interval", "interval (its kind)"), ("from", "value"),
                 ("link", "source")],
                title="Every published constant and where it comes from (published: the "
                      "source's own number; assumed: archfit's reading of a bound, never a CI)",
                fit_width=True)
    click.echo("")
    print_table([{**r, "curvature": f"{r['curvature_at_7e9']:.3g} " + (
                    r["range"].text() if r["range"] else "(no interval published)")}
                 for r in shapes],
                [("name", "published fit"), ("curvature", "curvature at 7e9 [range]"),
                 ("source", "source")],
                title="Loss over depth at fixed N (relative curvature: the fraction of the loss "
                      "a factor e away from the optimal depth costs; what prices alternatives "
                      "without a fit of your own)", fit_width=True)
