"""Integrity, round six (issue 84): values no training run could use are refused with one line
(exit 2) where they are given, at load for a spec, before anything runs; commands with nothing
to write say so; ledgers are read with suspicion; a stop signal stops the workers a command
started (real processes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from archfit.errors import ArchfitError
from archfit.train.config import MAX_LR, Budget, TrainConfig


@pytest.mark.parametrize("lr", [1e9, float("inf"), float("nan"), -1e-3, 0.0])
def test_a_learning_rate_no_run_could_use_is_refused(lr):
    with pytest.raises(ArchfitError, match="lr must be a positive rate at most"):
        TrainConfig(budget=Budget(steps=1), lr=lr).validate()
    TrainConfig(budget=Budget(steps=1), lr=MAX_LR).validate()  # the bound itself trains


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


def test_plot_of_a_fit_with_nothing_to_draw_says_so_and_writes_nothing(cli, tmp_path):
    out = tmp_path / "figs"
    r = cli("plot", "steplaw2025", "-o", out)
    assert r.exit_code == 2 and "has nothing archfit can draw" in r.output, r.output
    assert not out.exists()


def test_predict_with_a_learning_rate_fit_names_what_it_predicts(cli, repo):
    r = cli("predict", "steplaw2025", repo / "datasets" / "demo_sweep.parquet")
    assert r.exit_code == 2
    assert "predicts the best learning rate and batch, not loss" in r.output
    assert "optimal shape" not in r.output


@pytest.mark.parametrize("old, new, named", [
    ("params = 7.2e5", "params = inf", "[target] params = inf"),
    ("tokens = [3e5]", "tokens = [1e300]", "[pool] tokens = 1e+300"),
    ("sizes = [3e4, 6e4, 1.2e5, 2.4e5]", "sizes = [3e4, 1e20]", "[pool] sizes = 1e+20"),
])
def test_a_campaign_spec_with_an_impossible_value_is_refused_naming_file_and_key(
        cli, repo, tmp_path, old, new, named):
    text = (repo / "sweeps" / "campaign-demo.toml").read_text()
    assert old in text
    spec = tmp_path / "c.toml"
    spec.write_text(text.replace(old, new))
    out = tmp_path / "campaign"
    r = cli("campaign", "run", spec, "--out", out)
    assert r.exit_code == 2, r.output
    assert f"{spec}: {named}" in r.output and "--params" not in r.output
    assert not out.exists()  # nothing written: no ledger to meet later


def test_a_campaign_budget_of_infinite_flops_is_refused_at_load(cli, repo, tmp_path):
    text = (repo / "sweeps" / "campaign-demo.toml").read_text()
    budget = next(line for line in text.splitlines() if line.startswith(("pool_fraction",
                                                                          "flops")))
    spec = tmp_path / "c.toml"
    spec.write_text(text.replace(budget, "flops = inf"))
    r = cli("campaign", "run", spec, "--out", tmp_path / "campaign")
    assert r.exit_code == 2 and "[budget] flops = inf" in r.output, r.output


def test_a_negative_campaign_seed_is_refused_at_load_not_recorded_as_a_stop(cli, repo, tmp_path):
    text = (repo / "sweeps" / "campaign-demo.toml").read_text()
    assert "\nseed = 0" in text
    spec = tmp_path / "c.toml"
    spec.write_text(text.replace("\nseed = 0", "\nseed = -1"))
    out = tmp_path / "campaign"
    r = cli("campaign", "run", spec, "--out", out)
    assert r.exit_code == 2 and "seed: must be 0 or more" in r.output, r.output
    assert not out.exists()  # a corrected spec meets no stopped ledger


@pytest.mark.parametrize("name", ["report.json", "-"])
def test_the_campaign_report_is_written_only_as_html(cli, tmp_path, monkeypatch, name):
    from test_campaign import DEMO, begun

    out = tmp_path / "c"
    begun(DEMO, out)
    monkeypatch.chdir(tmp_path)
    r = cli("campaign", "report", out, "-o", name)
    assert r.exit_code == 2 and "the report is one HTML page" in r.output, r.output
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("edit, match", [
    ({"schema": "archfit.campaign/2"}, "written by another archfit version"),
    ({"budget": -1}, "budget is -1, not a finite number of 0 or more"),
    ({"spent": float("inf")}, "spent is inf"),
])
def test_a_ledger_is_read_with_suspicion(cli, tmp_path, edit, match):
    import json

    from test_campaign import DEMO, begun

    out = tmp_path / "c"
    begun(DEMO, out)
    led = json.loads((out / "ledger.json").read_text())
    (out / "ledger.json").write_text(json.dumps({**led, **edit}))
    r = cli("campaign", "status", out)
    assert r.exit_code == 2 and match in r.output, r.output


# ------------------------------------------------------------------ stopping cleanly (trains)
def _children(pid: int) -> list[int]:
    import subprocess

    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in f.read().lower()
    except OSError:
        return False


def _sigterm_once_training(argv: list[str], base: Path, running: str
                           ) -> tuple[int, str, list[int]]:
    """Start ``argv``, wait until a run is training (a file matching ``running`` under
    ``base``: a run directory's lock), SIGTERM the command alone (as ``timeout`` and ``kill``
    do), and return its exit status, its output and the worker processes it had."""
    import signal
    import subprocess
    import sys
    import time

    p = subprocess.Popen([sys.executable, "-m", "archfit", *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    t0 = time.monotonic()
    while not list(base.glob(running)) and time.monotonic() - t0 < 120:
        time.sleep(0.2)
    time.sleep(1.0)
    kids = _children(p.pid)
    assert kids, "the command started no workers"
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=120)
    return p.returncode, out, kids


@pytest.mark.slow
def test_sigterm_to_sweep_run_stops_its_workers_and_the_sweep_resumes(cli, repo, tmp_path):
    import time

    out = tmp_path / "runs"
    spec = repo / "sweeps" / "moe-tiny.toml"
    code, text, kids = _sigterm_once_training(
        ["sweep", "run", str(spec), "--out", str(out)], out, "*/lock")
    assert code == 143, text
    assert "stopped by signal 15" in text and "run the same command to resume" in text
    time.sleep(10)
    assert not [k for k in kids if _alive(k)]  # no worker trains on after the command
    r = cli("sweep", "run", spec, "--out", out)
    assert r.exit_code == 0, r.output
    assert "10/10" in cli("sweep", "status", spec, "--out", out).output


@pytest.mark.slow
def test_sigterm_to_campaign_run_stops_its_workers_and_the_ledger_resumes(cli, repo, tmp_path):
    import time

    out = tmp_path / "campaign"
    spec = repo / "sweeps" / "campaign-demo.toml"
    code, text, kids = _sigterm_once_training(
        ["campaign", "run", str(spec), "--out", str(out)], out, "**/lock")
    assert code == 143, text
    time.sleep(10)
    assert not [k for k in kids if _alive(k)]
    r = cli("campaign", "status", out)
    assert r.exit_code == 0, r.output  # a ledger that reads, and resumes


@pytest.mark.parametrize("out", [None, "", 3])
def test_the_campaign_api_refuses_a_folder_that_is_not_a_path(out):
    import archfit.campaign as cp
    from archfit.campaign.spec import CampaignError

    with pytest.raises(CampaignError, match="the campaign's folder is a path"):
        cp.run("sweeps/campaign-demo.toml", out)


def test_design_auto_for_a_compute_target_takes_a_pool_of_sizes_and_tokens(cli, repo,
                                                                          tmp_path,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("design", "--law", "auto", "--compute", 1e18, "--results",
            repo / "datasets" / "demo_sweep.parquet", "--sizes", "1e5,2e5", "--tokens",
            "3e5,6e5", "--spec", repo / "sweeps" / "demo.toml", "--budget-frac", 0.5,
            "--bootstrap", 20)
    assert r.exit_code == 0, r.output  # it said "unknown law 'auto'"
    assert "target: N_opt at C = 1e+18 FLOPs" in r.output


def test_a_campaign_takes_lrs_auto_as_a_sweep_spec_does(repo, tmp_path):
    from archfit.campaign import load
    from archfit.campaign.loop import prepare
    from archfit.sweep.spec import spec_for_runs

    text = (repo / "sweeps" / "campaign-demo.toml").read_text()
    assert "lrs = [4e-3]" in text
    path = tmp_path / "auto.toml"
    path.write_text(text.replace("lrs = [4e-3]", 'lrs = ["auto"]'))
    spec = load(path)  # it was refused: lrs must be numbers
    prepare(spec)  # the recipe passes the sweep engine's checks
    chosen = [{"params": 3e4, "n_layer": 2, "d_model": 48, "tokens": 3e5}]
    assert spec_for_runs(chosen, spec)["lrs"] == ["auto"]


def test_law_auto_keeps_the_row_limit_every_law_keeps(cli, tmp_path):
    import time

    import numpy as np
    import polars as pl

    from archfit.laws.fitting import MAX_FIT_ROWS

    n = MAX_FIT_ROWS + 1
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(7, 9, n), 10 ** rng.uniform(9, 11, n)
    pl.DataFrame({"params": N, "tokens": D, "loss": 1.8 + 400 / N ** 0.34
                  + 400 / D ** 0.28}).write_parquet(tmp_path / "big.parquet")
    t = time.monotonic()
    r = cli("fit", tmp_path / "big.parquet", "--law", "auto")
    assert r.exit_code == 2 and "rows are more than a fit reads in minutes" in r.output
    assert time.monotonic() - t < 10  # refused up front, before any law is fitted
