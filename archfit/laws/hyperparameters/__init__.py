"""Hyperparameter laws: the best peak learning rate and batch at a size and token count
(:class:`~archfit.laws.HyperparameterLaw`), from each cell's local window of runs. The published
ones, plain data, are :mod:`archfit.train.hyperparameters`."""

from archfit.laws.hyperparameters import lr_batch, surface  # noqa: F401  (registers them)
