"""Law fitting: the Epoch acceptance check, synthetic recovery inside CIs, bad inputs."""

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from archfit.errors import FitError, FitInputError
from archfit.laws import Fit, get_law, load_fit
from archfit.laws.compute.chinchilla import compute_optimal
from archfit.laws.inference.fitting import fit

DATASETS = Path(__file__).resolve().parents[1] / "datasets"


def epoch_240():
    return pl.read_csv(DATASETS / "chinchilla_epoch2024.csv").sort("loss").head(240)


def test_chinchilla_reproduces_epoch_within_one_se():
    f = fit(epoch_240(), law="chinchilla", bootstrap=0)
    # Besiroglu et al. 2024: E 1.8172 (SE 0.03), alpha 0.3478 (0.02), beta 0.3658 (0.02)
    assert abs(f.params["E"] - 1.8172) < 0.03
    assert abs(f.params["alpha"] - 0.3478) < 0.015
    assert abs(f.params["beta"] - 0.3658) < 0.02
    assert f.n_points == 240
    assert f.diagnostics["r2_log"] > 0.98


def test_chinchilla_from_raw_csv_with_map(tmp_path, cli):
    """Epoch's raw extraction (shipped in datasets/) read through a column map."""
    out = tmp_path / "c.json"
    r = cli("fit", DATASETS / "chinchilla_svg_extracted.csv", "--law", "chinchilla", "--map",
            "params=Model Size", "--map", "flops=Training FLOP", "--drop-highest-loss", "5",
            "--bootstrap", "40", "--out", out, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert d["law"] == "chinchilla" and d["n_points"] == 240
    assert set(d["params"]) == {"E", "A", "B", "alpha", "beta"}
    assert set(d["ci"]) == set(d["params"])
    assert all(v["low"] <= d["params"][k] <= v["high"] and v["kind"] == "fitted"
               and "40 bootstrap resamples" in v["method"] for k, v in d["ci"].items())
    assert d["inputs"][0]["sha256"] and d["archfit_version"]
    assert "D = FLOPs / (6 N)" in r.stderr
    assert abs(d["params"]["E"] - 1.8172) < 0.03
    back = Fit.from_json(str(out))
    assert back.params == pytest.approx(d["params"])
    assert back.mapping == {"params": "Model Size", "flops": "Training FLOP"}


@pytest.mark.parametrize("law", ["chinchilla", "chinchilla-varpro"])
def test_chinchilla_recovers_truth_inside_ci(law, chinchilla_synthetic):
    df, truth = chinchilla_synthetic()
    f = fit(df, law=law, bootstrap=100, seed=1)
    for k in ("E", "alpha", "beta"):
        lo, hi = f.ci[k]
        assert lo <= truth[k] <= hi, (k, f.params[k], f.ci[k])
    n_opt, d_opt = compute_optimal(f.params, 1e21)
    assert n_opt * d_opt * 6 == pytest.approx(1e21, rel=1e-9)
    assert f.derived_ci["N_opt@1e21"] is not None


def test_kaplan_n_recovers():
    rng = np.random.default_rng(3)
    N = 10 ** rng.uniform(6, 9, 40)
    L = (8.8e13 / N) ** 0.076 * np.exp(rng.normal(0, 0.005, 40))
    f = fit(pl.DataFrame({"params": N, "loss": L}), law="kaplan-n", bootstrap=100)
    lo, hi = f.ci["alpha_N"]
    assert lo <= 0.076 <= hi and hi - lo < 0.02
    assert f.predict(params=1e9)[0] == pytest.approx((8.8e13 / 1e9) ** 0.076, rel=0.02)


def test_kaplan_nd_recovers():
    rng = np.random.default_rng(4)
    N = 10 ** rng.uniform(6, 9, 80)
    D = 10 ** rng.uniform(8, 10.5, 80)
    truth = dict(N_c=6.4e13, D_c=1.8e13, alpha_N=0.076, alpha_D=0.103)
    L = ((truth["N_c"] / N) ** (0.076 / 0.103) + truth["D_c"] / D) ** 0.103
    L = L * np.exp(rng.normal(0, 0.003, 80))
    f = fit(pl.DataFrame({"params": N, "tokens": D, "loss": L}), law="kaplan-nd",
            bootstrap=100)
    for k in ("alpha_N", "alpha_D"):
        lo, hi = f.ci[k]
        assert lo <= truth[k] <= hi, (k, f.params[k], f.ci[k])


def test_levine_recovers_planted_relation(levine_synthetic):
    df = levine_synthetic()
    f = fit(df, law="levine", bootstrap=200, seed=0)
    for k, truth in (("a", 5.039), ("b", 0.0555)):
        lo, hi = f.ci[k]
        assert lo <= truth <= hi, (k, f.params[k], f.ci[k])
    assert len(f.extra["classes"]) == 4
    L12 = f.derived["n_layer_opt@1e12"]
    assert 60 < L12 < 130
    assert f.diagnostics["heldout"]["ok"]
    assert abs(f.diagnostics["heldout"]["rel_error"]) < 0.3


def test_each_seed_is_its_own_bootstrap_unit(levine_synthetic):
    # two seeds of one shape are two independent training runs
    df = levine_synthetic(seeds=2)
    f = fit(df, law="levine", bootstrap=50)
    assert f.bootstrap["n_units"] == df.height
    assert f.bootstrap["unit"].startswith("row")


def test_published_levine_projection():
    f = load_fit("levine2020")
    L, d = f.law_obj.optimum(f.params, 1e12)
    assert 92 <= L <= 96 and 78 <= f.law_obj.optimum(f.params, 175e9)[0] <= 83
    assert 28000 < d < 32000 and d == pytest.approx(math.exp(f.params["a"] + f.params["b"] * L))
    # the vectorized form (notebooks) agrees with the plain-math optimum
    assert f.predict(params=[1e12, 175e9])[0] == pytest.approx(L)


def test_depth_width_recovers_and_penalty():
    rng = np.random.default_rng(5)
    rows = []
    truth = dict(E=1.5, A=30.0, alpha=0.6, B=2.0, beta=0.8)
    for N in (5e6, 2e7, 8e7):
        for L in (2, 3, 4, 6, 8, 12, 16):
            w = math.sqrt(N / (12 * L))
            loss = truth["E"] + truth["A"] / w ** truth["alpha"] + truth["B"] / L ** truth["beta"]
            rows.append(dict(params=N, n_layer=L, d_model=w, loss=loss * math.exp(
                rng.normal(0, 0.002))))
    f = fit(pl.DataFrame(rows), law="depth-width", bootstrap=60)
    for k in ("alpha", "beta"):
        lo, hi = f.ci[k]
        assert lo <= truth[k] <= hi, (k, f.params[k], f.ci[k])
    assert f.params["C"] == 0 and any("folded into E" in n for n in f.notes)
    d_true, _ = get_law("depth-width").optimum(truth, 1e9)
    assert f.derived["n_layer_opt@1e9"] == pytest.approx(d_true, rel=0.35)
    assert f.extra["shape_penalty"]["best_aspect_ratio"] > 0


def test_ff_ratio_recovers_trend():
    rows = []
    for N in (1e6, 1e7, 1e8):
        best = 4.0 * (N / 1e7) ** 0.1
        for r in (1, 2, 3, 4, 6, 8, 12):
            d = 256
            rows.append(dict(params=N, d_model=d, d_ff=r * d, loss=3 + 0.03 * math.log(
                r / best) ** 2 - 0.1 * math.log10(N)))
    f = fit(pl.DataFrame(rows), law="ff-ratio", bootstrap=0)
    assert f.params["b"] == pytest.approx(0.1 / math.log(10) * math.log(10), abs=0.01)
    assert f.predict(params=1e7)[0] == pytest.approx(4.0, rel=0.02)


def test_too_few_points_and_degenerate_inputs(levine_synthetic):
    with pytest.raises(FitError, match="at least 6 runs"):
        fit(pl.DataFrame({"params": [1e6, 1e7], "tokens": [1e8, 1e9], "loss": [3.0, 2.5]}),
            law="chinchilla")
    one_class = levine_synthetic(sizes=(1e7,))
    with pytest.raises(FitError, match="2 size classes"):
        fit(one_class, law="levine")
    same_depth = levine_synthetic().with_columns(pl.lit(4.0).alias("n_layer"))
    with pytest.raises(FitError, match="3 different depths"):
        fit(same_depth, law="levine")
    with pytest.raises(FitError, match="unknown law"):
        fit(pl.DataFrame({"loss": [1.0]}), law="palm")
    with pytest.raises(FitInputError, match="needs column"):
        fit(pl.DataFrame({"params": np.arange(1, 10) * 1e6, "loss": np.ones(9)}),
            law="chinchilla")


def test_nonfinite_and_failed_runs_dropped_with_count(chinchilla_synthetic):
    df, _ = chinchilla_synthetic(n=60)
    df.loc[0, "loss"] = np.nan
    df["status"] = "ok"
    df.loc[1, "status"] = "diverged"
    f = fit(df, law="chinchilla-varpro", bootstrap=0)
    assert f.n_points == 58
    assert any("status is not a finished state (diverged 1" in n for n in f.notes), f.notes
    assert any("not finite" in n for n in f.notes)


def test_common_column_names_and_wandb_states(chinchilla_synthetic):
    """A W&B-style export: num_params, val_loss, State finished/crashed."""
    from archfit.sweep.store import read_runs

    df, _ = chinchilla_synthetic(n=30)
    w = pl.from_pandas(df).rename({"params": "num_params", "loss": "val_loss"}).with_columns(
        pl.Series("status", ["finished"] * 28 + ["crashed", "running"]))
    t = read_runs([], frame=w)
    assert t.frame.height == 28 and t.sources["params"] == "num_params"
    assert any("num_params -> params" in n and "val_loss -> loss" in n for n in t.notes), t.notes
    assert any("crashed 1" in n and "running 1" in n for n in t.notes), t.notes
    dead = w.with_columns(pl.lit("crashed").alias("status"))
    with pytest.raises(FitInputError, match="all 30 rows were dropped .*crashed 30"):
        read_runs([], frame=dead)


def test_fit_json_roundtrip_and_bad_files(tmp_path, levine_synthetic):
    f = fit(levine_synthetic(), law="levine", bootstrap=20)
    p = tmp_path / "f.json"
    f.to_json(p)
    g = load_fit(p)
    assert g.params == f.params and g.law == "levine"
    assert "ln d_model*" in g.summary()
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(FitInputError, match="not JSON"):
        load_fit(tmp_path / "bad.json")
    with pytest.raises(FitInputError, match="no such fit file"):
        load_fit(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text(json.dumps({"law": "levine", "params": {"a": 1}}))
    with pytest.raises(FitInputError, match="needs params b"):
        load_fit(tmp_path / "other.json")


def test_fit_cli_globs_jsonl_and_bad_input(tmp_path, chinchilla_synthetic):
    from click.testing import CliRunner

    from archfit.cli import main

    df, _ = chinchilla_synthetic(n=60)
    df.iloc[:30].to_csv(tmp_path / "a.csv", index=False)
    pl.from_pandas(df.iloc[30:]).write_ndjson(tmp_path / "b.jsonl")
    r = CliRunner().invoke(main, ["fit", str(tmp_path / "a.csv"), str(tmp_path / "*.jsonl"),
                                  "--law", "chinchilla-varpro", "--bootstrap", "0", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["n_points"] == 60 and len(d["inputs"]) == 2
    for args, needle in [
        ([str(tmp_path / "nope.parquet")], "no such file"),
        ([str(tmp_path / "a.csv"), "--law", "palm"], "unknown law"),
        ([str(tmp_path / "a.csv"), "--map", "params"], "archfit_column=source_column"),
        ([str(tmp_path / "a.csv"), "--map", "params=Nope"], "no column 'Nope'"),
        ([str(tmp_path / "a.csv"), "--map", "size=params"], "unknown archfit column"),
    ]:
        r = CliRunner().invoke(main, ["fit", *args, "--law", "chinchilla"]
                               if "--law" not in args else ["fit", *args])
        assert r.exit_code == 2, (args, r.output)
        assert needle in r.output and "Traceback" not in r.output


def test_kaplan_n_covariance_is_ols_s():
    """The point fit's covariance (the Wald intervals without a bootstrap) against statsmodels'
    OLS of log loss on log size, carried to (N_c, alpha_N) by the delta method."""
    import statsmodels.api as sm

    from archfit.laws import get_law

    rng = np.random.default_rng(4)
    N = 10 ** rng.uniform(6, 9, 30)
    L = (8.8e13 / N) ** 0.076 * np.exp(rng.normal(0, 0.01, 30))
    est = get_law("kaplan-n").fit_point({"params": N, "loss": L})
    X = sm.add_constant(np.log(N))
    ols = sm.OLS(np.log(L), X).fit()
    c0, c1 = ols.params
    a, nc = -c1, np.exp(c0 / -c1)
    J = np.array([[nc / a, nc * c0 / a ** 2], [0.0, -1.0]])
    assert np.allclose(est.cov, J @ ols.cov_params() @ J.T, rtol=1e-9)
