"""The one place where a transformer shape is described and counted.

Parameter conventions (every count archfit prints names one of these):

``params_total``
    Every trainable parameter of the decoder-only GPT that :mod:`archfit.model`
    builds (and that HF ``GPT2LMHeadModel`` builds for GPT-2 shapes): embeddings,
    blocks, final norm and — when untied — the output head.
``params_embedding``
    The vocabulary and position matrices: token embedding, learned position
    embedding (zero for rotary positions) and, when untied, the output head.
``params_non_embedding``
    ``params_total - params_embedding``: Kaplan et al. (2020)'s *N*, "excluding all
    vocabulary and positional embeddings". Includes block norms, biases and the final norm.

FLOP conventions (per token):

``kaplan_forward``
    Kaplan et al. (2020) Table 1: ``C_fwd = 2N + 2 n_layer n_ctx d_model`` with N
    non-embedding.
``kaplan_train``
    ``3 * kaplan_forward`` (backward ≈ 2× forward) = ``6N + 6 n_layer n_ctx d_model``.
``matmul_forward``
    Exact multiply-accumulate count × 2 of every matrix product in a forward pass:
    Q/K/V/O projections, attention scores ``QKᵀ`` and the weighted sum ``AV`` over the
    full ``n_ctx`` window (dense attention, as Hoffmann et al. 2022, App. F), MLP
    matrices and the output logits. Norms, softmax and activations are not counted.
``matmul_train``
    ``3 * matmul_forward`` (the backward pass computes two products per forward one).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, Iterable, Literal, Sequence, get_args

from archfit.errors import ShapeError

# the one source of each choice: the Literal types; specs and click options read their values
MlpKind = Literal["gelu", "relu2", "swiglu"]
PositionKind = Literal["learned", "rope"]
NormKind = Literal["layernorm", "rmsnorm"]
# how init and learning rates scale with width and depth (archfit.model)
Parametrization = Literal["standard", "mup", "completep", "depth-mup"]

MLP_KINDS: tuple[str, ...] = get_args(MlpKind)
POSITION_KINDS: tuple[str, ...] = get_args(PositionKind)
NORM_KINDS: tuple[str, ...] = get_args(NormKind)
PARAMETRIZATIONS: tuple[str, ...] = get_args(Parametrization)

# logits per chunk of the fused output layer and loss: archfit.model computes them so,
# archfit.memory counts them
LOSS_CHUNK_ELEMENTS = 1 << 25

# the size convention of the shape laws (Kaplan et al. 2020: a block of ff ratio 4 holds
# 12 d_model^2 parameters); :func:`kaplan_width` is its one formula
SHAPE_LAW_N = "N = 12 * n_layer * d_model^2"
KAPLAN_TRAIN_FORMULA = "6N + 6*n_layer*n_ctx*d_model"
# the FLOP convention archfit counts training FLOPs, throughput and MFU in
TRAIN_FLOPS_CONVENTION = f"kaplan_train: {KAPLAN_TRAIN_FORMULA} per token"


def kaplan_width(N: Any, n_layer: Any) -> Any:
    """The width d_model at which 12 * n_layer * d_model^2 = N (numbers or numpy arrays)."""
    return (N / (12 * n_layer)) ** 0.5

FLOP_CONVENTIONS: dict[str, str] = {
    "kaplan_forward": "Kaplan 2020: 2N + 2*n_layer*n_ctx*d_model (N non-embedding)",
    "kaplan_train": f"Kaplan 2020 training: {KAPLAN_TRAIN_FORMULA}",
    "matmul_forward": "exact matmul FLOPs of a forward pass incl. attention scores and logits",
    "matmul_train": "3x matmul_forward (forward + backward)",
}


@dataclass(frozen=True)
class Shape:
    """A decoder-only transformer, validated on construction.

    ``d_ff`` may be left out and given through ``ff_ratio`` (``d_ff = round(ff_ratio * d_model)``);
    ``n_kv_head`` defaults to ``n_head`` (multi-head attention); 1 is MQA, between is GQA.
    ``bias`` puts biases on every linear layer except the output head, and on the norms;
    ``qkv_bias`` puts them on the query, key and value projections only (Qwen2), and is implied
    by ``bias``.
    """

    n_layer: int
    d_model: int
    n_head: int
    d_ff: int | None = None
    vocab_size: int = 50257
    n_ctx: int = 1024
    n_kv_head: int | None = None
    mlp: str = "gelu"
    tied_embeddings: bool = True
    position: str = "learned"
    bias: bool = True
    norm: str = "layernorm"
    qk_norm: bool = False
    qkv_bias: bool = False
    ff_ratio: float | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("n_layer", "d_model", "n_head", "vocab_size", "n_ctx"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    object.__setattr__(self, name, int(value))
                else:
                    raise ShapeError(f"{name} must be a whole number, got {value!r}")
            if getattr(self, name) <= 0:
                raise ShapeError(f"{name} must be positive, got {value}")
        if self.d_ff is None:
            if self.ff_ratio is None:
                object.__setattr__(self, "ff_ratio", 4.0)
            if not (self.ff_ratio > 0 and math.isfinite(self.ff_ratio)):
                raise ShapeError(f"ff_ratio must be a positive number, got {self.ff_ratio}")
            object.__setattr__(self, "d_ff", max(1, int(round(self.ff_ratio * self.d_model))))
        else:
            if isinstance(self.d_ff, float) and self.d_ff.is_integer():
                object.__setattr__(self, "d_ff", int(self.d_ff))
            if not isinstance(self.d_ff, int) or isinstance(self.d_ff, bool) or self.d_ff <= 0:
                raise ShapeError(f"d_ff must be a positive whole number, got {self.d_ff!r}")
        object.__setattr__(self, "ff_ratio", self.d_ff / self.d_model)
        if self.n_kv_head is None:
            object.__setattr__(self, "n_kv_head", self.n_head)
        if not isinstance(self.n_kv_head, int) or self.n_kv_head <= 0:
            raise ShapeError(f"n_kv_head must be a positive whole number, got {self.n_kv_head!r}")
        if self.d_model % self.n_head:
            raise ShapeError(
                f"d_model {self.d_model} is not divisible by n_head {self.n_head}; "
                f"choose heads that divide the width (e.g. {_divisor_hint(self.d_model, self.n_head)})"
            )
        if self.n_head % self.n_kv_head:
            raise ShapeError(
                f"n_head {self.n_head} is not divisible by n_kv_head {self.n_kv_head}; "
                "key/value heads must divide the query heads (GQA)"
            )
        if self.mlp not in MLP_KINDS:
            raise ShapeError(f"mlp must be one of {', '.join(MLP_KINDS)}, got {self.mlp!r}")
        if self.position not in POSITION_KINDS:
            raise ShapeError(
                f"position must be one of {', '.join(POSITION_KINDS)}, got {self.position!r}"
            )
        if self.norm not in NORM_KINDS:
            raise ShapeError(f"norm must be one of {', '.join(NORM_KINDS)}, got {self.norm!r}")
        if self.position == "rope" and self.head_dim % 2:
            raise ShapeError(f"rotary positions need an even head_dim, got {self.head_dim}")

    # ---------------------------------------------------------------- derived sizes
    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    @property
    def kv_dim(self) -> int:
        """Width of the key (and of the value) projection: n_kv_head * head_dim."""
        return self.n_kv_head * self.head_dim  # type: ignore[operator]

    @property
    def aspect_ratio(self) -> float:
        """Kaplan's aspect ratio d_model / n_layer."""
        return self.d_model / self.n_layer

    # ---------------------------------------------------------------- counting
    def _norm_params(self, width: int) -> int:
        has_bias = self.bias and self.norm == "layernorm"
        return width * (2 if has_bias else 1)

    def layer_breakdown(self) -> dict[str, int]:
        """Parameters of one transformer block, by component."""
        d, f, kv = self.d_model, self.d_ff, self.kv_dim
        assert f is not None
        attn = d * d + 2 * d * kv + d * d
        if self.bias or self.qkv_bias:
            attn += d + 2 * kv + (d if self.bias else 0)
        mats = 3 if self.mlp == "swiglu" else 2
        mlp = mats * d * f
        if self.bias:
            mlp += (mats - 1) * f + d
        norms = 2 * self._norm_params(d)
        if self.qk_norm:
            norms += 2 * self._norm_params(self.head_dim)
        return {"attention": attn, "mlp": mlp, "norms": norms}

    def breakdown(self) -> dict[str, int]:
        """Every parameter of the model, by component (sums to :attr:`params_total`)."""
        layer = self.layer_breakdown()
        return {
            "token_embedding": self.vocab_size * self.d_model,
            "position_embedding": self.n_ctx * self.d_model if self.position == "learned" else 0,
            "attention": self.n_layer * layer["attention"],
            "mlp": self.n_layer * layer["mlp"],
            "norms": self.n_layer * layer["norms"] + self._norm_params(self.d_model),
            "head": 0 if self.tied_embeddings else self.vocab_size * self.d_model,
        }

    @property
    def params_embedding(self) -> int:
        b = self.breakdown()
        return b["token_embedding"] + b["position_embedding"] + b["head"]

    @property
    def params_non_embedding(self) -> int:
        b = self.breakdown()
        return b["attention"] + b["mlp"] + b["norms"]

    @property
    def params_total(self) -> int:
        return sum(self.breakdown().values())

    # ---------------------------------------------------------------- FLOPs
    def flops_per_token(self, convention: str = "kaplan_train") -> float:
        """FLOPs per token under ``convention`` (see :data:`FLOP_CONVENTIONS`)."""
        L, d, c = self.n_layer, self.d_model, self.n_ctx
        if convention in ("kaplan_forward", "kaplan_train"):
            fwd = 2 * self.params_non_embedding + 2 * L * c * d
            return float(fwd if convention == "kaplan_forward" else 3 * fwd)
        if convention in ("matmul_forward", "matmul_train"):
            kv, f = self.kv_dim, self.d_ff
            assert f is not None
            mats = 3 if self.mlp == "swiglu" else 2
            per_layer = 2 * (2 * d * d + 2 * d * kv) + 2 * mats * d * f + 2 * 2 * c * d
            fwd = L * per_layer + 2 * d * self.vocab_size
            return float(fwd if convention == "matmul_forward" else 3 * fwd)
        raise ShapeError(
            f"unknown FLOP convention {convention!r}; choose one of {', '.join(FLOP_CONVENTIONS)}"
        )

    # ---------------------------------------------------------------- records
    def config(self) -> dict[str, Any]:
        """The fields that define the shape (what :meth:`from_config` takes back)."""
        d = asdict(self)
        d.pop("ff_ratio")
        return d

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Shape:
        known = {k: v for k, v in cfg.items() if k in _FIELDS}
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        """Shape fields, exact counts (each convention named) and FLOPs per token."""
        out = self.config()
        out.update(
            ff_ratio=self.ff_ratio,
            head_dim=self.head_dim,
            params_total=self.params_total,
            params_non_embedding=self.params_non_embedding,
            params_embedding=self.params_embedding,
            breakdown=self.breakdown(),
            flops_per_token=self.flops_per_token("kaplan_train"),
            flops_per_token_convention="kaplan_train: " + FLOP_CONVENTIONS["kaplan_train"],
            flops_per_token_matmul=self.flops_per_token("matmul_train"),
            flops_per_token_matmul_convention="matmul_train: " + FLOP_CONVENTIONS["matmul_train"],
        )
        return out

    @classmethod
    def from_hf_config(cls, cfg: dict[str, Any]) -> Shape:
        """The shape of a transformers ``config.json`` dict (GPT-2, Llama, Mistral, Qwen2,
        GPT-NeoX) or of nanoGPT ``model_args``; warns about fields it does not know
        (:func:`archfit.frameworks.read_config` lists them)."""
        from archfit.frameworks import shape_from_hf_config

        return shape_from_hf_config(cfg)

    def to_hf_config(self, kind: str = "hf-llama") -> dict[str, Any]:
        """A transformers ``config.json`` dict: ``hf-llama`` (LlamaConfig) or ``hf-gpt2``."""
        from archfit.frameworks import hf_config

        return hf_config(self, kind)

    def with_(self, **changes: Any) -> Shape:
        """A copy with some fields changed (``d_ff`` is recomputed from ``ff_ratio`` if given)."""
        if "ff_ratio" in changes and "d_ff" not in changes:
            changes["d_ff"] = None
        return replace(self, **changes)


_FIELDS = frozenset(f.name for f in fields(Shape))


def _divisor_hint(d_model: int, n_head: int) -> str:
    divs = [h for h in range(1, min(d_model, 4 * n_head) + 1) if d_model % h == 0]
    near = sorted(divs, key=lambda h: abs(h - n_head))[:2]
    return " or ".join(str(h) for h in sorted(near)) if near else "1"


GPT2_SIZES: dict[str, tuple[int, int, int]] = {
    "gpt2": (12, 768, 12),
    "gpt2-medium": (24, 1024, 16),
    "gpt2-large": (36, 1280, 20),
    "gpt2-xl": (48, 1600, 25),
}


def gpt2(size: str = "gpt2") -> Shape:
    """The GPT-2 shapes (vocab 50257, ctx 1024, tied, GELU, ff 4×, biases, LayerNorm)."""
    try:
        L, d, h = GPT2_SIZES[size]
    except KeyError:
        raise ShapeError(f"unknown GPT-2 size {size!r}; choose one of {', '.join(GPT2_SIZES)}") from None
    return Shape(n_layer=L, d_model=d, n_head=h, d_ff=4 * d)


# ==================================================================== iso-parameter families
@dataclass(frozen=True)
class FamilyMember:
    """One member of an iso-parameter family: the shape closest to the target, or why none is."""

    target: float
    n_layer: int
    shape: Shape | None
    rel_error: float | None
    within_tolerance: bool
    note: str = ""
    ff_ratio: float | None = None
    aspect_ratio: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n_layer": self.n_layer,
            "target_params_non_embedding": self.target,
            "within_tolerance": self.within_tolerance,
            "rel_error": self.rel_error,
            "note": self.note,
        }
        if self.shape is not None:
            s = self.shape
            out.update(
                d_model=s.d_model, n_head=s.n_head, n_kv_head=s.n_kv_head, d_ff=s.d_ff,
                ff_ratio=s.ff_ratio, head_dim=s.head_dim, aspect_ratio=s.aspect_ratio,
                params_non_embedding=s.params_non_embedding, params_total=s.params_total,
                params_embedding=s.params_embedding,
            )
        else:
            out.update(d_model=None, n_head=None, d_ff=None, params_non_embedding=None,
                       ff_ratio=self.ff_ratio, aspect_ratio=self.aspect_ratio)
        return out


_BASE_FIELDS = ("vocab_size", "n_ctx", "mlp", "tied_embeddings", "position", "bias", "norm",
                "qk_norm", "qkv_bias")


def _check_target(target: float) -> None:
    if not (target > 0 and math.isfinite(target)):
        raise ShapeError(f"target parameter count must be positive and finite, got {target}")


def _heads_for(d_model: int, head_dim: int | None, n_head: int | None) -> int | None:
    if n_head is not None:
        return n_head if d_model % n_head == 0 else None
    assert head_dim is not None
    return d_model // head_dim if d_model % head_dim == 0 else None


def _width_candidates(target: float, n_layer: int, ff_ratio: float, multiple: int,
                      mlp: str, kv_per_d: float = 1.0, kv_dim: int = 0) -> list[int]:
    """Widths around the one whose count is ``target``: per layer Q and O take 2d², K and V take
    2d·kv_dim (``kv_per_d``·d when the kv width grows with d, MHA: 1), the MLP mats·ff·d²."""
    mats = 3 if mlp == "swiglu" else 2
    a = n_layer * (2 + 2 * kv_per_d + mats * ff_ratio)
    b = 2 * n_layer * kv_dim
    d0 = (-b + math.sqrt(b * b + 4 * a * target)) / (2 * a)
    k = max(1, round(d0 / multiple))
    return sorted({m * multiple for m in range(max(1, k - 2), k + 3)})


def _kv_terms(head_dim: int | None, n_head: int | None, ratio: int,
              n_kv_head: int | None) -> dict[str, Any]:
    """How the key/value width depends on d: a fixed kv width (fixed kv heads of a fixed head
    size), or a fraction of d (MHA, a GQA ratio, or fixed heads of a growing size)."""
    if n_kv_head is None:
        return {"kv_per_d": 1.0 / ratio}
    if head_dim is not None:
        return {"kv_per_d": 0.0, "kv_dim": n_kv_head * head_dim}
    return {"kv_per_d": n_kv_head / n_head}  # type: ignore[operator]


def _ff_candidates(nominal_shape: Shape, ff_ratio: float, target: float, ff_multiple: int,
                   slack: float) -> list[int]:
    """d_ff values worth trying: the nominal ratio, and the ``ff_multiple`` multiples on either
    side of the d_ff that would hit ``target`` exactly (the count is linear in d_ff), kept within
    ``slack`` of the nominal ratio."""
    d_model = nominal_shape.d_model
    nominal = max(1, int(round(ff_ratio * d_model)))
    if slack <= 0:
        return [nominal]
    n0 = nominal_shape.params_non_embedding
    slope = nominal_shape.with_(d_ff=nominal + 1).params_non_embedding - n0
    exact = nominal + (target - n0) / slope
    lo = max(1, math.ceil(ff_ratio * d_model * (1 - slack) / ff_multiple)) * ff_multiple
    hi = math.floor(ff_ratio * d_model * (1 + slack) / ff_multiple) * ff_multiple
    out = {nominal}
    for k in (math.floor(exact / ff_multiple), math.ceil(exact / ff_multiple)):
        v = min(max(k * ff_multiple, lo), max(lo, hi))
        if v > 0:
            out.add(v)
    return sorted(out)


def iso_param_family(
    target: float,
    depths: Iterable[int],
    ff_ratios: Sequence[float] = (4.0,),
    *,
    head_dim: int | None = 64,
    n_head: int | None = None,
    multiple: int = 64,
    n_kv_head_ratio: int = 1,
    n_kv_head: int | None = None,
    tolerance: float = 0.05,
    ff_multiple: int = 64,
    ff_slack: float = 0.15,
    d_ff_rule: Callable[[int], int] | None = None,
    **base: Any,
) -> list[FamilyMember]:
    """For each depth (and ff ratio), the width whose non-embedding count lands closest to ``target``.

    Widths are multiples of ``multiple``; heads follow from a fixed ``head_dim`` (default 64) or
    a fixed ``n_head``. ``n_kv_head_ratio`` groups query heads per key/value head (GQA), or
    ``n_kv_head`` fixes the number of key/value heads (as Llama-2-70B's 8); widths are sized with
    the kv heads the shape will have.
    ``d_ff`` is ``ff_ratio * d_model`` rounded to ``ff_multiple``; with ``ff_slack > 0`` it may move
    up to that fraction away from the nominal ratio (in ``ff_multiple`` steps) when that brings the
    count closer to the target: a width step of 64 is a coarse knob at small depth, and d_ff is the
    fine one. The achieved ``ff_ratio`` is reported; ``ff_slack=0`` keeps the ratio exact.
    ``d_ff_rule`` (e.g. Llama's, :func:`archfit.frameworks.llama_ffn_hidden`) instead gives
    d_ff as a function of d_model, exactly. ``base`` sets the other shape fields (vocab_size, n_ctx, mlp, ...). Members whose relative
    error exceeds ``tolerance`` are returned with ``within_tolerance=False`` and a note.
    """
    _check_target(target)
    if (head_dim is None) == (n_head is None):
        raise ShapeError("give exactly one of head_dim or n_head to fix the attention heads")
    if multiple <= 0:
        raise ShapeError(f"multiple must be positive, got {multiple}")
    unknown = set(base) - set(_BASE_FIELDS)
    if unknown:
        raise ShapeError(f"unknown shape options {sorted(unknown)}; allowed: {', '.join(_BASE_FIELDS)}")
    members: list[FamilyMember] = []
    for ff in ff_ratios:
        if not ff > 0:
            raise ShapeError(f"ff ratios must be positive, got {ff}")
        for L in depths:
            if int(L) != L or L <= 0:
                raise ShapeError(f"depths must be positive whole numbers, got {L}")
            L = int(L)
            best: tuple[float, float, Shape] | None = None
            # with fixed kv heads of a fixed size, only widths whose head count they divide
            step = multiple if not (n_kv_head and head_dim) else math.lcm(
                multiple, head_dim * n_kv_head)
            for d in _width_candidates(target, L, ff, step, base.get("mlp", "gelu"),
                                       **_kv_terms(head_dim, n_head, n_kv_head_ratio,
                                                   n_kv_head)):
                h = _heads_for(d, head_dim, n_head)
                if h is None or h % n_kv_head_ratio or (n_kv_head and h % n_kv_head):
                    continue
                try:
                    nominal = Shape(n_layer=L, d_model=d, n_head=h, ff_ratio=ff,
                                    n_kv_head=n_kv_head or h // n_kv_head_ratio, **base)
                except ShapeError:
                    continue
                for d_ff in ([d_ff_rule(d)] if d_ff_rule is not None else
                             _ff_candidates(nominal, ff, target, ff_multiple, ff_slack)):
                    s = nominal.with_(d_ff=d_ff)
                    err = (s.params_non_embedding - target) / target
                    # parameter error first; a small price for leaving the nominal ff ratio
                    score = abs(err) + 0.1 * abs(math.log(s.ff_ratio / ff))
                    if best is None or score < best[0]:
                        best = (score, err, s)
            if best is None:
                members.append(FamilyMember(target, L, None, None, False,
                                            note="no width is a multiple of both "
                                                 f"{multiple} and the head constraint",
                                            ff_ratio=ff))
                continue
            _, err, s = best
            ok = abs(err) <= tolerance
            note = "" if ok else (f"closest width {s.d_model} misses the target by {err:+.1%} "
                                  f"(tolerance {tolerance:.0%}); depth {L} does not fit this size")
            members.append(FamilyMember(target, L, s, err, ok, note, ff_ratio=ff))
    return members


def fixed_width_family(
    target: float,
    d_model: int,
    depths: Iterable[int],
    *,
    head_dim: int | None = 64,
    n_head: int | None = None,
    ff_multiple: int = 64,
    tolerance: float = 0.05,
    **base: Any,
) -> list[FamilyMember]:
    """Petty et al. (2023)-style family: hold ``d_model``, vary depth, and pick ``d_ff``
    (a multiple of ``ff_multiple``) so the non-embedding count stays at ``target``."""
    _check_target(target)
    h = _heads_for(d_model, head_dim, n_head)
    if h is None:
        raise ShapeError(f"d_model {d_model} is not divisible by the head size/count asked for")
    members = []
    for L in depths:
        L = int(L)
        probe = Shape(n_layer=L, d_model=d_model, n_head=h, d_ff=ff_multiple, **base)
        per_ff = probe.params_non_embedding
        probe2 = probe.with_(d_ff=2 * ff_multiple)
        slope = (probe2.params_non_embedding - per_ff) / ff_multiple
        ff_exact = ff_multiple + (target - per_ff) / slope
        k = round(ff_exact / ff_multiple)
        if k < 1:
            members.append(FamilyMember(target, L, None, None, False,
                                        note=f"attention alone at depth {L} exceeds the target"))
            continue
        s = probe.with_(d_ff=k * ff_multiple)
        err = (s.params_non_embedding - target) / target
        ok = abs(err) <= tolerance
        members.append(FamilyMember(target, L, s, err, ok,
                                    "" if ok else f"misses the target by {err:+.1%}"))
    return members


def aspect_ratio_family(
    target: float,
    aspect_ratios: Iterable[float],
    ff_ratio: float = 4.0,
    *,
    head_dim: int | None = 64,
    n_head: int | None = None,
    multiple: int = 64,
    tolerance: float = 0.05,
    **base: Any,
) -> list[FamilyMember]:
    """Kaplan et al. (2020)-style family: for each aspect ratio d_model/n_layer, the
    (depth, width) pair closest to ``target`` non-embedding parameters."""
    _check_target(target)
    mats = 3 if base.get("mlp", "gelu") == "swiglu" else 2
    members = []
    for ar in aspect_ratios:
        if not ar > 0:
            raise ShapeError(f"aspect ratios must be positive, got {ar}")
        L0 = (target / ((4 + mats * ff_ratio) * ar * ar)) ** (1 / 3)
        best: tuple[float, Shape] | None = None
        for L in {max(1, math.floor(L0)), max(1, math.ceil(L0))}:
            for m in iso_param_family(target, [L], [ff_ratio], head_dim=head_dim, n_head=n_head,
                                      multiple=multiple, tolerance=math.inf, **base):
                if m.shape is None:
                    continue
                # score by both parameter error and aspect-ratio error
                score = abs(m.rel_error or 0) + abs(math.log(m.shape.aspect_ratio / ar))
                if best is None or score < best[0]:
                    best = (score, m.shape)
        if best is None:
            members.append(FamilyMember(target, round(L0), None, None, False,
                                        note="no shape fits", aspect_ratio=ar))
            continue
        s = best[1]
        err = (s.params_non_embedding - target) / target
        ok = abs(err) <= tolerance
        members.append(FamilyMember(target, s.n_layer, s, err, ok,
                                    "" if ok else f"misses the target by {err:+.1%}",
                                    aspect_ratio=ar))
    return members
