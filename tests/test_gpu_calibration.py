"""The planner against one H200's measured rows (datasets/gpu-h200-2026-11-28, measured on
2026-11-28 in bench_gpu.py's loop): ``archfit shape --gpu h200`` at each row of today's loss path
(plain cross-entropy on bf16 logits, eager and compiled) predicts the measured tokens/s within
20% and the measured peak memory within 15%.

These rows are also what the planner is calibrated on (archfit/published/gpu_measured.json: the
compiled row sets the matmul efficiency and the compiled activation share, the two eager rows
the eager logit cost and activation share), so this holds the calibration to its own rows: it
shows the planner reproduces what was measured, not that it predicts a shape it never saw. The
CUDA-only tests (tests/test_gpu_paths.py) and the next bench_gpu.py run on a lent GPU add rows
it did not see."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "datasets" / "gpu-h200-2026-11-28"
SHAPES = {  # datasets/gpu-h200-2026-11-28/shapes.json, as archfit shape flags
    "dense_small": ["--layers", 12, "--width", 768, "--heads", 12, "--d-ff", 2048],
    "big": ["--layers", 24, "--width", 2048, "--heads", 16, "--kv-heads", 8, "--d-ff", 5632],
}
LLAMA = ["--vocab", 32000, "--mlp", "swiglu", "--rope", "--rmsnorm", "--no-bias", "--untied"]


def todays_rows() -> list[dict]:
    rows = [json.loads(line) for line in (H200 / "measured.jsonl").read_text().splitlines()]
    return [r for r in rows if "plain cross-entropy" in r["model"]]


def test_the_shipped_rows_are_the_three_of_todays_loss_path():
    assert [(r["shape"], r["compile"]) for r in todays_rows()] == [
        ("dense_small", False), ("dense_small", True), ("big", False)]


@pytest.mark.parametrize("row", todays_rows(), ids=lambda r: f"{r['shape']}-"
                         f"{'compiled' if r['compile'] else 'eager'}")
def test_shape_gpu_h200_predicts_each_measured_row(cli, row):
    r = cli("shape", *SHAPES[row["shape"]], *LLAMA, "--ctx", row["ctx"], "--gpu", "h200",
            "--gpu-batch-tokens", row["sequences"] * row["ctx"], "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["params_total"] == row["params_total"]
    perf = d["perf"]
    mode = "" if row["compile"] else "_eager"
    tps, gib = perf["training"][f"tokens_per_s{mode}"], perf["memory"][f"gib{mode}"]
    assert perf["memory"]["micro_batch"] == row["sequences"]
    print(f"{row['shape']} {'compiled' if row['compile'] else 'eager'}: tokens/s "
          f"{tps:,.0f} vs {row['tokens_per_s']:,} ({tps / row['tokens_per_s'] - 1:+.1%}), "
          f"memory {gib:.2f} vs {row['peak_gib']} GiB ({gib / row['peak_gib'] - 1:+.1%})")
    assert abs(tps / row["tokens_per_s"] - 1) <= 0.20
    assert abs(gib / row["peak_gib"] - 1) <= 0.15


@pytest.mark.parametrize("left_out", ["dense_small", "big"])
def test_each_eager_row_is_predicted_from_the_other_rows_alone(left_out):
    """Leave one eager row out of the calibration: the eager logit cost and activation share
    of the other eager row (and the compiled row's efficiency) predict it within the same
    bounds, so the eager figures carry from one shape to another."""
    from dataclasses import replace

    from archfit.shapes import Shape
    from archfit.train import memory
    from archfit.train.accelerators import DEVICES
    from archfit.train.perf import derive, gpu_measured, modelled

    run = gpu_measured()[0]
    out = next(r for r in run["rows"] if r["model"] == "archfit" and not r["compiled"]
               and r["shape"] == left_out)
    cal = derive([{**run, "rows": [r for r in run["rows"] if r is not out]}], "h200")
    assert cal is not None and cal.eager_logit_bytes is not None
    base = modelled("h200", calibrated=False)
    model = replace(base, flop_s=1 / (cal.matmul_efficiency * DEVICES["h200"].peak_flops),
                    eager_logit_s=cal.eager_logit_bytes * base.byte_s)
    s = Shape(**out["fields"])
    tps = model.tokens_per_s(s, out["batch"] * s.n_ctx, compiled=False)
    gib = memory.estimate(s, out["batch"], precision="bf16", overhead_gib=cal.overhead_gib,
                          activation_share=cal.activation_share["eager"]).total / memory.GIB
    print(f"{left_out} eager from the other rows: tokens/s {tps / out['tokens_per_s'] - 1:+.1%}, "
          f"memory {gib / out['peak_memory_gib'] - 1:+.1%}")
    assert abs(tps / out["tokens_per_s"] - 1) <= 0.20
    assert abs(gib / out["peak_memory_gib"] - 1) <= 0.15
