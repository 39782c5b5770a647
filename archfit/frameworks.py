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
from dataclasses import dataclass
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


# ====================================================================== export formats
@dataclass(frozen=True)
class ExportOptions:
    """What a file needs beyond the shape: the tensor-parallel degree and Megatron's vocab
    multiple (Megatron pads the vocabulary to ``vocab_divisible_by * tp``)."""

    tp: int = 1
    vocab_divisible_by: int = 128

    def __post_init__(self) -> None:
        if self.tp < 1 or self.vocab_divisible_by < 1:
            raise FormatError(f"--tp and --make-vocab-size-divisible-by must be >= 1, got "
                              f"{self.tp} and {self.vocab_divisible_by}")


@dataclass(frozen=True)
class Format:
    """One export target: the family it implies, the file it writes, what it cannot express,
    the command its framework's users run with the file."""

    name: str
    description: str
    style: str  # "llama" or "gpt2": the architecture the format implies
    filename: str
    render: Callable[[Shape, ExportOptions], str]
    limits: Callable[[Shape], list[str]]
    command: str  # how a user of the framework runs the file (FILE: the written file)
    d_ff_rule: Callable[[int], int] | None = None  # a d_ff the framework fixes (nanoGPT: 4 d)
    counts: Callable[[Shape, ExportOptions], str] | None = None  # the framework's own count

    def count_text(self, s: Shape, o: ExportOptions) -> str:
        """params_total, and the count the framework itself reports where that differs."""
        own = f"; {self.counts(s, o)}" if self.counts else ""
        return f"params_total {s.params_total:,}{own}"

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


NANOGPT_DEFAULT_VOCAB = 50304  # nanoGPT's train.py without a meta.pkl: GPT-2's 50257, padded


def _render_nanogpt(s: Shape, o: ExportOptions) -> str:
    at_default = s.with_(vocab_size=NANOGPT_DEFAULT_VOCAB)
    pos = s.breakdown()["position_embedding"]
    return "\n".join([
        f"# nanoGPT config ({s.n_layer} x {s.d_model}), written by archfit. Run from nanoGPT's "
        "folder: python train.py FILE",
        f"# {_count_note(s)}.",
        f"# Vocabulary: nanoGPT's train.py takes vocab_size from data/<dataset>/meta.pkl, or "
        f"uses {NANOGPT_DEFAULT_VOCAB:,} when there is none; the counts above are for "
        f"vocab {s.vocab_size:,}, at {NANOGPT_DEFAULT_VOCAB:,} params_total is "
        f"{at_default.params_total:,}.",
        f"# nanoGPT's get_num_params() leaves out the position embedding ({pos:,}).",
        "# Its MLP is 4 x n_embd with the exact GELU (nn.GELU()); archfit trains GPT-2's tanh "
        "approximation: the counts are the same.",
        "# archfit_vocab_size records the vocabulary of the counts above (nanoGPT does not "
        "read it).",
        f"n_layer = {s.n_layer}",
        f"n_head = {s.n_head}",
        f"n_embd = {s.d_model}",
        f"block_size = {s.n_ctx}",
        f"bias = {s.bias}",
        "dropout = 0.0",
        f"archfit_vocab_size = {s.vocab_size}",
        "",
    ])


def megatron_padded_vocab(vocab_size: int, o: ExportOptions) -> int:
    """Megatron-LM's padded vocabulary: rounded up to a multiple of
    ``make-vocab-size-divisible-by x tensor-parallel size``."""
    m = o.vocab_divisible_by * o.tp
    return -(-vocab_size // m) * m


def megatron_counts(s: Shape, o: ExportOptions) -> dict[str, int]:
    """The counts Megatron reports for ``s`` (its vocabulary padded for ``o``) beside archfit's
    unpadded ones."""
    v = megatron_padded_vocab(s.vocab_size, o)
    padded = s.with_(vocab_size=v)
    return {"padded_vocab_size": v, "params_total_padded": padded.params_total,
            "params_total": s.params_total, "params_non_embedding": s.params_non_embedding}


def _megatron_count_text(s: Shape, o: ExportOptions) -> str:
    c = megatron_counts(s, o)
    return (f"Megatron's count with the vocabulary padded to {c['padded_vocab_size']:,} (a "
            f"multiple of {o.vocab_divisible_by} x tp {o.tp}): {c['params_total_padded']:,}")


def _render_megatron(s: Shape, o: ExportOptions) -> str:
    c = megatron_counts(s, o)
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
    args += [f"--tensor-model-parallel-size {o.tp}",
             f"--make-vocab-size-divisible-by {o.vocab_divisible_by}"]
    lines = [f"# Megatron-LM model arguments ({s.n_layer} x {s.d_model}), written by archfit. "
             "Run: source FILE; torchrun ... pretrain_gpt.py \"${MODEL_ARGS[@]}\" "
             "(with your data, tokenizer and training arguments)",
             f"# {_count_note(s)}.",
             f"# Megatron's count: it pads the vocabulary {s.vocab_size:,} to "
             f"{c['padded_vocab_size']:,} (a multiple of {o.vocab_divisible_by} x tensor-parallel "
             f"size {o.tp}), so it reports params_total {c['params_total_padded']:,} "
             f"(+{c['params_total_padded'] - s.params_total:,} padding rows).",
             f"# Vocabulary {s.vocab_size:,}: Megatron takes it from the tokenizer (with "
             "--tokenizer-type NullTokenizer pass --vocab-size $VOCAB_SIZE).",
             ]
    if s.mlp == "gelu":
        lines.append("# GELU: Megatron's MLP uses the exact GELU (F.gelu); archfit trains GPT-2's "
                     "tanh approximation. The counts are the same; the activations differ.")
    lines += [f"VOCAB_SIZE={s.vocab_size}", "MODEL_ARGS=("]
    lines += [f"  {a}" for a in args]
    lines += [")", ""]
    return "\n".join(lines)


TORCHTITAN_RELEASE = "0.3.0"


def _render_torchtitan(s: Shape, o: ExportOptions) -> str:
    shape = {"dim": s.d_model, "n_layers": s.n_layer, "n_heads": s.n_head,
             "n_kv_heads": s.n_kv_head, "hidden_dim": s.d_ff, "vocab_size": s.vocab_size,
             "seq_len": s.n_ctx, "enable_weight_tying": s.tied_embeddings}
    body = ",\n".join(f"    {k!r}: {v!r}" for k, v in shape.items())
    from importlib.resources import files
    from string import Template

    text = (files("archfit") / "templates" / "torchtitan_config.py.tmpl").read_text("utf-8")
    text = text.split("\n", 1)[1]  # the template's own comment line
    return Template(text).substitute(release=TORCHTITAN_RELEASE, n_layer=s.n_layer,
                                     d_model=s.d_model, count_note=_count_note(s), body=body)


def _render_litgpt(s: Shape, o: ExportOptions) -> str:
    llama = s.mlp == "swiglu"
    name = f"archfit-{s.n_layer}x{s.d_model}"
    lines = [
        f"# LitGPT pretraining config ({s.n_layer} x {s.d_model}), written by archfit. "
        "Run: litgpt pretrain --config FILE --data ... --tokenizer_dir ...",
        f"# {_count_note(s)}.",
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


def _render_hf_text(kind: str) -> Callable[[Shape, ExportOptions], str]:
    return lambda s, o: json.dumps(hf_config(s, kind), indent=2) + "\n"


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("hf-llama", "transformers LlamaConfig config.json", "llama", "config.json",
           _render_hf_text("hf-llama"), _hf_llama_limits,
           'AutoModelForCausalLM.from_config(AutoConfig.from_pretrained("DIR"))'),
    Format("hf-gpt2", "transformers GPT2Config config.json", "gpt2", "config.json",
           _render_hf_text("hf-gpt2"), _gpt2_limits,
           'AutoModelForCausalLM.from_config(AutoConfig.from_pretrained("DIR"))'),
    Format("nanogpt", "nanoGPT config file (the globals train.py reads)", "gpt2",
           "archfit_nanogpt.py", _render_nanogpt, _nanogpt_limits,
           "python train.py FILE  (in nanoGPT's folder)", d_ff_rule=lambda d: 4 * d),
    Format("megatron", "Megatron-LM pretrain_gpt.py arguments (bash array)", "llama",
           "megatron_args.sh", _render_megatron, _megatron_limits,
           'source FILE && torchrun ... pretrain_gpt.py "${MODEL_ARGS[@]}" ...',
           counts=_megatron_count_text),
    Format("torchtitan", f"torchtitan {TORCHTITAN_RELEASE} Python model config (llama3)",
           "llama", "archfit_torchtitan.py", _render_torchtitan, _torchtitan_limits,
           "PYTHONPATH=DIR torchrun ... -m torchtitan.train --module archfit_torchtitan "
           "--config archfit_model"),
    Format("litgpt", "LitGPT pretrain --config file (YAML)", "llama", "litgpt.yaml",
           _render_litgpt, _litgpt_limits, "litgpt pretrain --config FILE"),
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
    f = get_format(fmt)
    return _plan_limits(shape, f.name) + f.limits(shape)


def _plan_limits(s: Shape, who: str) -> list[str]:
    """No format archfit writes holds a per-layer plan: its loader builds one block n_layer
    times, so a plan is refused, naming its first non-uniform layer, never uniformized."""
    for lay in s.layers():
        what = [w for w, missing in (("no MLP", not lay.mlp), ("no attention", not lay.attn),
                                     (f"{lay.heads} heads, not {s.n_head}",
                                      lay.heads != s.n_head)) if missing]
        if what:
            return [f"{who} builds every layer alike, and layer {lay.index} has "
                    f"{' and '.join(what)} (plan {s.plan}); train or count it with archfit, "
                    "or export the uniform shape"]
    return []


def export(shape: Shape, fmt: str, options: ExportOptions | None = None) -> str:
    """The text of ``shape`` in format ``fmt``; :class:`FormatError` names what it cannot hold."""
    f = get_format(fmt)
    why = problems(shape, fmt)
    if why:
        raise FormatError(f"--emit {fmt} cannot express this shape: {'; '.join(why)}")
    return f.render(shape, options or ExportOptions())
