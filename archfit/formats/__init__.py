"""Shapes to and from the configs people train with, one module per format:

- :mod:`~archfit.formats.hf`: Hugging Face ``config.json`` (``hf-llama``, ``hf-gpt2``, and the
  mixtures of experts ``hf-mixtral``, ``hf-deepseek-v3`` and ``hf-qwen3-moe``; reads gpt2,
  llama, mistral, qwen2, qwen3, gpt_neox, mixtral, qwen3_moe and deepseek_v3);
- :mod:`~archfit.formats.nanogpt`: nanoGPT's config file and checkpoints' ``model_args``;
- :mod:`~archfit.formats.megatron`: Megatron-LM's ``pretrain_gpt.py`` arguments;
- :mod:`~archfit.formats.torchtitan`: a torchtitan llama3 model config;
- :mod:`~archfit.formats.litgpt`: a LitGPT ``pretrain --config`` file.

Each module holds its renderer, its limits (what it cannot express: :func:`problems` names them
instead of writing something close) and its reader for ``--from`` (never executing the file),
and registers its :class:`~archfit.formats.base.Format` in :data:`FORMATS`. Adding a format is
one module that calls :func:`~archfit.formats.base.register`, one import line below, and its
contract test. Exports write only fields whose meaning was checked against the framework, and
say what ``params_total`` counts. :data:`FORMAT_NAMES` lists the built-in ones in order.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from archfit.formats.base import (REGISTRY, ExportOptions, Format, FormatError,
                                  Imported, family_fields, is_archfit_export, llama_ffn_hidden,
                                  plan_limits, register)
from archfit.formats import hf, nanogpt, megatron, torchtitan, litgpt  # noqa: I001 (in order)
from archfit.shapes import Shape

FORMATS = REGISTRY  # name -> Format: the built-in ones and any registered since
FORMAT_NAMES = ("hf-llama", "hf-gpt2", "hf-mixtral", "hf-deepseek-v3", "hf-qwen3-moe", "nanogpt",
                "megatron", "torchtitan", "litgpt")

__all__ = ["FORMATS", "FORMAT_NAMES", "ExportOptions", "Format", "FormatError", "Imported",
           "apply_family", "export", "family_fields", "get_format", "hf", "hf_config",
           "is_archfit_export", "litgpt", "llama_ffn_hidden", "megatron", "nanogpt", "problems",
           "read_config", "read_file", "read_text", "register", "registry", "shape_from_config",
           "torchtitan"]


def registry() -> dict[str, Format]:
    """Every format: the built-in ones and any registered since."""
    return FORMATS


def get_format(name: str) -> Format:
    formats = registry()
    try:
        return formats[name]
    except KeyError:
        raise FormatError(f"unknown export format {name!r}; choose one of "
                          f"{', '.join(formats)}") from None


def problems(shape: Shape, fmt: str) -> list[str]:
    """Why ``fmt`` cannot express ``shape`` (empty: it can)."""
    f = get_format(fmt)
    return ([] if f.holds_plans else plan_limits(shape, f.name)) + f.limits(shape)


def export(shape: Shape, fmt: str, options: ExportOptions | None = None) -> str:
    """The text of ``shape`` in format ``fmt``; :class:`FormatError` names what it cannot hold."""
    why = problems(shape, fmt)
    if why:
        raise FormatError(f"--emit {fmt} cannot express this shape: {'; '.join(why)}")
    return get_format(fmt).render(shape, options or ExportOptions())


def apply_family(fmt: str, given: set[str] = frozenset(),  # type: ignore[assignment]
                 flag_of: Any = str) -> tuple[dict[str, Any], str]:
    """Design in ``fmt``'s family (:mod:`archfit.shapes.architectures`, by the format's style:
    ``hf-llama`` the llama family, ``nanogpt`` the gpt2 one): the block options that make it
    (``family``, and where the framework fixes d_ff (nanoGPT: 4 d) its ``d_ff_rule`` unless
    ``ff_ratio`` is in ``given``, the options the user chose, which stand), and the line that
    says what it did (``flag_of`` names an option)."""
    from archfit.shapes.architectures import get_architecture

    f = get_format(fmt)
    changes: dict[str, Any] = {"family": f.style}
    rule = ""
    if f.d_ff_rule is not None and "ff_ratio" not in given:
        changes["d_ff_rule"] = f.d_ff_rule
        rule = f"; d_ff {f.d_ff_rule(1)} d_model, as {fmt} fixes it"
    named = [flag_of(k) for k in ("mlp", "position", "norm", "bias", "tied_embeddings",
                                  "ff_ratio", "n_kv_head", "tp") if k in given]
    return changes, (f"--emit {fmt}: the {f.style} family ({get_architecture(f.style).short})"
                     + (f", as given: {', '.join(named)}" if named else "") + rule
                     + ("" if f.style == "gpt2" else "; the shape 'recommend' prints without "
                        "--emit"))


def read_config(cfg: dict[str, Any]) -> Imported:
    """A config dict: an HF ``config.json`` (has ``model_type``) or nanoGPT model_args (or a
    checkpoint dict holding them)."""
    from archfit.formats.hf import from_hf_config
    from archfit.formats.nanogpt import from_nanogpt, model_args_of

    args = model_args_of(cfg)
    return from_nanogpt(args) if args is not None else from_hf_config(cfg)


def shape_from_config(cfg: dict[str, Any]) -> Shape:
    """The shape of a transformers ``config.json`` dict (GPT-2, Llama, Mistral, Qwen2,
    GPT-NeoX) or of nanoGPT ``model_args``; warns (rather than guesses) about fields it does not
    know (:func:`read_config` lists them)."""
    import warnings

    imp = read_config(cfg)
    if imp.unknown:
        warnings.warn(f"fields archfit does not know (not used): {', '.join(imp.unknown)}",
                      stacklevel=2)
    return imp.shape


def hf_config(shape: Shape, kind: str = "hf-llama") -> dict[str, Any]:
    """A transformers ``config.json`` dict: ``hf-llama`` (LlamaConfig) or ``hf-gpt2``."""
    from archfit.formats.hf import hf_config as render

    return render(shape, kind)


def read_text(text: str, suffix: str, where: str = "the file") -> Imported:
    """A file in one of the registered formats, by its suffix and, where formats share one,
    by its content (each format's ``sniff``). Nothing in it is executed."""

    formats = registry().values()
    candidates = [f for f in formats if suffix in f.suffixes and f.read is not None]
    for f in candidates:
        if f.sniff(text):
            return f.read(text, where)  # type: ignore[misc]
    if candidates:  # none recognizes it: the suffix's first reader says what it expected
        return candidates[0].read(text, where)  # type: ignore[misc]
    known = sorted({s for f in formats for s in f.suffixes})
    raise FormatError(f"{where}: format not supported ({suffix or 'no suffix'}); archfit reads "
                      f"{', '.join(known)} files of the formats "
                      f"{', '.join(f.name for f in formats)}, and nanoGPT checkpoints .pt")


# a model config is kilobytes; a file past this is not one (a link to /dev/zero, a data file)
MAX_CONFIG_BYTES = 16 << 20


def read_file(path: str) -> Imported:
    """Any file a format reads (an HF config.json or its folder, nanoGPT and torchtitan .py,
    Megatron-LM .sh, LitGPT .yaml), nanoGPT model_args JSON, or a nanoGPT checkpoint (.pt, read
    with ``torch.load(weights_only=True)``); nothing in it is executed. Every failure is one
    :class:`FormatError` naming the file."""
    from archfit.errors import ShapeError, describe_os_error

    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    if not os.path.exists(path):
        raise FormatError(f"{path}: no such file; give a config archfit exports (HF config.json "
                          "or its folder, nanoGPT/torchtitan .py, Megatron .sh, LitGPT .yaml) "
                          "or a nanoGPT checkpoint")
    suffix = os.path.splitext(path)[1].lower()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise FormatError("not a regular file (a device, a FIFO or a socket); give a config "
                              "file")
        if suffix in (".pt", ".pth", ".ckpt"):
            return read_config(_checkpoint(path))
        try:
            with open(path, encoding="utf-8-sig") as f:  # a byte-order mark is not the text
                text = f.read(MAX_CONFIG_BYTES + 1)
        except OSError as e:
            raise FormatError(describe_os_error(e)) from None
        except UnicodeDecodeError as e:
            raise FormatError(f"not a text config ({e.reason})") from None
        if len(text) > MAX_CONFIG_BYTES:
            raise FormatError(f"over {MAX_CONFIG_BYTES // 2**20} MiB, too large to be a model "
                              "config; give the config file itself")
        if not text.strip():
            raise FormatError("the file is empty; give a config archfit reads")
        if "\x00" in text:
            raise FormatError("it holds NUL bytes: a binary file, not a text config")
        if suffix == ".json" and not text.lstrip().startswith(("{", "[")):
            raise FormatError("not JSON: a .json config is one JSON object ({...})")
        try:
            return read_text(text, suffix, "the file")
        except RecursionError:
            raise FormatError("nested too deeply to be a model config") from None
    except OSError as e:
        raise FormatError(f"{path}: {describe_os_error(e)}") from None
    except FormatError as e:
        raise FormatError(f"{path}: {str(e).removeprefix('the file: ')}") from None
    except ShapeError as e:
        raise FormatError(f"{path}: the config's shape is not valid: {e}") from None


def _checkpoint(path: str) -> dict[str, Any]:
    import torch

    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as e:  # noqa: BLE001 - any unreadable checkpoint is one bad input
        raise FormatError(f"not a readable torch checkpoint ({type(e).__name__}: "
                          f"{str(e).splitlines()[0][:120]})") from None
    if not isinstance(ckpt, dict) or "model_args" not in ckpt:
        raise FormatError("a checkpoint without model_args (not nanoGPT's format)")
    return ckpt
