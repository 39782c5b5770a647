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

Importing the package loads none of torch: the modules that use it import it inside the
functions that need it (:mod:`~archfit.train.model` is the one that imports it at its top).
"""

from __future__ import annotations

from archfit.train.checkpoint import load_checkpoint
from archfit.train.config import (EXIT_PREEMPTED, PARALLEL, PRECISIONS, RESUMABLE_CHANGES,
                                  RUNTIME_KEYS, STOP_GRACE_S, Budget, RunResult, TrainConfig)
from archfit.train.device import auto_micro_batch, check_memory, peak_flops
from archfit.train.loop import train
from archfit.train.schedule import lr_at

__all__ = ["EXIT_PREEMPTED", "PARALLEL", "PRECISIONS", "RESUMABLE_CHANGES", "RUNTIME_KEYS",
           "STOP_GRACE_S", "Budget", "RunResult", "TrainConfig", "lr_at", "train", "peak_flops",
           "auto_micro_batch", "check_memory", "load_checkpoint"]
