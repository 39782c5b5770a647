"""The vocabulary laws: ``vocab`` (Tao et al. 2024's approach 3, fitted on a vocabulary sweep's
unigram-normalized loss; needs each run's width) and ``vocab-basin`` (a basin in ln V whose
centre grows with the size; needs no width)."""

from archfit.laws.vocab import basin, tao  # noqa: F401  (registers them)
