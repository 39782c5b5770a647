"""One run across processes with real torch.distributed (gloo, 2 processes on this CPU):
DDP and FSDP2 against a single process, kill-and-resume, GPU-slot packing, and a 2-task run on
the CI's real single-node Slurm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archfit import sweep as sw
from archfit.errors import SpecError
from archfit.sweep.executors import pack_order

SMOKE = str(Path(__file__).resolve().parents[1] / "sweeps" / "smoke.toml")

TINY = ["--layers", "2", "--width", "64", "--heads", "2", "--ctx", "64", "--batch-size", "8",
        "--eval-every", "10", "--lr", "3e-3"]
# float32 sums reduced in another order across processes: the curves agree to this
TOLERANCE = 1e-4


def archfit(*args, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "archfit", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, **kw)


def train_json(*args):
    r = archfit("train", *TINY, *args, "--json", "--curve")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
@pytest.mark.slow
def test_two_processes_give_the_one_process_loss_curve(parallel):
    one = train_json("--steps", "20")
    two = train_json("--steps", "20", "--nproc", "2", "--parallel", parallel)
    assert (one["world_size"], two["world_size"], two["parallel"]) == (1, 2, parallel)
    a = [p["train_loss"] for p in one["curve"]]
    b = [p["train_loss"] for p in two["curve"]]
    assert len(a) == len(b) == 20
    assert max(abs(x - y) / x for x, y in zip(a, b)) < TOLERANCE
    assert abs(one["final_val_loss"] - two["final_val_loss"]) / one["final_val_loss"] < TOLERANCE
    assert a[-1] < a[0] - 0.5  # it learned: the comparison is not between two flat lines


@pytest.mark.slow
def test_kill_and_resume_under_two_processes(tmp_path):
    ref = train_json("--steps", "200", "--nproc", "2")
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "archfit", "train", *TINY, "--steps", "200", "--nproc", "2",
           "--run-dir", str(run_dir), "--checkpoint-every", "5", "--json"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    ck = run_dir / "checkpoint.pt"
    deadline = time.time() + 240
    while not ck.exists() and time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
    assert ck.exists(), "no checkpoint was written"
    os.killpg(p.pid, signal.SIGKILL)  # the launcher, torchrun and both workers, mid-run
    p.wait()
    r = archfit("train", *TINY, "--steps", "200", "--nproc", "2", "--run-dir", run_dir,
                "--checkpoint-every", "5", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    resumed = json.loads(r.stdout)
    assert resumed["resumed_from_step"] and 0 < resumed["resumed_from_step"] < 200
    assert resumed["world_size"] == 2 and resumed["steps"] == 200
    assert abs(resumed["final_val_loss"] - ref["final_val_loss"]) < 1e-5


def test_batch_must_divide_among_processes():
    r = archfit("train", *TINY[:-6], "--batch-size", "3", "--steps", "2", "--nproc", "2")
    assert r.returncode == 2
    assert "not divisible" in r.stderr and "Traceback" not in r.stderr


def test_gpus_per_run_by_size_and_packing(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(Path(SMOKE).read_text().replace(
        "[executor]\n", '[executor]\ngpus_per_run_by_size = {"5e4" = 2}\n'))
    s = sw.load_spec(str(spec))
    gpus = {r.run_id: s.gpus_for(r) for r in s.runs}
    assert sorted(set(gpus.values())) == [1, 2]
    for r in s.runs:
        assert gpus[r.run_id] == (2 if r.meta["target_params"] >= 5e4 else 1)
    assert pack_order([("a", 2), ("b", 2), ("c", 1), ("d", 4), ("e", 1)], 4) == \
        [["a", "b"], ["c", "e"], ["d"]]
    bad = tmp_path / "bad.toml"
    bad.write_text(Path(SMOKE).read_text().replace(
        "[executor]\n", '[executor]\ngpus_per_run = 3\n'))
    with pytest.raises(SpecError, match="divide evenly"):
        sw.load_spec(str(bad))


def _two_run_spec(tmp_path, extra=""):
    spec = tmp_path / "two.toml"
    text = Path(SMOKE).read_text().replace("depths = [1, 2, 3]", "depths = [1, 2]").replace(
        "params = [2e4, 6e4]", "params = [2e4]").replace("[executor]\n", f"[executor]\n{extra}")
    spec.write_text(text)
    return spec


@pytest.mark.slow
def test_local_executor_packs_runs_onto_gpu_slots(tmp_path):
    """Four GPU slots named in CUDA_VISIBLE_DEVICES and runs of 2 GPUs each: two run at once,
    each in 2 processes that see only their own 2 slots. (No GPU here: the slots are labels and
    the processes train on the CPU with gloo; what is tested is the packing and launching.)"""
    spec = _two_run_spec(tmp_path, "gpus_per_run = 2\n")
    out = tmp_path / "runs"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1,2,3")
    r = archfit("sweep", "run", spec, "--out", out, timeout=400, env=env)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    slots = []
    for rid in os.listdir(out):
        if not (out / rid / "result.json").exists():
            continue
        res = json.loads((out / rid / "result.json").read_text())
        assert res["status"] == "ok" and res["world_size"] == 2
        log = (out / rid / "log.txt").read_text()
        slots.append(log.split("CUDA_VISIBLE_DEVICES=")[1].split()[0])
    assert len(slots) == 2
    assert sorted(slots) == ["0,1", "2,3"]  # started together, on disjoint slots


def slurm_ready():
    from test_sweep import slurm_ready as ready  # tests/ is on sys.path under pytest

    return ready()


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_two_task_run(tmp_path):
    why = slurm_ready()
    if why is not None:
        pytest.skip(why)
    spec = _two_run_spec(tmp_path)
    out = tmp_path / "runs"
    r = archfit("sweep", "run", spec, "--executor", "slurm", "--out", out, "--gpus", "2",
                "--timeout", "400", timeout=500)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    results = [json.loads((out / rid / "result.json").read_text()) for rid in os.listdir(out)
               if (out / rid / "result.json").exists()]
    assert len(results) == 2
    for res in results:
        assert res["status"] == "ok" and res["world_size"] == 2, res.get("error")
    log = next((out / rid / "log.txt").read_text() for rid in os.listdir(out)
               if (out / rid / "log.txt").exists())
    assert "rank 0/2" in log and "rank 1/2" in log  # two Slurm tasks, one process group
