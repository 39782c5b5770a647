"""What the trainer and a sweep spec take: a learning rate or setting no run could use is refused
at once, in one line; a recipe no run could use is flagged, not exported; a stopped sweep
resumes."""

from __future__ import annotations

import pytest
import json
import math
from archfit.errors import ArchfitError
from archfit.train.config import MAX_LR, MIN_LR, Budget, TrainConfig


@pytest.mark.parametrize("lr", [1e9, float("inf"), float("nan"), -1e-3, 0.0, 1e-303, 9e-9])
def test_a_learning_rate_no_run_could_use_is_refused(lr):
    with pytest.raises(ArchfitError, match="lr must be a positive rate at most"):
        TrainConfig(budget=Budget(steps=1), lr=lr).validate()
    TrainConfig(budget=Budget(steps=1), lr=MAX_LR).validate()  # the bounds themselves train
    TrainConfig(budget=Budget(steps=1), lr=MIN_LR).validate()


def test_a_batch_no_run_could_take_is_refused():
    with pytest.raises(ArchfitError, match="tokens per optimizer step"):
        TrainConfig(budget=Budget(steps=1), batch_size=10 ** 7, grad_accum=1000).validate()


@pytest.mark.parametrize("field, value", [("warmup", -0.1), ("min_lr_ratio", 1.5),
                                          ("beta2", 1.0), ("grad_clip", -1.0),
                                          ("weight_decay", float("nan")),
                                          ("decay_fraction", 2.0)])
def test_training_settings_outside_their_range_are_refused(field, value):
    with pytest.raises(ArchfitError, match=f"{field} must be"):
        TrainConfig(budget=Budget(steps=1), **{field: value}).validate()


def test_train_refuses_a_huge_rate_with_one_line_and_exit_2(cli):
    r = cli("train", "--layers", 1, "--width", 32, "--heads", 2, "--tokens", 2e4, "--lr", 1e9)
    assert r.exit_code == 2, r.output
    assert "lr must be a positive rate at most 1" in r.output and "Traceback" not in r.output
    assert "step" not in r.output  # refused before a step was trained


@pytest.mark.parametrize("edit, match", [
    (("lrs = [4e-3]", "lrs = [inf]"), "lr must be a positive rate"),
    (("lrs = [4e-3]", "lrs = [4e-3, 50.0]"), "got 50.0"),
    (("warmup = 0.1", "warmup = -0.1"), "warmup must be"),
])
def test_a_spec_with_a_value_no_run_could_use_is_refused_at_load(cli, repo, tmp_path, edit,
                                                                 match):
    text = (repo / "sweeps" / "demo.toml").read_text()
    assert edit[0] in text
    spec = tmp_path / "bad.toml"
    spec.write_text(text.replace(*edit))
    r = cli("sweep", "plan", spec)
    assert r.exit_code == 2 and match in r.output, r.output
    assert "runs" not in r.output.split("Error")[0]  # refused before any run was planned


@pytest.mark.parametrize("tokens, reason", [
    (1e30, "the peak learning rate 278 is past the plausible bound 1"),
    (1, "the batch of 0.58 tokens is below one sequence of 2,048 tokens"),
])
def test_a_recipe_no_run_could_use_is_flagged_in_text_and_json_and_not_exported(
        cli, tokens, reason):
    """Step Law (lr = 1.79 N^-0.713 D^0.307, batch = 0.58 D^0.571 tokens) read at 7e9
    parameters and 1e30 tokens gives a rate of 278; at 1 token, a batch of 0.58 tokens. The
    recipe says it is uninformative and why; an export refuses to round it into a config."""

    gpt2 = ("--family", "gpt2")  # the example: a 2,048 context
    N = json.loads(cli("recommend", "--params", 7e9, *gpt2, "--json").output)["recipe"]["params"]
    assert 1.79 * N ** -0.713 * 1e30 ** 0.307 == pytest.approx(278, rel=0.01)
    r = cli("recommend", "--params", 7e9, *gpt2, "--tokens", tokens, "--json")
    assert r.exit_code == 0, r.output
    rec = json.loads(r.output)["recipe"]
    assert rec["verdict"] == "uninformative" and any(reason in x for x in rec["reasons"])
    assert math.isclose(rec["batch_tokens"]["value"], 0.58 * float(tokens) ** 0.571, rel_tol=1e-9)
    text = cli("recommend", "--params", 7e9, *gpt2, "--tokens", tokens).output
    assert "recipe verdict: uninformative" in text and reason in text
    e = cli("recommend", "--params", 7e9, *gpt2, "--tokens", tokens, "--emit", "nanogpt")
    assert e.exit_code == 2 and "the recipe is not one a run could use" in e.output
    ok = json.loads(cli("recommend", "--params", 7e9, "--json").output)["recipe"]
    assert ok["verdict"] == "usable" and ok["reasons"] == []
