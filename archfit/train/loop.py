"""One training run, read top to bottom like nanoGPT's loop: set up (data, model, optimizers,
placement), resume this run's checkpoint, step until the budget or a stop signal, evaluate on
fixed validation windows, finish with the result record. ``train(TrainConfig(...))`` is the
entry point; torch is imported inside it."""

from __future__ import annotations

import contextlib
import math
import os
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from archfit.train.launch import ProcessGroup, join_process_group
from archfit.errors import ArchfitError, DataError
from archfit.io import atomic_path
from archfit.shapes import Shape
from archfit.train.checkpoint import resume
from archfit.train.config import RunResult, TrainConfig
from archfit.train.device import (auto_micro_batch, autocast, check_memory, peak_flops,
                                  resolve_device, wrap)
from archfit.train.optim import make_optimizers
from archfit.train.schedule import lr_at
from archfit.train.stop import Preempted, StopSignals
from archfit.train.trackers import check_tracker


@dataclass
class _Session:
    """The state of a run between its phases: setup, resume, loop, finish."""

    cfg: TrainConfig
    shape: Shape
    td: Any  # TokenData
    device: str
    model: Any
    opts: list[Any]
    step_fn: Any
    val: Any
    autocast: Any
    total_steps: int
    ckpt_path: str | None
    result: RunResult
    rng: np.random.Generator
    dist: ProcessGroup = field(default_factory=ProcessGroup)
    start_step: int = 0
    best_val: float = math.inf
    curve: list[dict[str, Any]] = field(default_factory=list)
    train_time: float = 0.0
    last_train: float | None = None
    ema: float | None = None  # the train loss's moving average and its running minimum (the
    run_min: float = math.inf  # divergence check)
    clock: Any = None  # the loop's _Clock: first step, steady steps
    tracker: Any = None  # archfit.train.trackers.Tracker on the main process, when asked for
    mfu_per_token_rate: float | None = None  # MFU = this x tokens/s (a GPU of known peak)

    def evaluate(self) -> float:
        import torch

        self.model.eval()
        losses = []
        with torch.no_grad(), self.autocast:
            for i in range(0, len(self.val), self.cfg.eval_batch):
                w = self.val[i:i + self.cfg.eval_batch]
                _, loss = self.step_fn(w[:, :-1], w[:, 1:])
                losses.append(float(loss) * len(w))
        self.model.train()
        return sum(losses) / len(self.val)

    def state(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Full (unsharded) model and optimizer state dicts; collective under FSDP."""
        if self.dist.world > 1 and self.cfg.parallel == "fsdp":
            from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                                 get_model_state_dict,
                                                                 get_optimizer_state_dict)

            o = StateDictOptions(full_state_dict=True, cpu_offload=True)
            return (get_model_state_dict(self.model, options=o),
                    [get_optimizer_state_dict(self.model, opt, options=o) for opt in self.opts])
        return self.model.state_dict(), [o.state_dict() for o in self.opts]

    def load_state(self, model_sd: dict[str, Any], opt_sds: list[dict[str, Any]]) -> None:
        if self.dist.world > 1 and self.cfg.parallel == "fsdp":
            from torch.distributed.checkpoint.state_dict import (StateDictOptions,
                                                                 set_model_state_dict,
                                                                 set_optimizer_state_dict)

            o = StateDictOptions(full_state_dict=True)
            set_model_state_dict(self.model, model_sd, options=o)
            for opt, sd in zip(self.opts, opt_sds):
                set_optimizer_state_dict(self.model, opt, sd, options=o)
            return
        self.model.load_state_dict(model_sd)
        for opt, sd in zip(self.opts, opt_sds):
            opt.load_state_dict(sd)

    def save(self, step: int) -> None:
        """Checkpoint atomically: process 0 writes, every process waits for it."""
        if self.ckpt_path is None:
            return
        import torch

        model_sd, opt_sds = self.state()
        if self.dist.main:
            with atomic_path(self.ckpt_path) as tmp:
                torch.save({"model": model_sd, "optimizers": opt_sds,
                            "data_rng": self.rng.bit_generator.state,
                            "torch_rng": torch.get_rng_state(), "step": step,
                            "best_val": self.best_val, "curve": self.curve,
                            "config": self.cfg.to_dict(), "world_size": self.dist.world}, tmp)
        self.dist.barrier()


def _setup(cfg: TrainConfig, run_dir: str | None, memory_check: bool = True) -> _Session:
    import torch

    import archfit.train.data as data_mod
    from archfit._version import __version__
    from archfit.train.model import GPT

    device = resolve_device(cfg)  # before anything slow: a missing device is a bad input
    dist, device = join_process_group(cfg, device)
    if run_dir:
        os.makedirs(run_dir, exist_ok=True)  # before training, so the result has a home
    td = data_mod.load(cfg.data, None if cfg.vocab_from_data else cfg.shape.vocab_size)
    td.check_window(cfg.shape.n_ctx)
    if cfg.data_sha256 and td.data_hash != cfg.data_sha256:
        raise DataError(f"{cfg.data}: its manifest changed since this run was planned (hash "
                        f"{td.data_hash[:12]}, planned {cfg.data_sha256[:12]}); re-plan the sweep")
    shape = cfg.shape.with_(vocab_size=td.vocab_size) if cfg.vocab_from_data else cfg.shape
    if shape.vocab_size < td.vocab_size:
        raise DataError(f"{td.name}: vocabulary {td.vocab_size} exceeds the model's "
                        f"{shape.vocab_size}")
    if memory_check:
        check_memory(cfg, shape, device, dist.world)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    result = RunResult(status="ok", device=device, data_hash=td.data_hash, data_name=td.name,
                       params_total=shape.params_total,
                       params_non_embedding=shape.params_non_embedding, shape=shape.to_dict(),
                       config=cfg.to_dict(), archfit_version=__version__)
    result.shape.pop("breakdown", None)
    torch.manual_seed(cfg.seed)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = GPT(shape, cfg.parametrization, cfg.mup_base_width, cfg.mup_base_depth,
                cfg.moe_balance, cfg.moe_aux_coef).to(device)
    if model.num_params() != shape.params_total:  # the shape core is the one count
        raise AssertionError("model and shape disagree on the parameter count")
    wrapped = wrap(model, cfg, dist, device)
    if device.startswith("cuda") and cfg.micro_batch is None:
        import torch

        cfg = auto_micro_batch(cfg, shape, dist.world,
                               torch.cuda.get_device_properties(device).total_memory)
        result.config = cfg.to_dict()
    result.world_size = dist.world
    result.parallel = cfg.parallel if dist.world > 1 else None
    return _Session(
        cfg=cfg, shape=shape, td=td, device=device, model=model,
        opts=make_optimizers(model, cfg, device),  # after fully_shard: on the sharded parameters
        step_fn=torch.compile(wrapped) if cfg.compile else wrapped,
        val=torch.from_numpy(td.val_windows(cfg.eval_windows, shape.n_ctx)).to(device),
        autocast=autocast(cfg, device),
        total_steps=cfg.budget.steps_for(shape, cfg.tokens_per_step),  # type: ignore[union-attr]
        ckpt_path=os.path.join(run_dir, "checkpoint.pt") if run_dir else None,
        result=result, rng=np.random.default_rng(cfg.seed), dist=dist)


def _step(s: _Session, step: int) -> tuple[Any, float]:
    """One optimizer step (with gradient accumulation); returns (train loss, lr). The loss stays
    a tensor on the device: reading it waits for the step (a host sync on a GPU), which
    :func:`_loop` does only when it logs."""
    import torch

    cfg = s.cfg
    lr = lr_at(step, s.total_steps, cfg)
    for o in s.opts:
        for g in o.param_groups:
            g["lr"] = lr * g.get("lr_mult", 1.0)
    total: Any = 0.0
    d = s.dist
    share = cfg.batch_size // d.world  # every process draws the same batch, takes its rows
    micro = min(cfg.micro_batch or share, share)
    if share % micro:
        raise ArchfitError(f"micro_batch {micro} does not divide the {share} sequences each "
                           "process takes of a batch")
    passes = cfg.grad_accum * (share // micro)
    x = y = None
    for k in range(passes):
        if k % (share // micro) == 0:
            x, y = s.td.batch(s.rng, cfg.batch_size, s.shape.n_ctx)
        lo = d.rank * share + (k % (share // micro)) * micro
        assert x is not None and y is not None  # drawn at k = 0
        xb, yb = (to_device(a[lo:lo + micro], s.device) for a in (x, y))
        sync = k == passes - 1 or not hasattr(s.step_fn, "no_sync")
        with contextlib.nullcontext() if sync else s.step_fn.no_sync():
            with s.autocast:
                _, loss = s.step_fn(xb, yb)
            (loss / passes).backward()
        total = total + loss.detach() / passes
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(s.model.parameters(), cfg.grad_clip)
    for o in s.opts:
        o.step()
        o.zero_grad(set_to_none=True)
    return total, lr


def to_device(rows: Any, device: Any) -> Any:
    """A batch's token rows (numpy) on ``device``: on a GPU through pinned host memory, copied
    without blocking (the step's kernels queue behind the copy, the host goes on)."""
    import torch

    t = torch.from_numpy(rows)
    if torch.device(device).type == "cuda":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


# the first steps of a run (or of its resumption) are not timed for its tokens/s: the first
# compiles the step's graphs (with compile) and fills the allocator's caches, the second can
# still recompile (torch.compile's guards); a run of fewer steps times those after its first
GPU_WARMUP_STEPS = 2
# on a GPU the loop reads the loss (a host sync) every this many steps, and at every
# evaluation, checkpoint and the warm-up's end; on a CPU, where reading it is free, every step
GPU_LOG_EVERY = 10


@dataclass
class _Clock:
    """Where the run's time went: the first step, the steady steps after the warm-up (what
    tokens/s and MFU count), and every training step (train_s). Evaluation and checkpoints are
    in none of them."""

    warmup: int  # steps before the steady ones
    mark: float = field(default_factory=time.perf_counter)  # the last sync
    first_step_s: float | None = None
    steady_s: float = 0.0
    steady_steps: int = 0

    def lap(self, s: _Session, steps: int, done_before: int) -> float:
        """The seconds since the last mark, for ``steps`` steps after ``done_before`` steps of
        this process; the device synced first, so they are the steps' own."""
        if s.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize()
        now = time.perf_counter()
        dt, self.mark = now - self.mark, now
        if done_before == 0:
            self.first_step_s = dt if steps == 1 else None
        if done_before >= self.warmup:
            self.steady_s += dt
            self.steady_steps += steps
        return dt


def _loop(s: _Session, sig: StopSignals, progress: Callable[[dict[str, Any]], None] | None
          ) -> None:
    cfg = s.cfg
    run = s.total_steps - s.start_step
    clock = _Clock(warmup=min(GPU_WARMUP_STEPS, run - 1))
    s.clock = clock
    every = 1 if not s.device.startswith("cuda") else GPU_LOG_EVERY
    pending: list[tuple[int, Any, float]] = []  # steps run, their losses not read yet
    s.model.train()
    for step in range(s.start_step, s.total_steps):
        if s.dist.any(sig.signum is not None):
            _log(s, pending, clock, progress)
            s.save(step)
            sig.chain()
            raise Preempted(f"stopped by signal {sig.signum or 'on another process'} at step "
                            f"{step}")
        loss, lr = _step(s, step)
        pending.append((step, loss, lr))
        done = step + 1 - s.start_step
        evaluate = (step + 1) % cfg.eval_every == 0 or step + 1 == s.total_steps
        save = bool(cfg.checkpoint_every) and (step + 1) % cfg.checkpoint_every == 0
        if evaluate or save or done in (1, clock.warmup) or done % every == 0:
            ok, rate = _log(s, pending, clock, progress, hold_last=evaluate)
            if not ok:
                return
            if evaluate:
                s.curve[-1]["val_loss"] = s.evaluate()
                s.best_val = min(s.best_val, s.curve[-1]["val_loss"])
                _report(s, s.curve[-1], progress, rate)
            if save:
                s.save(step + 1)
            clock.mark = time.perf_counter()  # evaluation and checkpoints are not train time


def _log(s: _Session, pending: list[tuple[int, Any, float]], clock: _Clock,
         progress: Callable[[dict[str, Any]], None] | None, hold_last: bool = False
         ) -> tuple[bool, float | None]:
    """Read the pending steps' losses (one sync), time them and record each step's point,
    reported as it is recorded (the last one held back for its evaluation, with ``hold_last``).
    Returns (False, ...) when a step diverged: the points after it are dropped and the run ends
    there; and the steps' tokens/s."""
    if not pending:
        return True, None
    cfg = s.cfg
    losses = [s.dist.mean(float(loss)) for _, loss, _ in pending]
    dt = clock.lap(s, len(pending), pending[0][0] - s.start_step)
    s.train_time += dt
    rate = len(pending) * cfg.tokens_per_step / dt if dt > 0 else None
    last = pending[-1][0]
    for (step, _, lr), total in zip(pending, losses):
        s.last_train = total
        point: dict[str, Any] = {"step": step + 1, "tokens": (step + 1) * cfg.tokens_per_step,
                                 "train_loss": total, "lr": lr}
        s.ema = total if s.ema is None else 0.8 * s.ema + 0.2 * total
        s.run_min = min(s.run_min, s.ema)
        if not math.isfinite(total):
            s.result.status, s.result.error = "diverged", f"non-finite loss at step {step + 1}"
        elif step > 10 and s.ema > cfg.divergence_factor * s.run_min:
            s.result.status = "diverged"
            s.result.error = (f"loss {s.ema:.3g} rose above {cfg.divergence_factor}x its "
                              f"running minimum {s.run_min:.3g} at step {step + 1}")
        s.curve.append(point)
        if s.result.status == "diverged":
            pending.clear()
            return False, rate
        if not (hold_last and step == last):
            _report(s, point, progress, rate)
    pending.clear()
    return True, rate


def _report(s: _Session, point: dict[str, Any],
            progress: Callable[[dict[str, Any]], None] | None, rate: float | None) -> None:
    """A step's point to the progress callback and the tracker (its tokens/s: its window's)."""
    if progress is not None and s.dist.main:
        progress({**point, "total_steps": s.total_steps})
    if s.tracker is not None:
        s.tracker.log(point, rate, s.mfu_per_token_rate * rate
                      if rate and s.mfu_per_token_rate else None)


def _finish(s: _Session, t_wall: float) -> RunResult:
    r, cfg = s.result, s.cfg
    vals = [p["val_loss"] for p in s.curve if "val_loss" in p]
    done_steps = s.curve[-1]["step"] if s.curve else s.start_step
    r.steps, r.tokens = done_steps, done_steps * cfg.tokens_per_step
    r.final_val_loss = vals[-1] if vals else None
    r.best_val_loss = min(vals) if vals else None
    r.final_train_loss, r.curve, r.train_s = s.last_train, s.curve, s.train_time
    c = s.clock
    if c is not None and c.steady_steps and c.steady_s > 0:
        r.tokens_per_s = c.steady_steps * cfg.tokens_per_step / c.steady_s
        r.first_step_s = c.first_step_s
        if cfg.compile and c.first_step_s is not None:  # the first step less a steady one
            r.compile_s = max(0.0, c.first_step_s - c.steady_s / c.steady_steps)
    fpt = s.shape.flops_per_token("kaplan_train")  # a mixture of experts: its active N
    r.flops = fpt * r.tokens
    if s.shape.moe:
        loads = r.expert_load = s.model.expert_load()
        n = s.shape.n_experts
        r.expert_load_max = max((max(layer) * n for layer in loads), default=None)
    if s.device.startswith("cuda"):
        import torch

        r.peak_memory_bytes = int(torch.cuda.max_memory_allocated())
        peak = peak_flops(torch.cuda.get_device_name())
        if peak and r.tokens_per_s:
            r.mfu = fpt * r.tokens_per_s / peak
    else:
        r.peak_memory_bytes = own_peak_rss()
    if r.status == "ok":
        s.save(done_steps)
    r.wall_s = time.perf_counter() - t_wall
    return r


def _open_tracker(s: _Session, run_dir: str | None) -> None:
    """The run's tracker: named by its folder (the run id in a sweep), grouped by the folder
    above (the sweep's), written under ``tracker_dir`` (default: ``runs/`` beside the run, or
    ``./runs``)."""
    from archfit.train.trackers import Tracker

    if run_dir:
        here = os.path.abspath(run_dir)
        name, group = os.path.basename(here), os.path.basename(os.path.dirname(here))
        default = os.path.join(os.path.dirname(here), "tracker")
    else:
        name, group, default = f"archfit-train-{time.strftime('%Y%m%d-%H%M%S')}", "archfit", \
            os.path.join("runs", "tracker")
    s.tracker = Tracker(s.cfg.tracker, s.cfg.tracker_dir or default,  # type: ignore[arg-type]
                        name, group, {k: v for k, v in s.cfg.to_dict().items() if v is not None})
    if s.device.startswith("cuda"):
        import torch

        peak = peak_flops(torch.cuda.get_device_name())
        if peak:
            s.mfu_per_token_rate = s.shape.flops_per_token("kaplan_train") / peak


def train(cfg: TrainConfig, run_dir: str | None = None,
          progress: Callable[[dict[str, Any]], None] | None = None,
          restart: bool = False, memory_check: bool = True) -> RunResult:
    """Train one model. With ``run_dir``, checkpoints go to ``run_dir/checkpoint.pt`` and this
    run's checkpoint found there is resumed (another run's is refused unless ``restart``; a
    checkpoint is read with ``weights_only=True``, so it never runs code). A run whose
    estimated memory does not fit the machine is refused before it starts unless
    ``memory_check=False``. Bad input raises a typed :class:`ArchfitError`; a run that
    diverges or fails returns a result with that status (nothing is raised)."""
    t_wall = time.perf_counter()
    cfg.validate()
    check_tracker(cfg.tracker)  # a missing package stops here, before any work
    s = _setup(cfg, run_dir, memory_check)
    resume(s, restart)
    if cfg.tracker and s.dist.main:
        _open_tracker(s, run_dir)
    try:
        with StopSignals() as sig:
            _loop(s, sig, progress)
    except Preempted as e:
        s.result.status, s.result.error = "preempted", str(e)
    except (ArchfitError, KeyboardInterrupt):
        raise
    except Exception as e:  # a failing run is recorded, not raised
        s.result.status = "failed"
        s.result.error = f"{type(e).__name__}: {e}".splitlines()[0]
        s.result.config["traceback"] = traceback.format_exc(limit=5)
    try:
        r = _finish(s, t_wall)
        if s.tracker is not None:
            s.tracker.finish(r.to_dict())
        return r
    finally:
        if s.dist.owned:
            import torch.distributed

            torch.distributed.destroy_process_group()


def own_peak_rss() -> int:
    """This process's peak resident memory in bytes: Linux's VmHWM, the peak of its own
    address space since exec. Not getrusage's ru_maxrss, which keeps the forking process's peak
    across exec (a run trained in a worker of a large process would report the parent's).
    Elsewhere ru_maxrss, in bytes on macOS and KiB on the other Unixes."""
    import resource
    import sys

    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024
