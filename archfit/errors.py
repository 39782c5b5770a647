"""Typed exceptions raised by the archfit API.

Every bad input raises a subclass of :class:`ArchfitError` whose message is one
line saying what is wrong and how to mend it. The CLI turns these into
``Error: <message>`` on stderr and exit status 2.
"""

from __future__ import annotations


class ArchfitError(ValueError):
    """Base class of every error archfit raises on bad input."""


class ShapeError(ArchfitError):
    """An impossible transformer shape (e.g. width not divisible by heads)."""


class NumberError(ArchfitError):
    """A number that cannot be parsed (``50M``, ``1.3B`` and ``1e12`` are fine)."""


class DataError(ArchfitError):
    """A token source that is missing, empty or inconsistent."""


class SpecError(ArchfitError):
    """A sweep specification that does not validate; lists every problem found."""

    def __init__(self, problems: list[str] | str, path: str | None = None):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        self.path = path
        where = f"{path}: " if path else ""
        if len(self.problems) == 1:
            msg = f"{where}{self.problems[0]}"
        else:
            msg = f"{where}{len(self.problems)} problems: " + "; ".join(self.problems)
        super().__init__(msg)


class FitError(ArchfitError):
    """A law could not be fitted: too few points, degenerate input or no convergence."""


class FitInputError(ArchfitError):
    """A table of runs that cannot be read or lacks the columns a law needs."""


class RecommendError(ArchfitError):
    """A recommendation that cannot be made from the given law or options."""
