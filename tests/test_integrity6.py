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


def test_restart_refuses_to_remove_a_users_file_inside_a_round_folder(cli, tmp_path):
    """--restart removes what archfit wrote; a file the user put inside round-0/ would go with
    the folder, so the restart is refused and nothing is removed."""
    from test_campaign import begun, one_line, write_spec

    out = tmp_path / "c"
    begun(write_spec(tmp_path, "a.toml"), out)
    (out / "round-0" / "mine.txt").write_text("mine")
    line = one_line(cli("campaign", "run", write_spec(tmp_path, "a.toml"), "--out", out,
                        "--restart"))
    assert "archfit did not write: round-0/mine.txt" in line
    assert (out / "round-0" / "mine.txt").read_text() == "mine"
    assert (out / "ledger.json").exists() and (out / "round-0" / "spec.toml").exists()


def test_a_pool_fraction_campaign_continues_with_a_larger_absolute_budget(cli, tmp_path):
    """A campaign that spent its whole pool (pool_fraction = 1.0) continues when the spec gives
    a larger budget in FLOPs; a smaller one is refused."""
    import archfit.campaign as cp
    from test_campaign import begun, one_line, write_spec

    out = tmp_path / "c"
    whole = {"stop.rounds": "rounds = 1", "budget.pool_fraction": "pool_fraction = 1.0"}
    begun(write_spec(tmp_path, "a.toml", **whole), out,
          stopped_because="1 rounds run ([stop] rounds = 1)")
    led = cp.ledger.read(str(out))
    led.rounds.append(cp.Round(round=0, state=cp.RoundState.FITTED, dir="round-0", chosen=[],
                               spend=1.0, verdict="weak", target_ci=[2.0, 20.0]))
    cp.ledger.write(str(out), led)  # round 0 done: the continued spec stops on its rounds
    budget = led.budget
    more = write_spec(tmp_path, "b.toml", **{**whole,
                                             "budget.pool_fraction": f"flops = {2 * budget:.6e}"})
    r = cli("campaign", "run", more, "--out", out)
    assert r.exit_code == 0, r.output
    led = cp.ledger.read(str(out))
    assert led.budget == pytest.approx(2 * budget, rel=1e-6)
    assert led.changes[0].changes[0].startswith("[budget] pool_fraction = 1.0 -> [budget] flops")
    less = write_spec(tmp_path, "c.toml", **{**whole,
                                             "budget.pool_fraction": f"flops = {budget / 2:.6e}"})
    assert "the budget can only be raised" in one_line(cli("campaign", "run", less, "--out",
                                                           out))


def test_lr_batch_on_a_loss_that_falls_with_the_rate_in_every_cell_is_refused(cli, tmp_path):
    """A parabola whose vertex is astronomically far above the rates tried: one line, exit 2
    (its note once overflowed writing the rate)."""
    import math

    import polars as pl

    rows = [dict(params=N, tokens=20 * N, lr=lr, loss=3.0 - 0.1 * math.log(lr)
                 + 1e-9 * math.log(lr) ** 2)
            for N in (1e6, 4e6, 1.6e7) for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)]
    path = tmp_path / "falls.csv"
    pl.DataFrame(rows).write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0)
    assert r.exit_code == 2, r.output
    assert "the best rate lies above the rates tried" in r.output and "Traceback" not in r.output


def test_lr_batch_where_the_rate_does_not_matter_gives_no_best_rate(cli, tmp_path):
    """Seeds repeat every rate, and the loss differs across rates no more than across seeds:
    no cell has a best rate (one-way analysis of variance), so there is no law to give."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(3)
    rows = [dict(params=N, tokens=20 * N, lr=lr, seed=s, loss=3.0 + 0.01 * rng.normal())
            for N in (1e6, 4e6, 1.6e7, 6.4e7) for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
            for s in range(2)]
    path = tmp_path / "flat.csv"
    pl.DataFrame(rows).write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0)
    assert r.exit_code == 2, r.output
    assert "the loss does not measurably depend on the rate" in r.output


def test_a_replaced_fit_is_checked_as_a_new_one_is():
    """dataclasses.replace builds a Fit through its checks: a law whose parameters the fit
    lacks is a typed error at once, not a KeyError at predict."""
    import dataclasses

    from archfit.errors import FitInputError
    from archfit.laws.artifact import Fit

    f = Fit(law="chinchilla", params=dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28))
    assert f.predict(params=1e9, tokens=2e10)[0] == pytest.approx(
        1.69 + 406.4 / 1e9 ** 0.34 + 410.7 / 2e10 ** 0.28)
    with pytest.raises(FitInputError, match="a kaplan-n fit needs the parameters N_c, alpha_N"):
        dataclasses.replace(f, law="kaplan-n")
    with pytest.raises(FitInputError, match="missing: A, B, alpha, beta"):
        dataclasses.replace(f, params={"E": 1.5})


def test_a_depth_width_fit_without_an_optimal_depth_is_a_typed_error():
    """A depth-width fit whose loss rises with depth (beta < 0) has no optimal depth: a typed
    error naming the parameters (a complex number crashed a campaign's round once)."""
    from archfit.errors import FitError
    from archfit.laws.base import get_law

    law = get_law("depth-width")
    good = dict(E=1.0, A=10.0, alpha=0.5, B=2.0, beta=0.5, C=0.0, gamma=0.3)
    L, _ = law.optimum(good, 1e8)
    # the closed form: d* = (2 beta B / (alpha A) (N / 12)^(alpha / 2))^(1 / (alpha / 2 + beta))
    assert L == pytest.approx((2 * 0.5 * 2.0 / (0.5 * 10.0) * (1e8 / 12) ** 0.25) ** (1 / 0.75))
    with pytest.raises(FitError, match="has no optimal depth"):
        law.optimum({**good, "beta": -0.2}, 1e8)


def test_a_data_constrained_table_that_repeats_one_token_is_refused_in_seconds(cli, repo,
                                                                              tmp_path):
    """Every run repeats one unique token: nothing measures the decay of repeated data, so the
    fit is refused before it starts (it once ran for minutes)."""
    import time

    import polars as pl

    runs = pl.read_csv(repo / "datasets" / "muennighoff2023" / "c4_runs.csv")
    path = tmp_path / "one.csv"
    runs.with_columns(pl.lit(1.0).alias("unique_tokens")).write_csv(path)
    t0 = time.perf_counter()
    r = cli("fit", path, "--law", "data-constrained")
    assert r.exit_code == 2 and "repeats its data more than 107 times" in r.output, r.output
    assert time.perf_counter() - t0 < 10


@pytest.mark.parametrize("tokens, reason", [
    (1e30, "the peak learning rate 278 is past the plausible bound 1"),
    (1, "the batch of 0.58 tokens is below one sequence of 2,048 tokens"),
])
def test_a_recipe_no_run_could_use_is_flagged_in_text_and_json_and_not_exported(
        cli, tokens, reason):
    """Step Law (lr = 1.79 N^-0.713 D^0.307, batch = 0.58 D^0.571 tokens) read at 7e9
    parameters and 1e30 tokens gives a rate of 278; at 1 token, a batch of 0.58 tokens. The
    recipe says it is uninformative and why; an export refuses to round it into a config."""
    import json
    import math

    gpt2 = ("--family", "gpt2")  # the example: a 2,048 context
    N = json.loads(cli("recommend", "--params", 7e9, *gpt2, "--json").output)["recipe"]["params"]
    assert 1.79 * N ** -0.713 * 1e30 ** 0.307 == pytest.approx(278, rel=0.01)
    r = cli("recommend", "--params", 7e9, *gpt2, "--tokens", tokens, "--json")
    assert r.exit_code == 0, r.output
    rec = json.loads(r.output)["recipe"]
    assert rec["verdict"] == "uninformative" and any(reason in x for x in rec["reasons"])
    assert math.isclose(rec["batch_tokens"]["value"], 0.58 * float(tokens) ** 0.571, rel_tol=1e-9)
    text = cli("recommend", "--params", 7e9, *gpt2, "--tokens", tokens).output
    assert "recipe verdict: uninformative" in text and reason in text
    e = cli("recommend", "--params", 7e9, *gpt2, "--tokens", tokens, "--emit", "nanogpt")
    assert e.exit_code == 2 and "the recipe is not one a run could use" in e.output
    ok = json.loads(cli("recommend", "--params", 7e9, "--json").output)["recipe"]
    assert ok["verdict"] == "usable" and ok["reasons"] == []


def test_a_long_fit_prints_progress_off_a_terminal(cli, repo, monkeypatch):
    """Off a terminal (a log, CI) the bootstrap prints a progress line on stderr with the
    resamples done and an ETA, at most every PROGRESS_EVERY_S seconds (0 here: every chunk)."""
    import archfit.cli.fit_cmd as fit_cmd

    monkeypatch.setattr(fit_cmd, "PROGRESS_EVERY_S", 0.0)
    r = cli("fit", repo / "datasets" / "chinchilla_epoch2024.csv", "--law", "chinchilla",
            "--bootstrap", 40)
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("bootstrap: ")]
    assert lines and all(" of 40 resamples, " in ln and "s to go" in ln for ln in lines)


def test_lr_batch_never_averages_over_batch_sizes(cli, tmp_path):
    """A learning-rate grid at two batch sizes per cell is refused whole (a best batch cannot be
    placed between two), naming --by; fitted one batch at a time it recovers each batch's
    planted optimum, ln lr* = -7 - 0.3 ln(b/2^16) (a loss quadratic in ln lr about it). A grid of
    four batches is fitted with the batch as a variable: the batch law's constants come back."""
    import json
    import math

    import polars as pl

    rows = [dict(params=N, tokens=20 * N, lr=lr, batch_tokens=b,
                 loss=3.0 + 0.05 * (math.log(lr) + 7 + 0.3 * math.log(b / 2 ** 16)) ** 2)
            for N in (1e6, 4e6, 1.6e7) for b in (2 ** 16, 2 ** 18)
            for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)]
    path = tmp_path / "grid.csv"
    pl.DataFrame(rows).write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0)
    assert r.exit_code == 2 and "2 batch sizes: the best batch cannot be placed" in r.output
    assert "--by batch_tokens" in r.output
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0, "--by", "batch_tokens", "--json")
    assert r.exit_code == 0, r.output
    got = {float(k): v["params"]["a"] for k, v in json.loads(r.output)["fits"].items()}
    assert got[2.0 ** 16] == pytest.approx(-7.0, abs=1e-6)
    assert got[2.0 ** 18] == pytest.approx(-7.0 - 0.3 * math.log(4), abs=1e-6)
    from archfit.laws.planted import lr_batch_sweep

    grid = tmp_path / "rate-x-batch.csv"
    lr_batch_sweep(seed=0).drop("lr_opt_true", "batch_opt_true").write_csv(grid)
    r = cli("fit", grid, "--law", "lr-batch", "--bootstrap", 0, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["extra"]["batch_fitted"] and set(out["params"]) >= {"a_B", "b_B", "c_B"}
    assert all(c["batch_opt"] > 0 for c in out["extra"]["cells"])


def test_an_lr_cell_of_three_rates_says_it_has_no_interval(cli, tmp_path):
    import math

    import polars as pl

    rows = [dict(params=N, tokens=20 * N, lr=lr, loss=3.0 + 0.05 * (math.log(lr) + 7) ** 2)
            for N in (1e6, 4e6, 1.6e7) for lr in (3e-4, 1e-3, 3e-3)]
    path = tmp_path / "three.csv"
    pl.DataFrame(rows).write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0)
    assert r.exit_code == 0, r.output
    assert "this cell's best rate has no interval" in " ".join(r.output.split())
