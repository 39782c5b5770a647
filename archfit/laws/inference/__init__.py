"""The machinery every law shares, and no law's own knowledge: fitting (the driver, the
optimizers, the regressions, --fix/--tie/--prior), choosing a law on held-out runs (selection),
prediction bands, backtests, the verdict (trust), the :class:`~archfit.laws.Fit` artifact and
its summary, planted sweeps. A law is the model; a Fit is the inference."""
