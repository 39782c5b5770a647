"""Every interval says where it comes from (fitted, published or assumed), in the JSON and in
the words; an assumed range is never called a confidence interval."""

from __future__ import annotations

import json
from typing import Any, Iterator

import numpy as np
import pytest

from archfit.laws.provenance import ASSUMED, FITTED, KINDS, PUBLISHED, describe, record


def intervals(d: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any], str]]:
    """Every interval in a JSON tree: (its path, the dict holding it, its key). An interval is
    a non-empty value under a key ending in ``_ci``, or a ``ci`` table."""
    if isinstance(d, dict):
        for k, v in d.items():
            if v and (k.endswith("_ci") or k == "ci"):
                yield f"{path}.{k}", d, k
            if k != "provenance":
                yield from intervals(v, f"{path}.{k}")
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from intervals(v, f"{path}[{i}]")


def provenance_of(holder: dict[str, Any], key: str) -> str | None:
    """The kind an interval is labelled with: its own ``KEY_provenance``, the ``provenance`` of
    a ``ci`` table, or the ``provenance`` record of the dict holding it."""
    if f"{key}_provenance" in holder:
        return holder[f"{key}_provenance"]
    p = holder[key].get("provenance") if key == "ci" else holder.get("provenance")
    return p.get("provenance") if isinstance(p, dict) else p


def labels(d: dict[str, Any]) -> dict[str, str | None]:
    return {path: provenance_of(holder, key) for path, holder, key in intervals(d)}


def test_the_walk_finds_every_interval_and_misses_none():
    tree = {"ci": {"n_layer": [1, 2], "provenance": {"provenance": "fitted"}},
            "compute": {"N_opt_ci": [1, 2], "D_opt_ci": None, "provenance": {"provenance":
                                                                           "published"}},
            "rows": [{"loss_penalty_ci": [0, 1], "loss_penalty_ci_provenance": "assumed"},
                     {"loss_penalty_ci": [0, 1]}]}
    assert labels(tree) == {".ci": "fitted", ".compute.N_opt_ci": "published",
                            ".rows[0].loss_penalty_ci": "assumed",
                            ".rows[1].loss_penalty_ci": None}


def test_a_record_says_its_kind_and_an_assumed_range_is_never_a_ci():
    assert describe(record(FITTED, "percentiles over 100 bootstrap resamples")) == \
        "95% CI, fitted: percentiles over 100 bootstrap resamples"
    assert describe(record(PUBLISHED, "±1.96 x the SEs", source="Paper 2024")) == \
        "95% CI, published: ±1.96 x the SEs (Paper 2024)"
    words = describe(record(ASSUMED, "x", why="a factor 2 of a bound"))
    assert "CI" not in words.replace("not a confidence interval", "")
    assert words.startswith("assumed range, not a confidence interval: a factor 2 of a bound")
    with pytest.raises(ValueError, match="provenance must be one of"):
        record("guessed", "x")


@pytest.mark.parametrize("argv", [["--params", "7e9"], ["--params", "1e12"],
                                  ["--compute", "1e24"], ["--params", "7e9", "--tp", "8"]])
def test_published_laws_label_every_interval_and_never_call_an_assumed_range_a_ci(cli, argv):
    """Without a fit the near-optimal set's ends come from archfit's factor-2 reading of
    Kaplan et al.'s Fig. 5 bound: labelled assumed in the JSON, and the text says 'assumed
    range, not a confidence interval' where it once said '95% CI of each end'."""
    r = cli("recommend", *argv, "--json")
    assert r.exit_code == 0, r.output
    found = labels(json.loads(r.stdout))
    assert found and all(v in KINDS for v in found.values()), found
    if argv[0] == "--params":
        assert found[".near_optimal.ci"] == ASSUMED
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
    found = labels(d)
    assert found[".ci"] == FITTED and found[".near_optimal.ci"] == FITTED, found
    assert all(v == FITTED for k, v in found.items() if "loss_penalty_ci" in k)
    assert "bootstrap resamples" in d["ci"]["provenance"]["method"]
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
    assert curv["provenance"] == ASSUMED and curv["interval_provenance"] == ASSUMED
    epoch_e = next(x for x in rows if (x["fit"], x["constant"]) == ("epoch2024", "E"))
    assert epoch_e["interval_provenance"] == PUBLISHED  # Besiroglu et al.'s own SEs
    assert epoch_e["interval"] == pytest.approx([1.8172 - 1.96 * 0.03, 1.8172 + 1.96 * 0.03])


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
