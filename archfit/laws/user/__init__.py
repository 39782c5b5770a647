"""Laws of the user's own: a formula given as text (``archfit fit --formula``), read under an
allow-list (:mod:`.expression`) and fitted by the machinery every law shares (:mod:`.formula`)."""

from archfit.laws.user.expression import formula_names

__all__ = ["formula_names"]
