"""Megatron-LM: the model arguments of ``pretrain_gpt.py`` as a bash array (written), and the
same array parsed as text (read; never run by a shell). Megatron pads the vocabulary; its own
count is reported beside archfit's."""

from __future__ import annotations

from typing import Any

from archfit.formats.base import (ExportOptions, Format, FormatError, Imported, count_note, need,
                                  recipe_steps, register)
from archfit.shapes import Shape


def _megatron_limits(s: Shape) -> list[str]:
    out: list[str] = []
    need(s.norm == "rmsnorm" or s.bias, "Megatron's LayerNorm always has a bias: keep biases "
          "or use --rmsnorm", out)
    need(s.mlp in ("gelu", "swiglu", "relu2"), f"unknown MLP {s.mlp}", out)
    need(not (s.n_shared_experts and s.bias), "Megatron fuses the shared experts into one MLP "
         "(one set of biases): drop biases (--no-bias) or the shared experts", out)
    return out


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
    if s.moe:  # a mixture of experts: the router is (experts x hidden), without a bias
        args += [f"--num-experts {s.n_experts}", f"--moe-router-topk {s.top_k}",
                 f"--moe-ffn-hidden-size {s.d_expert}"]
        if s.n_shared_experts:
            args.append(f"--moe-shared-expert-intermediate-size "
                        f"{s.n_shared_experts * (s.d_expert or 0)}")
        if s.n_sparse_layers != s.n_layer:  # Megatron's pattern: 1 marks a sparse layer
            pattern = ",".join("1" if s.is_sparse(i) else "0" for i in range(s.n_layer))
            args.append(f"--moe-layer-freq '[{pattern}]'")
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
             f"# {count_note(s)}.",
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
    lines += [")"]
    if o.recipe:
        r = recipe_steps(o.recipe, s.n_ctx)
        lines += [f"# the recipe: {o.recipe['lr']['law']} ({o.recipe['lr']['provenance']}), "
                  f"{o.recipe['tokens']['value']:.3g} tokens; pass \"${{TRAIN_ARGS[@]}}\" too",
                  "TRAIN_ARGS=(", f"  --lr {r['lr']:.6g}", f"  --min-lr {r['min_lr']:.6g}",
                  "  --lr-decay-style cosine", f"  --lr-warmup-iters {r['warmup']}",
                  f"  --lr-decay-iters {r['steps']}", f"  --train-iters {r['steps']}",
                  f"  --global-batch-size {r['sequences']}", ")"]
    lines.append("")
    return "\n".join(lines)


_MEGATRON_VALUE = {"--num-layers": "n_layer", "--hidden-size": "d_model",
                   "--ffn-hidden-size": "d_ff", "--num-attention-heads": "n_head",
                   "--num-query-groups": "n_kv_head", "--seq-length": "n_ctx",
                   "--kv-channels": None, "--max-position-embeddings": None,
                   "--normalization": None, "--position-embedding-type": None,
                   "--tensor-model-parallel-size": None, "--make-vocab-size-divisible-by": None,
                   "--num-experts": "n_experts", "--moe-router-topk": "top_k",
                   "--moe-ffn-hidden-size": "d_expert",
                   "--moe-shared-expert-intermediate-size": None, "--moe-layer-freq": None}
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
        fields_["d_head"] = num("--kv-channels")  # heads of a width of their own
    if "--num-experts" in vals:
        _experts(vals, fields_, num, where)
    ignored = [k for k in ("--tensor-model-parallel-size", "--make-vocab-size-divisible-by",
                           "--max-position-embeddings") if k in vals]
    return Imported(Shape(**fields_), "megatron", ignored, unknown, notes)


def _experts(vals: dict[str, str], fields_: dict[str, Any], num: Any, where: str) -> None:
    """A mixture of experts' arguments: the shared experts' fused width (in experts of
    d_expert) and the sparse layers' pattern (the first n dense, then every layer, or every
    k-th: what archfit's shapes hold)."""
    de = fields_.get("d_expert") or fields_.get("d_ff")
    fields_["d_expert"] = de
    if "--moe-shared-expert-intermediate-size" in vals:
        width = num("--moe-shared-expert-intermediate-size")
        if not de or width % de:
            raise FormatError(f"{where}: --moe-shared-expert-intermediate-size {width} is not a "
                              f"whole number of experts of width {de}")
        fields_["n_shared_experts"] = width // de
    raw = vals.get("--moe-layer-freq")
    if raw is None:
        return
    import ast

    try:
        pattern = ast.literal_eval(raw.strip("'\""))
    except (ValueError, SyntaxError):
        raise FormatError(f"{where}: --moe-layer-freq {raw}: give a list of 0/1 per layer or an "
                          "integer") from None
    L = fields_["n_layer"]
    if isinstance(pattern, int):  # Megatron: layer i is sparse when i % k == 0
        pattern = [int(i % pattern == 0) for i in range(L)]
    for first in range(L):
        for every in range(1, L + 1):
            want = [int(i >= first and (i + 1) % every == 0) for i in range(L)]
            if want == list(pattern):
                fields_.update(dense_first=first, moe_every=every)
                return
    raise FormatError(f"{where}: --moe-layer-freq {raw}: archfit's shapes make the first n "
                      "layers dense, then every k-th layer sparse; this pattern is not one")


register(Format("megatron", "Megatron-LM pretrain_gpt.py arguments (bash array)", "llama",
                "megatron_args.sh", _render_megatron, _megatron_limits,
                'source FILE && torchrun ... pretrain_gpt.py "${MODEL_ARGS[@]}" ...',
                counts=_megatron_count_text, suffixes=(".sh",), read=from_megatron_args))
