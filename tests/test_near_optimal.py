"""The near-optimal set (archfit.recommending.near_optimal) and the loss model that prices alternatives:
closed forms computed here, not by the code under test."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from archfit.laws import Fit
from archfit.laws.published import PUBLISHED
from archfit.recommending.near_optimal import near_optimal
from archfit.recommending import recommend

ROOT = Path(__file__).resolve().parent.parent
KAPLAN = 0.03 / math.log(8) ** 2  # Kaplan et al. 2020, Fig. 5: (6, 4288) within 3% of (48, 1600)


def levine_depth(N: float, a: float = 5.039, b: float = 0.0555) -> float:
    """Levine's optimal depth at N by bisection on 12 L e^(2 (a + b L)) = N."""
    lo, hi = 0.01, 1000.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if 12 * mid * math.exp(2 * (a + b * mid)) < N else (lo, mid)
    return 0.5 * (lo + hi)


def joint_fit(q: float, kappa: float = 0.01, p: float | None = None) -> Fit:
    """A stated depth-joint fit: optimum e^p N^q (40 layers at 1e9 unless ``p`` is given)."""
    p = math.log(40) - q * math.log(1e9) if p is None else p
    return Fit(law="depth-joint", params={"E": 1.8, "A": 400.0, "alpha": 0.34, "B": 2000.0,
                                          "beta": 0.36, "kappa": kappa, "p": p, "q": q})


def test_the_set_of_a_bowl_is_its_closed_form():
    # kappa (ln L - ln L*)^2 <= tol * level: L* e^(+-sqrt(tol level / kappa))
    f = joint_fit(q=0.2, kappa=0.02)
    N, tol = 7e9, 0.005
    P = f.params
    L_star = math.exp(P["p"] + P["q"] * math.log(N))
    level = P["E"] + P["A"] / N ** P["alpha"] + P["B"] / (20 * N) ** P["beta"]
    w = math.sqrt(tol * level / P["kappa"])
    n = near_optimal(f, N, tol)
    assert n["n_layer"][0] == pytest.approx(L_star * math.exp(-w), rel=1e-6)
    assert n["n_layer"][1] == pytest.approx(L_star * math.exp(w), rel=1e-6)
    assert n["centre"] == pytest.approx(L_star) and n["centre_from"] == f.label
    assert n["d_model"][0] > n["d_model"][1]  # the shallow end is the wide one
    wider = near_optimal(f, N, 4 * tol)  # four times the tolerance: twice the log reach
    assert math.log(wider["n_layer"][1] / L_star) == pytest.approx(2 * w, rel=1e-6)


def test_a_flat_fit_falls_back_to_the_prior_and_says_so():
    n = near_optimal(joint_fit(q=0.2, kappa=1e-12), 7e9)
    assert n["basis"].startswith("prior: the fit's loss is flat")
    assert n["loss_model"]["law"] == "levine2020"
    w = math.sqrt(0.005 / KAPLAN)  # the prior's curvature about the fit's own optimum
    L_star = 40 * (7e9 / 1e9) ** 0.2
    assert n["n_layer"][1] == pytest.approx(L_star * math.exp(w), rel=1e-6)


def test_an_unlocated_optimum_is_answered_by_the_set_about_the_prior():
    # q on its bound 2: the fit's optimum at 7e9 is thousands of layers; the answer is the
    # fit's curvature about Levine's optimum, and the pick its centre
    import warnings

    f = joint_fit(q=2.0, kappa=0.005)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = recommend(7e9, fit=f, family="gpt2")  # no TP-8 width steps to move the depth
    n = r.near_optimal
    L_lev = levine_depth(7e9)
    assert n["centre"] == pytest.approx(L_lev, rel=1e-3) and "q is at its bound 2" in n["basis"]
    assert abs(r.shape.n_layer - L_lev) <= 2 and 16 <= r.shape.n_layer <= 128
    assert n["n_layer"][0] < 32 and n["n_layer"][1] > 40
    assert "not located by this fit" in r.text()
    pens = [a["loss_penalty"] for a in r.alternatives_records]
    assert pens[0] == 0 and min(pens) >= 0


def test_recommend_without_a_fit_prices_every_alternative(cli):
    r = cli("recommend", "--params", "7e9", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    lm = d["loss_model"]
    assert lm["law"] == "levine2020" and "Kaplan" in lm["source"] and "Levine" in lm["source"]
    L_star = levine_depth(7e9)
    assert d["n_layer_opt"] == pytest.approx(L_star, rel=1e-3)
    for a in d["alternatives"]:
        want = KAPLAN * (math.log(a["n_layer"] / L_star) ** 2
                         - math.log(d["n_layer"] / L_star) ** 2)
        assert a["loss_penalty"] == pytest.approx(want, abs=1e-9)
        ci = a["loss_penalty_ci"]  # the assumed range: half to twice the curvature
        assert ci["low"] == pytest.approx(want / 2, abs=1e-9)
        assert ci["high"] == pytest.approx(2 * want, abs=1e-9) and ci["kind"] == "assumed"
    n = d["near_optimal"]
    w = math.sqrt(0.005 / KAPLAN)
    assert n["tolerance"] == 0.005 and n["rule"]
    assert n["n_layer"] == pytest.approx([L_star * math.exp(-w), L_star * math.exp(w)], rel=1e-6)
    lo_ci, hi_ci = n["ci"]["n_layer_low"], n["ci"]["n_layer_high"]
    assert lo_ci["low"] < n["n_layer"][0] < lo_ci["high"]
    assert hi_ci["low"] < n["n_layer"][1] < hi_ci["high"]
    assert lo_ci["kind"] == hi_ci["kind"] == "assumed" and lo_ci["level"] is None
    text = cli("recommend", "--params", "7e9").output
    assert "near-optimal (predicted loss within 0.50%" in text and "the pick:" in text


@pytest.mark.parametrize("tol", ["0", "1.5", "-0.01"])
def test_a_tolerance_outside_0_1_is_refused_in_one_line(cli, tol):
    r = cli("recommend", "--params", "7e9", "--tolerance", tol)
    assert r.exit_code == 2 and "tolerance" in r.stderr and len(r.stderr.splitlines()) == 1
    assert "Traceback" not in r.output + r.stderr


def test_the_published_curvature_is_listed_with_its_source():
    c = PUBLISHED["levine2020"]["extra"]["curvature_rel"]
    assert c["value"] == pytest.approx(KAPLAN) and c["range"] == pytest.approx(
        [KAPLAN / 2, 2 * KAPLAN])
    assert "Fig. 5" in c["source"]


def test_the_extrapolation_term_grows_with_distance_past_the_check():
    import numpy as np

    from archfit.laws.inference.bands import extrapolation_rate

    # held-out rows at 2x and 4x the largest fitted size, missing by 2% and 4% beyond intervals
    # of +-1%: a miss of 1% per unit ln N past the check's median reach, at rank ceil(3 x 0.95)
    pred = np.array([1.0, 1.0, 1.0])
    lo, hi = pred * math.exp(-0.01), pred * math.exp(0.01)
    actual = pred * np.exp([0.01 + 0.02, 0.01 + 0.04, 0.0])
    N = np.array([2e8, 4e8, 3e8])
    r = extrapolation_rate(pred, lo, hi, actual, N, 1e8, 0.95)
    want = max(0.02 / math.log(2), 0.04 / math.log(4), 0.0)
    assert r["rate"] == pytest.approx(want) and r["distance"] == pytest.approx(math.log(3))
    covered = extrapolation_rate(pred, lo, hi, pred, N, 1e8, 0.95)
    assert covered["rate"] == 0.0


@pytest.mark.slow
def test_chinchilla_shapes_answer_7e9_and_7e10_with_a_sane_set():
    """A public sweep: Epoch's 245 Chinchilla points with Table A9's shapes. The
    depth-joint fit of every row cannot locate the optimum (q on its bound); the answer is the
    set, and published ~7B depths (32, 40) are inside it."""
    import warnings

    import polars as pl

    from archfit.laws.inference.fitting import fit

    df = pl.read_csv(ROOT / "datasets" / "chinchilla_epoch2024_shapes.csv")
    df = df.select(pl.col("params_non_embedding").alias("params"), "tokens", "loss", "n_layer",
                   "d_model")
    f = fit(df, "depth-joint", bootstrap=30)
    for N in (7e9, 7e10):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = recommend(N, fit=f)
        lo, hi = r.near_optimal["n_layer"]
        assert 16 <= r.shape.n_layer <= 128, (N, r.shape)
        assert lo <= 32 and 40 <= hi, (N, lo, hi)
        assert hi < 1000  # never thousands of layers


def test_the_shipped_join_is_a_fresh_join():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "join_chinchilla_shapes.py"),
                        "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = (ROOT / "datasets" / "chinchilla_epoch2024_shapes.csv").read_text().splitlines()
    assert len(rows) == 246  # 245 points and the header
