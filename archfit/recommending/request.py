"""What a recommendation is asked for, as one object: :class:`RecommendRequest` holds a
:class:`Target` (the size or budget), a :class:`Block` (the family and what overrides it), a
:class:`Grid` (the widths, heads and candidates a shape is built on), :class:`Experts` (a
mixture of experts; None for a dense model), an :class:`Objective` (what "best" means) and the
fits. Each part checks its own values once, when it is made (``__post_init__``): a bad value
raises :class:`~archfit.errors.RecommendError` naming the option. What needs the fits (the
family's defaults, the vocabulary of the runs) is settled when the request is answered.

``RecommendRequest.of(params, **options)`` builds one from the flat keywords
:func:`archfit.recommending.recommend` takes (a notebook's ``recommend(7e9, family="gpt2")``,
a campaign spec's ``[recommend]`` table); the CLI builds one from its flags."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable

from archfit.errors import RecommendError, ShapeError
from archfit.numbers import plain, shown
from archfit.recommending.candidates import DEPTH_SPAN

OBJECTIVES = ("loss", "time", "cost", "latency")
MLPS, POSITIONS, NORMS = ("gelu", "relu2", "swiglu"), ("learned", "rope"), ("layernorm", "rmsnorm")
MAX_GPU_BATCH_TOKENS = 2 ** 26
WIDTH_STEP = 128  # head_dim and width multiple, unless given (finer for small sizes: a note)


def _plain_fields(obj: Any) -> None:
    """Each field of a frozen part as Python holds it (numpy scalars as int and float)."""
    for f in fields(obj):
        v = getattr(obj, f.name)
        if plain(v) is not v:
            object.__setattr__(obj, f.name, plain(v))


def _finite(v: Any) -> bool:
    """A finite real number (an int past a float's range, 10**400, is not)."""
    try:
        return math.isfinite(v)
    except (OverflowError, TypeError):
        return False


def _positive(name: str, v: Any, whole: bool = False) -> None:
    """None, or a positive (whole) number; else one line naming ``name``."""
    if v is None:
        return
    ok = (not isinstance(v, bool) and isinstance(v, int) and _finite(v)) if whole else (
        not isinstance(v, bool) and isinstance(v, (int, float)) and _finite(v))
    if not ok or not v > 0:
        kind = "a positive whole number" if whole else "a positive number"
        raise RecommendError(f"{name} must be {kind}, got {v!r}")


@dataclass(frozen=True)
class Target:
    """The size to build, or the budget to spend, and how long to train it."""

    params: float | None = None
    """Non-embedding parameters (Kaplan's N) in the shape law's convention; or ``compute``."""
    compute: float | None = None
    """Instead of ``params``: a training budget in FLOPs (C = 6 N D), split by a compute law."""
    tokens: float | None = None
    """The recipe's training tokens (default: compute-optimal for the size); with an objective,
    the run length whose loss to reach soonest, or the tokens a loss is predicted at."""
    unique_tokens: float | None = None
    """With ``compute``: the unique tokens the data may repeat (a data-constrained law)."""
    inference_tokens: float | None = None
    """With ``compute``: tokens the model will serve; size for training plus inference FLOPs."""
    tokens_per_param: float | None = None
    """With ``compute``: over-train at this many tokens per parameter (N = sqrt(C / 6R))."""
    origin: str | None = None
    """The option the size came from, as messages name it (default ``--params N``): a mixture's
    backbone is sized from ``--active-params``."""

    def __post_init__(self) -> None:
        _plain_fields(self)
        if (self.params is None) == (self.compute is None):
            raise RecommendError("give exactly one of params (a size) or compute (a FLOP "
                                 "budget)")
        for name in ("params", "compute"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool)
                                      and _finite(v) and v > 0):
                raise RecommendError(f"{name} must be a positive number, got {shown(v)}")
        planned = [n for n, v in (("--inference-tokens", self.inference_tokens),
                                  ("--tokens-per-param", self.tokens_per_param)) if v is not None]
        if planned and (self.unique_tokens is not None or len(planned) > 1):
            raise RecommendError(f"{' and '.join(planned)}: give one of them, with --compute C "
                                 "(a FLOP budget) and without --unique-tokens")
        for name in ("tokens", "inference_tokens", "tokens_per_param"):
            _positive(name, getattr(self, name))
        if self.unique_tokens is not None:
            if self.compute is None:
                raise RecommendError("--unique-tokens splits a FLOP budget between size and "
                                     "epochs: give --compute C with it")
            _positive("unique_tokens", self.unique_tokens)

    @property
    def value(self) -> float:
        """The number asked for: the size, or the budget."""
        return float(self.params if self.params is not None else self.compute)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Block:
    """The block to build: a family, and the fields given to override it (None: the family's;
    the family itself defaults to the shape fit's runs' block, else llama)."""

    family: str | None = None
    """``llama`` or ``gpt2`` (:mod:`archfit.shapes.architectures`), or an Architecture."""
    mlp: str | None = None
    """The MLP kind (gelu, relu2, swiglu)."""
    position: str | None = None
    """Positions: learned or rope."""
    norm: str | None = None
    """Norms: layernorm or rmsnorm."""
    bias: bool | None = None
    """Biases on the linear layers and norms."""
    tied_embeddings: bool | None = None
    """The output layer shares the token embedding."""
    ff_ratio: float | str | None = None
    """d_ff / d_model: a number, ``auto`` (an ff-ratio fit) or ``llama`` (Meta's d_ff rule)."""
    ff_multiple: int | None = None
    """d_ff is a multiple of this (default: the grid's width multiple)."""
    d_ff_rule: Callable[[int], int] | None = None
    """A framework's d_ff for a width (an export's fixed rule), instead of the ratio."""

    def __post_init__(self) -> None:
        _plain_fields(self)
        if self.family is not None:
            from archfit.shapes.architectures import get_architecture

            try:
                get_architecture(self.family)
            except ShapeError as e:
                raise RecommendError(str(e)) from None
        ff = self.ff_ratio
        if ff is not None and ff not in ("auto", "llama") and (
                isinstance(ff, bool) or not isinstance(ff, (int, float)) or not ff > 0):
            raise RecommendError(f"ff_ratio must be a positive number, 'auto' or 'llama'; got "
                                 f"{ff!r}")
        _positive("ff_multiple", self.ff_multiple, whole=True)
        for name, kinds in (("mlp", MLPS), ("position", POSITIONS), ("norm", NORMS)):
            v = getattr(self, name)
            if v is not None and v not in kinds:
                raise RecommendError(f"{name} must be one of {', '.join(kinds)}; got {v!r}")
        for name in ("bias", "tied_embeddings"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, bool):
                raise RecommendError(f"{name} must be True or False, got {v!r}")
        if self.d_ff_rule is not None and not callable(self.d_ff_rule):
            raise RecommendError(f"d_ff_rule must be a function of the width, got "
                                 f"{self.d_ff_rule!r}")

    def overrides(self) -> dict[str, Any]:
        """The Shape fields given (the block's own, not the family's defaults)."""
        return {k: getattr(self, k) for k in ("mlp", "position", "norm", "bias",
                                              "tied_embeddings")}


@dataclass(frozen=True)
class Grid:
    """What a shape is built on: the widths and heads allowed, the vocabulary and context, and
    which candidates are weighed. None: the family's (or the runs') value, or the default."""

    head_dim: int | None = None
    """Attention head size (default 128, halved for sizes whose widths need a finer step)."""
    multiple_of: int | None = None
    """d_model (and d_ff) are multiples of this (default: as head_dim)."""
    tp: int | None = None
    """Tensor-parallel degree: query heads divisible by it (default: the family's)."""
    n_kv_head: int | None = None
    """Key/value heads (default: the family's)."""
    vocab_size: int | str | None = None
    """Vocabulary (default: the one the shape fit's runs share, else the family's), or
    ``"auto"``: the vocabulary law's pick (:mod:`archfit.recommending.vocabulary`)."""
    vocab_multiple: int = 128
    """With ``vocab_size="auto"``: the pick is a multiple of this."""
    n_ctx: int | None = None
    """Context length (default: the one the shape fit's runs share, else the family's)."""
    top: int = 5
    """Alternatives to list."""
    depth_span: tuple[float, float] = DEPTH_SPAN
    """Candidate depths as multiples of the optimal depth."""
    tolerance: float = 0.005
    """The near-optimal set: depths whose predicted loss is within this fraction of the
    optimum's (0.005 = 0.5%); the pick is its centre in log depth."""

    def __post_init__(self) -> None:
        _plain_fields(self)
        for name in ("head_dim", "multiple_of", "n_ctx", "tp", "n_kv_head"):
            _positive(name, getattr(self, name), whole=True)
        if self.vocab_size != "auto":
            _positive("vocab_size", self.vocab_size, whole=True)
            if self.vocab_size == 1:
                raise RecommendError("vocab_size 1: a vocabulary of one token predicts nothing; "
                                     "give the tokenizer's (e.g. 32000), or auto")
        _positive("vocab_multiple", self.vocab_multiple, whole=True)
        _positive("top", self.top, whole=True)
        h, m = self.head_dim, self.multiple_of
        if h is not None and m is not None and m % h and h % m:
            raise RecommendError(f"head_dim {h} does not divide the width multiple {m} (nor the "
                                 f"reverse); e.g. use --multiple-of {math.lcm(h, m)} or --head-dim "
                                 f"{math.gcd(h, m)}")
        kv, tp = self.n_kv_head, self.tp
        if tp and kv and kv % tp and tp % kv:
            raise RecommendError(
                f"{kv} KV heads cannot be split over tensor parallelism {tp}: each rank needs "
                f"whole KV heads (KV heads a multiple of tp) or a replicated share (tp a multiple "
                f"of KV heads); use --kv-heads {math.lcm(kv, tp)} or a --tp that {kv} divides or "
                "divides")
        span = self.depth_span
        if not (isinstance(span, (tuple, list)) and len(span) == 2 and all(
                not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
                and x > 0 for x in span) and span[0] < 1 < span[1]):
            raise RecommendError(f"depth_span must be two multiples of the optimal depth, low "
                                 f"below 1 and high above it (default {DEPTH_SPAN}); got {span!r}")
        object.__setattr__(self, "depth_span", (float(span[0]), float(span[1])))
        t = self.tolerance
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < 1:
            raise RecommendError(f"tolerance must be a fraction of the optimum's predicted loss, "
                                 f"in (0, 1) (0.005 is half a percent); got {t!r}")


@dataclass(frozen=True)
class Experts:
    """A mixture of experts: its active size and how its sparsity is chosen (None: by the MoE
    law)."""

    active_params: float
    """Active non-embedding parameters per token (``Target.params`` is then the total)."""
    moe_law: Any = None
    """The law that picks the sparsity (default krajewski2024, or a fit of your own)."""
    n_experts: int | None = None
    """Fix the number of routed experts."""
    top_k: int | None = None
    """Fix the experts each token uses."""
    granularity: float | None = None
    """Fix the dense MLP's width over one expert's."""
    n_shared_experts: int = 0
    """Experts every token uses (DeepSeek)."""

    def __post_init__(self) -> None:
        _plain_fields(self)
        v = self.active_params
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                math.isfinite(v) and v > 0):
            raise RecommendError(f"active parameters must be a positive number, got {v!r}")
        for name in ("n_experts", "top_k"):
            x = getattr(self, name)
            if x is not None and (isinstance(x, bool) or not isinstance(x, int) or x < 1):
                raise RecommendError(f"{name} must be a whole number >= 1, got {x!r}")
        g = self.granularity
        if g is not None and not (isinstance(g, (int, float)) and not isinstance(g, bool)
                                  and math.isfinite(g) and g > 0):
            raise RecommendError(f"granularity must be a positive number, got {g!r}")
        s = self.n_shared_experts
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise RecommendError(f"n_shared_experts must be a whole number >= 0, got {s!r}")
        from archfit.laws import Fit

        if self.moe_law is not None and not isinstance(self.moe_law, (str, Fit)):
            raise RecommendError(f"moe_law must be a law's name, a fit file's path or a Fit, "
                                 f"got {type(self.moe_law).__name__}")


@dataclass(frozen=True)
class Objective:
    """What "best" means: the law's lowest loss, or on hardware (time, cost, latency)."""

    kind: str | None = None
    """loss (the law's optimum; the default for a dense model), time or cost (the lowest loss
    in ``gpu_hours``, or the target's tokens' loss soonest; a mixture of experts: loss per
    GPU-hour, its default), latency (the lowest loss within ``max_latency_ms``)."""
    gpu: str | None = None
    """The accelerator whose speed and latency are modelled (default h100)."""
    step_model: str | None = None
    """A calibrated step model's path (archfit throughput --out) instead of the modelled one."""
    gpu_hours: float | None = None
    """time / cost: the budget."""
    max_latency_ms: float | None = None
    """latency: decode ms per token at batch 1."""
    batch_tokens: float | None = None
    """Tokens per GPU and optimizer step for the training speed (default 2^19)."""
    usd_per_gpu_hour: float | None = None
    """cost: the price."""

    def __post_init__(self) -> None:
        _plain_fields(self)
        if self.kind is not None and self.kind not in OBJECTIVES:
            raise RecommendError(f"objective must be one of {', '.join(OBJECTIVES)}, got "
                                 f"{self.kind!r}")
        for name in ("gpu", "step_model"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, str) and v.strip()):
                raise RecommendError(f"{name} must be a name (e.g. gpu='h100') or a path, got "
                                     f"{v!r}")
        if self.gpu is not None:
            from archfit.errors import ArchfitError
            from archfit.train.accelerators import device

            try:
                device(self.gpu)
            except ArchfitError as e:
                raise RecommendError(str(e)) from None
        for name in ("gpu_hours", "max_latency_ms", "batch_tokens", "usd_per_gpu_hour"):
            _positive(name, getattr(self, name))
        if self.batch_tokens is not None and self.batch_tokens > MAX_GPU_BATCH_TOKENS:
            raise RecommendError(f"batch_tokens (--gpu-batch-tokens) is tokens per GPU and "
                                 f"step: {self.batch_tokens:.3g} is past {MAX_GPU_BATCH_TOKENS:,}"
                                 " (2^26; today's largest global batches are a few million "
                                 "tokens)")

    @property
    def on_hardware(self) -> bool:
        """Whether the answer weighs hardware: an objective beyond loss, or a hardware option."""
        return self.kind not in (None, "loss") or any(
            getattr(self, k) is not None for k in ("gpu", "step_model", "gpu_hours",
                                                   "max_latency_ms", "batch_tokens",
                                                   "usd_per_gpu_hour"))


@dataclass(frozen=True)
class RecommendRequest:
    """One recommendation asked for: each part checked when made (see the module)."""

    target: Target
    """The size or budget."""
    block: Block = field(default_factory=Block)
    """The family and the fields that override it."""
    grid: Grid = field(default_factory=Grid)
    """Widths, heads, vocabulary, context and the candidates weighed."""
    experts: Experts | None = None
    """A mixture of experts (None: dense)."""
    objective: Objective = field(default_factory=Objective)
    """What "best" means."""
    fits: tuple[Any, ...] = ()
    """Fits by name, path or object, one per role (shape, compute, ff-ratio, lr-batch)."""
    strict: bool = False
    """Raise instead of warn when the verdict is uninformative."""

    def __post_init__(self) -> None:
        for name, cls, example in (("target", Target, "Target(params=7e9)"),
                                   ("block", Block, "Block(family='llama')"),
                                   ("grid", Grid, "Grid(head_dim=128)"),
                                   ("objective", Objective, "Objective(kind='time')")):
            v = getattr(self, name)
            if not isinstance(v, cls):
                raise RecommendError(f"{name} must be {_article(cls.__name__)} (e.g. {example}), got "
                                     f"{type(v).__name__} {v!r:.60}")
        if self.experts is not None and not isinstance(self.experts, Experts):
            raise RecommendError(f"experts must be an Experts (e.g. Experts(active_params=3.2e10))"
                                 f" or None, got {type(self.experts).__name__}")
        if not isinstance(self.fits, tuple):
            object.__setattr__(self, "fits", _as_tuple(self.fits))
        if not isinstance(self.strict, bool):
            raise RecommendError(f"strict must be True or False, got {self.strict!r}")
        e, t, o = self.experts, self.target, self.objective
        budget = [f for f, v in (("--inference-tokens", t.inference_tokens),
                                 ("--tokens-per-param", t.tokens_per_param),
                                 ("--unique-tokens", t.unique_tokens)) if v is not None]
        if e is None and o.on_hardware and budget:
            raise RecommendError(f"{budget[0]} sizes the model from a FLOP budget, which "
                                 f"--objective {o.kind} (shapes of one size weighed on a GPU) "
                                 "does not read: drop one of them")
        if e is None and t.compute is None and (t.inference_tokens is not None
                                                or t.tokens_per_param is not None):
            raise RecommendError(f"{budget[0]}: give it with --compute C (a FLOP budget) "
                                 "and without --unique-tokens")
        if e is not None and t.tokens is not None and t.tokens_per_param is not None:
            raise RecommendError("--tokens and --tokens-per-param both set the tokens; give one")
        if e is not None and t.params is not None and not e.active_params < t.params:
            raise RecommendError(f"the active parameters ({e.active_params:.4g}) must be fewer "
                                 f"than the total ({t.params:.4g}): a mixture of experts leaves "
                                 "experts unused per token (for a dense model drop "
                                 "--active-params)")

    def with_(self, **parts: Any) -> RecommendRequest:
        """This request with parts replaced (each checked again)."""
        return replace(self, **parts)

    @classmethod
    def of(cls, params: float | None = None, **options: Any) -> RecommendRequest:
        """A request from the flat keywords :func:`~archfit.recommending.recommend` takes:
        ``compute``, ``fit`` (one or several), ``strict``, and every field of the parts above
        by its own name. An unknown keyword is a TypeError, as Python's own call would raise."""
        fit = options.pop("fit", None)
        strict = bool(options.pop("strict", False))
        parts: dict[str, dict[str, Any]] = {}
        for name, value in options.items():
            part = KEYWORDS.get(name)
            if part is None:
                raise TypeError(f"recommend() got an unexpected keyword argument {name!r}")
            parts.setdefault(part, {})[name] = value
        return cls(Target(params=params, **parts.get("target", {})),
                   Block(**parts.get("block", {})), Grid(**parts.get("grid", {})),
                   fits=_as_tuple(fit), strict=strict)


def _article(name: str) -> str:
    return f"{'an' if name[0] in 'AEIOU' else 'a'} {name}"


def _as_tuple(fit: Any) -> tuple[Any, ...]:
    if fit is None:
        return ()
    if isinstance(fit, (list, tuple)):
        return tuple(fit)
    return (fit,)


# the flat keyword of each part's field (recommend(**options) and a campaign's [recommend])
KEYWORDS: dict[str, str] = {f.name: part for part, cls in (("target", Target), ("block", Block),
                                                           ("grid", Grid))
                            for f in fields(cls) if f.name != "params"}
