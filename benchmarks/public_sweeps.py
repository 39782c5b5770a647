"""Every public sweep archfit ships (``datasets/``, each with its source and license in
``datasets/README.md``), read as archfit's columns: ``params``, ``tokens``, ``loss``, and where
published ``run_id``, ``n_layer``, ``d_model`` and ``unique_tokens``. The benchmarks and the
tests that replay or backtest on public data read them here, one way.

    from public_sweeps import SWEEPS, load
    frame = load("gemstones-hot")
"""

from __future__ import annotations

import os
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "datasets")

# name -> (what it is, how N counts)
SWEEPS: dict[str, tuple[str, str]] = {
    "chinchilla": ("Epoch AI's 245 points of Hoffmann et al.'s Fig. 4 (isoFLOP curves, 7e7-1.6e10)",
                   "total parameters"),
    "chinchilla-shapes": ("the same points joined to Hoffmann et al.'s Table A9 shapes",
                          "non-embedding parameters (one 32k embedding off)"),
    "marin-dclm": ("Marin's isoFLOP sweep on DCLM (85 runs, 1.6e8-1.2e10)",
                   "total parameters"),
    "marin-comma": ("Marin's isoFLOP sweep on Common Pile (92 runs)", "total parameters"),
    "marin-nemotron": ("Marin's isoFLOP sweep on Nemotron-CC (96 runs)", "total parameters"),
    "gemstones-hot": ("Gemstones: 22 width x depth shapes at constant learning rate, 35 "
                      "checkpoints each (1e10-3.5e11 tokens)", "non-embedding parameters"),
    "gemstones-cool": ("Gemstones: 20 shapes, each row a cooldown to zero (an annealed final "
                       "loss)", "non-embedding parameters"),
    "muennighoff": ("Muennighoff et al.'s 182 C4 runs on repeated data (7e6-8.7e9)",
                    "parameters as the paper counts them"),
}
MARIN = {"Name": "run_id", "parameter_count": "params", "throughput/total_tokens": "tokens",
         "eval/paloma/macro_loss": "loss", "model.num_layers": "n_layer",
         "model.hidden_dim": "d_model"}
GEMSTONES_VOCAB = 50304  # their embedding and untied head: params - 2 * 50,304 * width


def load(name: str) -> Any:
    """The sweep ``name`` (one of :data:`SWEEPS`) as a polars frame of archfit's columns."""
    import polars as pl

    if name == "chinchilla":
        return pl.read_csv(os.path.join(DATA, "chinchilla_epoch2024.csv")).select(
            "params", "tokens", "loss")
    if name == "chinchilla-shapes":
        df = pl.read_csv(os.path.join(DATA, "chinchilla_epoch2024_shapes.csv"))
        return df.select(pl.col("params_non_embedding").alias("params"), "tokens", "loss",
                         "n_layer", "d_model")
    if name.startswith("marin-"):
        raw = pl.read_csv(os.path.join(DATA, "marin", f"isoflop-{name.removeprefix('marin-')}.csv"))
        return raw.select([pl.col(k).alias(v) for k, v in MARIN.items()]).with_columns(
            pl.col("params").cast(pl.Float64), pl.col("tokens").cast(pl.Float64),
            pl.col("loss").cast(pl.Float64)).drop_nulls()
    if name in ("gemstones-hot", "gemstones-cool"):
        f = "hot_100b+" if name == "gemstones-hot" else "cool_end"
        raw = pl.read_ndjson(os.path.join(DATA, "gemstones", f"wandb_df_for_fitting_{f}.jsonl"))
        return raw.select(pl.col("run_name").alias("run_id"),
                          (pl.col("params_active_precise") - 2 * GEMSTONES_VOCAB * pl.col("width"))
                          .cast(pl.Float64).alias("params"),
                          pl.col("tokens").cast(pl.Float64), pl.col("final_loss").alias("loss"),
                          pl.col("depth").alias("n_layer"), pl.col("width").alias("d_model"))
    if name == "muennighoff":
        return pl.read_csv(os.path.join(DATA, "muennighoff2023", "c4_runs.csv")).select(
            pl.col("name").alias("run_id"), pl.col("params").cast(pl.Float64),
            pl.col("tokens").cast(pl.Float64), pl.col("unique_tokens").cast(pl.Float64), "loss")
    raise SystemExit(f"unknown public sweep {name!r}; choose from {', '.join(SWEEPS)}")
