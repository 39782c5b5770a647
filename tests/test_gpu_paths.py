"""The code paths a GPU run takes, exercised on this CPU so a broken one fails CI rather than a
user's first GPU hour: bf16 autocast, torch.compile (inductor), the fused loss under both, and
the memory estimate against what training really holds."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from archfit.train import memory
from archfit.train.model import GPT
from archfit.shapes import Shape
from archfit.train import Budget, TrainConfig, peak_flops, train
from archfit.train.device import autocast

TINY = Shape(n_layer=2, d_model=64, n_head=2, vocab_size=256, n_ctx=64)


def _run(**kw):
    return train(TrainConfig(shape=TINY, budget=Budget(steps=6), batch_size=4, eval_every=6,
                             eval_windows=4, **kw))


def test_bf16_autocast_runs_on_cpu_in_bf16():
    cfg = TrainConfig(shape=TINY, budget=Budget(steps=1), precision="bf16")
    m = GPT(TINY)
    seen = []
    m.blocks[0].mlp.up.register_forward_hook(lambda mod, i, o: seen.append(o.dtype))
    x = torch.randint(0, 256, (2, 64))
    with autocast(cfg, "cpu"):
        _, loss = m(x, x)
    loss.backward()
    assert seen == [torch.bfloat16] and loss.dtype == torch.float32
    assert m.tok_emb.weight.grad.dtype == torch.float32  # fp32 master weights and grads
    with autocast(TrainConfig(shape=TINY, budget=Budget(steps=1)), "cpu"):
        seen.clear()
        m(x, x)
    assert seen == [torch.float32]  # auto on CPU: fp32
    fp32, bf16 = _run(), _run(precision="bf16")
    assert bf16.status == "ok" and bf16.final_val_loss is not None
    assert abs(bf16.final_val_loss - fp32.final_val_loss) < 0.05
    assert bf16.mfu is None and peak_flops("NVIDIA H100 80GB HBM3") == 989e12


@pytest.mark.slow
def test_torch_compile_on_cpu_matches_eager():
    eager, compiled = _run(), _run(compile=True)
    assert compiled.status == "ok", compiled.error
    assert abs(compiled.final_train_loss - eager.final_train_loss) < 1e-3
    assert compiled.mfu is None  # CPU: no peak to divide by


def test_bf16_checkpoint_resume_keeps_fp32_state(tmp_path):
    r1 = train(TrainConfig(shape=TINY, budget=Budget(steps=4), batch_size=4, eval_every=4,
                           eval_windows=4, precision="bf16", checkpoint_every=2),
               run_dir=str(tmp_path))
    ck = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert all(v.dtype == torch.float32 for v in ck["model"].values() if v.is_floating_point())
    assert r1.status == "ok"


SCRIPT = r"""
import json, sys, torch
from archfit.shapes import Shape
from archfit.train import Budget, TrainConfig, train
def mem(key):  # VmHWM: this process's peak since exec (ru_maxrss would keep the fork's)
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
L, d, mlp, B = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
torch.set_num_threads(2)
s = Shape(n_layer=L, d_model=d, n_head=max(1, d // 64), vocab_size=256, n_ctx=256, mlp=mlp,
          position="rope" if mlp == "swiglu" else "learned")
x = torch.randn(64, 64, requires_grad=True); (x @ x).sum().backward()  # load the kernels
base = mem("VmRSS")
train(TrainConfig(shape=s, budget=Budget(steps=2), batch_size=B, eval_every=1000,
                  eval_windows=2, eval_batch=1))
print(json.dumps({"peak": mem("VmHWM") - base}))
"""

# shallow-wide to deep-narrow, about 13M parameters each; SwiGLU + RoPE too
SHAPES = [(2, 768, "gelu", 8), (4, 512, "gelu", 8), (16, 256, "gelu", 8), (32, 192, "gelu", 8),
          (6, 384, "swiglu", 8)]


@pytest.mark.slow
def test_memory_estimate_within_25_percent_of_measured_peak():
    """Peak RSS growth (VmHWM) of a fresh process over two training steps (fp32, AdamW) against
    :func:`archfit.train.memory.estimate`."""
    rows = []
    for L, d, mlp, B in SHAPES:
        out = subprocess.run([sys.executable, "-c", SCRIPT, str(L), str(d), mlp, str(B)],
                             capture_output=True, text=True, timeout=300, check=True).stdout
        measured = json.loads(out.strip().splitlines()[-1])["peak"]
        s = Shape(n_layer=L, d_model=d, n_head=max(1, d // 64), vocab_size=256, n_ctx=256,
                  mlp=mlp, position="rope" if mlp == "swiglu" else "learned")
        est = memory.estimate(s, B).total
        rows.append((f"{L}x{d} {mlp}", measured / 2**20, est / 2**20, est / measured))
    print("\nshape            measured MiB  estimated MiB  ratio")
    for name, m, e, r in rows:
        print(f"{name:<16}{m:>12.0f}{e:>15.0f}{r:>7.2f}")
    assert len(rows) >= 5
    for name, _, _, r in rows:
        assert 0.75 <= r <= 1.25, (name, r)


def test_micro_batch_choice_keeps_the_global_batch():
    s = Shape(n_layer=24, d_model=2048, n_head=16, vocab_size=50257, n_ctx=2048)
    m, accum, e = memory.choose_micro_batch(s, 64, 80 * memory.GIB, precision="bf16")
    assert m * accum == 64 and e.total <= 0.9 * 80 * memory.GIB
    bigger = memory.estimate(s, m * 2, precision="bf16")
    assert m == 64 or bigger.total > 0.9 * 80 * memory.GIB  # the largest that fits
    ck, _, _ = memory.choose_micro_batch(s, 64, 80 * memory.GIB, precision="bf16",
                                         activation_checkpointing=True)
    assert ck >= m
    f = memory.estimate(s, 1, precision="bf16", parallel="fsdp", world=8)
    d = memory.estimate(s, 1, precision="bf16", parallel="ddp", world=8)
    assert f.weights + f.grads + f.optimizer < (d.weights + d.grads + d.optimizer) / 4
    with pytest.raises(Exception, match="one sequence needs"):
        memory.choose_micro_batch(s, 8, 2 * memory.GIB, precision="bf16")


def test_micro_batches_give_the_same_step():
    """A batch split into micro-batches (what fits in memory) trains the same model."""
    whole, split = _run(), _run(micro_batch=1)
    assert abs(whole.final_train_loss - split.final_train_loss) < 1e-5
    assert whole.config.get("micro_batch") is None and split.config["micro_batch"] == 1


def test_sweep_plan_on_h100_prints_memory_micro_batch_and_gpu_hours(cli, repo):
    spec = str(repo / "sweeps" / "levine-small.toml")
    r = cli("sweep", "plan", spec, "--gpu", "h100", "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.output[r.output.index("{"):])
    assert p["gpu"] == "h100" and p["gpu_memory_gib"] == 80 and p["fits"]
    for row in p["rows"]:
        assert row["micro_batch"] * row["grad_accum"] * row["gpus"] == row["global_batch"]
        assert 1 < row["memory_gib"] < 80 * 0.9
        assert row["gpu_hours"] == pytest.approx(row["flops"] / (989e12 * 0.4) / 3600)
    assert p["total_gpu_hours"] == pytest.approx(sum(r["gpu_hours"] for r in p["rows"]))
    text = cli("sweep", "plan", spec, "--gpu", "h100").output
    assert "GiB/GPU" in text and "micro-batch" in text and "GPU-hours on h100" in text
    small = cli("sweep", "plan", spec, "--gpu-memory", "4GiB", "--json")
    q = json.loads(small.output[small.output.index("{"):])
    assert any(not r["fits"] or r["micro_batch"] < 32 for r in q["rows"])
    bad = cli("sweep", "plan", spec, "--gpu", "tpu9")
    assert bad.exit_code == 2 and "unknown accelerator" in bad.output


def test_run_ids_do_not_depend_on_the_micro_batch(repo, tmp_path):
    from archfit.sweep import load_spec

    spec = repo / "sweeps" / "smoke.toml"
    plain = load_spec(str(spec))
    gpu = tmp_path / "gpu.toml"
    gpu.write_text(spec.read_text().replace("[executor]\n", '[executor]\ngpu_memory_gb = 4\n'))
    planned = load_spec(str(gpu))
    assert [r.run_id for r in plain.runs] == [r.run_id for r in planned.runs]
    assert all(r.config.get("micro_batch") for r in planned.runs)


def test_memory_model_uses_the_models_loss_chunk():
    import archfit.train.model as model_mod

    from archfit import shapes

    assert memory.loss_chunk is model_mod.loss_chunk is shapes.loss_chunk
    assert shapes.loss_chunk(50257) == 640 and shapes.loss_chunk(128256) == 256


def test_on_a_gpu_the_micro_batch_comes_from_the_device_memory():
    """The choice the trainer makes from torch.cuda's total memory (no GPU here: the device's
    size is given as a number, as torch would report it)."""
    from archfit.train import auto_micro_batch

    s = Shape(n_layer=24, d_model=2048, n_head=16, vocab_size=50257, n_ctx=2048)
    cfg = TrainConfig(shape=s, budget=Budget(steps=1), batch_size=64)
    small = auto_micro_batch(cfg, s, 1, 40 * memory.GIB)
    assert small.micro_batch and 64 % small.micro_batch == 0 and small.micro_batch < 64
    assert memory.estimate(s, small.micro_batch, precision="bf16",
                           overhead_gib=1.0).total <= 0.9 * 40 * memory.GIB
    assert auto_micro_batch(cfg, s, 1, 10_000 * memory.GIB).micro_batch is None


LLAMA_BLOCK = dict(mlp="swiglu", position="rope", norm="rmsnorm", bias=False,
                   tied_embeddings=False, vocab_size=512, n_ctx=64)


@pytest.mark.parametrize("shape", [
    Shape(n_layer=2, d_model=64, n_head=4, d_ff=176, **LLAMA_BLOCK),
    Shape(n_layer=2, d_model=64, n_head=4, n_kv_head=2, d_ff=128, n_experts=4, top_k=2,
          **LLAMA_BLOCK)], ids=["dense", "moe"])
@pytest.mark.parametrize("precision", ["fp32", pytest.param("bf16", marks=pytest.mark.slow)])
def test_a_compiled_training_step_is_one_graph(shape, precision):
    """torch's graph-break counter stays at 0 over two compiled training steps (forward and
    backward, traced through AOTAutograd) of the dense model and of the mixture of experts:
    no host sync and no break, which on a GPU cost a sync each."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = GPT(shape)
    step = torch.compile(model, backend="aot_eager")
    x = torch.randint(0, 512, (2, 64))
    cfg = TrainConfig(shape=shape, budget=Budget(steps=1), precision=precision)
    for _ in range(2):
        with autocast(cfg, "cpu"):
            _, loss = step(x, x)
        loss.backward()
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert torch.isfinite(loss) and model.blocks[0].mlp is not None
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


# ------------------------------------------------------------------ the expert groups' padding
def test_padded_expert_groups_give_the_loops_rows_back():
    """Each expert's rows padded to a multiple of 8 (torch's grouped GEMM's alignment), the
    padded groups multiplied, and the rows read back from their padded places: the same rows
    as the unpadded product, for groups of 0, 1, 7 and 13 rows (checked here through the loop,
    which needs no padding; on CUDA the grouped GEMM takes the padded groups)."""
    from archfit.train.experts import expert_mm, padded_rows

    torch.manual_seed(0)
    sizes = [0, 1, 7, 13]
    rows = torch.repeat_interleave(torch.arange(4), torch.tensor(sizes))
    offs = torch.tensor(sizes).cumsum(0).to(torch.int32)
    a, w = torch.randn(sum(sizes), 16), torch.randn(4, 16, 8)
    pos, ends, bound = padded_rows(offs, rows)
    assert ends.tolist() == [0, 8, 16, 32] and bound == 21 + 4 * 7 >= int(ends[-1])
    padded = a.new_zeros(bound, 16).index_copy(0, pos, a)
    got = expert_mm(padded, w, ends).index_select(0, pos)
    torch.testing.assert_close(got, expert_mm(a, w, offs))
    want = torch.cat([a[rows == e] @ w[e] for e in range(4)])  # each group by itself
    torch.testing.assert_close(got, want)


# ------------------------------------------------------------------ only where CUDA is
CUDA = pytest.mark.skipif(not torch.cuda.is_available(),
                          reason="needs a CUDA device: torch's grouped GEMM and a compiled bf16 "
                                 "step run only there (run on a lent GPU: docs/benchmarks/gpu.md)")


@CUDA
@pytest.mark.parametrize("sizes", [[0, 1, 7, 13], [13, 0, 0, 7], [1, 1, 1, 1]])
def test_the_grouped_gemm_equals_the_loop_on_cuda(sizes):
    """torch's grouped GEMM over padded groups (archfit.train.experts.grouped_mm) against the
    loop of one product per expert, in bf16 on the GPU, forward and both gradients."""
    import torch.nn.functional as F

    from archfit.train.experts import expert_mm, grouped_mm

    if not hasattr(F, "grouped_mm"):
        pytest.skip(f"torch {torch.__version__} has no torch.nn.functional.grouped_mm")
    torch.manual_seed(0)
    rows = torch.repeat_interleave(torch.arange(4), torch.tensor(sizes)).cuda()
    offs = torch.tensor(sizes).cumsum(0).to(torch.int32).cuda()
    a = torch.randn(sum(sizes), 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(4, 64, 32, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    got = grouped_mm(a, w, offs, rows)
    ga, gw = torch.autograd.grad(got.float().square().sum(), (a, w))
    want = expert_mm(a, w, offs)
    wa, ww = torch.autograd.grad(want.float().square().sum(), (a, w))
    for x, y in ((got, want), (ga, wa), (gw, ww)):
        torch.testing.assert_close(x.float(), y.float(), rtol=2e-2, atol=2e-2)


@CUDA
@pytest.mark.parametrize("shape", [
    Shape(n_layer=2, d_model=128, n_head=4, d_ff=352, **LLAMA_BLOCK),
    Shape(n_layer=2, d_model=128, n_head=4, n_kv_head=2, d_ff=256, n_experts=8, top_k=2,
          **LLAMA_BLOCK)], ids=["dense", "moe"])
def test_a_compiled_bf16_step_on_cuda_is_one_graph(shape):
    """Two compiled (inductor) bf16 training steps on the GPU, with the fused AdamW step and
    the selection-bias hook: no graph break, finite loss, every parameter with a gradient."""
    from torch._dynamo.utils import counters

    from archfit.train.optim import make_optimizers

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    model = GPT(shape, moe_balance="bias" if shape.moe else "aux-loss").cuda()
    step = torch.compile(model)
    opt = make_optimizers(model, TrainConfig(shape=shape), "cuda")[0]
    x = torch.randint(0, 512, (4, 64), device="cuda")
    for _ in range(2):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            _, loss = step(x, x)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
    assert torch.isfinite(loss)
