"""The ``vocab`` law: Tao et al. 2024's form fitted on a vocabulary sweep's unigram-normalized
loss (negative for a good model: the law fits the loss itself, not its log), with predict,
bootstrap intervals and prediction bands; ``recommend --vocab auto --fit`` picks from it, and
says so when the fit cannot pick. Its score on Tao et al.'s public sweep (no license, so not
shipped) is benchmarks/bench_public_grids.py's."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import archfit
from archfit.laws.vocab.tao import tokens_per_character
from contracts import VOCAB, _vocab

PLANTED = VOCAB


def _sweep(p=PLANTED, seed=0):
    return _vocab(seed, p)


def test_tokens_per_character_is_tao_et_als_measurement():
    """Their quadratic in ln V against the tokens per character they measured (their
    fit_tokenization_func.py: tokens per 0.22326 characters), 1K to 1M: within 7%."""
    measured = {1024: 0.09915, 4096: 0.07380, 16384: 0.06034, 96256: 0.05364,
                1024000: 0.05140}
    for v, tokens in measured.items():
        assert float(tokens_per_character(v)) == pytest.approx(tokens / 0.22326, rel=0.07)


def test_a_planted_law_is_recovered_from_negative_losses():
    """A check of the code, not of the form: every loss of the sweep is below 0 and the fit
    reads them as they are, giving back the planted constants."""
    frame = _sweep()
    assert frame["loss"].max() < 0
    f = archfit.fit(frame, law="vocab", bootstrap=0, heldout=False)
    for k, v in PLANTED.items():
        assert f.params[k] == pytest.approx(v, rel=0.1), k


def test_the_fit_predicts_with_bands_and_holds_out_its_largest_sizes(tmp_path, cli):
    """Fitted from the CLI with its bootstrap: a run is one (size, vocabulary), the held-out
    check predicts the largest sizes, and predict's 95% bands on fresh draws of the same law
    cover most of them."""
    path = tmp_path / "vocab.csv"
    _sweep().write_csv(path)
    out = tmp_path / "vocab.json"
    r = cli("fit", path, "--law", "vocab", "--bootstrap", 40, "--out", out)
    assert r.exit_code == 0, r.output
    assert "training run (rows of one params, vocab_size, d_model" in r.output
    assert "RMSE (unigram-normalized loss)" in r.output
    f = archfit.load_fit(out)
    assert f.diagnostics["heldout"]["ok"]
    fresh = _sweep(seed=1)
    cols = {c: fresh[c].to_numpy() for c in fresh.columns}
    pred, lo, hi = f.band(cols)
    assert np.all(pred < 0) and np.all(lo <= pred) and np.all(pred <= hi)
    assert np.mean((cols["loss"] >= lo) & (cols["loss"] <= hi)) >= 0.9


@pytest.mark.parametrize("planted", ["vocab", "vocab-basin"])
def test_law_auto_weighs_the_vocabulary_laws_and_takes_the_one_drawn_from(planted, tmp_path,
                                                                           cli):
    """A table with a width allows both vocabulary laws (its losses, below 0, no other): auto
    fits each on the smaller runs, scores them on the largest and picks the law the sweep was
    drawn from."""
    from contracts import VOCAB_BASIN

    path = tmp_path / "vocab.csv"
    (_sweep() if planted == "vocab" else _vocab(0, VOCAB_BASIN, law_name=planted)
     ).write_csv(path)
    r = cli("fit", path, "--law", "auto", "--bootstrap", 0, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["law"] == planted
    assert {row["law"] for row in d["diagnostics"]["selection"]["rows"]} == {
        "vocab", "vocab-basin"}


def _fit_file(tmp_path, p, name):
    f = archfit.fit(_sweep(p), law="vocab", bootstrap=30, heldout=False)
    path = tmp_path / name
    f.to_json(path)
    return path, f


def test_recommend_picks_the_fitted_laws_least_loss_vocabulary(tmp_path, cli):
    """With a fitted law, --vocab auto trains with the vocabulary of least loss at the same
    compute: against a brute-force grid of 4,000 vocabularies over the same law, within the
    rounding; its 95% interval over the draws holds the pick."""
    path, f = _fit_file(tmp_path, PLANTED, "vocab.json")
    d = json.loads(cli("recommend", "--params", "1e9", "--vocab", "auto", "--fit", path,
                       "--json").output)
    v = d["vocabulary"]
    assert v["law"] == f.label and v["provenance"] == "fitted"
    assert d["vocab_size"] == v["value"]
    law, n_nv, dm, C = f.law_obj, d["params_non_embedding"], d["d_model"], v["compute"]
    grid = np.exp(np.linspace(math.log(1024), math.log(2 ** 21), 4000))
    losses = [law.unigram_loss(f.params, n_nv, x, dm, C / (6 * (n_nv + x * dm))) for x in grid]
    assert abs(v["value"] - grid[int(np.argmin(losses))]) <= 128
    assert v["interval"]["low"] <= v["value"] <= v["interval"]["high"]
    assert v["interval"]["kind"] == "fitted" and v["usable"] is True
    # without --vocab auto nothing reads the fit: the answer keeps its vocabulary, and says so
    plain = json.loads(cli("recommend", "--params", "1e9", "--fit", path, "--json").output)
    assert plain["vocab_size"] == 128_256
    assert any("read only with --vocab auto" in n for n in plain["notes"])


def test_a_fit_that_cannot_pick_keeps_the_vocabulary_and_says_so(tmp_path, cli):
    """A law with no vocabulary term (A2 = 0) only charges a vocabulary's parameters: its pick's
    interval runs to the search's bound, which is no pick: the family's vocabulary stays."""
    path, _ = _fit_file(tmp_path, {**PLANTED, "A2": 0.0}, "flat.json")
    r = cli("recommend", "--params", "1e9", "--vocab", "auto", "--fit", path, "--json")
    d = json.loads(r.output)
    assert d["vocab_size"] == 128_256 and d["vocabulary"]["usable"] is False
    text = cli("recommend", "--params", "1e9", "--vocab", "auto", "--fit", path).output
    assert "it cannot pick a vocabulary" in text


def test_a_backtest_reads_the_negative_losses_and_predicts_the_largest_size(tmp_path, cli):
    """Fitted below 5e8 non-vocabulary parameters, the 1e9 runs of a sweep drawn from the law
    are predicted within 1% (their losses are all below 0: the table is read as they are)."""
    path = tmp_path / "vocab.csv"
    _sweep().write_csv(path)
    r = cli("backtest", path, "--law", "vocab", "--cut", 5e8, "--bootstrap", 20, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["n_test"] == 30 and abs(d["mean_rel_error"]) < 0.01


def test_predict_reads_the_sweeps_negative_losses_as_losses(tmp_path, cli):
    """A unigram-normalized loss is below 0 for a good model: predict shows each row's actual
    loss and the coverage over all of them (it left them out as if missing)."""
    path, _ = _fit_file(tmp_path, PLANTED, "vocab.json")
    table = tmp_path / "sweep.parquet"
    _sweep().write_parquet(table)
    d = json.loads(cli("predict", path, table, "--json").output)
    assert all(r["actual"] is not None and r["actual"] < 0 for r in d["rows"])
    assert d["coverage"] >= 0.9 and "n_with_loss" not in d
