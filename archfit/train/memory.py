"""Peak training memory of a run, the micro-batch that fits a budget, and what a sweep costs on
a named accelerator. Plain arithmetic on the shape (no torch).

The estimate follows what :mod:`archfit.train.model` and :mod:`archfit.train` keep alive, per process:

``weights``
    fp32 master parameters (4 bytes each); under bf16 autocast also the bf16 copies autocast
    caches for the step (2 bytes each, for matrices).
``grads``
    fp32 gradients (4 bytes each); DDP adds its gradient buckets (another 4).
``optimizer``
    AdamW: two fp32 moments (4 bytes each), updated in place by the fused kernel archfit's
    trainer steps with on CPU and CUDA; Muon keeps one for the hidden matrices, plus one fp32
    temporary of the parameters for its update.
``activations``
    Per layer and token, what the backward pass needs: the residual stream at each norm's input
    (fp32), the norms' outputs, q/k/v (and their rotated copies with RoPE), the attention
    output and its re-layout for the projection, the MLP's up projection and activation
    (SwiGLU: both halves, the SiLU and the product), in the compute dtype (4 bytes fp32,
    2 bf16), and the contiguous q/k/v the attention kernel keeps. Attention is flash-style: no
    n_ctx² scores, only a log-sum-exp per head and token. During the backward pass one
    layer's gradient temporaries are alive too. With activation checkpointing, a layer keeps
    only its input, and one layer's full activations are alive during its recomputation.
``head``
    The output layer and its loss, as the trainer computes them: on a CPU in fp32 (``fused``),
    fused with the loss: its gradient buffers (fp32 weight-sized, and the final hidden states'
    gradient) and one chunk of logits (the softmax is taken in place). On a GPU in bf16
    (``logits``): the logits in the compute dtype, their fp32 copy the cross-entropy keeps,
    and that copy's gradient during the backward pass (what eager mode holds), and the final
    hidden states' gradient; a compiled step (``compiled``) fuses the fp32 copy away and keeps
    the bf16 logits and their gradient.

Measured on a GPU, a step holds less than every activation counted here at its peak (the
allocator frees some as the backward pass starts; a compiled step recomputes cheap elementwise
ones): ``activation_share``, measured per device and mode by ``benchmarks/bench_gpu.py``
(:func:`archfit.train.perf.calibration`), scales the count; 1 counts them all.

FSDP shards weights, grads and optimizer state over the processes and gathers one layer's
weights at a time. Not counted: the framework's fixed overhead (CUDA context, kernels), given
as ``overhead_gib`` (default 1.0 on GPUs), and allocator fragmentation, for which the micro-batch
choice keeps ``headroom`` (10%) free.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from archfit.errors import ArchfitError
from archfit.train.accelerators import device
from archfit.shapes import Layer, Shape, loss_chunk

GIB = 1 << 30
OVERHEAD_GIB = 1.0  # a GPU process's fixed memory (CUDA context, kernels) outside the estimate

# the share of peak FLOP/s a well-tuned GPU run reaches, for time estimates without a
# measurement (40%: the bench_train.py target at 124M on an H100; big runs report 35-55%)
DEFAULT_MFU = 0.4


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes of one process of a training run, by part."""

    weights: int
    grads: int
    optimizer: int
    activations: int
    head: int
    overhead: int
    micro_batch: int

    @property
    def total(self) -> int:
        return (self.weights + self.grads + self.optimizer + self.activations + self.head
                + self.overhead)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total}


def per_layer_token_bytes(s: Shape, act: int, lay: Layer | None = None) -> int:
    """Bytes one token keeps alive in one layer (``lay``, default a uniform block) for the
    backward pass (see the module doc); a block without attention or an MLP keeps none of its."""
    lay = lay or s.layer(0)
    hd, f = s.head_dim, s.d_ff
    d, q, kv = s.d_model, lay.heads * hd, lay.kv_heads * hd
    assert f is not None
    resid = norms = attn = mlp = 0
    if lay.attn and s.mla:  # latent attention: per-head q, k (nope + rope) and v, and latents
        resid += 4 * d
        norms += act * d
        qk, v = lay.heads * (s.head_dim + s.qk_rope_head_dim), lay.heads * s.value_head_dim
        attn = act * (s.q_lora_rank + s.kv_lora_rank + s.qk_rope_head_dim)  # the latents
        attn += 2 * act * (2 * qk + v)  # q, k, v, and the contiguous copies the kernel keeps
        attn += 2 * act * v + 4 * lay.heads  # attention output, its re-layout; log-sum-exp
    elif lay.attn:
        resid += 4 * d  # the residual stream at the norm's input, fp32
        norms += act * d  # the norm's output (the projections' input)
        attn = act * (q + 2 * kv)  # q, k, v
        if s.position == "rope":
            attn += act * (q + kv)  # rotated q and k
        if s.qk_norm:
            attn += act * (q + kv)
        attn += act * (q + 2 * kv)  # the contiguous q/k/v the attention kernel keeps
        attn += 2 * act * q + 4 * lay.heads  # attention output, its re-layout; log-sum-exp
    if lay.mlp:
        resid += 4 * d
        norms += act * d
        paths = 1
        if lay.sparse:  # a mixture of experts: top_k routed and the shared experts' MLPs, the
            # gathered inputs and weighted outputs of the routed ones, fp32 router logits/probs
            f, paths = s.d_expert or f, s.top_k + s.n_shared_experts
            mlp = 2 * act * d * s.top_k + 8 * s.n_experts
        mlp += paths * (act * (2 * f + 2 * f) if s.mlp == "swiglu" else act * 2 * f)
    return resid + norms + attn + mlp


def activation_token_bytes(s: Shape, act: int) -> int:
    """:func:`per_layer_token_bytes` summed over the shape's layers."""
    if s.uniform:
        return s.n_layer * per_layer_token_bytes(s, act)
    return sum(per_layer_token_bytes(s, act, lay) for lay in s.layers())


def estimate(shape: Shape, micro_batch: int, *, precision: str = "fp32",
             optimizer: str = "adamw", activation_checkpointing: bool = False,
             parallel: str = "ddp", world: int = 1, overhead_gib: float = 0.0,
             loss: str | None = None, compiled: bool = False,
             activation_share: float = 1.0) -> MemoryEstimate:
    """Peak memory of one process training ``shape`` on ``micro_batch`` sequences of
    ``shape.n_ctx`` tokens (``precision`` fp32 or bf16: the compute dtype of activations;
    ``loss`` fused or logits, the output layer's way, by default fused in fp32 as a CPU
    trains and logits in bf16 as a GPU does). ``compiled``: a ``torch.compile`` step, whose
    cross-entropy keeps the bf16 logits and their gradient only (the fp32 copy fused away).
    ``activation_share``: the share of the counted activations the step holds at its peak, as
    measured on a device (:func:`archfit.train.perf.calibration`; 1 counts every one)."""
    if micro_batch < 1:
        raise ArchfitError(f"micro_batch must be at least 1, got {micro_batch}")
    if precision not in ("fp32", "bf16"):
        raise ArchfitError(f"precision must be fp32 or bf16 for an estimate, got {precision!r}")
    s, P = shape, shape.params_total
    act = 4 if precision == "fp32" else 2
    tokens = micro_batch * s.n_ctx
    matrices = P - s.breakdown()["norms"]
    shard = world if (parallel == "fsdp" and world > 1) else 1
    layer_params = max(sum(s.layer_breakdown(lay.index).values())  # the largest block, gathered
                       for lay, _ in s.layer_counts())
    # fp32 master weights, plus the bf16 copies autocast makes of the matrices (not the norms)
    weights = 4 * P // shard + (2 * matrices // shard if act == 2 else 0)
    if shard > 1:
        weights += (4 + (2 if act == 2 else 0)) * layer_params  # one gathered layer
    # fp32 gradients; DDP keeps a second full copy in its all-reduce buckets
    grads = 4 * P // shard + (4 * P if parallel == "ddp" and world > 1 else 0)
    states = 8 if optimizer == "adamw" else 4  # Adam's m and v in fp32; Muon's momentum only
    # the fused AdamW step archfit trains with (CPU and CUDA) updates in place; Muon's update
    # is one fp32 temporary of the parameters
    opt = states * P // shard + (0 if optimizer == "adamw" else 4 * P // shard)
    if activation_checkpointing:
        per_layer = max(per_layer_token_bytes(s, act, lay) for lay in s.layers()) * tokens
        # checkpointing keeps each block's fp32 input, and recomputes one block at a time
        acts = s.n_layer * 4 * s.d_model * tokens + per_layer
    else:
        acts = activation_token_bytes(s, act) * tokens
    acts += 2 * 4 * s.d_model * tokens  # final norm: input and output
    up = int(s.d_ff or 0) * (2 if s.mlp == "swiglu" else 1)  # d_ff is set once a Shape is built
    acts += 4 * (2 * up + 2 * s.d_model) * tokens  # one layer's backward temporaries
    acts = int(acts * activation_share)
    if (loss or ("fused" if act == 4 else "logits")) == "fused":
        # the fused output layer and loss: its fp32 weight gradient, the final hidden states,
        # and one chunk of fp32 logits (archfit.train.model never holds all the logits)
        chunk = loss_chunk(s.vocab_size)
        head = (4 * s.vocab_size * s.d_model + act * s.d_model * tokens
                + 4 * min(chunk, tokens) * s.vocab_size)
    elif compiled:  # the logits and their gradient; the final hidden states' gradient
        head = (act + act) * s.vocab_size * tokens + act * s.d_model * tokens
    else:  # the logits, their fp32 copy and its gradient; the final hidden states' gradient
        head = (act + 4 + 4) * s.vocab_size * tokens + act * s.d_model * tokens
    return MemoryEstimate(weights=int(weights), grads=int(grads), optimizer=int(opt),
                          activations=int(acts), head=int(head),
                          overhead=int(overhead_gib * GIB), micro_batch=micro_batch)


# the share of a device's memory a micro-batch's estimate leaves free
HEADROOM = 0.1


def choose_micro_batch(shape: Shape, per_process_batch: int, budget_bytes: float, *,
                       headroom: float = HEADROOM, **kw: Any) -> tuple[int, int, MemoryEstimate]:
    """The largest micro-batch dividing ``per_process_batch`` whose estimate fits
    ``budget_bytes`` less ``headroom``; returns (micro_batch, grad_accum, estimate). Raises
    :class:`ArchfitError` when not even one sequence fits."""
    limit = budget_bytes * (1 - headroom)
    for m in sorted((m for m in range(1, per_process_batch + 1) if per_process_batch % m == 0),
                    reverse=True):
        e = estimate(shape, m, **kw)
        if e.total <= limit:
            return m, per_process_batch // m, e
    e = estimate(shape, 1, **kw)
    raise ArchfitError(f"{shape.n_layer}x{shape.d_model}: one sequence needs "
                       f"{e.total / GIB:.1f} GiB, more than the {budget_bytes / GIB:.0f} GiB "
                       "budget less headroom; use activation checkpointing, FSDP or more GPUs")


def accelerator(name: str) -> tuple[float, float]:
    """(memory GiB, peak bf16 FLOP/s) of a named accelerator (archfit.train.accelerators)."""
    d = device(name)
    return d.memory_gib, d.peak_flops


def gpu_hours(flops: float, peak_flops: float, mfu: float = DEFAULT_MFU) -> float:
    """GPU-hours to do ``flops`` at ``mfu`` of ``peak_flops``."""
    if not 0 < mfu <= 1:
        raise ArchfitError(f"MFU must be in (0, 1], got {mfu}")
    return flops / (peak_flops * mfu) / 3600.0


def parse_memory(text: str) -> float:
    """``80GiB``, ``80GB`` (taken as GiB, as GPUs are sold), ``81920MiB`` or a number of GiB ->
    bytes."""
    t = str(text).strip().lower().replace(" ", "")
    for suffix, mult in (("gib", GIB), ("gb", GIB), ("mib", 1 << 20), ("mb", 1 << 20),
                         ("tib", 1 << 40), ("g", GIB)):
        if t.endswith(suffix):
            t, m = t[: -len(suffix)], mult
            break
    else:
        m = GIB
    try:
        v = float(t)
    except ValueError:
        raise ArchfitError(f"--gpu-memory {text!r}: give a size such as 80GiB") from None
    if not (v > 0 and math.isfinite(v)):
        raise ArchfitError(f"--gpu-memory {text!r}: must be positive")
    return v * m


def host_memory_bytes() -> int | None:
    """Memory this process can still take on this machine: ``MemAvailable`` from
    /proc/meminfo, capped by a cgroup v2 limit (``memory.max`` less ``memory.current``) when a
    container sets one; None where neither can be read."""
    avail: int | None = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        avail = None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            room = int(limit) - used
            avail = room if avail is None else min(avail, room)
    except (OSError, ValueError):
        pass
    return avail
