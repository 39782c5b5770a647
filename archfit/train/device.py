"""Where a run trains and what fits there: the device, the CUDA peak FLOP/s for MFU, the
micro-batch and the up-front memory check (archfit.train.memory's estimate), autocast, and the
wrapper (DDP or FSDP2) a multi-process run steps through."""

from __future__ import annotations

from typing import Any

from archfit.train.launch import ProcessGroup
from archfit.errors import ArchfitError
from archfit.shapes import Shape
from archfit.train.config import TrainConfig


def peak_flops(device_name: str) -> float | None:
    """bf16 dense peak FLOP/s of a CUDA device (archfit.train.accelerators' table); None when unknown (the
    run's MFU is then null)."""
    from archfit.train.accelerators import DEVICES, device_key

    key = device_key(device_name)
    return DEVICES[key].peak_flops if key else None


def resolve_device(cfg: TrainConfig) -> str:
    import torch

    if cfg.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ArchfitError(f"--device {cfg.device}: this machine has no CUDA device "
                           "(torch.cuda.is_available() is False); use --device cpu or auto")
    if cfg.device.startswith("mps") and not torch.backends.mps.is_available():
        raise ArchfitError(f"--device {cfg.device}: MPS is not available here; use cpu or auto")
    try:
        torch.device(cfg.device)
    except RuntimeError:
        raise ArchfitError(f"--device {cfg.device!r}: not a torch device; use auto, cpu, cuda "
                           "or cuda:N") from None
    return cfg.device


def auto_micro_batch(cfg: TrainConfig, shape: Shape, world: int, device_bytes: int
                     ) -> TrainConfig:
    """The config with the largest micro-batch whose estimated peak (archfit.train.memory) fits the
    device's memory; unchanged when the whole share fits, or when nothing does (the run then
    tries its whole share, and the device says whether it fits)."""
    from dataclasses import replace

    from archfit.train.configure import micro_batch_for

    try:
        m, _, _ = micro_batch_for(cfg, world, device_bytes, shape=shape)
    except ArchfitError:
        return cfg
    return cfg if m == cfg.batch_size // world else replace(cfg, micro_batch=m)


def check_memory(cfg: TrainConfig, shape: Shape, device: str, world: int = 1) -> None:
    """Refuse, before anything is allocated, a run whose estimated peak (archfit.train.memory) does
    not fit this machine: on CUDA the device's memory at a micro-batch of one sequence (the run
    picks the largest that fits), elsewhere the memory the host has available at the run's
    micro-batch. Skip it with ``train(..., memory_check=False)`` (``--no-memory-check``)."""
    import archfit.train.memory as memory

    share = max(1, cfg.batch_size // world)
    bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and device.startswith("cuda"))
    kw = dict(precision="bf16" if bf16 else "fp32", optimizer=cfg.optimizer,
              parallel=cfg.parallel, world=world)
    if device.startswith("cuda"):
        import torch

        have = torch.cuda.get_device_properties(device).total_memory
        micro, where = cfg.micro_batch or 1, f"{torch.cuda.get_device_name(device)}'s memory"
        need = memory.estimate(shape, micro, overhead_gib=1.0, **kw).total  # type: ignore[arg-type]
    else:
        room = memory.host_memory_bytes()
        if room is None:
            return
        # every local process of a multi-process run takes its own share of the host
        have, micro, where = room // max(1, world), min(cfg.micro_batch or share, share), \
            "the memory this machine has available" + (f" per process ({world})" if world > 1
                                                       else "")
        need = memory.estimate(shape, micro, **kw).total  # type: ignore[arg-type]
    if need > have:
        gib = memory.GIB
        raise ArchfitError(
            f"{shape.n_layer}x{shape.d_model} at ctx {shape.n_ctx:,} with {micro} sequence(s) "
            f"per pass needs about {need / gib:.1f} GiB (archfit.train.memory's estimate), more than "
            f"{where} ({have / gib:.1f} GiB); shorten --ctx, or lower --batch-size (raise "
            "--grad-accum to keep the tokens per step), or --no-memory-check to try anyway")


def wrap(model: Any, cfg: TrainConfig, d: ProcessGroup, device: str) -> Any:
    """The model the steps run: itself, DDP, or FSDP2 (``fully_shard`` on each block and the
    root) when several processes train it."""
    if d.world == 1:
        return model
    if cfg.parallel == "fsdp":
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            raise ArchfitError("parallel fsdp needs torch >= 2.6 (torch.distributed.fsdp."
                               "fully_shard); use parallel ddp") from None
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[d.local_rank] if device.startswith(
        "cuda") else None)


def autocast(cfg: TrainConfig, device: str) -> Any:
    """bf16 autocast on CUDA (``auto``) or wherever asked (``bf16``, CPU included: the same
    code path a GPU run takes); fp32 otherwise."""
    import torch

    kind = device.split(":")[0]
    bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and kind == "cuda")
    return torch.autocast(kind if kind in ("cuda", "cpu") else "cpu", dtype=torch.bfloat16,
                          enabled=bf16)
