"""What fit, predict and plot take, and what they refuse: a bad frame in one typed line, tables
too large to fit in minutes, fractional depths, optimizers that stop early, fits given as
mappings or replaced by hand, and the notes and progress a long or odd fit owes its reader."""

from __future__ import annotations

from collected import POOL, runs

import numpy as np
import polars as pl
import pytest
import archfit
from archfit.designing.pool import Target
from archfit.errors import FitInputError
import json
import math
import time
from archfit.laws import load_fit
from pathlib import Path


def _limited(args: list[str], timeout: float = 60.0):  # type: ignore[no-untyped-def]
    """archfit ``args`` in a subprocess under 4 GB of address space (the extremes' rule)."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4_000_000 * 1024, 4_000_000 * 1024))

    return subprocess.run([sys.executable, "-m", "archfit", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit)


@pytest.mark.parametrize("bad", [
    pl.DataFrame({"params": [1e9, 2e9], "final_val_loss": ["a", "b"]}),
    pl.DataFrame({"params": ["x", "y"], "tokens": [1e9, 2e9], "loss": [2.0, 2.1]}),
    {"params": [1e9, 2e9], "loss": [2.0, 2.1], "tokens": [1e9, -1.0]},
])
def test_a_bad_frame_raises_the_typed_error_in_one_line(bad):
    for call in (lambda: archfit.design(POOL, law="chinchilla", results=bad,
                                        target=Target("compute", 1e22), budget_frac=0.5),
                 lambda: archfit.designing.replay(bad, runs(5), law="chinchilla",
                                               budget_frac=0.5)):
        with pytest.raises(FitInputError) as e:
            call()
        assert "\n" not in str(e.value) and str(e.value)


def test_predict_predicts_every_row_and_leaves_a_missing_loss_empty(tmp_path, cli):
    import json

    from archfit.laws.inference.fitting import fit

    res = runs().rename({"final_val_loss": "loss"})
    fit(res, "chinchilla", bootstrap=10).to_json(tmp_path / "f.json")
    rows = runs(6, seed=1).rename({"final_val_loss": "loss"})
    losses = rows["loss"].to_list()
    part = rows.with_columns(pl.Series("loss", [None, None] + losses[2:]))
    part.write_csv(tmp_path / "part.csv")
    r = cli("predict", tmp_path / "f.json", tmp_path / "part.csv", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert len(d["rows"]) == 6 and [x["actual"] for x in d["rows"]][:2] == [None, None]
    assert [x["actual"] for x in d["rows"]][2:] == pytest.approx(losses[2:])
    assert d["n_with_loss"] == 4
    inside = [x["interval"]["low"] <= x["actual"] <= x["interval"]["high"]
              for x in d["rows"][2:]]
    assert {x["interval"]["kind"] for x in d["rows"]} == {"fitted"}
    assert d["coverage"] == pytest.approx(sum(inside) / 4)
    rows.with_columns(pl.lit(None, dtype=pl.Float64).alias("loss")).write_csv(tmp_path / "no.csv")
    r = cli("predict", tmp_path / "f.json", tmp_path / "no.csv", "--json")  # none trained yet
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert len(d["rows"]) == 6 and all(x["actual"] is None for x in d["rows"])
    assert "coverage" not in d
    rows.with_columns(pl.Series("params", [-1.0] + rows["params"].to_list()[1:])).write_csv(
        tmp_path / "neg.csv")
    r = cli("predict", tmp_path / "f.json", tmp_path / "neg.csv")  # what fit refuses
    assert r.exit_code == 2 and "'params' has 1 missing, non-finite or non-positive" in r.stderr


def test_fit_notes_a_fractional_depth(tmp_path):
    from archfit.sweep.store import read_runs

    df = pl.DataFrame({"params": [1e6, 2e6, 4e6], "loss": [3.0, 2.9, 2.8],
                       "n_layer": [2.0, 3.5, 4.0]})
    notes = read_runs([], frame=df).notes
    assert any("'n_layer'" in n and "1 fractional value(s), e.g. 3.5" in n for n in notes), notes
    whole = read_runs([], frame=df.with_columns(pl.Series("n_layer", [2.0, 3.0, 4.0]))).notes
    assert not any("fractional" in n for n in whole)


@pytest.mark.slow
@pytest.mark.timing
def test_a_million_row_table_is_answered_in_bounded_time_and_memory(tmp_path):
    """fit, design --results and predict on 1,000,000 rows of 17 configurations repeated:
    each finishes (or refuses in one line) within 60 s under 4 GB of address space; the
    prediction band computes each distinct configuration once."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from conftest import _joint

    small, _ = _joint(n_shapes=17, n_tokens=1, seed=3)
    big = pl.concat([small] * (1_000_000 // small.height + 1)).head(1_000_000)
    path = tmp_path / "big.parquet"
    big.write_parquet(path)
    r = _limited(["fit", path, "--law", "depth-joint", "--bootstrap", "20"])
    assert r.returncode == 2 and "exact duplicates" in r.stderr and "--dedupe" in r.stderr
    r = _limited(["fit", path, "--law", "depth-joint", "--bootstrap", "20", "--dedupe", "--out",
                  tmp_path / "f.json"])
    assert r.returncode == 0, r.stderr[-800:]
    r = _limited(["predict", tmp_path / "f.json", path, "--json"])
    assert r.returncode == 0, r.stderr[-800:]
    import json

    rows = json.loads(r.stdout)["rows"]
    assert len(rows) == 1_000_000 and rows[0]["predicted"] == rows[small.height]["predicted"]
    r = _limited(["design", "--law", "depth-joint", "--results", path, "--dedupe", "--params",
                  "2e9", "--sizes", "1e9", "--depths", "8,16,32", "--tokens", "1e10",
                  "--budget-frac", "0.9", "--bootstrap", "20"])
    assert r.returncode in (0, 2), r.stderr[-800:]
    assert "Traceback" not in r.stderr and (r.returncode == 0 or len(r.stderr.splitlines()) == 1)


@pytest.mark.slow
def test_a_thousand_cuts_fit_each_distinct_split_once(cli, tmp_path):
    """backtest --cuts with 1,000 values: cuts between the same two sizes split the runs
    alike, so each split is fitted once, with progress, and every cut gets its result."""
    import json
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from conftest import _joint

    df, _ = _joint(n_shapes=14, n_tokens=2, seed=4)
    path = tmp_path / "s.parquet"
    df.write_parquet(path)
    sizes = np.sort(df["params"].unique().to_numpy())
    cuts = np.linspace(sizes[9], sizes[-2], 1000)
    r = cli("backtest", path, "--law", "depth-joint", "--bootstrap", "5", "--cuts",
            ",".join(f"{c:.9g}" for c in cuts), "--json")
    assert r.exit_code == 0, r.output[-800:]
    out = json.loads(r.stdout)["backtests"]
    assert len(out) == 1000
    splits = {int(np.searchsorted(sizes, c, side="right")) for c in cuts}
    assert len({b["split_of_cut"] for b in out}) == len(splits) <= 5
    assert r.stderr.count("backtest: split") == len(splits)
    same = [b for b in out if b["split_of_cut"] == out[-1]["split_of_cut"]]
    assert len({json.dumps(b.get("coverage")) for b in same}) == 1  # one fit, one answer


def test_an_optimizer_that_stops_early_leaves_a_note():
    from archfit.laws.inference.optimize import multistart

    def wrong(x: np.ndarray) -> tuple[float, np.ndarray]:
        return float(x @ x), -2 * x  # a gradient pointing uphill: the line search fails

    notes: list[str] = []
    x = multistart(wrong, [np.array([1.0, -2.0])], what="a test fit", notes=notes)
    assert np.all(np.isfinite(x))
    assert len(notes) == 1 and "a test fit: the optimizer stopped before converging" in notes[0]
    quiet: list[str] = []  # a sound gradient converges, and says nothing
    multistart(lambda x: (float(x @ x), 2 * x), [np.array([1.0, -2.0])], notes=quiet)
    assert quiet == []
    # a start already at its optimum on a bound (the gradient points out of the box): no step
    # is taken, and rightly none is flagged
    x = multistart(lambda x: (float(x.sum()), np.ones_like(x)), [np.array([0.0, 1.0])],
                   bounds=[(0.0, None), (1.0, 2.0)], notes=quiet)
    assert quiet == [] and np.array_equal(x, [0.0, 1.0])


def test_non_finite_derivatives_are_zeroed_with_a_note():
    from archfit.designing.ensemble import finite
    from archfit.designing.strategies import Step

    step = Step(None, None, {}, np.ones(2), np.ones(2, bool), None, np.random.default_rng(0))
    a = np.array([[1.0, np.nan], [np.inf, 2.0]])
    out = finite(step, a)
    assert out.tolist() == [[1.0, 0.0], [0.0, 2.0]]
    finite(step, a)  # the same note once
    assert len(step.notes) == 1 and "2 of 4 derivatives of the prediction were not finite" in step.notes[0]
    finite(step, np.ones(3))
    assert len(step.notes) == 1


def test_a_band_over_repeated_rows_is_each_rows_band():
    """Fit.band computes each distinct configuration once: the band of a table with repeats
    equals the band of each row alone; a single value beside a list is every row's."""
    from archfit.laws.inference.fitting import fit

    f = fit(runs().rename({"final_val_loss": "loss"}), "chinchilla", bootstrap=20)
    N, D = np.array([1e9, 2e9, 1e9, 4e9, 2e9]), np.array([2e10, 4e10, 2e10, 8e10, 4e10])
    pred, lo, hi = f.band({"params": N, "tokens": D})
    for i in range(len(N)):
        one = f.band({"params": N[i:i + 1], "tokens": D[i:i + 1]})
        assert (pred[i], lo[i], hi[i]) == pytest.approx(tuple(x[0] for x in one), rel=1e-12)
    frame = f.predict(params=[1e9, 2e9], tokens=2e10, interval=0.95)
    assert frame["tokens"].to_list() == [2e10, 2e10] and frame.height == 2
    with pytest.raises(FitInputError, match="different lengths"):
        f.predict(params=[1e9, 2e9, 3e9], tokens=[2e10, 1e10], interval=0.95)


def test_a_fit_given_as_its_mapping_is_the_fit():
    f = load_fit("epoch2024")
    via_file = archfit.recommend(compute=1e23, fit=f)
    via_dict = archfit.recommend(compute=1e23, fit=json.loads(json.dumps(f.to_dict())))
    keys = ("n_layer", "d_model", "n_head", "d_ff", "params_non_embedding")
    assert [via_dict.to_dict()[k] for k in keys] == [via_file.to_dict()[k] for k in keys]
    with pytest.raises(FitInputError, match="needs params E, A, B, alpha, beta"):
        archfit.recommend(compute=1e23, fit={"law": "chinchilla", "params": {}})
    with pytest.raises(FitInputError, match="not an archfit fit"):
        archfit.recommend(compute=1e23, fit={"law": "chinchilla"})
    with pytest.raises(FitInputError, match="not int"):
        archfit.recommend(compute=1e23, fit=3)


@pytest.mark.parametrize("tolerance", [0.2, 0.3, 0.5, 0.999])
def test_a_wide_tolerance_leaves_an_end_open_instead_of_crashing(cli, tolerance):
    r = cli("recommend", "--params", "7e9", "--tolerance", str(tolerance), "--json")
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output

    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in the JSON")

    near = json.loads(r.output, parse_constant=refuse)["near_optimal"]
    lo, hi = near["n_layer"]
    assert lo >= 1 and (hi is None or hi > lo)
    if tolerance == 0.999:  # loss within 99.9% of the optimum's: every depth from one layer
        assert math.isclose(lo, 1.0) and hi is None


def test_a_point_estimate_far_past_its_runs_is_uninformative():
    """gemstones2025 was fitted on runs up to 2e9 parameters (McLeish et al. 2025) and carries
    no interval: 500x past them nothing bounds its error; 5x past them it is weak, not
    uninformative, for the same reasons a user's fit is."""
    with pytest.warns(archfit.UninformativeWarning):
        far = archfit.recommend(1e12, fit="gemstones2025").to_dict()["trust"]
    near = archfit.recommend(1e10, fit="gemstones2025").to_dict()["trust"]
    assert far["verdict"] == "uninformative"
    assert any("500x beyond the largest run" in r and "nothing bounds" in r
               for r in far["reasons"])
    assert near["verdict"] == "weak"


def test_a_table_too_large_to_fit_in_minutes_is_refused_at_once():
    from archfit.laws.inference.fitting import MAX_FIT_ROWS, fit

    rng = np.random.default_rng(0)
    N = np.repeat(10 ** np.linspace(7, 9, 17), MAX_FIT_ROWS // 17 + 2)
    D = 20 * N
    loss = (1.8 + 480 / N ** 0.35 + 2000 / D ** 0.37) * np.exp(rng.normal(0, 0.01, len(N)))
    t0 = time.perf_counter()
    with pytest.raises(FitInputError, match="they repeat 17 configurations of params, tokens"):
        fit(pl.DataFrame({"params": N, "tokens": D, "loss": loss}), "chinchilla")
    assert time.perf_counter() - t0 < 10
    # the advice works: each configuration's mean is a table the law fits
    means = pl.DataFrame({"params": N, "tokens": D, "loss": loss}).group_by(
        ["params", "tokens"]).agg(pl.col("loss").mean())
    f = fit(means, "chinchilla", bootstrap=0, heldout=False)
    assert math.isclose(f.params["alpha"], 0.35, rel_tol=0.2)


@pytest.mark.slow
@pytest.mark.timing
def test_a_million_noisy_rows_are_refused_within_two_minutes_under_4_gb(tmp_path):
    """1,000,000 rows of 17 configurations with 1% noise on the loss (no exact duplicates):
    fit and design --results each answer in one line, within 2 minutes under 4 GB of
    address space."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import _joint

    small, _ = _joint(n_shapes=17, n_tokens=1, seed=3)
    big = pl.concat([small] * (1_000_000 // small.height + 1)).head(1_000_000)
    noise = np.exp(np.random.default_rng(0).normal(0, 0.01, big.height))
    big.with_columns(pl.col("loss") * noise).write_parquet(tmp_path / "big.parquet")
    for args in (["fit", tmp_path / "big.parquet", "--law", "depth-joint"],
                 ["design", "--law", "depth-joint", "--results", tmp_path / "big.parquet",
                  "--params", "2e9", "--sizes", "1e9", "--depths", "8,16,32", "--tokens",
                  "1e10", "--budget-frac", "0.9"]):
        t0 = time.perf_counter()
        r = _limited(args, timeout=120)
        took = time.perf_counter() - t0
        print(f"\n{args[0]} on 1,000,000 noisy rows: exit {r.returncode} in {took:.1f} s")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr[-800:]
        assert "repeat 17 configurations" in r.stderr and took < 120


def test_plot_of_a_fit_with_nothing_to_draw_says_so_and_writes_nothing(cli, tmp_path):
    out = tmp_path / "figs"
    r = cli("plot", "steplaw2025", "-o", out)
    assert r.exit_code == 2 and "has nothing archfit can draw" in r.output, r.output
    assert not out.exists()


def test_predict_with_a_learning_rate_fit_names_what_it_predicts(cli, repo):
    r = cli("predict", "steplaw2025", repo / "datasets" / "demo_sweep.parquet")
    assert r.exit_code == 2
    assert "predicts the best learning rate and batch, not loss" in r.output
    assert "optimal shape" not in r.output


def test_law_auto_keeps_the_row_limit_every_law_keeps(cli, tmp_path):
    import time

    import numpy as np
    import polars as pl

    from archfit.laws.inference.fitting import MAX_FIT_ROWS

    n = MAX_FIT_ROWS + 1
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(7, 9, n), 10 ** rng.uniform(9, 11, n)
    pl.DataFrame({"params": N, "tokens": D, "loss": 1.8 + 400 / N ** 0.34
                  + 400 / D ** 0.28}).write_parquet(tmp_path / "big.parquet")
    t = time.monotonic()
    r = cli("fit", tmp_path / "big.parquet", "--law", "auto")
    assert r.exit_code == 2 and "rows are more than a fit reads in minutes" in r.output
    assert time.monotonic() - t < 10  # refused up front, before any law is fitted


def test_a_replaced_fit_is_checked_as_a_new_one_is():
    """dataclasses.replace builds a Fit through its checks: a law whose parameters the fit
    lacks is a typed error at once, not a KeyError at predict."""
    import dataclasses

    from archfit.errors import FitInputError
    from archfit.laws.inference.artifact import Fit

    f = Fit(law="chinchilla", params=dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28))
    assert f.predict(params=1e9, tokens=2e10)[0] == pytest.approx(
        1.69 + 406.4 / 1e9 ** 0.34 + 410.7 / 2e10 ** 0.28)
    with pytest.raises(FitInputError, match="a kaplan-n fit needs the parameters N_c, alpha_N"):
        dataclasses.replace(f, law="kaplan-n")
    with pytest.raises(FitInputError, match="missing: A, B, alpha, beta"):
        dataclasses.replace(f, params={"E": 1.5})


def test_a_depth_width_fit_without_an_optimal_depth_is_a_typed_error():
    """A depth-width fit whose loss rises with depth (beta < 0) has no optimal depth: a typed
    error naming the parameters (a complex number crashed a campaign's round once)."""
    from archfit.errors import FitError
    from archfit.laws.base import get_law

    law = get_law("depth-width")
    good = dict(E=1.0, A=10.0, alpha=0.5, B=2.0, beta=0.5, C=0.0, gamma=0.3)
    L, _ = law.optimum(good, 1e8)
    # the closed form: d* = (2 beta B / (alpha A) (N / 12)^(alpha / 2))^(1 / (alpha / 2 + beta))
    assert L == pytest.approx((2 * 0.5 * 2.0 / (0.5 * 10.0) * (1e8 / 12) ** 0.25) ** (1 / 0.75))
    with pytest.raises(FitError, match="has no optimal depth"):
        law.optimum({**good, "beta": -0.2}, 1e8)


def test_a_data_constrained_table_that_repeats_one_token_is_refused_in_seconds(cli, repo,
                                                                              tmp_path):
    """Every run repeats one unique token: nothing measures the decay of repeated data, so the
    fit is refused before it starts (it once ran for minutes)."""
    import time

    import polars as pl

    runs = pl.read_csv(repo / "datasets" / "muennighoff2023" / "c4_runs.csv")
    path = tmp_path / "one.csv"
    runs.with_columns(pl.lit(1.0).alias("unique_tokens")).write_csv(path)
    t0 = time.perf_counter()
    r = cli("fit", path, "--law", "data-constrained")
    assert r.exit_code == 2 and "repeats its data more than 107 times" in r.output, r.output
    assert time.perf_counter() - t0 < 10


def test_a_long_fit_prints_progress_off_a_terminal(cli, repo, monkeypatch):
    """Off a terminal (a log, CI) the bootstrap prints a progress line on stderr with the
    resamples done and an ETA, at most every PROGRESS_EVERY_S seconds (0 here: every chunk)."""
    import archfit.cli.fit_cmd as fit_cmd

    monkeypatch.setattr(fit_cmd, "PROGRESS_EVERY_S", 0.0)
    r = cli("fit", repo / "datasets" / "chinchilla_epoch2024.csv", "--law", "chinchilla",
            "--bootstrap", 40)
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("bootstrap: ")]
    assert lines and all(" of 40 resamples, " in ln and "s to go" in ln for ln in lines)


def test_a_table_whose_every_loss_is_equal_is_refused_not_fitted(cli, tmp_path, repo):
    df = pl.read_csv(repo / "datasets" / "chinchilla_epoch2024.csv")
    path = tmp_path / "flat.csv"
    df.with_columns(pl.lit(2.5).alias("loss")).write_csv(path)
    r = cli("fit", path, "--law", "chinchilla")
    assert r.exit_code == 2 and "every row's loss is 2.5" in r.output, r.output
    assert "RuntimeWarning" not in r.output and len(r.output.strip().splitlines()) == 1


def test_one_column_mapped_to_two_roles_is_refused(cli, repo):
    r = cli("fit", repo / "datasets" / "chinchilla_epoch2024.csv", "--law", "chinchilla",
            "--map", "granularity=tokens", "--bootstrap", "0")
    assert r.exit_code == 2, r.output
    assert "column 'tokens' is also read as tokens; one column fills one role" in r.output


@pytest.mark.parametrize("n", [1, 5])
def test_too_few_resamples_say_so_and_claim_no_bootstrap_interval(repo, n):
    f = archfit.fit(pl.read_csv(repo / "datasets" / "chinchilla_epoch2024.csv"),
                    law="chinchilla", bootstrap=n)
    assert any(f"{n} bootstrap resample(s) are too few" in note for note in f.notes), f.notes
    assert not any(v for v in f.ci.values())
    assert not any("converged" in note for note in f.notes)


def test_plot_refuses_runs_the_law_cannot_place_as_predict_does(cli, tmp_path, repo):
    path = tmp_path / "runs.csv"
    pl.DataFrame({"params": [1e7, 2e7, 4e7], "loss": [3.0, 2.9, 2.8]}).write_csv(path)
    for args in (["plot", "epoch2024", path, "-o", tmp_path / "figs"],
                 ["predict", "epoch2024", path]):
        r = cli(*args)
        assert r.exit_code == 2 and "tokens" in r.output, (args, r.output)
    assert not (tmp_path / "figs").exists()


def test_predict_json_rows_are_the_rows_with_their_intervals_as_json_writes_them():
    """The streamed --json rows (a column at a time) parse to what json.dumps writes for each
    row built with its Interval: keys, null for a missing loss, the interval's kind and ends."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import _joint

    from archfit.interval import banded_rows
    from archfit.io import jsonable
    from archfit.laws.inference.backtest import Predictions
    from archfit.laws.inference.selection import fit
    from archfit.sweep.store import read_runs

    df, _ = _joint(n_shapes=6, n_tokens=2, seed=5)
    f = fit(df, "chinchilla", bootstrap=10)
    rows = df.with_columns(pl.when(pl.int_range(pl.len()) % 3 == 0).then(None)
                           .otherwise(pl.col("loss")).alias("loss"))
    p = Predictions(f, read_runs([], frame=rows, require_loss=False, every_row=True), 0.9)
    prov = f.band_provenance()
    fast = [json.loads(t) for chunk in p.json_rows(0.9, prov, chunk=4) for t in chunk]
    slow = [json.loads(json.dumps(jsonable(banded_rows([p.row(i)], 0.9, prov)[0])))
            for i in range(p.n)]
    assert fast == slow and len(fast) == df.height
    assert fast[0]["actual"] is None and fast[1]["actual"] == pytest.approx(df["loss"][1])
    assert fast[1]["interval"]["kind"] == "fitted" and fast[1]["interval"]["level"] == 0.9


def test_an_estimate_edited_far_from_its_draws_is_refused_naming_the_file(tmp_path):
    """A consistent edit (alpha set to 1e300, the draws left as fitted) would predict a
    plausible wrong number with the old draws' interval: the file is refused in one line; the
    fit as written loads, and so does an estimate moved within its draws' range."""
    f = archfit.fit(None, paths=[str(Path(__file__).parents[1] / "datasets"
                                     / "chinchilla_epoch2024.csv")],
                    law="chinchilla", bootstrap=30, heldout=False)
    d = f.to_dict()
    path = tmp_path / "f.json"
    path.write_text(json.dumps(d))
    assert load_fit(path).params["alpha"] == pytest.approx(f.params["alpha"])
    lo, hi = min(d["bootstrap"]["samples"]["alpha"]), max(d["bootstrap"]["samples"]["alpha"])
    d["params"]["alpha"] = hi  # inside: loads
    path.write_text(json.dumps(d))
    load_fit(path)
    d["params"]["alpha"] = 1e300
    path.write_text(json.dumps(d))
    with pytest.raises(FitInputError) as e:
        load_fit(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: params.alpha is 1e+300, far outside its own 30 bootstrap")
    assert "\n" not in msg and f"{lo:.4g} to {hi:.4g}" in msg


def test_inputs_no_real_run_has_are_refused_by_the_law_that_reads_them():
    """The CPU rate x batch sweep with its rates x 1e-9 (a unit slip: below the least rate a
    run takes, archfit.train.config's, for the surface as for lr-batch), or a batch of more
    tokens per step than the run trains; a vocabulary table with a vocabulary of one token:
    each fit is refused in one line naming the column, where the sweep as recorded fits."""
    grid = pl.read_parquet(Path(__file__).parents[1] / "datasets" / "lr_batch_sweep_cpu.parquet")
    archfit.fit(grid, law="lr-batch-surface", bootstrap=0, heldout=False)
    for bad, needle in ((grid.with_columns(pl.col("lr") * 1e-9), "column 'lr' has"),
                        (grid.with_columns(pl.col("tokens") * 0 + 10.0),
                         "a step of more tokens than they train")):
        with pytest.raises(FitInputError) as e:
            archfit.fit(bad, law="lr-batch-surface", bootstrap=0, heldout=False)
        assert needle in str(e.value) and "\n" not in str(e.value)
    from archfit.laws import get_law

    vocab = get_law("vocab")
    rows = pl.DataFrame({"vocab_size": [1.0, 4096.0], "loss": [-1.0, -1.2]})
    assert "column 'vocab_size' holds 1" in vocab.implausible(rows)
    assert vocab.implausible(rows.with_columns(pl.lit(32000.0).alias("vocab_size"))) is None
