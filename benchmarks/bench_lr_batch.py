"""The lr-batch fit's per-cell best rate on a planted learning-rate x batch grid, and on the
CPU grid trained here.

Planted (archfit.laws.planted.lr_batch_sweep: 9 rates sqrt(2) apart x 4 batches 2x apart per
cell, steeper above the best rate than below, the best rate moving as batch^0.5, curvature 0.04
nats per (ln)^2 in each): for noise levels from a twentieth to a fifth of the curvature, over 40
noise draws (320 cells) each, the median bias of the fitted best rate, its median |error|, the
share of cells fitted and of those with an interval, and the 95% intervals' coverage of the
planted rate; then the same grids read with the batch averaged away (the fit before it fitted
the batch). This plants the surface the window approximates: it shows the code and the interval
rule are right there, not that the method wins on real curves (the real grid below is that).

Real (datasets/lr_batch_sweep_cpu.parquet, sweeps/lr-batch-cpu.toml): each cell's optimum;
the laws of the smaller sizes' cells predict the largest size's best rate and batch, printed
with their intervals and the measured optima; and the loss the largest size measured at the
grid point nearest the predicted (rate, batch) against its best point (means over seeds).
Run: python benchmarks/bench_lr_batch.py"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

NOISES = (0.002, 0.003, 0.004, 0.006, 0.008)
DRAWS = 40


def planted(noise: float, batch: bool) -> dict[str, float]:
    from archfit.laws.planted import lr_cell_recovery

    ratios, covered, tried = lr_cell_recovery(noise, DRAWS, batch)
    r = np.array(ratios)
    return {"bias": float(np.median(r)) - 1, "error": float(np.median(np.abs(r - 1))),
            "fitted": len(r) / tried, "with_ci": len(covered) / max(1, len(r)),
            "coverage": float(np.mean(covered)) if covered else math.nan}


def real() -> None:
    """The CPU grid: each cell's optimum, the held-out check (the law of the smaller sizes'
    cells predicts the largest size's best rate and batch, each with its 95% interval), and the
    loss the largest size measured at the grid point nearest the predicted (rate, batch) against
    its best point (both means over seeds)."""
    import polars as pl

    from archfit.laws import get_law
    from archfit.laws.hyperparameters.lr_batch import cell_optima
    from archfit.sweep.store import read_runs

    path = Path(__file__).parents[1] / "datasets" / "lr_batch_sweep_cpu.parquet"
    # archfit's columns: params (non-embedding), loss, batch_tokens; finished runs only
    runs = read_runs([path]).frame
    law = get_law("lr-batch")
    data = law.prepare(runs)
    cells, notes = cell_optima(data)
    print(f"\nreal grid ({path.name}, {len(runs)} finished runs, {runs['seed'].n_unique()} "
          f"seeds): {len(cells)} of {runs['params'].n_unique()} cells fitted")

    def ci(v: list[float] | None) -> str:
        return "[{:.3g}, {:.3g}]".format(*v) if v else "no interval"

    for c in cells:
        print(f"  N {c['params']:>9,.0f}: best lr {c['opt']:.3g} {ci(c['opt_ci'])}, best batch "
              f"{c['batch_opt']:,.0f} tokens {ci(c['batch_ci'])} (fitted, 95%)")
    for n in notes:
        print(textwrap.fill(f"note: {n}", 100, initial_indent="  ", subsequent_indent="      "))
    held = law.heldout(data) or {}
    if not held.get("ok"):
        print(f"  held-out check: {held.get('reason', '-')}")
        return
    top = held["held_out_sizes"][0]
    predicted = {"rate": held["predicted"][0], "batch": held["batch"]["predicted"][0]}
    for what, r in (("rate", held), ("batch", held["batch"])):
        print(textwrap.fill(
            f"held-out {what} at N {top:,.0f} from {held['n_train']} smaller cells: predicted "
            f"{r['predicted'][0]:.3g}, 95% interval [{r['low'][0]:.3g}, {r['high'][0]:.3g}] "
            f"(fitted), measured {r['measured'][0]:.3g}: "
            + ("within the interval" if r["coverage"] == 1 else "outside the interval"),
            100, initial_indent="  ", subsequent_indent="      "))
    points = (runs.filter(pl.col("params") == top)
              .group_by("lr", "batch_tokens").agg(pl.col("loss").mean()))
    near = points.with_columns(
        ((pl.col("lr").log() - math.log(predicted["rate"])) ** 2
         + (pl.col("batch_tokens").log() - math.log(predicted["batch"])) ** 2).alias("d")
    ).sort("d").row(0, named=True)
    best = points.sort("loss").row(0, named=True)
    excess = near["loss"] - best["loss"]
    print(textwrap.fill(
        f"the grid point nearest the prediction: lr {near['lr']:.3g}, batch "
        f"{near['batch_tokens']:,.0f}: loss {near['loss']:.4f}; the best point: lr "
        f"{best['lr']:.3g}, batch {best['batch_tokens']:,.0f}: loss "
        f"{best['loss']:.4f} (excess {excess:+.4f} nats; means over seeds)",
        100, initial_indent="  ", subsequent_indent="      "))


def main() -> None:
    print(f"planted rate x batch grid, {DRAWS} noise draws of 8 cells per noise level")
    print(f"{'noise':>6} {'read':<18}{'bias':>8}{'|error|':>9}{'fitted':>8}{'with CI':>9}"
          f"{'coverage':>10}")
    for noise in NOISES:
        for batch in (True, False):
            r = planted(noise, batch)
            print(f"{noise:>6} {'rate x batch' if batch else 'batch averaged':<18}"
                  f"{r['bias']:>+8.1%}{r['error']:>9.1%}{r['fitted']:>8.0%}{r['with_ci']:>9.0%}"
                  + (f"{r['coverage']:>10.1%}" if r["with_ci"] >= 0.05 else f"{'-':>10}"))
    real()


if __name__ == "__main__":
    main()
