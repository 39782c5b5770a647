"""Compute laws: the loss over size and tokens, and the split of a FLOP budget
(:class:`~archfit.laws.ComputeLaw`), with Kaplan et al.'s loss curves
(:class:`~archfit.laws.LossCurveLaw`)."""

from archfit.laws.compute import (  # noqa: F401  (registers them)
    chinchilla, data_constrained, data_overfit, envelope, farseer, isoflop, kaplan)
