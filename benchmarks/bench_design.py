"""How much of a sweep a design needs: `archfit design`'s rule against its baselines, on
planted truths. Where the planted law is the one fitted, this shows the code is right, not
that the method is: the public sweeps (`bench_design_real.py`, leave-one-sweep-out) are where
a design earns its claim. The misspecified truths check what the rule does when the law is
wrong in a known way.

Four planted truths, each a pool of >= 200 runnable candidates with the most expensive tenth
(C = 6 N D) held out as the target. Every row is its own training run, with its own noise and
its own cost, so the cost and the noise agree, the target is held out by whole runs, and
every strategy is scored by the same fit with the same noise model:

- chinchilla: Epoch AI's refit constants (Besiroglu et al. 2024), 20 sizes 1e7-5e9 x 12 token
  counts (2-300 tokens per parameter), 0.5% noise on each run's loss;
- drift, misspecified: Chinchilla's form with a data exponent that grows with model size,
  beta(N) = 0.3658 + 0.02 ln(N / 1e8) (0.32 at 1e7, 0.44 at 5e9), fitted with the chinchilla
  law, which has one beta; same grid and noise;
- repeated, misspecified: Muennighoff et al.'s data-constrained law at its published C4 fit,
  every run drawing on one corpus of 2e10 unique tokens (up to 75 epochs), fitted with the
  chinchilla law, which has no term for repeated data; same grid and noise;
- depth-joint: archfit's planted joint law (archfit.laws.planted.DEPTH_JOINT), 10 sizes
  3e6-1e9 x 7 depths around the optimum x 3 token counts, noise of 0.5%, 1% or 2% of the loss
  (cycling over the repeats).

For each repeat (new noise), each budget (1%, 5%, 10%, 25% of the pool's cost) and each
strategy, `archfit.designing.replay` runs the sequential loop from one shared first batch,
fits the chosen runs and scores the target: mean |relative error|, R² and the coverage of the
95% prediction intervals, beside the fit on every row. Prints mean ± sd over the repeats, and
at 10% archfit's error paired with each baseline's and the public-sweep bar, judged pool by
pool as on a public sweep: no worse than random's median over its draws on the same pool
(`--random-draws`, 5), averaged over the pools, and within 1 point of every row.

The target's error is scored twice: against the target rows' observed losses, which carry
their own noise (0.5% on chinchilla: a mean |noise| of 0.40%, the same for every strategy),
and against the planted truth's noiseless loss (`true_loss`, held by the target rows only):
the law's own miss, which is what a design changes.

Seeds: the report uses seeds 1000-1019; no constant of the default rule was chosen on them.

    python benchmarks/bench_design.py            # 20 repeats
    python benchmarks/bench_design.py --repeats 3 --fracs 0.1
    python benchmarks/bench_design.py --plot design-bench.png   # and the figure of the table
    python benchmarks/bench_design.py --fracs 0.1 --from-json a.json,b.json   # pooled seed sets
    python benchmarks/bench_design.py --fracs 0.1 --from-json a.json --plot-replay replay.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

STRATEGIES = ("near-target", "variance", "spread", "random", "cheapest", "cost-weighted",
              "d-optimal", "v-optimal", "nearest")
TRUTHS = ("chinchilla", "drift", "repeated", "depth-joint")
REPORT_SEEDS = 1000
NOISE_DJ = (0.005, 0.01, 0.02)
OBS, TRUE = "mean_abs_rel_error", "mean_abs_rel_error_vs_truth"


def _planted(law: str, truth: dict[str, float], rows: dict[str, list], noise: np.ndarray):
    """The pool frame: each row's noiseless loss under ``truth`` (the law's own prediction) as
    ``true_loss``, times exp(noise) as ``loss``."""
    import polars as pl

    from archfit.laws import get_law

    cols = {k: np.asarray(v, float) for k, v in rows.items()}
    true = np.asarray(get_law(law).predict(truth, cols), float)
    return pl.DataFrame({**rows, "true_loss": true, "loss": true * np.exp(noise)})


def _grid() -> dict[str, list[float]]:
    grid = [(float(N), float(N * tpp)) for N in np.logspace(7, math.log10(5e9), 20)
            for tpp in np.logspace(math.log10(2), math.log10(300), 12)]
    return {"params": [g[0] for g in grid], "tokens": [g[1] for g in grid]}


def chinchilla_pool(seed: int):  # type: ignore[no-untyped-def]
    from archfit.laws.published import PUBLISHED

    rows = _grid()
    noise = np.random.default_rng(seed).normal(0, 0.005, len(rows["params"]))  # per run
    return (_planted("chinchilla", dict(PUBLISHED["epoch2024"]["params"]), rows, noise),
            "chinchilla", 0.005)


DRIFT = 0.02  # d beta / d ln N of the misspecified truth


def drift_pool(seed: int):  # type: ignore[no-untyped-def]
    """Chinchilla's form whose data exponent grows with size: a truth the chinchilla law (one
    beta) cannot represent. Epoch's constants at N = 1e8."""
    import polars as pl

    from archfit.laws.published import PUBLISHED

    p = PUBLISHED["epoch2024"]["params"]
    rows = _grid()
    N, D = np.asarray(rows["params"]), np.asarray(rows["tokens"])
    beta = p["beta"] + DRIFT * np.log(N / 1e8)
    true = p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** beta
    noise = np.random.default_rng(seed).normal(0, 0.005, len(N))  # per run
    return (pl.DataFrame({**rows, "true_loss": true, "loss": true * np.exp(noise)}),
            "chinchilla", 0.005)


UNIQUE = 2e10  # the repeated truth's corpus: runs past it repeat it (up to 75 epochs)


def repeated_pool(seed: int):  # type: ignore[no-untyped-def]
    """Repeated data, a misspecified truth: Muennighoff et al.'s data-constrained law at their
    published C4 fit, every run drawing on one corpus of ``UNIQUE`` tokens, fitted with the
    chinchilla law, which has no term for repetition."""
    from archfit.laws.published import PUBLISHED

    rows = _grid()
    rows["unique_tokens"] = [UNIQUE] * len(rows["params"])
    noise = np.random.default_rng(seed).normal(0, 0.005, len(rows["params"]))  # per run
    frame = _planted("data-constrained", dict(PUBLISHED["muennighoff2023"]["params"]), rows,
                     noise)
    return frame, "chinchilla", 0.005


def depth_joint_pool(seed: int):  # type: ignore[no-untyped-def]
    from archfit.laws.planted import DEPTH_JOINT as j

    sd = NOISE_DJ[seed % len(NOISE_DJ)]
    runs = []
    for N in np.logspace(math.log10(3e6), 9, 10):
        lopt = j["p"] + j["q"] * math.log(N)
        runs += [(float(N), max(1, int(round(math.exp(lopt + dl)))))
                 for dl in np.linspace(-1.2, 1.2, 7)]
    tpps = (5.0, 20.0, 80.0)
    rows = {"params": [N for N, _ in runs for _ in tpps],
            "n_layer": [L for _, L in runs for _ in tpps],
            "tokens": [N * t for N, _ in runs for t in tpps]}
    # each row its own run (its own cost and its own noise), as the replay charges it
    noise = np.random.default_rng(seed).normal(0, sd, len(runs) * len(tpps))
    return _planted("depth-joint", dict(j), rows, noise), "depth-joint", sd


POOLS = {"chinchilla": chinchilla_pool, "drift": drift_pool, "repeated": repeated_pool,
         "depth-joint": depth_joint_pool}


RANDOM_SEED_STEP = 1000  # random's k-th draw on a pool uses seed + k * 1000 (draw 0: the seed)


def one_repeat(args: tuple) -> list[dict]:  # type: ignore[type-arg]
    truth, seed, fracs, strategies, bootstrap, random_draws = args
    from archfit.designing import replay, split_most_expensive
    from archfit.errors import ArchfitError

    df, law, sd = POOLS[truth](seed)
    pool, target = split_most_expensive(df, 0.1)
    pool = pool.drop("true_loss")  # the design sees observed losses only
    out, all_rows = [], None
    for frac in fracs:
        runs = [(s, draw) for s in strategies
                for draw in range(random_draws if s == "random" else 1)]
        for s, draw in runs:
            t0 = time.time()
            try:
                r = replay(pool, target, law=law, budget_frac=frac, strategy=s,
                           seed=seed + draw * RANDOM_SEED_STEP, bootstrap=bootstrap,
                           final_bootstrap=60, all_rows=all_rows)
            except ArchfitError as e:
                out.append({"truth": truth, "seed": seed, "draw": draw, "frac": frac,
                            "strategy": s, "error": str(e)})
                continue
            all_rows = r["target"]["all_rows"]
            out.append({"truth": truth, "seed": seed, "draw": draw, "frac": frac, "strategy": s,
                        "noise": sd, "n": r["n_chosen"], "spent": r["budget_frac_spent"],
                        "secs": time.time() - t0,
                        **{f"design_{k}": v for k, v in r["target"]["design"].items()},
                        **{f"all_{k}": v for k, v in all_rows.items()}})
    return out


def _ms(vals: list[float], pct: bool = False) -> str:
    v = [x for x in vals if x is not None and np.isfinite(x)]
    if not v:
        return "-"
    m, s = float(np.mean(v)), float(np.std(v))
    return f"{100 * m:.2f} ± {100 * s:.2f}" if pct else f"{m:.3f} ± {s:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=REPORT_SEEDS,
                    help="repeats use seeds from here on (another set: a replication)")
    ap.add_argument("--fracs", default="0.01,0.05,0.1,0.25")
    ap.add_argument("--truths", default=",".join(TRUTHS))
    ap.add_argument("--strategies", default=",".join(STRATEGIES),
                    help="replay only these (comma-separated; the table shows what was run)")
    ap.add_argument("--bootstrap", type=int, default=48, help="draws per refit in the loop")
    ap.add_argument("--random-draws", type=int, default=5,
                    help="random's draws on each pool (the bar: near-target against their median "
                         "on the same pool, as bench_design_real.py judges a public sweep)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", metavar="PATH", help="also write every replay's row here")
    ap.add_argument("--plot", metavar="PATH.png",
                    help="also draw target error against budget, per strategy and truth")
    ap.add_argument("--plot-replay", metavar="PATH.png",
                    help="also draw archfit's replay on the first seed's depth-joint pool at 10%%")
    ap.add_argument("--from-json", metavar="PATH[,PATH...]",
                    help="run nothing: print the table of rows saved by --json, several runs' "
                         "rows pooled (e.g. replications on other seeds)")
    a = ap.parse_args()
    for s in a.strategies.split(","):
        if s not in STRATEGIES:
            ap.error(f"unknown strategy {s!r}; choose from {', '.join(STRATEGIES)}")
    fracs = [float(x) for x in a.fracs.split(",")]
    t0 = time.time()
    if a.from_json:
        rows = _saved(a.from_json.split(","), fracs, a.truths.split(","))
        where = "saved rows"
    else:
        rows = _run(a, fracs)
        where = f"{time.time() - t0:.0f} s on {a.jobs} processes"
    ok = [r for r in rows if "error" not in r and "design_error" not in r]
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh)
    seeds = sorted({r["seed"] for r in rows})
    print(f"\narchfit design benchmark: {len(seeds)} repeats (seeds {_spans(seeds)}), target = "
          f"the most expensive tenth of each pool, {where}")
    verdicts = []
    for truth in a.truths.split(","):
        print(f"\n{truth}: target mean |error| (%) against the rows' observed losses and against "
              "the planted truth, R², 95% coverage; mean ± sd over repeats")
        print(f"{'budget':>7} {'strategy':>14} {'observed %':>15} {'vs truth %':>15} {'R²':>15}"
              f" {'coverage':>15} {'runs':>6}")
        for frac in fracs:
            sel = [r for r in ok if r["truth"] == truth and r["frac"] == frac]
            for s in STRATEGIES:
                rs = [r for r in sel if r["strategy"] == s]
                print(f"{frac:>7.0%} {s:>14} {_ms([r['design_' + OBS] for r in rs], True):>15}"
                      f" {_ms([r['design_' + TRUE] for r in rs], True):>15}"
                      f" {_ms([r['design_r2'] for r in rs]):>15} "
                      f"{_ms([r['design_coverage'] for r in rs]):>15} "
                      f"{np.mean([r['n'] for r in rs]) if rs else 0:>6.0f}")
            first: dict[int, dict] = {}
            for r in sel:
                first.setdefault(r["seed"], r)
            allr = list(first.values())
            print(f"{frac:>7.0%} {'all rows':>14} {_ms([r['all_' + OBS] for r in allr], True):>15}"
                  f" {_ms([r['all_' + TRUE] for r in allr], True):>15}"
                  f" {_ms([r['all_r2'] for r in allr]):>15} "
                  f"{_ms([r['all_coverage'] for r in allr]):>15}")
            if abs(frac - 0.1) < 1e-9:
                verdicts += _verdicts(truth, sel, allr) + _conditions(truth, sel, allr)
    failed = [r for r in rows if "error" in r or "design_error" in r]
    if failed:
        print(f"\n{len(failed)} replays could not fit their runs (counted out above)")
    print("\nAt 10% of the pool's cost: near-target minus each baseline, paired by seed, mean [95% "
          "interval] in points of target error (negative: near-target lower)")
    for v in verdicts:
        print(v)
    if a.plot:
        print(f"\nwrote {_plot(ok, fracs, a.truths.split(','), a.plot)}")
    if a.plot_replay:
        print(f"wrote {_plot_replay(a.first_seed, a.plot_replay)}")


def _plot_replay(seed: int, path: str) -> str:
    """archfit's replay on the depth-joint pool of ``seed`` at 10%, drawn (--replay --plot)."""
    from archfit.designing import columns, replay, split_most_expensive
    from archfit.plots.design import draw_replay

    df, law, _ = depth_joint_pool(seed)
    pool, target = split_most_expensive(df, 0.1)
    pool = pool.drop("true_loss")
    r = replay(pool, target, law=law, budget_frac=0.1, seed=seed, bootstrap=48,
               final_bootstrap=60)
    return draw_replay(r, columns(pool), columns(target), path)


def _run(a: argparse.Namespace, fracs: list[float]) -> list[dict]:
    seeds = range(a.first_seed, a.first_seed + a.repeats)
    jobs = [(t, seed, fracs, tuple(a.strategies.split(",")), a.bootstrap, a.random_draws)
            for t in a.truths.split(",") for seed in seeds]
    t0, rows = time.time(), []
    with ProcessPoolExecutor(a.jobs) as ex:
        for part in ex.map(one_repeat, jobs):
            rows += part
            print(f"  {part[0]['truth']} seed {part[0]['seed']} done ({time.time() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
    return rows


def _saved(paths: list[str], fracs: list[float], truths: list[str]) -> list[dict]:
    """The rows of earlier runs' --json, at the budgets and truths asked for; a seed saved
    twice (the same replay) counts once."""
    rows: dict[tuple, dict] = {}
    for path in paths:
        try:
            with open(path) as fh:
                saved = json.load(fh)
            for r in saved:
                if r["truth"] in truths and any(abs(r["frac"] - f) < 1e-9 for f in fracs):
                    rows[(r["truth"], r["seed"], r.get("draw", 0), r["frac"],
                          r["strategy"])] = r
        except (OSError, ValueError, TypeError, KeyError) as e:
            _fail(f"cannot read {path} as rows of --json ({type(e).__name__}: {e}); give files "
                  "that bench_design.py --json wrote")
    if not rows:
        _fail(f"no rows for {','.join(truths)} at budgets {_frac_list(fracs)} in {', '.join(paths)}; "
              "pass the --truths and --fracs the saved runs used")
    return list(rows.values())


def _frac_list(fracs: list[float]) -> str:
    return ",".join(f"{f:g}" for f in fracs)


def _fail(msg: str) -> None:
    print(f"bench_design: {msg}", file=sys.stderr)
    sys.exit(2)


def _spans(seeds: list[int]) -> str:
    """0,1,2,5,6 -> '0-2, 5-6'."""
    out, start = [], seeds[0]
    for a, b in zip(seeds, seeds[1:] + [None]):
        if b != a + 1:
            out.append(f"{start}-{a}" if a != start else f"{a}")
            start = b
    return ", ".join(out)


def _plot(ok: list[dict], fracs: list[float], truths: list[str], path: str) -> str:
    """Target mean |error| against the planted truth, by budget, one line per strategy (mean
    and its standard error over the repeats) and the fit on every row, one panel per truth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    fig, axes = plt.subplots(1, len(truths), figsize=(6 * len(truths), 4.8), squeeze=False)
    for ax, truth in zip(axes[0], truths):
        sel = [r for r in ok if r["truth"] == truth]
        for k, s in enumerate(STRATEGIES):
            m, se = [], []
            for f in fracs:
                v = [r["design_" + TRUE] for r in sel if r["strategy"] == s and r["frac"] == f]
                m.append(100 * np.mean(v) if v else np.nan)
                se.append(100 * np.std(v, ddof=1) / math.sqrt(len(v)) if len(v) > 1 else 0)
            ax.errorbar(fracs, m, yerr=se, marker="o", ms=4, capsize=3, color=f"C{k}",
                        lw=2.5 if s == "near-target" else 1, label=s, zorder=3 if s == "near-target"
                        else 2)
        every = [100 * r["all_" + TRUE] for r in sel if r["strategy"] == "near-target"]
        if every:
            ax.axhline(float(np.mean(every)), color="k", ls="--", lw=1,
                       label="fit on every row")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(fracs, [f"{f:.0%}" for f in fracs])
        ax.xaxis.set_minor_formatter(NullFormatter())
        for fmt in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            fmt(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("budget: share of the pool's cost (C = 6 N D)")
        ax.set_ylabel("target mean |error| vs the planted truth (%)")
        n = len({r["seed"] for r in sel})
        ax.set_title(f"{truth}: {n} repeats, mean ± standard error", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def per_pool(sel: list[dict], key: str, strategy: str) -> dict[int, float]:
    """``strategy``'s ``key`` on each pool (seed): the median over its draws there (random's
    several draws; one for every other strategy)."""
    by: dict[int, list[float]] = {}
    for r in sel:
        if r["strategy"] == strategy:
            by.setdefault(r["seed"], []).append(r[key])
    return {seed: float(np.median(v)) for seed, v in by.items()}


def _paired(sel: list[dict], key: str, other: str) -> tuple[float, float, int]:
    """archfit's ``key`` minus ``other``'s (its median over draws on the pool), pool by pool:
    (mean, 95% half-width, pools)."""
    from scipy.stats import t as student_t

    a, b = per_pool(sel, key, "near-target"), per_pool(sel, key, other)
    d = np.array([a[k] - b[k] for k in a if k in b])
    if len(d) < 2:
        return math.nan, math.nan, len(d)
    return (float(d.mean()), float(student_t.ppf(0.975, len(d) - 1) * d.std(ddof=1)
                                   / math.sqrt(len(d))), len(d))


def _conditions(truth: str, sel: list[dict], allr: list[dict]) -> list[str]:
    """The public-sweep bar (bench_design_real.py) on a planted truth, pool by pool as it is
    judged on a public sweep: near-target no worse than random's median over its draws on the same
    pool (averaged over the pools), within 1 point of every row (against the truth), and its
    95% intervals covering >= 80% of the target rows' observed losses."""
    a, rnd = per_pool(sel, "design_" + TRUE, "near-target"), per_pool(sel, "design_" + TRUE, "random")
    pools = sorted(set(a) & set(rnd))
    cov = [r["design_coverage"] for r in sel if r["strategy"] == "near-target"]
    if not pools or not allr:
        return []
    every = float(np.mean([r["all_" + TRUE] for r in allr]))
    m, med = float(np.mean([a[k] for k in pools])), float(np.mean([rnd[k] for k in pools]))
    draws = max(sum(r["strategy"] == "random" and r["seed"] == k for r in sel) for k in pools)
    wins = sum(a[k] <= rnd[k] for k in pools)
    return [f"{truth}, the public-sweep bar, pool by pool: near-target {100 * m:.3f}% vs random's "
            f"median of {draws} draws on the same pool {100 * med:.3f}% (mean over {len(pools)} "
            f"pools; {'holds' if m <= med else 'FAILS'}; near-target no worse on {wins} of "
            f"{len(pools)} pools); all rows {100 * every:.3f}% ({'within' if m - every <= 0.01 else 'NOT within'} "
            f"1 point); coverage {float(np.mean(cov)):.0%} "
            f"({'holds' if np.mean(cov) >= 0.8 else 'FAILS'}, goal >= 80%)"]


def _verdicts(truth: str, sel: list[dict], allr: list[dict]) -> list[str]:
    out = []
    for name, key in (("observed", OBS), ("vs truth", TRUE)):
        means = {s: float(np.mean([r["design_" + key] for r in sel if r["strategy"] == s]))
                 for s in STRATEGIES if any(r["strategy"] == s for r in sel)}
        base = {k: v for k, v in means.items() if k != "near-target"}
        if "near-target" not in means or not base:  # e.g. --strategies near-target: nothing to pair
            continue
        best = min(base, key=base.get)
        all_err = float(np.mean([r["all_" + key] for r in allr]))
        wins = means["near-target"] < base[best]
        pairs = []
        for s in base:
            m, h, _ = _paired(sel, "design_" + key, s)
            pairs.append(f"{s} {100 * m:+.3f} [{100 * (m - h):+.3f}, {100 * (m + h):+.3f}]")
        out.append(f"{truth}, {name}: near-target {100 * means['near-target']:.3f}%, best baseline "
                   f"{best} {100 * base[best]:.3f}% ({'lower' if wins else 'NOT lower'}); all "
                   f"rows {100 * all_err:.3f}% (within 1 point: "
                   f"{'yes' if means['near-target'] - all_err <= 0.01 else 'NO'})\n    paired: "
                   + "; ".join(pairs))
    return out


if __name__ == "__main__":
    main()
