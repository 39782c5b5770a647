"""Backtests that calibrate the verdict: on sweeps planted from known laws (runs with
their own offsets, checkpoints with their own noise) and on Epoch AI's Chinchilla points, fit
below a cut, predict every run above it with 95% intervals, and print per case the coverage,
the error against the interval's half-width and the verdict the fit gave for that answer.

The claim checked: an `informative` verdict at the held-out sizes comes with coverage >= 80%
and a mean error inside the interval. Bootstrap units: training runs ("runs") against rows
("rows", the old behaviour) on the same data.

    python benchmarks/bench_calibration.py [--quick]
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import polars as pl

from archfit.laws.inference.backtest import backtest
from archfit.laws.planted import correlated_sweep

here = os.path.dirname(os.path.abspath(__file__))
quick = "--quick" in sys.argv
seeds = range(2) if quick else range(4)
cases = []
t0 = time.perf_counter()
for law in ("depth-joint", "depth-width"):
    for run_sd in (0.005, 0.02):
        for seed in seeds:
            df = correlated_sweep(law, seed=seed, run_sd=run_sd)
            sizes = df["params"].unique().to_numpy()
            for q in (0.67, 0.85):
                cut = float(np.quantile(sizes, q))
                for unit, group in (("runs", None), ("rows", ["row"])):
                    r = backtest(df, law, cut=cut, bootstrap=100, group=group)
                    cases.append((f"planted {law} run_sd {run_sd} seed {seed}", q, unit, r))
epoch = pl.read_csv(os.path.join(here, "..", "datasets", "chinchilla_epoch2024.csv"))
epoch = epoch.sort("loss").head(240)  # Epoch's protocol: the 5 highest-loss points dropped
for cut in (5e8, 1e9, 2e9, 4e9):
    r = backtest(epoch, "chinchilla", cut=cut, bootstrap=200)
    cases.append(("Epoch chinchilla", cut, "rows (one model each)", r))
dt = time.perf_counter() - t0

print(f"{'case':<40}{'cut':>8} {'unit':<8}{'coverage':>9}{'error':>8}{'±interval':>10}  "
      "verdict at the held-out sizes")
for name, cut, unit, r in cases:
    print(f"{name:<40}{cut:>8.3g} {unit[:7]:<8}{r['coverage']:>9.0%}{r['mean_rel_error']:>+8.1%}"
          f"{r['mean_halfwidth_rel']:>10.1%}  {r['verdict_at_largest']}")


def summary(sel: list) -> str:
    if not sel:
        return "none"
    cov = [r["coverage"] for *_, r in sel]
    inside = sum(abs(r["mean_rel_error"]) <= r["mean_halfwidth_rel"] for *_, r in sel)
    return (f"{len(sel)} cases, coverage median {np.median(cov):.0%} (min {min(cov):.0%}), "
            f"mean error inside the interval in {inside}")


print()
for unit in ("runs", "rows"):
    sel = [c for c in cases if c[2] == unit]
    print(f"planted, bootstrap over {unit}: {summary(sel)}")
for v in ("informative", "weak", "uninformative"):
    print(f"verdict {v:<14}: {summary([c for c in cases if c[3]['verdict_at_largest'] == v])}")
bad = [c for c in cases if c[3]["verdict_at_largest"] == "informative" and (
    c[3]["coverage"] < 0.8 or abs(c[3]["mean_rel_error"]) > c[3]["mean_halfwidth_rel"])]
print(f"informative answers with coverage < 80% or the error outside the interval: {len(bad)}")
print(f"{len(cases)} backtests in {dt:.0f} s ({os.cpu_count()} cores)")
