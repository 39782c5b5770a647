"""archfit's mixture of experts beside today's, at their own budgets.

    python benchmarks/bench_moe_known.py [--gpu h100] [--json]

For DeepSeek-V3, Kimi K2 and Qwen3-235B-A22B (their shapes from datasets/known_models.csv,
their tokens from their reports), three rows each:

- **model's own**: the model's own choice, priced as archfit prices a candidate: krajewski2024's
  predicted loss at its active non-embedding size, its tokens and its granularity (d_ff of its
  dense layers over one expert's width), and the modelled GPU time of those tokens on --gpu
  (the step model of archfit.train.perf plus the expert all-to-all over the layout its
  training state needs);
- **archfit, D given**: ``recommend`` at the model's total and active sizes, trained on
  the model's tokens (--tokens): the like-for-like comparison of loss and GPU time;
- **archfit, D by law**: the default request (the tokens from the MoE law's own N-D
  trade-off, weighed by loss per GPU-hour).

"to model's loss" is the GPU time each row's shape needs to reach the model's own predicted
loss (the law solved for its tokens): the like-for-like price of each choice.

Every loss here is the published law's prediction (C4 in Krajewski et al. 2024's setting), not
any model's measured loss: the table compares choices under one law, not the models.
"""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Any

# every row is priced at this training context: the three models pre-trained most of their
# tokens at 4,096 (DeepSeek-V3 report section 4.3 and Kimi K2's: 4K, then extended; Qwen3's
# stages S1 and S2), whatever context their released configs allow
PRETRAIN_CTX = 4096
MODELS = {  # name: (tokens trained, the report that states them)
    "DeepSeek-V3": (14.8e12, "DeepSeek-AI 2024, arXiv 2412.19437"),
    "Kimi K2": (15.5e12, "Kimi Team 2025, arXiv 2507.20534"),
    "Qwen3-235B-A22B": (36e12, "Qwen Team 2025, arXiv 2505.09388"),
}


def _row(who: str, p: Any) -> dict[str, Any]:
    s = p.shape
    return {"who": who, "n_layer": s.n_layer, "d_model": s.d_model, "experts": s.n_experts,
            "top_k": s.top_k, "shared": s.n_shared_experts, "width": s.d_expert,
            "granularity": p.granularity, "tokens": p.tokens, "loss": p.loss,
            "gpu_hours": p.gpu_hours, "all_to_all": p.all_to_all_share, "gpus": p.layout["gpus"]}


def table(gpu: str = "h100") -> list[dict[str, Any]]:
    from archfit.laws import load_fit
    from archfit.recommending.moe_pricing import DEFAULT_BATCH_TOKENS, Priced, price
    from archfit.recommending.request import (Experts, Grid, Objective, RecommendRequest,
                                              Target)
    from archfit.recommending.sparse import recommend_sparse
    from archfit.shapes.known import load_known_models

    mf = load_fit("krajewski2024")
    known = {m.name: m for m in load_known_models()}
    rows = []
    for name, (tokens, source) in MODELS.items():
        s = known[name].shape.with_(n_ctx=PRETRAIN_CTX)
        own = price(mf, {s.granularity or 1.0: s}, {s.granularity or 1.0: tokens}, gpu,
                    DEFAULT_BATCH_TOKENS)[0]
        rows.append({"model": name, "source": source, **_row("model's own", own),
                     "gpu_hours_to_model_loss": own.gpu_hours})
        for who, tok in (("archfit, D given", tokens), ("archfit, D by law", None)):
            req = RecommendRequest(Target(params=float(s.params_non_embedding), tokens=tok),
                                   grid=Grid(n_ctx=PRETRAIN_CTX),
                                   experts=Experts(float(s.params_active_non_embedding)),
                                   objective=Objective(gpu=gpu))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = recommend_sparse(req)
            pick = min(r.sparsity["by_granularity"],  # the candidate the shape was built from
                       key=lambda c: abs(c["granularity"] / r.sparsity["granularity"] - 1))
            p = Priced(r.sparsity["granularity"], r.shape, r.recipe["tokens"]["value"],
                       r.sparsity["loss"]["value"], pick["tokens_per_s_per_gpu"],
                       r.sparsity["pricing"]["gpu_hours"], pick["all_to_all_share"],
                       r.sparsity["pricing"]["layout"])
            to_model = mf.law_obj.tokens_to_reach(  # type: ignore[attr-defined]
                mf.params, r.shape.params_active_non_embedding, p.granularity, own.loss)
            rows.append({"model": name, "source": source, **_row(who, p),
                         "gpu_hours_to_model_loss": to_model / p.tokens_per_s / 3600.0,
                         "verdict": r.trust["verdict"]})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| model | whose choice | L x d | experts, top-k (+shared) | width | G | tokens | "
            "pred. loss | GPU-hours | to model's loss | all-to-all |")
    out = [head, "|" + "---|" * 11]
    for r in rows:
        shared = f" (+{r['shared']})" if r["shared"] else ""
        out.append(f"| {r['model']} | {r['who']} | {r['n_layer']} x {r['d_model']:,} | "
                   f"{r['experts']}, top-{r['top_k']}{shared} | {r['width']:,} | "
                   f"{r['granularity']:.3g} | {r['tokens']:.3g} | {r['loss']:.4f} | "
                   f"{r['gpu_hours']:.3g} | {r['gpu_hours_to_model_loss']:.3g} | "
                   f"{r['all_to_all']:.0%} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--markdown", action="store_true", help="the docs table")
    a = ap.parse_args()
    rows = table(a.gpu)
    if a.json or a.markdown:
        print(json.dumps(rows, indent=2) if a.json else markdown(rows))
        return
    print(f"krajewski2024's predicted loss; GPU time modelled on {a.gpu} (archfit.train.perf, "
          f"not measured)\nat {PRETRAIN_CTX:,} tokens of context; to L: the GPU-hours to the model's "
          "own predicted loss")
    for name in MODELS:
        print(f"\n{name} ({MODELS[name][1]}; {MODELS[name][0]:.3g} tokens)")
        print(f"  {'whose choice':<17} {'L x d':>10} {'experts':>8} {'top-k':>5} {'width':>6} "
              f"{'G':>5} {'tokens':>9} {'loss':>7} {'GPU-h':>8} {'to L':>8} {'a2a':>4}")
        for r in (r for r in rows if r["model"] == name):
            print(f"  {r['who']:<17} {r['n_layer']:>3} x {r['d_model']:<5,} "
                  f"{r['experts']:>7}{'+' + str(r['shared']) if r['shared'] else '':<2}"
                  f"{r['top_k']:>4} {r['width']:>6,} {r['granularity']:>5.3g} "
                  f"{r['tokens']:>9.3g} {r['loss']:>7.4f} {r['gpu_hours']:>8.3g} "
                  f"{r['gpu_hours_to_model_loss']:>8.3g} {r['all_to_all']:>4.0%}")


if __name__ == "__main__":
    main()
