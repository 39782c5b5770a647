"""Slurm preemption end to end, on the real single-node Slurm that scripts/slurm-up.sh starts: a
sweep task requeued mid-run (``scontrol requeue``) resumes from its checkpoint, ends with the
loss an uninterrupted run reaches, and ``sweep collect`` has its row exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from test_sweep import slurm_ready

SPEC = """name = "requeue"
seeds = [0]
lrs = [3e-3]

[model]
head_dim = 16
multiple = 16

[grid]
shapes = [{ n_layer = 2, d_model = 64, n_head = 4, d_ff = 256 }]

[budget]
steps = 1500

[train]
batch_size = 8
ctx = 64
eval_every = 500
eval_windows = 8
checkpoint_every = 100
threads = 1

[executor.slurm]
time_min = 10
cpus_per_run = 1
"""


def _archfit(*args: object) -> list[str]:
    return [sys.executable, "-m", "archfit", *map(str, args)]


def _loss(out: Path, spec: Path, table: Path) -> tuple[float, int, list[str]]:
    r = subprocess.run(_archfit("sweep", "collect", spec, "--out", out, "-o", table),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    df = pl.read_parquet(table)
    return float(df["final_val_loss"][0]), df.height, df["run_id"].to_list()


@pytest.mark.slurm
@pytest.mark.slow
def test_a_requeued_task_resumes_and_loses_no_row(tmp_path):
    if (why := slurm_ready()) is not None:
        pytest.skip(why)
    spec = tmp_path / "requeue.toml"
    spec.write_text(SPEC)
    # the run, uninterrupted (local executor)
    local = tmp_path / "local"
    r = subprocess.run(_archfit("sweep", "run", spec, "--out", local), capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    want, _, _ = _loss(local, spec, tmp_path / "local.parquet")
    # the same run on Slurm, requeued once it has checkpointed
    out = tmp_path / "slurm"
    proc = subprocess.Popen(_archfit("sweep", "run", spec, "--executor", "slurm", "--out", out,
                                     "--timeout", "900"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 600
        ckpt = None
        while time.time() < deadline and ckpt is None:
            found = list(out.glob("*/checkpoint.pt")) if out.exists() else []
            ckpt = found[0] if found else None
            time.sleep(1)
        assert ckpt is not None, "the Slurm task never checkpointed"
        assert not (ckpt.parent / "result.json").exists(), "the run ended before the requeue"
        jobs = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True,
                              timeout=30).stdout.split()
        assert jobs, "no job in the queue to requeue"
        rq = subprocess.run(["scontrol", "requeue", jobs[0]], capture_output=True, text=True,
                            timeout=30)
        assert rq.returncode == 0, rq.stderr
        stdout, stderr = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    got, rows, ids = _loss(out, spec, tmp_path / "slurm.parquet")
    result = json.loads((ckpt.parent / "result.json").read_text())
    print(f"\nrequeued job {jobs[0]}: final val loss {got:.9f} after the requeue (resumed from "
          f"step {result.get('resumed_from_step')}), {want:.9f} uninterrupted (diff "
          f"{abs(got - want):.2e}); sweep collect: {rows} row(s), run ids {ids}")
    assert rows == 1 and len(set(ids)) == 1
    assert abs(got - want) <= 1e-6
    assert (result.get("resumed_from_step") or 0) > 0  # it resumed from its checkpoint
    assert os.path.exists(ckpt.parent / "lock")
