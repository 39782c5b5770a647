"""Where runs train: a local pool of processes (GPU slots or CPU threads), Slurm job arrays
through submitit, or Ray tasks. Every executor calls :func:`archfit.sweep.rundir.run_one`, so
they all share the run-directory protocol (locks, atomic results, resume)."""

from __future__ import annotations

import math
import os
import time
from typing import Any, Callable

from archfit.errors import SpecError
from archfit.sweep.rundir import counts, read_result, run_one
from archfit.sweep.spec import Spec

def _worker_init(slots: Any, threads: int | None) -> None:
    slot = slots.get() if slots is not None else None
    if slot is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(slot)
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import torch

        torch.set_num_threads(threads)


def _gpu_count() -> int:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return len([x for x in env.split(",") if x.strip()])
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
        return len([ln for ln in out.stdout.splitlines() if ln.startswith("GPU")])
    except (OSError, subprocess.SubprocessError):
        return 0


def run_local(dirs: list[str], concurrency: int | None = None, threads: int | None = None,
              retry_failed: bool = False,
              on_done: Callable[[str, str], None] | None = None) -> dict[str, int]:
    """A pool of worker processes: one run per GPU (CUDA_VISIBLE_DEVICES from free slots), or
    on CPU ``concurrency`` runs at a time with ``threads`` torch threads each."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    gpus = _gpu_count()
    ctx = mp.get_context("spawn")
    slots = None
    if gpus:
        concurrency = min(concurrency or gpus, gpus)
        slots = ctx.Queue()
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [x.strip() for x in visible.split(",")] if visible else [str(i) for i in
                                                                         range(gpus)]
        for i in ids[:concurrency]:
            slots.put(i)
    else:
        concurrency = concurrency or max(1, (os.cpu_count() or 1) // (threads or 1))
        threads = threads or max(1, (os.cpu_count() or 1) // concurrency)
    tally: dict[str, int] = {}
    todo = [d for d in dirs if read_result(d) is None or retry_failed]
    if not todo:
        return tally
    with ProcessPoolExecutor(max_workers=min(concurrency, len(todo)), mp_context=ctx,
                             initializer=_worker_init, initargs=(slots, threads)) as pool:
        futs = {pool.submit(run_one, d, retry_failed): d for d in todo}
        for fut in as_completed(futs):
            try:
                st = fut.result()
            except Exception as e:  # a worker died: the run stays pending and resumes later
                from archfit.errors import describe_os_error

                st = "worker-error: " + (describe_os_error(e) if isinstance(e, OSError)
                                         else f"{type(e).__name__}: {e}")
            tally[st] = tally.get(st, 0) + 1
            if on_done is not None:
                on_done(futs[fut], st)
    return tally


class SlurmRun:
    """The callable each Slurm array task runs; on preemption or timeout submitit calls
    :meth:`checkpoint`, the trainer saves its checkpoint on the signal, and the job is
    requeued to resume from it."""

    def __init__(self, retry_failed: bool = False):
        self.retry_failed = retry_failed

    def __call__(self, run_dir: str) -> str:
        return run_one(run_dir, self.retry_failed)

    def checkpoint(self, run_dir: str) -> Any:
        import submitit

        return submitit.helpers.DelayedSubmission(SlurmRun(self.retry_failed), run_dir)


def slurm_max_array_size() -> int:
    import subprocess

    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return 1001
    for line in out.splitlines():
        if line.strip().startswith("MaxArraySize"):
            try:
                return int(line.split("=")[1])
            except ValueError:
                break
    return 1001


def submit_slurm(dirs: list[str], out: str, opts: dict[str, Any],
                 retry_failed: bool = False) -> list[str]:
    """Submit the unfinished runs as submitit job arrays; returns the job ids."""
    import submitit

    todo = [d for d in dirs if read_result(d) is None or retry_failed]
    if not todo:
        return []
    ex = submitit.SlurmExecutor(folder=os.path.join(out, "_slurm", "%j"), max_num_timeout=10)
    params: dict[str, Any] = {"time": int(opts.get("time_min", 60)),
                              "cpus_per_task": int(opts.get("cpus_per_run", 1)),
                              "array_parallelism": int(opts.get("array_parallelism", 64)),
                              "signal_delay_s": 60}
    if opts.get("partition"):
        params["partition"] = opts["partition"]
    if opts.get("gpus_per_run"):
        params["gpus_per_node"] = int(opts["gpus_per_run"])
    if opts.get("mem_gb"):
        params["mem"] = f"{int(opts['mem_gb'] * 1024)}MB"
    if opts.get("additional"):
        params["additional_parameters"] = dict(opts["additional"])
    ex.update_parameters(**params)
    chunk = max(1, min(int(opts.get("max_array_size") or slurm_max_array_size()) - 1,
                       len(todo)))
    ids = []
    fn = SlurmRun(retry_failed)
    for i in range(0, len(todo), chunk):
        jobs = ex.map_array(fn, todo[i:i + chunk])
        if jobs:
            ids.append(jobs[0].job_id.split("_")[0])
    return ids


def run_ray(dirs: list[str], opts: dict[str, Any], retry_failed: bool = False,
            on_done: Callable[[str, str], None] | None = None) -> dict[str, int]:
    try:
        import ray
    except ImportError:
        raise SpecError("the ray executor needs the extra: pip install 'archfit[ray]'") from None
    todo = [d for d in dirs if read_result(d) is None or retry_failed]
    if not todo:
        return {}
    started = False
    if not ray.is_initialized():
        addr = opts.get("address")
        kw: dict[str, Any] = {"address": addr} if addr else {
            "num_cpus": opts.get("cluster_cpus") or os.cpu_count(), "include_dashboard": False}
        ray.init(log_to_driver=False, **kw)
        started = True
    remote = ray.remote(num_gpus=float(opts.get("num_gpus", 0)),
                        num_cpus=float(opts.get("num_cpus", 1)),
                        max_retries=int(opts.get("max_retries", 2)),
                        retry_exceptions=True)(run_one)
    refs = {remote.remote(d, retry_failed): d for d in todo}
    tally: dict[str, int] = {}
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            for r in ready:
                try:
                    st = ray.get(r)
                except Exception as e:  # retries exhausted: the run stays pending
                    st = f"worker-error: {type(e).__name__}"
                tally[st] = tally.get(st, 0) + 1
                if on_done is not None:
                    on_done(refs[r], st)
    finally:
        if started:
            ray.shutdown()
    return tally


def wait_for(spec: Spec, out: str, timeout: float | None,
             on_tick: Callable[[dict[str, Any]], None] | None = None, poll: float = 2.0
             ) -> dict[str, Any]:
    """Poll the run directories until every run has a result (or ``timeout``)."""
    t0 = time.time()
    while True:
        c = counts(spec, out)
        if on_tick is not None:
            on_tick(c)
        if c["done"] >= c["planned"]:
            return c
        if timeout is not None and time.time() - t0 > timeout:
            return c
        time.sleep(poll)


def fmt_eta(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "?"
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"
