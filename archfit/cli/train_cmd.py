"""``archfit train``: one run, with a progress bar on a terminal and plain lines otherwise."""

from __future__ import annotations

import sys
from typing import Any

import click

from archfit.cli.common import PATH, LR, SEED, INT, NUMBER, SHAPE_FLAGS, emit_json, fmt, pick, shape_options
from archfit.shapes import PARAMETRIZATIONS
from archfit.train.config import (FIELD_HELP, MOE_BALANCES, OPTIMIZERS, PARALLEL, PRECISIONS,
                                  SCHEDULES)
from archfit.train.trackers import TRACKERS

RESULT_KEYS = ("status", "error", "final_val_loss", "best_val_loss", "final_train_loss", "tokens",
               "steps", "wall_s", "train_s", "tokens_per_s", "first_step_s", "compile_s", "flops",
               "flops_convention", "mfu",
               "params_total", "params_non_embedding", "peak_memory_bytes", "device",
               "data_hash", "data_name", "world_size", "parallel", "expert_load_max")


@click.command()
@shape_options("n_layer", "d_model", "n_head", "ff_ratio", "d_ff", "n_kv_head", "mlp", "bias", "norm",
               "position", "qk_norm", "tied_embeddings", "n_ctx", "no_mlp", "no_attn",
               "heads_per_layer", "d_head", "n_experts", "top_k", "n_shared_experts", "d_expert",
               "granularity", "moe_every", "dense_first", "q_lora_rank", "kv_lora_rank",
               "qk_rope_head_dim", "v_head_dim",
               n_layer={"required": True}, d_model={"required": True},
               n_head={"required": True}, n_ctx={"default": 256})
@click.option("--moe-balance", type=click.Choice(MOE_BALANCES), default="aux-loss",
              show_default=True, help=FIELD_HELP["moe_balance"])
@click.option("--moe-aux-coef", type=click.FloatRange(0, 10, max_open=True), default=0.01,
              show_default=True, help=FIELD_HELP["moe_aux_coef"])
@click.option("--parametrization", type=click.Choice(PARAMETRIZATIONS), default="standard",
              show_default=True, help=FIELD_HELP["parametrization"])
@click.option("--tokens", type=NUMBER, default=None, help="Token budget, e.g. 2e6.")
@click.option("--tokens-per-param", type=NUMBER, default=None,
              help="Budget as tokens per non-embedding parameter (e.g. 20).")
@click.option("--steps", type=INT, default=None, help="Budget in optimizer steps.")
@click.option("--data", default=None, help=FIELD_HELP["data"])
@click.option("--batch-size", type=INT, default=16, show_default=True,
              help=FIELD_HELP["batch_size"])
@click.option("--grad-accum", type=INT, default=1, show_default=True,
              help=FIELD_HELP["grad_accum"])
@click.option("--lr", type=LR, default=3e-3, show_default=True,
              help=FIELD_HELP["lr"] + " 'auto': the published recipe's (Step Law) at this "
                   "size and budget.")
@click.option("--schedule", type=click.Choice(SCHEDULES), default="cosine",
              show_default=True, help=FIELD_HELP["schedule"])
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="adamw",
              show_default=True, help=FIELD_HELP["optimizer"])
@click.option("--eval-every", type=INT, default=100, show_default=True,
              help=FIELD_HELP["eval_every"])
@click.option("--seed", type=SEED, default=0, show_default=True,
              help=FIELD_HELP["seed"])
@click.option("--device", default="auto", show_default=True,
              help=FIELD_HELP["device"])
@click.option("--compile", "compile_", is_flag=True, help="torch.compile the model.")
@click.option("--precision", type=click.Choice(PRECISIONS), default="auto",
              show_default=True, help=FIELD_HELP["precision"])
@click.option("--nproc", type=INT, default=1, show_default=True,
              help="Processes for this one run (torchrun; gloo on CPU, NCCL on GPUs).")
@click.option("--parallel", type=click.Choice(PARALLEL), default="ddp",
              show_default=True, help=FIELD_HELP["parallel"])
@click.option("--run-dir", type=PATH, default=None,
              help="Checkpoint here; resume this run if found here.")
@click.option("--restart", is_flag=True,
              help="Discard a checkpoint in --run-dir that belongs to another config.")
@click.option("--checkpoint-every", type=int, default=0, show_default=True,
              help=FIELD_HELP["checkpoint_every"])
@click.option("--tracker", type=click.Choice(TRACKERS), default=None,
              help=FIELD_HELP["tracker"])
@click.option("--tracker-dir", default=None, metavar="DIR",
              help=FIELD_HELP["tracker_dir"])
@click.option("--no-memory-check", "no_memory_check", is_flag=True,
              help="Start even when archfit.train.memory estimates the run does not fit this "
                   "machine's memory (refused up front otherwise).")
@click.option("--json", "as_json", is_flag=True, help="Print the result record as JSON.")
@click.option("--curve", is_flag=True, help="With --json: include the loss curve.")
def train(tokens, tokens_per_param, steps, compile_, nproc, run_dir, restart, no_memory_check,
          as_json, curve, **kw):
    """Train one GPT and report its losses, throughput and MFU.

    Example: archfit train --layers 4 --width 128 --heads 4 --tokens 2e6
    """
    from archfit.shapes import Shape
    from archfit.train import Budget, TrainConfig
    from archfit.train import train as run

    if kw["ff_ratio"] is not None and kw["d_ff"] is not None:
        raise click.UsageError("give --ff-ratio or --d-ff, not both")
    # validate the shape and the budget before loading data or torch
    shape = Shape(**pick(kw, SHAPE_FLAGS), vocab_size=256)
    auto = kw["lr"] == "auto"
    settings: dict[str, Any] = {k: v for k, v in kw.items() if k not in SHAPE_FLAGS}
    if auto:
        settings["lr"] = 1.0  # a placeholder: resolve_lr sets the rate once the budget is known
    cfg = TrainConfig(shape=shape, budget=Budget(tokens, tokens_per_param, steps),
                      vocab_from_data=True, compile=compile_, **settings)
    lr_source = None
    if auto:
        from archfit.train.hyperparameters import resolve_lr

        cfg, lr_source = resolve_lr(cfg)
        click.echo(lr_source, err=True)
    if run_dir:
        from archfit.io import check_output

        from archfit.train.checkpoint import check_run_dir

        check_output(run_dir, "run directory", folder=True)
        check_run_dir(run_dir)
    progress, bar = _progress(as_json)
    try:
        if nproc > 1:
            result = _launch(cfg, run_dir, nproc, restart, progress, not no_memory_check)
        else:
            result = run(cfg, run_dir=run_dir, progress=progress, restart=restart,
                         memory_check=not no_memory_check)
    finally:
        if bar is not None:
            bar.stop()
    d = result.to_dict()
    if as_json:
        out = {k: d[k] for k in RESULT_KEYS}
        out["expert_load"] = d["expert_load"]
        out.update(shape=d["shape"], resumed_from_step=d["resumed_from_step"], lr=cfg.lr,
                   lr_source=lr_source or "given")
        if curve:
            out["curve"] = d["curve"]
        emit_json(out)
    else:
        for k in RESULT_KEYS:
            if k != "expert_load_max" or d[k] is not None:
                click.echo(f"{k:<22}{fmt(d[k])}")
        for i, layer in enumerate(d["expert_load"] or []):
            click.echo(f"{'expert_load':<22}sparse layer {i}: "
                       + " ".join(f"{v:.2f}" for v in layer)
                       + " (share of routed tokens per expert)")
    if result.status == "preempted":
        from archfit.train import EXIT_PREEMPTED

        sys.exit(EXIT_PREEMPTED)
    if result.status != "ok":
        sys.exit(1)


def _launch(cfg, run_dir, nproc, restart, progress, memory_check):  # type: ignore[no-untyped-def]
    import shutil
    import tempfile

    from archfit.train.launch import launch

    tmp = None if run_dir else tempfile.mkdtemp(prefix="archfit-run-")
    try:
        return launch(cfg, str(run_dir or tmp), nproc, restart=restart, progress=progress,
                      memory_check=memory_check)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _progress(quiet: bool) -> tuple[Any, Any]:
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
    import time

    from archfit.sweep import fmt_eta

    state = {"next": 0.0, "t0": time.monotonic(), "step0": None, "tok0": 0}

    def plain(p: dict) -> None:
        """Off a terminal: a line every 10% (and at each evaluation) with the elapsed time,
        tokens/s and the time left."""
        if state["step0"] is None:  # the first step (of a resumed run too) starts the clock
            state.update(step0=p["step"], tok0=p["tokens"], t0=time.monotonic())
        frac = p["step"] / p["total_steps"]
        if frac >= state["next"] or "val_loss" in p:
            state["next"] = frac + 0.1
            el = time.monotonic() - state["t0"]
            done = p["step"] - state["step0"]
            msg = f"step {p['step']}/{p['total_steps']} train_loss {p['train_loss']:.4f}"
            if "val_loss" in p:
                msg += f" val_loss {p['val_loss']:.4f}"
            msg += f" elapsed {fmt_eta(el)}"
            if done > 0 and el > 0:
                msg += (f" {(p['tokens'] - state['tok0']) / el:,.0f} tokens/s ETA "
                        f"{fmt_eta(el / done * (p['total_steps'] - p['step']))}")
            click.echo(msg, err=True)

    return (None if quiet else plain), None

