"""Scaling-law fitting. ``fit(frame, law=...)`` returns a :class:`Fit`; ``load_fit(name_or_path)``
reads a fit artifact or a published law by name (see :data:`PUBLISHED`).

No torch or matplotlib here: fitting runs anywhere numpy and scipy do.
"""

from __future__ import annotations

import os

from archfit.errors import FitInputError
from archfit.laws.base import LAWS, Fit, Law, fit, get_law, register
from archfit.laws.published import PUBLISHED

__all__ = ["Fit", "Law", "LAWS", "PUBLISHED", "fit", "get_law", "load_fit", "register",
           "list_laws"]


def load_fit(name_or_path: str | os.PathLike[str] | Fit) -> Fit:
    """A :class:`Fit` from a published name (``levine2020``, ``epoch2024``, ...) or a JSON file."""
    if isinstance(name_or_path, Fit):
        return name_or_path
    s = os.fspath(name_or_path)
    if s in PUBLISHED:
        import archfit

        d = dict(PUBLISHED[s])
        d["name"] = s
        d.setdefault("archfit_version", archfit.__version__)
        return Fit.from_dict(d, s)
    if not os.path.exists(s) and not s.endswith(".json"):
        raise FitInputError(f"{s!r} is neither a published law ({', '.join(PUBLISHED)}) nor a "
                            "fit file")
    return Fit.from_json(s)


def list_laws() -> list[dict[str, str]]:
    get_law("chinchilla")  # registers all
    return [{"law": n, "formula": law.formula, "kind": law.kind, "description": law.description}
            for n, law in sorted(LAWS.items())]
