"""The records of a run, importable without torch or numpy (what ``archfit.sweep`` plans with):
:class:`Budget`, :class:`TrainConfig` (its flat record is what run ids hash and
``config.json`` stores) and :class:`RunResult`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from numbers import Real
from typing import Any, Literal, get_args

from archfit.errors import ArchfitError
from archfit.numbers import plain
from archfit.shapes import PARAMETRIZATIONS, TRAIN_FLOPS_CONVENTION, Parametrization, Shape

# a stop signal in the middle of a step: checkpoint at the step's end, or, if the step has not
# ended this many seconds after the signal, exit keeping the last checkpoint
STOP_GRACE_S = 30.0
EXIT_PREEMPTED = 143  # 128 + SIGTERM: what schedulers expect of a job stopped by a signal
# the largest peak learning rate a run accepts: past it no published AdamW or Muon recipe for a
# language model trains (their peaks sit below 0.1), so a larger one is a typo or a unit slip
MAX_LR = 1.0
# the smallest: a weight of 0.02 (GPT-2's init) is resolved in fp32 to about 2e-9, so an Adam
# step of a peak rate below this moves it by a few rounding steps and trains nothing; no
# published recipe's peak sits below 1e-6
MIN_LR = 1e-8
# the most tokens one optimizer step may take: 16x the largest published batch (DeepSeek-V3's
# ~63M tokens, 15,360 sequences of 4,096); past it a batch is a typo or a unit slip
MAX_BATCH_TOKENS = 1e9


def lr_problem(lr: Any) -> str | None:
    """Why ``lr`` is no peak learning rate a run could use, or None (the check every run, spec
    and table of rates goes through)."""
    if isinstance(lr, bool) or not isinstance(lr, Real) or not (
            math.isfinite(lr) and MIN_LR <= float(lr) <= MAX_LR):
        return (f"must be a positive rate at most {MAX_LR:g} and at least {MIN_LR:g} (published "
                f"AdamW and Muon peak rates lie between 1e-6 and 0.1), got {lr!r}")
    return None


def batch_problem(tokens: Any) -> str | None:
    """Why ``tokens`` (per optimizer step) is no batch a run could use, or None."""
    if isinstance(tokens, bool) or not isinstance(tokens, Real) or not (
            math.isfinite(tokens) and 1 <= float(tokens) <= MAX_BATCH_TOKENS):
        return (f"must be from 1 to {MAX_BATCH_TOKENS:.0e} tokens per optimizer step "
                f"(batch_size x grad_accum x ctx; 16x the largest published batch), got "
                f"{tokens!r}")
    return None
# config keys that may change between a run and its resume (they do not change its numbers)
RESUMABLE_CHANGES = ("device", "threads", "compile", "checkpoint_every", "eval_batch",
                     "micro_batch")
# config keys that say how a run is executed, not what it computes: not part of its identity
RUNTIME_KEYS = ("micro_batch", "tracker", "tracker_dir")
# config keys that say how a run is executed (not run-table columns): the two lists above
EXECUTION_KEYS = tuple(dict.fromkeys(RESUMABLE_CHANGES + RUNTIME_KEYS))


@dataclass(frozen=True)
class Budget:
    """How long a run trains: exactly one of ``tokens``, ``tokens_per_param`` (per
    non-embedding parameter) or ``steps``."""

    tokens: float | None = None
    tokens_per_param: float | None = None
    steps: int | None = None

    def __post_init__(self) -> None:
        for k, v in asdict(self).items():  # numpy scalars as Python's numbers
            object.__setattr__(self, k, plain(v))
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


# The run-config record (``config.json``; run ids hash it). Version 1 (archfit 0.1) wrote these
# keys always, and so they stay written: a version-1 config keeps its bytes, and so its run id.
# Every field of Shape or TrainConfig added since is written only when it is not at its default,
# so a field added with its default changes no existing id (tests/test_sweep.py adds one).
# The fields left out of the id are RUNTIME_KEYS, the one list of them.
RUN_CONFIG_SCHEMA = 2
V1_SHAPE_KEYS = ("n_layer", "d_model", "n_head", "d_ff", "n_kv_head", "mlp", "tied_embeddings",
                 "position", "bias", "norm", "qk_norm", "ff_ratio")
V1_TRAIN_KEYS = ("parametrization", "mup_base_width", "mup_base_depth", "data", "batch_size",
                 "grad_accum", "lr", "min_lr_ratio", "warmup", "schedule", "decay_fraction",
                 "weight_decay", "beta1", "beta2", "grad_clip", "optimizer", "seed", "eval_every",
                 "eval_windows", "eval_batch", "checkpoint_every", "device", "compile",
                 "divergence_factor", "threads")
# TrainConfig fields that are not flat keys of their own (the shape's and budget's are)
_NESTED = ("shape", "budget", "vocab_from_data")
# Shape fields stored under their own names in the flat record
_SHAPE_RENAMED = {"vocab_size": "vocab_size", "n_ctx": "ctx"}
_BUDGET_KEYS = ("tokens", "tokens_per_param", "steps")
Schedule = Literal["cosine", "wsd", "constant"]
Optimizer = Literal["adamw", "muon"]
Precision = Literal["auto", "bf16", "fp32"]  # auto: bf16 autocast on CUDA, fp32 elsewhere
Parallel = Literal["ddp", "fsdp"]  # with several processes: DDP or FSDP2 (fully_shard)
MoeBalance = Literal["aux-loss", "bias"]  # a mixture of experts' load balancing (train.model)
SCHEDULES: tuple[str, ...] = get_args(Schedule)
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)
PRECISIONS: tuple[str, ...] = get_args(Precision)
PARALLEL: tuple[str, ...] = get_args(Parallel)
MOE_BALANCES: tuple[str, ...] = get_args(MoeBalance)
# TrainConfig's fields whose values are a fixed choice, and the choices (spec schema, click)
CHOICES: dict[str, tuple[str, ...]] = {"parametrization": PARAMETRIZATIONS,
                                       "schedule": SCHEDULES, "optimizer": OPTIMIZERS,
                                       "precision": PRECISIONS, "parallel": PARALLEL,
                                       "moe_balance": MOE_BALANCES}


# Each TrainConfig field's help, written once: `archfit train --help` and the spec schema's
# error messages read it (tests/test_trainer.py checks every field has one).
FIELD_HELP: dict[str, str] = {
    "shape": "The model (archfit.shapes.Shape).",
    "budget": "How long to train: tokens, tokens per non-embedding parameter, or steps.",
    "vocab_from_data": "Size the vocabulary from the data instead of the shape's vocab_size.",
    "parametrization": "How init and learning rates scale with width and depth: standard, mup, "
                       "completep or depth-mup.",
    "mup_base_width": "muP/CompleteP: the width whose learning rate transfers.",
    "mup_base_depth": "CompleteP/depth-muP: the depth whose learning rate transfers.",
    "data": "Token source: a prepared dataset's folder or manifest.json (default: the embedded "
            "stdlib corpus).",
    "data_sha256": "The prepared dataset's manifest hash, checked when the run starts.",
    "batch_size": "Sequences per optimizer step (per accumulation step).",
    "grad_accum": "Gradient accumulation steps per optimizer step.",
    "lr": "Peak learning rate.",
    "min_lr_ratio": "The final learning rate as a fraction of the peak.",
    "warmup": "Warmup: a fraction of the steps (< 1) or a step count (>= 1).",
    "schedule": "Learning-rate schedule after warmup: cosine, wsd or constant.",
    "decay_fraction": "wsd: the final fraction of the steps spent decaying.",
    "weight_decay": "Decoupled weight decay (AdamW) of the matrices.",
    "beta1": "Adam's first-moment decay.",
    "beta2": "Adam's second-moment decay.",
    "grad_clip": "Clip the gradient's global norm to this (0: no clipping).",
    "optimizer": "Optimizer: adamw, or muon (orthogonalized updates of the hidden matrices).",
    "seed": "Seed of the initialisation and the data order.",
    "eval_every": "Steps between validation losses (and the last step).",
    "eval_windows": "Validation windows (of n_ctx tokens) per evaluation.",
    "eval_batch": "Validation windows per forward pass (memory only; not the numbers).",
    "checkpoint_every": "Steps between checkpoints in the run folder (0: at the end and on "
                        "signals).",
    "device": "auto (CUDA if present, else CPU), cpu, cuda or cuda:N.",
    "compile": "torch.compile the model.",
    "divergence_factor": "A loss above this times the first loss is a divergence: the run "
                         "stops as diverged.",
    "threads": "torch threads (default: torch's).",
    "precision": "auto: bf16 autocast on CUDA, fp32 on CPU; or bf16, fp32.",
    "parallel": "With several processes: DDP, or FSDP2 (fully_shard).",
    "micro_batch": "Sequences per forward pass and process (default: the whole share of a "
                   "batch); gradients add up to the batch's.",
    "moe_balance": "A mixture of experts' load balancing: aux-loss (Switch's auxiliary loss) or "
                   "bias (DeepSeek-V3's auxiliary-loss-free bias).",
    "moe_aux_coef": "The weight of the aux-loss balancing term (Switch's 0.01).",
    "tracker": "Log losses, lr, tokens/s and MFU per step to tensorboard, mlflow or wandb.",
    "tracker_dir": "The tracker's folder (default: tracker/ beside the run folder, or "
                   "runs/tracker).",
}


# the settings whose every value in a range trains (and outside it none does): name, low, high
# (both included) and how to say it
_RANGES = (("warmup", 0.0, float("inf"), "a fraction of the steps in [0, 1) or a step count"),
           ("min_lr_ratio", 0.0, 1.0, "a fraction of the peak rate, in [0, 1]"),
           ("decay_fraction", 0.0, 1.0, "a fraction of the steps, in [0, 1]"),
           ("weight_decay", 0.0, float("inf"), "a number >= 0"),
           ("beta1", 0.0, 0.999999, "a decay in [0, 1)"),
           ("beta2", 0.0, 0.999999, "a decay in [0, 1)"),
           ("grad_clip", 0.0, float("inf"), "a norm >= 0 (0: no clipping)"))


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
    parametrization: Parametrization = "standard"
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
    schedule: Schedule = "cosine"
    decay_fraction: float = 0.2  # wsd: the final fraction spent decaying
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    optimizer: Optimizer = "adamw"
    seed: int = 0
    eval_every: int = 100
    eval_windows: int = 64
    eval_batch: int = 32
    checkpoint_every: int = 0  # 0: only on signals (and when a run dir is given, at the end)
    device: str = "auto"
    compile: bool = False
    divergence_factor: float = 2.5
    threads: int | None = None
    precision: Precision = "auto"
    parallel: Parallel = "ddp"
    # sequences per forward pass and process (None: the whole share of a batch); a batch is
    # split into micro-batches whose gradients add up to the batch's, so the numbers are the
    # same whatever fits in memory (archfit.train.memory.choose_micro_batch picks it)
    micro_batch: int | None = None
    # an experiment tracker (tensorboard, mlflow, wandb) and its folder: how a run is
    # watched, not what it computes (RUNTIME_KEYS: not part of the run id)
    tracker: str | None = None
    tracker_dir: str | None = None
    # a mixture of experts (shape.n_experts > 0): how its experts' load is balanced
    moe_balance: MoeBalance = "aux-loss"
    moe_aux_coef: float = 0.01

    def __post_init__(self) -> None:
        for f in fields(self):  # numpy scalars as Python's numbers (a record, a run id, JSON)
            setattr(self, f.name, plain(getattr(self, f.name)))

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
        if why := lr_problem(self.lr):
            raise ArchfitError(f"lr {why}; give the peak learning rate, e.g. 3e-3")
        if why := batch_problem(self.tokens_per_step):
            raise ArchfitError(f"the batch {why}; lower --batch-size or --grad-accum")
        if isinstance(self.moe_aux_coef, bool) or not (
                isinstance(self.moe_aux_coef, (int, float)) and 0 <= self.moe_aux_coef < 10):
            raise ArchfitError(f"moe_aux_coef must be a number in [0, 10) (Switch's is 0.01), "
                               f"got {self.moe_aux_coef!r}")
        for name, lo, hi, what in _RANGES:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                    math.isfinite(v) and lo <= v <= hi):
                raise ArchfitError(f"{name} must be {what}, got {v!r}")
        if self.micro_batch is not None and (not isinstance(self.micro_batch, int)
                                             or self.micro_batch <= 0):
            raise ArchfitError(f"micro_batch must be a positive whole number, got "
                               f"{self.micro_batch!r}")
        for name, choices in CHOICES.items():
            if getattr(self, name) not in choices:
                raise ArchfitError(f"{name} must be one of {', '.join(choices)}, got "
                                   f"{getattr(self, name)!r}")

    def steps(self) -> int:
        self.validate()
        return self.budget.steps_for(self.shape, self.tokens_per_step)  # type: ignore[union-attr]

    def to_dict(self) -> dict[str, Any]:
        s = self.shape
        out: dict[str, Any] = {}
        for f in fields(s):
            if f.name in _SHAPE_RENAMED:
                continue
            value = getattr(s, f.name)
            if f.name == "ff_ratio":  # d_ff carries it
                out[f.name] = None
            elif f.name in V1_SHAPE_KEYS or value != f.default:
                out[f.name] = list(value) if isinstance(value, tuple) else value
        out.update(vocab_size=None if self.vocab_from_data else s.vocab_size, ctx=s.n_ctx)
        out.update(self.budget.to_dict() if self.budget else dict.fromkeys(_BUDGET_KEYS))
        out.update({f.name: getattr(self, f.name) for f in fields(self)
                    if f.name not in _NESTED
                    and (f.name in V1_TRAIN_KEYS or getattr(self, f.name) != f.default)})
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        """A config from the flat record of :meth:`to_dict` (``config.json``)."""
        own = {f.name for f in fields(cls)} - set(_NESTED)
        unknown = set(d) - own - set(_flat_shape_keys()) - set(_BUDGET_KEYS)
        if unknown:
            raise ArchfitError(f"unknown training options: {', '.join(sorted(unknown))}")
        return cls(**{k: v for k, v in d.items() if k in own}, **_from_flat(d))


def _flat_shape_keys() -> tuple[str, ...]:
    """The flat record's names of Shape's fields (``n_ctx`` is stored as ``ctx``)."""
    return tuple(_SHAPE_RENAMED.get(f.name, f.name) for f in fields(Shape))


def _from_flat(d: dict[str, Any]) -> dict[str, Any]:
    """shape / budget / vocab_from_data from flat keys (``n_layer=..., ctx=..., tokens=...``)."""
    out: dict[str, Any] = {}
    sk = {f.name: d[f.name] for f in fields(Shape)
          if f.name not in _SHAPE_RENAMED and d.get(f.name) is not None}
    sk = {k: tuple(v) if isinstance(v, list) else v for k, v in sk.items()}
    if sk or "ctx" in d or "vocab_size" in d:
        base = {"n_layer": 4, "d_model": 128, "n_head": 4}
        out["shape"] = Shape(**{**base, **sk}, vocab_size=d.get("vocab_size") or 256,
                             n_ctx=d.get("ctx") or 256)
        out["vocab_from_data"] = d.get("vocab_size") is None
    bk = {k: d[k] for k in _BUDGET_KEYS if d.get(k) is not None}
    if bk:
        out["budget"] = Budget(**bk)
    return out


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
    train_s: float = 0.0  # every training step, evaluation and checkpoints left out
    # tokens/s (and MFU) of the steady steps: the warm-up steps (the compile among them), the
    # evaluation and the checkpoints left out (archfit.train.loop's _Clock)
    tokens_per_s: float | None = None
    first_step_s: float | None = None  # the first step of this process, synced
    compile_s: float | None = None  # with compile: the first step's time above a steady step's
    flops: float | None = None
    flops_convention: str = TRAIN_FLOPS_CONVENTION
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
    # a mixture of experts: each sparse layer's share of the routed tokens per expert over the
    # training passes of this process since it (re)started, and the largest share times the
    # expert count over the layers (1.0: balanced; n_experts: one expert takes every token)
    expert_load: list[list[float]] | None = None
    expert_load_max: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
