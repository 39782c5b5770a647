import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from archfit.errors import NumberError, ShapeError
from archfit.numbers import parse_number
from archfit.shapes.families import aspect_ratio_family, fixed_width_family, iso_param_family
from archfit.shapes import FLOP_CONVENTIONS, Shape, gpt2

# HF transformers GPT2LMHeadModel(...).num_parameters() for the four GPT-2 sizes
HF_GPT2 = {"gpt2": 124_439_808, "gpt2-medium": 354_823_168, "gpt2-large": 774_030_080,
           "gpt2-xl": 1_557_611_200}


@pytest.mark.parametrize("name,expected", HF_GPT2.items())
def test_gpt2_total_matches_hf(name, expected):
    assert gpt2(name).params_total == expected


def test_gpt2_small_conventions():
    s = gpt2()
    assert s.params_embedding == 50257 * 768 + 1024 * 768
    assert s.params_non_embedding == 124_439_808 - s.params_embedding
    # Kaplan's 12 * n_layer * d_model^2 approximation is within 1% of the exact N
    assert abs(s.params_non_embedding / (12 * 12 * 768**2) - 1) < 0.01


def test_flop_conventions():
    s = gpt2()
    n = s.params_non_embedding
    assert s.flops_per_token("kaplan_forward") == 2 * n + 2 * 12 * 1024 * 768
    assert s.flops_per_token("kaplan_train") == 3 * s.flops_per_token("kaplan_forward")
    # exact matmuls: projections + MLP (2 * weights) + scores/values (4 * ctx * d) + logits
    per_layer = 2 * (4 * 768 * 768 + 2 * 768 * 3072) + 4 * 1024 * 768
    assert s.flops_per_token("matmul_forward") == 12 * per_layer + 2 * 768 * 50257
    assert s.flops_per_token("matmul_train") == 3 * s.flops_per_token("matmul_forward")
    with pytest.raises(ShapeError, match="unknown FLOP convention"):
        s.flops_per_token("palm")
    assert set(FLOP_CONVENTIONS) == {"kaplan_forward", "kaplan_train", "matmul_forward",
                                     "matmul_train"}


def test_swiglu_gqa_untied_counts():
    s = Shape(n_layer=2, d_model=128, n_head=8, n_kv_head=2, d_ff=344, mlp="swiglu",
              tied_embeddings=False, position="rope", bias=False, norm="rmsnorm", vocab_size=1000)
    kv = 2 * 16
    attn = 128 * 128 * 2 + 2 * 128 * kv
    mlp = 3 * 128 * 344
    norms = 2 * 128
    assert s.params_non_embedding == 2 * (attn + mlp + norms) + 128
    assert s.params_embedding == 2 * 1000 * 128  # token embedding + untied head, no positions
    assert s.breakdown()["position_embedding"] == 0


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n_layer=2, d_model=100, n_head=3), "not divisible by n_head"),
        (dict(n_layer=0, d_model=64, n_head=1), "n_layer must be positive"),
        (dict(n_layer=2, d_model=-64, n_head=1), "d_model must be positive"),
        (dict(n_layer=2, d_model=64, n_head=4, n_kv_head=3), "not divisible by n_kv_head"),
        (dict(n_layer=2, d_model=64, n_head=4, mlp="tanh"), "mlp must be one of"),
        (dict(n_layer=2, d_model=64, n_head=4, d_ff=0), "d_ff must be a positive"),
        (dict(n_layer=2, d_model=64, n_head=4, ff_ratio=-1.0), "ff_ratio must be"),
        (dict(n_layer=2.5, d_model=64, n_head=4), "whole number"),
    ],
)
def test_invalid_shapes(kwargs, match):
    with pytest.raises(ShapeError, match=match):
        Shape(**kwargs)


@given(st.from_type(Shape))
@settings(max_examples=200, deadline=None)
def test_counts_are_additive(s):
    b = s.breakdown()
    assert sum(b.values()) == s.params_total
    assert s.params_embedding + s.params_non_embedding == s.params_total
    blocks = [s.layer_breakdown(i) for i in range(s.n_layer)]
    assert b["attention"] == sum(x["attention"] for x in blocks)
    assert b["mlp"] == sum(x["mlp"] for x in blocks)
    if s.uniform and s.n_sparse_layers in (0, s.n_layer):
        assert all(x == blocks[0] for x in blocks)
        block, rest = s.depth_line()  # linear in depth: what families score candidates with
        assert s.n_layer * block + rest == s.params_non_embedding
        assert s.with_(n_layer=s.n_layer + 3).params_non_embedding == (s.n_layer + 3) * block + rest
    else:
        with pytest.raises(ShapeError, match="uniform"):
            s.depth_line()
    assert all(v >= 0 for v in b.values())
    assert Shape.from_config(s.config()) == s
    # the count is linear in d_ff, with the slope the shape core states (a mixture of experts'
    # experts are d_ff / granularity wide: a step of granularity x 7 widens each by 7)
    step = 7 * round(s.granularity or 1)
    assert (s.with_(d_ff=s.d_ff + step).params_non_embedding - s.params_non_embedding
            == step * s.params_per_d_ff)
    # a token uses top_k of the routed experts of every sparse layer, and the rest are idle
    idle = s.n_sparse_layers * (s.n_experts - s.top_k) * s.expert_params
    assert s.params_total - s.params_active == idle >= 0
    assert s.params_non_embedding - s.params_active_non_embedding == idle


@given(target=st.floats(1e6, 1e10), depths=st.lists(st.integers(1, 48), min_size=1, max_size=5),
       ff=st.sampled_from([1.0, 2.0, 4.0, 8.0]), tol=st.sampled_from([0.02, 0.05, 0.1]))
@settings(max_examples=100, deadline=None)
def test_family_members_respect_tolerance(target, depths, ff, tol):
    members = iso_param_family(target, depths, [ff], tolerance=tol)
    assert [m.n_layer for m in members] == depths  # nothing silently dropped
    for m in members:
        assert m.shape is not None
        err = (m.shape.params_non_embedding - target) / target
        assert m.rel_error == pytest.approx(err)
        assert m.within_tolerance == (abs(err) <= tol)
        assert m.shape.d_model % 64 == 0 and m.shape.head_dim == 64
        assert abs(m.shape.ff_ratio / ff - 1) <= 0.15 + 64 / m.shape.d_model


def test_iso_parameter_grid_at_1e8_lands_every_depth_on_target():
    members = iso_param_family(1e8, [2, 4, 8, 16, 32])
    assert len(members) == 5
    for m in members:
        assert abs(m.rel_error) < 0.02, m


def test_family_reports_depth_that_does_not_fit():
    members = iso_param_family(1e6, [1, 256], tolerance=0.05)
    deep = members[1]
    assert deep.n_layer == 256 and not deep.within_tolerance and "does not fit" in deep.note


def test_family_with_fixed_heads_and_exact_ratio():
    members = iso_param_family(2e7, [4, 8], [4.0], head_dim=None, n_head=8, ff_slack=0)
    for m in members:
        assert m.shape.n_head == 8 and m.shape.d_ff == 4 * m.shape.d_model


def test_petty_and_aspect_families():
    for m in fixed_width_family(1e7, 256, [2, 4, 8]):
        assert m.shape.d_model == 256 and abs(m.rel_error) < 0.01
    members = aspect_ratio_family(1e8, [16, 64, 256])
    for ar, m in zip([16, 64, 256], members):
        assert m.aspect_ratio == ar
        assert abs(math.log(m.shape.aspect_ratio / ar)) < 0.7


@pytest.mark.parametrize("text,value", [("1e12", 1e12), ("50e6", 5e7), ("50M", 5e7),
                                        ("1.3B", 1.3e9), ("1T", 1e12), ("2k", 2e3), ("7", 7.0),
                                        ("1,000,000", 1e6), ("12,345.5", 12345.5),
                                        ("1,000M", 1e9), ("1_000", 1e3)])
def test_parse_number(text, value):
    assert parse_number(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "M", "1.2.3", "5x", "nan", "1e999", "7,5e9", "1,2",
                                  "12,34", "1,0000", ",100"])
def test_parse_number_rejects(text):
    with pytest.raises(NumberError):
        parse_number(text)


def test_a_comma_that_is_not_a_thousands_separator_exits_2(cli):
    r = cli("shape", "--layers", "1,2", "--width", "768", "--heads", "12")
    assert r.exit_code == 2 and "groups of three" in r.output
    r = cli("recommend", "--params", "7,5e9")
    assert r.exit_code == 2 and "groups of three" in r.output
    r = cli("shape", "--layers", "12", "--width", "1,536", "--heads", "12", "--json")
    assert r.exit_code == 0 and '"d_model": 1536' in r.output


@given(target=st.floats(1e7, 1e12), L=st.integers(1, 64), kv=st.sampled_from([1, 2, 4, 8]),
       mlp=st.sampled_from(["gelu", "swiglu"]))
@settings(max_examples=150, deadline=None)
def test_family_with_fixed_kv_heads_is_sized_with_them(target, L, kv, mlp):
    """Where the width has room (at least 8 of its steps: 64 x kv, so that kv divides the heads),
    a member with fixed key/value heads lands within tolerance, as multi-head members do (sizing
    as if MHA, then shrinking the kv heads, missed by up to 17%)."""
    assume(math.sqrt(target / (L * 14)) >= 8 * 64 * kv)
    (m,) = iso_param_family(target, [L], [4.0], n_kv_head=kv, mlp=mlp, tolerance=0.05)
    assert m.shape is not None and m.shape.n_kv_head == kv and m.shape.n_head % kv == 0
    assert m.within_tolerance, (m.rel_error, m.shape)



def test_shape_is_a_plain_frozen_dataclass():
    """dataclasses.replace, fields and asdict work on Shape (it was a private record class
    that dataclasses.replace refused), and numpy integers are whole numbers."""
    import dataclasses

    import numpy as np

    import archfit

    s = archfit.Shape(n_layer=12, d_model=768, n_head=12)
    six = dataclasses.replace(s, n_layer=6)
    # a GPT-2 block: 12 d^2 + 13 d (biases and two LayerNorms), plus the final LayerNorm 2d
    block = 12 * 768 ** 2 + 13 * 768
    assert s.params_non_embedding == 12 * block + 2 * 768 == 85_056_000
    assert six.n_layer == 6 and six.params_non_embedding == 6 * block + 2 * 768
    assert dataclasses.is_dataclass(s) and "n_layer" in {f.name for f in dataclasses.fields(s)}
    assert dataclasses.asdict(s)["d_ff"] == 3072
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.n_layer = 3  # type: ignore[misc]
    n = archfit.Shape(n_layer=np.int64(12), d_model=np.int32(768), n_head=np.int16(12))
    assert n == s and type(n.n_layer) is int
    with pytest.raises(archfit.ArchfitError, match="whole number"):
        archfit.Shape(n_layer=np.float64(2.5), d_model=768, n_head=12)


def test_the_shape_nearer_the_optimum_is_the_nearest_of_every_depth_between():
    """recommend's 'nearer the optimum' offer (found by bisection over depth) is the depth a
    shape-by-shape search of every depth between the choice and the optimum finds: the one
    nearest the optimum in log depth whose size is within 10% of the target."""
    import math
    import random
    from dataclasses import replace

    from archfit.recommending.candidates import NEARER_SIZE, _nearer

    def every_depth(best, L_opt, N):
        lo, hi = sorted((best.n_layer, max(1, round(L_opt))))
        fits = [replace(best, n_layer=L) for L in range(lo, hi + 1) if L != best.n_layer]
        fits = [s for s in fits if abs(s.params_non_embedding / N - 1) <= NEARER_SIZE]
        return min(fits, key=lambda x: abs(math.log(x.n_layer / L_opt))).n_layer if fits \
            else None

    rng = random.Random(1)
    offered = 0
    for _ in range(200):
        d = rng.choice([256, 1024, 4096])
        best = Shape(n_layer=rng.randint(1, 80), d_model=d, n_head=d // 128, vocab_size=50257,
                     n_ctx=2048)
        N, L_opt = best.params_non_embedding * rng.uniform(0.7, 1.3), rng.uniform(0.6, 200)
        text = _nearer(best, L_opt, N)
        got = int(text.split("constraints: ")[1].split(" x")[0]) if text else None
        assert got == every_depth(best, L_opt, N), (best.n_layer, d, L_opt, N)
        offered += got is not None
    assert offered > 50


@pytest.mark.parametrize("rule,needle", [
    (lambda w: "x", "gave x: a d_ff rule returns a positive whole number"),
    (lambda w: -5, "gave -5"),
    (lambda w: 1 / 0, "raised ZeroDivisionError"),
    (lambda w: 10 ** 400, "a d_ff rule returns a positive whole number"),
])
def test_a_d_ff_rule_that_gives_no_width_is_named_in_one_typed_line(rule, needle):
    """Block(d_ff_rule=...) is the user's function: whatever it raises or returns that is not
    a width is refused as the recommendation's error (a raw TypeError, ValueError,
    ZeroDivisionError or OverflowError before); a rule that gives widths is used."""
    import archfit

    with pytest.raises(archfit.errors.RecommendError) as e:
        archfit.recommend(7e9, d_ff_rule=rule)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert archfit.recommend(7e9, d_ff_rule=lambda w: 4 * w).shape.d_ff == \
        4 * archfit.recommend(7e9, d_ff_rule=lambda w: 4 * w).shape.d_model
