"""Gemstones (McLeish et al. 2025; MIT; vendored in datasets/gemstones): the files are the
published ones, a run's checkpoints are one bootstrap unit, and both shape laws fitted at or
below 5e8 cover at least 80% of the larger runs' held-out checkpoints."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
GEM = ROOT / "datasets" / "gemstones"


def test_the_vendored_files_are_the_published_ones():
    sums = dict(reversed(line.split()) for line in (GEM / "SHA256SUMS").read_text().splitlines())
    assert len(sums) == 4
    for name, digest in sums.items():
        assert hashlib.sha256((GEM / name).read_bytes()).hexdigest() == digest, name
    assert "MIT License" in (GEM / "LICENSE").read_text()


def test_a_runs_checkpoints_are_one_bootstrap_unit():
    """22 runs of 35 checkpoints: the fit resamples 22 units, not 770 rows, and its scatter
    counts its degrees of freedom in runs."""
    import archfit
    from public_sweeps import load

    df = load("gemstones-hot")
    assert df.height == 770 and df["run_id"].n_unique() == 22
    f = archfit.fit(df, law="depth-joint", bootstrap=10, seed=0)
    assert f.bootstrap["n_units"] == 22 and "run_id" in f.bootstrap["unit"]
    assert f.diagnostics["scatter"]["n_units"] == 22


@pytest.mark.slow
@pytest.mark.parametrize("sweep", ["gemstones-hot", "gemstones-cool"])
@pytest.mark.parametrize("law", ["depth-joint", "depth-width"])
def test_both_shape_laws_cover_four_fifths_of_the_larger_runs(sweep, law):
    """The backtest bench_shapes.py prints: fitted on the runs at or below 5e8 (60 resamples
    by run), the 95% intervals cover at least 80% of every larger run's checkpoints."""
    from archfit.laws.inference.backtest import backtest
    from public_sweeps import load

    b = backtest(load(sweep), law, cut=5e8, bootstrap=60, seed=0)
    assert b["n_test"] == (210 if sweep == "gemstones-hot" else 59)
    assert b["coverage"] >= 0.80, (sweep, law, b["coverage"], b["mean_halfwidth_rel"])
