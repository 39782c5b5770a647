"""The ``vocab-basin`` law: a vocabulary sweep's unigram-normalized loss with a basin in ln V
whose centre grows as a power of the non-vocabulary size, fitted without the runs' width (which
Tao et al.'s ``vocab`` law needs). Its score on Tao et al.'s runs (ScaleBench's training split,
not shipped: no licence) is benchmarks/bench_scalebench.py's."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import archfit
from archfit.laws import get_law
from contracts import VOCAB_BASIN, _vocab


def _sweep(seed=0, p=VOCAB_BASIN):
    return _vocab(seed, p, law_name="vocab-basin").drop("d_model")


@pytest.mark.parametrize("seed", range(5))
def test_a_planted_basin_is_recovered_without_a_width_column(seed):
    """A check of the code, not of the form: the constants come back from a table of no
    d_model at every noise draw (a start from the law's linear coefficients: one draw's fit
    once stalled at its start), and the lack-of-fit test does not reject the true form."""
    f = archfit.fit(_sweep(seed), law="vocab-basin", bootstrap=0, heldout=False)
    for k, v in VOCAB_BASIN.items():
        assert f.params[k] == pytest.approx(v, rel=0.05, abs=0.02), k
    assert f.diagnostics["lack_of_fit"]["p"] > 0.05


@pytest.mark.parametrize("n_nv", [3e7, 1e9, 7e10])
def test_v_best_is_the_least_loss_vocabulary_at_a_fixed_token_count(n_nv):
    """The derived V_best (the basin's centre, exp(lnV0) N^gamma) against a brute-force
    search of 20,000 vocabularies over the law's own loss at 1e10 tokens."""
    law = get_law("vocab-basin")
    (got,) = law.derived(VOCAB_BASIN, [n_nv]).values()
    grid = np.exp(np.linspace(math.log(256), math.log(2 ** 22), 20_000))
    losses = [law.unigram_loss(VOCAB_BASIN, n_nv, v, 0.0, 1e10) for v in grid]
    assert got == pytest.approx(grid[int(np.argmin(losses))], rel=1e-3)


def test_without_a_width_vocab_refuses_and_auto_takes_the_basin(tmp_path, cli):
    path = tmp_path / "vocab.csv"
    _sweep().write_csv(path)
    r = cli("fit", path, "--law", "vocab", "--bootstrap", 0)
    assert r.exit_code == 2 and "d_model" in r.output and "Traceback" not in r.output
    r = cli("fit", path, "--law", "auto", "--bootstrap", 0, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["law"] == "vocab-basin"


def test_recommend_picks_the_basins_least_loss_vocabulary(tmp_path, cli):
    """--vocab auto with a fitted basin trains with the vocabulary of least loss at the same
    compute (a larger vocabulary costs tokens): against a brute-force grid, within the rounding,
    inside its 95% interval over the draws."""
    f = archfit.fit(_sweep(), law="vocab-basin", bootstrap=30, heldout=False)
    path = tmp_path / "basin.json"
    f.to_json(path)
    d = json.loads(cli("recommend", "--params", "1e9", "--vocab", "auto", "--fit", path,
                       "--json").output)
    v = d["vocabulary"]
    assert v["provenance"] == "fitted" and d["vocab_size"] == v["value"]
    assert not any("read only with --vocab auto" in n for n in d["notes"])  # it was read
    law, n_nv, dm, C = f.law_obj, d["params_non_embedding"], d["d_model"], v["compute"]
    grid = np.exp(np.linspace(math.log(1024), math.log(2 ** 21), 4000))
    losses = [law.unigram_loss(f.params, n_nv, x, dm, C / (6 * (n_nv + x * dm))) for x in grid]
    assert abs(v["value"] - grid[int(np.argmin(losses))]) <= 128
    assert v["interval"]["low"] <= v["value"] <= v["interval"]["high"]


def test_a_tokens_column_is_read_as_it_is_and_characters_only_as_a_stated_fallback():
    """The same sweep given as tokens (characters x Tao et al.'s tokens per character, worked
    out here) fits to the same constants, with a note saying which column counted the data;
    characters at a vocabulary outside the tokenizer fit's reach, or neither column, is one
    line naming the column to give."""
    from archfit.errors import FitInputError
    from archfit.laws.vocab.tao import TOKENS_PER_CHAR

    chars = _sweep()
    lv = np.log(chars["vocab_size"].to_numpy())
    a, b, c = TOKENS_PER_CHAR
    tokens = chars.with_columns(tokens=chars["characters"] * (a * lv * lv + b * lv + c)
                                ).drop("characters")
    f_c = archfit.fit(chars, law="vocab-basin", bootstrap=0, heldout=False)
    f_t = archfit.fit(tokens, law="vocab-basin", bootstrap=0, heldout=False)
    for k in VOCAB_BASIN:
        assert f_t.params[k] == pytest.approx(f_c.params[k], rel=1e-3, abs=1e-6), k
    assert any("the table's 'tokens' column" in n for n in f_t.notes)
    assert any("a fallback" in n for n in f_c.notes)
    tiny = chars.with_columns(vocab_size=chars["vocab_size"] / 16)  # 256 to 4,096
    with pytest.raises(FitInputError, match="give a 'tokens' column"):
        archfit.fit(tiny, law="vocab-basin", bootstrap=0, heldout=False)
    with pytest.raises(FitInputError, match="'tokens' or 'characters'"):
        archfit.fit(chars.drop("characters"), law="vocab-basin", bootstrap=0, heldout=False)
