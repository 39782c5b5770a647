"""One request object carries what recommend is asked: built by the CLI and by the flat keywords
a notebook gives, each part checking its own values; and three answers held key for key against
their saved JSON (tests/data/recommend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from archfit.errors import RecommendError
from archfit.recommending import recommend
from archfit.recommending.request import (Block, Experts, Grid, Objective, RecommendRequest,
                                          Target)

SAVED = Path(__file__).resolve().parent / "data" / "recommend"


@pytest.mark.parametrize("args, saved", [
    (["--params", "7e9"], "params-7e9.json"),
    (["--params", "1e12", "--active-params", "3.2e10"], "moe-1e12.json"),
    (["--compute", "1e23", "--inference-tokens", "1e13"], "compute-1e23-inference.json"),
])
def test_recommend_json_is_its_saved_answer_key_for_key(cli, args, saved):
    """recommend --json for a dense size, a mixture and an inference-aware budget: the same JSON,
    key for key, as the files in tests/data/recommend. A deliberate change of answer is saved
    again with ``ARCHFIT_SAVE_ANSWERS=1 python -m pytest tests/test_recommend_request.py -k
    saved_answer`` and its diff reviewed in the commit that changes it."""
    import os

    r = cli("recommend", *args, "--json")
    assert r.exit_code == 0, r.output
    if os.environ.get("ARCHFIT_SAVE_ANSWERS") == "1":
        (SAVED / saved).write_text(json.dumps(json.loads(r.output), indent=2) + "\n")
    assert json.loads(r.output) == json.loads((SAVED / saved).read_text())


def test_a_request_and_the_flat_keywords_give_the_same_recommendation():
    req = RecommendRequest(Target(params=7e9), Block(family="gpt2"), Grid(vocab_size=32000),
                           fits=("levine2020",))
    a = recommend(req)
    b = recommend(7e9, family="gpt2", vocab_size=32000, fit="levine2020")
    assert a.to_dict() == b.to_dict() and a.shape.vocab_size == 32000
    assert RecommendRequest.of(7e9, family="gpt2", vocab_size=32000, fit="levine2020") == req
    with pytest.raises(RecommendError, match="a RecommendRequest or options, not both"):
        recommend(req, top=3)


@pytest.mark.parametrize("make, match", [
    (lambda: Target(), "give exactly one of params"),
    (lambda: Target(params=1e9, compute=1e21), "give exactly one of params"),
    (lambda: Target(params=float("nan")), "params must be a positive number"),
    (lambda: Target(params=1e9, unique_tokens=1e9), "give --compute C with it"),
    (lambda: Target(compute=1e21, inference_tokens=1e12, tokens_per_param=50),
     "give one of them"),
    (lambda: Block(family="mamba"), "mamba"),
    (lambda: Block(ff_ratio=-1), "ff_ratio must be a positive number"),
    (lambda: Grid(head_dim=96, multiple_of=128), "does not divide the width multiple"),
    (lambda: Grid(tp=8, n_kv_head=3), "cannot be split over tensor parallelism"),
    (lambda: Grid(tolerance=1.5), "tolerance must be a fraction"),
    (lambda: Grid(vocab_size=0), "vocab_size must be a positive whole number"),
    (lambda: Experts(active_params=-1), "active parameters must be a positive number"),
    (lambda: Experts(active_params=1e9, top_k=0), "top_k must be a whole number >= 1"),
    (lambda: Objective(kind="speed"), "objective must be one of"),
    (lambda: RecommendRequest(Target(params=1e9), experts=Experts(active_params=2e9)),
     "must be fewer than the total"),
])
def test_each_part_of_a_request_refuses_a_bad_value_in_one_line(make, match):
    with pytest.raises(RecommendError, match=match) as e:
        make()
    assert "\n" not in str(e.value)


def test_every_part_field_has_one_docstring_and_the_flat_keywords_name_each_once():
    """Each field of each part is documented where it is declared (one string right after it),
    and every field other than the size is one flat keyword of recommend()."""
    import ast
    import inspect

    from archfit.recommending import request

    tree = ast.parse(inspect.getsource(request))
    for cls in (Target, Block, Grid, Experts, Objective, RecommendRequest):
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
        body = node.body
        documented = {b.target.id for i, b in enumerate(body[:-1])
                      if isinstance(b, ast.AnnAssign) and isinstance(body[i + 1], ast.Expr)
                      and isinstance(body[i + 1].value, ast.Constant)}
        assert documented == set(cls.__dataclass_fields__), cls.__name__
    for cls in (Target, Block, Grid):
        for name in cls.__dataclass_fields__:
            assert name == "params" or name in request.KEYWORDS, name


@pytest.mark.parametrize("args, needle", [
    (["--experts", "8", "--top-k", "2", "--granularity", "64"],
     "--experts 8 --top-k 2 --granularity 64 cannot meet"),
    (["--experts", "64"], "--experts 64 cannot meet"),
    (["--granularity", "1e6"], "would make experts under 64 wide"),
    (["--objective", "latency"], "not modelled for a mixture of experts"),
    (["--gpu-hours", "1e5"], "--gpu-hours: not read for a mixture of experts"),
    (["--inference-tokens", "1e13"], "--inference-tokens sizes a dense model"),
    (["--unique-tokens", "1e12"], "--unique-tokens"),
])
def test_an_expert_option_that_cannot_apply_or_meet_its_targets_is_refused(cli, args, needle):
    """Fixed expert options that land far from the total or active target, a granularity
    finer than an expert can be, an objective the sparse answer does not weigh: refused in one
    line naming the option, never answered as if they held."""
    r = cli("recommend", "--params", "1e12", "--active-params", "3.2e10", *args)
    assert r.exit_code == 2, r.output
    assert needle in r.output and len(r.output.strip().splitlines()) == 1


def test_an_objective_refuses_the_budget_options_it_does_not_read(cli):
    r = cli("recommend", "--compute", "1e23", "--inference-tokens", "1e13", "--objective",
            "time", "--gpu-hours", "1e5")
    assert r.exit_code == 2 and "--inference-tokens sizes the model" in r.output, r.output


def test_a_size_and_its_tokens_are_priced_as_the_budget_they_spend(cli):
    """--params with --tokens: the loss those tokens cost against the compute-optimal model of
    the same FLOPs (C = 6 N D, N the shape's total, epoch2024's convention), as --compute with
    --tokens-per-param prices it: the same split, the same penalty."""
    d = json.loads(cli("recommend", "--params", "7e9", "--tokens", "1.4e12", "--json").output)
    plan = d["compute"]["plan"]
    N = d["params_total"]
    assert plan["kind"] == "overtraining" and plan["tokens_per_param"] == pytest.approx(1.4e12 / N)
    assert d["compute"]["C"] == pytest.approx(6 * N * 1.4e12)
    same = json.loads(cli("recommend", "--compute", str(6 * N * 1.4e12), "--tokens-per-param",
                          str(1.4e12 / N), "--json").output)["compute"]["plan"]
    assert plan["penalty"] == pytest.approx(same["penalty"], rel=1e-9) and plan["penalty"] > 0


@pytest.mark.parametrize("args, needle", [
    (["--compute", "1e20", "--tokens-per-param", "1e9"],
     "comes from --tokens-per-param 1e+09 with --compute 1e+20"),
    (["--compute", "1e10"], "comes from --compute 1e+10"),
    (["--params", "10"], "below the smallest shape archfit builds"),
])
def test_a_size_too_small_to_build_names_the_flags_it_came_from(cli, args, needle):
    r = cli("recommend", *args)
    assert r.exit_code == 2 and needle in r.output, r.output
    assert "lower --multiple-of" not in r.output


def test_numpy_scalars_are_numbers_to_the_api():
    """What Shape takes, the request takes: numpy's integers and floats."""
    import numpy as np

    a = recommend(np.int64(7_000_000_000), head_dim=np.int64(128), tolerance=np.float64(0.005))
    b = recommend(7e9, head_dim=128, tolerance=0.005)
    assert a.to_dict() == b.to_dict()
    assert isinstance(RecommendRequest.of(np.float64(1e9)).target.params, float)


def test_a_size_between_buildable_shapes_at_the_finest_step_is_not_told_to_go_finer(cli):
    """Widths already in steps of 8 (head_dim 8, no --tp): the refusal names the buildable
    shapes on either side (1 x 16 below 5e3, 2 x 16 above), not advice already taken; a
    coarser step is still told which knob to lower."""
    r = cli("recommend", "--params", "5e3", "--multiple-of", "8", "--head-dim", "8")
    assert r.exit_code == 2 and "lower --multiple-of" not in r.output, r.output
    assert "1 x 16" in r.output and "2 x 16" in r.output and "archfit shape" in r.output
    coarse = cli("recommend", "--params", "2e4")
    assert coarse.exit_code == 2 and "lower --multiple-of (now 16)" in coarse.output
