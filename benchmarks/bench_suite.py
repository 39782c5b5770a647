"""The README's fast test suite, timed (the mission's target: <= 2 min idle on this project's
2-core machine; the README runs it in two pytest-xdist workers, a file per worker at a time),
with the files that cost most. The peers in the same run are pytest collecting the same tests
without running them (start-up and imports, which the target also pays) and the same suite in
one process.

    python benchmarks/bench_suite.py
    python benchmarks/bench_suite.py --slow     # the slow and Slurm tests instead: 40+ min

With ``--slow``: the slow and Slurm tests as ``.ci/run`` runs them (two files at a time, then
the ``timing`` tests one at a time), and a table of each file's summed test time and its
slowest test.
"""

import collections
import os
import re
import subprocess
import sys
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MARKS = "not slow and not slurm and not frameworks"
BASE = [sys.executable, "-m", "pytest", "-q", "-m", MARKS, "-p", "no:cacheprovider"]
XDIST = ["-n", "2", "--dist", "loadfile"]  # as the README runs it


def timed(extra: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(BASE + extra, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"the fast suite failed (exit {r.returncode}):\n{r.stdout[-3000:]}")
    return time.perf_counter() - t0, r.stdout


def slow() -> None:
    """The slow lines of .ci/run, timed, with a per-file table."""
    global BASE
    per_file: collections.Counter = collections.Counter()
    slowest: dict[str, tuple[float, str]] = {}
    walls = []
    for marks, extra in (("(slow or slurm) and not timing", XDIST), ("(slow or slurm) and timing",
                                                                    [])):
        BASE = [sys.executable, "-m", "pytest", "-q", "-m", marks, "-p", "no:cacheprovider"]
        wall, out = timed(extra + ["--durations=0"])
        walls.append(wall)
        for m in re.finditer(r"^([\d.]+)s (?:call|setup|teardown)\s+(tests/[^:]+)::(\S+)", out,
                             re.M):
            t, f, name = float(m.group(1)), m.group(2), m.group(3)
            per_file[f] += t
            if t > slowest.get(f, (0.0, ""))[0]:
                slowest[f] = (t, name)
    print(f"slow suite: {walls[0]:.0f} s two files at a time, then the timing tests "
          f"{walls[1]:.0f} s one at a time ({sum(walls) / 60:.1f} min)")
    print(f"{'file':<32}{'test time':>11}  slowest test")
    for f, t in per_file.most_common():
        print(f"{f.split('/')[-1]:<32}{t:>9.0f} s  {slowest[f][1][:50]} ({slowest[f][0]:.0f} s)")


if "--slow" in sys.argv:
    slow()
    sys.exit(0)

collect, _ = timed(["--collect-only"])
wall, _ = timed(XDIST)
serial, out = timed(["--durations=0"])
per_file: collections.Counter = collections.Counter()
for m in re.finditer(r"^([\d.]+)s (?:call|setup|teardown)\s+(tests/[^:]+)::", out, re.M):
    per_file[m.group(2)] += float(m.group(1))
summary = [ln for ln in out.splitlines() if " passed" in ln][-1:]
print(f"fast suite ({MARKS}): {wall:.0f} s wall on {os.cpu_count()} cores in 2 workers "
      f"(target <= 120 s idle); {' '.join(summary)}")
print(f"peers: one process {serial:.0f} s ({wall / serial:.2f}x of it); collecting the same "
      f"tests {collect:.1f} s")
print("costliest files: " + ", ".join(f"{f.split('/')[-1]} {s:.0f} s"
                                       for f, s in per_file.most_common(6)))
