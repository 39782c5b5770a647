"""``archfit throughput``: a step-time model calibrated on a sweep's measured tokens/s, with
its CIs, held-out error and verdict, and measured against predicted speed per run."""

from __future__ import annotations

import click

from archfit.cli.common import FILE_PATH, emit_json, print_table


@click.command()
@click.argument("data", nargs=-1, required=True)
@click.option("--perf", "perf_file", default=None, metavar="FILE",
              help="Compare the runs with this step model instead of calibrating one.")
@click.option("--out", type=FILE_PATH, default=None, metavar="FILE",
              help="Write the calibrated step model (JSON) here, atomically.")
@click.option("--force", is_flag=True, help="With --out: replace a file that is not archfit's.")
@click.option("--bootstrap", type=click.IntRange(min=1, max=100_000), default=200, show_default=True,
              help="Bootstrap resamples (over runs) for the coefficients' CIs (1 to 100,000).")
@click.option("--precision", type=click.Choice(["auto", "fp32", "bf16"]), default="auto",
              show_default=True,
              help="The runs' compute dtype (auto: fp32 for CPU runs, bf16 on GPUs).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def throughput(data, perf_file, out, force, bootstrap, precision, as_json):
    """Calibrate a training step-time model on the measured tokens/s of run tables (DATA:
    collected sweeps), or compare the runs with a saved one (--perf FILE, or FILE as the first
    argument). The model is

      seconds per step = a * matmul FLOPs + b * memory bytes + c * n_layer + d

    (archfit.train.perf): a and b say how fast the device multiplies and moves memory, c is the
    per-layer overhead that slows deep narrow shapes.

    Example: archfit throughput sweeps/smoke.parquet --out fits/cpu-steps.json
    """
    from archfit.io import atomic_write, check_output
    from archfit.train.perf import calibrate, is_step_model
    from archfit.sweep.store import expand_paths, read_tables

    models = [p for p in data if p.endswith(".json") and is_step_model(p)]
    if models:  # archfit throughput STEPS.json DATA: the same as --perf STEPS.json
        if perf_file or len(models) > 1:
            raise click.UsageError("give one step model (positional or --perf)")
        perf_file, data = models[0], tuple(p for p in data if p != models[0])
        if not data:
            raise click.UsageError("give the run tables to compare the step model with")
    files = expand_paths(data)
    if out:
        check_output(out, "step model", inputs=[*files, *([perf_file] if perf_file else [])],
                     force=force, ours=is_step_model)
    rows = read_tables(files).to_dicts()
    model = calibrate(rows, step_model=perf_file, precision=precision, bootstrap=bootstrap)
    if out:
        import json

        atomic_write(out, json.dumps(model.to_dict(), indent=2) + "\n")
    if as_json:
        emit_json({**model.to_dict(), "written": out})
        return
    click.echo(model.summary())
    devices = sorted({r.get("device") or "unknown" for r in rows if r.get("tokens_per_s")})
    print_table(sorted(model.runs, key=lambda r: r["n_layer"]),
                [("n_layer", "layers"), ("d_model", "d_model"), ("measured", "measured tok/s"),
                 ("predicted", "predicted tok/s"), ("error", "error")],
                title=f"{len(model.runs)} runs on {', '.join(devices)}")
    if out:
        click.echo(f"wrote {out}")
