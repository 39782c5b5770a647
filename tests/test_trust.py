"""The verdict: planted-informative data read as informative, thin data as uninformative, and
each weakness named on its own line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from archfit import recommend
from archfit.laws import load_fit
from archfit.laws.inference.fitting import fit

DATASETS = Path(__file__).resolve().parents[1] / "datasets"


def test_planted_informative_levine_is_informative(levine_synthetic):
    f = fit(levine_synthetic(noise=0.0005), law="levine", bootstrap=200)
    t = f.trust
    assert t["verdict"] == "informative", t
    assert t["span"]["n_size_classes"] == 4 and t["optimum_ci_ratio"] < 2


def test_three_tiny_size_classes_are_uninformative(levine_synthetic):
    """The demo's situation: three close, tiny sizes and noisy losses."""
    f = fit(levine_synthetic(sizes=(2e5, 4e5, 8e5), noise=0.01, seed=3), law="levine",
            bootstrap=200)
    t = f.trust
    assert t["verdict"] == "uninformative", t
    assert any("bootstrap resamples failed" in r for r in t["reasons"]), t


def test_extrapolation_has_its_line(levine_synthetic):
    f = fit(levine_synthetic(noise=0.0005), law="levine", bootstrap=100)
    top = f.diagnostics["span"]["params_max"]
    r = recommend(params=500 * top, fit=f, n_ctx=1024, head_dim=64, multiple_of=64)
    assert r.trust["extrapolation_factor"] == pytest.approx(500)
    line = [x for x in r.trust["reasons"] if "beyond the largest run" in x]
    assert line == [f"{500 * top:.3g} is 500x beyond the largest run ({top:.3g})"]
    assert r.trust["verdict"] in ("weak", "uninformative")
    near = recommend(params=2 * top, fit=f, n_ctx=1024, head_dim=64, multiple_of=64)
    assert not [x for x in near.trust["reasons"] if "beyond" in x]


def test_a_form_its_own_lack_of_fit_test_rejects_is_weak_and_says_why():
    """Chinchilla's form on Epoch's 240 lowest-loss runs passes every other check, but its log
    residuals trend over size and tokens: statsmodels' OLS of them on the standardized log
    size, tokens, their squares and product rejects no trend at p < 1e-10 (the independent
    answer), so the verdict is weak, with that as its one reason."""
    import numpy as np
    import statsmodels.api as sm

    df = pl.read_csv(DATASETS / "chinchilla_epoch2024.csv").sort("loss").head(240)
    f = fit(df, law="chinchilla", bootstrap=100)
    r = np.asarray(f.diagnostics["residuals"])
    z = [np.log(df[c].to_numpy()) for c in ("params", "tokens")]
    z = [(x - x.mean()) / x.std() for x in z]
    X = sm.add_constant(np.column_stack([z[0], z[1], z[0] ** 2, z[0] * z[1], z[1] ** 2]))
    ols = sm.OLS(r - r.mean(), X).fit()
    assert ols.f_pvalue < 1e-10
    assert f.diagnostics["lack_of_fit"]["p"] == pytest.approx(ols.f_pvalue, rel=1e-6)
    assert f.diagnostics["lack_of_fit"]["trend_share"] == pytest.approx(ols.rsquared, rel=1e-6)
    assert f.trust["verdict"] == "weak", f.trust
    (reason,) = f.trust["reasons"]
    assert "its own lack-of-fit test rejects the form" in reason
    assert json.loads(f.to_json())["trust"]["verdict"] == "weak"
    assert "verdict: weak" in f.summary()


def test_bound_and_published_reasons():
    f = load_fit("levine2020")
    assert f.trust["verdict"] == "weak"
    assert any("no record of the data's span" in r for r in f.trust["reasons"])
    from archfit.laws import Fit

    g = Fit(law="depth-width", params=dict(E=1.7e-112, A=30, alpha=0.6, B=2, beta=0.8, C=0,
                                           gamma=0), diagnostics={"span": {
                                               "params_min": 1e7, "params_max": 2e9}})
    assert "E is at its lower bound 0" in g.trust["reasons"]


def test_recommend_prints_the_verdict_and_strict_refuses(tmp_path, cli, levine_synthetic):
    f = fit(levine_synthetic(sizes=(2e5, 4e5, 8e5), noise=0.01, seed=3), law="levine",
            bootstrap=100)
    p = tmp_path / "thin.json"
    f.to_json(p)
    r = cli("recommend", "--params", "1e9", "--fit", p)
    assert r.exit_code == 0 and "verdict: UNINFORMATIVE" in r.output
    assert r.output.index("verdict:") < r.output.index("recommended:")
    r = cli("recommend", "--params", "1e9", "--fit", p, "--strict")
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert "uninformative" in r.output
    d = json.loads(cli("recommend", "--params", "1e9", "--fit", p, "--json").output)
    assert d["trust"]["verdict"] == "uninformative" and d["trust"]["extrapolation_factor"] > 1000


def test_compare_shows_every_applicable_law(tmp_path, cli, levine_synthetic):
    f = fit(levine_synthetic(noise=0.0005), law="levine", bootstrap=50)
    p = tmp_path / "mine.json"
    f.to_json(p)
    r = cli("recommend", "--params", "7e9", "--compare", "--fit", p, "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["rows"]
    assert [row["law"] for row in rows] == ["levine (mine.json)", "levine2020", "gemstones2025"]
    assert all(row["verdict"] in ("informative", "weak", "uninformative") for row in rows)
    assert rows[0]["ci"] and rows[1]["ci"] is None
    # where the published laws disagree: Levine's set about 55 layers, Gemstones' about 133
    lev, gem = rows[1]["near_optimal"], rows[2]["near_optimal"]
    assert lev[0] < rows[1]["n_layer_opt"] < lev[1] and gem[0] < rows[2]["n_layer_opt"] < gem[1]
    assert rows[2]["n_layer_opt"] > 2 * rows[1]["n_layer_opt"]
    text = cli("recommend", "--params", "7e9", "--compare", "--fit", p).output
    assert "levine2020" in text and "verdict" in text.splitlines()[0] and "near-optimal" in text


def test_plot_overlays_a_reference_and_refuses_a_loss_law(tmp_path, cli, levine_synthetic):
    f = fit(levine_synthetic(), law="levine", bootstrap=30)
    p = tmp_path / "l.json"
    f.to_json(p)
    r = cli("plot", p, "--reference", "levine2020", "--target", "1e9", "-o", tmp_path / "f",
            "--json")
    assert r.exit_code == 0, r.output
    r = cli("plot", p, "--reference", "epoch2024", "-o", tmp_path / "f")
    assert r.exit_code == 2 and "answers another question than" in r.output


def test_python_recommend_warns_on_an_uninformative_fit_and_strict_raises(levine_synthetic):
    from archfit.errors import RecommendError, UninformativeWarning

    f = fit(levine_synthetic(sizes=(2e5, 4e5, 8e5), noise=0.01, seed=3), law="levine",
            bootstrap=100)
    with pytest.warns(UninformativeWarning, match="uninformative"):
        r = recommend(params=1e9, fit=f)
    assert r.trust["verdict"] == "uninformative"
    with pytest.raises(RecommendError, match="uninformative"):
        recommend(params=1e9, fit=f, strict=True)
    good = fit(levine_synthetic(noise=0.0005), law="levine", bootstrap=100)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UninformativeWarning)  # an informative answer: silent
        recommend(params=2 * good.diagnostics["span"]["params_max"], fit=good)


def test_compare_marks_uninformative_rows(tmp_path, cli, levine_synthetic):
    f = fit(levine_synthetic(sizes=(2e5, 4e5, 8e5), noise=0.01, seed=3), law="levine",
            bootstrap=100)
    p = tmp_path / "thin.json"
    f.to_json(p)
    r = cli("compare", "--fit", p, "--family", "gpt-3")  # families match case-insensitively
    assert r.exit_code == 0, r.output
    rows = [ln for ln in r.output.splitlines() if ln.startswith("GPT-3 175B")]
    assert rows and "UNINFORMATIVE *" in rows[0]
    assert "* uninformative at that size: the law's answer there is not supported by the " \
        "evidence" in r.output
    assert max(map(len, r.output.splitlines())) <= 100
    r = cli("recommend", "--params", "1e9", "--compare", "--fit", p)
    line = [ln for ln in r.output.splitlines() if ln.startswith("levine (thin.json)")][0]
    assert "UNINFORMATIVE *" in line


def test_compute_recommendation_and_compare_give_cis_and_verdicts(tmp_path, cli):
    df = pl.read_csv(DATASETS / "chinchilla_epoch2024.csv").sort("loss").head(240)
    f = fit(df, law="chinchilla", bootstrap=60)
    p = tmp_path / "ch.json"
    f.to_json(p)
    r = cli("recommend", "--compute", "1e22", "--fit", p)
    assert r.exit_code == 0, r.output
    for label in ("N_opt (parameters)", "D_opt (tokens)", "tokens per parameter"):
        line = [ln for ln in r.output.splitlines() if label in ln][0]
        value = float(line.split(label)[1].split()[0])
        lo, hi = (float(x) for x in line.split("[")[1].split("]")[0].split(","))
        assert lo < value < hi, line
    assert "(each interval: 95% CI, fitted: percentiles over" in r.output
    d = json.loads(cli("recommend", "--compute", "1e22", "--fit", p, "--json").output)
    c = d["compute"]
    assert c["N_opt_ci"]["low"] < c["N_opt"] < c["N_opt_ci"]["high"]
    assert c["N_opt_ci"]["kind"] == "fitted" and c["N_opt_ci"]["level"] == 0.95
    assert c["tokens_per_param"] == pytest.approx(c["D_opt"] / c["N_opt"])
    rows = json.loads(cli("recommend", "--compute", "1e22", "--compare", "--fit", p,
                          "--json").output)["rows"]
    compute_rows = [x for x in rows if x["role"] == "compute"]
    assert [x["law"] for x in compute_rows] == ["chinchilla (ch.json)", "hoffmann2022",
                                                "epoch2024", "muennighoff2023"]
    assert compute_rows[0]["N_opt_ci"] and compute_rows[1]["N_opt_ci"] is None
    assert all(x["verdict"] in ("informative", "weak", "uninformative") for x in compute_rows)
    assert any(x["role"] == "shape" for x in rows)


def test_constraints_that_move_the_depth_are_priced(correlated_sweep):
    import warnings

    from archfit.errors import UninformativeWarning

    f = fit(correlated_sweep(seed=1, n_tokens=4), law="depth-joint", bootstrap=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeWarning)
        free = recommend(params=3e9, fit=f, family="gpt2")  # no head split to keep
        tp = recommend(params=3e9, fit=f, tp=8, n_kv_head=8)
    assert not [n for n in free.notes if "constraints" in n]  # within 10%: no note
    note = [n for n in tp.notes if "constraints" in n]
    assert len(note) == 1 and "--tp 8" in note[0] and "predicted loss cost +" in note[0], note
    assert abs(tp.shape.n_layer / tp.n_layer_opt - 1) > 0.10
    r = recommend(params=7e9, vocab_size=32000, n_kv_head=8, tp=8, n_ctx=4096,
                  family="gpt2")  # levine2020:
    # 67 layers against its optimum 55.0, priced by Kaplan et al.'s curvature (0.03 / ln 8²
    # of the loss per squared ln depth): ln(67 / 55)² of it is 0.027% of the loss
    note = [n for n in r.notes if "constraints" in n]
    assert len(note) == 1 and "+0.027% of the loss" in note[0] and "Kaplan" in note[0], note
    assert 0.03 / math.log(8) ** 2 * math.log(67 / 55.0) ** 2 == pytest.approx(0.00027, abs=5e-6)


def test_notebook_frames_and_json(tmp_path, levine_synthetic):
    f = fit(levine_synthetic(noise=0.0005), law="levine", bootstrap=60)
    fr = f.to_frame()
    assert fr.columns == ["name", "kind", "value", "low", "high", "se"]
    par = fr.filter(pl.col("kind") == "parameter")
    assert par["name"].to_list() == list(f.params)
    assert (par["low"] <= par["value"]).all() and (par["value"] <= par["high"]).all()
    assert (par["se"] > 0).all()
    r = recommend(params=2 * f.diagnostics["span"]["params_max"], fit=f)
    p = tmp_path / "rec.json"
    text = r.to_json(p)
    assert json.loads(p.read_text()) == json.loads(text) == json.loads(json.dumps(r.to_dict()))
    rf = r.to_frame()
    assert rf.height == len(r.alternatives_records) and rf["recommended"][0]
    assert rf["n_layer"][0] == r.shape.n_layer and set(rf["verdict"]) == {r.trust["verdict"]}


def test_a_band_across_a_threshold_reads_in_the_values_own_unit():
    """A share is read in percent, a ratio as a factor. No resample failed of 15: a binomial sd
    of 1/15 at the rate's floor, so another seed could read up to 4 sd = 4/15 = 27%, across the
    10% threshold (weak, the cautious side); a 2.58x interval that could read 1.59x to 12x is
    across 10x (uninformative)."""
    from types import SimpleNamespace

    from archfit.laws.inference.trust import Trust, bootstrap_reason
    from archfit.numbers import MC_BAND_Z

    assert MC_BAND_Z == 4.0
    t = Trust()
    bootstrap_reason(t, SimpleNamespace(bootstrap={"n": 15, "n_failed": 0}))
    assert t.verdict == "weak"
    assert t.reasons == ["0% of the bootstrap resamples failed (over the draws it could read 0% "
                         "to 27%, across the 10% threshold: the cautious side is taken; more "
                         "--bootstrap resamples settle it)"]
    r = Trust()
    r.grade_band(2.58, (1.59, 12.0), (3.0, 10.0), "spans 2.58x")
    assert r.verdict == "uninformative" and "could read 1.59x to 12x, across the 10x" in r.reasons[0]


def test_the_lack_of_fit_test_on_runs_of_many_rows_is_cluster_robust():
    """Rows of one run share its noise (a run-level offset): the test is statsmodels'
    cluster-robust Wald F test of the same slopes (the independent answer), not the classical
    F test, which reads the shared offset as a trend."""
    import numpy as np
    import statsmodels.api as sm

    from archfit.laws.inference.regression import lack_of_fit_test

    rng = np.random.default_rng(0)
    g = np.repeat(np.arange(30), 6)
    N = np.exp(rng.uniform(15, 20, 30))[g]
    D = np.exp(rng.uniform(20, 24, len(g)))
    r = rng.normal(0, 0.01, 30)[g] + rng.normal(0, 0.005, len(g))
    p, _ = lack_of_fit_test(r, {"params": N, "tokens": D}, g)
    z = np.column_stack([np.log(N), np.log(D)])
    z = (z - z.mean(0)) / z.std(0)
    A = np.column_stack([np.ones(len(r)), z[:, 0], z[:, 1], z[:, 0] ** 2, z[:, 0] * z[:, 1],
                         z[:, 1] ** 2])
    res = sm.OLS(r - r.mean(), A).fit(cov_type="cluster", cov_kwds={"groups": g})
    assert p == pytest.approx(float(res.f_test(np.eye(6)[1:]).pvalue), rel=1e-9)
