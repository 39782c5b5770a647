"""What a sweep will cost before it runs: one row per run with its tokens, FLOPs and time; and
the runs a spec or a grid describes as a table of candidates (what ``archfit design`` chooses
from)."""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

from archfit.train import memory
from archfit.train.accelerators import DEVICES
from archfit.errors import ArchfitError, SpecError
from archfit.shapes import TRAIN_FLOPS_CONVENTION
from archfit.sweep.rundir import read_result
from archfit.sweep.spec import Run, Spec
from archfit.train.configure import OVERHEAD_GIB, micro_batch_for, overhead_gib


def measured_flops_rate(spec: Spec, out: str | None) -> float | None:
    """Median training FLOP/s (kaplan_train) of the finished runs in ``out``, if any."""
    if not out or not os.path.isdir(out):
        return None
    rates = []
    for r in spec.runs:
        res = read_result(os.path.join(out, r.run_id))
        if res and res.get("status") == "ok" and res.get("train_s") and res.get("flops"):
            rates.append(res["flops"] / res["train_s"])
    if not rates:
        return None
    rates.sort()
    return rates[len(rates) // 2]


def plan_rows(spec: Spec, throughput: float | None = None,
              out: str | None = None) -> list[dict[str, Any]]:
    """One row per run: id, shape, params, tokens, FLOPs and an estimated time.

    The estimate divides the run's training FLOPs (kaplan_train) by a FLOP/s rate: ``throughput``
    if given, else the median rate measured on this sweep's finished runs, else the spec's
    ``executor.throughput``; none of them, no estimate."""
    rows = []
    rate = throughput or measured_flops_rate(spec, out) or spec.executor.get("throughput")
    for r in spec.runs:
        cfg = r.train_config
        s = cfg.shape
        tokens = cfg.steps() * cfg.tokens_per_step
        flops = s.flops_per_token("kaplan_train") * tokens
        rows.append({"run_id": r.run_id, "n_layer": s.n_layer, "d_model": s.d_model,
                     "n_head": s.n_head, "d_ff": s.d_ff, "ff_ratio": s.ff_ratio,
                     "params_non_embedding": s.params_non_embedding,
                     "params_total": s.params_total, "target_params": r.meta["target_params"],
                     "plan": s.plan, "variant": r.meta.get("variant"),
                     "n_experts": s.n_experts, "top_k": s.top_k,
                     "params_active_non_embedding": s.params_active_non_embedding,
                     "lr": cfg.lr, "batch_tokens": cfg.tokens_per_step, "seed": cfg.seed,
                     "tokens": tokens, "flops": flops,
                     "budget_flops": r.meta.get("budget_flops"),
                     "est_s": flops / rate if rate else None})
    return rows


def memory_plan(spec: Spec, run: Run, budget_bytes: float, *,
                activation_checkpointing: bool | None = None,
                precision: str = "bf16", overhead: float = OVERHEAD_GIB) -> dict[str, Any]:
    """A run's GPUs, micro-batch, gradient accumulation and peak memory per GPU for a memory
    budget (bf16 autocast, as a GPU run trains); ``fits`` False with the reason when not even
    one sequence fits."""
    cfg = run.train_config
    g = spec.gpus_for(run)
    ac = bool(spec.executor.get("activation_checkpointing")) if activation_checkpointing is None \
        else activation_checkpointing
    row: dict[str, Any] = {"gpus": g, "global_batch": cfg.batch_size * cfg.grad_accum,
                           "activation_checkpointing": ac}
    try:
        m, extra, e = micro_batch_for(cfg, g, budget_bytes, precision=precision,
                                      activation_checkpointing=ac, overhead=overhead)
    except ArchfitError as err:
        e = memory.estimate(cfg.shape, 1, precision=precision, optimizer=cfg.optimizer,
                            activation_checkpointing=ac, parallel=cfg.parallel, world=g,
                            overhead_gib=overhead)
        row.update(fits=False, micro_batch=None, grad_accum=None,
                   memory_gib=e.total / memory.GIB, note=str(err))
        return row
    row.update(fits=True, micro_batch=m, grad_accum=cfg.grad_accum * extra,
               memory_gib=e.total / memory.GIB, memory=e.to_dict(), note="")
    return row


def gpu_plan_rows(spec: Spec, gpu: str | None = None, gpu_memory: float | None = None,
                  mfu: float | None = None, peak_flops: float | None = None,
                  activation_checkpointing: bool | None = None) -> dict[str, Any]:
    """The sweep on a named accelerator: per run its GPUs, micro-batch, accumulation, peak
    memory per GPU, training FLOPs and GPU-hours at an MFU (given, else measured on that
    accelerator by benchmarks/bench_gpu.py, else assumed: ``mfu_source`` says which); and the
    totals."""
    from archfit.train.perf import calibration

    name = gpu if gpu is not None else spec.executor.get("gpu")
    mem_gib, peak = memory.accelerator(name) if name is not None else (None, None)
    budget = gpu_memory or (spec.executor.get("gpu_memory_gb") or mem_gib or 0) * memory.GIB
    if not budget:
        raise ArchfitError("give --gpu NAME (" + ", ".join(DEVICES) + ") or "
                           "--gpu-memory SIZE")
    peak = peak_flops or peak
    cal = calibration(name.lower()) if name is not None else None
    given = mfu or spec.executor.get("mfu")
    mfu = float(given or (cal.mfu if cal else memory.DEFAULT_MFU))
    mfu_source = "given" if given else (cal.source if cal else "assumed")
    overhead = overhead_gib(name)
    rows = []
    for r, base in zip(spec.runs, plan_rows(spec)):
        row = {k: base[k] for k in ("run_id", "n_layer", "d_model", "n_head", "d_ff",
                                     "params_non_embedding", "tokens", "flops")}
        row.update(memory_plan(spec, r, budget, overhead=overhead,
                               activation_checkpointing=activation_checkpointing))
        row["gpu_hours"] = memory.gpu_hours(row["flops"], peak, mfu) if peak else None
        rows.append(row)
    hours = [r["gpu_hours"] for r in rows if r["gpu_hours"] is not None]
    return {"gpu": name, "gpu_memory_gib": budget / memory.GIB, "peak_flops": peak, "mfu": mfu,
            "mfu_source": mfu_source,
            "flops_convention": TRAIN_FLOPS_CONVENTION,
            "memory_convention": "peak per GPU: bf16 autocast, fp32 master weights, grads and "
                                 f"AdamW states, activations, {overhead:.3g} GiB overhead "
                                 "(archfit.train.memory)",
            "rows": rows, "total_flops": sum(r["flops"] for r in rows),
            "total_gpu_hours": sum(hours) if hours else None,
            "fits": all(r["fits"] for r in rows)}


def pool_from_spec(spec: Any) -> Any:
    """One candidate per run of a sweep spec: its shape, size and tokens."""
    import polars as pl

    rows = []
    for r in spec.runs:
        s, cfg = r.shape, r.train_config
        rows.append({"run_id": r.run_id, "params": float(s.params_non_embedding),
                     "n_layer": s.n_layer, "d_model": s.d_model, "n_head": s.n_head,
                     "n_kv_head": s.n_kv_head, "d_ff": s.d_ff,
                     "tokens": _budget_tokens(cfg, s),
                     "target_params": r.meta.get("target_params"),
                     "lr": cfg.lr, "seed": cfg.seed, "plan": s.plan})
    return pl.DataFrame(rows)


def _budget_tokens(cfg: Any, s: Any) -> float:
    """The tokens a run of the spec trains on (its budget's steps at its tokens per step)."""
    tps = cfg.batch_size * s.n_ctx * cfg.grad_accum
    return float(cfg.budget.steps_for(s, tps) * tps)


def pool_from_grid(sizes: Sequence[float], depths: Sequence[int], tokens: Sequence[float],
                   ff_ratios: Sequence[float] = (4.0,), *, base: dict[str, Any] | None = None,
                   head_dim: int = 64, multiple: int = 64, tolerance: float = 0.12) -> Any:
    """Candidates from grid flags: each size × depth × ff ratio that fits its size within
    ``tolerance`` (the iso-parameter family), trained to each token count."""
    import polars as pl

    from archfit.shapes.families import iso_param_family

    rows = []
    for N in sizes:
        for m in iso_param_family(float(N), list(depths), list(ff_ratios), head_dim=head_dim,
                                  multiple=multiple, tolerance=tolerance, ff_multiple=multiple,
                                  **(base or {})):
            if m.shape is None or not m.within_tolerance:
                continue
            s = m.shape
            for D in tokens:
                rows.append({"params": float(s.params_non_embedding), "n_layer": s.n_layer,
                             "d_model": s.d_model, "n_head": s.n_head, "n_kv_head": s.n_kv_head,
                             "d_ff": s.d_ff, "tokens": float(D), "target_params": float(N)})
    if not rows:
        raise SpecError(f"no depth of {', '.join(map(str, depths))} gives a shape within "
                        f"{tolerance:.0%} of a size in {', '.join(f'{float(n):.3g}' for n in sizes)}"
                        f" (head_dim {head_dim}, widths a multiple of {multiple}): change --sizes "
                        "or --depths ('archfit grid --params N --depths ...' shows each depth's "
                        "width)")
    _check_cost(rows)
    return pl.DataFrame(rows)


def _check_cost(rows: list[dict[str, Any]]) -> None:
    """Refuse candidates whose training FLOPs (C = 6 N D) are not a finite number."""
    for r in rows:
        if not math.isfinite(6.0 * r["params"] * r["tokens"]):
            raise SpecError(f"a candidate of {r['params']:.3g} parameters and {r['tokens']:.3g} "
                            "tokens costs more FLOPs (C = 6 N D) than a float holds: give "
                            "realistic --sizes and --tokens")


def pool_from_sizes(sizes: Sequence[float], tokens: Sequence[float]) -> Any:
    """Candidates for a law of size and tokens alone (chinchilla): each size trained to each
    token count, without shapes (cost in FLOPs, C = 6 N D, or GPU-hours from those FLOPs)."""
    import polars as pl

    rows = [{"params": float(N), "tokens": float(D)} for N in sizes for D in tokens]
    _check_cost(rows)
    return pl.DataFrame(rows)
