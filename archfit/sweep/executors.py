"""Where runs train: a local pool of processes (GPU slots or CPU threads), Slurm job arrays
through submitit, or Ray tasks. Every executor calls :func:`archfit.sweep.rundir.run_one`, so
they all share the run-directory protocol (locks, atomic results, resume)."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from typing import Any, Callable, Iterator

from archfit.errors import ArchfitError, SpecError, Stopped
from archfit.sweep.rundir import counts, read_result, run_one
from archfit.sweep.spec import Spec

# how long a stopped command waits for its workers to checkpoint and exit before killing them
# (the trainer checkpoints at the end of the step under way: train.config.STOP_GRACE_S)
WORKER_STOP_S = 45.0


@contextlib.contextmanager
def stopping_on_sigterm() -> Iterator[None]:
    """For the block's life, SIGTERM raises :class:`Stopped` in the main thread (SIGINT raises
    KeyboardInterrupt already), so the code that started workers stops them (a no-op off the
    main thread, where Python installs no handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise Stopped(signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def stop_workers(procs: list[Any], grace: float = WORKER_STOP_S) -> None:
    """SIGTERM each live worker (a multiprocessing Process or a Popen): the trainer in it
    checkpoints at the end of its step and exits; those still alive after ``grace`` seconds
    are killed."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError, OSError, ValueError):
            p.terminate()
    deadline = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(Exception):
            if hasattr(p, "join"):
                p.join(max(0.0, deadline - time.monotonic()))
            else:
                p.wait(max(0.0, deadline - time.monotonic()))
    for p in procs:
        alive = p.is_alive() if hasattr(p, "is_alive") else p.poll() is None
        if alive:
            with contextlib.suppress(ProcessLookupError, OSError, ValueError):
                p.kill()


def still_to_run(dirs: list[str], retry_failed: bool = False) -> list[str]:
    """The run directories an executor has to train: those without a result (and, with
    ``retry_failed``, every one: finished runs are skipped by the run itself)."""
    return [d for d in dirs if retry_failed or read_result(d) is None]


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
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
        return len([ln for ln in out.stdout.splitlines() if ln.startswith("GPU")])
    except (OSError, subprocess.SubprocessError):
        return 0


def _gpu_ids() -> list[str]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [x.strip() for x in visible.split(",") if x.strip()]
    return [str(i) for i in range(_gpu_count())]


# caps the CPU runs at a time of every local sweep, whatever its spec or --concurrency says: a
# machine shared with other work (a test runner's parallel workers among them) sets it
MAX_CONCURRENCY_ENV = "ARCHFIT_MAX_CONCURRENCY"


def run_local(dirs: list[str], concurrency: int | None = None, threads: int | None = None,
              retry_failed: bool = False,
              on_done: Callable[[str, str], None] | None = None,
              gpus_per_run: Callable[[str], int] | None = None) -> dict[str, int]:
    """A pool of worker processes: one run per GPU (CUDA_VISIBLE_DEVICES from free slots), or
    on CPU ``concurrency`` runs at a time (at most ``$ARCHFIT_MAX_CONCURRENCY`` where set)
    with ``threads`` torch threads each. When some run
    needs several GPUs (``gpus_per_run(run_dir)``), runs are packed onto the GPUs instead
    (:func:`run_packed`), each trained by that many processes."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    ids = _gpu_ids()
    gpus = len(ids)
    if gpus_per_run is not None and gpus and any(gpus_per_run(d) > 1 for d in dirs):
        return run_packed(dirs, ids, gpus_per_run, threads, retry_failed, on_done)
    ctx = mp.get_context("spawn")
    slots = None
    if gpus:
        concurrency = min(concurrency or gpus, gpus)
        slots = ctx.Queue()
        for i in ids[:concurrency]:
            slots.put(i)
    else:
        concurrency = concurrency or max(1, (os.cpu_count() or 1) // (threads or 1))
        cap = os.environ.get(MAX_CONCURRENCY_ENV, "").strip()
        if cap.isdigit() and int(cap) > 0:  # a shared machine's (or a test runner's) own limit
            concurrency = min(concurrency, int(cap))
        threads = threads or max(1, (os.cpu_count() or 1) // concurrency)
    tally: dict[str, int] = {}
    todo = still_to_run(dirs, retry_failed)
    if not todo:
        return tally
    with stopping_on_sigterm(), ProcessPoolExecutor(
            max_workers=min(concurrency, len(todo)), mp_context=ctx, initializer=_worker_init,
            initargs=(slots, threads)) as pool:
        try:
            _collect(pool, todo, retry_failed, tally, on_done)
        except BaseException:  # SIGTERM (Stopped), Ctrl-C: the workers stop with the command
            pool.shutdown(wait=False, cancel_futures=True)
            stop_workers(mp.active_children())
            raise
    return tally


def _collect(pool: Any, todo: list[str], retry_failed: bool, tally: dict[str, int],
             on_done: Callable[[str, str], None] | None) -> None:
    """Submit every run to the pool and tally each one's state as it finishes (waking each
    second, so a stop signal is handled at once, not when a run next finishes)."""
    from concurrent.futures import FIRST_COMPLETED, wait

    futs = {pool.submit(run_one, d, retry_failed): d for d in todo}
    pending = set(futs)
    while pending:
        done, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
        for fut in done:
            _tally(fut, futs[fut], tally, on_done)


def _tally(fut: Any, d: str, tally: dict[str, int],
           on_done: Callable[[str, str], None] | None) -> None:
    """Count a finished run's state (a worker that died leaves its run pending: it resumes)."""
    try:
        st = fut.result()
    except Exception as e:
        from archfit.errors import describe_os_error

        st = "worker-error: " + (describe_os_error(e) if isinstance(e, OSError)
                                 else f"{type(e).__name__}: {e}")
    tally[st] = tally.get(st, 0) + 1
    if on_done is not None:
        on_done(d, st)


def _first_fit(todo: list[tuple[str, int]], free: int) -> list[tuple[str, int]]:
    """The runs (in order) that start now on ``free`` GPUs: each that still fits."""
    start = []
    for d, k in todo:
        if k <= free:
            start.append((d, k))
            free -= k
    return start


def pack_order(needs: list[tuple[str, int]], n_gpus: int) -> list[list[str]]:
    """Which runs start together, wave by wave, if every run takes its time (the rule of
    :func:`run_packed`, for display and tests)."""
    waves, todo = [], list(needs)
    while todo:
        wave = _first_fit(todo, n_gpus)
        waves.append([d for d, _ in wave])
        todo = [x for x in todo if x not in wave]
    return waves


def run_packed(dirs: list[str], gpu_ids: list[str], gpus_per_run: Callable[[str], int],
               threads: int | None = None, retry_failed: bool = False,
               on_done: Callable[[str, str], None] | None = None) -> dict[str, int]:
    """Runs packed onto GPU slots: a run needing k GPUs starts when k are free (first fit, in
    order), in its own process group of k processes (torchrun) that sees only its GPUs
    (CUDA_VISIBLE_DEVICES)."""
    todo = [(d, gpus_per_run(d)) for d in still_to_run(dirs, retry_failed)]
    too_big = [(d, k) for d, k in todo if k > len(gpu_ids)]
    if too_big:
        raise SpecError(f"{os.path.basename(too_big[0][0])} needs {too_big[0][1]} GPUs and this "
                        f"machine has {len(gpu_ids)}; lower gpus_per_run or use Slurm")
    free, running, tally = list(gpu_ids), {}, {}  # type: ignore[var-annotated]
    try:
        with stopping_on_sigterm():
            _pack(todo, free, running, tally, threads, retry_failed, on_done)
    except BaseException:  # SIGTERM (Stopped), Ctrl-C: each torchrun group stops with us
        stop_workers([p for p, _ in running.values()])
        raise
    return tally


def _pack(todo: list[tuple[str, int]], free: list[str], running: dict[str, Any],
          tally: dict[str, int], threads: int | None, retry_failed: bool,
          on_done: Callable[[str, str], None] | None) -> None:
    """Start each run as GPUs free up (first fit), and tally each as it exits."""
    import subprocess
    import sys

    while todo or running:
        for d, k in _first_fit(todo, len(free)):
            mine, free = free[:k], free[k:]
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(mine))
            if threads:
                env["OMP_NUM_THREADS"] = str(threads)
            cmd = [sys.executable, "-m", "archfit.sweep.worker", d, "--nproc", str(k)]
            if retry_failed:
                cmd.append("--retry-failed")
            running[d] = (subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                           stderr=subprocess.DEVNULL, text=True), mine)
            todo.remove((d, k))
        time.sleep(0.2)
        for d, (p, mine) in list(running.items()):
            if p.poll() is None:
                continue
            out = (p.stdout.read() if p.stdout else "").strip().splitlines()  # type: ignore
            st = out[-1] if p.returncode == 0 and out else f"worker-error: exit {p.returncode}"
            del running[d]
            free += mine
            tally[st] = tally.get(st, 0) + 1
            if on_done is not None:
                on_done(d, st)


class SlurmRun:
    """The callable each Slurm array task runs; on preemption or timeout submitit calls
    :meth:`checkpoint`, the trainer saves its checkpoint on the signal, and the job is
    requeued to resume from it."""

    def __init__(self, retry_failed: bool = False):
        self.retry_failed = retry_failed

    def __call__(self, run_dir: str) -> str:
        import submitit

        if submitit.JobEnvironment().num_tasks > 1:  # one run, several tasks: one process group
            submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=True,
                                                                  overwrite=True)
        return run_one(run_dir, self.retry_failed)

    def checkpoint(self, run_dir: str) -> Any:
        import submitit

        return submitit.helpers.DelayedSubmission(SlurmRun(self.retry_failed), run_dir)


def check_executor(kind: str, address: str | None = None) -> None:
    """The executor can run here: checked before any run directory is made. Slurm needs its
    commands (submitit calls sbatch and srun); Ray needs the ray package (``archfit[ray]``)."""
    import shutil

    if kind == "slurm":
        missing = [c for c in ("sbatch", "srun") if shutil.which(c) is None]
        if missing:
            raise ArchfitError(f"--executor slurm: {' and '.join(missing)} not found on PATH, so "
                               "this machine cannot submit to Slurm; run from a Slurm login "
                               "node, or use --executor local or ray")
    elif kind == "ray":
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            raise ArchfitError("--executor ray: the ray package is not installed; pip install "
                               "'archfit[ray]', or use --executor local or slurm")


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
                 retry_failed: bool = False,
                 gpus_per_run: Callable[[str], int] | None = None) -> list[str]:
    """Submit the unfinished runs as submitit job arrays, one array per GPU count: a run on
    g GPUs is one job of g tasks (one process and one GPU each); returns the job ids."""
    todo = still_to_run(dirs, retry_failed)
    if not todo:
        return []
    fixed = opts.get("gpus_per_run")
    groups: dict[int, list[str]] = {}
    for d in todo:
        g = int(fixed) if fixed else (gpus_per_run(d) if gpus_per_run else 0)
        groups.setdefault(g, []).append(d)
    ids = []
    for g, group in sorted(groups.items()):
        ids += _submit_group(group, out, opts, g, retry_failed)
    return ids


def _submit_group(todo: list[str], out: str, opts: dict[str, Any], gpus: int,
                  retry_failed: bool) -> list[str]:
    import submitit

    # submitit pickles each job's call into this folder and the compute node unpickles it: the
    # folder is the user's alone (0700), so only someone who can already run code as the user
    # could plant a pickle there
    jobs_dir = os.path.join(out, "_slurm")
    os.makedirs(jobs_dir, mode=0o700, exist_ok=True)
    os.chmod(jobs_dir, 0o700)
    ex = submitit.SlurmExecutor(folder=os.path.join(jobs_dir, "%j"), max_num_timeout=10)
    params: dict[str, Any] = {"time": int(opts.get("time_min", 60)),
                              "cpus_per_task": int(opts.get("cpus_per_run", 1)),
                              "array_parallelism": int(opts.get("array_parallelism", 64)),
                              "signal_delay_s": 60}
    if opts.get("partition"):
        params["partition"] = opts["partition"]
    if gpus:
        params["gpus_per_node"] = gpus
    if gpus > 1:
        params["ntasks_per_node"] = gpus  # one process per GPU
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
        import ray  # type: ignore[import-not-found]  # the 'ray' extra; checked before
    except ImportError:
        raise SpecError("the ray executor needs the extra: pip install 'archfit[ray]'") from None
    todo = still_to_run(dirs, retry_failed)
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
    # ray's annotations give a decorated function's .remote one overload's arity
    refs = {remote.remote(d, retry_failed): d for d in todo}  # type: ignore[call-arg]
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


def execute(spec: Spec, out: str, dirs: list[str], kind: str, *,
            concurrency: int | None = None, threads: int | None = None,
            slurm: dict[str, Any] | None = None, ray: dict[str, Any] | None = None,
            retry_failed: bool = False, wait: bool = True, timeout: float | None = None,
            gpus: int | None = None, on_done: Callable[[str, str], None] | None = None,
            on_tick: Callable[[dict[str, Any]], None] | None = None) -> list[str]:
    """Train the spec's unfinished runs (``dirs``, made by :func:`prepare_dirs` in ``out``) on
    ``kind`` (local, slurm or ray), with the spec's executor settings unless overridden;
    returns the Slurm job ids (none for local and ray). Slurm is waited for unless ``wait`` is
    False. The one place ``sweep run`` and ``validate`` start training."""
    ex = dict(spec.executor)
    by_dir = {os.path.join(out, r.run_id): r for r in spec.runs}

    def gpus_of(d: str) -> int:
        return gpus or (spec.gpus_for(by_dir[d]) if d in by_dir else 1)

    if kind == "local":
        run_local(dirs, concurrency or ex.get("concurrency"),
                  threads or ex.get("threads_per_run"), retry_failed, on_done=on_done,
                  gpus_per_run=gpus_of)
        return []
    if kind == "ray":
        run_ray(dirs, {**(ex.get("ray") or {}), **(ray or {})}, retry_failed, on_done=on_done)
        return []
    if kind != "slurm":
        raise SpecError(f"unknown executor {kind!r}; use local, slurm or ray")
    opts = {**(ex.get("slurm") or {}), **{k: v for k, v in (slurm or {}).items()
                                          if v is not None}}
    ids = submit_slurm(dirs, out, opts, retry_failed, gpus_per_run=gpus_of)
    if wait:
        wait_for(spec, out, timeout, on_tick=on_tick)
    return ids
