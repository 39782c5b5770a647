"""Every export format, loaded by its framework's own loader (``-m frameworks``; the
frameworks come with ``pip install -e '.[frameworks]'``, which ``.ci/run`` installs).

For each format, three shapes: a tiny one of the format's family, what ``archfit recommend
--params 7e9 --emit FORMAT`` writes, and a GQA shape (refused, naming the field, where the
format has no GQA). Each file is written by the CLI, read by the framework's loader, the model
built on the meta device, and torch's parameter count compared with the count archfit printed.

- transformers: ``AutoConfig.from_pretrained`` + ``AutoModelForCausalLM.from_config``.
- LitGPT: the ``litgpt`` CLI's own parser (``litgpt pretrain --config FILE``), ``litgpt.GPT``.
- torchtitan 0.3.0: its ``ConfigManager`` (``--module ... --config ...``) and the model config's
  ``build()``. Its import chain needs ``triton``, installed for real (it imports on CPU).
- Megatron: megatron-core's ``GPTModel`` and ``TransformerConfig``, with Megatron-LM's vocab
  padding. Megatron-LM's argument parser (``megatron/training/arguments.py``) is not published
  on PyPI (the megatron-core wheel and sdist hold ``megatron/core`` only), so
  :func:`megatron_args` reads the emitted flags with argparse into the TransformerConfig fields
  they name: the one stand-in here, for the parser, not for the model.
- nanoGPT has no package: the file is executed the way its ``configurator.py`` does, into the
  globals of its ``train.py``, and those globals are checked.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shlex
import sys
import warnings
from pathlib import Path

import pytest

from archfit.cli.emit import family_flags
from archfit.formats import family_fields
from archfit.shapes import Shape

pytestmark = pytest.mark.frameworks
torch = pytest.importorskip("torch")


def _count(model) -> int:
    return sum(p.numel() for p in model.parameters())  # shared (tied) weights once


def _written(cli, tmp: Path, args: list[str]) -> tuple[Path, str]:
    r = cli(*args, "-o", tmp)
    assert r.exit_code == 0, r.output
    path = Path(re.search(r"wrote (\S+) \(", r.output).group(1))
    return path, r.output


def _printed_total(output: str) -> int:
    return int(re.search(r"params_total ([\d,]+)", output).group(1).replace(",", ""))


def _family_args(fmt: str, n_head: int = 4, d_model: int = 64,
                 n_kv_head: int | None = None) -> list[str]:
    """Shape flags of the format's own family (the flags its refusal names)."""
    args = ["--layers", "2", "--width", str(d_model), "--heads", str(n_head), "--vocab", "100",
            "--ctx", "64", *family_flags(fmt).split()]
    return args + (["--kv-heads", str(n_kv_head)] if n_kv_head else [])


def _shapes(fmt: str):
    """(label, CLI args) of the three shapes, and whether the format can express each."""
    gqa_ok = fmt not in ("hf-gpt2", "nanogpt")
    return [("tiny", ["shape", *_family_args(fmt), "--emit", fmt], True),
            ("7e9", ["recommend", "--params", "7e9", "--emit", fmt], True),
            ("gqa", ["shape", *_family_args(fmt, n_head=8, d_model=128, n_kv_head=2),
                     "--emit", fmt], gqa_ok)]


def _check_three(cli, tmp_path, fmt, load):
    for label, args, ok in _shapes(fmt):
        d = tmp_path / label
        if not ok:
            r = cli(*args, "-o", d)
            assert r.exit_code == 2 and "GQA" in r.output, (label, r.output)
            continue
        path, out = _written(cli, d, args)
        n = load(path, out)
        assert n == _printed_total(out), (fmt, label, n, out)


# ==================================================================== transformers
@pytest.mark.parametrize("fmt", ["hf-llama", "hf-gpt2"])
def test_hf_configs_load_with_autoconfig(cli, tmp_path, fmt):
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()

    def load(path, out):
        cfg = transformers.AutoConfig.from_pretrained(str(path.parent))
        with torch.device("meta"):
            return _count(transformers.AutoModelForCausalLM.from_config(cfg))

    _check_three(cli, tmp_path, fmt, load)


# ==================================================================== LitGPT
def test_litgpt_config_loads_through_litgpt_pretrain_parser(cli, tmp_path, monkeypatch):
    pytest.importorskip("litgpt")
    from jsonargparse import capture_parser

    import litgpt.__main__ as litgpt_main
    from litgpt.model import GPT

    def load(path, out):
        monkeypatch.setattr(sys, "argv", ["litgpt", "pretrain", "--config", str(path)])
        parser = capture_parser(litgpt_main.main)
        cfg = parser.instantiate_classes(
            parser.parse_args(["pretrain", "--config", str(path)]))
        run = cfg.pretrain
        with torch.device("meta"):
            model = GPT(run.model_config)
        if run.train.tie_embeddings:  # what litgpt pretrain does with the option
            model.transformer.wte.weight = model.lm_head.weight
        return _count(model)

    _check_three(cli, tmp_path, "litgpt", load)
    tied, tied_out = _written(cli, tmp_path / "tied",
                              ["shape", "--layers", "2", "--width", "64", "--heads", "4",
                               "--vocab", "100", "--ctx", "64", "--mlp", "swiglu", "--rope",
                               "--rmsnorm", "--no-bias", "--emit", "litgpt"])
    assert "tie_embeddings: true" in tied.read_text()
    assert load(tied, tied_out) == _printed_total(tied_out)


# ==================================================================== torchtitan
def test_torchtitan_config_loads_through_its_config_manager(cli, tmp_path, monkeypatch):
    pytest.importorskip("torchtitan")
    from torchtitan.config.manager import ConfigManager

    def load(path, out):
        assert "torchtitan 0.3.0" in path.read_text()
        monkeypatch.syspath_prepend(str(path.parent))
        sys.modules.pop("archfit_torchtitan", None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = ConfigManager().parse_args(["--module", "archfit_torchtitan", "--config",
                                                 "archfit_model", "--training.steps", "3"])
        sys.path.remove(str(path.parent))
        assert config.training.steps == 3  # the job settings are torchtitan's own config
        assert config.training.seq_len == json.loads(
            re.search(r"'seq_len': (\d+)", path.read_text()).group(1))
        with torch.device("meta"):
            return _count(config.model_spec.model.build())

    _check_three(cli, tmp_path, "torchtitan", load)
    tied, out = _written(cli, tmp_path / "tied",
                         ["shape", "--layers", "2", "--width", "64", "--heads", "4", "--vocab",
                          "100", "--ctx", "64", "--mlp", "swiglu", "--rope", "--rmsnorm",
                          "--no-bias", "--emit", "torchtitan"])
    assert load(tied, out) == _printed_total(out)


# ==================================================================== Megatron
def megatron_args(path: Path) -> tuple[argparse.Namespace, int]:
    """The emitted MODEL_ARGS and VOCAB_SIZE, read with bash itself and then argparse (the
    stand-in for Megatron-LM's parser, which is not on PyPI; flag names as Megatron-LM's)."""
    import subprocess

    out = subprocess.run(["bash", "-c", 'source "$1"; echo "$VOCAB_SIZE"; '
                          'printf "%s\\n" "${MODEL_ARGS[@]}"', "_", str(path)],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    vocab, args = int(out[0]), [a for a in out[1:] if a]
    p = argparse.ArgumentParser()
    for flag in ("num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads",
                 "kv-channels", "seq-length", "max-position-embeddings", "num-query-groups",
                 "tensor-model-parallel-size", "make-vocab-size-divisible-by", "num-experts",
                 "moe-router-topk", "moe-ffn-hidden-size",
                 "moe-shared-expert-intermediate-size"):
        p.add_argument(f"--{flag}", type=int)
    p.add_argument("--moe-layer-freq", type=ast.literal_eval, default=1)
    p.add_argument("--normalization", default="LayerNorm")
    p.add_argument("--position-embedding-type", default="learned_absolute")
    for flag in ("group-query-attention", "swiglu", "squared-relu", "disable-bias-linear",
                 "add-qkv-bias", "qk-layernorm", "untie-embeddings-and-output-weights"):
        p.add_argument(f"--{flag}", action="store_true")
    return p.parse_args(sum((shlex.split(a) for a in args), [])), vocab


@pytest.fixture(scope="module")
def megatron_state():
    pytest.importorskip("megatron.core")
    import torch.distributed as dist

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core import parallel_state
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        dist.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    yield
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()


def test_megatron_args_build_megatron_core_gpt_with_the_padded_count(cli, tmp_path,
                                                                       megatron_state):
    import torch.nn.functional as F
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    def load(path, out):
        a, vocab = megatron_args(path)
        m = a.make_vocab_size_divisible_by * a.tensor_model_parallel_size
        padded = -(-vocab // m) * m  # Megatron-LM's _vocab_size_with_padding
        cfg = TransformerConfig(
            num_layers=a.num_layers, hidden_size=a.hidden_size,
            ffn_hidden_size=a.ffn_hidden_size, num_attention_heads=a.num_attention_heads,
            num_query_groups=a.num_query_groups if a.group_query_attention else None,
            kv_channels=a.kv_channels, gated_linear_unit=a.swiglu,
            activation_func=F.silu if a.swiglu else F.gelu, normalization=a.normalization,
            add_bias_linear=not a.disable_bias_linear, add_qkv_bias=a.add_qkv_bias,
            qk_layernorm=a.qk_layernorm, use_cpu_initialization=True,
            perform_initialization=False)
        spec = get_gpt_layer_local_spec(normalization=a.normalization,
                                        qk_layernorm=a.qk_layernorm)
        with torch.device("meta"):
            model = GPTModel(config=cfg, transformer_layer_spec=spec, vocab_size=padded,
                             max_sequence_length=a.max_position_embeddings,
                             position_embedding_type=a.position_embedding_type,
                             share_embeddings_and_output_weights=not
                             a.untie_embeddings_and_output_weights)
        n = _count(model)
        megatron = int(re.search(r"Megatron's count with the vocabulary padded to [\d,]+ "
                                 r"\(a multiple of \d+ x tp \d+\): ([\d,]+)", out)
                       .group(1).replace(",", ""))
        assert n == megatron, (n, megatron)
        s = Shape(**family_fields({"n_layer": a.num_layers, "d_model": a.hidden_size,
                                   "n_head": a.num_attention_heads, "d_ff": a.ffn_hidden_size,
                                   "vocab_size": vocab, "n_ctx": a.seq_length,
                                   "mlp": "swiglu" if a.swiglu else "gelu",
                                   "n_kv_head": a.num_query_groups or a.num_attention_heads,
                                   "position": "rope" if a.position_embedding_type == "rope"
                                   else "learned",
                                   "norm": a.normalization.lower(),
                                   "bias": not a.disable_bias_linear,
                                   "tied_embeddings": not
                                   a.untie_embeddings_and_output_weights}))
        return s.params_total  # the unpadded count archfit prints as params_total

    _check_three(cli, tmp_path, "megatron", load)
    # GPT-2 small: Megatron keeps GELU, d_ff 3072 and tying; at tp 8 the vocab pads to 51,200
    path, out = _written(cli, tmp_path / "gpt2", ["shape", "--layers", "12", "--width", "768",
                                                  "--heads", "12", "--emit", "megatron",
                                                  "--tp", "8"])
    a, vocab = megatron_args(path)
    assert (a.ffn_hidden_size, a.swiglu, a.untie_embeddings_and_output_weights) == \
        (3072, False, False)
    assert _printed_total(out) == 124_439_808 and "padded to 51,200" in out
    assert load(path, out) == 124_439_808


def test_megatron_moe_args_build_megatron_core_with_archfits_count(cli, tmp_path,
                                                                   megatron_state):
    """A mixture of experts (routed and shared experts, a dense first layer, heads of a width
    of their own) as Megatron-LM's arguments: megatron-core's GPTModel, built from them with its
    MoE block spec, holds the parameters archfit counts (the vocabulary padded as Megatron
    pads it)."""
    import torch.nn.functional as F
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    path, out = _written(cli, tmp_path / "moe", [
        "shape", "--layers", "4", "--width", "128", "--heads", "4", "--kv-heads", "2",
        "--head-dim", "48", "--mlp", "swiglu", "--rope", "--rmsnorm", "--no-bias", "--untied",
        "--d-ff", "256", "--experts", "6", "--top-k", "2", "--shared-experts", "1",
        "--dense-first", "1", "--vocab", "500", "--ctx", "64", "--emit", "megatron"])
    a, vocab = megatron_args(path)
    m = a.make_vocab_size_divisible_by * a.tensor_model_parallel_size
    cfg = TransformerConfig(
        num_layers=a.num_layers, hidden_size=a.hidden_size, ffn_hidden_size=a.ffn_hidden_size,
        num_attention_heads=a.num_attention_heads, num_query_groups=a.num_query_groups,
        kv_channels=a.kv_channels, gated_linear_unit=a.swiglu, activation_func=F.silu,
        normalization=a.normalization, add_bias_linear=not a.disable_bias_linear,
        use_cpu_initialization=True, perform_initialization=False,
        num_moe_experts=a.num_experts, moe_router_topk=a.moe_router_topk,
        moe_ffn_hidden_size=a.moe_ffn_hidden_size,
        moe_shared_expert_intermediate_size=a.moe_shared_expert_intermediate_size,
        moe_layer_freq=a.moe_layer_freq)
    spec = get_gpt_decoder_block_spec(cfg, use_transformer_engine=False,
                                      normalization=a.normalization)
    with torch.device("meta"):
        model = GPTModel(config=cfg, transformer_layer_spec=spec, vocab_size=-(-vocab // m) * m,
                         max_sequence_length=a.max_position_embeddings,
                         position_embedding_type=a.position_embedding_type,
                         share_embeddings_and_output_weights=False)
    megatron = int(re.search(r"Megatron's count with the vocabulary padded to [\d,]+ "
                             r"\(a multiple of \d+ x tp \d+\): ([\d,]+)", out)
                   .group(1).replace(",", ""))
    assert _count(model) == megatron
    assert a.moe_layer_freq == [0, 1, 1, 1] and a.moe_shared_expert_intermediate_size == 256


# ==================================================================== nanoGPT
NANOGPT_TRAIN_GLOBALS = {  # the defaults nanoGPT's train.py sets before its configurator runs
    "out_dir": "out", "eval_interval": 2000, "dataset": "openwebtext", "batch_size": 12,
    "block_size": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768, "dropout": 0.0,
    "bias": False, "learning_rate": 6e-4,
}


def test_nanogpt_file_sets_the_globals_train_py_reads(cli, tmp_path):
    for label, args, ok in _shapes("nanogpt"):
        d = tmp_path / label
        if not ok:
            r = cli(*args, "-o", d)
            assert r.exit_code == 2 and "GQA" in r.output, r.output
            continue
        path, out = _written(cli, d, args)
        g = dict(NANOGPT_TRAIN_GLOBALS)
        exec(path.read_text(), g)  # noqa: S102 - as nanoGPT's configurator.py runs a config
        s = Shape(n_layer=g["n_layer"], d_model=g["n_embd"], n_head=g["n_head"],
                  vocab_size=g["archfit_vocab_size"], n_ctx=g["block_size"], bias=g["bias"])
        assert s.params_total == _printed_total(out), (label, out)
        assert g["dropout"] == 0.0 and "meta.pkl" in path.read_text()
        assert g["n_layer"] != NANOGPT_TRAIN_GLOBALS["n_layer"] or label != "7e9"
