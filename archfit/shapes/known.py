"""Well-known decoder models (dense and mixtures of experts) and their published shapes
(``archfit/published/known_models.csv``).

Each row carries its source; ``params_published`` is the exact count of the released weights
where one is known (archfit's ``params_total`` reproduces every one of them, a test checks it).
Read with the standard library, so the cold paths can use it; :func:`known_models` gives the
polars frame for notebooks.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass
from typing import Any

from archfit.errors import DataError
from archfit.shapes.shape import Shape

KNOWN_MODELS_PATH = os.path.join(os.path.dirname(os.path.dirname(__file__)), "published",
                                 "known_models.csv")

_INT = ("n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "vocab_size", "n_ctx")
# whole numbers a row may leave blank (then the Shape's default: heads d_model / n_head wide, a
# dense MLP)
_OPTIONAL_INT = ("d_head", "n_experts", "top_k", "d_expert", "n_shared_experts", "dense_first",
                 "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim")
_BOOL = ("tied_embeddings", "bias", "qkv_bias", "qk_norm")
_STR = ("mlp", "position", "norm")


@dataclass(frozen=True)
class KnownModel:
    """One published model: its shape as archfit counts it, and where the numbers come from."""

    name: str
    family: str
    shape: Shape
    params_published: int | None
    source: str
    note: str

    def to_dict(self) -> dict[str, Any]:
        s = self.shape
        out: dict[str, Any] = {"name": self.name, "family": self.family}
        out.update(s.config())
        out.update(params_total=s.params_total, params_non_embedding=s.params_non_embedding,
                   params_active=s.params_active,
                   params_published=self.params_published, source=self.source, note=self.note)
        return out


def _bool(v: str, where: str) -> bool:
    if v.strip().lower() in ("true", "1", "yes"):
        return True
    if v.strip().lower() in ("false", "0", "no"):
        return False
    raise DataError(f"{where}: expected true or false, got {v!r}")


def load_known_models(path: str = KNOWN_MODELS_PATH) -> list[KnownModel]:
    """The rows of the known-models table as :class:`KnownModel` records."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise DataError(f"{path}: cannot read the known-models table ({e.strerror})") from None
    out = []
    for i, r in enumerate(rows, start=2):
        where = f"{os.path.basename(path)} line {i} ({r.get('name', '?')})"
        try:
            fields: dict[str, Any] = {k: int(r[k]) for k in _INT}
            fields.update({k: int(r[k]) for k in _OPTIONAL_INT if (r.get(k) or "").strip()})
            fields.update({k: _bool(r[k], where) for k in _BOOL})
            fields.update({k: r[k] for k in _STR})
            pub = r.get("params_published") or ""
            out.append(KnownModel(r["name"], r["family"], Shape(**fields),
                                  int(pub) if pub.strip() else None, r["source"],
                                  r.get("note") or ""))
        except (KeyError, ValueError, TypeError) as e:
            raise DataError(f"{where}: {e}") from None
    return out


def known_models(path: str = KNOWN_MODELS_PATH) -> Any:
    """The known-models table as a polars DataFrame: published shape fields, archfit's counts
    (``params_total``; ``params_non_embedding`` is Kaplan's N), the published count where known,
    and the source of each row."""
    import polars as pl

    return pl.DataFrame([m.to_dict() for m in load_known_models(path)])
