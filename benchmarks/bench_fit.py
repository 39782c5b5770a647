"""Chinchilla fit with 1000 bootstrap resamples on Epoch's 240 points (target <= 10 s, 2 cores),
against the same fit without the held-out check (the peer: what the check costs)."""

import os
import time

import polars as pl

from archfit import fit

here = os.path.dirname(os.path.abspath(__file__))
df = pl.read_csv(os.path.join(here, "..", "datasets", "chinchilla_epoch2024.csv"))
df = df.sort("loss").head(240)
t0 = time.perf_counter()
f = fit(df, law="chinchilla", bootstrap=1000)
dt = time.perf_counter() - t0
t0 = time.perf_counter()
fit(df, law="chinchilla", bootstrap=1000, heldout=False)
peer = time.perf_counter() - t0
print(f"chinchilla fit + 1000 bootstrap resamples + held-out check on {f.n_points} points: "
      f"{dt:.2f} s ({os.cpu_count()} cores; target <= 10 s) -> {dt / 10:.2f}x of the budget")
print(f"without the held-out check: {peer:.2f} s; the check costs {dt / peer:.2f}x")
print(f"E {f.params['E']:.4f} {f.ci['E']}, alpha {f.params['alpha']:.4f} {f.ci['alpha']}, "
      f"beta {f.params['beta']:.4f} {f.ci['beta']}")
