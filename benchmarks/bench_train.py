"""Training throughput of archfit's GPT against HF transformers' GPT2LMHeadModel at the same
shape, batch, context, thread count and dtype, measured side by side in one process.

    pip install -e '.[bench]' && python benchmarks/bench_train.py [--layers 4 --width 256 ...]

Prints tokens/s for both, their ratio (target on CPU: >= 1.0) and peak memory (RSS growth).
"""

from __future__ import annotations

import argparse
import resource
import time

import torch


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench(model, vocab, batch, ctx, steps, warmup, device):  # type: ignore[no-untyped-def]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, vocab, (batch, ctx), generator=gen).to(device)
    model.train()
    for i in range(warmup + steps):
        if i == warmup:
            if device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        loss = model(x, x)[1] if hasattr(model, "shape") else model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if device == "cuda":
        torch.cuda.synchronize()
    return batch * ctx * steps / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    from transformers import GPT2Config, GPT2LMHeadModel

    from archfit.model import GPT
    from archfit.shapes import Shape

    shape = Shape(n_layer=a.layers, d_model=a.width, n_head=a.heads, vocab_size=a.vocab,
                  n_ctx=a.ctx)
    hf_cfg = GPT2Config(n_layer=a.layers, n_embd=a.width, n_head=a.heads, vocab_size=a.vocab,
                        n_positions=a.ctx)
    torch.manual_seed(0)
    ours = GPT(shape).to(a.device)
    hf = GPT2LMHeadModel(hf_cfg).to(a.device)
    n_ours, n_hf = ours.num_params(), hf.num_parameters()
    print(f"shape {a.layers}x{a.width}, heads {a.heads}, vocab {a.vocab}, ctx {a.ctx}, "
          f"batch {a.batch}, {a.threads} threads, fp32, {a.device}")
    print(f"parameters: archfit {n_ours:,}  HF {n_hf:,}  (shape core: {shape.params_total:,})")
    rows = []
    for name, m in (("archfit", ours), ("hf-gpt2", hf), ("archfit", ours), ("hf-gpt2", hf)):
        before = rss_mb()
        tps = bench(m, a.vocab, a.batch, a.ctx, a.steps, a.warmup, a.device)
        rows.append((name, tps, rss_mb() - before))
    best = {n: max(t for m, t, _ in rows if m == n) for n in ("archfit", "hf-gpt2")}
    for name in best:
        mem = max(r for m, _, r in rows if m == name)
        print(f"{name:<10} {best[name]:>10,.0f} tokens/s   peak RSS growth {mem:,.0f} MiB")
    print(f"ratio archfit / HF GPT2LMHeadModel: {best['archfit'] / best['hf-gpt2']:.2f}x "
          "(target on CPU >= 1.0x)")
    if a.device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
        print(f"peak CUDA memory {peak:,.0f} MiB")


if __name__ == "__main__":
    main()
