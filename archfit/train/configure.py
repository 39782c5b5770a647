"""The run configurator: the one place that decides, per run and device, what a size needs.
Its micro-batch rule serves the sweep's plan, the spec's GPU assignment and the trainer alike.
Plain arithmetic (archfit.train.memory), importable without torch or numpy."""

from __future__ import annotations

from archfit.train.memory import OVERHEAD_GIB, MemoryEstimate, choose_micro_batch
from archfit.shapes import Shape
from archfit.train.config import TrainConfig


def overhead_gib(gpu: str | None) -> float:
    """A process's fixed memory beyond the estimate on accelerator ``gpu``: measured by
    benchmarks/bench_gpu.py where it ran there (archfit.train.perf), else
    :data:`OVERHEAD_GIB` (assumed)."""
    from archfit.train.perf import calibration

    cal = calibration(gpu.lower()) if gpu else None
    return cal.overhead_gib if cal else OVERHEAD_GIB


def micro_batch_for(cfg: TrainConfig, world: int, device_bytes: float, *,
                    shape: Shape | None = None, precision: str | None = None,
                    activation_checkpointing: bool = False, overhead: float = OVERHEAD_GIB
                    ) -> tuple[int, int, MemoryEstimate]:
    """The largest micro-batch (sequences per forward pass and process) of ``cfg``'s share of a
    batch whose estimated peak fits ``device_bytes`` with 10% headroom; returns (micro-batch,
    the accumulation that keeps the batch, the estimate). ``precision`` defaults to the one
    the run trains in on a GPU (bf16 unless the config says fp32); ``overhead``: the process's
    fixed GiB beyond the estimate (:func:`overhead_gib`). Raises
    :class:`~archfit.errors.ArchfitError` when not one sequence fits."""
    prec = precision or ("fp32" if cfg.precision == "fp32" else "bf16")
    return choose_micro_batch(shape or cfg.shape, cfg.batch_size // world, device_bytes,
                              precision=prec, optimizer=cfg.optimizer,
                              activation_checkpointing=activation_checkpointing,
                              parallel=cfg.parallel, world=world, overhead_gib=overhead)
