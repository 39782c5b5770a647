"""Every interval says where it comes from (fitted, published or assumed), in the JSON and in
the words; an assumed range is never called a confidence interval."""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

import numpy as np
import pytest

from archfit.interval import (ASSUMED, FITTED, GIVEN, KINDS, PUBLISHED, Interval, describe,
                              record)


INTERVAL_KEYS = ("ci", "interval", "range")
NUMBER = r"-?[\d,.]+(?:e[+-]?\d+)?%?"
PAIR = re.compile(rf"\[\s*(?:{NUMBER}|unbounded),\s*(?:{NUMBER}|unbounded)\s*\]")
KIND_WORD = re.compile(r"\b(fitted|published|assumed|given)\b")


def is_interval(v: Any) -> bool:
    """The one JSON shape of an interval (archfit.interval.Interval.to_json)."""
    return (isinstance(v, dict) and {"low", "high", "level", "kind", "method"} <= set(v)
            and v["kind"] in KINDS and (v["level"] is None) == (v["kind"] in (ASSUMED, GIVEN)))


def unlabelled(d: Any, path: str = "") -> Iterator[str]:
    """The paths of every interval-like value in a JSON tree that is not an interval in the one
    shape: a value under a key ``*_ci``, ``ci``, ``interval`` or ``range`` (an interval, a
    table of them, a list of them, or null), and any object with ``low`` and ``high``."""
    if isinstance(d, dict):
        if {"low", "high"} <= set(d) and not is_interval(d):
            yield path
        for k, v in d.items():
            here = f"{path}.{k}"
            if (k.endswith("_ci") or k in INTERVAL_KEYS) and v is not None:
                inner = (v.values() if isinstance(v, dict) and not is_interval(v) else
                         v if isinstance(v, list) else [v])
                if not all(x is None or is_interval(x) for x in inner):
                    yield here
            yield from unlabelled(v, here)
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from unlabelled(v, f"{path}[{i}]")


def kinds(d: Any) -> set[str]:
    """The kinds of every interval in a JSON tree."""
    if is_interval(d):
        return {d["kind"]}
    vals = d.values() if isinstance(d, dict) else d if isinstance(d, list) else []
    return set().union(*(kinds(v) for v in vals)) if vals else set()


def unnamed_in_text(text: str) -> list[str]:
    """The blocks of a command's text (runs of non-blank lines) that print an interval's ends,
    ``[low, high]``, without naming a kind anywhere in the block."""
    blocks = re.split(r"\n\s*\n", text)
    return [b for b in blocks if PAIR.search(b) and not KIND_WORD.search(b)]


def test_the_walk_finds_every_unlabelled_interval_and_misses_none():
    good = {"low": 1.0, "high": 2.0, "level": 0.95, "kind": "fitted", "method": "m"}
    assumed = {**good, "level": None, "kind": "assumed"}
    tree = {"ci": {"n_layer": good, "d_model": good}, "near": {"ci": {"n_layer_low": assumed,
                                                                       "n_layer_high": None}},
            "rows": [{"loss_penalty_ci": good}, {"loss_penalty_ci": [0, 1]},
                     {"low": 1, "high": 2}, {"interval": [good, good]}],
            "N_opt_ci": {**good, "level": None}, "range": None, "D_ci": [1, 2]}
    assert sorted(set(unlabelled(tree))) == [".D_ci", ".N_opt_ci", ".rows[1].loss_penalty_ci",
                                        ".rows[2]"]
    assert kinds(tree) == {"fitted", "assumed"}
    assert unnamed_in_text("a\nb [1, 2] (95% CI, fitted)\n\nc [1.5e3, unbounded]\n") == \
        ["c [1.5e3, unbounded]\n"]


def test_an_interval_says_its_kind_and_an_assumed_range_is_never_a_ci():
    iv = Interval(1.0, 2.0, FITTED, "percentiles over 100 bootstrap resamples")
    assert iv.text() == "[1, 2] (95% CI, fitted)"
    assert iv.name() == "95% CI, fitted: percentiles over 100 bootstrap resamples"
    assert Interval.from_json(iv.to_json()) == iv and list(iv) == [1.0, 2.0]
    pub = Interval(1.0, 2.0, PUBLISHED, "±1.96 x the SEs", source="Paper 2024")
    assert pub.name() == "95% CI, published: ±1.96 x the SEs (Paper 2024)"
    pi = Interval(1.0, 2.0, FITTED, "draws", level=0.9, what="prediction interval")
    assert pi.text() == "[1, 2] (90% prediction interval, fitted)"
    ass = Interval(1.0, None, ASSUMED, "a factor 2 of a bound", level=None)
    assert ass.text() == "[1, unbounded] (assumed range)"
    assert "CI" not in ass.name().replace("not a confidence interval", "")
    assert ass.name().startswith("assumed range, not a confidence interval: a factor 2")
    assert describe(record(ASSUMED, "x", why="a factor 2 of a bound")) == \
        "assumed range, not a confidence interval: a factor 2 of a bound"
    for bad, match in ((dict(kind="guessed"), "kind is one of"),
                       (dict(kind=ASSUMED), "no confidence level"),
                       (dict(low=3.0), "above its high end"),
                       (dict(low=float("nan")), "finite numbers")):
        with pytest.raises(ValueError, match=match):
            Interval(**{"low": 1.0, "high": 2.0, "kind": FITTED, "method": "m", **bad})


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory):
    """Every command that prints an interval, run on small real inputs: (name, argv) pairs,
    each run twice (text, --json) by the walking test."""
    import warnings

    import archfit
    from archfit.campaign import ledger as lg
    from archfit.errors import UninformativeWarning
    from archfit.laws.planted import correlated_sweep

    root = tmp_path_factory.mktemp("surfaces")
    repo = __import__("pathlib").Path(__file__).resolve().parent.parent
    frame = correlated_sweep(seed=3)
    frame.write_parquet(root / "runs.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeWarning)
        f = archfit.fit(frame, law="depth-joint", bootstrap=40, seed=0)
    f.to_json(root / "joint.json")
    N, top = float(np.median(frame["params"])), float(frame["params"].max())
    led = lg.Ledger(name="walk", spec={"target": {"params": N}}, budget=10.0, spent=2.0,
                    unit="FLOPs", rounds=[lg.Round(round=1, state=lg.RoundState.FITTED,
                                                   dir="round-1", chosen=[], spend=2.0,
                                                   target_ci=[2.0, 5.0], verdict="weak")])
    (root / "camp").mkdir()
    lg.write(str(root / "camp"), led)
    chin = repo / "fits" / "chinchilla-epoch2024.json"
    small = ["--head-dim", "8", "--multiple-of", "8", "--vocab", "256", "--ctx", "128"]
    return [
        ("recommend 7e9", ["recommend", "--params", "7e9"]),
        ("recommend 1e12", ["recommend", "--params", "1e12"]),
        ("recommend steplaw", ["recommend", "--params", "7e9", "--law", "steplaw2025"]),
        ("recommend fitted", ["recommend", "--params", f"{N:g}", "--fit", root / "joint.json",
                              "--tokens", "3e5", *small]),
        ("recommend compute", ["recommend", "--compute", "1e23", "--fit", chin]),
        ("recommend over-trained", ["recommend", "--compute", "1e23", "--fit", chin,
                                    "--tokens-per-param", "200"]),
        ("recommend inference", ["recommend", "--compute", "1e23", "--fit", chin,
                                 "--inference-tokens", "1e13"]),
        ("recommend compare", ["recommend", "--compute", "1e23", "--compare", "--fit", chin]),
        ("design", ["design", "--law", "depth-joint", "--fit", root / "joint.json",
                    "--results", root / "runs.parquet", "--params", f"{3 * top:g}", "--sizes",
                    f"{2 * top:g}", "--depths", "2,4,8", "--tokens", "3e5", "--budget-frac",
                    "0.5", "--batch", "2", "--bootstrap", "20"]),
        ("campaign status", ["campaign", "status", root / "camp"]),
        ("predict", ["predict", root / "joint.json", root / "runs.parquet"]),
        ("backtest", ["backtest", root / "runs.parquet", "--cut", f"{N:g}", "--bootstrap",
                      "20"]),
        ("laws", ["laws"]),
        ("fit", ["fit", root / "runs.parquet", "--law", "depth-joint", "--bootstrap", "10"]),
        ("compare", ["compare", "--fit", root / "joint.json"]),
    ]


@pytest.mark.slow
def test_every_interval_in_every_commands_output_carries_its_kind(cli, surfaces):
    """The walking test: each command's --json holds every interval in the one shape, with its
    kind, and its text names a kind in every block that prints an interval's ends."""
    seen: set[str] = set()
    for name, argv in surfaces:
        text = cli(*argv)
        assert text.exit_code == 0, (name, text.output)
        assert not unnamed_in_text(text.stdout), (name, unnamed_in_text(text.stdout))
        js = cli(*argv, "--json")
        assert js.exit_code == 0, (name, js.output)
        d = json.loads(js.stdout)
        assert not list(unlabelled(d)), (name, list(unlabelled(d)))
        seen |= kinds(d)
    assert seen >= {FITTED, PUBLISHED, ASSUMED}, seen


@pytest.mark.parametrize("argv", [["--params", "7e9"], ["--params", "1e12"],
                                  ["--compute", "1e24"], ["--params", "7e9", "--tp", "8"]])
def test_published_laws_label_every_interval_and_never_call_an_assumed_range_a_ci(cli, argv):
    """Without a fit the near-optimal set's ends come from archfit's factor-2 reading of
    Kaplan et al.'s Fig. 5 bound: labelled assumed in the JSON, and the text says 'assumed
    range, not a confidence interval' where it once said '95% CI of each end'."""
    r = cli("recommend", *argv, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert not list(unlabelled(d))
    if argv[0] == "--params":
        ends = d["near_optimal"]["ci"]
        assert ends["n_layer_low"]["kind"] == ends["n_layer_high"]["kind"] == ASSUMED
        assert all(a["loss_penalty_ci"]["kind"] == ASSUMED for a in d["alternatives"][1:])
    text = cli("recommend", *argv).stdout
    assert "95% CI" not in text and "assumed range, not a confidence interval" in text


def test_a_bootstrapped_fit_labels_its_intervals_fitted_with_the_method(tmp_path):
    """A depth-joint fit of a planted sweep with 40 resamples: the optimum's interval, the
    set's ends and every penalty interval are fitted, the method names the resamples, and the
    text says '95% CI, fitted'."""
    import warnings

    import archfit
    from archfit.errors import UninformativeWarning
    from archfit.laws.planted import correlated_sweep

    frame = correlated_sweep(seed=3)
    f = archfit.fit(frame, law="depth-joint", bootstrap=40, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeWarning)
        r = archfit.recommend(float(np.median(frame["params"])), fit=f, head_dim=8,
                              multiple_of=8, vocab_size=256, n_ctx=128)
    d = r.to_dict()
    assert not list(unlabelled(d)) and kinds(d["ci"]) == kinds(d["near_optimal"]) == {FITTED}
    assert kinds(d["alternatives"]) == {FITTED}
    assert "bootstrap resamples" in d["ci"]["n_layer"]["method"]
    shape_part = r.text().split("recipe (")[0]  # the recipe below has its own provenance
    assert "95% CI, fitted" in shape_part and "assumed" not in shape_part


def test_laws_lists_every_published_constant_with_its_provenance_and_link(cli):
    r = cli("laws", "--json")
    rows = json.loads(r.stdout)["constants"]
    from archfit.laws.published import PUBLISHED as SHIPPED

    assert {(x["fit"], x["constant"]) for x in rows} >= {
        (name, k) for name, e in SHIPPED.items() for k in e["params"]}
    assert all(x["link"].startswith("https://arxiv.org/abs/") for x in rows)
    curv = next(x for x in rows if x["constant"] == "curvature_rel")
    assert curv["provenance"] == ASSUMED and curv["interval"]["kind"] == ASSUMED
    epoch_e = next(x for x in rows if (x["fit"], x["constant"]) == ("epoch2024", "E"))
    assert epoch_e["interval"]["kind"] == PUBLISHED  # Besiroglu et al.'s own SEs
    assert [epoch_e["interval"]["low"], epoch_e["interval"]["high"]] == pytest.approx(
        [1.8172 - 1.96 * 0.03, 1.8172 + 1.96 * 0.03])


def test_a_published_learning_rate_law_asked_for_by_name_is_labelled_published(cli):
    """`--law steplaw2025` gives Step Law's published rate: labelled published, never 'fitted
    to your sweep'."""
    import json

    r = cli("recommend", "--params", 7e9, "--law", "steplaw2025", "--json")
    assert r.exit_code == 0, r.output
    lr = json.loads(r.output)["recipe"]["lr"]
    assert lr["provenance"] == "published" and "fitted" not in lr["note"]
    text = cli("recommend", "--params", 7e9, "--law", "steplaw2025").output
    assert "(steplaw2025, published)" in text and "fitted to your sweep" not in text


@pytest.mark.parametrize("make, needle", [
    (lambda: Interval.from_json({"low": 1.0, "high": 2.0, "level": 0.95}), "a kind"),
    (lambda: Interval(1.0, 2.0, FITTED, "m", level="0.95"), "a level in (0, 1)"),
    (lambda: Interval("1", 2.0, FITTED, "m"), "finite numbers"),
    (lambda: Interval(2.0, 1.0, FITTED, "m"), "above its high end"),
    (lambda: Interval(1.0, 2.0, "guessed", "m"), "kind is one of"),
    (lambda: Interval(1.0, 2.0, FITTED, "m", level=2), "a level in (0, 1)"),
])
def test_the_interval_api_refuses_what_is_not_an_interval_with_its_typed_error(make, needle):
    from archfit.errors import IntervalError

    with pytest.raises(IntervalError, match=re.escape(needle)):
        make()
    ok = Interval(np.float64(1.0), np.int64(2), FITTED, "m", level=np.float64(0.9))
    assert ok.text() == "[1, 2] (90% CI, fitted)"


@pytest.mark.parametrize("ci, needle", [
    ([2.0, 1.0], "above its high end"),
    ([float("nan"), 1.0], "finite numbers"),
    ({"low": 1.0, "high": 2.0, "kind": "guessed", "level": 0.95}, "kind is one of"),
    ({"low": 1.0, "high": 2.0, "kind": "fitted", "level": 2}, "a level in (0, 1)"),
    ("wide", "an interval's JSON or a pair"),
])
def test_load_fit_refuses_the_intervals_interval_refuses(ci, needle):
    from archfit.errors import FitInputError
    from archfit.laws import load_fit

    d = {"law": "chinchilla", "params": {"E": 1.8, "A": 480.0, "B": 2085.0, "alpha": 0.35,
                                         "beta": 0.37}, "ci": {"A": ci}}
    with pytest.raises(FitInputError, match=re.escape("ci.A")) as e:
        load_fit(d)
    assert needle in str(e.value) and "\n" not in str(e.value)
