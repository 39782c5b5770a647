"""isoFLOP profiles (approach 2) against Chinchilla's parametric fit (approach 3) on Marin's
sweeps, each checked on the runs Marin then trained at the optima its own fit predicted.

For each mix (DCLM, Common Pile "comma", Nemotron-CC; `datasets/marin/`), both laws are fitted
to the isoFLOP runs alone (the `*-validation-optimal-*` runs left out with `--exclude`); the
budgets are Marin's FLOP count (`throughput/total_gflops` x 1e9). Each law then answers at the
budget of the mix's largest validation-optimal run: N_opt with its 95% interval (bootstrap
over runs) and the least loss, against the N Marin trained and the loss it reached. Approach 3
reads C = 6 N D, so it is asked at that run's 6 N D.

    python benchmarks/bench_isoflop_marin.py           # about 1 minute on 2 cores
    python benchmarks/bench_isoflop_marin.py --json out.json
    python benchmarks/bench_isoflop_marin.py --figures docs/benchmarks/figures
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = {"params": "parameter_count", "tokens": "throughput/total_tokens",
       "loss": "eval/paloma/macro_loss", "flops": "throughput/total_gflops*1e9"}
MIXES = ("dclm", "comma", "nemotron")
# exponents published for these runs: none that we know of (Marin's own fit is in its code,
# not in a paper); Hoffmann et al. 2022's approaches on their runs, for scale
HOFFMANN_A = {"approach 1": 0.50, "approach 2": 0.49, "approach 3": 0.46}


def run(mix: str, bootstrap: int | str = "auto", figures: str | None = None) -> dict:
    import polars as pl

    from archfit.laws.inference.selection import fit
    from archfit.sweep.store import read_runs

    path = ROOT / "datasets" / "marin" / f"isoflop-{mix}.csv"
    raw = pl.read_csv(path)
    val = raw.filter(pl.col("Name").str.contains("validation-optimal"))
    table = read_runs([str(path)], MAP, exclude={"Name": "validation-optimal"})
    if val.height:
        top = val.sort("throughput/total_gflops").row(-1, named=True)
        C = float(top["throughput/total_gflops"]) * 1e9
        N, D = float(top["parameter_count"]), float(top["throughput/total_tokens"])
        actual = {"name": top["Name"], "C_flops": C, "C_6ND": 6 * N * D, "N": N, "D": D,
                  "loss": float(top["eval/paloma/macro_loss"])}
    else:  # DCLM's export has no validation-optimal runs
        actual = None
    out = {"mix": mix, "runs": table.frame.height, "validation": actual}
    iso = fit(table, "isoflop", bootstrap=bootstrap, seed=0)
    nf = table.frame.drop("flops")  # approach 3 reads C = 6 N D
    from archfit.sweep.store import RunTable

    chin = fit(RunTable(frame=nf, inputs=table.inputs, notes=[], sources=table.sources),
               "chinchilla", bootstrap=bootstrap, seed=0)
    if figures:
        from archfit.plots.base import save_figure
        from archfit.plots.fits import law_figure

        spec = next(s for s in iso.law_obj.own_figures if s.name == "isoflop_optima")
        save_figure(law_figure(iso, spec, table.frame, [chin]), figures,
                    f"isoflop-marin-{mix}", "png")
    for name, f, C in (("approach 2 (isoflop)", iso, actual and actual["C_flops"]),
                       ("approach 3 (chinchilla)", chin, actual and actual["C_6ND"])):
        row = {"exponent": None, "exponent_ci": None}
        if name.startswith("approach 2"):
            row["exponent"], row["exponent_ci"] = f.params["a"], f.ci.get("a")
        else:
            draws = f.draws()
            vals = [p["beta"] / (p["alpha"] + p["beta"]) for p in draws]
            row["exponent"] = f.params["beta"] / (f.params["alpha"] + f.params["beta"])
            row["exponent_ci"] = draws.ends(vals, 0.95)
        if C:
            import numpy as np

            o = f.optimum(C)
            row.update(N_opt=o["N_opt"], N_opt_ci=o["N_opt_ci"])
            # the loss of the run Marin trained, at its own N and D: a 95% prediction interval
            # for a new run (the fit's draws and the runs' scatter); approach 2 beyond its
            # budgets extrapolates its profiles' shared form (what 'archfit predict' refuses)
            cols = {"params": np.array([actual["N"]]), "tokens": np.array([actual["D"]])}
            if name.startswith("approach 2"):
                cols["flops"] = np.array([C])
                span = f.extra["budget_span"]
                row["beyond_budgets"] = not (span[0] <= C <= span[1])
            pred, lo, hi = f.band(cols, 0.95, beyond=True)
            row.update(loss=float(pred[0]), loss_ci=[float(lo[0]), float(hi[0])])
        row["verdict"] = f.verdict().verdict
        out[name] = row
    return out


def fmt_ci(v: float | None, ci: list | tuple | None, f: str = ".3g") -> str:
    if v is None:
        return "-"
    return f"{v:{f}}" + (f" [{ci[0]:{f}}, {ci[1]:{f}}]" if ci else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--bootstrap", default="auto")
    ap.add_argument("--figures", default=None, metavar="DIR",
                    help="Also draw each mix's N_opt against C, approaches 2 and 3 (PNG).")
    args = ap.parse_args(argv)
    boot = args.bootstrap if args.bootstrap == "auto" else int(args.bootstrap)
    rows = [run(m, boot, args.figures) for m in MIXES]
    print("isoFLOP profiles (approach 2) and Chinchilla's fit (approach 3) on Marin's isoFLOP "
          "runs;\nN = parameter_count (embeddings included); a, N_opt: 95% intervals over the "
          "bootstrap\nof runs; a run's loss: 95% prediction interval for a new run\n")
    for r in rows:
        v = r["validation"]
        print(f"{r['mix']}: {r['runs']} isoFLOP runs" + (
            f"; Marin's run at its optimum for {v['C_flops']:.3g} FLOPs: N "
            f"{v['N']:.3g}, loss {v['loss']:.4f}" if v else "; no validation-optimal runs"))
        for name in ("approach 2 (isoflop)", "approach 3 (chinchilla)"):
            x = r[name]
            print(f"  {name:24} a {fmt_ci(x['exponent'], x['exponent_ci'])}  ({x['verdict']})")
            if v:
                n_in = x["N_opt_ci"][0] <= v["N"] <= x["N_opt_ci"][1]
                l_in = x["loss_ci"][0] <= v["loss"] <= x["loss_ci"][1]
                print(f"  {'':24} N_opt {fmt_ci(x['N_opt'], x['N_opt_ci'])}: Marin's N "
                      f"{'inside' if n_in else 'outside'}")
                print(f"  {'':24} its loss {fmt_ci(x['loss'], x['loss_ci'], '.4f')}: "
                      f"{'inside' if l_in else 'outside'}, error "
                      f"{x['loss'] / v['loss'] - 1:+.1%}"
                      + (" (beyond the budgets)" if x.get("beyond_budgets") else ""))
        print()
    print("Hoffmann et al. 2022 on their own runs, for scale: a = "
          + ", ".join(f"{v:.2f}" for v in HOFFMANN_A.values()) + " (approaches 1, 2, 3)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
