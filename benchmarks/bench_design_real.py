"""`archfit design` judged by leaving whole sweeps out.

Every public finished sweep archfit ships (`public_sweeps.py`; sources and licenses in
`datasets/README.md`) is a pool: the costliest tenth of its runs by C = 6 N D is held out,
whole runs, as the target, and the law fitted is Chinchilla's L(N, D), which none of them was
drawn from. `archfit.designing.replay` runs each rule from one shared first batch (spread over
the pool's cheaper half), reveals the losses of the runs it picks, refits, until the budget
(1%, 5%, 10%, 25% of the pool's cost) is spent, then fits the picked runs and scores the
target: mean |relative error| and the coverage of the 95% prediction intervals, beside the fit
on every row.

The candidate rules: `near-target` (the default: the candidates nearest the target), `variance`
(the target's predictive variance per square root of cost, the choice if the law were exactly
true), `spread` (greedy maximin over the pool), and `switch-A`: the lack-of-fit test at level
A in {0.01, 0.05, 0.2} decides each round, `variance` where the law passes, the nearest
candidates where it fails. Leave-one-sweep-out: for each sweep in turn, the rule with the
lowest mean excess error over the every-row fit on the *other* sweeps at 10% is chosen, and
its error on the held-out sweep is what is reported against random's median and the every-row
fit. In a replay `near-target` picks exactly what `nearest` picks, so `nearest` is not run twice.

Pools judged: chinchilla, marin-dclm, marin-comma, marin-nemotron, gemstones-cool,
muennighoff. gemstones-hot is replayed and reported, not judged: its rows are checkpoints of
22 runs, and a design that prices each checkpoint as a run of its own is not a design anyone
could run.

    python benchmarks/bench_design_real.py                    # about 25 minutes on 2 cores
    python benchmarks/bench_design_real.py --fracs 0.1 --pools chinchilla,marin-dclm
    python benchmarks/bench_design_real.py --json rows.json   # keep every replay
    python benchmarks/bench_design_real.py --from-json rows.json
    python benchmarks/bench_design_real.py --fracs 0.1 --rules near-target   # one rule's row
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

JUDGED = ("chinchilla", "marin-dclm", "marin-comma", "marin-nemotron", "gemstones-cool",
          "muennighoff")
EXTRA = ("gemstones-hot",)
LEVELS = (0.01, 0.05, 0.2)
RULES = ("near-target", "variance", "spread", "hedge") + tuple(f"switch-{a:g}" for a in LEVELS)
SEEDS = 1000  # the first seed; random runs RANDOM_SEEDS of them, the rules RULE_SEEDS
RANDOM_SEEDS, RULE_SEEDS = 5, 2
BAR = 0.1  # the budget the bar is judged at


def _register() -> None:
    """The switch rules, which only this benchmark runs: the lack-of-fit test at level A picks
    `variance` (the law passes) or `nearest` (it fails, or there is no test yet)."""
    from archfit.designing import replays, strategies as S

    def switch(level: float):  # type: ignore[no-untyped-def]
        def pick(step, k, left):  # type: ignore[no-untyped-def]
            test = S.check_fit(step)  # the fit's own F test (fit.diagnostics)
            p = test["p"]
            step.test = {**test, "fits": None if p is None else p >= level}
            if p is not None and p >= level:
                return S.variance_criterion(step, k, left)
            return S.nearest(step, k, left)
        return pick

    def hedge(step, k, left):  # type: ignore[no-untyped-def]
        """Half of each round's runs nearest the target, half spread over the pool."""
        near = S.near_target(step, (k + 1) // 2, left)
        step.open[near] = False
        rest = S.spread(step, k // 2, left - float(step.cost[near].sum()))
        step.open[near] = True
        return near + rest

    S.STRATEGIES["hedge"] = hedge
    for a in LEVELS:
        S.STRATEGIES[f"switch-{a:g}"] = switch(a)
    names = tuple(f"switch-{a:g}" for a in LEVELS)
    replays.STRATEGIES = S.STRATEGIES
    replays.ADAPTIVE = S.ADAPTIVE + names
    replays.CRITERIA = S.CRITERIA + names  # they need the bootstrap's draws


def one(args: tuple) -> list[dict]:  # type: ignore[type-arg]
    """Every budget of one (pool, strategy, seed)."""
    pool_name, strategy, seed, fracs, bootstrap = args
    _register()
    from public_sweeps import load

    from archfit.designing import replay, split_most_expensive
    from archfit.errors import ArchfitError

    pool, target = split_most_expensive(load(pool_name), 0.1)
    out, all_rows = [], None
    for frac in fracs:
        t0 = time.time()
        row = {"pool": pool_name, "seed": seed, "frac": frac, "strategy": strategy}
        try:
            r = replay(pool, target, law="chinchilla", budget_frac=frac, strategy=strategy,
                       seed=seed, bootstrap=bootstrap, final_bootstrap=60, all_rows=all_rows)
        except ArchfitError as e:
            out.append({**row, "error": str(e)})
            continue
        all_rows, d = r["target"]["all_rows"], r["target"]["design"]
        out.append({**row, "n": r["n_chosen"], "secs": time.time() - t0,
                    "tests": [[t["runs"], t["p"]] for t in r["tests"]],
                    "error_pct": 100 * d.get("mean_abs_rel_error", np.nan),
                    "coverage": d.get("coverage", np.nan),
                    "all_pct": 100 * all_rows.get("mean_abs_rel_error", np.nan)})
    return out


def _mean(rows: list[dict], pool: str, frac: float, strategy: str) -> float:
    v = [r["error_pct"] for r in rows if r["pool"] == pool and abs(r["frac"] - frac) < 1e-9
         and r["strategy"] == strategy and "error_pct" in r]
    return float(np.mean(v)) if v else float("nan")


def _median_random(rows: list[dict], pool: str, frac: float) -> float:
    v = [r["error_pct"] for r in rows if r["pool"] == pool and abs(r["frac"] - frac) < 1e-9
         and r["strategy"] == "random" and "error_pct" in r]
    return float(np.median(v)) if v else float("nan")


def _all(rows: list[dict], pool: str) -> float:
    return next(r["all_pct"] for r in rows if r["pool"] == pool and "all_pct" in r)


def loso(rows: list[dict], pools: list[str], frac: float = BAR) -> list[dict]:
    """For each pool: the rule with the lowest mean excess over the every-row fit on the
    other pools, and how it does on the pool left out."""
    out = []
    for held in pools:
        others = [p for p in pools if p != held]
        score = {s: float(np.mean([_mean(rows, p, frac, s) - _all(rows, p) for p in others]))
                 for s in RULES}
        chosen = min(score, key=score.get)
        err, rnd, every = _mean(rows, held, frac, chosen), _median_random(rows, held, frac), \
            _all(rows, held)
        out.append({"held_out": held, "chosen": chosen, "error_pct": err,
                    "random_median_pct": rnd, "all_pct": every,
                    "no_worse_than_random": err <= rnd, "within_1_point": err - every <= 1.0})
    return out


def report(rows: list[dict], pools: list[str], fracs: list[float]) -> None:
    print("\ntarget mean |error| (%) at each budget; the law chinchilla, the costliest tenth "
          "of each pool held out (whole runs), cost 6ND")
    cols = RULES + ("random (median)", "every row")
    print(f"{'pool':>15} {'budget':>6} " + " ".join(f"{c:>15}" for c in cols))
    for p in pools:
        for f in fracs:
            cells = [_mean(rows, p, f, s) for s in RULES]
            cells += [_median_random(rows, p, f), _all(rows, p)]
            print(f"{p:>15} {f:>6.0%} " + " ".join(f"{c:>15.2f}" for c in cells))
    judged = [p for p in pools if p in JUDGED]
    if len(judged) < 3 or BAR not in fracs or not all(
            any(r["strategy"] == s for r in rows) for s in RULES + ("random",)):
        print("\n(leave-one-sweep-out needs every rule and random on at least three judged "
              "pools at 10%)")
        return
    print(f"\nleave-one-sweep-out at {BAR:.0%}: the rule chosen on the other sweeps, on the one "
          "held out")
    for r in loso(rows, judged):
        print(f"  {r['held_out']:>15}: chosen {r['chosen']:>12}: {r['error_pct']:.2f}% vs "
              f"random's median {r['random_median_pct']:.2f}% "
              f"({'holds' if r['no_worse_than_random'] else 'FAILS'}); every row "
              f"{r['all_pct']:.2f}% ({'within 1 point' if r['within_1_point'] else 'NOT within 1 point'})")
    failed = [r for r in rows if "error" in r]
    if failed:
        print(f"\n{len(failed)} replays failed: "
              + "; ".join(sorted({f"{r['pool']} {r['frac']:.0%} {r['strategy']}: {r['error']}"
                                  for r in failed})))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fracs", default="0.01,0.05,0.1,0.25")
    ap.add_argument("--pools", default=",".join(JUDGED + EXTRA))
    ap.add_argument("--rules", default=",".join(RULES + ("random",)),
                    help="replay only these (comma-separated; leave-one-sweep-out needs all)")
    ap.add_argument("--bootstrap", type=int, default=48, help="draws per refit in the loop")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", metavar="PATH", help="also write every replay's row here")
    ap.add_argument("--from-json", metavar="PATH", help="run nothing: report saved rows")
    a = ap.parse_args()
    fracs = [float(x) for x in a.fracs.split(",")]
    pools = a.pools.split(",")
    for p in pools:
        if p not in JUDGED + EXTRA:
            ap.error(f"unknown pool {p!r}; choose from {', '.join(JUDGED + EXTRA)}")
    rules = a.rules.split(",")
    for r in rules:
        if r not in RULES + ("random",):
            ap.error(f"unknown rule {r!r}; choose from {', '.join(RULES + ('random',))}")
    if a.from_json:
        with open(a.from_json) as fh:
            rows = json.load(fh)
    else:
        jobs = [(p, s, seed, fracs, a.bootstrap) for p in pools for s in rules
                for seed in range(SEEDS, SEEDS + (RANDOM_SEEDS if s == "random" else RULE_SEEDS))]
        t0, rows = time.time(), []
        with ProcessPoolExecutor(a.jobs) as ex:
            for part in ex.map(one, jobs):
                rows += part
                print(f"  {part[0]['pool']} {part[0]['strategy']} seed {part[0]['seed']} done "
                      f"({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
        if a.json:
            from archfit.io import atomic_write

            atomic_write(a.json, json.dumps(rows))
    report(rows, pools, fracs)


if __name__ == "__main__":
    main()
