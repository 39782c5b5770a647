"""What a campaign takes: a spec's impossible values refused naming file and key, a ledger read
with suspicion, a report written only as HTML, a stopped campaign that resumes, and a
restart that never removes a user's file."""

from __future__ import annotations

import pytest
import json


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
    ({"rounds": None}, "a damaged campaign ledger (missing 'rounds'); restore it"),
    ({"schema": None}, "no schema archfit.campaign/1); restore it from a copy, or pass "
                       "--restart"),
])
def test_a_ledger_is_read_with_suspicion(cli, tmp_path, edit, match):

    from test_campaign import DEMO, begun

    out = tmp_path / "c"
    begun(DEMO, out)
    led = json.loads((out / "ledger.json").read_text())
    (out / "ledger.json").write_text(json.dumps({**led, **edit}))
    r = cli("campaign", "status", out)
    assert r.exit_code == 2 and match in r.output, r.output


@pytest.mark.parametrize("out", [None, "", 3])
def test_the_campaign_api_refuses_a_folder_that_is_not_a_path(out):
    import archfit.campaign as cp
    from archfit.campaign.spec import CampaignError

    with pytest.raises(CampaignError, match="the campaign's folder is a path"):
        cp.run("sweeps/campaign-demo.toml", out)


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
