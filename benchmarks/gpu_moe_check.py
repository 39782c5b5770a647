"""GPU checks of the mixture-of-experts trainer (run on a CUDA machine; nothing here runs in CI):
bf16 autocast training of a small MoE and its dense twin of the same active size, eager and
torch.compile, with tokens/s and MFU (kaplan_train FLOPs, N active, over the device's dense bf16
peak); one expert of top-1 against the dense MLP in bf16. Prints one JSON line per check.

    python benchmarks/gpu_moe_check.py [--steps 200]
"""

from __future__ import annotations

import argparse
import json
import time


def run(shape, steps, compile_, batch, ctx):  # type: ignore[no-untyped-def]
    from archfit.train import Budget, TrainConfig, train

    cfg = TrainConfig(shape=shape, budget=Budget(steps=steps), vocab_from_data=True,
                      batch_size=batch, lr=3e-3, eval_every=steps, eval_windows=32,
                      device="cuda", precision="bf16", compile=compile_, seed=0)
    t = time.perf_counter()
    r = train(cfg)
    curve = [p["train_loss"] for p in r.curve]
    return {"status": r.status, "error": r.error, "first_loss": curve[0], "final_val_loss":
            r.final_val_loss, "tokens_per_s": r.tokens_per_s, "mfu": r.mfu,
            "expert_load_max": r.expert_load_max, "wall_s": time.perf_counter() - t,
            "params_total": r.params_total}


def main() -> None:
    import torch

    from archfit.shapes import Shape
    from archfit.train.model import MLP, MoE

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args()
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}))
    arch = dict(mlp="swiglu", position="rope", norm="rmsnorm", bias=False,
                tied_embeddings=False, n_ctx=512)
    moe = Shape(n_layer=8, d_model=768, n_head=6, n_kv_head=2, d_ff=2048, n_experts=8, top_k=2,
                **arch)
    dense = Shape(n_layer=8, d_model=768, n_head=6, n_kv_head=2, d_ff=4096, **arch)
    for name, s in (("moe 8x top-2", moe), ("dense, same active MLP", dense)):
        for c in (False, True):
            try:
                out = run(s, a.steps, c, 32, 512)
            except Exception as e:  # a compile failure is a finding, not the end of the script
                out = {"status": "error", "error": f"{type(e).__name__}: {e}"[:300]}
            print(json.dumps({"check": name, "compile": c,
                              "active_non_embedding": s.params_active_non_embedding, **out}),
                  flush=True)
    torch.manual_seed(0)
    s = Shape(n_layer=1, d_model=768, n_head=6, d_ff=2048, mlp="swiglu", bias=False)
    d, m = MLP(s).cuda(), MoE(s.with_(n_experts=1, top_k=1)).cuda()
    m.experts[0].load_state_dict(d.state_dict())
    x = torch.randn(4, 512, 768, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        diff = (m(x).float() - d(x).float()).abs().max().item()
    print(json.dumps({"check": "one expert of top-1 = dense MLP, bf16", "max_abs_diff": diff}))


if __name__ == "__main__":
    main()
