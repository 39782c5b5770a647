"""A new law is one class in one file: this file defines a toy shape law, registers it, and runs
fit -> recommend -> plot through the API and the CLI without any edit elsewhere in archfit."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest

from archfit.laws import LAWS, Figure, MeasuredOptimum, ShapeLaw, register
from archfit.laws.base import Estimate
from archfit.laws.inference.fitting import fit
from archfit.laws.shape.optima import best_per_shape, class_optima
from archfit.plots import draw_all
from archfit.recommending import recommend


def draw_optima(fit, ax, data):
    N, L = np.array(fit.extra["optima"]).T
    ax.loglog(N, L, "o")
    ax.set_xlabel("N")
    ax.set_ylabel("optimal depth")


@register
class PowerDepth(ShapeLaw):
    """n_layer* = c · N^q: the optimal depth as a power of size (a toy, not a published law)."""

    name = "toy-power-depth"
    formula = "n_layer* = c * N^q  (toy law defined in tests/test_toy_law.py)"
    description = "Per size class the optimal depth, then a power law in N."
    columns = ("loss", "params", "n_layer")
    param_names = ("c", "q")
    min_points = 6
    default_targets = (1e9,)
    own_figures = (Figure("toy_optima", "Measured optimal depths", draw_optima),)

    def fit_point(self, data, start=None, *, full=True):
        optima, notes = class_optima(best_per_shape(data, self.classes(data), "n_layer"),
                                     "n_layer")
        N = np.array([o["params"] for o in optima])
        L = np.array([o["opt"] for o in optima])
        q, lnc = np.polyfit(np.log(N), np.log(L), 1)
        return Estimate(np.array([math.exp(lnc), q]),
                        extra={"residual_space": "ln n_layer*", "notes": notes,
                               "optima": [[float(n), float(v)] for n, v in zip(N, L)]})

    def residuals(self, params, data, extra):
        N, L = np.array(extra["optima"]).T
        return np.log(L), np.log(params["c"] * N ** params["q"])

    def predict(self, params, data):
        return params["c"] * np.asarray(data["params"], float) ** params["q"]

    def heldout(self, data):
        return {"ok": False, "reason": "not defined for the toy law"}

    def optimum(self, params, N):
        L = params["c"] * N ** params["q"]
        return L, math.sqrt(N / (12 * L))

    def shape_loss(self, params, extra, shape, N):
        return 0.05 * math.log(shape.n_layer / self.optimum(params, N)[0]) ** 2

    def measured_optima(self, extra):
        return [MeasuredOptimum(n, v, v * 0.9, v * 1.1) for n, v in extra["optima"]]



C, Q = 0.35, 0.22  # planted: n_layer* = 0.35 N^0.22


@pytest.fixture(scope="module", autouse=True)
def _unregister_after():
    yield
    LAWS.pop(PowerDepth.name, None)


def planted(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for N in (2e6, 1e7, 5e7, 2.5e8):
        Ls = C * N ** Q
        for L in np.unique(np.round(Ls * np.exp(np.linspace(-1.0, 1.0, 7))).astype(int)):
            loss = 10 * N ** -0.07 + 0.05 * math.log(L / Ls) ** 2 + rng.normal(0, 0.001)
            rows.append(dict(params=N, n_layer=float(L), loss=loss, target_params=N))
    return pl.DataFrame(rows)


def test_toy_law_passes_the_law_contract(tmp_path):
    from contracts import check_law

    check_law("toy-power-depth", planted(), tmp_path)


def test_toy_law_fit_recommend_plot_api(tmp_path):
    f = fit(planted(), law="toy-power-depth", bootstrap=100)
    assert f.params["q"] == pytest.approx(Q, abs=0.03)
    assert f.derived["n_layer_opt@1e9"] == pytest.approx(C * 1e9 ** Q, rel=0.1)
    r = recommend(params=1e9, fit=f, top=3, family="gpt2")  # widths in steps of 128
    assert abs(r.shape.n_layer - C * 1e9 ** Q) <= 1.5
    lo, hi = r.ci["n_layer"]
    assert lo < r.n_layer_opt < hi
    pens = r.alternatives["loss_penalty"].to_list()
    assert pens[0] == min(pens)  # the recommended shape has the lowest predicted penalty
    paths = draw_all(f, str(tmp_path), target=1e9, recommended=r)
    names = sorted(p.rsplit("/", 1)[-1] for p in paths)
    assert names == ["toy-power-depth-optimal_depth_vs_size.png",
                     "toy-power-depth-residuals.png", "toy-power-depth-toy_optima.png"]
    assert all((tmp_path / n).stat().st_size > 5000 for n in names)


def test_toy_law_through_the_cli(tmp_path, cli):
    data = tmp_path / "runs.parquet"
    planted(1).write_parquet(data)
    r = cli("laws", "--json")
    assert "toy-power-depth" in [row["law"] for row in json.loads(r.output)["laws"]]
    out = tmp_path / "toy.json"
    r = cli("fit", data, "--law", "toy-power-depth", "--bootstrap", "50", "--out", out)
    assert r.exit_code == 0, r.output
    r = cli("recommend", "--params", "1e9", "--fit", out, "--family", "gpt2", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["law"] == "toy-power-depth" and abs(d["n_layer"] - C * 1e9 ** Q) <= 1.5
    r = cli("plot", out, data, "-o", tmp_path / "figs", "--target", "1e9", "--json")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.output)["figures"]) == 3
