"""One training run: ``train(TrainConfig(...)) -> RunResult``.

AdamW (fused on CUDA; weight decay only on matrices), optional Muon for hidden matrices, linear
warmup then cosine or warmup-stable-decay, grad clipping, gradient accumulation, bf16 autocast and
TF32 on CUDA (fp32 on CPU), optional ``torch.compile``. Budgets by tokens, tokens per parameter or
steps. Checkpoints (model, optimizer, step, data-sampler and RNG state) every k steps and on
SIGTERM/SIGUSR2; a resumed run continues with the same losses as an uninterrupted one.
"""

from __future__ import annotations

import math
import os
import signal
import time
import traceback
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

import numpy as np

from archfit.errors import ArchfitError, DataError
from archfit.shapes import Shape

# bf16 dense peak FLOP/s by device name (vendor data sheets); unknown devices get MFU null
PEAK_FLOPS = (("H200", 989e12), ("H100", 989e12), ("A100", 312e12))


@dataclass
class TrainConfig:
    """Everything that defines a run (its id is a hash of this)."""

    n_layer: int = 4
    d_model: int = 128
    n_head: int = 4
    d_ff: int | None = None
    ff_ratio: float | None = None
    n_kv_head: int | None = None
    mlp: str = "gelu"
    position: str = "learned"
    tied_embeddings: bool = True
    bias: bool = True
    norm: str = "layernorm"
    qk_norm: bool = False
    vocab_size: int | None = None  # None: the data's vocabulary
    ctx: int = 256
    parametrization: str = "standard"
    mup_base_width: int = 128
    mup_base_depth: int = 2
    data: str | None = None  # None: the embedded default corpus
    tokens: float | None = None
    tokens_per_param: float | None = None
    steps: int | None = None
    batch_size: int = 16
    grad_accum: int = 1
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup: float = 0.05  # fraction of steps (< 1) or a step count (>= 1)
    schedule: str = "cosine"  # cosine | wsd | constant
    decay_fraction: float = 0.2  # wsd: the final fraction spent decaying
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    optimizer: str = "adamw"  # adamw | muon
    seed: int = 0
    eval_every: int = 100
    eval_windows: int = 64
    eval_batch: int = 32
    checkpoint_every: int = 0  # 0: only on signals (and when a run dir is given, at the end)
    device: str = "auto"
    compile: bool = False
    divergence_factor: float = 2.5
    threads: int | None = None

    def shape(self, vocab_size: int) -> Shape:
        return Shape(n_layer=self.n_layer, d_model=self.d_model, n_head=self.n_head,
                     d_ff=self.d_ff, ff_ratio=self.ff_ratio, n_kv_head=self.n_kv_head,
                     vocab_size=self.vocab_size or vocab_size, n_ctx=self.ctx, mlp=self.mlp,
                     tied_embeddings=self.tied_embeddings, position=self.position,
                     bias=self.bias, norm=self.norm, qk_norm=self.qk_norm)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ArchfitError(f"unknown training options: {', '.join(sorted(unknown))}")
        return cls(**d)


@dataclass
class RunResult:
    status: str  # ok | diverged | failed | preempted
    error: str | None = None
    final_val_loss: float | None = None
    best_val_loss: float | None = None
    final_train_loss: float | None = None
    tokens: int = 0
    steps: int = 0
    wall_s: float = 0.0
    train_s: float = 0.0
    tokens_per_s: float | None = None
    flops: float | None = None
    flops_convention: str = "kaplan_train: 6N + 6*n_layer*n_ctx*d_model per token"
    mfu: float | None = None
    peak_memory_bytes: int | None = None
    device: str = "cpu"
    data_hash: str | None = None
    data_name: str | None = None
    params_total: int | None = None
    params_non_embedding: int | None = None
    shape: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    curve: list[dict[str, Any]] = field(default_factory=list)
    archfit_version: str = ""
    resumed_from_step: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Preempted(Exception):
    pass


def peak_flops(device_name: str) -> float | None:
    for key, value in PEAK_FLOPS:
        if key in device_name:
            return value
    return None


def lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    warm = int(cfg.warmup if cfg.warmup >= 1 else round(cfg.warmup * total))
    if warm and step < warm:
        return cfg.lr * (step + 1) / warm
    lo = cfg.lr * cfg.min_lr_ratio
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule == "wsd":
        start = int(total * (1 - cfg.decay_fraction))
        if step < start:
            return cfg.lr
        frac = (step - start) / max(1, total - start)
        return cfg.lr + (lo - cfg.lr) * frac
    frac = (step - warm) / max(1, total - warm)
    return lo + 0.5 * (cfg.lr - lo) * (1 + math.cos(math.pi * min(1.0, frac)))


def _device(cfg: TrainConfig) -> str:
    import torch

    if cfg.device != "auto":
        return cfg.device
    return "cuda" if torch.cuda.is_available() else "cpu"


def _optimizers(model: Any, cfg: TrainConfig, device: str) -> list[Any]:
    import torch

    sc = model.scaling
    hidden = {id(p) for p in model.hidden_matrices()}
    matrices = [p for p in model.parameters() if p.ndim >= 2 and id(p) not in hidden]
    hid = [p for p in model.parameters() if id(p) in hidden]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    kw = dict(betas=(cfg.beta1, cfg.beta2), eps=1e-8)
    if device.startswith("cuda"):
        kw["fused"] = True
    if cfg.optimizer == "muon":
        if not hasattr(torch.optim, "Muon"):
            raise ArchfitError("optimizer muon needs torch >= 2.9 (torch.optim.Muon)")
        adam = torch.optim.AdamW(
            [{"params": matrices, "weight_decay": cfg.weight_decay, "lr_mult": 1.0},
             {"params": vectors, "weight_decay": 0.0, "lr_mult": 1.0}], lr=cfg.lr, **kw)
        muon = torch.optim.Muon(hid, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                adjust_lr_fn="match_rms_adamw")
        for g in muon.param_groups:
            g["lr_mult"] = 1.0
        return [adam, muon]
    if cfg.optimizer != "adamw":
        raise ArchfitError(f"optimizer must be adamw or muon, got {cfg.optimizer!r}")
    groups = [{"params": matrices, "weight_decay": cfg.weight_decay, "lr_mult": 1.0},
              {"params": hid, "weight_decay": cfg.weight_decay, "lr_mult": sc.hidden_lr_mult},
              {"params": vectors, "weight_decay": 0.0, "lr_mult": 1.0}]
    return [torch.optim.AdamW([g for g in groups if g["params"]], lr=cfg.lr, **kw)]


def _atomic_save(obj: Any, path: str) -> None:
    import torch

    tmp = f"{path}.tmp-{os.getpid()}"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def train(cfg: TrainConfig, run_dir: str | None = None,
          progress: Callable[[dict[str, Any]], None] | None = None) -> RunResult:
    """Train one model. With ``run_dir``, checkpoints go to ``run_dir/checkpoint.pt`` and a run
    found there is resumed. Bad input raises a typed :class:`ArchfitError`; a run that diverges
    or fails returns a result with that status (nothing is raised)."""
    import torch

    import archfit
    from archfit import data as data_mod
    from archfit.model import GPT

    t_wall = time.perf_counter()
    for name in ("batch_size", "grad_accum", "ctx", "eval_every", "eval_windows"):
        if getattr(cfg, name) <= 0:
            raise ArchfitError(f"{name} must be positive, got {getattr(cfg, name)}")
    if not cfg.lr > 0:
        raise ArchfitError(f"lr must be positive, got {cfg.lr}")
    budgets = [b for b in (cfg.tokens, cfg.tokens_per_param, cfg.steps) if b is not None]
    if len(budgets) != 1:
        raise ArchfitError("give exactly one budget: tokens, tokens_per_param or steps")
    if budgets[0] <= 0:
        raise ArchfitError(f"the budget must be positive, got {budgets[0]}")

    td = data_mod.load(cfg.data, cfg.vocab_size)
    td.check_window(cfg.ctx)
    shape = cfg.shape(td.vocab_size)
    if shape.vocab_size < td.vocab_size:
        raise DataError(f"{td.name}: vocabulary {td.vocab_size} exceeds the model's "
                        f"{shape.vocab_size}")
    device = _device(cfg)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    tokens_per_step = cfg.batch_size * cfg.grad_accum * cfg.ctx
    if cfg.steps is not None:
        total_steps = int(cfg.steps)
    else:
        budget = cfg.tokens if cfg.tokens is not None else (
            cfg.tokens_per_param * shape.params_non_embedding)  # type: ignore[operator]
        total_steps = max(1, int(round(budget / tokens_per_step)))

    result = RunResult(status="ok", device=device, data_hash=td.data_hash, data_name=td.name,
                       params_total=shape.params_total,
                       params_non_embedding=shape.params_non_embedding, shape=shape.to_dict(),
                       config=cfg.to_dict(), archfit_version=archfit.__version__)
    result.shape.pop("breakdown", None)

    torch.manual_seed(cfg.seed)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = GPT(shape, cfg.parametrization, cfg.mup_base_width, cfg.mup_base_depth).to(device)
    if model.num_params() != shape.params_total:  # the shape core is the one count
        raise AssertionError("model and shape disagree on the parameter count")
    opts = _optimizers(model, cfg, device)
    step_fn = torch.compile(model) if cfg.compile else model
    rng = np.random.default_rng(cfg.seed)
    val = torch.from_numpy(td.val_windows(cfg.eval_windows, cfg.ctx)).to(device)
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device.startswith("cuda")
                else torch.autocast("cpu", enabled=False))

    start_step, best_val, curve = 0, math.inf, []
    ckpt_path = os.path.join(run_dir, "checkpoint.pt") if run_dir else None
    if ckpt_path and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path, map_location=device, weights_only=False)
        model.load_state_dict(ck["model"])
        for o, s in zip(opts, ck["optimizers"]):
            o.load_state_dict(s)
        rng.bit_generator.state = ck["data_rng"]
        torch.set_rng_state(ck["torch_rng"])
        start_step, best_val, curve = ck["step"], ck["best_val"], ck["curve"]
        result.resumed_from_step = start_step

    def evaluate() -> float:
        model.eval()
        losses = []
        with torch.no_grad(), autocast:
            for i in range(0, len(val), cfg.eval_batch):
                w = val[i:i + cfg.eval_batch]
                _, loss = step_fn(w[:, :-1], w[:, 1:])
                losses.append(float(loss) * len(w))
        model.train()
        return sum(losses) / len(val)

    def save(step: int) -> None:
        if ckpt_path is None:
            return
        _atomic_save({"model": model.state_dict(), "optimizers": [o.state_dict() for o in opts],
                      "data_rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                      "step": step, "best_val": best_val, "curve": curve,
                      "config": cfg.to_dict()}, ckpt_path)

    stop = {"signal": None}
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        stop["signal"] = signum

    import threading

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGUSR2):
            previous[sig] = signal.signal(sig, on_signal)

    train_time = 0.0
    ema = None
    run_min = math.inf
    last_train = None
    try:
        model.train()
        for step in range(start_step, total_steps):
            if stop["signal"] is not None:
                save(step)
                prev = previous.get(stop["signal"])
                if callable(prev):  # e.g. submitit's handler: requeue the job, then exit
                    signal.signal(stop["signal"], prev)
                    prev(stop["signal"], None)
                raise Preempted(f"stopped by signal {stop['signal']} at step {step}")
            t0 = time.perf_counter()
            lr = lr_at(step, total_steps, cfg)
            for o in opts:
                for g in o.param_groups:
                    g["lr"] = lr * g.get("lr_mult", 1.0)
            total = 0.0
            for _ in range(cfg.grad_accum):
                x, y = td.batch(rng, cfg.batch_size, cfg.ctx)
                xb = torch.from_numpy(x).to(device, non_blocking=True)
                yb = torch.from_numpy(y).to(device, non_blocking=True)
                with autocast:
                    _, loss = step_fn(xb, yb)
                (loss / cfg.grad_accum).backward()
                total += float(loss.detach()) / cfg.grad_accum
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            for o in opts:
                o.step()
                o.zero_grad(set_to_none=True)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            train_time += time.perf_counter() - t0
            last_train = total
            point: dict[str, Any] = {"step": step + 1, "tokens": (step + 1) * tokens_per_step,
                                     "train_loss": total, "lr": lr}
            if not math.isfinite(total):
                result.status, result.error = "diverged", f"non-finite loss at step {step + 1}"
                curve.append(point)
                break
            ema = total if ema is None else 0.8 * ema + 0.2 * total
            run_min = min(run_min, ema)
            if step > 10 and ema > cfg.divergence_factor * run_min:
                result.status = "diverged"
                result.error = (f"loss {ema:.3g} rose above {cfg.divergence_factor}x its running "
                                f"minimum {run_min:.3g} at step {step + 1}")
                curve.append(point)
                break
            if (step + 1) % cfg.eval_every == 0 or step + 1 == total_steps:
                v = evaluate()
                best_val = min(best_val, v)
                point["val_loss"] = v
            curve.append(point)
            if progress is not None:
                progress({**point, "total_steps": total_steps})
            if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0:
                save(step + 1)
    except Preempted as e:
        result.status, result.error = "preempted", str(e)
    except (ArchfitError, KeyboardInterrupt):
        raise
    except Exception as e:  # a failing run is recorded, not raised
        result.status = "failed"
        result.error = f"{type(e).__name__}: {e}".splitlines()[0]
        result.config["traceback"] = traceback.format_exc(limit=5)
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)

    vals = [p["val_loss"] for p in curve if "val_loss" in p]
    done_steps = curve[-1]["step"] if curve else start_step
    result.steps = done_steps
    result.tokens = done_steps * tokens_per_step
    result.final_val_loss = vals[-1] if vals else None
    result.best_val_loss = min(vals) if vals else None
    result.final_train_loss = last_train
    result.curve = curve
    result.train_s = train_time
    steps_this = done_steps - start_step
    if train_time > 0 and steps_this > 0:
        result.tokens_per_s = steps_this * tokens_per_step / train_time
    fpt = shape.flops_per_token("kaplan_train")
    result.flops = fpt * result.tokens
    if device.startswith("cuda"):
        import torch as _t

        result.peak_memory_bytes = int(_t.cuda.max_memory_allocated())
        peak = peak_flops(_t.cuda.get_device_name())
        if peak and result.tokens_per_s:
            result.mfu = fpt * result.tokens_per_s / peak
    else:
        import resource

        result.peak_memory_bytes = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    if ckpt_path and result.status == "ok":
        save(done_steps)
    result.wall_s = time.perf_counter() - t_wall
    return result
