"""Cold `archfit recommend --params 1e12` against `python -c pass` (target <= 0.15 s on 2 cores)."""

import shutil
import subprocess
import sys
import time


def best_of(cmd, n=7):
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return min(times)


exe = shutil.which("archfit")
cmd = [exe] if exe else [sys.executable, "-m", "archfit"]
base = best_of([sys.executable, "-c", "pass"])
rec = best_of(cmd + ["recommend", "--params", "1e12", "--json"])
print(f"python -c pass: {base:.3f} s; archfit recommend --params 1e12: {rec:.3f} s "
      f"({rec / base:.1f}x python startup; target <= 0.15 s)")
