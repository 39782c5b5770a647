"""What a design could reach if it knew the truth: the bar that `bench_design.py` sets.

`bench_design.py` asks archfit's design to beat every baseline at 10% of the pool's cost. This
script asks how much room there is. On each planted truth it builds designs *at the true
parameters* (no fitting in the loop, so no design here is misled by an early fit), from the same
spread start that `archfit.designing.replay` uses:

- `cheapest`: the `cheapest` baseline itself (`archfit.designing.strategies.cheapest`);
- `oracle per-cost`: greedy shrink of the target's variance per unit cost over the whole budget;
- `oracle absolute`: greedy shrink alone over the whole budget;
- `oracle per √cost`: greedy shrink per square root of cost (archfit's ranking) over the whole
  budget;
- `oracle paced`: archfit's ranking and its replay's pacing: rounds of max(5, n/2) runs within
  half of what is left (all of it once half buys nothing).

For each it prints the target's predicted sd (the law linearized at the truth, rows independent
at the truth's noise: the Gaussian shortcut archfit's criterion uses), and the realized mean
|error| against the truth over `--draws` fresh noise draws, each fitted by `archfit.fit` as the
replay fits; paired with `cheapest` draw by draw (95% t interval). On depth-joint the noise is
a run's seed offset shared by its token counts, as in `bench_design.py`.

Last, a bound that no design can beat (:func:`bound`): the least predicted sd of *any* design
within the budget, fractional ones included (each pool row taken with a weight in [0, 1], cost
linear in the weight): a convex problem, solved by Frank-Wolfe and certified by its duality
gap. It is printed as the least rms sd over the target rows and, row by row, the least mean sd.
On chinchilla it says how far `cheapest` is from the best possible design under the same
Gaussian shortcut.

    python benchmarks/bench_design_oracle.py            # 200 draws: about 2 minutes on 2 cores
    python benchmarks/bench_design_oracle.py --draws 10 --truths chinchilla
"""

from __future__ import annotations

import argparse
import multiprocessing
import math
import os
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

DESIGNS = ("cheapest", "oracle per-cost", "oracle absolute", "oracle per √cost", "oracle paced")


def _truth(truth: str):  # type: ignore[no-untyped-def]
    """The pool (with ``true_loss`` and each row's ``run``), the target rows, the law, the
    noise sd per run and the true parameters; the pool's layout does not depend on the seed."""
    import bench_design as bd
    import polars as pl

    from archfit.designing import split_most_expensive

    if truth == "chinchilla":
        from archfit.laws.published import PUBLISHED

        (df, law, sd), p0 = bd.chinchilla_pool(0), dict(PUBLISHED["epoch2024"]["params"])
    else:
        from archfit.laws.planted import DEPTH_JOINT

        (df, law, _), sd, p0 = bd.depth_joint_pool(0), 0.01, dict(DEPTH_JOINT)
    df = df.with_columns(pl.Series("run", np.arange(df.height)))  # each row its own run
    pool, target = split_most_expensive(df, 0.1)
    return pool, target, law, sd, p0


def _knapsack(gr: np.ndarray, cost: np.ndarray, budget: float) -> np.ndarray:
    """The weights w in [0, 1] with cost·w ≤ budget that minimize gr·w: the rows of negative
    gr by |gr| per unit cost, the last one fractional."""
    w, left = np.zeros(len(gr)), budget
    for j in np.argsort(gr / cost):
        if gr[j] >= 0 or left <= 0:
            break
        w[j] = min(1.0, left / cost[j])
        left -= w[j] * cost[j]
    return w


def bound(J: np.ndarray, G: np.ndarray, cost: np.ndarray, budget: float, var: float,
          rtol: float = 1e-4, iters: int = 2000) -> tuple[float, float]:
    """(f, lower): the mean over the target rows (G) of the linearized variance, for the best
    fractional design found and the certified least any design can have. Rows J are taken
    with weights w in [0, 1], cost·w ≤ budget, information Σ w_j J_j J_jᵀ / var; the mean
    variance is convex in w, so Frank-Wolfe's duality gap bounds it from below. Every design
    that spends at most the budget is a feasible w, so none has a mean variance below
    ``lower``."""
    def mean_var(w: np.ndarray) -> float:
        try:
            return float(np.sum((G @ np.linalg.inv((J * w[:, None]).T @ J / var)) * G)) / len(G)
        except np.linalg.LinAlgError:
            return math.inf

    w = _knapsack(-np.ones(len(cost)), cost, budget)  # the cheapest rows: a full-rank start
    f, lower = mean_var(w), -math.inf
    for _ in range(iters):
        H = G @ np.linalg.inv((J * w[:, None]).T @ J / var)
        gr = -np.einsum("ij,jk,ik->i", J, H.T @ H, J) / (var * len(G))  # d mean var / d w
        s = _knapsack(gr, cost, budget)
        gap = float(gr @ (w - s))
        lower = max(lower, f - gap)
        if gap <= rtol * f:
            break
        lo, hi = 0.0, 1.0  # exact line search on the segment (convex: ternary search)
        for _ in range(40):
            a, b = lo + (hi - lo) / 3, hi - (hi - lo) / 3
            lo, hi = (lo, b) if mean_var(w + a * (s - w)) < mean_var(w + b * (s - w)) else (a, hi)
        w = w + (lo + hi) / 2 * (s - w)
        f = mean_var(w)
    return f, max(lower, 0.0)


def _designs(truth: str, frac: float
             ) -> tuple[dict[str, list[int]], dict[str, float], tuple[float, float]]:
    """Each design's pool rows, and the target's predicted sd after it: the law linearized at
    the true parameters (log scale where positive), the covariance the exact inverse of the
    rows' Fisher information at the truth's noise (no ridge: the spread start already
    informs every parameter)."""
    from archfit.designing import columns, costs
    from archfit.designing.pool import Target
    from archfit.designing.strategies import COST_EXPONENT, Step, cheapest, shrink, spread
    from archfit.laws import get_law

    pool, target, law, sd, p0 = _truth(truth)
    lw = get_law(law)
    cost, _ = costs(pool)
    budget = frac * float(cost.sum())
    names = [n for n in lw.param_names if p0[n] != 0]
    logs = [p0[n] > 0 for n in names]
    th0 = np.array([math.log(p0[n]) if lg else p0[n] for n, lg in zip(names, logs)])

    def grad(rows: dict) -> np.ndarray:  # d log-loss / dθ at the truth, central differences
        def at(th: np.ndarray) -> np.ndarray:
            p = {**p0, **{n: float(math.exp(v) if lg else v) for n, lg, v in
                          zip(names, logs, th)}}
            return np.log(np.asarray(lw.predict(p, rows), float))

        e = np.eye(len(th0)) * 1e-5
        return np.array([(at(th0 + e[i]) - at(th0 - e[i])) / 2e-5
                         for i in range(len(th0))]).T

    J, G = grad(columns(pool)), grad(columns(target))

    def cov(rows: list[int]) -> np.ndarray:
        return np.linalg.pinv(J[rows].T @ J[rows] / sd ** 2)

    def greedy(rows: list[int], most: int, spend: float, exponent: float) -> list[int]:
        rows, c, left = list(rows), cov(rows), spend
        while len(rows) < most:
            ok = np.ones(len(cost), bool)
            ok[rows] = False
            ok &= cost <= left * (1 + 1e-12)
            if not ok.any():
                break
            g = shrink(J, G, c, sd ** 2)
            j = int(np.argmax(np.where(ok, g / cost ** exponent, -np.inf)))
            rows.append(j)
            left -= cost[j]
            u = c @ J[j]
            c = c - np.outer(u, u) / (J[j] @ u + sd ** 2)
        return rows

    step = Step(lw, None, columns(pool), cost, np.ones(len(cost), bool),
                Target("table", rows=columns(target)), np.random.default_rng(0))
    start = spread(step, max(lw.min_points, 2 * len(lw.param_names)), budget)
    step.open[start] = False
    everything, left = len(cost), budget - float(cost[start].sum())
    designs = {"cheapest": start + cheapest(step, everything, left),
               "oracle per-cost": greedy(start, everything, left, 1.0),
               "oracle absolute": greedy(start, everything, left, 0.0),
               "oracle per √cost": greedy(start, everything, left, COST_EXPONENT)}
    paced = list(start)  # as archfit.designing.replay paces an adaptive strategy
    while (left := budget - float(cost[paced].sum())) > 0:
        rest = np.ones(len(cost), bool)
        rest[paced] = False
        pace = left / 2 if (rest & (cost <= left / 2)).any() else left
        nxt = greedy(paced, len(paced) + max(5, len(paced) // 2), pace, COST_EXPONENT)
        if len(nxt) == len(paced):
            break
        paced = nxt
    designs["oracle paced"] = paced
    predicted = {name: float(np.mean(np.sqrt(np.einsum("ij,jk,ik->i", G, cov(rows), G))))
                 for name, rows in designs.items()}
    rms = math.sqrt(bound(J, G, cost, budget, sd ** 2)[1])
    per_row = float(np.mean([math.sqrt(bound(J, G[i:i + 1], cost, budget, sd ** 2)[1])
                             for i in range(len(G))]))
    return designs, predicted, (rms, per_row)


def one_draw(args: tuple) -> dict[str, float]:  # type: ignore[type-arg]
    """One fresh noise draw on the pool; each design fitted as the replay fits it, and its
    target mean |error| against the truth."""
    truth, designs, draw = args
    warnings.filterwarnings("ignore")
    import polars as pl

    from archfit.designing import columns
    from archfit.laws import get_law
    from archfit.laws.inference.fitting import fit

    pool, target, law, sd, _ = _truth(truth)
    rng = np.random.default_rng(10_000 + draw)
    runs = pool["run"].to_numpy()
    offset = rng.normal(0, sd, int(runs.max()) + 1)[runs]
    noisy = pool.with_columns(pl.Series("loss", pool["true_loss"].to_numpy() * np.exp(offset)))
    noisy = noisy.drop("true_loss", "run")
    lw, true, rows = get_law(law), target["true_loss"].to_numpy(), columns(target)
    out = {}
    for name, idx in designs.items():
        f = fit(noisy[sorted(idx)], law, bootstrap=0, heldout=False)
        out[name] = float(np.mean(np.abs(np.asarray(lw.predict(f.params, rows)) / true - 1)))
    return out


def main() -> None:
    from scipy.stats import t as student_t

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--frac", type=float, default=0.1)
    ap.add_argument("--truths", default="chinchilla,depth-joint")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    a = ap.parse_args()
    t0 = time.time()
    print(f"designs at the planted truth, {a.frac:.0%} of the pool's cost, {a.draws} noise draws "
          "each; error = target mean |relative error| against the truth (%)")
    for truth in a.truths.split(","):
        _, target, _, sd, _ = _truth(truth)
        designs, predicted, (rms, per_row) = _designs(truth, a.frac)
        # spawn: this process already holds polars' threads, which a fork would copy locked
        with ProcessPoolExecutor(a.jobs, mp_context=multiprocessing.get_context("spawn")) as ex:
            res = list(ex.map(one_draw, [(truth, designs, d) for d in range(a.draws)]))
        print(f"\n{truth} (noise {sd:.1%} per run, {target.height} target rows)")
        print(f"{'design':>16} {'runs':>5} {'predicted sd %':>15} {'realized %':>15} "
              f"{'minus cheapest [95%]':>26}")
        base = np.array([r["cheapest"] for r in res])
        for name in DESIGNS:
            v = np.array([r[name] for r in res])
            d = v - base
            h = (float(student_t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d)))
                 if len(d) > 1 else math.nan)
            paired = ("-" if name == "cheapest" else
                      f"{100 * d.mean():+.3f} [{100 * (d.mean() - h):+.3f}, "
                      f"{100 * (d.mean() + h):+.3f}]")
            print(f"{name:>16} {len(designs[name]):>5} {100 * predicted[name]:>15.3f} "
                  f"{100 * v.mean():>8.3f} ± {100 * v.std() / math.sqrt(len(v)):.3f} "
                  f"{paired:>26}")
        print(f"{'bound':>16} {'':>5} {100 * per_row:>15.3f}   certified: no design within the "
              f"budget (fractional ones included) has a mean sd below this, or an rms sd below "
              f"{100 * rms:.3f}%;\n{'':>23}the best possible is at most "
              f"{100 * (1 - per_row / predicted['cheapest']):.1f}% below `cheapest`'s sd")
    print(f"\n{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
