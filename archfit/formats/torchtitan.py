"""torchtitan: a Python module with a llama3 model config (written from a template), and the
``ARCHFIT_SHAPE`` literal of such a module (read with ``ast``; never executed)."""

from __future__ import annotations

from typing import Any

from archfit.formats.base import (LLAMA_FIXED, ExportOptions, Format, FormatError, Imported,
                                  count_note, llama_limits, python_literals, register, whole)
from archfit.shapes import Shape


def _torchtitan_limits(s: Shape) -> list[str]:
    return llama_limits(s, "torchtitan's llama3")


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
                                     d_model=s.d_model, count_note=count_note(s), body=body)


_TT_KEYS = ("dim", "n_layers", "n_heads", "n_kv_heads", "hidden_dim", "vocab_size", "seq_len",
            "enable_weight_tying")


def _from_torchtitan(d: dict[str, Any]) -> Imported:
    missing = [k for k in _TT_KEYS if k not in d]
    if missing:
        raise FormatError(f"missing field {', '.join(missing)} in ARCHFIT_SHAPE")
    shape = Shape(n_layer=whole(d, "n_layers"), d_model=whole(d, "dim"),
                  n_head=whole(d, "n_heads"), n_kv_head=whole(d, "n_kv_heads"),
                  d_ff=whole(d, "hidden_dim"), vocab_size=whole(d, "vocab_size"),
                  n_ctx=whole(d, "seq_len"), tied_embeddings=bool(d["enable_weight_tying"]),
                  **LLAMA_FIXED)
    return Imported(shape, "torchtitan", [], sorted(set(d) - set(_TT_KEYS)), [])


def from_python_file(text: str, where: str = "the file") -> Imported:
    """The ``ARCHFIT_SHAPE`` of a torchtitan module archfit wrote, from its literals only."""
    lit = python_literals(text, where)
    if not isinstance(lit.get("ARCHFIT_SHAPE"), dict):
        raise FormatError(f"{where}: format not supported (a torchtitan config archfit wrote "
                          "holds ARCHFIT_SHAPE)")
    return _from_torchtitan(lit["ARCHFIT_SHAPE"])


register(Format("torchtitan", f"torchtitan {TORCHTITAN_RELEASE} Python model config (llama3)",
                "llama", "archfit_torchtitan.py", _render_torchtitan, _torchtitan_limits,
                "PYTHONPATH=DIR torchrun ... -m torchtitan.train --module archfit_torchtitan "
                "--config archfit_model", suffixes=(".py",),
                sniff=lambda text: "ARCHFIT_SHAPE" in text, read=from_python_file))
