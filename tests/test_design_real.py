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
from archfit.laws.inference.backtest import cost_check
from archfit.designing.pool import Target
from archfit.designing.strategies import (LACK_OF_FIT_LEVEL, Step, near_target,
                                          check_fit, nearest, target_distances)
from archfit.laws.inference.regression import lack_of_fit
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
    """Every sweep the design benchmark replays: at least six judged (the issue's bar), each
    read as the law's columns, its costliest tenth held out by whole runs."""
    from bench_design_real import EXTRA, JUDGED
    from public_sweeps import load

    assert len(JUDGED) >= 6 and not set(JUDGED) & set(EXTRA)
    for name in JUDGED + EXTRA:
        df = load(name)
        assert {"params", "tokens", "loss"} <= set(df.columns)
        pool, target = split_most_expensive(df, 0.1)
        assert pool.height + target.height == df.height
        assert target.height == round(0.1 * df.height)
        # a Gemstones row is a cooldown to zero (or a checkpoint) of the pretraining run its
        # run_id names: a run of its own token count, not of its run_id
        if "run_id" in df.columns and not name.startswith("gemstones"):
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
    np.testing.assert_allclose(target_distances(step).min(1), want)


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
    n = _biased_grid(0.0).height
    assert (held["n_test"], held["n_train"]) == (round(0.2 * n), n - round(0.2 * n))
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


def _table_step(misfit: float = 0.02) -> Step:
    """A design step toward a target table: a chinchilla fit of a small dense grid, the pool a
    larger grid less its costliest tenth (the target). ``misfit``: the grid's losses times
    exp(misfit x standardized log size x standardized log tokens), a data exponent that moves
    with size, which the law cannot follow; 0: the law right."""
    from archfit.designing import columns
    from archfit.laws.inference.fitting import fit

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
                Target("table", rows=columns(target)), np.random.default_rng(0), columns(done))


def test_lack_of_fit_is_the_f_test_statsmodels_gives():
    """The fit's lack-of-fit test (fit.diagnostics) against statsmodels' overall F test of the
    residuals regressed on the raw log size and tokens, their squares and product (the test
    is the same in any affine rescaling of the features), for a law that holds and one that
    misses."""
    import statsmodels.formula.api as smf

    for misfit in (0.0, 0.02):
        step = _table_step(misfit=misfit)
        d = step.data
        assert d is not None and len(d["loss"]) >= 12
        r = np.log(d["loss"]) - np.log(step.fit.law_obj.predict(step.fit.params, d))
        frame = pl.DataFrame({"r": r - r.mean(), "n": np.log(d["params"]),
                              "t": np.log(d["tokens"])}).to_pandas()
        ols = smf.ols("r ~ n + t + I(n**2) + I(t**2) + n:t", frame).fit()
        test = step.fit.diagnostics["lack_of_fit"]
        p = test["p"]
        assert test["runs"] == len(r)
        assert p is not None and math.isclose(p, ols.f_pvalue, rel_tol=1e-6, abs_tol=1e-300)
        # the law holds: no evidence against it; the law misses: overwhelming evidence
        assert (p > 0.5) if misfit == 0 else (p < 1e-6), (misfit, p)
        assert math.isclose(lack_of_fit(r, d), p, rel_tol=1e-9)
    # size, tokens, their squares and product and the intercept: 6 columns, so 9 runs leave
    # 3 residual degrees of freedom and 8 too few
    for n, testable in ((9, True), (8, False)):
        rows = np.linspace(0, len(d["loss"]) - 1, n).astype(int)  # both size and tokens vary
        sub = {k: v[rows] for k, v in d.items()}
        assert np.ptp(sub["params"]) > 0 and np.ptp(sub["tokens"]) > 0
        assert (lack_of_fit(r[rows], sub) is not None) is testable, n
    one = {k: np.full(len(v), v[0]) if k != "loss" else v for k, v in d.items()}
    assert lack_of_fit(r, one) is None  # every run at one size and token count


# ------------------------------------------------------------------ the replay says what it did
def test_a_replay_reports_each_round_that_fell_back_and_why():
    # two sizes only: chinchilla needs three, so no refit can be made, and every round of
    # variance falls back to a spread pick, which the replay must say; the default rule's
    # picks need no fit, so it falls back from nothing, and its test says there is none
    rows = [{"params": n, "tokens": n * t, "loss": 2.0 + 300 / n ** 0.3 + 400 / (n * t) ** 0.3}
            for n in (1e8, 2e8) for t in np.geomspace(2, 200, 12)]
    df = pl.DataFrame(rows)
    pool, target = split_most_expensive(df, 0.1)
    r = replay(pool, target, law="chinchilla", budget_frac=0.5, strategy="variance",
               bootstrap=10, final_bootstrap=10)
    assert r["rounds"] >= 1 and len(r["fallbacks"]) == r["rounds"]
    assert all("different sizes" in fb["why"] for fb in r["fallbacks"])
    r = replay(pool, target, law="chinchilla", budget_frac=0.5, strategy="archfit",
               bootstrap=10, final_bootstrap=10)
    assert r["rounds"] >= 1 and r["fallbacks"] == []
    assert [t["why"] for t in r["tests"]] == ["no test: no fit of the runs so far"] * r["rounds"]
    r = replay(pool, target, law="chinchilla", budget_frac=0.5, strategy="random",
               bootstrap=10, final_bootstrap=10)
    assert r["fallbacks"] == []  # random reads no fit: nothing to fall back from


def test_recommend_says_why_it_has_no_next_line(tmp_path):
    """A weak answer whose design cannot run says why, instead of dropping the 'next:' line."""
    from archfit.laws.inference.fitting import fit
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
    from archfit.laws.inference.fitting import fit

    f = fit(df, law, bootstrap=40, heldout=False, seed=1)
    cols = columns(pool)
    step = Step(get_law(law), f, cols, 6 * cols["params"] * cols["tokens"],
                np.ones(pool.height, bool), Target("table", rows=columns(target)),
                np.random.default_rng(0), columns(df))
    return Ensemble(step, draws(f))


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


def test_a_replay_can_spend_the_whole_pool():
    df = dense_grid(seed=6, n_sizes=6, step=1.8, row_sd=0.005)
    pool, target = split_most_expensive(df, 0.1)
    r = replay(pool, target, law="chinchilla", budget_frac=1.0, strategy="cheapest",
               bootstrap=10, final_bootstrap=10)
    assert r["n_chosen"] == pool.height and r["budget_frac_spent"] == pytest.approx(1.0)


@pytest.mark.slow
def test_replay_uses_the_bootstrap_it_is_given_and_says_when_it_is_too_few(tmp_path):
    """--bootstrap reaches a replay's refits (it was ignored there), and 5 draws, fewer than
    the variance criterion needs, make each of its rounds fall back, said with its reason."""
    import json

    from click.testing import CliRunner

    from archfit.cli import main

    pool, target = split_most_expensive(dense_grid(seed=7, n_sizes=5, step=1.8,
                                                   row_sd=0.005), 0.1)
    pool.write_csv(tmp_path / "done.csv")
    target.write_csv(tmp_path / "target.csv")
    r = CliRunner().invoke(main, ["design", "--replay", str(tmp_path / "done.csv"), "--target",
                                  str(tmp_path / "target.csv"), "--law", "chinchilla",
                                  "--strategy", "variance", "--budget-frac", "0.2",
                                  "--bootstrap", "5", "--json"])
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

    at = run_units(step(2000))  # type: ignore[arg-type]
    assert at is not None and at[2] == 2000 == MAX_RUNS
    assert list(at[0][:4]) == [0, 0, 1, 1]  # a shape's two rows share its run
    assert run_units(step(2001)) is None  # type: ignore[arg-type]


# ------------------------------------------------------------------ the default rule
def test_the_default_rule_takes_the_nearest_candidates_and_skips_near_duplicates():
    """Past its first batch, the rule's picks are the affordable candidates in order of
    distance to the target (a plain loop over them), a candidate within 2% of a pick in size
    and tokens counted as that pick."""
    step = _table_step(misfit=0.0)
    dist = target_distances(step).min(1)
    j0 = int(np.argmin(dist))
    # a near-duplicate of the nearest candidate, 1% larger (skipped once either is picked),
    # and a distinct run 3% larger (not a duplicate: it may be picked beside them)
    pool = {k: np.append(v, [v[j0] * (1.03 if k in ("params", "tokens") else 1),
                             v[j0] * (1.01 if k in ("params", "tokens") else 1)])
            for k, v in step.pool.items()}
    cost = np.append(step.cost, [step.cost[j0], step.cost[j0]])
    dup = Step(step.law, step.fit, pool, cost, np.ones(len(cost), bool), step.target,
               np.random.default_rng(0), step.data)
    d = target_distances(dup).min(1)
    left = 0.3 * float(cost.sum())
    expected, rest = [], left
    for j in np.argsort(d, kind="stable"):
        if len(expected) < 6 and cost[j] <= rest and not any(
                abs(math.log(pool["params"][j] / pool["params"][e])) <= math.log(1.02)
                and abs(math.log(pool["tokens"][j] / pool["tokens"][e])) <= math.log(1.02)
                for e in expected):
            expected.append(int(j))
            rest -= float(cost[j])
    picks = near_target(dup, 6, left)
    assert picks == expected
    assert (j0 in picks) != (len(cost) - 1 in picks)  # the candidate or its double, not both
    assert len(cost) - 2 in picks  # 3% apart: its own run
    assert dup.test is not None and dup.test["fits"] is True  # the law holds on this grid


def test_the_first_batch_is_spread_over_the_cheaper_half():
    """Without runs, the rule's first batch: the cheapest candidate, then each pick the
    farthest (in standardized log size and tokens) from those so far, among the cheaper half
    of the pool by cost."""
    from archfit.designing.strategies import spread

    step = _table_step(misfit=0.0)
    step.fit, step.data = None, None
    picks = spread(step, 6, float(step.cost.sum()))
    cheap = step.cost <= np.median(step.cost)
    assert picks[0] == int(np.argmin(step.cost)) and cheap[picks].all()
    X = np.log(np.stack([step.pool["params"], step.pool["tokens"]], 1))
    X = (X - X.mean(0)) / X.std(0)
    chosen = [picks[0]]
    for _ in range(5):  # greedy maximin, by hand
        far = np.min(np.linalg.norm(X[:, None] - X[chosen][None], axis=2), axis=1)
        far[~cheap] = -1
        chosen.append(int(np.argmax(far)))
    assert picks == chosen


@pytest.mark.parametrize("misfit,fits", [(0.0045, False), (0.004, True)])
def test_the_test_decides_at_the_five_percent_level(misfit, fits):
    """The round's test against statsmodels' F test: a grid whose p-value lies between 1% and
    5% fails it, one between 5% and 20% passes (so the level is 5%, neither 1% nor 20%); where
    it fails, the design predicts no interval after the batch and says why."""
    import statsmodels.formula.api as smf

    step = _table_step(misfit=misfit)
    d = step.data
    r = np.log(d["loss"]) - np.log(step.fit.law_obj.predict(step.fit.params, d))
    frame = pl.DataFrame({"r": r - r.mean(), "n": np.log(d["params"]),
                          "t": np.log(d["tokens"])}).to_pandas()
    p = smf.ols("r ~ n + t + I(n**2) + I(t**2) + n:t", frame).fit().f_pvalue
    assert (0.01 < p < 0.05) if not fits else (0.05 < p < 0.2), p
    t = check_fit(step)
    assert t["fits"] is fits and t["p"] == pytest.approx(p, rel=1e-6)
    assert ("does not fit" in t["why"]) is (not fits)
    assert LACK_OF_FIT_LEVEL == 0.05


def test_a_law_that_fails_the_test_predicts_no_interval_after_the_batch():
    """Live design toward a compute target: where the law fits the runs, the batch comes with
    the interval it predicts after it; where the law misses them (a miss growing with
    compute), the same rule picks, no interval after is predicted, and the first line and
    the notes say why."""
    from archfit.designing import design

    def at(bias: float):  # type: ignore[no-untyped-def]
        df = _biased_grid(bias)
        return design(df.filter(pl.col("params") >= 3e9), law="chinchilla",
                      target=Target("compute", 1e22), results=df.filter(pl.col("params") < 3e9),
                      budget_frac=0.05, batch=4, bootstrap=20)

    right, wrong = at(0.0), at(0.1)
    assert right.test["fits"] is True and right.ci_after is not None
    assert right.ci_after[1] / right.ci_after[0] < right.ci_now[1] / right.ci_now[0]
    assert wrong.test["fits"] is False and wrong.ci_after is None and wrong.chosen
    assert wrong.first_line().startswith("the law does not fit the runs so far (F test p = ")
    assert any("does not fit" in n for n in wrong.notes)
    assert not right.first_line().startswith("the law does not fit")


# ------------------------------------------------------------------ the variance criterion
def _kaplan_step(sizes: list[float], pool_sizes: list[float], target: float, sd: float):
    """A kaplan-n step: L = (N_c / N)^alpha, linear in log space (log L = c0 + c1 log N), fitted
    to ``sizes`` with noise ``sd`` in log loss, toward one target size."""
    from archfit.designing.ensemble import Ensemble
    from archfit.designing.strategies import draws
    from archfit.laws.inference.fitting import fit

    rng = np.random.default_rng(0)
    N = np.repeat(np.asarray(sizes, float), 2)
    loss = (8.8e13 / N) ** 0.076 * np.exp(rng.normal(0, sd, len(N)))
    f = fit(pl.DataFrame({"params": N, "loss": loss}), "kaplan-n", bootstrap=200, heldout=False,
            seed=0)
    pool = {"params": np.asarray(pool_sizes, float)}
    step = Step(get_law("kaplan-n"), f, pool, np.ones(len(pool_sizes)),
                np.ones(len(pool_sizes), bool),
                Target("table", rows={"params": np.array([target])}),
                np.random.default_rng(0), {"params": N, "loss": loss})
    return step, Ensemble(step, draws(f))


def test_the_variance_shrink_of_a_linear_law_is_the_closed_form():
    """For a law linear in its parameters (kaplan-n in log space), a run at x shrinks the
    target's predictive variance by s2 [g'(X'X)^-1 g - g'(X'X + x x')^-1 g], with X the runs'
    rows (1, log N), g the target's and s2 the noise: the textbook expression, computed here
    without the ensemble."""
    sizes, pool = [1e6, 3e6, 1e7, 3e7], [2e6, 5e7, 1e8, 1e9]
    step, ens = _kaplan_step(sizes, pool, 1e10, 0.01)
    X = np.column_stack([np.ones(8), np.log(np.repeat(sizes, 2))])
    g = np.array([1.0, math.log(1e10)])
    s2 = ens.noise2
    XtX = X.T @ X
    now = s2 * g @ np.linalg.solve(XtX, g)
    want = [now - s2 * g @ np.linalg.solve(XtX + np.outer(x, x), g)
            for x in np.column_stack([np.ones(4), np.log(pool)])]
    assert ens.var0 == pytest.approx(now, rel=1e-4)
    np.testing.assert_allclose(ens.gain(), want, rtol=1e-4)
    assert int(np.argmax(ens.gain())) == 3  # the candidate nearest the target in log N


@pytest.mark.slow
def test_the_variance_shrink_matches_a_monte_carlo_refit():
    """The ensemble's predicted variance at the target, before and after a candidate, against
    the spread of the target's prediction over 2,000 refits of the law's own nonlinear form
    (scipy's least squares in its raw parameters N_c and alpha) to data redrawn with the fit's
    noise: within 10%."""
    from scipy.optimize import least_squares

    sizes, pool = [1e6, 3e6, 1e7, 3e7], [2e6, 1e9]
    step, ens = _kaplan_step(sizes, pool, 1e10, 0.01)
    p = step.fit.params
    s = math.sqrt(ens.noise2)
    rng = np.random.default_rng(1)

    def spread_of(N: np.ndarray) -> float:
        truth = p["alpha_N"] * (math.log(p["N_c"]) - np.log(N))
        preds = []
        for _ in range(2000):
            y = truth + rng.normal(0, s, len(N))
            r = least_squares(lambda th, y=y: th[1] * (th[0] - np.log(N)) - y,
                              [math.log(p["N_c"]), p["alpha_N"]])
            preds.append(r.x[1] * (r.x[0] - math.log(1e10)))
        return float(np.var(preds))

    N0 = np.repeat(np.asarray(sizes, float), 2)
    before = spread_of(N0)
    assert ens.var0 == pytest.approx(before, rel=0.1)
    g = ens.gain()
    for j, n in enumerate(pool):
        after = spread_of(np.append(N0, n))
        assert ens.var0 - g[j] == pytest.approx(after, rel=0.1), (n, ens.var0 - g[j], after)


def test_the_ensemble_thins_a_long_bootstrap_to_at_most_400_draws():
    from types import SimpleNamespace

    from archfit.designing.strategies import draws

    assert len(draws(SimpleNamespace(draws=lambda: [{}] * 1000))) == 334  # every third
    assert len(draws(SimpleNamespace(draws=lambda: [{}] * 400))) == 400
    assert draws(None) == []


def test_a_replay_starts_with_two_runs_per_parameter_spread_over_the_cheaper_half():
    """Round 0: max(the law's minimum, 2 per parameter) runs, all among the cheaper half of
    the pool by cost (chinchilla: 5 parameters, so 10)."""
    df = dense_grid(seed=6, n_sizes=8, step=1.8, row_sd=0.005)
    pool, target = split_most_expensive(df, 0.1)
    r = replay(pool, target, law="chinchilla", budget_frac=0.2, strategy="random",
               bootstrap=10, final_bootstrap=10)
    first = [c for c in r["chosen"] if c["round"] == 0]
    cost = 6 * pool["params"].to_numpy() * pool["tokens"].to_numpy()
    assert len(first) == 10
    assert all(6 * c["params"] * c["tokens"] <= np.median(cost) for c in first)
    # later rounds: 5 runs, or half the runs in hand when that is more
    sizes = [sum(c["round"] == k for c in r["chosen"]) for k in range(1, r["rounds"] + 1)]
    assert sizes[0] <= 5 and all(n >= 1 for n in sizes)
