"""isoFLOP profiles (``--law isoflop``): the minima and exponents against closed forms, Marin's
sweeps read as the README reads them, and one clear line for each bad input."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from archfit.errors import FitError, FitInputError
from archfit.laws.compute.chinchilla import compute_optimal as chinchilla_optimum
from archfit.laws.inference.selection import fit
from contracts import ISOFLOP_TRUTH, isoflop_sweep

ROOT = Path(__file__).resolve().parents[1]
MARIN = ["--map", "params=parameter_count", "--map", "tokens=throughput/total_tokens",
         "--map", "loss=eval/paloma/macro_loss", "--map", "flops=throughput/total_gflops*1e9"]


def test_symmetric_profiles_recover_hoffmanns_split():
    """With alpha = beta, each budget's loss is symmetric in ln N about Hoffmann et al.'s
    N_opt (eq. 4), so the parabola's minimum is it and the exponent is exactly 1/2."""
    f = fit(isoflop_sweep(0, noise=0.0), "isoflop", bootstrap=0)
    assert f.params["a"] == pytest.approx(0.5, abs=1e-6)
    assert f.params["b"] == pytest.approx(0.5, abs=1e-6)
    for p in f.extra["budgets"]:
        n, _ = chinchilla_optimum(ISOFLOP_TRUTH, p["C"])
        assert p["N_opt"] == pytest.approx(n, rel=1e-6)
    # beyond the budgets, the power law keeps the closed form's split
    n, d = chinchilla_optimum(ISOFLOP_TRUTH, 1e23)
    N, D = f.law_obj.compute_optimal(f.params, 1e23)
    assert N == pytest.approx(n, rel=1e-4) and D == pytest.approx(d, rel=1e-4)


def test_least_loss_follows_chinchillas_frontier():
    """The minima's loss on Chinchilla's frontier: E + const C^-(alpha beta / (alpha + beta))."""
    t = ISOFLOP_TRUTH
    f = fit(isoflop_sweep(0, noise=0.0, half_width=0.3,
                          budgets=(1e17, 1e18, 1e19, 1e20, 1e21, 1e22)), "isoflop", bootstrap=0)
    assert f.params["alpha_C"] == pytest.approx(t["alpha"] * t["beta"] / (t["alpha"] + t["beta"]),
                                                rel=0.02)
    assert f.params["E"] == pytest.approx(t["E"], rel=0.02)


def test_noisy_sweep_intervals_cover_the_planted_exponent():
    f = fit(isoflop_sweep(3, noise=0.003, sizes=9), "isoflop", bootstrap=100, seed=1)
    lo, hi = f.ci["a"]
    assert lo < 0.5 < hi and hi - lo < 0.2


def test_edge_minimum_is_named_and_left_out():
    df = isoflop_sweep(0, noise=0.0)
    C = 6 * df["params"] * df["tokens"]
    # the largest budget's sizes all above its optimum: its minimum lies past the end
    keep = (C < 5e20) | (df["params"] > 1.2 * chinchilla_optimum(ISOFLOP_TRUTH, 1e21)[0])
    f = fit(df.filter(keep), "isoflop", bootstrap=0)
    left = [p for p in f.extra["budgets"] if not p["used"]]
    assert [round(math.log10(p["C"])) for p in left] == [21]
    assert any("1e+21 FLOPs left out of the power laws" in n and "end of its runs" in n
               for n in f.notes)
    assert f.params["a"] == pytest.approx(0.5, abs=1e-6)


def test_predict_on_the_profiles_refuses_beyond_them():
    f = fit(isoflop_sweep(0), "isoflop", bootstrap=50)
    inside = f.predict(params=[3e9], tokens=[1e19 / 6 / 3e9], interval=0.95)
    assert inside["low"][0] < inside["predicted"][0] < inside["high"][0]
    with pytest.raises(FitError, match="outside the profiles"):
        f.predict(params=[3e10], tokens=[1e23 / 6 / 3e10])


def test_marin_nemotron_fits_without_its_validation_runs(cli, tmp_path):
    out = tmp_path / "iso.json"
    r = cli("fit", ROOT / "datasets/marin/isoflop-nemotron.csv", "--law", "isoflop", *MARIN,
            "--exclude", "Name=validation-optimal", "--bootstrap", "0", "--out", out)
    assert r.exit_code == 0, r.output
    assert "left out 8 row(s) whose 'Name' matches 'validation-optimal'" in r.output
    # Marin's smallest budget (3 runs, 1.8e18 FLOPs) bends the wrong way
    assert "budget 1.8e+18 FLOPs left out of the power laws: its profile curves down" in r.output
    from archfit.laws import load_fit

    f = load_fit(out)
    assert f.n_points == 88
    # one budget's minimum against numpy's own quadratic fit of the same runs
    raw = pl.read_csv(ROOT / "datasets/marin/isoflop-nemotron.csv").filter(
        pl.col("Name").str.starts_with("isoflop-1e+20"))
    c = np.polyfit(np.log(raw["parameter_count"].to_numpy()),
                   raw["eval/paloma/macro_loss"].to_numpy(), 2)
    top = max(f.extra["budgets"], key=lambda p: p["C"])
    assert top["N_opt"] == pytest.approx(math.exp(-c[1] / (2 * c[0])), rel=1e-6)


@pytest.mark.parametrize("case, message", [
    ("one budget", "2 or more FLOP budgets"),
    ("two sizes", "has 2 run(s) at 2 size(s): a profile needs 3 or more"),
    ("gflops", "check its unit (FLOPs, not GFLOPs"),
])
def test_bad_sweeps_get_one_line(case, message, cli, tmp_path):
    df = isoflop_sweep(0)
    C = 6 * df["params"] * df["tokens"]
    if case == "one budget":
        df = df.filter(C < 2e18)
    elif case == "two sizes":
        df = pl.concat([df, df.filter(C < 2e18).head(2).with_columns(
            tokens=pl.col("tokens") * 1e4)])
    else:
        df = df.with_columns(flops=6 * pl.col("params") * pl.col("tokens") / 1e9)
    path = tmp_path / "runs.csv"
    df.write_csv(path)
    r = cli("fit", path, "--law", "isoflop", "--bootstrap", "0")
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_map_factor_and_exclude_are_checked(cli, tmp_path):
    path = ROOT / "datasets/marin/isoflop-comma.csv"
    r = cli("fit", path, "--law", "isoflop", *MARIN, "--exclude", "Nme=validation")
    assert r.exit_code == 2 and "--exclude Nme=validation: no column 'Nme'" in r.output
    r = cli("fit", path, "--law", "isoflop", *MARIN, "--exclude", "Name=.")
    assert r.exit_code == 2 and "matches every row" in r.output
    r = cli("fit", path, "--law", "isoflop", *MARIN[:6], "--map", "flops=Name*1e9")
    assert r.exit_code == 2 and "column 'Name' is not numeric" in r.output


def test_api_refuses_in_types():
    with pytest.raises(FitInputError):
        fit(isoflop_sweep(0).head(7), "isoflop", bootstrap=0)


# ------------------------------------------------------------------ the sweep to run
def test_grid_compute_writes_a_spec_whose_runs_sit_on_their_budgets(cli, tmp_path):
    out = tmp_path / "iso.toml"
    r = cli("grid", "--compute", "1e18,3e18,1e19", "--sizes", "7", "--out", out)
    assert r.exit_code == 0, r.output
    from archfit.sweep.spec import load_spec

    spec = load_spec(str(out))
    assert len(spec.runs) == 21
    by_budget: dict[float, list[float]] = {}
    for run in spec.runs:
        cfg = run.train_config
        N = cfg.shape.params_non_embedding
        D = cfg.steps() * cfg.tokens_per_step  # what the run trains on, whole steps
        C = run.meta["budget_flops"]
        assert abs(6 * N * D / C - 1) < 0.05
        by_budget.setdefault(C, []).append(N)
    assert sorted(by_budget) == [1e18, 3e18, 1e19]
    for C, sizes in by_budget.items():
        # log-spaced about 20 tokens per parameter, a factor 4 either way (width steps aside)
        mid = math.sqrt(C / 120)
        assert min(sizes) == pytest.approx(mid / 4, rel=0.25)
        assert max(sizes) == pytest.approx(mid * 4, rel=0.25)
    r = cli("sweep", "plan", out)
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("args, message", [
    (["--compute", "1e18"], "2 or more budgets"),
    (["--compute", "1e18,1e19", "--sizes", "2"], "3 or more sizes"),
    (["--compute", "1e18,1e19", "--params", "1e8"], "drop --params"),
])
def test_grid_compute_refuses_in_one_line(cli, args, message):
    r = cli("grid", *args)
    assert r.exit_code == 2 and message in r.output, r.output


# ------------------------------------------------------------------ approach 1
def _curves(tmp_path, sizes=np.logspace(7, 9, 21), t=ISOFLOP_TRUTH):
    """Runs of Chinchilla's L(N, D) logged every step to 2e3 tokens per parameter: the curves'
    envelope at C is then the least loss over the sizes on C = 6 N D."""
    runs, pts = [], []
    for i, N in enumerate(sizes):
        rid = f"r{i}"
        runs.append({"run_id": rid, "params": float(N), "tokens": 2e3 * N, "loss": 0.0})
        for D in np.logspace(math.log10(N), math.log10(2e3 * N), 200):
            pts.append({"run_id": rid, "step": len(pts), "tokens": int(D),
                        "train_loss": t["E"] + t["A"] / N ** t["alpha"] + t["B"] / D ** t["beta"],
                        "val_loss": None})
    runs_df = pl.DataFrame(runs)
    runs_df = runs_df.with_columns(loss=pl.lit(2.0))
    runs_df.write_parquet(tmp_path / "s.parquet")
    pl.DataFrame(pts, schema_overrides={"val_loss": pl.Float64}).write_parquet(
        tmp_path / "s.curves.parquet")
    return tmp_path / "s.parquet"


def test_envelope_recovers_the_closed_form_exponent(cli, tmp_path):
    path = _curves(tmp_path)
    out = tmp_path / "env.json"
    r = cli("fit", path, "--law", "envelope", "--bootstrap", "0", "--out", out)
    assert r.exit_code == 0, r.output
    from archfit.laws import load_fit

    f = load_fit(out)
    # alpha = beta: N_opt grows as C^(1/2) (Hoffmann et al. eq. 4); the sizes' grid (21 over
    # two decades) and the trailing mean of the curves keep it within a few hundredths
    assert f.params["a"] == pytest.approx(0.5, abs=0.03)
    n, _ = chinchilla_optimum(ISOFLOP_TRUTH, 1e19)
    assert f.law_obj.compute_optimal(f.params, 1e19)[0] == pytest.approx(n, rel=0.15)


def test_envelope_needs_curves_with_tokens(cli, tmp_path):
    path = _curves(tmp_path)
    r = cli("fit", ROOT / "datasets/marin/isoflop-dclm.csv", "--law", "envelope", *MARIN[:6])
    assert r.exit_code == 2 and "no loss curves beside it" in r.output, r.output
    pl.read_parquet(tmp_path / "s.curves.parquet").drop("tokens").write_parquet(
        tmp_path / "s.curves.parquet")
    r = cli("fit", path, "--law", "envelope")
    assert r.exit_code == 2 and "the curves have no tokens or flops column" in r.output, r.output


def test_compare_sets_the_approaches_side_by_side(cli, tmp_path):
    """Approaches 1, 2 and 3 fitted to one planted law (alpha = beta: a = 1/2 for each) answer
    side by side, with the exponent and which fit the answer uses."""
    sweep = tmp_path / "iso.csv"
    isoflop_sweep(0, sizes=9).write_csv(sweep)
    fits = []
    for law, path in (("isoflop", sweep), ("chinchilla", sweep), ("envelope", _curves(tmp_path))):
        fits.append(tmp_path / f"{law}.json")
        r = cli("fit", path, "--law", law, "--bootstrap", "20", "--out", fits[-1])
        assert r.exit_code == 0, r.output
    r = cli("recommend", "--compute", "1e20", *sum((["--fit", f] for f in fits), []),
            "--compare", "--json")
    assert r.exit_code == 0, r.output
    import json

    rows = {row["law"].split()[0]: row for row in json.loads(r.output)["rows"]
            if row.get("role") == "compute"}
    assert rows["isoflop"]["approach"].startswith("2") and rows["isoflop"]["used"]
    assert rows["envelope"]["approach"].startswith("1")
    assert rows["chinchilla"]["approach"].startswith("3") and not rows["chinchilla"]["used"]
    for law in ("isoflop", "chinchilla", "envelope"):
        assert rows[law]["exponent"] == pytest.approx(0.5, abs=0.04), law
    text = cli("recommend", "--compute", "1e20", *sum((["--fit", f] for f in fits), []),
               "--compare").output
    assert "the answer (recommend --compute without --compare) uses isoflop" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_envelope_reads_curves_that_count_flops(cli, tmp_path):
    path = _curves(tmp_path, sizes=np.logspace(7, 9, 11))
    sizes = pl.read_parquet(path).select("run_id", "params")
    cur = pl.read_parquet(tmp_path / "s.curves.parquet").join(sizes, on="run_id")
    cur.with_columns(flops=6 * pl.col("params") * pl.col("tokens")).drop(
        "tokens", "params").write_parquet(tmp_path / "s.curves.parquet")
    r = cli("fit", path, "--law", "envelope", "--bootstrap", "0", "--json")
    assert r.exit_code == 0, r.output
    import json

    assert "tokens from the curves' flops" in r.output
    body = r.output[r.output.index("{"):]  # after the notes
    assert json.loads(body)["params"]["a"] == pytest.approx(0.5, abs=0.05)
