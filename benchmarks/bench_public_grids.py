"""The new laws on public sweeps archfit cannot ship: each is fitted on a sweep's smaller runs
and scored on its largest size (or vocabulary), held out. The sweeps are public but carry no
license, so they are read from a clone you make, never copied into this repository:

    git clone https://github.com/step-law/steplaw /tmp/steplaw
    git clone https://github.com/sail-sg/scaling-with-vocab /tmp/tao-vocab
    python benchmarks/bench_public_grids.py --steplaw /tmp/steplaw --vocab /tmp/tao-vocab

- ``--steplaw``: Li et al. 2025 ("Predictable Scale: Part I", Step Law), ``data/
  dense_lr_bs_loss.csv`` (1,911 dense runs: 5 sizes of 2.1e8-1.1e9 non-embedding parameters,
  each at 2-4 token counts, a grid of rates x batches) and ``data/moe_lr_bs_loss.csv`` (708
  mixture runs: 4 active sizes of 1.9e8-1.2e9). ``lr-batch-surface`` on the smaller sizes, scored
  on every run of the largest (R² of the losses), and the best run's rate at each of its token
  counts against the law's 95% interval for the best rate. Published figure: the best
  published law's held-out R² on this grid is about 0.2 (Lin et al. 2025, SLDBench's
  ``lr_bsz`` task); the issue's bar is 0.3. The loss is the grid's ``smooth loss``; the batch is
  ``bs`` sequences of 2,048 tokens (the MoE file's ``seq_len``).
- ``--vocab``: Tao et al. 2024's ``exp_data.csv`` (1,200 checkpoints: 6 sizes of 3.3e7-1.1e9
  non-vocabulary parameters x 10 vocabularies of 4,096-96,256, unigram-normalized loss).
  ``vocab`` fitted on the 9 smaller vocabularies, scored on the largest (SLDBench's
  ``vocab`` split); published figure: Tao et al.'s own form scores R² 0.966 there (SLDBench's
  human baseline); the issue's bar is 0.98.

Each line says what it was fitted and scored on. --bootstrap sets the resamples behind the
intervals (default 100; each Step Law fit takes about 1.5 s a resample on 2 cores)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import polars as pl

import archfit
from archfit.laws import get_law


def commit(path: str) -> str:
    """The clone's commit, or 'unknown' where it is not a git checkout."""
    try:
        out = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def say(text: str) -> None:
    """A line of the report (after a blank one where it starts with a newline), folded at 100
    columns."""
    if text.startswith("\n"):
        print()
        text = text[1:]
    lead = text[:len(text) - len(text.lstrip())]
    print(textwrap.fill(text, 100, subsequent_indent=lead + "    "))


def r2(y: np.ndarray, p: np.ndarray) -> float:
    return float(1 - np.sum((y - p) ** 2) / np.sum((y - np.mean(y)) ** 2))


def steplaw_table(path: str, moe: bool) -> pl.DataFrame:
    """A Step Law grid as archfit's columns (``params`` the active count for the MoE file)."""
    name = "moe_lr_bs_loss.csv" if moe else "dense_lr_bs_loss.csv"
    raw = pl.read_csv(os.path.join(path, "data", name))
    seq = pl.col("seq_len") if moe else pl.lit(2048)
    return raw.select(pl.col("smooth loss").alias("loss"),
                      pl.col("Na" if moe else "N").cast(pl.Float64).alias("params"),
                      pl.col("D").cast(pl.Float64).alias("tokens"), pl.col("lr"),
                      (pl.col("bs") * seq).cast(pl.Float64).alias("batch_tokens"))


def surface(frame: pl.DataFrame, label: str, bootstrap: int, unit: list[str] | None) -> None:
    law = get_law("lr-batch-surface")
    top = frame["params"].max()
    train, held = frame.filter(pl.col("params") < top), frame.filter(pl.col("params") == top)
    trained, _ = law.screen(held)
    t0 = time.perf_counter()
    f = archfit.fit(train, law="lr-batch-surface", bootstrap=bootstrap, seed=0, heldout=False,
                    group=unit)
    secs = time.perf_counter() - t0
    say(f"\n{label}: fitted on {train.height} runs of {train['params'].n_unique()} sizes "
          f"({secs:.0f} s, {bootstrap} resamples, unit: {f.bootstrap.get('unit')}); held out "
          f"the largest, {top:.3g}")
    for n in f.notes:
        say(f"  fit note: {n}")
    for what, t in (("every run that trained", trained), ("every run, diverged too", held)):
        cols = {c: t[c].to_numpy().astype(float) for c in t.columns}
        pred, lo, hi = f.band(cols)
        inside = float(np.mean((cols["loss"] >= lo) & (cols["loss"] <= hi)))
        say(f"  R² over {what}: {r2(cols['loss'], pred):.3f} ({t.height} runs); 95% "
            f"prediction intervals cover {inside:.0%}")
    for D in sorted(trained["tokens"].unique()):
        cell = trained.filter(pl.col("tokens") == D).sort("loss")
        best = float(cell["lr"][0])
        o = law.optimum_point(f.params, top, D)
        lo, hi = np.percentile([law.optimum_point(p, top, D)["lr"] for p in f.draws()],
                               [2.5, 97.5])
        say(f"  tokens {D:.3g}: best run's rate {best:.3g} (of {cell.height}); the law's "
              f"best rate {o['lr']:.3g} [{lo:.3g}, {hi:.3g}]: "
              f"{'inside' if lo <= best <= hi else 'outside'}")


def vocab(path: str, bootstrap: int) -> None:
    raw = pl.read_csv(os.path.join(path, "exp_data.csv"))
    frame = raw.select(pl.col("Lossu").alias("loss"),
                       pl.col("Non_vocab_parameters").alias("params"),
                       pl.col("vocab_size"), pl.col("embed_dim").alias("d_model"),
                       pl.col("num_characters").alias("characters"))
    top = frame["vocab_size"].max()
    train, held = frame.filter(pl.col("vocab_size") < top), frame.filter(
        pl.col("vocab_size") == top)
    t0 = time.perf_counter()
    f = archfit.fit(train, law="vocab", bootstrap=bootstrap, seed=0, heldout=False)
    secs = time.perf_counter() - t0
    cols = {c: held[c].to_numpy().astype(float) for c in held.columns}
    pred, lo, hi = f.band(cols)
    inside = float(np.mean((cols["loss"] >= lo) & (cols["loss"] <= hi)))
    say(f"\nTao et al.'s vocabulary sweep: vocab fitted on {train.height} checkpoints of "
          f"{train['vocab_size'].n_unique()} vocabularies ({secs:.0f} s); held out the "
          f"largest, {top:.0f}: R² {r2(cols['loss'], pred):.3f} over {held.height} "
          f"checkpoints, 95% prediction intervals cover {inside:.0%}")
    say("  " + ", ".join(f"{k} {v:.4g}" for k, v in f.params.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steplaw", help="a clone of github.com/step-law/steplaw")
    ap.add_argument("--vocab", help="a clone of github.com/sail-sg/scaling-with-vocab")
    ap.add_argument("--bootstrap", type=int, default=100)
    a = ap.parse_args()
    if not (a.steplaw or a.vocab):
        ap.error("give --steplaw DIR and/or --vocab DIR (see the module's docstring)")
    for path, need in ((a.steplaw, "data/dense_lr_bs_loss.csv"), (a.vocab, "exp_data.csv")):
        if path and not os.path.isfile(os.path.join(path, need)):
            ap.error(f"{path} has no {need}: is it the clone the docstring names?")
    if a.steplaw:
        say(f"Step Law grids, step-law/steplaw at {commit(a.steplaw)}")
        for moe in (False, True):
            frame = steplaw_table(a.steplaw, moe)
            label = "Step Law's mixture grid (params: active)" if moe else "Step Law's dense grid"
            surface(frame, label + ", (size, tokens) cells resampled (the law's default)",
                    a.bootstrap, None)
            surface(frame, label + ", runs resampled", a.bootstrap,
                    ["params", "tokens", "lr", "batch_tokens"])
    if a.vocab:
        say(f"\nTao et al.'s sweep, sail-sg/scaling-with-vocab at {commit(a.vocab)}")
        vocab(a.vocab, a.bootstrap)
    return 0


if __name__ == "__main__":
    sys.exit(main())
