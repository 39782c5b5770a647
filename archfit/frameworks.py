"""Shapes to and from the configs people train with: Hugging Face ``config.json`` (GPT-2, Llama,
Mistral, Qwen2, GPT-NeoX), nanoGPT's ``GPTConfig``, Megatron-LM arguments, torchtitan and LitGPT.

Every export writes only fields whose meaning was checked against the framework (a test builds
each HF config with transformers on the meta device and compares its parameter count with
:attr:`Shape.params_total`), and says what ``params_total`` counts where the format has room.
A format that cannot express a shape says why (:func:`problems`) instead of writing something
close. Imports report the fields archfit does not know instead of guessing at them.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

from archfit.errors import ShapeError
from archfit.formats import FORMAT_NAMES
from archfit.shapes import Shape


class FormatError(ShapeError):
    """A config that cannot be read, or a shape a format cannot express."""


CONVENTION = ("params_total counts every trainable parameter once (tied embeddings once); "
              "params_non_embedding is Kaplan's N (no token/position embeddings, no untied head)")

# ====================================================================== architecture families
# ff_ratio "llama": d_ff by Meta's rule (llama_ffn_hidden), the one Llama d_ff rule of archfit
LLAMA_STYLE: dict[str, Any] = {"mlp": "swiglu", "ff_ratio": "llama", "ff_multiple": 256,
                               "position": "rope", "norm": "rmsnorm", "bias": False,
                               "tied_embeddings": False}
GPT2_STYLE: dict[str, Any] = {"mlp": "gelu", "ff_ratio": 4.0, "position": "learned",
                              "norm": "layernorm", "bias": True, "tied_embeddings": True}
STYLE_TEXT = {
    "llama": "a Llama-style shape: SwiGLU (d_ff by Llama's rule: 8/3 d_model rounded up to a "
             "multiple of 256), RoPE, "
             "RMSNorm, no biases, untied embeddings",
    "gpt2": "a GPT-2-style shape: GELU (d_ff = 4 d_model), learned positions, LayerNorm, "
            "biases, tied embeddings",
}


def llama_ffn_hidden(dim: int, multiple_of: int, ffn_dim_multiplier: float | None = None) -> int:
    """The SwiGLU hidden size of Meta's Llama reference ``FeedForward`` (and torchtitan's
    llama3 args): 2/3 of 4*dim, times the multiplier, rounded up to ``multiple_of``."""
    hidden = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def family_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Shape fields with a family's d_ff rule applied: ``ff_ratio="llama"`` (the Llama family's
    default) becomes the d_ff of :func:`llama_ffn_hidden` at the family's multiple."""
    out = dict(fields)
    out.pop("ff_multiple", None)
    if out.get("ff_ratio") == "llama":
        out["d_ff"] = llama_ffn_hidden(out["d_model"], LLAMA_STYLE["ff_multiple"])
        out["ff_ratio"] = None
    return out


def llama_ffn_args(dim: int, d_ff: int) -> tuple[int, float | None]:
    """(multiple_of, ffn_dim_multiplier) for which :func:`llama_ffn_hidden` gives exactly
    ``d_ff``: the plain rule at a usual multiple if it does, a two-decimal multiplier if one
    does, else ``multiple_of = d_ff`` with the multiplier that rounds up to it."""
    for m in (256, 512, 1024, 2048, 4096, 128, 64):
        if llama_ffn_hidden(dim, m) == d_ff:
            return m, None
    base = int(8 * dim / 3)
    for scale in (10, 100):  # one-decimal multipliers first (Llama-3 uses 1.3)
        for m in (1024, 256, 512, 2048, 4096, 128, 64):
            lo, hi = math.floor(scale * d_ff / base) - 2, math.ceil(scale * d_ff / base) + 3
            for k in range(max(1, lo), hi):
                if llama_ffn_hidden(dim, m, k / scale) == d_ff:
                    return m, k / scale
    return d_ff, d_ff / base


# ====================================================================== export formats
@dataclass(frozen=True)
class Format:
    """One export target: the family it implies, the file it writes, what it cannot express."""

    name: str
    description: str
    style: str  # "llama" or "gpt2": the architecture the format implies
    filename: str
    render: Callable[[Shape], str]
    limits: Callable[[Shape], list[str]]

    @property
    def defaults(self) -> dict[str, Any]:
        return dict(LLAMA_STYLE if self.style == "llama" else GPT2_STYLE)


def _need(cond: bool, reason: str, out: list[str]) -> None:
    if not cond:
        out.append(reason)


def _llama_limits(s: Shape, who: str) -> list[str]:
    out: list[str] = []
    _need(s.mlp == "swiglu", f"{who} has only a gated SiLU MLP (SwiGLU), not {s.mlp}", out)
    _need(s.norm == "rmsnorm", f"{who} has only RMSNorm, not {s.norm}", out)
    _need(s.position == "rope", f"{who} has only rotary positions, not {s.position}", out)
    _need(not s.bias and not s.qkv_bias, f"{who} is written without biases (drop biases "
          "with --no-bias)", out)
    _need(not s.qk_norm, f"{who} has no QK-norm", out)
    return out


def _hf_llama_limits(s: Shape) -> list[str]:
    return _llama_limits(s, "LlamaConfig")


def _gpt2_limits(s: Shape, who: str = "GPT2Config") -> list[str]:
    out: list[str] = []
    _need(s.mlp == "gelu", f"{who} has only a GELU MLP, not {s.mlp}", out)
    _need(s.norm == "layernorm", f"{who} has only LayerNorm, not {s.norm}", out)
    _need(s.position == "learned", f"{who} has only learned positions, not {s.position}", out)
    _need(s.n_kv_head == s.n_head, f"{who} has only multi-head attention (no GQA/MQA)", out)
    _need(not s.qk_norm, f"{who} has no QK-norm", out)
    if who == "GPT2Config":
        _need(s.bias, f"{who} always has biases", out)
    return out


def _nanogpt_limits(s: Shape) -> list[str]:
    out = _gpt2_limits(s, "nanoGPT's GPTConfig")
    _need(s.d_ff == 4 * s.d_model, f"nanoGPT's MLP is 4 x n_embd, not d_ff {s.d_ff}", out)
    _need(s.tied_embeddings, "nanoGPT ties the output head to the token embedding", out)
    _need(not s.qkv_bias or s.bias, "nanoGPT's bias switch covers every linear, not only q/k/v",
          out)
    return out


def _megatron_limits(s: Shape) -> list[str]:
    out: list[str] = []
    _need(s.norm == "rmsnorm" or s.bias, "Megatron's LayerNorm always has a bias: keep biases "
          "or use --rmsnorm", out)
    _need(s.mlp in ("gelu", "swiglu", "relu2"), f"unknown MLP {s.mlp}", out)
    return out


def _torchtitan_limits(s: Shape) -> list[str]:
    return _llama_limits(s, "torchtitan's llama3")


def _litgpt_limits(s: Shape) -> list[str]:
    out: list[str] = []
    _need(not s.tied_embeddings, "LitGPT's GPT keeps a separate lm_head (no tied embeddings); "
          "use --untied", out)
    _need(s.position == "rope", "LitGPT has only rotary positions", out)
    _need(s.mlp in ("gelu", "swiglu"), f"LitGPT has no {s.mlp} MLP", out)
    _need(s.norm == "rmsnorm" or s.bias, "LitGPT's LayerNorm has a bias: keep biases or use "
          "--rmsnorm", out)
    return out


def _count_note(s: Shape) -> str:
    return (f"params_total {s.params_total:,}; params_non_embedding {s.params_non_embedding:,} "
            f"(archfit {_version()}): {CONVENTION}")


def _version() -> str:
    from archfit import __version__

    return __version__


def _archfit_block(s: Shape) -> dict[str, Any]:
    return {"params_total": s.params_total, "params_non_embedding": s.params_non_embedding,
            "params_embedding": s.params_embedding, "convention": CONVENTION,
            "archfit_version": _version()}


def is_archfit_export(path: str) -> bool:
    """Whether ``path`` is a config archfit exported (an HF config.json with its ``archfit``
    entry, or a file whose header says "written by archfit"): such a file may be replaced."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(1 << 16)
    except (OSError, UnicodeDecodeError):
        return False
    if any("written by archfit" in line for line in head.splitlines()[:3]):
        return True
    try:
        cfg = json.loads(head)
    except ValueError:
        return False
    return isinstance(cfg, dict) and isinstance(cfg.get("archfit"), dict) \
        and "params_total" in cfg["archfit"]


def hf_config(s: Shape, kind: str = "hf-llama") -> dict[str, Any]:
    """A transformers ``config.json`` dict (``hf-llama``: LlamaConfig, ``hf-gpt2``: GPT2Config),
    with an ``archfit`` entry holding the counts and their convention."""
    if kind not in ("hf-llama", "hf-gpt2"):
        raise FormatError(f"unknown HF config kind {kind!r}; use hf-llama or hf-gpt2")
    why = (_hf_llama_limits if kind == "hf-llama" else _gpt2_limits)(s)
    if why:
        raise FormatError(f"{kind} cannot express this shape: {'; '.join(why)}")
    if kind == "hf-llama":
        cfg: dict[str, Any] = {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": s.vocab_size, "hidden_size": s.d_model, "intermediate_size": s.d_ff,
            "num_hidden_layers": s.n_layer, "num_attention_heads": s.n_head,
            "num_key_value_heads": s.n_kv_head, "head_dim": s.head_dim, "hidden_act": "silu",
            "max_position_embeddings": s.n_ctx, "tie_word_embeddings": s.tied_embeddings,
            "attention_bias": False, "mlp_bias": False,
        }
    else:
        cfg = {
            "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": s.vocab_size, "n_positions": s.n_ctx, "n_embd": s.d_model,
            "n_layer": s.n_layer, "n_head": s.n_head, "n_inner": s.d_ff,
            "activation_function": "gelu_new", "tie_word_embeddings": s.tied_embeddings,
        }
    cfg["archfit"] = _archfit_block(s)
    return cfg


def _render_hf(kind: str) -> Callable[[Shape], str]:
    return lambda s: json.dumps(hf_config(s, kind), indent=2) + "\n"


def _render_nanogpt(s: Shape) -> str:
    return "\n".join([
        "# nanoGPT model config (model.py GPTConfig), written by archfit.",
        f"# {_count_note(s)}.",
        "# nanoGPT's own get_num_params() leaves out the position embedding: "
        f"{s.params_total - s.breakdown()['position_embedding']:,} here.",
        "from model import GPTConfig",
        "",
        "config = GPTConfig(",
        f"    block_size={s.n_ctx},",
        f"    vocab_size={s.vocab_size},",
        f"    n_layer={s.n_layer},",
        f"    n_head={s.n_head},",
        f"    n_embd={s.d_model},",
        "    dropout=0.0,",
        f"    bias={s.bias},",
        ")",
        "",
    ])


def _render_megatron(s: Shape) -> str:
    args = [f"--num-layers {s.n_layer}", f"--hidden-size {s.d_model}",
            f"--ffn-hidden-size {s.d_ff}", f"--num-attention-heads {s.n_head}",
            f"--kv-channels {s.head_dim}", f"--seq-length {s.n_ctx}",
            f"--max-position-embeddings {s.n_ctx}"]
    if s.n_kv_head != s.n_head:
        args += ["--group-query-attention", f"--num-query-groups {s.n_kv_head}"]
    args += {"swiglu": ["--swiglu"], "relu2": ["--squared-relu"], "gelu": []}[s.mlp]
    args.append("--normalization " + ("RMSNorm" if s.norm == "rmsnorm" else "LayerNorm"))
    args.append("--position-embedding-type " + ("rope" if s.position == "rope"
                                                  else "learned_absolute"))
    if not s.bias:
        args.append("--disable-bias-linear")
        if s.qkv_bias:
            args.append("--add-qkv-bias")
    if s.qk_norm:
        args.append("--qk-layernorm")
    if not s.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    lines = ["# Megatron-LM model arguments (pretrain_gpt.py), written by archfit.",
             f"# {_count_note(s)}.",
             f"# Vocabulary {s.vocab_size:,}: Megatron takes it from the tokenizer and pads it to "
             "a multiple of --make-vocab-size-divisible-by (default 128) times the tensor-"
             "parallel size; the counts above are for the unpadded vocabulary.",
             "MODEL_ARGS=("]
    lines += [f"  {a}" for a in args]
    lines += [")", ""]
    return "\n".join(lines)


def _render_torchtitan(s: Shape) -> str:
    multiple_of, mult = llama_ffn_args(s.d_model, s.d_ff)  # type: ignore[arg-type]
    lines = [
        "# torchtitan, written by archfit: a llama3 model of this shape.",
        f"# {_count_note(s)}.",
        "# torchtitan selects a model by name and flavor; register the flavor with the",
        "# [archfit.llama3_flavor] values below (llama3 model args; hidden_dim is the SwiGLU",
        "# size, which older releases derive from multiple_of and ffn_dim_multiplier).",
        "[model]",
        'name = "llama3"',
        f'flavor = "archfit-{s.n_layer}x{s.d_model}"',
        "",
        "[training]",
        f"seq_len = {s.n_ctx}",
        "",
        "[archfit.llama3_flavor]",
        f"dim = {s.d_model}",
        f"n_layers = {s.n_layer}",
        f"n_heads = {s.n_head}",
        f"n_kv_heads = {s.n_kv_head}",
        f"vocab_size = {s.vocab_size}",
        f"hidden_dim = {s.d_ff}",
        f"multiple_of = {multiple_of}",
    ]
    if mult is not None:
        lines.append(f"ffn_dim_multiplier = {mult!r}")
    lines += [f"enable_weight_tying = {'true' if s.tied_embeddings else 'false'}", ""]
    return "\n".join(lines)


def _render_litgpt(s: Shape) -> str:
    llama = s.mlp == "swiglu"
    lines = [
        "# LitGPT model config (litgpt.Config), written by archfit.",
        f"# {_count_note(s)}.",
        f"name: archfit-{s.n_layer}x{s.d_model}",
        f"block_size: {s.n_ctx}",
        f"vocab_size: {s.vocab_size}",
        f"padded_vocab_size: {s.vocab_size}",
        f"n_layer: {s.n_layer}",
        f"n_embd: {s.d_model}",
        f"n_head: {s.n_head}",
        f"n_query_groups: {s.n_kv_head}",
        f"head_size: {s.head_dim}",
        "rotary_percentage: 1.0",
        "parallel_residual: false",
        f"bias: {'true' if s.bias else 'false'}",
        f"attn_bias: {'true' if s.qkv_bias and not s.bias else 'false'}",
        "lm_head_bias: false",
        f"norm_class_name: {'RMSNorm' if s.norm == 'rmsnorm' else 'LayerNorm'}",
        f"norm_qk: {'true' if s.qk_norm else 'false'}",
        f"mlp_class_name: {'LLaMAMLP' if llama else 'GptNeoxMLP'}",
        f"intermediate_size: {s.d_ff}",
    ]
    if not llama:
        lines.append("gelu_approximate: tanh")  # archfit's GELU (and GPT-2's)
    lines.append("")
    return "\n".join(lines)


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("hf-llama", "transformers LlamaConfig config.json", "llama", "config.json",
           _render_hf("hf-llama"), _hf_llama_limits),
    Format("hf-gpt2", "transformers GPT2Config config.json", "gpt2", "config.json",
           _render_hf("hf-gpt2"), _gpt2_limits),
    Format("nanogpt", "nanoGPT GPTConfig (Python)", "gpt2", "nanogpt_config.py",
           _render_nanogpt, _nanogpt_limits),
    Format("megatron", "Megatron-LM pretrain_gpt.py arguments (bash array)", "llama",
           "megatron_args.sh", _render_megatron, _megatron_limits),
    Format("torchtitan", "torchtitan TOML (llama3 model section)", "llama", "torchtitan.toml",
           _render_torchtitan, _torchtitan_limits),
    Format("litgpt", "LitGPT model config (YAML)", "llama", "litgpt.yaml",
           _render_litgpt, _litgpt_limits),
)}
if tuple(FORMATS) != FORMAT_NAMES:  # one exporter per name of the one list, in its order
    raise ImportError(f"archfit.frameworks exports {tuple(FORMATS)}, archfit.formats names "
                      f"{FORMAT_NAMES}")


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise FormatError(f"unknown export format {name!r}; choose one of "
                          f"{', '.join(FORMATS)}") from None


def problems(shape: Shape, fmt: str) -> list[str]:
    """Why ``fmt`` cannot express ``shape`` (empty: it can)."""
    return get_format(fmt).limits(shape)


def export(shape: Shape, fmt: str) -> str:
    """The text of ``shape`` in format ``fmt``; :class:`FormatError` names what it cannot hold."""
    f = get_format(fmt)
    why = f.limits(shape)
    if why:
        raise FormatError(f"--emit {fmt} cannot express this shape: {'; '.join(why)}")
    return f.render(shape)


# ====================================================================== import
@dataclass
class Imported:
    """A shape read from a framework config, and what archfit did with each field."""

    shape: Shape
    family: str
    ignored: list[str] = field(default_factory=list)  # known fields that do not change counts
    unknown: list[str] = field(default_factory=list)  # fields archfit does not know
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "ignored_fields": self.ignored,
                "unknown_fields": self.unknown, "notes": self.notes}


# Fields every HF config may carry that do not change the parameter count.
_HF_NEUTRAL = {
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
    "_name_or_path", "bos_token_id", "eos_token_id", "pad_token_id", "use_cache",
    "initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "rope_theta",
    "rope_scaling", "rope_parameters", "attention_dropout", "hidden_dropout", "resid_pdrop",
    "embd_pdrop", "attn_pdrop", "pretraining_tp", "sliding_window", "use_sliding_window",
    "max_window_layers", "layer_types", "output_attentions", "output_hidden_states",
    "return_dict", "is_decoder", "classifier_dropout", "summary_type", "summary_use_proj",
    "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
    "scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
    "task_specific_params", "n_ctx", "use_parallel_residual", "rotary_pct", "rotary_emb_base",
    "partial_rotary_factor", "bos_token", "eos_token", "archfit", "id2label", "label2id",
    "problem_type", "tokenizer_class", "prefix", "use_return_dict", "chunk_size_feed_forward",
}
_SILU = {"silu", "swish"}
_GELU = {"gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "gelu_python", "quick_gelu"}


@dataclass(frozen=True)
class _Family:
    """How one HF ``model_type`` maps onto a Shape: which fields it needs, its class defaults."""

    name: str
    names: dict[str, str]  # Shape field <- config field
    required: tuple[str, ...]
    defaults: dict[str, Any]  # the HF class defaults archfit relies on when a field is absent
    fixed: dict[str, Any]  # architecture the family always has
    act_field: str
    acts: frozenset[str]


_LLAMA_NAMES = {"n_layer": "num_hidden_layers", "d_model": "hidden_size",
                "n_head": "num_attention_heads", "n_kv_head": "num_key_value_heads",
                "d_ff": "intermediate_size", "vocab_size": "vocab_size",
                "n_ctx": "max_position_embeddings", "tied_embeddings": "tie_word_embeddings"}
_LLAMA_REQ = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
              "vocab_size")
_LLAMA_FIXED = {"mlp": "swiglu", "position": "rope", "norm": "rmsnorm", "bias": False}

_FAMILIES: dict[str, _Family] = {f.name: f for f in (
    _Family("llama", _LLAMA_NAMES, _LLAMA_REQ,
            {"tie_word_embeddings": False, "max_position_embeddings": 2048}, _LLAMA_FIXED,
            "hidden_act", frozenset(_SILU)),
    _Family("mistral", _LLAMA_NAMES, _LLAMA_REQ,
            {"tie_word_embeddings": False, "max_position_embeddings": 4096 * 32,
             "num_key_value_heads": 8}, _LLAMA_FIXED, "hidden_act", frozenset(_SILU)),
    _Family("qwen2", _LLAMA_NAMES, _LLAMA_REQ,
            {"tie_word_embeddings": False, "max_position_embeddings": 32768,
             "num_key_value_heads": 32}, {**_LLAMA_FIXED, "qkv_bias": True},
            "hidden_act", frozenset(_SILU)),
    _Family("gpt_neox",
            {"n_layer": "num_hidden_layers", "d_model": "hidden_size",
             "n_head": "num_attention_heads", "d_ff": "intermediate_size",
             "vocab_size": "vocab_size", "n_ctx": "max_position_embeddings",
             "tied_embeddings": "tie_word_embeddings"},
            _LLAMA_REQ, {"tie_word_embeddings": False, "max_position_embeddings": 2048},
            {"mlp": "gelu", "position": "rope", "norm": "layernorm", "bias": True}, "hidden_act",
            frozenset(_GELU)),
    _Family("gpt2",
            {"n_layer": "n_layer", "d_model": "n_embd", "n_head": "n_head", "d_ff": "n_inner",
             "vocab_size": "vocab_size", "n_ctx": "n_positions",
             "tied_embeddings": "tie_word_embeddings"},
            ("n_layer", "n_embd", "n_head", "vocab_size", "n_positions"),
            {"tie_word_embeddings": True, "n_inner": None},
            {"mlp": "gelu", "position": "learned", "norm": "layernorm", "bias": True},
            "activation_function", frozenset(_GELU)),
)}


def _must_be(cfg: dict[str, Any], key: str, allowed: Any, why: str) -> None:
    if key in cfg and cfg[key] not in allowed:
        raise FormatError(f"{key} = {cfg[key]!r}: {why}")


def _family_checks(fam: _Family, cfg: dict[str, Any]) -> None:
    """Fields that would change the count in a way no Shape can express."""
    act = cfg.get(fam.act_field)
    if fam.act_field in cfg and not isinstance(act, str):
        raise FormatError(f"{fam.act_field} must be a string naming the activation, got "
                          f"{act!r}")
    if fam.act_field in cfg and act not in fam.acts:
        raise FormatError(f"{fam.act_field} = {cfg[fam.act_field]!r}: archfit counts a {fam.name} "
                          f"MLP with {' or '.join(sorted(fam.acts))} only")
    if fam.name in ("llama", "mistral"):
        _must_be(cfg, "attention_bias", (False, None), "attention biases on all four "
                 "projections are not expressible (archfit has all-linear or q/k/v biases)")
        _must_be(cfg, "mlp_bias", (False, None), "MLP-only biases are not expressible")
    if fam.name == "gpt_neox":
        _must_be(cfg, "attention_bias", (True, None), "GPT-NeoX keeps its MLP and norm biases, "
                 "so attention without biases is not expressible")
    if fam.name == "gpt2":
        _must_be(cfg, "add_cross_attention", (False, None), "cross-attention is not a "
                 "decoder-only shape")
    hd = _whole(cfg, "head_dim") if "head_dim" in cfg else None
    d, h = cfg.get(fam.names["d_model"]), cfg.get(fam.names["n_head"])
    if hd is not None and isinstance(d, int) and isinstance(h, int) and h and hd * h != d:
        raise FormatError(f"head_dim {hd} x {h} heads != hidden size {d}: archfit's shapes have "
                          "head_dim = d_model / n_head")


def _whole(cfg: dict[str, Any], key: str) -> Any:
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, (int, type(None))):
        raise FormatError(f"{key} must be a whole number, got {v!r}")
    return v


def from_hf_config(cfg: dict[str, Any]) -> Imported:
    """Read a transformers ``config.json`` dict (model_type gpt2, llama, mistral, qwen2,
    gpt_neox); :class:`FormatError` for an unknown family, a missing field, or a field whose
    value no Shape can express."""
    if not isinstance(cfg, dict):
        raise FormatError("a config must be a JSON object")
    mt = cfg.get("model_type")
    if mt is None:
        raise FormatError("missing field model_type: cannot tell the model family (add "
                          f"\"model_type\": one of {', '.join(_FAMILIES)})")
    if not isinstance(mt, str):
        raise FormatError(f"model_type must be a string naming the model family (one of "
                          f"{', '.join(_FAMILIES)}), got {mt!r}")
    fam = _FAMILIES.get(mt)
    if fam is None:
        raise FormatError(f"unknown model family model_type={mt!r}; archfit reads "
                          f"{', '.join(_FAMILIES)} (and nanoGPT model_args)")
    missing = [k for k in fam.required if cfg.get(k) is None]
    if missing:
        raise FormatError(f"missing field {', '.join(missing)} in the {mt} config")
    _family_checks(fam, cfg)
    fields_: dict[str, Any] = dict(fam.fixed)
    notes = []
    for shape_field, key in fam.names.items():
        if key in cfg:
            v = cfg[key]
        elif key in fam.defaults:
            v = fam.defaults[key]
            if v is not None:
                notes.append(f"{key} absent: transformers' {mt} default {v!r} used")
        else:
            continue
        if shape_field == "tied_embeddings":
            if not isinstance(v, bool):
                raise FormatError(f"{key} must be true or false, got {v!r}")
        else:
            v = _whole({key: v}, key)
        if v is not None:
            fields_[shape_field] = v
    if mt == "gpt2" and fields_.get("d_ff") is None:
        fields_["d_ff"] = 4 * fields_["d_model"]
    used = set(fam.names.values()) | {fam.act_field, "head_dim", "attention_bias", "mlp_bias",
                                      "add_cross_attention"}
    ignored = sorted(k for k in cfg if k not in used and k in _HF_NEUTRAL)
    unknown = sorted(k for k in cfg if k not in used and k not in _HF_NEUTRAL)
    return Imported(Shape(**fields_), mt, ignored, unknown, notes)


_NANOGPT_KEYS = {"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "bias", "dropout"}


def from_nanogpt(model_args: dict[str, Any]) -> Imported:
    """Read nanoGPT ``model_args`` (a checkpoint's ``ckpt["model_args"]``): GELU, d_ff = 4
    n_embd, learned positions, LayerNorm, tied embeddings, biases per ``bias``."""
    if not isinstance(model_args, dict):
        raise FormatError("nanoGPT model_args must be a dict")
    missing = [k for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")
               if model_args.get(k) is None]
    if missing:
        raise FormatError(f"missing field {', '.join(missing)} in nanoGPT model_args")
    bias = model_args.get("bias", True)
    if not isinstance(bias, bool):
        raise FormatError(f"bias must be true or false, got {bias!r}")
    d = _whole(model_args, "n_embd")
    shape = Shape(n_layer=_whole(model_args, "n_layer"), d_model=d,
                  n_head=_whole(model_args, "n_head"), d_ff=4 * d,
                  vocab_size=_whole(model_args, "vocab_size"),
                  n_ctx=_whole(model_args, "block_size"), bias=bias)
    unknown = sorted(set(model_args) - _NANOGPT_KEYS)
    ignored = ["dropout"] if "dropout" in model_args else []
    notes = [] if "bias" in model_args else ["bias absent: nanoGPT's default True used"]
    return Imported(shape, "nanogpt", ignored, unknown, notes)


def read_config(cfg: dict[str, Any]) -> Imported:
    """An HF config (has ``model_type``) or nanoGPT model_args (has ``n_embd`` and
    ``block_size``, or a checkpoint dict holding ``model_args``)."""
    if isinstance(cfg, dict) and "model_args" in cfg and "model_type" not in cfg:
        return from_nanogpt(cfg["model_args"])
    if isinstance(cfg, dict) and "model_type" not in cfg and {"n_embd", "block_size"} <= set(cfg):
        return from_nanogpt(cfg)
    return from_hf_config(cfg)


def shape_from_hf_config(cfg: dict[str, Any]) -> Shape:
    """:meth:`Shape.from_hf_config`: warns (rather than guesses) about unknown fields."""
    imp = read_config(cfg)
    if imp.unknown:
        warnings.warn(f"fields archfit does not know (not used): {', '.join(imp.unknown)}",
                      stacklevel=3)
    return imp.shape
