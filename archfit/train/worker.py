"""One process of a multi-process run, as torchrun starts it (``python -m archfit.train
RUN_DIR``): read the run's config, train, and on process 0 write the result."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from archfit.errors import ArchfitError
from archfit.io import atomic_write
from archfit.train.config import EXIT_PREEMPTED, TrainConfig
from archfit.train.launch import CONFIG_FILE, RESULT_FILE
from archfit.train.loop import train


def worker(run_dir: str, restart: bool = False, memory_check: bool = True) -> int:
    """One process of a run (what torchrun starts): train, and on process 0 write the result."""
    with open(os.path.join(run_dir, CONFIG_FILE)) as f:
        cfg = TrainConfig.from_dict(json.load(f))
    rank = int(os.environ.get("RANK", "0"))

    def progress(p: dict[str, Any]) -> None:
        if rank == 0:
            print(json.dumps(p), file=sys.stderr, flush=True)

    try:
        result = train(cfg, run_dir=run_dir, progress=progress, restart=restart,
                       memory_check=memory_check)
    except ArchfitError as e:
        if rank == 0:
            atomic_write(os.path.join(run_dir, RESULT_FILE),
                         json.dumps({"status": "failed", "error": str(e), "bad_input": True}))
        return 2
    if rank == 0:
        atomic_write(os.path.join(run_dir, RESULT_FILE), json.dumps(result.to_dict()))
    return EXIT_PREEMPTED if result.status == "preempted" else 0
