"""``archfit campaign``: its refusals (fast: nothing trains), and the loop itself (slow): the
demo narrows the target's interval within its budget, a SIGKILL at three moments resumes to the
same ledger, two rounds run through real Slurm, and the report opens in a real headless
browser with every image loaded."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "sweeps" / "campaign-demo.toml"


def spec_text(**edits: str) -> str:
    """The demo spec with lines replaced: key 'section.key' (or 'key') -> new 'key = value'
    line, or '' to drop the line; a key ending in '[]' drops the whole section."""
    out, section = [], ""
    for line in DEMO.read_text().splitlines():
        s = line.strip()
        if s.startswith("["):
            section = s.split("]")[0][1:]
            if f"{section}[]" in edits:
                section = "DROPPED"
                continue
        if section == "DROPPED":
            continue
        key = s.split("=")[0].strip() if "=" in s and not s.startswith("#") else None
        full = f"{section}.{key}" if section else key
        if key is not None and full in edits:
            if edits[full]:
                out.append(edits[full])
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def write_spec(tmp_path: Path, name: str = "c.toml", **edits: str) -> Path:
    p = tmp_path / name
    p.write_text(spec_text(**edits))
    return p


def one_line(r) -> str:  # type: ignore[no-untyped-def]
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), r.output
    return lines[0]


# ------------------------------------------------------------------ refusals (nothing trains)
@pytest.mark.parametrize("edits,says", [
    ({"target[]": ""}, "no [target] section"),
    ({"budget[]": ""}, "no [budget] section"),
    ({"budget.pool_fraction": "flops = 1"}, "below the cheapest run"),
    ({"law": 'law = "levine"'}, "has no loss model"),
    ({"law": 'law = "no-such-law"'}, "law 'no-such-law' is not known"),
    ({"executor.kind": 'kind = "kubernetes"'}, "executor.kind: must be local, slurm, ray"),
    ({"target.params": "params = -3"}, "target.params: must be greater than zero"),
    ({"budget.pool_fraction": "pool_fraction = 2"}, "in (0, 1]"),
    ({"law": 'law = "chinchilla"'}, "needs a shape law"),
    ({"stop.rounds": "rounds = 0"}, "stop.rounds: must be greater than zero"),
    # values of the wrong type, unknown keys, values that passed and misbehaved
    ({"budget.pool_fraction": 'pool_fraction = "x"'}, "budget.pool_fraction: expected float"),
    ({"pool.sizes": 'sizes = "1e5"'}, "pool.sizes: expected list"),
    ({"pool.sizes": 'sizes = [3e4, "abc"]'}, "pool.sizes[1]: expected float"),
    ({"stop[]": "", "stop.rounds": ""}, None),  # no [stop] at all is fine (checked below)
    ({"first_batch": "frist_batch = 10"}, "frist_batch: unknown key"),
    ({"pool.tolerance": "ff_ratio = [4]"}, "pool.ff_ratio: unknown key"),
    ({"seed": 'seed = 0\nprior = "nonexistent-fit"'}, "prior = 'nonexistent-fit'"),
    ({"seed": 'seed = 0\nprior = "levine2020"'}, "is a levine fit; a prior for this campaign"),
    ({"pool.tokens": "tokens = [0]"}, "pool.tokens[0]: must be greater than zero"),
    ({"first_batch": "first_batch = 1"}, "first_batch = 1 runs cannot be fitted"),
    ({"batch": "batch = true"}, "batch: expected int, got bool True"),
    ({"pool.depths": "depths = [1, 2.5, 4]"}, "pool.depths[1]: expected int, got float 2.5"),
    ({"recommend.vocab_size": 'vocab_size = "abc"'}, "recommend.vocab_size: expected int"),
    ({"recommend.head_dim": "head_dim = 6"}, "[recommend] head_dim 6 does not divide"),
    ({"budget.pool_fraction": 'gpu_hours = 5\ngpu = "tpu9"'}, "gpu 'tpu9' is not known"),
    ({"train.batch_size": "batch_size = -16"}, "train.batch_size: must be greater than zero"),
    ({"seed": 'seed = 0\ndata = "no-such-corpus.bin"'}, "the training recipe"),
    ({"model.head_dim": "head_dim = 7"}, "depth-joint needs 10 runs to be fitted"),
])
def test_a_bad_spec_gets_one_line_and_exit_2(cli, tmp_path, edits, says):
    """Every spec problem is one line before anything is written: no folder, no lock, no
    ledger, no FLOP spent (each of these once crashed, passed silently, or found
    only after a round had trained)."""
    spec = write_spec(tmp_path, **edits)
    if says is None:
        spec.write_text(spec.read_text() + "\n[stop]\nrounds = 0\n")
        says = "stop.rounds: must be greater than zero"
    r = cli("campaign", "run", spec, "--out", tmp_path / "c")
    assert says in one_line(r)
    assert not (tmp_path / "c").exists()


@pytest.mark.slow
def test_more_bad_specs_are_one_line_before_anything_is_written(cli, tmp_path):
    """A spec file that is not UTF-8, a grid of 600,000 sizes, an empty pool table, a pool
    table whose sizes are text, and a Slurm executor where there is no Slurm."""
    out = tmp_path / "c"
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(spec_text().replace("campaign-demo", "caf\u00e9").encode("latin-1"))
    assert "not UTF-8 text" in one_line(cli("campaign", "run", bad, "--out", out))
    sizes = ", ".join(["3e4"] * 600_000)
    many = write_spec(tmp_path, "many.toml", **{"pool.sizes": f"sizes = [{sizes}]"})
    assert "expands to 3,600,000 candidates" in one_line(cli("campaign", "run", many, "--out",
                                                             out))
    (tmp_path / "empty.csv").write_text("params,n_layer,d_model,tokens\n")
    (tmp_path / "text.csv").write_text("params,n_layer,d_model,tokens\nbig,2,32,3e5\n")
    for table, says in (("empty.csv", "[pool]"), ("text.csv", "params")):
        t = write_spec(tmp_path, f"t-{table}.toml", **{"pool[]": ""})
        t.write_text(t.read_text() + f'\n[pool]\ntable = "{table}"\n')
        assert says in one_line(cli("campaign", "run", t, "--out", out))
    if shutil.which("sbatch") is None:
        slurm = write_spec(tmp_path, "s.toml", **{"executor.kind": 'kind = "slurm"'})
        assert "sbatch and srun not found" in one_line(cli("campaign", "run", slurm, "--out",
                                                            out))
    assert not out.exists()


def test_the_api_refuses_what_is_not_a_spec_or_a_folder_with_a_typed_error(tmp_path):
    import archfit
    import archfit.campaign as cp

    for bad in (None, {"law": "depth-joint"}, 3):
        with pytest.raises(cp.CampaignError, match="a campaign spec is a path"):
            archfit.campaign.run(bad, tmp_path / "c")  # type: ignore[arg-type]
        with pytest.raises(cp.CampaignError, match="a campaign folder is a path"):
            archfit.campaign.status(bad)  # type: ignore[arg-type]
    assert not (tmp_path / "c").exists()


def test_a_damaged_ledger_is_one_line_for_status_report_and_run(cli, tmp_path):
    for text, says in (("{", "not a readable campaign ledger"),
                       ('{"schema": "archfit.campaign/1", "name": "x"}', "missing 'spec'"),
                       ('{"schema": "archfit.campaign/1", "name": "x", "spec": {}, '
                        '"rounds": [{"round": 0, "state": "cooked", "dir": "round-0", '
                        '"chosen": [], "spend": 1, "runs": {}}]}', "state 'cooked'"),
                       ('{"schema": "archfit.campaign/1", "name": "x", "spec": {}, '
                        '"rounds": [], "spent": "lots"}', "spent is 'lots'"),
                       ('{"schema": "archfit.campaign/1", "name": "x", "spec": {}}',
                        "missing 'rounds'")):
        out = tmp_path / "d"
        out.mkdir(exist_ok=True)
        (out / "ledger.json").write_text(text)
        for argv in (("status", out), ("report", out, "-o", tmp_path / "r.html"),
                     ("run", DEMO, "--out", out)):
            assert says in one_line(cli("campaign", *argv)), (text, argv)
        assert (out / "ledger.json").read_text() == text


def test_a_temp_file_left_by_a_kill_before_the_first_ledger_is_not_foreign(tmp_path):
    """A kill during the first ledger write leaves '.tmp-...' beside the lock; the folder is
    still the campaign's (resume once said 'not a campaign folder')."""
    from archfit.campaign import ledger

    out = tmp_path / "c"
    out.mkdir()
    (out / ".lock").write_text("")
    (out / ".tmp-4242-1-ledger.json").write_text('{"schema"')
    assert ledger.foreign(str(out)) == [] and ledger.read(str(out)) is None


def test_a_folder_that_is_not_a_campaign_is_refused(cli, tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("mine")
    r = cli("campaign", "run", DEMO, "--out", tmp_path / "c")
    assert "not a campaign folder" in one_line(r)
    assert (tmp_path / "c" / "notes.txt").read_text() == "mine"
    assert "no campaign ledger" in one_line(cli("campaign", "status", tmp_path / "c"))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "ledger.json").write_text('{"schema": "something else"}')
    assert "not an archfit campaign ledger" in one_line(cli("campaign", "status", tmp_path / "d"))


def test_a_second_concurrent_run_is_refused(cli, tmp_path):
    out = tmp_path / "c"
    out.mkdir()
    with open(out / ".lock", "a+") as held:  # what a running 'campaign run' holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        r = cli("campaign", "run", DEMO, "--out", out)
        assert "another 'archfit campaign run' holds" in one_line(r)
    assert not (out / "ledger.json").exists()


def begun(spec_path: Path, out: Path, **fields) -> None:  # type: ignore[no-untyped-def]
    """The ledger 'campaign run' writes before round 0, with ``fields`` set, and a round
    folder: a campaign folder, made without training anything."""
    import archfit.campaign as cp

    spec = cp.load(spec_path)
    ready = cp.prepare(spec)
    out.mkdir(exist_ok=True)
    cp.ledger.write(str(out), cp.Ledger(name=spec.name, spec=spec.raw, budget=ready.budget,
                                        unit=ready.unit, **fields))
    (out / "round-0").mkdir()
    (out / "round-0" / "spec.toml").write_text("# round 0\n")


def test_a_changed_spec_is_refused_in_one_phrase_per_change(cli, tmp_path):
    out = tmp_path / "c"
    begun(write_spec(tmp_path, "a.toml"), out)
    changed = write_spec(tmp_path, "b.toml", **{"pool.tokens": "tokens = [4e5]",
                                                "stop.rounds": "rounds = 2"})
    line = one_line(cli("campaign", "run", changed, "--out", out))
    assert "the spec changed" in line and "[pool] tokens: [300000.0] -> [400000.0]" in line
    assert "[stop] rounds: 4 -> 2 (rounds can only be raised)" in line
    assert (out / "ledger.json").exists() and (out / "round-0" / "spec.toml").exists()


def test_restart_checks_the_new_spec_first_and_removes_only_archfits_files(cli, tmp_path):
    """--restart with a spec that is then refused touches nothing (it once deleted every run,
    the ledger and the user's notes before checking); a restart removes the ledger, rounds,
    lock and temporary files, and keeps the user's."""
    import archfit.campaign as cp

    out = tmp_path / "c"
    begun(write_spec(tmp_path, "a.toml"), out)
    (out / "notes.txt").write_text("mine")
    before = sorted(p.name for p in out.iterdir())
    cheap = write_spec(tmp_path, "c.toml", **{"budget.pool_fraction": "flops = 1"})
    assert "below the cheapest run" in one_line(cli("campaign", "run", cheap, "--out", out,
                                                    "--restart"))
    assert sorted(p.name for p in out.iterdir()) == before
    (out / ".tmp-123-abc-ledger.json").write_text("{")  # a killed write's leftover
    (out / "validation").mkdir()
    cp.ledger.clear(str(out))
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "mine"


def test_a_raised_budget_continues_a_stopped_campaign_and_the_ledger_records_it(cli, tmp_path):
    """A finished campaign (stopped by its rounds) run again with a larger budget and more
    rounds continues; with only a larger budget its rounds still stop it, and both runs of
    the spec are in the ledger. (The slow test below trains the continued round.)"""
    import archfit.campaign as cp

    out = tmp_path / "c"
    begun(write_spec(tmp_path, "a.toml", **{"stop.rounds": "rounds = 1"}), out,
          stopped_because="1 rounds run ([stop] rounds = 1)")
    led = cp.ledger.read(str(out))
    led.rounds.append(cp.Round(round=0, state=cp.RoundState.FITTED, dir="round-0", chosen=[],
                               spend=1.0, verdict="weak", target_ci=[2.0, 20.0]))
    cp.ledger.write(str(out), led)
    more = write_spec(tmp_path, "b.toml", **{"stop.rounds": "rounds = 1",
                                             "budget.pool_fraction": "pool_fraction = 0.8"})
    r = cli("campaign", "run", more, "--out", out)
    assert r.exit_code == 0, r.output
    led = cp.ledger.read(str(out))
    assert led.stopped_because == "1 rounds run ([stop] rounds = 1)"
    assert [c.changes for c in led.changes] == [["[budget] pool_fraction: 0.6 -> 0.8"]]
    assert led.spec["budget"]["pool_fraction"] == 0.8 and led.budget is not None
    st = cp.status(str(out)).to_dict()
    assert st["changes"][0]["round"] == 1 and st["rounds"][0]["chosen"] == []
    assert "continued before round 1" in r.output
    lower = write_spec(tmp_path, "c.toml", **{"stop.rounds": "rounds = 1",
                                              "budget.pool_fraction": "pool_fraction = 0.5"})
    assert "the budget can only be raised" in one_line(cli("campaign", "run", lower, "--out",
                                                           out))


def test_the_report_refuses_to_replace_a_file_it_did_not_write(cli, tmp_path):
    out = tmp_path / "c"
    begun(DEMO, out)
    mine = tmp_path / "mine.html"
    mine.write_text("<html>my page</html>")
    r = cli("campaign", "report", out, "-o", mine)
    assert r.exit_code == 2 and mine.read_text() == "<html>my page</html>"


@pytest.mark.parametrize("inside", ["ledger.json", "round-0/spec.toml"])
def test_the_report_never_replaces_the_campaigns_own_files_even_with_force(cli, tmp_path,
                                                                          inside):
    """'report -o DIR/ledger.json --force' once replaced the ledger with the page, and the
    campaign could no longer resume."""
    out = tmp_path / "c"
    begun(DEMO, out)
    before = (out / inside).read_bytes()
    line = one_line(cli("campaign", "report", out, "-o", out / inside, "--force"))
    assert "is also an input of this command" in line
    assert (out / inside).read_bytes() == before


# ------------------------------------------------------------------ the loop (trains)
def small_spec(tmp_path: Path, **more: str) -> Path:
    """Two rounds (10 runs, then 2) of 1e5 tokens each, 30 resamples: about 30 s on 2 cores."""
    edits = {"stop.rounds": "rounds = 2", "batch": "batch = 2", "bootstrap": "bootstrap = 30",
             "stop.ci_ratio": "", "stop.verdict": "", "pool.tokens": "tokens = [1e5]"}
    edits.update(more)
    return write_spec(tmp_path, "small.toml", **edits)


def campaign_cmd(*args: object) -> list[str]:
    return [sys.executable, "-m", "archfit", "campaign", *map(str, args)]


def ledger_facts(out: Path) -> dict:
    """What must not differ after a kill and a resume: each round's runs, chosen
    configurations and spend, the total spent and why it stopped."""
    led = json.loads((out / "ledger.json").read_text())
    return {"rounds": [(r["round"], r["state"], sorted(r["runs"].items()),
                        [{k: c[k] for k in ("params", "n_layer", "d_model", "tokens")}
                         for c in r["chosen"]], round(r["spend"], 3)) for r in led["rounds"]],
            "spent": round(led["spent"], 3), "stopped_because": led["stopped_because"]}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    d = tmp_path_factory.mktemp("whole")
    spec = small_spec(d)
    r = subprocess.run(campaign_cmd("run", spec, "--out", d / "c"), capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    return spec, ledger_facts(d / "c"), d / "c"


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["train:3", "fit:2", "ledger:5"])
def test_a_sigkill_at_any_moment_resumes_to_the_same_ledger(uninterrupted, tmp_path, moment):
    """Killed (SIGKILL, the whole process group, as a dead node leaves it) while round 0's runs
    train, while round 1 is fitted, and between writing a new ledger and putting it in place;
    run again, it finishes with the uninterrupted run's runs and spend."""
    spec, want, _ = uninterrupted
    out = tmp_path / "c"
    p = subprocess.Popen([sys.executable, str(ROOT / "tests" / "held_campaign.py"), moment,
                          *campaign_cmd("run", spec, "--out", out)[3:]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    t0 = time.time()
    while not (out / ".held").exists():
        assert p.poll() is None, p.stderr.read().decode()[-2000:] if p.stderr else ""
        assert time.time() - t0 < 600, f"never reached {moment}"
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    (out / ".held").unlink()
    r = subprocess.run(campaign_cmd("run", spec, "--out", out), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    assert ledger_facts(out) == want


@pytest.mark.slow
def test_a_finished_campaign_given_more_rounds_and_budget_trains_only_the_new_round(
        uninterrupted, tmp_path):
    """The finished two-round campaign, run again with a spec that raises the rounds and the
    budget: it trains a third round and nothing of the first two, and its ledger records the
    change before round 2."""
    spec, want, done = uninterrupted
    out = tmp_path / "c"
    shutil.copytree(done, out)
    results = {p: p.stat().st_mtime_ns for p in out.glob("round-*/runs/*/result.json")}
    assert len(results) == sum(len(x[2]) for x in want["rounds"])
    more = tmp_path / "more.toml"
    more.write_text(spec.read_text().replace("rounds = 2", "rounds = 3")
                    .replace("pool_fraction = 0.6", "pool_fraction = 0.9"))
    r = subprocess.run(campaign_cmd("run", more, "--out", out), capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, (r.stdout, r.stderr[-3000:])
    led = json.loads((out / "ledger.json").read_text())
    assert [x["state"] for x in led["rounds"]] == ["fitted"] * 3
    assert led["changes"][0]["round"] == 2 and sorted(led["changes"][0]["changes"]) == [
        "[budget] pool_fraction: 0.6 -> 0.9", "[stop] rounds: 2 -> 3"]
    assert all(p.stat().st_mtime_ns == t for p, t in results.items())  # none trained again
    assert all(state == "ok" for state in led["rounds"][2]["runs"].values())
    assert ledger_facts(out)["rounds"][:2] == want["rounds"]


def _chromium() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def open_in_browser(path: Path) -> list:
    """Every image of the page as the headless browser loaded it: (alt, complete, width)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    found = _chromium()
    if found is None:
        pytest.skip("no chromium and chromedriver (apt-get install chromium chromium-driver)")
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        o.add_argument(a)
    o.binary_location = found[0]
    d = webdriver.Chrome(service=Service(found[1]), options=o)
    try:
        d.get(path.resolve().as_uri())
        assert d.title.startswith("archfit campaign")
        return d.execute_script("return Array.from(document.images).map("
                                "i => [i.alt, i.complete, i.naturalWidth])")
    finally:
        d.quit()


@pytest.mark.slow
def test_the_demo_narrows_its_target_within_budget_and_reports(tmp_path):
    """The shipped demo from nothing: JSON progress lines, the optimal depth's 95% CI at least
    2x narrower (high/low) from round 0 to the end or a stop on the verdict, the spend within
    the budget, status as JSON and as frames, and a report a real browser opens."""
    out = tmp_path / "c"
    r = subprocess.run(campaign_cmd("run", DEMO, "--out", out, "--json"), capture_output=True,
                       text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]
    events = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert {"designed", "run", "fitted", "stopped"} <= {e["event"] for e in events}
    # a verdict below informative says why, in the JSON line and so in the progress line
    assert all(e.get("reasons") or e.get("error") for e in events
               if e["event"] == "fitted" and e["verdict"] != "informative"), events
    st = subprocess.run(campaign_cmd("status", out, "--json"), capture_output=True, text=True)
    d = json.loads(st.stdout)
    assert {"rounds", "budget", "spent", "unit", "verdict", "target_ci", "runs",
            "stopped_because"} <= set(d)
    assert d["spent"] <= d["budget"] and d["stopped_because"]
    first = next(r["target_ci"] for r in d["rounds"] if r["target_ci"])
    ratio0 = first["high"] / first["low"]
    ratio = d["target_ci"]["high"] / d["target_ci"]["low"]
    assert first["kind"] == d["target_ci"]["kind"] == "fitted"
    assert ratio0 / ratio >= 2 or "verdict" in d["stopped_because"], (ratio0, ratio)
    assert all(run["state"] == "ok" for run in d["runs"])
    assert len(d["runs"]) == sum(r["runs"] for r in d["rounds"])
    import archfit.campaign as cp

    s = cp.status(str(out))
    assert s.rounds.height == len(d["rounds"]) and s.runs.height == len(d["runs"])
    rep = subprocess.run(campaign_cmd("report", out, "-o", tmp_path / "report.html"),
                         capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    images = open_in_browser(tmp_path / "report.html")
    assert len(images) == 1 + len(d["rounds"])  # the CI against spend, and each round's design
    assert all(done and width > 100 for _, done, width in images), images


@pytest.mark.slurm
@pytest.mark.slow
@pytest.mark.timeout(1500)  # 12 Slurm jobs one after another: 42 s each on 2026-11-26's machine
def test_two_rounds_through_real_slurm(tmp_path):
    from test_sweep import slurm_ready

    if (why := slurm_ready()) is not None:
        pytest.skip(why)
    spec = small_spec(tmp_path, **{"executor.kind": 'kind = "slurm"',
                                   "executor.concurrency": "", "executor.threads_per_run": ""})
    out = tmp_path / "c"
    r = subprocess.run(campaign_cmd("run", spec, "--out", out), capture_output=True, text=True,
                       timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    facts = ledger_facts(out)
    assert [x[1] for x in facts["rounds"]] == ["fitted", "fitted"]
    assert all(state == "ok" for x in facts["rounds"] for _, state in x[2])
    assert (out / "round-0" / "runs" / "_slurm").is_dir()  # the sweep engine's Slurm folder


def test_a_table_pool_and_a_gpu_hour_budget_are_priced_before_anything_trains(cli, tmp_path):
    """[pool] table = FILE is read and costed (FLOPs), and [budget] gpu_hours prices each
    candidate on the named GPU: a budget below the cheapest is refused in the unit given."""
    import polars as pl

    pl.DataFrame({"params": [3e4, 6e4], "n_layer": [2, 4], "d_model": [32, 32],
                  "tokens": [3e5, 3e5]}).write_csv(tmp_path / "pool.csv")
    spec = write_spec(tmp_path, **{"pool[]": "", "budget.pool_fraction": "flops = 1e9"})
    spec.write_text(spec.read_text() + '\n[pool]\ntable = "pool.csv"\n')
    line = one_line(cli("campaign", "run", spec, "--out", tmp_path / "c"))
    assert "below the cheapest run in the pool (5.4e+10)" in line  # 6 x 3e4 x 3e5 FLOPs
    gpu = write_spec(tmp_path, "g.toml", **{"budget.pool_fraction":
                                            'gpu_hours = 1e-9\ngpu = "h100"'})
    assert "GPU-hours" in one_line(cli("campaign", "run", gpu, "--out", tmp_path / "d"))
    nogpu = write_spec(tmp_path, "n.toml", **{"budget.pool_fraction": "gpu_hours = 5"})
    assert 'needs gpu = "h100"' in one_line(cli("campaign", "run", nogpu, "--out",
                                                tmp_path / "e"))


def test_the_pool_holds_the_shapes_the_sweep_engine_trains_with_the_recipes_defaults(tmp_path):
    """A spec that leaves the context and the width multiple to their defaults: every grid
    candidate is the shape the sweep engine builds for that size and depth from the same
    recipe (it once priced them at ctx 128 and multiple 8, where the engine trains at 256 and
    64)."""
    from archfit.campaign import loop as campaign
    from archfit.sweep import load_spec

    spec = write_spec(tmp_path, **{"model.multiple": "", "train.ctx": "",
                                   "pool.sizes": "sizes = [2e6, 4e6, 8e6]"})
    pool, base, tps = campaign.pool_of(campaign.load(str(spec)))
    text = spec.read_text()
    recipe = text[text.index("[model]"):]
    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "s"\nseeds = [0]\nlrs = [4e-3]\n\n[grid]\n'
                     "params = [2e6, 4e6, 8e6]\ndepths = [1, 2, 3, 4, 6, 8]\n"
                     "ff_ratios = [4]\ntolerance = 0.12\n\n[budget]\ntokens = 3e5\n\n"
                     + recipe.replace("[executor]", "[executor]\nthroughput = 1e10"))
    runs = {(r.shape.n_layer, r.shape.d_model, r.shape.d_ff, r.shape.n_ctx)
            for r in load_spec(str(sweep)).runs}
    got = {(int(a), int(b), int(c), base["n_ctx"])
           for a, b, c in pool.select("n_layer", "d_model", "d_ff").iter_rows()}
    assert base["n_ctx"] == 256 and len(got) >= 4
    assert got == runs
    assert tps == 16 * 256  # batch_size x ctx, as the engine steps


def test_a_fitted_round_says_why_its_verdict_is_not_better():
    """The progress line of a fitted round carries the verdict's reasons (or the fit's error),
    so a campaign that stops with a narrow interval and an uninformative verdict says why."""
    from archfit.campaign import describe

    ci = {"low": 2.0, "high": 5.0, "level": 0.95, "kind": "fitted", "method": "percentiles"}
    e = {"event": "fitted", "round": 1, "verdict": "uninformative", "target_ci": ci,
         "reasons": ["q sits on a bound in 40% of the bootstrap resamples", "few sizes"]}
    assert describe(e) == ("round 1: fitted: verdict uninformative, target [2, 5] (95% CI, "
                           "fitted), 2.5x (q sits on a bound in 40% of the bootstrap resamples; "
                           "few sizes)")
    assert describe({**e, "reasons": [], "verdict": "informative"}) == (
        "round 1: fitted: verdict informative, target [2, 5] (95% CI, fitted), 2.5x")
    assert describe({**e, "reasons": None, "target_ci": None, "error": "too few runs"}) == (
        "round 1: fitted: verdict uninformative, target no interval (too few runs)")


def test_a_ci_ratio_stop_needs_a_verdict_that_accepts_the_interval(tmp_path):
    """A target CI within [stop] ci_ratio stops the campaign under a weak or informative
    verdict; under an uninformative one the campaign goes on, and the stop it reaches later
    says why the narrow interval did not stop it."""
    import archfit.campaign as cp
    from archfit.campaign.loop import stop_reason

    spec = cp.load(write_spec(tmp_path, "a.toml", **{"stop.verdict": "",
                                                     "stop.ci_ratio": "ci_ratio = 3.0"}))

    def ledger(verdict: str, rounds: int = 1) -> cp.Ledger:
        fitted = [cp.Round(round=k, state=cp.RoundState.FITTED, dir=f"round-{k}", chosen=[],
                           spend=1.0, verdict=verdict, target_ci=[1.0, 2.58])
                  for k in range(rounds)]
        return cp.Ledger(name="t", spec=spec.raw, budget=100.0, unit="FLOPs", spent=1.0,
                         rounds=fitted)

    assert "within [stop] ci_ratio 3.0" in stop_reason(spec, ledger("weak"))
    assert stop_reason(spec, ledger("uninformative")) is None
    last = stop_reason(spec, ledger("uninformative", rounds=spec.stop.rounds))
    assert last.startswith(f"{spec.stop.rounds} rounds run")
    assert "under an uninformative verdict it does not stop the campaign" in last
