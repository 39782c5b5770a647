"""Sweeps: a TOML spec expanded into runs, each with a stable id and its own directory.

Run directory ``OUT/RUN_ID/``: ``config.json`` (the full TrainConfig plus sweep metadata),
``log.txt``, ``checkpoint.pt`` (while running), ``result.json`` (written atomically when the run
ends: complete or absent, never torn). A run is finished when ``result.json`` exists; running a
sweep again skips finished runs and resumes interrupted ones from their checkpoint. A run being
trained holds an exclusive ``flock`` on ``OUT/RUN_ID/lock``, so several workers (processes, Slurm
array tasks, Ray tasks) can share one sweep directory without training a run twice.

No torch here: the trainer is imported only inside the worker that trains.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from archfit.errors import ArchfitError, ShapeError, SpecError
from archfit.numbers import parse_number
from archfit.shapes import Shape, aspect_ratio_family, iso_param_family

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MODEL_KEYS = {"mlp": str, "parametrization": str, "tied_embeddings": bool, "position": str,
              "norm": str, "bias": bool, "qk_norm": bool, "head_dim": int, "n_head": int,
              "multiple": int, "kv_group": int, "vocab_size": int}
GRID_KEYS = {"params": list, "depths": list, "ff_ratios": list, "shapes": list,
             "aspect_ratios": list, "tolerance": float}
BUDGET_KEYS = {"tokens": float, "tokens_per_param": float, "steps": int}
TRAIN_KEYS = {"batch_size": int, "grad_accum": int, "ctx": int, "schedule": str, "warmup": float,
              "min_lr_ratio": float, "weight_decay": float, "grad_clip": float, "optimizer": str,
              "eval_every": int, "eval_windows": int, "checkpoint_every": int,
              "decay_fraction": float, "beta1": float, "beta2": float, "compile": bool,
              "threads": int}
EXECUTOR_KEYS = {"kind": str, "concurrency": int, "threads_per_run": int, "throughput": float,
                 "slurm": dict, "ray": dict}
SLURM_KEYS = {"partition": str, "time_min": int, "gpus_per_run": int, "cpus_per_run": int,
              "mem_gb": float, "array_parallelism": int, "max_array_size": int,
              "additional": dict}
RAY_KEYS = {"address": str, "num_gpus": float, "num_cpus": float, "max_retries": int}
TOP_KEYS = {"name": str, "description": str, "data": str, "seeds": list, "lrs": list,
            "model": dict, "grid": dict, "budget": dict, "train": dict, "executor": dict}
TERMINAL = ("ok", "diverged", "failed")


@dataclass
class Run:
    run_id: str
    config: dict[str, Any]  # TrainConfig fields
    meta: dict[str, Any]  # target_params, sweep, family note

    @property
    def shape(self) -> Shape:
        c = self.config
        return Shape(n_layer=c["n_layer"], d_model=c["d_model"], n_head=c["n_head"],
                     d_ff=c["d_ff"], n_kv_head=c.get("n_kv_head"),
                     vocab_size=c.get("vocab_size") or 256, n_ctx=c["ctx"], mlp=c["mlp"],
                     tied_embeddings=c["tied_embeddings"], position=c["position"],
                     bias=c["bias"], norm=c["norm"], qk_norm=c["qk_norm"])


@dataclass
class Spec:
    name: str
    path: str
    raw: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # family members that did not fit
    executor: dict[str, Any] = field(default_factory=dict)

    def default_out(self) -> str:
        return os.path.join(os.path.dirname(os.path.abspath(self.path)), "runs", self.name)


# ============================================================================ spec
def _check_table(d: Any, keys: dict[str, type], where: str, problems: list[str]) -> dict:
    if not isinstance(d, dict):
        problems.append(f"{where}: expected a table, got {type(d).__name__}")
        return {}
    for k, v in d.items():
        if k not in keys:
            problems.append(f"{where}.{k}: unknown key (known: {', '.join(sorted(keys))})")
            continue
        t = keys[k]
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool)) if t is float else (
            isinstance(v, int) and not isinstance(v, bool)) if t is int else isinstance(v, t)
        if t is float and isinstance(v, str):  # "50M", "1e6" are numbers too
            try:
                parse_number(v)
                ok = True
            except ArchfitError:
                ok = False
        if not ok:
            problems.append(f"{where}.{k}: expected {t.__name__}, got {type(v).__name__} {v!r}")
    return d


def _num(v: Any) -> float:
    return parse_number(v) if isinstance(v, str) else float(v)


def run_id_of(config: dict[str, Any], meta: dict[str, Any]) -> str:
    blob = json.dumps({"config": config, "target_params": meta.get("target_params")},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def load_spec(path: str) -> Spec:
    """Read and validate a sweep spec; every problem is reported at once (:class:`SpecError`)."""
    from archfit.train import TrainConfig

    if not os.path.exists(path):
        raise SpecError("no such sweep spec; see sweeps/smoke.toml for an example", path)
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"not valid TOML: {e}", path) from None
    problems: list[str] = []
    _check_table(raw, TOP_KEYS, "spec", problems)
    name = raw.get("name") or os.path.splitext(os.path.basename(path))[0]
    model = _check_table(raw.get("model", {}), MODEL_KEYS, "model", problems)
    grid = _check_table(raw.get("grid", {}), GRID_KEYS, "grid", problems)
    budget = _check_table(raw.get("budget", {}), BUDGET_KEYS, "budget", problems)
    trn = _check_table(raw.get("train", {}), TRAIN_KEYS, "train", problems)
    ex = _check_table(raw.get("executor", {}), EXECUTOR_KEYS, "executor", problems)
    if isinstance(ex.get("slurm"), dict):
        _check_table(ex["slurm"], SLURM_KEYS, "executor.slurm", problems)
    if isinstance(ex.get("ray"), dict):
        _check_table(ex["ray"], RAY_KEYS, "executor.ray", problems)
    if ex.get("kind", "local") not in ("local", "slurm", "ray"):
        problems.append(f"executor.kind: must be local, slurm or ray, got {ex.get('kind')!r}")
    if len([k for k in BUDGET_KEYS if k in budget]) != 1:
        problems.append("budget: give exactly one of tokens, tokens_per_param or steps")
    for k in ("seeds", "lrs"):
        v = raw.get(k)
        if v is not None and (not isinstance(v, list) or not v):
            problems.append(f"{k}: expected a non-empty list")
    seeds = raw.get("seeds") or [0]
    lrs = raw.get("lrs") or [3e-3]
    try:
        lrs = [_num(x) for x in lrs]
        if any(not x > 0 for x in lrs):
            problems.append("lrs: every learning rate must be positive")
    except Exception:
        problems.append(f"lrs: not numbers: {lrs!r}")
        lrs = []
    if not all(isinstance(s, int) for s in seeds):
        problems.append(f"seeds: expected whole numbers, got {seeds!r}")
        seeds = []

    # the shapes
    shapes: list[tuple[Shape, float | None]] = []
    skipped: list[str] = []
    base = {k: model[k] for k in ("mlp", "tied_embeddings", "position", "norm", "bias",
                                  "qk_norm") if k in model}
    ctx = trn.get("ctx", 256)
    vocab = model.get("vocab_size", 256)
    base.update(vocab_size=vocab, n_ctx=ctx)
    head = dict(head_dim=model.get("head_dim", 64)) if "n_head" not in model else dict(
        head_dim=None, n_head=model["n_head"])
    multiple = model.get("multiple", 64)
    tol = grid.get("tolerance", 0.05)
    try:
        if "shapes" in grid:
            for i, s in enumerate(grid["shapes"]):
                if not isinstance(s, dict):
                    problems.append(f"grid.shapes[{i}]: expected a table like "
                                    "{n_layer = 4, d_model = 256, n_head = 4}")
                    continue
                try:
                    shapes.append((Shape(**{**base, **s}), None))
                except (ShapeError, TypeError) as e:
                    problems.append(f"grid.shapes[{i}]: {e}")
        elif "params" in grid:
            targets = [_num(p) for p in grid["params"]]
            if not targets:
                problems.append("grid.params: empty list")
            ffs = [_num(x) for x in grid.get("ff_ratios", [4])]
            for t in targets:
                if "aspect_ratios" in grid:
                    members = []
                    for ff in ffs:
                        members += aspect_ratio_family(t, [_num(a) for a in grid["aspect_ratios"]],
                                                       ff, multiple=multiple, tolerance=tol,
                                                       **head, **base)
                elif "depths" in grid:
                    members = iso_param_family(t, [int(d) for d in grid["depths"]], ffs,
                                               multiple=multiple, tolerance=tol, **head, **base)
                else:
                    problems.append("grid: with params, give depths or aspect_ratios")
                    break
                for m in members:
                    if m.shape is not None and m.within_tolerance:
                        shapes.append((m.shape, t))
                    else:
                        skipped.append(f"N={t:.3g} depth {m.n_layer}: {m.note}")
        else:
            problems.append("grid: give params (with depths or aspect_ratios) or shapes")
    except (ShapeError, ValueError, TypeError) as e:
        problems.append(f"grid: {e}")
    if not shapes and not any(p.startswith("grid") for p in problems):
        problems.append("grid: expands to no runs (every family member missed its tolerance: "
                        + "; ".join(skipped[:3]) + ")")

    train_fields = {f.name for f in fields(TrainConfig)}
    runs: list[Run] = []
    if not problems:
        for s, target in shapes:
            for lr in lrs:
                for seed in seeds:
                    cfg = TrainConfig(
                        n_layer=s.n_layer, d_model=s.d_model, n_head=s.n_head, d_ff=s.d_ff,
                        n_kv_head=s.n_kv_head, mlp=s.mlp, position=s.position,
                        tied_embeddings=s.tied_embeddings, bias=s.bias, norm=s.norm,
                        qk_norm=s.qk_norm, vocab_size=model.get("vocab_size"), ctx=ctx,
                        parametrization=model.get("parametrization", "standard"),
                        data=raw.get("data"), lr=lr, seed=seed,
                        **{k: (_num(v) if k != "steps" else int(v)) for k, v in budget.items()},
                        **{k: v for k, v in trn.items() if k in train_fields and k != "ctx"})
                    c = cfg.to_dict()
                    meta = {"target_params": target, "sweep": name}
                    runs.append(Run(run_id_of(c, meta), c, meta))
        ids = [r.run_id for r in runs]
        if len(set(ids)) != len(ids):
            problems.append("grid: some runs are identical (duplicate shapes, lrs or seeds)")
    if problems:
        raise SpecError(problems, path)
    return Spec(name=name, path=path, raw=raw, runs=runs, skipped=skipped, executor=ex)


def measured_flops_rate(spec: Spec, out: str | None) -> float | None:
    """Median training FLOP/s (kaplan_train) of the finished runs in ``out``, if any."""
    if not out or not os.path.isdir(out):
        return None
    rates = []
    for r in spec.runs:
        res = read_result(os.path.join(out, r.run_id))
        if res and res.get("status") == "ok" and res.get("train_s") and res.get("flops"):
            rates.append(res["flops"] / res["train_s"])
    if not rates:
        return None
    rates.sort()
    return rates[len(rates) // 2]


def plan_rows(spec: Spec, throughput: float | None = None,
              out: str | None = None) -> list[dict[str, Any]]:
    """One row per run: id, shape, params, tokens, FLOPs and an estimated time.

    The estimate divides the run's training FLOPs (kaplan_train) by a FLOP/s rate: ``throughput``
    if given, else the median rate measured on this sweep's finished runs, else the spec's
    ``executor.throughput``; none of them, no estimate."""
    rows = []
    rate = throughput or measured_flops_rate(spec, out) or spec.executor.get("throughput")
    for r in spec.runs:
        c, s = r.config, r.shape
        tps = c["batch_size"] * c["grad_accum"] * c["ctx"]
        if c.get("steps"):
            tokens = c["steps"] * tps
        elif c.get("tokens"):
            tokens = max(1, round(c["tokens"] / tps)) * tps
        else:
            tokens = max(1, round(c["tokens_per_param"] * s.params_non_embedding / tps)) * tps
        flops = s.flops_per_token("kaplan_train") * tokens
        rows.append({"run_id": r.run_id, "n_layer": s.n_layer, "d_model": s.d_model,
                     "n_head": s.n_head, "d_ff": s.d_ff, "ff_ratio": s.ff_ratio,
                     "params_non_embedding": s.params_non_embedding,
                     "params_total": s.params_total, "target_params": r.meta["target_params"],
                     "lr": c["lr"], "seed": c["seed"], "tokens": tokens, "flops": flops,
                     "est_s": flops / rate if rate else None})
    return rows


# ============================================================================ run directories
def atomic_write_json(path: str, obj: Any) -> None:
    from archfit.laws.base import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=1, default=str, allow_nan=True) + "\n")


def prepare_dirs(spec: Spec, out: str) -> list[str]:
    os.makedirs(out, exist_ok=True)
    dirs = []
    for r in spec.runs:
        d = os.path.join(out, r.run_id)
        os.makedirs(d, exist_ok=True)
        cfg_path = os.path.join(d, "config.json")
        if not os.path.exists(cfg_path):
            atomic_write_json(cfg_path, {"run_id": r.run_id, "config": r.config, "meta": r.meta})
        for f in os.listdir(d):  # leftovers of writes killed mid-way
            if ".tmp-" in f:
                try:
                    os.unlink(os.path.join(d, f))
                except FileNotFoundError:
                    pass
        dirs.append(d)
    return dirs


def read_result(run_dir: str) -> dict[str, Any] | None:
    p = os.path.join(run_dir, "result.json")
    try:
        with open(p) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def is_locked(run_dir: str) -> bool:
    p = os.path.join(run_dir, "lock")
    if not os.path.exists(p):
        return False
    with open(p, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def run_one(run_dir: str, retry_failed: bool = False) -> str:
    """Train the run in ``run_dir`` unless it is finished or another worker holds it.
    Returns what happened: ok / diverged / failed / preempted / skipped / busy."""
    done = read_result(run_dir)
    if done is not None and not (retry_failed and done.get("status") == "failed"):
        return "skipped"
    lock = open(os.path.join(run_dir, "lock"), "a")
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "busy"
        done = read_result(run_dir)  # finished while we waited for the lock
        if done is not None and not (retry_failed and done.get("status") == "failed"):
            return "skipped"
        with open(os.path.join(run_dir, "config.json")) as f:
            spec = json.load(f)
        result = _train_logged(run_dir, spec)
        if result["status"] != "preempted":
            result["run_id"] = spec["run_id"]
            result["meta"] = spec["meta"]
            atomic_write_json(os.path.join(run_dir, "result.json"), result)
            ck = os.path.join(run_dir, "checkpoint.pt")
            if os.path.exists(ck) and result["status"] == "ok":
                os.unlink(ck)
        return result["status"]
    finally:
        lock.close()


def _train_logged(run_dir: str, spec: dict[str, Any]) -> dict[str, Any]:
    from archfit.train import TrainConfig, train

    log = open(os.path.join(run_dir, "log.txt"), "a", buffering=1)
    log.write(f"--- start {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()} host "
              f"{os.uname().nodename} CUDA_VISIBLE_DEVICES="
              f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')}\n")

    def progress(p: dict[str, Any]) -> None:
        if "val_loss" in p or p["step"] % 50 == 0:
            log.write(json.dumps(p) + "\n")

    try:
        cfg = TrainConfig.from_dict(spec["config"])
        res = train(cfg, run_dir=run_dir, progress=progress).to_dict()
    except Exception as e:  # a run that raises is recorded, and the sweep goes on
        res = {"status": "failed", "error": f"{type(e).__name__}: {e}".splitlines()[0],
               "config": spec["config"]}
    log.write(f"--- end status {res['status']} {res.get('error') or ''}\n")
    log.close()
    return res


# ============================================================================ status
def counts(spec: Spec, out: str) -> dict[str, Any]:
    c = {"planned": len(spec.runs), "ok": 0, "diverged": 0, "failed": 0, "running": 0,
         "pending": 0}
    failed = []
    for r in spec.runs:
        d = os.path.join(out, r.run_id)
        res = read_result(d) if os.path.isdir(d) else None
        if res is not None:
            st = res.get("status", "failed")
            c[st if st in c else "failed"] += 1
            if st != "ok":
                failed.append({"run_id": r.run_id, "status": st, "error": res.get("error")})
        elif os.path.isdir(d) and is_locked(d):
            c["running"] += 1
        else:
            c["pending"] += 1
    c["done"] = c["ok"] + c["diverged"] + c["failed"]
    c["not_ok"] = failed
    return c


# ============================================================================ executors
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
                st = f"worker-error: {e}"
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


# ============================================================================ collect
RUN_COLUMNS = ("run_id", "sweep", "status", "error", "n_layer", "d_model", "n_head", "n_kv_head",
               "d_ff", "ff_ratio", "vocab_size", "n_ctx", "mlp", "position", "tied_embeddings",
               "norm", "parametrization", "params_total", "params_non_embedding",
               "target_params", "tokens", "steps", "flops", "lr", "seed", "final_val_loss",
               "best_val_loss", "final_train_loss", "wall_s", "train_s", "tokens_per_s", "mfu",
               "peak_memory_bytes", "device", "data_hash", "archfit_version", "schema_version")


def collect(spec: Spec, out: str, path: str) -> tuple[str, str, int]:
    """Gather every finished run into ``path`` (one row per run) and the loss curves into
    ``path`` with suffix ``.curves.parquet``; both written atomically. Returns the paths and
    the row count."""
    import polars as pl

    from archfit.store import SCHEMA_VERSION

    rows, curves = [], []
    for r in spec.runs:
        res = read_result(os.path.join(out, r.run_id))
        if res is None:
            continue
        s = r.shape
        cfg = r.config
        row = {k: None for k in RUN_COLUMNS}
        row.update(run_id=r.run_id, sweep=spec.name, status=res.get("status"),
                   error=res.get("error"), n_layer=s.n_layer, d_model=s.d_model,
                   n_head=s.n_head, n_kv_head=s.n_kv_head, d_ff=s.d_ff, ff_ratio=s.ff_ratio,
                   vocab_size=(res.get("shape") or {}).get("vocab_size", s.vocab_size),
                   n_ctx=s.n_ctx, mlp=s.mlp, position=s.position,
                   tied_embeddings=s.tied_embeddings, norm=s.norm,
                   parametrization=cfg["parametrization"],
                   params_total=res.get("params_total"),
                   params_non_embedding=res.get("params_non_embedding"),
                   target_params=r.meta.get("target_params"), lr=cfg["lr"], seed=cfg["seed"],
                   schema_version=SCHEMA_VERSION)
        for k in ("tokens", "steps", "flops", "final_val_loss", "best_val_loss",
                  "final_train_loss", "wall_s", "train_s", "tokens_per_s", "mfu",
                  "peak_memory_bytes", "device", "data_hash", "archfit_version"):
            row[k] = res.get(k)
        rows.append(row)
        for p in res.get("curve") or []:
            curves.append({"run_id": r.run_id, "step": p.get("step"), "tokens": p.get("tokens"),
                           "train_loss": p.get("train_loss"), "val_loss": p.get("val_loss"),
                           "lr": p.get("lr")})
    schema = {"run_id": pl.Utf8, "sweep": pl.Utf8, "status": pl.Utf8, "error": pl.Utf8,
              "mlp": pl.Utf8, "position": pl.Utf8, "norm": pl.Utf8, "parametrization": pl.Utf8,
              "device": pl.Utf8, "data_hash": pl.Utf8, "archfit_version": pl.Utf8,
              "tied_embeddings": pl.Boolean}
    for k in RUN_COLUMNS:
        schema.setdefault(k, pl.Float64)
    for k in ("n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "vocab_size", "n_ctx",
              "params_total", "params_non_embedding", "tokens", "steps", "seed",
              "peak_memory_bytes", "schema_version"):
        schema[k] = pl.Int64
    df = pl.DataFrame(rows, schema=schema)
    cdf = pl.DataFrame(curves, schema={"run_id": pl.Utf8, "step": pl.Int64, "tokens": pl.Int64,
                                       "train_loss": pl.Float64, "val_loss": pl.Float64,
                                       "lr": pl.Float64})
    curves_path = (path[:-8] if path.endswith(".parquet") else path) + ".curves.parquet"
    for frame, p in ((df, path), (cdf, curves_path)):
        folder = os.path.dirname(os.path.abspath(p))
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".tmp-{os.getpid()}-{os.path.basename(p)}")
        frame.write_parquet(tmp)
        os.replace(tmp, p)
    return path, curves_path, df.height


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
