"""Laws of the user's own: a formula given as text (``archfit fit --formula``), read under an
allow-list (:mod:`.expression`) and fitted by the machinery every law shares (:mod:`.formula`).
Importing the room registers it as the laws' :class:`~archfit.laws.base.FormulaSource`."""

from archfit.laws.base import FormulaSource, register_formula_source
from archfit.laws.user.expression import formula_names
from archfit.laws.user.formula import formula_law, read_formula

register_formula_source(FormulaSource(names=formula_names, make=formula_law, read=read_formula))

__all__ = ["formula_names", "formula_law", "read_formula"]
