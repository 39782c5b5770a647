"""Shape laws on public sweeps with shapes: what each answers at 1e9, 7e9 and 7e10, and how its
intervals did on the runs it did not see.

For every vendored sweep that records depth and width (``datasets/``, sources in
``datasets/README.md``), and each shape law with a loss model:

- the fit of every row: its verdict, the recommended depth at 1e9, 7e9 and 7e10 non-embedding
  parameters (Kaplan's N) and the near-optimal set there (depths within 0.5% of the
  optimum's predicted loss; ``archfit.recommending.near_optimal``), with where its centre came from;
- a backtest: the fit of the runs at or below ``--cut`` predicting every larger run, with the
  95% coverage, the mean error and the mean interval half-width.

Sweeps (read by ``benchmarks/public_sweeps.py``):
- ``chinchilla-shapes``: Epoch AI's 245 Chinchilla points joined to Hoffmann et al.'s Table A9
  shapes (43 shapes, several depths per width around 1-3B; N = non-embedding, one 32k
  embedding taken off), cut at 1.2e9;
- ``marin-{dclm,comma,nemotron}``: Marin's isoFLOP sweeps, one depth per width (depth grows with
  width), N as Marin reports it (embeddings included), cut at 1.2e9;
- ``gemstones-hot`` and ``gemstones-cool``: Gemstones' 22 width x depth shapes to 1.8e9 (N
  non-embedding), their constant-learning-rate checkpoints and their cooldown finals, cut at
  5e8. A run's checkpoints are one bootstrap unit (``run_id``).

    python benchmarks/bench_shapes.py [--bootstrap 60] [--sweeps a,b] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

SIZES = (1e9, 7e9, 7e10)
SWEEPS = ("chinchilla-shapes", "marin-dclm", "marin-comma", "marin-nemotron", "gemstones-hot",
          "gemstones-cool")
LAWS = {"chinchilla-shapes": ("depth-joint", "depth-width"),
        "marin-dclm": ("depth-joint",), "marin-comma": ("depth-joint",),
        "marin-nemotron": ("depth-joint",), "gemstones-hot": ("depth-joint", "depth-width"),
        "gemstones-cool": ("depth-joint", "depth-width")}
CUTS = {"gemstones-hot": 5e8, "gemstones-cool": 5e8}  # the others: 1.2e9


def load(name: str):  # type: ignore[no-untyped-def]
    """The sweep as archfit's columns: params, tokens, loss, n_layer, d_model (run_id)."""
    from public_sweeps import load as load_sweep

    return load_sweep(name)


def one(sweep: str, law: str, bootstrap: int, cut: float) -> dict:  # type: ignore[type-arg]
    from archfit.errors import ArchfitError
    from archfit.laws.inference.backtest import backtest
    from archfit.laws.inference.fitting import fit
    from archfit.recommending import recommend

    df = load(sweep)
    row: dict = {"sweep": sweep, "law": law, "runs": df.height, "cut": cut,  # type: ignore[type-arg]
                 "params": [float(df["params"].min()), float(df["params"].max())]}
    t0 = time.time()
    try:
        f = fit(df, law, bootstrap=bootstrap)
    except ArchfitError as e:
        return {**row, "error": f"fit: {e}"}
    row["verdict"] = f.verdict().verdict
    row["params_fit"] = f.params
    answers = []
    for N in SIZES:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                r = recommend(N, fit=f)
        except ArchfitError as e:
            answers.append({"N": N, "error": str(e)})
            continue
        n = r.near_optimal or {}
        answers.append({"N": N, "n_layer": r.shape.n_layer, "d_model": r.shape.d_model,
                        "near_optimal": n.get("n_layer"), "ci": n.get("ci"),
                        "centre_from": n.get("centre_from"), "verdict": r.trust["verdict"]})
    row["answers"] = answers
    try:
        b = backtest(df, law, cut=cut, bootstrap=bootstrap)
        row["backtest"] = {k: b[k] for k in ("coverage", "mean_rel_error", "rms_rel_error",
                                             "mean_halfwidth_rel", "n_train", "n_test")}
    except ArchfitError as e:
        row["backtest"] = {"error": str(e)}
    row["seconds"] = time.time() - t0
    return row


def table(rows: list[dict]) -> str:  # type: ignore[type-arg]
    out = ["| sweep (runs; N) | law | verdict | backtest from <= cut: coverage, mean "
           "error, interval | " + " | ".join(f"{N:.0e}: pick [near-optimal set]" for N in SIZES)
           + " |", "|---|---|---|---|" + "---|" * len(SIZES)]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['sweep']} ({r['runs']}) | {r['law']} | {r['error']} |"
                       + " |" * (len(SIZES) + 1))
            continue
        b = r["backtest"]
        bt = (b["error"] if "error" in b else
              f"cut {r['cut']:.2g}: {b['coverage']:.0%} of {b['n_test']}, "
              f"{b['mean_rel_error']:+.1%}, ±{b['mean_halfwidth_rel']:.1%}")
        cells = []
        for a in r["answers"]:
            if "error" in a:
                cells.append(a["error"][:60])
                continue
            n = a["near_optimal"]
            cells.append(f"{a['n_layer']} [{n[0]:.0f}, {n[1]:.0f}]"
                         + ("" if a["centre_from"] == r["law"] or a["centre_from"] is None
                            else f" (centre: {a['centre_from']})") if n else f"{a['n_layer']}")
        lo, hi = r["params"]
        out.append(f"| {r['sweep']} ({r['runs']}; {lo:.2g}-{hi:.2g}) | {r['law']} | "
                   f"{r['verdict']} | {bt} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def inner(bootstrap: int, cut: float) -> str:
    """Below the cut: Chinchilla shapes' depth-joint backtests among the runs at or below it,
    to see whether the law's miss beyond the cut shows in the data a user would have."""
    import polars as pl

    from archfit.laws.inference.backtest import backtest

    df = load("chinchilla-shapes").filter(pl.col("params") <= cut)
    out = [f"\nchinchilla-shapes, depth-joint, inside the runs at or below {cut:.2g}:"]
    for c in (2e8, 3e8, 5e8):
        b = backtest(df, "depth-joint", cut=c, bootstrap=bootstrap)
        out.append(f"  fit <= {c:.0e}, predict the {b['n_test']} runs up to {cut:.2g}: coverage "
                   f"{b['coverage']:.0%}, mean error {b['mean_rel_error']:+.1%}, interval "
                   f"±{b['mean_halfwidth_rel']:.1%}")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", type=int, default=60)
    ap.add_argument("--cut", type=float, default=1.2e9)
    ap.add_argument("--sweeps", default=",".join(SWEEPS))
    ap.add_argument("--json", default=None, help="write every row here")
    a = ap.parse_args()
    rows = []
    for s in a.sweeps.split(","):
        if s not in LAWS:
            raise SystemExit(f"bench_shapes: unknown sweep {s!r}; choose from {', '.join(SWEEPS)}")
        for law in LAWS[s]:
            rows.append(one(s, law, a.bootstrap, CUTS.get(s, a.cut)))
            print(f"  {s} / {law}: {rows[-1].get('seconds', 0):.0f} s", file=sys.stderr)
    print(table(rows))
    if "chinchilla-shapes" in a.sweeps.split(","):
        print(inner(a.bootstrap, a.cut))
    if a.json:
        from archfit.io import atomic_write, jsonable

        atomic_write(a.json, json.dumps(jsonable(rows), indent=1) + "\n")


if __name__ == "__main__":
    main()
