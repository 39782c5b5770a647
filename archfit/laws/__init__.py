"""Scaling laws: the :class:`Law` classes (one file each), the :class:`Fit` artifact, and the
published fits (:data:`PUBLISHED`). ``archfit.fit`` (in :mod:`archfit.laws.fitting`) fits one.

Importing the package registers every shipped law in :data:`LAWS` (one import line per law
module below).
"""

from __future__ import annotations

from archfit.laws.base import (BASES, LAWS, ROLES, ComputeLaw, FFRatioLaw, Figure,
                               HyperparameterLaw, Law, LossCurveLaw, MeasuredOptimum, MoELaw,
                               ShapeLaw, get_law, register)
from archfit.laws import (chinchilla, data_constrained, depth_joint, depth_width,  # noqa: F401
                          farseer, ff_ratio, kaplan, levine, lr_batch, moe)
from archfit.laws.artifact import Fit, load_fit
from archfit.laws.published import PUBLISHED

__all__ = ["BASES", "ComputeLaw", "FFRatioLaw", "Fit", "Figure", "HyperparameterLaw", "Law",
           "LAWS", "LossCurveLaw", "MeasuredOptimum", "MoELaw", "PUBLISHED", "ROLES", "ShapeLaw",
           "get_law", "load_fit", "register", "list_laws"]


def list_laws() -> list[dict[str, str]]:
    return [{"law": n, "formula": law.formula, "role": law.role,
             "description": law.description} for n, law in sorted(LAWS.items())]
