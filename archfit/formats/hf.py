"""Hugging Face ``config.json``: written as ``hf-llama`` (LlamaConfig), ``hf-gpt2``
(GPT2Config), or, for a mixture of experts, ``hf-mixtral`` (MixtralConfig), ``hf-qwen3-moe``
(Qwen3MoeConfig) and ``hf-deepseek-v3`` (DeepseekV3Config: multi-head latent attention); read
for the families gpt2, llama, mistral, qwen2, qwen3, gpt_neox, mixtral, qwen3_moe and
deepseek_v3. Every field read
is used, named as not changing the counts, or reported as unknown; a value no Shape can express
is refused, never guessed at. A test builds each config with transformers and compares its
parameter count with :attr:`Shape.params_total`."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from archfit.formats.base import (LLAMA_FIXED, Format, FormatError, Imported, archfit_block,
                                  json_object,
                                  gpt2_limits, llama_limits, need, plan_limits, register,
                                  whole)
from archfit.shapes import Shape


def hf_llama_limits(s: Shape) -> list[str]:
    return llama_limits(s, "LlamaConfig")


def _all_sparse(s: Shape, who: str, out: list[str]) -> None:
    need(s.moe, f"{who} is a mixture of experts: give --experts and --top-k (recommend: "
         "--active-params; a dense shape: --emit hf-llama)", out)
    need(s.n_shared_experts == 0, f"{who} has no shared experts", out)


def hf_mixtral_limits(s: Shape) -> list[str]:
    out = llama_limits(s, "MixtralConfig")
    _all_sparse(s, "MixtralConfig", out)
    need(s.n_sparse_layers == s.n_layer, "MixtralConfig makes every layer sparse (no "
         "--dense-first, --moe-every 1)", out)
    return out


def hf_qwen3_moe_limits(s: Shape) -> list[str]:
    who = "Qwen3MoeConfig"
    out = [r for r in llama_limits(s, who) if "QK-norm" not in r]
    need(s.qk_norm, f"{who} always normalizes queries and keys (QK-norm)", out)
    _all_sparse(s, who, out)
    return out


def hf_deepseek_v3_limits(s: Shape) -> list[str]:
    who = "DeepseekV3Config"
    out = [r for r in llama_limits(s, who)]
    need(s.moe, f"{who} is a mixture of experts: give --experts and --top-k", out)
    need(s.mla, f"{who} has multi-head latent attention: give --kv-rank (and --q-rank, "
         "--rope-head-dim, --v-head-dim)", out)
    need(s.moe_every == 1, f"{who} makes every layer after the first dense ones sparse "
         "(--moe-every 1)", out)
    return out


_MOE_KINDS = {"hf-mixtral": hf_mixtral_limits, "hf-qwen3-moe": hf_qwen3_moe_limits,
              "hf-deepseek-v3": hf_deepseek_v3_limits}


def hf_config(s: Shape, kind: str = "hf-llama") -> dict[str, Any]:
    """A transformers ``config.json`` dict (``hf-llama``: LlamaConfig, ``hf-gpt2``: GPT2Config),
    with an ``archfit`` entry holding the counts and their convention."""
    limits = {"hf-llama": hf_llama_limits, "hf-gpt2": gpt2_limits, **_MOE_KINDS}
    if kind not in limits:
        raise FormatError(f"unknown HF config kind {kind!r}; use {', '.join(limits)}")
    why = plan_limits(s, kind) + limits[kind](s)
    if why:
        raise FormatError(f"{kind} cannot express this shape: {'; '.join(why)}")
    if kind in _MOE_KINDS:
        cfg = _moe_config(s, kind)
    elif kind == "hf-llama":
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
    cfg["archfit"] = archfit_block(s)
    return cfg


def _moe_config(s: Shape, kind: str) -> dict[str, Any]:
    """MixtralConfig (every layer sparse, the experts of width intermediate_size) or
    Qwen3MoeConfig (moe_intermediate_size, dense layers in mlp_only_layers)."""
    cfg: dict[str, Any] = {
        "vocab_size": s.vocab_size, "hidden_size": s.d_model,
        "num_hidden_layers": s.n_layer, "num_attention_heads": s.n_head,
        "num_key_value_heads": s.n_kv_head, "head_dim": s.head_dim, "hidden_act": "silu",
        "max_position_embeddings": s.n_ctx, "tie_word_embeddings": s.tied_embeddings,
        "num_experts_per_tok": s.top_k}
    if kind == "hf-mixtral":
        return {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", **cfg,
                "intermediate_size": s.d_expert, "num_local_experts": s.n_experts}
    if kind == "hf-deepseek-v3":
        cfg.pop("head_dim")
        return {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", **cfg,
                "intermediate_size": s.d_ff, "moe_intermediate_size": s.d_expert,
                "n_routed_experts": s.n_experts, "n_shared_experts": s.n_shared_experts,
                "first_k_dense_replace": s.dense_first, "moe_layer_freq": 1,
                "q_lora_rank": s.q_lora_rank or None, "kv_lora_rank": s.kv_lora_rank,
                "qk_nope_head_dim": s.head_dim, "qk_rope_head_dim": s.qk_rope_head_dim,
                "v_head_dim": s.value_head_dim, "n_group": 1, "topk_group": 1,
                "norm_topk_prob": True, "attention_bias": False}
    return {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", **cfg,
            "intermediate_size": s.d_ff, "moe_intermediate_size": s.d_expert,
            "num_experts": s.n_experts, "decoder_sparse_step": s.moe_every,
            "mlp_only_layers": list(range(s.dense_first)),
            "norm_topk_prob": True, "attention_bias": False}


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
    # a mixture of experts' training and routing settings (they change no count)
    "router_aux_loss_coef", "output_router_logits", "router_jitter_noise", "norm_topk_prob",
    "n_group", "topk_group", "routed_scaling_factor", "scoring_func", "topk_method", "ep_size",
    "aux_loss_alpha", "seq_aux", "rope_interleave",
    # DeepSeek-V3's multi-token-prediction module: transformers builds none of it
    "num_nextn_predict_layers",
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
    experts: dict[str, str] | None = None  # a mixture of experts: Shape field <- config field


_LLAMA_NAMES = {"n_layer": "num_hidden_layers", "d_model": "hidden_size",
                "n_head": "num_attention_heads", "n_kv_head": "num_key_value_heads",
                "d_ff": "intermediate_size", "vocab_size": "vocab_size",
                "n_ctx": "max_position_embeddings", "tied_embeddings": "tie_word_embeddings"}
_LLAMA_REQ = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
              "vocab_size")
_LLAMA_FIXED = LLAMA_FIXED

_MIXTRAL_EXPERTS = {"n_experts": "num_local_experts", "top_k": "num_experts_per_tok"}
_DEEPSEEK_EXPERTS = {"n_experts": "n_routed_experts", "top_k": "num_experts_per_tok",
                     "d_expert": "moe_intermediate_size", "n_shared_experts": "n_shared_experts",
                     "dense_first": "first_k_dense_replace"}
# multi-head latent attention: Shape field <- DeepseekV3Config field
_MLA_NAMES = {"q_lora_rank": "q_lora_rank", "kv_lora_rank": "kv_lora_rank",
              "qk_rope_head_dim": "qk_rope_head_dim", "v_head_dim": "v_head_dim",
              "d_head": "qk_nope_head_dim"}
# a mixture's routing fields, by model_type: they do not change the parameter count; an export
# to the same model_type keeps what the config read with --from gave (else its own defaults)
ROUTING_FIELDS: dict[str, tuple[str, ...]] = {
    "deepseek_v3": ("n_group", "topk_group", "routed_scaling_factor", "norm_topk_prob",
                    "scoring_func", "topk_method"),
    "qwen3_moe": ("norm_topk_prob", "router_aux_loss_coef"),
    "mixtral": ("router_aux_loss_coef", "router_jitter_noise")}
# transformers' DeepseekV3Config defaults for the latent-attention fields (what it builds from
# a config.json that leaves one out)
_DEEPSEEK_V3_MLA_DEFAULTS = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                             "v_head_dim": 128, "qk_nope_head_dim": 128}
_QWEN_MOE_EXPERTS = {"n_experts": "num_experts", "top_k": "num_experts_per_tok",
                     "d_expert": "moe_intermediate_size", "moe_every": "decoder_sparse_step"}

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
    _Family("qwen3", _LLAMA_NAMES, _LLAMA_REQ,
            {"tie_word_embeddings": False, "max_position_embeddings": 32768,
             "num_key_value_heads": 32}, {**_LLAMA_FIXED, "qk_norm": True},
            "hidden_act", frozenset(_SILU)),
    _Family("mixtral", _LLAMA_NAMES, _LLAMA_REQ + ("num_local_experts",
                                                   "num_experts_per_tok"),
            {"tie_word_embeddings": False, "max_position_embeddings": 4096 * 32,
             "num_key_value_heads": 8}, _LLAMA_FIXED, "hidden_act", frozenset(_SILU),
            _MIXTRAL_EXPERTS),
    _Family("qwen3_moe", _LLAMA_NAMES, _LLAMA_REQ + ("num_experts", "num_experts_per_tok",
                                                     "moe_intermediate_size"),
            {"tie_word_embeddings": False, "max_position_embeddings": 32768,
             "num_key_value_heads": 4, "decoder_sparse_step": 1},
            {**_LLAMA_FIXED, "qk_norm": True}, "hidden_act", frozenset(_SILU),
            _QWEN_MOE_EXPERTS),
    _Family("deepseek_v3", _LLAMA_NAMES, _LLAMA_REQ + ("n_routed_experts",
                                                       "num_experts_per_tok",
                                                       "moe_intermediate_size"),
            {"tie_word_embeddings": False, "max_position_embeddings": 4096,
             "num_key_value_heads": 128, "n_shared_experts": 1, "first_k_dense_replace": 3},
            _LLAMA_FIXED, "hidden_act", frozenset(_SILU), _DEEPSEEK_EXPERTS),
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
    if fam.name in ("llama", "mistral", "mixtral", "qwen3", "qwen3_moe", "deepseek_v3"):
        _must_be(cfg, "attention_bias", (False, None), "attention biases on all four "
                 "projections are not expressible (archfit has all-linear or q/k/v biases)")
        _must_be(cfg, "mlp_bias", (False, None), "MLP-only biases are not expressible")
    if fam.name == "gpt_neox":
        _must_be(cfg, "attention_bias", (True, None), "GPT-NeoX keeps its MLP and norm biases, "
                 "so attention without biases is not expressible")
    if fam.name == "gpt2":
        _must_be(cfg, "add_cross_attention", (False, None), "cross-attention is not a "
                 "decoder-only shape")
    hd = whole(cfg, "head_dim") if "head_dim" in cfg else None
    d, h = cfg.get(fam.names["d_model"]), cfg.get(fam.names["n_head"])
    if hd is not None and isinstance(d, int) and isinstance(h, int) and h and hd * h != d \
            and fam.name in ("gpt2", "gpt_neox"):
        raise FormatError(f"head_dim {hd} x {h} heads != hidden size {d}: a {fam.name} model "
                          "has head_dim = hidden size / heads")


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
            v = whole({key: v}, key)
        if v is not None:
            fields_[shape_field] = v
    if mt == "gpt2" and fields_.get("d_ff") is None:
        fields_["d_ff"] = 4 * fields_["d_model"]
    hd = cfg.get("head_dim")
    if hd is not None and hd * fields_["n_head"] != fields_["d_model"]:
        fields_["d_head"] = hd  # Qwen3's 128-wide heads at width 2048 / 32 heads
    used = set(fam.names.values()) | {fam.act_field, "head_dim", "attention_bias", "mlp_bias",
                                      "add_cross_attention"}
    if fam.experts:
        used |= _experts(fam, cfg, fields_, notes)
    ignored = sorted(k for k in cfg if k not in used and k in _HF_NEUTRAL)
    unknown = sorted(k for k in cfg if k not in used and k not in _HF_NEUTRAL)
    routing = {k: cfg[k] for k in ROUTING_FIELDS.get(mt, ()) if k in cfg}
    return Imported(Shape(**fields_), mt, ignored, unknown, notes, routing)


def _experts(fam: _Family, cfg: dict[str, Any], fields_: dict[str, Any], notes: list[str]
             ) -> set[str]:
    """A mixture of experts' fields: the expert count, top-k, the expert width (Mixtral's
    experts are intermediate_size wide) and, for Qwen, which layers stay dense. Returns the
    config fields it read."""
    assert fam.experts is not None
    for shape_field, key in fam.experts.items():
        v = cfg.get(key, fam.defaults.get(key))
        if v is not None:
            fields_[shape_field] = whole({key: v}, key)
    used = set(fam.experts.values())
    if fam.name == "mixtral":
        fields_["d_expert"] = fields_["d_ff"]
    if fam.name == "deepseek_v3":
        used |= _mla(cfg, fields_, notes)
    if fam.name == "qwen3_moe":
        used |= {"mlp_only_layers", "shared_expert_intermediate_size"}
        if cfg.get("shared_expert_intermediate_size"):
            raise FormatError("shared_expert_intermediate_size: Qwen3-MoE has no shared expert; "
                              "a config with one is not expressible")
        dense = cfg.get("mlp_only_layers") or []
        if not isinstance(dense, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in dense):
            raise FormatError(f"mlp_only_layers must be a list of layer indices, got {dense!r}")
        if set(dense) != set(range(len(set(dense)))):
            raise FormatError(f"mlp_only_layers {dense}: archfit counts dense layers as the "
                              "first n (DeepSeek's first_k_dense_replace), not another set")
        if dense:
            fields_["dense_first"] = len(set(dense))
            notes.append(f"mlp_only_layers: the first {len(set(dense))} layers are dense")
    return used


def _mla(cfg: dict[str, Any], fields_: dict[str, Any], notes: list[str]) -> set[str]:
    """DeepSeek-V3's latent attention and its sparse-layer pattern; the config fields read. A
    latent-attention field the file leaves out takes transformers' DeepseekV3Config default,
    as transformers builds it, and a note names it (a field given as null stays null: no
    query compression)."""
    freq = cfg.get("moe_layer_freq", 1)
    if isinstance(freq, bool) or not isinstance(freq, int):
        raise FormatError(f"moe_layer_freq is {type(freq).__name__} {freq!r}; write a whole "
                          "number (1: every layer after first_k_dense_replace is sparse)")
    if freq != 1:
        raise FormatError(f"moe_layer_freq {freq}: DeepSeek makes layer i sparse where i % "
                          f"{freq} == 0; archfit counts only moe_layer_freq 1 (every layer after "
                          "first_k_dense_replace sparse)")
    defaulted = []
    for shape_field, key in _MLA_NAMES.items():
        if key not in cfg and key in _DEEPSEEK_V3_MLA_DEFAULTS:
            defaulted.append(f"{key} {_DEEPSEEK_V3_MLA_DEFAULTS[key]}")
        v = cfg.get(key, _DEEPSEEK_V3_MLA_DEFAULTS.get(key))
        if v is not None:
            fields_[shape_field] = whole({key: v}, key)
    if defaulted:
        notes.append(f"not in the file, transformers' DeepseekV3Config defaults used (as it "
                     f"builds the model): {', '.join(defaulted)}")
    if fields_.get("d_head") == fields_["d_model"] // fields_["n_head"]:
        del fields_["d_head"]  # the heads' usual width: no d_head to state
    return set(_MLA_NAMES.values()) | {"moe_layer_freq"}


def is_hf_json(text: str) -> bool:
    """An HF config: it names its ``model_type``."""
    try:
        d = json.loads(text)
    except ValueError:
        return False  # the suffix's first reader (this one) says why it is not JSON
    return isinstance(d, dict) and "model_type" in d


def read_hf_json(text: str, where: str = "the file") -> Imported:
    return from_hf_config(json_object(text, where))


def _render(kind: str) -> Any:
    def render(s: Shape, o: Any) -> str:
        cfg = hf_config(s, kind)
        cfg.update({k: v for k, v in o.kept.items() if k in ROUTING_FIELDS.get(cfg["model_type"],
                                                                              ())})
        return json.dumps(cfg, indent=2) + "\n"
    return render


register(
    Format("hf-llama", "transformers LlamaConfig config.json", "llama", "config.json",
           _render("hf-llama"), hf_llama_limits,
           'AutoModelForCausalLM.from_config(AutoConfig.from_pretrained("DIR"))',
           suffixes=(".json",), sniff=is_hf_json, read=read_hf_json),
    Format("hf-gpt2", "transformers GPT2Config config.json", "gpt2", "config.json",
           _render("hf-gpt2"), gpt2_limits,
           'AutoModelForCausalLM.from_config(AutoConfig.from_pretrained("DIR"))',
           suffixes=(".json",), sniff=is_hf_json, read=read_hf_json),
    Format("hf-mixtral", "transformers MixtralConfig config.json (a mixture of experts)",
           "llama", "config.json", _render("hf-mixtral"), hf_mixtral_limits,
           'AutoModelForCausalLM.from_config(AutoConfig.from_pretrained("DIR"))',
           suffixes=(".json",), sniff=is_hf_json, read=read_hf_json,
           family={"n_experts": 8, "top_k": 2}),
    Format("hf-deepseek-v3", "transformers DeepseekV3Config config.json (a mixture of experts "
           "with multi-head latent attention)", "llama", "config.json",
           _render("hf-deepseek-v3"), hf_deepseek_v3_limits,
           'AutoModelForCausalLM.from_config(AutoConfig.from_pretrained("DIR"))',
           suffixes=(".json",), sniff=is_hf_json, read=read_hf_json,
           family={"n_experts": 8, "top_k": 2, "kv_lora_rank": 64, "qk_rope_head_dim": 16}),
    Format("hf-qwen3-moe", "transformers Qwen3MoeConfig config.json (a mixture of experts)",
           "llama", "config.json", _render("hf-qwen3-moe"), hf_qwen3_moe_limits,
           'AutoModelForCausalLM.from_config(AutoConfig.from_pretrained("DIR"))',
           suffixes=(".json",), sniff=is_hf_json, read=read_hf_json,
           family={"n_experts": 8, "top_k": 2, "qk_norm": True}),
)
