"""archfit validate: the recommended shape and its rivals trained at the target, and judged."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from archfit.recommending import validation as va
from archfit.laws import Fit
from archfit.laws.shape.levine import optimal_depth
from archfit.sweep import load_spec
from conftest import tiny_spec

B = 0.0555  # Levine's slope as quoted by BigScience: ln d = 5.039 + 0.0555 L

def spec_file(tmp_path: Path, budget: str = "tokens = 1e5") -> str:
    return tiny_spec(tmp_path / "tiny.toml", budget=budget)


def levine_fit(depth: float, N: float, name: str = "planted") -> Fit:
    """A Levine-form fit whose optimum at N is ``depth`` layers (b as Levine's)."""
    a = math.log(math.sqrt(N / (12 * depth))) - B * depth
    f = Fit(law="levine", params={"a": a, "b": B}, name=name)
    assert abs(optimal_depth(a, B, N) - depth) < 1e-6 * depth
    return f


# ----------------------------------------------------------------------------- planning
@pytest.mark.parametrize("depth,k,want", [(4, 4, [1, 2, 8, 16]), (1, 4, [2, 4, 8, 16]),
                                          (2, 4, [1, 4, 8, 16]), (12, 2, [6, 24]),
                                          (3, 4, [1, 2, 6, 12]), (8, 0, [])])
def test_rival_depths_spread_shallower_and_deeper(depth, k, want):
    assert va.rival_depths(depth, k) == want


def test_plan_is_a_sweep_spec_of_the_recommendation_and_its_rivals(tmp_path):
    spec = spec_file(tmp_path)
    p = va.plan(levine_fit(8, 1e5), 1e5, spec, alternatives=4, seeds=2)
    assert [c.role for c in p.candidates][0] == "recommended"
    assert p.candidates[0].shape.n_layer == 8
    depths = [c.shape.n_layer for c in p.candidates]
    assert depths[:3] == [8, 2, 4] and 12 <= depths[3] <= 20 and 24 <= depths[4] <= 40, depths
    for c in p.candidates:  # same size, the sweep's recipe
        assert abs(c.shape.params_non_embedding / 1e5 - 1) <= 0.15
        assert (c.shape.vocab_size, c.shape.n_ctx, c.shape.d_model // c.shape.n_head) == \
            (256, 64, 8)
    path = p.write(str(tmp_path / "v.toml"))
    s = load_spec(path)
    assert len(s.runs) == 10 and {r.config["seed"] for r in s.runs} == {0, 1}
    assert s.raw["lrs"] == [4e-3] and s.raw["budget"] == {"tokens": 1e5}
    # the same plan twice is the same runs: a validation resumes
    again = va.plan(levine_fit(8, 1e5), 1e5, spec, alternatives=4, seeds=2)
    again_path = again.write(str(tmp_path / "w.toml"))
    assert [r.run_id for r in load_spec(again_path).runs] == [r.run_id for r in s.runs]


def test_rivals_that_miss_the_size_are_moved_or_dropped_and_named(tmp_path):
    r = va.recipe(load_spec(spec_file(tmp_path)))
    notes: list[str] = []
    got = va.rivals(3e4, 16, 4, r, notes)  # 64 layers cannot be 3e4 params: d_model >= 8
    assert [c.role for c in got] == ["shallower", "shallower", "deeper"]
    assert all(abs(c.shape.params_non_embedding / 3e4 - 1) <= 0.15 for c in got)
    assert any(n.startswith("rival depth 64 left out: no depth near it fits 3e+04") for n in notes)


def row(measured: float, sd: float | None, seeds: int = 2, n_layer: int = 4,
        role: str = "shallower") -> dict:
    return {"role": role, "n_layer": n_layer, "d_model": 64, "measured": measured, "sd": sd,
            "seeds": seeds}


@pytest.mark.parametrize("rows,want,needle", [
    ([row(2.40, 0.01, role="recommended"), row(2.50, 0.01), row(2.60, 0.01)], "held",
     "has the lowest loss"),
    ([row(2.42, 0.01, role="recommended"), row(2.41, 0.01), row(2.60, 0.01)], "held",
     "within the seed noise of the best"),
    ([row(2.42, 0.01, role="recommended"), row(2.41, 0.01, n_layer=1), row(2.60, 0.01)],
     "held", "the recommended shape (4 layers) is within the seed noise of the best (1 layer):"),
    ([row(2.60, 0.01, role="recommended", n_layer=16), row(2.40, 0.01, n_layer=2),
      row(2.45, 0.01)], "missed", "shallower 2 x 64 beats the recommended 16 x 64 by 0.2000"),
    ([row(2.40, 0.20, role="recommended"), row(2.45, 0.20), row(2.50, 0.20)], "inconclusive",
     "within the seed noise"),
    ([row(2.40, None, 1, role="recommended"), row(2.50, None, 1)], "inconclusive",
     "one seed per shape"),
    ([row(None, None, 0, role="recommended"), row(2.5, 0.01)], "inconclusive",
     "no finished run"),
])
def test_verdict_held_missed_inconclusive(rows, want, needle):
    v, why = va.verdict(rows, va.noise_threshold(rows))
    assert v == want and needle in why, why


def test_the_noise_test_is_a_pooled_two_sample_t(tmp_path):
    rows = [row(2.4, 0.03, 3), row(2.5, 0.04, 3)]
    n = va.noise_threshold(rows)
    assert n["dof"] == 4
    assert n["pooled_sd"] == pytest.approx(math.sqrt((0.03 ** 2 * 2 + 0.04 ** 2 * 2) / 4))
    assert n["t"] == pytest.approx(2.776, abs=1e-3)  # t(0.975, 4)


@pytest.mark.slow
def test_validate_cli_bad_inputs_exit_2_with_one_line(tmp_path, archfit_cmd):
    spec = spec_file(tmp_path)
    fit = tmp_path / "f.json"
    levine_fit(8, 1e5).to_json(str(fit))
    for args, needle in [
        (["epoch2024", "--params", "1e5", "--spec", spec], "validate needs a law that "
                                                           "recommends a shape"),
        ([str(fit), "--params", "1e5", "--spec", str(tmp_path / "no.toml")],
         "no such sweep spec"),
        ([str(fit), "--params", "1e5", "--spec", spec, "--plan-only"], "needs -o FILE"),
        ([str(fit), "--params", "1e5", "--spec", spec, "--seeds", "0"], "--seeds"),
    ]:
        r = subprocess.run(archfit_cmd("validate", *args), capture_output=True, text=True)
        assert r.returncode == 2, r.stderr
        assert needle in r.stderr and "Traceback" not in r.stderr, r.stderr
    out = tmp_path / "v.toml"
    out.write_text("mine")
    r = subprocess.run(archfit_cmd("validate", str(fit), "--params", "1e5", "--spec", spec,
                                   "--plan-only", "-o", str(out)), capture_output=True, text=True)
    assert r.returncode == 2 and out.read_text() == "mine", r.stderr


def test_plan_only_writes_a_spec_that_sweep_run_accepts(tmp_path, archfit_cmd):
    spec = spec_file(tmp_path)
    fit = tmp_path / "f.json"
    levine_fit(2, 1e5).to_json(str(fit))
    out = tmp_path / "validate.toml"
    r = subprocess.run(archfit_cmd("validate", str(fit), "--params", "1e5", "--spec", spec,
                                   "--plan-only", "-o", str(out), "--seeds", "3"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = load_spec(str(out))
    assert len(s.runs) == 15 and s.runs[0].shape.n_layer == 2
    r = subprocess.run(archfit_cmd("sweep", "plan", str(out), "--json"), capture_output=True,
                       text=True)
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 15, r.stderr


# ------------------------------------------------------------------- real training runs
@pytest.mark.slow
def test_validate_trains_judges_and_resumes(tmp_path, archfit_cmd):
    """Real runs (8 steps each): every shape gets its seeds, the table, the figure and the
    JSON; a second call trains nothing and judges the same runs."""
    spec = spec_file(tmp_path, "steps = 8")
    fit = tmp_path / "f.json"
    levine_fit(2, 5e4).to_json(str(fit))
    args = archfit_cmd("validate", str(fit), "--params", "5e4", "--spec", spec,
                       "--alternatives", "2", "--out", str(tmp_path / "v"), "--json")
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    depths = [s["n_layer"] for s in d["shapes"]]
    assert d["verdict"] in va.VERDICTS and d["shapes"][0]["role"] == "recommended"
    assert len(set(depths)) == 3
    assert all(s["seeds"] == 2 and len(s["losses"]) == 2 for s in d["shapes"])
    assert sorted(s["rank"] for s in d["shapes"]) == [1, 2, 3]
    assert d["noise"]["dof"] == 3 and d["coverage"] is None  # levine predicts no loss
    assert Path(d["figure"]).stat().st_size > 10_000
    again = subprocess.run(args, capture_output=True, text=True)
    assert again.returncode == 0 and "run " not in again.stderr.replace("runs on", "")
    assert json.loads(again.stdout)["shapes"] == d["shapes"]


@pytest.mark.slow
def test_a_fit_whose_optimum_is_4x_too_deep_is_missed(tmp_path, archfit_cmd):
    """The done-when: a deliberately wrong fit (optimum 8 layers at 1e5, where short CPU runs
    are best at 1-2 layers) is trained against its rivals and reported `missed`."""
    spec = spec_file(tmp_path)
    fit = tmp_path / "wrong.json"
    levine_fit(8, 1e5, "wrong").to_json(str(fit))
    r = subprocess.run(archfit_cmd("validate", str(fit), "--params", "1e5", "--spec", spec,
                                   "--out", str(tmp_path / "v"), "--json"),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    shapes = {s["n_layer"]: s for s in d["shapes"]}
    best = min(d["shapes"], key=lambda s: s["measured"])
    print("\nmeasured (mean over 2 seeds): "
          + ", ".join(f"{k} layers {v['measured']:.4f}" for k, v in sorted(shapes.items()))
          + f"\nverdict: {d['verdict']}: {d['reason']}")
    assert best["n_layer"] * 4 <= 8, best  # the measured optimum is 4x shallower (or more)
    assert d["verdict"] == "missed", d["reason"]
    assert f"beats the recommended 8 x {shapes[8]['d_model']:,}" in d["reason"]
