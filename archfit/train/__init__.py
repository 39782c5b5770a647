"""The trainer, one concept a module:

- :mod:`~archfit.train.config`: the run records (:class:`Budget`, :class:`TrainConfig`,
  :class:`RunResult`), importable without torch or numpy, so planning a sweep never loads the
  trainer;
- :mod:`~archfit.train.schedule`: the learning-rate schedule;
- :mod:`~archfit.train.optim`: AdamW and Muon;
- :mod:`~archfit.train.device`: the device, peak FLOP/s, micro-batch, the memory check, autocast,
  DDP/FSDP2 wrapping;
- :mod:`~archfit.train.checkpoint`: loading (``weights_only=True``) and resuming;
- :mod:`~archfit.train.stop`: bounded stops on SIGTERM/SIGUSR2;
- :mod:`~archfit.train.loop`: :func:`train`, the loop itself;
- :mod:`~archfit.train.launch`: multi-process runs (torchrun) and the process group
  (``python -m archfit.train RUN_DIR`` is one process of such a run).

``train`` and the torch-side helpers are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from archfit.train.config import (EXIT_PREEMPTED, PARALLEL, PRECISIONS, RESUMABLE_CHANGES,
                                  RUNTIME_KEYS, STOP_GRACE_S, Budget, RunResult, TrainConfig)
from archfit.train.schedule import lr_at

_LAZY = {"train": "loop", "peak_flops": "device", "auto_micro_batch": "device",
         "check_memory": "device", "load_checkpoint": "checkpoint"}

if TYPE_CHECKING:  # the lazy names, for type checkers (never run)
    from archfit.train.checkpoint import load_checkpoint
    from archfit.train.device import auto_micro_batch, check_memory, peak_flops
    from archfit.train.loop import train

__all__ = ["EXIT_PREEMPTED", "PARALLEL", "PRECISIONS", "RESUMABLE_CHANGES", "RUNTIME_KEYS",
           "STOP_GRACE_S", "Budget", "RunResult", "TrainConfig", "lr_at",
           # the lazy names (a literal list, so type checkers read it; a test matches _LAZY)
           "train", "peak_flops", "auto_micro_batch", "check_memory", "load_checkpoint"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"archfit.train.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'archfit.train' has no attribute {name!r}")
