"""Scaling laws, a room per kind (``shape/``, ``compute/``, ``hyperparameters/``, ``moe/``,
``vocab/``: one
file per law, each subclassing one base of :mod:`archfit.laws.base`), the machinery they share
(``inference/``: fitting, selection, bands, backtests, the verdict, the :class:`Fit` artifact)
and the published fits (:data:`PUBLISHED`). ``archfit.fit`` (in :mod:`archfit.laws.inference.fitting`) fits one.

Importing the package registers every shipped law in :data:`LAWS` (each room's package imports
its law modules).
"""

from __future__ import annotations

from archfit.laws.base import (KINDS, LAWS, ComputeLaw, FFRatioLaw, Figure, HyperparameterLaw,
                               Kind, Law, LossCurveLaw, MeasuredOptimum, MoELaw, ShapeLaw,
                               VocabularyLaw, get_law, kind_of, kinds, register, register_kind)
from archfit.laws import compute, hyperparameters, moe, shape, user, vocab  # noqa: F401  (registers)
from archfit.laws.inference.artifact import Fit, load_fit
from archfit.laws.published import PUBLISHED

__all__ = ["ComputeLaw", "FFRatioLaw", "Fit", "Figure", "HyperparameterLaw", "KINDS", "Kind",
           "Law", "LAWS", "LossCurveLaw", "MeasuredOptimum", "MoELaw", "PUBLISHED", "ShapeLaw",
           "VocabularyLaw", "get_law", "kind_of", "kinds", "load_fit", "register",
           "register_kind", "list_laws"]


def list_laws() -> list[dict[str, str]]:
    """Every registered law: its name, formula, role (its kind) and what its kind answers."""
    return [{"law": n, "formula": law.formula, "role": law.role,
             "answers": kind_of(law).answers, "description": law.description}
            for n, law in sorted(LAWS.items())]
