"""A new kind of law is one record: this file defines a kind (a base whose laws answer the best
dropout rate at a size), its Kind (what it answers, how a request asks for it, the stage that
applies it, the contract's check), and a law of it, registers both, and runs fit -> recommend ->
`archfit laws` through the API and the CLI, with no file under archfit/ edited for it. The law is
a toy (dropout* = a * N^-b), not a published one; the planted truth is the independent answer."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from archfit.laws import KINDS, LAWS, Kind, Law, kinds, register, register_kind
from archfit.laws.base import Estimate
from archfit.laws.inference.fitting import fit
from archfit.recommending import recommend

A, B = 2.0, 0.15  # planted: dropout* = 2 N^-0.15


class DropoutLaw(Law):
    """A law of the best dropout rate at a size."""

    role = "dropout"

    def best_dropout(self, params, N):  # type: ignore[no-untyped-def]
        raise NotImplementedError


def dropout_stage(ctx):  # type: ignore[no-untyped-def]
    """The kind's stage: the best dropout at the recommendation's size."""
    law, f, rec = ctx.fit.law_obj, ctx.fit, ctx.recommendation
    value = law.best_dropout(f.params, rec.target_params)
    return {"value": value, "law": f.label,
            "text": f"best dropout {value:.3g} at N = {rec.target_params:.3g} ({f.label})"}


def dropout_check(f):  # type: ignore[no-untyped-def]
    assert 0 < f.law_obj.best_dropout(f.params, 1e9) < 1


KIND = Kind(DropoutLaw, "the best dropout rate at a size (toy)", "a dropout fit (toy)",
            stage=dropout_stage, check=dropout_check)
register_kind(KIND)


@register
class PowerDropout(DropoutLaw):
    """dropout* = a · N^-b: per size the vertex of a parabola in the dropout, then a power law."""

    name = "toy-power-dropout"
    formula = "dropout* = a * N^-b  (toy law defined in tests/test_kinds.py)"
    description = "Per size the best dropout (a parabola's vertex), then a power law in N."
    columns = ("loss", "params", "dropout")
    param_names = ("a", "b")
    min_points = 6
    default_targets = (1e9,)

    def _optima(self, data):  # type: ignore[no-untyped-def]
        N, p, loss = (np.asarray(data[c], float) for c in ("params", "dropout", "loss"))
        out = []
        for n in np.unique(N):
            m = N == n
            if len(np.unique(p[m])) < 3:  # a resample that drew too few: no parabola there
                continue
            c2, c1, _ = np.polyfit(p[m], loss[m], 2)
            out.append((n, -c1 / (2 * c2)))
        return np.array(out).T

    def fit_point(self, data, start=None, *, full=True):  # type: ignore[no-untyped-def]
        N, opt = self._optima(data)
        slope, lna = np.polyfit(np.log(N), np.log(opt), 1)
        return Estimate(np.array([math.exp(lna), -slope]),
                        extra={"residual_space": "ln dropout*",
                               "optima": [[float(n), float(v)] for n, v in zip(N, opt)]})

    def residuals(self, params, data, extra):  # type: ignore[no-untyped-def]
        N, opt = np.array(extra["optima"]).T
        return np.log(opt), np.log(params["a"] * N ** -params["b"])

    def predict(self, params, data):  # type: ignore[no-untyped-def]
        return params["a"] * np.asarray(data["params"], float) ** -params["b"]

    def heldout(self, data):  # type: ignore[no-untyped-def]
        return {"ok": False, "reason": "not defined for the toy law"}

    def best_dropout(self, params, N):  # type: ignore[no-untyped-def]
        return params["a"] * N ** -params["b"]


@pytest.fixture(scope="module", autouse=True)
def _unregister_after():
    yield
    LAWS.pop(PowerDropout.name, None)
    KINDS.pop(DropoutLaw.role, None)


def planted(seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for N in (1e6, 1e7, 1e8, 1e9, 1e10):
        best = A * N ** -B
        for p in np.linspace(0.02, 0.42, 9):  # every column positive, as prepare asks
            loss = 10 * N ** -0.07 + 0.5 * (p - best) ** 2 + rng.normal(0, 1e-5)
            rows.append({"params": N, "dropout": float(p), "loss": loss})
    return pl.DataFrame(rows)


def test_the_kind_is_listed_beside_the_built_in_ones():
    assert KIND in kinds() and kinds()[0].role == "shape"
    with pytest.raises(TypeError, match="role 'dropout' is DropoutLaw's"):
        register_kind(Kind(type("Other", (Law,), {"role": "dropout"}), "another"))


def test_a_law_of_the_new_kind_passes_the_law_contract(tmp_path):
    from contracts import check_law

    check_law(PowerDropout.name, planted(), tmp_path)


def test_recommend_applies_the_new_kinds_stage(tmp_path):
    f = fit(planted(), law=PowerDropout.name, bootstrap=50)
    assert f.params["a"] == pytest.approx(A, rel=0.05)
    assert f.params["b"] == pytest.approx(B, rel=0.05)
    r = recommend(params=1e9, fit=["levine2020", f])
    assert r.extras["dropout"]["value"] == pytest.approx(A * r.target_params ** -B, rel=0.05)
    assert "best dropout" in r.text() and r.to_dict()["extras"]["dropout"]["law"] == f.label
    bare = recommend(params=1e9, fit="levine2020")  # no fit of the kind: no stage, no record
    assert "dropout" not in bare.extras


def test_the_new_kind_through_the_cli(tmp_path, cli):
    data = tmp_path / "runs.parquet"
    planted(1).write_parquet(data)
    rows = json.loads(cli("laws", "--json").output)["laws"]
    mine = [r for r in rows if r["law"] == PowerDropout.name]
    assert mine and mine[0]["role"] == "dropout" and mine[0]["answers"] == KIND.answers
    out = tmp_path / "dropout.json"
    r = cli("fit", data, "--law", PowerDropout.name, "--bootstrap", "30", "--out", out)
    assert r.exit_code == 0, r.output
    r = cli("recommend", "--params", "1e9", "--fit", "levine2020", "--fit", out, "--json")
    assert r.exit_code == 0, r.output
    extra = json.loads(r.output)["extras"]["dropout"]
    assert extra["value"] == pytest.approx(A * 1e9 ** -B, rel=0.1)
    text = cli("recommend", "--params", "1e9", "--fit", "levine2020", "--fit", out).output
    assert "dropout: best dropout" in text
