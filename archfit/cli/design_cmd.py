"""``archfit design``: the next runs to train, or a replay of the design on a finished sweep."""

from __future__ import annotations

import click

from archfit.cli.common import FILE_PATH, SEED, COUNT, NUMBER, NUMBER_LIST, emit_json


def _until(text: str | None) -> float | None:
    if text is None:
        return None
    t = text.strip().lower().rstrip("x")
    try:
        v = float(t)
    except ValueError:
        raise click.BadParameter(f"{text!r}: give the CI ratio high/low, e.g. 1.5x",
                                 param_hint="--until-ci") from None
    if not v > 1:
        raise click.BadParameter(f"{text!r}: a CI ratio is above 1, e.g. 1.5x",
                                 param_hint="--until-ci")
    return v


def _table(paths: tuple[str, ...] | list[str], what: str, require_loss: bool = True):  # type: ignore[no-untyped-def]
    from archfit.sweep.store import read_runs

    t = read_runs(list(paths), require_loss=require_loss)
    for n in t.notes:
        click.echo(f"note ({what}): {n}", err=True)
    return t.frame


@click.command()
@click.option("--law", default="depth-joint", show_default=True,
              help="A law with a loss model: depth-joint or depth-width (--params), chinchilla "
                   "(--compute), any of them with --target.")
@click.option("--params", type=NUMBER, default=None,
              help="Target: the optimal depth at this size (non-embedding parameters).")
@click.option("--compute", type=NUMBER, default=None,
              help="Target: N_opt at this budget (FLOPs, C = 6 N D).")
@click.option("--target", "target_file", default=None, metavar="TABLE",
              help="Target: the loss of each configuration in this table (with --replay: the "
                   "held-out runs to score).")
@click.option("--fit", "fit_file", default=None, metavar="FILE|NAME",
              help="Start from this fit of the same law (a fit artifact or published name) "
                   "instead of fitting --results.")
@click.option("--prior", default=None, metavar="NAME|FILE[:PARAM=SD,...]",
              help="Fit --results with a Gaussian prior on the parameters shared with this "
                   "published fit or fit file (widths from its CIs or stated, as 'archfit fit "
                   "--prior'); without --results, start from it.")
@click.option("--results", multiple=True, metavar="TABLE",
              help="Finished runs so far (parquet/CSV; repeatable): fitted, and left out of "
                   "the pool.")
@click.option("--spec", "spec_file", default=None, metavar="SPEC",
              help="Candidate pool: this sweep spec's runs (and its recipe for -o next.toml "
                   "and for grid flags).")
@click.option("--pool", "pool_file", default=None, metavar="TABLE",
              help="Candidate pool: a table of runs (the law's columns; a 'cost' column, in "
                   "the budget's unit, wins over the throughput model).")
@click.option("--sizes", type=NUMBER_LIST, default=None,
              help="Candidate pool from a grid: sizes (non-embedding parameters).")
@click.option("--depths", default=None, help="Grid: depths, e.g. 2,4,8,16.")
@click.option("--tokens", type=NUMBER_LIST, default=None, help="Grid: token counts.")
@click.option("--ff-ratios", type=NUMBER_LIST, default=None, help="Grid: d_ff/d_model ratios.")
@click.option("--budget", type=NUMBER, default=None,
              help="Budget in the cost's unit: GPU-hours with --gpu, FLOPs (C = 6 N D) "
                   "without, or the unit of the pool's cost column.")
@click.option("--budget-frac", type=float, default=None,
              help="Budget as a fraction of the pool's total cost (e.g. 0.1).")
@click.option("--gpu", default=None,
              help="Price runs in GPU-hours on this accelerator (the throughput model).")
@click.option("--batch", type=COUNT, default=4, show_default=True,
              help="Runs per batch.")
@click.option("--strategy", default="near-target", show_default=True,
              help="near-target (the default rule above; 'archfit' is its earlier name), "
                   "variance (its variance half every round), spread (its other half), "
                   "nearest, random, cheapest, cost-weighted, d-optimal or v-optimal.")
@click.option("--until-ci", default=None, metavar="RATIO",
              help="Stop rule: nothing to run once the target's 95% CI high/low is at most "
                   "this (e.g. 1.5x).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the bootstrap and of the random strategies.")
@click.option("--bootstrap", type=COUNT, default=None,
              help="Bootstrap resamples of the fit of --results (the criterion's draws; "
                   "default 200), or with --replay of each round's refit (default 64).")
@click.option("--dedupe", is_flag=True,
              help="Drop --results (or --replay) rows that are exact duplicates of others (as "
                   "'fit --dedupe').")
@click.option("--replay", "replay_file", default=None, metavar="DONE_TABLE",
              help="Replay the design on a finished sweep (needs --target and --budget-frac).")
@click.option("-o", "out", type=FILE_PATH, default=None, metavar="FILE",
              help="Write the batch: next.toml (a sweep spec for 'archfit sweep run') or a table "
                   "(.csv, .parquet).")
@click.option("--plot", "plot_path", type=FILE_PATH, default=None,
              metavar="FILE.png",
              help="Draw the batch among the candidates and the runs so far, with the target "
                   "and its CI now and after (PNG); with --replay, the runs it chose by round "
                   "and each target row's loss measured against predicted.")
@click.option("--force", is_flag=True, help="Replace an -o or --plot file archfit did not write.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def design(law, params, compute, target_file, fit_file, prior, results, spec_file, pool_file,
           sizes, depths, tokens, ff_ratios, budget, budget_frac, gpu, batch, strategy, until_ci,
           seed, bootstrap, dedupe, replay_file, out, plot_path, force, as_json):
    """Choose the next runs: the most information about a target for their cost.

    The default rule: after a first batch spread over the cheaper half of the candidates,
    the affordable candidates nearest the target (for an optimal depth, nearest the target
    size at the ends and middle of the optimum's 95% CI, in turn). Each round also tests the
    law on the runs so far (an F test); where the law fails it, no interval after the batch is
    predicted.

    \b
    Examples:
      archfit design --law depth-joint --results sweeps/demo.parquet --params 7.2e5 \\
          --spec sweeps/demo.toml --sizes 4.8e5 --depths 2,3,4,6,8 --tokens 6e5 \\
          --budget-frac 0.3 -o next.toml
      archfit design --law chinchilla --results runs.csv --compute 1e22 --pool pool.csv \\
          --gpu h100 --budget 500
      archfit design --law chinchilla --prior epoch2024 --results runs.csv --compute 1e23 \\
          --sizes 1e8,3e8,1e9 --tokens 2e9,2e10 --budget-frac 0.2
      archfit design --replay done.csv --target big.csv --law chinchilla --budget-frac 0.1 --json
    """
    from archfit import designing as dz

    if replay_file:
        return _replay(replay_file, target_file, law, budget_frac, strategy, seed, batch,
                       bootstrap, dedupe, plot_path, force, as_json)
    given = [x for x in (params, compute, target_file) if x is not None]
    if len(given) != 1:
        raise click.UsageError("give one target: --params N, --compute C or --target TABLE")
    target = (dz.Target("params", params) if params is not None else
              dz.Target("compute", compute) if compute is not None else
              dz.Target("table", rows=dz.columns(_table([target_file], "target",
                                                             require_loss=False))))
    if budget is not None and budget_frac is not None:
        raise click.UsageError("give --budget or --budget-frac, not both")
    spec = None
    if spec_file:
        from archfit.sweep import load_spec

        spec = load_spec(spec_file)
    pool, base, tps = _pool(spec, pool_file, sizes, depths, tokens, ff_ratios, law)
    _check_outputs(out, plot_path, [p for p in (spec_file, pool_file, target_file, *results)
                                     if p], force)
    from archfit.cli.fit_cmd import parse_prior

    prior_src, widths = parse_prior(prior)
    d = dz.design(pool, law=law, target=target, budget=budget, budget_frac=budget_frac,
                  results=_table(results, "results") if results else None,
                  fit=fit_file, prior=prior_src, prior_widths=widths, batch=batch,
                  strategy=strategy, seed=seed, bootstrap=200 if bootstrap is None else bootstrap,
                  gpu=gpu, base=base, dedupe=dedupe,
                  tokens_per_step=tps, until_ci=_until(until_ci),
                  n_counts=None if pool_file else "non-embedding")  # archfit's pools count so
    if out and d.chosen:
        d.write(out, spec)
    if plot_path:
        from archfit.plots.design import draw_design

        draw_design(d, plot_path)
    if as_json:
        emit_json({**d.to_dict(), "wrote": out if out and d.chosen else None,
                   "figure": plot_path})
        return
    click.echo(d.summary())
    if out and d.chosen:
        click.echo(f"\nwrote {out}" + ("; run it with: archfit sweep run " + out
                                       if out.endswith(".toml") else ""))
    if plot_path:
        click.echo(f"wrote {plot_path}")


def _replay(replay_file: str, target_file: str | None, law: str, budget_frac: float | None,
            strategy: str, seed: int, batch: int, bootstrap: int | None, dedupe: bool,
            plot_path: str | None, force: bool, as_json: bool) -> None:
    """``--replay``: the design's loop on a finished sweep, scored on the target runs."""
    from archfit import designing as dz

    if not target_file or budget_frac is None:
        raise click.UsageError("--replay needs --target TABLE (the runs to score) and "
                               "--budget-frac")
    _check_outputs(None, plot_path, [replay_file, target_file], force)
    done, rows = _table([replay_file], "replay"), _table([target_file], "target")
    r = dz.replay(done, rows, law=law, budget_frac=budget_frac, strategy=strategy,
                  seed=seed, batch=batch, bootstrap=64 if bootstrap is None else bootstrap,
                  dedupe=dedupe)
    if plot_path:
        from archfit.plots.design import draw_replay

        draw_replay(r, dz.columns(done), dz.columns(rows), plot_path)
    if as_json:
        emit_json({**r, "figure": plot_path})
        return
    _print_replay(r)
    if plot_path:
        click.echo(f"wrote {plot_path}")


def _check_outputs(out: str | None, plot_path: str | None, inputs: list[str],
                   force: bool) -> None:
    """Refuse, before any work, an -o or --plot path that is an input or a file not ours."""
    from archfit.io import check_output

    if out:
        check_output(out, "design batch", inputs=inputs, force=force, ours=is_batch)
    if plot_path:
        from archfit.plots import is_archfit_png

        check_output(plot_path, "design figure", inputs=inputs + ([out] if out else []),
                     force=force, ours=is_archfit_png)


def _pool(spec, pool_file, sizes, depths, tokens, ff_ratios, law):  # type: ignore[no-untyped-def]
    """(pool frame, shape base, tokens per step) from the flags."""
    from archfit import designing as dz

    from archfit.recommending.validation import recipe_grid

    kw, tps = recipe_grid(spec) if spec is not None else ({}, None)
    base = kw.get("base")
    grid = [x is not None for x in (sizes, depths, tokens)]
    if any(grid):
        from archfit.laws import get_law
        from archfit.laws.base import AUTO

        if depths is None and sizes is not None and tokens is not None and (
                law == AUTO or "n_layer" not in get_law(law).columns):
            # a law of size and tokens alone (chinchilla): sizes x token counts, no shapes
            return dz.pool_from_sizes(sizes, tokens), base, tps
        if sizes is None or depths is None or tokens is None:
            raise click.UsageError("a grid pool needs --sizes, --depths and --tokens (for a "
                                   "law of size and tokens alone, --sizes and --tokens)")
        try:
            ds = [int(x) for x in depths.split(",") if x.strip()]
        except ValueError:
            raise click.BadParameter(f"{depths!r}: give whole depths, e.g. 2,4,8",
                                     param_hint="--depths") from None
        return dz.pool_from_grid(sizes, ds, tokens, ff_ratios or (4.0,), **kw), base, tps
    if pool_file:
        return _table([pool_file], "pool", require_loss=False), base, tps
    if spec is not None:
        return dz.pool_from_spec(spec), base, tps
    raise click.UsageError("give a candidate pool: --spec SPEC, --pool TABLE or --sizes/--depths/"
                           "--tokens")


def _print_replay(r: dict) -> None:  # type: ignore[type-arg]
    click.echo(f"replay of {r['strategy']} on {r['law']}: {r['n_chosen']} runs in {r['rounds']} "
               f"round{'' if r['rounds'] == 1 else 's'}, {r['budget_frac_spent']:.1%} of the "
               f"pool's cost ({r['cost_unit']})")
    for who in ("design", "all_rows"):
        m = r["target"][who]
        if "error" in m:
            click.echo(f"  {who:>8}: no fit ({m['error']})")
            continue
        click.echo(f"  {who:>8}: target mean |error| {m['mean_abs_rel_error']:.2%}, max "
                   f"{m['max_abs_rel_error']:.2%}, R² {m['r2']:.3f}, 95% coverage "
                   f"{m['coverage']:.0%}"
                   + (f"; against the planted truth {m['mean_abs_rel_error_vs_truth']:.2%}"
                      if "mean_abs_rel_error_vs_truth" in m else ""))
    for n in r.get("notes", []):
        click.echo(f"  note: {n}")
    for fb in r.get("fallbacks", []):
        click.echo(f"  note: round {fb['round']} fell back to a spread pick ({fb['why']})")
    for t in r.get("tests", []):
        click.echo(f"  round {t['round']}: {t['why']}")


BATCH_COLUMNS = {"cost", "strategy"}  # a table 'archfit design -o' wrote has these


def is_batch(path: str) -> bool:
    """A file ``Design.write`` wrote (what ``-o`` may replace without --force): a spec whose
    description says so, or a table with the batch's columns."""
    if not path.endswith((".toml", ".csv", ".parquet")):
        return False
    try:
        if path.endswith(".parquet"):
            import polars as pl

            return BATCH_COLUMNS <= set(pl.read_parquet_schema(path))
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except Exception:  # unreadable: not recognisably ours
        return False
    if path.endswith(".csv"):
        return bool(head) and BATCH_COLUMNS <= set(head.splitlines()[0].split(","))
    return "archfit design:" in head
