"""LitGPT: a ``litgpt pretrain --config`` YAML file, its ``model_config`` (litgpt.Config
fields) and ``train.tie_embeddings`` (written and read)."""

from __future__ import annotations

from typing import Any

from archfit.formats.base import (ExportOptions, Format, FormatError, Imported, count_note, need,
                                  register, whole)
from archfit.shapes import Shape


def _litgpt_limits(s: Shape) -> list[str]:
    out: list[str] = []
    need(s.position == "rope", "LitGPT has only rotary positions", out)
    need(s.mlp in ("gelu", "swiglu"), f"LitGPT has no {s.mlp} MLP", out)
    need(s.norm == "rmsnorm" or s.bias, "LitGPT's LayerNorm has a bias: keep biases or use "
          "--rmsnorm", out)
    return out


def _render_litgpt(s: Shape, o: ExportOptions) -> str:
    llama = s.mlp == "swiglu"
    name = f"archfit-{s.n_layer}x{s.d_model}"
    lines = [
        f"# LitGPT pretraining config ({s.n_layer} x {s.d_model}), written by archfit. "
        "Run: litgpt pretrain --config FILE --data ... --tokenizer_dir ...",
        f"# {count_note(s)}.",
        "# The model is litgpt.Config under model_config; tied embeddings go through "
        "train.tie_embeddings, as litgpt pretrain ties them.",
        f"model_name: {name}",
        "model_config:",
        f"  name: {name}",
        f"  block_size: {s.n_ctx}",
        f"  vocab_size: {s.vocab_size}",
        f"  padded_vocab_size: {s.vocab_size}",
        f"  n_layer: {s.n_layer}",
        f"  n_embd: {s.d_model}",
        f"  n_head: {s.n_head}",
        f"  n_query_groups: {s.n_kv_head}",
        f"  head_size: {s.head_dim}",
        "  rotary_percentage: 1.0",
        "  parallel_residual: false",
        f"  bias: {'true' if s.bias else 'false'}",
        f"  attn_bias: {'true' if s.qkv_bias and not s.bias else 'false'}",
        "  lm_head_bias: false",
        f"  norm_class_name: {'RMSNorm' if s.norm == 'rmsnorm' else 'LayerNorm'}",
        f"  norm_qk: {'true' if s.qk_norm else 'false'}",
        f"  mlp_class_name: {'LLaMAMLP' if llama else 'GptNeoxMLP'}",
        f"  intermediate_size: {s.d_ff}",
    ]
    if not llama:
        lines.append("  gelu_approximate: tanh")  # archfit's GELU (and GPT-2's)
    lines += ["train:", f"  tie_embeddings: {'true' if s.tied_embeddings else 'false'}",
              f"  max_seq_length: {s.n_ctx}", ""]
    return "\n".join(lines)


_LITGPT_MLP = {"LLaMAMLP": "swiglu", "GptNeoxMLP": "gelu"}
_LITGPT_NEUTRAL = {"name", "block_size", "rotary_percentage", "rope_base", "norm_eps",
                   "hf_config", "scale_embeddings", "gelu_approximate", "rope_condense_ratio",
                   "lm_head_bias", "padding_multiple", "padded_vocab_size"}


def from_litgpt_config(text: str, where: str = "the file") -> Imported:
    """A LitGPT ``pretrain --config`` file: ``model_config`` (litgpt.Config fields) and
    ``train.tie_embeddings``."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise FormatError(f"{where}: not valid YAML ({str(e).splitlines()[0]})") from None
    mc = doc.get("model_config") if isinstance(doc, dict) else None
    if not isinstance(mc, dict):
        raise FormatError(f"{where}: format not supported (a LitGPT config with a model_config "
                          "mapping)")
    missing = [k for k in ("n_layer", "n_embd", "n_head", "vocab_size", "intermediate_size",
                           "mlp_class_name") if k not in mc]
    if missing:
        raise FormatError(f"{where}: missing field {', '.join(missing)} in model_config")
    mlp = _LITGPT_MLP.get(mc["mlp_class_name"])
    if mlp is None:
        raise FormatError(f"{where}: mlp_class_name {mc['mlp_class_name']!r}: archfit reads "
                          f"{', '.join(_LITGPT_MLP)}")
    if mc.get("parallel_residual", True) is not False:
        raise FormatError(f"{where}: parallel_residual must be false (archfit's blocks are "
                          "sequential; LitGPT's default is true)")
    d, h = whole(mc, "n_embd"), whole(mc, "n_head")
    if mc.get("head_size") not in (None, d // h) or d % h:
        raise FormatError(f"{where}: head_size {mc.get('head_size')} x {h} heads != n_embd {d}")
    norm = mc.get("norm_class_name", "LayerNorm")
    if norm not in ("LayerNorm", "RMSNorm"):
        raise FormatError(f"{where}: norm_class_name {norm!r}: archfit has LayerNorm and RMSNorm")
    bias = bool(mc.get("bias", True))
    train: dict[str, Any] = doc["train"] if isinstance(doc.get("train"), dict) else {}
    vocab = mc.get("padded_vocab_size") or mc["vocab_size"]
    shape = Shape(n_layer=whole(mc, "n_layer"), d_model=d, n_head=h,
                  n_kv_head=mc.get("n_query_groups") or h, d_ff=whole(mc, "intermediate_size"),
                  vocab_size=vocab, n_ctx=mc.get("block_size", 4096), mlp=mlp,
                  position="rope", norm="rmsnorm" if norm == "RMSNorm" else "layernorm",
                  bias=bias, qkv_bias=bool(mc.get("attn_bias", False)) and not bias,
                  qk_norm=bool(mc.get("norm_qk", False)),
                  tied_embeddings=bool(train.get("tie_embeddings", False)))
    known = {"n_layer", "n_embd", "n_head", "n_query_groups", "head_size", "intermediate_size",
             "vocab_size", "mlp_class_name", "parallel_residual", "norm_class_name", "bias",
             "attn_bias", "norm_qk"} | _LITGPT_NEUTRAL
    notes = [] if mc.get("padded_vocab_size") in (None, mc["vocab_size"]) else [
        f"padded_vocab_size {mc['padded_vocab_size']} is the embedding LitGPT builds"]
    return Imported(shape, "litgpt", sorted(k for k in mc if k in _LITGPT_NEUTRAL),
                    sorted(k for k in mc if k not in known), notes)


register(Format("litgpt", "LitGPT pretrain --config file (YAML)", "llama", "litgpt.yaml",
                _render_litgpt, _litgpt_limits, "litgpt pretrain --config FILE",
                suffixes=(".yaml", ".yml"), read=from_litgpt_config))
