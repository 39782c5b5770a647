"""The design benchmarks run end to end at their smallest size. A rule or helper the
benchmarks call can move in the library without a fast test noticing (a switch rule once
called a function that had moved, and nothing failed until a full 20-minute run); here each
runs one small replay of every kind it has and prints its verdict lines."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _bench(repo, name: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(repo / "benchmarks" / name), *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    return r.stdout


@pytest.mark.slow
def test_the_public_sweep_bench_runs_every_rule_once(repo):
    out = _bench(repo, "bench_design_real.py", "--fracs", "0.1", "--pools", "marin-dclm",
                 "--rules", "near-target,variance,spread,hedge,switch-0.05", "--bootstrap", "10",
                 "--jobs", "1")
    # one pool: nothing to choose a rule on, so each rule's row and random's median are shown
    for rule in ("near-target", "variance", "spread", "hedge", "switch-0.05"):
        assert rule in out, out
    assert "random" in out, out


@pytest.mark.slow
def test_the_planted_bench_runs_and_judges_the_bar_pool_by_pool(repo):
    out = _bench(repo, "bench_design.py", "--repeats", "1", "--fracs", "0.1", "--truths",
                 "repeated", "--strategies", "near-target,variance,spread,random",
                 "--random-draws", "2", "--bootstrap", "10", "--jobs", "1")
    assert "repeated, the public-sweep bar, pool by pool: near-target" in out, out
    assert "random's median of 2 draws on the same pool" in out, out


@pytest.mark.slow
def test_the_verdict_calibration_bench_runs_on_every_shipped_sweep(repo):
    out = _bench(repo, "bench_verdict_calibration.py", "--quick")
    for sweep in ("chinchilla", "marin-dclm", "marin-comma", "marin-nemotron", "gemstones-cool"):
        assert f"left out {sweep}" in out, out
    assert "15 backtests" in out, out


@pytest.mark.slow
def test_the_isoflop_bench_checks_each_mix_on_marins_own_optimum(repo):
    out = _bench(repo, "bench_isoflop_marin.py", "--bootstrap", "20")
    for mix in ("dclm", "comma", "nemotron"):
        assert f"{mix}: " in out, out
    assert out.count("approach 2 (isoflop)") == 3 and out.count("Marin's N ") == 4, out
