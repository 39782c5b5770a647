"""The sweep engine against real processes, real parquet, a real local Slurm and a real Ray."""

import functools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from archfit import sweep as sw
from archfit.cli import main
from archfit.errors import FitInputError, SpecError
from conftest import tiny_spec

SMOKE = str(Path(__file__).resolve().parents[1] / "sweeps" / "smoke.toml")


def archfit_cmd(*args):
    return [sys.executable, "-m", "archfit", *map(str, args)]


def test_plan_json():
    r = CliRunner().invoke(main, ["sweep", "plan", SMOKE, "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    assert len(rows) == 6
    for row in rows:
        for k in ("run_id", "n_layer", "d_model", "n_head", "d_ff", "tokens", "flops"):
            assert k in row
    assert len({row["run_id"] for row in rows}) == 6
    again = sw.load_spec(SMOKE)
    assert [r.run_id for r in again.runs] == [row["run_id"] for row in rows]  # stable ids


def test_spec_validation_reports_everything(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("""
name = "bad"
lrs = []
colour = "blue"
[model]
head_dim = "wide"
[grid]
params = [1e5]
depths = [2]
[budget]
tokens = 1e5
steps = 3
[train]
batch = 4
[executor]
kind = "k8s"
""")
    with pytest.raises(SpecError) as e:
        sw.load_spec(str(p))
    msg = str(e.value)
    for needle in ("spec.colour: unknown key", "model.head_dim: expected int",
                   "budget: give exactly one", "train.batch: unknown key", "executor.kind",
                   "lrs: expected a non-empty list"):
        assert needle in msg, msg
    r = CliRunner().invoke(main, ["sweep", "plan", str(p)])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    p.write_text('[grid]\nshapes = [{n_layer = 2, d_model = 100, n_head = 3}]\n[budget]\nsteps = 1')
    with pytest.raises(SpecError, match=r"grid.shapes\[0\]: d_model 100 is not divisible"):
        sw.load_spec(str(p))
    p.write_text('[grid]\nparams = [1e5]\ndepths = [512]\ntolerance = 0.01\n[budget]\nsteps = 1')
    with pytest.raises(SpecError, match="expands to no runs"):
        sw.load_spec(str(p))


@pytest.mark.slow  # seconds of training or a kernel: the fast suite stays under 2 minutes
def test_local_run_idempotent_collect_fit(tmp_path):
    out = tmp_path / "runs"
    r = subprocess.run(archfit_cmd("sweep", "run", SMOKE, "--out", out), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "6/6 finished: 6 ok" in r.stdout
    t0 = time.time()
    r = subprocess.run(archfit_cmd("sweep", "run", SMOKE, "--out", out), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "6 finished" in r.stderr
    print(f"re-running the finished sweep took {time.time() - t0:.2f} s")
    r = CliRunner().invoke(main, ["sweep", "status", SMOKE, "--out", str(out), "--json"])
    assert json.loads(r.output)["ok"] == 6
    pq = tmp_path / "smoke.parquet"
    r = CliRunner().invoke(main, ["sweep", "collect", SMOKE, "--out", str(out), "-o", str(pq)])
    assert r.exit_code == 0, r.output
    df = pl.read_parquet(pq)
    assert df.height == 6 and set(df["status"]) == {"ok"}
    for col in ("run_id", "n_layer", "d_model", "n_head", "d_ff", "ff_ratio", "vocab_size",
                "n_ctx", "mlp", "params_total", "params_non_embedding", "tokens", "flops", "lr",
                "seed", "final_val_loss", "best_val_loss", "status", "wall_s", "tokens_per_s",
                "mfu", "device", "data_hash", "archfit_version", "schema_version"):
        assert col in df.columns
    assert (df["final_val_loss"] < 5.6).all() and df["data_hash"].n_unique() == 1
    curves = pl.read_parquet(tmp_path / "smoke.curves.parquet")
    assert set(curves["run_id"]) == set(df["run_id"]) and curves.height == 6 * 8
    r = CliRunner().invoke(main, ["fit", str(pq), "--law", "kaplan-n", "--bootstrap", "0",
                                  "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["n_points"] == 6
    # a glob over the folder takes the run table and skips the curves beside it, saying so
    r = CliRunner().invoke(main, ["fit", str(tmp_path / "*.parquet"), "--law", "kaplan-n",
                                  "--bootstrap", "0", "--json"])
    assert r.exit_code == 0, r.output
    assert "skipped 1 loss-curve table" in r.output
    assert json.loads(r.output[r.output.index("{"):])["n_points"] == 6
    r = CliRunner().invoke(main, ["fit", str(tmp_path / "smoke.curves.parquet")])
    assert r.exit_code == 2 and "loss curves" in r.output


@pytest.mark.slow
def test_failed_runs_are_recorded_and_sweep_goes_on(tmp_path):
    spec = tmp_path / "fail.toml"
    # data that exists but holds no window of the spec's context: every run fails when it
    # opens it (a missing path is refused before the sweep starts)
    (tmp_path / "tiny.txt").write_text("too short")
    spec.write_text(open(SMOKE).read().replace(
        'lrs = [3e-3]', f'lrs = [3e-3]\ndata = "{tmp_path / "tiny.txt"}"'))
    out = tmp_path / "runs"
    r = subprocess.run(archfit_cmd("sweep", "run", spec, "--out", out), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 3, r.stderr  # every run failed: not a success
    assert r.stderr.strip().splitlines()[-1].startswith("Error: 6 of 6 runs failed or diverged")
    c = sw.counts(sw.load_spec(str(spec)), str(out))
    assert c["failed"] == 6 and "window" in c["not_ok"][0]["error"]
    r = CliRunner().invoke(main, ["sweep", "status", str(spec), "--out", str(out)])
    assert "failed: DataError" in r.output
    r = subprocess.run(archfit_cmd("sweep", "run", spec, "--out", out, "--allow-failures"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


def test_a_held_run_is_not_trained_twice(tmp_path):
    import fcntl

    spec = sw.load_spec(SMOKE)
    d = sw.prepare_dirs(spec, str(tmp_path))[0]
    with open(os.path.join(d, "lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        assert sw.is_locked(d)
        assert subprocess.run([sys.executable, "-c", f"from archfit.sweep import run_one; "
                               f"print(run_one({d!r}))"], capture_output=True, text=True
                              ).stdout.strip() == "busy"
    assert sw.run_one(d) == "ok" and sw.run_one(d) == "skipped"


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_nothing(tmp_path):
    out = tmp_path / "runs"
    rng = random.Random(7)
    for _ in range(3):
        p = subprocess.Popen(archfit_cmd("sweep", "run", SMOKE, "--out", out),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        time.sleep(rng.uniform(2.0, 6.0))
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    r = subprocess.run(archfit_cmd("sweep", "run", SMOKE, "--out", out), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    spec = sw.load_spec(SMOKE)
    for run in spec.runs:
        d = out / run.run_id
        results = [f for f in os.listdir(d) if f.startswith("result")]
        assert results == ["result.json"], results
        assert json.loads((d / "result.json").read_text())["status"] == "ok"
        assert not [f for f in os.listdir(d) if ".tmp-" in f]
    assert sorted(os.listdir(out)) == sorted(r.run_id for r in spec.runs)


def test_schema_version_newer_is_refused(tmp_path):
    p = tmp_path / "new.parquet"
    pl.DataFrame({"params_non_embedding": [1e6], "final_val_loss": [3.0],
                  "schema_version": [99]}).write_parquet(p)
    with pytest.raises(FitInputError, match="schema 99, newer"):
        from archfit.sweep.store import read_runs

        read_runs([str(p)])


@functools.lru_cache(maxsize=1)
def slurm_ready():
    """None where a Slurm node is up, else why not. Asked once, and only by a Slurm test when
    it runs: ``sinfo`` against a stopped controller waits out its timeout, which a collection
    (the fast suite deselects these tests) must not pay."""
    if not shutil.which("sbatch") or not shutil.which("sinfo"):
        return "Slurm is not installed (run scripts/slurm-up.sh as root)"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as e:
        return f"sinfo failed: {e}"
    if not any(s.startswith(("idle", "mix", "alloc")) for s in out.split()):
        return f"no Slurm node is up (sinfo says {out.strip()!r}); run scripts/slurm-up.sh"
    return None


@pytest.mark.slurm
@pytest.mark.slow
def test_slurm_executor_real_cluster(tmp_path):
    if (why := slurm_ready()) is not None:
        pytest.skip(why)
    out = tmp_path / "runs"
    r = subprocess.run(archfit_cmd("sweep", "run", SMOKE, "--executor", "slurm", "--out", out,
                                   "--timeout", "400", "--gpus", "1"),
                       capture_output=True, text=True, timeout=500)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "submitted Slurm job array" in r.stderr
    c = sw.counts(sw.load_spec(SMOKE), str(out))
    assert c["ok"] == 6
    logs = [json.loads((out / rid / "result.json").read_text()) for rid in os.listdir(out)
            if (out / rid / "result.json").exists()]
    assert len(logs) == 6
    # each task got one fake GPU from gres: CUDA_VISIBLE_DEVICES was set by Slurm
    log = (out / sw.load_spec(SMOKE).runs[0].run_id / "log.txt").read_text()
    assert "CUDA_VISIBLE_DEVICES=" in log and "CUDA_VISIBLE_DEVICES=\n" not in log


@pytest.mark.ray
@pytest.mark.slow
def test_ray_executor_local(tmp_path):
    pytest.importorskip("ray", reason="ray is not installed (pip install 'archfit[ray]')")
    out = tmp_path / "runs"
    r = subprocess.run(archfit_cmd("sweep", "run", SMOKE, "--executor", "ray", "--out", out),
                       capture_output=True, text=True, timeout=500)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert sw.counts(sw.load_spec(SMOKE), str(out))["ok"] == 6


@pytest.mark.slow
def test_demo_end_to_end_on_a_mini_spec(tmp_path):
    """The README's main job on a 12-run spec of 8 steps each: sweep -> collect -> fit ->
    recommend at 3x the largest size -> validate (the recommendation and 4 rivals, 2 seeds,
    really trained) -> figures -> the published law at 1e9. One vocab and one context in every
    shape printed; the last line is the validation's verdict."""
    spec = tiny_spec(tmp_path / "mini.toml", name="mini", params="[3e4, 6e4, 1.2e5]",
                     depths="[1, 2, 3, 4]", budget="steps = 8", batch=4, eval_every=4,
                     eval_windows=8)
    out = tmp_path / "demo"
    r = subprocess.run(archfit_cmd("demo", "--spec", spec, "--out", out, "--bootstrap", "20"),
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (out / "mini.parquet").exists() and (out / "validate" / "validate.parquet").exists()
    assert "target: 3.6e+05 parameters" in r.stdout
    assert "validation of depth-joint at 3.6e+05" in " ".join(r.stdout.split())
    figs = [ln.strip() for ln in r.stdout.splitlines() if ln.strip().endswith(".png")]
    assert any(f.endswith("validation.png") for f in figs)
    # a weak answer's 'next:' line comes with the figure of that batch
    assert ("\nnext: to narrow this" in r.stdout) == any(f.endswith("design.png") for f in figs)
    assert figs and all(os.path.getsize(f) > 5000 for f in figs)
    assert "[5/6] validation: training the recommended shape and 4 rivals" in r.stderr
    flat = " ".join(r.stdout.split())  # lines a person reads wrap at 100 columns
    assert "At 1e+09: the published law (levine2020)" in flat
    assert "cannot speak for that size: 1e+09 is" in flat
    shapes = re.findall(r"vocab (\d+), ctx (\d+)", flat)
    assert len(shapes) >= 3 and set(shapes) == {("256", "64")}, shapes
    # the last statement (wrapped lines continue indented) is the validation's verdict
    last = r.stdout.strip().rsplit("\nvalidation at ", 1)[-1]
    assert re.match(r"3.6e\+05: (HELD|MISSED|INCONCLUSIVE) - ", last), last
    assert all(ln.startswith("    ") for ln in last.splitlines()[1:]), last


def test_run_ids_are_stable_across_releases():
    """Run ids hash the flat config: a redesign must not change them, or every existing sweep
    directory would be trained again. These are the ids archfit 0.1.0 gave sweeps/smoke.toml."""
    assert [r.run_id for r in sw.load_spec(SMOKE).runs] == [
        "52e213fc4f3a", "6f952ad02eb7", "0afcdd96354b", "a032135af4dd", "3208308611aa",
        "e96bd41c1c4b"]


# every shipped spec: its run count and a digest of its run ids in order (archfit 0.1.0's)
SHIPPED_RUN_IDS = {"demo.toml": (17, "9791f6506b9c07fb"),  # redesigned for validate
                   "levine-small.toml": (44, "3076e056d99ef0c5"),
                   "seed-50m.toml": (24, "76559baae4b2af29"),
                   "smoke.toml": (6, "2b5ffcedeffe30a2")}


@pytest.mark.parametrize("name", sorted(SHIPPED_RUN_IDS))
def test_run_ids_of_every_shipped_spec_are_unchanged(name):
    import hashlib

    runs = sw.load_spec(str(Path(SMOKE).parent / name)).runs
    digest = hashlib.sha256(",".join(r.run_id for r in runs).encode()).hexdigest()[:16]
    assert (len(runs), digest) == SHIPPED_RUN_IDS[name]


def test_spec_numbers_out_of_range_are_reported(tmp_path):
    p = tmp_path / "r.toml"
    p.write_text('lrs = [-1e-3]\n[grid]\nshapes = [{n_layer = 2, d_model = 64, n_head = 2}]\n'
                 '[budget]\nsteps = 0\n[train]\nbatch_size = 0\nctx = 16\n'
                 '[executor]\nconcurrency = 0\n')
    with pytest.raises(SpecError) as e:
        sw.load_spec(str(p))
    msg = str(e.value)
    for needle in ("lrs[0]: must be greater than zero", "budget.steps: must be greater than zero",
                   "train.batch_size: must be greater than zero",
                   "executor.concurrency: must be greater than zero"):
        assert needle in msg, msg
    with pytest.raises(SpecError, match="is a directory"):
        sw.load_spec(str(tmp_path))


@pytest.mark.slow  # seconds of training or a kernel: the fast suite stays under 2 minutes
def test_read_runs_gives_a_frame_of_a_sweep_directory_without_collecting(tmp_path, cli):
    import archfit
    from tests.conftest import tiny_spec

    spec = tiny_spec(tmp_path / "t.toml", params="[5e4]", depths="[1, 2]",
                     budget="steps = 4", eval_every=4, eval_windows=4)
    out = tmp_path / "runs"
    r = cli("sweep", "plan", spec, "--json")
    assert r.exit_code == 0, r.output
    from archfit import sweep as sw

    s = sw.load_spec(spec)
    sw.prepare_dirs(s, str(out))
    before = archfit.read_runs(out)  # planned, none trained: every row pending
    assert before.height == len(s.runs) and set(before["status"]) == {"pending"}
    r = cli("sweep", "run", spec, "--out", out, "--json")
    assert r.exit_code == 0, r.output
    counts = json.loads(r.output[r.output.index("{"):])
    assert counts["ok"] == len(s.runs) and counts["sweep"] == "tiny"
    df = archfit.read_runs(str(out))
    assert df.height == len(s.runs) and set(df["status"]) == {"ok"}
    assert df["final_val_loss"].is_not_null().all()
    table = tmp_path / "t.parquet"
    r = cli("sweep", "collect", spec, "--out", out, "-o", table, "--json")
    assert json.loads(r.output)["runs"] == len(s.runs)
    collected = archfit.read_runs(table)
    assert sorted(collected["run_id"]) == sorted(df["run_id"])
    assert collected.sort("run_id")["final_val_loss"].to_list() == \
        df.sort("run_id")["final_val_loss"].to_list()
    with pytest.raises(archfit.ArchfitError, match="no run folders"):
        archfit.read_runs(tmp_path / "runs" / s.runs[0].run_id)


def test_a_field_added_with_its_default_changes_no_run_id_and_becomes_a_column():
    """The run id and the run table derive from the records: a field added to Shape or to
    TrainConfig (both dataclasses) by a subclass, with its default, leaves
    every id as it was, changes it when set, and is a column of the run table with no edit to
    archfit.sweep.store."""
    from dataclasses import dataclass, field, make_dataclass

    from archfit.sweep import store
    from archfit.shapes import Shape
    from archfit.sweep.spec import run_id_of
    from archfit.train import Budget, TrainConfig

    dims = dict(n_layer=2, d_model=64, n_head=2, vocab_size=256, n_ctx=32)
    @dataclass(frozen=True)
    class Windowed(Shape):
        window: int = 0

    ZLoss = make_dataclass("ZLoss", [("z_loss", float, field(default=0.0))],
                           bases=(TrainConfig,))
    base = run_id_of(TrainConfig(shape=Shape(**dims), budget=Budget(steps=4)).to_dict(), {})
    assert run_id_of(TrainConfig(shape=Windowed(**dims), budget=Budget(steps=4)).to_dict(),
                     {}) == base
    assert run_id_of(ZLoss(shape=Shape(**dims), budget=Budget(steps=4)).to_dict(), {}) == base
    assert run_id_of(TrainConfig(shape=Windowed(**dims, window=16),
                                 budget=Budget(steps=4)).to_dict(), {}) != base
    assert run_id_of(ZLoss(shape=Shape(**dims), budget=Budget(steps=4), z_loss=1e-4).to_dict(),
                     {}) != base
    assert store.run_columns(Windowed)["window"] is int
    assert store.run_columns(None, ZLoss)["z_loss"] is float


def test_runs_that_differ_only_in_qk_norm_are_two_rows_a_fit_tells_apart(tmp_path):
    from archfit.sweep import store
    from archfit.shapes import Shape
    from archfit.sweep.spec import Run, run_id_of
    from archfit.train import Budget, TrainConfig

    rows = []
    for i, (qk, bias, qkv) in enumerate([(False, True, False), (True, True, False)] * 2
                                        + [(False, False, True)] * 2):
        shape = Shape(n_layer=2 + i, d_model=64, n_head=2, vocab_size=256, n_ctx=32,
                      qk_norm=qk, bias=bias, qkv_bias=qkv)
        cfg = TrainConfig(shape=shape, budget=Budget(steps=4)).to_dict()
        run = Run(run_id_of(cfg, {}), cfg, {"target_params": 1e5})
        rows.append(store.run_row(run, "s", {"status": "ok", "final_val_loss": 3.0 - 0.1 * i,
                                             "params_non_embedding": shape.params_non_embedding}))
    assert len({r["run_id"] for r in rows}) == 6
    path, _ = store.write_runs(rows, [], str(tmp_path / "t.parquet"))
    import polars as pl

    df = pl.read_parquet(path)
    assert df["qk_norm"].to_list() == [False, True, False, True, False, False]
    assert df["qkv_bias"].sum() == 2 and df["bias"].sum() == 4
    assert {"schedule", "optimizer", "batch_size", "budget_steps"} <= set(df.columns)
    table = store.read_runs([path])
    assert table.groupings["qk_norm"] == ["false", "true"], table.groupings
