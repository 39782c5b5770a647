"""Training throughput of archfit's GPT against HF transformers' GPT2LMHeadModel at the same
shape, batch, context, thread count, dtype and optimizer (torch's fused AdamW, as archfit's
trainer steps on CPU and CUDA), each model in its own process, alternated.

    pip install -e '.[bench]' && python benchmarks/bench_train.py [--layers 4 --width 256 ...]
    python benchmarks/bench_train.py --gpt2-124m     # GPT-2 small's shape (slow on a CPU)
    python benchmarks/bench_train.py --two-million   # the trainer to a loss: 2M tokens

With ``--two-million``: the trainer's default GPT (archfit.train.TrainConfig, the embedded
corpus as bytes) trained on 2M tokens, its validation loss at init and at the end (target:
below 2.5 nats/token) and its tokens/s; about 9 minutes on 2 cores. The test suite holds the
same run to a nearer threshold (tests/test_trainer.py).

Prints tokens/s for both, their ratio (target at the default shape: >= 1.3), peak memory (RSS
growth) and each one's share of the machine's fp32 matmul peak: its tokens/s times the shape's
``matmul_train`` FLOPs per token (every matrix product of a training step, the output layer
and the attention over the full window included; archfit.shapes), against the best of a
2048^3 sgemm at the same thread count, measured in the same run (target: >= 80%). archfit's output layer is fused with its loss (no full logits, the gradient taken
in the forward pass), which is where the default shape spends most of its time; HF's
GPT2LMHeadModel materializes the fp32 logits and their log-softmax.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

import torch


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench(model, vocab, batch, ctx, steps, warmup, device):  # type: ignore[no-untyped-def]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)  # as archfit trains
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


def one(a: argparse.Namespace) -> None:
    """Measure one model in this process; print tokens/s and peak RSS as JSON."""
    import json

    from transformers import GPT2Config, GPT2LMHeadModel

    from archfit.train.model import GPT
    from archfit.shapes import Shape

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.only == "archfit":
        model = GPT(Shape(n_layer=a.layers, d_model=a.width, n_head=a.heads,
                          vocab_size=a.vocab, n_ctx=a.ctx))
        n = model.num_params()
    else:
        model = GPT2LMHeadModel(GPT2Config(n_layer=a.layers, n_embd=a.width, n_head=a.heads,
                                           vocab_size=a.vocab, n_positions=a.ctx))
        n = model.num_parameters()
    model = model.to(a.device)
    base = rss_mb()
    tps = bench(model, a.vocab, a.batch, a.ctx, a.steps, a.warmup, a.device)
    mem = (torch.cuda.max_memory_allocated() / 2**20 if a.device == "cuda"
           else rss_mb() - base)
    print(json.dumps({"tokens_per_s": tps, "params": n, "peak_mib": mem}))


def sgemm_peak(threads: int, device: str, n: int = 2048, reps: int = 5) -> float:
    """FLOP/s of the best of ``reps`` n^3 fp32 matrix products at ``threads`` threads."""
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    best = float("inf")
    for i in range(reps + 2):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        a @ b
        if device == "cuda":
            torch.cuda.synchronize()
        if i >= 2:
            best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def two_million() -> None:
    """The trainer to a loss: 2M tokens of the default run, the loss at init and after."""
    import math

    from archfit.train import Budget, TrainConfig, train

    r = train(TrainConfig(budget=Budget(tokens=2e6), lr=3e-3, eval_every=100, eval_windows=64))
    first = train(TrainConfig(budget=Budget(steps=1), eval_every=1, eval_windows=64, lr=1e-8))
    print(f"val loss at init {first.final_val_loss:.3f} (ln 256 = {math.log(256):.3f}) -> "
          f"{r.final_val_loss:.3f} after {r.tokens:,} tokens ({r.tokens_per_s:,.0f} tokens/s, "
          f"{torch.get_num_threads()} threads; target below 2.5 nats/token)")


def main() -> None:
    import json
    import subprocess

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
    ap.add_argument("--gpt2-124m", action="store_true",
                    help="GPT-2 small: 12 layers x 768, 12 heads (3 timed steps, 1 warm-up)")
    ap.add_argument("--two-million", action="store_true",
                    help="the default run on 2M tokens: its loss at init and after")
    ap.add_argument("--only", choices=["archfit", "hf"], default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.two_million:
        two_million()
        return
    if a.gpt2_124m:
        a.layers, a.width, a.heads = 12, 768, 12
        if "--steps" not in sys.argv:
            a.steps, a.warmup = 3, 1
    if a.only:
        one(a)
        return
    print(f"shape {a.layers}x{a.width}, heads {a.heads}, vocab {a.vocab}, ctx {a.ctx}, "
          f"batch {a.batch}, {a.threads} threads, fp32, {a.device}; each model in its own "
          "process, alternated, best of 2")
    res: dict[str, list[dict]] = {"archfit": [], "hf": []}
    peaks = [sgemm_peak(a.threads, a.device)]
    for name in ("archfit", "hf", "archfit", "hf"):
        args = [x for x in sys.argv[1:] if x != "--gpt2-124m"]
        args += ["--layers", str(a.layers), "--width", str(a.width), "--heads", str(a.heads),
                 "--steps", str(a.steps), "--warmup", str(a.warmup)]
        out = subprocess.run([sys.executable, __file__, *args, "--only", name],
                             capture_output=True, text=True, check=True).stdout
        res[name].append(json.loads(out.strip().splitlines()[-1]))
    peaks.append(sgemm_peak(a.threads, a.device))
    from archfit.shapes import Shape

    per_token = Shape(n_layer=a.layers, d_model=a.width, n_head=a.heads, vocab_size=a.vocab,
                      n_ctx=a.ctx).flops_per_token("matmul_train")
    peak = max(peaks)
    print(f"fp32 sgemm peak {peak / 1e9:,.1f} GFLOP/s (2048^3, {a.threads} threads, best of 5, "
          f"before and after); matmul_train {per_token:,.0f} FLOPs/token")
    best = {k: max(r["tokens_per_s"] for r in v) for k, v in res.items()}
    for k, label in (("archfit", "archfit"), ("hf", "HF GPT2LMHeadModel")):
        mem = max(r["peak_mib"] for r in res[k])
        print(f"{label:<20} {best[k]:>10,.0f} tokens/s   params {res[k][0]['params']:,}   "
              f"peak memory growth during training {mem:,.0f} MiB   "
              f"{best[k] * per_token / peak:.0%} of the sgemm peak")
    print(f"ratio archfit / HF GPT2LMHeadModel: {best['archfit'] / best['hf']:.2f}x "
          "(target at the default shape: >= 1.3x; archfit's share of the peak: >= 80%)")


if __name__ == "__main__":
    main()
