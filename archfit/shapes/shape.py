"""The one place where a transformer shape is described and counted: every field, its checks
and every count live here, and nowhere else.

Parameter conventions (every count archfit prints names one of these):

``params_total``
    Every trainable parameter of the decoder-only GPT that :mod:`archfit.train.model`
    builds (and that HF ``GPT2LMHeadModel`` builds for GPT-2 shapes): embeddings,
    blocks, final norm and — when untied — the output head.
``params_embedding``
    The vocabulary and position matrices: token embedding, learned position
    embedding (zero for rotary positions) and, when untied, the output head.
``params_non_embedding``
    ``params_total - params_embedding``: Kaplan et al. (2020)'s *N*, "excluding all
    vocabulary and positional embeddings". Includes block norms, biases and the final norm.
``params_active`` / ``params_active_non_embedding``
    A mixture of experts (``n_experts`` > 0): the parameters one token uses, the counts above
    less the weights of the ``n_experts - top_k`` routed experts it skips in every sparse
    layer. The router and the shared experts are active. Equal to the counts above for a
    dense shape. Total parameters set the memory; active ones the FLOPs.

FLOP conventions (per token):

``kaplan_forward``
    Kaplan et al. (2020) Table 1: ``C_fwd = 2N + 2 n_layer n_ctx d_model`` with N
    non-embedding (for a mixture of experts, the *active* non-embedding parameters). For a per-layer plan the context term sums ``n_ctx`` times each attending
    layer's query width (heads × head_dim): a layer without attention adds none.
``kaplan_train``
    ``3 * kaplan_forward`` (backward ≈ 2× forward) = ``6N + 6 n_layer n_ctx d_model``.
``matmul_forward``
    Exact multiply-accumulate count × 2 of every matrix product in a forward pass:
    Q/K/V/O projections, attention scores ``QKᵀ`` and the weighted sum ``AV`` over the
    full ``n_ctx`` window (dense attention, as Hoffmann et al. 2022, App. F), MLP
    matrices (a sparse layer: its router and the ``top_k`` routed and the shared experts)
    and the output logits. Norms, softmax and activations are not counted.
``matmul_train``
    ``3 * matmul_forward`` (the backward pass computes two products per forward one).

Per-layer plans (``no_mlp``, ``no_attn``, ``heads_per_layer``): every count above is a sum over
the blocks, each counted by :meth:`Shape.layer_breakdown` and :meth:`Shape.layer_flops`; a
block without an MLP (or attention) has neither its matrices nor the norm before them.

The per-layer plan's text form and its records are in :mod:`archfit.shapes.layer_plan`.
"""

from __future__ import annotations

import math

import operator
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, get_args

from archfit.errors import ShapeError
from archfit.shapes.layer_plan import Layer, plan_indices

# the one source of each choice: these Literal types; specs and click options read the tuples
# made from them
MlpKind = Literal["gelu", "relu2", "swiglu"]
PositionKind = Literal["learned", "rope"]
NormKind = Literal["layernorm", "rmsnorm"]
# how init and learning rates scale with width and depth (archfit.train.model)
Parametrization = Literal["standard", "mup", "completep", "depth-mup"]
MLP_KINDS: tuple[str, ...] = get_args(MlpKind)
POSITION_KINDS: tuple[str, ...] = get_args(PositionKind)
NORM_KINDS: tuple[str, ...] = get_args(NormKind)
PARAMETRIZATIONS: tuple[str, ...] = get_args(Parametrization)


LOSS_CHUNK_ELEMENTS = 1 << 25  # at most this many logits per chunk of the fused output layer


def loss_chunk(vocab_size: int) -> int:  # archfit.train.model computes so, archfit.train.memory counts so
    """Tokens per chunk of the fused output layer and loss: a multiple of 64 (CPU GEMMs)."""
    return max(16, LOSS_CHUNK_ELEMENTS // vocab_size // 64 * 64)

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
    "kaplan_forward": "Kaplan 2020: 2N + 2*n_layer*n_ctx*d_model (N non-embedding, active)",
    "kaplan_train": f"Kaplan 2020 training: {KAPLAN_TRAIN_FORMULA}",
    "matmul_forward": "exact matmul FLOPs of a forward pass incl. attention scores and logits",
    "matmul_train": "3x matmul_forward (forward + backward)",
}


# the largest depth, width, head count, vocabulary or context archfit counts: beyond it a
# number is a typo, and exact counts of it would not fit a float
MAX_DIM = 10 ** 9
MAX_PLANNED_LAYERS = 100_000  # per-layer plans list their blocks; uniform shapes count in O(1)


@dataclass(frozen=True)
class Shape:
    """A decoder-only transformer, validated on construction.

    ``d_ff`` may be left out and given through ``ff_ratio`` (``d_ff = round(ff_ratio * d_model)``);
    ``n_kv_head`` defaults to ``n_head`` (multi-head attention); 1 is MQA, between is GQA.
    ``d_head`` sets the head width where it is not ``d_model / n_head`` (Qwen3, Gemma).
    A mixture of experts: ``n_experts`` routed experts (0: dense), ``top_k`` of them per token,
    ``n_shared_experts`` every token uses, each an MLP of hidden width ``d_expert`` (default
    ``d_ff / granularity``, granularity 1 by default), with a bias-free router of
    ``d_model x n_experts``; the sparse layers are every ``moe_every``-th (layer i when
    ``(i + 1) % moe_every == 0``, Qwen's ``decoder_sparse_step``) after the first
    ``dense_first`` (DeepSeek's ``first_k_dense_replace``), the rest dense MLPs of ``d_ff``.
    Multi-head latent attention (DeepSeek-V2/V3, ``kv_lora_rank`` > 0): keys and values come
    from a shared latent of ``kv_lora_rank`` (RMS-normed), queries from one of ``q_lora_rank``
    (0: a full query projection); each head's query and key are ``head_dim`` wide without
    positions plus ``qk_rope_head_dim`` with RoPE (one rope key shared by the heads), its value
    ``v_head_dim`` wide (default head_dim); no biases, one key/value head per head.
    ``bias`` puts biases on every linear layer except the output head, and on the norms;
    ``qkv_bias`` puts them on the query, key and value projections only (Qwen2), and is implied
    by ``bias``.

    A frozen dataclass: copy it with :meth:`with_` or ``dataclasses.replace``.
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
    # the per-layer plan (uniform by default): layers without an MLP, layers without attention
    # (indices from 0; negative ones count from the end and are stored resolved), and the query
    # heads of each layer at the fixed head_dim d_model // n_head (key/value heads keep the
    # ratio n_head / n_kv_head). See :meth:`layers`, :attr:`plan`, :func:`parse_plan`.
    no_mlp: tuple[int, ...] = ()
    no_attn: tuple[int, ...] = ()
    heads_per_layer: tuple[int, ...] = ()
    d_head: int | None = None
    # a mixture of experts (n_experts 0: dense); see the class docstring
    n_experts: int = 0
    top_k: int = 0
    n_shared_experts: int = 0
    d_expert: int | None = None
    moe_every: int = 1
    dense_first: int = 0
    granularity: float | None = field(default=None, compare=False, repr=False)
    # multi-head latent attention (kv_lora_rank 0: ordinary attention); see the class docstring
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int | None = None

    def __post_init__(self) -> None:
        for name in ("n_layer", "d_model", "n_head", "vocab_size", "n_ctx"):
            value = getattr(self, name)
            if type(value) is int and 0 < value <= MAX_DIM:
                continue  # the common case, checked once (families build hundreds of shapes)
            object.__setattr__(self, name, _whole(name, value))
            if getattr(self, name) <= 0:
                raise ShapeError(f"{name} must be positive, got {value}")
            if getattr(self, name) > MAX_DIM:
                raise ShapeError(f"{name} {getattr(self, name):.3g} is beyond {MAX_DIM:.0e}, the "
                                 "largest dimension archfit counts; check the number")
        d_ff: Any = self.d_ff
        if d_ff is None:
            ratio = 4.0 if self.ff_ratio is None else self.ff_ratio
            if not (ratio > 0 and math.isfinite(ratio)):
                raise ShapeError(f"ff_ratio must be a positive number, got {ratio}")
            d_ff = max(1, int(round(ratio * self.d_model)))
        else:
            d_ff = _whole("d_ff", d_ff)
            if d_ff <= 0:
                raise ShapeError(f"d_ff must be a positive whole number, got {d_ff!r}")
        if d_ff > MAX_DIM:
            raise ShapeError(f"d_ff {d_ff:.3g} is beyond {MAX_DIM:.0e}, the largest "
                             "dimension archfit counts; check the number")
        for k, v in (("d_ff", d_ff), ("ff_ratio", d_ff / self.d_model)):
            object.__setattr__(self, k, v)
        kv = _whole("n_kv_head", self.n_head if self.n_kv_head is None else self.n_kv_head)
        if kv <= 0:
            raise ShapeError(f"n_kv_head must be a positive whole number, got {kv!r}")
        object.__setattr__(self, "n_kv_head", kv)
        if self.d_head is not None:
            hd = _whole("d_head", self.d_head)
            if not 0 < hd <= MAX_DIM:
                raise ShapeError(f"d_head must be a positive whole number, got {self.d_head!r}")
            object.__setattr__(self, "d_head", hd)
        self._check_experts(d_ff)
        if self.d_head is None and self.d_model % self.n_head:
            raise ShapeError(
                f"d_model {self.d_model} is not divisible by n_head {self.n_head}; "
                f"choose heads that divide the width (e.g. {_divisor_hint(self.d_model, self.n_head)})"
            )
        if self.n_head % kv:
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
        self._check_plan()
        self._check_mla()
        if self.n_experts and self.n_sparse_layers == 0:  # read once the plan is parsed
            raise ShapeError(f"no layer is sparse: with moe_every {self.moe_every}, dense_first "
                             f"{self.dense_first} and the plan's blocks without an MLP, none of "
                             f"the {self.n_layer} layers holds experts")

    def _check_experts(self, d_ff: int) -> None:
        """The mixture-of-experts fields: all at their defaults for a dense shape; for a sparse
        one, 1 <= top_k <= n_experts, and d_expert from ``granularity`` when not given."""
        for name in ("n_experts", "top_k", "n_shared_experts", "dense_first"):
            v = _whole(name, getattr(self, name))
            if not 0 <= v <= MAX_DIM:
                raise ShapeError(f"{name} must be a whole number from 0 to {MAX_DIM:.0e}, got "
                                 f"{v!r}")
            object.__setattr__(self, name, v)
        every = _whole("moe_every", self.moe_every)
        if every < 1:
            raise ShapeError(f"moe_every must be a whole number >= 1, got {every!r}")
        object.__setattr__(self, "moe_every", every)
        if self.n_experts == 0:
            given = [k for k in ("top_k", "n_shared_experts", "dense_first")
                     if getattr(self, k)] + [k for k in ("d_expert", "granularity")
                                             if getattr(self, k) is not None]
            if given:
                verb = "describes" if len(given) == 1 else "describe"
                raise ShapeError(f"{', '.join(given)} {verb} a mixture of experts; give "
                                 "n_experts (--experts) too, or drop it for a dense shape")
            return
        if not 1 <= self.top_k <= self.n_experts:
            raise ShapeError(f"top_k (--top-k), the experts each token is routed to, must be "
                             f"from 1 to n_experts ({self.n_experts}); got {self.top_k}")
        if self.dense_first >= self.n_layer:
            raise ShapeError(f"dense_first {self.dense_first} leaves none of the "
                             f"{self.n_layer} layers sparse; give fewer dense layers")
        if self.d_expert is None:
            g = 1.0 if self.granularity is None else self.granularity
            if isinstance(g, bool) or not (isinstance(g, (int, float)) and g > 0
                                           and math.isfinite(g)):
                raise ShapeError(f"granularity must be a positive number, got {g!r}")
            if round(d_ff / g) < 1:
                raise ShapeError(f"granularity {g:g} would make each expert less than one unit "
                                 f"wide (d_ff {d_ff:,} / {g:g}); give at most {d_ff:,}")
            de = int(round(d_ff / g))
        else:
            de = _whole("d_expert", self.d_expert)
            if not 0 < de <= MAX_DIM:
                raise ShapeError(f"d_expert must be a positive whole number, got "
                                 f"{self.d_expert!r}")
            g = self.granularity
            if g is not None and not (isinstance(g, (int, float)) and math.isfinite(g) and g > 0
                                      and round(d_ff / g) == de):
                raise ShapeError(f"granularity (--granularity) {g!r} and d_expert "
                                 f"(--expert-d-ff) {de:,} disagree: d_ff {d_ff:,} / {de:,} is "
                                 f"granularity {d_ff / de:.4g}; give one of them")
        object.__setattr__(self, "d_expert", de)
        object.__setattr__(self, "granularity", d_ff / de)

    def _check_mla(self) -> None:
        """Multi-head latent attention's fields: all at their defaults without it; with it, whole
        ranks and widths, per-head keys and values, no biases, RoPE on the rope part only."""
        for name in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim"):
            v = _whole(name, getattr(self, name))
            if not 0 <= v <= MAX_DIM:
                raise ShapeError(f"{name} must be a whole number from 0 to {MAX_DIM:.0e}, got "
                                 f"{v!r}")
            object.__setattr__(self, name, v)
        if self.v_head_dim is not None:
            vd = _whole("v_head_dim", self.v_head_dim)
            if not 0 < vd <= MAX_DIM:
                raise ShapeError(f"v_head_dim must be a positive whole number, got "
                                 f"{self.v_head_dim!r}")
            object.__setattr__(self, "v_head_dim", vd)
        if not self.kv_lora_rank:
            given = [k for k in ("q_lora_rank", "qk_rope_head_dim") if getattr(self, k)] + (
                ["v_head_dim"] if self.v_head_dim is not None else [])
            if given:
                raise ShapeError(f"{', '.join(given)} describe multi-head latent attention; "
                                 "give kv_lora_rank (--kv-rank) too, or drop them")
            return
        problems = [why for why, bad in (
            ("one key/value head per head (n_kv_head = n_head)", self.n_kv_head != self.n_head),
            ("no biases (--no-bias)", self.bias or self.qkv_bias),
            ("no QK-norm (its latents are normed instead)", self.qk_norm),
            ("rotary positions for its rope part (--rope)",
             self.qk_rope_head_dim and self.position != "rope")) if bad]
        if problems:
            raise ShapeError(f"multi-head latent attention (kv_lora_rank {self.kv_lora_rank}) "
                             f"has {'; '.join(problems)}")
        if self.v_head_dim == self.head_dim:  # the default, stated: one shape, one spelling
            object.__setattr__(self, "v_head_dim", None)

    @property
    def mla(self) -> bool:
        """Whether attention is multi-head latent attention (DeepSeek-V2/V3)."""
        return self.kv_lora_rank > 0

    @property
    def value_head_dim(self) -> int:
        """Each head's value width (MLA's v_head_dim; else head_dim)."""
        return self.v_head_dim or self.head_dim

    def attention_width(self, heads: int) -> float:
        """Kaplan's d_attn of a block of ``heads`` heads: heads x head_dim; with latent
        attention, the mean of the query-key and the value widths over the heads."""
        if not self.mla:
            return heads * self.head_dim
        return heads * (self.head_dim + self.qk_rope_head_dim + self.value_head_dim) / 2

    def kv_cache_width(self, kv_heads: int) -> int:
        """Numbers one token leaves in a block's key/value cache: keys and values of
        ``kv_heads`` heads; with latent attention, the latent and the shared rope key."""
        if self.mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * kv_heads * self.head_dim

    def _mla_params(self, heads: int) -> tuple[int, int]:
        """(matrices, norms) of one latent-attention block of ``heads`` heads."""
        d, hd, r, v = self.d_model, self.head_dim, self.qk_rope_head_dim, self.value_head_dim
        ql, kvr = self.q_lora_rank, self.kv_lora_rank
        q = d * ql + ql * heads * (hd + r) if ql else d * heads * (hd + r)
        mats = q + d * (kvr + r) + kvr * heads * (hd + v) + heads * v * d
        return mats, (self._norm_params(ql) if ql else 0) + self._norm_params(kvr)

    def _check_plan(self) -> None:
        if not (self.no_mlp or self.no_attn or self.heads_per_layer):
            if self.no_mlp != () or self.no_attn != () or self.heads_per_layer != ():
                for name in ("no_mlp", "no_attn", "heads_per_layer"):  # "" or [] from a flag
                    object.__setattr__(self, name, ())
            return  # uniform (every shape but a plan's): nothing to resolve
        L = self.n_layer
        if L > MAX_PLANNED_LAYERS:  # a plan's blocks are listed one by one
            raise ShapeError(f"a per-layer plan over {L:,} layers: archfit lists every block of "
                             f"a planned shape, up to {MAX_PLANNED_LAYERS:,} layers; plan a "
                             "shallower model or drop the plan (a uniform shape counts at any "
                             "depth)")
        for name in ("no_mlp", "no_attn"):
            idx = plan_indices(getattr(self, name), name, L)
            bad = [i for i in idx if not -L <= i < L]
            if bad:
                raise ShapeError(f"{name} layer {bad[0]} is outside the {L} layers (0..{L - 1}, "
                                 f"or -{L}..-1 from the end)")
            object.__setattr__(self, name, tuple(sorted({i % L for i in idx})))
        both = set(self.no_mlp) & set(self.no_attn)
        if both:
            raise ShapeError(f"layer {min(both)} has neither attention nor an MLP; drop the "
                             "layer instead (a smaller n_layer)")
        heads = plan_indices(self.heads_per_layer, "heads_per_layer")
        if heads:
            if len(heads) != L:
                raise ShapeError(f"heads_per_layer gives {len(heads)} head counts for {L} "
                                 "layers; give one per layer")
            group = self.n_head // self.n_kv_head  # type: ignore[operator]
            for i, h in enumerate(heads):
                if h <= 0 or h * self.head_dim > MAX_DIM or h % group:
                    raise ShapeError(f"heads_per_layer: layer {i} has {h} heads; give a "
                                     f"positive multiple of the GQA group {group} "
                                     f"(n_head / n_kv_head)")
            if all(h == self.n_head for h in heads):
                heads = []  # every layer at n_head: the uniform shape
        object.__setattr__(self, "heads_per_layer", tuple(heads))

    # ---------------------------------------------------------------- derived sizes
    @property
    def head_dim(self) -> int:
        return self.d_head if self.d_head is not None else self.d_model // self.n_head

    # ---------------------------------------------------------------- experts
    @property
    def moe(self) -> bool:
        """Whether the shape is a mixture of experts."""
        return self.n_experts > 0

    def is_sparse(self, i: int) -> bool:
        """Whether block ``i``'s MLP is a mixture of experts (an MLP-less block has none)."""
        return (self.n_experts > 0 and i >= self.dense_first and (i + 1) % self.moe_every == 0
                and i not in self.no_mlp)

    @property
    def n_sparse_layers(self) -> int:
        """The blocks whose MLP is a mixture of experts."""
        if self.n_experts == 0:
            return 0
        k = self.moe_every
        n = self.n_layer // k - self.dense_first // k
        return n - sum(1 for i in self.no_mlp if self.is_sparse_slot(i))

    def is_sparse_slot(self, i: int) -> bool:
        """Whether position ``i`` is a sparse slot of the pattern (before the plan's MLP-less
        blocks are taken out)."""
        return i >= self.dense_first and (i + 1) % self.moe_every == 0

    @property
    def expert_params(self) -> int:
        """One expert's parameters (an MLP of hidden width d_expert)."""
        return self._mlp_params(self.d_expert or 0)

    @property
    def kv_dim(self) -> int:
        """Width of the key (and of the value) projection: n_kv_head * head_dim."""
        return self.n_kv_head * self.head_dim  # type: ignore[operator]

    @property
    def uniform(self) -> bool:
        """Whether every layer is the same block (no per-layer plan)."""
        return not (self.no_mlp or self.no_attn or self.heads_per_layer)

    @property
    def plan(self) -> str:
        """The per-layer plan as text (``"uniform"``, ``"no-mlp:0,11"``,
        ``"no-attn:7 heads:6,12,12,6"``): what :func:`parse_plan` reads back."""
        parts = [f"{k}:{','.join(map(str, v))}" for k, v in (
            ("no-mlp", self.no_mlp), ("no-attn", self.no_attn),
            ("heads", self.heads_per_layer)) if v]
        return " ".join(parts) or "uniform"

    def layer(self, i: int) -> Layer:
        """Block ``i``: whether it has attention and an MLP, and its query / key-value heads."""
        h = self.heads_per_layer[i] if self.heads_per_layer else self.n_head
        return Layer(i, i not in self.no_attn, i not in self.no_mlp, h,
                     h // (self.n_head // self.n_kv_head),  # type: ignore[operator]
                     self.is_sparse(i))

    def layers(self) -> list[Layer]:
        """Every block (:meth:`layer`), in order."""
        return [self.layer(i) for i in range(self.n_layer)]

    def layer_counts(self) -> list[tuple[Layer, int]]:
        """Each block with how many times it repeats: a uniform shape's first block, n_layer
        times (O(1) at any depth; a mixture of experts with dense layers: a dense block and a
        sparse one, each as often as it occurs), else every block once."""
        if not self.uniform:
            return [(lay, 1) for lay in self.layers()]
        S = self.n_sparse_layers
        if S in (0, self.n_layer):
            return [(self.layer(0), self.n_layer)]
        k = self.moe_every  # the first sparse block, and block 0 (dense: S < n_layer)
        first_sparse = self.dense_first + (k - 1 - self.dense_first) % k
        return [(self.layer(0), self.n_layer - S), (self.layer(first_sparse), S)]

    @property
    def notes(self) -> list[str]:
        """What a reader of the counts would want said about the shape itself."""
        return ["no layer has attention: tokens never mix, so this is a per-token MLP stack, "
                "not a language model of its context"] * (len(self.no_attn) == self.n_layer)

    @property
    def aspect_ratio(self) -> float:
        """Kaplan's aspect ratio d_model / n_layer."""
        return self.d_model / self.n_layer

    # ---------------------------------------------------------------- counting
    def _norm_params(self, width: int) -> int:
        has_bias = self.bias and self.norm == "layernorm"
        return width * (2 if has_bias else 1)

    def _mlp_params(self, f: int) -> int:
        """One MLP of hidden width ``f``: its matrices (3 for swiglu, else 2) and biases."""
        mats = 3 if self.mlp == "swiglu" else 2
        return mats * self.d_model * f + (((mats - 1) * f + self.d_model) if self.bias else 0)

    def layer_breakdown(self, i: int = 0) -> dict[str, int]:
        """Parameters of block ``i``, by component (a block without attention has neither its
        projections nor their norm; one without an MLP neither its matrices nor their norm)."""
        lay = self.layer(i)
        d, f, hd = self.d_model, self.d_ff, self.head_dim
        q, kv = lay.heads * hd, lay.kv_heads * hd
        assert f is not None
        attn = norms = mlp = 0
        if lay.attn and self.mla:
            attn, latent = self._mla_params(lay.heads)
            norms += self._norm_params(d) + latent
        elif lay.attn:
            attn = d * q + 2 * d * kv + q * d
            if self.bias or self.qkv_bias:
                attn += q + 2 * kv + (d if self.bias else 0)
            norms += self._norm_params(d)
            if self.qk_norm:
                norms += 2 * self._norm_params(hd)
        out = {"attention": attn, "mlp": 0, "norms": 0}
        if lay.mlp and lay.sparse:
            out["router"] = d * self.n_experts
            mlp = (self.n_experts + self.n_shared_experts) * self.expert_params
            norms += self._norm_params(d)
        elif lay.mlp:
            mlp = self._mlp_params(f)
            norms += self._norm_params(d)
        out.update(mlp=mlp, norms=norms)
        return out

    def breakdown(self) -> dict[str, int]:
        """Every parameter of the model, by component (sums to :attr:`params_total`); a
        mixture of experts has a ``router`` component, and its ``mlp`` holds every expert."""
        keys = ("attention", "mlp", "norms") + (("router",) if self.moe else ())
        blocks: dict[str, int] = dict.fromkeys(keys, 0)
        for lay, k in self.layer_counts():  # O(1) for a uniform shape
            for key, v in self.layer_breakdown(lay.index).items():
                blocks[key] += k * v
        out = {
            "token_embedding": self.vocab_size * self.d_model,
            "position_embedding": self.n_ctx * self.d_model if self.position == "learned" else 0,
            "attention": blocks["attention"],
            "mlp": blocks["mlp"],
            "norms": blocks["norms"] + self._norm_params(self.d_model),
            "head": 0 if self.tied_embeddings else self.vocab_size * self.d_model,
        }
        if self.moe:
            out["router"] = blocks["router"]
        return out

    @property
    def params_embedding(self) -> int:
        b = self.breakdown()
        return b["token_embedding"] + b["position_embedding"] + b["head"]

    @property
    def params_non_embedding(self) -> int:
        if self.uniform and not self.moe:  # n_layer blocks and the final norm, in O(1)
            block, rest = self.depth_line()
            return self.n_layer * block + rest
        return self.params_total - self.params_embedding

    @property
    def params_total(self) -> int:
        return sum(self.breakdown().values())

    @property
    def params_inactive(self) -> int:
        """The weights of the routed experts a token skips: (n_experts - top_k) experts in
        every sparse layer (0 for a dense shape)."""
        return self.n_sparse_layers * (self.n_experts - self.top_k) * self.expert_params

    @property
    def params_active(self) -> int:
        """The parameters one token uses (:attr:`params_total` for a dense shape)."""
        return self.params_total - self.params_inactive

    @property
    def params_active_non_embedding(self) -> int:
        """The active parameters less the embeddings: the N of a mixture of experts' FLOPs and
        of the MoE laws (:attr:`params_non_embedding` for a dense shape)."""
        return self.params_non_embedding - self.params_inactive

    def depth_line(self, active: bool = False) -> tuple[int, int]:
        """``(block, rest)`` of a uniform shape: its non-embedding count (``active``: its active
        non-embedding count) at depth L is ``L * block + rest`` (every block alike; ``rest`` is
        the final norm)."""
        if not self.uniform or (self.moe and self.n_sparse_layers != self.n_layer):
            raise ShapeError("depth_line is for uniform shapes, every block alike: a per-layer "
                             "plan, or dense layers among sparse ones, is not linear in depth")
        skipped = (self.n_experts - self.top_k) * self.expert_params if active else 0
        return sum(self.layer_breakdown().values()) - skipped, self._norm_params(self.d_model)

    @property
    def params_per_d_ff(self) -> float:
        """How much the non-embedding count grows per unit of ``d_ff`` (it is linear in d_ff):
        one MLP's slope, in every block that has an MLP (:meth:`d_ff_slope`)."""
        return self.d_ff_slope()

    def d_ff_slope(self, active: bool = False) -> float:
        """The count's growth per unit of ``d_ff`` (``active``: of the active count): one MLP's
        slope in each dense block; in each sparse block, its experts' (all of them, or the
        top_k and shared ones), whose width d_ff / granularity moves with d_ff."""
        one = self._mlp_params(1) - self._mlp_params(0)
        S = self.n_sparse_layers
        dense = self.n_layer - len(self.no_mlp) - S
        if not S:
            return dense * one
        experts = (self.top_k if active else self.n_experts) + self.n_shared_experts
        return dense * one + S * experts * one / (self.granularity or 1.0)

    # ---------------------------------------------------------------- FLOPs
    def flops_per_token(self, convention: str = "kaplan_train") -> float:
        """FLOPs per token under ``convention`` (see :data:`FLOP_CONVENTIONS`)."""
        d, c = self.d_model, self.n_ctx
        if convention in ("kaplan_forward", "kaplan_train"):
            # Kaplan's 2 n_layer n_ctx d_attn, summed over the layers that attend; N active
            fwd = 2 * self.params_active_non_embedding + 2 * c * sum(
                k * self.attention_width(lay.heads) for lay, k in self.layer_counts()
                if lay.attn)
            return float(fwd if convention == "kaplan_forward" else 3 * fwd)
        if convention in ("matmul_forward", "matmul_train"):
            fwd = sum(k * self.layer_flops(lay) for lay, k in self.layer_counts()) \
                + 2 * d * self.vocab_size
            return float(fwd if convention == "matmul_forward" else 3 * fwd)
        raise ShapeError(
            f"unknown FLOP convention {convention!r}; choose one of {', '.join(FLOP_CONVENTIONS)}"
        )

    def layer_flops(self, lay: Layer) -> int:
        """Forward matmul FLOPs per token of one block: its projections, its attention scores
        and weighted sum over the full n_ctx window, and its MLP (a sparse one: the router and
        the top_k routed and the shared experts the token passes through)."""
        d, c, hd, f = self.d_model, self.n_ctx, self.head_dim, self.d_ff
        assert f is not None
        q, kv = lay.heads * hd, lay.kv_heads * hd
        mats = 3 if self.mlp == "swiglu" else 2
        attn = 2 * (2 * d * q + 2 * d * kv) + 2 * 2 * c * q if lay.attn else 0
        if lay.attn and self.mla:  # its matrices, and scores and values over the context
            attn = 2 * self._mla_params(lay.heads)[0] + 2 * 2 * c * round(
                self.attention_width(lay.heads))
        if lay.mlp and lay.sparse:
            experts = self.top_k + self.n_shared_experts
            return attn + 2 * d * self.n_experts + 2 * mats * d * (self.d_expert or 0) * experts
        return attn + (2 * mats * d * f if lay.mlp else 0)

    # ---------------------------------------------------------------- records
    def config(self) -> dict[str, Any]:
        """The fields that define the shape (what :meth:`from_config` takes back)."""
        d = asdict(self)
        d.pop("ff_ratio")
        d.pop("granularity")  # d_expert carries it
        return d

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Shape:
        known = {k: v for k, v in cfg.items() if k in _FIELDS}
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        """Shape fields, exact counts (each convention named) and FLOPs per token."""
        out = self.config()
        if self.moe:
            out["granularity"] = self.granularity
        out.update(
            plan=self.plan,
            ff_ratio=self.ff_ratio,
            head_dim=self.head_dim,
            params_total=self.params_total,
            params_non_embedding=self.params_non_embedding,
            params_embedding=self.params_embedding,
            params_active=self.params_active,
            params_active_non_embedding=self.params_active_non_embedding,
            breakdown=self.breakdown(),
            flops_per_token=self.flops_per_token("kaplan_train"),
            flops_per_token_convention="kaplan_train: " + FLOP_CONVENTIONS["kaplan_train"],
            flops_per_token_matmul=self.flops_per_token("matmul_train"),
            flops_per_token_matmul_convention="matmul_train: " + FLOP_CONVENTIONS["matmul_train"],
        )
        if not self.uniform:
            out["layers"] = [{**lay._asdict(), "params": sum(self.layer_breakdown(lay.index)
                                                             .values())}
                             for lay in self.layers()]
        return out

    def with_(self, **changes: Any) -> Shape:
        """A copy with some fields changed (``d_ff`` is recomputed from ``ff_ratio`` if given)."""
        if "ff_ratio" in changes and "d_ff" not in changes:
            changes["d_ff"] = None
        if self.moe and "d_expert" not in changes and any(
                k in changes for k in ("d_ff", "ff_ratio", "d_model", "granularity")):
            changes["d_expert"] = None  # recomputed from the (new) d_ff and granularity
            changes.setdefault("granularity", self.granularity)
        if "d_expert" in changes and "granularity" not in changes:
            changes["granularity"] = None  # the given width sets it
        return replace(self, **changes)


_FIELDS = frozenset(f.name for f in fields(Shape))
# the fields that size a shape, and the rest: its architecture (what a family of shapes of one
# size shares), in Shape's order
SIZE_FIELDS = ("n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "ff_ratio", "no_mlp",
               "no_attn", "heads_per_layer", "d_head", "d_expert", "q_lora_rank", "kv_lora_rank",
               "qk_rope_head_dim", "v_head_dim")
# multi-head latent attention's fields (all at their defaults: ordinary attention)
MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim")
# the mixture-of-experts fields (all at their defaults: a dense shape)
MOE_FIELDS = ("n_experts", "top_k", "n_shared_experts", "d_expert", "granularity", "moe_every",
              "dense_first")
ARCH_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Shape) if f.name not in SIZE_FIELDS)


def _whole(name: str, value: Any) -> int:
    """``value`` as a Python int: any integer type (numpy's too) or a float with no fraction;
    a bool, a fraction or anything else is a :class:`ShapeError`."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, (bool, float)):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise ShapeError(f"{name} must be a whole number, got {value!r}")


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
