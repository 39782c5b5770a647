"""archfit's trainer against HF transformers on one GPU, side by side in one process, with the
same loop for every model: random tokens, bf16 autocast, torch's fused AdamW, ``--warmup``
untimed steps (the compile among them), then ``--steps`` timed ones between two syncs.

    python benchmarks/bench_gpu.py [--out measured.json]          # on a CUDA machine
    python benchmarks/bench_gpu.py --device cpu                   # tiny shapes: it runs

The shapes (``--device cuda``):
- 12 x 768, llama block (SwiGLU, RoPE, RMSNorm, no biases, untied), vocab 32,000, ctx 1,024,
  32 sequences, against ``LlamaForCausalLM`` (sdpa);
- 24 x 2,048, 16 heads of 128, 8 kv heads, d_ff 5,632, vocab 32,000, ctx 2,048, 8 sequences,
  against ``LlamaForCausalLM`` (sdpa);
- a mixture of 8 x 768, 12 heads of 64 and 4 kv heads, QK-norm, 8 experts of 2,048, top-2,
  against ``Qwen3MoeForCausalLM``, and its dense twin of the same active size (d_ff 4,096);
each eager and compiled (``torch.compile``, inductor). Then ``archfit.train.train`` itself,
compiled, at the first shape: its reported steady tokens/s against the loop's.

Printed per row: tokens/s, MFU (the shape's ``matmul_train`` FLOPs per token, every matrix
product of a training step with the attention over the whole context and the logits, times
tokens/s, over the bf16 matmul peak measured in this run: the best of 8192^3 products), peak
memory (``torch.cuda.max_memory_allocated``), the first step's seconds above a steady step's
(the compile, with compile), and archfit's planner beside them: ``archfit shape --gpu``'s
modelled tokens/s (:func:`archfit.train.perf.modelled`) and its memory estimate
(:func:`archfit.train.memory.estimate`, bf16, 1 GiB overhead). ``--out`` writes the rows as
JSON in the form ``archfit/published/gpu_measured.json`` holds (the planner's calibration).
Targets: archfit >= 1.1x HF at both dense shapes compiled, >= 50% MFU at 24 x 2,048,
the mixture's MFU >= 60% of its dense twin's, train() within 10% of the loop.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import sys
import tempfile
import textwrap
import time

LLAMA = dict(mlp="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False)


def shapes(device: str) -> list[tuple[str, dict, int]]:
    """(name, Shape fields, sequences per step) of the benchmark's models on ``device``."""
    if device == "cpu":  # the same kinds, small enough to run in a minute on two cores
        return [("dense 2x128", dict(n_layer=2, d_model=128, n_head=2, d_ff=344, vocab_size=2048,
                                     n_ctx=128, **LLAMA), 4),
                ("moe 2x128 E4 top-2", dict(n_layer=2, d_model=128, n_head=4, n_kv_head=2,
                                            qk_norm=True, d_ff=512, d_expert=256, n_experts=4,
                                            top_k=2, vocab_size=2048, n_ctx=128, **LLAMA), 4),
                ("dense twin 2x128", dict(n_layer=2, d_model=128, n_head=4, n_kv_head=2,
                                          qk_norm=True, d_ff=512, vocab_size=2048, n_ctx=128,
                                          **LLAMA), 4)]
    return [("dense 12x768", dict(n_layer=12, d_model=768, n_head=12, d_ff=2048,
                                  vocab_size=32000, n_ctx=1024, **LLAMA), 32),
            ("dense 24x2048", dict(n_layer=24, d_model=2048, n_head=16, n_kv_head=8, d_ff=5632,
                                   vocab_size=32000, n_ctx=2048, **LLAMA), 8),
            ("moe 8x768 E8 top-2", dict(n_layer=8, d_model=768, n_head=12, n_kv_head=4,
                                        qk_norm=True, d_ff=4096, d_expert=2048, n_experts=8,
                                        top_k=2, vocab_size=32000, n_ctx=1024, **LLAMA), 32),
            ("dense twin 8x768", dict(n_layer=8, d_model=768, n_head=12, n_kv_head=4,
                                      qk_norm=True, d_ff=4096, vocab_size=32000, n_ctx=1024,
                                      **LLAMA), 32)]


def hf_model(s):  # type: ignore[no-untyped-def]
    """The HF model of the same shape: LlamaForCausalLM, or Qwen3MoeForCausalLM for a mixture
    (every layer sparse, top-k renormalized as archfit does)."""
    import transformers as tf

    common = dict(vocab_size=s.vocab_size, hidden_size=s.d_model, num_hidden_layers=s.n_layer,
                  num_attention_heads=s.n_head, num_key_value_heads=s.n_kv_head,
                  max_position_embeddings=s.n_ctx, rms_norm_eps=1e-6, tie_word_embeddings=False,
                  attn_implementation="sdpa")
    if s.moe:
        cfg = tf.Qwen3MoeConfig(head_dim=s.head_dim, intermediate_size=s.d_ff,
                                moe_intermediate_size=s.d_expert, num_experts=s.n_experts,
                                num_experts_per_tok=s.top_k, decoder_sparse_step=1,
                                mlp_only_layers=[], norm_topk_prob=True, **common)
        return tf.Qwen3MoeForCausalLM(cfg)
    return tf.LlamaForCausalLM(tf.LlamaConfig(intermediate_size=s.d_ff, head_dim=s.head_dim,
                                              **common))


def implementation(model, impl: str) -> str:  # type: ignore[no-untyped-def]
    """How the model runs its MLP and attention, as its row names it: archfit's grouped
    experts, or HF's class with its experts' and attention's implementation (transformers'
    ``experts_implementation``: eager, a loop over the experts, unless set)."""
    if impl == "archfit":
        from archfit.train.experts import GROUP_ALIGN

        return ("archfit GPT" + (f", grouped experts (torch grouped_mm on CUDA in bf16, groups "
                                 f"padded to {GROUP_ALIGN} rows; a loop elsewhere)"
                                 if model.shape.moe else ""))
    cfg = model.config
    experts = getattr(cfg, "_experts_implementation", None) or getattr(
        cfg, "experts_implementation", None)
    moe = hasattr(cfg, "num_experts")
    return (f"HF {type(model).__name__} (attention {cfg._attn_implementation}"
            + (f", experts {experts or 'eager (a loop over experts)'}" if moe else "") + ")")


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed_loop(model, archfit: bool, s, batch: int, steps: int, warmup: int, device: str,
               compile_: bool) -> dict:
    """The one loop every model runs: tokens/s over ``steps`` steps after ``warmup`` (timed
    between two syncs), the first step's time, and the peak memory."""
    step_model = torch.compile(model) if compile_ else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, s.vocab_size, (batch, s.n_ctx), generator=gen).to(device)
    bf16 = device == "cuda"
    model.train()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    def step():  # one training step, the same for every model
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            loss = step_model(x, x)[1] if archfit else step_model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    times = []
    for _ in range(warmup + 1):
        sync(device)
        t0 = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    sync(device)
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if device == "cuda" else None
    return {"tokens_per_s": batch * s.n_ctx * steps / dt, "step_s": dt / steps,
            "first_step_s": times[0], "compile_s": max(0.0, times[0] - dt / steps)
            if compile_ else None, "peak_memory_gib": peak / 2**30 if peak else None,
            "loss": float(loss.detach())}


def matmul_peak(device: str) -> float:
    """FLOP/s of the best of 8 products of n^3 (bf16 8192^3 on CUDA, fp32 2048^3 on CPU)."""
    n, dt = (8192, torch.bfloat16) if device == "cuda" else (2048, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dt)
    b = torch.randn(n, n, device=device, dtype=dt)
    best = float("inf")
    for i in range(10):
        sync(device)
        t0 = time.perf_counter()
        a @ b
        sync(device)
        if i >= 2:
            best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def planner(s, batch: int, device: str, compiled: bool) -> dict:
    """archfit's own prediction for the shape in the mode measured: tokens/s and peak memory
    (archfit shape --gpu's planner, archfit.train.perf.planned)."""
    if device != "cuda":
        return {"tokens_per_s": None, "memory_gib": None}
    from archfit.train.accelerators import device_key
    from archfit.train.perf import planned

    key = device_key(torch.cuda.get_device_name()) or "h200"
    return planned(s, key, batch, compiled)


def train_row(s, batch: int, steps: int, warmup: int, device: str) -> dict:
    """archfit.train.train itself, compiled, at the shape: its steady tokens/s and compile_s."""
    import numpy as np

    from archfit.train import Budget, TrainConfig, train

    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "tokens.npy")
        rng = np.random.default_rng(0)
        np.save(data, rng.integers(0, s.vocab_size, 4_000_000, dtype=np.int32))
        total = warmup + steps
        cfg = TrainConfig(shape=s, budget=Budget(steps=total), data=data, batch_size=batch,
                          lr=3e-4, eval_every=total, eval_windows=4, eval_batch=batch,
                          device=device, compile=True, seed=0)
        r = train(cfg, memory_check=False)
    return {"status": r.status, "error": r.error, "tokens_per_s": r.tokens_per_s,
            "first_step_s": r.first_step_s, "compile_s": r.compile_s}


def train_pairs(first: tuple, steps: int, warmup: int, dev: str, pairs: int) -> dict:
    """train() compiled at the first shape, each time followed by the benchmark loop at the
    same shape and steps (paired: a busy machine slows both alike); the median ratio."""
    from archfit.shapes import Shape
    from archfit.train.model import GPT

    label, fields, batch = first
    s = Shape(**fields)
    out: dict = {"pairs": []}
    for _ in range(pairs):
        tr = train_row(s, batch, steps, warmup, dev)
        torch._dynamo.reset()
        torch.manual_seed(0)
        loop = timed_loop(GPT(s).to(dev), True, s, batch, steps, warmup, dev, True)
        torch._dynamo.reset()
        if not tr["tokens_per_s"]:
            print(f"\ntrain() failed: {tr['error']}")
            return {**tr, **out}
        out["pairs"].append({"train": tr, "loop_tokens_per_s": loop["tokens_per_s"],
                             "ratio": tr["tokens_per_s"] / loop["tokens_per_s"]})
    ratios = sorted(p["ratio"] for p in out["pairs"])
    out.update(out["pairs"][0]["train"], ratio=ratios[len(ratios) // 2])
    print("\n" + textwrap.fill(
          f"train() compiled at {label}, against the loop right after it ({steps} steps each, "
          f"{pairs} pair{'s' if pairs > 1 else ''}): "
          + ", ".join(f"{p['train']['tokens_per_s']:,.0f} / {p['loop_tokens_per_s']:,.0f}"
                      for p in out["pairs"])
          + f" tokens/s; median {out['ratio']:.3f}x (target within 10%); compile_s "
          f"{out['compile_s'] or 0:.1f}", 100, subsequent_indent="  "))
    return out


def check_args(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Every argument checked before anything trains; a bad one exits 2 in one line."""
    def fail(message: str) -> None:
        print(f"bench_gpu.py: error: {message}", file=sys.stderr)
        sys.exit(2)

    if a.steps is not None and a.steps < 1:
        fail(f"--steps must be at least 1, got {a.steps}")
    if a.warmup < 1:
        fail(f"--warmup must be at least 1 (the compile happens there), got {a.warmup}")
    if a.out is not None:
        folder = os.path.dirname(os.path.abspath(a.out))
        if os.path.isdir(a.out):
            fail(f"--out {a.out} is a folder; give a file in it, e.g. {a.out}/measured.json")
        if not os.path.isdir(folder):
            fail(f"--out {a.out}: the folder {folder} does not exist")
        if not os.access(folder, os.W_OK):
            fail(f"--out {a.out}: the folder {folder} is not writable")
    import torch

    if a.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda: torch sees no CUDA device on this machine (torch "
                 f"{torch.__version__}); use --device cpu")


def main() -> None:
    # torch is imported once the arguments are read: a bad one is refused in a blink
    global torch
    from archfit.shapes import Shape

    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None,
                    help="default: cuda where torch sees a device, else cpu")
    ap.add_argument("--steps", type=int, default=None,
                    help="timed steps, at least 1 (cuda 20, cpu 50)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first, at least 1")
    ap.add_argument("--skip-hf", action="store_true", help="archfit's rows only")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    a = ap.parse_args()
    check_args(ap, a)  # before anything trains: a bad argument costs no run
    import torch

    a.device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dev = a.device
    steps = a.steps if a.steps is not None else (20 if dev == "cuda" else 50)
    name = torch.cuda.get_device_name() if dev == "cuda" else "cpu"
    peak = matmul_peak(dev)
    print(f"{name}, torch {torch.__version__}; {'bf16' if dev == 'cuda' else 'fp32'} matmul "
          f"peak {peak / 1e12:.1f} TFLOP/s (measured); {a.warmup} untimed + {steps} timed steps",
          flush=True)
    print(f"{'shape':<20}{'model':<11}{'mode':<9}{'tokens/s':>11}{'MFU':>6}{'mem GiB':>9}"
          f"{'compile s':>10}{'plan tok/s':>11}{'plan GiB':>9}", flush=True)
    rows = []
    from archfit.train.model import GPT

    for label, fields, batch in shapes(dev):
        s = Shape(**fields)
        per_token = s.flops_per_token("matmul_train")
        makers = [("archfit", lambda s=s: GPT(s))]
        if not a.skip_hf and not label.startswith("dense twin"):
            makers.append(("hf", lambda s=s: hf_model(s)))
        for impl, make in makers:
            for compile_ in (False, True):
                torch.manual_seed(0)
                model = make().to(dev)
                how = implementation(model, impl)
                if not compile_:
                    print(textwrap.fill(f"  ({how})", 100, subsequent_indent="   "), flush=True)
                try:
                    out = timed_loop(model, impl == "archfit", s, batch, steps, a.warmup, dev,
                                     compile_)
                except Exception as e:  # a failure is a finding: its row says so
                    out = {"error": f"{type(e).__name__}: {e}"[:200]}
                del model
                gc.collect()
                torch._dynamo.reset()
                if dev == "cuda":
                    torch.cuda.empty_cache()
                row = {"shape": label, "model": impl, "implementation": how,
                       "compiled": compile_, "batch": batch,
                       "fields": fields, "matmul_flops_per_token": per_token,
                       "mfu": out["tokens_per_s"] * per_token / peak if "tokens_per_s" in out
                       else None, **out, "plan": planner(s, batch, dev, compile_)}
                rows.append(row)
                _print_row(row)
    tr = train_pairs(shapes(dev)[0], steps, a.warmup, dev, 1 if dev == "cuda" else 3)
    _print_ratios(rows)
    if a.out:
        from archfit.io import atomic_write

        atomic_write(a.out, json.dumps({"format": "archfit-gpu-measured", "device": name,
                                  "date": datetime.date.today().isoformat(),
                                  "torch": torch.__version__, "matmul_peak": peak,
                                  "rows": rows, "train": tr}, indent=1))
        print(f"wrote {a.out}")


def _print_row(r: dict) -> None:
    if "error" in r:
        print(f"{r['shape']:<20}{r['model']:<11}{'compiled' if r['compiled'] else 'eager':<9}"
              f"  {r['error']}", flush=True)
        return
    p = r["plan"]
    mem = f"{r['peak_memory_gib']:.1f}" if r["peak_memory_gib"] else "-"
    comp = f"{r['compile_s']:.1f}" if r["compile_s"] is not None else "-"
    ptok = f"{p['tokens_per_s']:,.0f}" if p["tokens_per_s"] else "-"
    pmem = f"{p['memory_gib']:.1f}" if p["memory_gib"] else "-"
    print(f"{r['shape']:<20}{r['model']:<11}{'compiled' if r['compiled'] else 'eager':<9}"
          f"{r['tokens_per_s']:>11,.0f}{r['mfu']:>6.0%}{mem:>9}{comp:>10}{ptok:>11}{pmem:>9}",
          flush=True)


def _print_ratios(rows: list[dict]) -> None:
    def get(shape: str, model: str, compiled: bool) -> dict | None:
        return next((r for r in rows if r["shape"] == shape and r["model"] == model
                     and r["compiled"] == compiled and "tokens_per_s" in r), None)

    print("\narchfit / HF (tokens/s), and the planner's tokens/s and memory over the measured:")
    for shape in dict.fromkeys(r["shape"] for r in rows):
        for compiled in (False, True):
            a, h = get(shape, "archfit", compiled), get(shape, "hf", compiled)
            if a is None:
                continue
            vs = f"{a['tokens_per_s'] / h['tokens_per_s']:.2f}x HF" if h else "no HF row"
            p = a["plan"]
            plan = (f"; planner {p['tokens_per_s'] / a['tokens_per_s']:.2f}x tokens/s, "
                    f"{p['memory_gib'] / a['peak_memory_gib']:.2f}x memory"
                    if p["tokens_per_s"] and a["peak_memory_gib"] else "")
            print(f"  {shape:<20}{'compiled' if compiled else 'eager':<9}{vs}{plan}")
    moe = [r for r in rows if r["shape"].startswith("moe") and r["model"] == "archfit"
           and r["compiled"] and r.get("mfu")]
    twin = [r for r in rows if r["shape"].startswith("dense twin") and r["compiled"]
            and r.get("mfu")]
    if moe and twin:
        print(f"  the mixture's MFU over its dense twin's (compiled): "
              f"{moe[0]['mfu'] / twin[0]['mfu']:.2f} (target >= 0.60)")


if __name__ == "__main__":
    sys.exit(main())
