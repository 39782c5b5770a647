"""The vocabulary law: ``vocab`` (Tao et al. 2024's approach 3, fitted on a vocabulary sweep's
unigram-normalized loss)."""

from archfit.laws.vocab import tao  # noqa: F401  (registers it)
