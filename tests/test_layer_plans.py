"""Shapes whose layers differ: counted exactly per layer, built and trained, swept
as variants, refused by exports that cannot hold them, and their trade measured."""

from __future__ import annotations

import json
import math

import numpy as np
import polars as pl
import pytest
import torch

from archfit.errors import ShapeError
from archfit.train.model import GPT
from archfit.shapes import Shape, parse_plan

torch.set_num_threads(1)

BASE = dict(n_layer=4, d_model=64, n_head=4, vocab_size=97, n_ctx=32)
# the six plans of the "done when"
PLANS = {"uniform": ({}, {}),
         "no-mlp:0": ({}, parse_plan("no-mlp:0", 4)),
         "no-mlp:-1": ({}, parse_plan("no-mlp:-1", 4)),
         "no-attn:mid": ({}, parse_plan("no-attn:mid", 4)),
         "hourglass": ({}, parse_plan("heads:4,2,2,4", 4)),
         "no-mlp:0 gqa": ({"n_kv_head": 2}, parse_plan("no-mlp:0", 4))}


def matmul_flops_by_hand(s: Shape) -> int:
    """Forward matmul FLOPs per token, layer by layer, written out independently of the shape
    core: 2 FLOPs per multiply-accumulate of every projection, QK^T and AV over the n_ctx window,
    the MLP matrices, and the logits."""
    d, hd, c, f = s.d_model, s.head_dim, s.n_ctx, s.d_ff
    mlp_mats = 3 if s.mlp == "swiglu" else 2
    total = 2 * d * s.vocab_size
    for i in range(s.n_layer):
        if i not in s.no_attn:
            heads = s.heads_per_layer[i] if s.heads_per_layer else s.n_head
            kv = heads * s.n_kv_head // s.n_head
            total += 2 * d * heads * hd  # Q
            total += 2 * 2 * d * kv * hd  # K and V
            total += 2 * heads * hd * d  # O
            total += 2 * 2 * c * heads * hd  # QK^T and AV
        if i not in s.no_mlp:
            total += 2 * mlp_mats * d * f
    return total


@pytest.mark.parametrize("name", sorted(PLANS))
def test_the_count_is_the_module_count_and_the_flops_a_matmul_count(name):
    extra, plan = PLANS[name]
    s = Shape(**BASE, **extra, **plan)
    m = GPT(s)
    assert s.params_total == sum(p.numel() for p in m.parameters())
    blocks = [sum(p.numel() for p in b.parameters()) for b in m.blocks]
    assert blocks == [sum(s.layer_breakdown(i).values()) for i in range(s.n_layer)]
    assert s.flops_per_token("matmul_forward") == matmul_flops_by_hand(s)
    # and torch's own FLOP counter over one full-context forward agrees on every matrix
    # product it sees (on CPU the fused attention kernel is not among them: QK^T and AV are
    # added by hand, 4 n_ctx FLOPs per query channel and token)
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        m(torch.zeros(1, s.n_ctx, dtype=torch.long))
    scores = sum(4 * s.n_ctx * lay.heads * s.head_dim for lay in s.layers() if lay.attn)
    assert fc.get_total_flops() + s.n_ctx * scores == \
        s.n_ctx * s.flops_per_token("matmul_forward")
    for i in s.no_mlp:  # absent, not zeroed
        assert m.blocks[i].mlp is None and m.blocks[i].ln2 is None
    for i in s.no_attn:
        assert m.blocks[i].attn is None and m.blocks[i].ln1 is None
    if name != "uniform":
        assert s.params_total < Shape(**BASE, **extra).params_total
        assert len(s.to_dict()["layers"]) == s.n_layer


def test_plans_are_checked_and_written_back():
    s = Shape(**BASE, no_mlp=(0, -1), no_attn="mid")
    assert (s.no_mlp, s.no_attn, s.plan) == ((0, 3), (2,), "no-mlp:0,3 no-attn:2")
    assert Shape(**BASE, **parse_plan(s.plan, 4)) == s
    assert Shape.from_config(s.config()) == s
    assert Shape(**BASE, heads_per_layer=(4, 4, 4, 4)) == Shape(**BASE)  # uniform after all
    for kw, match in [({"no_mlp": (4,)}, "outside the 4 layers"),
                      ({"no_mlp": (1,), "no_attn": (1,)}, "neither attention nor an MLP"),
                      ({"heads_per_layer": (4, 2)}, "one per layer"),
                      ({"heads_per_layer": (4, 3, 4, 4), "n_kv_head": 2}, "multiple of the GQA"),
                      ({"no_mlp": ("x",)}, "not a layer index")]:
        with pytest.raises(ShapeError, match=match):
            Shape(**BASE, **kw)
    with pytest.raises(ShapeError, match="unknown layer plan"):
        parse_plan("no-mlp0", 4)


def test_memory_throughput_and_latency_models_read_the_plan():
    from archfit.train import memory, perf

    u = Shape(**BASE)
    for plan in ("no-mlp:0", "no-attn:mid", "heads:4,2,2,4"):
        v = Shape(**BASE, **parse_plan(plan, 4))
        assert memory.estimate(v, 4).activations < memory.estimate(u, 4).activations
        assert perf.modelled("h100").step_time(v, 2 ** 19) < perf.modelled("h100").step_time(u, 2 ** 19)
    no_attn = Shape(**BASE, no_attn=(1,))
    assert perf.decode_latency(no_attn, "h100")["kv_cache_bytes"] == \
        perf.decode_latency(u, "h100")["kv_cache_bytes"] * 3 // 4


@pytest.mark.parametrize("parametrization", ["standard", "mup", "completep"])
def test_a_plan_trains_and_resumes_under_each_parametrization(tmp_path, parametrization):
    import os
    import signal

    from archfit.train import Budget, TrainConfig, train

    shape = Shape(n_layer=3, d_model=32, n_head=2, vocab_size=256, n_ctx=32,
                  no_mlp=(0,), heads_per_layer=(2, 1, 2))

    def cfg():
        return TrainConfig(shape=shape, budget=Budget(steps=10), batch_size=4, eval_every=5,
                           eval_windows=4, parametrization=parametrization, mup_base_width=32)

    full = train(cfg())
    assert full.status == "ok" and full.params_total == shape.params_total
    r1 = train(cfg(), run_dir=str(tmp_path),
               progress=lambda p: p["step"] == 4 and os.kill(os.getpid(), signal.SIGUSR2))
    assert r1.status == "preempted"
    r2 = train(cfg(), run_dir=str(tmp_path))
    assert r2.resumed_from_step == 4 and r2.final_val_loss == full.final_val_loss


@pytest.mark.slow
def test_a_plan_trains_under_two_processes_as_under_one(archfit_cmd):
    import subprocess

    args = ["train", "--layers", "2", "--width", "32", "--heads", "2", "--ctx", "32",
            "--batch-size", "4", "--steps", "6", "--eval-every", "3", "--no-mlp", "0",
            "--json", "--curve"]
    one = json.loads(subprocess.run(archfit_cmd(*args), capture_output=True, text=True,
                                    timeout=300, check=True).stdout)
    for parallel in ("ddp", "fsdp"):
        r = subprocess.run(archfit_cmd(*args, "--nproc", "2", "--parallel", parallel),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-1500:]
        two = json.loads(r.stdout)
        assert two["world_size"] == 2 and two["params_total"] == one["params_total"]
        a = [p["train_loss"] for p in one["curve"]]
        b = [p["train_loss"] for p in two["curve"]]
        assert max(abs(x - y) / x for x, y in zip(a, b)) < 1e-4, (parallel, a, b)


@pytest.mark.parametrize("fmt", ["hf-llama", "hf-gpt2", "nanogpt", "megatron", "torchtitan",
                                 "litgpt"])
def test_an_export_that_cannot_hold_a_plan_exits_2_naming_the_layer(cli, tmp_path, fmt):
    r = cli("shape", "--layers", "4", "--width", "64", "--heads", "4", "--no-mlp", "-1",
            "--emit", fmt, "-o", tmp_path)
    assert r.exit_code == 2, r.output
    assert "layer 3 has no MLP" in r.output and len(r.output.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # nothing written, nothing uniformized


def test_shape_json_lists_the_plan(cli):
    r = cli("shape", "--layers", "4", "--width", "64", "--heads", "4", "--no-attn", "mid",
            "--heads-per-layer", "4,2,4,4", "--json")
    d = json.loads(r.output)
    assert d["plan"] == "no-attn:2 heads:4,2,4,4" and d["no_attn"] == [2]
    assert [x["attn"] for x in d["layers"]] == [True, True, False, True]
    assert d["params_total"] == Shape(n_layer=4, d_model=64, n_head=4, no_attn=(2,),
                                      heads_per_layer=(4, 2, 4, 4)).params_total


def test_a_spec_sweeps_variants_and_keeps_old_run_ids(tmp_path):
    from archfit import sweep as sw

    body = ('seeds = [0, 1]\n[model]\nhead_dim = 16\nmultiple = 16\n[grid]\nparams = [2e5]\n'
            'depths = [4]\ntolerance = 0.2\n{variants}[budget]\nsteps = 4\n[train]\n'
            'batch_size = 4\nctx = 64\n')
    plain = tmp_path / "plain.toml"
    plain.write_text(body.format(variants=""))
    var = tmp_path / "var.toml"
    var.write_text(body.format(variants='variants = ["uniform", "no-mlp:0", "no-mlp:-1", '
                               '"no-attn:mid"]\nreinvest = "width"\n'))
    runs = sw.load_spec(str(var)).runs
    assert len(runs) == 8
    uniform = [r for r in runs if r.meta["variant"] == "uniform"]
    assert [r.run_id for r in uniform] == [r.run_id for r in sw.load_spec(str(plain)).runs]
    base = uniform[0].shape.params_non_embedding
    for r in runs:  # reinvest = "width": the MLP width takes the freed parameters back
        assert abs(r.shape.params_non_embedding / base - 1) < 0.01, r.shape.plan
    plans = {r.meta["variant"]: r.shape.plan for r in runs}
    assert plans == {"uniform": "uniform", "no-mlp:0": "no-mlp:0", "no-mlp:-1": "no-mlp:3",
                     "no-attn:mid": "no-attn:2"}
    bad = tmp_path / "bad.toml"
    bad.write_text(body.format(variants='variants = ["no-mlp:9"]\n'))
    with pytest.raises(Exception, match="grid.variants.*outside the 4 layers"):
        sw.load_spec(str(bad))


# ---------------------------------------------------------------------------- the trade, planted
def planted_table(offsets: dict[str, float], step_time: dict[str, float], seeds: int = 5,
                  noise: float = 0.004, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A sweep of variants whose loss curves are one law plus each variant's planted offset and
    a per-run (seed) noise; each variant's step time is its planted ratio of the uniform's."""
    rng = np.random.default_rng(seed)
    rows, curves = [], []
    for v, off in offsets.items():
        for s in range(seeds):
            rid = f"{v}-{s}"
            eps = rng.normal(0, noise)
            pts = [(k, 2.0 + 3.0 * (k + 20) ** -0.5 + off + eps) for k in range(0, 501, 25)]
            curves += [{"run_id": rid, "step": k, "val_loss": x} for k, x in pts]
            t = 0.1 * step_time[v] * math.exp(rng.normal(0, 0.005))
            rows.append({"run_id": rid, "variant": v, "plan": v, "seed": s, "lr": 4e-3,
                         "target_params": 2e5, "status": "ok", "final_val_loss": pts[-1][1],
                         "steps": 500, "train_s": 500 * t})
    return pl.DataFrame(rows), pl.DataFrame(curves)


def test_the_trade_recovers_a_planted_offset_and_calls_a_planted_zero_noise():
    from archfit.recommending.trading import trade

    offsets = {"uniform": 0.0, "no-mlp:0": 0.02, "no-mlp:-1": 0.0, "no-attn:mid": -0.02}
    times = {"uniform": 1.0, "no-mlp:0": 0.97, "no-mlp:-1": 1.0, "no-attn:mid": 0.95}
    runs, curves = planted_table(offsets, times)
    report = trade(runs, curves=curves)
    print(report.summary())
    got = {v.variant: v for v in report.variants}
    for name, off in offsets.items():
        if name == "uniform":
            continue
        e = got[name].loss
        assert e.low <= off <= e.high, (name, e)  # the planted offset, inside its 95% CI
        assert got[name].step_time.low <= times[name] <= got[name].step_time.high
    assert got["no-mlp:-1"].verdict == "within the noise"
    assert got["no-mlp:0"].verdict == "slower to the loss"  # 3% faster steps, many more steps
    assert got["no-attn:mid"].verdict == "faster to the loss"
    # without curves the verdict reads the loss at equal tokens
    plain = {v.variant: v.verdict for v in trade(runs).variants}
    assert plain == {"no-attn:mid": "lower loss at equal tokens",
                     "no-mlp:-1": "within the noise", "no-mlp:0": "higher loss at equal tokens"}


def test_the_trade_command_on_a_table_and_its_errors(cli, tmp_path):
    runs, curves = planted_table({"uniform": 0.0, "no-mlp:0": 0.0},
                                 {"uniform": 1.0, "no-mlp:0": 1.0}, seeds=3)
    path = tmp_path / "lv.parquet"
    runs.write_parquet(path)
    curves.write_parquet(tmp_path / "lv.curves.parquet")
    r = cli("trade", path)
    assert r.exit_code == 0, r.output
    assert "no-mlp:0 (no-mlp:0): within the noise - loss" in r.output
    d = json.loads(cli("trade", path, "--json").output)
    assert d["variants"][0]["pairs"] == 3 and d["target_loss"] == pytest.approx(
        runs["final_val_loss"].max())
    r = cli("trade", path, "--baseline", "dense")
    assert r.exit_code == 2 and "no finished run has variant = 'dense'" in r.output
    runs.drop("seed").write_parquet(tmp_path / "noseed.parquet")
    r = cli("trade", tmp_path / "noseed.parquet")
    assert r.exit_code == 2 and "no 'seed' column" in r.output


@pytest.mark.slow  # the trade's bootstrap: about 10 s
def test_the_shipped_layer_variants_sweep_runs_and_reports(tmp_path, repo, archfit_cmd):
    """sweeps/layer-variants.toml's 9 runs, trained once with 'archfit sweep run' and collected
    with their loss curves (datasets/layer_variants_cpu.parquet, scripts/make_test_tables.sh;
    the sweep engine's end-to-end runs are tests/test_sweep.py's and the plan's two-process run
    below), and a trade line with intervals for each variant (whatever its sign)."""
    import shutil
    import subprocess

    from archfit.sweep import load_spec

    table = tmp_path / "lv.parquet"
    for suffix in (".parquet", ".curves.parquet"):
        shutil.copy(repo / "datasets" / f"layer_variants_cpu{suffix}",
                    tmp_path / f"lv{suffix}")
    df = pl.read_parquet(table)
    spec = load_spec(str(repo / "sweeps" / "layer-variants.toml"))
    assert set(df["run_id"]) == {run.run_id for run in spec.runs}  # the shipped spec's runs
    assert df.height == 9 and set(df["status"]) == {"ok"}
    assert sorted(set(df["plan"])) == ["no-mlp:0", "no-mlp:3", "uniform"]
    r = subprocess.run(archfit_cmd("trade", table), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    print(r.stdout)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("no-mlp")]
    assert len(lines) == 2
    for ln in lines:
        assert any(v in ln for v in ("faster to the loss", "slower to the loss",
                                     "within the noise"))
        assert "time to the loss x" in ln and "[" in ln


def test_the_trade_refuses_and_notes_what_it_cannot_compare(cli, tmp_path):
    """A bad --gpu, every loss missing, a missing --curves file and a
    plan the model cannot have are refused in one line; a user's --target-loss is labelled as
    the user's, and a target no run reaches is said."""
    runs, curves = planted_table({"uniform": 0.0, "no-mlp:0": 0.01},
                                 {"uniform": 1.0, "no-mlp:0": 1.0}, seeds=3)
    path = tmp_path / "lv.parquet"
    runs.write_parquet(path)
    curves.write_parquet(tmp_path / "lv.curves.parquet")

    def refused(*args: object) -> str:
        r = cli("trade", *args)
        assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1, r.output
        return r.stderr

    assert "unknown" in refused(path, "--gpu", "tpu9").lower()
    runs.with_columns(pl.lit(None, dtype=pl.Float64).alias("final_val_loss")).write_parquet(
        tmp_path / "noloss.parquet")
    assert "every run's loss ('final_val_loss') is missing" in refused(tmp_path / "noloss.parquet")
    assert "no such file" in refused(path, "--curves", tmp_path / "nope.parquet")
    shaped = runs.with_columns(n_layer=pl.lit(4), d_model=pl.lit(64), n_head=pl.lit(2),
                               no_mlp=pl.when(pl.col("variant") == "uniform").then(pl.lit(None))
                               .otherwise(pl.lit("9")))
    shaped.write_parquet(tmp_path / "shaped.parquet")
    assert "no_mlp layer 9 is outside the 4 layers" in refused(tmp_path / "shaped.parquet")
    r = cli("trade", path, "--target-loss", "2.3")
    assert r.exit_code == 0 and "to validation loss 2.3 nats/token (yours, --target-loss)" in r.output
    r = cli("trade", path, "--target-loss", "0.5", "--json")
    assert r.exit_code == 0, r.output
    notes = json.loads(r.output)["notes"]
    assert any("no pair of runs reaches the target loss 0.5" in n for n in notes), notes
