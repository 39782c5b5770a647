"""Never lose a user's data: self-healing run directories, outputs that refuse to destroy
inputs, a full disk named as such."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from archfit.sweep import store
from archfit import sweep as sw

SMOKE = str(Path(__file__).resolve().parents[1] / "sweeps" / "smoke.toml")


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The smoke sweep, trained once for the module (copies are handed to each test)."""
    out = tmp_path_factory.mktemp("smoke") / "runs"
    r = subprocess.run([sys.executable, "-m", "archfit", "sweep", "run", SMOKE, "--out", out],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.fixture
def runs(finished, tmp_path):
    out = tmp_path / "runs"
    shutil.copytree(finished, out)
    return out


@pytest.mark.slow  # seconds of training or a kernel: the fast suite stays under 2 minutes
def test_corrupt_and_foreign_results_are_reported_set_aside_and_redone(runs, cli):
    spec = sw.load_spec(SMOKE)
    a, b, c = (runs / r.run_id for r in spec.runs[:3])
    (a / "result.json").write_text('{"status": "ok", "final_val')  # truncated
    (b / "result.json").write_text("")  # empty
    shutil.copy(c / "result.json", spec_dir := runs / spec.runs[3].run_id / "result.json")
    shutil.copy(c / "result.json", spec_dir)  # a copy of another run's result
    shutil.copy(runs / spec.runs[4].run_id / "result.json", c / "result.json")
    r = cli("sweep", "status", SMOKE, "--out", runs, "--json")
    assert r.exit_code == 0, r.output
    st = json.loads(r.output)
    assert {x["run_id"] for x in st["corrupt"]} == {r.run_id for r in spec.runs[:4]}
    assert st["ok"] == 2 and st["pending"] == 4
    # collect never turns a foreign result into a wrong row
    pq = runs.parent / "t.parquet"
    r = cli("sweep", "collect", SMOKE, "--out", runs, "-o", pq)
    assert r.exit_code == 0 and pl.read_parquet(pq).height == 2
    r = subprocess.run([sys.executable, "-m", "archfit", "sweep", "run", SMOKE, "--out", runs],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("will be redone") == 4
    st = sw.counts(spec, str(runs))
    assert st["ok"] == 6 and not st["corrupt"]
    assert len(list(a.glob("result.json.corrupt-*"))) == 1  # kept for inspection


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.slow
def test_outputs_never_destroy_inputs(runs, tmp_path, cli):
    pq = tmp_path / "t.parquet"
    assert cli("sweep", "collect", SMOKE, "--out", runs, "-o", pq).exit_code == 0
    rows = pl.read_parquet(pq).height
    csv = tmp_path / "x.csv"
    pl.read_parquet(pq).write_csv(csv)
    before = {p: sha(p) for p in (csv, pq, Path(SMOKE))}
    for args, needle in [
        (["fit", csv, "--law", "kaplan-n", "--out", csv], "is also an input"),
        (["sweep", "collect", SMOKE, "--out", runs, "-o", SMOKE], "is also an input"),
        (["sweep", "collect", SMOKE, "--out", tmp_path / "typo", "-o", pq], "refusing to replace"),
        (["fit", csv, "--law", "kaplan-n", "--out", pq], "not an archfit fit artifact"),
        (["plot", "levine2020", "-o", csv], "is a file"),
    ]:
        r = cli(*args)
        assert r.exit_code == 2, (args, r.output)
        assert needle in r.output and len(r.output.strip().splitlines()) == 1, r.output
    assert {p: sha(p) for p in before} == before
    assert pl.read_parquet(pq).height == rows
    # archfit's own artifact of the same kind is replaced; another kind only with --force
    f = tmp_path / "f.json"
    assert cli("fit", csv, "--law", "kaplan-n", "--bootstrap", "0", "--out", f).exit_code == 0
    assert cli("fit", csv, "--law", "kaplan-n", "--bootstrap", "0", "--out", f).exit_code == 0
    other = tmp_path / "notes.json"
    other.write_text('{"mine": 1}')
    assert cli("fit", csv, "--law", "kaplan-n", "--bootstrap", "0", "--out", other).exit_code == 2
    assert cli("fit", csv, "--law", "kaplan-n", "--bootstrap", "0", "--out", other,
               "--force").exit_code == 0


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"),
                    reason="mounting a small tmpfs needs root and mount(8)")
def test_a_full_disk_is_named_and_leaves_no_half_file(tmp_path, cli, levine_synthetic):
    disk = tmp_path / "small"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
                      capture_output=True).returncode != 0:
        pytest.skip("this sandbox does not allow mounting a tmpfs")
    try:
        (disk / "filler").write_bytes(b"x" * 60_000)
        data = tmp_path / "d.parquet"
        levine_synthetic().write_parquet(data)
        r = cli("fit", data, "--law", "levine", "--bootstrap", "300", "--out", disk / "f.json")
        assert r.exit_code == 2, r.output
        assert "no space left on the disk" in r.output and str(disk) in r.output
        assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1
        assert sorted(os.listdir(disk)) == ["filler"]  # no half-written file, no temp file
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_resuming_a_run_dir_with_another_config_is_refused(tmp_path, cli):
    rd = tmp_path / "rd"
    base = ["train", "--layers", "2", "--width", "64", "--heads", "2", "--ctx", "32",
            "--batch-size", "2", "--run-dir", rd]
    assert cli(*base, "--steps", "2").exit_code == 0
    r = cli(*base, "--steps", "4", "--lr", "1e-3")
    assert r.exit_code == 2 and "holds a checkpoint of another run" in r.output
    assert "steps 2 -> 4" in r.output and "lr 0.003 -> 0.001" in r.output
    r = cli(*base[:-2], "--width", "128", "--run-dir", rd, "--steps", "2", "--restart", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["params_non_embedding"] > 0


def test_store_refuses_an_empty_table_over_a_full_one(runs, tmp_path):
    spec = sw.load_spec(SMOKE)
    pq = str(tmp_path / "t.parquet")
    store.collect(spec, str(runs), pq)
    with pytest.raises(Exception, match="refusing to replace the 6-row table"):
        store.collect(spec, str(tmp_path / "empty"), pq)
    # the guard holds when the old table cannot be read: what it held is unknown
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 half a table")
    with pytest.raises(Exception, match="17 bytes that cannot be read as a table"):
        store.collect(spec, str(tmp_path / "empty"), str(broken))
    assert broken.read_bytes() == b"PAR1 half a table"


def test_an_unexpected_error_is_one_line_with_a_log(tmp_path, monkeypatch):
    """A bug (not a bad input) prints one line pointing at a log with the traceback; --debug
    (or ARCHFIT_DEBUG=1) shows the traceback instead."""
    from click.testing import CliRunner

    import archfit.cli.recommend_cmd as command
    from archfit.cli import main

    def broken(*a, **k):
        raise RuntimeError("a bug")

    monkeypatch.setattr(command, "recommend_shape", broken)  # the library call it makes
    monkeypatch.setenv("ARCHFIT_CACHE", str(tmp_path))
    r = CliRunner().invoke(main, ["recommend", "--params", "1e9"])
    assert r.exit_code == 1 and "Traceback" not in r.output
    (line,) = r.stderr.strip().splitlines()
    assert "unexpected RuntimeError: a bug" in line and "--debug" in line
    log = Path(line.split("the traceback is in ")[1].split(" ")[0])
    assert log.parent == tmp_path / "logs" and "RuntimeError: a bug" in log.read_text()
    r = CliRunner().invoke(main, ["--debug", "recommend", "--params", "1e9"])
    assert isinstance(r.exception, RuntimeError)
