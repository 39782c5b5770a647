"""The run-directory protocol.

``OUT/RUN_ID/``: ``config.json`` (the flat TrainConfig plus sweep metadata), ``log.txt``,
``checkpoint.pt`` (while running), ``result.json`` (written atomically when the run ends:
complete or absent, never torn). A run is finished when ``result.json`` exists; running a sweep
again skips finished runs and resumes interrupted ones from their checkpoint. A run being
trained holds an exclusive ``flock`` on ``OUT/RUN_ID/lock``, so several workers (processes,
Slurm array tasks, Ray tasks) can share one sweep directory without training a run twice.

No torch here: the trainer is imported only inside the worker that trains.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from typing import Any

from archfit.io import TMP_MARK, atomic_write, held_by_another
from archfit.sweep.spec import Run, Spec
from archfit.train import RUNTIME_KEYS

TERMINAL = ("ok", "diverged", "failed")


def write_json(path: str, obj: Any) -> None:
    atomic_write(path, json.dumps(obj, indent=1, default=str, allow_nan=True) + "\n")


def prepare_dirs(spec: Spec, out: str) -> list[str]:
    """One directory per run with its ``config.json``; leftovers of killed writes removed."""
    os.makedirs(out, exist_ok=True)
    dirs = []
    for r in spec.runs:
        d = os.path.join(out, r.run_id)
        os.makedirs(d, exist_ok=True)
        cfg_path = os.path.join(d, "config.json")
        if not os.path.exists(cfg_path):
            write_json(cfg_path, {"run_id": r.run_id, "config": r.config, "meta": r.meta})
        for f in os.listdir(d):
            if TMP_MARK in f:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(d, f))
        dirs.append(d)
    return dirs


def check_result(run_dir: str, run: Run | None = None
                 ) -> tuple[dict[str, Any] | None, str | None]:
    """(the result, None), (None, None) when the run has none yet, or (None, what is wrong)
    when ``result.json`` is unreadable or, given ``run``, belongs to another run or config."""
    p = os.path.join(run_dir, "result.json")
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as e:
        return None, f"cannot be read ({getattr(e, 'strerror', None) or e})"
    try:
        res = json.loads(text)
    except ValueError:
        return None, "is truncated or not JSON"
    if not isinstance(res, dict) or "status" not in res:
        return None, "is not a run result"
    if run is not None:
        if res.get("run_id") != run.run_id:
            return None, f"belongs to run {res.get('run_id')!r}, not {run.run_id}"
        cfg = res.get("config") or {}
        diff = [k for k, v in run.config.items() if cfg.get(k) != v and k not in RUNTIME_KEYS]
        if diff:
            return None, f"was trained with another config ({', '.join(diff[:4])} differ)"
    return res, None


def read_result(run_dir: str) -> dict[str, Any] | None:
    """The run's result, or None when it has none (or none that can be read)."""
    return check_result(run_dir)[0]


def set_aside(run_dir: str) -> str:
    """Move an unusable ``result.json`` aside (``result.json.corrupt-<time>``) so the run is
    trained again; the file is kept for inspection. Returns its new path."""
    src = os.path.join(run_dir, "result.json")
    dst = f"{src}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    os.replace(src, dst)
    return dst


def heal(spec: Spec, out: str) -> list[dict[str, str]]:
    """Set aside every result of ``spec`` in ``out`` that is unreadable or foreign; returns
    what was moved and why."""
    moved = []
    for r in spec.runs:
        d = os.path.join(out, r.run_id)
        _, problem = check_result(d, r)
        if problem:
            moved.append({"run_id": r.run_id, "problem": f"result.json {problem}",
                          "moved_to": set_aside(d)})
    return moved


def is_locked(run_dir: str) -> bool:
    return held_by_another(os.path.join(run_dir, "lock"))


def _finished(run_dir: str, retry_failed: bool, run: Run | None = None) -> bool:
    done, problem = check_result(run_dir, run)
    if problem:
        set_aside(run_dir)
    return done is not None and not (retry_failed and done.get("status") == "failed")


def _run_of(run_dir: str) -> Run:
    with open(os.path.join(run_dir, "config.json")) as f:
        spec = json.load(f)
    return Run(spec["run_id"], spec["config"], spec["meta"])


def run_one(run_dir: str, retry_failed: bool = False, nproc: int = 1) -> str:
    """Train the run in ``run_dir`` unless it is finished or another worker holds it.
    Returns what happened: ok / diverged / failed / preempted / skipped / busy.

    ``nproc > 1`` trains it in that many local processes (torchrun). Inside a multi-task job
    (WORLD_SIZE > 1 in the environment, as submitit sets it on Slurm) every task calls this:
    task 0 decides (finished? locked?) and tells the others, all train, task 0 writes."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        return _run_one_rank(run_dir, retry_failed)
    run = _run_of(run_dir)
    if _finished(run_dir, retry_failed, run):
        return "skipped"
    with open(os.path.join(run_dir, "lock"), "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "busy"
        if _finished(run_dir, retry_failed, run):  # finished while we waited for the lock
            return "skipped"
        spec = {"run_id": run.run_id, "config": run.config, "meta": run.meta}
        result = _train_logged(run_dir, spec, nproc)
        _record(run_dir, spec, result)
        return result["status"]


def _record(run_dir: str, spec: dict[str, Any], result: dict[str, Any]) -> None:
    if result["status"] != "preempted":
        result["run_id"] = spec["run_id"]
        result["meta"] = spec["meta"]
        write_json(os.path.join(run_dir, "result.json"), result)
        ck = os.path.join(run_dir, "checkpoint.pt")
        if os.path.exists(ck) and result["status"] == "ok":
            os.unlink(ck)


def _run_one_rank(run_dir: str, retry_failed: bool) -> str:
    """One task of a multi-task run (see :func:`run_one`)."""
    import torch.distributed as dist

    from archfit.train.launch import init_process_group

    owned = init_process_group()
    rank = dist.get_rank()
    run = _run_of(run_dir)
    spec = {"run_id": run.run_id, "config": run.config, "meta": run.meta}
    with contextlib.ExitStack() as stack:
        decision = ["go"]
        if rank == 0:
            if _finished(run_dir, retry_failed, run):
                decision = ["skipped"]
            else:
                lock = stack.enter_context(open(os.path.join(run_dir, "lock"), "a"))
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    decision = ["busy"]
        dist.broadcast_object_list(decision, src=0)
        try:
            if decision[0] != "go":
                return decision[0]
            result = _train_logged(run_dir, spec)
            if rank == 0:
                _record(run_dir, spec, result)
            return result["status"]
        finally:
            if owned:
                dist.destroy_process_group()


def _train_logged(run_dir: str, spec: dict[str, Any], nproc: int = 1) -> dict[str, Any]:
    from archfit.train import TrainConfig, train

    rank = os.environ.get("RANK")
    with open(os.path.join(run_dir, "log.txt"), "a", buffering=1) as log:
        log.write(f"--- start {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()} host "
                  f"{os.uname().nodename} CUDA_VISIBLE_DEVICES="
                  f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}"
                  + (f" rank {rank}/{os.environ.get('WORLD_SIZE')}" if rank else "")
                  + (f" nproc {nproc}" if nproc > 1 else "") + "\n")

        def progress(p: dict[str, Any]) -> None:
            if "val_loss" in p or p["step"] % 50 == 0:
                log.write(json.dumps(p) + "\n")

        try:
            cfg = TrainConfig.from_dict(spec["config"])
            if nproc > 1:
                from archfit.train.launch import launch

                res = launch(cfg, run_dir, nproc, progress=progress).to_dict()
            else:
                res = train(cfg, run_dir=run_dir, progress=progress).to_dict()
        except Exception as e:  # a run that raises is recorded, and the sweep goes on
            res = {"status": "failed", "error": f"{type(e).__name__}: {e}".splitlines()[0],
                   "config": spec["config"]}
        log.write(f"--- end status {res['status']} {res.get('error') or ''}\n")
    return res


def counts(spec: Spec, out: str) -> dict[str, Any]:
    """How many runs are ok, diverged, failed, running and pending, and the not-ok ones."""
    c: dict[str, Any] = {"planned": len(spec.runs), "ok": 0, "diverged": 0, "failed": 0,
                         "running": 0, "pending": 0}
    failed, corrupt = [], []
    for r in spec.runs:
        d = os.path.join(out, r.run_id)
        res, problem = check_result(d, r) if os.path.isdir(d) else (None, None)
        if problem:
            corrupt.append({"run_id": r.run_id, "problem": f"result.json {problem}"})
        if res is not None:
            st = res.get("status", "failed")
            c[st if st in TERMINAL else "failed"] += 1
            if st != "ok":
                failed.append({"run_id": r.run_id, "status": st, "error": res.get("error")})
        elif os.path.isdir(d) and is_locked(d):
            c["running"] += 1
        else:
            c["pending"] += 1
    c["done"] = c["ok"] + c["diverged"] + c["failed"]
    c["not_ok"] = failed
    c["corrupt"] = corrupt  # counted as pending: 'sweep run' sets them aside and redoes them
    return c
