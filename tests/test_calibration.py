"""Calibrated evidence: intervals that cover held-out runs at their stated rate,
the bootstrap over training runs, loss prediction intervals, backtests, the verdict graded on
what it can check, and the convention of N checked against the shape core."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from archfit.laws.inference.backtest import backtest
from archfit.laws.inference.fitting import fit
from archfit.laws.inference.bands import band_report
from archfit.laws.columns import run_groups

DATASETS = Path(__file__).resolve().parents[1] / "datasets"


def _epoch():
    return pl.read_csv(DATASETS / "chinchilla_epoch2024.csv").sort("loss").head(240)


def _coverage(df, law, group=None, bootstrap=100):
    """Fit on the bottom two thirds of sizes, predict the rest: (coverage, half-width)."""
    cut = float(np.quantile(df["params"].unique().to_numpy(), 2 / 3))
    train, test = df.filter(pl.col("params") <= cut), df.filter(pl.col("params") > cut)
    f = fit(train, law=law, bootstrap=bootstrap, heldout=False, group=group)
    out = f.predict(test, interval=0.95)
    r = band_report(out["predicted"].to_numpy(), out["low"].to_numpy(),
                    out["high"].to_numpy(), test["loss"].to_numpy())
    return r["coverage"], r["mean_halfwidth_rel"]


# ----------------------------------------------------------------- the bootstrap unit
def test_checkpoints_of_one_run_are_one_unit(correlated_sweep):
    df = correlated_sweep(n_shapes=6, n_tokens=5)
    data = {c: df[c].to_numpy() for c in df.columns}
    by_id, unit = run_groups(data)
    assert len(np.unique(by_id)) == 6 and "run_id" in unit
    del data["run_id"]
    by_shape, unit = run_groups(data)  # no run_id: one shape at several token counts
    assert len(np.unique(by_shape)) == 6 and unit.startswith("training run")
    rows, unit = run_groups(data, ["row"])  # --group overrides
    assert len(np.unique(rows)) == 30
    lone = {k: data[k] for k in ("params", "tokens", "loss")}  # Epoch-like: one model a row
    assert run_groups(lone)[1].startswith("row")


def test_group_names_a_missing_column(correlated_sweep):
    from archfit.errors import FitInputError

    with pytest.raises(FitInputError, match="--group nope"):
        fit(correlated_sweep(n_shapes=12, n_tokens=4), law="depth-joint", bootstrap=0,
            group=["nope"])


@pytest.mark.slow
def test_grouped_intervals_cover_what_row_resampling_misses(correlated_sweep):
    df = correlated_sweep("depth-joint", seed=0)
    grouped, half_g = _coverage(df, "depth-joint")
    rows, half_r = _coverage(df, "depth-joint", group=["row"])
    print(f"depth-joint, seed 0: runs resampled {grouped:.0%} (±{half_g:.1%}), rows resampled "
          f"{rows:.0%} (±{half_r:.1%})")
    assert grouped >= 0.85 and rows <= grouped - 0.25 and half_g > 2 * half_r


@pytest.mark.slow
@pytest.mark.parametrize("law", ["depth-joint", "depth-width"])
def test_recovery_with_correlated_checkpoints(correlated_sweep, law):
    """>= 20 shapes x 20 token counts, a shared per-run offset and per-row noise; three draws
    pooled. 95% intervals from the run bootstrap cover 90-99%; resampling rows covers far less."""
    g, r = [], []
    for seed in range(3):
        df = correlated_sweep(law, seed=seed)
        assert df["run_id"].n_unique() >= 20 and df.group_by("run_id").len()["len"].min() >= 20
        g.append(_coverage(df, law, bootstrap=200)[0])
        r.append(_coverage(df, law, group=["row"], bootstrap=200)[0])
    print(f"{law}: 95% intervals cover {np.mean(g):.0%} of held-out rows resampling runs "
          f"({', '.join(f'{x:.0%}' for x in g)}), {np.mean(r):.0%} resampling rows")
    assert 0.90 <= np.mean(g) <= 0.99
    assert np.mean(r) <= np.mean(g) - 0.3


# ----------------------------------------------------------------- predictions with intervals
@pytest.mark.slow
def test_predict_gives_ordered_bands_and_conf_int_narrows(chinchilla_synthetic):
    df, _ = chinchilla_synthetic(seed=1)
    df = pl.from_pandas(df) if not isinstance(df, pl.DataFrame) else df
    f = fit(df, law="chinchilla", bootstrap=100)
    out = f.predict(df, interval=0.95)
    assert set(out.columns) >= {"predicted", "low", "high", "actual"}
    assert (out["low"] <= out["predicted"]).all() and (out["predicted"] <= out["high"]).all()
    narrow = f.predict(df, interval=0.5)
    assert ((narrow["high"] - narrow["low"]) < (out["high"] - out["low"])).all()
    c95, c90 = f.conf_int(0.05), f.conf_int(0.1)
    for k in f.params:
        assert c90[k][0] >= c95[k][0] and c90[k][1] <= c95[k][1]
        assert c90[k][1] - c90[k][0] < c95[k][1] - c95[k][0]
    assert all(v > 0 for v in f.se().values())
    opt = f.optimum(1e22)
    assert opt["N_opt_ci"][0] < opt["N_opt"] < opt["N_opt_ci"][1]
    assert opt["tokens_per_param"] == pytest.approx(opt["D_opt"] / opt["N_opt"])
    assert repr(f).startswith("<Fit chinchilla: 120 rows") and "verdict" in repr(f)
    s = f.summary()
    assert "bootstrap unit" in s and "<pre>" in s._repr_html_()


def test_shape_laws_without_a_loss_model_refuse_a_loss_interval(levine_synthetic):
    from archfit.errors import FitError

    f = fit(levine_synthetic(), law="levine", bootstrap=20)
    with pytest.raises(FitError, match="not loss"):
        f.predict(levine_synthetic(), interval=0.95)


@pytest.mark.slow
def test_the_interval_survives_the_artifact(chinchilla_synthetic, tmp_path):
    from archfit.laws import load_fit

    df, _ = chinchilla_synthetic(seed=2)
    f = fit(df, law="chinchilla", bootstrap=60)
    f.to_json(tmp_path / "f.json")
    back = load_fit(str(tmp_path / "f.json"))
    a, b = f.predict(df, interval=0.9), back.predict(df, interval=0.9)
    assert np.allclose(a["low"].to_numpy(), b["low"].to_numpy())


# ----------------------------------------------------------------- Epoch's published numbers
def test_epoch_points_reproduce_estimates_and_standard_errors():
    f = fit(_epoch(), law="chinchilla", bootstrap=400)
    assert f.params["E"] == pytest.approx(1.817, abs=0.002)
    assert f.params["alpha"] == pytest.approx(0.347, abs=0.002)
    assert f.params["beta"] == pytest.approx(0.367, abs=0.002)
    se = f.se()
    published = {"E": 0.03, "alpha": 0.02, "beta": 0.02}  # Besiroglu et al. 2024, Table 1
    print("bootstrap SE vs Epoch's: " + ", ".join(f"{k} {se[k]:.4f} vs {v}"
                                                  for k, v in published.items()))
    for k, v in published.items():
        assert v / 1.5 <= se[k] <= v * 1.5, (k, se[k], v)
    assert f.bootstrap["unit"].startswith("row")  # one separately trained model per row


# ----------------------------------------------------------------- the verdict
@pytest.mark.slow
def test_a_compute_law_with_a_wide_n_opt_range_is_not_informative():
    small = _epoch().filter(pl.col("params") <= 4.2e8)  # extrapolate to 1e22 FLOPs
    f = fit(small, law="chinchilla", bootstrap=200, targets=[1e22])
    t = f.verdict(1e22)
    assert t.checks["optimum_ci_ratio"] > 3 and t.verdict != "informative", t.line()
    assert any("N_opt at 1e22" in r for r in t.reasons)


@pytest.mark.slow
def test_fit_verdict_does_not_depend_on_targets(chinchilla_synthetic):
    df, _ = chinchilla_synthetic(seed=3)
    a = fit(df, law="chinchilla", bootstrap=100, targets=[1e19])
    b = fit(df, law="chinchilla", bootstrap=100, targets=[1e25, 1e27])
    assert a.verdict().to_dict() == b.verdict().to_dict()
    assert a.verdict(1e27).extrapolation_factor > 1e5  # the per-target verdict is separate


@pytest.mark.slow  # seconds of training or a kernel: the fast suite stays under 2 minutes
def test_five_seeds_give_one_verdict_inside_the_data():
    df = _epoch()
    target = 1e21  # below the largest run's compute
    verdicts = {fit(df, law="chinchilla", bootstrap=200, seed=s).verdict(target).verdict
                for s in range(5)}
    assert len(verdicts) == 1, verdicts


@pytest.mark.slow
def test_heldout_check_holds_out_the_largest_fifth_and_names_them(correlated_sweep):
    df = correlated_sweep(seed=4)
    f = fit(df, law="depth-joint", bootstrap=60)
    h = f.diagnostics["heldout"]
    sizes = np.unique(np.round(np.log(df["params"].to_numpy()), 2))
    assert 2 <= len(h["held_out_sizes"]) <= len(sizes) // 3
    assert min(h["held_out_sizes"]) > np.exp(np.quantile(sizes, 0.6))
    assert {"coverage", "mean_rel_error", "mean_halfwidth_rel", "within_interval"} <= set(h)


@pytest.mark.slow
def test_an_error_beyond_its_interval_is_uninformative(correlated_sweep):
    df = correlated_sweep(seed=5)
    # the largest runs train far worse than the law (a broken recipe at scale)
    top = df["params"].sort().unique().tail(4).to_list()
    bad = df.with_columns(pl.when(pl.col("params").is_in(top)).then(pl.col("loss") * 1.25)
                          .otherwise(pl.col("loss")).alias("loss"))
    f = fit(bad, law="depth-joint", bootstrap=60)
    t = f.verdict()
    assert t.verdict == "uninformative" and any("exceeds the interval" in r for r in t.reasons)


# ----------------------------------------------------------------- backtest
@pytest.mark.slow
def test_backtest_on_a_planted_sweep(correlated_sweep):
    df = correlated_sweep(seed=6)
    cut = float(np.quantile(df["params"].unique().to_numpy(), 2 / 3))
    r = backtest(df, "depth-joint", cut=cut, bootstrap=100)
    print(f"backtest coverage {r['coverage']:.0%}, mean error {r['mean_rel_error']:+.2%}, "
          f"classes {[(c['predicted_best']['n_layer'], c['actual_best']['n_layer']) for c in r['classes']]}")
    assert r["coverage"] >= 0.85
    assert r["classes"] and all(c["within_interval"] for c in r["classes"])
    assert r["n_test"] == len(r["rows"]) and r["verdict"] in ("informative", "weak",
                                                              "uninformative")


@pytest.mark.slow
def test_backtest_cli_json_and_plot(correlated_sweep, cli, tmp_path):
    path = tmp_path / "s.parquet"
    correlated_sweep(seed=7, n_shapes=20, n_tokens=6).write_parquet(path)
    png = tmp_path / "bt.png"
    r = cli("backtest", str(path), "--law", "depth-joint", "--cut", "4e8", "--bootstrap", "40",
            "--json", "--plot", str(png))
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert {"coverage", "mean_rel_error", "rms_rel_error", "rows", "classes", "verdict"} <= set(d)
    assert {"predicted", "interval", "actual"} <= set(d["rows"][0]) and d["level"] == 0.95
    iv = d["rows"][0]["interval"]
    assert iv["low"] <= d["rows"][0]["predicted"] <= iv["high"]
    assert iv["kind"] == "fitted" and iv["what"] == "prediction interval"
    assert png.read_bytes().startswith(b"\x89PNG")
    r = cli("backtest", str(path), "--law", "levine", "--cut", "4e8")
    assert r.exit_code == 2 and "no loss model" in r.output
    r = cli("backtest", str(path), "--cut", "1e12")
    assert r.exit_code == 2 and "no run is larger" in r.output


@pytest.mark.slow
def test_predict_cli(correlated_sweep, cli, tmp_path):
    path = tmp_path / "s.parquet"
    correlated_sweep(seed=8, n_shapes=14, n_tokens=4).write_parquet(path)
    r = cli("fit", str(path), "--law", "depth-joint", "--bootstrap", "40", "--out",
            str(tmp_path / "f.json"))
    assert r.exit_code == 0, r.output
    r = cli("predict", str(tmp_path / "f.json"), str(path), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert len(d["rows"]) == 56 and 0 <= d["coverage"] <= 1
    assert all(x["interval"]["low"] <= x["predicted"] <= x["interval"]["high"]
               for x in d["rows"])
    r = cli("predict", "levine2020", str(path))
    assert r.exit_code == 2


# ----------------------------------------------------------------- the convention of N
def test_a_params_column_with_embeddings_is_named(correlated_sweep):
    df = correlated_sweep(seed=9, n_shapes=14, n_tokens=4)
    total = df.with_columns((pl.col("params") + 2 * 50257 * pl.col("d_model")).alias("params"))
    f = fit(total, law="depth-joint", bootstrap=0, arch={"tie": False})
    assert any("N convention" in n and "total count" in n for n in f.notes), f.notes
    assert "params_check" in f.conventions
    g = fit(df.drop("params"), law="depth-joint", bootstrap=0, arch={"mlp": "swiglu"})
    assert "shape core" in g.conventions["params"] and "swiglu" in g.conventions["params"]


@pytest.mark.slow
def test_fit_cli_groups_and_states_the_architecture(correlated_sweep, cli, tmp_path):
    df = correlated_sweep(seed=9, n_shapes=14, n_tokens=4)
    p = tmp_path / "runs.parquet"
    df.with_columns((pl.col("params") + 2 * 50257 * pl.col("d_model")).alias("params")
                    ).write_parquet(p)
    r = cli("fit", p, "--law", "depth-joint", "--bootstrap", "20", "--json")
    d = json.loads(r.output)
    assert "run_id" in d["bootstrap"]["unit"] and d["bootstrap"]["n_units"] == 14
    r = cli("fit", p, "--law", "depth-joint", "--bootstrap", "20", "--group", "row", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["bootstrap"]["n_units"] == df.height and "row" in d["bootstrap"]["unit"]
    r = cli("fit", p, "--law", "depth-joint", "--bootstrap", "0", "--untied")
    assert r.exit_code == 0, r.output
    assert "N convention" in r.output and "untied embeddings" in r.output
    assert "total count" in r.output
    r = cli("fit", p, "--law", "depth-joint", "--group", "nope")
    assert r.exit_code == 2 and "nope" in r.output and len(r.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_an_informative_answer_covers_what_comes_next(correlated_sweep):
    """Backtests on planted sweeps (runs as units, and rows forced apart with --group row; and
    Chinchilla sweeps drawn from its own form) and on Epoch's points: wherever the verdict at
    the held-out sizes is informative, the intervals covered >= 80% of the held-out runs and the
    mean error lay inside them. (Chinchilla's form on Epoch's points is weak at every cut: its
    own lack-of-fit test rejects it there.)"""
    from contracts import _chinchilla

    cases = []
    for law, seed, q in (("depth-joint", 0, 0.85), ("depth-joint", 1, 0.85),
                         ("depth-width", 0, 0.67), ("depth-width", 1, 0.67)):
        df = correlated_sweep(law, seed=seed, run_sd=0.005)
        cut = float(np.quantile(df["params"].unique().to_numpy(), q))
        for group in (None, ["row"]):
            cases.append((f"{law} seed {seed} group {group}",
                          backtest(df, law, cut=cut, bootstrap=60, group=group)))
    for cut in (1e9, 3e9, 4e9):
        cases.append((f"epoch {cut:g}", backtest(_epoch(), "chinchilla", cut=cut, bootstrap=100)))
    for seed in (0, 1, 2):
        df = pl.from_pandas(_chinchilla(seed)[0])
        cut = float(np.quantile(df["params"].unique().to_numpy(), 0.7))
        cases.append((f"chinchilla seed {seed}", backtest(df, "chinchilla", cut=cut,
                                                          bootstrap=100)))
    informative = []
    for name, r in cases:
        print(f"{name}: coverage {r['coverage']:.0%}, error {r['mean_rel_error']:+.1%} vs "
              f"±{r['mean_halfwidth_rel']:.1%}, verdict {r['verdict_at_largest']}")
        if r["verdict_at_largest"] == "informative":
            informative.append(name)
            assert r["coverage"] >= 0.8 and r["within_interval"], (name, r["coverage"])
    assert len(informative) >= 2, informative  # the claim is not vacuous
    forced = [r for name, r in cases if "['row']" in name]
    assert all(r["verdict_at_largest"] != "informative" for r in forced)


def test_the_conformal_unit_is_a_run_scored_by_its_worst_checkpoint():
    """Split conformal calibration over runs: each run's score is the largest |miss| /
    half-width of its checkpoints, and the factor is the ceil((n + 1) 0.95)-th smallest of the
    runs' scores (here, with 3 runs, the largest); over rows, one run's many checkpoints would
    outvote the others."""
    import numpy as np

    from archfit.laws.inference.bands import conformal_factor

    pred = np.ones(9)
    lo, hi = pred * np.exp(-0.1), pred * np.exp(0.1)  # half-width 0.1 in log space
    miss = np.array([0.02, 0.05, 0.15, 0.01, 0.01, 0.01, 0.01, 0.02, 0.18])  # |log a - log p|
    actual = pred * np.exp(miss)
    groups = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2])
    assert conformal_factor(pred, lo, hi, actual, 0.95, groups) == pytest.approx(1.8)
    # with 60 quiet rows of a fourth run added, the row quantile (rank 67 of 69) falls below
    # the two misses, to 1; the run quantile (rank 4 of 4) still sees the run that missed
    quiet = np.full(60, 0.01)
    p2, a2 = np.ones(69), np.exp(np.concatenate([miss, quiet]))
    lo2, hi2 = p2 * np.exp(-0.1), p2 * np.exp(0.1)
    g2 = np.concatenate([groups, np.full(60, 3)])
    assert conformal_factor(p2, lo2, hi2, a2, 0.95) == pytest.approx(1.0)
    assert conformal_factor(p2, lo2, hi2, a2, 0.95, g2) == pytest.approx(1.8)


def test_the_interval_caption_counts_its_bootstrap_units_in_the_plural(correlated_sweep):
    """The caption names the resampled units with the noun in the plural and the
    parenthesis kept: "17 training runs (run_id)", not "17 training run (run_id)s"."""
    from archfit.laws.inference.fitting import fit

    df = correlated_sweep(seed=9, n_shapes=14, n_tokens=4)
    how = fit(df, "depth-joint", bootstrap=20, seed=0, heldout=False).interval_provenance()
    assert how is not None and "of its 14 training runs (run_id)" in str(how), how
    grouped = fit(df, "depth-joint", bootstrap=20, seed=0, heldout=False, group=["n_layer"])
    assert "groups (rows sharing n_layer)" in str(grouped.interval_provenance())


def test_a_cell_unit_with_its_explanation_takes_the_plural_on_its_noun():
    """The surface's unit reads "(size, tokens) cells: the runs of one size and token count",
    not "... token counts"."""
    from archfit.laws.inference.artifact import _plural

    assert (_plural("(size, tokens) cell: the runs of one size and token count")
            == "(size, tokens) cells: the runs of one size and token count")
    assert _plural("training run (run_id)") == "training runs (run_id)"
