"""What a mixture-of-experts recommendation takes and refuses, and what its headline says: the
options it does not read refused in one line (CLI and API alike), shared experts counted inside
the active target, the tokens of the headline inside the MoE law's reach or named as the dense
law's, an unusable recipe named on the answer line, edited MoE fits refused against their law,
and configs read as transformers reads them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from archfit.errors import FitError, RecommendError
from archfit.recommending.request import (Block, Experts, Grid, Objective, RecommendRequest,
                                          Target)

ROOT = Path(__file__).resolve().parents[1]
MOE = ["recommend", "--params", "1e12", "--active-params", "3.2e10"]
DEEPSEEK = ROOT / "datasets" / "moe-configs" / "deepseek-v3" / "config.json"
DEEPSEEK_TOTAL = 671_026_404_352  # what transformers builds from the file (its README)


def one_line(r) -> str:  # type: ignore[no-untyped-def]
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.output
    assert "unexpected" not in lines[0] and "Traceback" not in r.output
    return lines[0]


# ------------------------------------------------------------------ options a mixture does not read
@pytest.mark.parametrize("extra, needle", [
    (["--ff-ratio", "3"], "drop --ff-ratio"),
    (["--ff-multiple", "256"], "drop --ff-multiple"),
    (["--pareto", "p.png"], "drop --pareto"),
    (["--compare", "--emit", "hf-mixtral"], "drop --compare"),
    (["--emit", "hf-qwen3-moe"], "export it with --emit hf-mixtral or hf-deepseek-v3"),
])
def test_a_mixture_refuses_the_options_it_does_not_read_in_one_line(cli, tmp_path, extra,
                                                                    needle, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line(cli(*MOE, *extra))
    assert needle in line and "--qk-norm" not in line
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("part", [Block(mlp="gelu"), Block(ff_ratio=3.0), Grid(n_kv_head=4)])
def test_the_api_refuses_the_same_block_and_grid_fields_for_a_mixture(part):
    from archfit.recommending.sparse import recommend_sparse

    kind = "block" if isinstance(part, Block) else "grid"
    req = RecommendRequest(Target(params=1e12), experts=Experts(active_params=3.2e10),
                           **{kind: part})
    with pytest.raises(RecommendError, match="would not be read: drop them"):
        recommend_sparse(req)


def test_recommend_sparse_names_what_it_takes_when_given_numbers():
    from archfit.recommending.sparse import recommend_sparse

    for total in (1e12, np.float32(1e12)):
        with pytest.raises(RecommendError, match="takes one RecommendRequest"):
            recommend_sparse(total, 3.2e10)  # type: ignore[arg-type]


@pytest.mark.parametrize("shared", [1, 2, 8])
def test_shared_experts_are_counted_inside_the_active_target(cli, shared):
    d = json.loads(cli(*MOE, "--shared-experts", shared, "--json").output)
    assert d["n_shared_experts"] == shared
    assert abs(d["rel_error_active"]) <= 0.10 and abs(d["rel_error"]) <= 0.10


def test_shared_experts_that_take_the_whole_active_mlp_are_refused(cli):
    assert "take the whole active MLP" in one_line(cli(*MOE, "--shared-experts", 1000))


def test_experts_whose_routers_take_the_active_size_are_blamed_on_experts(cli):
    """100,000 experts on a 3.2e10-active, 1e12 mixture: the routers alone (layers x width x
    experts) exceed the active parameters, which left a backbone of 1 parameter, and the
    refusal blamed --active-params; it names --experts and the routers' count."""
    line = one_line(cli("recommend", "--params", "1e12", "--active-params", "3.2e10",
                        "--experts", "100000"))
    assert line.startswith("Error: --experts 100,000: the routers alone") and \
        "use fewer experts" in line


def test_the_size_of_a_backbone_too_small_to_build_is_blamed_on_active_params(cli):
    line = one_line(cli("recommend", "--params", "4e3", "--active-params", "5e2"))
    assert "comes from --active-params 500" in line and "--params" not in line


# ------------------------------------------------------------------ the headline
def test_an_unusable_recipe_is_named_on_the_mixtures_answer_line(cli):
    text = cli(*MOE, "--tokens", "1e30").output
    head = " ".join(text.split("\n\n")[0].split())
    assert "(recipe unusable)" in head
    assert json.loads(cli(*MOE, "--tokens", "1e30", "--json").output)["recipe"]["verdict"] \
        == "uninformative"


def test_tokens_given_per_parameter_head_the_answer_without_an_extrapolation(cli):
    d = json.loads(cli(*MOE, "--tokens-per-param", "400", "--json").output)
    assert d["sparsity"]["law_tokens"] is None
    assert d["recipe"]["tokens"]["value"] / d["params_active_non_embedding"] >= 400 * 0.98


# ------------------------------------------------------------------ edited MoE fits
def _edited(tmp_path: Path, name: str, edit) -> Path:  # type: ignore[no-untyped-def]
    from archfit.laws import load_fit

    d = load_fit("krajewski2024").to_dict()
    edit(d)
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(d))
    return p


def _samples(d: dict, n: int = 3) -> dict:
    return {k: [v] * n for k, v in d["params"].items()}


@pytest.mark.parametrize("name, edit, needle", [
    ("alpha", lambda d: d["params"].update(alpha=-0.1), "alpha must be > 0"),
    ("huge-g", lambda d: d["params"].update(g=1e300), "no finite tokens or loss"),
    ("unequal", lambda d: d.update(bootstrap={"samples": {**_samples(d), "a": [1.0]}}),
     "hold 1 to 3 draws per parameter"),
    ("strings", lambda d: d.update(bootstrap={"samples": {k: ["x"] for k in d["params"]}}),
     "not a list of finite numbers"),
    ("law", lambda d: d.update(law="levine"), "has no params"),
])
def test_an_edited_moe_fit_is_refused_against_its_law_in_one_line(cli, tmp_path, name, edit,
                                                                  needle):
    line = one_line(cli(*MOE, "--fit", _edited(tmp_path, name, edit)))
    assert needle in line


@pytest.mark.parametrize("N, D, G", [(-1.0, 1e10, 4.0), (1e9, 1e10, 0.0), (1e9, 0.0, 4.0),
                                     (1e9, 1e10, math.nan)])
def test_the_granularity_law_refuses_inputs_outside_its_domain(N, D, G):
    from archfit.laws import load_fit

    f = load_fit("krajewski2024")
    with pytest.raises(FitError, match="defined for positive, finite"):
        f.law_obj.loss(f.params, N, D, G)


def test_an_optimum_on_the_moe_laws_search_bound_is_named_not_reported():
    from archfit.laws import get_law

    notes = get_law("moe-granularity").derived_notes(
        {"N_active_opt@1e22": 1e14, "N_active_opt@1e24": 5e9, "G_opt@1e22": 4.0})
    assert len(notes) == 1 and "search's upper bound" in notes[0] and "not an optimum" in notes[0]


# ------------------------------------------------------------------ configs, as transformers reads
@pytest.mark.parametrize("missing", ["q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                                     "kv_lora_rank", "v_head_dim"])
def test_a_deepseek_config_without_an_mla_field_is_counted_as_transformers_builds_it(tmp_path,
                                                                                     missing):
    from archfit.formats import read_file

    cfg = json.loads(DEEPSEEK.read_text())
    cfg.pop(missing)
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    imp = read_file(str(p))
    assert imp.shape.params_total == DEEPSEEK_TOTAL
    assert any("DeepseekV3Config defaults" in n and missing in n for n in imp.notes)


@pytest.mark.parametrize("text, needle", [
    ("[1, 2]", "a JSON array, not a config"),
    ('{\n // a comment\n "model_type": "llama"}', "without comments"),
    ('{"model_type": "llama", "hidden_size": ' + "9" * 5000 + "}", "too long to be a model's"),
    ("\x00\x00PATH=/usr/bin", "NUL bytes"),
    ("n_layer = 2", "not JSON"),
])
def test_a_json_config_that_is_not_one_object_gets_one_line(cli, tmp_path, text, needle):
    p = tmp_path / "config.json"
    p.write_text(text)
    assert needle in one_line(cli("shape", "--from", p))


@pytest.mark.parametrize("freq, needle", [("1", "write a whole number"),
                                          (2, "counts only moe_layer_freq 1")])
def test_moe_layer_freq_is_refused_saying_what_archfit_counts(cli, tmp_path, freq, needle):
    cfg = json.loads(DEEPSEEK.read_text())
    cfg["moe_layer_freq"] = freq
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    line = one_line(cli("shape", "--from", p))
    assert needle in line and "(it reads 1)" not in line


def test_a_whole_number_written_with_a_decimal_point_says_how_to_write_it(cli, tmp_path):
    cfg = json.loads(DEEPSEEK.read_text())
    cfg["num_hidden_layers"] = 61.0
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    assert "write 61" in one_line(cli("shape", "--from", p))


def test_an_export_keeps_the_routing_its_config_gave(cli):
    r = cli("shape", "--from", DEEPSEEK, "--emit", "hf-deepseek-v3")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):r.output.rindex("}") + 1])
    src = json.loads(DEEPSEEK.read_text())
    for key in ("n_group", "topk_group", "routed_scaling_factor"):
        assert out[key] == src[key], key


def test_a_granularity_and_an_expert_width_that_disagree_are_refused(cli):
    line = one_line(cli("shape", "--layers", 2, "--width", 256, "--heads", 4, "--experts", 8,
                        "--top-k", 2, "--granularity", 4, "--expert-d-ff", 64))
    assert "disagree" in line and "granularity 16" in line


# ------------------------------------------------------------------ the request's parts
@pytest.mark.parametrize("make, match", [
    (lambda: RecommendRequest(1e12), "target must be a Target"),  # type: ignore[arg-type]
    (lambda: RecommendRequest(Target(params=1e12), grid={}), "grid must be a Grid"),
    (lambda: RecommendRequest(Target(params=1e12), objective="time"),
     "objective must be an Objective"),
    (lambda: RecommendRequest(Target(params=1e12), experts={}), "experts must be an Experts"),
    (lambda: Objective(gpu=100), "gpu must be a name"),
    (lambda: Objective(gpu="tpu9"), "unknown accelerator"),
    (lambda: Objective(batch_tokens="2^19"), "batch_tokens must be a positive number"),
    (lambda: Objective(batch_tokens=0), "batch_tokens must be a positive number"),
    (lambda: Objective(batch_tokens=-5), "batch_tokens must be a positive number"),
    (lambda: Objective(batch_tokens=1e12), "tokens per GPU and step"),
    (lambda: Objective(gpu_hours=-1), "gpu_hours must be a positive number"),
    (lambda: Grid(depth_span="ab"), "depth_span must be two multiples"),
    (lambda: Grid(depth_span=(2.0, 0.5)), "depth_span must be two multiples"),
    (lambda: Block(bias="yes"), "bias must be True or False"),
    (lambda: Block(mlp="mamba"), "mlp must be one of"),
    (lambda: Experts(active_params=1e9, moe_law=3), "moe_law must be"),
])
def test_each_request_part_checks_its_fields_when_made(make, match):
    with pytest.raises(RecommendError, match=match):
        make()


def test_the_cli_refuses_a_per_gpu_batch_past_any_gpu_step(cli):
    assert "tokens per GPU and step" in one_line(cli("recommend", "--params", "7e9",
                                                     "--objective", "time",
                                                     "--gpu-batch-tokens", "1e12"))


def test_bench_gpu_checks_its_arguments_before_it_trains(tmp_path, monkeypatch, capsys):
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)  # in this process: its argument check, not a start-up
    for args, needle in ((["--steps", "0"], "--steps must be at least 1"),
                         (["--warmup", "-2"], "--warmup must be at least 1"),
                         (["--out", str(tmp_path)], "is a folder"),
                         (["--out", str(tmp_path / "no" / "x.json")], "does not exist"),
                         (["--device", "cuda"], "no CUDA device")):
        if args[:2] == ["--device", "cuda"]:
            import torch

            if torch.cuda.is_available():
                continue
        monkeypatch.setattr(sys, "argv", ["bench_gpu.py", "--device", "cpu", *args])
        with pytest.raises(SystemExit) as e:
            bench.main()
        lines = capsys.readouterr().err.strip().splitlines()
        assert e.value.code == 2 and len(lines) == 1 and needle in lines[0], lines
    assert not list(tmp_path.iterdir())

