"""Priors and fixed parameters: a small sweep calibrates a published law instead of
re-deriving it, and the posterior moves toward the data as the data grow."""

from __future__ import annotations

import json
import math

import pytest

from archfit.errors import FitInputError
from archfit.laws import load_fit
from archfit.laws.inference.fitting import fit

TRUTH = {"a": 5.039, "b": 0.0555}
OFF = {"a": (5.6, 0.4), "b": (0.09, 0.03)}  # a prior centred away from the planted law


def test_posterior_moves_toward_the_data_as_data_grow(levine_synthetic):
    """Same prior, more and cleaner size classes: the posterior's distance from the planted
    (a, b) shrinks and its CI narrows."""
    thin = levine_synthetic(sizes=(2e6, 1e7), noise=0.01, seed=1)
    rich = levine_synthetic(sizes=(2e6, 5e6, 1e7, 5e7, 2.5e8), noise=0.001, seed=1)
    fits = [fit(df, law="levine", prior=OFF, bootstrap=100) for df in (thin, rich)]

    def dist(f):
        return abs(f.params["b"] - TRUTH["b"]) / OFF["b"][1]

    assert dist(fits[1]) < dist(fits[0])
    assert dist(fits[0]) < abs(OFF["b"][0] - TRUTH["b"]) / OFF["b"][1]  # data pull already
    widths = [f.ci["b"][1] - f.ci["b"][0] for f in fits]
    assert widths[1] < widths[0]
    lo, hi = fits[1].ci["b"]
    assert lo <= TRUTH["b"] <= hi


def test_published_prior_on_demo_like_data_covers_the_published_depth(levine_synthetic):
    """Three tiny, noisy size classes (the demo's situation): alone they say little; with the
    published law as a prior the 1e9 depth CI includes the published law's own value."""
    df = levine_synthetic(sizes=(2e5, 4e5, 8e5), noise=0.01, seed=3)
    f = fit(df, law="levine", prior="levine2020", prior_widths={"a": 0.5, "b": 0.02},
            bootstrap=200)
    pub = load_fit("levine2020")
    published = pub.law_obj.optimum(pub.params, 1e9)[0]
    lo, hi = f.derived_ci["n_layer_opt@1e9"]
    assert lo <= published <= hi
    assert f.prior["source"] == "levine2020" and f.prior["prior"]["b"] == [0.0555, 0.02]
    assert isinstance(f.prior["data_only"], dict)  # the data-only fit, side by side
    text = f.summary()
    assert "prior: levine2020" in text and "data alone" in text and "posterior" in text


def test_fix_holds_a_parameter(levine_synthetic):
    f = fit(levine_synthetic(), law="levine", fix={"b": 0.0555}, bootstrap=50)
    assert f.params["b"] == 0.0555 and f.ci["b"] == [0.0555, 0.0555]
    assert f.params["a"] == pytest.approx(TRUTH["a"], abs=0.05)
    assert "b's CI collapses" not in " ".join(f.trust["reasons"])  # fixed is not a bound


def test_prior_widths_from_an_artifacts_ci(levine_synthetic, tmp_path):
    base = fit(levine_synthetic(seed=5), law="levine", bootstrap=100)
    base.to_json(tmp_path / "base.json")
    f = fit(levine_synthetic(sizes=(1e7, 5e7), seed=6), law="levine",
            prior=str(tmp_path / "base.json"), bootstrap=0)
    lo, hi = base.ci["b"]
    assert f.prior["prior"]["b"][1] == pytest.approx((hi - lo) / 3.92)


def test_joint_law_takes_a_prior_and_a_fix(joint_synthetic):
    df, t = joint_synthetic(seed=2, n_shapes=12)
    f = fit(df, law="depth-joint", prior={"q": (0.25, 0.01)}, fix={"beta": t["beta"]},
            bootstrap=0)
    assert f.params["beta"] == pytest.approx(t["beta"])
    assert abs(f.params["q"] - 0.25) < abs(f.prior["data_only"]["q"] - 0.25) + 1e-9


@pytest.mark.parametrize("kw,needle", [
    (dict(law="levine", tie={"a": "b"}), "takes no --tie"),
    (dict(law="levine", fix={"c": 1.0}), "not a parameter of levine"),
    (dict(law="levine", prior="levine2020"), "carries no uncertainty for 'a'"),
    (dict(law="levine", prior={"b": (0.05, 0.0)}), "must be positive"),
    (dict(law="levine", prior="epoch2024"), "shares no free parameter"),
])
def test_bad_priors_are_refused(levine_synthetic, kw, needle):
    with pytest.raises(FitInputError, match=needle):
        fit(levine_synthetic(), bootstrap=0, **kw)


def test_cli_prior_and_fix(tmp_path, cli, levine_synthetic):
    data = tmp_path / "d.parquet"
    levine_synthetic(sizes=(2e5, 4e5, 8e5), noise=0.01, seed=3).write_parquet(data)
    r = cli("fit", data, "--law", "levine", "--prior", "levine2020:a=0.5,b=0.02",
            "--bootstrap", "50", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["prior"]["source"] == "levine2020" and math.isfinite(d["params"]["a"])
    for args, needle in ((["--fix", "b"], "KEY=VALUE"), (["--fix", "b=x"], "not a number"),
                         (["--prior", ":a=1"], "name a published fit")):
        r = cli("fit", data, "--law", "levine", *args)
        assert r.exit_code == 2 and needle in r.output and len(r.output.strip().splitlines()) == 1
