"""Integrity, round five (issue 76), the Python API and the published fits: wrong types get
the typed error in one line, a fit given as its JSON mapping is read, a near-optimal set whose
end the law leaves open says so, a point estimate far past its runs is uninformative, and a
table too large to fit in minutes is refused at once with what to do."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import polars as pl
import pytest

import archfit
from archfit.designing import DesignError
from archfit.errors import FitInputError
from archfit.laws import load_fit

POOL = pl.DataFrame({"params": [2e9, 4e9, 2e9, 4e9], "tokens": [4e10, 4e10, 8e10, 8e10]})


@pytest.mark.parametrize("target", [7.2e5, "7.2e5", None])
def test_design_names_a_target_that_is_not_a_target(target):
    with pytest.raises(DesignError, match="give a Target, e.g. Target\\('params', 7.2e5\\)"):
        archfit.design(POOL, law="chinchilla", target=target, budget_frac=0.5)


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


def test_a_replay_refuses_duplicate_rows_unless_deduped():
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(7, 9, 40), 10 ** rng.uniform(8, 10, 40)
    df = pl.DataFrame({"params": N, "tokens": D,
                       "loss": 1.8 + 480 / N ** 0.35 + 2000 / D ** 0.37}).sort("params")
    done, target = pl.concat([df.head(34), df.head(34)]), df.tail(6)
    with pytest.raises(DesignError, match="34 of 68 rows of the replay table are exact"):
        archfit.designing.replay(done, target, law="chinchilla", budget_frac=0.3)
    r = archfit.designing.replay(done, target, law="chinchilla", budget_frac=0.3, dedupe=True,
                                 bootstrap=10, final_bootstrap=10)
    assert any("dropped 34 duplicate row(s)" in n for n in r["notes"])
    assert r["target"]["design"]["mean_abs_rel_error"] < 0.01  # the law, exactly


def test_a_table_too_large_to_fit_in_minutes_is_refused_at_once():
    from archfit.laws.fitting import MAX_FIT_ROWS, fit

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
def test_a_million_noisy_rows_are_refused_within_two_minutes_under_4_gb(tmp_path):
    """1,000,000 rows of 17 configurations with 1% noise on the loss (no exact duplicates):
    fit and design --results each answer in one line, within 2 minutes under 4 GB of
    address space."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import _joint
    from test_integrity4 import _limited

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
