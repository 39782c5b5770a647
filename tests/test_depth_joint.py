"""The joint shape law on scattered sweeps: planted values recovered inside their CIs."""

from __future__ import annotations

import math

import pytest

from archfit import recommend
from archfit.laws.inference.fitting import fit


@pytest.mark.slow
def test_recovers_the_planted_optimum_relation(joint_synthetic):
    df, t = joint_synthetic(seed=0)
    assert df["n_layer"].n_unique() >= 10  # scattered shapes, not an iso-parameter grid
    f = fit(df, law="depth-joint", bootstrap=200, seed=1)
    assert f.bootstrap["unit"].startswith("training run") and f.bootstrap["n_failed"] == 0
    for k in ("q", "p", "alpha", "beta"):
        lo, hi = f.ci[k]
        assert lo <= t[k] <= hi, (k, f.params[k], f.ci[k])
    top = df["params"].max()
    planted = math.exp(t["p"] + t["q"] * math.log(100 * top))
    lo, hi = f.optimum_ci(100 * top)["n_layer"]
    assert lo <= planted <= hi, (planted, lo, hi)
    assert f.trust["verdict"] == "informative", f.trust


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.slow
def test_recovery_holds_for_other_draws(joint_synthetic, seed):
    df, t = joint_synthetic(seed=seed, n_shapes=20)
    f = fit(df, law="depth-joint", bootstrap=100, seed=seed)
    top = df["params"].max()
    planted = math.exp(t["p"] + t["q"] * math.log(100 * top))
    lo, hi = f.optimum_ci(100 * top)["n_layer"]
    assert lo <= planted <= hi, (seed, planted, lo, hi)


def test_ranks_shapes_by_predicted_loss_and_reads_widths_without_params(joint_synthetic):
    df, t = joint_synthetic(seed=3)
    f = fit(df.drop("params"), law="depth-joint", bootstrap=50)  # N counted by the shape core
    r = recommend(params=1e9, fit=f, n_ctx=2048)
    planted = math.exp(t["p"] + t["q"] * math.log(1e9))
    assert abs(math.log(r.shape.n_layer / planted)) < 0.25
    pens = [a["loss_penalty"] for a in r.alternatives_records]
    assert pens[0] == 0 and min(pens) >= 0


def test_one_token_count_folds_the_data_term(joint_synthetic):
    df, _ = joint_synthetic(seed=4, n_tokens=1)
    f = fit(df, law="depth-joint", bootstrap=0)
    assert f.params["B"] == 0 and any("folded into E" in n for n in f.notes)
