"""Shapes read from framework configs: an HF ``config.json`` (gpt2, llama, mistral, qwen2,
gpt_neox) or nanoGPT ``model_args``. Each field is used, named as not changing the counts, or
reported as unknown; a field whose value no Shape can express is refused
(:class:`~archfit.frameworks.FormatError`), never guessed at."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from archfit.frameworks import FormatError
from archfit.shapes import Shape

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


# ====================================================================== the files archfit writes
def _python_literals(text: str, where: str) -> dict[str, Any]:
    """The module-level ``NAME = literal`` assignments of a Python file, read with ``ast``
    (never executed)."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise FormatError(f"{where}: not valid Python ({e.msg}, line {e.lineno})") from None
    out: dict[str, Any] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue  # not a literal: code, which archfit does not run
    return out


_NANOGPT_GLOBALS = {"n_layer", "n_head", "n_embd", "block_size", "bias", "dropout"}


def from_python_file(text: str, where: str = "the file") -> Imported:
    """A torchtitan module archfit wrote (its ``ARCHFIT_SHAPE``) or a nanoGPT config file (the
    globals nanoGPT's ``train.py`` reads), from their literals only."""
    lit = _python_literals(text, where)
    if isinstance(lit.get("ARCHFIT_SHAPE"), dict):
        return _from_torchtitan(lit["ARCHFIT_SHAPE"])
    if {"n_layer", "n_head", "n_embd"} <= set(lit):
        args = {k: lit[k] for k in _NANOGPT_GLOBALS if k in lit}
        notes = []
        if "archfit_vocab_size" in lit:
            args["vocab_size"] = lit["archfit_vocab_size"]
        else:
            args["vocab_size"] = 50304
            notes.append("no vocab in the file: nanoGPT's 50,304 used (it reads the dataset's "
                         "meta.pkl when there is one)")
        args.setdefault("block_size", 1024)
        imp = from_nanogpt(args)
        imp.notes += notes
        imp.ignored = sorted(set(imp.ignored) | {k for k in lit if k not in _NANOGPT_GLOBALS}
                             - {"archfit_vocab_size"})
        return imp
    raise FormatError(f"{where}: format not supported (a Python file archfit reads is a nanoGPT "
                      "config with n_layer/n_head/n_embd, or a torchtitan config archfit wrote)")


_TT_KEYS = ("dim", "n_layers", "n_heads", "n_kv_heads", "hidden_dim", "vocab_size", "seq_len",
            "enable_weight_tying")


def _from_torchtitan(d: dict[str, Any]) -> Imported:
    missing = [k for k in _TT_KEYS if k not in d]
    if missing:
        raise FormatError(f"missing field {', '.join(missing)} in ARCHFIT_SHAPE")
    shape = Shape(n_layer=_whole(d, "n_layers"), d_model=_whole(d, "dim"),
                  n_head=_whole(d, "n_heads"), n_kv_head=_whole(d, "n_kv_heads"),
                  d_ff=_whole(d, "hidden_dim"), vocab_size=_whole(d, "vocab_size"),
                  n_ctx=_whole(d, "seq_len"), tied_embeddings=bool(d["enable_weight_tying"]),
                  **_LLAMA_FIXED)
    return Imported(shape, "torchtitan", [], sorted(set(d) - set(_TT_KEYS)), [])


_MEGATRON_VALUE = {"--num-layers": "n_layer", "--hidden-size": "d_model",
                   "--ffn-hidden-size": "d_ff", "--num-attention-heads": "n_head",
                   "--num-query-groups": "n_kv_head", "--seq-length": "n_ctx",
                   "--kv-channels": None, "--max-position-embeddings": None,
                   "--normalization": None, "--position-embedding-type": None,
                   "--tensor-model-parallel-size": None, "--make-vocab-size-divisible-by": None}
_MEGATRON_FLAGS = {"--group-query-attention", "--swiglu", "--squared-relu",
                   "--disable-bias-linear", "--add-qkv-bias", "--qk-layernorm",
                   "--untie-embeddings-and-output-weights"}


def from_megatron_args(text: str, where: str = "the file") -> Imported:
    """The ``MODEL_ARGS=( ... )`` array (and ``VOCAB_SIZE=``) of a Megatron-LM arguments file,
    parsed as text (never run by a shell)."""
    import shlex

    vocab, tokens, inside = None, [], False
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("VOCAB_SIZE="):
            vocab = line.split("=", 1)[1].strip()
        elif line.startswith("MODEL_ARGS=("):
            inside = True
            line = line[len("MODEL_ARGS=("):]
        if inside:
            end = line.endswith(")")
            tokens += shlex.split(line.rstrip(")"))
            inside = not end
    if not tokens:
        raise FormatError(f"{where}: format not supported (no MODEL_ARGS=( ... ) array of "
                          "Megatron-LM arguments)")
    vals: dict[str, str] = {}
    flags: set[str] = set()
    unknown: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in _MEGATRON_VALUE and i + 1 < len(tokens):
            vals[tok] = tokens[i + 1]
            i += 2
            continue
        (flags.add if tok in _MEGATRON_FLAGS else unknown.append)(tok)
        i += 1
    missing = [k for k in ("--num-layers", "--hidden-size", "--num-attention-heads")
               if k not in vals]
    if missing:
        raise FormatError(f"{where}: missing {', '.join(missing)} in MODEL_ARGS")

    def num(key: str) -> int:
        try:
            return int(vals[key])
        except ValueError:
            raise FormatError(f"{where}: {key} must be a whole number, got {vals[key]!r}") from None

    fields_: dict[str, Any] = {f: num(k) for k, f in _MEGATRON_VALUE.items()
                               if f is not None and k in vals}
    if "--group-query-attention" not in flags:
        fields_.pop("n_kv_head", None)
    fields_["mlp"] = ("swiglu" if "--swiglu" in flags else
                      "relu2" if "--squared-relu" in flags else "gelu")
    norm = vals.get("--normalization", "LayerNorm")
    if norm not in ("LayerNorm", "RMSNorm"):
        raise FormatError(f"{where}: --normalization {norm}: archfit has LayerNorm and RMSNorm")
    fields_["norm"] = "rmsnorm" if norm == "RMSNorm" else "layernorm"
    pos = vals.get("--position-embedding-type", "learned_absolute")
    if pos not in ("rope", "learned_absolute"):
        raise FormatError(f"{where}: --position-embedding-type {pos}: archfit has rope and "
                          "learned_absolute")
    fields_["position"] = "rope" if pos == "rope" else "learned"
    fields_["bias"] = "--disable-bias-linear" not in flags
    fields_["qkv_bias"] = "--add-qkv-bias" in flags
    fields_["qk_norm"] = "--qk-layernorm" in flags
    fields_["tied_embeddings"] = "--untie-embeddings-and-output-weights" not in flags
    notes = []
    if vocab is None:
        vocab = "50257"
        notes.append("no VOCAB_SIZE in the file: GPT-2's 50,257 used (Megatron takes it from "
                     "the tokenizer)")
    try:
        fields_["vocab_size"] = int(vocab)
    except ValueError:
        raise FormatError(f"{where}: VOCAB_SIZE must be a whole number, got {vocab!r}") from None
    if "--kv-channels" in vals and num("--kv-channels") * fields_["n_head"] != fields_["d_model"]:
        raise FormatError(f"{where}: --kv-channels {vals['--kv-channels']} x "
                          f"{fields_['n_head']} heads != --hidden-size {fields_['d_model']}: "
                          "archfit's shapes have head_dim = d_model / n_head")
    ignored = [k for k in ("--tensor-model-parallel-size", "--make-vocab-size-divisible-by",
                           "--max-position-embeddings") if k in vals]
    return Imported(Shape(**fields_), "megatron", ignored, unknown, notes)


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
    d, h = _whole(mc, "n_embd"), _whole(mc, "n_head")
    if mc.get("head_size") not in (None, d // h) or d % h:
        raise FormatError(f"{where}: head_size {mc.get('head_size')} x {h} heads != n_embd {d}")
    norm = mc.get("norm_class_name", "LayerNorm")
    if norm not in ("LayerNorm", "RMSNorm"):
        raise FormatError(f"{where}: norm_class_name {norm!r}: archfit has LayerNorm and RMSNorm")
    bias = bool(mc.get("bias", True))
    train = doc.get("train") if isinstance(doc.get("train"), dict) else {}
    vocab = mc.get("padded_vocab_size") or mc["vocab_size"]
    shape = Shape(n_layer=_whole(mc, "n_layer"), d_model=d, n_head=h,
                  n_kv_head=mc.get("n_query_groups") or h, d_ff=_whole(mc, "intermediate_size"),
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


def read_export_text(text: str, suffix: str, where: str = "the file") -> Imported:
    """A file in one of the formats archfit writes, by its suffix: ``.json`` (HF config or
    nanoGPT model_args), ``.py`` (nanoGPT config, torchtitan config), ``.sh`` (Megatron-LM
    arguments), ``.yaml``/``.yml`` (LitGPT). Nothing in it is executed."""
    import json

    if suffix == ".json":
        try:
            return read_config(json.loads(text))
        except json.JSONDecodeError as e:
            raise FormatError(f"{where}: not valid JSON ({e})") from None
    readers = {".py": from_python_file, ".sh": from_megatron_args,
               ".yaml": from_litgpt_config, ".yml": from_litgpt_config}
    if suffix not in readers:
        raise FormatError(f"{where}: format not supported ({suffix or 'no suffix'}); archfit "
                          "reads HF config.json, nanoGPT config .py and checkpoints .pt, "
                          "torchtitan .py, Megatron-LM .sh and LitGPT .yaml files")
    return readers[suffix](text, where)
