"""nanoGPT: a config file of the globals its ``train.py`` reads (written and read), its
checkpoints' ``model_args`` (read, also from a ``.pt`` with ``torch.load(weights_only=True)``).
nanoGPT's model is GPT-2's: GELU, d_ff = 4 n_embd, learned positions, LayerNorm, tied."""

from __future__ import annotations

import json
from typing import Any

from archfit.formats.base import (ExportOptions, Format, FormatError, Imported, count_note,
                                  json_object,
                                  gpt2_limits, need, python_literals, recipe_steps, register,
                                  whole)
from archfit.shapes import Shape


def nanogpt_limits(s: Shape) -> list[str]:
    out = gpt2_limits(s, "nanoGPT's GPTConfig")
    need(s.d_ff == 4 * s.d_model, f"nanoGPT's MLP is 4 x n_embd, not d_ff {s.d_ff}", out)
    need(s.tied_embeddings, "nanoGPT ties the output head to the token embedding", out)
    need(not s.qkv_bias or s.bias, "nanoGPT's bias switch covers every linear, not only q/k/v",
          out)
    return out


NANOGPT_DEFAULT_VOCAB = 50304  # nanoGPT's train.py without a meta.pkl: GPT-2's 50257, padded


def render_nanogpt(s: Shape, o: ExportOptions) -> str:
    at_default = s.with_(vocab_size=NANOGPT_DEFAULT_VOCAB)
    pos = s.breakdown()["position_embedding"]
    return "\n".join([
        f"# nanoGPT config ({s.n_layer} x {s.d_model}), written by archfit. Run from nanoGPT's "
        "folder: python train.py FILE",
        f"# {count_note(s)}.",
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
        *_recipe_globals(s, o),
        "",
    ])


def _recipe_globals(s: Shape, o: ExportOptions) -> list[str]:
    """The recipe as the globals nanoGPT's train.py reads (one process; raise
    gradient_accumulation_steps and lower batch_size to fit memory, keeping their product)."""
    if not o.recipe:
        return []
    r = recipe_steps(o.recipe, s.n_ctx)
    return [f"# the recipe: {o.recipe['lr']['law']} ({o.recipe['lr']['provenance']}), "
            f"{o.recipe['tokens']['value']:.3g} tokens; batch_size x block_size x "
            "gradient_accumulation_steps is the batch in tokens",
            f"learning_rate = {r['lr']:.6g}", f"min_lr = {r['min_lr']:.6g}", "decay_lr = True",
            f"warmup_iters = {r['warmup']}", f"lr_decay_iters = {r['steps']}",
            f"max_iters = {r['steps']}", f"batch_size = {r['sequences']}",
            "gradient_accumulation_steps = 1"]


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
    d = whole(model_args, "n_embd")
    shape = Shape(n_layer=whole(model_args, "n_layer"), d_model=d,
                  n_head=whole(model_args, "n_head"), d_ff=4 * d,
                  vocab_size=whole(model_args, "vocab_size"),
                  n_ctx=whole(model_args, "block_size"), bias=bias)
    unknown = sorted(set(model_args) - _NANOGPT_KEYS)
    ignored = ["dropout"] if "dropout" in model_args else []
    notes = [] if "bias" in model_args else ["bias absent: nanoGPT's default True used"]
    return Imported(shape, "nanogpt", ignored, unknown, notes)


_NANOGPT_GLOBALS = {"n_layer", "n_head", "n_embd", "block_size", "bias", "dropout"}


def from_python_file(text: str, where: str = "the file") -> Imported:
    """A nanoGPT config file (the globals nanoGPT's ``train.py`` reads), from its literals
    only."""
    lit = python_literals(text, where)
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
    raise FormatError(f"{where}: format not supported (a nanoGPT config sets n_layer, n_head "
                      "and n_embd)")


def model_args_of(d: Any) -> dict[str, Any] | None:
    """nanoGPT model_args in a dict: a checkpoint's ``model_args``, or the args themselves."""
    if isinstance(d, dict) and "model_type" not in d:
        if "model_args" in d:
            return d["model_args"]
        if {"n_embd", "block_size"} <= set(d):
            return d
    return None


def read_json(text: str, where: str = "the file") -> Imported:
    args = model_args_of(json_object(text, where))
    if args is None:
        raise FormatError(f"{where}: no nanoGPT model_args in it (a dict with n_layer, n_head, "
                          "n_embd, block_size, vocab_size, or a checkpoint's model_args)")
    return from_nanogpt(args)


def _is_model_args(text: str) -> bool:
    try:
        return model_args_of(json.loads(text)) is not None
    except ValueError:
        return False


def _is_json(text: str) -> bool:
    return text.lstrip().startswith(("{", "["))


def _sniff(text: str) -> bool:
    return _is_model_args(text) if _is_json(text) else "ARCHFIT_SHAPE" not in text


def _read(text: str, where: str = "the file") -> Imported:
    return read_json(text, where) if _is_json(text) else from_python_file(text, where)


register(Format("nanogpt", "nanoGPT config file (the globals train.py reads)", "gpt2",
                "archfit_nanogpt.py", render_nanogpt, nanogpt_limits,
                "python train.py FILE  (in nanoGPT's folder)", d_ff_rule=lambda d: 4 * d,
                suffixes=(".py", ".json"), sniff=_sniff, read=_read))
