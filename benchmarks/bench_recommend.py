"""Cold `archfit recommend --params 1e12` against `python -c pass` in the same run (issue 34's
target: <= 3x; no numpy, polars, torch or matplotlib on its path). Both run with bytecode
caching on, as an installed package has it (pip compiles at install); one warm-up run writes the
cache when PYTHONDONTWRITEBYTECODE had kept it from being written."""

import os
import shutil
import subprocess
import sys
import time

ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def best_of(cmd, n=9):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)  # the bytecode cache
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)
        times.append(time.perf_counter() - t0)
    return min(times)


exe = shutil.which("archfit")
cmd = [exe] if exe else [sys.executable, "-m", "archfit"]
base = best_of([sys.executable, "-c", "pass"])
rec = best_of(cmd + ["recommend", "--params", "1e12", "--json"])
print(f"python -c pass: {base:.3f} s; archfit recommend --params 1e12: {rec:.3f} s "
      f"({rec / base:.1f}x python startup; target <= 3x)")
