"""archfit design: the next runs (the default rule and the variance criterion), the baselines,
the replay on a finished sweep, and its errors."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import polars as pl
import pytest

from archfit.designing import STRATEGIES, Target, design, split_most_expensive
from archfit.laws.inference.fitting import fit
from archfit.laws.planted import dense_grid


def _chinchilla_done(seed: int = 0) -> pl.DataFrame:
    """A finished sweep: 12 sizes x 8 token counts of Chinchilla's form (0.5% noise)."""
    return dense_grid(seed=seed, n_sizes=12, step=1.6, row_sd=0.005)


@pytest.fixture(scope="module")
def joint():
    from archfit.laws.planted import correlated_sweep

    df = correlated_sweep("depth-joint", seed=3, n_shapes=24, n_tokens=6)
    return df, fit(df, "depth-joint", bootstrap=100, heldout=False)  # no test here reads it


def _joint_pool(top: float) -> pl.DataFrame:
    rows = []
    for n in (2 * top, 4 * top):
        for L in (4, 8, 16, 32):
            rows.append({"params": n, "n_layer": L, "d_model": round(math.sqrt(n / (12 * L))),
                         "tokens": 1e10})
    return pl.DataFrame(rows)


# ------------------------------------------------------------------ the criterion
@pytest.mark.slow
def test_a_batch_holds_no_near_duplicates(joint):
    df, f = joint
    pool = _joint_pool(float(df["params"].max()))
    # every candidate three times, twice a hair larger: near-duplicates
    tripled = pl.concat([pool, pool.with_columns(pl.col("params") * 1.001),
                         pool.with_columns(pl.col("params") * 1.0001)])
    d = design(tripled, law="depth-joint", target=Target("params", 3e10), fit=f,
               budget_frac=0.5, batch=4)
    assert d.strategy == "near-target"
    # the default's earlier name still stands for it: the same batch
    old = design(tripled, law="depth-joint", target=Target("params", 3e10), fit=f,
                 budget_frac=0.5, batch=4, strategy="archfit")
    assert old.strategy == "near-target" and old.chosen == d.chosen
    keys = {(c["params"], c["n_layer"]) for c in d.chosen}
    assert len(d.chosen) == 4 and len(keys) == 4, d.chosen
    # each pick shrinks the target's sd further, and says by how much per unit cost
    sds = [c["sd_after"] for c in d.chosen]
    assert all(b <= a + 1e-12 for a, b in zip(sds, sds[1:])) and sds[-1] < 1
    assert all(c["gain_per_cost"] > 0 for c in d.chosen)
    assert d.ci_after[1] / d.ci_after[0] < d.ci_now[1] / d.ci_now[0]


def test_an_optimal_depth_batch_brackets_the_optimum_at_the_size_nearest_the_target(joint):
    """At one size, three picks go to the pool depths nearest the low end, the estimate and
    the high end of the optimal depth's 95% CI at the target (Fit.optimum's, clipped to the
    pool's depths): a minimum is placed by runs on both sides of it. The pool's sizes differ
    by under 2%, which must not rank the candidates."""
    df, f = joint
    N = 4 * float(df["params"].max())
    depths = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
    rows = [{"params": N * (1 + 0.001 * i), "n_layer": L, "d_model": round(math.sqrt(N / (12 * L))),
             "tokens": 1e10} for i, L in enumerate(depths)]
    o = f.optimum(2 * N)
    ends = [min(max(x, 1), 64) for x in (o["n_layer_ci"][0], o["n_layer"], o["n_layer_ci"][1])]
    want = {min(depths, key=lambda L: abs(math.log(L / x))) for x in ends}
    assert len(want) == 3, (ends, want)  # three distinct depths to find
    # the depth nearest the estimate twice more, at other token counts (the target's points
    # have no tokens: as near as it): the bracket, not the nearest three, decides
    mid = min(depths, key=lambda L: abs(math.log(L / ends[1])))
    rows = [{**next(r for r in rows if r["n_layer"] == mid), "tokens": D}
            for D in (2e10, 4e10)] + rows
    d = design(pl.DataFrame(rows), law="depth-joint", target=Target("params", 2 * N), fit=f,
               budget_frac=1.0, batch=3)
    assert {c["n_layer"] for c in d.chosen} == want, (ends, d.chosen)


def test_the_first_pick_has_the_most_shrink_per_square_root_of_cost(joint):
    """variance ranks a candidate by the target's expected shrink over cost^0.5 (cost-cooled
    acquisition), and reports that shrink per unit cost."""
    from archfit.designing import columns, costs
    from archfit.designing.strategies import COST_EXPONENT, Ensemble, Step, draws
    from archfit.laws import get_law

    df, f = joint
    pool = _joint_pool(float(df["params"].max()))
    target = Target("params", 3e10)
    d = design(pool, law="depth-joint", target=target, fit=f, budget_frac=1.0, batch=1,
               strategy="variance")
    cost, _ = costs(pool)
    step = Step(get_law("depth-joint"), f, columns(pool), cost, np.ones(pool.height, bool),
                target, np.random.default_rng(0))
    ens = Ensemble(step, draws(f))
    g = ens.gain()
    j = int(np.argmax(g / cost ** 0.5))
    assert COST_EXPONENT == 0.5
    assert (d.chosen[0]["params"], d.chosen[0]["n_layer"]) == (pool["params"][j],
                                                               pool["n_layer"][j])
    assert d.chosen[0]["gain_per_cost"] == pytest.approx(g[j] / ens.var0 / cost[j], rel=1e-9)


def test_rows_of_one_training_run_share_its_offset_in_the_design(joint):
    """A shape's rows at several token counts are one training run, as the fit counts them
    (run_groups): they share the run's offset, whose variance is the fit's between-run
    scatter, and only the within-run part is each row's own noise. The fit weighs rows alike,
    so the design scores the variance that fit will have, the sandwich A⁻¹ B A⁻¹, here checked
    against the rows' whole covariance matrix. Where every row is its own run (no shape
    columns, as a chinchilla grid), there are no runs to share."""
    from archfit.designing import columns, costs
    from archfit.designing.ensemble import WITHIN_FLOOR, Ensemble, gradients, run_units, scatter2
    from archfit.designing.strategies import Step, draws
    from archfit.laws import get_law

    df, f = joint
    one = _joint_pool(float(df["params"].max()))
    pool = pl.concat([one.with_columns(pl.lit(t).alias("tokens")) for t in (1e10, 2e10, 4e10)])
    cost, _ = costs(pool)
    step = Step(get_law("depth-joint"), f, columns(pool), cost, np.ones(pool.height, bool),
                Target("params", 3e10), np.random.default_rng(0), columns(df))
    u_pool, u_data, n = run_units(step)
    k = one.height
    assert list(u_pool[:k]) == list(u_pool[k:2 * k]) == list(u_pool[2 * k:])  # one run each
    assert len(set(u_pool[:k])) == k and not set(u_pool) & set(u_data)  # new runs, apart
    assert len(set(u_data)) == df.select("params", "n_layer").unique().height
    b2, w2 = scatter2(f)
    assert b2 > 0
    ens = Ensemble(step, draws(f))
    w2 = max(w2, WITHIN_FLOOR * (b2 + w2))
    assert (ens.noise2, ens.between2) == pytest.approx((w2, b2))
    # the rows' gradients, as the ensemble takes them
    _, G, Jd = gradients(step, ens.names, ens.logs)

    def sandwich(rows: np.ndarray, runs: np.ndarray) -> float:
        """The target's variance of a fit weighing ``rows`` alike, from their covariance."""
        same = runs[:, None] == runs[None, :]
        cov = w2 * np.eye(len(rows)) + b2 * same
        Ai = np.linalg.pinv(rows.T @ rows)
        H = G @ Ai @ rows.T
        return float(np.trace(H @ cov @ H.T))

    assert ens.var0 == pytest.approx(sandwich(Jd, u_data), rel=1e-4)  # A's ridge: 1e-9
    g = ens.gain()
    for j in (0, k, 5, 2 * k + 3):  # a run's gain is the variance it takes away, at least 0
        after = sandwich(np.vstack([Jd, ens.J[j]]), np.append(u_data, u_pool[j]))
        assert g[j] == pytest.approx(max(ens.var0 - after, 0.0), rel=1e-3, abs=1e-6 * ens.var0)
    assert (g >= 0).all() and g.max() > 0
    # a run's second row gains less than another run's first, once its first is run
    before = ens.gain()
    ens.condition(0)
    after0 = sandwich(np.vstack([Jd, ens.J[0]]), np.append(u_data, u_pool[0]))
    assert ens.var == pytest.approx(after0, rel=1e-4)
    assert ens.gain()[k] / before[k] < ens.gain()[1] / before[1]
    # a grid without shapes: each row its own run, the whole scatter its noise
    flat = Step(get_law("depth-joint"), f, {c: v for c, v in columns(pool).items()
                                            if c not in ("n_layer", "d_model")},
                cost, np.ones(pool.height, bool), Target("params", 3e10),
                np.random.default_rng(0))
    assert run_units(flat) is None
    # a fit with no within-run scatter: a row's own noise is floored at 1% of its whole
    g = copy.deepcopy(f)
    g.diagnostics["scatter"] = {**g.diagnostics["scatter"], "within": 0.0}
    import dataclasses

    floored = Ensemble(dataclasses.replace(step, fit=g), draws(g))
    assert floored.noise2 == pytest.approx(0.01 * scatter2(g)[0])


def test_the_linearized_variance_does_not_depend_on_a_parameters_units():
    """d-optimal and v-optimal linearize in the law's raw parameters, whose scales differ by
    orders of magnitude (Chinchilla's A ~ 400, its exponents ~ 0.3). The target's variance
    must not change when one parameter is counted in other units: the information's ridge is
    per parameter, not a share of its trace (which acted as a prior on A and B)."""
    from archfit.designing.ensemble import information

    rng = np.random.default_rng(0)
    Jd = rng.normal(size=(40, 3))
    Jd[:, 1] = Jd[:, 0] + 0.01 * Jd[:, 1]  # nearly collinear, as a coefficient and its exponent
    G = rng.normal(size=(2, 3))
    exact = np.trace(G @ np.linalg.inv(Jd.T @ Jd / 0.005 ** 2) @ G.T)
    for scale in (1.0, 1e3, 1e5):  # parameter 0 counted in units `scale` times smaller
        c = np.array([scale, 1.0, 1.0])
        J, Gs = Jd / c, G / c  # d/dθ' = (d/dθ) / c for θ' = c θ
        S = np.linalg.pinv(information(J, 0.005 ** 2))
        v = np.trace(Gs @ S @ Gs.T)
        assert v == pytest.approx(exact, rel=1e-4), (scale, v, exact)


def test_gpu_hours_assume_half_a_million_tokens_per_step_without_a_spec():
    """Priced on a GPU without a spec's batch: each run's modelled step time at 524,288 tokens
    per step (a common pretraining batch), times its steps."""
    from archfit.designing import costs
    from archfit.shapes import Shape
    from archfit.train.perf import modelled

    pool = pl.DataFrame([{"params": 1.2e8, "n_layer": 12, "d_model": 768, "n_head": 12,
                          "d_ff": 3072, "tokens": 2.4e9}])
    hours, unit = costs(pool, "h100")
    step = modelled("h100").step_time(Shape(n_layer=12, d_model=768, n_head=12, d_ff=3072),
                                      524288)
    assert hours[0] == pytest.approx(step * 2.4e9 / 524288 / 3600, rel=1e-9)
    assert "524,288 tokens per step" in unit


def test_every_strategy_spends_within_the_budget(joint):
    df, f = joint
    pool = _joint_pool(float(df["params"].max()))
    for s in STRATEGIES:
        d = design(pool, law="depth-joint", target=Target("params", 3e10), fit=f,
                   budget_frac=0.2, batch=8, strategy=s, results=df)
        assert d.chosen and d.spent <= d.budget * (1 + 1e-9), (s, d.spent, d.budget)


def test_until_ci_stops_when_the_interval_is_narrow_enough(joint):
    df, f = joint
    pool = _joint_pool(float(df["params"].max()))
    lo, hi = f.optimum(3e10)["n_layer_ci"]
    kw = dict(law="depth-joint", target=Target("params", 3e10), fit=f, budget_frac=0.5)
    d = design(pool, until_ci=1.01 * hi / lo, **kw)
    assert d.chosen == [] and "within --until-ci" in d.stop
    assert design(pool, until_ci=0.99 * hi / lo, **kw).chosen


# ------------------------------------------------------------------ the replay
@pytest.mark.slow
def test_replay_reports_the_target_error_beside_all_rows(cli, tmp_path):
    done, target = split_most_expensive(_chinchilla_done(), 0.1)
    done.write_csv(tmp_path / "done.csv")
    target.write_csv(tmp_path / "target.csv")
    res = cli("design", "--replay", tmp_path / "done.csv", "--target", tmp_path / "target.csv",
              "--law", "chinchilla", "--budget-frac", "0.1", "--strategy", "cheapest", "--json")
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert {"strategy", "budget_frac_spent", "chosen", "target"} <= set(r)
    assert r["strategy"] == "cheapest" and 0 < r["budget_frac_spent"] <= 0.1 + 1e-9
    # the table's params are its own count (Chinchilla's include an embedding): the unit does
    # not call them non-embedding, as it does for the pools archfit builds (below)
    assert r["cost_unit"] == "FLOPs (C = 6 N D, N as the pool's params column counts it)"
    for who in ("design", "all_rows"):
        assert {"mean_abs_rel_error", "max_abs_rel_error", "r2", "coverage"} <= set(
            r["target"][who]), r["target"]
    assert r["target"]["all_rows"]["mean_abs_rel_error"] < 0.02


@pytest.mark.slow
def test_the_replay_figure_draws_each_round_and_the_target_rows_predictions(cli, tmp_path):
    """--replay --plot: the sweep, the chosen runs coloured by round (as the JSON numbers them)
    and, on the right, each target row's measured loss against the losses both fits predict."""
    from archfit.plots import is_archfit_png
    from archfit.plots.design import replay_figure

    done, target = split_most_expensive(_chinchilla_done(), 0.1)
    done.write_csv(tmp_path / "done.csv")
    target.write_csv(tmp_path / "target.csv")
    png = tmp_path / "replay.png"
    res = cli("design", "--replay", tmp_path / "done.csv", "--target", tmp_path / "target.csv",
              "--law", "chinchilla", "--budget-frac", "0.1", "--bootstrap", "16", "--plot",
              png, "--json")
    assert res.exit_code == 0, res.output
    r = json.loads(res.stdout)
    assert r["figure"] == str(png) and is_archfit_png(str(png))
    rounds = [c["round"] for c in r["chosen"]]
    assert rounds[0] == 0 and rounds == sorted(rounds) and max(rounds) == r["rounds"] >= 1
    for who in ("design", "all_rows"):
        m = r["target"][who]
        assert len(m["predicted"]) == len(m["interval"]) == target.height
    from archfit.designing import columns

    fig = replay_figure(r, columns(done), columns(target))
    left, right = fig.axes[:2]
    shown = {c.get_label().split(" (")[0]: c for c in left.collections}
    assert len(shown["the finished sweep"].get_offsets()) == done.height
    assert len(shown["target rows"].get_offsets()) == target.height
    chosen = shown["chosen runs"]
    assert [tuple(p) for p in chosen.get_offsets()] == [(c["params"], c["tokens"])
                                                        for c in r["chosen"]]
    assert list(chosen.get_array()) == rounds  # coloured by round, as the colour bar reads
    design_pts = next(c for c in right.containers if "chosen runs" in c.get_label())
    xs, ys = design_pts.lines[0].get_data()
    assert np.allclose(xs, target["loss"].to_numpy())
    assert np.allclose(ys, r["target"]["design"]["predicted"])


@pytest.mark.slow
def test_replay_scores_a_planted_truth_without_the_targets_noise():
    """A target with ``true_loss`` (the planted law's noiseless loss) is also scored against
    it: the fit on every row misses the truth by less than it misses rows that carry 1% noise,
    whose mean |noise| alone is ~0.8%."""
    from archfit.designing import columns, replay
    from archfit.laws import get_law
    from archfit.laws.planted import DENSE_CHINCHILLA

    done, target = split_most_expensive(dense_grid(seed=1, n_sizes=12, step=1.6,
                                                   row_sd=0.01), 0.1)
    target = target.with_columns(true_loss=get_law("chinchilla").predict(DENSE_CHINCHILLA,
                                                                         columns(target)))
    r = replay(done, target, law="chinchilla", budget_frac=0.1, strategy="cheapest",
               final_bootstrap=20)
    for who in ("design", "all_rows"):
        m = r["target"][who]
        assert np.isfinite(m["mean_abs_rel_error_vs_truth"]), m
        assert m["mean_abs_rel_error_vs_truth"] < 0.6 * m["mean_abs_rel_error"], m
    # without the column the key is absent, not a guess
    r2 = replay(done, target.drop("true_loss"), law="chinchilla", budget_frac=0.1,
                strategy="cheapest", final_bootstrap=20)
    assert "mean_abs_rel_error_vs_truth" not in r2["target"]["design"]


# ------------------------------------------------------------------ the CLI and its files
@pytest.mark.slow
def test_design_writes_a_spec_that_sweep_run_reads(cli, tmp_path, joint, repo):
    from archfit.sweep import load_spec

    df, _ = joint
    df.write_csv(tmp_path / "runs.csv")
    out = tmp_path / "next.toml"
    res = cli("design", "--law", "depth-joint", "--results", tmp_path / "runs.csv",
              "--params", "3e10", "--spec", repo / "sweeps" / "demo.toml", "--sizes",
              f"{2 * df['params'].max():g}", "--depths", "4,8,16,32", "--tokens", "3e5",
              "--budget-frac", "0.8", "--batch", "3", "--bootstrap", "60", "-o", out)
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and "archfit sweep run" in res.output
    spec = load_spec(str(out))
    assert len(spec.runs) == 3 and spec.raw["budget"] == {"tokens": 3e5}
    # written again: it is ours, so it is replaced; a file of the user's is not
    assert cli("design", "--law", "depth-joint", "--results", tmp_path / "runs.csv",
               "--params", "3e10", "--spec", repo / "sweeps" / "demo.toml", "--sizes",
               f"{2 * df['params'].max():g}", "--depths", "4,8", "--tokens", "3e5",
               "--budget-frac", "0.5", "--bootstrap", "20", "-o", out).exit_code == 0
    mine = tmp_path / "mine.toml"
    mine.write_text("name = 'mine'\n")
    res = cli("design", "--law", "depth-joint", "--results", tmp_path / "runs.csv",
              "--params", "3e10", "--sizes", "1e10", "--depths", "4,8", "--tokens", "3e5",
              "--budget-frac", "0.5", "-o", mine)
    assert res.exit_code == 2 and mine.read_text() == "name = 'mine'\n"


def test_a_weak_recommend_ends_with_the_first_run_to_train(joint):
    from archfit.recommending import recommend

    _, f = joint
    with pytest.warns(Warning):
        r = recommend(3e11, fit=[f])
    assert r.trust["verdict"] != "informative"
    assert r.next_runs and r.next_runs.startswith("to narrow this, 'archfit design' would run "
                                                  "first")
    assert "(95% CI, fitted) (now" in r.next_runs and r.to_dict()["next_runs"] == r.next_runs
    text = r.text()
    last = text[text.rindex("\nnext: ") + 1:]  # the last line, wrapped at 100 columns
    assert " ".join(last.split()) == " ".join(f"next: {r.next_runs}".split())
    assert max(len(line) for line in text.splitlines()) <= 100


def test_a_weak_recommend_says_when_its_law_does_not_fit_its_runs(joint):
    """The fit carries its own lack-of-fit test; where the law fails it, recommend's 'next:'
    line says so and predicts no interval after the batch (the law's variance is not the
    target's uncertainty then); the same fit passing the test predicts one."""
    from archfit.recommending import recommend

    _, f = joint
    assert f.diagnostics["lack_of_fit"]["p"] is not None
    for p, fits in ((0.001, False), (0.5, True)):
        g = copy.deepcopy(f)
        g.diagnostics["lack_of_fit"] = {**f.diagnostics["lack_of_fit"], "p": p}
        with pytest.warns(Warning):
            r = recommend(3e11, fit=[g])
        said = r.next_runs.startswith(f"the law does not fit the runs so far (F test p = {p:.2g})")
        assert said is (not fits), r.next_runs
        assert ("(95% CI, fitted) (now" in r.next_runs) is fits


# ------------------------------------------------------------------ the figure
def test_the_figure_draws_the_batch_in_order_among_the_candidates_and_the_target(joint):
    from archfit.plots.design import design_figure

    df, f = joint
    pool = _joint_pool(float(df["params"].max()))
    d = design(pool, law="depth-joint", target=Target("params", 3e10), fit=f,
               results=df, budget_frac=0.5, batch=3, bootstrap=20)
    fig, ax = design_figure(d)
    by_label = {c.get_label().split(" (")[0].split(",")[0]: c for c in ax.collections}
    batch = next(c for k, c in by_label.items() if k.startswith("the batch"))
    assert [tuple(p) for p in batch.get_offsets()] == [(c["params"], c["n_layer"])
                                                       for c in d.chosen]
    numbers = sorted(int(k) for t in ax.texts for k in t.get_text().split(","))
    assert numbers == list(range(1, len(d.chosen) + 1))
    assert len(by_label["open candidates"].get_offsets()) == pool.height
    assert len(by_label["runs so far"].get_offsets()) == df.height
    target = [ln for ln in ax.lines if ln.get_label() == "target N = 3e+10"]
    assert target and list(target[0].get_xdata()) == [3e10, 3e10]
    ci = [c for c in ax.containers if "there now: " in c.get_label()]
    assert ci and f"{d.ci_now[1]:.3g}" in ci[0].get_label()
    assert ax.get_ylim()[1] < 1e3  # a wild interval runs off the axes, the runs stay legible


def test_the_figure_of_recommends_next_batch_draws_the_runs_it_came_from(joint):
    """recommend's 'next:' batch (and the demo's plots/design.png) comes from a fit alone; the
    figure takes the runs that fit was made on."""
    from archfit.recommending.pipeline import suggest
    from archfit.plots.design import design_figure

    df, f = joint
    d, why = suggest(f, 3e11)
    assert d is not None and why is None and d.chosen and not d.context["results"]
    _, ax = design_figure(d, runs=df)
    labels = [c.get_label() for c in ax.collections]
    runs = next(c for c in ax.collections if c.get_label().startswith("runs so far"))
    assert len(runs.get_offsets()) == df.height, labels
    assert any(lb.startswith(f"the batch, in order: {len(d.chosen)} run(s)") for lb in labels)


@pytest.mark.slow
def test_the_figure_of_a_compute_target_draws_its_iso_flop_line(cli, tmp_path):
    from archfit.plots import is_archfit_png

    _chinchilla_done().write_csv(tmp_path / "runs.csv")
    png = tmp_path / "design.png"
    args = ["design", "--law", "chinchilla", "--results", tmp_path / "runs.csv", "--compute",
            "1e25", "--sizes", "1e9,3e9", "--tokens", "2e10,6e10", "--budget-frac", "0.5",
            "--bootstrap", "30", "--plot", png]
    res = cli(*args, "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert got["figure"] == str(png) and is_archfit_png(str(png))
    assert got["cost_unit"] == "FLOPs (C = 6 N D, N non-embedding)"  # a pool archfit built
    assert cli(*args).exit_code == 0  # its own figure: replaced without --force
    mine = tmp_path / "mine.png"
    mine.write_bytes(b"not a figure")
    res = cli(*args[:-1], mine)
    assert res.exit_code == 2 and mine.read_bytes() == b"not a figure", res.output

    from archfit.designing import pool_from_sizes
    from archfit.plots.design import design_figure

    d = design(pool_from_sizes([1e9, 3e9], [2e10, 6e10]), law="chinchilla",
               target=Target("compute", 1e25), results=_chinchilla_done(), budget_frac=0.5,
               bootstrap=30)
    _, ax = design_figure(d)
    iso = next(ln for ln in ax.lines if ln.get_label().startswith("target C = 1e+25"))
    x, y = np.asarray(iso.get_xdata()), np.asarray(iso.get_ydata())
    assert np.allclose(6 * x * y, 1e25)
    now = next(ln for ln in ax.lines if "there now: " in ln.get_label())
    assert np.allclose(6 * np.asarray(now.get_xdata()) * np.asarray(now.get_ydata()), 1e25)
    assert min(now.get_xdata()) >= d.ci_now[0] * (1 - 1e-9)


# ------------------------------------------------------------------ bad inputs
@pytest.fixture
def files(tmp_path, joint):
    df, _ = joint
    df.write_csv(tmp_path / "runs.csv")
    _joint_pool(float(df["params"].max())).write_csv(tmp_path / "pool.csv")
    _joint_pool(float(df["params"].max())).head(0).write_csv(tmp_path / "empty.csv")
    _joint_pool(float(df["params"].max())).drop("n_layer").write_csv(tmp_path / "nodepth.csv")
    df.drop("loss").write_csv(tmp_path / "noloss.csv")
    return tmp_path


@pytest.mark.parametrize("args,needle", [
    (["--pool", "{d}/empty.csv", "--budget-frac", "0.5"], "holds no rows"),
    (["--pool", "{d}/pool.csv", "--budget", "1e3"], "below the cheapest open candidate"),
    (["--pool", "{d}/pool.csv", "--budget-frac", "0.5", "--params", "1e6"],
     "is inside the data"),
    (["--pool", "{d}/pool.csv", "--budget", "1", "--gpu", "tpu9"], "unknown accelerator"),
    (["--pool", "{d}/nodepth.csv", "--budget-frac", "0.5"], "lacks column(s) n_layer"),
    (["--replay", "{d}/noloss.csv", "--target", "{d}/runs.csv", "--budget-frac", "0.1"],
     "no loss column"),
    (["--pool", "{d}/pool.csv", "--budget-frac", "0.5", "--fit", "epoch2024"],
     "epoch2024 is a chinchilla fit, but the design's law is depth-joint"),
    (["--pool", "{d}/pool.csv", "--budget-frac", "0.5", "--prior", "levine2020"],
     "shares no free parameter with depth-joint"),
    (["--pool", "{d}/pool.csv", "--budget-frac", "0.5", "--prior", "levine2020",
      "--fit", "levine2020"], "not both"),
    (["--sizes", "1e9", "--tokens", "1e10", "--budget-frac", "0.5"],
     "a grid pool needs --sizes, --depths and --tokens"),
    (["--replay", "{d}/runs.csv", "--target", "{d}/pool.csv", "--budget-frac", "0.1",
      "--plot", "{d}/runs.csv"], "is also an input of this command"),
    (["--replay", "{d}/runs.csv", "--target", "{d}/runs.csv", "--budget-frac", "0.1",
      "--law", "levine"], "levine has no loss model"),
])
def test_bad_inputs_exit_2_with_one_line(cli, files, args, needle):
    args = [a.format(d=files) for a in args]
    base = ["design", "--law", "depth-joint", "--results", files / "runs.csv",
            "--bootstrap", "20"]
    if "--params" not in args and "--replay" not in args:
        base += ["--params", "3e10"]
    res = cli(*base, *args)
    assert res.exit_code == 2, res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in res.output, res.output


# ------------------------------------------------------------------ starting points
@pytest.mark.slow
def test_a_prior_weighs_the_fit_of_few_runs_and_narrows_the_target():
    """--prior: the results are fitted with a Gaussian prior on the parameters the published fit
    shares with the law; on a few small runs the target's interval is narrower with it."""
    done = _chinchilla_done(seed=2)
    few = done.filter(pl.col("params") <= float(np.sort(done["params"].unique())[5]))
    pool = pl.DataFrame([{"params": n, "tokens": 20 * n}
                         for n in np.logspace(math.log10(float(few["params"].max())) + 0.2,
                                              math.log10(float(few["params"].max())) + 1.5, 6)])
    kw = dict(law="chinchilla", target=Target("compute", 1e24), results=few, budget_frac=0.5,
              bootstrap=60)
    plain, prior = design(pool, **kw), design(pool, prior="epoch2024", **kw)
    w = [d.ci_now[1] / d.ci_now[0] for d in (plain, prior)]
    print(f"target CI high/low: {w[0]:.3g} without the prior, {w[1]:.3g} with epoch2024")
    assert w[1] < w[0]
    assert any("Gaussian prior from epoch2024 on E (" in n for n in prior.notes), prior.notes
    assert prior.chosen and not any("prior" in n for n in plain.notes)


def test_a_fit_without_draws_says_the_variance_criterion_spreads_its_batch():
    pool = pl.DataFrame([{"params": n, "tokens": 20 * n} for n in (1e8, 3e8, 1e9, 3e9)])
    d = design(pool, law="chinchilla", target=Target("compute", 1e24), fit="epoch2024",
               budget_frac=0.5, strategy="variance")
    assert d.chosen and d.spent <= d.budget
    assert any("carries no parameter draws" in n and "spread over the pool" in n
               for n in d.notes)
    # the default rule needs no draws to pick: the candidates nearest the fit's optimum at
    # 1e24 (N_opt ~ 3e11): the largest the budget buys (3e9 costs more than half the pool);
    # no interval after them without draws
    d = design(pool, law="chinchilla", target=Target("compute", 1e24), fit="epoch2024",
               budget_frac=0.5)
    assert d.chosen[0]["params"] == 1e9 and d.ci_after is None
    assert not any("carries no parameter draws" in n for n in d.notes)


def test_a_size_and_tokens_grid_needs_no_depths_for_chinchilla(cli, tmp_path):
    _chinchilla_done().write_csv(tmp_path / "runs.csv")
    res = cli("design", "--law", "chinchilla", "--results", tmp_path / "runs.csv",
              "--compute", "1e25", "--sizes", "1e9,3e9", "--tokens", "2e10,6e10",
              "--budget-frac", "0.5", "--bootstrap", "40", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["chosen"] and {c["params"] for c in out["chosen"]} <= {1e9, 3e9}
    assert {c["tokens"] for c in out["chosen"]} <= {2e10, 6e10}
    assert out["spent"] <= out["budget"] and "n_layer" not in out["chosen"][0]


def test_the_python_api_is_archfit_design_and_takes_pandas_as_the_cli_does(cli, tmp_path):
    """``archfit.design(...)`` (a plain function) designs from pandas frames, and picks
    the batch that ``archfit design --json`` picks from the same runs and grid."""
    import archfit
    from archfit.designing import pool_from_sizes

    done = _chinchilla_done()
    done.write_csv(tmp_path / "runs.csv")
    pool = pool_from_sizes([1e9, 3e9], [2e10, 6e10])
    d = archfit.design(pool.to_pandas(), law="chinchilla", target=Target("compute", 1e25),
                       results=done.to_pandas(), budget_frac=0.5, bootstrap=40)
    res = cli("design", "--law", "chinchilla", "--results", tmp_path / "runs.csv",
              "--compute", "1e25", "--sizes", "1e9,3e9", "--tokens", "2e10,6e10",
              "--budget-frac", "0.5", "--bootstrap", "40", "--json")
    assert res.exit_code == 0, res.output
    frame = d.to_frame()
    assert isinstance(frame, pl.DataFrame) and frame.height >= 1
    assert frame.select("params", "tokens").rows() == [(c["params"], c["tokens"])
                                                       for c in json.loads(res.output)["chosen"]]
    assert archfit.designing.replay is not None and archfit.designing.Target is Target
    with pytest.raises(archfit.ArchfitError, match="cannot use a str as a table of runs"):
        archfit.design("runs.csv", law="chinchilla", target=Target("compute", 1e25),
                       budget_frac=0.5)


# ------------------------------------------------------------------ the loop, trained on CPU
@pytest.mark.slow  # 20 refits of 200 resamples: about 3 minutes
def test_a_designed_batch_narrows_the_target_as_much_as_a_random_one(repo):
    """The demo's sweep cut at half its largest size (1.2e5; datasets/demo_sweep.parquet); a
    batch of 3 runs for the optimal depth at 3x that (3.6e5) from the 6 candidates at 2.4e5.
    Every candidate was trained once with 'archfit sweep run' (datasets/
    design_candidates_cpu.parquet, scripts/make_test_tables.sh); each 3-run batch is refitted
    with the runs before, so the designed batch is judged against every batch a random design
    could draw (their median: a random batch's expected rank, without a seed's luck, and on the
    same trained runs)."""
    import itertools

    from archfit.designing import pool_from_grid
    from archfit.recommending.validation import recipe
    from archfit.sweep import load_spec

    before = pl.read_parquet(repo / "datasets" / "demo_sweep.parquet").filter(
        pl.col("target_params") <= 1.2e5)
    runs = pl.read_parquet(repo / "datasets" / "design_candidates_cpu.parquet")
    r = recipe(load_spec(str(repo / "sweeps" / "demo.toml")))
    pool = pool_from_grid([2.4e5], [1, 2, 3, 4, 6, 8], [3e5], base=r["base"],
                          head_dim=r["head_dim"], multiple=r["multiple"],
                          tolerance=r["tolerance"])
    # the shipped candidates are the pool's shapes, each trained on its tokens
    assert sorted(zip(runs["n_layer"], runs["d_model"])) == sorted(
        zip(pool["n_layer"], pool["d_model"])) and set(runs["status"]) == {"ok"}
    target = Target("params", 3.6e5)
    f0 = fit(before, "depth-joint", bootstrap=300, seed=0, heldout=False)
    budget = float(np.sort(6 * pool["params"].to_numpy() * 3e5)[:3].sum()) * 1.05
    d = design(pool, law="depth-joint", target=target, fit=f0, budget=budget, batch=3,
               seed=0, base=r["base"])
    assert d.chosen and d.spent <= budget
    ratio = {}
    for batch in itertools.combinations(sorted(runs["n_layer"].to_list()), 3):
        after = pl.concat([before, runs.filter(pl.col("n_layer").is_in(list(batch)))],
                          how="diagonal_relaxed")
        lo, hi = fit(after, "depth-joint", bootstrap=200, seed=0,
                     heldout=False).optimum(3.6e5)["n_layer_ci"]
        ratio[batch] = hi / lo
    designed = tuple(sorted(c["n_layer"] for c in d.chosen))
    median = float(np.median(list(ratio.values())))
    rank = sorted(ratio.values()).index(ratio[designed]) + 1
    lo, hi = f0.optimum(3.6e5)["n_layer_ci"]
    print(f"\noptimal depth at 3.6e5, 95% CI high/low: before {hi / lo:.3g}x; after the designed "
          f"batch (depths {list(designed)}) {ratio[designed]:.3g}x, {rank} of {len(ratio)} "
          f"batches; the median batch {median:.3g}x")
    assert ratio[designed] <= median
