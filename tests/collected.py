"""A table of finished runs as 'archfit sweep collect' writes it, and a pool of candidates, for
the tests of what design, replay and fit take."""

from __future__ import annotations

import numpy as np
import polars as pl


def runs(n: int = 40, seed: int = 0) -> pl.DataFrame:
    """Finished runs under the names 'sweep collect' writes (final_val_loss, not loss)."""
    rng = np.random.default_rng(seed)
    N, D = 10 ** rng.uniform(7, 9, n), 10 ** rng.uniform(8, 10, n)
    loss = 1.8 + 480 / N ** 0.35 + 2000 / D ** 0.37
    return pl.DataFrame({"params": N, "tokens": D, "final_val_loss": loss * np.exp(
        rng.normal(0, 0.005, n))})


POOL = pl.DataFrame({"params": [2e9, 4e9, 2e9, 4e9], "tokens": [4e10, 4e10, 8e10, 8e10]})
