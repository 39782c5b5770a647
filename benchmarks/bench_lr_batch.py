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

Real (datasets/lr_batch_sweep_cpu.parquet, sweeps/lr-batch-small.toml): the fit of the three
smaller sizes predicts the largest size's best rate and batch; printed with their intervals, the
measured optimum and the loss the largest size measured nearest the predicted (rate, batch).
Run: python benchmarks/bench_lr_batch.py"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

NOISES = (0.002, 0.003, 0.004, 0.006, 0.008)
DRAWS = 40


def planted(noise: float, batch: bool) -> dict[str, float]:
    from archfit.laws.lr_batch import cell_optima
    from archfit.laws.numeric import columns
    from archfit.laws.planted import lr_batch_sweep

    ratios, covered, tried = [], [], 0
    for seed in range(DRAWS):
        df = lr_batch_sweep(seed=seed, noise=noise)
        truth = {(n, t): lr for n, t, lr in
                 df.select("params", "tokens", "lr_opt_true").unique().iter_rows()}
        tried += len(truth)
        cells, _ = cell_optima(columns(df if batch else df.drop("batch_tokens")), seed=seed)
        for c in cells:
            true = truth[c["params"], c["tokens"]]
            ratios.append(c["opt"] / true)
            if c["opt_ci"]:
                covered.append(c["opt_ci"][0] <= true <= c["opt_ci"][1])
    r = np.array(ratios)
    return {"bias": float(np.median(r)) - 1, "error": float(np.median(np.abs(r - 1))),
            "fitted": len(r) / tried, "with_ci": len(covered) / max(1, len(r)),
            "coverage": float(np.mean(covered)) if covered else math.nan}


def real() -> None:
    import polars as pl

    from archfit.laws.fitting import fit

    path = Path(__file__).parents[1] / "datasets" / "lr_batch_sweep_cpu.parquet"
    runs = pl.read_parquet(path)
    f = fit(runs, "lr-batch", bootstrap=200, seed=0)
    held = f.diagnostics["heldout"]
    print(f"\nreal grid ({path.name}): {len(f.extra['cells'])} cells; the fit of the "
          f"{held['n_train']} smaller sizes predicts the largest ({held['held_out_sizes'][0]:,.0f}"
          " non-embedding parameters):")
    top = runs.filter(pl.col("params_non_embedding") == int(held["held_out_sizes"][0]))
    pr, pb = held["predicted"][0], held["batch"]["predicted"][0]
    near = top.with_columns(
        ((pl.col("lr").log() - math.log(pr)) ** 2
         + (pl.col("batch_tokens").log() - math.log(pb)) ** 2).alias("d")).sort("d")
    best = top.sort("final_val_loss").row(0, named=True)
    for what, h, unit in (("rate", held, ""), ("batch", held["batch"], " tokens")):
        print(f"  {what:<6} predicted {h['predicted'][0]:.3g}{unit} [{h['low'][0]:.3g}, "
              f"{h['high'][0]:.3g}] (95% prediction interval), measured optimum "
              f"{h['measured'][0]:.3g}: {'within' if h['within_interval'] else 'outside'}")
    n = near.row(0, named=True)
    print(f"  the run nearest the predicted (rate, batch): lr {n['lr']:.3g}, batch "
          f"{n['batch_tokens']:,.0f}: loss {n['final_val_loss']:.4f}; the best run: lr "
          f"{best['lr']:.3g}, batch {best['batch_tokens']:,.0f}: loss "
          f"{best['final_val_loss']:.4f} (excess {n['final_val_loss'] - best['final_val_loss']:+.4f}"
          " nats)")


def main() -> None:
    print(f"planted rate x batch grid, {DRAWS} noise draws of 8 cells per noise level")
    print(f"{'noise':>6} {'read':<18}{'bias':>8}{'|error|':>9}{'fitted':>8}{'with CI':>9}"
          f"{'coverage':>10}")
    for noise in NOISES:
        for batch in (True, False):
            r = planted(noise, batch)
            print(f"{noise:>6} {'rate x batch' if batch else 'batch averaged':<18}"
                  f"{r['bias']:>+8.1%}{r['error']:>9.1%}{r['fitted']:>8.0%}{r['with_ci']:>9.0%}"
                  f"{r['coverage']:>10.1%}")
    real()


if __name__ == "__main__":
    main()
