"""The block a recommendation builds (archfit.shapes.architectures): the llama family by
default, gpt2 on request, the runs' block for a fit of one's own; the answer printed and the
export of the same command are one model."""

from __future__ import annotations

import json
import warnings

import polars as pl
import pytest

from archfit import fit, recommend
from archfit.shapes import Shape
from archfit.shapes.architectures import GPT2, LLAMA


def test_the_llama_family_counts_llama_2_7b_exactly():
    """The family's block is Llama's: Llama-2-7B (32 x 4,096, d_ff 11,008, vocab 32,000) in it
    has Meta's published 6,738,415,616 parameters."""
    s = Shape(n_layer=32, d_model=4096, n_head=32, d_ff=11008, vocab_size=32000, n_ctx=4096,
              **LLAMA.fields)
    assert s.params_total == 6_738_415_616


def test_the_head_splits_tried_go_from_the_familys_down_to_none():
    assert LLAMA.head_plans() == [(8, 8), (4, 4), (2, 2), (None, None)]
    assert GPT2.head_plans() == [(None, None)]


def test_the_default_answer_is_a_modern_block_that_splits_over_8_way_tensor_parallelism(cli):
    r = cli("recommend", "--params", "7e9", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["family"] == "llama" and (d["mlp"], d["position"], d["norm"]) == (
        "swiglu", "rope", "rmsnorm")
    assert d["bias"] is False and d["tied_embeddings"] is False
    assert d["n_head"] % 8 == 0 and d["n_kv_head"] == 8 and (d["vocab_size"], d["n_ctx"]) == (
        128256, 8192)
    assert abs(d["params_non_embedding"] / 7e9 - 1) <= 0.02
    text = cli("recommend", "--params", "7e9").output
    assert text.startswith(f"answer: {d['n_layer']} x {d['d_model']:,}, {d['n_head']} heads")
    assert max(len(line) for line in text.splitlines()) <= 100
    assert "family llama (SwiGLU, RoPE, RMSNorm" in text


def test_the_export_of_the_same_command_is_the_model_printed(cli):
    d = json.loads(cli("recommend", "--params", "7e9", "--json").output)
    r = cli("recommend", "--params", "7e9", "--emit", "hf-llama")
    assert r.exit_code == 0, r.output
    cfg = json.loads(r.output[r.output.index("{"):r.output.rindex("}") + 1])
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"],
            cfg["num_key_value_heads"], cfg["intermediate_size"]) == (
        d["n_layer"], d["d_model"], d["n_head"], d["n_kv_head"], d["d_ff"])


def test_gpt2_on_request_and_a_family_the_format_cannot_hold_is_refused(cli):
    d = json.loads(cli("recommend", "--params", "7e9", "--family", "GPT2", "--json").output)
    assert d["family"] == "gpt2" and d["mlp"] == "gelu" and d["position"] == "learned"
    assert (d["vocab_size"], d["n_ctx"], d["n_kv_head"]) == (50257, 2048, d["n_head"])
    r = cli("recommend", "--params", "7e9", "--family", "gpt2", "--emit", "hf-llama")
    assert r.exit_code == 2 and "--emit hf-llama writes a llama-family model" in r.output
    one = cli("recommend", "--params", "7e9", "--family", "mine")
    assert one.exit_code == 2 and "mine" in one.output


@pytest.mark.parametrize("N", [1e6, 1e7, 1.7e7, 1e8])
def test_small_targets_get_a_shape_and_a_recipe_with_the_split_they_allow(N):
    """Below about 1e8 parameters, 8 heads of 128 are wider than the optimum: the family keeps
    the largest head split (then head size) that lands within 2% of the target, and says so."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = recommend(N)
    assert abs(r.rel_error) <= 0.02 and r.recipe is not None
    assert r.shape.mlp == "swiglu" and r.shape.n_head % r.shape.n_kv_head == 0
    assert any("the llama family's head_dim 128, heads a multiple of 8" in n for n in r.notes)


def _runs(**block):
    """A tiny levine-shaped table whose runs share a block (or, without ``block``, record
    none)."""
    rows = []
    for N in (1e5, 2e5, 4e5, 8e5):
        for L in (2, 4, 8, 16):
            d = (N / (12 * L)) ** 0.5
            loss = 2 + 30 * N ** -0.3 + 0.05 * (L / (0.02 * N ** 0.4) - 1) ** 2
            rows.append({"n_layer": L, "d_model": d, "params": N, "tokens": 2e7,
                         "final_val_loss": loss, **block})
    return pl.DataFrame(rows)


def test_a_fit_of_ones_own_runs_builds_in_their_block():
    gpt2_runs = _runs(mlp="gelu", position="learned", norm="layernorm", bias=True,
                      tied_embeddings=True, ff_ratio=4.0)
    f = fit(gpt2_runs, law="levine", bootstrap=0)
    assert f.diagnostics["span"]["block"]["mlp"] == "gelu"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = recommend(1e9, fit=f)
        other = recommend(1e9, fit=f, family="llama")
        plain = recommend(1e9, fit=fit(_runs(), law="levine", bootstrap=0))
    assert r.family == "gpt2" and r.shape.mlp == "gelu"
    assert abs(r.shape.d_ff / r.shape.d_model / 4 - 1) <= 0.05  # the runs' ratio, d_ff free 5%
    assert any("the block of the runs" in n for n in r.notes)
    assert other.family == "llama" and other.shape.mlp == "swiglu"
    assert plain.family == "llama"  # runs that record no block: the default


def test_giving_tp_alone_keeps_the_familys_kv_heads_where_they_fit():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert recommend(7e9, tp=1).shape.n_kv_head == 8
        assert recommend(7e9, tp=4).shape.n_kv_head == 8
        three = recommend(7e9, tp=3).shape  # 8 kv heads cannot be split 3 ways: left out
        assert three.n_head % 3 == 0 and three.n_kv_head == three.n_head
        assert recommend(7e9, n_kv_head=4).shape.n_head % 8 == 0  # and tp 8 kept
