"""The design judged on public sweeps: the vendored Marin isoFLOP sweeps, the trivial rule a
design must beat (nearest the target first), the law's discrepancy term, the cost-extrapolation
check that widens the replay's intervals and sets the near-target share, and the replay's
report of its fallbacks."""

from __future__ import annotations

import math
import os
import re
import sys

import numpy as np
import polars as pl
import pytest

from archfit.designing import calibrated_fit, replay, split_most_expensive
from archfit.designing.replays import cost_check
from archfit.designing.ensemble import DISCREPANCY_SCALE, DISCREPANCY_SD, Discrepancy
from archfit.designing.pool import Target
from archfit.designing.strategies import (TABLE_SHARE, TRUST_REGION, Step, _criterion,
                                          archfit_criterion, distance_to_target, near_share,
                                          nearest, table_share)
from archfit.laws import get_law
from archfit.laws.planted import dense_grid

ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


# ------------------------------------------------------------------ the vendored sweeps
@pytest.mark.parametrize("mix,runs", [("dclm", 85), ("comma", 92), ("nemotron", 96)])
def test_each_marin_sweep_agrees_with_itself(mix, runs):
    """The transcription checked against the export's own redundancy: every isoFLOP run's name
    spells its width and depth (d{width}-L{depth}) and its budget, and the export's FLOP count
    is 6 N D to within the spread of Marin's own accounting (0.74-1.07)."""
    d = pl.read_csv(os.path.join(ROOT, "datasets", "marin", f"isoflop-{mix}.csv"))
    assert d.height == runs and d["Name"].n_unique() == runs
    iso = d.filter(pl.col("Name").str.starts_with("isoflop-"))
    assert iso.height >= runs - 8
    for name, width, depth, flops in iso.select(
            "Name", "model.hidden_dim", "model.num_layers", "throughput/total_gflops").iter_rows():
        m = re.match(r"isoflop-([0-9.e+]+)-d(\d+)-L(\d+)-", name)
        assert m and (int(m[2]), int(m[3])) == (width, depth), name
        # Marin's budget label is a third of its FLOP count (forward and backward passes)
        assert flops * 1e9 == pytest.approx(3 * float(m[1]), rel=0.002), name
    n, t = (d[c].cast(pl.Float64).to_numpy() for c in ("parameter_count",
                                                        "throughput/total_tokens"))
    ratio = d["throughput/total_gflops"].to_numpy() * 1e9 / (6 * n * t)
    assert 0.7 < ratio.min() and ratio.max() < 1.1
    loss = d["eval/paloma/macro_loss"].to_numpy()
    assert 2.7 < loss.min() and loss.max() < 4.2


def test_the_bench_reads_each_pool_as_the_law_s_columns_and_holds_out_whole_runs():
    from bench_design_real import POOLS, load_pool

    for name in POOLS:
        df = load_pool(name)
        assert {"params", "tokens", "loss"} <= set(df.columns)
        pool, target = split_most_expensive(df, 0.1)
        assert pool.height + target.height == df.height
        assert target.height == round(0.1 * df.height)
        if "run_id" in df.columns:
            assert not set(pool["run_id"]) & set(target["run_id"])
        assert (6 * target["params"] * target["tokens"]).min() >= \
            (6 * pool["params"] * pool["tokens"]).max()


# ------------------------------------------------------------------ nearest first
def _step(pool: dict, target: Target, data: dict | None = None, cost=None) -> Step:
    n = len(pool["params"])
    c = np.asarray(cost if cost is not None else 6 * pool["params"] * pool["tokens"], float)
    return Step(get_law("chinchilla"), None, pool, c, np.ones(n, bool), target,
                np.random.default_rng(0), data)


def test_nearest_takes_the_candidates_closest_to_the_target_first():
    # sizes 1e8..1e9 at 20 tokens per parameter, one target at 2e9: distances grow as the
    # size falls, so the order is by size, largest first, while the budget lasts
    N = np.array([1e8, 4e8, 2e8, 1e9, 6e8])
    pool = {"params": N, "tokens": 20 * N}
    t = Target("table", rows={"params": np.array([2e9]), "tokens": np.array([4e10])})
    step = _step(pool, t, cost=np.ones(5))
    assert nearest(step, 3, 10.0) == [3, 4, 1]
    assert nearest(step, 5, 2.0) == [3, 4]  # the budget, not k, stops it
    # the distance is in standardized log features: the hand computation
    X = np.log(np.stack([N, 20 * N], 1))
    sd = X.std(0)
    want = np.linalg.norm((X - np.log([2e9, 4e10])) / sd, axis=1)
    np.testing.assert_allclose(distance_to_target(step), want)


# ------------------------------------------------------------------ the discrepancy term
def _gp_var_after(X: np.ndarray, data: list[int], extra: int | None, targets: list[int],
                  noise2: float) -> float:
    """The targets' summed posterior variance of a squared-exponential residual, by a dense
    solve over the observed rows (the textbook formula, nothing shared with Discrepancy)."""
    obs = data + ([extra] if extra is not None else [])
    total = 0.0
    for t in targets:
        k_tt = DISCREPANCY_SD ** 2
        if not obs:
            total += k_tt
            continue
        d2 = lambda a, b: float(np.sum((X[a] - X[b]) ** 2))  # noqa: E731
        K = np.array([[DISCREPANCY_SD ** 2 * math.exp(-0.5 * d2(a, b)) for b in obs]
                      for a in obs]) + noise2 * np.eye(len(obs))
        k = np.array([DISCREPANCY_SD ** 2 * math.exp(-0.5 * d2(t, b)) for b in obs])
        total += k_tt - k @ np.linalg.solve(K, k)
    return total


def test_the_discrepancy_gain_is_the_dense_gaussian_process_shrink():
    rng = np.random.default_rng(1)
    N = np.exp(rng.uniform(np.log(1e7), np.log(1e9), 7))
    D = N * np.exp(rng.uniform(np.log(5), np.log(100), 7))
    pool = {"params": N, "tokens": D}
    tgt = {"params": np.array([3e9, 5e9]), "tokens": np.array([6e10, 2e11])}
    data = {"params": N[:2] * 0.7, "tokens": D[:2] * 0.8, "loss": np.ones(2)}
    step = _step(pool, Target("table", rows=tgt), data)
    noise2 = 1e-4
    disc = Discrepancy(step, noise2)
    # the same rows, scaled as Discrepancy scales them, in one array: pool, targets, data
    raw = np.log(np.stack([np.concatenate([N, tgt["params"], data["params"]]),
                           np.concatenate([D, tgt["tokens"], data["tokens"]])], 1))
    X = raw / np.log(np.stack([N, D], 1)).std(0) / DISCREPANCY_SCALE
    targets, rows = [7, 8], [9, 10]
    now = _gp_var_after(X, rows, None, targets, noise2)
    assert disc.var == pytest.approx(now, rel=1e-9)
    want = [now - _gp_var_after(X, rows, j, targets, noise2) for j in range(7)]
    np.testing.assert_allclose(disc.gain(), want, rtol=1e-7, atol=1e-14)
    # conditioning on a pick is the dense posterior with that run observed
    j = int(np.argmax(want))
    disc.condition(j)
    assert disc.var == pytest.approx(_gp_var_after(X, rows, j, targets, noise2), rel=1e-7)
    # a candidate far from the targets teaches them less than one next to them
    assert disc.gain()[np.argmin(N)] < max(want)


# ------------------------------------------------------------------ the extrapolation check
def _biased_grid(bias: float) -> pl.DataFrame:
    """Chinchilla's form on a grid, plus a miss that grows with compute (a law that holds
    only approximately), ``bias`` per decade of C above the grid's median."""
    df = dense_grid(seed=4, n_sizes=10, step=1.8, row_sd=0.003)
    c = np.log10(6 * df["params"].to_numpy() * df["tokens"].to_numpy())
    return df.with_columns(pl.Series("loss", df["loss"].to_numpy()
                                     * np.exp(bias * np.clip(c - np.median(c), 0, None))))


def test_the_costliest_runs_widen_the_intervals_where_the_law_misses_them():
    f = calibrated_fit(_biased_grid(0.03), "chinchilla", 20, 0)
    held = f.diagnostics["heldout"]
    clean = cost_check(_biased_grid(0.0), "chinchilla", 20, 0)
    assert held["ok"] and held["split"] == "cost" and clean["ok"]
    assert held["coverage"] < 0.95 and held["widen"] > 1.5
    assert clean["widen"] < held["widen"]
    # the fit's band is its own, widened by that factor on each side (log space)
    x = {"params": np.array([1e9, 3e9]), "tokens": np.array([1e11, 2e11])}
    p, lo, hi = f.band(x)
    f.diagnostics["heldout"] = {**held, "widen": 1.0}
    p0, lo0, hi0 = f.band(x)
    np.testing.assert_allclose(np.log(hi / p), held["widen"] * np.log(hi0 / p0), rtol=1e-9)
    np.testing.assert_allclose(np.log(p / lo), held["widen"] * np.log(p0 / lo0), rtol=1e-9)


def test_the_near_target_share_follows_how_far_the_law_missed():
    assert near_share(1.0) == 0.0 and near_share(None) == 0.0
    assert near_share(2.0) == pytest.approx(0.75)
    assert near_share(float("inf")) == 0.0 and near_share(1e6) == pytest.approx(1.0)
    assert near_share(1.5) < near_share(3.0)


def test_a_target_table_has_a_fixed_share_and_the_other_targets_none():
    table = Target("table", rows={"params": np.array([1e9]), "tokens": np.array([2e10])})
    assert table_share(table) == TABLE_SHARE == 0.8 and TRUST_REGION == 0.5
    assert table_share(Target("params", value=1e10)) is None
    assert table_share(Target("compute", value=1e22)) is None


def _table_step(near_share: float = 0.0, misfit: float = 0.02) -> Step:
    """A design step toward a target table: a chinchilla fit of a small dense grid, the pool a
    larger grid less its costliest tenth (the target). ``misfit``: the grid's losses times
    exp(misfit x standardized log size x standardized log tokens), a data exponent that moves
    with size, which the law cannot follow (so the lack-of-fit gate leaves the round to the
    trust region); 0: the law right."""
    from archfit.designing import columns
    from archfit.laws.fitting import fit

    done = dense_grid(seed=2, n_sizes=6, step=1.8, row_sd=0.005)
    zn, zt = (np.log(done[c].to_numpy()) for c in ("params", "tokens"))
    done = done.with_columns(pl.col("loss") * np.exp(
        misfit * (zn - zn.mean()) / zn.std() * (zt - zt.mean()) / zt.std()))
    pool, target = split_most_expensive(dense_grid(seed=3, n_sizes=10, step=1.8, row_sd=0.005),
                                        0.1)
    cols = columns(pool)
    return Step(get_law("chinchilla"), fit(done, "chinchilla", bootstrap=40, heldout=False,
                                           seed=1),
                cols, 6 * cols["params"] * cols["tokens"], np.ones(pool.height, bool),
                Target("table", rows=columns(target)), np.random.default_rng(0), columns(done),
                near_share=near_share)


def test_for_a_target_table_the_criterion_picks_inside_the_trust_region():
    """With no near-target share, every pick of archfit's criterion for a target table lies
    among the nearer half of the open candidates by distance to the target, while the same
    criterion over the whole pool goes further out (so the restriction is what holds)."""
    step = _table_step()
    dist = distance_to_target(step)
    inside = dist <= np.quantile(dist, 0.5)  # the nearer half
    budget = float(step.cost.sum())  # the batch size binds, not the budget
    picks = archfit_criterion(step, 6, budget)
    assert len(picks) == 6 and inside[picks].all(), dist[picks]
    assert step.open.all()  # the candidates it was given are given back
    anywhere = _criterion(step, 6, budget, None, 0.0, discrepancy=True)
    assert not inside[anywhere].all(), dist[anywhere]


def test_a_budget_nothing_in_the_trust_region_can_use_goes_nearest_the_target():
    """Late in a budget only cheap runs are affordable, and none of them inside the trust
    region: archfit then spends what is left on the affordable candidates nearest the target
    (checked against a plain loop over the candidates in order of distance), not on the
    criterion over the whole pool, which picks other, farther runs here."""
    step = _table_step(TABLE_SHARE)
    dist = distance_to_target(step)
    inside = dist <= np.quantile(dist, TRUST_REGION)
    left = 0.999 * float(step.cost[inside].min())  # no run inside is affordable
    assert (step.cost[~inside] <= left).sum() >= 8  # but several outside are
    expected, rest = [], left
    for j in np.argsort(dist, kind="stable"):
        if len(expected) < 4 and step.cost[j] <= rest:
            expected.append(int(j))
            rest -= float(step.cost[j])
    picks = archfit_criterion(step, 4, left)
    assert picks == expected, (picks, expected)
    assert step.open.all()
    anywhere = _criterion(step, 4, left, None, 0.0, discrepancy=True)
    assert anywhere and sorted(anywhere) != sorted(expected)
    assert dist[anywhere].mean() > dist[expected].mean()


def test_lack_of_fit_is_the_f_test_statsmodels_gives():
    """lack_of_fit's p-value against statsmodels' overall F test of the residuals regressed on
    the raw log size and tokens, their squares and product (the test is the same in any
    affine rescaling of the features), for a law that holds and one that misses."""
    import statsmodels.formula.api as smf

    from archfit.designing.strategies import LACK_OF_FIT_RUNS, lack_of_fit

    for misfit in (0.0, 0.02):
        step = _table_step(misfit=misfit)
        d = step.data
        assert d is not None and len(d["loss"]) >= LACK_OF_FIT_RUNS
        r = np.log(d["loss"]) - np.log(step.fit.law_obj.predict(step.fit.params, d))
        frame = pl.DataFrame({"r": r - r.mean(), "n": np.log(d["params"]),
                              "t": np.log(d["tokens"])}).to_pandas()
        ols = smf.ols("r ~ n + t + I(n**2) + I(t**2) + n:t", frame).fit()
        p = lack_of_fit(step.fit, d)
        assert p is not None and math.isclose(p, ols.f_pvalue, rel_tol=1e-6, abs_tol=1e-300)
        # the law holds: no evidence against it; the law misses: overwhelming evidence
        assert (p > 0.5) if misfit == 0 else (p < 1e-6), (misfit, p)
    few = {k: v[: LACK_OF_FIT_RUNS - 1] for k, v in d.items()}
    assert lack_of_fit(step.fit, few) is None  # too few runs to test the law
    one = {k: np.full(len(v), v[0]) if k != "loss" else v for k, v in d.items()}
    assert lack_of_fit(step.fit, one) is None  # every run at one size and token count


def test_a_round_whose_law_shows_no_lack_of_fit_is_picked_as_variance_picks():
    """A target table and a fit with no lack of fit: archfit's batch is variance's, paced to
    half the budget, with a note; the same grid with a misfit keeps the trust region and its
    near-target share."""
    from archfit.designing.strategies import variance_criterion

    budget = 0.02 * float(_table_step().cost.sum())
    unpaced = variance_criterion(_table_step(TABLE_SHARE, misfit=0.0), 30, budget)
    right = _table_step(TABLE_SHARE, misfit=0.0)
    assert float(right.cost[unpaced].sum()) > budget / 2  # so the pace binds
    picks = archfit_criterion(right, 30, budget)
    assert picks == variance_criterion(_table_step(TABLE_SHARE, misfit=0.0), 30, budget / 2)
    assert 0 < float(right.cost[picks].sum()) <= budget / 2
    assert any("no lack of fit" in n and "variance criterion" in n for n in right.notes)
    wrong = _table_step(TABLE_SHARE)
    dist = distance_to_target(wrong)
    kept = archfit_criterion(wrong, 30, budget)
    assert not any("no lack of fit" in n for n in wrong.notes)
    assert (dist[kept] <= np.quantile(dist, TRUST_REGION)).all()
    assert dist[kept].mean() < dist[picks].mean()


def test_design_for_a_target_table_spends_its_share_nearest_and_says_so():
    """archfit.design toward a target table: the batch's near-target share is the table's
    and the note says why; toward a compute target the extrapolation check sets it."""
    from archfit.designing import columns as columns_of, design

    grid = dense_grid(seed=3, n_sizes=10, step=1.8, row_sd=0.005)
    pool, target = split_most_expensive(grid, 0.1)
    done = pool.filter(pl.col("params") < 4e8)
    d = design(pool, law="chinchilla", target=Target("table", rows=columns_of(target)),
               results=done, budget_frac=0.05, batch=4, bootstrap=20)
    assert d.near_share == TABLE_SHARE, d.near_share
    assert any("a target table: 80% of the batch's budget" in n for n in d.notes), d.notes
    # a fit given without its runs: the same share
    from archfit.laws.fitting import fit

    f = fit(done, "chinchilla", bootstrap=20, heldout=False, seed=0)
    d1 = design(pool, law="chinchilla", target=Target("table", rows=columns_of(target)),
                fit=f, budget_frac=0.05, batch=4)
    assert d1.near_share == TABLE_SHARE and d1.chosen
    d2 = design(pool, law="chinchilla", target=Target("compute", 1e22), results=done,
                budget_frac=0.05, batch=4, bootstrap=20)
    assert d2.near_share < TABLE_SHARE


# ------------------------------------------------------------------ the replay says what it did
def test_a_replay_reports_each_round_that_fell_back_and_why():
    # two sizes only: chinchilla needs three, so no refit can be made, and every adaptive
    # round falls back to a space-filling pick, which the replay must say
    rows = [{"params": n, "tokens": n * t, "loss": 2.0 + 300 / n ** 0.3 + 400 / (n * t) ** 0.3}
            for n in (1e8, 2e8) for t in np.geomspace(2, 200, 12)]
    df = pl.DataFrame(rows)
    pool, target = split_most_expensive(df, 0.1)
    r = replay(pool, target, law="chinchilla", budget_frac=0.5, strategy="archfit",
               bootstrap=10, final_bootstrap=10)
    assert r["rounds"] >= 1 and len(r["fallbacks"]) == r["rounds"]
    assert all("different sizes" in fb["why"] for fb in r["fallbacks"])
    r = replay(pool, target, law="chinchilla", budget_frac=0.5, strategy="random",
               bootstrap=10, final_bootstrap=10)
    assert r["fallbacks"] == []  # random reads no fit: nothing to fall back from


def test_recommend_says_why_it_has_no_next_line(tmp_path):
    """A weak answer whose design cannot run says why, instead of dropping the 'next:' line."""
    from archfit.laws.fitting import fit
    from archfit.laws.planted import correlated_sweep
    from archfit.recommending import next_runs

    f = fit(correlated_sweep("depth-joint", seed=3, n_shapes=24, n_tokens=6), "depth-joint",
            bootstrap=12, heldout=False)
    inside = float(f.diagnostics["span"]["params_max"]) / 2
    out = next_runs(f, inside, "weak")
    assert out["next_runs"].startswith("no runs planned: the target is inside the data")
    f.bootstrap = {}
    assert "no parameter draws" in next_runs(f, 1e12, "weak")["next_runs"]


# ------------------------------------------------------------------ the parameters' gains, densely
def _ensemble(law: str, df: pl.DataFrame, pool: pl.DataFrame, target: pl.DataFrame):
    from archfit.designing import columns
    from archfit.designing.ensemble import Ensemble
    from archfit.designing.strategies import draws
    from archfit.laws.fitting import fit

    f = fit(df, law, bootstrap=40, heldout=False, seed=1)
    cols = columns(pool)
    step = Step(get_law(law), f, cols, 6 * cols["params"] * cols["tokens"],
                np.ones(pool.height, bool), Target("table", rows=columns(target)),
                np.random.default_rng(0), columns(df))
    ens = Ensemble(step, draws(f))
    ens.disc = None  # the parameters' part alone (the discrepancy is checked above)
    return ens


def test_each_row_its_own_run_gains_what_a_dense_inverse_says():
    done = dense_grid(seed=2, n_sizes=8, step=1.8, row_sd=0.005)
    pool, target = split_most_expensive(dense_grid(seed=3, n_sizes=12, step=1.8,
                                                   row_sd=0.005), 0.1)
    ens = _ensemble("chinchilla", done, pool, target)
    assert ens.A is None and ens.unit is None  # the Fisher-information case
    S, G, J, s2 = ens.S, ens.G, ens.J, ens.noise2
    now = np.trace(G @ S @ G.T)
    info = np.linalg.inv(S)
    want = [now - np.trace(G @ np.linalg.inv(info + np.outer(J[j], J[j]) / s2) @ G.T)
            for j in range(len(J))]
    got = ens.gain()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-12 * abs(now))
    # the ranking, not just the sum: reversed gains would fail here
    assert np.argmax(got) == np.argmax(want) and np.argmin(got) == np.argmin(want)


def test_rows_that_share_a_run_gain_what_the_dense_sandwich_says():
    from archfit.laws.planted import correlated_sweep

    df = correlated_sweep("depth-joint", seed=3, n_shapes=16, n_tokens=4)
    pool, target = split_most_expensive(correlated_sweep("depth-joint", seed=4, n_shapes=24,
                                                         n_tokens=3), 0.1)
    ens = _ensemble("depth-joint", df, pool, target)
    if ens.A is None:
        pytest.skip("the fit's scatter put every row in its own run")
    G, J, A, sums = ens.G, ens.J, ens.A, ens.sums

    def var(A_, sums_):
        Ai = np.linalg.pinv(A_)
        B = ens.noise2 * A_ + ens.between2 * sums_.T @ sums_
        return float(np.trace(G @ Ai @ B @ Ai @ G.T))

    now = var(A, sums)
    want = []
    for j in range(len(J)):
        s2 = sums.copy()
        s2[ens.unit[j]] += J[j]
        want.append(max(now - var(A + np.outer(J[j], J[j]), s2), 0.0))
    got = ens.gain()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-9 * now)
    assert np.argmax(got) == np.argmax(want)


def test_target_rows_inside_the_replayed_table_are_dropped_and_said():
    df = dense_grid(seed=5, n_sizes=8, step=1.8, row_sd=0.005)
    pool, target = split_most_expensive(df, 0.1)
    r = replay(df, target, law="chinchilla", budget_frac=0.3, strategy="cheapest",
               bootstrap=10, final_bootstrap=10)
    assert r["notes"] == [f"{target.height} row(s) of the replay table are also target rows: "
                          "dropped from the pool, so the target is scored out of sample"]
    chosen = {(c["params"], c["tokens"]) for c in r["chosen"]}
    assert not chosen & {(p, t) for p, t in target.select("params", "tokens").iter_rows()}
    # the same replay on the pool alone: the same runs, and nothing to say
    r2 = replay(pool, target, law="chinchilla", budget_frac=0.3, strategy="cheapest",
                bootstrap=10, final_bootstrap=10)
    assert r2["notes"] == [] and r2["n_chosen"] == r["n_chosen"]


def test_a_replay_spends_the_tables_share_near_the_target_even_where_the_law_misses():
    df = _biased_grid(0.1)
    pool, target = split_most_expensive(df, 0.1)
    r = replay(pool, target, law="chinchilla", budget_frac=0.2, strategy="archfit",
               bootstrap=12, final_bootstrap=10)
    assert len(r["near_shares"]) >= 2 and set(r["near_shares"]) == {TABLE_SHARE}, r


def test_a_miss_of_the_costliest_runs_sends_a_compute_targets_batch_near_it():
    """Toward a compute target the share is 1 - 1/widen² of the extrapolation check: about
    none where the law holds, most of the batch where it misses its costliest runs."""
    from archfit.designing import design

    def share(bias: float) -> tuple[float, list[str]]:
        df = _biased_grid(bias)
        d = design(df.filter(pl.col("params") >= 3e9), law="chinchilla",
                   target=Target("compute", 1e22), results=df.filter(pl.col("params") < 3e9),
                   budget_frac=0.05, batch=4, bootstrap=20)
        return d.near_share, d.notes

    held, notes = share(0.1)
    clean, _ = share(0.0)
    assert held > 0.5 and clean < held, (held, clean)
    assert any("missed its own costliest runs" in n for n in notes), notes


def test_a_replay_can_spend_the_whole_pool():
    df = dense_grid(seed=6, n_sizes=6, step=1.8, row_sd=0.005)
    pool, target = split_most_expensive(df, 0.1)
    r = replay(pool, target, law="chinchilla", budget_frac=1.0, strategy="cheapest",
               bootstrap=10, final_bootstrap=10)
    assert r["n_chosen"] == pool.height and r["budget_frac_spent"] == pytest.approx(1.0)


def test_the_discrepancy_of_a_pool_at_one_token_count_is_finite():
    N = np.array([1e8, 2e8, 4e8, 8e8])
    pool = {"params": N, "tokens": np.full(4, 1e10)}
    tgt = {"params": np.array([2e9]), "tokens": np.array([1e10])}
    disc = Discrepancy(_step(pool, Target("table", rows=tgt)), 1e-4)
    g = disc.gain()
    assert np.all(np.isfinite(g)) and np.argmax(g) == 3  # the size nearest the target


def test_replay_uses_the_bootstrap_it_is_given_and_says_when_it_is_too_few(tmp_path):
    """--bootstrap reaches a replay's refits (it was ignored there), and 5 draws, fewer than
    the criterion needs, make every adaptive round fall back, each said with its reason."""
    import json

    from click.testing import CliRunner

    from archfit.cli import main

    pool, target = split_most_expensive(dense_grid(seed=7, n_sizes=5, step=1.8,
                                                   row_sd=0.005), 0.1)
    pool.write_csv(tmp_path / "done.csv")
    target.write_csv(tmp_path / "target.csv")
    r = CliRunner().invoke(main, ["design", "--replay", str(tmp_path / "done.csv"), "--target",
                                  str(tmp_path / "target.csv"), "--law", "chinchilla",
                                  "--budget-frac", "0.2", "--bootstrap", "5", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["rounds"] >= 1 and len(out["fallbacks"]) == out["rounds"]
    assert all("kept 5 bootstrap draws, fewer than 10" in f["why"] for f in out["fallbacks"])


def test_paced_strategies_spend_at_most_half_of_what_is_left_while_half_still_buys_a_run():
    from archfit.designing.replays import round_budget

    cost = np.array([1.0, 4.0, 10.0])
    everything = np.ones(3, bool)
    for s in ("variance", "d-optimal", "v-optimal"):
        # a run costs exactly half of what is left: half is the round's budget
        assert round_budget(s, everything, cost, 2.0) == 1.0
        assert round_budget(s, everything, cost, 20.0) == 10.0
        # nothing open costs half or less: the whole of what is left
        assert round_budget(s, np.array([False, True, True]), cost, 6.0) == 6.0
    for s in ("archfit", "nearest", "random", "cheapest"):  # not paced
        assert round_budget(s, everything, cost, 20.0) == 20.0


def test_runs_are_grouped_up_to_max_runs_and_each_row_is_its_own_run_past_it():
    from types import SimpleNamespace

    from archfit.designing.ensemble import MAX_RUNS, run_units

    def step(n_shapes: int):  # type: ignore[no-untyped-def]
        # n_shapes shapes, each at two token counts: two rows of one training run
        N = np.repeat(1e6 * (1 + np.arange(n_shapes)), 2)
        pool = {"params": N, "n_layer": np.full(len(N), 4.0), "tokens": N * np.tile([10, 20], n_shapes)}
        return SimpleNamespace(pool=pool, data=None, cost=6 * pool["params"] * pool["tokens"])

    at = run_units(step(MAX_RUNS))  # type: ignore[arg-type]
    assert at is not None and at[2] == MAX_RUNS
    assert list(at[0][:4]) == [0, 0, 1, 1]  # a shape's two rows share its run
    assert run_units(step(MAX_RUNS + 1)) is None  # type: ignore[arg-type]


def test_the_gate_is_tested_in_the_depth_joint_laws_first_adaptive_round():
    """The depth-joint law starts a replay with 16 runs (2 per parameter), so a right law is
    trusted from the first adaptive round: that round is the variance criterion's, paced to
    half of what the start left, not 80% of the budget near the target. The pool is a planted
    depth-joint sweep (the law holds); the budget of the first round is checked against the
    runs' own costs (6 N D)."""
    from archfit.designing import replay
    from archfit.laws.planted import correlated_sweep

    frame = correlated_sweep("depth-joint", seed=3, n_shapes=24, n_tokens=4)
    pool, target = split_most_expensive(frame, 0.1)
    pool = pool.filter(~pl.col("run_id").is_in(target["run_id"].unique().to_list()))  # whole runs
    r = replay(pool, target, law="depth-joint", budget_frac=0.1, bootstrap=16,
               final_bootstrap=10, seed=0)
    assert any("no lack of fit in the 16 runs so far" in n for n in r["notes"]), r["notes"]
    cost = [6 * c["params"] * c["tokens"] for c in r["chosen"]]
    budget = 0.1 * float((6 * pool["params"] * pool["tokens"]).sum())
    start = sum(c for c, row in zip(cost, r["chosen"]) if row["round"] == 0)
    first = sum(c for c, row in zip(cost, r["chosen"]) if row["round"] == 1)
    assert sum(row["round"] == 0 for row in r["chosen"]) == 16
    assert 0 < first <= (budget - start) / 2 * (1 + 1e-9), (first, budget - start)
