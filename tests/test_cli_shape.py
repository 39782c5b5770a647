import json

import pytest
from click.testing import CliRunner

from archfit.cli import main

GPT2 = [((12, 768, 12), 124_439_808), ((24, 1024, 16), 354_823_168),
        ((36, 1280, 20), 774_030_080), ((48, 1600, 25), 1_557_611_200)]


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("lwh,total", GPT2)
def test_shape_json_gpt2(lwh, total):
    L, w, h = lwh
    r = run("shape", "--layers", L, "--width", w, "--heads", h, "--vocab", 50257, "--ctx", 1024,
            "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    for key in ("n_layer", "d_model", "n_head", "d_ff", "params_total", "params_non_embedding",
                "params_embedding", "flops_per_token"):
        assert key in d
    assert d["params_total"] == total
    assert d["params_non_embedding"] + d["params_embedding"] == total


def test_shape_table():
    r = run("shape", "--layers", "12", "--width", "768", "--heads", "12")
    assert r.exit_code == 0
    assert "124,439,808" in r.output and "Kaplan" in r.output


def test_grid_prints_an_iso_parameter_family_on_target():
    r = run("grid", "--params", "1e8", "--depths", "2,4,8,16,32", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert [row["n_layer"] for row in rows] == [2, 4, 8, 16, 32]
    for row in rows:
        assert abs(row["params_non_embedding"] / 1e8 - 1) < 0.02
        for key in ("n_layer", "d_model", "n_head", "d_ff", "params_non_embedding", "rel_error"):
            assert key in row


def test_grid_suffix_numbers_and_ff_ratios():
    r = run("grid", "--params", "50M", "--depths", "1,2,4,8,16", "--ff-ratios", "2,4,8", "--json")
    assert r.exit_code == 0
    rows = json.loads(r.output)
    assert len(rows) == 15


@pytest.mark.parametrize(
    "args,needle",
    [
        (["shape", "--layers", "2", "--width", "100", "--heads", "3"], "not divisible"),
        (["shape", "--layers", "-2", "--width", "128", "--heads", "2"], "greater than zero"),
        (["shape", "--layers", "0", "--width", "128", "--heads", "2"], "greater than zero"),
        (["shape", "--layers", "2", "--width", "12x", "--heads", "2"], "cannot read"),
        (["shape", "--layers", "2", "--width", "128", "--heads", "2", "--frobnicate"], "No such option"),
        (["shape", "--layers", "2", "--width", "128", "--heads", "2", "--d-ff", "3", "--ff-ratio", "2"], "not both"),
        (["grid", "--params", "abc", "--depths", "2"], "cannot read"),
        (["grid", "--params", "1e8"], "--depths"),
        (["grid", "--params", "1e8", "--depths", "2,x"], "cannot read"),
        (["grid", "--params", "-5", "--depths", "2"], "greater than zero"),
        (["nonsense"], "No such command"),
        # a per-GPU batch past any step: refused before its memory plan (it searched for minutes)
        (["shape", "--layers", "32", "--width", "4096", "--heads", "32", "--gpu", "h200",
          "--gpu-batch-tokens", "1e15"], "(2^26) tokens per GPU and step"),
        (["shape", "--layers", "2", "--width", "128", "--heads", "2", "--gpu-batch-tokens",
          "0.5"], "not from 1 to"),
        # a flag nothing reads is refused, not silently defaulted
        (["shape", "--layers", "2", "--width", "128", "--heads", "2",
          "--make-vocab-size-divisible-by", "64"], "goes with --emit megatron"),
        (["shape", "--layers", "2", "--width", "128", "--heads", "2", "--emit", "hf-llama",
          "--make-vocab-size-divisible-by", "64"], "goes with --emit megatron"),
        (["recommend", "--params", "1e9", "--make-vocab-size-divisible-by", "64"],
         "goes with --emit megatron or --vocab auto"),
        (["recommend", "--params", "7e9", "--vocab", "1"], "a vocabulary of one token"),
    ],
)
def test_bad_input_exit_2_one_line(args, needle):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, (r.output, r.exception)
    lines = [ln for ln in r.output.strip().splitlines() if ln]
    assert len(lines) == 1, r.output
    assert lines[0].startswith("Error:") and needle in lines[0]
    assert "Traceback" not in r.output


def test_every_option_of_every_command_has_help():
    import click

    from archfit.cli import main

    ctx = click.Context(main)

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name])
        else:
            yield path, cmd

    seen, missing = 0, []
    for path, cmd in walk(main, ["archfit"]):
        seen += 1
        for p in cmd.params:
            if isinstance(p, click.Option) and not (p.help or "").strip():
                missing.append(f"{' '.join(path)} {'/'.join(p.opts)}")
    assert seen >= 18 and not missing, missing


EXPERTS = ["--layers", "4", "--width", "256", "--heads", "4", "--experts", "8", "--top-k", "2"]


@pytest.mark.parametrize("cmd, extra, needle", [
    ("shape", ["--no-mlp", "0,1,2,3"], "no layer is sparse"),
    ("shape", ["--granularity", "1e6"], "less than one unit wide"),
    ("shape", ["--no-mlp", "0", "--emit", "hf-mixtral"], "cannot express"),
    ("train", ["--no-mlp", "0,1,2,3", "--tokens", "1e3"], "no layer is sparse"),
])
def test_expert_options_with_a_layer_plan_are_read_once_the_plan_is(cmd, extra, needle):
    """The experts' checks read the layer plan after it is parsed (the plan's flags arrive as
    text): a plan that leaves no layer sparse, or a granularity finer than one unit, is one
    line, exit 2, in shape, --emit and train alike."""
    r = CliRunner().invoke(main, [cmd, *EXPERTS, *extra])
    assert r.exit_code == 2, r.output
    assert needle in r.output and "unexpected" not in r.output
    ok = CliRunner().invoke(main, ["shape", *EXPERTS, "--no-mlp", "0", "--json"])
    assert ok.exit_code == 0, ok.output
    assert [lay["sparse"] for lay in json.loads(ok.output)["layers"]] == [False, True, True,
                                                                          True]


def test_shape_from_refuses_what_is_not_a_config_file(tmp_path):
    """A FIFO (read whole, it would block), a link to /dev/zero (it would grow without end), a
    file past 16 MiB, JSON nested past the recursion limit and an empty file: one line each,
    exit 2. A byte-order mark before a config is not its text."""
    import os

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    big = tmp_path / "big.json"
    big.write_text("{" + " " * (17 << 20) + "}")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    empty = tmp_path / "empty.py"
    empty.write_text("")
    for path, needle in ((fifo, "not a regular file"), (zero, "not a regular file"),
                         (big, "too large to be a model config"), (deep, "nested too deeply"),
                         (empty, "is empty")):
        r = CliRunner().invoke(main, ["shape", "--from", str(path)])
        assert r.exit_code == 2 and needle in r.output, (path, r.output)
        assert len(r.output.strip().splitlines()) == 1
    bom = tmp_path / "train_gpt2.py"
    bom.write_bytes(b"\xef\xbb\xbfn_layer = 4\nn_head = 4\nn_embd = 256\n")
    r = CliRunner().invoke(main, ["shape", "--from", str(bom), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["n_layer"] == 4


def test_the_planner_prices_no_step_that_cannot_run():
    """Llama-7B's 32 x 4096 at a 1,024 context needs more than an A100-40GB holds for one
    sequence (its weights, fp32 grads and AdamW states alone are 16 bytes x 6.4e9, about 96 GiB):
    no training speed, the memory line saying why; a step of fewer tokens than one sequence
    gets no speed and no memory either; a step that runs keeps both."""
    shape = ["shape", "--layers", "32", "--width", "4096", "--heads", "32"]
    r = CliRunner().invoke(main, [*shape, "--gpu", "a100-40gb", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)["perf"]
    assert d["training"]["tokens_per_s"] is None and not d["memory"]["fits"]
    assert "memory" in d["training"]["why_none"]
    text = CliRunner().invoke(main, [*shape, "--gpu", "a100-40gb"], terminal_width=100).output
    assert "training on a100-40gb: no speed" in text and "tokens/s" not in text
    small = ["shape", "--layers", "2", "--width", "128", "--heads", "2", "--gpu", "h100"]
    d = json.loads(CliRunner().invoke(main, [*small, "--gpu-batch-tokens", "1", "--json"])
                   .output)["perf"]
    assert d["training"]["tokens_per_s"] is None and "one sequence" in d["training"]["why_none"]
    assert not d["memory"]["fits"]
    d = json.loads(CliRunner().invoke(main, [*small, "--json"]).output)["perf"]
    assert d["training"]["tokens_per_s"] > 0 and d["memory"]["fits"]
