"""Exports to HF / nanoGPT / Megatron / torchtitan / LitGPT, imports from HF configs and nanoGPT
checkpoints, the known-models table, ``archfit compare`` and ``plot --known-models``.

The parameter counts are checked against transformers itself: each config is built with
``AutoModelForCausalLM.from_config`` on the meta device (no weights, no download) and torch's
count must equal archfit's ``params_total``.
"""

from __future__ import annotations

import json
import os
import random

import pytest

from archfit.errors import ArchfitError, ShapeError
from archfit.formats import FORMATS, FormatError, export, family_fields, problems
from archfit.formats.hf import from_hf_config, hf_config
from archfit.shapes.known import load_known_models
from archfit.shapes import Shape

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
transformers.logging.set_verbosity_error()

N_RANDOM = 30  # random shapes per format and per family


def hf_count(cfg: dict) -> int:
    """torch's parameter count of the model transformers builds from ``cfg`` (meta device)."""
    c = transformers.AutoConfig.for_model(**{k: v for k, v in cfg.items() if k != "archfit"})
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(c)
    return sum(p.numel() for p in model.parameters())


def _heads(rng: random.Random) -> tuple[int, int, int]:
    head_dim = rng.choice([8, 16, 32, 64])
    n_head = rng.choice([1, 2, 3, 4, 6, 8])
    n_kv = rng.choice([d for d in range(1, n_head + 1) if n_head % d == 0])
    return head_dim, n_head, n_kv


def random_llama_shape(rng: random.Random) -> Shape:
    head_dim, n_head, n_kv = _heads(rng)
    d = head_dim * n_head
    return Shape(n_layer=rng.randint(1, 5), d_model=d, n_head=n_head, n_kv_head=n_kv,
                 d_ff=rng.randint(1, 8 * d), vocab_size=rng.randint(16, 5000),
                 n_ctx=rng.choice([64, 128, 2048]), mlp="swiglu", position="rope",
                 norm="rmsnorm", bias=False, tied_embeddings=rng.random() < 0.5)


def random_gpt2_shape(rng: random.Random) -> Shape:
    head_dim, n_head, _ = _heads(rng)
    d = head_dim * n_head
    return Shape(n_layer=rng.randint(1, 5), d_model=d, n_head=n_head,
                 d_ff=rng.randint(1, 8 * d), vocab_size=rng.randint(16, 5000),
                 n_ctx=rng.choice([64, 128, 1024]), tied_embeddings=rng.random() < 0.5)


# ==================================================================== exact counts
@pytest.mark.parametrize("kind,make", [("hf-llama", random_llama_shape),
                                       ("hf-gpt2", random_gpt2_shape)])
def test_exported_hf_configs_build_models_with_exactly_params_total(kind, make):
    rng = random.Random(kind)
    seen = {"tied": 0, "untied": 0, "gqa": 0, "mqa": 0}
    for _ in range(N_RANDOM):
        s = make(rng)
        assert hf_count(hf_config(s, kind)) == s.params_total, s
        seen["tied" if s.tied_embeddings else "untied"] += 1
        if 1 < s.n_kv_head < s.n_head:
            seen["gqa"] += 1
        if s.n_kv_head == 1 and s.n_head > 1:
            seen["mqa"] += 1
    assert seen["tied"] and seen["untied"]
    if kind == "hf-llama":
        assert seen["gqa"] and seen["mqa"]


def _random_family_config(family: str, rng: random.Random) -> dict:
    head_dim, n_head, n_kv = _heads(rng)
    d = head_dim * n_head
    L, f, v = rng.randint(1, 4), rng.randint(1, 6 * d), rng.randint(16, 4000)
    if family == "gpt2":
        cfg = {"model_type": "gpt2", "n_layer": L, "n_embd": d, "n_head": n_head,
               "vocab_size": v, "n_positions": rng.choice([64, 1024]),
               "n_inner": rng.choice([None, f]), "activation_function": "gelu_new"}
    elif family == "gpt_neox":
        cfg = {"model_type": "gpt_neox", "num_hidden_layers": L, "hidden_size": d,
               "num_attention_heads": n_head, "intermediate_size": f, "vocab_size": v,
               "max_position_embeddings": 2048, "hidden_act": "gelu",
               "use_parallel_residual": rng.random() < 0.5}
    else:
        cfg = {"model_type": family, "num_hidden_layers": L, "hidden_size": d,
               "num_attention_heads": n_head, "num_key_value_heads": n_kv,
               "intermediate_size": f, "vocab_size": v, "max_position_embeddings": 4096,
               "hidden_act": "silu", "rms_norm_eps": 1e-6}
    if rng.random() < 0.7:  # absent: both sides use the family's default
        cfg["tie_word_embeddings"] = rng.random() < 0.5
    return cfg


@pytest.mark.parametrize("family", ["llama", "mistral", "qwen2", "gpt_neox", "gpt2"])
def test_imported_hf_configs_count_like_transformers(family):
    rng = random.Random(family)
    tied = set()
    for _ in range(N_RANDOM):
        cfg = _random_family_config(family, rng)
        s = from_hf_config(cfg).shape
        assert s.params_total == hf_count(cfg), cfg
        tied.add(s.tied_embeddings)
    assert tied == {True, False}


def test_biases_and_mlps_are_covered_by_the_families():
    rng = random.Random(0)
    shapes = [from_hf_config(_random_family_config(f, rng)).shape
              for f in ("gpt2", "gpt_neox", "qwen2", "llama")]
    assert {s.bias for s in shapes} == {True, False}
    assert {s.mlp for s in shapes} == {"gelu", "swiglu"}
    assert any(s.qkv_bias and not s.bias for s in shapes)  # Qwen2: q/k/v biases only


PUBLISHED = {"Llama-2 7B": 6_738_415_616, "Llama-3 8B": 8_030_261_248,
             "Mistral-7B": 7_241_732_096, "GPT-2 124M": 124_439_808, "GPT-2 355M": 354_823_168,
             "GPT-2 774M": 774_030_080, "GPT-2 1.5B": 1_557_611_200}


def test_published_counts_match_exactly():
    models = {m.name: m for m in load_known_models()}
    for name, count in PUBLISHED.items():
        assert models[name].shape.params_total == count, name
    checked = [m for m in models.values() if m.params_published is not None]
    assert len(checked) >= 29
    for m in checked:
        assert m.shape.params_total == m.params_published, m.name


@pytest.mark.parametrize("name,kind", [("Llama-3 8B", "hf-llama"), ("Mistral-7B", "hf-llama"),
                                       ("GPT-2 124M", "hf-gpt2")])
def test_published_shapes_exported_build_their_published_count(name, kind):
    m = next(m for m in load_known_models() if m.name == name)
    assert hf_count(hf_config(m.shape, kind)) == PUBLISHED[name]


def test_known_model_table_has_the_families_and_sources():
    models = load_known_models()
    fam = {}
    for m in models:
        fam[m.family] = fam.get(m.family, 0) + 1
        assert m.source.strip(), m.name
    assert fam["GPT-2"] == 4 and fam["GPT-3"] == 8
    for f in ("Chinchilla", "Gopher", "Llama-1", "Llama-2", "Llama-3", "Mistral", "Qwen2.5",
              "OLMo-1", "OLMo-2", "Pythia"):
        assert fam.get(f), f


def test_known_models_frame_and_notebook_api():
    import archfit

    df = archfit.known_models()
    assert df.height == len(load_known_models())
    assert {"name", "n_layer", "d_model", "n_head", "n_kv_head", "d_ff", "vocab_size",
            "tied_embeddings", "params_total", "params_non_embedding", "source"} <= set(df.columns)
    llama = df.filter(df["name"] == "Llama-2 7B").row(0, named=True)
    assert llama["params_total"] == 6_738_415_616
    from archfit.formats import hf_config as to_config, shape_from_config

    s = shape_from_config(to_config(archfit.Shape(n_layer=2, d_model=64, n_head=4, n_kv_head=2,
                                                  mlp="swiglu", position="rope", norm="rmsnorm",
                                                  bias=False, d_ff=96, vocab_size=100,
                                                  tied_embeddings=False)))
    assert (s.n_layer, s.d_model, s.n_head, s.n_kv_head, s.d_ff, s.tied_embeddings) == \
        (2, 64, 4, 2, 96, False)


# ==================================================================== the other formats
# (each loaded by its own framework: tests/test_framework_loaders.py, -m frameworks)
def test_nanogpt_file_is_plain_globals_read_back_without_running_it(tmp_path, cli):
    for bias in (True, False):
        s = Shape(n_layer=3, d_model=96, n_head=3, vocab_size=500, n_ctx=128, bias=bias)
        text = export(s, "nanogpt")
        assert "GPTConfig" not in text and "import" not in text
        assert f"n_layer = 3\nn_head = 3\nn_embd = 96\nblock_size = 128\nbias = {bias}" in text
        (tmp_path / "c.py").write_text(text + "import os; os.system('touch pwned')\n")
        r = cli("shape", "--from", tmp_path / "c.py", "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["params_total"] == s.params_total
        assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")


def test_nanogpt_checkpoint_is_read_by_shape_from(cli, tmp_path):
    args = {"n_layer": 2, "n_head": 2, "n_embd": 64, "block_size": 32, "bias": False,
            "vocab_size": 100, "dropout": 0.0}
    torch.save({"model_args": args, "model": {"w": torch.zeros(2)}, "iter_num": 5},
               tmp_path / "ckpt.pt")
    r = cli("shape", "--from", tmp_path / "ckpt.pt", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    s = Shape(n_layer=2, d_model=64, n_head=2, d_ff=256, vocab_size=100, n_ctx=32, bias=False)
    assert d["params_total"] == s.params_total and d["import"]["family"] == "nanogpt"


def test_megatron_arguments_say_the_shape_and_megatrons_padded_count():
    from archfit.formats import ExportOptions
    from archfit.formats.megatron import megatron_counts

    s = Shape(n_layer=6, d_model=512, n_head=8, n_kv_head=2, d_ff=1408, vocab_size=32000,
              mlp="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False)
    text = export(s, "megatron", ExportOptions(tp=8))
    args = " ".join(x.strip() for x in text.split("MODEL_ARGS=(")[1].split(")")[0].splitlines())
    for a in ("--num-layers 6", "--hidden-size 512", "--ffn-hidden-size 1408",
              "--num-attention-heads 8", "--group-query-attention", "--num-query-groups 2",
              "--swiglu", "--normalization RMSNorm", "--position-embedding-type rope",
              "--disable-bias-linear", "--untie-embeddings-and-output-weights",
              "--tensor-model-parallel-size 8", "--make-vocab-size-divisible-by 128"):
        assert a in args
    assert f"params_total {s.params_total:,}" in text
    c = megatron_counts(s, ExportOptions(tp=8))  # 32000 -> a multiple of 1024: 32768
    assert c["padded_vocab_size"] == 32768
    assert c["params_total_padded"] - s.params_total == 2 * 768 * 512
    assert f"{c['params_total_padded']:,}" in text
    assert megatron_counts(s, ExportOptions())["padded_vocab_size"] == 32000


def test_torchtitan_module_names_its_release_and_shape():
    import ast

    s = Shape(n_layer=4, d_model=256, n_head=4, n_kv_head=2, d_ff=704, vocab_size=1000,
              mlp="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=True)
    text = export(s, "torchtitan")
    assert "torchtitan 0.3.0" in text.splitlines()[0]
    tree = ast.parse(text)
    assert {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} >= {"archfit_model"}
    from archfit.formats import read_text

    assert read_text(text, ".py").shape == s


def test_litgpt_yaml_nests_the_model_and_ties_through_train():
    yaml = pytest.importorskip("yaml")
    s = Shape(n_layer=4, d_model=256, n_head=4, n_kv_head=1, d_ff=704, vocab_size=1000,
              mlp="swiglu", position="rope", norm="rmsnorm", bias=False, qkv_bias=True,
              tied_embeddings=True)
    y = yaml.safe_load(export(s, "litgpt"))
    m = y["model_config"]
    assert (m["n_layer"], m["n_embd"], m["n_head"], m["n_query_groups"], m["head_size"],
            m["intermediate_size"], m["padded_vocab_size"]) == (4, 256, 4, 1, 64, 704, 1000)
    assert m["mlp_class_name"] == "LLaMAMLP" and m["norm_class_name"] == "RMSNorm"
    assert m["attn_bias"] is True and m["bias"] is False
    assert y["train"]["tie_embeddings"] is True and y["model_name"] == m["name"]


def test_the_cli_lists_every_format():
    from archfit.cli.recommend_cmd import recommend
    from archfit.cli.shape_cmd import shape

    from archfit.formats import FORMAT_NAMES

    assert tuple(FORMATS)[:len(FORMAT_NAMES)] == FORMAT_NAMES  # the cold list is the registry's
    for command in (shape, recommend):
        emit = next(p for p in command.params if p.name == "emit")
        assert all(name in emit.help for name in FORMAT_NAMES)  # the help, from the list
        assert all(emit.type.convert(name, emit, None) == name for name in FORMATS)


def test_formats_name_what_they_cannot_express():
    gpt2_like = Shape(n_layer=2, d_model=64, n_head=4)
    assert problems(gpt2_like, "hf-gpt2") == []
    assert any("SwiGLU" in p for p in problems(gpt2_like, "hf-llama"))
    assert any("rotary" in p for p in problems(gpt2_like, "litgpt"))
    assert any("GQA" in p for p in problems(gpt2_like.with_(n_kv_head=2), "nanogpt"))
    with pytest.raises(FormatError, match="cannot express"):
        export(gpt2_like, "torchtitan")
    for name in FORMATS:  # every format can express its own family's shape
        s = Shape(**family_fields({"n_layer": 2, "d_model": 64, "n_head": 4,
                                   "vocab_size": 100, **FORMATS[name].defaults}))
        assert problems(s, name) == [], name


# ==================================================================== CLI
def test_recommend_emit_hf_llama_loads_with_autoconfig_and_counts_exactly(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("recommend", "--params", "7e9", "--emit", "hf-llama", "-o", out)
    assert r.exit_code == 0, r.output
    assert "the llama family" in r.output and "the shape 'recommend' prints" in r.output
    cfg = transformers.AutoConfig.from_pretrained(str(out))
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    n = sum(p.numel() for p in model.parameters())
    written = json.loads((out / "config.json").read_text())
    assert n == written["archfit"]["params_total"]
    assert "convention" in written["archfit"]
    j = json.loads(cli("recommend", "--params", "7e9", "--json").output)
    assert j["family"] == "llama" and j["params_total"] == n  # the answer printed is exported
    assert (cfg.num_hidden_layers, cfg.hidden_size) == (j["n_layer"], j["d_model"])
    assert cfg.num_attention_heads % 8 == 0 and cfg.num_key_value_heads == 8  # TP-8, GQA
    assert cfg.hidden_act == "silu" and not cfg.tie_word_embeddings
    # again onto the same folder: archfit's own export is replaced; a user's file is not
    # without --force
    assert cli("recommend", "--params", "7e9", "--emit", "hf-llama", "-o", out).exit_code == 0
    (out / "config.json").write_text('{"model_type": "llama", "mine": true}')
    again = cli("recommend", "--params", "7e9", "--emit", "hf-llama", "-o", out)
    assert again.exit_code == 2 and "--force" in again.output
    assert json.loads((out / "config.json").read_text())["mine"] is True
    assert cli("recommend", "--params", "7e9", "--emit", "hf-llama", "-o", out,
               "--force").exit_code == 0


def test_emit_to_stdout_keeps_stdout_a_config(archfit_cmd, tmp_path):
    import subprocess

    p = subprocess.run(archfit_cmd("recommend", "--params", "1e9", "--emit", "hf-gpt2"),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    cfg = json.loads(p.stdout)
    assert cfg["model_type"] == "gpt2" and cfg["tie_word_embeddings"] is True
    assert "verdict" in p.stderr and "the gpt2 family" in p.stderr


def test_shape_emit_keeps_the_shape_given(cli):
    r = cli("shape", "--layers", "2", "--width", "256", "--heads", "4", "--emit", "hf-llama")
    assert r.exit_code == 2 and "not gelu" in r.output and "--mlp swiglu" in r.output
    r = cli("shape", "--layers", "2", "--width", "256", "--heads", "4", "--mlp", "swiglu",
            "--rope", "--rmsnorm", "--no-bias", "--untied", "--ff-ratio", "llama",
            "--emit", "hf-llama")
    assert r.exit_code == 0, r.output
    cfg = json.loads(r.output[r.output.index("{"):r.output.rindex("}") + 1])
    assert cfg["intermediate_size"] == 768 and cfg["tie_word_embeddings"] is False
    r = cli("shape", "--layers", "2", "--width", "256", "--heads", "4", "--kv-heads", "1",
            "--d-ff", "640", "--mlp", "swiglu", "--rope", "--rmsnorm", "--no-bias",
            "--emit", "hf-llama")
    cfg = json.loads(r.output[r.output.index("{"):r.output.rindex("}") + 1])
    assert cfg["num_key_value_heads"] == 1 and cfg["intermediate_size"] == 640
    assert cfg["tie_word_embeddings"] is True
    # GPT-2 small to Megatron: GELU, d_ff 3072 and tying kept
    r = cli("shape", "--layers", "12", "--width", "768", "--heads", "12", "--emit", "megatron")
    assert r.exit_code == 0, r.output
    assert "--ffn-hidden-size 3072" in r.output and "--swiglu" not in r.output
    assert "--untie" not in r.output and "params_total 124,439,808" in r.output


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_round_trips_through_shape_from(cli, tmp_path, fmt):
    for over in ({}, {"n_kv_head": 2, "tied_embeddings": False}, {"tied_embeddings": True}):
        fields = {"n_layer": 3, "d_model": 128, "n_head": 4, "vocab_size": 321, "n_ctx": 96,
                  **FORMATS[fmt].defaults, **over}
        try:
            s = Shape(**family_fields(fields))
        except ShapeError:  # not a shape of the format's family (latent attention: kv heads)
            continue
        if problems(s, fmt):
            continue
        path = tmp_path / fmt / str(len(over)) / FORMATS[fmt].filename
        path.parent.mkdir(parents=True)
        path.write_text(export(s, fmt))
        r = cli("shape", "--from", path, "--json")
        assert r.exit_code == 0, (fmt, r.output)
        d = json.loads(r.output)
        assert (d["params_total"], d["n_layer"], d["d_model"], d["n_kv_head"], d["d_ff"]) == \
            (s.params_total, s.n_layer, s.d_model, s.n_kv_head, s.d_ff), fmt


def test_shape_from_says_format_not_supported(cli, tmp_path):
    for name, text in (("m.toml", "[model]\n"), ("x.py", "import os\n"),
                       ("a.sh", "echo hi\n"), ("l.yaml", "a: 1\n")):
        (tmp_path / name).write_text(text)
        line = _one_line_exit_2(cli("shape", "--from", tmp_path / name))
        assert "format not supported" in line, line


def test_shape_from_reports_unknown_fields(cli, tmp_path):
    cfg = {"model_type": "qwen2", "num_hidden_layers": 2, "hidden_size": 64,
           "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
           "vocab_size": 100, "tie_word_embeddings": True, "rope_theta": 1e6,
           "my_new_knob": 3}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = cli("shape", "--from", tmp_path)
    assert r.exit_code == 0, r.output
    assert "unknown fields" in r.output and "my_new_knob" in r.output
    assert f"{hf_count(cfg):,}" in r.output
    with pytest.warns(UserWarning, match="my_new_knob"):
        from archfit.formats import shape_from_config

        shape_from_config(cfg)


def _one_line_exit_2(r):
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    return lines[0]


def test_bad_inputs_exit_2_with_one_line(cli, tmp_path):
    def cfg_file(name, d):
        p = tmp_path / name
        p.write_text(json.dumps(d) if isinstance(d, dict) else d)
        return p

    base = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
            "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}
    cases = [
        (("shape", "--from", cfg_file("t5.json", {**base, "model_type": "t5"})),
         "unknown model family"),
        (("shape", "--from", cfg_file("miss.json", {k: v for k, v in base.items()
                                                    if k != "hidden_size"})),
         "missing field hidden_size"),
        (("shape", "--from", cfg_file("nomt.json", {k: v for k, v in base.items()
                                                    if k != "model_type"})), "model_type"),
        (("shape", "--from", cfg_file("hd.json", {**base, "model_type": "gpt_neox",
                                                   "head_dim": 32})), "head_dim"),
        (("shape", "--from", cfg_file("act.json", {**base, "hidden_act": "gelu"})),
         "hidden_act"),
        (("shape", "--from", cfg_file("bad.json", "{not json")), "not valid JSON"),
        (("shape", "--from", tmp_path / "nope.json"), "no such file"),
        (("shape", "--from", cfg_file("x.pt", "not a checkpoint")), "not a readable torch"),
        (("recommend", "--params", "7e9", "--mlp", "gelu", "--emit", "hf-llama"),
         "cannot express"),
        (("shape", "--layers", "2", "--width", "64", "--heads", "4", "--kv-heads", "2",
          "--emit", "nanogpt"), "cannot express"),
        (("recommend", "--params", "7e9", "--emit", "hf-llama", "-o",
          cfg_file("afile", "x")), "is a file"),
        (("recommend", "--params", "7e9", "--emit", "hf-llama", "--json"), "not both"),
        (("shape", "--from", cfg_file("ok.json", base), "--layers", "3"), "not both"),
        (("compare", "--fit", "epoch2024"), "no optimal depth"),
        (("compare", "--family", "Nope"), "unknown family"),
    ]
    for args, needle in cases:
        line = _one_line_exit_2(cli(*args))
        assert needle in line, (args, line)
    existing = tmp_path / "o"
    existing.mkdir()
    (existing / "config.json").write_text("{\"mine\": 1}")
    line = _one_line_exit_2(cli("shape", "--layers", "2", "--width", "64", "--heads", "4",
                                "--emit", "hf-gpt2", "-o", existing))
    assert "--force" in line
    assert json.loads((existing / "config.json").read_text()) == {"mine": 1}


def test_compare_says_gpt3_175b_is_deeper_than_levine(cli):
    r = cli("compare", "--json")
    assert r.exit_code == 0, r.output
    rows = {m["name"]: m for m in json.loads(r.output)["models"]}
    g = rows["GPT-3 175B"]
    assert g["n_layer"] == 96 and g["call"] == "deeper"
    assert g["n_layer_opt"] == pytest.approx(80.5, abs=0.1)  # Levine et al.'s argument
    assert g["summary"] == "1.19x too deep"
    text = cli("compare", "--family", "GPT-3").output
    assert "GPT-3 175B" in text and "1.19x too deep" in text and "Kaplan's N" in text


def test_compare_with_a_bootstrapped_fit_gives_cis(levine_synthetic, tmp_path, cli):
    from archfit.recommending.landscape import place_known_models
    from archfit.laws.inference.fitting import fit

    f = fit(levine_synthetic(), "levine", bootstrap=40, seed=0)
    _, rows = place_known_models(f)
    assert all(r.ci is not None and r.ci[0] <= r.n_layer_opt <= r.ci[1] for r in rows)
    assert {r.call for r in rows} <= {"deeper", "shallower", "within CI"}


def test_plot_known_models_draws_one_marker_per_model(cli, tmp_path):
    from archfit.recommending.landscape import place_known_models
    from archfit.plots import known_models_map

    r = cli("plot", "--known-models", "-o", tmp_path, "--json")
    assert r.exit_code == 0, r.output
    path = json.loads(r.output)["figures"][0]
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    f, rows = place_known_models()
    fig = known_models_map(f, rows)
    markers = [ln for ax in fig.axes for ln in ax.get_lines() if ln.get_gid() == "known-model"]
    assert len(markers) == len(rows) == len(load_known_models())
    assert sorted((ln.get_xdata()[0], ln.get_ydata()[0]) for ln in markers) == \
        sorted((r.N, r.model.shape.n_layer) for r in rows)


def test_bad_known_models_rows_are_one_line_errors(tmp_path):
    p = tmp_path / "k.csv"
    src = open(load_known_models.__defaults__[0]).read().splitlines()
    p.write_text("\n".join([src[0], src[1].replace(",12,768,12,", ",12,770,12,")]) + "\n")
    with pytest.raises(ArchfitError, match="line 2"):
        load_known_models(str(p))


def test_known_models_labels_do_not_overlap_at_8pt():
    from archfit.recommending.landscape import place_known_models
    from archfit.plots import LABEL_PT, known_models_map, label_box

    f, rows = place_known_models()
    fig = known_models_map(f, rows)
    renderer = fig.canvas.get_renderer()
    labels = [t for ax in fig.axes for t in ax.texts if t.get_gid() == "known-model-label"]
    names = ", ".join(t.get_text() for t in labels)
    assert all(r.model.name in names for r in rows)  # every model is labelled
    assert all(t.get_fontsize() >= LABEL_PT >= 8 for t in labels)
    boxes = [label_box(t, renderer) for t in labels]
    clashes = [(labels[i].get_text(), labels[j].get_text()) for i in range(len(boxes))
               for j in range(i) if boxes[i].overlaps(boxes[j])]
    assert not clashes, clashes
