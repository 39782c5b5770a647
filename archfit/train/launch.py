"""Multi-process runs: ``launch(cfg, run_dir, nproc)`` starts ``nproc`` processes with torchrun
(``python -m torch.distributed.run --standalone``) on this machine; each runs
:func:`archfit.train.train`, which joins the process group from the environment (gloo on CPU,
NCCL on GPUs, one GPU per process) and trains one model with DDP or FSDP2. Process 0 writes the
checkpoint and the result; every process resumes from the checkpoint.

On Slurm the job's tasks are the processes (submitit sets MASTER_ADDR/PORT, RANK and
WORLD_SIZE from the job: :func:`archfit.sweep.executors.SlurmRun`).
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Callable

from archfit.errors import ArchfitError
from archfit.io import atomic_write
from archfit.train.config import RunResult, TrainConfig

def init_process_group(backend: str | None = None) -> bool:
    """Join the env:// process group (torchrun's or submitit's variables) unless this process
    is already in one, with ``backend`` (default: NCCL where CUDA is available, gloo
    otherwise). Returns whether this call created it (its creator destroys it). The one place
    archfit initializes torch.distributed: the trainer and the Slurm task protocol call it."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"))
    return True


@dataclass
class ProcessGroup:
    """This process's place in a multi-process run (torch.distributed, env:// variables as
    torchrun and submitit set them); world 1 is a single-process run."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    owned: bool = False  # this run initialized the process group (and destroys it)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.world > 1:
            import torch.distributed as dist

            dist.barrier()

    def mean(self, value: float) -> float:
        """The mean of ``value`` over the processes."""
        if self.world == 1:
            return value
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t)
        return float(t[0]) / self.world

    def any(self, flag: bool) -> bool:
        """Whether any process has ``flag`` (e.g. a stop signal): all stop at the same step."""
        if self.world == 1:
            return flag
        import torch
        import torch.distributed as dist

        t = torch.tensor([1 if flag else 0], dtype=torch.int32)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t[0])


def join_process_group(cfg: TrainConfig, device: str) -> tuple[ProcessGroup, str]:
    """Join the process group when the environment names one (WORLD_SIZE > 1): gloo on CPU,
    NCCL on CUDA, one GPU per process (LOCAL_RANK)."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return ProcessGroup(), device
    import torch

    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if cfg.batch_size % world:
        raise ArchfitError(f"batch_size {cfg.batch_size} is not divisible by the {world} "
                           "processes; each takes an equal share of every batch")
    if device.startswith("cuda"):
        idx = local if torch.cuda.device_count() > local else 0
        torch.cuda.set_device(idx)
        device = f"cuda:{idx}"
    owned = init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return ProcessGroup(rank, world, local, owned), device


CONFIG_FILE = "dist-config.json"
RESULT_FILE = "dist-result.json"


def launch(cfg: TrainConfig, run_dir: str, nproc: int, restart: bool = False,
           threads: int | None = None,
           progress: Callable[[dict[str, Any]], None] | None = None,
           memory_check: bool = True) -> RunResult:
    """Train ``cfg`` in ``nproc`` processes on this machine; returns process 0's result (its
    ``world_size`` is ``nproc``). ``threads``: torch threads per process (default: the CPUs
    shared out); ``progress`` gets process 0's progress points as they come."""
    cfg.validate()
    if nproc < 1:
        raise ArchfitError(f"--nproc must be at least 1, got {nproc}")
    if cfg.batch_size % nproc:
        raise ArchfitError(f"batch_size {cfg.batch_size} is not divisible by --nproc {nproc}; "
                           "each process takes an equal share of every batch")
    os.makedirs(run_dir, exist_ok=True)
    cfg_path, res_path = os.path.join(run_dir, CONFIG_FILE), os.path.join(run_dir, RESULT_FILE)
    atomic_write(cfg_path, json.dumps(cfg.to_dict()))
    if os.path.exists(res_path):
        os.unlink(res_path)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(threads or max(1, (os.cpu_count() or 1) // nproc)))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)  # a fresh group of our own, not an enclosing job's
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
           f"--nproc-per-node={nproc}", "-m", "archfit.train", run_dir]
    if restart:
        cmd.append("--restart")
    if not memory_check:
        cmd.append("--no-memory-check")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)

    def forward(signum: int, frame: Any) -> None:  # torchrun passes it on to the workers
        proc.send_signal(signum)

    old = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGUSR2)} \
        if _main_thread() else {}
    tail: collections.deque[str] = collections.deque(maxlen=5)
    try:
        for line in proc.stderr:  # type: ignore[union-attr]
            point = _progress_point(line)
            if point is None:
                if line.strip():
                    tail.append(line.strip())
            elif progress is not None:
                progress(point)
        proc.wait()
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
    if not os.path.exists(res_path):
        raise ArchfitError(f"the {nproc}-process run ended (exit {proc.returncode}) without a "
                           f"result: {' | '.join(list(tail)[-3:])[:400]}")
    with open(res_path) as f:
        res = json.load(f)
    if res.pop("bad_input", False):
        raise ArchfitError(res["error"])
    return RunResult(**res)


def _progress_point(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        p = json.loads(line)
    except ValueError:
        return None
    return p if isinstance(p, dict) and "step" in p else None


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
