"""The compute-optimal mixture of experts by the published MoE law, at 1e22, 1e24 and 1e26
training FLOPs, beside the dense compute-optimal model of the same budget.

    python benchmarks/bench_moe_laws.py [--json]

krajewski2024 (Krajewski et al. 2024's fit of L(N, D, G)) at their expansion rate 64, top-k = G,
with their FLOP model (router c_r = 14 per d_model x experts); the depth that sizes the router's
FLOPs is the published Levine et al. 2020 law's (archfit's assumption, not theirs). epoch2024's
split of the same budget under C = 6 N D, for the dense model. These are computed by archfit from
the published constants, not copied from the papers' tables.
"""

from __future__ import annotations

import argparse
import json


def table(budgets: tuple[float, ...] = (1e22, 1e24, 1e26)) -> list[dict[str, float]]:
    from archfit.laws import get_law, load_fit
    from archfit.laws.moe.common import GRANULARITIES, levine_depth

    k = load_fit("krajewski2024")
    dense = load_fit("epoch2024")
    rows = []
    for C in budgets:
        o = get_law("moe-granularity").compute_optimal_sparse(k.params, C, levine_depth)
        N, D = dense.law_obj.compute_optimal(dense.params, C)
        rows.append({"flops": C, "granularity": o["granularity"],
                     "at_edge": o["granularity"] == max(GRANULARITIES),
                     "n_experts": o["n_experts"], "top_k": o["top_k"],
                     "N_active": o["N_active"], "tokens": o["tokens"], "loss": o["loss"],
                     "dense_N": N, "dense_tokens": D})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    rows = table()
    if ap.parse_args().json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'FLOPs':>7}  {'G':>4}  {'experts':>7}  {'top-k':>5}  {'N active':>9}  "
          f"{'tokens':>9}  {'dense N':>9}  {'dense D':>9}")
    for r in rows:
        edge = "*" if r["at_edge"] else " "
        print(f"{r['flops']:>7.0e}  {r['granularity']:>3.0f}{edge}  {r['n_experts']:>7.0f}  "
              f"{r['top_k']:>5.0f}  {r['N_active']:>9.3g}  {r['tokens']:>9.3g}  "
              f"{r['dense_N']:>9.3g}  {r['dense_tokens']:>9.3g}")
    print("G: krajewski2024's compute-optimal granularity (* the finest considered, 64); "
          "experts = 64 x G, top-k = G; dense N and D: epoch2024")


if __name__ == "__main__":
    main()
