"""One request object carries what recommend is asked: built by the CLI and by the flat keywords
a notebook gives, each part checking its own values, and the answers as they were before the
request existed (JSON saved from the command as it stood then)."""

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
def test_recommend_json_is_what_it_was_before_the_request_object(cli, args, saved):
    """recommend --json as the command printed it before it built one request (the files in
    tests/data/recommend, saved then): the same JSON, key for key."""
    r = cli("recommend", *args, "--json")
    assert r.exit_code == 0, r.output
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
