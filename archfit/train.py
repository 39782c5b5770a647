"""One training run: ``train(TrainConfig(shape=..., budget=...)) -> RunResult``.

AdamW (fused on CUDA; weight decay only on matrices), optional Muon for hidden matrices, linear
warmup then cosine or warmup-stable-decay, grad clipping, gradient accumulation, bf16 autocast and
TF32 on CUDA (fp32 on CPU), optional ``torch.compile``. Budgets by tokens, tokens per parameter or
steps (:class:`Budget`). Checkpoints (model, optimizer, step, data-sampler and RNG state) every k
steps and on SIGTERM/SIGUSR2; a resumed run continues with the same losses as an uninterrupted
one. torch is imported inside :func:`train` only.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable

import numpy as np

from archfit.errors import ArchfitError, DataError, RunDirError
from archfit.io import atomic_path
from archfit.shapes import Shape

# a stop signal in the middle of a step: checkpoint at the step's end, or, if the step has not
# ended this many seconds after the signal, exit keeping the last checkpoint
STOP_GRACE_S = 30.0
EXIT_PREEMPTED = 143  # 128 + SIGTERM: what schedulers expect of a job stopped by a signal
# config keys that may change between a run and its resume (they do not change its numbers)
RESUMABLE_CHANGES = ("device", "threads", "compile", "checkpoint_every", "eval_batch",
                     "micro_batch")
# config keys that say how a run is executed, not what it computes: not part of its identity
RUNTIME_KEYS = ("micro_batch",)


@dataclass(frozen=True)
class Budget:
    """How long a run trains: exactly one of ``tokens``, ``tokens_per_param`` (per
    non-embedding parameter) or ``steps``."""

    tokens: float | None = None
    tokens_per_param: float | None = None
    steps: int | None = None

    def __post_init__(self) -> None:
        given = [(k, v) for k, v in asdict(self).items() if v is not None]
        if len(given) != 1:
            raise ArchfitError("give exactly one budget: tokens, tokens_per_param or steps")
        k, v = given[0]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or (
                k == "steps" and int(v) != v):
            raise ArchfitError(f"the budget {k} must be a positive "
                               f"{'whole ' if k == 'steps' else ''}number, got {v!r}")

    def steps_for(self, shape: Shape, tokens_per_step: int) -> int:
        """Optimizer steps this budget buys for ``shape`` at ``tokens_per_step``."""
        if self.steps is not None:
            return int(self.steps)
        tokens = self.tokens if self.tokens is not None else (
            self.tokens_per_param * shape.params_non_embedding)  # type: ignore[operator]
        return max(1, int(round(tokens / tokens_per_step)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_SHAPE_KEYS = ("n_layer", "d_model", "n_head", "d_ff", "ff_ratio", "n_kv_head", "mlp",
               "position", "tied_embeddings", "bias", "norm", "qk_norm")
# written only when set, so the records (and run ids) of shapes without them are unchanged
_OPTIONAL_SHAPE_KEYS = ("qkv_bias",)
_FLAT_SHAPE = _SHAPE_KEYS + _OPTIONAL_SHAPE_KEYS + ("vocab_size", "ctx")  # flat on-disk names
_BUDGET_KEYS = ("tokens", "tokens_per_param", "steps")
# options added after 0.1: in the record only when not at their default (run ids unchanged)
_OPTIONAL_CFG = ("precision", "parallel", "micro_batch", "data_sha256")
PRECISIONS = ("auto", "bf16", "fp32")
PARALLEL = ("ddp", "fsdp")


@dataclass
class TrainConfig:
    """Everything that defines a run: a :class:`Shape`, a :class:`Budget` and how to train.

    ``vocab_from_data``: size the vocabulary from the data (the shape's ``vocab_size`` is then
    replaced by the data's). :meth:`to_dict` gives the flat record that run ids hash and
    ``config.json`` stores; :meth:`from_dict` reads it back.
    """

    shape: Shape = field(default_factory=lambda: Shape(n_layer=4, d_model=128, n_head=4,
                                                       vocab_size=256, n_ctx=256))
    budget: Budget | None = None
    vocab_from_data: bool = False
    parametrization: str = "standard"
    mup_base_width: int = 128
    mup_base_depth: int = 2
    data: str | None = None  # None: the embedded default corpus
    # a prepared dataset's manifest hash (archfit data prepare): part of the run's identity,
    # checked against the data when the run starts
    data_sha256: str | None = None
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
    precision: str = "auto"  # auto: bf16 autocast on CUDA, fp32 elsewhere | bf16 | fp32
    parallel: str = "ddp"  # with several processes: ddp | fsdp (FSDP2 fully_shard)
    # sequences per forward pass and process (None: the whole share of a batch); a batch is
    # split into micro-batches whose gradients add up to the batch's, so the numbers are the
    # same whatever fits in memory (archfit.memory.choose_micro_batch picks it)
    micro_batch: int | None = None

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.grad_accum * self.shape.n_ctx

    def validate(self) -> None:
        """The one check of a config before work starts (shape and budget check themselves)."""
        if self.budget is None:
            raise ArchfitError("give exactly one budget: tokens, tokens_per_param or steps")
        for name in ("batch_size", "grad_accum", "eval_every", "eval_windows"):
            if getattr(self, name) <= 0:
                raise ArchfitError(f"{name} must be positive, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ArchfitError(f"lr must be positive, got {self.lr}")
        if self.micro_batch is not None and (not isinstance(self.micro_batch, int)
                                             or self.micro_batch <= 0):
            raise ArchfitError(f"micro_batch must be a positive whole number, got "
                               f"{self.micro_batch!r}")
        if self.precision not in PRECISIONS:
            raise ArchfitError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                               f"{self.precision!r}")
        if self.parallel not in PARALLEL:
            raise ArchfitError(f"parallel must be one of {', '.join(PARALLEL)}, got "
                               f"{self.parallel!r}")

    def steps(self) -> int:
        self.validate()
        return self.budget.steps_for(self.shape, self.tokens_per_step)  # type: ignore[union-attr]

    def to_dict(self) -> dict[str, Any]:
        s = self.shape
        out: dict[str, Any] = {k: getattr(s, k) for k in _SHAPE_KEYS}
        out.update({k: True for k in _OPTIONAL_SHAPE_KEYS if getattr(s, k)})
        out.update(ff_ratio=None, vocab_size=None if self.vocab_from_data else s.vocab_size,
                   ctx=s.n_ctx)
        out.update(self.budget.to_dict() if self.budget else dict.fromkeys(_BUDGET_KEYS))
        out.update({f.name: getattr(self, f.name) for f in fields(self)
                    if f.name not in ("shape", "budget", "vocab_from_data")
                    and not (f.name in _OPTIONAL_CFG and getattr(self, f.name) == f.default)})
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """A config from the flat record of :meth:`to_dict` (``config.json``)."""
        own = {f.name for f in fields(cls)} - {"shape", "budget", "vocab_from_data"}
        unknown = set(d) - own - set(_FLAT_SHAPE) - set(_BUDGET_KEYS)
        if unknown:
            raise ArchfitError(f"unknown training options: {', '.join(sorted(unknown))}")
        return cls(**{k: v for k, v in d.items() if k in own}, **_from_flat(d))


def _from_flat(d: dict[str, Any]) -> dict[str, Any]:
    """shape / budget / vocab_from_data from flat keys (``n_layer=..., ctx=..., tokens=...``)."""
    out: dict[str, Any] = {}
    sk = {k: d[k] for k in _SHAPE_KEYS + _OPTIONAL_SHAPE_KEYS if k in d and d[k] is not None}
    if sk or "ctx" in d or "vocab_size" in d:
        base = {"n_layer": 4, "d_model": 128, "n_head": 4}
        out["shape"] = Shape(**{**base, **sk}, vocab_size=d.get("vocab_size") or 256,
                             n_ctx=d.get("ctx") or 256)
        out["vocab_from_data"] = d.get("vocab_size") is None
    bk = {k: d[k] for k in _BUDGET_KEYS if d.get(k) is not None}
    if bk:
        out["budget"] = Budget(**bk)
    return out


_dataclass_init = TrainConfig.__init__


def _init(self: TrainConfig, *args: Any, **kw: Any) -> None:
    flat = {k: kw.pop(k) for k in list(kw) if k in _FLAT_SHAPE or k in _BUDGET_KEYS}
    if flat:
        warnings.warn("TrainConfig(n_layer=..., ctx=..., tokens=...) is deprecated: pass "
                      "shape=Shape(...) and budget=Budget(...)", DeprecationWarning, stacklevel=2)
        flat.setdefault("vocab_size", None)
        kw.update(_from_flat(flat))
    _dataclass_init(self, *args, **kw)


TrainConfig.__init__ = _init  # type: ignore[method-assign]


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
    world_size: int = 1  # processes that trained this run (torch.distributed)
    parallel: str | None = None  # ddp | fsdp when world_size > 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Preempted(Exception):
    pass


def peak_flops(device_name: str) -> float | None:
    """bf16 dense peak FLOP/s of a CUDA device (archfit.perf's table); None when unknown (the
    run's MFU is then null)."""
    from archfit.perf import DEVICES, device_key

    key = device_key(device_name)
    return DEVICES[key].peak_flops if key else None


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

    if cfg.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ArchfitError(f"--device {cfg.device}: this machine has no CUDA device "
                           "(torch.cuda.is_available() is False); use --device cpu or auto")
    if cfg.device.startswith("mps") and not torch.backends.mps.is_available():
        raise ArchfitError(f"--device {cfg.device}: MPS is not available here; use cpu or auto")
    try:
        torch.device(cfg.device)
    except RuntimeError:
        raise ArchfitError(f"--device {cfg.device!r}: not a torch device; use auto, cpu, cuda "
                           "or cuda:N") from None
    return cfg.device


def _optimizers(model: Any, cfg: TrainConfig, device: str) -> list[Any]:
    import torch

    sc = model.scaling
    hidden = {id(p) for p in model.hidden_matrices()}
    matrices = [p for p in model.parameters() if p.ndim >= 2 and id(p) not in hidden]
    hid = [p for p in model.parameters() if id(p) in hidden]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    kw: dict[str, Any] = dict(betas=(cfg.beta1, cfg.beta2), eps=1e-8)
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


# ============================================================================ processes
@dataclass
class _Dist:
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


def _dist_setup(cfg: TrainConfig, device: str) -> tuple[_Dist, str]:
    """Join the process group when the environment names one (WORLD_SIZE > 1): gloo on CPU,
    NCCL on CUDA, one GPU per process (LOCAL_RANK)."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return _Dist(), device
    import torch
    import torch.distributed as dist

    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if cfg.batch_size % world:
        raise ArchfitError(f"batch_size {cfg.batch_size} is not divisible by the {world} "
                           "processes; each takes an equal share of every batch")
    if device.startswith("cuda"):
        idx = local if torch.cuda.device_count() > local else 0
        torch.cuda.set_device(idx)
        device = f"cuda:{idx}"
    owned = not dist.is_initialized()
    if owned:
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return _Dist(rank, world, local, owned), device


def auto_micro_batch(cfg: TrainConfig, shape: Shape, world: int, device_bytes: int
                     ) -> TrainConfig:
    """The config with the largest micro-batch whose estimated peak (archfit.memory) fits the
    device's memory; unchanged when the whole share fits, or when nothing does (the run then
    tries its whole share, and the device says whether it fits)."""
    from dataclasses import replace

    from archfit.memory import choose_micro_batch

    bf16 = cfg.precision in ("auto", "bf16")
    try:
        m, _, _ = choose_micro_batch(shape, cfg.batch_size // world, device_bytes,
                                     precision="bf16" if bf16 else "fp32",
                                     optimizer=cfg.optimizer, parallel=cfg.parallel,
                                     world=world, overhead_gib=1.0)
    except ArchfitError:
        return cfg
    return cfg if m == cfg.batch_size // world else replace(cfg, micro_batch=m)


def check_memory(cfg: TrainConfig, shape: Shape, device: str, world: int = 1) -> None:
    """Refuse, before anything is allocated, a run whose estimated peak (archfit.memory) does
    not fit this machine: on CUDA the device's memory at a micro-batch of one sequence (the run
    picks the largest that fits), elsewhere the memory the host has available at the run's
    micro-batch. Skip it with ``train(..., memory_check=False)`` (``--no-memory-check``)."""
    from archfit import memory

    share = max(1, cfg.batch_size // world)
    bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and device.startswith("cuda"))
    kw = dict(precision="bf16" if bf16 else "fp32", optimizer=cfg.optimizer,
              parallel=cfg.parallel, world=world)
    if device.startswith("cuda"):
        import torch

        have = torch.cuda.get_device_properties(device).total_memory
        micro, where = cfg.micro_batch or 1, f"{torch.cuda.get_device_name(device)}'s memory"
        need = memory.estimate(shape, micro, overhead_gib=1.0, **kw).total  # type: ignore[arg-type]
    else:
        room = memory.host_memory_bytes()
        if room is None:
            return
        # every local process of a multi-process run takes its own share of the host
        have, micro, where = room // max(1, world), min(cfg.micro_batch or share, share), \
            "the memory this machine has available" + (f" per process ({world})" if world > 1
                                                       else "")
        need = memory.estimate(shape, micro, **kw).total  # type: ignore[arg-type]
    if need > have:
        gib = memory.GIB
        raise ArchfitError(
            f"{shape.n_layer}x{shape.d_model} at ctx {shape.n_ctx:,} with {micro} sequence(s) "
            f"per pass needs about {need / gib:.1f} GiB (archfit.memory's estimate), more than "
            f"{where} ({have / gib:.1f} GiB); shorten --ctx, or lower --batch-size (raise "
            "--grad-accum to keep the tokens per step), or --no-memory-check to try anyway")


def _wrap(model: Any, cfg: TrainConfig, d: _Dist, device: str) -> Any:
    """The model the steps run: itself, DDP, or FSDP2 (``fully_shard`` on each block and the
    root) when several processes train it."""
    if d.world == 1:
        return model
    if cfg.parallel == "fsdp":
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            raise ArchfitError("parallel fsdp needs torch >= 2.6 (torch.distributed.fsdp."
                               "fully_shard); use parallel ddp") from None
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
        return model
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=[d.local_rank] if device.startswith(
        "cuda") else None)


# ============================================================================ one run
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
    dist: _Dist = field(default_factory=_Dist)
    start_step: int = 0
    best_val: float = math.inf
    curve: list[dict[str, Any]] = field(default_factory=list)
    train_time: float = 0.0
    last_train: float | None = None

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


def _autocast(cfg: TrainConfig, device: str) -> Any:
    """bf16 autocast on CUDA (``auto``) or wherever asked (``bf16``, CPU included: the same
    code path a GPU run takes); fp32 otherwise."""
    import torch

    kind = device.split(":")[0]
    bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and kind == "cuda")
    return torch.autocast(kind if kind in ("cuda", "cpu") else "cpu", dtype=torch.bfloat16,
                          enabled=bf16)


def _setup(cfg: TrainConfig, run_dir: str | None, memory_check: bool = True) -> _Session:
    import torch

    import archfit
    from archfit import data as data_mod
    from archfit.model import GPT

    device = _device(cfg)  # before anything slow: a missing device is a bad input
    dist, device = _dist_setup(cfg, device)
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
                       config=cfg.to_dict(), archfit_version=archfit.__version__)
    result.shape.pop("breakdown", None)
    torch.manual_seed(cfg.seed)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = GPT(shape, cfg.parametrization, cfg.mup_base_width, cfg.mup_base_depth).to(device)
    if model.num_params() != shape.params_total:  # the shape core is the one count
        raise AssertionError("model and shape disagree on the parameter count")
    wrapped = _wrap(model, cfg, dist, device)
    if device.startswith("cuda") and cfg.micro_batch is None:
        import torch

        cfg = auto_micro_batch(cfg, shape, dist.world,
                               torch.cuda.get_device_properties(device).total_memory)
        result.config = cfg.to_dict()
    result.world_size = dist.world
    result.parallel = cfg.parallel if dist.world > 1 else None
    return _Session(
        cfg=cfg, shape=shape, td=td, device=device, model=model,
        opts=_optimizers(model, cfg, device),  # after fully_shard: on the sharded parameters
        step_fn=torch.compile(wrapped) if cfg.compile else wrapped,
        val=torch.from_numpy(td.val_windows(cfg.eval_windows, shape.n_ctx)).to(device),
        autocast=_autocast(cfg, device),
        total_steps=cfg.budget.steps_for(shape, cfg.tokens_per_step),  # type: ignore[union-attr]
        ckpt_path=os.path.join(run_dir, "checkpoint.pt") if run_dir else None,
        result=result, rng=np.random.default_rng(cfg.seed), dist=dist)


def load_checkpoint(path: str, device: str = "cpu") -> dict[str, Any]:
    """A checkpoint of archfit's, read with ``torch.load(weights_only=True)``: tensors and plain
    values only, so a planted file cannot run code. Anything else is refused in one line
    (:class:`RunDirError`), and nothing in it is executed."""
    import pickle

    import torch

    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols it will refuse
            warnings.simplefilter("ignore")
            ck = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as e:
        import re

        m = re.search(r"GLOBAL ([\w.]+)|Unsupported (operand \d+)", str(e))
        detail = f" (it asks for {m.group(1) or m.group(2)})" if m else ""
        raise RunDirError(f"{path}: holds objects archfit's checkpoints never contain{detail}; "
                          "refusing to load it, since unpickling it could run code (delete it, "
                          "or --restart to discard it)") from None
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a damaged file
        raise RunDirError(f"{path}: cannot be read ({type(e).__name__}); use --restart to "
                          "discard it") from None
    if not isinstance(ck, dict) or not {"model", "optimizers", "step"} <= set(ck):
        raise RunDirError(f"{path}: not an archfit checkpoint (no model, optimizers and step); "
                          "use --restart to discard it")
    return ck


def _resume(s: _Session, restart: bool) -> None:
    """Continue from the run directory's checkpoint, if it is this run's; refuse another run's
    (the difference shown) unless ``restart``, which discards it."""
    s.dist.barrier()  # every process sees the same checkpoint (or none)
    try:
        _resume_from_file(s, restart)
    finally:
        s.dist.barrier()


def _resume_from_file(s: _Session, restart: bool) -> None:
    if not (s.ckpt_path and os.path.exists(s.ckpt_path)):
        return
    import torch

    ck = None
    try:
        ck = load_checkpoint(s.ckpt_path, s.device)
    except RunDirError:
        if not restart:
            raise
    mine = s.cfg.to_dict()
    theirs = (ck or {}).get("config") or {}
    diff = [f"{k} {theirs.get(k)!r} -> {v!r}" for k, v in mine.items()
            if k not in RESUMABLE_CHANGES and theirs.get(k) != v]
    if ck is None or diff:
        if not restart:
            raise RunDirError(f"{os.path.dirname(s.ckpt_path)}: holds a checkpoint of another "
                              f"run ({'; '.join(diff[:4])}); use --restart to discard it, or "
                              "another --run-dir")
        if s.dist.main:
            os.unlink(s.ckpt_path)
        return
    s.load_state(ck["model"], ck["optimizers"])
    s.rng.bit_generator.state = ck["data_rng"]
    torch.set_rng_state(ck["torch_rng"])
    s.start_step, s.best_val, s.curve = ck["step"], ck["best_val"], ck["curve"]
    s.result.resumed_from_step = s.start_step


class _Signals:
    """SIGTERM/SIGUSR2 set a flag the loop checks at each step boundary (there it checkpoints
    and stops); the handlers installed before are restored afterwards (and called after the
    checkpoint: submitit's requeue).

    The stop is bounded even when the signal lands inside one long operation (a torch kernel
    holds the main thread, so a Python handler would run only when it returns): the C-level
    handler writes each signal to a pipe (:func:`signal.set_wakeup_fd`) at once, and a watchdog
    thread reading it starts the grace period then. A step still running ``grace_s`` after the
    signal is abandoned: the process exits with :data:`EXIT_PREEMPTED`, keeping the last
    checkpoint (written atomically, so intact). A second SIGTERM exits at once."""

    SIGNALS = (signal.SIGTERM, signal.SIGUSR2)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}
        self.grace_s = float(os.environ.get("ARCHFIT_STOP_GRACE_S", STOP_GRACE_S))
        self.timer: threading.Timer | None = None
        self.terms = 0  # SIGTERMs seen (counted by the watchdog alone)
        self._pipe: tuple[int, int] | None = None
        self._old_fd = -1
        self._lock = threading.Lock()

    def __enter__(self) -> _Signals:
        if threading.current_thread() is not threading.main_thread():
            return self  # signals reach the main thread only: its owner handles them
        for sig in self.SIGNALS:
            self.previous[sig] = signal.signal(sig, self._on_signal)
        r, w = os.pipe()
        os.set_blocking(w, False)
        try:
            self._old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:  # pragma: no cover - not the main thread of the main interpreter
            os.close(r)
            os.close(w)
            return self
        self._pipe = (r, w)
        threading.Thread(target=self._watch, args=(r,), name="archfit-stop-watchdog",
                         daemon=True).start()
        return self

    def _on_signal(self, signum: int, frame: Any) -> None:
        # runs when the main thread is between bytecodes: raise the flag now, so the loop
        # stops at the very next step boundary; the watchdog counts each signal (here when
        # set_wakeup_fd is unavailable) and starts the grace period
        if self._pipe is None:
            self._seen(signum)
        elif self.signum is None:
            self.signum = signum

    def _watch(self, fd: int) -> None:
        try:
            while True:
                data = os.read(fd, 64)
                if not data:  # the write end was closed: the run is over
                    return
                for signum in data:
                    if signum in self.SIGNALS:
                        self._seen(signum)
        except OSError:
            return
        finally:
            os.close(fd)  # the reader closes its own end, so the number is never reused under it

    def _seen(self, signum: int) -> None:
        with self._lock:
            if signum == signal.SIGTERM:
                self.terms += 1
                if self.terms > 1 or (self.signum is not None and self.signum != signum):
                    os._exit(EXIT_PREEMPTED)  # asked twice: now
            if self.signum is None:
                self.signum = signum
            if self.timer is None:
                self.timer = threading.Timer(self.grace_s, os._exit, args=(EXIT_PREEMPTED,))
                self.timer.daemon = True
                self.timer.start()

    def chain(self) -> None:
        prev = self.previous.get(self.signum)  # type: ignore[arg-type]
        if callable(prev):  # e.g. submitit's handler: requeue the job, then exit
            self._restore()
            prev(self.signum, None)

    def _restore(self) -> None:
        if self._pipe is not None:
            signal.set_wakeup_fd(self._old_fd)
            _, w = self._pipe
            self._pipe = None
            os.close(w)
        for sig, h in self.previous.items():
            signal.signal(sig, h)
        self.previous = {}

    def __exit__(self, *exc: Any) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self._restore()


def _step(s: _Session, step: int) -> tuple[float, float]:
    """One optimizer step (with gradient accumulation); returns (train loss, lr)."""
    import torch

    cfg = s.cfg
    lr = lr_at(step, s.total_steps, cfg)
    for o in s.opts:
        for g in o.param_groups:
            g["lr"] = lr * g.get("lr_mult", 1.0)
    total = 0.0
    d = s.dist
    share = cfg.batch_size // d.world  # every process draws the same batch, takes its rows
    micro = min(cfg.micro_batch or share, share)
    if share % micro:
        raise ArchfitError(f"micro_batch {micro} does not divide the {share} sequences each "
                           "process takes of a batch")
    passes = cfg.grad_accum * (share // micro)
    for k in range(passes):
        if k % (share // micro) == 0:
            x, y = s.td.batch(s.rng, cfg.batch_size, s.shape.n_ctx)
        lo = d.rank * share + (k % (share // micro)) * micro
        xb = torch.from_numpy(x[lo:lo + micro]).to(s.device, non_blocking=True)
        yb = torch.from_numpy(y[lo:lo + micro]).to(s.device, non_blocking=True)
        sync = k == passes - 1 or not hasattr(s.step_fn, "no_sync")
        with contextlib.nullcontext() if sync else s.step_fn.no_sync():
            with s.autocast:
                _, loss = s.step_fn(xb, yb)
            (loss / passes).backward()
        total += float(loss.detach()) / passes
    total = d.mean(total)
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(s.model.parameters(), cfg.grad_clip)
    for o in s.opts:
        o.step()
        o.zero_grad(set_to_none=True)
    if s.device.startswith("cuda"):
        torch.cuda.synchronize()
    return total, lr


def _loop(s: _Session, sig: _Signals, progress: Callable[[dict[str, Any]], None] | None
          ) -> None:
    cfg, ema, run_min = s.cfg, None, math.inf
    s.model.train()
    for step in range(s.start_step, s.total_steps):
        if s.dist.any(sig.signum is not None):
            s.save(step)
            sig.chain()
            raise Preempted(f"stopped by signal {sig.signum or 'on another process'} at step "
                            f"{step}")
        t0 = time.perf_counter()
        total, lr = _step(s, step)
        s.train_time += time.perf_counter() - t0
        s.last_train = total
        point: dict[str, Any] = {"step": step + 1, "tokens": (step + 1) * cfg.tokens_per_step,
                                 "train_loss": total, "lr": lr}
        ema = total if ema is None else 0.8 * ema + 0.2 * total
        run_min = min(run_min, ema)
        if not math.isfinite(total):
            s.result.status, s.result.error = "diverged", f"non-finite loss at step {step + 1}"
        elif step > 10 and ema > cfg.divergence_factor * run_min:
            s.result.status = "diverged"
            s.result.error = (f"loss {ema:.3g} rose above {cfg.divergence_factor}x its running "
                              f"minimum {run_min:.3g} at step {step + 1}")
        if s.result.status == "diverged":
            s.curve.append(point)
            return
        if (step + 1) % cfg.eval_every == 0 or step + 1 == s.total_steps:
            point["val_loss"] = s.evaluate()
            s.best_val = min(s.best_val, point["val_loss"])
        s.curve.append(point)
        if progress is not None and s.dist.main:
            progress({**point, "total_steps": s.total_steps})
        if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0:
            s.save(step + 1)


def _finish(s: _Session, t_wall: float) -> RunResult:
    r, cfg = s.result, s.cfg
    vals = [p["val_loss"] for p in s.curve if "val_loss" in p]
    done_steps = s.curve[-1]["step"] if s.curve else s.start_step
    r.steps, r.tokens = done_steps, done_steps * cfg.tokens_per_step
    r.final_val_loss = vals[-1] if vals else None
    r.best_val_loss = min(vals) if vals else None
    r.final_train_loss, r.curve, r.train_s = s.last_train, s.curve, s.train_time
    if s.train_time > 0 and done_steps > s.start_step:
        r.tokens_per_s = (done_steps - s.start_step) * cfg.tokens_per_step / s.train_time
    fpt = s.shape.flops_per_token("kaplan_train")
    r.flops = fpt * r.tokens
    if s.device.startswith("cuda"):
        import torch

        r.peak_memory_bytes = int(torch.cuda.max_memory_allocated())
        peak = peak_flops(torch.cuda.get_device_name())
        if peak and r.tokens_per_s:
            r.mfu = fpt * r.tokens_per_s / peak
    else:
        import resource

        r.peak_memory_bytes = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    if r.status == "ok":
        s.save(done_steps)
    r.wall_s = time.perf_counter() - t_wall
    return r


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
    s = _setup(cfg, run_dir, memory_check)
    _resume(s, restart)
    try:
        with _Signals() as sig:
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
        return _finish(s, t_wall)
    finally:
        if s.dist.owned:
            import torch.distributed

            torch.distributed.destroy_process_group()
