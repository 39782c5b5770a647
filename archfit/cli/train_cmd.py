"""``archfit train``: one run, with a progress bar on a terminal and plain lines otherwise."""

from __future__ import annotations

import sys

import click

from archfit.cli.common import INT, NUMBER, emit_json, fmt

RESULT_KEYS = ("status", "error", "final_val_loss", "best_val_loss", "final_train_loss", "tokens",
               "steps", "wall_s", "train_s", "tokens_per_s", "flops", "flops_convention", "mfu",
               "params_total", "params_non_embedding", "peak_memory_bytes", "device",
               "data_hash", "data_name")


@click.command()
@click.option("--layers", "n_layer", type=INT, required=True)
@click.option("--width", "d_model", type=INT, required=True)
@click.option("--heads", "n_head", type=INT, required=True)
@click.option("--ff-ratio", type=NUMBER, default=None, help="d_ff/d_model (default 4).")
@click.option("--d-ff", type=INT, default=None)
@click.option("--kv-heads", "n_kv_head", type=INT, default=None)
@click.option("--mlp", type=click.Choice(["gelu", "relu2", "swiglu"]), default="gelu")
@click.option("--rope", is_flag=True, help="Rotary positions.")
@click.option("--qk-norm", is_flag=True)
@click.option("--untied", is_flag=True)
@click.option("--parametrization", type=click.Choice(["standard", "mup", "completep",
                                                      "depth-mup"]), default="standard",
              show_default=True)
@click.option("--tokens", type=NUMBER, default=None, help="Token budget, e.g. 2e6.")
@click.option("--tokens-per-param", type=NUMBER, default=None,
              help="Budget as tokens per non-embedding parameter (e.g. 20).")
@click.option("--steps", type=INT, default=None, help="Budget in optimizer steps.")
@click.option("--data", default=None, help="Token source (default: the embedded stdlib corpus).")
@click.option("--batch-size", type=INT, default=16, show_default=True)
@click.option("--grad-accum", type=INT, default=1, show_default=True)
@click.option("--ctx", type=INT, default=256, show_default=True)
@click.option("--lr", type=NUMBER, default=3e-3, show_default=True)
@click.option("--schedule", type=click.Choice(["cosine", "wsd", "constant"]), default="cosine",
              show_default=True)
@click.option("--optimizer", type=click.Choice(["adamw", "muon"]), default="adamw",
              show_default=True)
@click.option("--eval-every", type=INT, default=100, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default="auto", show_default=True)
@click.option("--compile", "compile_", is_flag=True, help="torch.compile the model.")
@click.option("--run-dir", default=None, help="Checkpoint here; resume a run found here.")
@click.option("--checkpoint-every", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the result record as JSON.")
@click.option("--curve", is_flag=True, help="With --json: include the loss curve.")
def train(n_layer, d_model, n_head, ff_ratio, d_ff, n_kv_head, mlp, rope, qk_norm, untied,
          parametrization, tokens, tokens_per_param, steps, data, batch_size, grad_accum, ctx,
          lr, schedule, optimizer, eval_every, seed, device, compile_, run_dir,
          checkpoint_every, as_json, curve):
    """Train one GPT and report its losses, throughput and MFU.

    Example: archfit train --layers 4 --width 128 --heads 4 --tokens 2e6
    """
    from archfit.shapes import Shape
    from archfit.train import TrainConfig
    from archfit.train import train as run

    if [tokens, tokens_per_param, steps].count(None) != 2:
        raise click.UsageError("give one budget: --tokens, --tokens-per-param or --steps")
    if ff_ratio is not None and d_ff is not None:
        raise click.UsageError("give --ff-ratio or --d-ff, not both")
    # validate the shape before loading data or torch
    Shape(n_layer=n_layer, d_model=d_model, n_head=n_head, d_ff=d_ff, ff_ratio=ff_ratio,
          n_kv_head=n_kv_head, mlp=mlp, n_ctx=ctx, position="rope" if rope else "learned")
    cfg = TrainConfig(n_layer=n_layer, d_model=d_model, n_head=n_head, d_ff=d_ff,
                      ff_ratio=ff_ratio, n_kv_head=n_kv_head, mlp=mlp,
                      position="rope" if rope else "learned", qk_norm=qk_norm,
                      tied_embeddings=not untied, parametrization=parametrization, data=data,
                      tokens=tokens, tokens_per_param=tokens_per_param, steps=steps,
                      batch_size=batch_size, grad_accum=grad_accum, ctx=ctx, lr=lr,
                      schedule=schedule, optimizer=optimizer, eval_every=eval_every, seed=seed,
                      device=device, compile=compile_, checkpoint_every=checkpoint_every)
    progress, bar = _progress(as_json)
    try:
        result = run(cfg, run_dir=run_dir, progress=progress)
    finally:
        if bar is not None:
            bar.stop()
    d = result.to_dict()
    if as_json:
        out = {k: d[k] for k in RESULT_KEYS}
        out.update(shape=d["shape"], resumed_from_step=d["resumed_from_step"])
        if curve:
            out["curve"] = d["curve"]
        emit_json(out)
    else:
        for k in RESULT_KEYS:
            click.echo(f"{k:<22}{fmt(d[k])}")
    if result.status not in ("ok",):
        sys.exit(1)


def _progress(quiet: bool):  # type: ignore[no-untyped-def]
    if sys.stderr.isatty() and not quiet:
        from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

        bar = Progress(TextColumn("train"), BarColumn(), TextColumn("{task.fields[info]}"),
                       TimeRemainingColumn(), transient=True)
        task = bar.add_task("train", total=None, info="")
        bar.start()

        def cb(p: dict) -> None:
            info = f"step {p['step']}/{p['total_steps']} loss {p['train_loss']:.3f}"
            if "val_loss" in p:
                info += f" val {p['val_loss']:.3f}"
            bar.update(task, completed=p["step"], total=p["total_steps"], info=info)

        return cb, bar
    state = {"next": 0.0}

    def plain(p: dict) -> None:
        frac = p["step"] / p["total_steps"]
        if frac >= state["next"] or "val_loss" in p:
            state["next"] = frac + 0.1
            msg = f"step {p['step']}/{p['total_steps']} train_loss {p['train_loss']:.4f}"
            if "val_loss" in p:
                msg += f" val_loss {p['val_loss']:.4f}"
            click.echo(msg, err=True)

    return (None if quiet else plain), None
