"""What a sweep will cost before it runs: one row per run with its tokens, FLOPs and time."""

from __future__ import annotations

import os
from typing import Any

from archfit.sweep.rundir import read_result
from archfit.sweep.spec import Spec


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
                     "lr": cfg.lr, "seed": cfg.seed, "tokens": tokens, "flops": flops,
                     "est_s": flops / rate if rate else None})
    return rows
