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
    r = subprocess.run([sys.executable, "-c", SPY, str(repo / "datasets/chinchilla_epoch2024.csv"),
                        str(out)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(ln) for ln in out.read_text().splitlines()]
    # the point fit, the held-out refit and 2 x 64 resamples, some in forked workers
    assert len(rows) >= 1 + 1 + 2 * 64
    assert all(row["threads"] for row in rows)  # threadpoolctl saw the BLAS it checks
    above = {(row["pid"], lib, n) for row in rows for lib, n in row["threads"].items() if n > 1}
    assert not above, f"BLAS above one thread inside a fit: {sorted(above)[:5]}"
