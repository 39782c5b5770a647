"""``archfit sweep plan|run|status|collect``."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from archfit.cli.common import (FILE_PATH, PATH, DEVICES, INT, NUMBER, emit_json, fmt,
                                print_table)
from archfit.shapes import TRAIN_FLOPS_CONVENTION
from archfit.text import wrap


def _out(spec: Any, out: str | None) -> str:
    """The sweep's folder: --out, or the spec's default; a file there is refused."""
    path = out or spec.default_out()
    if os.path.exists(path) and not os.path.isdir(path):
        raise click.BadParameter(f"{path}: is a file; give the sweep's folder", param_hint="--out")
    return path


MAX_RUNS_OPTION = click.option("--max-runs", type=INT, default=100_000, show_default=True,
                               help="Refuse a spec that expands to more runs than this.")


@click.group()
def sweep() -> None:
    """Plan, run, watch and collect a sweep described in a TOML spec (see sweeps/*.toml)."""


@sweep.command()
@click.argument("spec_path", metavar="SPEC")
@click.option("--throughput", type=NUMBER, default=None,
              help="Training FLOP/s per run for the time estimate (default: measured on this "
                   "sweep's finished runs, else the spec's executor.throughput).")
@click.option("--out", type=PATH, default=None, help="Sweep directory (for measured throughput).")
@click.option("--gpu", default=None, metavar="NAME",
              help=f"Plan for this accelerator ({', '.join(DEVICES)}): per-run memory, "
                   "micro-batch and GPU-hours.")
@click.option("--gpu-memory", default=None, metavar="SIZE",
              help="Memory per GPU, e.g. 80GiB (default: the --gpu's).")
@click.option("--mfu", type=NUMBER, default=None,
              help="Assumed model FLOPs utilization for GPU-hours (default 0.4).")
@click.option("--activation-checkpointing", "ac", is_flag=True, default=None,
              help="Plan with activation checkpointing.")
@MAX_RUNS_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the runs (and costs) as JSON.")
def plan(spec_path, throughput, out, gpu, gpu_memory, mfu, ac, max_runs, as_json):
    """Print the expanded runs without training anything; with --gpu, what they cost there."""
    from archfit.sweep import load_spec, plan_rows

    from archfit.sweep.spec import missing_data

    spec = load_spec(spec_path, max_runs)
    why = missing_data(spec.raw.get("data"))
    if why:  # a plan may be for a machine that holds the data; a run here would be refused
        click.echo(wrap(f"warning: {why}; sweep run refuses it on this machine"), err=True)
    if gpu is not None or gpu_memory is not None:
        _gpu_plan(spec, gpu, gpu_memory, mfu, ac, as_json)
        return
    rows = plan_rows(spec, throughput, _out(spec, out))
    if as_json:
        emit_json(rows)
        return
    plans = [("plan", "layer plan")] if any(r["plan"] != "uniform" for r in rows) else []
    moe = [("n_experts", "experts"), ("top_k", "top-k"),
           ("params_active_non_embedding", "active N")] if any(
        r["n_experts"] for r in rows) else []
    columns = [("run_id", "run id"), ("n_layer", "layers"), ("d_model", "d_model"),
               ("n_head", "heads"), ("d_ff", "d_ff"), *plans, *moe,
               ("params_non_embedding", "non-emb N"), ("lr", "lr"), ("batch_tokens", "batch"),
               ("seed", "seed"), ("tokens", "tokens"), ("flops", "FLOPs"), ("est_s", "est. s")]
    shown = [{**r, "est_s": float(f"{r['est_s']:.2g}") if r["est_s"] else r["est_s"]}
             for r in rows]  # an estimate, to two digits
    _plan_table(shown, columns, f"sweep {spec.name}: {len(rows)} runs")
    total = sum(r["flops"] for r in rows)
    est = [r["est_s"] for r in rows if r["est_s"] is not None]
    conc = spec.executor.get("concurrency") or 1
    click.echo(wrap(f"total {total:.3g} training FLOPs ({TRAIN_FLOPS_CONVENTION})" +
                    (f", about {sum(est) / 60:.1f} run-minutes ({sum(est) / 60 / conc:.1f} min "
                     f"at concurrency {conc})" if est else "")))
    for s in spec.skipped:
        click.echo(wrap(f"skipped: {s}"))


def _plan_table(rows: list[dict[str, Any]], columns: list[tuple[str, str]], title: str) -> None:
    """The planned runs, a column whose value is the same on every run said once in the title
    line, and FLOPs to three digits: within 100 columns."""
    same = [(k, h) for k, h in columns[1:] if len(rows) > 1 and len({r[k] for r in rows}) == 1]
    rows = [{**r, "flops": float(f"{r['flops']:.3g}")} for r in rows]
    print_table(rows, [c for c in columns if c not in same], title=wrap(title + (
        "; every run: " + ", ".join(f"{h} {fmt(rows[0][k])}" for k, h in same) if same else "")))


def _gpu_plan(spec, gpu, gpu_memory, mfu, ac, as_json):  # type: ignore[no-untyped-def]
    from archfit.train.memory import parse_memory
    from archfit.sweep.plan import gpu_plan_rows

    p = gpu_plan_rows(spec, gpu, parse_memory(gpu_memory) if gpu_memory else None, mfu,
                      activation_checkpointing=ac)
    if as_json:
        emit_json(p)
        return
    rows = [{**r, "memory_gib": round(r["memory_gib"], 1),
             "gpu_hours": float(f"{r['gpu_hours']:.3g}") if r["gpu_hours"] else r["gpu_hours"]}
            for r in p["rows"]]
    where = f"{p['gpu'] or 'GPU'} ({p['gpu_memory_gib']:.0f} GiB)"
    _plan_table(rows, [("run_id", "run id"), ("n_layer", "layers"), ("d_model", "d_model"),
                       ("params_non_embedding", "non-emb N"), ("tokens", "tokens"),
                       ("gpus", "GPUs"), ("micro_batch", "micro-batch"),
                       ("grad_accum", "accum"), ("memory_gib", "GiB/GPU"),
                       ("flops", "FLOPs"), ("gpu_hours", "GPU-hours")],
                f"sweep {spec.name} on {where}: {len(rows)} runs")
    hours = p["total_gpu_hours"]
    click.echo(f"total {p['total_flops']:.3g} training FLOPs ({p['flops_convention']})")
    if hours is not None:
        click.echo(wrap(f"total {hours:,.2f} GPU-hours on {p['gpu']} at MFU {p['mfu']:.2f} "
                        f"({p['mfu_source']}; peak {p['peak_flops']:.3g} bf16 FLOP/s)"))
    click.echo(wrap(f"memory: {p['memory_convention']}; micro-batches keep 10% headroom, and "
                    "the global batch (batch_size x grad_accum) is unchanged"))
    for r in p["rows"]:
        if not r["fits"]:
            click.echo(f"does not fit: {r['run_id']}: {r['note']}")


@sweep.command()
@click.argument("spec_path", metavar="SPEC")
@click.option("--executor", type=click.Choice(["local", "slurm", "ray"]), default=None,
              help="Where to run (default: the spec's executor.kind, else local).")
@click.option("--out", type=PATH, default=None, help="Sweep directory (default: sweeps/runs/NAME).")
@click.option("--concurrency", type=INT, default=None, help="Local: runs at a time.")
@click.option("--threads", type=INT, default=None, help="Local CPU: torch threads per run.")
@click.option("--partition", default=None, help="Slurm partition.")
@click.option("--time-min", type=INT, default=None, help="Slurm time limit per run (minutes).")
@click.option("--gpus", type=INT, default=None,
              help="GPUs (= processes) per run, overriding the spec's gpus_per_run: Slurm "
                   "gives each run one job of that many tasks; locally runs are packed onto "
                   "the GPUs.")
@click.option("--array-parallelism", type=INT, default=None, help="Slurm array %N cap.")
@click.option("--address", default=None, help="Ray cluster address (default: local ray).")
@click.option("--no-wait", is_flag=True, help="Slurm: submit and return.")
@click.option("--timeout", type=NUMBER, default=None, help="Stop waiting after this many s.")
@click.option("--retry-failed", is_flag=True, help="Run failed runs again.")
@click.option("--allow-failures", is_flag=True,
              help="Exit 0 even when some runs failed or diverged (default: exit 3).")
@MAX_RUNS_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="Print the final counts as JSON on stdout (progress stays on stderr).")
def run(spec_path, executor, out, concurrency, threads, partition, time_min, gpus,
        array_parallelism, address, no_wait, timeout, retry_failed, allow_failures, max_runs,
        as_json):
    """Run every unfinished run of the sweep. Idempotent: repeat it after any failure.

    Exit status: 0 when every run is ok, 3 when some failed or diverged (their errors are
    listed; --allow-failures gives 0), 1 when some are still unfinished, 2 on bad input.
    Results that are unreadable or belong to another run are set aside and the runs redone."""
    from archfit import sweep as sw
    from archfit.io import check_output

    spec = sw.load_spec(spec_path, max_runs, check_data=True)
    out = _out(spec, out)
    check_output(out, "sweep directory", inputs=[spec_path], folder=True)
    ex = dict(spec.executor)
    kind = executor or ex.get("kind", "local")
    if kind not in ("local", "slurm", "ray"):
        raise click.UsageError(f"unknown executor {kind!r}")
    sw.check_executor(kind, address or (ex.get("ray") or {}).get("address"))
    dirs = sw.prepare_dirs(spec, out)
    for m in sw.heal(spec, out):
        click.echo(f"run {m['run_id']}: {m['problem']}; moved to {m['moved_to']} and will "
                   "be redone", err=True)
    before = sw.counts(spec, out)
    click.echo(f"sweep {spec.name}: {before['planned']} runs, {before['done']} finished, "
               f"executor {kind}, directory {out}", err=True)
    if before["done"] >= before["planned"] and not retry_failed:
        _report(sw.counts(spec, out), as_json, {"sweep": spec.name, "directory": out})
        return
    bar = _Bar(before)
    worker_errors: list[str] = []

    def done(d: str, st: str) -> None:
        if st.startswith("worker-error"):
            worker_errors.append(f"{os.path.basename(d)}: {st.removeprefix('worker-error: ')}")
        bar.tick(sw.counts(spec, out))

    try:
        ids = sw.execute(spec, out, dirs, kind, concurrency=concurrency, threads=threads,
                         slurm={"partition": partition, "time_min": time_min,
                                "gpus_per_run": gpus, "array_parallelism": array_parallelism},
                         ray={"address": address} if address else None,
                         retry_failed=retry_failed, wait=False, gpus=gpus, on_done=done)
        if kind == "slurm":
            click.echo(f"submitted Slurm job array(s) {', '.join(ids) or '(none)'}; logs in "
                       f"{os.path.join(out, '_slurm')}", err=True)
            if not no_wait:
                sw.wait_for(spec, out, timeout, on_tick=bar.tick)
    finally:
        bar.stop()
    c = sw.counts(spec, out)
    _report(c, as_json, {"sweep": spec.name, "directory": out, "executor": kind,
                         "worker_errors": worker_errors})
    if worker_errors:  # e.g. a full disk: the run could not even record its result
        click.echo(f"Error: {len(worker_errors)} run(s) could not be trained or saved; first: "
                   f"{worker_errors[0]}", err=True)
        sys.exit(1)
    bad = c["failed"] + c["diverged"]
    if bad and not allow_failures:
        click.echo(f"Error: {bad} of {c['planned']} runs failed or diverged (listed above); fix "
                   "and rerun with --retry-failed, or pass --allow-failures", err=True)
        sys.exit(3)
    if c["done"] < c["planned"] and not (kind == "slurm" and no_wait):
        sys.exit(1)


class _Bar:
    """Runs done / running / failed with an ETA: rich on a terminal, plain lines otherwise."""

    def __init__(self, first: dict):
        self.t0, self.first, self.rich = time.time(), first["done"], None
        self.total = first["planned"]
        if sys.stderr.isatty():
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            self.rich = Progress(TextColumn("runs"), BarColumn(), TextColumn("{task.fields[i]}"),
                                 TimeRemainingColumn(), transient=True)
            self.task = self.rich.add_task("runs", total=self.total, completed=first["done"],
                                           i="")
            self.rich.start()

    def tick(self, c: dict) -> None:
        from archfit.sweep import fmt_eta

        done_now = c["done"] - self.first
        el = time.time() - self.t0
        eta = el / done_now * (c["planned"] - c["done"]) if done_now else None
        info = (f"{c['done']}/{c['planned']} done, {c['running']} running, "
                f"{c['failed'] + c['diverged']} failed/diverged")
        if self.rich is not None:
            self.rich.update(self.task, completed=c["done"], i=info)
        else:
            click.echo(f"{info}, ETA {fmt_eta(eta)}", err=True)

    def stop(self) -> None:
        if self.rich is not None:
            self.rich.stop()


def _report(c: dict, as_json: bool = False, extra: dict | None = None) -> None:
    if as_json:
        emit_json({**(extra or {}), **c})
        return
    click.echo(f"{c['done']}/{c['planned']} finished: {c['ok']} ok, {c['diverged']} diverged, "
               f"{c['failed']} failed; {c['running']} running, {c['pending']} pending")
    for f in c["not_ok"]:
        click.echo(f"  {f['run_id']} {f['status']}: {f['error']}")
    for f in c.get("corrupt", []):
        click.echo(f"  {f['run_id']} pending: {f['problem']} ('sweep run' sets it aside and "
                   "redoes the run)")


@sweep.command()
@click.argument("spec_path", metavar="SPEC")
@click.option("--out", type=PATH, default=None, help="Sweep directory (default: sweeps/runs/NAME).")
@MAX_RUNS_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def status(spec_path, out, max_runs, as_json):
    """Counts of done / running / failed / pending runs, the failed runs' error lines, and
    results that are unreadable or belong to another run."""
    from archfit import sweep as sw

    spec = sw.load_spec(spec_path, max_runs)
    c = sw.counts(spec, _out(spec, out))
    if as_json:
        emit_json(c)
    else:
        _report(c)


@sweep.command()
@click.argument("spec_path", metavar="SPEC")
@click.option("--out", type=PATH, default=None, help="Sweep directory.")
@click.option("-o", "--output", type=FILE_PATH, default=None,
              help="Parquet file (default sweeps/NAME.parquet).")
@click.option("--force", is_flag=True, help="Replace an existing file that is not a run table.")
@MAX_RUNS_OPTION
@click.option("--json", "as_json", is_flag=True,
              help="Print {runs, table, curves} as JSON.")
def collect(spec_path, out, output, force, max_runs, as_json):
    """Gather every finished run into one parquet file (+ NAME.curves.parquet). A file that is
    not an archfit run table is never replaced without --force, nor a non-empty table by an
    empty one."""
    from archfit.sweep import store
    from archfit import sweep as sw
    from archfit.io import check_output

    spec = sw.load_spec(spec_path, max_runs)
    output = output or os.path.join(os.path.dirname(os.path.abspath(spec_path)),
                                    f"{spec.name}.parquet")
    for p in (output, store.curves_path(output)):
        check_output(p, "run table", inputs=[spec_path], force=force, ours=store.is_run_table)
    path, curves, n = store.collect(spec, _out(spec, out), output)
    if n == 0:
        click.echo("warning: no finished runs yet; wrote an empty table", err=True)
    if as_json:
        emit_json({"runs": n, "table": path, "curves": curves})
        return
    click.echo(f"wrote {n} runs to {path} and their loss curves to {curves}")
