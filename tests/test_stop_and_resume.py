"""A SIGTERM to 'sweep run' or 'campaign run' stops its workers (none is left training) and the
sweep or the ledger resumes where it stopped."""

from __future__ import annotations

from pathlib import Path

import pytest


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
