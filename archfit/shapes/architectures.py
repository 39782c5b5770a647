"""The block a recommendation builds: an :class:`Architecture` names the MLP, positions, norm,
biases, embeddings, the ff ratio, the attention heads' grouping and tensor parallelism, and the
vocabulary and context it assumes.

- ``llama`` (the default): what teams build now (Llama 2/3, Mistral, Qwen2): SwiGLU at d_ff
  about 8/3 d_model, RoPE, RMSNorm, no biases, untied embeddings, 8 key/value heads (grouped-query
  attention) and query heads a multiple of 8, so that 8-way tensor parallelism splits them, where
  the size allows; Llama 3's vocabulary (128,256) and an 8,192-token context.
- ``gpt2``: GPT-2's block (GELU at 4 d_model, learned positions, LayerNorm, biases, tied
  embeddings, one key/value head per query head), its vocabulary (50,257) and a 2,048 context.

Neither changes how size is counted: the laws' N is the non-embedding count of whichever block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archfit.errors import ShapeError


@dataclass(frozen=True)
class Architecture:
    """One family of blocks: the :class:`~archfit.shapes.Shape` fields it fixes (``fields``),
    its ff ratio, vocabulary and context, and its heads: ``tp`` (query heads a multiple of it)
    and ``n_kv_head`` (key/value heads), each kept where the size allows (``head_plans``)."""

    name: str
    fields: dict[str, Any]
    ff_ratio: float
    vocab_size: int
    n_ctx: int
    tp: int | None
    n_kv_head: int | None
    text: str
    short: str

    def head_plans(self) -> list[tuple[int | None, int | None]]:
        """(tp, kv heads) to try in turn, from the family's own down to none: a small model's
        width cannot hold 8 heads of 128, and then 4, 2 and 1 are the next best splits."""
        if self.tp is None and self.n_kv_head is None:
            return [(None, None)]
        plans: list[tuple[int | None, int | None]] = []
        k = max(self.tp or 1, self.n_kv_head or 1)
        while k > 1:
            plans.append((min(k, self.tp) if self.tp else None,
                          min(k, self.n_kv_head) if self.n_kv_head else None))
            k //= 2
        return plans + [(None, None)]

    def describe(self) -> str:
        """One short line: the name and the block."""
        return f"{self.name} ({self.short})"


LLAMA = Architecture(
    "llama", {"mlp": "swiglu", "position": "rope", "norm": "rmsnorm", "bias": False,
              "tied_embeddings": False},
    ff_ratio=8 / 3, vocab_size=128_256, n_ctx=8192, tp=8, n_kv_head=8,
    text="SwiGLU (d_ff about 8/3 d_model), RoPE, RMSNorm, no biases, untied embeddings, 8 kv "
         "heads and heads a multiple of 8 (8-way tensor parallelism) where the size allows; "
         "vocab 128,256 and context 8,192 (Llama 3's)",
    short="SwiGLU, RoPE, RMSNorm, no biases, untied, grouped-query attention")
GPT2 = Architecture(
    "gpt2", {"mlp": "gelu", "position": "learned", "norm": "layernorm", "bias": True,
             "tied_embeddings": True},
    ff_ratio=4.0, vocab_size=50257, n_ctx=2048, tp=None, n_kv_head=None,
    text="GELU (d_ff 4 d_model), learned positions, LayerNorm, biases, tied embeddings, one kv "
         "head per head; vocab 50,257 (GPT-2's) and context 2,048",
    short="GELU, learned positions, LayerNorm, biases, tied embeddings")

ARCHITECTURES: dict[str, Architecture] = {"llama": LLAMA, "gpt2": GPT2}
DEFAULT_ARCHITECTURE = "llama"


def get_architecture(name: str | Architecture) -> Architecture:
    if isinstance(name, Architecture):
        return name
    key = str(name).lower()
    if key not in ARCHITECTURES:
        raise ShapeError(f"unknown family {name!r}; choose one of {', '.join(ARCHITECTURES)}")
    return ARCHITECTURES[key]
