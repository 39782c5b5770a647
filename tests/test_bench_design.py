"""bench_design.py --from-json: the table and the paired verdicts of saved replay rows, several
runs pooled (replications on other seeds), without running a replay."""

from __future__ import annotations

import json
import subprocess
import sys

STRATEGIES = ("archfit", "random", "cheapest", "cost-weighted", "d-optimal", "v-optimal")


def _rows(seeds: range, archfit_err: float) -> list[dict]:
    """Saved rows as --json writes them: archfit at ``archfit_err`` (plus a per-seed wobble),
    every baseline 0.003 worse or more; the fit on every row at 0.001."""
    out = []
    for truth in ("chinchilla", "depth-joint"):
        for seed in seeds:
            for k, s in enumerate(STRATEGIES):
                err = archfit_err + 1e-4 * (seed % 3) + (0.002 + 0.001 * k if k else 0.0)
                out.append({"truth": truth, "seed": seed, "frac": 0.1, "strategy": s, "n": 10,
                            "design_mean_abs_rel_error": err + 0.004,
                            "design_mean_abs_rel_error_vs_truth": err, "design_r2": 0.9,
                            "design_coverage": 0.95, "all_mean_abs_rel_error": 0.005,
                            "all_mean_abs_rel_error_vs_truth": 0.001, "all_r2": 0.95,
                            "all_coverage": 0.95})
    return out


def _bench(repo, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(repo / "benchmarks" / "bench_design.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_saved_runs_are_pooled_by_seed(repo, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_rows(range(0, 3), 0.003)))
    # b repeats seed 2 (the same replay, counted once) and adds seeds 100-102
    b.write_text(json.dumps(_rows(range(2, 3), 0.003) + _rows(range(100, 103), 0.003)))
    r = _bench(repo, "--fracs", "0.1", "--from-json", f"{a},{b}")
    assert r.returncode == 0, r.stderr
    assert "6 repeats (seeds 0-2, 100-102)" in r.stdout, r.stdout
    line = next(x for x in r.stdout.splitlines() if x.startswith("chinchilla, vs truth:"))
    # archfit 0.3% + the wobble's mean (0.01%); the best baseline, random, 0.3 points more
    assert "archfit 0.310%, best baseline random 0.610% (lower)" in line, line
    assert "cheapest -0.400 [-0.400, -0.400]" in r.stdout, r.stdout


def test_saved_rows_that_do_not_fit_the_question_exit_2(repo, tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(_rows(range(0, 2), 0.003)))
    r = _bench(repo, "--fracs", "0.05", "--from-json", str(a))
    assert r.returncode == 2 and "no rows for chinchilla,drift,depth-joint at budgets 0.05" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "rows"}')
    r = _bench(repo, "--from-json", str(bad))
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr


def _oracle(repo):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(repo / "benchmarks"))
    try:
        import bench_design_oracle
    finally:
        sys.path.remove(str(repo / "benchmarks"))
    return bench_design_oracle


def test_the_oracle_bound_is_the_least_variance_of_any_design(repo):
    """bench_design_oracle.bound: the certified least mean target variance of any design within
    a budget. One parameter, every row alike: the best is the most rows the budget buys, the
    cheapest first and the last in part. Three parameters, 12 rows: no subset within the budget
    (all 4096, brute force) is below the bound, and the best is within a few percent of it."""
    import itertools

    import numpy as np

    bound = _oracle(repo).bound
    cost = np.array([5.0, 1.0, 3.0, 2.0, 8.0])
    f, lower = bound(np.ones((5, 1)), np.ones((1, 1)), cost, 4.5, 0.25)
    # rows of cost 1 and 2 whole, and half the row of cost 3: weight 2.5, variance 0.25 / 2.5
    assert abs(f - 0.1) < 1e-6 and 0.1 * (1 - 1e-3) <= lower <= f

    rng = np.random.default_rng(3)
    J, G = rng.normal(size=(12, 3)), rng.normal(size=(4, 3))
    cost = rng.uniform(1, 5, 12)
    budget = 0.5 * cost.sum()
    f, lower = bound(J, G, cost, budget, 0.04)
    best = np.inf
    for pick in itertools.product((0, 1), repeat=12):
        rows = np.flatnonzero(pick)
        if len(rows) >= 3 and cost[rows].sum() <= budget:
            best = min(best, float(np.mean(np.einsum(
                "ij,jk,ik->i", G, np.linalg.inv(J[rows].T @ J[rows] / 0.04), G))))
    assert lower <= f <= best, (lower, f, best)
    assert lower >= 0.95 * best, (lower, best)  # the relaxation is close to the best design
    print(f"brute force {best:.5f}, relaxation {f:.5f}, certified lower bound {lower:.5f}")


def test_the_real_bench_reports_the_issue_s_three_conditions(repo, tmp_path):
    """bench_design_real.py --from-json: archfit against random's median, within a point of
    every row, and pooled coverage, per pool, computed from saved rows."""
    rows = []
    for pool, arch, cover in (("chinchilla", 0.020, 1.0), ("marin-dclm", 0.040, 0.5)):
        for seed in range(4):
            for s, err in (("archfit", arch), ("random", 0.030 + 0.002 * seed),
                           ("nearest", 0.025)):
                rows.append({"pool": pool, "seed": seed, "frac": 0.1, "strategy": s, "n": 10,
                             "fallbacks": 0, "design_mean_abs_rel_error": err,
                             "design_max_abs_rel_error": 2 * err, "design_r2": 0.5,
                             "design_coverage": cover if s == "archfit" else 0.9,
                             "all_mean_abs_rel_error": 0.015, "all_max_abs_rel_error": 0.03,
                             "all_r2": 0.9, "all_coverage": 1.0})
    saved = tmp_path / "rows.json"
    saved.write_text(json.dumps(rows))
    r = subprocess.run([sys.executable, str(repo / "benchmarks" / "bench_design_real.py"),
                        "--from-json", str(saved), "--fracs", "0.1",
                        "--pools", "chinchilla,marin-dclm"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    # random's errors over seeds 0-3: 3.0, 3.2, 3.4, 3.6%: median 3.3%
    assert "chinchilla: 2.00% vs random's median 3.30% (holds); all rows 1.50% (within 1 point)" \
        in out, out
    assert "marin-dclm: 4.00% vs random's median 3.30% (FAILS); all rows 1.50% (NOT within 1 " \
        "point)" in out, out
    assert "coverage of the target runs, pooled: 75% (FAILS, goal >= 80%)" in out, out
    # paired with the best baseline (nearest, 2.5%): archfit 2.0% -> -0.50 points, no spread
    assert "chinchilla: best baseline nearest (2.50%): -0.50 [-0.50, -0.50]" in out, out
