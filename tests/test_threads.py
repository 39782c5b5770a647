"""Inside every fit no BLAS runs above one thread: the point fit, the bootstrap's forked workers
and the held-out refit. Checked in a fresh interpreter (so that scipy's own OpenBLAS is not
loaded before the fit starts, as in a user's first `archfit fit`) with OPENBLAS_NUM_THREADS=4,
so that a library the limit missed shows 4 threads on any machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SPY = r"""
import json, os, sys
from threadpoolctl import threadpool_info
import archfit
from archfit.laws.compute.chinchilla import Chinchilla

assert "scipy.linalg" not in sys.modules, "the check needs scipy unloaded before the fit"
out = sys.argv[2]
real = Chinchilla.fit_point

def spy(self, data, *a, **kw):
    est = real(self, data, *a, **kw)
    # every BLAS (and OpenMP) pool loaded by now, the fit's own imports included, by file
    seen = {i["filepath"].rsplit("/", 1)[-1]: i["num_threads"] for i in threadpool_info()}
    with open(out, "a") as fh:
        fh.write(json.dumps({"pid": os.getpid(), "threads": seen}) + "\n")
    return est

Chinchilla.fit_point = spy
archfit.fit(paths=[sys.argv[1]], law="chinchilla", bootstrap=64, heldout=True)
"""


def test_no_blas_runs_above_one_thread_inside_a_fit(repo, tmp_path):
    out = tmp_path / "threads.jsonl"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "4", "OMP_NUM_THREADS": "4"}
    env.pop("ARCHFIT_MAX_CONCURRENCY", None)  # the suite's cap: here the workers must fork
    r = subprocess.run([sys.executable, "-c", SPY, str(repo / "datasets/chinchilla_epoch2024.csv"),
                        str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(ln) for ln in out.read_text().splitlines()]
    # the point fit, the held-out refit and 2 x 64 resamples, some in forked workers
    assert len(rows) >= 1 + 1 + 2 * 64
    assert all(row["threads"] for row in rows)  # threadpoolctl saw the BLAS it checks
    if (os.cpu_count() or 1) > 1:
        assert len({row["pid"] for row in rows}) > 1, "no resample ran in a forked worker"
    above = {(row["pid"], lib, n) for row in rows for lib, n in row["threads"].items() if n > 1}
    assert not above, f"BLAS above one thread inside a fit: {sorted(above)[:5]}"


def test_the_bootstrap_spreads_over_the_cores_the_cap_leaves(monkeypatch):
    """$ARCHFIT_MAX_CONCURRENCY (which the test suite's workers set: they already fill the
    cores) caps the bootstrap's processes as it caps a local sweep's runs."""
    from archfit.laws.inference.fitting import _cores

    monkeypatch.delenv("ARCHFIT_MAX_CONCURRENCY", raising=False)
    assert _cores() == (os.cpu_count() or 1)
    monkeypatch.setenv("ARCHFIT_MAX_CONCURRENCY", "1")
    assert _cores() == 1
    monkeypatch.setenv("ARCHFIT_MAX_CONCURRENCY", "64")
    assert _cores() == (os.cpu_count() or 1)
    monkeypatch.setenv("ARCHFIT_MAX_CONCURRENCY", "lots")  # not a count: the cores
    assert _cores() == (os.cpu_count() or 1)
